//! `owl tick`: one scheduling step, top to bottom: lock, pick, prepare, run, record.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{create_private_file, ensure_private_dir, print_json, Ctx};
use crate::driver::{self, Driver, RunRequest};
use crate::handoff::Handoff;
use crate::model::{Job, JobState, RunOutcome};
use crate::outcome::{self, AfterRun};
use crate::schedule::{self, AccountView, Decision, Plan};
use crate::store::{RunFinish, RunStart, Store};
use crate::supervise::{self, process, LocalExecutor, RunReport, RunSpec};
use crate::usage;

mod observer;
use observer::TickObserver;

/// What `tick --json` prints.
#[derive(Debug, Default, Serialize)]
struct TickJson {
    /// `ran`, `idle` or `busy`.
    action: &'static str,
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

pub fn run(ctx: &Ctx, dry_run: bool, json: bool) -> Result<u8> {
    ensure_private_dir(&ctx.config.state_dir)?;
    let Some(_lock) = crate::lock::try_lock(&ctx.lock_path())? else {
        let holder = crate::lock::holder(&ctx.lock_path())
            .map(|pid| format!(" (pid {pid})"))
            .unwrap_or_default();
        let reason = format!("another tick holds {}{holder}", ctx.lock_path().display());
        return report(json, TickJson::said("busy", reason, dry_run));
    };
    let mut store = ctx.open_store()?;
    let now = crate::clock::now()?;
    if !dry_run {
        recover(ctx, &mut store, now)?;
    }
    let (job_id, account) = match choose(ctx, &mut store, now, dry_run, json)? {
        Decision::Idle { reason } => return report(json, TickJson::said("idle", reason, dry_run)),
        Decision::Run { job_id, account } => (job_id, account),
    };
    if dry_run {
        return report(
            json,
            TickJson {
                job_id: Some(job_id),
                account: Some(account),
                ..TickJson::said("ran", "dry run: nothing was started".into(), dry_run)
            },
        );
    }
    let out = run_job(ctx, &mut store, &job_id, &account, now)?;
    report(json, out)
}

impl TickJson {
    fn said(action: &'static str, reason: String, dry_run: bool) -> TickJson {
        TickJson {
            action,
            reason: Some(reason),
            dry_run,
            ..Default::default()
        }
    }
}

/// Finds Runs a dead tick left marked running, and settles them (see `recover`).
fn recover(ctx: &Ctx, store: &mut Store, now: DateTime<Utc>) -> Result<()> {
    let lost = crate::recover::recover_lost_runs(
        store,
        &ctx.config.state_dir,
        &ctx.config.commit_author,
        now,
    )?;
    for l in lost {
        eprintln!(
            "owl: run {} of job {} was lost (its tick died); killed {} surviving process(es); \
             the job is queued again",
            l.run_id, l.job_id, l.survivors_killed
        );
    }
    Ok(())
}

/// Decides what to run: the plan's pick, after failing Jobs whose budget is spent and
/// probing an Account whose newest figure is too old to trust (which may change the pick).
fn choose(
    ctx: &Ctx,
    store: &mut Store,
    now: DateTime<Utc>,
    dry_run: bool,
    json: bool,
) -> Result<Decision> {
    let mut probed = std::collections::BTreeSet::new();
    loop {
        let (views, plan) = make_plan(ctx, store, now)?;
        if dry_run && !json {
            print_plan(&views, &plan, now);
        }
        let Decision::Run { job_id, account } = &plan.decision else {
            return Ok(plan.decision);
        };
        let probe = needs_probe(ctx, &views, account, now);
        if dry_run {
            if probe && !json {
                println!("(a real tick would first probe {account}'s utilization: its newest figure is older than probeMaxAge)");
            }
            return Ok(plan.decision);
        }
        if let Some(why) = job_budget_spent(store, job_id)? {
            store.set_job_state(job_id, JobState::Failed, Some(&why), None, now)?;
            continue;
        }
        if probe && probed.insert(account.clone()) {
            probe_account(ctx, store, account, now)?;
            continue;
        }
        return Ok(plan.decision);
    }
}

/// Runs one Job once: checks the agent CLI, prepares the worktree, supervises the Run and
/// records it.
fn run_job(
    ctx: &Ctx,
    store: &mut Store,
    job_id: &str,
    account: &str,
    now: DateTime<Utc>,
) -> Result<TickJson> {
    let account = account.to_string();
    let job_id = job_id.to_string();
    let account_cfg = &ctx.config.accounts[&account];
    let driver: Arc<dyn Driver> = Arc::from(driver::for_kind(account_cfg.driver));
    let command = ctx.config.drivers.get(account_cfg.driver).command.clone();
    let version = match driver::check_agent(driver.as_ref(), &command) {
        Ok(v) => {
            if store.account_note(&account)?.agent_problem.is_some() {
                store.set_agent_problem(&account, None, now)?;
            }
            v
        }
        Err(why) => {
            // The Job stays queued: a CLI we have not tested must not spend the night.
            store.set_agent_problem(&account, Some(&why), now)?;
            anyhow::bail!("not starting job {job_id} on {account}: {why}");
        }
    };

    let job = ctx.job(store, &job_id)?;
    let worktree = match crate::workspace::prepare(&job, &ctx.worktrees_dir()) {
        Ok(w) => w,
        Err(e) => {
            let why = format!("preparing the worktree: {e:#}");
            store.set_job_state(&job.id, JobState::Failed, Some(&why), None, now)?;
            return Err(e.context(format!("job {} failed", job.id)));
        }
    };

    process::become_subreaper().context("becoming a child subreaper")?;
    let owl_pid = std::process::id() as i32;
    let run_id = store.start_run(&RunStart {
        job_id: job.id.clone(),
        account: account.clone(),
        agent_version: Some(version),
        owl_pid: owl_pid.into(),
        owl_start_time: process::stat(owl_pid).map(|s| s.start_time),
        boot_id: process::boot_id(),
        started_at: now,
        head_before: crate::workspace::head_commit(&worktree),
    })?;

    // From here on the Run is recorded whatever happens.
    let run_report =
        execute(ctx, store, &job, &account, &worktree, run_id, driver).unwrap_or_else(|e| {
            RunReport {
                stop: None,
                stderr_tail: format!("owl could not run the agent: {e:#}"),
                ..Default::default()
            }
        });
    let (outcome, job_state) = record(ctx, store, &job, &account, run_id, &worktree, &run_report)?;
    Ok(TickJson {
        action: "ran",
        job_id: Some(job.id.clone()),
        run_id: Some(run_id),
        account: Some(account),
        outcome: Some(outcome.outcome),
        stop_reason: outcome.stop_reason,
        job_state: Some(job_state),
        reason: None,
        dry_run: false,
    })
}

/// Reads the state and decides what a tick would do now.
pub fn make_plan(ctx: &Ctx, store: &Store, now: DateTime<Utc>) -> Result<(Vec<AccountView>, Plan)> {
    let jobs = store.jobs(false)?;
    let snapshots = store.latest_snapshots()?;
    let mut notes = BTreeMap::new();
    for name in ctx.config.accounts.keys() {
        notes.insert(name.clone(), store.account_note(name)?);
    }
    let views = schedule::account_views(&ctx.config, &snapshots, &notes, now);
    let plan = schedule::plan(&jobs, &views, ctx.config.schedule.window, now);
    Ok((views, plan))
}

/// Starts and supervises the agent; an error means it could not be started.
fn execute(
    ctx: &Ctx,
    store: &mut Store,
    job: &Job,
    account: &str,
    worktree: &std::path::Path,
    run_id: i64,
    driver: Arc<dyn Driver>,
) -> Result<RunReport> {
    let account_cfg = &ctx.config.accounts[account];
    let handoff = crate::workspace::read_handoff(job)?;
    let runs = store.runs_of(&job.id)?;
    let previous = runs
        .iter()
        .rev()
        .find(|r| r.id != run_id && r.outcome.is_some())
        .map(|r| crate::prompt::describe_run(r, commits_of(job, r)));
    let prompt = crate::prompt::build(&job.prompt, handoff.as_deref(), previous.as_deref());
    let spent = crate::model::total_cost(&runs);
    let command = &ctx.config.drivers.get(account_cfg.driver).command;
    let invocation = driver.invocation(&RunRequest {
        command,
        account: account_cfg,
        permission_mode: &job.permission_mode,
        max_budget_usd: run_budget(job, spent),
        allowed_tools: &job.allowed_tools,
        disallowed_tools: &job.disallowed_tools,
        model: job.model.as_deref(),
        standing_instructions: crate::prompt::STANDING_INSTRUCTIONS,
    });
    ensure_private_dir(&ctx.logs_dir(&job.id))?;
    let spec = RunSpec {
        driver: driver.clone(),
        invocation: &invocation,
        cwd: worktree,
        run_id,
        prompt: &prompt,
        stdout_log: create_private_file(&ctx.run_log(&job.id, run_id))?,
        stderr_log: create_private_file(&ctx.run_stderr_log(&job.id, run_id))?,
        max_run_time: Duration::from_secs(job.max_run_time_secs),
        stall_timeout: ctx.config.stall_timeout,
        grace_window: ctx.config.grace_window,
        usage_poll_interval: driver
            .capabilities()
            .usage_reporting
            .then_some(ctx.config.usage_poll_interval),
    };
    let mut observer = TickObserver::new(store, run_id, &job.id, account, account_cfg.limits);
    supervise::supervise(
        spec,
        &LocalExecutor {
            state_dir: ctx.config.state_dir.clone(),
        },
        &mut observer,
    )
    .with_context(|| format!("starting the agent '{}'", invocation.program.display()))
}

/// Records the Run's end and moves its Job on.
fn record(
    ctx: &Ctx,
    store: &mut Store,
    job: &Job,
    account: &str,
    run_id: i64,
    worktree: &std::path::Path,
    report: &RunReport,
) -> Result<(outcome::Classified, JobState)> {
    let now = crate::clock::now()?;
    // ADR-0017: a Run cut short loses nothing it wrote. Committed before the Handoff is
    // read, so a Handoff the agent wrote but did not commit still counts.
    let safety_commit = crate::workspace::safety_commit(
        worktree,
        &ctx.config.commit_author,
        &format!("owl: uncommitted work left by run {run_id}"),
    )
    .unwrap_or_else(|e| {
        tracing::warn!("committing what run {run_id} left: {e:#}");
        None
    });
    let head_after = crate::workspace::head_commit(worktree);
    let classified = outcome::classify(
        report.result.as_ref(),
        report.exit,
        report.stop.as_ref(),
        &report.stderr_tail,
    );
    let handoff = match crate::workspace::read_handoff(job) {
        Ok(Some(text)) => Handoff::parse(&text),
        Ok(None) => Err(format!("the Run left no {}", crate::handoff::HANDOFF_PATH)),
        Err(e) => Err(format!("reading {}: {e:#}", crate::handoff::HANDOFF_PATH)),
    };
    let runs = store.runs_of(&job.id)?.len() as u32;
    let transition = outcome::next_job_state(&AfterRun {
        outcome: &classified,
        stop: report.stop.as_ref(),
        rate_limit_reset: report
            .rate_limit_reset
            .and_then(|s| DateTime::from_timestamp(s, 0)),
        handoff,
        runs,
        max_runs: job.max_runs,
        budget_left: job
            .max_job_budget_usd
            .map(|b| b - spent_by(store, &job.id).unwrap_or(0.0) - cost_of(report)),
        now,
    });
    let r = report.result.as_ref();
    let finish = RunFinish {
        outcome: Some(classified.outcome),
        stop_reason: classified.stop_reason.clone(),
        exit_code: report.exit.code.or(report.exit.signal.map(|s| 128 + s)),
        session_id: report.session_id.clone(),
        cost_usd: r.and_then(|r| r.cost_usd),
        num_turns: r.and_then(|r| r.num_turns),
        input_tokens: r.and_then(|r| r.input_tokens),
        output_tokens: r.and_then(|r| r.output_tokens),
        permission_denials: r.map(|r| r.permission_denials.clone()).unwrap_or_default(),
        api_retries: report.api_retries,
        last_event: report.last_event.clone(),
        survivors_killed: Some(report.survivors_killed as i64),
        skipped_lines: Some(report.skipped_lines as i64),
        head_after,
        safety_commit,
    };
    store.finish_run(
        run_id,
        &finish,
        transition.state,
        transition.reason.as_deref(),
        transition.not_before,
        now,
    )?;
    // "Not logged in" stays on the Account until a Run on it succeeds.
    match (classified.outcome, r.and_then(|r| r.api_error_status)) {
        (RunOutcome::Failed, Some(401)) => store.set_not_logged_in(
            account,
            Some(classified.stop_reason.as_deref().unwrap_or("401")),
            now,
        )?,
        (RunOutcome::Succeeded, _) if store.account_note(account)?.not_logged_in.is_some() => {
            store.set_not_logged_in(account, None, now)?
        }
        _ => {}
    }
    let state = store.job_state(&job.id)?.unwrap_or(transition.state);
    Ok((classified, state))
}

/// What the Job's finished Runs have cost so far.
fn spent_by(store: &Store, job_id: &str) -> Result<f64> {
    Ok(crate::model::total_cost(&store.runs_of(job_id)?))
}

/// What this Run cost, by its own result line.
fn cost_of(report: &RunReport) -> f64 {
    report
        .result
        .as_ref()
        .and_then(|r| r.cost_usd)
        .unwrap_or(0.0)
}

/// Why the Job may not start another Run for lack of budget, if so.
fn job_budget_spent(store: &Store, job_id: &str) -> Result<Option<String>> {
    let Some(job) = store.job(job_id)? else {
        return Ok(None);
    };
    let Some(budget) = job.max_job_budget_usd else {
        return Ok(None);
    };
    let spent = spent_by(store, job_id)?;
    Ok((spent >= budget).then(|| format!("job budget spent: ${spent:.2} of ${budget:.2}")))
}

/// The Run's `--max-budget-usd`: the smaller of the per-Run cap and what the Job has left.
fn run_budget(job: &Job, spent: f64) -> Option<f64> {
    // Rounded to a millionth of a dollar so float noise never reaches the CLI's argv;
    // never 0, which the CLI refuses (a Job with nothing left is not started at all).
    let left = job
        .max_job_budget_usd
        .map(|b| (((b - spent) * 1e6).round() / 1e6).max(1e-6));
    match (job.max_budget_usd, left) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The commits a finished Run added to the Job's branch.
fn commits_of(job: &Job, run: &crate::model::Run) -> Option<usize> {
    let (Some(before), Some(after)) = (&run.head_before, &run.head_after) else {
        return None;
    };
    crate::workspace::commits_between(&job.repo, before, after).ok()
}

fn print_plan(views: &[AccountView], plan: &Plan, now: DateTime<Utc>) {
    println!("{}", super::status::describe_decision(&plan.decision));
    for a in views {
        super::status::print_account(a, now);
    }
    for (i, q) in plan.queue.iter().enumerate() {
        println!("  {}. {} ({}): {}", i + 1, q.job_id, q.state, q.reason);
    }
}

/// Whether the Account's newest figure is too old to start a Run on.
fn needs_probe(ctx: &Ctx, views: &[AccountView], account: &str, now: DateTime<Utc>) -> bool {
    let cfg = &ctx.config.accounts[account];
    let Some(view) = views.iter().find(|a| a.name == account) else {
        return false;
    };
    if !view.has_ceiling || !driver::capabilities(cfg.driver).usage_reporting {
        return false;
    }
    let max_age =
        chrono::Duration::from_std(ctx.config.probe_max_age).unwrap_or(chrono::Duration::MAX);
    match view.windows.iter().map(|w| w.observed_at).max() {
        Some(newest) => now - newest > max_age,
        None => true,
    }
}

/// Asks the Account's agent for its utilization and records what it says. A failed probe
/// is recorded and does not fail the tick: the figure is then unknown, never 0.
fn probe_account(ctx: &Ctx, store: &mut Store, account: &str, now: DateTime<Utc>) -> Result<()> {
    let cfg = &ctx.config.accounts[account];
    let d = driver::for_kind(cfg.driver);
    let command = &ctx.config.drivers.get(cfg.driver).command;
    let outcome = usage::probe(d.as_ref(), command, cfg, &ctx.config.state_dir);
    if let usage::ProbeOutcome::Observed(windows) = &outcome {
        for s in usage::from_usage(windows, account, usage::SOURCE_PROBE, None, now) {
            store.insert_snapshot(&s)?;
        }
    }
    if let usage::ProbeOutcome::Failed(why) = &outcome {
        tracing::warn!("probing {account}: {why}");
    }
    store.set_last_probe(account, &outcome.describe(), now)
}

fn report(json: bool, out: TickJson) -> Result<u8> {
    if json {
        print_json(&out)?;
        return Ok(0);
    }
    match out.action {
        "busy" => println!("busy: {}", out.reason.unwrap_or_default()),
        "idle" if !out.dry_run => println!("idle: {}", out.reason.unwrap_or_default()),
        "idle" => {}
        _ if out.dry_run => {}
        _ => {
            let outcome = out.outcome.map_or("?", |o| o.as_str());
            let reason = out
                .stop_reason
                .map(|r| format!(" ({r})"))
                .unwrap_or_default();
            println!(
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
