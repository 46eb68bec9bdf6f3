//! What a tick tidies before it picks: Runs whose tick died, and history past its keep.

use super::*;

/// Records this machine's tick, then finds Runs a dead tick left marked running and
/// settles them (see `recover`): this machine's by their processes, another machine's by
/// their lease on a shared store.
pub(super) fn recover(ctx: &Ctx, store: &mut Store, now: DateTime<Utc>) -> Result<()> {
    let config = &ctx.config;
    let host = crate::sys::host_identity();
    if let Err(e) = store.record_tick(&config.machine, &host, config.lease_length, now) {
        return match e.downcast_ref::<crate::store::NameTaken>() {
            Some(taken) => Err(crate::error::Error::bad_input(format!(
                "reading config {}: {taken}",
                config.source
            ))
            .into()),
            None => Err(e),
        };
    }
    for run in store.expire_leases(&config.machine, now)? {
        errln!(
            "owl: run {} of job {} on machine {} was lost (its lease expired); the job is \
             queued again",
            run.run_id,
            run.job_id,
            run.machine
        );
    }
    let lost = crate::recover::recover_lost_runs(store, config, now)?;
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
pub(super) fn prune(ctx: &Ctx, store: &mut Store, now: DateTime<Utc>) -> Result<()> {
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
    // The user's use: the figures since the last tick folded in, the oldest let go.
    let accounts: Vec<String> = ctx.config.accounts.keys().cloned().collect();
    store.fold_user_use(&accounts, now)?;
    let keep =
        chrono::Duration::from_std(ctx.config.user_use_retention).unwrap_or(chrono::Duration::MAX);
    if let Some(old) = now.checked_sub_signed(keep) {
        store.prune_user_use(old)?;
    }
    let forgotten = store.forget_machines(before)?;
    if forgotten > 0 {
        tracing::debug!("forgot {forgotten} machines not seen since {before}");
    }
    Ok(())
}
