//! `owl cancel` and `owl requeue`: a person's say over a Job's state.

use anyhow::Result;

use super::Ctx;
use crate::bad_input;
use crate::model::JobState;

/// Cancels a Job; a tick supervising its Run sees the state within a second and stops it.
pub fn cancel(ctx: &Ctx, id: &str) -> Result<u8> {
    let mut store = ctx.open_store()?;
    let job = ctx.job(&store, id)?;
    match job.state {
        JobState::Cancelled => {
            println!("{id} is already cancelled");
            return Ok(0);
        }
        JobState::Done | JobState::Failed | JobState::Blocked => {
            bad_input!("job {id} is {}; there is nothing to cancel", job.state)
        }
        _ => {}
    }
    let was_running = job.state == JobState::Running;
    store.set_job_state(
        id,
        JobState::Cancelled,
        Some("cancelled by a person"),
        None,
        crate::clock::now()?,
    )?;
    if was_running {
        println!("{id} cancelled; its Run is being stopped by the tick that supervises it");
    } else {
        println!("{id} cancelled");
    }
    Ok(0)
}

/// Puts a failed, blocked or cancelled Job back in the queue.
pub fn requeue(ctx: &Ctx, id: &str, max_job_budget_usd: Option<f64>) -> Result<u8> {
    if max_job_budget_usd.is_some_and(|x| x.is_nan() || x <= 0.0) {
        bad_input!("--max-job-budget-usd must be a number greater than 0");
    }
    let mut store = ctx.open_store()?;
    let job = ctx.job(&store, id)?;
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
    let runs = store.runs_of(id)?.len() as u32;
    let max_runs = runs + ctx.config.defaults.max_runs;
    store.set_job_limits(id, max_runs, max_job_budget_usd.or(job.max_job_budget_usd))?;
    store.set_job_state(
        id,
        JobState::Queued,
        Some("requeued by a person"),
        None,
        crate::clock::now()?,
    )?;
    println!("{id} queued (up to {} more Runs)", max_runs - runs);
    Ok(0)
}
