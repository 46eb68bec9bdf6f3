//! The notify hook: one JSON document per event on the command's stdin, after the Run is
//! recorded; a failing or slow command changes nothing.

use serde_json::Value;

use crate::support::{done_script, TestEnv};

/// A config whose notify command appends each document to `notes.jsonl` (argv, no shell
/// string of owl's: `sh` is the user's command here).
fn notify_env(on: &str, command_tail: &str) -> (TestEnv, std::path::PathBuf) {
    let env = TestEnv::new();
    let notes = env.dir.path().join("notes.jsonl");
    env.write_config(&format!(
        "usagePollInterval: 200ms\nnotify:\n  command: [sh, -c, 'cat >> \"$0\"{command_tail}', {notes}]\n{on}  timeout: 2s\naccounts:\n  work:\n    limits:\n      fiveHourMax: 60\n",
        notes = notes.display()
    ));
    (env, notes)
}

fn notes(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn each_event_of_a_night_reaches_the_command_as_one_json_document() {
    let (env, path) = notify_env("", "");
    // Done.
    env.script(&done_script("success.jsonl", 0));
    let done = env.add_with(&["--priority", "3"], "Done at once");
    env.tick();
    // Blocked.
    env.script("read-prompt\nwrite .owl/handoff.md status: blocked\\nneeds an API token\\n\ncommit handoff\nreplay success.jsonl\nwait-stdin-eof\n");
    let blocked = env.add_with(&["--priority", "2"], "Needs a token");
    env.tick();
    // Stopped at the ceiling: the Job and the Account wait for the reset.
    env.five_hour(&[40.0, 65.0], "2026-11-30T05:00:00.000Z");
    env.script("read-prompt\nreplay interrupt-control-request.jsonl 1 2\nsleep 30000\n");
    let climbed = env.add_with(&["--priority", "1"], "Climb");
    env.tick();

    let got = notes(&path);
    let events: Vec<(&str, &str)> = got
        .iter()
        .map(|n| (n["event"].as_str().unwrap(), n["job_id"].as_str().unwrap()))
        .collect();
    assert_eq!(
        events,
        [
            ("run-ended", done.as_str()),
            ("job-done", done.as_str()),
            ("run-ended", blocked.as_str()),
            ("job-blocked", blocked.as_str()),
            ("run-ended", climbed.as_str()),
            ("account-waiting", climbed.as_str()),
        ]
    );
    // The fields docs/json.md names, filled from the Run.
    let fields = [
        "event",
        "at",
        "job_id",
        "job_name",
        "job_state",
        "job_reason",
        "repo",
        "branch",
        "run_id",
        "account",
        "outcome",
        "stop_reason",
        "cost_usd",
        "until",
        "prompt_summary",
        "handoff",
        "check",
        "verified",
    ];
    for note in &got {
        crate::support::assert_schema("notify", note);
        let keys: Vec<&str> = note
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys.len(), fields.len(), "{note}");
        for f in fields {
            assert!(keys.contains(&f), "{f} missing in {note}");
        }
    }
    assert_eq!(got[1]["job_state"], "done");
    assert_eq!(got[1]["outcome"], "succeeded");
    assert_eq!(got[3]["job_reason"], "needs an API token");
    assert_eq!(got[5]["account"], "work");
    assert_eq!(got[5]["outcome"], "interrupted");
    assert_eq!(
        got[5]["stop_reason"],
        "ceiling: five_hour 65% >= fiveHourMax 60"
    );
    assert_eq!(got[5]["until"], "2026-11-30T05:00:00Z");
    assert_eq!(got[5]["branch"], format!("owl/{climbed}"));
}

#[test]
fn a_command_that_fails_or_hangs_changes_nothing() {
    // `on:` narrows the events; the command fails, then (second Run) hangs past its timeout.
    let (env, path) = notify_env("  on: [job-done]\n", "; exit 3");
    env.script(&done_script("success.jsonl", 0));
    let id = env.add("Done at once");
    let tick = env.tick();
    assert_eq!(tick["outcome"], "succeeded");
    assert_eq!(tick["job_state"], "done");
    let got = notes(&path);
    assert_eq!(got.len(), 1, "only job-done: {got:?}");
    assert_eq!(env.show(&id)["state"], "done");

    let (env, path) = notify_env("  on: [run-ended]\n", "; exec sleep 600");
    env.script(&done_script("success.jsonl", 0));
    let id = env.add("Done at once");
    let started = std::time::Instant::now();
    let tick = env.tick();
    // Not the hook's 600 s: it was killed at its timeout.
    assert!(started.elapsed() < std::time::Duration::from_secs(300));
    assert_eq!(tick["outcome"], "succeeded");
    assert_eq!(notes(&path).len(), 1);
    assert_eq!(env.show(&id)["runs"][0]["outcome"], "succeeded");
}

/// Runs a contrib/ hook on one payload with fake `notify-send`, `curl` and `sendmail` first on
/// PATH, each writing its argv and stdin to `called.txt`.
fn run_contrib(script: &str, args: &[&str], env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let called = dir.path().join("called.txt");
    for fake in ["notify-send", "curl", "sendmail"] {
        let path = dir.path().join(fake);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\nprintf '%s\\n' \"$0\" \"$@\" >> {c}\ncat >> {c}\n",
                c = called.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let payload = r#"{"event":"job-blocked","at":"2026-11-30T03:10:00Z","job_id":"ab12cd","job_name":null,"job_state":"blocked","job_reason":"needs an API token","repo":"/src/demo","branch":"owl/ab12cd","run_id":3,"account":"work","outcome":"succeeded","stop_reason":null,"cost_usd":0.12,"until":null}"#;
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child =
        std::process::Command::new(format!("{}/contrib/{script}", env!("CARGO_MANIFEST_DIR")))
            .args(args)
            .env("PATH", path)
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(payload.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success(), "{script}");
    std::fs::read_to_string(called).unwrap()
}

#[test]
fn the_contrib_hooks_turn_a_payload_into_a_notification_a_post_and_a_mail() {
    let desktop = run_contrib("notify-desktop", &[], &[]);
    assert!(desktop.contains("--urgency=critical"), "{desktop}");
    assert!(desktop.contains("owl: job-blocked (ab12cd)"), "{desktop}");
    assert!(desktop.contains("needs an API token"), "{desktop}");

    let ntfy = run_contrib("notify-webhook", &["https://ntfy.example/owl"], &[]);
    assert!(ntfy.contains("https://ntfy.example/owl"), "{ntfy}");
    assert!(ntfy.contains("Title: owl: job-blocked"), "{ntfy}");
    assert!(
        ntfy.contains(
            "owl: job-blocked — job ab12cd (blocked) on work: succeeded — needs an API token"
        ),
        "{ntfy}"
    );
    let slack = run_contrib(
        "notify-webhook",
        &["https://hooks.example/T0"],
        &[("OWL_WEBHOOK_SLACK", "1")],
    );
    let body = slack
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("{slack}"));
    let body: Value = serde_json::from_str(body).unwrap();
    assert!(body["text"].as_str().unwrap().contains("job ab12cd"));

    let mail = run_contrib("notify-mail", &["me@example.com"], &[]);
    assert!(mail.contains("To: me@example.com"), "{mail}");
    assert!(
        mail.contains("Subject: owl: job-blocked — job ab12cd on work"),
        "{mail}"
    );
    assert!(
        mail.contains("\"job_reason\": \"needs an API token\""),
        "{mail}"
    );
}

#[test]
fn config_check_never_prints_the_commands_arguments() {
    let env = TestEnv::new();
    env.write_config(
        "notify:\n  command: [/opt/hooks/webhook, https://hooks.example/T0/SECRET-TOKEN]\naccounts:\n  work: {}\n",
    );
    let out = env.owl().args(["config", "check"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("/opt/hooks/webhook"), "{text}");
    assert!(!text.contains("SECRET-TOKEN"), "{text}");
    assert!(text.contains("<hidden>"), "{text}");
}

/// The command of a careless or hostile hook: it never reads its stdin, starts a process
/// that would hold owl's stderr, floods its own stderr with NUL bytes, prints its
/// environment and never ends; the stop reason it is sent is 100 KB of the agent's words.
#[test]
fn a_notify_command_is_bounded_in_every_direction() {
    let env = TestEnv::new();
    let seen_env = env.dir.path().join("notify-env.txt");
    let left_pid = env.dir.path().join("left.pid");
    env.write_config(&format!(
        "notify:\n  command: [sh, -c, 'env > \"$0\"; (sleep 6151 & echo $! > \"$1\"; wait) & head -c 200000000 /dev/zero >&2; exec sleep 6152', {}, {}]\n  on: [run-ended]\n  timeout: 2s\naccounts:\n  work: {{}}\n",
        seen_env.display(),
        left_pid.display()
    ));
    let words = "w".repeat(100_000);
    let emits: String = crate::support::fixture("success.jsonl")
        .lines()
        .map(|line| {
            let mut v: Value = serde_json::from_str(line).unwrap();
            if v["type"] == "result" {
                v["is_error"] = true.into();
                v["result"] = words.clone().into();
            }
            format!("emit {v}\n")
        })
        .collect();
    env.script(&format!("read-prompt\n{emits}wait-stdin-eof\n"));
    env.add("Say a lot");
    let mut tick = env.owl_std();
    tick.args(["tick", "--json"])
        .env("ANTHROPIC_API_KEY", "sk-ant-owl-test-secret")
        .env("CLAUDE_CODE_OAUTH_TOKEN", "oauth-owl-test-secret");
    let ran = crate::hostile::run_bounded(tick, std::time::Duration::from_secs(60));
    assert!(ran.status.success(), "{}", ran.stderr);
    // One event: its 2 s timeout, and nothing owl waits on after it.
    assert!(
        ran.took < std::time::Duration::from_secs(30),
        "{:?}",
        ran.took
    );
    assert!(ran.stderr.contains("took longer than 2s"), "{}", ran.stderr);
    // Its stderr is told, bounded and inert; never passed through raw.
    assert!(ran.stderr.len() < 64 * 1024, "{} bytes", ran.stderr.len());
    assert!(!ran.stderr.contains('\0'));
    assert!(ran.stderr.contains("\\x00"), "{}", ran.stderr);
    // Its whole group was killed: what it started too.
    let pid: i32 = std::fs::read_to_string(&left_pid)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        crate::support::processes_with("sleep 6151").is_empty(),
        "pid {pid} lives"
    );
    assert!(crate::support::processes_with("sleep 6152").is_empty());
    // Its environment is scrubbed like the agent's.
    let seen = std::fs::read_to_string(&seen_env).unwrap();
    assert!(!seen.contains("owl-test-secret"), "{seen}");
    assert!(seen.contains("HOME="), "{seen}");
}

/// A test env whose repository has a local bare remote `origin`.
fn env_with_a_remote() -> (TestEnv, std::path::PathBuf) {
    let env = TestEnv::new();
    let remote = env.dir.path().join("remote.git");
    crate::support::git(
        env.dir.path(),
        &["init", "-q", "--bare", remote.to_str().unwrap()],
    );
    crate::support::git(
        &env.repo,
        &["remote", "add", "origin", remote.to_str().unwrap()],
    );
    (env, remote)
}

/// Runs contrib/notify-pull-request on `payload` with a fake `gh` first on PATH (it writes
/// its argv, one per line, and its cwd to `gh.txt`); what `gh` was told, if it ran.
fn run_pull_request_hook(payload: &Value, args: &[&str]) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let said = dir.path().join("gh.txt");
    let gh = dir.path().join("gh");
    std::fs::write(
        &gh,
        format!(
            "#!/bin/sh\npwd > {s}\nprintf '%s\\n' \"$@\" >> {s}\n",
            s = said.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&gh, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = std::process::Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/contrib/notify-pull-request"
    ))
    .args(args)
    .env("PATH", path)
    .stdin(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    use std::io::Write;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(payload.to_string().as_bytes()).unwrap();
    drop(stdin);
    assert!(child.wait().unwrap().success());
    std::fs::read_to_string(said).ok()
}

#[test]
fn the_pull_request_hook_pushes_a_verified_branch_and_opens_a_draft_and_nothing_else() {
    let (env, remote) = env_with_a_remote();
    crate::support::git(&env.repo, &["branch", "owl/ab12cd"]);
    let tip = crate::support::git(&env.repo, &["rev-parse", "owl/ab12cd"]);
    let payload = serde_json::json!({
        "event": "job-done", "at": "2026-11-30T03:10:00Z", "job_id": "ab12cd",
        "job_name": null, "job_state": "done", "job_reason": null,
        "repo": env.repo.display().to_string(), "branch": "owl/ab12cd", "run_id": 3,
        "account": "work", "outcome": "succeeded", "stop_reason": null, "cost_usd": 0.12,
        "until": null, "prompt_summary": "Fix the flaky parser test",
        "handoff": "status: done\n\nFixed the race; `$(rm -rf ~)` stays text.\n",
        "check": {"command": ["sh", "-c", "test -f fixed"], "status": "passed",
                  "exit_code": 0, "duration_ms": 42, "commit": tip.trim()},
        "verified": true
    });
    crate::support::assert_schema("notify", &payload);
    let gh = run_pull_request_hook(&payload, &[]).expect("gh was not run");
    let pushed = crate::support::git(&remote, &["rev-parse", "refs/heads/owl/ab12cd"]);
    assert_eq!(
        pushed.trim(),
        crate::support::git(&env.repo, &["rev-parse", "owl/ab12cd"]).trim()
    );
    let lines: Vec<&str> = gh.lines().collect();
    assert_eq!(
        std::path::Path::new(lines[0]).canonicalize().unwrap(),
        env.repo.canonicalize().unwrap()
    );
    assert_eq!(
        &lines[1..8],
        [
            "pr",
            "create",
            "--draft",
            "--head",
            "owl/ab12cd",
            "--title",
            "Fix the flaky parser test"
        ]
    );
    assert_eq!(lines[8], "--body");
    assert!(
        gh.contains("Verified by owl: `'sh' '-c' 'test -f fixed'` exited 0 in 42 ms."),
        "{gh}"
    );
    assert!(
        gh.contains("Fixed the race; `$(rm -rf ~)` stays text."),
        "{gh}"
    );

    // Done on the agent's word alone, or another event: nothing pushed, no pull request.
    for (key, value) in [
        ("verified", Value::Bool(false)),
        ("event", "run-ended".into()),
    ] {
        let mut other = payload.clone();
        other[key] = value;
        other["branch"] = "owl/other".into();
        crate::support::git(&env.repo, &["branch", "owl/other"]);
        assert_eq!(run_pull_request_hook(&other, &[]), None, "{key}");
        let refs = crate::support::git(&remote, &["for-each-ref", "--format=%(refname)"]);
        assert!(!refs.contains("owl/other"), "{refs}");
        crate::support::git(&env.repo, &["branch", "-D", "owl/other"]);
    }
}

#[test]
fn a_claimed_done_that_fails_its_check_is_told_and_a_verified_done_carries_its_check() {
    let (env, path) = notify_env("", "");
    env.script(&done_script("success.jsonl", 0));
    env.add_with(&["--check", "sh -c 'test -f fixed'"], "Fix it\nwith care");
    env.tick();
    let got = notes(&path);
    let events: Vec<&str> = got.iter().map(|n| n["event"].as_str().unwrap()).collect();
    assert_eq!(events, ["run-ended", "check-failed"]);
    assert_eq!(got[1]["check"]["status"], "failed");
    assert_eq!(got[1]["check"]["exit_code"], 1);
    assert_eq!(got[1]["verified"], false);
    assert_eq!(got[1]["prompt_summary"], "Fix it");
    env.script("read-prompt\nwrite fixed yes\\n\nwrite .owl/handoff.md status: done\\n\\nFixed.\\n\ncommit fix\nreplay success.jsonl\nwait-stdin-eof\nexit 0\n");
    env.tick();
    let got = notes(&path);
    let done = got.last().unwrap();
    for note in &got {
        crate::support::assert_schema("notify", note);
    }
    assert_eq!(done["event"], "job-done", "{got:?}");
    assert_eq!(done["verified"], true);
    assert_eq!(done["check"]["status"], "passed");
    assert_eq!(
        done["check"]["command"],
        serde_json::json!(["sh", "-c", "test -f fixed"])
    );
    assert_eq!(done["handoff"], "status: done\n\nFixed.\n");
}

#[test]
fn the_pull_request_hook_pushes_the_very_commit_that_was_verified_or_nothing() {
    let (env, remote) = env_with_a_remote();
    let verified = crate::support::git(&env.repo, &["rev-parse", "HEAD"]);
    let verified = verified.trim();
    // The branch moved past what was verified (a commit nobody checked).
    crate::support::git(&env.repo, &["branch", "owl/ab12cd"]);
    crate::support::git(&env.repo, &["checkout", "-q", "owl/ab12cd"]);
    std::fs::write(env.repo.join("unchecked.txt"), "BAD\n").unwrap();
    crate::support::git(&env.repo, &["add", "unchecked.txt"]);
    crate::support::git(&env.repo, &["commit", "-q", "-m", "unchecked"]);
    crate::support::git(&env.repo, &["checkout", "-q", "main"]);
    let mut payload = serde_json::json!({
        "event": "job-done", "at": "2026-11-30T03:10:00Z", "job_id": "ab12cd",
        "job_name": null, "job_state": "done", "job_reason": null,
        "repo": env.repo.display().to_string(), "branch": "owl/ab12cd", "run_id": 3,
        "account": "work", "outcome": "succeeded", "stop_reason": null, "cost_usd": 0.12,
        "until": null, "prompt_summary": "Fix it", "handoff": null,
        "check": {"command": ["true"], "status": "passed", "exit_code": 0,
                  "duration_ms": 1, "commit": verified},
        "verified": true
    });
    crate::support::assert_schema("notify", &payload);
    run_pull_request_hook(&payload, &[]).expect("gh was not run");
    let pushed = crate::support::git(&remote, &["rev-parse", "refs/heads/owl/ab12cd"]);
    assert_eq!(
        pushed.trim(),
        verified,
        "the hook pushed what was not verified"
    );

    // Without the verified commit's id, nothing is pushed.
    payload["check"].as_object_mut().unwrap().remove("commit");
    payload["branch"] = "owl/other".into();
    crate::support::git(&env.repo, &["branch", "owl/other"]);
    assert_eq!(run_pull_request_hook(&payload, &[]), None);
    let refs = crate::support::git(&remote, &["for-each-ref", "--format=%(refname)"]);
    assert!(!refs.contains("owl/other"), "{refs}");
}
