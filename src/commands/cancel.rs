//! `owl cancel` and `owl requeue`: a person's say over a Job's state.

use anyhow::Result;

use super::Ctx;
use crate::bad_input;
use crate::model::{CheckStatus, JobReason, JobState};

/// Cancels a Job; a tick supervising its Run sees the state within a second and stops it.
/// What `owl cancel` was asked.
#[derive(Debug, clap::Args)]
pub(crate) struct CancelArgs {
    /// The Job's id.
    job: String,
}

/// What `owl requeue` was asked.
#[derive(Debug, clap::Args)]
pub(crate) struct RequeueArgs {
    /// The Job's id.
    job: String,
    /// A new budget for all the Job's Runs together (what was spent still counts).
    #[arg(long, value_name = "X")]
    max_job_budget_usd: Option<f64>,
}

pub(super) fn cancel(ctx: &Ctx, args: &CancelArgs) -> Result<u8> {
    let id = args.job.as_str();
    let mut store = existing_store(ctx, id)?;
    let job = ctx.job(&store, id)?;
    match job.state {
        JobState::Cancelled => {
            outln!("{id} is already cancelled");
            return Ok(0);
        }
        JobState::Done | JobState::Failed | JobState::Blocked => {
            bad_input!("job {id} is {}; there is nothing to cancel", job.state)
        }
        _ => {}
    }
    // Conditional: a tick may have moved the Job since it was read (to done, say), and
    // a cancel must never overwrite that.
    let from = [JobState::Queued, JobState::Waiting, JobState::Running];
    let now = crate::clock::now()?;
    if !store.move_job(
        id,
        &from,
        JobState::Cancelled,
        Some(&JobReason::CancelledByPerson),
        now,
    )? {
        let state = state_now(&store, id)?;
        crate::bad_input!("job {id} became {state} meanwhile; there is nothing to cancel");
    }
    // A tick that picked the Job but has not started its Run yet sees the cancel when it
    // records the start, and starts nothing; one that has started it stops it.
    let was_running = store.running_runs()?.iter().any(|r| r.job_id == id);
    if was_running {
        outln!("{id} cancelled; its Run is being stopped by the tick that supervises it");
    } else {
        outln!("{id} cancelled");
    }
    Ok(0)
}

/// Puts a failed, blocked or cancelled Job back in the queue.
pub(super) fn requeue(ctx: &Ctx, args: &RequeueArgs) -> Result<u8> {
    let (id, max_job_budget_usd) = (args.job.as_str(), args.max_job_budget_usd);
    if max_job_budget_usd.is_some_and(|x| !x.is_finite() || x <= 0.0) {
        bad_input!("--max-job-budget-usd must be a finite number greater than 0");
    }
    let mut store = existing_store(ctx, id)?;
    let job = ctx.job(&store, id)?;
    let mut reason = JobReason::Requeued;
    if let Some(JobReason::CheckCannotStart(_)) = &job.reason {
        // The work was claimed done and is unchanged: its check runs again now, and a
        // Run is spent only if it fails.
        match check_again(ctx, &mut store, &job)? {
            Rechecked::Decided(code) => return Ok(code),
            Rechecked::Failed(record) => reason = JobReason::CheckFailed(record),
        }
    }
    if !matches!(
        job.state,
        JobState::Failed | JobState::Blocked | JobState::Cancelled
    ) {
        bad_input!(
            "job {id} is {}; only a failed, blocked or cancelled Job can be requeued",
            job.state
        );
    }
    // A person who requeues a Job means "try again": it gets a fresh allowance of
    // defaults.maxRuns Runs from here.
    let runs = store.counted_runs(id)?;
    let max_runs = runs + ctx.config.defaults.max_runs;
    store.set_job_limits(id, max_runs, max_job_budget_usd.or(job.max_job_budget_usd))?;
    let from = [JobState::Failed, JobState::Blocked, JobState::Cancelled];
    let now = crate::clock::now()?;
    if !store.move_job(id, &from, JobState::Queued, Some(&reason), now)? {
        let state = state_now(&store, id)?;
        crate::bad_input!("job {id} became {state} meanwhile; nothing was requeued");
    }
    outln!("{id} queued (up to {} more Runs)", max_runs - runs);
    Ok(0)
}

/// What running a blocked Job's check again decided.
enum Rechecked {
    /// Done (it passed), or still blocked (it still cannot start, or cannot run now): the
    /// exit code.
    Decided(u8),
    /// It ran and failed: the Job is queued again, its next Run told why.
    Failed(crate::model::CheckRecord),
}

/// Runs the check of a Job blocked because its check could not start, for its newest Run.
fn check_again(
    ctx: &Ctx,
    store: &mut crate::store::Store,
    job: &crate::model::Job,
) -> Result<Rechecked> {
    let (Some(check), Some(run)) = (&job.check, store.runs_of(&job.id)?.pop()) else {
        return Ok(Rechecked::Decided(crate::error::EXIT_FAILURE));
    };
    let log = ctx.config.state().run_check_log(&job.id, run.id);
    let (record, not_home) = match super::check::check_now(ctx, store, job, check, &log)? {
        Ok(checked) => (checked.record, checked.not_home),
        Err(why) => {
            errln!("owl: {why}; nothing was requeued");
            return Ok(Rechecked::Decided(crate::error::EXIT_FAILURE));
        }
    };
    store.set_run_check(run.id, &record)?;
    let now = crate::clock::now()?;
    let id = job.id.as_str();
    match record.status {
        // A pass verifies the commit it ran at, and that only: not what the repository holds.
        CheckStatus::Passed if not_home.is_some() => {
            let why = not_home.unwrap_or_default();
            errln!("owl: {id} stays blocked: its check passed, but {why}");
            Ok(Rechecked::Decided(crate::error::EXIT_FAILURE))
        }
        CheckStatus::Passed => {
            store.move_job(id, &[JobState::Blocked], JobState::Done, None, now)?;
            outln!("{id} done: its check ran again and {record}");
            Ok(Rechecked::Decided(crate::error::EXIT_OK))
        }
        CheckStatus::CannotStart => {
            let still = JobReason::CheckCannotStart(record);
            store.move_job(
                id,
                &[JobState::Blocked],
                JobState::Blocked,
                Some(&still),
                now,
            )?;
            errln!("owl: {id} stays blocked: {still}");
            Ok(Rechecked::Decided(crate::error::EXIT_FAILURE))
        }
        _ => Ok(Rechecked::Failed(record)),
    }
}

/// The database, which a command about a Job never creates: with none, there is no Job.
fn existing_store(ctx: &Ctx, id: &str) -> Result<crate::store::Store> {
    match ctx.read_store()? {
        Some(store) => Ok(store),
        None => bad_input!("no job '{id}': no jobs have been added yet"),
    }
}

/// The Job's state as stored now, in words ("gone" if it was deleted).
fn state_now(store: &crate::store::Store, id: &str) -> Result<String> {
    Ok(store
        .job_state(id)?
        .map_or("gone".into(), |s| s.to_string()))
}
