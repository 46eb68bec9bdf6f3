//! Runs whose supervising tick died (kill -9, power loss): found by the next tick, their survivors killed by identity, marked `lost`.

use anyhow::Result;
use chrono::{DateTime, Utc};

use crate::model::{JobReason, JobState, RunOutcome};
use crate::store::{RunFinish, RunIdentity, Store};
use crate::supervise::process::{LostProcesses, Supervisor};
use crate::supervise::Executor;

/// One Run found lost.
#[derive(Debug, Clone, PartialEq)]
pub struct LostRun {
    pub run_id: i64,
    pub job_id: String,
    pub survivors_killed: usize,
}

/// Marks every Run whose supervisor is gone as `lost`, after killing what survives of it,
/// and puts its Job back in the queue (the lost Run counts toward `maxRuns`).
///
/// Call only while holding the tick lock: then no live tick can be supervising a Run.
pub fn recover_lost_runs(
    store: &mut Store,
    executor: &dyn Executor,
    state_dir: &std::path::Path,
    commit_author: &str,
    now: DateTime<Utc>,
) -> Result<Vec<LostRun>> {
    let mut lost = Vec::new();
    for run in store.running_identities()? {
        if executor.supervisor_alive(&supervisor_of(&run)) {
            // Alive yet not holding the lock: not ours to judge. Leave it for a later tick.
            tracing::warn!(
                run = run.run_id,
                "run {} is marked running by a live owl",
                run.run_id
            );
            continue;
        }
        let killed = executor.kill_lost(&lost_processes(&run));
        let supervisor = run.owl_pid.map_or("?".into(), |p| p.to_string());
        // Nothing the lost Run wrote is lost with it (ADR-0017).
        let worktree = crate::workspace::worktree_path(&state_dir.join("worktrees"), &run.job_id);
        let job = store.job(&run.job_id)?;
        let workspace = job
            .as_ref()
            .filter(|_| worktree.exists())
            .map(|job| crate::workspace::Workspace::open(&worktree, job))
            .transpose()
            .unwrap_or_else(|e| {
                tracing::warn!("opening what run {} left: {e:#}", run.run_id);
                None
            });
        let safety_commit = workspace.as_ref().and_then(|w| {
            w.safety_commit(
                commit_author,
                &format!("owl: uncommitted work left by run {}", run.run_id),
            )
            .unwrap_or_else(|e| {
                tracing::warn!("committing what run {} left: {e:#}", run.run_id);
                None
            })
        });
        let finish = RunFinish {
            outcome: Some(RunOutcome::Lost),
            stop_reason: Some(format!(
                "the tick supervising it (pid {supervisor}) died; found by a later tick"
            )),
            survivors_killed: Some(killed as i64),
            head_after: workspace.as_ref().and_then(|w| w.head()),
            safety_commit,
            cause: Some(crate::model::Cause::Job),
            ..Default::default()
        };
        // A lost Run counts: the model may have worked, and a Job that kills its tick
        // every time must not run forever.
        let runs = store.counted_runs(&run.job_id)? + 1;
        let max_runs = store.job(&run.job_id)?.map_or(u32::MAX, |j| j.max_runs);
        let (state, reason) = match crate::outcome::max_runs_reached(runs, max_runs) {
            Some(why) => (JobState::Failed, why),
            None => (JobState::Queued, JobReason::Lost { run_id: run.run_id }),
        };
        store.finish_run(run.run_id, &finish, state, Some(&reason), None, now)?;
        lost.push(LostRun {
            run_id: run.run_id,
            job_id: run.job_id,
            survivors_killed: killed,
        });
    }
    Ok(lost)
}

/// Who supervised a Run, as recorded with it.
pub fn supervisor_of(run: &RunIdentity) -> Supervisor {
    Supervisor {
        pid: run.owl_pid,
        start_time: run.owl_start_time,
        boot_id: run.boot_id.clone(),
    }
}

fn lost_processes(run: &RunIdentity) -> LostProcesses {
    LostProcesses {
        run_id: run.run_id,
        agent: run
            .pid
            .and_then(|p| i32::try_from(p).ok())
            .zip(run.child_start_time),
        boot_id: run.boot_id.clone(),
    }
}
