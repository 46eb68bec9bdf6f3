//! `owl tick`: one scheduling step, top to bottom: lock, pick, prepare, run, record.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{create_private_file, ensure_private_dir, print_json, Ctx};
use crate::driver::{self, Driver, RunRequest};
use crate::model::{Job, JobReason, JobState, RunOutcome};
use crate::outcome;
use crate::schedule::{AccountView, Decision, Plan};
use crate::store::{RunStart, Store};
use crate::supervise::{self, Executor, RunPlace, RunReport, RunSpec};
use crate::usage;
use crate::workspace::Workspace;

mod checks;
mod housekeeping;
mod live;
mod observer;
mod pick;
mod round;
mod sample;
mod seats;
mod settle;
mod start;

use checks::{checked_version, login_refused};
use housekeeping::{prune, recover};
use observer::TickObserver;
use pick::{choose, choose_job};
use round::{round, Chosen, Round};
use settle::{record, tell};
use start::{not_started, working_copy, StartedRun};

/// What a tick did: printed as `ran`, `idle` or `busy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum TickAction {
    /// It started a Run (or, dry, would have).
    Ran,
    /// Nothing was eligible, or nothing could start.
    #[default]
    Idle,
    /// Every Account it could use is running a Run, or `maxConcurrentRuns` are live.
    Busy,
}

/// What `tick --json` prints.
#[derive(Debug, Default, Serialize)]
struct TickJson {
    action: TickAction,
    job_id: Option<String>,
    run_id: Option<i64>,
    account: Option<String>,
    outcome: Option<RunOutcome>,
    stop_reason: Option<String>,
    /// The Job's state after the Run.
    job_state: Option<JobState>,
    /// Why idle or busy, in words.
    reason: Option<String>,
    dry_run: bool,
}

/// What `owl tick` was asked.
#[derive(Debug, clap::Args)]
pub(crate) struct TickArgs {
    /// Print the decision and change nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// Run this Job now, if it is eligible, instead of the queue's next.
    #[arg(long, value_name = "ID")]
    pub(crate) job: Option<String>,
    /// With --job: run it even over every cap owl adds (ceilings, the night ceiling,
    /// owl-share caps, the minimum headroom), and do not stop it at one (said loudly on
    /// stderr). Logins, backoffs, rejections and extra usage still hold.
    #[arg(long, requires = "job")]
    pub(crate) ignore_ceiling: bool,
    /// Consider only this Account: its own Jobs and the unbound ones (one timer per
    /// Account: `owl@NAME.timer`).
    #[arg(long, value_name = "NAME")]
    pub(crate) account: Option<String>,
}

pub(super) fn run(ctx: &Ctx, args: &TickArgs) -> Result<u8> {
    let result = run_tick(ctx, args);
    // What monitoring reads, whatever the tick came to (a dry run changes nothing).
    if !args.dry_run {
        let now = crate::clock::now().unwrap_or_else(|_| Utc::now());
        super::metrics::write(ctx, result.is_ok(), now);
    }
    result
}

fn run_tick(ctx: &Ctx, args: &TickArgs) -> Result<u8> {
    refuse_bad_input(ctx, args)?;
    // A learned reserve in force sets the ceilings this tick plans and stops under.
    let reserved = super::reserve::in_force(ctx, crate::clock::now()?)?;
    if let Some(reserved) = reserved.as_ref().filter(|_| args.dry_run && !args.json) {
        // What a dry run explains first: the bounds the plan below is made under.
        for (name, lines) in &reserved.said {
            for line in lines {
                outln!("{name}: {line}");
            }
        }
    }
    let ctx = reserved.as_ref().map_or(ctx, |reserved| &reserved.ctx);
    // From the first moment to the last, a stop signal is kept, not owl's death (whatever
    // the tick inherited: a script's background job has SIGINT ignored): before a Run is
    // recorded it starts nothing and ends the tick; after, the Run ends at once and is
    // recorded interrupted.
    let latch = crate::supervise::StopLatch::install().context("catching stop signals")?;
    ensure_private_dir(&ctx.config.state_dir)?;
    let mut learned = pick::Learned::default();
    let mut tidied = args.dry_run;
    let chosen = loop {
        match round(ctx, args, &latch, &mut learned, &mut tidied)? {
            Round::Again => continue,
            Round::Ended(code) => {
                // No Run started: in the user's day, this tick reads what the day spends.
                if !args.dry_run && args.job.is_none() {
                    let now = crate::clock::now()?;
                    sample::sample_the_day(ctx, args.account.as_deref(), now)?;
                }
                return Ok(code);
            }
            Round::Chosen(chosen) => break *chosen,
        }
    };
    // Its locks bound here, held to the Run's end.
    let Chosen {
        mut store,
        job_id,
        account,
        now,
        _locks,
    } = chosen;
    let out = run_job(
        ctx,
        &mut store,
        &job_id,
        &account,
        args.ignore_ceiling,
        now,
        &latch,
    )?;
    report(args.json, out)
}

/// What is refused before anything is made: `--job` on a fresh install (no Job exists),
/// an unknown `--account`.
fn refuse_bad_input(ctx: &Ctx, args: &TickArgs) -> Result<()> {
    if let Some(id) = &args.job {
        match ctx.read_store()? {
            None => crate::bad_input!("no job '{id}': no jobs have been added yet"),
            // Before the state dir is made: a shared store has Jobs before this machine
            // ever ticked.
            Some(store) => drop(ctx.job(&store, id)?),
        }
    }
    if let Some(name) = &args.account {
        if !ctx.config.accounts.contains_key(name) {
            let known: Vec<&str> = ctx.config.accounts.keys().map(String::as_str).collect();
            crate::bad_input!(
                "--account {name}: no such Account in {}{}",
                ctx.config.source,
                crate::config::did_you_mean(name, &known)
            );
        }
    }
    Ok(())
}

/// The pick lock, waited for a while; why not, when another tick kept it all that time.
fn take_pick_lock(
    ctx: &Ctx,
    latch: &crate::supervise::StopLatch,
) -> Result<Result<crate::lock::Held, String>> {
    let stopped = || latch.fired().is_some();
    let (dir, pid_file) = (&ctx.config.state_dir, ctx.lock_path());
    if let Some(pick) = crate::lock::pick_within(dir, &pid_file, PICK_WAIT, &stopped)? {
        return Ok(Ok(pick));
    }
    if let Some(sig) = latch.fired() {
        anyhow::bail!("owl received {sig} while waiting for the pick lock; nothing was started");
    }
    let holder = crate::lock::holder(&ctx.lock_path())
        .map(|pid| format!(" (pid {pid})"))
        .unwrap_or_default();
    Ok(Err(format!(
        "another tick has been picking for over {}s, holding {}{holder}",
        PICK_WAIT.as_secs(),
        ctx.lock_path().display()
    )))
}

/// What a tick does before it picks: a login noticed, the disk's reserve put back, lost
/// Runs recorded, old figures pruned.
fn tidy(ctx: &Ctx, store: &mut Store, now: DateTime<Utc>) -> Result<()> {
    super::plan::notice_logins(ctx, store, now)?;
    // Put back the space a full disk took, once there is room again.
    crate::disk::ensure_reserve(&ctx.config.state_dir);
    recover(ctx, store, now)?;
    prune(ctx, store, now)
}

/// An idle tick's report; asked for one Job that cannot run, exit 1: a script must be able
/// to tell.
fn idle(json: bool, args: &TickArgs, reason: String, dry_run: bool) -> Result<u8> {
    report(json, TickJson::said(TickAction::Idle, reason, dry_run))?;
    Ok(if args.job.is_some() {
        crate::error::EXIT_FAILURE
    } else {
        crate::error::EXIT_OK
    })
}

/// How long a tick waits for another to finish picking: it decides and records under the
/// pick lock, in milliseconds; a probe, the version and login checks, the worktree and the
/// Run itself happen outside it (`tick --job` alone probes under it).
const PICK_WAIT: Duration = Duration::from_secs(120);

impl TickJson {
    fn said(action: TickAction, reason: String, dry_run: bool) -> TickJson {
        TickJson {
            action,
            reason: Some(reason),
            dry_run,
            ..Default::default()
        }
    }
}

/// Snapshots deleted per transaction when pruning.
const PRUNE_BATCH: usize = 2_000;
/// Snapshots deleted per tick at most.
const PRUNE_PER_TICK: usize = 50_000;

/// Runs one Job once: checks the agent CLI, prepares the worktree, supervises the Run and
/// records it.
fn run_job(
    ctx: &Ctx,
    store: &mut Store,
    job_id: &str,
    account: &str,
    ignore_ceiling: bool,
    now: DateTime<Utc>,
    latch: &crate::supervise::StopLatch,
) -> Result<TickJson> {
    let account = account.to_string();
    let job_id = job_id.to_string();
    let account_cfg = &ctx.config.accounts[&account];
    let driver: Arc<dyn Driver> = Arc::from(driver::for_kind(account_cfg.driver));
    let command = ctx.config.drivers.get(account_cfg.driver).command.clone();
    let executor = ctx.executor_of(account_cfg);
    // The CLI's login is asked beside its version: two starts of the CLI (a second of node
    // each, for Claude Code) at once instead of one after the other.
    let (version, login) = std::thread::scope(|scope| {
        let login = scope.spawn(|| {
            crate::supervise::check_login(executor.as_ref(), driver.as_ref(), &command, account_cfg)
        });
        let version = checked_version(
            ctx,
            store,
            executor.as_ref(),
            &account,
            driver.as_ref(),
            &command,
            &job_id,
            now,
        );
        (version, login.join().ok().flatten())
    });
    let version = version?;
    if let Some(refused) = login_refused(store, login, &account, &job_id, account_cfg, now)? {
        return Ok(refused);
    }

    let job = ctx.job(store, &job_id)?;
    let mut workspace = working_copy(ctx, store, executor.as_ref(), &job, now)?;

    let head_before = workspace.head();
    let started = start::record_start(
        &ctx.config,
        store,
        executor.as_ref(),
        driver.as_ref(),
        &job,
        &account,
        version,
        head_before,
        latch,
        now,
    )?;
    let Some((run_id, budget_usd)) = started else {
        return not_started(store, &job, account);
    };

    // From here on the Run is recorded whatever happens; monitoring sees it running.
    super::metrics::write(ctx, false, now);
    let run = StartedRun {
        job: &job,
        account: &account,
        run_id,
        budget_usd,
    };
    run_and_record(
        ctx,
        store,
        &run,
        &mut workspace,
        driver,
        executor.as_ref(),
        ignore_ceiling,
        latch,
    )
}

/// Supervises the started Run, records its end and tells of it.
#[allow(clippy::too_many_arguments)]
fn run_and_record(
    ctx: &Ctx,
    store: &mut Store,
    run: &StartedRun,
    workspace: &mut Workspace,
    driver: Arc<dyn Driver>,
    executor: &dyn Executor,
    ignore_ceiling: bool,
    latch: &crate::supervise::StopLatch,
) -> Result<TickJson> {
    let StartedRun {
        job,
        account,
        run_id,
        budget_usd,
    } = *run;
    let run_report = execute(
        ctx,
        store,
        job,
        account,
        workspace,
        run_id,
        budget_usd,
        driver,
        executor,
        ignore_ceiling,
        latch,
    )
    .unwrap_or_else(|e| RunReport {
        stop: None,
        stderr_tail: format!("owl could not run the agent: {e:#}"),
        never_started: true,
        ..Default::default()
    });
    let (outcome, job_state) = record(ctx, store, run, workspace, &run_report, executor, latch)?;
    if let Some(notify) = &ctx.config.notify {
        let handoff = workspace.handoff().ok().flatten();
        let handoff = handoff.as_deref();
        tell(ctx, store, notify, run, &outcome, handoff)?;
    }
    Ok(TickJson {
        action: TickAction::Ran,
        job_id: Some(job.id.clone()),
        run_id: Some(run_id),
        account: Some(account.to_string()),
        outcome: Some(outcome.outcome),
        stop_reason: outcome.stop_reason,
        job_state: Some(job_state),
        reason: None,
        dry_run: false,
    })
}

/// The Run's prompt: the Job's, with its Handoff and what the Run before did.
/// With `budgeted`, the Account whose binding ceiling the prompt tells the agent, so that
/// it commits before owl stops it there.
fn run_prompt(
    ctx: &Ctx,
    store: &Store,
    job: &Job,
    workspace: &Workspace,
    (run_id, budgeted): (i64, Option<&str>),
) -> Result<String> {
    let budget = match budgeted {
        Some(account) => {
            let now = crate::clock::now()?;
            super::plan::budget_of(ctx, store, account, job.model.as_deref(), now)?
        }
        None => None,
    };
    // A Handoff owl will not read (too large, not a file) leaves the prompt without one;
    // the Job's reason already says why.
    let handoff = workspace.handoff().unwrap_or_else(|e| {
        tracing::warn!("job {}: {e}", job.id);
        None
    });
    let previous = store
        .last_finished_run(&job.id, run_id)?
        .map(|r| crate::prompt::describe_run(&r, r.commits.map(|n| n.max(0) as usize)));
    let prompt = crate::prompt::build(
        &job.prompt,
        handoff.as_deref(),
        previous.as_deref(),
        budget.as_ref(),
    );
    Ok(prompt)
}

/// The observer's lease on a shared store, and the ceilings set aside when asked.
fn watch_as_asked(observer: &mut TickObserver, ctx: &Ctx, shared: bool, ignore_ceiling: bool) {
    if shared {
        // A new Run's fencing token is 0; another machine that records it moves it on.
        observer.hold_lease(0, ctx.config.lease_length);
    }
    if ignore_ceiling {
        observer.ignore_ceilings();
    }
}

/// Where a confined network lets a Run go: its Account's endpoints, then the hosts the
/// config and the Job allow.
fn reachable_hosts(
    ctx: &Ctx,
    driver: &dyn Driver,
    invocation: &crate::driver::Invocation,
    (account, job): (&crate::config::Account, &Job),
) -> Vec<String> {
    driver
        .network_endpoints(invocation, account)
        .into_iter()
        .chain(ctx.config.allow_hosts_of(account))
        .chain(job.allow_hosts.iter().cloned())
        .collect()
}

/// Starts and supervises the agent; an error means it could not be started.
#[allow(clippy::too_many_arguments)]
fn execute(
    ctx: &Ctx,
    store: &mut Store,
    job: &Job,
    account: &str,
    workspace: &Workspace,
    run_id: i64,
    budget_usd: Option<f64>,
    driver: Arc<dyn Driver>,
    executor: &dyn Executor,
    ignore_ceiling: bool,
    latch: &crate::supervise::StopLatch,
) -> Result<RunReport> {
    let account_cfg = &ctx.config.accounts[account];
    // With --ignore-ceiling no ceiling stops the Run: the prompt names none.
    let budgeted = (!ignore_ceiling).then_some(account);
    let prompt = run_prompt(ctx, store, job, workspace, (run_id, budgeted))?;
    let command = &ctx.config.drivers.get(account_cfg.driver).command;
    let files_dir = ctx.config.state().run_files(&job.id, run_id);
    let invocation = driver.invocation(&RunRequest {
        command,
        account: account_cfg,
        permission_mode: &job.permission_mode,
        max_budget_usd: budget_usd,
        allowed_tools: &job.allowed_tools,
        disallowed_tools: &job.disallowed_tools,
        model: job.model.as_deref(),
        standing_instructions: crate::prompt::STANDING_INSTRUCTIONS,
        prompt: &prompt,
        files_dir: &files_dir,
        cwd: workspace.path(),
        writable_dirs: &workspace.git_dirs(),
    });
    let hosts = reachable_hosts(ctx, driver.as_ref(), &invocation, (account_cfg, job));
    ensure_private_dir(&ctx.config.state().logs(&job.id))?;
    let spec = RunSpec {
        driver: driver.clone(),
        command,
        account: account_cfg,
        invocation: &invocation,
        place: RunPlace {
            workspace: workspace.path(),
            files: &files_dir,
            hosts: &hosts,
        },
        run_id,
        prompt: &prompt,
        stdout_log: create_private_file(&ctx.config.state().run_log(&job.id, run_id))?,
        stderr_log: create_private_file(&ctx.config.state().run_stderr(&job.id, run_id))?,
        max_run_time: Duration::from_secs(job.max_run_time_secs),
        stall_timeout: ctx.config.stall_timeout,
        grace_window: ctx.config.grace_window,
        usage_poll_interval: driver
            .capabilities()
            .usage_reporting
            .then_some(ctx.config.usage_poll_interval),
        secrets: account_cfg.env.secrets(),
        latch: latch.clone(),
    };
    // A write must never hold up a stop: during the Run a write gives up after this long
    // on another process's lock (and is retried or only warned of), and does not wait for
    // the disk.
    store.supervising(Some(SUPERVISION_BUSY_TIMEOUT))?;
    let shared = store.is_shared();
    let mut observer = TickObserver::new(
        store,
        run_id,
        &job.id,
        account,
        (
            account_cfg,
            crate::morning::Day::of(&ctx.config, account_cfg),
        ),
        job.model.as_deref(),
    );
    watch_as_asked(&mut observer, ctx, shared, ignore_ceiling);
    observer.keep_reserve(ctx.reserves.get(account).cloned());
    let report = supervise::supervise(spec, executor, &mut observer)
        .with_context(|| format!("starting the agent '{}'", invocation.program.display()));
    observer.finish();
    report
}

/// How long a write from the supervision loop waits for another process's write lock.
const SUPERVISION_BUSY_TIMEOUT: Duration = Duration::from_millis(250);

/// How long a Job whose worktree could not be prepared is set aside before it is tried again.
const PREPARE_RETRY: Duration = Duration::from_secs(10 * 60);

fn print_plan(views: &[AccountView], plan: &Plan, now: DateTime<Utc>) {
    outln!("{}", super::plan::describe_decision(&plan.decision, views));
    for a in views {
        super::plan::print_account(a, now);
    }
    for (i, q) in plan.queue.iter().enumerate() {
        outln!("  {}. {} ({}): {}", i + 1, q.job_id, q.state, q.reason);
    }
}

/// Whether the Account's utilization can be probed without a token (its Driver and login
/// allow it).
fn can_probe(ctx: &Ctx, account: &str) -> bool {
    let account = &ctx.config.accounts[account];
    driver::offers_probe(driver::for_kind(account.driver).as_ref(), account)
}

/// Asks the Account's agent for its utilization and login, and records what it says. A
/// failed probe is recorded and does not fail the tick: the figure is then unknown, never 0.
fn probe_account(ctx: &Ctx, store: &mut Store, account: &str, now: DateTime<Utc>) -> Result<()> {
    let outcome = super::probe::probe_and_record(ctx, store, account, now)?;
    match &outcome {
        usage::ProbeOutcome::Failed(why) => tracing::warn!("probing {account}: {why}"),
        usage::ProbeOutcome::Unreachable(_) => {
            tracing::warn!("probing {account}: {}; it backs off", outcome.describe())
        }
        _ => {}
    }
    Ok(())
}

fn report(json: bool, out: TickJson) -> Result<u8> {
    if json {
        print_json(&out)?;
        return Ok(0);
    }
    match out.action {
        TickAction::Busy => outln!("busy: {}", out.reason.unwrap_or_default()),
        TickAction::Idle if !out.dry_run => outln!("idle: {}", out.reason.unwrap_or_default()),
        TickAction::Idle => {}
        TickAction::Ran if out.dry_run => {}
        TickAction::Ran => {
            let outcome = out.outcome.map_or("?", |o| o.as_str());
            // One line, as status says it: the whole reason is `owl show`'s.
            let reason = out
                .stop_reason
                .map(|r| format!(" ({})", crate::text::one_line(&r, 120)))
                .unwrap_or_default();
            outln!(
                "ran: job {} run {} on {}: {outcome}{reason}; the job is now {}",
                out.job_id.unwrap_or_default(),
                out.run_id.unwrap_or_default(),
                out.account.unwrap_or_default(),
                out.job_state.map_or("?", |s| s.as_str()),
            );
        }
    }
    Ok(0)
}
