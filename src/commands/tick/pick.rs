//! Which Job the tick runs, on which Account: the plan, the probe before the pick, and the
//! hold a Run of this machine keeps.

use std::collections::BTreeSet;

use super::super::plan::{plan_around, plan_around_except, Occupied};
use super::*;

/// What a tick's plan asks of it: run a Job, or first probe Accounts (outside the pick lock:
/// a CLI start and maybe a network check), then plan again.
pub(super) enum Picked {
    Decided(Decision),
    Probe(Vec<String>),
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
/// whose run lock this tick holds; failing on the way the Jobs whose budget is spent.
pub(super) fn choose(
    ctx: &Ctx,
    store: &mut Store,
    now: DateTime<Utc>,
    (dry_run, json): (bool, bool),
    machine_problem: &mut bool,
    occupied: &Occupied,
    learned: &Learned,
) -> Result<Picked> {
    let probed = &learned.probed;
    let plan_now =
        |store: &Store| plan_around_except(ctx, store, now, occupied, &learned.taken_jobs);
    let mut planned = plan_now(store)?;
    let local = now.with_timezone(&chrono::Local).time();
    let in_window = ctx.config.schedule.window.is_none_or(|w| w.contains(local));
    // Only when there is work that could use what a probe finds.
    if !dry_run && in_window && !planned.1.queue.is_empty() {
        let parked: Vec<String> = usage::parked_accounts(
            &planned.0,
            |name| can_probe(ctx, name),
            ctx.config.probe_max_age,
            now,
        )
        .into_iter()
        .filter(|a| !probed.contains(a) && !occupied.contains_key(a))
        // One a round: ticks started together probe different Accounts side by side.
        .take(1)
        .collect();
        if !parked.is_empty() {
            return Ok(Picked::Probe(parked));
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
    }
}

/// What this machine shows that holds a queued Job back (an Account `Unready`), in words.
pub(super) fn held_by_this_machine(views: &[AccountView], plan: &Plan) -> Option<String> {
    views
        .iter()
        .filter_map(|a| match &a.standing {
            crate::schedule::Standing::Unready { why } => Some((a, why)),
            _ => None,
        })
        .find(|(a, _)| plan.queue.iter().any(|q| q.waits_for.contains(&a.name)))
        .map(|(a, why)| format!("{}: {why}", a.name))
}
