//! The store cases of the user's own use (issue 47): folded by hour, and the Window instances the user found full after owl's Runs.

use super::{at, job, snapshot, start};
use crate::model::{Cause, JobState, RunFinish, RunOutcome, Snapshot, SnapshotSource};
use crate::store::Store;

/// Issue 47: the day's figures folded into the user's use by hour, each tick from where the
/// last stopped; the interval a Run of owl's was live in (on any machine sharing the store)
/// says nothing of the user.
pub(super) fn the_users_use_is_folded_by_hour_without_owls_runs(store: &mut Store) {
    let week = |percent: f64, observed: &str| Snapshot {
        window: "seven_day".into(),
        resets_at: Some(at("2026-12-04T00:00:00Z")),
        source: SnapshotSource::Probe,
        ..snapshot("seven_day", percent, observed)
    };
    let accounts = ["work".to_string()];
    store
        .insert_snapshots(&[
            week(20.0, "2026-11-30T10:00:00Z"),
            week(25.0, "2026-11-30T10:30:00Z"),
        ])
        .unwrap();
    store
        .fold_user_use(&accounts, at("2026-11-30T10:40:00Z"))
        .unwrap();
    // A Run of owl's from 11:00 to 12:10 (another machine's, say), then the day again.
    store
        .insert_job(&job("j", &[]), at("2026-11-30T10:50:00Z"))
        .unwrap();
    let run = store
        .start_run(&start("j", at("2026-11-30T11:00:00Z")))
        .unwrap()
        .unwrap();
    let finish = RunFinish {
        outcome: Some(RunOutcome::Succeeded),
        cause: Some(Cause::Job),
        ..Default::default()
    };
    store
        .finish_run(
            run,
            &finish,
            JobState::Done,
            None,
            None,
            at("2026-11-30T12:10:00Z"),
        )
        .unwrap();
    store
        .insert_snapshots(&[
            week(40.0, "2026-11-30T11:30:00Z"),
            week(41.0, "2026-11-30T12:30:00Z"),
            week(44.0, "2026-11-30T13:00:00Z"),
        ])
        .unwrap();
    store
        .fold_user_use(&accounts, at("2026-11-30T13:10:00Z"))
        .unwrap();
    // Folding again finds nothing new: nothing counted twice.
    store
        .fold_user_use(&accounts, at("2026-11-30T13:20:00Z"))
        .unwrap();
    let hours = store
        .user_use_since("work", "weekly", at("2026-11-30T00:00:00Z"))
        .unwrap();
    // 10:00: +5; 11:00 and 12:00 moved while the Run was live (12:30's move from 11:30
    // spans its end): not the user's, not observed; 13:00: +3.
    assert_eq!(
        hours,
        [
            (at("2026-11-30T10:00:00Z"), 5.0),
            (at("2026-11-30T13:00:00Z"), 3.0)
        ]
    );
    // owl's own, apart: 25 to 40 by 11:30, 41 by 12:30.
    let owls = store
        .user_use_since("work", "owl_weekly", at("2026-11-30T00:00:00Z"))
        .unwrap();
    assert_eq!(
        owls,
        [
            (at("2026-11-30T11:00:00Z"), 15.0),
            (at("2026-11-30T12:00:00Z"), 1.0)
        ]
    );
    // Pruned by age.
    store.prune_user_use(at("2026-11-30T11:00:00Z")).unwrap();
    let left = store
        .user_use_since("work", "weekly", at("2026-11-30T00:00:00Z"))
        .unwrap();
    assert_eq!(left, [(at("2026-11-30T13:00:00Z"), 3.0)]);
}

/// Issue 47: a Window instance a figure of the user's day shows full, after owl's Runs used
/// some of it, is recorded once (however many figures show it full), with owl's points; one
/// owl never touched is the user's own doing and not recorded.
pub(super) fn a_window_owl_used_and_the_user_found_full_is_recorded_once(store: &mut Store) {
    let night = at("2026-11-30T03:00:00Z");
    let five = |percent: f64, observed: &str, reset: &str| Snapshot {
        resets_at: Some(at(reset)),
        source: SnapshotSource::Probe,
        ..snapshot("five_hour", percent, observed)
    };
    store.insert_job(&job("j", &[]), night).unwrap();
    store
        .insert_snapshot(&five(10.0, "2026-11-30T02:50:00Z", "2026-11-30T07:00:00Z"))
        .unwrap();
    let run = store.start_run(&start("j", night)).unwrap().unwrap();
    let mut during = five(41.0, "2026-11-30T03:30:00Z", "2026-11-30T07:00:00Z");
    during.run_id = Some(run);
    store.insert_snapshot(&during).unwrap();
    store
        .finish_run(
            run,
            &RunFinish::default(),
            JobState::Queued,
            None,
            None,
            at("2026-11-30T03:40:00Z"),
        )
        .unwrap();
    store.record_shares(run).unwrap();
    // The user's morning: full at 06:10 and still at 06:40; the next instance full too,
    // without owl.
    store
        .insert_snapshots(&[
            five(70.0, "2026-11-30T05:40:00Z", "2026-11-30T07:00:00Z"),
            five(100.0, "2026-11-30T06:10:00Z", "2026-11-30T07:00:00Z"),
            five(100.0, "2026-11-30T06:40:00Z", "2026-11-30T07:00:00Z"),
            five(100.0, "2026-11-30T09:00:00Z", "2026-11-30T12:00:00Z"),
        ])
        .unwrap();
    let accounts = ["work".to_string()];
    store
        .fold_user_use(&accounts, at("2026-11-30T06:20:00Z"))
        .unwrap();
    store
        .fold_user_use(&accounts, at("2026-11-30T09:10:00Z"))
        .unwrap();
    let limited = store
        .user_limited_since("work", at("2026-11-29T00:00:00Z"))
        .unwrap();
    assert_eq!(
        limited,
        [crate::user_use::UserLimited {
            window: "five_hour".into(),
            resets_at: at("2026-11-30T07:00:00Z"),
            at: at("2026-11-30T06:10:00Z"),
            percent: 100.0,
            owl_points: 31.0,
        }]
    );
    // Pruned with the hours of use.
    store.prune_user_use(at("2026-11-30T07:00:00Z")).unwrap();
    assert!(store
        .user_limited_since("work", at("2026-11-29T00:00:00Z"))
        .unwrap()
        .is_empty());
}
