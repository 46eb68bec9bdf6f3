//! A tick from queued Job to recorded Run, on each recorded outcome of the real CLI.

use std::os::unix::fs::PermissionsExt;

use predicates::prelude::*;
use serde_json::Value;

use crate::support::{done_script, fixture, git, held_run_script, TestEnv};

#[test]
fn success_runs_the_agent_in_the_worktree_and_records_everything() {
    let mut env = TestEnv::new();
    // Inherited API keys must not reach the agent: they would replace the plan login.
    env.extra_env
        .push(("ANTHROPIC_API_KEY".into(), "sk-ant-api03-FAKE".into()));
    env.extra_env
        .push(("CLAUDE_CODE_OAUTH_TOKEN".into(), "sk-ant-oat01-FAKE".into()));
    env.script(&done_script("success.jsonl", 0));
    let id = env.add("Say hello");

    let tick = env.tick();
    assert_eq!(tick["action"], "ran");
    assert_eq!(tick["outcome"], "succeeded");
    assert_eq!(tick["job_state"], "done");
    let run_id = tick["run_id"].as_i64().unwrap();

    let show = env.show(&id);
    assert_eq!(show["state"], "done");
    assert_eq!(show["branch"], format!("owl/{id}"));
    let run = &show["runs"][0];
    assert_eq!(run["outcome"], "succeeded");
    assert_eq!(run["cost_usd"], 0.006375);
    assert_eq!(run["exit_code"], 0);
    assert_eq!(run["session_id"], session_of("success.jsonl").as_str());

    // The log is the agent's stdout, byte for byte: the recorded transcript, with the
    // answers to owl's usage requests in between.
    let log = std::fs::read(env.run_log(&id, run_id)).unwrap();
    assert_eq!(log, std::fs::read(env.record.join("stdout.bin")).unwrap());
    let replayed: Vec<&str> = std::str::from_utf8(&log)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with(r#"{"type":"control_response""#))
        .collect();
    assert_eq!(
        replayed,
        fixture("success.jsonl").lines().collect::<Vec<_>>()
    );
    let mode = std::fs::metadata(env.run_log(&id, run_id))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(
        std::fs::metadata(&env.state).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert_eq!(
        std::fs::metadata(env.state.join("owl.db"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );

    // The agent ran in the Job's worktree with the documented argv, the prompt on stdin.
    let worktree = env.state.join("worktrees").join(&id);
    assert_eq!(
        env.recorded("cwd.txt"),
        worktree.canonicalize().unwrap().display().to_string()
    );
    let argv: Vec<String> = serde_json::from_str(&env.recorded("argv.json")).unwrap();
    assert_eq!(
        &argv[..8],
        [
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--permission-mode",
            "dontAsk"
        ]
    );
    assert!(argv.windows(2).any(|w| w == ["--max-budget-usd", "5"]));
    assert!(argv.contains(&"--append-system-prompt".to_string()));
    assert!(
        !argv.iter().any(|a| a.contains("Say hello")),
        "the prompt goes on stdin, not argv"
    );
    let first: Value =
        serde_json::from_str(env.recorded("stdin.jsonl").lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "user");
    let prompt = first["message"]["content"].as_str().unwrap();
    assert!(
        prompt.starts_with("Say hello\n\n---\nHow to work (from owl"),
        "{prompt}"
    );
    assert!(prompt.contains(owl::STANDING_INSTRUCTIONS));
    assert!(
        !argv.contains(&"--resume".to_string()),
        "owl never resumes a conversation"
    );
    let agent_env: Value = serde_json::from_str(&env.recorded("env.json")).unwrap();
    assert!(agent_env.get("ANTHROPIC_API_KEY").is_none());
    assert!(agent_env.get("CLAUDE_CODE_OAUTH_TOKEN").is_none());
    assert_eq!(
        agent_env["CLAUDE_CONFIG_DIR"],
        env.dir.path().join("creds").display().to_string()
    );
    assert_eq!(agent_env["OWL_RUN_ID"], run_id.to_string());
}

fn session_of(transcript: &str) -> String {
    let last: Value = serde_json::from_str(fixture(transcript).lines().last().unwrap()).unwrap();
    last["session_id"].as_str().unwrap().to_string()
}

#[test]
fn tool_use_commits_on_the_job_branch_and_leaves_the_users_checkout_alone() {
    let env = TestEnv::new();
    env.script(
        "read-prompt\nwrite hello.txt hello\\n\ncommit Add hello.txt (mock)\n\
         write .owl/handoff.md status: done\\nwrote hello.txt\\n\ncommit owl handoff\n\
         replay tool-use.jsonl\nwait-stdin-eof\nexit 0\n",
    );
    let id = env.add("Write hello.txt and commit it");
    assert_eq!(env.tick()["outcome"], "succeeded");

    let log = git(&env.repo, &["log", "--format=%s", &format!("owl/{id}")]);
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        ["owl handoff", "Add hello.txt (mock)", "initial"]
    );
    assert_eq!(
        git(&env.repo, &["show", &format!("owl/{id}:hello.txt")]),
        "hello\n"
    );
    // The user's checkout: still on main, untouched.
    assert_eq!(
        git(&env.repo, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "main"
    );
    assert!(!env.repo.join("hello.txt").exists());
    assert_eq!(git(&env.repo, &["status", "--porcelain"]), "");

    let show = env.show(&id);
    assert_eq!(show["commits"], 2);
    env.owl()
        .args(["show", &id])
        .assert()
        .success()
        .stdout(predicate::str::contains("2 commits beyond the base"))
        .stdout(predicate::str::contains("status: done"));
}

#[test]
fn a_second_run_reuses_the_branch_and_worktree_and_sees_the_handoff() {
    let env = TestEnv::new();
    env.script("read-prompt\nwrite .owl/handoff.md status: continue\\nnext: the tests\\n\ncommit handoff 1\nreplay success.jsonl\nwait-stdin-eof\n");
    let id = env.add("Do it in two Runs");
    assert_eq!(env.tick()["job_state"], "queued");
    env.script(&done_script("success.jsonl", 0));
    assert_eq!(env.tick()["job_state"], "done");
    let prompt: Value =
        serde_json::from_str(env.recorded("stdin.jsonl").lines().next().unwrap()).unwrap();
    let text = prompt["message"]["content"].as_str().unwrap();
    assert!(text.starts_with("Do it in two Runs"), "{text}");
    assert!(
        text.contains("next: the tests"),
        "the second Run's prompt carries the Handoff: {text}"
    );
    assert_eq!(env.show(&id)["runs"].as_array().unwrap().len(), 2);
}

#[test]
fn a_denied_tool_is_recorded_and_shown() {
    let env = TestEnv::new();
    env.script("read-prompt\nreplay tool-denied.jsonl\nwait-stdin-eof\nexit 0\n");
    let id = env.add("Commit hello.txt");
    let tick = env.tick();
    assert_eq!(tick["outcome"], "succeeded");
    // No Handoff: the Job goes back to the queue with a warning.
    assert_eq!(tick["job_state"], "queued");
    let show = env.show(&id);
    assert!(show["reason"]
        .as_str()
        .unwrap()
        .contains("warning: the Run left no .owl/handoff.md"));
    let denial = &show["runs"][0]["permission_denials"][0];
    assert_eq!(denial["tool_name"], "Bash");
    assert!(denial["detail"]
        .as_str()
        .unwrap()
        .starts_with("git add hello.txt"));
    env.owl()
        .args(["show", &id])
        .assert()
        .success()
        .stdout(predicate::str::contains("denied tools (1)"))
        .stdout(predicate::str::contains("- Bash git add hello.txt"));
    // The morning view: what ran overnight, with its denied calls.
    let recent = &env.status()["recent_runs"][0];
    assert_eq!(recent["outcome"], "succeeded");
    assert_eq!(recent["denied_tools"], 1);
    env.owl()
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains("Runs in the last 24 hours"))
        .stdout(predicate::str::contains(
            "succeeded, $0.00, 1 denied tool call(s)",
        ));
}

#[test]
fn max_budget_is_budget_exhausted() {
    let env = TestEnv::new();
    env.script("read-prompt\nreplay max-budget.jsonl\nwait-stdin-eof\nexit 1\n");
    let id = env.add("Spend");
    let tick = env.tick();
    assert_eq!(tick["outcome"], "budget_exhausted");
    assert_eq!(tick["stop_reason"], "Reached maximum budget ($0.0001)");
    assert_eq!(env.show(&id)["runs"][0]["exit_code"], 1);
}

#[test]
fn a_401_fails_the_run_and_flags_the_account_until_a_run_succeeds() {
    let env = TestEnv::new();
    env.script("read-prompt\nreplay api-401-oauth.jsonl\nwait-stdin-eof\nexit 1\n");
    env.add("Hello");
    let tick = env.tick();
    assert_eq!(tick["outcome"], "failed");
    assert!(tick["stop_reason"]
        .as_str()
        .unwrap()
        .starts_with("not logged in: Not logged in"));
    assert_eq!(tick["job_state"], "queued");
    let status = env.status();
    assert!(status["accounts"][0]["not_logged_in"]
        .as_str()
        .unwrap()
        .contains("Please run /login"));
    env.owl()
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains("not logged in"));

    // The next tick's probe finds a plan login (the fake agent answers as one), so the
    // Account is scheduled again and the Job runs.
    env.script(&done_script("success.jsonl", 0));
    assert_eq!(env.tick()["outcome"], "succeeded");
    assert!(env.status()["accounts"][0]["not_logged_in"].is_null());
}

#[test]
fn a_429_rejection_is_rate_limited_and_waits_until_the_reset() {
    let env = TestEnv::new();
    env.script("read-prompt\nreplay rate-limit-rejected.jsonl\nwait-stdin-eof\nexit 1\n");
    let id = env.add("Hello");
    let tick = env.tick();
    assert_eq!(tick["outcome"], "rate_limited");
    assert_eq!(tick["job_state"], "waiting");
    let show = env.show(&id);
    // resetsAt 1796020271 from the recorded rate_limit_event.
    assert_eq!(show["not_before"], "2026-11-30T06:31:11Z");
    // Before the reset nothing runs; status says why.
    let idle = env.tick();
    assert_eq!(idle["action"], "idle");
    assert!(idle["reason"].as_str().unwrap().contains("06:31"), "{idle}");
    assert_eq!(env.status()["queue"][0]["state"], "waiting");
}

#[test]
fn an_api_500_after_retries_fails_and_counts_the_retries() {
    let mut env = TestEnv::new();
    env.script("read-prompt\nreplay api-500-max-retries-2.jsonl\nwait-stdin-eof\nexit 1\n");
    let id = env.add("Hello");
    let tick = env.tick();
    assert_eq!(tick["outcome"], "failed");
    assert!(
        tick["stop_reason"]
            .as_str()
            .unwrap()
            .starts_with("the API is unavailable: API Error: 500"),
        "{tick}"
    );
    let show = env.show(&id);
    assert_eq!(show["runs"][0]["api_retries"], 2);
    assert_eq!(show["runs"][0]["cause"], "outage");
    assert_eq!(show["runs"][0]["counts"], false);
    assert_eq!(show["state"], "queued");

    // The Account backs off: 5 minutes, then 10 after a second outage in a row.
    let status = env.status();
    assert_eq!(
        status["accounts"][0]["backoff_until"],
        "2026-11-30T03:05:00Z"
    );
    assert_eq!(status["accounts"][0]["outages"], 1);
    let idle = env.tick();
    assert_eq!(idle["action"], "idle");
    assert!(
        idle["reason"].as_str().unwrap().contains("backing off"),
        "{idle}"
    );
    env.now = "2026-11-30T03:05:00Z".into();
    assert_eq!(env.tick()["outcome"], "failed");
    let status = env.status();
    assert_eq!(
        status["accounts"][0]["backoff_until"],
        "2026-11-30T03:15:00Z"
    );
    assert_eq!(status["accounts"][0]["outages"], 2);
    // A Run that reaches the model ends the back-off.
    env.now = "2026-11-30T03:15:00Z".into();
    env.script(&done_script("success.jsonl", 0));
    assert_eq!(env.tick()["job_state"], "done");
    let status = env.status();
    assert!(status["accounts"][0]["backoff_until"].is_null());
    assert_eq!(status["accounts"][0]["outages"], 0);
    // Two outages, no maxRuns spent.
    let runs = env.show(&id)["runs"].as_array().unwrap().clone();
    assert_eq!(runs.iter().filter(|r| r["counts"] == true).count(), 1);
}

#[test]
fn an_exit_without_a_result_line_is_failed_with_the_stderr_tail() {
    let env = TestEnv::new();
    env.script("read-prompt\nreplay signal-midstream-SIGTERM-pid.jsonl\nstderr fatal: something broke\nexit 143\n");
    let id = env.add("Hello");
    let tick = env.tick();
    assert_eq!(tick["outcome"], "failed");
    assert_eq!(
        tick["stop_reason"],
        "the agent ended with exit code 143 and no result line: fatal: something broke"
    );
    let show = env.show(&id);
    assert_eq!(show["runs"][0]["exit_code"], 143);
    let stderr =
        std::fs::read_to_string(env.state.join("logs").join(&id).join("1.stderr.txt")).unwrap();
    assert_eq!(stderr, "fatal: something broke\n");
}

#[test]
fn a_version_outside_the_tested_range_leaves_the_job_queued_and_says_why() {
    // With verification off, only a binary that passed `owl doctor --conformance` runs.
    let mut env = TestEnv::with_config("agentVerification: off\n");
    env.extra_env
        .push(("FAKE_AGENT_VERSION".into(), "2.2.0 (Claude Code)".into()));
    env.script(&done_script("success.jsonl", 0));
    let id = env.add("Hello");
    env.owl()
        .arg("tick")
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "Claude Code 2.2.0 is not verified: run `owl doctor --conformance`",
        ));
    assert_eq!(env.show(&id)["state"], "queued");
    assert!(env.show(&id)["runs"].as_array().unwrap().is_empty());
    let status = env.status();
    assert!(status["accounts"][0]["agent_problem"]
        .as_str()
        .unwrap()
        .contains("2.2.0"));
    assert!(
        status["summary"].as_str().unwrap().contains("2.2.0"),
        "{status}"
    );
    env.owl()
        .arg("doctor")
        .assert()
        .code(1)
        .stdout(predicate::str::contains("outside the tested range"));
}

#[test]
fn a_missing_agent_cli_exits_1_and_keeps_the_job() {
    let env = TestEnv::new();
    env.write_config("accounts:\n  work: {}\n");
    let text = std::fs::read_to_string(&env.config)
        .unwrap()
        .replace(env!("CARGO_BIN_EXE_owl-fake-agent"), "/nonexistent/claude");
    std::fs::write(&env.config, text).unwrap();
    let id = env.add("Hello");
    env.owl()
        .arg("tick")
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "'/nonexistent/claude' does not exist",
        ));
    assert_eq!(env.show(&id)["state"], "queued");
}

#[test]
fn two_ticks_at_once_run_one_agent() {
    let env = TestEnv::new();
    env.script(&held_run_script(&env.release_file(), ""));
    env.add("Slow");
    let first = env.spawn_tick();
    // Once the first tick has its Run recorded, it holds the lock; the agent is held
    // until the second tick has tried.
    env.wait_running();
    let second = env.tick();
    env.release();
    assert_eq!(second["action"], "busy");
    // Its one Account is taken by the live Run, which the reason names.
    let reason = second["reason"].as_str().unwrap();
    assert!(
        reason.contains("every Account is busy: work runs job") && reason.contains("(run 1)"),
        "{reason}"
    );
    let out = first.wait_with_output().unwrap();
    assert!(out.status.success());
    let first: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(first["action"], "ran");
    assert_eq!(first["run_id"], 1);
}

#[test]
fn max_run_time_stops_the_run_with_an_interrupt() {
    let env = TestEnv::with_config("defaults:\n  maxRunTime: 1s\n");
    env.script("read-prompt\nreplay interrupt-control-request.jsonl 1 2\nsleep 60000\n");
    let id = env.add("Never ends");
    let started = std::time::Instant::now();
    let tick = env.tick();
    // Not the agent's 60000 s.
    assert!(started.elapsed() < std::time::Duration::from_secs(300));
    assert_eq!(tick["outcome"], "timed_out");
    assert_eq!(tick["stop_reason"], "maxRunTime reached");
    // The interrupt was written on stdin and answered with the CLI's own result.
    let stdin = env.recorded("stdin.jsonl");
    assert!(stdin.contains(r#""subtype":"interrupt""#), "{stdin}");
    let log = std::fs::read_to_string(env.run_log(&id, 1)).unwrap();
    assert!(log.contains("error_during_execution"));
    assert_eq!(env.show(&id)["state"], "queued");
}

#[test]
fn cancel_stops_a_running_run() {
    let env = TestEnv::new();
    env.script("read-prompt\nreplay interrupt-control-request.jsonl 1 2\nsleep 60000\n");
    let id = env.add("Long");
    let tick = env.spawn_tick();
    env.wait_running();
    env.owl().args(["cancel", &id]).assert().success();
    let out = tick.wait_with_output().unwrap();
    let tick: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tick["outcome"], "interrupted");
    assert_eq!(tick["stop_reason"], "cancelled");
    assert_eq!(env.show(&id)["state"], "cancelled");
    assert_eq!(env.tick()["action"], "idle");
}

#[test]
fn the_branch_starts_at_the_commit_the_base_named_when_the_job_was_queued() {
    let env = TestEnv::new();
    env.script(&done_script("success.jsonl", 0));
    let queued_at = git(&env.repo, &["rev-parse", "HEAD"]).trim().to_string();
    let id = env.add("Work on what I had");
    // The user goes on working after queueing the Job.
    std::fs::write(env.repo.join("later.txt"), "later\n").unwrap();
    git(&env.repo, &["add", "later.txt"]);
    git(&env.repo, &["commit", "-q", "-m", "later work"]);
    assert_eq!(env.show(&id)["base_commit"], queued_at.as_str());
    env.tick();
    let parent = git(&env.repo, &["rev-parse", &format!("owl/{id}~1")]);
    assert_eq!(parent.trim(), queued_at);
}

#[test]
fn the_version_is_checked_before_every_run_even_behind_an_unchanged_wrapper() {
    let env = TestEnv::new();
    // A version manager's shim: one file, whatever version runs behind it.
    let version = env.dir.path().join("version.txt");
    std::fs::write(&version, "2.1.197 (Claude Code)").unwrap();
    let shim = env.dir.path().join("claude");
    std::fs::write(
        &shim,
        format!(
            "#!/bin/sh\nFAKE_AGENT_VERSION=\"$(cat '{}')\" exec '{}' \"$@\"\n",
            version.display(),
            env!("CARGO_BIN_EXE_owl-fake-agent")
        ),
    )
    .unwrap();
    std::fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(
        &env.config,
        std::fs::read_to_string(&env.config)
            .unwrap()
            .replace(env!("CARGO_BIN_EXE_owl-fake-agent"), shim.to_str().unwrap())
            + "agentVerification: off\n",
    )
    .unwrap();
    // No Handoff: the Job is queued again after every Run.
    env.script("read-prompt\nreplay success.jsonl\nwait-stdin-eof\n");
    let id = env.add_with(&["--max-runs", "10"], "Hello");
    let checked = env.record.join("version-env.json");
    let _ = std::fs::remove_file(&checked);
    // An idle tick never starts the agent.
    env.owl().args(["tick", "--dry-run"]).assert().success();
    assert!(!checked.exists(), "a dry run asked for the version");
    assert_eq!(env.tick()["outcome"], "succeeded");
    assert!(checked.exists(), "the first Run checks the version");
    std::fs::remove_file(&checked).unwrap();
    assert_eq!(env.tick()["outcome"], "succeeded");
    assert!(
        checked.exists(),
        "the same file, checked just now, is asked again"
    );
    // The version behind the shim changes; the shim does not.
    std::fs::write(&version, "2.2.0 (Claude Code)").unwrap();
    env.owl()
        .arg("tick")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("Claude Code 2.2.0"));
    let show = env.show(&id);
    assert_eq!(show["runs"].as_array().unwrap().len(), 2, "no Run on 2.2.0");
    assert_eq!(show["state"], "queued");
    env.owl()
        .arg("status")
        .assert()
        .stdout(predicate::str::contains(
            "Claude Code 2.2.0 is not verified",
        ));
}

/// Issue 23: nothing is promised before it is checked. The cheap signs on this machine are
/// read at once (no agent started): a CLI not on PATH, an empty credential store. A login
/// never seen to work is said to be unchecked, with the command that checks it.
#[test]
fn status_promises_no_run_that_this_machine_shows_cannot_happen() {
    let env = TestEnv::new();
    let id = env.add("Hello");
    // A store with no login in it.
    std::fs::remove_file(env.dir.path().join("creds/.credentials.json")).unwrap();
    let status = env.status();
    let account = &status["accounts"][0];
    assert_eq!(account["schedulable"], false, "{account}");
    let reason = account["reason"].as_str().unwrap();
    assert!(
        reason.contains("its credential store") && reason.contains("is empty"),
        "{reason}"
    );
    let dry = env.owl().args(["tick", "--dry-run"]).output().unwrap();
    let dry = String::from_utf8_lossy(&dry.stdout);
    assert!(!dry.contains("The next tick"), "{dry}");
    assert!(env.show(&id)["now"].as_str().unwrap().contains("is empty"));
    // The tick starts no Run: idle, as for any Account found not logged in.
    let tick = env.tick();
    assert_eq!(tick["action"], "idle", "{tick}");
    assert!(
        tick["reason"].as_str().unwrap().contains("is empty"),
        "{tick}"
    );
    assert!(env.show(&id)["runs"].as_array().unwrap().is_empty());

    // A store the CLI was started in without /login (its `.claude.json`, no
    // `.credentials.json`): no login either, still without starting anything.
    std::fs::write(env.dir.path().join("creds/.claude.json"), "{}\n").unwrap();
    let reason = env.status()["accounts"][0]["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        reason.contains("holds no login (no .credentials.json)"),
        "{reason}"
    );
    // A settings file may log in otherwise (an apiKeyHelper): then owl cannot tell, and
    // says the login is not checked yet rather than promise a Run.
    std::fs::write(env.dir.path().join("creds/settings.json"), "{}\n").unwrap();
    let status = env.status();
    assert_eq!(status["accounts"][0]["schedulable"], true, "{status}");
    assert!(
        status["summary"]
            .as_str()
            .unwrap()
            .contains("its login is not checked yet"),
        "{status}"
    );
    std::fs::remove_file(env.dir.path().join("creds/settings.json")).unwrap();
    std::fs::remove_file(env.dir.path().join("creds/.claude.json")).unwrap();

    // A CLI not on PATH: status says so, with the fix, before any tick.
    std::fs::write(
        env.dir.path().join("creds/.credentials.json"),
        crate::support::LOGGED_IN_STORE,
    )
    .unwrap();
    let text = std::fs::read_to_string(&env.config)
        .unwrap()
        .replace(env!("CARGO_BIN_EXE_owl-fake-agent"), "claude");
    std::fs::write(&env.config, text).unwrap();
    let out = env
        .owl()
        .arg("status")
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.contains(
            "work: not schedulable — the agent CLI cannot be run: 'claude' is not on PATH"
        ),
        "{out}"
    );

    // Found and logged in, but never seen to work: tried, not promised.
    let good = std::fs::read_to_string(&env.config).unwrap().replace(
        "command: claude",
        &format!("command: {}", env!("CARGO_BIN_EXE_owl-fake-agent")),
    );
    std::fs::write(&env.config, good).unwrap();
    assert_eq!(
        env.status()["summary"],
        format!("The next tick tries job {id} on work; its login is not checked yet (`owl probe work` checks it).")
    );
    env.script(&crate::support::done_script("success.jsonl", 0));
    env.add("Again");
    assert_eq!(env.tick()["outcome"], "succeeded");
    let summary = env.status()["summary"].as_str().unwrap().to_string();
    assert!(summary.starts_with("The next tick runs job"), "{summary}");
}

/// Issue 24: a command not on PATH is told with the config key of the Account's own Driver
/// (or the sandbox's), not Claude Code's whatever the Driver.
#[test]
fn a_command_not_on_path_names_its_own_config_key() {
    let env = TestEnv::new();
    std::fs::write(
        &env.config,
        format!(
            "stateDir: {}\ndrivers:\n  claude-code:\n    command: {}\n  codex:\n    command: codex-not-here\naccounts:\n  gpt:\n    driver: codex\n    credentialStore: {}\n  boxed:\n    credentialStore: {}\n    executor: sandbox\nsandbox:\n  command: bwrap-not-here\n",
            env.state.display(),
            env!("CARGO_BIN_EXE_owl-fake-agent"),
            env.dir.path().join("codex-home").display(),
            env.dir.path().join("creds").display(),
        ),
    )
    .unwrap();
    std::fs::create_dir_all(env.dir.path().join("codex-home")).unwrap();
    std::fs::write(env.dir.path().join("codex-home/auth.json"), "{}").unwrap();
    let status = env.status();
    let reason = |name: &str| {
        status["accounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name)
            .unwrap()["reason"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let gpt = reason("gpt");
    assert!(
        gpt.contains("'codex-not-here' is not on PATH")
            && gpt.contains("set drivers.codex.command to its absolute path"),
        "{gpt}"
    );
    let boxed = reason("boxed");
    assert!(
        boxed.contains("'bwrap-not-here' is not on PATH")
            && boxed.contains("set sandbox.command to its absolute path"),
        "{boxed}"
    );
    assert!(!gpt.contains("claude-code") && !boxed.contains("claude-code"));
}
