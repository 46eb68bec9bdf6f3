//! A real night's faults (issue 9): a late cancel, a missing login, a figure that would
//! park an Account for good, a corrupt worktree, a busy database, a killed agent's budget.

use std::time::{Duration, Instant};

use predicates::prelude::*;

use crate::support::{
    assert_idle_without_runs, crossing_at_gate_script, done_script, git, TestEnv, Tmpfs,
};

/// Waits (bounded) until `path` exists.
fn wait_for(path: &std::path::Path, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !path.exists() {
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_cancel_between_the_pick_and_the_start_means_no_agent_starts() {
    let mut env = TestEnv::new();
    let gate = env.dir.path().join("version-gate");
    env.extra_env
        .push(("FAKE_AGENT_VERSION_GATE".into(), gate.display().to_string()));
    env.script(&done_script("success.jsonl", 0));
    let id = env.add("Hello");
    let tick = env.spawn_tick();
    // The tick has picked the Job and is checking the agent's version.
    wait_for(&gate.with_extension("waiting"), "the version check");
    env.owl()
        .args(["cancel", &id])
        .assert()
        .success()
        .stdout(predicate::str::contains("cancelled"));
    std::fs::write(&gate, "").unwrap();
    let out = tick.wait_with_output().unwrap();
    assert!(out.status.success());
    let tick: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tick["action"], "idle", "{tick}");
    assert!(
        tick["reason"].as_str().unwrap().contains("is cancelled"),
        "{tick}"
    );
    let show = env.show(&id);
    assert_eq!(show["state"], "cancelled");
    assert!(show["runs"].as_array().unwrap().is_empty());
    assert_eq!(env.recorded("argv.json"), "", "the agent was started");
}

#[test]
fn a_cancel_never_overwrites_done() {
    let env = TestEnv::new();
    env.script(&done_script("success.jsonl", 0));
    let id = env.add("Hello");
    assert_eq!(env.tick()["job_state"], "done");
    env.owl()
        .args(["cancel", &id])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("nothing to cancel"));
    assert_eq!(env.show(&id)["state"], "done");
}

#[test]
fn a_missing_login_found_by_probe_and_doctor_costs_no_run() {
    let mut env = TestEnv::with_config("    limits: {fiveHourMax: 60}\n");
    std::fs::write(&env.usage, "no-plan\n").unwrap();
    env.script(&done_script("success.jsonl", 0));
    let id = env.add("Hello");
    assert_idle_without_runs(&env, &env.tick(), &id, "not logged in");
    let creds = env.dir.path().join("creds");
    env.owl()
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains(format!(
            "log in with `CLAUDE_CONFIG_DIR={} claude`, then /login",
            creds.display()
        )));
    env.owl()
        .arg("doctor")
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "FAIL account work: not logged in (probe: no plan",
        ));
    // Probed at most once per probeMaxAge (10m): not again 5 minutes on, again 11 on.
    let first_probe = env.status()["accounts"][0]["last_probe_at"].clone();
    assert_eq!(first_probe, "2026-11-30T03:00:00Z");
    env.now = "2026-11-30T03:05:00Z".into();
    assert_eq!(env.tick()["action"], "idle");
    assert_eq!(env.status()["accounts"][0]["last_probe_at"], first_probe);
    env.now = "2026-11-30T03:11:00Z".into();
    assert_eq!(env.tick()["action"], "idle");
    assert_eq!(
        env.status()["accounts"][0]["last_probe_at"],
        "2026-11-30T03:11:00Z"
    );
    assert!(env.show(&id)["runs"].as_array().unwrap().is_empty());
    let out = env.owl().args(["probe", "--json"]).assert().code(1);
    let probe: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(probe[0]["logged_in"], false);
    assert_eq!(probe[0]["result"], "no_plan");

    // After /login: `owl probe` sees the plan, records the figures, and the Job runs.
    env.five_hour(&[12.0], "2026-11-30T05:00:00.000Z");
    env.owl()
        .args(["probe", "work"])
        .assert()
        .success()
        .stdout(predicate::str::contains("work: observed five_hour 12%"));
    assert!(env.status()["accounts"][0]["not_logged_in"].is_null());
    assert_eq!(env.tick()["job_state"], "done");
    env.owl()
        .args(["probe", "nosuch"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no account 'nosuch'"));
}

#[test]
fn a_figure_over_the_ceiling_parks_the_account_only_until_a_probe_or_its_window() {
    let mut env = TestEnv::with_config("    limits: {fiveHourMax: 60}\n");
    // Over the ceiling, and no reset time to wait for.
    std::fs::write(
        &env.usage,
        r#"{"five_hour":{"utilization":95,"resets_at":null}}"#,
    )
    .unwrap();
    env.script(&done_script("success.jsonl", 0));
    let id = env.add("Hello");
    assert_eq!(env.tick()["action"], "idle");
    // Twenty minutes on (older than probeMaxAge) the parked Account is probed again, and
    // the Account has gone back to 5%.
    env.now = "2026-11-30T03:20:00Z".into();
    std::fs::write(
        &env.usage,
        r#"{"five_hour":{"utilization":5,"resets_at":null}}"#,
    )
    .unwrap();
    let tick = env.tick();
    assert_eq!(tick["job_state"], "done", "{tick}");
    let _ = id;

    // And with no probe to tell: a figure with no reset expires after its Window.
    let env = TestEnv::with_config("    limits: {fiveHourMax: 60}\n");
    std::fs::write(
        &env.usage,
        r#"{"five_hour":{"utilization":95,"resets_at":null}}"#,
    )
    .unwrap();
    env.add("Hello");
    assert_eq!(env.tick()["action"], "idle");
    let status = env.status();
    assert!(status["accounts"][0]["reason"]
        .as_str()
        .unwrap()
        .contains("reset unknown"));
}

#[test]
fn clean_refuses_unfinished_jobs_a_held_lock_and_an_unreadable_worktree() {
    let env = TestEnv::new();
    env.script("read-prompt\nreplay success.jsonl\nwait-stdin-eof\n");
    let id = env.add("Hello");
    env.tick(); // no Handoff: queued again, worktree kept
    env.owl()
        .args(["clean", &id])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is queued"));
    env.owl().args(["cancel", &id]).assert().success();
    let wt = env.state.join("worktrees").join(&id);
    std::fs::write(wt.join("notes.txt"), "uncommitted\n").unwrap();
    // A corrupt index: git cannot say whether the worktree is clean, so clean refuses.
    let gitdir = git(&wt, &["rev-parse", "--git-dir"]);
    std::fs::write(std::path::Path::new(gitdir.trim()).join("index"), "garbage").unwrap();
    env.owl()
        .args(["clean", &id])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("it was left in place"));
    assert!(wt.join("notes.txt").exists());
    // While a tick holds the pick lock (an flock on the state dir), clean waits its turn.
    let lock = std::fs::File::open(&env.state).unwrap();
    fs2::FileExt::lock_exclusive(&lock).unwrap();
    env.owl()
        .args(["clean", "--finished"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("a tick holds"));
}

#[test]
fn add_refuses_a_name_git_would_refuse_as_a_branch() {
    let env = TestEnv::new();
    for name in ["a.", "fix-it."] {
        env.owl()
            .args(["add", "--name", name, "--repo"])
            .arg(&env.repo)
            .arg("Hello")
            .assert()
            .code(2)
            .stderr(predicate::str::contains("cannot name a git branch"));
    }
    env.owl()
        .args(["jobs", "--json"])
        .assert()
        .success()
        .stdout("[]\n");
}

#[test]
fn a_worktree_that_cannot_be_made_sets_the_job_aside_and_the_jobs_behind_it_run() {
    let mut env = TestEnv::new();
    env.script(&done_script("success.jsonl", 0));
    let id = env.add_with(&["--priority", "5"], "Hello");
    // Its worktree's place, a file: not anything the Job did, and no worktree fits there.
    let place = env.state.join("worktrees").join(&id);
    std::fs::create_dir_all(place.parent().unwrap()).unwrap();
    std::fs::write(&place, "in the way").unwrap();
    env.owl()
        .args(["tick", "--json"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!(
            "job {id} waits until 03:10"
        )));
    let show = env.show(&id);
    assert_eq!(show["state"], "waiting");
    assert_eq!(show["not_before"], "2026-11-30T03:10:00Z");
    assert!(show["reason"]
        .as_str()
        .unwrap()
        .starts_with("preparing the worktree failed"));
    // The queue goes on behind it.
    let behind = env.add("Behind it");
    assert_eq!(env.tick()["job_id"], behind.as_str());
    assert_eq!(env.show(&behind)["state"], "done");
    // Once the place is free and the wait is over, it runs.
    std::fs::remove_file(&place).unwrap();
    env.now = "2026-11-30T03:11:00Z".into();
    assert_eq!(env.tick()["job_state"], "done");
}

/// What a tick killed while making a working copy leaves: no `.git`, an empty or cut-short
/// `.git` file, one leading nowhere, a clone's `.git` without its HEAD. Each is made again.
#[test]
fn a_working_copy_a_killed_tick_left_half_made_is_made_again() {
    for (name, leave) in [
        ("no .git", None),
        ("an empty .git file", Some("")),
        ("a .git file cut short", Some("gitd")),
        (
            "a .git file leading nowhere",
            Some("gitdir: /nonexistent/worktrees/x\n"),
        ),
    ] {
        let env = TestEnv::new();
        env.script(&done_script("success.jsonl", 0));
        let id = env.add("Hello");
        let place = env.state.join("worktrees").join(&id);
        std::fs::create_dir_all(&place).unwrap();
        std::fs::write(place.join("README.md"), "half checked out").unwrap();
        if let Some(text) = leave {
            std::fs::write(place.join(".git"), text).unwrap();
        }
        let tick = env.tick();
        assert_eq!(tick["job_state"], "done", "{name}: {tick}");
    }
    let env = TestEnv::sandboxed("");
    env.script(&done_script("success.jsonl", 0));
    let id = env.add("Hello");
    let place = env.state.join("worktrees").join(&id);
    std::fs::create_dir_all(place.join(".git/objects")).unwrap();
    let tick = env.tick();
    assert_eq!(tick["job_state"], "done", "a clone without HEAD: {tick}");

    // A checkout cut short: the worktree is registered and its `.git` leads there, but the
    // index was never written and a file is missing. Made again, not committed as deleted.
    let env = TestEnv::new();
    env.script("read-prompt\nwrite .owl/handoff.md status: continue\\n\\nMore.\\n\ncommit Step\nreplay success.jsonl\nwait-stdin-eof\n");
    let id = env.add("Hello");
    env.tick();
    let place = env.state.join("worktrees").join(&id);
    let gitdir = env.repo.join(".git/worktrees").join(format!("owl-{id}"));
    std::fs::remove_file(gitdir.join("index")).unwrap();
    std::fs::remove_file(place.join("README.md")).unwrap();
    env.script(&done_script("success.jsonl", 0));
    assert_eq!(env.tick()["job_state"], "done");
    let files = crate::support::git(
        &env.repo,
        &["ls-tree", "-r", "--name-only", &format!("owl/{id}")],
    );
    assert!(files.contains("README.md"), "{files}");
}

#[test]
fn a_run_without_a_result_line_counts_its_cap_toward_the_job_budget() {
    let env = TestEnv::new();
    env.script("read-prompt\nreplay success.jsonl 1 2\nexit 1\n");
    let id = env.add_with(
        &["--max-budget-usd", "0.4", "--max-job-budget-usd", "1"],
        "Hello",
    );
    assert_eq!(env.tick()["outcome"], "failed");
    let show = env.show(&id);
    assert_eq!(show["cost_usd"], 0.4);
    assert_eq!(show["runs"][0]["cost"], "unknown (≤ $0.40)");
    env.owl()
        .args(["show", &id])
        .assert()
        .success()
        .stdout(predicate::str::contains("unknown (≤ $0.40)"));
    assert_eq!(env.tick()["job_state"], "queued");
    // The third Run gets what is left, $0.20; then nothing is left.
    let tick = env.tick();
    let argv = env.recorded("argv.json");
    assert!(argv.contains(r#""--max-budget-usd","0.2""#), "{argv}");
    assert_eq!(tick["job_state"], "failed", "{tick}");
    assert_eq!(env.show(&id)["reason"], "job budget spent");
}

#[test]
fn a_busy_database_does_not_hold_up_a_ceiling_stop() {
    let env = TestEnv::with_config("    limits: {fiveHourMax: 60}\nusagePollInterval: 1h\n");
    let gate = env.dir.path().join("cross-now");
    // No usage answers: the only figure is the crossing one, whatever the timing of a poll.
    env.script(&crossing_at_gate_script(&gate));
    let id = env.add("Hello");
    let tick = env.spawn_tick();
    env.wait_running();
    // Another process holds the write lock through the crossing.
    let mut db = rusqlite::Connection::open(env.state.join("owl.db")).unwrap();
    let tx = db
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    let crossed = Instant::now();
    std::fs::write(&gate, "").unwrap();
    let deadline = crossed + Duration::from_secs(10);
    while !env.recorded("stdin.jsonl").contains("\"interrupt\"") {
        assert!(Instant::now() < deadline, "the stop waited on the database");
        std::thread::sleep(Duration::from_millis(5));
    }
    eprintln!(
        "figure: crossing to interrupt with another writer holding the lock: {:?}",
        crossed.elapsed()
    );
    drop(tx);
    let out = tick.wait_with_output().unwrap();
    let tick: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tick["outcome"], "interrupted", "{tick}");
    // The figure that crossed was recorded once the lock was free.
    let status = env.status();
    let five = crate::support::window(&status, "work", "five_hour");
    assert_eq!(five["percent"], 70.0, "{status}");
    assert_eq!(env.show(&id)["state"], "waiting");
}

#[test]
fn a_stop_cause_after_the_result_is_a_note_not_the_outcome() {
    let env = TestEnv::with_config("    limits: {fiveHourMax: 60}\n");
    env.five_hour(&[10.0], "2026-11-30T05:00:00.000Z");
    env.script(
        "read-prompt\nwrite .owl/handoff.md status: done\\n\\nAll done.\\n\ncommit owl handoff\n\
         replay success.jsonl\n\
         emit {\"type\":\"rate_limit_event\",\"rate_limit_info\":{\"status\":\"allowed_warning\",\"resetsAt\":1796020271,\"rateLimitType\":\"five_hour\",\"utilization\":0.7}}\n\
         wait-stdin-eof\nsleep 60000\n",
    );
    let id = env.add("Hello");
    let tick = env.tick();
    assert_eq!(tick["outcome"], "succeeded", "{tick}");
    assert_eq!(tick["job_state"], "done");
    let run = &env.show(&id)["runs"][0];
    assert_eq!(
        run["note"],
        "after the result: ceiling: five_hour 70% >= fiveHourMax 60"
    );
}

#[test]
fn a_disk_that_fills_during_a_run_still_records_it_and_the_job_waits_for_space() {
    let env = TestEnv::with_config("minFreeSpace: 6MiB\n");
    let _tmpfs = Tmpfs::mount(&env.state, "32m");
    let filler = env.state.join("filler");
    // The agent's build fills the disk to the last byte, then it prints on.
    env.script(&format!(
        "read-prompt\nreplay success.jsonl 1 2\nfill-disk {}\nemit-long 1048576\nsleep 60000\n",
        filler.display()
    ));
    let id = env.add("Build everything");
    let tick = env.tick();
    assert_eq!(tick["outcome"], "failed", "{tick}");
    assert!(
        tick["stop_reason"]
            .as_str()
            .unwrap()
            .starts_with("disk full: "),
        "{tick}"
    );
    let show = env.show(&id);
    assert_eq!(show["state"], "queued");
    assert_eq!(show["runs"][0]["cause"], "disk_full");
    assert_eq!(show["runs"][0]["counts"], false);
    // The reserve gave SQLite the room for the final writes.
    assert!(!env.state.join("reserve").exists());

    // While the disk is full nothing starts, and status says where and how much.
    let idle = env.tick();
    assert_eq!(idle["action"], "idle");
    let why = idle["reason"].as_str().unwrap();
    assert!(why.starts_with("disk full: only "), "{why}");
    assert!(why.contains(&env.state.display().to_string()), "{why}");
    assert!(why.contains("(minFreeSpace 6MiB)"), "{why}");
    env.owl()
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains("disk full: only "));

    // Space back: the reserve is put back and the Job runs.
    std::fs::remove_file(&filler).unwrap();
    env.script(&done_script("success.jsonl", 0));
    assert_eq!(env.tick()["job_state"], "done");
    assert!(env.state.join("reserve").exists());
}

#[test]
fn an_expired_login_over_ten_ticks_fails_no_job() {
    let mut env = TestEnv::new();
    env.script("read-prompt\nreplay api-401-oauth.jsonl\nwait-stdin-eof\nexit 1\n");
    let a = env.add_with(&["--max-runs", "2"], "One");
    let b = env.add_with(&["--max-runs", "2"], "Two");
    for minute in 0..10 {
        env.now = format!("2026-11-30T03:{:02}:00Z", minute * 5);
        env.owl().args(["tick"]).assert().success();
    }
    for id in [&a, &b] {
        let show = env.show(id);
        assert_eq!(show["state"], "queued", "{show}");
        let runs = show["runs"].as_array().unwrap();
        assert!(runs
            .iter()
            .all(|r| r["cause"] == "not_logged_in" && r["counts"] == false));
    }
    // A 401 costs no tokens; the probe that finds a (stale) login lets one Run try again,
    // at most once per probeMaxAge, not every tick.
    let total = env.show(&a)["runs"].as_array().unwrap().len()
        + env.show(&b)["runs"].as_array().unwrap().len();
    assert!(total <= 5, "{total} Runs in 50 minutes");
}

/// A cgroup-v1 freezer group holding processes in uninterruptible sleep (state D), where
/// SIGKILL waits until they are thawed: what a hung filesystem does to a real agent. Thawed
/// and removed on drop. Needs root and the v1 freezer (CI has both); fails without them.
struct Frozen(std::path::PathBuf);

impl Frozen {
    fn freeze(pid: i32) -> Frozen {
        let group = std::path::PathBuf::from(format!(
            "/sys/fs/cgroup/freezer/owl-test-{}-{pid}",
            std::process::id()
        ));
        std::fs::create_dir(&group)
            .unwrap_or_else(|e| panic!("this test needs the cgroup v1 freezer as root: {e}"));
        let frozen = Frozen(group);
        std::fs::write(frozen.0.join("tasks"), pid.to_string()).unwrap();
        std::fs::write(frozen.0.join("freezer.state"), "FROZEN").unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::read_to_string(frozen.0.join("freezer.state"))
            .unwrap()
            .trim()
            != "FROZEN"
        {
            assert!(Instant::now() < deadline, "the agent never froze");
            std::thread::sleep(Duration::from_millis(5));
        }
        frozen
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join("freezer.state"), "THAWED");
        // The pending SIGKILL ends the process once thawed; then the group can go.
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::remove_dir(&self.0).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[test]
fn an_agent_that_survives_sigkill_is_given_up_on_and_the_lock_released() {
    let env = TestEnv::new();
    env.script("read-prompt\nreplay success.jsonl 1 2\nsleep 60000\n");
    let id = env.add("Hello");
    let tick = env.spawn_tick();
    env.wait_running();
    let agent = env.agent_pid();
    let _frozen = Frozen::freeze(agent);
    // Twice: the person means it, straight to SIGKILL, which a frozen process survives.
    let stopped = Instant::now();
    for _ in 0..2 {
        unsafe { libc::kill(tick.id() as i32, libc::SIGTERM) };
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = tick.wait_with_output().unwrap();
    // One graceWindow (2s) after SIGKILL, owl lets go.
    assert!(
        stopped.elapsed() < Duration::from_secs(120),
        "{:?}",
        stopped.elapsed()
    );
    let tick: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tick["outcome"], "failed", "{tick}");
    let why = format!("the agent could not be killed: pid {agent} in state D");
    assert_eq!(tick["stop_reason"], why);
    assert_eq!(env.show(&id)["runs"][0]["cause"], "stopped");
    env.owl()
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains(format!("pid {agent} in state D")));
    // The lock is free: a tick is not busy.
    let out = env
        .owl()
        .args(["tick", "--dry-run", "--json"])
        .assert()
        .success();
    let dry: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_ne!(dry["action"], "busy", "{dry}");
}

/// Issue 23: a Run starts only with its reserve, which needs room of its own beyond
/// `minFreeSpace`: without it the tick is idle and says why, like a disk under it.
#[test]
fn no_run_starts_without_the_reserve_that_records_it() {
    let env = TestEnv::with_config("minFreeSpace: 1MiB\n");
    let _tmpfs = Tmpfs::mount(&env.state, "16m");
    env.script(&done_script("success.jsonl", 0));
    let id = env.add("Hello");
    // Leave less than the reserve needs, more than minFreeSpace.
    let filler = env.state.join("filler");
    let free = |p: &std::path::Path| {
        let out = std::process::Command::new("df")
            .args(["-B1", "--output=avail"])
            .arg(p)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .nth(1)
            .unwrap()
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    let _ = std::fs::remove_file(env.state.join("reserve"));
    let keep = 5 << 20;
    let room = free(&env.state);
    std::fs::write(&filler, vec![b'x'; (room - keep) as usize]).unwrap();
    let tick = env.tick();
    assert_eq!(tick["action"], "idle", "{tick}");
    let why = tick["reason"].as_str().unwrap();
    assert!(
        why.contains("no room to set aside the 4MiB that records a Run"),
        "{why}"
    );
    assert!(env.show(&id)["runs"].as_array().unwrap().is_empty());
    let status = env.owl().arg("status").output().unwrap();
    assert!(String::from_utf8_lossy(&status.stdout).contains("no room to set aside"));
    // With room again, the reserve is made and the Run starts.
    std::fs::remove_file(&filler).unwrap();
    assert_eq!(env.tick()["job_state"], "done");
    assert!(env.state.join("reserve").exists());
}

/// Watches `roots` (and every directory made under them) for changes: each file or
/// directory made, written or renamed into place is one step of making a working copy.
struct Steps {
    fd: i32,
}

impl Steps {
    fn watch(roots: &[&std::path::Path]) -> Steps {
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        assert!(fd >= 0, "inotify_init1");
        let steps = Steps { fd };
        for root in roots {
            steps.add(root);
        }
        steps
    }

    fn add(&self, dir: &std::path::Path) {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
        let mask = libc::IN_CREATE | libc::IN_CLOSE_WRITE | libc::IN_MOVED_TO;
        unsafe { libc::inotify_add_watch(self.fd, path.as_ptr(), mask) };
    }

    /// The steps that came within 50 ms: each its event mask and the name it was on.
    fn next(&self) -> Vec<(u32, String)> {
        let mut poll = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        if unsafe { libc::poll(&mut poll, 1, 50) } <= 0 {
            return Vec::new();
        }
        let mut buf = [0u8; 8192];
        let n = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
        let mut events = Vec::new();
        let mut at = 0usize;
        while n > 0 && at < n as usize {
            let event: libc::inotify_event =
                unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
            let name_at = at + std::mem::size_of::<libc::inotify_event>();
            let name = &buf[name_at..name_at + event.len as usize];
            let name = String::from_utf8_lossy(name)
                .trim_end_matches('\0')
                .to_string();
            events.push((event.mask, name));
            at = name_at + event.len as usize;
        }
        events
    }
}

impl Drop for Steps {
    fn drop(&mut self) {
        unsafe { libc::close(self.fd) };
    }
}

/// Kills a tick with SIGKILL at the `n`th step it takes on disk (a file or directory made,
/// written or renamed in the user's `.git` or under the worktrees dir): making the branch
/// and the working copy, then the Run's own commits and owl's after it; false when the
/// tick ended in fewer steps. inotify tells each step as it happens; the kill lands within
/// a few system calls of it, so the sweep cuts the tick at each step or just after.
fn kill_at_step(env: &TestEnv, n: usize) -> bool {
    let worktrees = env.state.join("worktrees");
    std::fs::create_dir_all(&worktrees).unwrap();
    let git = env.repo.join(".git");
    let mut watched = vec![worktrees.clone(), git.clone(), git.join("refs/heads")];
    let steps = Steps::watch(&watched.iter().map(|p| p.as_path()).collect::<Vec<_>>());
    let mut tick = env.spawn_tick();
    let mut seen = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if tick.try_wait().unwrap().is_some() {
            return false;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the tick ran past 30 s"
        );
        for (mask, name) in steps.next() {
            if name.is_empty() {
                continue;
            }
            seen += 1;
            if mask & libc::IN_ISDIR != 0 {
                // Watch what was made, wherever it was made.
                for root in watched.clone() {
                    let dir = root.join(&name);
                    if dir.is_dir() && !watched.contains(&dir) {
                        steps.add(&dir);
                        watched.push(dir);
                    }
                }
            }
            if seen == n {
                unsafe { libc::kill(tick.id() as i32, libc::SIGKILL) };
                tick.wait().unwrap();
                return true;
            }
        }
    }
}

/// Issue 23: owl killed (SIGKILL) at each step of making a Job's working copy, a worktree
/// or a sandboxed Run's clone, and on through the Run: the next ticks make it again (a
/// registration cut short, a lock a killed git left) and run the Job; no tick fails on what
/// a killed one left.
#[test]
fn owl_killed_at_each_step_of_making_a_working_copy_leaves_nothing_that_stalls_the_queue() {
    for sandboxed in [false, true] {
        let mut n = 1;
        loop {
            let env = if sandboxed {
                TestEnv::sandboxed("")
            } else {
                TestEnv::new()
            };
            env.script(&done_script("success.jsonl", 0));
            let id = env.add("Hello");
            if !kill_at_step(&env, n) {
                break;
            }
            // The next tick finds what was left (a lost Run, if it got that far), and the
            // Job runs within two ticks.
            let first = env.owl().args(["tick", "--json"]).output().unwrap();
            assert!(
                first.status.success(),
                "sandboxed {sandboxed}, killed at step {n}: {}",
                String::from_utf8_lossy(&first.stderr)
            );
            if env.show(&id)["state"] != "done" {
                let second = env.tick();
                assert_eq!(
                    second["job_state"],
                    "done",
                    "sandboxed {sandboxed}, killed at step {n}: {second}; the tick before: {}",
                    String::from_utf8_lossy(&first.stderr)
                );
            }
            n += 1;
            assert!(n < 200, "making a working copy never ended");
        }
        assert!(n > 3, "sandboxed {sandboxed}: only {n} steps were seen");
    }
}

#[test]
fn what_doctor_probes_is_recorded_so_status_need_not_ask_again() {
    let env = TestEnv::with_config("    limits: {fiveHourMax: 60}\n");
    env.five_hour(&[20.0], "2026-11-30T05:00:00.000Z");
    // Before: nothing observed, and status says a probe is due.
    let before = env.status();
    assert!(before["accounts"][0]["last_probe_at"].is_null(), "{before}");
    let out = env.owl().arg("doctor").output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("account work: logged in (probe: observed five_hour 20%"),
        "{said}"
    );
    // After: the figure and the probe are recorded as `owl probe` records them.
    let after = env.status();
    let account = &after["accounts"][0];
    assert_eq!(account["last_probe_at"], "2026-11-30T03:00:00Z", "{after}");
    let five = crate::support::window(&after, "work", "five_hour");
    assert_eq!(five["percent"], 20.0, "{after}");
}

#[test]
fn an_idle_tick_in_the_day_samples_the_users_use_without_a_run_or_a_token() {
    let mut env = TestEnv::new();
    let (gemini, gemini_ran) = crate::support::marking_gemini(&env);
    let accounts = env.accounts_block(&["work"]);
    // Under the prefix's `drivers:` (the fake agent's), the Gemini CLI's line.
    env.write_config(&format!(
        "  gemini:\n    command: {}\nschedule:\n  window: '23:00-07:00'\n{accounts}    \
         limits: {{fiveHourMax: 60}}\n  flash:\n    driver: gemini\n",
        gemini.display()
    ));
    let job = env.add_with(&["--account", "work"], "Waits for the night");
    env.five_hour(&[20.0], "2026-11-30T15:00:00.000Z");
    // Noon: outside the window, nothing runs; the day is read.
    env.now = "2026-11-30T12:00:00Z".into();
    assert_eq!(env.tick()["action"], "idle");
    let last_probe = |env: &TestEnv| {
        let status = env.status();
        let accounts = status["accounts"].as_array().unwrap().clone();
        let work = accounts.iter().find(|a| a["name"] == "work").unwrap();
        work["last_probe_at"].clone()
    };
    assert_eq!(last_probe(&env), "2026-11-30T12:00:00Z");
    let status = env.status();
    assert_eq!(
        crate::support::window(&status, "work", "five_hour")["percent"],
        20.0
    );
    assert!(
        env.show(&job)["runs"].as_array().unwrap().is_empty(),
        "no Run, no token"
    );
    // Not again before sampleEvery (30m); again after it.
    env.five_hour(&[26.0], "2026-11-30T15:00:00.000Z");
    env.now = "2026-11-30T12:20:00Z".into();
    env.tick();
    assert_eq!(last_probe(&env), "2026-11-30T12:00:00Z");
    env.now = "2026-11-30T12:31:00Z".into();
    env.tick();
    assert_eq!(last_probe(&env), "2026-11-30T12:31:00Z");
    let status = env.status();
    assert_eq!(
        crate::support::window(&status, "work", "five_hour")["percent"],
        26.0
    );
    // A Driver with no zero-token read is never started to be sampled.
    assert!(!gemini_ran.exists(), "the Gemini CLI was started to sample");
    assert!(env.show(&job)["runs"].as_array().unwrap().is_empty());
}

#[test]
fn the_days_figures_become_what_owl_learned_of_your_own_use() {
    let mut env = TestEnv::new();
    let accounts = env.accounts_block(&["work"]);
    env.write_config(&format!(
        "schedule:\n  window: '23:00-07:00'\n{accounts}    limits: {{fiveHourMax: 60}}\n"
    ));
    let learned = |env: &TestEnv| env.status()["accounts"][0]["learned"].clone();
    // Monday 30 November, in your day: 20%, then 25% half an hour on, then 27%.
    sample_a_monday(&mut env, &[("10:00", 20.0)]);
    // One figure is no movement: nothing learned yet, and said so (never 0 use).
    assert_eq!(learned(&env)["days"], 0, "{}", learned(&env));
    sample_a_monday(
        &mut env,
        &[("10:31", 25.0), ("11:02", 27.0), ("11:33", 27.0)],
    );
    // Folded by each tick: 10:00 to 11:00 the week rose 5 points, 11:00 to 12:00 2 more.
    let said = learned(&env);
    assert_eq!(said["days"], 1, "{said}");
    assert_eq!(said["weekday"]["typical"], 7.0, "{said}");
    assert!(said["weekend"].is_null(), "{said}");
    assert_eq!(said["first_five_hours"]["typical"], 7.0, "{said}");
    let text = env.owl().arg("status").output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("your own use: learned from 1 day: weekdays 7 pp of the week (P90 7)"),
        "{text}"
    );
}

/// Idle ticks on Monday 30 November at `at` (UTC), the week and the five hours both at
/// each `percent`: the user's day, sampled.
fn sample_a_monday(env: &mut TestEnv, figures: &[(&str, f64)]) {
    for (at, percent) in figures {
        let week = r#""seven_day":{"utilization":P,"resets_at":"2026-12-04T00:00:00.000Z"}"#;
        let line = format!(
            r#"{{"five_hour":{{"utilization":{percent},"resets_at":"2026-11-30T15:00:00.000Z"}},{}}}"#,
            week.replace('P', &percent.to_string())
        );
        std::fs::write(&env.usage, line).unwrap();
        env.now = format!("2026-11-30T{at}:00Z");
        assert_eq!(env.tick()["action"], "idle");
    }
}
