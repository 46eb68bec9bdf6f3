//! More of the night: one Run per Account at a time, several Accounts at once; the locks
//! and everything that assumed one live Run.

use std::process::Child;
use std::time::Duration;

use serde_json::Value;

use crate::support::{alive, finish, held_run_script, wait_until, TestEnv};

/// A test env with `accounts` plan Accounts on the fake agent (the first is `work`), each
/// with its own logged-in credential store, and `extra` config lines.
fn accounts_env(accounts: &[&str], extra: &str) -> TestEnv {
    let env = TestEnv::new();
    env.write_config(&format!("{}{extra}", env.accounts_block(accounts)));
    env
}

/// Every Run the state dir has in progress, as `status --json` lists them.
fn live_runs(env: &TestEnv) -> Vec<Value> {
    env.status()["live_runs"].as_array().unwrap().clone()
}

/// `owl tick --json --account NAME`, which must succeed.
fn tick_for(env: &TestEnv, account: &str) -> Value {
    let out = env
        .owl()
        .args(["tick", "--json", "--account", account])
        .assert()
        .success();
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

#[test]
fn sixteen_ticks_at_once_over_three_accounts_start_exactly_three_runs() {
    let env = accounts_env(&["work", "two", "three"], "");
    env.script(&held_run_script(
        &env.release_file(),
        "write .owl/handoff.md status: done\\n\ncommit handoff\n",
    ));
    let jobs: Vec<String> = (0..5).map(|i| env.add(&format!("Job {i}"))).collect();
    let mut ticks: Vec<Child> = (0..16).map(|_| env.spawn_tick()).collect();
    // Three Runs hold their Accounts until released: every other tick met them live.
    crate::support::wait_until_ticks_left(&mut ticks, 3, Duration::from_secs(120));
    let live = live_runs(&env);
    assert_eq!(live.len(), 3, "{live:?}");
    let mut accounts: Vec<&str> = live
        .iter()
        .map(|r| r["account"].as_str().unwrap())
        .collect();
    accounts.sort();
    assert_eq!(accounts, ["three", "two", "work"]);
    let mut live_jobs: Vec<&str> = live.iter().map(|r| r["job_id"].as_str().unwrap()).collect();
    live_jobs.sort();
    live_jobs.dedup();
    assert_eq!(live_jobs.len(), 3, "one Job ran twice: {live:?}");
    assert_eq!(env.status()["running"]["run_id"], live[0]["run_id"]);
    env.release();
    let actions = crate::support::actions(ticks);
    assert_eq!(
        actions.iter().filter(|a| *a == "ran").count(),
        3,
        "{actions:?}"
    );
    assert!(
        actions.iter().all(|a| a == "ran" || a == "busy"),
        "{actions:?}"
    );
    let ran: usize = jobs
        .iter()
        .map(|j| env.show(j)["runs"].as_array().unwrap().len())
        .sum();
    assert_eq!(ran, 3);
}

#[test]
fn a_run_lock_or_pick_lock_deleted_under_a_live_run_starts_no_second_run_there() {
    let env = accounts_env(&["work"], "");
    env.script(&held_run_script(&env.release_file(), ""));
    env.add("First");
    env.add("Second");
    let first = env.spawn_tick();
    env.wait_running();
    // A cleanup script removes every lock file under the live Run. (Written so that it
    // runs on an owl with the tick lock alone, as the main this issue was filed against
    // had: there the next tick started a second Run.)
    std::fs::remove_file(env.state.join("tick.lock")).unwrap();
    let had_run_lock = std::fs::remove_file(env.state.join("locks/work.lock")).is_ok();
    let second = env.tick();
    assert_eq!(second["action"], "busy", "{second}");
    assert!(
        had_run_lock,
        "the live Run held no lock file of its Account"
    );
    assert_eq!(live_runs(&env).len(), 1);
    // Replaced by another file: the same.
    std::fs::write(env.state.join("locks/work.lock"), "").unwrap();
    let third = env.tick();
    assert_eq!(third["action"], "busy", "{third}");
    env.release();
    assert_eq!(finish(first)["action"], "ran");
    assert_eq!(live_runs(&env).len(), 0);
}

#[test]
fn max_concurrent_runs_caps_the_runs_of_a_state_dir() {
    let env = accounts_env(&["work", "two"], "maxConcurrentRuns: 1\n");
    env.script(&held_run_script(&env.release_file(), ""));
    env.add("First");
    env.add("Second");
    let first = env.spawn_tick();
    env.wait_running();
    let second = env.tick();
    assert_eq!(second["action"], "busy", "{second}");
    let reason = second["reason"].as_str().unwrap();
    assert!(reason.contains("maxConcurrentRuns is 1"), "{reason}");
    env.release();
    finish(first);
    env.write_config("accounts:\n  work: {}\nmaxConcurrentRuns: 0\n");
    let out = env.owl().args(["config", "check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("maxConcurrentRuns must be at least 1"));
}

#[test]
fn a_tick_for_one_account_takes_its_jobs_and_the_unbound_ones_only() {
    let env = accounts_env(&["work", "two"], "");
    env.script(&crate::support::done_script("success.jsonl", 0));
    let bound_elsewhere = env.add_with(&["--account", "two"], "On two");
    let unbound = env.add("Anywhere");
    let tick = tick_for(&env, "work");
    assert_eq!(tick["job_id"], unbound.as_str(), "{tick}");
    assert_eq!(tick["account"], "work");
    let tick = tick_for(&env, "work");
    assert_eq!(tick["action"], "idle", "{tick}");
    assert_eq!(env.show(&bound_elsewhere)["state"], "queued");
    let out = env
        .owl()
        .args(["tick", "--account", "wrok"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("did you mean 'work'"));
}

/// Two Runs live at once, on `work` and `two`, each held until `release`; their ticks.
fn two_live_runs(env: &TestEnv) -> (Child, Child) {
    let a = env.spawn_tick();
    wait_until("the first Run never started", || live_runs(env).len() == 1);
    let b = env.spawn_tick();
    wait_until("the second Run never started", || {
        live_runs(env)
            .iter()
            .filter(|r| !r["pid"].is_null())
            .count()
            == 2
    });
    (a, b)
}

#[test]
fn sigterm_to_one_tick_and_a_cancel_of_one_run_stop_only_that_run() {
    let env = accounts_env(&["work", "two", "three"], "");
    env.script(&held_run_script(&env.release_file(), ""));
    let jobs: Vec<String> = (0..3).map(|i| env.add(&format!("Job {i}"))).collect();
    let (a, b) = two_live_runs(&env);
    let c = env.spawn_tick();
    wait_until("the third Run never started", || {
        live_runs(&env)
            .iter()
            .filter(|r| !r["pid"].is_null())
            .count()
            == 3
    });
    let live = live_runs(&env);
    let job_of = |i: usize| live[i]["job_id"].as_str().unwrap().to_string();
    let pid_of = |i: usize| live[i]["pid"].as_i64().unwrap() as i32;
    // SIGTERM to the first tick: its Run alone is interrupted.
    unsafe { libc::kill(a.id() as i32, libc::SIGTERM) };
    let stopped = finish(a);
    assert_eq!(stopped["outcome"], "interrupted", "{stopped}");
    assert_eq!(stopped["job_id"], job_of(0).as_str());
    assert!(alive(pid_of(1)) && alive(pid_of(2)));
    // A cancel of the second Run's Job: that Run alone is stopped.
    env.owl().args(["cancel", &job_of(1)]).assert().success();
    let cancelled = finish(b);
    assert_eq!(cancelled["job_state"], "cancelled", "{cancelled}");
    assert!(alive(pid_of(2)));
    assert_eq!(live_runs(&env).len(), 1);
    env.release();
    assert_eq!(finish(c)["action"], "ran");
    assert_eq!(jobs.len(), 3);
}

#[test]
fn kill_9_of_one_of_two_live_ticks_loses_only_its_run() {
    let env = accounts_env(&["work", "two"], "");
    // Each agent leaves a tool process in a session of its own, as the Bash tool does.
    env.script(&format!(
        "read-prompt\nreplay success.jsonl 1 1\nspawn-session 6173\nwait-for {}\nreplay success.jsonl 2 3\nwait-stdin-eof\n",
        env.release_file().display()
    ));
    env.add("First");
    env.add("Second");
    let (mut a, b) = two_live_runs(&env);
    let tools = || crate::support::processes_with("sleep 6173").len();
    wait_until("the agents' tools never started", || tools() == 2);
    let live = live_runs(&env);
    let lost_job = live[0]["job_id"].as_str().unwrap().to_string();
    let lost_pid = live[0]["pid"].as_i64().unwrap() as i32;
    let kept_pid = live[1]["pid"].as_i64().unwrap() as i32;
    a.kill().unwrap();
    a.wait().unwrap();
    // The next tick records the killed one's Run lost and kills what is left of it; the
    // other Run goes on. (It is a tick for the live Run's Account, so that it starts no
    // Run of its own on the freed one.)
    let kept_account = live[1]["account"].as_str().unwrap();
    let next = tick_for(&env, kept_account);
    assert_eq!(next["action"], "busy", "{next}");
    wait_until("the lost Run's agent outlived recovery", || {
        !alive(lost_pid)
    });
    assert!(alive(kept_pid), "the live Run was taken for a lost one");
    // Its survivor killed by its own marker; the live Run's tool untouched.
    wait_until("the lost Run's tool survived recovery", || tools() == 1);
    assert_eq!(live_runs(&env).len(), 1);
    assert_eq!(env.show(&lost_job)["runs"][0]["outcome"], "lost");
    env.release();
    let other = finish(b);
    assert_eq!(other["action"], "ran");
    assert_eq!(other["outcome"], "succeeded", "{other}");
    assert_eq!(tools(), 0, "the recorded Run's leftover was not killed");
}

#[test]
fn ticks_for_different_accounts_started_together_keep_max_concurrent_runs() {
    let mut env = accounts_env(&["a", "b", "c"], "maxConcurrentRuns: 1\n");
    // The first tick stops between its pick and its Run, holding its Account: the moment
    // the per-Account timers' ticks race through.
    let gate = env.dir.path().join("version-gate");
    env.extra_env
        .push(("FAKE_AGENT_VERSION_GATE".into(), gate.display().to_string()));
    env.script(&crate::support::done_script("success.jsonl", 0));
    for account in ["a", "b", "c"] {
        env.add_with(&["--account", account], &format!("On {account}"));
    }
    let mut first = env
        .owl_std()
        .args(["tick", "--json", "--account", "a"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let waiting = gate.with_extension("waiting");
    crate::support::wait_for_child(&mut first, "the first tick never reached its Run", || {
        waiting.exists()
    });
    for account in ["b", "c"] {
        let mut other = env
            .owl_std()
            .args(["tick", "--json", "--account", account])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // It must decide at once; one that went on to start its own Run would wait at the
        // same gate, and this wait would fail.
        let started = std::time::Instant::now();
        let out = loop {
            if let Some(_status) = other.try_wait().unwrap() {
                break other.wait_with_output().unwrap();
            }
            if started.elapsed() > std::time::Duration::from_secs(20) {
                let _ = other.kill();
                std::fs::write(&gate, "").unwrap();
                panic!("the tick for {account} went on to start a second Run");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let tick: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(tick["action"], "busy", "{account}: {tick}");
        assert_eq!(
            tick["reason"],
            "maxConcurrentRuns is 1 and no Run is live yet; another tick is starting one more",
            "{account}: {tick}"
        );
    }
    std::fs::write(&gate, "").unwrap();
    let first = finish(first);
    assert_eq!(first["outcome"], "succeeded", "{first}");
}
