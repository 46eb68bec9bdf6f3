//! The learned reserve in force: an Account whose `learnedReserve` has seen enough of the user's days gets, for its five-hour and weekly Windows, the bound the reserve gives now (under a `fiveHourMax`/`weeklyMax` it sets, which stays a hard cap), kept current at each response of a Run.

use std::collections::BTreeMap;

use anyhow::Result;
use chrono::{DateTime, Local, Utc};

use super::Ctx;
use crate::config::{LearnedReserve, Limits};
use crate::model::WindowKind;
use crate::store::Store;
use crate::user_use::{Kept, Profile};

/// The Windows a learned reserve bounds: the five hours and the week.
const BOUNDED: [WindowKind; 2] = [WindowKind::FiveHour, WindowKind::Weekly];

/// Each learned reserve's bound, in words, by Account: what `status` explains.
pub(super) type Said = BTreeMap<String, Vec<String>>;

/// Every learned reserve in force now: the context whose limits carry their bounds, what
/// each keeps in words, and each Account's reserve for a Run to keep current.
pub(super) struct InForce {
    /// The context with the bounds on its limits and the reserves beside them.
    pub(super) ctx: Ctx,
    pub(super) said: Said,
}

/// The learned reserves in force now; `None` when no Account has one configured.
pub(super) fn in_force(ctx: &Ctx, now: DateTime<Utc>) -> Result<Option<InForce>> {
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
    let mut out = InForce {
        ctx: Ctx {
            config: ctx.config.clone(),
            reserves: BTreeMap::new(),
        },
        said: Said::new(),
    };
    for (name, account) in config.accounts.iter_mut() {
        let Some(settings) = account.learned_reserve else {
            continue;
        };
        let since = now - chrono::Duration::weeks(i64::from(settings.weeks));
        let limited = store.user_limited_since(name, since)?.len();
        let learned = learn(&store, name, settings, (since, now), limited)?;
        let resets = |kind: WindowKind| {
            latest
                .iter()
                .find(|s| &s.account == name && WindowKind::of(&s.window) == kind)
                .and_then(|s| s.resets_at)
                .filter(|r| *r > now)
        };
        let words = match learned {
            Learned::TooFew { days } => vec![format!(
                "learned reserve: {days} of {} days of your use seen; the configured ceilings \
                 hold for {} more",
                settings.min_days,
                settings.min_days as usize - days
            )],
            Learned::Enough(mut reserve) => {
                let resets = BOUNDED.map(resets);
                let mut limits = account.limits.unwrap_or_default();
                let words = reserve.apply(&mut limits, resets, now);
                account.limits = Some(limits);
                out.ctx.reserves.insert(name.clone(), *reserve);
                words
            }
        };
        out.said.insert(name.clone(), words);
    }
    out.ctx.config = config;
    Ok(Some(out))
}

/// What a learned reserve has to go on.
enum Learned {
    /// Fewer days seen than it needs: the configured ceilings hold.
    TooFew {
        days: usize,
    },
    Enough(Box<Reserve>),
}

/// Learns an Account's reserve from its user's hours since `since`.
fn learn(
    store: &Store,
    name: &str,
    settings: LearnedReserve,
    (since, now): (DateTime<Utc>, DateTime<Utc>),
    limited: usize,
) -> Result<Learned> {
    let week = store.user_use_since(name, "weekly", since)?;
    let five = store.user_use_since(name, "five_hour", since)?;
    let q = settings.quantile;
    let days = crate::user_use::learn(&week, &five, &Local, q).days;
    if days < settings.min_days as usize {
        return Ok(Learned::TooFew { days });
    }
    // The forecast is of the days before today; today counts through how far the user
    // runs ahead of it.
    let today = crate::user_use::start_of_day(now, &Local);
    let keeping = |history: &[(DateTime<Utc>, f64)]| {
        let before: Vec<_> = history
            .iter()
            .copied()
            .filter(|(h, _)| *h < today)
            .collect();
        let profile = Profile::learn(&before, Local, q);
        Keeping {
            ahead: profile.ahead(history, now),
            profile,
        }
    };
    Ok(Learned::Enough(Box::new(Reserve {
        five: keeping(&five),
        week: keeping(&week),
        margin: crate::user_use::margin(limited),
        limited,
        floor: settings.floor,
        quantile: q,
        days,
        configured: None,
    })))
}

/// A learned reserve in force for one Account: what it keeps of its five-hour and weekly
/// Windows until each one's reset, from any moment on.
#[derive(Debug, Clone)]
pub(crate) struct Reserve {
    five: Keeping,
    week: Keeping,
    margin: f64,
    /// The days the user was limited, which grew the margin.
    limited: usize,
    floor: f64,
    quantile: f64,
    days: usize,
    /// The Account's configured five-hour and weekly ceilings, hard caps under the bound
    /// (set by [`Reserve::apply`]).
    configured: Option<(Option<f64>, Option<f64>)>,
}

/// The user's profile of one Window, and how far ahead of it they run today.
#[derive(Debug, Clone)]
struct Keeping {
    profile: Profile<Local>,
    ahead: f64,
}

impl Reserve {
    /// What is kept of a Window of `keeping` from `now` until `reset`.
    fn kept(&self, keeping: &Keeping, now: DateTime<Utc>, reset: DateTime<Utc>) -> Kept {
        Kept {
            forecast: keeping.profile.forecast((now, reset)),
            ahead: keeping.ahead,
            margin: self.margin,
            floor: self.floor,
        }
    }

    /// Puts the bounds in force at `now` on `limits` for the five-hour and weekly Windows
    /// that reset at `resets`; what it did, in words.
    fn apply(
        &mut self,
        limits: &mut Limits,
        resets: [Option<DateTime<Utc>>; 2],
        now: DateTime<Utc>,
    ) -> Vec<String> {
        self.configured = Some((limits.five_hour_max, limits.weekly_max));
        let mut words = Vec::new();
        for (kind, reset) in BOUNDED.into_iter().zip(resets) {
            if let Some(reset) = reset {
                words.push(self.set(limits, kind, reset, now));
            }
        }
        words
    }

    /// Sets the bound of one Window (the five hours or the week) that resets at `reset`, as
    /// it stands at `now`, under its configured ceiling; what it keeps, in words.
    fn set(
        &self,
        limits: &mut Limits,
        kind: WindowKind,
        reset: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> String {
        let night_max = crate::morning::night_max(Some(limits));
        let (five, week) = self.configured.unwrap_or_default();
        let (label, keeping, configured, cap, learned) = match kind {
            WindowKind::FiveHour => (
                "five_hour",
                &self.five,
                five,
                &mut limits.five_hour_max,
                &mut limits.learned.five_hour,
            ),
            _ => (
                "week",
                &self.week,
                week,
                &mut limits.weekly_max,
                &mut limits.learned.weekly,
            ),
        };
        let kept = self.kept(keeping, now, reset);
        let bound = kept.bound(night_max);
        // A ceiling the user set beside it stays a hard cap.
        let binds = configured.is_some_and(|c| c < bound);
        *cap = Some(configured.filter(|_| binds).unwrap_or(bound));
        *learned = !binds;
        self.said(label, kept, (cap.unwrap_or(bound), binds), reset)
    }

    /// One Window's bound and why: "week: ceiling 71%: 25 pp kept for you until Thu 05:00
    /// (P90 of your use over 19 days) + 4 pp margin".
    fn said(
        &self,
        label: &str,
        kept: Kept,
        (ceiling, binds): (f64, bool),
        reset: DateTime<Utc>,
    ) -> String {
        let pct = crate::text::fmt_percent;
        let mut text = format!(
            "{label}: ceiling {}%: {} pp kept for you until {} (P{} of your use over {} {})",
            pct(ceiling),
            pct(kept.forecast),
            reset.with_timezone(&Local).format("%a %H:%M"),
            pct(self.quantile * 100.0),
            self.days,
            if self.days == 1 { "day" } else { "days" },
        );
        if kept.ahead > 0.0 {
            text.push_str(&format!(
                " + {} pp you run ahead of your usual today",
                pct(kept.ahead)
            ));
        }
        text.push_str(&format!(" + {} pp margin", pct(kept.margin)));
        if self.limited > 0 {
            text.push_str(&format!(
                " (grown by {} pp after {} {} you were limited)",
                pct(kept.margin - crate::morning::LARGEST_RESPONSE_MOVE),
                self.limited,
                if self.limited == 1 { "day" } else { "days" }
            ));
        }
        if kept.points() > kept.forecast + kept.ahead + kept.margin {
            text.push_str(&format!(", at least the floor of {} pp", pct(kept.floor)));
        }
        if binds {
            text.push_str(" (your configured ceiling binds first)");
        }
        text
    }

    /// The user's use of a Window of `kind` forecast from `from` until `until`; `None` for
    /// a kind the reserve does not learn.
    pub(crate) fn forecast(
        &self,
        kind: WindowKind,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Option<f64> {
        let keeping = match kind {
            WindowKind::FiveHour => &self.five,
            WindowKind::Weekly => &self.week,
            _ => return None,
        };
        Some(keeping.profile.forecast((from, until)))
    }

    /// Keeps `limits` at the bounds in force at `now` for the five-hour and weekly Windows
    /// `snapshots` name: a Run's ceiling rises as the hours the user would have used pass.
    pub(crate) fn update(
        &self,
        limits: &mut Limits,
        snapshots: &[crate::model::Snapshot],
        now: DateTime<Utc>,
    ) {
        for s in snapshots {
            let kind = WindowKind::of(&s.window);
            if !BOUNDED.contains(&kind) {
                continue;
            }
            if let Some(reset) = s.resets_at.filter(|r| *r > now) {
                self.set(limits, kind, reset, now);
            }
        }
    }
}

/// Puts on each Account's morning forecast what its learned reserve forecasts the user will
/// use of each Window from the morning until the Window's reset.
pub(super) fn forecast_the_morning(ctx: &Ctx, views: &mut [crate::schedule::AccountView]) {
    for view in views {
        let Some(reserve) = ctx.reserves.get(&view.name) else {
            continue;
        };
        let Some((morning, windows)) = view.morning.as_mut() else {
            continue;
        };
        for w in windows.iter_mut().filter(|w| !w.fresh) {
            if let Some(reset) = w.resets_at {
                w.your_use = reserve.forecast(WindowKind::of(&w.window), *morning, reset);
            }
        }
    }
}
