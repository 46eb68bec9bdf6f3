//! `owl clean`: remove the worktrees of finished Jobs; their branches stay, so the work is never lost.

use anyhow::Result;

use super::Ctx;
use crate::bad_input;
use crate::model::{Job, JobState};

pub fn run(ctx: &Ctx, job: Option<&str>, finished: bool) -> Result<u8> {
    let Some(store) = ctx.read_store()? else {
        println!("nothing to clean");
        return Ok(0);
    };
    let jobs: Vec<Job> = match job {
        Some(id) => vec![ctx.job(&store, id)?],
        None if finished => store
            .jobs(true)?
            .into_iter()
            .filter(|j| j.state.is_finished())
            .collect(),
        None => bad_input!("owl clean needs a JOB or --finished"),
    };
    let mut removed = 0;
    for job in &jobs {
        if job.state == JobState::Running {
            bad_input!(
                "job {} is running; its worktree stays until the Run ends",
                job.id
            );
        }
        let path = crate::workspace::worktree_path(&ctx.worktrees_dir(), &job.id);
        if path.exists() && crate::workspace::is_dirty(&path).unwrap_or(false) {
            bad_input!(
                "worktree {} has uncommitted changes; commit or discard them first",
                path.display()
            );
        }
        if crate::workspace::remove_worktree(job, &ctx.worktrees_dir())? {
            removed += 1;
            println!("removed {} (branch {} kept)", path.display(), job.branch());
        }
    }
    if removed == 0 {
        println!("no worktree to remove");
    }
    Ok(0)
}
