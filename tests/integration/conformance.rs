//! `owl doctor --conformance` against the real Claude Code CLI, and against the real CLI with
//! a fault put between it and owl (the fake agent as a relay); and the verdict deciding
//! whether a version outside the tested range runs. They need the real CLI, like e2e.rs.

use serde_json::Value;

use crate::e2e::real_claude;
use crate::support::TestEnv;

const FAKE: &str = env!("CARGO_BIN_EXE_owl-fake-agent");

/// A test env whose Account runs `command` (the real CLI, or the fake agent relaying to it).
fn env_running(command: &str, extra: &str) -> TestEnv {
    let env = TestEnv::new();
    let config = format!(
        "stateDir: {}\ndrivers:\n  claude-code:\n    command: {command}\naccounts:\n  work:\n    credentialStore: {}\n{extra}",
        env.state.display(),
        env.dir.path().join("creds").display(),
    );
    std::fs::write(&env.config, config).unwrap();
    env
}

/// `doctor --conformance --json`: its exit code and the checks of the one Account.
fn conformance(env: &TestEnv) -> (i32, Vec<Value>) {
    let out = env
        .owl()
        .args(["doctor", "--conformance", "--json"])
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let checks = json[0]["checks"].as_array().unwrap().clone();
    (out.status.code().unwrap(), checks)
}

fn failed(checks: &[Value]) -> Vec<String> {
    checks
        .iter()
        .filter(|c| c["ok"] == false)
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
#[ignore = "needs the real Claude Code CLI"]
fn e2e_conformance_passes_on_the_real_cli_within_30_seconds() {
    let env = env_running(&real_claude().display().to_string(), "");
    let started = std::time::Instant::now();
    let (code, checks) = conformance(&env);
    assert!(failed(&checks).is_empty(), "{checks:#?}");
    assert_eq!(code, 0);
    assert!(checks.len() >= 13, "{checks:#?}");
    crate::support::assert_seen_in_words(&checks);
    // A bound the issue sets for the whole check, not a synchronization.
    assert!(started.elapsed().as_secs() < 30, "{:?}", started.elapsed());
}

#[test]
#[ignore = "needs the real Claude Code CLI"]
fn e2e_a_cli_that_does_not_answer_get_usage_fails_the_checks_naming_it() {
    let mut env = env_running(FAKE, "");
    env.extra_env.extend([
        (
            "FAKE_AGENT_RELAY".into(),
            real_claude().display().to_string(),
        ),
        ("FAKE_AGENT_RELAY_DROP".into(), "\"get_usage\"".into()),
    ]);
    let (code, checks) = conformance(&env);
    assert_eq!(code, 1);
    let failed = failed(&checks);
    assert!(
        failed.contains(&"get_usage answered before the first message".to_string())
            && failed.contains(
                &"get_usage answered mid-turn with the rate_limits owl parses".to_string()
            ),
        "{failed:?}"
    );
    // Only checks of get_usage (from 2.1.332 on, also the per-model week it reports): the
    // rest of the protocol holds.
    assert!(failed.iter().all(|f| f.contains("get_usage")), "{failed:?}");
    assert!(failed.len() <= 3, "{failed:?}");
}

#[test]
#[ignore = "needs the real Claude Code CLI"]
fn e2e_a_cli_that_answers_the_interrupt_late_fails_the_check_naming_it() {
    let mut env = env_running(FAKE, "");
    env.extra_env.extend([
        (
            "FAKE_AGENT_RELAY".into(),
            real_claude().display().to_string(),
        ),
        (
            "FAKE_AGENT_RELAY_DELAY".into(),
            "\"interrupt\":11000".into(),
        ),
    ]);
    let (code, checks) = conformance(&env);
    assert_eq!(code, 1);
    let failed = failed(&checks);
    assert!(
        failed.contains(&"an interrupt ends the turn with a result in time".to_string()),
        "{failed:?}"
    );
}

/// The real CLI behind a `--version` that says 2.2.0: outside the tested range.
fn env_with_2_2_0(extra: &str) -> TestEnv {
    let mut env = env_running(FAKE, extra);
    let store = env.dir.path().join("creds").display().to_string();
    env.extra_env.extend([
        (
            "FAKE_AGENT_RELAY".into(),
            real_claude().display().to_string(),
        ),
        ("FAKE_AGENT_VERSION".into(), "2.2.0 (Claude Code)".into()),
        // A plan login as far as the Account's `auth status` can tell: the Run is then started, and
        // ends without a model (the real CLI talks to nothing here).
        (
            "FAKE_AGENT_AUTH".into(),
            r#"{"loggedIn":true,"authMethod":"claude.ai","subscriptionType":"max"}"#.into(),
        ),
        // Only the Account's own store: the conformance check's stores get the real answer.
        ("FAKE_AGENT_AUTH_STORE".into(), store),
    ]);
    env
}

#[test]
#[ignore = "needs the real Claude Code CLI"]
fn e2e_a_version_outside_the_range_is_refused_until_verified_and_runs_after() {
    let env = env_with_2_2_0("agentVerification: off\n");
    let id = env.add("Hello");
    let out = env.owl().arg("tick").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let status = env.status();
    assert_eq!(
        status["accounts"][0]["agent_problem"],
        "Claude Code 2.2.0 is not verified: run `owl doctor --conformance`",
        "{status}"
    );
    assert!(env.show(&id)["runs"].as_array().unwrap().is_empty());

    let (code, checks) = conformance(&env);
    assert_eq!(code, 0, "{checks:#?}");
    // The verdict is this binary's: the next tick starts the Job on it. The fake agent
    // relays to the real CLI, which talks to nothing here: the Run ends without a model,
    // which is the Account's problem, not a refusal of the CLI.
    let tick = env.tick();
    assert_eq!(tick["action"], "ran", "{tick}");
    assert_eq!(env.show(&id)["runs"][0]["agent_version"], "2.2.0");
    assert!(env.status()["accounts"][0]["agent_problem"].is_null());
}

#[test]
#[ignore = "needs the real Claude Code CLI"]
fn e2e_auto_verification_checks_a_new_binary_once_and_then_runs_it() {
    let env = env_with_2_2_0("");
    let id = env.add("Hello");
    let tick = env.tick();
    assert_eq!(tick["action"], "ran", "{tick}");
    assert_eq!(env.show(&id)["runs"][0]["agent_version"], "2.2.0");
    // The verdict is kept for this binary: later ticks do not check it again.
    let db = rusqlite::Connection::open(env.state.join("owl.db")).unwrap();
    let (version, passed): (String, bool) = db
        .query_row("SELECT version, passed FROM agent_verdicts", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((version.as_str(), passed), ("2.2.0", true));
}

/// What `claude doctor` says of its updater, run on the real binary under a terminal
/// (`script` gives it one) with `env` set, in a throwaway home.
fn updater_state(env: &[(String, String)]) -> String {
    use std::io::Read;
    let home = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new("script")
        .args([
            "-qc",
            &format!("{} doctor", real_claude().display()),
            "/dev/null",
        ])
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("HOME", home.path())
        .env("CLAUDE_CONFIG_DIR", home.path().join("claude"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("script (util-linux) runs the CLI under a terminal");
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    // The screen, without escape sequences and spaces, until the updater's line is whole.
    let mut screen = String::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let line = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let Ok(bytes) = rx.recv_timeout(left) else {
            break None;
        };
        screen.push_str(&String::from_utf8_lossy(&bytes));
        let plain = strip_terminal(&screen);
        if let Some(at) = plain.find("Auto-updates:") {
            if let Some(end) = plain[at..].find("Auto-updatechannel") {
                // Without the tree drawing of the next line.
                let line = plain[at..at + end].trim_end_matches(['├', '└', '│', '─']);
                break Some(line.to_string());
            }
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    line.unwrap_or_else(|| panic!("claude doctor never told its updater: {screen}"))
}

/// Text without ANSI escape sequences and whitespace.
fn strip_terminal(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ params final-byte
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() || c == '~' {
                        break;
                    }
                }
            }
            continue;
        }
        if !c.is_whitespace() && !c.is_control() {
            out.push(c);
        }
    }
    out
}

#[test]
#[ignore = "needs the real Claude Code CLI"]
fn e2e_the_cli_runs_with_its_self_updater_off() {
    // The switch as a Run gets it: the fake agent, run by a tick, records it.
    let env = TestEnv::new();
    env.add("Hello");
    assert_eq!(env.tick()["action"], "ran");
    let recorded: serde_json::Value = serde_json::from_str(&env.recorded("env.json")).unwrap();
    let switch = recorded["DISABLE_AUTOUPDATER"]
        .as_str()
        .unwrap_or_else(|| panic!("a Run's environment lacks the switch: {recorded}"));
    let run_env = [("DISABLE_AUTOUPDATER".to_string(), switch.to_string())];
    // The switch is what the real binary honours: with owl's environment it says so, and
    // without it (the same binary, the same home) its updater is on.
    assert_eq!(
        updater_state(&run_env),
        "Auto-updates:disabled(setbyenv:DISABLE_AUTOUPDATER)"
    );
    assert_eq!(updater_state(&[]), "Auto-updates:enabled");
}
