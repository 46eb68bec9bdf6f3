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

mod live;
mod observer;
use observer::TickObserver;

/// What a tick did: printed as `ran`, `idle` or `busy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum TickAction {
    /// It started a Run (or, dry, would have).
    Ran,
    /// Nothing was eligible, or nothing could start.
    #[default]
    Idle,
    /// Another tick holds the lock.
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
pub struct TickArgs {
    pub dry_run: bool,
    pub json: bool,
    /// Only this Job, now.
    pub job: Option<String>,
    /// With `job`: over the ceiling, and without a ceiling stop.
    pub ignore_ceiling: bool,
}

pub fn run(ctx: &Ctx, args: &TickArgs) -> Result<u8> {
    let (dry_run, json) = (args.dry_run, args.json);
    if let Some(id) = &args.job {
        // Refused before anything is made: on a fresh install no Job exists.
        if ctx.read_store()?.is_none() {
            crate::bad_input!("no job '{id}': no jobs have been added yet");
        }
    }
    ensure_private_dir(&ctx.config.state_dir)?;
    let Some(_lock) = crate::lock::try_lock(&ctx.lock_path())? else {
        let holder = crate::lock::holder(&ctx.lock_path())
            .map(|pid| format!(" (pid {pid})"))
            .unwrap_or_default();
        let reason = format!("another tick holds {}{holder}", ctx.lock_path().display());
        return report(json, TickJson::said(TickAction::Busy, reason, dry_run));
    };
    let mut store = ctx.open_store()?;
    let now = crate::clock::now()?;
    if !dry_run {
        super::plan::notice_logins(ctx, &mut store, now)?;
        // Put back the space a full disk took, once there is room again.
        crate::disk::ensure_reserve(&ctx.config.state_dir);
        recover(ctx, &mut store, now)?;
        prune(ctx, &mut store, now)?;
    }
    let mut machine_problem = false;
    let decision = match &args.job {
        Some(id) => choose_job(ctx, &mut store, id, args.ignore_ceiling, now)?,
        None => choose(ctx, &mut store, now, dry_run, json, &mut machine_problem)?,
    };
    let (job_id, account) = match decision {
        Decision::Idle { reason } if machine_problem => {
            // A Job held back by this machine (its CLI not found, no bubblewrap, no login
            // in the store), not by a wait: a script must be able to tell.
            report(json, TickJson::said(TickAction::Idle, reason, dry_run))?;
            return Ok(crate::error::EXIT_FAILURE);
        }
        Decision::Idle { reason } if args.job.is_some() => {
            // Asked for one Job that cannot run: a script must be able to tell.
            report(json, TickJson::said(TickAction::Idle, reason, dry_run))?;
            return Ok(crate::error::EXIT_FAILURE);
        }
        Decision::Idle { reason } => {
            return report(json, TickJson::said(TickAction::Idle, reason, dry_run))
        }
        Decision::Run { job_id, account } => (job_id, account),
    };
    if dry_run {
        return report(
            json,
            TickJson {
                job_id: Some(job_id),
                account: Some(account),
                ..TickJson::said(
                    TickAction::Ran,
                    "dry run: nothing was started".into(),
                    dry_run,
                )
            },
        );
    }
    let out = run_job(ctx, &mut store, &job_id, &account, args.ignore_ceiling, now)?;
    report(json, out)
}

/// The decision for `tick --job ID`: that Job, on the Account the plan gives it, or why not.
/// With `ignore_ceiling`, an Account (or a wait) that only a ceiling holds back does not.
fn choose_job(
    ctx: &Ctx,
    store: &mut Store,
    id: &str,
    ignore_ceiling: bool,
    now: DateTime<Utc>,
) -> Result<Decision> {
    let job = ctx.job(store, id)?;
    // As a tick would: an Account whose figure is too old to trust is probed first.
    let (views, _) = super::plan::make_plan(ctx, store, now)?;
    let stale: Vec<String> = views
        .iter()
        .filter(|v| job.account.as_ref().is_none_or(|a| a == &v.name))
        .filter(|v| can_probe(ctx, &v.name) && usage::needs_probe(v, ctx.config.probe_max_age, now))
        .map(|v| v.name.clone())
        .collect();
    for account in &stale {
        probe_account(ctx, store, account, now)?;
    }
    let (views, plan) = super::plan::make_plan(ctx, store, now)?;
    let idle = |reason: String| Ok(Decision::Idle { reason });
    let Some(entry) = plan.queue.iter().find(|q| q.job_id == job.id) else {
        return idle(format!(
            "job {} is {}: only a queued or waiting Job can run",
            job.id, job.state
        ));
    };
    if entry.eligible {
        if let Some(account) = &entry.account {
            return Ok(Decision::Run {
                job_id: job.id.clone(),
                account: account.clone(),
            });
        }
    }
    if !ignore_ceiling {
        return idle(format!("job {}: {}", job.id, entry.reason));
    }
    // Only a ceiling may be skipped: a Job waiting for another reason, or an Account that
    // is not logged in or backing off, still holds.
    let ceiling_wait = matches!(job.reason, Some(JobReason::Ceiling(_)));
    if job.not_before.is_some_and(|t| t > now) && !ceiling_wait {
        return idle(format!("job {}: {}", job.id, entry.reason));
    }
    let usable = |v: &&AccountView| {
        matches!(
            v.standing,
            crate::schedule::Standing::OverCeiling { .. }
                | crate::schedule::Standing::UnderCeilings { .. }
                | crate::schedule::Standing::NoCeiling
                | crate::schedule::Standing::Reactive { .. }
        ) && job.account.as_ref().is_none_or(|a| a == &v.name)
    };
    match views.iter().find(usable) {
        Some(view) => {
            errln!(
                "owl: --ignore-ceiling: running job {} on {} whatever its utilization ({}); \
                 this Run is not stopped at a ceiling",
                job.id,
                view.name,
                view.standing.explain(now)
            );
            Ok(Decision::Run {
                job_id: job.id.clone(),
                account: view.name.clone(),
            })
        }
        None => idle(format!("job {}: {}", job.id, entry.reason)),
    }
}

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

/// Finds Runs a dead tick left marked running, and settles them (see `recover`).
fn recover(ctx: &Ctx, store: &mut Store, now: DateTime<Utc>) -> Result<()> {
    let lost = crate::recover::recover_lost_runs(store, &ctx.executor(), &ctx.config, now)?;
    for l in lost {
        if let Some(kept) = &l.recorded_from {
            errln!(
                "owl: run {} of job {} was recorded from {} (its tick could not write it); \
                 killed {} surviving process(es)",
                l.run_id,
                l.job_id,
                kept.display(),
                l.survivors_killed
            );
            continue;
        }
        errln!(
            "owl: run {} of job {} was lost (its tick died); killed {} surviving process(es); \
             the job is queued again",
            l.run_id,
            l.job_id,
            l.survivors_killed
        );
    }
    Ok(())
}

/// Snapshots older than `snapshotRetention` are deleted in small batches, each its own
/// short transaction, and at most [`PRUNE_PER_TICK`] per tick: a year of history is worked
/// off over a few ticks without holding the database long.
fn prune(ctx: &Ctx, store: &mut Store, now: DateTime<Utc>) -> Result<()> {
    let keep =
        chrono::Duration::from_std(ctx.config.snapshot_retention).unwrap_or(chrono::Duration::MAX);
    let Some(before) = now.checked_sub_signed(keep) else {
        return Ok(());
    };
    let mut pruned = 0;
    while pruned < PRUNE_PER_TICK {
        let n = store.prune_snapshots(before, PRUNE_BATCH)?;
        pruned += n;
        if n < PRUNE_BATCH {
            break;
        }
    }
    if pruned > 0 {
        tracing::debug!("pruned {pruned} Snapshots observed before {before}");
    }
    Ok(())
}

/// Snapshots deleted per transaction when pruning.
const PRUNE_BATCH: usize = 2_000;
/// Snapshots deleted per tick at most.
const PRUNE_PER_TICK: usize = 50_000;

/// Decides what to run: the plan's pick, after probing the Accounts whose figures or
/// login are too old to trust (which may change the pick) and failing Jobs whose budget
/// is spent.
fn choose(
    ctx: &Ctx,
    store: &mut Store,
    now: DateTime<Utc>,
    dry_run: bool,
    json: bool,
    machine_problem: &mut bool,
) -> Result<Decision> {
    let mut probed = std::collections::BTreeSet::new();
    let mut planned = super::plan::make_plan(ctx, store, now)?;
    let local = now.with_timezone(&chrono::Local).time();
    let in_window = ctx.config.schedule.window.is_none_or(|w| w.contains(local));
    // Only when there is work that could use what a probe finds.
    if !dry_run && in_window && !planned.1.queue.is_empty() {
        let parked = usage::parked_accounts(
            &planned.0,
            |name| can_probe(ctx, name),
            ctx.config.probe_max_age,
            now,
        );
        for account in &parked {
            probed.insert(account.clone());
            probe_account(ctx, store, account, now)?;
        }
        if !parked.is_empty() {
            planned = super::plan::make_plan(ctx, store, now)?;
        }
    }
    loop {
        let (views, plan) = &planned;
        if dry_run && !json {
            print_plan(views, plan, now);
        }
        let Decision::Run { job_id, account } = &plan.decision else {
            if let Some(why) = held_by_this_machine(views, plan) {
                // Not a wait but a problem to fix: said on stderr, and the exit code says it.
                tracing::warn!("{why}");
                *machine_problem = true;
            }
            return Ok(plan.decision.clone());
        };
        let probe = views
            .iter()
            .find(|a| &a.name == account)
            .is_some_and(|view| {
                can_probe(ctx, account) && usage::needs_probe(view, ctx.config.probe_max_age, now)
            });
        if dry_run {
            if probe && !json {
                outln!("(a real tick would first probe {account}'s utilization: its newest figure is older than probeMaxAge)");
            }
            return Ok(plan.decision.clone());
        }
        let spent = match store.job(job_id)? {
            Some(job) => crate::budget::job_budget_spent(&job, store.job_cost(job_id)?),
            None => None,
        };
        if let Some(why) = spent {
            let from = [JobState::Queued, JobState::Waiting];
            store.move_job(job_id, &from, JobState::Failed, Some(&why), now)?;
        } else if probe && probed.insert(account.clone()) {
            let account = account.clone();
            probe_account(ctx, store, &account, now)?;
        } else {
            return Ok(plan.decision.clone());
        }
        // Something changed: plan again.
        planned = super::plan::make_plan(ctx, store, now)?;
    }
}

/// What this machine shows that holds a queued Job back (an Account `Unready`), in words.
fn held_by_this_machine(views: &[AccountView], plan: &Plan) -> Option<String> {
    views
        .iter()
        .filter_map(|a| match &a.standing {
            crate::schedule::Standing::Unready { why } => Some((a, why)),
            _ => None,
        })
        .find(|(a, _)| plan.queue.iter().any(|q| q.waits_for.contains(&a.name)))
        .map(|(a, why)| format!("{}: {why}", a.name))
}

/// Runs one Job once: checks the agent CLI, prepares the worktree, supervises the Run and
/// records it.
fn run_job(
    ctx: &Ctx,
    store: &mut Store,
    job_id: &str,
    account: &str,
    ignore_ceiling: bool,
    now: DateTime<Utc>,
) -> Result<TickJson> {
    let account = account.to_string();
    let job_id = job_id.to_string();
    // From the pick on, a stop signal is kept, not owl's death: before the Run is recorded
    // it starts nothing; after, the Run ends at once and is recorded interrupted.
    let latch = crate::supervise::StopLatch::install().context("catching stop signals")?;
    let account_cfg = &ctx.config.accounts[&account];
    let driver: Arc<dyn Driver> = Arc::from(driver::for_kind(account_cfg.driver));
    let command = ctx.config.drivers.get(account_cfg.driver).command.clone();
    let executor = supervise::executor_of(account_cfg, &ctx.config.sandbox, ctx.executor());
    let checked = agent_version(ctx, store, &account, driver.as_ref(), &command, now)?
        .map_err(crate::error::Error::from)
        .and_then(|version| {
            executor
                .ready()
                .map_err(|why| crate::error::Error::new(crate::error::ErrorKind::AgentCli, why))?;
            Ok(version)
        });
    let version = match checked {
        Ok(v) => {
            if store.account_note(&account)?.agent_problem.is_some() {
                store.set_agent_problem(&account, None, now)?;
            }
            v
        }
        Err(why) => {
            // The Job stays queued: a CLI we have not tested must not spend the night.
            store.set_agent_problem(&account, Some(&why.message), now)?;
            return Err(
                anyhow::Error::new(why).context(format!("not starting job {job_id} on {account}"))
            );
        }
    };

    // The CLI's own word on its login (local, no token): no Run on an Account it says has
    // none, or only an API key where the ceilings need a plan.
    let refused = driver::check_login(driver.as_ref(), &command, account_cfg)
        .and_then(|login| login.refusal(account_cfg.has_ceiling()));
    if let Some(why) = refused {
        let dir = account_cfg.credential_store.as_deref();
        store.set_not_logged_in_seen(&account, Some(&why), dir, now)?;
        return Ok(TickJson {
            job_id: Some(job_id.clone()),
            account: Some(account.clone()),
            ..TickJson::said(
                TickAction::Idle,
                format!("{account}: {why}; job {job_id} stays queued"),
                false,
            )
        });
    }

    let job = ctx.job(store, &job_id)?;
    let prepared = if executor.own_clone() {
        crate::workspace::prepare_clone(&job, &ctx.worktrees_dir())
    } else {
        crate::workspace::prepare(&job, &ctx.worktrees_dir())
    };
    let mut workspace = match prepared {
        Ok(w) => w,
        Err(e) if e.downcast_ref::<crate::workspace::Tampered>().is_some() => {
            // What a Run before left in the clone: the user's to look at, not a tick's.
            let why = JobReason::Blocked {
                summary: format!("{e:#}"),
            };
            let from = [JobState::Queued, JobState::Waiting];
            store.move_job(&job.id, &from, JobState::Blocked, Some(&why), now)?;
            return Err(e.context(format!("job {} is blocked", job.id)));
        }
        Err(e) => {
            // A locked index, an unmounted disk, an I/O error: nothing the Job did, and
            // likely gone by a later tick. The Job is set aside a while with its reason,
            // so that the Jobs behind it run meanwhile; the exit code says it.
            let why = JobReason::WorktreeFailed {
                error: format!("{e:#}"),
            };
            let from = [JobState::Queued, JobState::Waiting];
            let until = now + chrono::Duration::from_std(PREPARE_RETRY).unwrap_or_default();
            store.move_job_until(
                &job.id,
                &from,
                JobState::Waiting,
                Some(&why),
                Some(until),
                now,
            )?;
            return Err(e.context(format!(
                "job {} waits until {}",
                job.id,
                crate::clock::local_hm(until)
            )));
        }
    };

    executor
        .prepare()
        .context("readying owl to supervise the Run")?;
    let supervisor = executor.supervisor();
    // A cap the Driver cannot hand the CLI is no cap: the Run gets none, and none is
    // counted as spent when it ends without a cost.
    if let Some(sig) = latch.fired() {
        anyhow::bail!(
            "owl received {sig} before job {} started; nothing was started",
            job.id
        );
    }
    let spent = store.job_cost(&job.id)?;
    let budget_usd = driver
        .capabilities()
        .budget_cap
        .then(|| crate::budget::run_budget(&job, spent))
        .flatten();
    let started = store.start_run(&RunStart {
        job_id: job.id.clone(),
        account: account.clone(),
        agent_version: Some(version),
        owl_pid: supervisor.pid.unwrap_or_default(),
        owl_start_time: supervisor.start_time,
        boot_id: supervisor.boot_id,
        started_at: now,
        head_before: workspace.head(),
        budget_usd,
    })?;
    let Some(run_id) = started else {
        // A cancel (or another hand) moved the Job since the pick: no agent starts.
        let state = store.job_state(&job.id)?;
        let state = state.map_or("gone".into(), |s| s.to_string());
        return Ok(TickJson {
            job_id: Some(job.id.clone()),
            account: Some(account),
            job_state: state.parse().ok(),
            ..TickJson::said(
                TickAction::Idle,
                format!(
                    "job {} is {state} since it was picked; nothing was started",
                    job.id
                ),
                false,
            )
        });
    };

    // From here on the Run is recorded whatever happens.
    let run_report = execute(
        ctx,
        store,
        &job,
        &account,
        &workspace,
        run_id,
        budget_usd,
        driver,
        executor.as_ref(),
        ignore_ceiling,
        &latch,
    )
    .unwrap_or_else(|e| RunReport {
        stop: None,
        stderr_tail: format!("owl could not run the agent: {e:#}"),
        never_started: true,
        ..Default::default()
    });
    let (outcome, job_state) = record(
        ctx,
        store,
        &job,
        &account,
        run_id,
        &mut workspace,
        &run_report,
    )?;
    if let Some(notify) = &ctx.config.notify {
        tell(ctx, store, notify, &job.id, run_id, &account, &outcome)?;
    }
    Ok(TickJson {
        action: TickAction::Ran,
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
    // A Handoff owl will not read (too large, not a file) leaves the prompt without one;
    // the Job's reason already says why.
    let handoff = workspace.handoff().unwrap_or_else(|e| {
        tracing::warn!("job {}: {e}", job.id);
        None
    });
    let previous = store
        .last_finished_run(&job.id, run_id)?
        .map(|r| crate::prompt::describe_run(&r, commits_of(workspace, &r)));
    let prompt = crate::prompt::build(&job.prompt, handoff.as_deref(), previous.as_deref());
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
    ensure_private_dir(&ctx.config.state().logs(&job.id))?;
    let spec = RunSpec {
        driver: driver.clone(),
        command,
        account: account_cfg,
        invocation: &invocation,
        place: RunPlace {
            workspace: workspace.path(),
            files: &files_dir,
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
    let mut observer = TickObserver::new(
        store,
        run_id,
        &job.id,
        account,
        account_cfg,
        job.model.as_deref(),
    );
    if ignore_ceiling {
        observer.ignore_ceilings();
    }
    let report = supervise::supervise(spec, executor, &mut observer)
        .with_context(|| format!("starting the agent '{}'", invocation.program.display()));
    observer.finish();
    report
}

/// The agent CLI's version, from its `--version`, before every Run: a version manager's
/// shim or a wrapper script is the same file whatever version runs behind it, so no file
/// identity can stand in for asking (a node start of a second, beside a Run of minutes).
/// An idle tick never gets here. A verdict holds for the pair of file and version.
fn agent_version(
    ctx: &Ctx,
    store: &mut Store,
    account: &str,
    driver: &dyn Driver,
    command: &std::path::Path,
    now: DateTime<Utc>,
) -> Result<Result<String, driver::AgentCliError>> {
    let account_cfg = &ctx.config.accounts[account];
    let identity = driver::identity(command);
    let checked = match driver::check_agent(driver, command, account_cfg) {
        Err(driver::AgentCliError::Untested { agent, version, .. }) => verified(
            ctx,
            store,
            driver,
            command,
            identity.as_deref(),
            agent,
            version,
            now,
        )?,
        other => other,
    };
    if let (Ok(version), Some(identity)) = (&checked, &identity) {
        store.set_agent_checked(account, identity, version, now)?;
    }
    Ok(checked)
}

/// A version outside the tested range runs only when this very binary passed the
/// conformance check: recorded by `owl doctor --conformance`, or (with
/// `agentVerification: auto`) run here, once per binary.
#[allow(clippy::too_many_arguments)]
fn verified(
    ctx: &Ctx,
    store: &mut Store,
    driver: &dyn Driver,
    command: &std::path::Path,
    identity: Option<&str>,
    agent: &'static str,
    version: String,
    now: DateTime<Utc>,
) -> Result<Result<String, driver::AgentCliError>> {
    use driver::AgentCliError::{FailedConformance, Unverified};
    let Some(identity) = identity else {
        return Ok(Err(Unverified { agent, version }));
    };
    let known = store.verdict(identity)?.filter(|v| v.version == version);
    let verdict = match (known, ctx.config.agent_verification) {
        (Some(v), _) => v,
        (None, crate::config::AgentVerification::Off) => {
            return Ok(Err(Unverified { agent, version }))
        }
        (None, crate::config::AgentVerification::Auto) => {
            tracing::info!(
                "{agent} {version} is outside the tested range: checking its conformance"
            );
            let checks = driver.conformance(command, None);
            let verdict = crate::store::Verdict {
                version: version.clone(),
                passed: checks.iter().all(|c| c.ok),
                failed: super::conformance::failed_names(&checks),
                checked_at: now,
            };
            store.set_verdict(identity, &verdict)?;
            verdict
        }
    };
    Ok(if verdict.passed {
        Ok(version)
    } else {
        Err(FailedConformance {
            agent,
            version,
            failed: verdict.failed.join("; "),
        })
    })
}

/// How long a write from the supervision loop waits for another process's write lock.
const SUPERVISION_BUSY_TIMEOUT: Duration = Duration::from_millis(250);

/// How long a Job whose worktree could not be prepared is set aside before it is tried again.
const PREPARE_RETRY: Duration = Duration::from_secs(10 * 60);

/// Records the Run's end and moves its Job on.
fn record(
    ctx: &Ctx,
    store: &mut Store,
    job: &Job,
    account: &str,
    run_id: i64,
    workspace: &mut Workspace,
    report: &RunReport,
) -> Result<(outcome::Classified, JobState)> {
    let now = crate::clock::now()?;
    // A sandboxed Run wrote its clone's `.git` too: before owl, outside the sandbox, commits
    // or reads there, what it planted is undone, or the clone is left alone whole.
    let sealed = workspace.reseal(job);
    let tampered = sealed.as_ref().err().map(|e| format!("{e:#}"));
    let home = match &sealed {
        // Committed before the Handoff is read, so a Handoff the agent wrote but did not
        // commit still counts.
        Ok(_) => workspace.bring_home(job, &ctx.config.commit_author, run_id),
        Err(e) => {
            tracing::warn!("run {run_id}: {e:#}");
            crate::workspace::BroughtHome::default()
        }
    };
    let head_after = workspace.head();
    // What was undone when the clone was opened for this Run counts too (a tick that died
    // before sealing what the Run before planted).
    let neutralised = (sealed.is_ok() && !workspace.sealed().is_empty())
        .then(|| neutralised_note(workspace.sealed()));
    let (settlement, classified) = crate::settlement::settle(
        report,
        &crate::settlement::Facts {
            run_id,
            job,
            account_name: account,
            account: &ctx.config.accounts[account],
            counted_runs: store.counted_runs(&job.id)?,
            spent_usd: store.job_cost(&job.id).unwrap_or(0.0),
            budget_usd: store.run(run_id)?.and_then(|run| run.budget_usd),
            handoff: workspace.handoff(),
            git: crate::settlement::GitAfter {
                tampered,
                safety_commit: home.safety_commit,
                published: home.not_published,
                head_after,
                neutralised,
            },
            rejection_held: store.account_note(account)?.rate_limited_until.is_some(),
        },
        now,
    );
    let state = settlement.job_state;
    store.settle(
        &settlement,
        &ctx.config.state().kept_outcome(&job.id, run_id),
    )?;
    let credential_store = ctx.config.accounts[account].credential_store.as_deref();
    note_account(
        store,
        account,
        credential_store,
        run_id,
        &classified,
        report,
        now,
    )?;
    let state = store.job_state(&job.id)?.unwrap_or(state);
    Ok((classified, state))
}

/// The Run's note on what owl undid in the clone before opening it.
fn neutralised_note(undone: &[String]) -> String {
    format!(
        "owl undid what the Run planted in its clone's .git, which would run or redirect git \
         outside the sandbox: {}",
        undone.join(", ")
    )
}

/// Tells the notify command what the Run did: after it is recorded, so nothing the
/// command does (or fails to do) can change it.
fn tell(
    ctx: &Ctx,
    store: &mut Store,
    notify: &crate::config::Notify,
    job_id: &str,
    run_id: i64,
    account: &str,
    outcome: &outcome::Classified,
) -> Result<()> {
    let now = crate::clock::now()?;
    let Some(job) = store.job(job_id)? else {
        return Ok(());
    };
    let (views, _) = super::plan::make_plan(ctx, store, now)?;
    let waiting_until = views
        .iter()
        .find(|a| a.name == account && !a.schedulable)
        .map(|a| a.until);
    let cost = store.run(run_id)?.and_then(|r| r.cost_usd);
    let until = match waiting_until {
        Some(until) => until,
        None => job.not_before.filter(|t| *t > now),
    };
    let payload = crate::notify::Payload {
        event: "",
        at: String::new(),
        job_id: job.id.clone(),
        job_name: job.name.clone(),
        job_state: job.state,
        job_reason: job
            .reason
            .as_ref()
            .map(|r| crate::text::truncate(&r.to_string(), crate::notify::WORDS_CAP)),
        repo: job.repo.clone(),
        branch: job.branch(),
        run_id,
        account: account.to_string(),
        outcome: outcome.outcome.to_string(),
        stop_reason: outcome
            .stop_reason
            .as_deref()
            .map(|s| crate::text::truncate(s, crate::notify::WORDS_CAP)),
        cost_usd: cost,
        until: until.map(crate::clock::rfc3339),
    };
    let events = crate::notify::events_of(payload.job_state, waiting_until.is_some());
    crate::notify::send(notify, &events, &payload, now);
    Ok(())
}

/// Records what a Run tells of its Account beyond this Job (see `outcome::account_after_run`).
fn note_account(
    store: &mut Store,
    account: &str,
    credential_store: Option<&std::path::Path>,
    run_id: i64,
    classified: &outcome::Classified,
    report: &RunReport,
    now: DateTime<Utc>,
) -> Result<()> {
    let note = store.account_note(account)?;
    let change = outcome::account_after_run(classified, report.reached_model, &note, now);
    if let Some(login) = change.not_logged_in {
        store.set_not_logged_in_seen(account, login.as_deref(), credential_store, now)?;
    }
    if let Some((until, outages)) = change.backoff {
        if let Some(until) = until {
            tracing::warn!("run {run_id}: the API was unavailable; {account} waits until {until}");
        }
        store.set_backoff(account, until, outages, now)?;
    }
    Ok(())
}

/// The commits a finished Run added to the Job's branch.
fn commits_of(workspace: &Workspace, run: &crate::model::Run) -> Option<usize> {
    let (Some(before), Some(after)) = (&run.head_before, &run.head_after) else {
        return None;
    };
    workspace.commits_between(before, after).ok()
}

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
    driver::for_kind(account.driver)
        .account_capabilities(account)
        .usage_probe
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
            let reason = out
                .stop_reason
                .map(|r| format!(" ({r})"))
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
