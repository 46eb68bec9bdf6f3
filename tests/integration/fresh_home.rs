//! A fresh home: the README's systemd and cron steps work as printed, the units carry no
//! directive without effect, the agent's tools get a PATH, the resume hint works as printed.

use std::process::Command;

use serde_json::Value;

use crate::support::{done_script, TestEnv};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{path}")).unwrap()
}

/// An empty home with owl where `cargo install` puts it.
fn empty_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let bin = home.path().join(".cargo/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_owl"), bin.join("owl")).unwrap();
    home
}

/// Runs a line the way cron does: `sh -c`, a minimal environment.
fn as_cron(home: &std::path::Path, line: &str) -> std::process::Output {
    Command::new("/bin/sh")
        .args(["-c", line])
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/bin:/bin")
        .env("SHELL", "/bin/sh")
        .current_dir(home)
        .output()
        .unwrap()
}

#[test]
fn the_crontab_line_works_as_printed_on_an_empty_home() {
    let crontab = read("contrib/crontab");
    let line = crontab
        .lines()
        .find(|l| !l.starts_with('#') && !l.trim().is_empty())
        .unwrap();
    assert!(
        read("README.md").contains(line),
        "the README shows another line"
    );
    // The command is what follows the five schedule fields.
    let command = line.splitn(6, ' ').nth(5).unwrap();
    let home = empty_home();
    let out = as_cron(home.path(), command);
    assert!(out.status.success(), "{out:?}");
    let log = std::fs::read_to_string(home.path().join(".local/state/owl/cron.log")).unwrap();
    assert!(log.starts_with("idle: the queue is empty"), "{log}");
}

/// The README's shell block after `heading`, up to its first `systemctl` line: the steps
/// that need no running systemd (making the folder, copying the units).
fn readme_steps_before_systemctl(heading: &str) -> Vec<String> {
    let readme = read("README.md");
    let block = readme
        .split(heading)
        .nth(1)
        .and_then(|rest| rest.split("```sh\n").nth(1))
        .and_then(|rest| rest.split("```").next())
        .unwrap();
    block
        .lines()
        .take_while(|l| !l.starts_with("systemctl"))
        .map(String::from)
        .collect()
}

/// Runs `steps` as printed, from the checkout, on an empty home, which must succeed;
/// returns that home.
fn run_on_empty_home(steps: &[String]) -> tempfile::TempDir {
    let home = empty_home();
    let out = Command::new("/bin/sh")
        .args(["-ec", &steps.join("\n")])
        .env("HOME", home.path())
        .current_dir(ROOT)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    home
}

#[test]
fn the_readme_systemd_steps_copy_the_units_on_an_empty_home() {
    let steps = readme_steps_before_systemctl("**systemd** (user units):");
    assert!(steps.iter().any(|l| l.starts_with("cp ")), "{steps:?}");
    let home = run_on_empty_home(&steps);
    assert!(home.path().join(".config/systemd/user/owl.timer").is_file());
}

#[test]
fn the_units_carry_no_directive_without_effect() {
    let timer = read("contrib/owl.timer");
    // Persistent= acts only with OnCalendar=.
    assert!(
        !timer.contains("Persistent=") || timer.contains("OnCalendar="),
        "{timer}"
    );
    let service = read("contrib/owl.service");
    // A user manager cannot order against the system's network-online.target.
    assert!(!service.contains("network-online.target"), "{service}");
}

#[test]
fn defaults_env_gives_every_agent_a_path_and_an_account_env_wins() {
    let env = TestEnv::new();
    env.write_config(&format!(
        "defaults:\n  env:\n    PATH: /opt/tools/bin:/usr/bin:/bin\n    FAKE_ACCOUNT_MARKER: from-defaults\n\
         accounts:\n  work:\n    credentialStore: {}\n    env:\n      FAKE_ACCOUNT_MARKER: from-account\n",
        env.dir.path().join("creds").display()
    ));
    env.script(&done_script("success.jsonl", 0));
    let id = env.add("Hello");
    env.tick();
    let agent: Value = serde_json::from_str(&env.recorded("env.json")).unwrap();
    assert_eq!(agent["PATH"], "/opt/tools/bin:/usr/bin:/bin");
    assert_eq!(agent["FAKE_ACCOUNT_MARKER"], "from-account");
    // The resume hint names the credential store the session lives in.
    let show = env.owl().args(["show", &id]).output().unwrap();
    let show = String::from_utf8_lossy(&show.stdout).into_owned();
    let session = env.show(&id)["runs"][0]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        show.contains(&format!(
            "CLAUDE_CONFIG_DIR={} claude --resume {session}",
            env.dir.path().join("creds").display()
        )),
        "{show}"
    );
}

/// Issue 23: the README's completions and man-page block, run line by line as printed on an
/// empty home, writes every file it names (it makes their directories), and `man` reads
/// the page it wrote.
#[test]
fn the_readmes_completions_and_man_block_works_as_printed_on_an_empty_home() {
    let readme = read("README.md");
    let start = readme
        .find("```sh\nmkdir -p ~/.local/share/bash-completion")
        .expect("the README's completions block");
    let block = &readme[start + "```sh\n".len()..];
    let block = &block[..block.find("```").unwrap()];
    let home = empty_home();
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let out = Command::new("/bin/sh")
            .args(["-c", line])
            .env_clear()
            .env("HOME", home.path())
            .env(
                "PATH",
                format!("{}/.cargo/bin:/usr/bin:/bin", home.path().display()),
            )
            .env("OWL_CONFIG", "/nonexistent/owl/config.yaml")
            .current_dir(home.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{line}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for file in [
        ".local/share/bash-completion/completions/owl",
        ".zfunc/_owl",
        ".config/fish/completions/owl.fish",
        ".local/share/man/man1/owl.1",
    ] {
        let len = std::fs::metadata(home.path().join(file)).map_or(0, |m| m.len());
        assert!(len > 100, "{file}: {len} bytes");
    }
    let man = Command::new("man")
        .args(["-l", "-P", "cat"])
        .arg(home.path().join(".local/share/man/man1/owl.1"))
        .output()
        .expect("man (from the man-db package) reads the page");
    assert!(String::from_utf8_lossy(&man.stdout).contains("owl tick"));
}

/// The units as the README installs them pass `systemd-analyze verify` with nothing to say:
/// the single timer and the per-Account template pair, for an instance.
#[test]
fn the_units_and_the_per_account_templates_verify_clean() {
    let home = empty_home();
    let units = home.path().join(".config/systemd/user");
    std::fs::create_dir_all(&units).unwrap();
    for unit in ["owl.service", "owl.timer", "owl@.service", "owl@.timer"] {
        std::fs::copy(format!("{ROOT}/contrib/{unit}"), units.join(unit)).unwrap();
    }
    // ExecStart= names where `cargo install` puts owl (`empty_home` links it there): it
    // must be there to verify.
    assert!(home.path().join(".cargo/bin/owl").is_file());
    let runtime = home.path().join("run");
    std::fs::create_dir_all(&runtime).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--user", "owl.timer", "owl.service"])
        .args(["owl@work.timer", "owl@work.service"])
        .env("HOME", home.path())
        .env("XDG_RUNTIME_DIR", &runtime)
        .output()
        .expect("systemd-analyze (Debian's systemd package; .ci/run installs it)");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "",
        "verify has something to say"
    );
    let service = read("contrib/owl@.service");
    assert!(
        service.contains("ExecStart=%h/.cargo/bin/owl tick --account %i"),
        "{service}"
    );
    // The README's template steps, run as printed on an empty home, copy both.
    let steps = readme_steps_before_systemctl("**Several Accounts under systemd.**");
    let fresh = run_on_empty_home(&steps);
    for unit in ["owl@.service", "owl@.timer"] {
        assert!(fresh
            .path()
            .join(".config/systemd/user")
            .join(unit)
            .is_file());
    }
}
