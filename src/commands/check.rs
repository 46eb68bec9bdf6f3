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
    /// The commit it ran at.
    commit: Option<&'a str>,
    /// That commit is what the repository holds under the Job's branch.
    at_home: bool,
    /// Its stdout and stderr, interleaved.
    log: String,
}

/// A check run by hand: what it found, and why its commit is not the Job's branch in the
/// repository when it is not (a pass then verifies nothing the user would merge).
pub(super) struct HandCheck {
    pub(crate) record: CheckRecord,
    pub(crate) not_home: Option<String>,
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
    let checked = match check_now(ctx, &store, &job, check, &log)? {
        Ok(checked) => checked,
        Err(why) => {
            errln!("owl: {why}");
            return Ok(crate::error::EXIT_FAILURE);
        }
    };
    print_result(args.json, &job, &checked, &log)?;
    let record = &checked.record;
    Ok(if record.passed() {
        crate::error::EXIT_OK
    } else {
        crate::error::EXIT_FAILURE
    })
}

/// Why a Job's check cannot be run by hand now.
#[derive(Debug, thiserror::Error)]
pub(super) enum NotNow {
    #[error("a Run of job {0} is live (the Job is running): try again when it ends")]
    Running(String),
    #[error(
        "job {job} has no worktree at {} (no Run has worked on it yet, or `owl clean` removed it)",
        worktree.display()
    )]
    NoWorktree {
        job: String,
        worktree: std::path::PathBuf,
    },
    #[error(
        "a Run of job {0} is live (or its check is being run by hand): try again when it ends"
    )]
    Locked(String),
    #[error("no Account is configured to run the check as")]
    NoAccount,
    /// Its working copy cannot be opened as owl left it (a clone tampered with).
    #[error("{0:#}")]
    Workspace(anyhow::Error),
}

/// Runs a Job's check now in its worktree, through the Executor of the Account its Runs
/// ran on, its output to `log`, as a tick runs it: owl a subreaper, so that the check dies
/// with everything it started; stopped by a cancel; a clone sealed before and after, since
/// the check runs the agent's code with its `.git` writable. Why not, when it cannot run now
/// (no worktree, a live Run, a clone tampered with).
pub(super) fn check_now(
    ctx: &Ctx,
    store: &crate::store::Store,
    job: &crate::model::Job,
    check: &crate::model::Check,
    log: &std::path::Path,
) -> Result<Result<HandCheck, NotNow>> {
    if job.state == crate::model::JobState::Running {
        return Ok(Err(NotNow::Running(job.id.clone())));
    }
    let worktree = ctx.worktrees_dir().join(&job.id);
    if !worktree.is_dir() {
        return Ok(Err(NotNow::NoWorktree {
            job: job.id.clone(),
            worktree,
        }));
    }
    let state = ctx.config.state();
    ensure_private_dir(&state.logs(&job.id))?;
    // Held by the tick for a Run's whole life: taken here, no Run of this Job starts
    // while the check runs, and none is live when it starts.
    let Some(_held) = crate::lock::try_lock(&state.job_lock(&job.id))? else {
        return Ok(Err(NotNow::Locked(job.id.clone())));
    };
    let latch = crate::supervise::StopLatch::install().context("catching stop signals")?;
    let Some(account) = account_of(ctx, store, job)? else {
        return Ok(Err(NotNow::NoAccount));
    };
    let executor = ctx.executor_of(account);
    executor
        .prepare()
        .context("readying owl to supervise the check")?;
    let mut workspace = match crate::workspace::Workspace::open(&worktree, job) {
        Ok(w) => w,
        Err(e) => return Ok(Err(NotNow::Workspace(e))),
    };
    let commit = workspace.head();
    let not_home = workspace.not_at_home(job)?;
    let (env_set, env_remove) = crate::supervise::check::check_env(account);
    let files = state.logs(&job.id).join("check.files");
    let mut hosts = ctx.config.allow_hosts_of(account);
    hosts.extend(job.allow_hosts.iter().cloned());
    let mut record = crate::supervise::check::run_check(
        executor.as_ref(),
        crate::supervise::check::CheckRun {
            check,
            place: crate::supervise::RunPlace {
                workspace: &worktree,
                files: &files,
                hosts: &hosts,
            },
            run_id: HAND_CHECK_RUN,
            env_set,
            env_remove,
            output: create_private_file(log)?,
            latch: &latch,
            cancelled: &|| {
                store.job_state(&job.id).ok().flatten() == Some(crate::model::JobState::Cancelled)
            },
        },
    );
    record.commit = commit;
    // What the check planted in a clone's `.git` is undone before the user's git opens it.
    match workspace.reseal(job) {
        Ok(undone) if !undone.is_empty() => errln!(
            "owl: the check planted what would run git outside the sandbox; undone: {}",
            undone.join(", ")
        ),
        Ok(_) => {}
        Err(e) => return Ok(Err(NotNow::Workspace(e))),
    }
    Ok(Ok(HandCheck { record, not_home }))
}

/// The Account the Job's Runs ran on (else its own, else the first): the check runs where
/// they did, through that Account's Executor.
fn account_of<'c>(
    ctx: &'c Ctx,
    store: &crate::store::Store,
    job: &crate::model::Job,
) -> Result<Option<&'c crate::config::Account>> {
    let last_account = store.runs_of(&job.id)?.pop().map(|r| r.account);
    Ok(last_account
        .as_deref()
        .or(job.account.as_deref())
        .and_then(|name| ctx.config.accounts.get(name))
        .or_else(|| ctx.config.accounts.values().next()))
}

/// The Run id a check by hand is marked with: no Run's (ids start at 1), so no recovery
/// takes its processes for a lost Run's.
const HAND_CHECK_RUN: i64 = 0;

fn print_result(
    json: bool,
    job: &crate::model::Job,
    checked: &HandCheck,
    log: &std::path::Path,
) -> Result<()> {
    let (job_id, record) = (job.id.as_str(), &checked.record);
    if json {
        return print_json(&CheckedJson {
            job_id,
            command: &record.command,
            status: record.status.as_str(),
            exit_code: record.exit_code,
            duration_ms: record.duration_ms,
            commit: record.commit.as_deref(),
            at_home: checked.not_home.is_none(),
            log: log.display().to_string(),
        });
    }
    outln!("job {job_id}: {record}");
    if let Some(why) = &checked.not_home {
        outln!("not what you would merge: {why}");
    }
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
