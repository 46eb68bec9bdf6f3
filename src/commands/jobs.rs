//! `owl jobs`: the Jobs, one line each, or as JSON.

use anyhow::Result;

use super::{Ctx, JobJson};

/// What `owl jobs` was asked.
#[derive(Debug, clap::Args)]
pub(crate) struct JobsArgs {
    /// Include finished Jobs.
    #[arg(long)]
    all: bool,
    /// Print as JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(ctx: &Ctx, args: &JobsArgs) -> Result<u8> {
    let (all, json) = (args.all, args.json);
    let Some(store) = ctx.read_store()? else {
        if json {
            outln!("[]");
        } else {
            outln!("no jobs yet (add one with `owl add`)");
        }
        return Ok(0);
    };
    let worktrees = ctx.worktrees_text();
    if json {
        // Streamed: each Job is read, printed and dropped, so the memory does not grow
        // with the queue (a year of Jobs is ten thousand).
        let mut out = crate::output::JsonOut::stdout();
        let mut seq = out.start_list()?;
        // Every Job's shares in one read: a few rows per Run that saw a figure.
        let shares = store.shares_by_job()?;
        let none = Vec::new();
        store.for_each_listed_job(all, |job| {
            let mine = shares.get(job.id).unwrap_or(&none);
            let place = (worktrees.as_str(), ctx.config.machine.as_str());
            seq.element(&JobJson::listed(place, job).with_shares(mine))
        })?;
        seq.end()?;
        out.finish();
        return Ok(0);
    }
    let mut listed = 0;
    store.for_each_listed_job(all, |job| {
        if listed == 0 {
            outln!(
                "{:<14} {:<10} {:>4} {:>7}  {:<10} {:<9} PROMPT",
                "ID",
                "STATE",
                "PRI",
                "RUNS",
                "ACCOUNT",
                "CHECK"
            );
        }
        listed += 1;
        let prompt = job.prompt.lines().next().unwrap_or("");
        // The chain first: what it waits for.
        let prompt = match job.after.as_slice() {
            [] => prompt.to_string(),
            after => format!("[after {}] {prompt}", after.join(", ")),
        };
        outln!(
            "{:<14} {:<10} {:>4} {:>7}  {:<10} {:<9} {}",
            job.id,
            job.state.as_str(),
            job.priority,
            runs_column(job),
            job.account.unwrap_or("any"),
            check_column(job),
            crate::text::truncate(&prompt, 60)
        );
        Ok(())
    })?;
    if listed == 0 {
        outln!("no {}jobs", if all { "" } else { "unfinished " });
    }
    Ok(0)
}

/// Where the Job's check stands: `verified` (done, and it passed), `failing` (its latest
/// attempt did not pass), `pending` (none ran yet) or `-` (no check: the agent's word).
fn check_column(job: &crate::store::ListedJob<'_>) -> &'static str {
    match (&job.check, &job.last_check) {
        (None, _) => "-",
        (Some(_), Some(last)) if last.passed() && job.state == crate::model::JobState::Done => {
            "verified"
        }
        (Some(_), Some(last)) if !last.passed() => "failing",
        (Some(_), _) => "pending",
    }
}

/// `1/5`: counted Runs against `maxRuns`; `0/5+1`: and one more that did not count.
fn runs_column(job: &crate::store::ListedJob<'_>) -> String {
    match job.run_count.saturating_sub(job.counted_runs) {
        0 => format!("{}/{}", job.counted_runs, job.max_runs),
        n => format!("{}/{}+{n}", job.counted_runs, job.max_runs),
    }
}
