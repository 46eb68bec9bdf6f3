//! `owl logs`: a Run's transcript, readable or raw, optionally followed as it grows.

use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

use anyhow::{Context, Result};

use super::Ctx;
use crate::driver::{self, AgentEvent, Driver};

/// What `owl logs` was asked.
#[derive(Debug, clap::Args)]
pub(crate) struct LogsArgs {
    /// A Run's id, or a Job's id or name for its newest Run.
    #[arg(value_name = "RUN|JOB")]
    run: String,
    /// Print the stream exactly as recorded, byte for byte: control characters the
    /// agent wrote reach your terminal as they are (the readable form shows them
    /// escaped, like \x1b).
    #[arg(long)]
    raw: bool,
    /// Keep printing as the Run writes more, until it ends.
    #[arg(long)]
    follow: bool,
    /// Print what the Job's check printed after the Run (stdout and stderr interleaved)
    /// instead of the transcript; control characters shown escaped unless --raw.
    #[arg(long, conflicts_with = "follow")]
    check: bool,
}

pub(super) fn run(ctx: &Ctx, args: &LogsArgs) -> Result<u8> {
    let (which, raw, follow) = (args.run.as_str(), args.raw, args.follow);
    let Some(store) = ctx.read_store()? else {
        crate::bad_input!("no run or job '{which}': nothing has run yet");
    };
    let run = which_run(ctx, &store, which)?;
    if args.check {
        return print_check(ctx, &run, raw);
    }
    let run_id = run.id;
    if let Some(there) = run.machine.as_deref().filter(|m| *m != ctx.config.machine) {
        // A Run's log is in the state dir of the machine that ran it.
        crate::bad_input!(
            "run {run_id} ran on machine {there}: its log is in that machine's state dir \
             (`owl logs {run_id}` there)"
        );
    }
    let path = ctx.config.state().run_log(&run.job_id, run_id);
    let mut file =
        std::fs::File::open(&path).with_context(|| format!("opening {}", path.display()))?;
    let kind = ctx
        .config
        .accounts
        .get(&run.account)
        .map_or_else(crate::config::DriverKind::default, |a| a.driver);
    let driver = driver::for_kind(kind);
    let version = run.agent_version.as_deref();
    let mut pending: Vec<u8> = Vec::new();
    loop {
        // Asked before reading: a Run that ended before this read has written its last byte.
        let finished = store.run(run_id)?.is_some_and(|r| r.outcome.is_some());
        let mut chunk = Vec::new();
        file.read_to_end(&mut chunk)?;
        if raw {
            crate::output::write_raw(&chunk).context("writing the log to stdout")?;
        } else {
            pending.extend_from_slice(&chunk);
            let complete = pending
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |i| i + 1);
            for line in BufReader::new(&pending[..complete]).split(b'\n') {
                if let Some(text) = readable(driver.as_ref(), &line?, version) {
                    outln!("{text}");
                }
            }
            pending.drain(..complete);
        }
        // A reader that has gone (`owl logs -f 3 | head`) ends the follow.
        if !follow || finished || crate::output::stdout_closed() {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    if !raw && !pending.is_empty() {
        if let Some(text) = readable(driver.as_ref(), &pending, version) {
            outln!("{text}");
        }
    }
    Ok(0)
}

/// What the Run's check printed: as text with its control characters shown, or raw.
fn print_check(ctx: &Ctx, run: &crate::model::Run, raw: bool) -> Result<u8> {
    if run.check.is_none() {
        crate::bad_input!(
            "run {} ran no check (a check runs after a Run whose agent says done, for a Job \
             that has one)",
            run.id
        );
    }
    let path = ctx.config.state().run_check_log(&run.job_id, run.id);
    // owl wrote this file, but every byte in it is the agent's work speaking.
    let cap = crate::supervise::check::OUTPUT_CAP + 1024;
    let bytes = crate::untrusted::read(&path, cap)
        .with_context(|| format!("reading {}", path.display()))?;
    if raw {
        crate::output::write_raw(&bytes).context("writing the check's output to stdout")?;
    } else {
        let text = String::from_utf8_lossy(&bytes);
        crate::output::write_out(format_args!("{}", crate::output::inert(&text)));
    }
    Ok(0)
}

/// The Run `which` names: a number is a Run's id; anything else is a Job (its id or name),
/// for its newest Run. A Job named with digits only (queued before owl refused such names)
/// beside a Run of that number is refused as ambiguous, never guessed.
fn which_run(ctx: &Ctx, store: &crate::store::Store, which: &str) -> Result<crate::model::Run> {
    if let Ok(run_id) = which.parse::<i64>() {
        match (store.run(run_id)?, store.job_exists(which)?) {
            (Some(_), true) => crate::bad_input!(
                "'{which}' names both run {run_id} and job {which}: say which by the Run's \
                 id (`owl show {which}` lists the Job's Runs)"
            ),
            (Some(run), false) => return Ok(run),
            (None, false) => crate::bad_input!("no run {run_id} (see `owl show JOB`)"),
            (None, true) => {}
        }
    }
    let job = ctx.job(store, which)?;
    match store.runs_of(&job.id)?.pop() {
        Some(run) => Ok(run),
        None => crate::bad_input!(
            "job {} has no Run yet (`owl show {}` says why)",
            job.id,
            job.id
        ),
    }
}

/// One transcript line in words; `None` for lines not worth a person's attention.
/// `ran` is the version owl recorded for the Run (its CLI's `--version`), for a CLI whose
/// first line names none.
fn readable(driver: &dyn Driver, line: &[u8], ran: Option<&str>) -> Option<String> {
    match driver.parse_line(line) {
        Ok(AgentEvent::Init {
            session_id,
            model,
            version,
            ..
        }) => Some(format!(
            "[init] session {} model {} ({}{})",
            session_id.unwrap_or_default(),
            model.unwrap_or_default(),
            driver.kind().name(),
            version
                .as_deref()
                .or(ran)
                .map(|v| format!(" {v}"))
                .unwrap_or_default()
        )),
        Ok(AgentEvent::Assistant { summary, .. }) => Some(format!("[assistant] {summary}")),
        Ok(AgentEvent::Result(r)) => Some(format!(
            "[result] {}{} — {} turns, ${:.4}{}",
            r.subtype,
            if r.is_error { " (error)" } else { "" },
            r.num_turns.unwrap_or(0),
            r.cost_usd.unwrap_or(0.0),
            r.text
                .map(|t| format!(": {}", crate::text::truncate(&t, 200)))
                .unwrap_or_default()
        )),
        Ok(AgentEvent::ControlResponse { .. }) => None,
        Ok(other) => Some(format!("[{}]", other.describe())),
        Err(e) => Some(format!("[unreadable line: {e}]")),
    }
}
