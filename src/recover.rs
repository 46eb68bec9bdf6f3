//! Runs whose supervising tick died (kill -9, power loss) or could not write their end: found by the next tick, their survivors killed by identity, recorded from what they left on disk or marked `lost`.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use anyhow::Result;
use chrono::{DateTime, Utc};

use crate::config::Config;
use crate::driver::{AgentEvent, AgentResult};
use crate::model::{JobReason, JobState, RunFinish, RunOutcome};
use crate::store::{RunIdentity, Store};
use crate::supervise::process::{LostProcesses, Supervisor};

/// How much of a lost Run's transcript is read for its result: the result is its last line.
const TRANSCRIPT_TAIL: u64 = 4 * 1024 * 1024;

/// One Run found without an outcome and its tick gone.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LostRun {
    pub(crate) run_id: i64,
    pub(crate) job_id: String,
    pub(crate) survivors_killed: usize,
    /// The file its own tick kept its outcome in, recorded from it: the Run is not lost.
    pub(crate) recorded_from: Option<PathBuf>,
}

/// Records every Run whose supervisor is gone, after killing what survives of it: from
/// the outcome its tick kept on disk when it could not write the database, else as `lost`
/// with what its transcript says, its Job back in the queue (a lost Run counts toward
/// `maxRuns`).
///
/// Call only while holding the pick lock: a live tick has recorded its supervisor with its
/// Run by then, and a Run whose supervisor lives is left to it.
pub(crate) fn recover_lost_runs(
    store: &mut Store,
    config: &Config,
    now: DateTime<Utc>,
) -> Result<Vec<LostRun>> {
    let mut lost = Vec::new();
    kill_what_is_left_of_runs_lost_elsewhere(store, config)?;
    for run in store.running_identities()? {
        if !is_mine(&run, config) {
            // Another machine's: its processes are not here to ask. Its lease tells
            // (`store.expire_leases`).
            continue;
        }
        // Asked of the Executor that ran it, whichever Accounts use now.
        let executor = crate::supervise::executor_of_run(run.executor, config);
        if executor.supervisor_alive(&supervisor_of(&run)) {
            // Its tick lives and supervises it (several Runs go on at once, one per Account).
            tracing::debug!(run = run.run_id, "run {} is live", run.run_id);
            continue;
        }
        let killed = executor.kill_lost(&lost_processes(&run));
        let kept = config.state().kept_outcome(&run.job_id, run.run_id);
        if store.settle_kept(&kept, run.run_id, &run.job_id)? {
            lost.push(LostRun {
                run_id: run.run_id,
                job_id: run.job_id,
                survivors_killed: killed,
                recorded_from: Some(kept),
            });
            continue;
        }
        record_lost(store, config, &run, killed, now)?;
        lost.push(LostRun {
            run_id: run.run_id,
            job_id: run.job_id,
            survivors_killed: killed,
            recorded_from: None,
        });
    }
    Ok(lost)
}

/// Kills what is left on this machine of its Runs another machine recorded lost when
/// their leases expired (this machine was cut off, or its tick died), unless their
/// supervisor lives and is stopping them itself.
fn kill_what_is_left_of_runs_lost_elsewhere(store: &mut Store, config: &Config) -> Result<()> {
    for run in store.lost_elsewhere(&config.machine)? {
        let executor = crate::supervise::executor_of_run(run.executor, config);
        if executor.supervisor_alive(&supervisor_of(&run)) {
            continue;
        }
        let killed = executor.kill_lost(&lost_processes(&run));
        if killed > 0 {
            errln!(
                "owl: run {} of job {} was recorded lost by another machine; killed {killed} \
                 process(es) it left here",
                run.run_id,
                run.job_id
            );
        }
        store.set_survivors_killed(run.run_id, killed)?;
        // What its cut-off supervisor kept on disk when it could not reach the store: the
        // first outcome stays, and this one is kept as the Run's event.
        let kept = config.state().kept_outcome(&run.job_id, run.run_id);
        store.settle_kept(&kept, run.run_id, &run.job_id)?;
    }
    Ok(())
}

/// Records a Run whose tick died as `lost`, with what its transcript's result says, after
/// its work is brought home; its Job back in the queue, or failed on its last try (a lost
/// Run counts toward `maxRuns`).
fn record_lost(
    store: &mut Store,
    config: &Config,
    run: &RunIdentity,
    killed: usize,
    now: DateTime<Utc>,
) -> Result<()> {
    let supervisor = run.owl_pid.map_or("?".into(), |p| p.to_string());
    // Nothing the lost Run wrote is lost with it (ADR-0017).
    let worktree = config.state().worktree(&run.job_id);
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
    // What the Run's killed git left holding would fail the safety net and every
    // later Run.
    if let Some(w) = &workspace {
        w.warn_of_stale_locks();
    }
    let began_at = store.run(run.run_id)?.and_then(|r| r.head_before);
    let home = match (&workspace, &job) {
        (Some(w), Some(job)) => {
            let mark = config.state().publish_mark(&job.id, run.run_id);
            // Killed while it brought the branch home: what libgit2 left locked is owl's.
            let cleared = crate::workspace::clear_killed_publish(job, &mark);
            if !cleared.is_empty() {
                tracing::warn!(
                    "run {}: removed what owl's killed fetch left in {}: {}",
                    run.run_id,
                    job.repo,
                    cleared.join(", ")
                );
            }
            let home = crate::workspace::HomeRun {
                author: &config.commit_author,
                run_id: run.run_id,
                began_at: began_at.as_deref(),
                mark: &mark,
            };
            w.bring_home(job, &home)
        }
        _ => crate::workspace::BroughtHome::default(),
    };
    // What the agent said of its end, if it got that far: its tick may have died (or
    // failed to write) only after.
    let result = result_in_transcript(store, config, run);
    let said = result.as_ref().map_or(String::new(), |r| {
        format!("; its transcript has the agent's result ({})", r.subtype)
    });
    let (head_after, commits) = ended_at(workspace.as_ref(), began_at.as_deref());
    let finish = RunFinish {
        outcome: Some(RunOutcome::Lost),
        stop_reason: Some(format!(
            "the tick supervising it (pid {supervisor}) died or could not record it; found \
             by a later tick{said}"
        )),
        survivors_killed: Some(killed as i64),
        head_after: head_after.clone(),
        commits,
        safety_commit: home.safety_commit,
        note: home.not_published,
        cause: Some(crate::model::Cause::Job),
        session_id: result.as_ref().and_then(|r| r.session_id.clone()),
        cost_usd: result.as_ref().and_then(|r| r.cost_usd),
        num_turns: result.as_ref().and_then(|r| r.num_turns),
        input_tokens: result.as_ref().and_then(|r| r.input_tokens),
        output_tokens: result.as_ref().and_then(|r| r.output_tokens),
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
    Ok(())
}

/// Where a lost Run's working copy ended, and the commits it added since `began_at`.
fn ended_at(
    workspace: Option<&crate::workspace::Workspace>,
    began_at: Option<&str>,
) -> (Option<String>, Option<i64>) {
    let Some(w) = workspace else {
        return (None, None);
    };
    let head = w.head();
    let commits = w.commits_added(began_at, head.as_deref());
    (head, commits)
}

/// The agent's result line in a lost Run's transcript, read by its Account's Driver: the
/// last one in the transcript's tail. The transcript is the agent's writing: opened as
/// untrusted, and only its tail read.
fn result_in_transcript(store: &Store, config: &Config, run: &RunIdentity) -> Option<AgentResult> {
    let account = store.run(run.run_id).ok()??.account;
    let driver = crate::driver::for_kind(config.accounts.get(&account)?.driver);
    let tail = read_tail(
        &config.state().run_log(&run.job_id, run.run_id),
        TRANSCRIPT_TAIL,
    )?;
    tail.split(|b| *b == b'\n')
        .rev()
        .find_map(|line| match driver.parse_line(line) {
            Ok(AgentEvent::Result(result)) => Some(result),
            _ => None,
        })
}

/// The last `cap` bytes of a file a Run wrote, from the first whole line in them.
fn read_tail(path: &Path, cap: u64) -> Option<Vec<u8>> {
    let mut file = crate::untrusted::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(cap))).ok()?;
    let mut tail = Vec::new();
    file.take(cap).read_to_end(&mut tail).ok()?;
    if len > cap {
        let start = tail
            .iter()
            .position(|b| *b == b'\n')
            .map_or(tail.len(), |i| i + 1);
        tail.drain(..start);
    }
    Some(tail)
}

/// The Runs marked running whose supervising tick lives, oldest first: what holds each
/// Account now, told by the supervisor recorded with the Run (never by a lock file alone,
/// which someone may delete under it). Another machine's Run lives until its lease
/// expires and a tick records it lost.
pub(crate) fn live_runs(store: &Store, config: &Config) -> Result<Vec<RunIdentity>> {
    Ok(store
        .running_identities()?
        .into_iter()
        .filter(|run| {
            !is_mine(run, config)
                || crate::supervise::executor_of_run(run.executor, config)
                    .supervisor_alive(&supervisor_of(run))
        })
        .collect())
}

/// Whether this machine ran `run` (a Run from before machines was this one's).
pub(crate) fn is_mine(run: &RunIdentity, config: &Config) -> bool {
    run.machine.as_deref().is_none_or(|m| m == config.machine)
}

/// Who supervised a Run, as recorded with it.
pub(crate) fn supervisor_of(run: &RunIdentity) -> Supervisor {
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
