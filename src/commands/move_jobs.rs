//! `owl move`: Jobs not yet run handed to another machine sharing the store, or a renamed machine's Jobs brought to the name it has now.

use anyhow::Result;

use super::Ctx;
use crate::bad_input;
use crate::model::JobState;

/// What `owl move` was asked.
#[derive(Debug, clap::Args)]
pub(crate) struct MoveArgs {
    /// The Jobs to move (or --from a machine, for all of its Jobs not yet run).
    #[arg(required_unless_present = "from", conflicts_with = "from")]
    jobs: Vec<String>,
    /// Every Job not yet run that waits on this machine name: one this machine had before
    /// `machine:` renamed it, say.
    #[arg(long, value_name = "MACHINE")]
    from: Option<String>,
    /// The machine to run them on (default: this one).
    #[arg(long, value_name = "MACHINE")]
    to: Option<String>,
    /// The repository's absolute path on that machine, when it is not the same path.
    #[arg(long, value_name = "PATH")]
    repo: Option<std::path::PathBuf>,
}

pub(super) fn run(ctx: &Ctx, args: &MoveArgs) -> Result<u8> {
    if ctx.config.store.is_none() {
        bad_input!(
            "this store is one machine's (SQLite): every Job in it runs on this machine, \
             whatever `machine:` says; machines share a store with `store:` (README: Several \
             machines)"
        );
    }
    let here = ctx.config.machine.as_str();
    let to = args.to.as_deref().unwrap_or(here);
    if let Some(repo) = args.repo.as_deref().filter(|r| !r.is_absolute()) {
        bad_input!(
            "--repo {}: give the repository's absolute path",
            repo.display()
        );
    }
    let Some(mut store) = ctx.read_store()? else {
        bad_input!("no Jobs have been added yet");
    };
    let ids = match &args.from {
        Some(from) => store.unstarted_jobs_on(from)?,
        None => args.jobs.clone(),
    };
    for id in &ids {
        let job = ctx.job(&store, id)?;
        if !matches!(job.state, JobState::Queued | JobState::Waiting) {
            bad_input!(
                "job {id} is {}: only a Job not yet running nor finished moves",
                job.state
            );
        }
        if to == here {
            let repo = args
                .repo
                .as_deref()
                .unwrap_or(std::path::Path::new(&job.repo));
            if let Err(e) = crate::workspace::check_repo(repo, &job.base) {
                bad_input!("job {id} cannot run on this machine: {e:#}");
            }
        }
    }
    let repo = args.repo.as_deref().map(|r| r.display().to_string());
    let now = crate::clock::now()?;
    let moved = store.move_to_machine(&ids, to, repo.as_deref(), now)?;
    match (moved.is_empty(), &args.from) {
        (true, Some(from)) => outln!("no Job waits on machine {from}"),
        (true, None) => outln!("nothing moved: the Jobs started or ended meanwhile"),
        (false, _) => outln!("moved to machine {to}: {}", moved.join(", ")),
    }
    Ok(0)
}
