//! The plan as commands read and tell it: what a tick would do now, and each Account's standing (shared by `tick`, `status` and `tick --dry-run`).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;
use chrono::{DateTime, Utc};

use super::Ctx;
use crate::clock::{human, local_hm};
use crate::driver;
use crate::schedule::{self, fmt_percent, AccountView, Decision, Plan};
use crate::store::Store;

/// The Accounts no Run may start on now, each with why.
pub(super) type Occupied = BTreeMap<String, Taken>;

/// Why no Run may start on an Account now, whatever its standing.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Taken {
    /// A live Run holds it, as the store records it (its supervisor alive).
    Run { run_id: i64, job_id: String },
    /// Another tick holds its run lock (its Run ending, or being settled).
    Locked { pid: Option<u32> },
    /// This tick was started for another Account (`--account`).
    NotThisTick { only: String },
}

impl Taken {
    /// Taken by a Run (or a tick about one), not by this tick's own choice.
    pub(super) fn is_busy(&self) -> bool {
        !matches!(self, Taken::NotThisTick { .. })
    }
}

impl std::fmt::Display for Taken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Taken::Run { run_id, job_id } => {
                write!(f, "busy: run {run_id} of job {job_id} is live on it")
            }
            Taken::Locked { pid: Some(pid) } => {
                write!(f, "busy: another tick (pid {pid}) holds its run lock")
            }
            Taken::Locked { pid: None } => f.write_str("busy: another tick holds its run lock"),
            Taken::NotThisTick { only } => write!(f, "this tick runs only {only} (--account)"),
        }
    }
}

/// The Accounts live Runs hold, as the store records them (a Run whose supervisor lives).
pub(super) fn occupied_by_live_runs(ctx: &Ctx, store: &Store) -> Result<Occupied> {
    Ok(occupied_by(&crate::recover::live_runs(store, &ctx.config)?))
}

/// The Accounts these live Runs hold.
pub(super) fn occupied_by(live: &[crate::store::RunIdentity]) -> Occupied {
    live.iter()
        .map(|run| {
            let taken = Taken::Run {
                run_id: run.run_id,
                job_id: run.job_id.clone(),
            };
            (run.account.clone(), taken)
        })
        .collect()
}

/// Reads the state and decides what a tick would do now, with every Account a live Run
/// holds taken.
pub(super) fn make_plan(
    ctx: &Ctx,
    store: &Store,
    now: DateTime<Utc>,
) -> Result<(Vec<AccountView>, Plan)> {
    let occupied = occupied_by_live_runs(ctx, store)?;
    plan_around(ctx, store, now, &occupied)
}

/// Reads the state and decides what a tick would do now, with the `occupied` Accounts
/// taken: no Run starts on them, and what waits for them says why.
pub(super) fn plan_around(
    ctx: &Ctx,
    store: &Store,
    now: DateTime<Utc>,
    occupied: &Occupied,
) -> Result<(Vec<AccountView>, Plan)> {
    plan_around_except(ctx, store, now, occupied, &BTreeSet::new())
}

/// [`plan_around`], leaving out the Jobs in `taken`: another tick is starting a Run of each
/// (it holds the Job's lock), or a check of it runs by hand.
pub(super) fn plan_around_except(
    ctx: &Ctx,
    store: &Store,
    now: DateTime<Utc>,
    occupied: &Occupied,
    taken: &BTreeSet<String>,
) -> Result<(Vec<AccountView>, Plan)> {
    let views = views_around(ctx, store, now, occupied)?;
    plan_over(ctx, store, views, now, taken)
}

/// Each Account's view now, the `occupied` ones taken: no Run starts on them, and what
/// waits for them says why.
pub(super) fn views_around(
    ctx: &Ctx,
    store: &Store,
    now: DateTime<Utc>,
    occupied: &Occupied,
) -> Result<Vec<AccountView>> {
    let snapshots = store.latest_snapshots()?;
    let mut notes = BTreeMap::new();
    for name in ctx.config.accounts.keys() {
        let mut note = store.account_note(name)?;
        note.login_seen = store.account_login_seen(name)?;
        note.owl_shares = owl_shares(store, &ctx.config.accounts[name], name, &snapshots)?;
        notes.insert(name.clone(), note);
    }
    let mut views = account_views(ctx, &snapshots, notes, now);
    for view in views.iter_mut() {
        if let Some(taken) = occupied.get(&view.name) {
            view.schedulable = false;
            view.brief = format!("{}: {taken}", view.name);
            view.reason = view.brief.clone();
            view.occupied = Some(taken.to_string());
        }
    }
    Ok(views)
}

/// The plan of the unfinished Jobs but `taken`, over the Accounts' `views`.
pub(super) fn plan_over(
    ctx: &Ctx,
    store: &Store,
    views: Vec<AccountView>,
    now: DateTime<Utc>,
    taken: &BTreeSet<String>,
) -> Result<(Vec<AccountView>, Plan)> {
    let mut jobs = store.plan_jobs()?;
    jobs.retain(|j| !taken.contains(&j.id));
    mark_elsewhere(ctx, store, &mut jobs)?;
    let mut plan = schedule::plan(&jobs, &views, ctx.config.schedule.window, now);
    if let Decision::Run { job_id, .. } = &plan.decision {
        // A Run on a full disk cannot be recorded: it would only be lost and run again.
        let repo = store.job(job_id)?.map(|j| j.repo);
        let state_dir = ctx.config.state_dir.as_path();
        let mut paths = vec![state_dir];
        if let Some(repo) = &repo {
            paths.push(std::path::Path::new(repo));
        }
        if let Err(why) = crate::disk::check_free_space(&paths, ctx.config.min_free_space) {
            plan.decision = Decision::Idle {
                reason: why.to_string(),
            };
        } else if let Some(why) = crate::disk::reserve_missing(state_dir) {
            // No Run without the space that records it.
            plan.decision = Decision::Idle { reason: why };
        }
    }
    Ok((views, plan))
}

/// Marks the Jobs another machine runs (their repository is its path), saying when that
/// machine never ticked: they wait for it, whatever this machine's Accounts could do.
fn mark_elsewhere(ctx: &Ctx, store: &Store, jobs: &mut [crate::model::PlanJob]) -> Result<()> {
    let here = ctx.config.machine.as_str();
    if jobs
        .iter()
        .all(|j| j.machine.as_deref().is_none_or(|m| m == here))
    {
        return Ok(());
    }
    let machines = store.machines()?;
    let my_tick = machines
        .iter()
        .find(|m| m.name == here)
        .and_then(|m| m.last_tick);
    // Another name that ticked from this host, and not since this one did: this machine
    // before `machine:` renamed it, most likely.
    let renamed = |m: &crate::store::Machine| {
        m.host == crate::sys::host_identity() && my_tick.is_none_or(|t| Some(t) > m.last_tick)
    };
    for job in jobs {
        let Some(there) = job.machine.as_deref().filter(|m| *m != here) else {
            continue;
        };
        job.elsewhere = Some(match machines.iter().find(|m| m.name == there) {
            Some(m) if renamed(m) => format!(
                "runs on machine {there}, which ticked from this host: if that was this \
                 machine before `machine:` named it {here}, `owl move --from {there}` brings \
                 its Jobs here"
            ),
            Some(_) => format!("runs on machine {there}"),
            None => format!("runs on machine {there}, which has never ticked"),
        });
    }
    Ok(())
}

/// A login made since an Account was found not logged in: its credential store changed
/// since the finding (its newest file is not the one it was then). The finding is dropped,
/// so the login is checked anew (the CLI's own `auth status` before a Run, or the probe)
/// instead of waiting out `probeMaxAge`.
pub(super) fn notice_logins(ctx: &Ctx, store: &mut Store, now: DateTime<Utc>) -> Result<()> {
    for (name, account) in &ctx.config.accounts {
        if login_written_since(&store.account_note(name)?, account) {
            tracing::info!("{name}: its credential store changed since it was found not logged in");
            store.set_not_logged_in(name, None, now)?;
        }
    }
    Ok(())
}

/// Whether the Account's credential store changed since it was found not logged in.
fn login_written_since(note: &crate::model::AccountNote, account: &crate::config::Account) -> bool {
    let (Some(_), Some(found), Some(dir)) = (
        &note.not_logged_in,
        note.not_logged_in_at,
        &account.credential_store,
    ) else {
        return false;
    };
    // Compared as stored, to the second.
    let changed = crate::sys::newest_change(dir, 2).map(crate::clock::rfc3339);
    changed.is_some_and(|changed| changed != crate::clock::rfc3339(found))
}

/// Each Account's view, with what this machine shows of it without starting the agent.
/// owl's share of each Window instance the Account's newest figures are of, for the Windows
/// it caps (none without an owl-share cap: nothing is read).
pub(super) fn owl_shares(
    store: &Store,
    account: &crate::config::Account,
    name: &str,
    snapshots: &[crate::model::Snapshot],
) -> Result<Vec<(String, DateTime<Utc>, f64)>> {
    let Some(limits) = &account.limits else {
        return Ok(Vec::new());
    };
    let mut shares = Vec::new();
    for s in snapshots.iter().filter(|s| s.account == name) {
        if let (Some(_), Some(reset)) = (limits.owl_cap(&s.window), s.resets_at) {
            let (points, _) = store.instance_share(name, &s.window, reset)?;
            shares.push((s.window.clone(), reset, points));
        }
    }
    Ok(shares)
}

/// The ceiling a Run on `account` starts under, for its prompt: the Window (of those that
/// limit its model) with the least headroom under the ceiling in force, from the newest
/// figures; `None` with no figure under a ceiling.
pub(super) fn budget_of(
    ctx: &Ctx,
    store: &Store,
    account: &str,
    model: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Option<crate::prompt::Budget>> {
    let snapshots = store.latest_snapshots()?;
    let views = schedule::account_views(&ctx.config, &snapshots, &BTreeMap::new(), now);
    let Some(view) = views.into_iter().find(|v| v.name == account) else {
        return Ok(None);
    };
    let tightest = view
        .windows
        .iter()
        .filter(|w| crate::model::WindowKind::limits_model(w.model.as_deref(), model))
        .filter_map(|w| Some((w, w.percent?, w.ceiling?)))
        .min_by(|a, b| (a.2 - a.1).total_cmp(&(b.2 - b.1)));
    Ok(tightest.map(|(w, percent, ceiling)| crate::prompt::Budget {
        window: w.label(),
        percent,
        ceiling,
        limit: w.limit.unwrap_or("ceiling"),
    }))
}

pub(super) fn account_views(
    ctx: &Ctx,
    snapshots: &[crate::model::Snapshot],
    mut notes: BTreeMap<String, crate::model::AccountNote>,
    now: DateTime<Utc>,
) -> Vec<AccountView> {
    for (name, account) in &ctx.config.accounts {
        let note = notes.entry(name.clone()).or_default();
        note.unready = unready(ctx, account);
        if login_written_since(note, account) {
            // What the next tick will do too: a store written since is checked anew.
            note.not_logged_in = None;
        }
        if note.not_logged_in.is_none() {
            note.not_logged_in = empty_store(account);
            note.store_empty = note.not_logged_in.is_some();
        }
    }
    schedule::account_views(&ctx.config, snapshots, &notes, now)
}

/// Why owl starts nothing on an Account whose login bills per token, when the Account does
/// not allow billed usage: no plan and no ceiling would bound what its Runs spend.
pub(super) fn billed_without_leave(account: &crate::config::Account) -> Option<String> {
    if account.allow_billed_usage {
        return None;
    }
    let login = driver::for_kind(account.driver).billed_login(account)?;
    Some(format!(
        "its login is {login}, billed per token with no plan to bound it: owl spends it only \
         with allowBilledUsage: true on the Account"
    ))
}

/// What keeps any Run off the Account that a look at this machine shows, cheaply and
/// without starting the agent: its CLI not found or not executable, bubblewrap missing for
/// a sandboxed Account.
fn unready(ctx: &Ctx, account: &crate::config::Account) -> Option<String> {
    let command = &ctx.config.drivers.get(account.driver).command;
    if let Err(why) = driver::locate(command, &account.driver.command_key()) {
        return Some(format!("the agent CLI cannot be run: {why}"));
    }
    if let Some(login) = billed_without_leave(account) {
        return Some(login);
    }
    ctx.executor_of(account).missing()
}

/// "Not logged in" as the credential store shows it, without starting the agent (the
/// Driver knows which files a login leaves), when the Account's `env` names no key or token
/// that logs in without it.
pub(super) fn empty_store(account: &crate::config::Account) -> Option<String> {
    let driver = driver::for_kind(account.driver);
    // The Account's store, else the CLI's own default: the embedded defaults' Account with
    // no `~/.claude` at all is judged as a configured empty store is.
    let store = account
        .credential_store
        .clone()
        .or_else(|| driver.default_store(account))?;
    let store = store.as_path();
    let api_key = driver.uses_api_key(account)
        || driver::inherited_credentials().any(|k| account.env.contains_key(k));
    if api_key {
        return None;
    }
    driver
        .store_shows_no_login(store)
        .map(|why| format!("not logged in: {why}"))
}

/// Prints one Account and its Windows, for status and `tick --dry-run`.
pub(super) fn print_account(a: &AccountView, now: DateTime<Utc>) {
    let state = if a.schedulable {
        "schedulable"
    } else {
        "not schedulable"
    };
    let reason = match &a.occupied {
        Some(why) => why.clone(),
        None => a.standing.explain(now),
    };
    outln!("  {}: {state} — {reason}", a.name);
    if let Some(why) = &a.agent_problem {
        outln!("    agent CLI refused at the last tick: {why}");
    }
    if a.windows.is_empty() {
        outln!("    no utilization observed yet");
    }
    if let (Some(what), Some(at)) = (&a.last_probe, a.last_probe_at) {
        outln!("    last probe {} ago: {what}", human(now - at));
    }
    for w in &a.windows {
        let percent = match w.percent {
            Some(p) => format!("{}%", fmt_percent(p)),
            None => "reset since".into(),
        };
        let ceiling = match w.ceiling {
            Some(c) => format!("ceiling {}%", fmt_percent(c)),
            None => "no ceiling".into(),
        };
        let resets = match w.resets_at {
            Some(t) if t > now => format!("resets in {} ({})", human(t - now), local_hm(t)),
            Some(t) => format!("reset at {}", local_hm(t)),
            None => "reset time unknown".into(),
        };
        let run = w.run_id.map(|r| format!(", run {r}")).unwrap_or_default();
        outln!(
            "    {:<17} {:>11}  {:<13} {resets}; observed {} ago by {}{run}",
            w.label(),
            percent,
            ceiling,
            human(now - w.observed_at),
            w.source
        );
        if let Some(why) = w.night_reason() {
            outln!("      {why}");
        }
    }
    if let Some(said) = a
        .morning
        .as_ref()
        .and_then(|(at, windows)| schedule::describe(*at, windows))
    {
        outln!("    {said}");
    }
}

/// One sentence for the decision a tick would make now. A Run on an Account whose login
/// was never seen to work is not promised: the sentence says so, and what checks it.
pub(super) fn describe_decision(d: &Decision, views: &[AccountView]) -> String {
    match d {
        Decision::Run { job_id, account } => {
            let view = views.iter().find(|a| &a.name == account);
            if view.is_some_and(|a| a.login_seen && !a.utilization_known()) {
                // The login worked; what nobody knows yet is how much of the plan is used.
                format!(
                    "The next tick runs job {job_id} on {account}; its utilization is not \
                     known yet (the Run reads it, or `owl probe {account}`)."
                )
            } else if view.is_some_and(|a| a.login_seen) {
                format!("The next tick runs job {job_id} on {account}.")
            } else {
                format!(
                    "The next tick tries job {job_id} on {account}; its login is not checked \
                     yet (`owl probe {account}` checks it)."
                )
            }
        }
        Decision::Idle { reason } => format!("Nothing would run now: {reason}."),
    }
}
