//! Issue 48: owl watched the way the system's own jobs are: its log lines reach systemd's
//! journal with their level.

use std::os::unix::fs::MetadataExt;

use crate::support::TestEnv;

/// Runs `owl ARGS` with stderr a file, `JOURNAL_STREAM` naming `stream` (`None`: that
/// file, as systemd names the stream it gives a service); its stderr.
fn stderr_of(env: &TestEnv, args: &[&str], stream: Option<&str>) -> String {
    let path = env.dir.path().join("stderr");
    let file = std::fs::File::create(&path).unwrap();
    let meta = file.metadata().unwrap();
    let named = stream.map_or(format!("{}:{}", meta.dev(), meta.ino()), String::from);
    let status = env
        .owl_std()
        .args(args)
        .env("JOURNAL_STREAM", named)
        .env("OWL_LOG", "owl=debug")
        .stdout(std::process::Stdio::null())
        .stderr(file)
        .status()
        .unwrap();
    assert!(!status.success(), "owl {args:?} was to fail");
    std::fs::read_to_string(&path).unwrap()
}

#[test]
fn under_systemd_each_log_line_reaches_the_journal_with_its_level() {
    let env = TestEnv::new();
    env.add("Something to show");
    let journal = stderr_of(&env, &["show", "nosuchjob"], None);
    let lines: Vec<&str> = journal.lines().collect();
    // Debug lines as priority 7, owl's last line (the error) as 3; no time, no level word.
    assert!(lines.iter().any(|l| l.starts_with("<7>")), "{journal}");
    let last = lines.last().copied().unwrap_or_default();
    assert!(last.starts_with("<3>owl: "), "{journal}");
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with('<') && !l.contains(" DEBUG ")),
        "{journal}"
    );
    // A stderr the journal does not hold (redirected by a script that inherited the
    // variable) gets the person's lines.
    let elsewhere = stderr_of(&env, &["show", "nosuchjob"], Some("1:1"));
    assert!(
        !elsewhere.contains("<7>") && !elsewhere.contains("<3>"),
        "{elsewhere}"
    );
    assert!(elsewhere.contains("DEBUG"), "{elsewhere}");
    assert!(elsewhere
        .lines()
        .last()
        .unwrap_or_default()
        .starts_with("owl: "));
}
