//! `owl jobs`: the Jobs, one line each, or as JSON.

use anyhow::Result;

use super::{Ctx, JobJson};

pub fn run(ctx: &Ctx, all: bool, json: bool) -> Result<u8> {
    let Some(store) = ctx.read_store()? else {
        if json {
            outln!("[]");
        } else {
            outln!("no jobs yet (add one with `owl add`)");
        }
        return Ok(0);
    };
    if json {
        // Streamed: each Job is read, printed and dropped, so the memory does not grow
        // with the queue (a year of Jobs is ten thousand).
        let mut out = crate::output::JsonOut::stdout();
        let mut seq = out.start_list()?;
        store.for_each_job_with_run_count(all, |job, runs| {
            seq.element(&JobJson::new(ctx, job, runs))
        })?;
        seq.end()?;
        out.finish();
        return Ok(0);
    }
    let jobs = store.jobs_with_run_counts(all)?;
    let rows: Vec<JobJson> = jobs
        .iter()
        .map(|(job, runs)| JobJson::new(ctx, job, *runs))
        .collect();
    if rows.is_empty() {
        outln!("no {}jobs", if all { "" } else { "unfinished " });
        return Ok(0);
    }
    outln!(
        "{:<14} {:<10} {:>4} {:>5}  {:<10} PROMPT",
        "ID",
        "STATE",
        "PRI",
        "RUNS",
        "ACCOUNT"
    );
    for j in rows {
        let prompt = j.prompt.lines().next().unwrap_or("");
        outln!(
            "{:<14} {:<10} {:>4} {:>5}  {:<10} {}",
            j.id,
            j.state,
            j.priority,
            format!("{}/{}", j.run_count, j.max_runs),
            j.account.unwrap_or("any"),
            crate::text::truncate(prompt, 60)
        );
    }
    Ok(0)
}
