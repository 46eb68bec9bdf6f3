//! `owl check`: a Job's check run by hand in its worktree, never beside a Run of that Job, with its result printed and its exit code followed.

use anyhow::{Context, Result};
use serde::Serialize;

use super::{create_private_file, ensure_private_dir, print_json, Ctx};
use crate::model::{CheckRecord, CheckStatus};

/// What `owl check` was asked.
#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// The Job's id or name.
    job: String,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// What `owl check --json` prints.
#[derive(Debug, Serialize)]
struct CheckedJson<'a> {
    job_id: &'a str,
    command: &'a [String],
    /// `passed`, `failed`, `timed_out`, `cannot_start` or `not_finished`.
    status: &'static str,
    exit_code: Option<i32>,
    duration_ms: u64,
    /// Its stdout and stderr, interleaved.
    log: String,
}

pub(super) fn run(ctx: &Ctx, args: &CheckArgs) -> Result<u8> {
    let Some(store) = ctx.read_store()? else {
        crate::bad_input!("no job '{}': no jobs have been added yet", args.job);
    };
    let job = ctx.job(&store, &args.job)?;
    let Some(check) = &job.check else {
        crate::bad_input!(
            "job {} has no check (queue it with `owl add --check CMD`, or set `check` in \
             config.yaml for Jobs queued after)",
            job.id
        );
    };
    let log = ctx.config.state().hand_check_log(&job.id);
    let record = match check_now(ctx, &store, &job, check, &log)? {
        Ok(record) => record,
        Err(why) => {
            errln!("owl: {why}");
            return Ok(crate::error::EXIT_FAILURE);
        }
    };
    print_result(args.json, &job.id, &record, &log)?;
    Ok(if record.passed() {
        crate::error::EXIT_OK
    } else {
        crate::error::EXIT_FAILURE
    })
}

/// Runs a Job's check now in its worktree, through the Executor of the Account its Runs
/// ran on, its output to `log`; why not, when it cannot run now (no worktree, a live Run).
pub(super) fn check_now(
    ctx: &Ctx,
    store: &crate::store::Store,
    job: &crate::model::Job,
    check: &crate::model::Check,
    log: &std::path::Path,
) -> Result<Result<CheckRecord, String>> {
    if job.state == crate::model::JobState::Running {
        return Ok(Err(format!(
            "a Run of job {} is live (the Job is running): try again when it ends",
            job.id
        )));
    }
    let worktree = ctx.worktrees_dir().join(&job.id);
    if !worktree.is_dir() {
        return Ok(Err(format!(
            "job {} has no worktree at {} (no Run has worked on it yet, or `owl clean` \
             removed it)",
            job.id,
            worktree.display()
        )));
    }
    let state = ctx.config.state();
    ensure_private_dir(&state.logs(&job.id))?;
    // Held by the tick for a Run's whole life: taken here, no Run of this Job starts
    // while the check runs, and none is live when it starts.
    let Some(_held) = crate::lock::try_lock(&state.job_lock(&job.id))? else {
        return Ok(Err(format!(
            "a Run of job {} is live (or its check is being run by hand): try again when it \
             ends",
            job.id
        )));
    };
    let latch = crate::supervise::StopLatch::install().context("catching stop signals")?;
    // The Account its Runs ran on, and its Executor: the check runs where they did.
    let last_account = store.runs_of(&job.id)?.pop().map(|r| r.account);
    let account = last_account
        .as_deref()
        .or(job.account.as_deref())
        .and_then(|name| ctx.config.accounts.get(name))
        .or_else(|| ctx.config.accounts.values().next());
    let Some(account) = account else {
        return Ok(Err("no Account is configured to run the check as".into()));
    };
    let executor = ctx.executor_of(account);
    let (env_set, env_remove) = crate::supervise::check::check_env(account);
    let files = state.logs(&job.id).join("check.files");
    Ok(Ok(crate::supervise::check::run_check(
        executor.as_ref(),
        crate::supervise::check::CheckRun {
            check,
            place: crate::supervise::RunPlace {
                workspace: &worktree,
                files: &files,
            },
            run_id: HAND_CHECK_RUN,
            env_set,
            env_remove,
            output: create_private_file(log)?,
            latch: &latch,
        },
    )))
}

/// The Run id a check by hand is marked with: no Run's (ids start at 1), so no recovery
/// takes its processes for a lost Run's.
const HAND_CHECK_RUN: i64 = 0;

fn print_result(
    json: bool,
    job_id: &str,
    record: &CheckRecord,
    log: &std::path::Path,
) -> Result<()> {
    if json {
        return print_json(&CheckedJson {
            job_id,
            command: &record.command,
            status: record.status.as_str(),
            exit_code: record.exit_code,
            duration_ms: record.duration_ms,
            log: log.display().to_string(),
        });
    }
    outln!("job {job_id}: {record}");
    let failed = matches!(record.status, CheckStatus::Failed | CheckStatus::TimedOut);
    if let Some(tail) = record.detail.as_deref().filter(|_| failed) {
        outln!("the end of its output:");
        for line in tail.lines() {
            outln!("  | {line}");
        }
    }
    outln!("output: {}", log.display());
    Ok(())
}
