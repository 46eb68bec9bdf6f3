//! Each Account's standing: its Windows against its ceilings, its holds (a login, a backoff, a rejection, extra usage), and why it may run or not.

use super::*;

/// One Account as scheduling sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct AccountView {
    pub(crate) name: String,
    pub(crate) schedulable: bool,
    /// Why it is or is not schedulable, in words (with its name when it is not): rendered
    /// from `standing`.
    pub(crate) reason: String,
    /// The same, without the steps to fix it: what the queue and the idle line repeat for
    /// each Job, so that a login hint is printed once per Account, not once per mention.
    pub(crate) brief: String,
    /// Why it is or is not schedulable.
    pub(crate) standing: Standing,
    /// Percentage points left under the tightest Ceiling (100 with no figure or no ceiling).
    pub(crate) headroom: f64,
    /// The Window whose room under its night ceiling expires first (it resets before the
    /// morning), and when: capacity that is spent tonight or never.
    pub(crate) expiring: Option<(DateTime<Utc>, String)>,
    /// When the Account becomes schedulable again, if it is blocked by a Window.
    pub(crate) until: Option<DateTime<Utc>>,
    pub(crate) has_ceiling: bool,
    pub(crate) windows: Vec<WindowView>,
    pub(crate) not_logged_in: Option<String>,
    pub(crate) agent_problem: Option<String>,
    /// After an outage: no Run starts before this (already past: `None`).
    pub(crate) backoff_until: Option<DateTime<Utc>>,
    pub(crate) outages: u32,
    /// What the last preflight probe learned, and when.
    pub(crate) last_probe: Option<String>,
    pub(crate) last_probe_at: Option<DateTime<Utc>>,
    /// Its login was seen to work: a figure observed, a Run that succeeded.
    pub(crate) login_seen: bool,
    /// Its credential store is empty: a probe would find no login there.
    pub(crate) store_empty: bool,
    /// owl's share (points) of each Window instance it caps: (window, reset, points).
    #[serde(skip)]
    pub(crate) owl_shares: Vec<(String, DateTime<Utc>, f64)>,
    /// With a morning configured: the next one, and each Window as it will stand then if
    /// nothing more runs.
    #[serde(skip)]
    pub(crate) morning: Option<(DateTime<Utc>, Vec<MorningWindow>)>,
    /// Why no Run may start on it now whatever its standing: a live Run holds it, or the
    /// tick was started for another Account.
    #[serde(skip)]
    pub(crate) occupied: Option<String>,
}

impl AccountView {
    /// owl's share (points) of the instance `w` is of, 0 when none is recorded.
    pub(crate) fn owl_points(&self, w: &WindowView) -> f64 {
        w.resets_at.map_or(0.0, |reset| {
            crate::model::points_of(&self.owl_shares, &w.window, reset)
        })
    }

    /// Whether any figure of the Account's utilization was ever observed. Without a
    /// ceiling there is nothing to know.
    pub(crate) fn utilization_known(&self) -> bool {
        !self.has_ceiling || self.windows.iter().any(|w| w.percent.is_some())
    }
}

/// Where an Account stands for scheduling, with the facts that decide it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Standing {
    /// Something on this machine keeps any Run off the Account, seen without starting the
    /// agent: its CLI not found, bubblewrap missing, an empty credential store.
    Unready {
        why: String,
    },
    /// No usable login: `why` says what showed it, `login` how to fix it.
    NotLoggedIn {
        why: String,
        login: String,
    },
    /// The API was unavailable to `outages` Runs or probes in a row: no Run starts before `until`.
    BackingOff {
        outages: u32,
        until: DateTime<Utc>,
    },
    /// The provider rejected the Account (a rate limit, a used-up Window): it waits until
    /// `until`, the reset it named or the Account's back-off.
    RateLimited {
        until: DateTime<Utc>,
    },
    /// The plan is used up (a Window at 100%, or a Run found it billing usage credits):
    /// a Run now would be refused or billed to extra usage, which the Account does not
    /// allow. `until`: the reset of the Window that sent it there.
    OnCredits {
        window: Option<String>,
        until: Option<DateTime<Utc>>,
    },
    /// A Window's figure is at or over its Ceiling.
    OverCeiling {
        window: String,
        percent: f64,
        limit: &'static str,
        ceiling: f64,
        resets_at: Option<DateTime<Utc>>,
        /// With no reset time, when the figure stops counting (a Window's length on).
        expires_at: DateTime<Utc>,
    },
    /// A Window's figure is under its Ceiling by less than the Account's `minHeadroom`: a
    /// Run started now would be stopped at its first figure.
    NearCeiling {
        window: String,
        percent: f64,
        limit: &'static str,
        ceiling: f64,
        min_headroom: f64,
        resets_at: Option<DateTime<Utc>>,
    },
    /// owl's own Runs used `points` of a Window instance, at (or, with `near`, within the
    /// Account's minimum headroom of) its owl-share cap: the rest of it is the user's.
    OwlShareCap {
        window: String,
        points: f64,
        limit: &'static str,
        cap: f64,
        near: bool,
        resets_at: Option<DateTime<Utc>>,
    },
    NoCeiling,
    /// The Driver reports no utilization: the Account runs until a rate limit, then waits
    /// for the reset it names or `backoff_secs`.
    Reactive {
        backoff_secs: u64,
    },
    /// Every Window under its Ceiling; `observed`: on a current figure (not none yet).
    UnderCeilings {
        observed: bool,
    },
}

impl Standing {
    pub(crate) fn schedulable(&self) -> bool {
        matches!(
            self,
            Standing::NoCeiling | Standing::Reactive { .. } | Standing::UnderCeilings { .. }
        )
    }

    /// When the Account becomes schedulable again by itself, if a time says.
    pub(crate) fn until(&self) -> Option<DateTime<Utc>> {
        match self {
            Standing::BackingOff { until, .. } | Standing::RateLimited { until } => Some(*until),
            Standing::OverCeiling { resets_at, .. }
            | Standing::NearCeiling { resets_at, .. }
            | Standing::OwlShareCap { resets_at, .. } => *resets_at,
            Standing::OnCredits { until, .. } => *until,
            _ => None,
        }
    }

    /// The standing in a few words, for a line that refers to where it is said whole
    /// (`status`'s Account line): "not logged in", "over its ceiling".
    pub(crate) fn headline(&self) -> &'static str {
        match self {
            Standing::Unready { .. } => "cannot run here",
            Standing::NotLoggedIn { .. } => "not logged in",
            Standing::BackingOff { .. } => "backing off after outages",
            Standing::RateLimited { .. } => "rejected by the provider",
            Standing::OnCredits { .. } => "its plan is used up",
            Standing::OverCeiling { .. } => "over its ceiling",
            Standing::NearCeiling { .. } => "too near its ceiling",
            Standing::OwlShareCap { .. } => "owl's share is used",
            Standing::NoCeiling | Standing::Reactive { .. } | Standing::UnderCeilings { .. } => {
                "schedulable"
            }
        }
    }

    /// [`Standing::explain`] without how to fix it.
    pub(crate) fn brief(&self, now: DateTime<Utc>) -> String {
        match self {
            Standing::NotLoggedIn { why, .. } => why.clone(),
            other => other.explain(now),
        }
    }

    /// The standing in words, times relative to `now`: the one place it is rendered.
    pub(crate) fn explain(&self, now: DateTime<Utc>) -> String {
        match self {
            Standing::Unready { why } => why.clone(),
            Standing::NotLoggedIn { why, login } => format!("{why} — {login}"),
            Standing::BackingOff { outages, until } => format!(
                "the API was unavailable to the last {} — backing off, not scheduled \
                 until {} (in {})",
                if *outages == 1 {
                    "Run or probe".to_string()
                } else {
                    format!("{outages} Runs or probes")
                },
                local_hm(*until),
                human(*until - now)
            ),
            Standing::RateLimited { until } => format!(
                "rejected by the provider until {} (in {})",
                local_hm(*until),
                human(*until - now)
            ),
            Standing::OverCeiling { .. }
            | Standing::NearCeiling { .. }
            | Standing::OwlShareCap { .. } => self.explain_ceiling(now),
            Standing::OnCredits { window, until } => {
                let window = window.as_deref().unwrap_or("a window");
                let until = match until {
                    Some(t) => format!(
                        "not scheduled until {} (in {})",
                        local_hm(*t),
                        human(*t - now)
                    ),
                    None => "not scheduled until a probe or a Run observes a new figure".into(),
                };
                format!(
                    "extra usage: {window} is used up, so a Run now would be refused or billed \
                     to usage credits (allowExtraUsage is off) — {until}"
                )
            }
            Standing::NoCeiling => "no ceiling".into(),
            Standing::Reactive { backoff_secs } => format!(
                "reactive: no utilization reported; runs until a rate limit, then waits \
                 for the reset it names or {}",
                human(chrono::Duration::seconds(*backoff_secs as i64))
            ),
            Standing::UnderCeilings { observed: true } => "under its ceilings".into(),
            Standing::UnderCeilings { observed: false } => {
                "under its ceilings (no current figure observed yet)".into()
            }
        }
    }

    /// A ceiling's standing in words: over it, or too near it to start a Run.
    fn explain_ceiling(&self, now: DateTime<Utc>) -> String {
        let until = |t: &DateTime<Utc>| {
            format!(
                "not scheduled until {} (in {})",
                local_hm(*t),
                human(*t - now)
            )
        };
        match self {
            Standing::OverCeiling {
                window,
                percent,
                limit,
                ceiling,
                resets_at,
                expires_at,
            } => {
                let until = match resets_at {
                    Some(t) => until(t),
                    None => format!(
                        "reset unknown: not scheduled until a probe or a Run observes a new \
                         figure, or until {} (in {}), a {} after it was observed",
                        local_hm(*expires_at),
                        human(*expires_at - now),
                        match WindowKind::of(window).length().num_days() {
                            7 => "week",
                            _ => "five hours",
                        }
                    ),
                };
                format!(
                    "{window} {}% >= {limit} {} — {until}",
                    fmt_percent(*percent),
                    fmt_percent(*ceiling)
                )
            }
            Standing::NearCeiling {
                window,
                percent,
                limit,
                ceiling,
                min_headroom,
                resets_at,
            } => format!(
                "{window} {}% is within {} pp of {limit} {} (minHeadroom): a Run would be \
                 stopped at once — {}",
                fmt_percent(*percent),
                fmt_percent(*min_headroom),
                fmt_percent(*ceiling),
                resets_at.as_ref().map_or_else(
                    || "not scheduled until a probe or a Run observes a new figure".into(),
                    until
                )
            ),
            Standing::OwlShareCap {
                window,
                points,
                limit,
                cap,
                near,
                resets_at,
            } => format!(
                "owl's Runs used {} pp of this {window}, {} {limit} {}: the rest is yours — {}",
                fmt_percent(*points),
                if *near { "within minHeadroom of" } else { "at" },
                fmt_percent(*cap),
                resets_at.as_ref().map_or_else(
                    || "not scheduled until a probe or a Run observes a new figure".into(),
                    until
                )
            ),
            _ => String::new(),
        }
    }
}

/// Which Ceiling governs a Window, by its kind: `fiveHourMax` the five-hour Window,
/// `weeklyMax` the weekly ones, and `modelWeeklyMax` (or, unset, `weeklyMax`) each
/// per-model weekly Window. A Window owl does not know has none.
pub(crate) fn ceiling_for(
    window: &str,
    limits: Option<&crate::config::Limits>,
) -> Option<(&'static str, f64)> {
    let limits = limits?;
    match WindowKind::of(window) {
        WindowKind::FiveHour => limits
            .five_hour_max
            .map(|x| (learned_or(limits.learned.five_hour, "fiveHourMax"), x)),
        WindowKind::Weekly => weekly(limits),
        WindowKind::ModelWeekly => limits
            .model_weekly_max
            .map(|x| ("modelWeeklyMax", x))
            .or_else(|| weekly(limits)),
        WindowKind::Other => None,
    }
}

/// The weekly ceiling, by the key that set it.
fn weekly(limits: &crate::config::Limits) -> Option<(&'static str, f64)> {
    limits
        .weekly_max
        .map(|x| (learned_or(limits.learned.weekly, "weeklyMax"), x))
}

/// `learnedReserve` for a ceiling a learned reserve set, else the configured `key`.
fn learned_or(learned: bool, key: &'static str) -> &'static str {
    if learned {
        "learnedReserve"
    } else {
        key
    }
}

/// Builds the view of every configured Account from its newest Snapshots and notes.
pub(crate) fn account_views(
    config: &Config,
    snapshots: &[Snapshot],
    notes: &BTreeMap<String, AccountNote>,
    now: DateTime<Utc>,
) -> Vec<AccountView> {
    config
        .accounts
        .iter()
        .map(|(name, account)| {
            let run_model = config.defaults.model.as_deref();
            let limits = account.limits.as_ref();
            let tonight = crate::morning::Tonight::of(config, account, now, &Local);
            let windows: Vec<WindowView> = snapshots
                .iter()
                .filter(|s| &s.account == name)
                .map(|s| window_view(s, (limits, tonight.as_ref()), run_model, now))
                .collect();
            let note = notes.get(name).cloned().unwrap_or_default();
            let mut view = account_view(name, account, windows, note, run_model, now);
            let morning =
                crate::morning::Day::of(config, account).map(|d| d.following_morning(now, &Local));
            view.morning = morning.map(|m| (m, at_morning(&view, limits, m)));
            view
        })
        .collect()
}

/// One Window of an Account as it stands now: its figure (none once stale), its ceiling,
/// and whether it is over it for the Runs it limits.
fn window_view(
    s: &Snapshot,
    (limits, tonight): (
        Option<&crate::config::Limits>,
        Option<&crate::morning::Tonight>,
    ),
    run_model: Option<&str>,
    now: DateTime<Utc>,
) -> WindowView {
    // A figure from before its Window reset says nothing about now; one whose reset is
    // unknown says nothing once a whole Window has passed.
    let stale = match s.resets_at {
        Some(r) => r <= now,
        None => now - s.observed_at >= window_length(&s.window),
    };
    let percent = (!stale).then_some(s.percent);
    let configured = ceiling_for(&s.window, limits);
    let bound = configured.map(|c| crate::morning::Bound::in_force(c, s.resets_at, tonight));
    let ceiling = bound.map(|b| b.ceiling);
    let model = WindowKind::model_of(&s.window, s.model.as_deref());
    let applies = WindowKind::limits_model(model.as_deref(), run_model);
    WindowView {
        window: s.window.clone(),
        kind: WindowKind::of(&s.window),
        model,
        percent,
        ceiling,
        limit: bound.map(|b| b.key),
        night: bound.zip(configured).and_then(|(b, (limit, ceiling))| {
            Some(NightCeiling {
                morning: b.before_morning?,
                limit,
                ceiling,
            })
        }),
        resets_at: s.resets_at,
        observed_at: s.observed_at,
        source: s.source,
        run_id: s.run_id,
        over: applies && matches!((percent, ceiling), (Some(p), Some(c)) if p >= c),
    }
}

/// One Account's view: its standing from its notes and Windows, and the words for it.
fn account_view(
    name: &str,
    account: &crate::config::Account,
    windows: Vec<WindowView>,
    note: AccountNote,
    run_model: Option<&str>,
    now: DateTime<Utc>,
) -> AccountView {
    let has_ceiling = account.has_ceiling();
    let headroom = windows
        .iter()
        .filter(|w| WindowKind::limits_model(w.model.as_deref(), run_model))
        .filter_map(|w| Some(w.ceiling? - w.percent?))
        .fold(100.0_f64, f64::min);
    let expiring = windows
        .iter()
        .filter(|w| WindowKind::limits_model(w.model.as_deref(), run_model))
        .filter(|w| w.night.is_some())
        .filter(|w| matches!((w.percent, w.ceiling), (Some(p), Some(c)) if p < c))
        .filter_map(|w| Some((w.resets_at?, w.label())))
        .min();
    // An agent CLI problem does not stop scheduling: every tick checks the CLI again, so
    // the Job runs as soon as the CLI is fixed. Status tells it.
    let backoff = note.backoff_until.filter(|t| *t > now);
    let standing = standing_of(name, account, &windows, &note, run_model, now);
    let schedulable = standing.schedulable();
    let named = |words: String| {
        if schedulable {
            words
        } else {
            format!("{name}: {words}")
        }
    };
    AccountView {
        name: name.to_string(),
        schedulable,
        reason: named(standing.explain(now)),
        brief: named(standing.brief(now)),
        until: standing.until(),
        standing,
        headroom,
        expiring,
        has_ceiling,
        login_seen: note.login_seen || windows.iter().any(|w| w.percent.is_some()),
        store_empty: note.store_empty,
        owl_shares: note.owl_shares.clone(),
        morning: None,
        windows,
        not_logged_in: note.not_logged_in,
        agent_problem: note.agent_problem,
        backoff_until: backoff,
        outages: note.outages,
        last_probe: note.last_probe,
        last_probe_at: note.last_probe_at,
        occupied: None,
    }
}

/// What holds the Account, first of all that could: it is not ready, not logged in,
/// rejected, backing off, on credits, over a ceiling; else how it is scheduled.
fn standing_of(
    name: &str,
    account: &crate::config::Account,
    windows: &[WindowView],
    note: &AccountNote,
    run_model: Option<&str>,
    now: DateTime<Utc>,
) -> Standing {
    let limits = account.limits.as_ref();
    let allow_extra_usage = limits.is_some_and(|l| l.allow_extra_usage);
    let has_ceiling = account.has_ceiling();
    let binding = binding_window(windows);
    // A used-up Window: past it a request is refused or billed to credits.
    let spent = windows
        .iter()
        .filter(|w| w.kind != WindowKind::Other && w.percent.is_some_and(|p| p >= 100.0))
        .filter(|w| WindowKind::limits_model(w.model.as_deref(), run_model))
        .max_by_key(|w| w.resets_at)
        .filter(|_| !allow_extra_usage);
    let on_credits = note
        .on_credits_until
        .filter(|t| *t > now && !allow_extra_usage);
    let backoff = note.backoff_until.filter(|t| *t > now);
    if let Some(why) = &note.unready {
        Standing::Unready { why: why.clone() }
    } else if let Some(why) = &note.not_logged_in {
        let login = crate::driver::login_fix(account, name);
        Standing::NotLoggedIn {
            why: why.clone(),
            login,
        }
    } else if let Some(until) = note.rate_limited_until.filter(|t| *t > now) {
        Standing::RateLimited { until }
    } else if let Some(until) = backoff {
        Standing::BackingOff {
            outages: note.outages,
            until,
        }
    } else if let Some(until) = on_credits {
        Standing::OnCredits {
            window: note.on_credits_window.clone(),
            until: Some(until),
        }
    } else if let Some(w) = spent {
        Standing::OnCredits {
            window: Some(w.label()),
            until: w.resets_at,
        }
    } else if let Some(w) = binding {
        Standing::OverCeiling {
            window: w.label(),
            percent: w.percent.unwrap_or(0.0),
            limit: w.limit.unwrap_or("ceiling"),
            ceiling: w.ceiling.unwrap_or(0.0),
            resets_at: w.resets_at,
            expires_at: w.observed_at + window_length(&w.window),
        }
    } else if let Some(capped) = owl_share_capped(windows, limits, note, run_model) {
        capped
    } else if let Some((w, min_headroom)) = near_ceiling(windows, limits, run_model) {
        Standing::NearCeiling {
            window: w.label(),
            percent: w.percent.unwrap_or(0.0),
            limit: w.limit.unwrap_or("ceiling"),
            ceiling: w.ceiling.unwrap_or(0.0),
            min_headroom,
            resets_at: w.resets_at,
        }
    } else if !crate::driver::capabilities(account.driver).usage_reporting {
        Standing::Reactive {
            backoff_secs: account.backoff.as_secs(),
        }
    } else if !has_ceiling {
        Standing::NoCeiling
    } else {
        Standing::UnderCeilings {
            observed: windows.iter().any(|w| w.percent.is_some()),
        }
    }
}

/// How long a Window is: a figure over a Ceiling whose reset is unknown expires after it.
pub(crate) fn window_length(window: &str) -> chrono::Duration {
    WindowKind::of(window).length()
}

/// The Window that keeps the Account from being scheduled: the one over its Ceiling that
/// resets last (the most utilized `seven_day*` counts for `weeklyMax`).
/// The Window (with the Account's minimum) whose headroom under its ceiling in force is less
/// than `minHeadroom` (default [`DEFAULT_MIN_HEADROOM`]): the one that resets last.
fn near_ceiling<'w>(
    windows: &'w [WindowView],
    limits: Option<&crate::config::Limits>,
    run_model: Option<&str>,
) -> Option<(&'w WindowView, f64)> {
    let min = min_headroom(limits);
    windows
        .iter()
        .filter(|w| WindowKind::limits_model(w.model.as_deref(), run_model))
        .filter(|w| matches!((w.percent, w.ceiling), (Some(p), Some(c)) if c - p < min))
        .max_by_key(|w| w.resets_at)
        .map(|w| (w, min))
}

/// The Window whose instance owl's own Runs used up to its owl-share cap (or to within the
/// minimum headroom of it), as the standing that holds the Account.
fn owl_share_capped(
    windows: &[WindowView],
    limits: Option<&crate::config::Limits>,
    note: &AccountNote,
    run_model: Option<&str>,
) -> Option<Standing> {
    let limits = limits?;
    let min = min_headroom(Some(limits));
    windows
        .iter()
        .filter(|w| w.percent.is_some())
        .filter(|w| WindowKind::limits_model(w.model.as_deref(), run_model))
        .filter_map(|w| {
            let (limit, cap) = limits.owl_cap(&w.window)?;
            let reset = w.resets_at?;
            let points = crate::model::points_of(&note.owl_shares, &w.window, reset);
            (points + min > cap).then(|| Standing::OwlShareCap {
                window: w.label(),
                points,
                limit,
                cap,
                near: points < cap,
                resets_at: w.resets_at,
            })
        })
        .next()
}

/// The headroom under a ceiling below which no Run is started, when an Account sets none:
/// two points. In the recorded transcripts one response moves a Window by 3 to 13 points,
/// so a Run started closer than that is stopped at its first figure, having spent a start.
pub(crate) const DEFAULT_MIN_HEADROOM: f64 = 2.0;

/// The least headroom a Run starts under on an Account: its `minHeadroom`, else
/// [`DEFAULT_MIN_HEADROOM`].
pub(crate) fn min_headroom(limits: Option<&crate::config::Limits>) -> f64 {
    limits
        .and_then(|l| l.min_headroom)
        .unwrap_or(DEFAULT_MIN_HEADROOM)
}

pub(super) fn binding_window(windows: &[WindowView]) -> Option<&WindowView> {
    windows
        .iter()
        .filter(|w| w.over)
        .max_by_key(|w| w.resets_at)
}
