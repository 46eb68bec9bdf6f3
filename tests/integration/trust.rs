//! Verified means verified, tried as an attacker (issue 35): the agent controls its Job's
//! branch, its working copy and every file of its repository, and a careless user writes
//! `~` and names odd files; what owl calls verified is still the user's check passing on
//! the very commit the repository holds, and nothing the agent planted runs as the user.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::{
    alive, done_script, git, read_pid, show_text, stderr_of, tick_into_check, wait_until, TestEnv,
};

/// Writes an executable shell script.
fn script_file(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Runs `cmd` to its end, failing the test (and killing it) if it is not over within 20 s:
/// a command that waits for ever must fail, not hang the suite.
fn output_within(mut cmd: std::process::Command) -> std::process::Output {
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("{cmd:?} did not end within 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// The agent commits an executable `~/bin/check-feature` inside its working copy, which
/// passes; the user's own script of that name, in the home, fails.
const PLANTED_CHECK: &str = "read-prompt\n\
     sh mkdir -p '~/bin' && printf '#!/bin/sh\\nexit 0\\n' > '~/bin/check-feature' && chmod +x '~/bin/check-feature'\n\
     write .owl/handoff.md status: done\\n\\nAll done.\\n\n\
     commit done\n\
     replay success.jsonl\nwait-stdin-eof\nexit 0\n";

#[test]
fn a_check_written_with_a_tilde_runs_the_users_script_never_the_agents() {
    for (how, config) in [
        ("--check", ""),
        ("config", "defaults:\n  check: ['~/bin/check-feature']\n"),
    ] {
        let env = TestEnv::with_config(config);
        let home = env.dir.path().join("home");
        let users = home.join("bin/check-feature");
        script_file(&users, "echo 'the feature is missing' >&2; exit 1");
        env.script(PLANTED_CHECK);
        let id = match how {
            "--check" => env.add_with(&["--check", "~/bin/check-feature"], "Add the feature"),
            _ => env.add("Add the feature"),
        };
        let shown = env.show(&id);
        assert_eq!(
            shown["check"]["command"][0],
            users.display().to_string(),
            "{how}: {shown}"
        );
        let text = show_text(&env, &id);
        assert!(
            text.contains(&format!("runs {}", users.display())),
            "{how}: {text}"
        );
        let tick = env.tick();
        assert_eq!(tick["job_state"], "queued", "{how}: {tick}");
        let shown = env.show(&id);
        assert_eq!(shown["verified"], false, "{how}: {shown}");
        assert_eq!(shown["runs"][0]["check"]["status"], "failed", "{how}");
    }
}

#[test]
fn a_tilde_owl_cannot_expand_is_refused_on_its_line() {
    let env = TestEnv::new();
    let out = env
        .owl()
        .args(["add", "--check", "~other/bin/check", "Never", "--repo"])
        .arg(&env.repo)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_of(&out).contains("~other/bin/check"), "{out:?}");
    let env = TestEnv::with_config("defaults:\n  check: ['~other/bin/check']\n");
    let out = env.owl().args(["config", "check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    assert!(
        err.contains("defaults.check") && err.contains("line") && err.contains("~other"),
        "{err}"
    );
}

#[test]
fn a_relative_check_is_said_to_be_the_working_copys_file() {
    let env = TestEnv::new();
    let id = env.add_with(&["--check", "./scripts/check"], "Relative");
    let text = show_text(&env, &id);
    assert!(
        text.contains("runs ./scripts/check in the Job's working copy"),
        "{text}"
    );
}

#[test]
fn a_sandboxed_check_cannot_plant_what_the_users_morning_git_runs() {
    let env = TestEnv::sandboxed("");
    let marker = env.dir.path().join("ran-as-the-user");
    let touch = format!("touch {}", marker.display());
    env.script(&done_script("success.jsonl", 0));
    // The project's tests, run by the check, are the agent's code.
    let check = format!(
        "sh -c 'git config core.fsmonitor \"{touch}\"; git config core.hooksPath hooks2; \
         mkdir -p hooks2; printf \"#!/bin/sh\\n{touch}\\n\" > .git/hooks/post-checkout; \
         chmod +x .git/hooks/post-checkout; cp .git/hooks/post-checkout hooks2/post-checkout'"
    );
    let id = env.add_with(&["--check", &check], "Plant from the check");
    let tick = env.tick();
    assert_eq!(tick["job_state"], "done", "{tick}");
    let clone = env.state.join("worktrees").join(&id);
    let morning = |when: &str| {
        git(&clone, &["status"]);
        git(
            &clone,
            &["checkout", "-q", "-b", &format!("morning-{when}")],
        );
        assert!(
            !marker.exists(),
            "{when}: git in the clone ran what the check planted"
        );
        let config = std::fs::read_to_string(clone.join(".git/config")).unwrap();
        assert!(!config.contains("fsmonitor"), "{when}: {config}");
        assert!(!config.contains("hooksPath"), "{when}: {config}");
    };
    morning("after-the-tick");
    // By hand, the same.
    let out = env.owl().args(["check", &id]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    morning("after-owl-check");
}

/// A sandboxed Job whose second Run rewrites the branch its first brought home.
#[test]
fn a_rewritten_branch_is_never_called_verified() {
    let env = TestEnv::sandboxed("");
    env.script(
        "read-prompt\nwrite feature.txt BAD\\n\n\
         write .owl/handoff.md status: continue\\n\\nMore.\\n\n\
         commit bad\nreplay success.jsonl\nwait-stdin-eof\nexit 0\n",
    );
    let id = env.add_with(&["--check", "grep -q GOOD feature.txt"], "Rewrite");
    let tick = env.tick();
    assert_eq!(tick["job_state"], "queued", "{tick}");
    let branch = format!("owl/{id}");
    let bad = git(&env.repo, &["rev-parse", &branch]);
    env.script(
        "read-prompt\nsh git reset -q --hard HEAD~1\n\
         write feature.txt GOOD\\n\n\
         write .owl/handoff.md status: done\\n\\nDone.\\n\n\
         commit good\nreplay success.jsonl\nwait-stdin-eof\nexit 0\n",
    );
    let tick = env.tick();
    assert_ne!(tick["job_state"], "done", "{tick}");
    // The repository still holds what the first Run brought home.
    assert_eq!(git(&env.repo, &["rev-parse", &branch]), bad);
    let shown = env.show(&id);
    assert_eq!(shown["verified"], false, "{shown}");
    assert_eq!(shown["state"], "blocked", "{shown}");
    let reason = shown["reason"].as_str().unwrap();
    assert!(reason.contains("rewrote"), "{reason}");
    let note = shown["runs"][1]["note"].as_str().unwrap_or_default();
    assert!(!note.contains("moved since the Run began"), "{note}");
    assert!(note.contains("rewrote"), "{note}");
}

#[test]
fn a_verified_check_records_the_commit_it_passed_at() {
    let env = TestEnv::new();
    env.script(&done_script("success.jsonl", 0));
    let id = env.add_with(&["--check", "true"], "Verified");
    let tick = env.tick();
    assert_eq!(tick["job_state"], "done", "{tick}");
    let tip = git(&env.repo, &["rev-parse", &format!("owl/{id}")]);
    let shown = env.show(&id);
    assert_eq!(shown["verified"], true, "{shown}");
    assert_eq!(shown["last_check"]["commit"], tip.trim(), "{shown}");
}

#[test]
fn the_sandbox_hides_the_credentials_of_the_readmes_integrations() {
    // A writable ~/.cargo (a build cache) still hides cargo's publish token in it.
    let home = |env: &TestEnv| env.dir.path().join("home");
    let env = TestEnv::sandboxed("");
    let cargo = home(&env).join(".cargo");
    std::fs::create_dir_all(&cargo).unwrap();
    let config = std::fs::read_to_string(&env.config).unwrap().replace(
        "  writable: [",
        &format!("  writable: [{}, ", cargo.display()),
    );
    std::fs::write(&env.config, config).unwrap();
    let home = home(&env);
    let secrets = [
        ".config/gh/hosts.yml",
        ".git-credentials",
        ".config/git/credentials",
        ".netrc",
        ".cargo/credentials.toml",
    ];
    for (i, file) in secrets.iter().enumerate() {
        std::fs::create_dir_all(home.join(file).parent().unwrap()).unwrap();
        std::fs::write(home.join(file), format!("CANARY-{i}\n")).unwrap();
    }
    let reads: String = secrets
        .iter()
        .map(|f| format!("sh cat ~/{f} >> seen.txt 2>&1; true\n"))
        .collect();
    env.script(&format!(
        "read-prompt\n{reads}write .owl/handoff.md status: continue\\n\\nMore.\\n\n\
         commit look\nreplay success.jsonl\nwait-stdin-eof\nexit 0\n"
    ));
    let id = env.add("Look for tokens");
    let tick = env.tick();
    assert_eq!(tick["action"], "ran", "{tick}");
    let seen = git(&env.repo, &["show", &format!("owl/{id}:seen.txt")]);
    assert!(
        !seen.contains("CANARY"),
        "a credential reached the agent: {seen}"
    );
}

/// A check that leaves a process in a session of its own, its pid in `pidfile`.
fn escaping_check(pidfile: &Path, then: &str) -> String {
    format!(
        "sh -c 'setsid sleep 600 & echo $! > {0}.tmp; mv {0}.tmp {0}; {then}'",
        pidfile.display()
    )
}

#[test]
fn owl_check_by_hand_dies_with_everything_it_started() {
    let env = TestEnv::with_config("defaults:\n  checkTimeout: 1s\n");
    env.script(&done_script("success.jsonl", 0));
    let passing = env.dir.path().join("passing.pid");
    let hanging = env.dir.path().join("hanging.pid");
    let pass = env.add_with(&["--check", &escaping_check(&passing, "exit 0")], "Pass");
    env.tick();
    let hang = env.add_with(&["--check", &escaping_check(&hanging, "wait")], "Hang");
    env.tick();
    for (id, pidfile, code) in [(&pass, &passing, 0), (&hang, &hanging, 1)] {
        std::fs::remove_file(pidfile).unwrap();
        let out = env.owl().args(["check", id]).output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{out:?}");
        let pid = read_pid(pidfile);
        wait_until("owl check left what its check started alive", || {
            !alive(pid)
        });
    }
}

#[test]
fn a_cancel_stops_a_running_check() {
    let env = TestEnv::new();
    env.script(&done_script("success.jsonl", 0));
    let pidfile = env.dir.path().join("check.pid");
    let check = format!(
        "sh -c 'echo $$ > {0}.tmp; mv {0}.tmp {0}; exec sleep 600'",
        pidfile.display()
    );
    let (id, tick, pid) = tick_into_check(&env, &check, &pidfile);
    env.owl().args(["cancel", &id]).assert().success();
    let cancelled = Instant::now();
    wait_until("the cancel did not stop the check", || !alive(pid));
    assert!(
        cancelled.elapsed() < Duration::from_secs(10),
        "the check ran on for {:?} after the cancel",
        cancelled.elapsed()
    );
    let out = tick.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(env.show(&id)["state"], "cancelled");
}

#[test]
fn a_prompt_file_is_read_bounded_and_a_fifo_is_refused_not_waited_on() {
    let env = TestEnv::new();
    let fifo = env.dir.path().join("prompt.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let big = env.dir.path().join("big.md");
    std::fs::write(&big, vec![b'a'; 2 << 20]).unwrap();
    for file in [Path::new("/dev/zero"), &fifo, &big] {
        // add --prompt-file
        let mut cmd = env.owl_std();
        cmd.args(["add", "--repo"])
            .arg(&env.repo)
            .arg("--prompt-file")
            .arg(file);
        let out = output_within(cmd);
        assert_eq!(out.status.code(), Some(2), "{file:?}: {out:?}");
        assert!(
            stderr_of(&out).contains(&file.display().to_string()),
            "{out:?}"
        );
        // add --from, the file named on line 4
        let plan = env.dir.path().join("plan.yaml");
        std::fs::write(
            &plan,
            format!(
                "- repo: {repo}\n  prompt: Fine\n- repo: {repo}\n  promptFile: {}\n",
                file.display(),
                repo = env.repo.display()
            ),
        )
        .unwrap();
        let mut cmd = env.owl_std();
        cmd.args(["add", "--from"]).arg(&plan);
        let out = output_within(cmd);
        assert_eq!(out.status.code(), Some(2), "{file:?}: {out:?}");
        let err = stderr_of(&out);
        assert!(
            err.contains("line 4")
                && err.contains("promptFile")
                && err.contains("nothing was queued"),
            "{err}"
        );
    }
    let jobs = env
        .owl()
        .args(["jobs", "--all", "--json"])
        .output()
        .unwrap();
    let jobs: serde_json::Value = serde_json::from_slice(&jobs.stdout).unwrap_or_default();
    assert!(jobs.as_array().is_none_or(|j| j.is_empty()), "{jobs}");
}

#[test]
fn a_stacked_job_whose_dependencys_branch_was_merged_and_deleted_starts_on_its_work() {
    let env = TestEnv::new();
    env.script(
        "read-prompt\nwrite a.txt from-a\\n\n\
         write .owl/handoff.md status: done\\n\\nA.\\n\n\
         commit a\nreplay success.jsonl\nwait-stdin-eof\nexit 0\n",
    );
    env.add_with(&["--name", "first"], "First");
    let second = env.add_with(&["--name", "second", "--after", "first"], "Second");
    assert_eq!(env.tick()["job_state"], "done");
    let last = git(&env.repo, &["rev-parse", "owl/first"]);
    env.owl().args(["clean", "first"]).assert().success();
    // The user merges the work and deletes its branch, as one does.
    git(
        &env.repo,
        &["merge", "-q", "--no-ff", "-m", "merge", "owl/first"],
    );
    git(&env.repo, &["branch", "-q", "-D", "owl/first"]);
    env.script(&done_script("success.jsonl", 0));
    let tick = env.tick();
    assert_eq!(tick["job_id"], second, "{tick}");
    let shown = env.show(&second);
    assert_eq!(shown["base_commit"], last.trim(), "{shown}");
    assert_ne!(shown["base"], "HEAD", "{shown}");
    let files = git(&env.repo, &["ls-tree", "-r", "--name-only", "owl/second"]);
    assert!(
        files.contains("a.txt"),
        "started without first's work: {files}"
    );
}

#[test]
fn a_job_whose_dependencies_are_done_no_longer_says_it_waits_for_them() {
    let env = TestEnv::new();
    env.script(&done_script("success.jsonl", 0));
    env.add_with(&["--name", "first"], "First");
    let before = env.add_with(&["--name", "second", "--after", "first"], "Second");
    assert_eq!(env.show(&before)["state"], "waiting");
    assert_eq!(env.tick()["job_state"], "done");
    let later = env.add_with(&["--name", "third", "--after", "first"], "Third");
    for id in [&before, &later] {
        let shown = env.show(id);
        assert_eq!(shown["state"], "queued", "{shown}");
        assert!(shown["reason"].is_null(), "{shown}");
        let text = show_text(&env, id);
        assert!(!text.contains("waiting"), "{text}");
    }
    let jobs = env.owl().args(["jobs"]).output().unwrap();
    let jobs = String::from_utf8_lossy(&jobs.stdout);
    assert!(!jobs.contains("waiting"), "{jobs}");
    let report = env.owl().args(["report"]).output().unwrap();
    let report = String::from_utf8_lossy(&report.stdout);
    assert!(!report.contains("waiting — after"), "{report}");
}

#[test]
fn a_dependency_and_the_queue_order_are_told_in_different_words() {
    let env = TestEnv::new();
    let first = env.add("First");
    let second = env.add("Second");
    let third = env.add_with(&["--after", &first], "Third");
    let out = env.owl().args(["status"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line_of = |id: &str| {
        text.lines()
            .find(|l| l.contains(id))
            .unwrap_or_else(|| panic!("{id} not in {text}"))
            .to_string()
    };
    assert!(
        line_of(&second).contains(&format!("behind {first}")),
        "{text}"
    );
    assert!(
        line_of(&third).contains(&format!("after {first}")),
        "{text}"
    );
    assert!(!line_of(&second).contains("after"), "{text}");
}

#[test]
fn a_symlink_or_fifo_at_a_lock_path_is_refused_and_named() {
    // A symlink at the Account's run lock: the file it points to is left as it is.
    let env = TestEnv::new();
    env.script(&done_script("success.jsonl", 0));
    env.add("Locked");
    let victim = env.dir.path().join("victim.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    let locks = env.state.join("locks");
    std::fs::create_dir_all(&locks).unwrap();
    let lock = locks.join("work.lock");
    std::os::unix::fs::symlink(&victim, &lock).unwrap();
    let out = env.owl().args(["tick", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        stderr_of(&out).contains(&lock.display().to_string()),
        "{out:?}"
    );
    assert!(stderr_of(&out).contains("symlink"), "{out:?}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");

    // A FIFO there: named, not "Invalid argument".
    std::fs::remove_file(&lock).unwrap();
    assert!(std::process::Command::new("mkfifo")
        .arg(&lock)
        .status()
        .unwrap()
        .success());
    let out = output_within({
        let mut c = env.owl_std();
        c.args(["tick", "--json"]);
        c
    });
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = stderr_of(&out);
    assert!(
        err.contains(&lock.display().to_string()) && err.contains("FIFO"),
        "{err}"
    );
}

#[test]
fn a_symlink_at_a_jobs_lock_is_refused_and_its_target_untouched() {
    let env = TestEnv::new();
    env.script(&done_script("success.jsonl", 0));
    let id = env.add_with(&["--check", "true"], "Locked job");
    env.tick();
    let victim = env.dir.path().join("victim.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    let lock = env.state.join("logs").join(&id).join("job.lock");
    let _ = std::fs::remove_file(&lock);
    std::os::unix::fs::symlink(&victim, &lock).unwrap();
    let out = env.owl().args(["check", &id]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        stderr_of(&out).contains(&lock.display().to_string()),
        "{out:?}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
}

#[test]
fn a_job_name_of_digits_only_is_refused() {
    let env = TestEnv::new();
    let out = env
        .owl()
        .args(["add", "--name", "1", "Digits", "--repo"])
        .arg(&env.repo)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr_of(&out).contains("'1'"), "{out:?}");
    let plan = env.dir.path().join("plan.yaml");
    std::fs::write(
        &plan,
        format!(
            "- repo: {r}\n  prompt: Fine\n- repo: {r}\n  name: '42'\n  prompt: Digits\n",
            r = env.repo.display()
        ),
    )
    .unwrap();
    let out = env.add_from(&plan);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr_of(&out).contains("line 4"), "{out:?}");
}

#[test]
fn owl_check_json_keeps_its_schema() {
    let env = TestEnv::new();
    env.script(&done_script("success.jsonl", 0));
    let id = env.add_with(&["--check", "true"], "Schema");
    env.tick();
    let out = env.owl().args(["check", "--json", &id]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    crate::support::assert_schema("check", &json);
    let tip = git(&env.repo, &["rev-parse", &format!("owl/{id}")]);
    assert_eq!(json["commit"], tip.trim());
}
