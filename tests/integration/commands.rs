//! The other commands: add's checks, config errors, jobs, requeue, logs, dry runs.

use predicates::prelude::*;
use serde_json::Value;

use crate::support::{done_script, held_run_script, TestEnv};

#[test]
fn a_misspelled_key_exits_2_naming_file_line_and_key_and_changes_nothing() {
    let env = TestEnv::new();
    let id = env.add("Hello");
    // The state is the database and its WAL.
    let state =
        || ["owl.db", "owl.db-wal"].map(|f| std::fs::read(env.state.join(f)).unwrap_or_default());
    let db_before = state();
    env.write_config("accounts:\n  work:\n    limits:\n      fiveHourMAx: 60\n");
    let config = env.config.display().to_string();
    for args in [
        &["tick"][..],
        &["status"],
        &["add", "x"],
        &["config", "check"],
    ] {
        env.owl()
            .args(args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(format!(
                "reading config {config}: line 9: unknown key 'fiveHourMAx'"
            )))
            .stderr(predicate::str::contains("did you mean 'fiveHourMax'?"));
    }
    assert!(state() == db_before, "the state changed");
    env.write_config("accounts:\n  work: {}\n");
    assert_eq!(env.show(&id)["state"], "queued");
}

#[test]
fn config_check_prints_the_resolved_config_without_secrets() {
    let env = TestEnv::new();
    env.write_config(
        "accounts:\n  work:\n    env:\n      CLAUDE_CODE_OAUTH_TOKEN: sk-ant-oat01-SECRET\n",
    );
    env.owl()
        .args(["config", "check"])
        .assert()
        .success()
        .stdout(predicate::str::contains("graceWindow: 2s"))
        .stdout(predicate::str::contains(
            "CLAUDE_CODE_OAUTH_TOKEN: <hidden>",
        ))
        .stdout(predicate::str::contains("SECRET").not());
}

#[test]
fn what_config_check_prints_is_a_config_owl_reads_back_the_same() {
    let env = TestEnv::new();
    env.write_config(
        "schedule:\n  morning: '07:00'\n  dayEnds: '22:00'\nsandbox:\n  allowHosts: [crates.io]\n\
         accounts:\n  work:\n    limits: {fiveHourMax: 80}\n",
    );
    let first = env.owl().args(["config", "check"]).output().unwrap();
    assert!(
        first.status.success(),
        "{}",
        crate::support::stderr_of(&first)
    );
    let printed = String::from_utf8(first.stdout).unwrap();
    // Keys as config.yaml spells them, values in force, nothing unset written as null.
    assert!(
        !printed.contains("null") && !printed.contains("day_ends"),
        "{printed}"
    );
    assert!(
        printed.contains("nightMax: 85.0") && printed.contains("minHeadroom: 2.0"),
        "{printed}"
    );
    let again = env.dir.path().join("printed.yaml");
    std::fs::write(&again, &printed).unwrap();
    let second = env
        .owl()
        .env("OWL_CONFIG", &again)
        .args(["config", "check"])
        .output()
        .unwrap();
    assert!(
        second.status.success(),
        "{}",
        crate::support::stderr_of(&second)
    );
    let body = |text: &str| text.lines().skip(1).collect::<Vec<_>>().join("\n");
    assert_eq!(
        body(&String::from_utf8(second.stdout).unwrap()),
        body(&printed)
    );
}

#[test]
fn add_refuses_what_it_cannot_run() {
    let env = TestEnv::new();
    let not_git = env.dir.path().join("plain");
    std::fs::create_dir_all(&not_git).unwrap();
    env.owl()
        .args(["add", "--repo"])
        .arg(&not_git)
        .arg("x")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is not in a git repository"));
    env.owl()
        .args(["add", "--repo"])
        .arg(&env.repo)
        .args(["--base", "nope", "x"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "base 'nope' names no branch, tag or commit in",
        ));
    // A path that is not there, and a prompt file that is not: said in words, without an
    // OS error number or libgit2's phrasing.
    let gone = env.dir.path().join("gone");
    let refused = |flag: &str, path: &std::path::Path| {
        // A prompt beside --repo; --prompt-file is the prompt.
        let prompt = (flag == "--repo").then_some("x");
        let out = env
            .owl()
            .args(["add", flag])
            .arg(path)
            .args(prompt)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        crate::support::stderr_of(&out)
    };
    let said = refused("--repo", &gone);
    assert!(
        said.contains(&format!("{}: it does not exist", gone.display())),
        "{said}"
    );
    let said = refused("--prompt-file", &gone);
    assert!(
        said.contains("it does not exist") && !said.contains("os error"),
        "{said}"
    );
    assert!(!refused("--repo", &not_git).contains("could not find repository"));
    for name in ["../escape", "a/b", ".hidden", "-x"] {
        env.owl()
            .args(["add", "--repo"])
            .arg(&env.repo)
            .arg(format!("--name={name}"))
            .arg("x")
            .assert()
            .code(2)
            .stderr(predicate::str::contains("job name"));
    }
    env.owl()
        .args(["add", "--repo"])
        .arg(&env.repo)
        .args(["--account", "wrok", "x"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("did you mean 'work'"));
    env.owl()
        .args(["add", "--repo"])
        .arg(&env.repo)
        .arg("   ")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("the prompt is empty"));
    // A good name becomes the id, and cannot be taken twice.
    env.owl()
        .args(["add", "--repo"])
        .arg(&env.repo)
        .args(["--name", "fix-login", "x"])
        .assert()
        .success()
        .stdout("fix-login\n");
    env.owl()
        .args(["add", "--repo"])
        .arg(&env.repo)
        .args(["--name", "fix-login", "x"])
        .assert()
        .code(2);
    assert!(!env.dir.path().join("escape").exists());
}

#[test]
fn add_reads_the_prompt_from_stdin_and_files() {
    let env = TestEnv::new();
    let out = env
        .owl()
        .args(["add", "--repo"])
        .arg(&env.repo)
        .arg("-")
        .write_stdin("from stdin\n")
        .assert()
        .success();
    let id = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert_eq!(env.show(id.trim())["prompt"], "from stdin\n");
    let file = env.dir.path().join("prompt.md");
    std::fs::write(&file, "from a file").unwrap();
    let out = env
        .owl()
        .args(["add", "--repo"])
        .arg(&env.repo)
        .arg("--prompt-file")
        .arg(&file)
        .assert()
        .success();
    let id = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert_eq!(env.show(id.trim())["prompt"], "from a file");
}

#[test]
fn the_queue_is_taken_by_priority_then_age() {
    let env = TestEnv::new();
    let low = env.add("low");
    let high = env.add_with(&["--priority", "5"], "high");
    let status = env.status();
    assert_eq!(status["queue"][0]["job_id"], high.as_str());
    assert_eq!(status["queue"][1]["job_id"], low.as_str());
    assert_eq!(status["next"]["job_id"], high.as_str());
    // Nothing is promised of an Account whose login was never seen to work.
    assert_eq!(
        status["summary"],
        format!(
            "The next tick tries job {high} on work; its login is not checked yet (`owl probe \
             work` checks it)."
        )
    );

    // A dry run decides and changes nothing.
    let dry: Value = serde_json::from_slice(
        &env.owl()
            .args(["tick", "--dry-run", "--json"])
            .assert()
            .success()
            .get_output()
            .stdout,
    )
    .unwrap();
    assert_eq!(dry["job_id"], high.as_str());
    assert!(dry["run_id"].is_null());
    assert!(env.show(&high)["runs"].as_array().unwrap().is_empty());
    env.owl()
        .args(["tick", "--dry-run"])
        .assert()
        .success()
        .stdout(predicate::str::contains(format!(
            "1. {high} (queued): next: tries work (its login is not checked yet)"
        )));

    let jobs: Value = serde_json::from_slice(
        &env.owl()
            .args(["jobs", "--json"])
            .assert()
            .success()
            .get_output()
            .stdout,
    )
    .unwrap();
    assert_eq!(jobs.as_array().unwrap().len(), 2);
}

#[test]
fn status_says_why_nothing_runs_on_an_empty_queue() {
    let env = TestEnv::new();
    let status = env.status();
    assert!(status["running"].is_null());
    assert_eq!(
        status["summary"],
        "Nothing would run now: the queue is empty."
    );
    env.owl()
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "Nothing would run now: the queue is empty.",
        ));
    assert_eq!(env.tick()["action"], "idle");
}

#[test]
fn requeue_and_cancel_follow_the_states() {
    let env = TestEnv::new();
    env.script("read-prompt\nwrite .owl/handoff.md status: blocked\\nneeds an API token\\n\ncommit handoff\nreplay success.jsonl\nwait-stdin-eof\n");
    let id = env.add("Hello");
    assert_eq!(env.tick()["job_state"], "blocked");
    let show = env.show(&id);
    assert_eq!(show["reason"], "needs an API token");
    let status = env.status();
    assert_eq!(status["attention"][0]["job_id"], id.as_str());
    assert_eq!(status["attention"][0]["reason"], "needs an API token");
    env.owl().args(["cancel", &id]).assert().code(2);
    env.owl().args(["requeue", &id]).assert().success();
    assert_eq!(env.show(&id)["state"], "queued");
    env.owl().args(["requeue", &id]).assert().code(2);
    env.owl().args(["cancel", &id]).assert().success();
    assert_eq!(env.show(&id)["state"], "cancelled");
    env.owl()
        .args(["show", "nope"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no job 'nope'"));
}

#[test]
fn logs_print_the_transcript_readable_and_raw() {
    let env = TestEnv::new();
    env.script(&done_script("tool-use.jsonl", 0));
    let id = env.add("Hello");
    env.tick();
    let recorded = std::fs::read(env.record.join("stdout.bin")).unwrap();
    env.owl()
        .args(["logs", "1", "--raw"])
        .assert()
        .success()
        .stdout(recorded.clone());
    // A Job names its newest Run (the README's `owl logs "$id"`).
    env.owl()
        .args(["logs", &id, "--raw"])
        .assert()
        .success()
        .stdout(recorded);
    env.owl()
        .args(["logs", "1"])
        .assert()
        .success()
        .stdout(predicate::str::contains("[init] session"))
        .stdout(predicate::str::contains("[assistant] tool Write"))
        .stdout(predicate::str::contains("[result] success"));
    env.owl().args(["logs", "99"]).assert().code(2);
}

#[test]
fn doctor_checks_the_agent_and_the_database() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.dir.path().join("creds")).unwrap();
    env.add("Hello");
    env.owl()
        .arg("doctor")
        .assert()
        .success()
        .stdout(predicate::str::contains("claude-code 2.1.197"))
        .stdout(predicate::str::contains(
            "capabilities: usage_reporting, usage_probe, budget_cap, tool_policy, \
             graceful_interrupt, session_id; lacks: none",
        ))
        .stdout(predicate::str::contains("integrity ok"));
}

#[test]
fn a_database_from_a_newer_owl_is_refused() {
    let env = TestEnv::new();
    env.add("Hello");
    let db = rusqlite::Connection::open(env.state.join("owl.db")).unwrap();
    db.pragma_update(None, "user_version", 99).unwrap();
    drop(db);
    env.owl()
        .arg("status")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("newer owl"));
}

#[test]
fn logs_follow_prints_until_the_run_ends() {
    let env = TestEnv::new();
    env.script(&held_run_script(&env.release_file(), ""));
    env.add("Follow me");
    let tick = env.spawn_tick();
    env.wait_running();
    let mut follow = env
        .owl_std()
        .args(["logs", "1", "--follow"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Lines as `logs --follow` prints them, read on a thread so the test can time out.
    let (tx, lines) = std::sync::mpsc::channel();
    let stdout = follow.stdout.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines() {
            let _ = tx.send(line.unwrap_or_default());
        }
    });
    let next = || {
        lines
            .recv_timeout(std::time::Duration::from_secs(30))
            .unwrap()
    };
    // The Run is held open: what follow prints so far, it printed while the Run went on.
    while !next().contains("[init] session") {}
    env.release();
    while !next().contains("[result] success") {}
    assert!(follow.wait().unwrap().success(), "follow ends with the Run");
    assert!(tick.wait_with_output().unwrap().status.success());
}

#[test]
fn account_env_reaches_the_agent_but_never_the_database_logs_or_status() {
    let env = TestEnv::new();
    env.write_config(
        "accounts:\n  work:\n    env:\n      CLAUDE_CODE_OAUTH_TOKEN: sk-ant-oat01-SECRET-VALUE\n",
    );
    env.script(&done_script("success.jsonl", 0));
    let id = env.add("Hello");
    env.tick();
    let agent_env: Value = serde_json::from_str(&env.recorded("env.json")).unwrap();
    assert_eq!(
        agent_env["CLAUDE_CODE_OAUTH_TOKEN"],
        "sk-ant-oat01-SECRET-VALUE"
    );
    let mut stored = Vec::new();
    for entry in walk(&env.state) {
        if !entry.starts_with(env.state.join("worktrees")) {
            stored.extend(std::fs::read(&entry).unwrap_or_default());
        }
    }
    assert!(
        !String::from_utf8_lossy(&stored).contains("SECRET-VALUE"),
        "a credential reached the state dir"
    );
    for args in [
        &["status"][..],
        &["status", "--json"],
        &["show", &id],
        &["doctor"],
        &["config", "check"],
    ] {
        let out = env.owl().args(args).output().unwrap();
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("SECRET-VALUE"),
            "{args:?}"
        );
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn every_process_owl_starts_gets_the_scrubbed_environment() {
    let mut env = TestEnv::with_config("    limits: {fiveHourMax: 60}\n");
    env.extra_env
        .push(("ANTHROPIC_API_KEY".into(), "sk-ant-api03-INHERITED".into()));
    env.script(&done_script("success.jsonl", 0));
    env.add("Hello");
    env.tick();
    // The version check, then the Run: neither sees owl's own credential.
    let version: Value = serde_json::from_str(&env.recorded("version-env.json")).unwrap();
    assert!(version.get("ANTHROPIC_API_KEY").is_none(), "{version}");
    assert!(version.get("CLAUDE_CONFIG_DIR").is_some(), "{version}");
    let run: Value = serde_json::from_str(&env.recorded("env.json")).unwrap();
    assert!(run.get("ANTHROPIC_API_KEY").is_none(), "{run}");
}

#[test]
fn a_credential_the_agent_echoes_on_stderr_is_stored_nowhere() {
    let env = TestEnv::new();
    env.write_config(
        "accounts:\n  work:\n    env:\n      CLAUDE_CODE_OAUTH_TOKEN: sk-ant-oat01-SECRET-VALUE\n",
    );
    env.script("read-prompt\nreplay success.jsonl 1 2\nstderr auth with sk-ant-oat01-SECRET-VALUE failed\nexit 1\n");
    let id = env.add("Hello");
    let tick = env.tick();
    let reason = tick["stop_reason"].as_str().unwrap();
    assert!(reason.contains("auth with <hidden> failed"), "{reason}");
    let mut stored = Vec::new();
    for entry in walk(&env.state) {
        stored.extend(std::fs::read(&entry).unwrap_or_default());
    }
    assert!(
        !String::from_utf8_lossy(&stored).contains("SECRET-VALUE"),
        "a credential reached the state dir"
    );
    let out = env.owl().args(["show", &id]).output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("SECRET-VALUE"));
}

#[test]
fn limits_on_a_driver_that_reports_no_utilization_are_refused_naming_the_line() {
    let env = TestEnv::new();
    env.write_config("accounts:\n  flash:\n    driver: gemini\n    limits: {fiveHourMax: 60}\n");
    env.owl()
        .arg("status")
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "line 9: account 'flash' sets limits, but the gemini driver cannot report utilization",
        ));
    // Without limits the same Account is fine, and doctor tells what it lacks without
    // failing on the login probe it does not have.
    let gemini = env.dir.path().join("gemini");
    std::fs::write(&gemini, "#!/bin/sh\necho 0.61.0\n").unwrap();
    std::fs::set_permissions(&gemini, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    env.write_config(&format!(
        "  gemini:\n    command: {}\naccounts:\n  flash:\n    driver: gemini\n",
        gemini.display()
    ));
    env.owl().arg("status").assert().success();
    env.owl()
        .arg("doctor")
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "lacks: usage_reporting, usage_probe, budget_cap, graceful_interrupt",
        ))
        .stdout(predicate::str::contains(
            "login not checked: the gemini driver has no zero-token probe",
        ));
}

#[test]
fn a_gemini_api_key_is_not_spent_unless_the_account_allows_billed_usage() {
    let env = TestEnv::new();
    // A CLI that says its version, and leaves a mark if a Run ever starts it.
    let (gemini, ran) = crate::support::marking_gemini(&env);
    let config = |leave: &str| {
        format!(
            "  gemini:\n    command: {}\naccounts:\n  flash:\n    driver: gemini\n{leave}    \
             env:\n      GEMINI_API_KEY: AIza-owl-test\n",
            gemini.display()
        )
    };
    env.write_config(&config(""));
    env.add("Spend nothing billed");
    // Idle, and exit 1 as for a CLI that cannot run: the user must act, and cron says so.
    let tick = env.owl_std().args(["tick", "--json"]).output().unwrap();
    assert_eq!(tick.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&tick.stdout).unwrap();
    assert_eq!(json["action"], "idle", "{json}");
    assert!(!ran.exists(), "the CLI was started on a billed key");
    let status = env.owl().arg("status").output().unwrap();
    let said = String::from_utf8_lossy(&status.stdout);
    assert!(
        said.contains("its login is an API key (GEMINI_API_KEY in its env), billed per token")
            && said.contains("allowBilledUsage: true"),
        "{said}"
    );
    let doctor = env.owl().arg("doctor").output().unwrap();
    let said = String::from_utf8_lossy(&doctor.stdout);
    assert!(said.contains("billed per token"), "{said}");
    assert!(
        said.contains("no longer serves Google AI Pro, Ultra, Google One or free Google logins"),
        "{said}"
    );
    // Allowed: the Run starts.
    env.write_config(&config("    allowBilledUsage: true\n"));
    assert_eq!(env.tick()["action"], "ran");
    assert!(ran.exists());
}

#[test]
fn show_says_where_a_queued_job_stands_now() {
    let env = TestEnv::new();
    let first = env.add_with(&["--priority", "2"], "First");
    let second = env.add("Second");
    assert_eq!(env.show(&first)["now"], "the next tick runs it on work");
    // The queue's own words, as status says them.
    assert_eq!(
        env.show(&second)["now"],
        format!("ready, behind {first} in the queue")
    );
    env.owl().args(["cancel", &first]).assert().success();
    assert!(
        env.show(&first)["now"].is_null(),
        "a finished Job stands nowhere"
    );
}

#[test]
fn doctor_under_crons_path_gives_the_same_fix_as_status_for_a_cli_it_cannot_find() {
    let env = TestEnv::new();
    std::fs::write(
        &env.config,
        format!(
            "stateDir: {}\naccounts:\n  work: {{}}\n",
            env.state.display()
        ),
    )
    .unwrap();
    let fix = "set drivers.claude-code.command to its absolute path";
    let doctor = env
        .owl()
        .arg("doctor")
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(text.contains(fix), "{text}");
    assert!(!text.contains("os error 2"), "{text}");
    let status = env
        .owl()
        .arg("status")
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&status.stdout).contains(fix));
}

/// Issue 24: a clock fixed by `OWL_NOW` (for a rehearsal) is said on stderr, once.
#[test]
fn a_fixed_clock_is_said() {
    let env = TestEnv::new();
    let out = env.owl().arg("status").assert().success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert_eq!(
        stderr
            .matches("owl: the clock is fixed at 2026-11-30T03:00:00Z by OWL_NOW")
            .count(),
        1,
        "{stderr}"
    );
    let out = env
        .owl()
        .arg("status")
        .env_remove("OWL_NOW")
        .assert()
        .success();
    assert!(!String::from_utf8_lossy(&out.get_output().stderr).contains("fixed"));
}
