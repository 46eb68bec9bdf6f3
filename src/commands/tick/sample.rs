//! The user's day observed at no token cost: an idle tick outside the night reads each Account's utilization, through its Driver's zero-token read only, when its newest figure is older than `sampleEvery`.

use super::*;

/// Samples every Account (or `only`) that is in its user's day and due: its figure read and
/// recorded as `owl probe` records it. Never starts a Run; a Driver without a zero-token read
/// is not sampled (nothing could be read without spending a token).
pub(super) fn sample_the_day(ctx: &Ctx, only: Option<&str>, now: DateTime<Utc>) -> Result<()> {
    let Some(mut store) = ctx.read_store()? else {
        return Ok(());
    };
    let views = super::super::plan::views_around(ctx, &store, now, &Default::default())?;
    let mut sampled = Vec::new();
    for view in &views {
        if only.is_some_and(|name| name != view.name) || !can_probe(ctx, &view.name) {
            continue;
        }
        let account = &ctx.config.accounts[&view.name];
        let in_day = crate::morning::Day::of(&ctx.config, account)
            .is_some_and(|day| day.next_morning(now, &chrono::Local).is_none());
        if usage::sample_due(in_day, view, ctx.config.sample_every, now) {
            tracing::debug!("{}: sampling the user's day", view.name);
            probe_account(ctx, &mut store, &view.name, now)?;
            sampled.push(view.name.clone());
        }
    }
    // Folded at once: today's use counts at the next decision, not a tick later.
    if !sampled.is_empty() {
        store.fold_user_use(&sampled, now)?;
    }
    Ok(())
}
