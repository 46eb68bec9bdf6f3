//! `owl status`: what runs, what waits and why, from the database alone (never the tick lock).

use anyhow::Result;
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{opt_time, print_json, Ctx};
use crate::clock::{human, rfc3339};
use crate::schedule::{AccountView, Decision, Plan, QueueEntry};

#[derive(Debug, Serialize)]
struct StatusJson {
    /// The oldest Run in progress (`live_runs` lists them all).
    running: Option<RunningJson>,
    /// Every Run in progress, oldest first: one per Account at most.
    live_runs: Vec<RunningJson>,
    accounts: Vec<AccountJson>,
    queue: Vec<QueueJson>,
    /// What the next tick would do: the Job it would run, or null.
    next: Option<NextJson>,
    /// Blocked and failed Jobs: they wait for a person.
    attention: Vec<QueueJson>,
    /// The machines that ticked on this store, with their last tick.
    machines: Vec<MachineJson>,
    /// Runs that ended in the last 24 hours, newest first: what happened overnight.
    recent_runs: Vec<RecentRunJson>,
    summary: String,
}

#[derive(Debug, Clone, Serialize)]
struct RunningJson {
    job_id: String,
    run_id: i64,
    account: String,
    pid: Option<i64>,
    started_at: String,
    elapsed_secs: i64,
    last_event: Option<String>,
    api_retries: i64,
    session_id: Option<String>,
    /// false: the tick supervising it is gone; the next tick records the Run lost. null:
    /// another machine's Run, judged by its lease.
    supervisor_alive: Option<bool>,
    /// The machine it runs on.
    machine: String,
    /// Until when its lease holds, on a shared store; another machine's tick records the
    /// Run lost after it.
    lease_until: Option<String>,
    /// Its lease has run out (the store's clock): the next tick records the Run lost;
    /// null without a lease.
    lease_expired: Option<bool>,
}

#[derive(Debug, Clone, Serialize)]
struct MachineJson {
    name: String,
    last_tick: Option<String>,
    /// Whether it is the machine this status was asked on.
    this: bool,
}

#[derive(Debug, Serialize)]
struct AccountJson {
    name: String,
    schedulable: bool,
    reason: String,
    has_ceiling: bool,
    not_logged_in: Option<String>,
    agent_problem: Option<String>,
    /// After an outage: no Run starts on the Account before this.
    backoff_until: Option<String>,
    /// Runs or probes in a row that could not reach the API.
    outages: u32,
    last_probe: Option<String>,
    last_probe_at: Option<String>,
    windows: Vec<WindowJson>,
    /// With a morning configured: each Window as it will stand at the next one.
    #[serde(skip_serializing_if = "Option::is_none")]
    morning: Option<MorningJson>,
    /// What was learned of the user's own use (the last four weeks); null for an Account
    /// whose Driver has no zero-token read (it is not sampled).
    learned: Option<LearnedJson>,
    /// With a learned reserve configured: each Window's bound and why, in words (or how many
    /// days remain before it replaces the configured ceilings); null without one.
    reserve: Option<Vec<String>>,
    /// The Window instances that were full in your day after owl's Runs had used some of
    /// them, over the last four weeks, oldest first: each grows a learned reserve's margin.
    limited: Vec<LimitedJson>,
}

/// A Window instance you found full after owl's Runs had used some of it.
#[derive(Debug, Serialize)]
struct LimitedJson {
    #[serde(flatten)]
    limited: crate::user_use::UserLimited,
    /// "Tue 10:40: five_hour at 100%, owl used 31 pp of it".
    said: String,
}

/// What was learned of the user's use, with its words.
#[derive(Debug, Serialize)]
struct LearnedJson {
    #[serde(flatten)]
    learned: crate::user_use::Learned,
    said: String,
}

/// The next morning, and each Window as it will stand then if nothing more runs.
#[derive(Debug, Serialize)]
struct MorningJson {
    at: String,
    windows: Vec<crate::schedule::MorningWindow>,
}

#[derive(Debug, Serialize)]
struct WindowJson {
    window: String,
    /// `five_hour`, `weekly`, `model_weekly` (one model family's week) or `other`.
    kind: crate::model::WindowKind,
    /// The model family a per-model Window limits, when the agent named it.
    model: Option<String>,
    percent: Option<f64>,
    ceiling: Option<f64>,
    resets_at: Option<String>,
    observed_at: String,
    source: crate::model::SnapshotSource,
    run_id: Option<i64>,
    /// The figure is from before the Window reset, so it no longer counts.
    stale: bool,
    /// Present when `ceiling` is the night ceiling: the Window resets before the morning.
    #[serde(skip_serializing_if = "Option::is_none")]
    night: Option<NightJson>,
}

/// Why a Window's ceiling is the night's, and the ceiling it keeps by day.
#[derive(Debug, Serialize)]
struct NightJson {
    /// The next morning (RFC 3339), which the Window resets before.
    morning: String,
    /// The configured ceiling (`fiveHourMax`, `weeklyMax`, `modelWeeklyMax`) and its value.
    limit: &'static str,
    configured: f64,
}

#[derive(Debug, Serialize)]
struct QueueJson {
    job_id: String,
    state: String,
    not_before: Option<String>,
    account: Option<String>,
    eligible: bool,
    reason: String,
}

#[derive(Debug, Serialize)]
struct RecentRunJson {
    run_id: i64,
    job_id: String,
    account: String,
    outcome: Option<String>,
    stop_reason: Option<String>,
    ended_at: Option<String>,
    cost_usd: Option<f64>,
    denied_tools: usize,
    /// The Job's check after the Run, when the agent said done and the Job has one.
    check: Option<crate::notify::PayloadCheck>,
    /// How the check ended, in words.
    #[serde(skip)]
    check_said: Option<String>,
}

#[derive(Debug, Serialize)]
struct NextJson {
    job_id: String,
    account: String,
}

/// What `owl status` was asked.
#[derive(Debug, clap::Args)]
pub(crate) struct StatusArgs {
    /// Print as JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(ctx: &Ctx, args: &StatusArgs) -> Result<u8> {
    let now = crate::clock::now()?;
    // A learned reserve in force sets the ceilings status reads, as the tick's.
    match super::reserve::in_force(ctx, now)? {
        Some(reserved) => run_at(&reserved.ctx, args, now, &reserved.said),
        None => run_at(ctx, args, now, &Default::default()),
    }
}

fn run_at(
    ctx: &Ctx,
    args: &StatusArgs,
    now: DateTime<Utc>,
    reserves: &super::reserve::Said,
) -> Result<u8> {
    let json = args.json;
    let Some(store) = ctx.read_store()? else {
        let views = super::plan::account_views(ctx, &[], Default::default(), now);
        let plan = crate::schedule::plan(&[], &views, ctx.config.schedule.window, now);
        let out = report(Vec::new(), &views, &plan, Vec::new(), Vec::new());
        return emit(ctx, json, &out, &views, now);
    };
    let (mut views, plan) = super::plan::make_plan(ctx, &store, now)?;
    super::reserve::forecast_the_morning(ctx, &mut views);
    let live = live_runs(ctx, &store, now)?;
    let machines = store
        .machines()?
        .into_iter()
        .map(|m| MachineJson {
            this: m.name == ctx.config.machine,
            name: m.name,
            last_tick: opt_time(m.last_tick),
        })
        .collect();
    let attention = store
        .attention_jobs()?
        .into_iter()
        .map(|j| QueueJson {
            job_id: j.id,
            state: j.state.to_string(),
            not_before: None,
            account: j.account,
            eligible: false,
            reason: j.reason.map(|r| r.to_string()).unwrap_or_default(),
        })
        .collect();
    let recent = store
        .runs_ended_since(now - chrono::Duration::hours(24))?
        .into_iter()
        .map(|r| RecentRunJson {
            run_id: r.id,
            job_id: r.job_id,
            account: r.account,
            outcome: r.outcome.map(|o| o.to_string()),
            stop_reason: r.stop_reason,
            ended_at: opt_time(r.ended_at),
            cost_usd: r.cost_usd,
            denied_tools: r.permission_denials.len(),
            check: r.check.as_ref().map(crate::notify::PayloadCheck::of),
            // As `show` says it: a check that passed verified the Job's work.
            check_said: r.check.as_ref().map(|c| match c.passed() {
                true => format!("verified: {c}"),
                false => c.to_string(),
            }),
        })
        .collect();
    let mut out = report(live, &views, &plan, attention, recent);
    out.machines = machines;
    for account in out.accounts.iter_mut() {
        account.learned = learned(ctx, &store, &account.name, now)?;
        account.reserve = reserves.get(&account.name).cloned();
        account.limited = store
            .user_limited_since(&account.name, now - chrono::Duration::weeks(4))?
            .into_iter()
            .map(|limited| LimitedJson {
                said: crate::user_use::describe_limited(&limited, &chrono::Local),
                limited,
            })
            .collect();
    }
    emit(ctx, json, &out, &views, now)
}

/// The quantile status says the user's use at.
const LEARNED_QUANTILE: f64 = 0.9;

/// What was learned of the user's use of an Account over the last four weeks; `None` when
/// its Driver cannot be sampled without a token.
fn learned(
    ctx: &Ctx,
    store: &crate::store::Store,
    name: &str,
    now: DateTime<Utc>,
) -> Result<Option<LearnedJson>> {
    let account = &ctx.config.accounts[name];
    if !crate::driver::offers_probe(crate::driver::for_kind(account.driver).as_ref(), account) {
        return Ok(None);
    }
    let since = now - chrono::Duration::weeks(4);
    let week = store.user_use_since(name, "weekly", since)?;
    let five = store.user_use_since(name, "five_hour", since)?;
    let learned = crate::user_use::learn(&week, &five, &chrono::Local, LEARNED_QUANTILE);
    let said = crate::user_use::describe(&learned, LEARNED_QUANTILE);
    Ok(Some(LearnedJson { learned, said }))
}

/// Every Run in progress, oldest first: this machine's with whether its tick lives,
/// another machine's with its lease.
fn live_runs(
    ctx: &Ctx,
    store: &crate::store::Store,
    now: DateTime<Utc>,
) -> Result<Vec<RunningJson>> {
    let identities = store.running_identities()?;
    let here = ctx.config.machine.as_str();
    Ok(store
        .running_runs()?
        .into_iter()
        .map(|r| {
            let identity = identities.iter().find(|i| i.run_id == r.id);
            let mine = identity.is_none_or(|i| crate::recover::is_mine(i, &ctx.config));
            RunningJson {
                supervisor_alive: mine.then(|| {
                    identity.is_some_and(|i| {
                        crate::supervise::executor_of_run(i.executor, &ctx.config)
                            .supervisor_alive(&crate::recover::supervisor_of(i))
                    })
                }),
                machine: r.machine.clone().unwrap_or_else(|| here.to_string()),
                lease_until: identity.and_then(|i| i.lease_until.clone()),
                lease_expired: identity
                    .filter(|i| i.lease_until.is_some())
                    .map(|i| i.lease_expired),
                job_id: r.job_id,
                run_id: r.id,
                account: r.account,
                // Another machine's pid says nothing here.
                pid: r.pid.filter(|_| mine),
                started_at: rfc3339(r.started_at),
                elapsed_secs: (now - r.started_at).num_seconds().max(0),
                last_event: r.last_event,
                api_retries: r.api_retries,
                session_id: r.session_id,
            }
        })
        .collect())
}

/// Everything status says, in the shape `--json` prints.
fn report(
    live: Vec<RunningJson>,
    views: &[AccountView],
    plan: &Plan,
    attention: Vec<QueueJson>,
    recent_runs: Vec<RecentRunJson>,
) -> StatusJson {
    StatusJson {
        summary: summary(&live, views, plan),
        running: live.first().cloned(),
        live_runs: live,
        accounts: views.iter().map(account_json).collect(),
        // A Job only a person can move is listed for the person, not as queued work.
        queue: plan
            .queue
            .iter()
            .filter(|q| !q.held)
            .map(queue_json)
            .collect(),
        next: match &plan.decision {
            Decision::Run { job_id, account } => Some(NextJson {
                job_id: job_id.clone(),
                account: account.clone(),
            }),
            Decision::Idle { .. } => None,
        },
        attention: plan
            .queue
            .iter()
            .filter(|q| q.held)
            .map(queue_json)
            .chain(attention)
            .collect(),
        machines: Vec::new(),
        recent_runs,
    }
}

/// The Runs in flight, and whether their ticks still supervise them.
fn print_running(live: &[RunningJson]) {
    if live.is_empty() {
        outln!("Running: nothing");
    }
    for r in live {
        print_live_run(r);
    }
}

/// One Run in flight, and whether its tick still supervises it.
fn print_live_run(r: &RunningJson) {
    let place = match (r.supervisor_alive, &r.lease_until) {
        (None, Some(until)) if r.lease_expired == Some(true) => format!(
            "on machine {}, its lease expired at {until}: the next tick records the Run lost",
            r.machine
        ),
        (None, Some(until)) => format!("on machine {}, lease until {until}", r.machine),
        (None, None) => format!("on machine {}", r.machine),
        _ => format!("pid {}", r.pid.map_or("?".into(), |p| p.to_string())),
    };
    outln!(
        "Running: job {} (run {}) on {}, {place}, for {}; last event: {}{}",
        r.job_id,
        r.run_id,
        r.account,
        human(chrono::Duration::seconds(r.elapsed_secs)),
        r.last_event.as_deref().unwrap_or("none yet"),
        if r.api_retries > 0 {
            format!(" ({} API retries)", r.api_retries)
        } else {
            String::new()
        }
    );
    if r.supervisor_alive == Some(false) {
        outln!(
            "  but the tick supervising run {} is gone: the next tick records it lost, kills what is left of it, and queues job {} again",
            r.run_id, r.job_id
        );
    }
}

/// The machines sharing the store, when there is more than this one.
fn print_machines(machines: &[MachineJson], now: DateTime<Utc>) {
    if machines.len() < 2 {
        return;
    }
    // Those seen in the last day in full; the others named on one line (each is forgotten
    // after snapshotRetention unless something waits on it).
    let recent = |m: &&MachineJson| {
        m.this
            || m.last_tick
                .as_deref()
                .and_then(crate::clock::parse)
                .is_some_and(|t| now - t < chrono::Duration::days(1))
    };
    outln!();
    outln!("Machines:");
    for m in machines.iter().filter(recent) {
        outln!(
            "  {:<16} last tick {}{}",
            m.name,
            m.last_tick.as_deref().unwrap_or("never"),
            if m.this { " (this one)" } else { "" }
        );
    }
    let quiet: Vec<&str> = machines
        .iter()
        .filter(|m| !recent(m))
        .map(|m| m.name.as_str())
        .collect();
    if !quiet.is_empty() {
        outln!("  not seen for a day or more: {}", quiet.join(", "));
    }
}

/// The Runs of the last 24 hours, newest first, ten at most.
fn print_recent_runs(recent_runs: &[RecentRunJson]) {
    if recent_runs.is_empty() {
        return;
    }
    outln!();
    outln!("Runs in the last 24 hours, newest first:");
    for r in recent_runs.iter().take(10) {
        let cost = r.cost_usd.map(|c| format!(", ${c:.2}")).unwrap_or_default();
        let denied = match r.denied_tools {
            0 => String::new(),
            n => format!(", {n} denied tool call(s)"),
        };
        let reason = r
            .stop_reason
            .as_deref()
            .map(|s| format!(" — {}", crate::text::one_line(s, 80)))
            .unwrap_or_default();
        outln!(
            "  run {:<4} {:<12} {}{cost}{denied}{reason}",
            r.run_id,
            r.job_id,
            r.outcome.as_deref().unwrap_or("?")
        );
        if let Some(said) = &r.check_said {
            outln!("           check: {said}");
        }
    }
    if recent_runs.len() > 10 {
        outln!("  … and {} more (`owl jobs --all`)", recent_runs.len() - 10);
    }
}

fn emit(
    ctx: &Ctx,
    json: bool,
    out: &StatusJson,
    views: &[AccountView],
    now: DateTime<Utc>,
) -> Result<u8> {
    if json {
        print_json(out)?;
        return Ok(0);
    }
    let StatusJson {
        live_runs,
        queue,
        attention,
        recent_runs,
        summary,
        machines,
        accounts,
        ..
    } = out;
    print_running(live_runs);
    print_machines(machines, now);
    outln!();
    outln!("Accounts:");
    for a in views {
        super::plan::print_account(a, now);
        let Some(json) = accounts.iter().find(|j| j.name == a.name) else {
            continue;
        };
        // Said once something was learned; before that the JSON says days: 0.
        if let Some(learned) = json.learned.as_ref().filter(|l| l.learned.days > 0) {
            outln!("    your own use: {}", learned.said);
        }
        for day in &json.limited {
            outln!("    you were limited: {}", day.said);
        }
        for line in json.reserve.iter().flatten() {
            outln!("    {line}");
        }
    }
    outln!();
    let said_above = said_above(views);
    if queue.is_empty() && !attention.is_empty() {
        outln!("Queue: nothing a tick can take (what waits for you is below)");
    } else if queue.is_empty() {
        outln!("Queue: empty (add work with `owl add`)");
    } else {
        outln!("Queue, in the order tick takes it:");
        for (i, q) in queue.iter().enumerate() {
            let reason = said_above(&q.reason);
            outln!("  {}. {:<12} {:<8} {reason}", i + 1, q.job_id, q.state);
        }
    }
    print_recent_runs(recent_runs);
    if !attention.is_empty() {
        outln!();
        outln!("Waiting for you (`owl show JOB`, then `owl requeue JOB`):");
        for j in attention {
            outln!("  {:<12} {:<8} {}", j.job_id, j.state, j.reason);
        }
    }
    outln!();
    outln!("{}", said_above(summary));
    if let Some(w) = ctx.config.schedule.window {
        outln!("Schedule window: {w} (local time)");
    }
    Ok(0)
}

/// Shortens what the Accounts lines said whole (a missing login with its store's path and
/// the fix) to a few words and a pointer back, so that status says each reason once: the
/// JSON keeps every reason whole.
fn said_above(views: &[AccountView]) -> impl Fn(&str) -> String + '_ {
    move |text: &str| {
        views
            .iter()
            .filter(|a| !a.schedulable && a.occupied.is_none() && a.brief.len() > 40)
            .fold(text.to_string(), |text, a| {
                let short = format!("{}: {}, see above", a.name, a.standing.headline());
                text.replace(&a.brief, &short)
            })
    }
}

fn summary(live: &[RunningJson], views: &[AccountView], plan: &Plan) -> String {
    match live {
        [] => {}
        [r] => return format!("A Run is in progress: job {} (run {}).", r.job_id, r.run_id),
        runs => {
            let each: Vec<String> = runs
                .iter()
                .map(|r| format!("job {} (run {}) on {}", r.job_id, r.run_id, r.account))
                .collect();
            return format!("{} Runs are in progress: {}.", runs.len(), each.join(", "));
        }
    }
    if let Decision::Run { job_id, account } = &plan.decision {
        if let Some(problem) = views
            .iter()
            .find(|a| &a.name == account)
            .and_then(|a| a.agent_problem.as_ref())
        {
            return format!(
                "Nothing runs: the last tick refused to start job {job_id} on {account}: {problem}; \
                 the Job stays queued and the next tick checks the agent CLI again."
            );
        }
    }
    super::plan::describe_decision(&plan.decision, views)
}

fn account_json(a: &AccountView) -> AccountJson {
    AccountJson {
        name: a.name.clone(),
        schedulable: a.schedulable,
        reason: a.reason.clone(),
        has_ceiling: a.has_ceiling,
        not_logged_in: a.not_logged_in.clone(),
        agent_problem: a.agent_problem.clone(),
        backoff_until: opt_time(a.backoff_until),
        outages: a.outages,
        last_probe: a.last_probe.clone(),
        last_probe_at: opt_time(a.last_probe_at),
        windows: a
            .windows
            .iter()
            .map(|w| WindowJson {
                window: w.window.clone(),
                kind: w.kind,
                model: w.model.clone(),
                percent: w.percent,
                ceiling: w.ceiling,
                resets_at: opt_time(w.resets_at),
                observed_at: rfc3339(w.observed_at),
                source: w.source,
                run_id: w.run_id,
                stale: w.percent.is_none(),
                night: w.night.map(|n| NightJson {
                    morning: rfc3339(n.morning),
                    limit: n.limit,
                    configured: n.ceiling,
                }),
            })
            .collect(),
        morning: a.morning.as_ref().map(|(at, windows)| MorningJson {
            at: rfc3339(*at),
            windows: windows.clone(),
        }),
        // Filled by `status` from the store.
        learned: None,
        reserve: None,
        limited: Vec::new(),
    }
}

fn queue_json(q: &QueueEntry) -> QueueJson {
    QueueJson {
        job_id: q.job_id.clone(),
        state: q.state.to_string(),
        not_before: opt_time(q.not_before),
        account: q.account.clone(),
        eligible: q.eligible,
        reason: q.reason.clone(),
    }
}
