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
pub fn requeue(ctx: &Ctx, id: &str) -> Result<u8> {
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
    store.set_job_state(
        id,
        JobState::Queued,
        Some("requeued by a person"),
        None,
        crate::clock::now()?,
    )?;
    println!("{id} queued");
    Ok(0)
}
