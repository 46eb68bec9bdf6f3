//! One suite of store tests, run against both engines: SQLite in a temp dir and PostgreSQL on the test server.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};

use super::engine::params;
use super::{RunStart, Store};
use crate::config::ExecutorKind;
use crate::model::{
    Cause, JobReason, JobState, NewJob, RunFinish, RunOutcome, Snapshot, SnapshotSource,
};

/// Each case twice: `sqlite::NAME` and `postgres::NAME`.
macro_rules! suite {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(#[test]
            fn $case() {
                let dir = tempfile::tempdir().unwrap();
                let mut store = super::Store::open(&dir.path().join("owl.db")).unwrap();
                super::$case(&mut store);
            })*
        }
        mod postgres {
            $(#[test]
            fn $case() {
                let db = super::super::testing::TestDatabase::new();
                let mut store = db.store();
                super::$case(&mut store);
            })*
        }
    };
}

mod user_use;
use user_use::*;

suite!(
    jobs_are_kept_listed_and_moved,
    a_job_after_others_is_released_when_they_are_done,
    runs_start_end_and_are_counted_by_the_database,
    the_newest_figure_of_each_window_wins,
    account_notes_are_set_and_cleared,
    verdicts_hold_per_binary_and_version,
    owls_share_is_kept_when_a_run_settles,
    the_open_jobs_are_counted_as_the_plan_reads_them,
    the_users_use_is_folded_by_hour_without_owls_runs,
    a_window_owl_used_and_the_user_found_full_is_recorded_once,
);

fn at(s: &str) -> DateTime<Utc> {
    crate::clock::parse(s).unwrap()
}

fn job(id: &str, after: &[&str]) -> NewJob {
    NewJob {
        id: id.into(),
        name: Some(format!("job {id}")),
        prompt: format!("do {id}"),
        repo: "/r".into(),
        base: "main".into(),
        base_commit: Some("0".repeat(40)),
        account: None,
        priority: 0,
        max_runs: 10,
        max_run_time_secs: 60,
        max_budget_usd: Some(0.5),
        max_job_budget_usd: None,
        permission_mode: "dontAsk".into(),
        allowed_tools: vec!["Read".into()],
        disallowed_tools: vec![],
        allow_hosts: vec![],
        model: None,
        check: None,
        after: after.iter().map(|a| a.to_string()).collect(),
        base_after: None,
        machine: Some("here".into()),
    }
}

fn start(job_id: &str, now: DateTime<Utc>) -> RunStart {
    RunStart {
        job_id: job_id.into(),
        account: "work".into(),
        agent_version: Some("2.1.332".into()),
        owl_pid: 42,
        owl_start_time: Some(7),
        boot_id: Some("boot".into()),
        started_at: now,
        head_before: None,
        budget_usd: Some(0.5),
        executor: ExecutorKind::Local,
        machine: "here".into(),
        lease: std::time::Duration::from_secs(60),
    }
}

fn listed_states(store: &Store) -> Vec<(String, JobState, usize)> {
    let mut out = Vec::new();
    store
        .for_each_listed_job(true, |j| {
            out.push((j.id.to_string(), j.state, j.counted_runs));
            Ok(())
        })
        .unwrap();
    out
}

fn jobs_are_kept_listed_and_moved(store: &mut Store) {
    let now = at("2026-11-30T03:00:00Z");
    store
        .insert_jobs(&[job("a", &[]), job("b", &[]), job("c", &[])], now)
        .unwrap();
    assert!(
        store.insert_job(&job("a", &[]), now).is_err(),
        "an id taken"
    );
    let a = store.job("a").unwrap().unwrap();
    assert_eq!(
        (a.prompt.as_str(), a.state, a.allowed_tools.clone()),
        ("do a", JobState::Queued, vec!["Read".to_string()])
    );
    assert!(store.job("zz").unwrap().is_none());
    assert!(store.job_exists("b").unwrap());
    let moved = store
        .move_job(
            "b",
            &[JobState::Queued],
            JobState::Cancelled,
            Some(&JobReason::Note {
                text: "by hand".into(),
            }),
            now,
        )
        .unwrap();
    assert!(moved);
    let again = store
        .move_job("b", &[JobState::Queued], JobState::Done, None, now)
        .unwrap();
    assert!(!again, "moved only from the states named");
    assert_eq!(store.job_state("b").unwrap(), Some(JobState::Cancelled));
    let open: Vec<String> = store
        .plan_jobs()
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(open, ["a", "c"], "in the order they were added");
    let cancelled = store.jobs_in(&[JobState::Cancelled]).unwrap();
    assert_eq!(cancelled.len(), 1);
    assert_eq!(
        cancelled[0]
            .reason
            .as_ref()
            .map(|r| r.to_string())
            .as_deref(),
        Some("by hand")
    );
    store.set_base("c", "owl/a", &"1".repeat(40)).unwrap();
    store.set_job_limits("c", 3, Some(2.5)).unwrap();
    let c = store.job("c").unwrap().unwrap();
    assert_eq!(
        (c.base.as_str(), c.max_runs, c.max_job_budget_usd),
        ("owl/a", 3, Some(2.5))
    );
    let until = now + Duration::minutes(10);
    store
        .move_job_until(
            "c",
            &[JobState::Queued],
            JobState::Queued,
            None,
            Some(until),
            now,
        )
        .unwrap();
    assert_eq!(store.job("c").unwrap().unwrap().not_before, Some(until));
    assert_eq!(listed_states(store).len(), 3);
}

fn a_job_after_others_is_released_when_they_are_done(store: &mut Store) {
    let now = at("2026-11-30T03:00:00Z");
    store.insert_job(&job("a", &[]), now).unwrap();
    store.insert_job(&job("z", &[]), now).unwrap();
    store.insert_job(&job("b", &["z", "a"]), now).unwrap();
    assert_eq!(store.job_state("b").unwrap(), Some(JobState::Waiting));
    assert_eq!(
        store.job_deps("b").unwrap(),
        ["z", "a"],
        "in the order given"
    );
    let plan = store.plan_jobs().unwrap();
    let b = plan.iter().find(|j| j.id == "b").unwrap();
    assert_eq!(b.after.len(), 2);
    store
        .move_job("a", &[JobState::Queued], JobState::Done, None, now)
        .unwrap();
    assert_eq!(
        store.job_state("b").unwrap(),
        Some(JobState::Waiting),
        "z is not done"
    );
    store
        .move_job("z", &[JobState::Queued], JobState::Done, None, now)
        .unwrap();
    assert_eq!(
        store.job_state("b").unwrap(),
        Some(JobState::Queued),
        "released"
    );
    // A Job added after its dependencies are done is queued at once.
    store.insert_job(&job("c", &["a"]), now).unwrap();
    assert_eq!(store.job_state("c").unwrap(), Some(JobState::Queued));
}

fn runs_start_end_and_are_counted_by_the_database(store: &mut Store) {
    let now = at("2026-11-30T03:00:00Z");
    store.insert_job(&job("j", &[]), now).unwrap();
    let first = store.start_run(&start("j", now)).unwrap().unwrap();
    assert_eq!(
        store.start_run(&start("j", now)).unwrap(),
        None,
        "the Job is running"
    );
    store.set_run_process(first, 4242, Some(99)).unwrap();
    store
        .set_run_progress(first, "assistant", 2, Some("session-1"))
        .unwrap();
    let live = store.running_identities().unwrap();
    assert_eq!(live.len(), 1);
    assert_eq!(
        (live[0].pid, live[0].child_start_time),
        (Some(4242), Some(99))
    );
    let finish = RunFinish {
        outcome: Some(RunOutcome::Succeeded),
        cost_usd: Some(0.25),
        cause: Some(Cause::Job),
        num_turns: Some(3),
        ..Default::default()
    };
    let end = now + Duration::minutes(30);
    store
        .finish_run(first, &finish, JobState::Queued, None, None, end)
        .unwrap();
    let run = store.run(first).unwrap().unwrap();
    assert_eq!(run.outcome, Some(RunOutcome::Succeeded));
    assert_eq!(run.session_id.as_deref(), Some("session-1"));
    assert_eq!(run.ended_at, Some(end));
    assert_eq!(store.job_state("j").unwrap(), Some(JobState::Queued));
    let second = store.start_run(&start("j", end)).unwrap().unwrap();
    assert!(second > first);
    assert_eq!(
        store.counted_runs("j").unwrap(),
        1,
        "the one in progress is not counted"
    );
    assert_eq!(
        listed_states(store),
        [("j".to_string(), JobState::Running, 1)]
    );
    assert!((store.job_cost("j").unwrap() - 0.25).abs() < 1e-9);
    assert_eq!(
        store.last_finished_run("j", second).unwrap().unwrap().id,
        first
    );
    assert_eq!(store.running_runs().unwrap().len(), 1);
    assert_eq!(store.runs_ended_since(now).unwrap().len(), 1);
    assert_eq!(store.runs_touching(now, end).unwrap().len(), 2);
    assert_eq!(store.runs_of("j").unwrap().len(), 2);
    assert!(store.account_login_seen("work").unwrap());
    assert!(!store.account_login_seen("home").unwrap());
}

fn snapshot(window: &str, percent: f64, observed: &str) -> Snapshot {
    Snapshot {
        account: "work".into(),
        window: window.into(),
        percent,
        resets_at: Some(at("2026-11-30T05:00:00Z")),
        observed_at: at(observed),
        source: SnapshotSource::RateLimitEvent,
        run_id: None,
        model: None,
    }
}

fn the_newest_figure_of_each_window_wins(store: &mut Store) {
    store
        .insert_snapshots(&[
            snapshot("five_hour", 40.0, "2026-11-30T02:00:00Z"),
            snapshot("seven_day", 20.0, "2026-11-30T02:00:00Z"),
        ])
        .unwrap();
    store
        .insert_snapshot(&snapshot("five_hour", 55.0, "2026-11-30T02:30:00Z"))
        .unwrap();
    // An older figure arriving late is kept in the history but is not the newest.
    store
        .insert_snapshot(&snapshot("five_hour", 10.0, "2026-11-30T01:00:00Z"))
        .unwrap();
    let latest = store.latest_snapshots().unwrap();
    let figures: Vec<(&str, f64)> = latest
        .iter()
        .map(|s| (s.window.as_str(), s.percent))
        .collect();
    assert_eq!(figures, [("five_hour", 55.0), ("seven_day", 20.0)]);
    assert_eq!(
        store.windows_of("work").unwrap(),
        ["five_hour", "seven_day"]
    );
    let history = store
        .snapshots_between(
            "work",
            "five_hour",
            at("2026-11-30T00:00:00Z"),
            at("2026-11-30T03:00:00Z"),
        )
        .unwrap();
    let percents: Vec<f64> = history.iter().map(|s| s.percent).collect();
    assert_eq!(percents, [10.0, 40.0, 55.0], "oldest first");
    let pruned = store
        .prune_snapshots(at("2026-11-30T02:10:00Z"), 100)
        .unwrap();
    assert_eq!(pruned, 3);
    assert_eq!(
        store.latest_snapshots().unwrap().len(),
        2,
        "the newest stay"
    );
}

fn account_notes_are_set_and_cleared(store: &mut Store) {
    let now = at("2026-11-30T03:00:00Z");
    assert_eq!(store.account_note("work").unwrap().not_logged_in, None);
    store
        .set_not_logged_in("work", Some("run `claude /login`"), now)
        .unwrap();
    let until = now + Duration::minutes(20);
    store.set_backoff("work", Some(until), 2, now).unwrap();
    store
        .set_rate_limited_until("work", Some(until), now)
        .unwrap();
    store
        .set_agent_checked("work", "/bin/claude 1 2", "2.1.332", now)
        .unwrap();
    let note = store.account_note("work").unwrap();
    assert_eq!(note.not_logged_in.as_deref(), Some("run `claude /login`"));
    assert_eq!((note.backoff_until, note.outages), (Some(until), 2));
    assert_eq!(note.rate_limited_until, Some(until));
    assert_eq!(note.agent_checked_version.as_deref(), Some("2.1.332"));
    store.set_not_logged_in("work", None, now).unwrap();
    store.set_backoff("work", None, 0, now).unwrap();
    let note = store.account_note("work").unwrap();
    assert_eq!((note.not_logged_in, note.backoff_until), (None, None));
}

fn verdicts_hold_per_binary_and_version(store: &mut Store) {
    let verdict = |version: &str, passed| super::Verdict {
        version: version.into(),
        passed,
        failed: if passed {
            vec![]
        } else {
            vec!["a turn".into()]
        },
        checked_at: at("2026-11-30T03:00:00Z"),
    };
    store
        .set_verdict("/bin/claude 1 2", &verdict("2.2.0", true))
        .unwrap();
    store
        .set_verdict("/bin/claude 1 2", &verdict("2.2.1", false))
        .unwrap();
    assert_eq!(
        store.verdict("/bin/claude 1 2", "2.2.1").unwrap(),
        Some(verdict("2.2.1", false))
    );
    store
        .set_verdict("/bin/claude 1 2", &verdict("2.2.1", true))
        .unwrap();
    assert!(
        store
            .verdict("/bin/claude 1 2", "2.2.1")
            .unwrap()
            .unwrap()
            .passed
    );
    assert!(
        store
            .verdict("/bin/claude 1 2", "2.2.0")
            .unwrap()
            .unwrap()
            .passed
    );
    assert_eq!(store.verdict("/bin/claude 1 2", "9").unwrap(), None);
}

fn owls_share_is_kept_when_a_run_settles(store: &mut Store) {
    let now = at("2026-11-30T03:00:00Z");
    store.insert_job(&job("j", &[]), now).unwrap();
    // Seen before the Run: 30%. During it: 35%, then 42%.
    store
        .insert_snapshot(&snapshot("five_hour", 30.0, "2026-11-30T02:50:00Z"))
        .unwrap();
    let run = store.start_run(&start("j", now)).unwrap().unwrap();
    for (percent, observed) in [
        (35.0, "2026-11-30T03:05:00Z"),
        (42.0, "2026-11-30T03:10:00Z"),
    ] {
        let mut s = snapshot("five_hour", percent, observed);
        s.run_id = Some(run);
        store.insert_snapshot(&s).unwrap();
    }
    store
        .finish_run(
            run,
            &RunFinish::default(),
            JobState::Queued,
            None,
            None,
            now,
        )
        .unwrap();
    store.record_shares(run).unwrap();
    store.record_shares(run).unwrap();
    let shares = store.job_shares("j").unwrap();
    assert_eq!(shares.len(), 1, "kept once, however often recorded");
    assert_eq!((shares[0].baseline, shares[0].peak), (30.0, 42.0));
    assert!(shares[0].baseline_known);
    assert_eq!(store.shares_by_job().unwrap()["j"], shares);
    let reset = at("2026-11-30T05:00:00Z");
    assert_eq!(
        store.instance_share("work", "five_hour", reset).unwrap(),
        (12.0, false)
    );
    assert_eq!(
        store.run_baseline(run, "five_hour", reset).unwrap(),
        (30.0, true)
    );
}

/// A group of open Jobs: Account, state, time to wait for, elsewhere, waits for a Job.
type GroupKey = (
    Option<String>,
    &'static str,
    Option<DateTime<Utc>>,
    bool,
    bool,
);

/// What the store counts, and what reading every open Job says it should count.
fn counted_and_read(store: &Store) -> (BTreeMap<GroupKey, usize>, BTreeMap<GroupKey, usize>) {
    let mut counted = BTreeMap::new();
    let count = store.count_queue("here").unwrap();
    for g in count.groups {
        let key = (
            g.account,
            g.state.as_str(),
            g.not_before,
            g.elsewhere,
            g.after,
        );
        *counted.entry(key).or_default() += g.count;
    }
    let mut read = BTreeMap::new();
    let mut running = Vec::new();
    for j in store.plan_jobs().unwrap() {
        if j.state == JobState::Running {
            running.push(j.id);
            continue;
        }
        let elsewhere = j.machine.as_deref().is_some_and(|m| m != "here");
        let after = j.after.iter().any(|(_, s)| *s != JobState::Done);
        *read
            .entry((j.account, j.state.as_str(), j.not_before, elsewhere, after))
            .or_default() += 1;
    }
    assert_eq!(count.running, running);
    (counted, read)
}

fn the_open_jobs_are_counted_as_the_plan_reads_them(store: &mut Store) {
    let now = at("2026-11-30T03:00:00Z");
    let mut bound = job("c", &[]);
    bound.account = Some("work".into());
    let mut there = job("d", &[]);
    there.machine = Some("there".into());
    let jobs = [job("a", &[]), job("b", &[]), bound, there, job("e", &["a"])];
    store.insert_jobs(&jobs, now).unwrap();
    let same = |store: &Store| {
        let (counted, read) = counted_and_read(store);
        assert_eq!(counted, read);
    };
    same(store);
    let until = now + Duration::minutes(10);
    let queued = [JobState::Queued];
    store
        .move_job_until("b", &queued, JobState::Waiting, None, Some(until), now)
        .unwrap();
    store.start_run(&start("c", now)).unwrap().unwrap();
    same(store);
    // Its dependency done, "e" is released; a cancelled Job leaves the queue.
    store
        .move_job("a", &queued, JobState::Done, None, now)
        .unwrap();
    store
        .move_job("d", &queued, JobState::Cancelled, None, now)
        .unwrap();
    same(store);
    // A Job requeued by hand before its dependency is done is queued and still waits.
    store.insert_job(&job("h", &[]), now).unwrap();
    store.insert_job(&job("g", &["h"]), now).unwrap();
    let waiting = [JobState::Waiting];
    store
        .move_job("g", &waiting, JobState::Cancelled, None, now)
        .unwrap();
    store
        .move_job("g", &[JobState::Cancelled], JobState::Queued, None, now)
        .unwrap();
    same(store);
    let (counted, _) = counted_and_read(store);
    let g = (None, "queued", None, false, true);
    assert_eq!(counted.get(&g), Some(&1), "{counted:?}");
    // Many moves: PostgreSQL's count folds its rows as it reads them, and holds.
    for _ in 0..150 {
        store
            .move_job("h", &queued, JobState::Waiting, None, now)
            .unwrap();
        store
            .move_job("h", &waiting, JobState::Queued, None, now)
            .unwrap();
    }
    same(store);
    same(store);
    if store.db.is_postgres() {
        let rows: i64 = store
            .db
            .query_one("SELECT COUNT(*) FROM queue_deltas", params![], |r| r.get(0))
            .unwrap();
        assert!(rows <= 8, "{rows} rows of moves after the fold");
    }
}
