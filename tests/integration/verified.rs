//! Done means verified: a Job's check, fixed when it is queued, runs after a Run whose
//! agent says done, in the Job's worktree, and its exit code decides.

use std::path::Path;

use crate::support::{
    alive, done_script, held_run_script, read_pid, tick_into_check, wait_until, TestEnv,
};

/// A check that fails until a file `fixed` is in the worktree, saying so on stderr.
/// What it prints starts with an escape sequence, which owl shows and never passes on.
const FIXED_CHECK: &str = r#"sh -c 'printf "\033[2Jfixed is missing\n" >&2; test -f fixed'"#;

/// A Run that makes the check pass: writes `fixed`, hands off done and commits both.
const FIXING_SCRIPT: &str = "read-prompt\nwrite fixed yes\\n\nwrite .owl/handoff.md status: done\\n\\nFixed.\\n\ncommit fix\nreplay success.jsonl\nwait-stdin-eof\nexit 0\n";

fn logs_check(env: &TestEnv, run: i64) -> String {
    let out = env
        .owl()
        .args(["logs", &run.to_string(), "--check"])
        .assert()
        .success();
    String::from_utf8_lossy(&out.get_output().stdout).into_owned()
}

#[test]
fn a_job_claimed_done_whose_check_fails_runs_again_told_why_and_is_done_once_it_passes() {
    let env = TestEnv::new();
    env.script(&done_script("success.jsonl", 0));
    let id = env.add_with(&["--check", FIXED_CHECK], "Fix it");
    let shown = env.show(&id);
    // Split as a shell would: the quoted script is one argument, its backslashes kept.
    assert_eq!(
        shown["check"]["command"],
        serde_json::json!([
            "sh",
            "-c",
            r#"printf "\033[2Jfixed is missing\n" >&2; test -f fixed"#
        ])
    );
    assert_eq!(shown["check"]["timeout_secs"], 1800);

    let tick = env.tick();
    assert_eq!(tick["job_state"], "queued", "{tick}");
    let shown = env.show(&id);
    let reason = shown["reason"].as_str().unwrap();
    assert!(
        reason.contains("its check failed") && reason.contains("exited 1"),
        "{reason}"
    );
    assert_eq!(shown["verified"], false);
    let check = &shown["runs"][0]["check"];
    assert_eq!(check["status"], "failed", "{shown}");
    assert_eq!(check["exit_code"], 1);
    assert_eq!(shown["counted_runs"], 1);
    let printed = logs_check(&env, 1);
    assert!(printed.contains("\\x1b[2Jfixed is missing"), "{printed}");
    assert!(
        !printed.contains('\x1b'),
        "an escape reached the terminal: {printed:?}"
    );

    env.script(FIXING_SCRIPT);
    let tick = env.tick();
    assert_eq!(tick["job_state"], "done", "{tick}");
    // The second Run was told what the check said.
    let prompt = env.recorded("stdin.jsonl");
    assert!(prompt.contains("exited 1"), "{prompt}");
    assert!(prompt.contains("fixed is missing"), "{prompt}");
    assert!(
        !prompt.contains("\\u001b"),
        "an escape reached the prompt: {prompt}"
    );
    let shown = env.show(&id);
    assert_eq!(shown["verified"], true, "{shown}");
    assert_eq!(shown["last_check"]["status"], "passed");
    assert_eq!(shown["runs"][1]["check"]["exit_code"], 0);
    let text = env.owl().args(["show", &id]).assert().success();
    let text = String::from_utf8_lossy(&text.get_output().stdout).into_owned();
    assert!(text.contains("check:    verified: `sh -c"), "{text}");
}

#[test]
fn a_check_that_hangs_is_killed_at_its_timeout_with_what_it_started() {
    let env = TestEnv::with_config("defaults:\n  checkTimeout: 1s\n");
    env.script(&done_script("success.jsonl", 0));
    let pidfile = env.dir.path().join("sleeper.pid");
    let check = format!("sh -c 'sleep 600 & echo $! > {}; wait'", pidfile.display());
    let id = env.add_with(&["--check", &check], "Hang");
    let tick = env.tick();
    assert_eq!(tick["job_state"], "queued", "{tick}");
    let shown = env.show(&id);
    assert_eq!(shown["runs"][0]["check"]["status"], "timed_out", "{shown}");
    assert_eq!(shown["check"]["timeout_secs"], 1);
    let pid = read_pid(&pidfile);
    assert!(!alive(pid), "the check's sleep outlived its timeout");
}

#[test]
fn a_check_that_cannot_start_blocks_the_job_and_requeue_after_the_fix_runs_it_again() {
    let mut env = TestEnv::new();
    env.script(&done_script("success.jsonl", 0));
    let id = env.add_with(&["--check", "owl-no-such-check --all"], "Missing tool");
    let tick = env.tick();
    assert_eq!(tick["job_state"], "blocked", "{tick}");
    let shown = env.show(&id);
    let reason = shown["reason"].as_str().unwrap();
    assert!(
        reason.contains("'owl-no-such-check' is not found on PATH"),
        "{reason}"
    );
    assert!(reason.contains("owl requeue"), "{reason}");
    assert_eq!(shown["runs"][0]["check"]["status"], "cannot_start");
    assert_eq!(
        shown["runs"][0]["check"]["exit_code"],
        serde_json::Value::Null
    );
    // The Run counts as one in which the model worked; the check itself charged nothing.
    assert_eq!(shown["counted_runs"], 1);
    assert_eq!(shown["runs"][0]["outcome"], "succeeded");

    // Requeued before the fix: the check runs again, still cannot start; nothing moves.
    let out = env.owl().args(["requeue", &id]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("stays blocked"));
    assert_eq!(env.show(&id)["state"], "blocked");
    // The tool installed: requeue runs the check on the work as it is, no Run spent.
    let bin = env.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let tool = bin.join("owl-no-such-check");
    std::fs::write(&tool, "#!/bin/sh\ntest \"$1\" = --all\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    env.extra_env.push(("PATH".into(), path));
    let out = env.owl().args(["requeue", &id]).assert().success();
    assert!(String::from_utf8_lossy(&out.get_output().stdout).contains("done: its check ran again"));
    let shown = env.show(&id);
    assert_eq!(shown["state"], "done", "{shown}");
    assert_eq!(shown["verified"], true);
    assert_eq!(shown["run_count"], 1, "no Run was spent");
    assert_eq!(shown["runs"][0]["check"]["status"], "passed");
}

#[test]
fn the_check_is_fixed_when_queued_whatever_the_config_or_the_branch_says_later() {
    let env = TestEnv::new();
    let repo = env.repo.display().to_string();
    env.write_config(&format!(
        "accounts:\n  work:\n    credentialStore: {}\ndefaults:\n  check: [sh, -c, 'exit 3']\n",
        env.dir.path().join("creds").display()
    ));
    let id = env.add("Uses the default check");
    let opted_out = env.add_with(&["--no-check"], "No check");
    // The user changes the default, and the agent commits a config of its own: neither
    // changes the argv this Job runs.
    env.write_config(&format!(
        "accounts:\n  work:\n    credentialStore: {}\ndefaults:\n  check: ['true']\nrepos:\n  {repo}:\n    check: [sh, -c, 'exit 4']\n",
        env.dir.path().join("creds").display()
    ));
    env.script("read-prompt\nwrite .owl/config.yaml defaults: {check: [true]}\\n\nwrite check.sh #!/bin/sh\\nexit 0\\n\nwrite .owl/handoff.md status: done\\n\ncommit tampered\nreplay success.jsonl\nwait-stdin-eof\nexit 0\n");
    let tick = env
        .owl()
        .args(["tick", "--json", "--job", &id])
        .assert()
        .success();
    let tick: serde_json::Value = serde_json::from_slice(&tick.get_output().stdout).unwrap();
    assert_eq!(tick["job_state"], "queued", "{tick}");
    let check = &env.show(&id)["runs"][0]["check"];
    assert_eq!(check["command"], serde_json::json!(["sh", "-c", "exit 3"]));
    assert_eq!(check["exit_code"], 3);
    // --no-check: the agent's word decides.
    assert_eq!(env.show(&opted_out)["check"], serde_json::Value::Null);
    env.script(&done_script("success.jsonl", 0));
    let tick = env
        .owl()
        .args(["tick", "--json", "--job", &opted_out])
        .assert()
        .success();
    let tick: serde_json::Value = serde_json::from_slice(&tick.get_output().stdout).unwrap();
    assert_eq!(tick["job_state"], "done");
    assert_eq!(env.show(&opted_out)["verified"], false);
    // A Job queued now takes its repository's check.
    let later = env.add("Later");
    assert_eq!(
        env.show(&later)["check"]["command"],
        serde_json::json!(["sh", "-c", "exit 4"])
    );
}

#[test]
fn add_refuses_an_empty_or_unsplittable_check_and_config_an_empty_one() {
    let env = TestEnv::new();
    for bad in ["", "   ", "sh -c 'unclosed"] {
        let out = env
            .owl()
            .args(["add", "--repo"])
            .arg(&env.repo)
            .args(["--check", bad, "x"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--check"));
    }
    env.owl()
        .args(["add", "--check", "true", "--no-check", "x"])
        .assert()
        .code(2);
    env.write_config("accounts:\n  work: {}\ndefaults:\n  check: []\n");
    let out = env.owl().args(["config", "check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 9") && err.contains("defaults.check"),
        "{err}"
    );
    assert!(!env.state.join("owl.db").exists());
}

#[test]
fn a_sandboxed_accounts_check_writes_only_where_its_run_could() {
    let env = TestEnv::sandboxed("");
    env.script(&done_script("success.jsonl", 0));
    let outside = env.dir.path().join("outside.txt");
    let check = format!(
        "sh -c 'touch made-by-check; echo pwned > {}'",
        outside.display()
    );
    let id = env.add_with(&["--check", &check], "Confined");
    let tick = env.tick();
    assert_eq!(tick["job_state"], "queued", "{tick}");
    assert!(
        !outside.exists(),
        "the sandboxed check wrote outside its worktree"
    );
    let shown = env.show(&id);
    assert_eq!(shown["runs"][0]["check"]["status"], "failed", "{shown}");
    // Inside its worktree (the Job's own clone) it could write.
    assert!(Path::new(shown["worktree"].as_str().unwrap())
        .join("made-by-check")
        .exists());
}

#[test]
fn sigterm_during_a_check_stops_it_and_records_the_run_with_the_check_not_finished() {
    let env = TestEnv::new();
    env.script(&done_script("success.jsonl", 0));
    let pidfile = env.dir.path().join("check.pid");
    let check = format!(
        "sh -c 'echo $$ > {}.tmp; mv {0}.tmp {0}; exec sleep 600'",
        pidfile.display()
    );
    let (id, tick, pid) = tick_into_check(&env, &check, &pidfile);
    unsafe { libc::kill(tick.id() as i32, libc::SIGTERM) };
    let out = tick.wait_with_output().unwrap();
    assert!(!alive(pid), "the check outlived owl's stop");
    let tick: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tick["job_state"], "queued", "{tick}");
    let shown = env.show(&id);
    assert_eq!(
        shown["runs"][0]["check"]["status"], "not_finished",
        "{shown}"
    );
    assert!(shown["reason"].as_str().unwrap().contains("did not finish"));
}

#[test]
fn owl_killed_during_a_check_leaves_nothing_that_recovery_does_not_find() {
    let env = TestEnv::new();
    env.script(&done_script("success.jsonl", 0));
    let pidfile = env.dir.path().join("escaped.pid");
    // A process of the check in a session of its own: no group kill reaches it. The
    // check passes once it has left one (the Job's next Run, after the recovery).
    let check = format!(
        "sh -c 'test -e {0} && exit 0; setsid sleep 600 & echo $! > {0}.tmp; mv {0}.tmp {0}; wait'",
        pidfile.display()
    );
    let (id, mut tick, pid) = tick_into_check(&env, &check, &pidfile);
    tick.kill().unwrap();
    tick.wait().unwrap();
    assert!(
        alive(pid),
        "the escaped process should outlive owl until recovery"
    );
    env.owl().args(["tick", "--json"]).assert().success();
    wait_until("recovery left the check's process alive", || !alive(pid));
    let shown = env.show(&id);
    assert_eq!(shown["runs"][0]["outcome"], "lost", "{shown}");
    assert_eq!(shown["state"], "done", "{shown}");
}

#[test]
fn owl_check_runs_the_check_by_hand_and_never_beside_a_live_run() {
    let env = TestEnv::new();
    env.script(&done_script("success.jsonl", 0));
    let id = env.add_with(&["--check", FIXED_CHECK], "By hand");
    // No worktree yet: nothing to check.
    env.owl().args(["check", &id]).assert().code(1);
    env.tick();
    let out = env.owl().args(["check", &id]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("exited 1") && text.contains("fixed is missing"),
        "{text}"
    );
    let worktree = env.show(&id)["worktree"].as_str().unwrap().to_string();
    std::fs::write(Path::new(&worktree).join("fixed"), "by hand\n").unwrap();
    let out = env.owl().args(["check", "--json", &id]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["status"], "passed");
    assert_eq!(json["exit_code"], 0);
    // A Job without a check is refused as bad input.
    let plain = env.add_with(&["--no-check"], "Plain");
    env.owl().args(["check", &plain]).assert().code(2);

    // Beside a live Run of the Job: refused at once, saying so.
    std::fs::remove_file(Path::new(&worktree).join("fixed")).unwrap();
    env.script(&held_run_script(&env.release_file(), ""));
    let tick = env.spawn_tick();
    env.wait_running();
    let out = env.owl().args(["check", &id]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is live"));
    env.release();
    tick.wait_with_output().unwrap();
}

#[test]
fn the_example_config_reads_with_its_check_and_a_repositorys_own() {
    let env = TestEnv::new();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/config.example.yaml");
    let out = env
        .owl()
        .args(["--config", example, "config", "check"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.contains("checkTimeout: 30m"), "{text}");
    assert!(text.contains("src/myproject"), "{text}");
    assert!(text.contains("checkTimeout: 20m"), "{text}");
    assert!(text.contains("maxConcurrentRuns: 2"), "{text}");
}
