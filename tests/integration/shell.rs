//! Completions and the man page: generated from the parser's own definitions, with no config,
//! and naming every command `owl --help` lists.

use assert_cmd::Command;

fn owl() -> Command {
    let mut cmd = Command::cargo_bin("owl").unwrap();
    // Neither needs a config: point at none that exists.
    cmd.env("OWL_CONFIG", "/nonexistent/owl/config.yaml");
    cmd
}

/// The commands `owl --help` lists (but `help`).
fn commands() -> Vec<String> {
    let out = owl().arg("--help").output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let listed: Vec<String> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .filter(|c| c != "help")
        .collect();
    assert!(listed.len() >= 14, "{help}");
    listed
}

#[test]
fn completions_for_every_shell_name_every_command() {
    let commands = commands();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = owl().args(["completions", shell]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{shell}");
        let script = String::from_utf8(out.stdout).unwrap();
        for command in &commands {
            assert!(script.contains(command.as_str()), "{shell} lacks {command}");
        }
    }
    owl().args(["completions", "tcsh"]).assert().code(2);
}

#[test]
fn the_man_page_has_a_section_for_every_command() {
    let out = owl().arg("man").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(
        page.starts_with(".ie") || page.contains(".TH owl 1"),
        "{page}"
    );
    for command in commands() {
        let section = format!(".SH \"OWL {}\"", command.to_uppercase());
        assert!(page.contains(&section), "no section {section}");
    }
}

#[test]
fn the_man_page_names_no_page_that_is_not_installed_and_shows_option_values() {
    let out = owl().arg("man").output().unwrap();
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(
        !page.contains("owl\\-tick(1)") && !page.contains("owl-tick(1)"),
        "{page}"
    );
    assert!(!page.contains("(1)"), "{page}");
    // Each option with its value, as it is typed.
    assert!(
        page.contains("\\fB\\-\\-config\\fR \\fI<PATH>\\fR"),
        "{page}"
    );
    assert!(
        page.contains("\\fB\\-\\-since\\fR \\fI<DURATION>\\fR"),
        "{page}"
    );
    // man itself reads it without a warning, where man is installed.
    if let Ok(man) = std::process::Command::new("man").arg("--version").output() {
        if man.status.success() {
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("owl.1");
            std::fs::write(&file, &page).unwrap();
            let shown = std::process::Command::new("man")
                .args(["-l", "-P", "cat"])
                .arg(&file)
                .env("MANWIDTH", "100")
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&shown.stdout);
            assert!(text.contains("--since <DURATION>"), "{text}");
        }
    }
}
