//! The learned reserve in force: an Account whose `learnedReserve` has seen enough of the user's days gets, for its five-hour and weekly Windows, the bound the reserve gives now (under a `fiveHourMax`/`weeklyMax` it sets, which stays a hard cap).

use anyhow::Result;
use chrono::{DateTime, Utc};

use super::Ctx;
use crate::config::{Account, LearnedReserve, Limits};
use crate::store::Store;

/// Each learned reserve's bound, in words, by Account: what `status` explains.
pub(super) type Said = std::collections::BTreeMap<String, Vec<String>>;

/// The context with every learned reserve in force now, and what each keeps, in words;
/// `None` when no Account has one in force (none configured, or too few days seen).
pub(super) fn in_force(ctx: &Ctx, now: DateTime<Utc>) -> Result<Option<(Ctx, Said)>> {
    if ctx
        .config
        .accounts
        .values()
        .all(|a| a.learned_reserve.is_none())
    {
        return Ok(None);
    }
    let Some(store) = ctx.read_store()? else {
        return Ok(None);
    };
    let latest = store.latest_snapshots()?;
    let mut config = ctx.config.clone();
    let mut said = Said::new();
    for (name, account) in config.accounts.iter_mut() {
        let Some(reserve) = account.learned_reserve else {
            continue;
        };
        let resets = |window: &str| {
            latest
                .iter()
                .find(|s| &s.account == name && s.window == window)
                .and_then(|s| s.resets_at)
                .filter(|r| *r > now)
        };
        let resets = [resets("five_hour"), resets("seven_day")];
        let words = apply(&store, (name, account), (reserve, resets), now)?;
        said.insert(name.clone(), words);
    }
    Ok(Some((Ctx { config }, said)))
}

/// Puts the reserve's bounds on the Account's limits; what it did, in words.
fn apply(
    store: &Store,
    (name, account): (&str, &mut Account),
    (reserve, [five_reset, week_reset]): (LearnedReserve, [Option<DateTime<Utc>>; 2]),
    now: DateTime<Utc>,
) -> Result<Vec<String>> {
    let since = now - chrono::Duration::weeks(i64::from(reserve.weeks));
    let week = store.user_use_since(name, "weekly", since)?;
    let five = store.user_use_since(name, "five_hour", since)?;
    let q = reserve.quantile;
    let days = crate::user_use::learn(&week, &five, &chrono::Local, q).days;
    if days < reserve.min_days as usize {
        let left = reserve.min_days as usize - days;
        return Ok(vec![format!(
            "learned reserve: {days} of {} days of your use seen; the configured ceilings \
             hold for {left} more",
            reserve.min_days
        )]);
    }
    let mut limits = account.limits.unwrap_or(Limits::default());
    let night_max = crate::morning::night_max(account.limits.as_ref());
    let mut words = Vec::new();
    for (label, history, reset, cap) in [
        ("five_hour", &five, five_reset, &mut limits.five_hour_max),
        ("week", &week, week_reset, &mut limits.weekly_max),
    ] {
        let Some(reset) = reset else {
            continue;
        };
        let forecast = crate::user_use::forecast(history, (now, reset), &chrono::Local, q);
        let bound = crate::user_use::bound(forecast, reserve.floor, night_max);
        // A ceiling the user set beside it stays a hard cap.
        let in_force = cap.map_or(bound, |c| c.min(bound));
        *cap = Some(in_force);
        words.push(format!(
            "{label}: ceiling {}%: {} pp kept for you until {} (P{} of your use over {days} \
             days) + {} pp margin{}",
            crate::text::fmt_percent(in_force),
            crate::text::fmt_percent(forecast),
            reset.with_timezone(&chrono::Local).format("%a %H:%M"),
            crate::text::fmt_percent(q * 100.0),
            crate::text::fmt_percent(crate::morning::LARGEST_RESPONSE_MOVE),
            if in_force < bound {
                " (your configured ceiling binds first)"
            } else {
                ""
            },
        ));
    }
    account.limits = Some(limits);
    Ok(words)
}
