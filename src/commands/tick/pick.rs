//! Which Job the tick runs, on which Account: the plan, the probe before the pick, and the
//! hold a Run of this machine keeps.

use std::collections::BTreeSet;

use super::super::plan::{plan_around, plan_around_except, plan_over, views_around, Occupied};
use super::*;

/// What a tick's plan asks of it: run a Job, or first probe Accounts (outside the pick lock:
/// a CLI start and maybe a network check), then plan again.
pub(super) enum Picked {
    Decided(Decision),
    Probe(Vec<String>),
}

/// What a tick's pick learns besides its decision, for how the tick ends.
#[derive(Default)]
pub(super) struct Aside {
    /// A Job is held back by this machine (its CLI not found, no bubblewrap, no login in
    /// the store), not by a wait: a script must be able to tell.
    pub(crate) machine_problem: bool,
    /// Some Job is unfinished.
    pub(crate) open_jobs: bool,
}

/// What a plan has already learned this tick: the Accounts probed, and the Jobs another
/// tick is starting (their locks held), left out.
#[derive(Default)]
pub(super) struct Learned {
    pub(crate) probed: BTreeSet<String>,
    pub(crate) taken_jobs: BTreeSet<String>,
}

/// The decision for `tick --job ID`: that Job, on the Account the plan gives it, or why not.
/// With `ignore_ceiling`, an Account (or a wait) that only a ceiling holds back does not.
pub(super) fn choose_job(
    ctx: &Ctx,
    store: &mut Store,
    id: &str,
    ignore_ceiling: bool,
    now: DateTime<Utc>,
    occupied: &Occupied,
) -> Result<Decision> {
    let job = ctx.job(store, id)?;
    // As a tick would: an Account whose figure is too old to trust is probed first.
    let (views, _) = plan_around(ctx, store, now, occupied)?;
    let stale: Vec<String> = views
        .iter()
        .filter(|v| job.account.as_ref().is_none_or(|a| a == &v.name))
        .filter(|v| can_probe(ctx, &v.name) && usage::needs_probe(v, ctx.config.probe_max_age, now))
        .map(|v| v.name.clone())
        .collect();
    for account in &stale {
        probe_account(ctx, store, account, now)?;
    }
    let (views, plan) = plan_around(ctx, store, now, occupied)?;
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
                | crate::schedule::Standing::NearCeiling { .. }
                | crate::schedule::Standing::OwlShareCap { .. }
                | crate::schedule::Standing::UnderCeilings { .. }
                | crate::schedule::Standing::NoCeiling
                | crate::schedule::Standing::Reactive { .. }
        ) && v.occupied.is_none()
            && job.account.as_ref().is_none_or(|a| a == &v.name)
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

/// Decides what to run: the plan's pick; or first the Accounts to probe whose figures or
/// login are too old to trust (which may change the pick), each once a tick and only one
/// whose run lock this tick holds; failing on the way the Jobs whose budget is spent. With
/// no Account able to start a Run, what waits is counted by the store, not planned.
pub(super) fn choose(
    ctx: &Ctx,
    store: &mut Store,
    now: DateTime<Utc>,
    (dry_run, json): (bool, bool),
    aside: &mut Aside,
    occupied: &Occupied,
    learned: &Learned,
) -> Result<Picked> {
    let probed = &learned.probed;
    let views = views_around(ctx, store, now, occupied)?;
    let held = views.iter().all(|v| !v.schedulable);
    if !dry_run && held && learned.taken_jobs.is_empty() {
        if let Some(picked) = choose_held(ctx, store, now, &views, aside, occupied, probed)? {
            return Ok(picked);
        }
    }
    let plan_now =
        |store: &Store| plan_around_except(ctx, store, now, occupied, &learned.taken_jobs);
    let mut planned = plan_over(ctx, store, views, now, &learned.taken_jobs)?;
    aside.open_jobs = !planned.1.queue.is_empty();
    // Only when there is work that could use what a probe finds.
    if !dry_run && in_window(ctx, now) && aside.open_jobs {
        if let Some(account) = first_parked(ctx, &planned.0, now, occupied, probed) {
            return Ok(Picked::Probe(vec![account]));
        }
    }
    loop {
        let (views, plan) = &planned;
        if dry_run && !json {
            print_plan(views, plan, now);
        }
        let Decision::Run { job_id, account } = &plan.decision else {
            if let Some(why) = held_by_this_machine(views, plan) {
                // Not a wait but a problem to fix: the exit code says it, and stderr unless
                // the tick's own line does already (cron logs both: said once).
                warn_unless_said(&plan.decision, &why);
                aside.machine_problem = true;
            }
            return Ok(Picked::Decided(plan.decision.clone()));
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
            return Ok(Picked::Decided(plan.decision.clone()));
        }
        let spent = match store.job(job_id)? {
            Some(job) => crate::budget::job_budget_spent(&job, store.job_cost(job_id)?),
            None => None,
        };
        if let Some(why) = spent {
            let from = [JobState::Queued, JobState::Waiting];
            store.move_job(job_id, &from, JobState::Failed, Some(&why), now)?;
        } else if probe && !probed.contains(account) {
            return Ok(Picked::Probe(vec![account.clone()]));
        } else {
            return Ok(Picked::Decided(plan.decision.clone()));
        }
        // Something changed: plan again.
        planned = plan_now(store)?;
        aside.open_jobs = !planned.1.queue.is_empty();
    }
}

/// The pick when no Account can start a Run, from what the store counts: an Account to
/// probe first, or idle, saying what waits for each; no queued Job is read. `None` when
/// the counts cannot say why nothing runs (each Job waits for another, or for a time).
fn choose_held(
    ctx: &Ctx,
    store: &Store,
    now: DateTime<Utc>,
    views: &[AccountView],
    aside: &mut Aside,
    occupied: &Occupied,
    probed: &BTreeSet<String>,
) -> Result<Option<Picked>> {
    let count = store.count_queue(&ctx.config.machine)?;
    aside.open_jobs = !count.is_empty();
    if in_window(ctx, now) && aside.open_jobs {
        if let Some(account) = first_parked(ctx, views, now, occupied, probed) {
            return Ok(Some(Picked::Probe(vec![account])));
        }
    }
    let window = ctx.config.schedule.window;
    let Some(decision) = crate::schedule::held_decision(&count, views, window, now) else {
        return Ok(None);
    };
    let mut unready = unready(views).filter(|(a, _)| count.waiting_for(a, now) > 0);
    if let Some((a, why)) = unready.next() {
        warn_unless_said(&decision, &format!("{}: {why}", a.name));
        aside.machine_problem = true;
    }
    Ok(Some(Picked::Decided(decision)))
}

/// A problem of this machine's on stderr, unless the tick's idle line says it already.
fn warn_unless_said(decision: &Decision, why: &str) {
    match decision {
        Decision::Idle { reason } if reason.contains(why) => {}
        _ => tracing::warn!("{why}"),
    }
}

/// Whether `now` is inside the schedule window (always, without one).
fn in_window(ctx: &Ctx, now: DateTime<Utc>) -> bool {
    let local = now.with_timezone(&chrono::Local).time();
    ctx.config.schedule.window.is_none_or(|w| w.contains(local))
}

/// The first Account held back whose figures or login are too old to trust, not yet
/// probed this tick and not taken: one a round, so that ticks started together probe
/// different Accounts side by side.
fn first_parked(
    ctx: &Ctx,
    views: &[AccountView],
    now: DateTime<Utc>,
    occupied: &Occupied,
    probed: &BTreeSet<String>,
) -> Option<String> {
    let max_age = ctx.config.probe_max_age;
    usage::parked_accounts(views, |name| can_probe(ctx, name), max_age, now)
        .into_iter()
        .find(|a| !probed.contains(a) && !occupied.contains_key(a))
}

/// The Accounts this machine shows cannot run anything (`Unready`), each with why.
fn unready(views: &[AccountView]) -> impl Iterator<Item = (&AccountView, &String)> {
    views.iter().filter_map(|a| match &a.standing {
        crate::schedule::Standing::Unready { why } => Some((a, why)),
        _ => None,
    })
}

/// What this machine shows that holds a queued Job back (an Account `Unready`), in words.
pub(super) fn held_by_this_machine(views: &[AccountView], plan: &Plan) -> Option<String> {
    unready(views)
        .find(|(a, _)| plan.queue.iter().any(|q| q.waits_for.contains(&a.name)))
        .map(|(a, why)| format!("{}: {why}", a.name))
}
