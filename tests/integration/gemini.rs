//! End to end against the real Gemini CLI (found through `OWL_E2E_GEMINI`), which talks to
//! the loopback mock of the Gemini API: `#[ignore]`d in a plain `cargo test`; `.ci/run`
//! installs the CLI and runs them.

use std::path::PathBuf;

use owl::mock::gemini::{MockGemini, Step};
use serde_json::json;

use crate::support::{git, TestEnv};

pub fn real_gemini() -> PathBuf {
    match std::env::var_os("OWL_E2E_GEMINI").map(PathBuf::from) {
        Some(path) if path.is_file() => path,
        other => panic!(
            "OWL_E2E_GEMINI ({other:?}) names no file: install the CLI with \
             `npm install --prefix target/gemini-cli-0.61.0 @google/gemini-cli@0.61.0` and set \
             OWL_E2E_GEMINI=$PWD/target/gemini-cli-0.61.0/node_modules/.bin/gemini"
        ),
    }
}

/// A throwaway `GEMINI_CLI_HOME`: what a user's store holds after choosing API-key login,
/// with one attempt per call.
pub fn write_gemini_home(home: &std::path::Path) {
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    std::fs::write(
        home.join(".gemini/settings.json"),
        json!({"security": {"auth": {"selectedType": "gemini-api-key"}},
               "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false, "maxAttempts": 1},
               "privacy": {"usageStatisticsEnabled": false}})
        .to_string(),
    )
    .unwrap();
}

/// A test env whose Account `flash` is the real Gemini CLI on a fake API key at the mock.
pub fn gemini_env(extra: &str) -> (TestEnv, MockGemini) {
    gemini_env_in(TestEnv::new(), extra)
}

/// Like [`gemini_env`], in `env` (a sandboxed one, say).
pub fn gemini_env_in(env: TestEnv, extra: &str) -> (TestEnv, MockGemini) {
    let mock = MockGemini::start().unwrap();
    let home = env.dir.path().join("gemini-home");
    write_gemini_home(&home);
    // Its error dumps go with the test's dir, not into the machine's temp dir.
    let tmp = env.dir.path().join("gemini-tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let config = format!(
        r#"stateDir: {state}
graceWindow: 2s
drivers:
  gemini:
    command: {gemini}
defaults:
  allowedTools: [Read, Write, Edit, "Bash(git add:*)", "Bash(git commit:*)", "Bash(tail:*)"]
accounts:
  flash:
    driver: gemini
    credentialStore: {home}
    allowBilledUsage: true
    env:
      GEMINI_API_KEY: AIza-FAKE-owl-e2e
      GOOGLE_GEMINI_BASE_URL: {base}
      GIT_AUTHOR_NAME: Gemini
      GIT_AUTHOR_EMAIL: gemini@example.com
      GIT_COMMITTER_NAME: Gemini
      GIT_COMMITTER_EMAIL: gemini@example.com
      TMPDIR: {tmp}
{extra}"#,
        state = env.state.display(),
        gemini = real_gemini().display(),
        home = home.display(),
        base = mock.base_url(),
        tmp = tmp.display(),
    );
    std::fs::write(&env.config, config).unwrap();
    (env, mock)
}

#[test]
#[ignore = "needs the real Gemini CLI"]
fn e2e_gemini_a_run_commits_through_its_shell_tool() {
    let (env, mock) = gemini_env("");
    let id = env.add("Add hello.txt, hand off, and commit.");
    let wt = env.state.join("worktrees").join(&id);
    mock.script(vec![
        Step {
            call: Some(json!({"name": "write_file", "args": {"file_path": wt.join("hello.txt"), "content": "hello\n"}})),
            ..Step::text("Writing.")
        },
        Step {
            call: Some(json!({"name": "write_file", "args": {"file_path": wt.join(".owl/handoff.md"), "content": "status: done\n\nAdded hello.txt.\n"}})),
            ..Step::text("Handing off.")
        },
        Step::shell("git add hello.txt .owl/handoff.md && git commit -m 'Add hello'"),
        Step::text("Done: hello.txt is committed."),
    ]);
    let tick = env.tick();
    assert_eq!(tick["outcome"], "succeeded", "{tick}");
    assert_eq!(tick["job_state"], "done", "{tick}");
    let branch = format!("owl/{id}");
    assert_eq!(
        git(&env.repo, &["log", "-1", "--format=%s", &branch]).trim(),
        "Add hello"
    );
    let run = &env.show(&id)["runs"][0];
    assert_eq!(run["agent_version"], "0.61.0");
    // A per-Run cap the Gemini CLI cannot take is not pretended: none is recorded (so none
    // is counted as spent), and the Job's budget is not charged a phantom cost.
    assert!(run["budget_usd"].is_null(), "{run}");
    assert_eq!(run["session_id"].as_str().unwrap().len(), 36, "{run}");
    // The allow-list reached the CLI as its policy: the commit was allowed.
    assert!(mock.calls() >= 4, "{}", mock.calls());
}

#[test]
#[ignore = "needs the real Gemini CLI"]
fn e2e_gemini_a_denied_command_is_shown_and_not_run() {
    let (env, mock) = gemini_env("");
    let id = env.add("Delete the readme.");
    mock.script(vec![Step::shell("rm -f README.md"), Step::text("Tried.")]);
    let tick = env.tick();
    assert_eq!(tick["action"], "ran", "{tick}");
    let run = &env.show(&id)["runs"][0];
    assert_eq!(
        run["permission_denials"][0]["tool_name"], "run_shell_command",
        "{run}"
    );
    let wt = env.state.join("worktrees").join(&id);
    assert!(wt.join("README.md").exists(), "the command was not run");
}

#[test]
#[ignore = "needs the real Gemini CLI"]
fn e2e_gemini_a_429_is_rate_limited_and_never_the_jobs_failure() {
    let (env, mock) = gemini_env("");
    let id = env.add_with(&["--max-runs", "1"], "Say hello.");
    mock.script(vec![Step::daily_quota()]);
    let tick = env.tick();
    assert_eq!(tick["outcome"], "rate_limited", "{tick}");
    assert_ne!(tick["job_state"], "failed", "{tick}");
    let show = env.show(&id);
    assert_eq!(show["runs"][0]["cause"], "rate_limited", "{show}");
    // The daily quota names no reset: the Account waits its `backoff` (1 h by default),
    // and so does the Job.
    let status = env.status();
    let reason = status["accounts"][0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("rejected by the provider until"),
        "{reason}"
    );
    assert_eq!(status["accounts"][0]["schedulable"], false);
    assert_eq!(show["state"], "waiting");
    assert_eq!(env.tick()["action"], "idle");
}

#[test]
#[ignore = "needs the real Gemini CLI"]
fn e2e_gemini_sigterm_mid_run_leaves_nothing_alive() {
    let (env, mock) = gemini_env("");
    let id = env.add("Wait a long time.");
    // Runs until it is killed; the CLI's tool shell sits in a session of its own.
    mock.script(vec![Step::shell("tail -s 600 -f README.md")]);
    let owl = env
        .owl_std()
        .args(["tick", "--json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    crate::e2e::wait_for_marked(&env, "tail -s 600");
    unsafe { libc::kill(owl.id() as i32, libc::SIGTERM) };
    let out = owl.wait_with_output().unwrap();
    let tick: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tick["outcome"], "interrupted", "{tick}");
    assert_eq!(tick["stop_reason"], "owl received SIGTERM");
    let left = crate::e2e::marked_processes(&env);
    assert!(left.is_empty(), "processes outlived the Run: {left:?}");
    assert_eq!(env.show(&id)["state"], "queued");
}

#[test]
#[ignore = "needs the real Gemini CLI"]
fn e2e_gemini_conformance_passes_on_the_real_cli() {
    crate::support::assert_conformance_passes("gemini", &real_gemini(), 6);
}

#[test]
#[ignore = "needs the real Gemini CLI"]
fn e2e_gemini_runs_in_the_sandbox_through_owls_proxy() {
    let (env, mock) = gemini_env_in(TestEnv::sandboxed(""), "");
    let config = std::fs::read_to_string(&env.config)
        .unwrap()
        .replace("defaults:\n", "defaults:\n  executor: sandbox\n");
    std::fs::write(&env.config, config).unwrap();
    let id = env.add("Say hello.");
    mock.script(vec![Step::text("Hello.")]);
    crate::sandbox::assert_ran_through_the_proxy(&env, &id);
}

#[test]
#[ignore = "needs the real Gemini CLI"]
fn e2e_gemini_a_retired_google_login_is_a_lost_login_not_a_failed_job() {
    // A Google login (no key): Code Assist answers that its tier is no longer served.
    let env = TestEnv::new();
    let mock = MockGemini::start().unwrap();
    let home = env.dir.path().join("gemini-home");
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    std::fs::write(
        home.join(".gemini/settings.json"),
        json!({"security": {"auth": {"selectedType": "oauth-personal"}},
               "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
               "privacy": {"usageStatisticsEnabled": false}})
        .to_string(),
    )
    .unwrap();
    let tmp = env.dir.path().join("gemini-tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(
        &env.config,
        format!(
            "stateDir: {state}\ndrivers:\n  gemini:\n    command: {gemini}\naccounts:\n  google:\n    \
             driver: gemini\n    credentialStore: {home}\n    env:\n      GOOGLE_GENAI_USE_GCA: 'true'\n      \
             GOOGLE_CLOUD_ACCESS_TOKEN: ya29.FAKE-owl-e2e\n      CODE_ASSIST_ENDPOINT: {base}\n      \
             TMPDIR: {tmp}\n",
            state = env.state.display(),
            gemini = real_gemini().display(),
            home = home.display(),
            base = mock.base_url(),
            tmp = tmp.display(),
        ),
    )
    .unwrap();
    let id = env.add_with(&["--max-runs", "1"], "Say hello.");
    let tick = env.tick();
    assert_eq!(tick["action"], "ran", "{tick}");
    assert_eq!(tick["outcome"], "failed", "{tick}");
    // Not the Job's failure: it waits for a login, its one Run not counted.
    assert_eq!(env.show(&id)["state"], "queued");
    let run = &env.show(&id)["runs"][0];
    assert_eq!(run["cause"], "not_logged_in", "{run}");
    let why = run["stop_reason"].as_str().unwrap();
    assert!(why.contains("IneligibleTierError"), "{why}");
    assert!(why.contains("Antigravity CLI"), "{why}");
    assert_eq!(mock.calls(), 0, "no model request was made");
    let status = env.status();
    let lost = status["accounts"][0]["not_logged_in"].as_str().unwrap();
    assert!(
        lost.contains("Gemini Code Assist Standard or Enterprise"),
        "{lost}"
    );
    assert_eq!(
        env.tick()["action"],
        "idle",
        "nothing started on a lost login"
    );
}
