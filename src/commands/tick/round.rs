//! One round of a tick's pick, under the pick lock: tidy (once), plan, and decide a Job to run, Accounts to probe first (outside the pick lock), or nothing; then take the Job and its Account by their locks and let the pick lock go.

use super::*;

/// One try at picking, under the pick lock.
pub(super) enum Round {
    /// Probes were made, or the pick was another tick's: pick again.
    Again,
    /// Reported: the exit code.
    Ended(u8),
    Chosen(Box<Chosen>),
}

/// The Job and Account a tick runs, theirs by their locks; the pick lock let go.
pub(super) struct Chosen {
    pub(crate) store: Store,
    pub(crate) job_id: String,
    pub(crate) account: String,
    pub(crate) now: DateTime<Utc>,
    /// The Account's run lock and the Job's lock, held to the Run's end.
    pub(crate) _locks: (Option<crate::lock::Held>, crate::lock::Held),
}

/// Takes the pick lock, tidies (once), plans, and decides: a Job to run, Accounts to probe
/// first (outside the pick lock, each under its own run lock), or nothing, reported. The
/// pick lock is held only while this decides, never through anything slow.
pub(super) fn round(
    ctx: &Ctx,
    args: &TickArgs,
    latch: &crate::supervise::StopLatch,
    learned: &mut pick::Learned,
    tidied: &mut bool,
) -> Result<Round> {
    let (dry_run, json) = (args.dry_run, args.json);
    let said = |action, reason: String| said(args, action, reason);
    let pick = match take_pick_lock(ctx, latch)? {
        Ok(pick) => pick,
        Err(reason) => return said(TickAction::Busy, reason),
    };
    let mut store = ctx.open_store()?;
    let now = crate::clock::now()?;
    if !*tidied {
        tidy(ctx, &mut store, now)?;
        *tidied = true;
    }
    let mut seats = seats::Seats::take(ctx, &store, args.account.as_deref())?;
    if let Some(reason) = seats.full(ctx.config.max_concurrent_runs, ctx.config.accounts.len()) {
        return said(TickAction::Busy, reason);
    }
    let mut aside = pick::Aside::default();
    let occupied = &seats.occupied;
    let picked = match &args.job {
        Some(id) => {
            let decided = choose_job(ctx, &mut store, id, args.ignore_ceiling, now, occupied)?;
            aside.open_jobs = !store.count_queue(&ctx.config.machine)?.is_empty();
            pick::Picked::Decided(decided)
        }
        None => choose(
            ctx,
            &mut store,
            now,
            (dry_run, json),
            &mut aside,
            occupied,
            learned,
        )?,
    };
    let decision = match picked {
        pick::Picked::Decided(decision) => decision,
        pick::Picked::Probe(accounts) => {
            // Each under its own run lock, no other tick waiting on its network.
            let held = seats.hold(&accounts);
            drop((pick, seats));
            for account in &accounts {
                if latch.fired().is_none() {
                    probe_account(ctx, &mut store, account, now)?;
                }
                learned.probed.insert(account.clone());
            }
            drop(held);
            return Ok(Round::Again);
        }
    };
    let decided = Decided {
        decision,
        aside,
        seats,
        pick,
        store,
        now,
    };
    take(ctx, args, latch, learned, decided)
}

/// What a round decided, with what it holds.
struct Decided {
    decision: Decision,
    aside: pick::Aside,
    seats: seats::Seats,
    pick: crate::lock::Held,
    store: Store,
    now: DateTime<Utc>,
}

/// Acts on a round's decision: nothing to run (reported), a dry run (reported), or the Job
/// and Account taken by their locks, the pick lock let go.
fn take(
    ctx: &Ctx,
    args: &TickArgs,
    latch: &crate::supervise::StopLatch,
    learned: &mut pick::Learned,
    decided: Decided,
) -> Result<Round> {
    let (dry_run, json) = (args.dry_run, args.json);
    let said = |action, reason: String| said(args, action, reason);
    let Decided {
        decision,
        aside,
        seats,
        pick,
        store,
        now,
    } = decided;
    if let Some(sig) = latch.fired() {
        // A probe it cut short, or a plan made while it came: nothing is started.
        anyhow::bail!("owl received {sig} before any Run started; nothing was started");
    }
    let (job_id, account) = match decision {
        Decision::Idle { reason } if !aside.machine_problem && aside.open_jobs => {
            return match seats.all_busy() {
                Some(busy) => said(TickAction::Busy, busy),
                None => Ok(Round::Ended(idle(json, args, reason, dry_run)?)),
            };
        }
        Decision::Idle { reason } if aside.machine_problem => {
            // A Job held back by this machine (its CLI not found, no bubblewrap, no login
            // in the store), not by a wait: a script must be able to tell.
            said(TickAction::Idle, reason)?;
            return Ok(Round::Ended(crate::error::EXIT_FAILURE));
        }
        Decision::Idle { reason } => return Ok(Round::Ended(idle(json, args, reason, dry_run)?)),
        Decision::Run { job_id, account } => (job_id, account),
    };
    if dry_run {
        let out = TickJson {
            job_id: Some(job_id),
            account: Some(account),
            ..TickJson::said(
                TickAction::Ran,
                "dry run: nothing was started".into(),
                dry_run,
            )
        };
        return Ok(Round::Ended(report(json, out)?));
    }
    // The Job's lock, held from here to the Run's end. Another tick starting a Run of it,
    // or its check run by hand, holds it: plan again without it.
    ensure_private_dir(&ctx.config.state().logs(&job_id))?;
    let Some(job_lock) = crate::lock::try_lock(&ctx.config.state().job_lock(&job_id))? else {
        if args.job.is_some() {
            let reason = format!(
                "job {job_id} is being started by another tick or checked by hand (`owl check`)"
            );
            return said(TickAction::Idle, reason);
        }
        learned.taken_jobs.insert(job_id);
        return Ok(Round::Again);
    };
    // The Account's run lock, held for the Run's whole life: no other tick starts a Run on
    // it, and `owl check` never runs beside it. Decided: what is slow (the version check, a
    // first conformance check, the login check, the worktree) happens without the pick
    // lock; the Run is recorded by a write the Job's state guards.
    let run_lock = seats.keep(&account);
    drop(pick);
    Ok(Round::Chosen(Box::new(Chosen {
        store,
        job_id,
        account,
        now,
        _locks: (run_lock, job_lock),
    })))
}

/// A round that ends with `reason`, reported.
fn said(args: &TickArgs, action: TickAction, reason: String) -> Result<Round> {
    let out = TickJson::said(action, reason, args.dry_run);
    Ok(Round::Ended(report(args.json, out)?))
}
