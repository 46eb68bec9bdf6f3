//! `owl clean`: remove the worktrees of finished Jobs; their branches stay, so the work is never lost.

use anyhow::{Context, Result};

use super::Ctx;
use crate::bad_input;
use crate::model::{Job, JobState};
use crate::store::Store;

/// What `owl clean` was asked.
#[derive(Debug, clap::Args)]
pub(crate) struct CleanArgs {
    /// The Job whose worktree to remove.
    #[arg(required_unless_present = "finished", conflicts_with = "finished")]
    job: Option<String>,
    /// Every done, failed, blocked or cancelled Job.
    #[arg(long)]
    finished: bool,
}

pub(super) fn run(ctx: &Ctx, args: &CleanArgs) -> Result<u8> {
    let (job, finished) = (args.job.as_deref(), args.finished);
    let Some(store) = ctx.read_store()? else {
        if let Some(id) = job {
            bad_input!("no job '{id}': no jobs have been added yet");
        }
        outln!("nothing to clean");
        return Ok(0);
    };
    // Refuse what can never be cleaned before waiting on anything.
    chosen(ctx, &store, job, finished)?;
    // The tick lock: no Run may start in a worktree while it is being removed.
    let Some(_lock) = crate::lock::try_pick(&ctx.config.state_dir, &ctx.lock_path())? else {
        anyhow::bail!(
            "a tick holds {}; try again when it is done",
            ctx.lock_path().display()
        );
    };
    // Read again under the lock: a person may have requeued a Job meanwhile.
    let jobs = chosen(ctx, &store, job, finished)?;
    let mut removed = 0;
    for job in &jobs {
        let path = ctx.config.state().worktree(&job.id);
        // A tick starting a Run of it (requeued since) holds its lock, outside the pick lock.
        let held = match ctx.config.state().logs(&job.id).is_dir() {
            true => crate::lock::try_lock(&ctx.config.state().job_lock(&job.id))?.map(Some),
            false => Some(None),
        };
        let Some(_job) = held else {
            outln!("{} is in use by a tick; left in place", path.display());
            continue;
        };
        // Fails closed: a worktree whose status cannot be read may hold work.
        let dirty = path.exists()
            && crate::workspace::Workspace::open(&path, job)
                .and_then(|w| w.is_dirty())
                .with_context(|| {
                    format!(
                        "reading the status of {}; it was left in place",
                        path.display()
                    )
                })?;
        if dirty {
            bad_input!(
                "worktree {} has uncommitted changes; commit or discard them first",
                path.display()
            );
        }
        if crate::workspace::remove_worktree(job, &ctx.worktrees_dir())? {
            removed += 1;
            outln!("removed {} (branch {} kept)", path.display(), job.branch());
        }
    }
    if removed == 0 {
        outln!("no worktree to remove");
    }
    Ok(0)
}

/// The Jobs to clean: the one named, which must be finished, or every finished one.
fn chosen(ctx: &Ctx, store: &Store, job: Option<&str>, finished: bool) -> Result<Vec<Job>> {
    let jobs: Vec<Job> = match job {
        Some(id) => vec![ctx.job(store, id)?],
        None if finished => {
            let states: Vec<JobState> = JobState::ALL
                .into_iter()
                .filter(|s| s.is_finished())
                .collect();
            store.jobs_in(&states)?
        }
        None => bad_input!("owl clean needs a JOB or --finished"),
    };
    if let Some(job) = jobs.iter().find(|j| !j.state.is_finished()) {
        bad_input!(
            "job {} is {}; only a finished Job's worktree can be removed (cancel it first)",
            job.id,
            job.state
        );
    }
    Ok(jobs)
}
