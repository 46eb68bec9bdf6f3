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
    // Only those: the rest of the protocol holds.
    assert_eq!(failed.len(), 2, "{failed:?}");
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
    env.extra_env.extend([
        (
            "FAKE_AGENT_RELAY".into(),
            real_claude().display().to_string(),
        ),
        ("FAKE_AGENT_VERSION".into(), "2.2.0 (Claude Code)".into()),
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
