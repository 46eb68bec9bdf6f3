//! Utilization (ADR-0020): Snapshots from what the agent reports — usage answers, rate-limit events, the preflight probe — and the Ceiling check.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::config::Limits;
use crate::driver::{AgentEvent, RateLimitInfo, RateLimitStatus, Usage, WindowUsage};
use crate::model::{Crossing, OnCredits, Snapshot, SnapshotSource, StopCause, WindowKind};
use crate::schedule::{ceiling_for, fmt_percent, AccountView};

/// How long the preflight probe waits for the agent's answer.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

pub(crate) use crate::model::round_percent;

/// Snapshots from a usage answer (percent 0–100 already).
pub(crate) fn from_usage(
    windows: &[WindowUsage],
    account: &str,
    source: SnapshotSource,
    run_id: Option<i64>,
    now: DateTime<Utc>,
) -> Vec<Snapshot> {
    windows
        .iter()
        .map(|w| Snapshot {
            account: account.to_string(),
            window: w.window.clone(),
            percent: round_percent(w.percent),
            resets_at: w.resets_at,
            observed_at: now,
            source,
            run_id,
            model: w.model.clone(),
        })
        .collect()
}

/// The Snapshots a `rate_limit_event` carries: every Window of its `unifiedWindows`
/// (Claude Code 2.1.332, on every event), and the one it names: `rejected` means that
/// Window is at 100% until `resetsAt`, and a warning state says its `utilization` (a
/// fraction). The named Window's figure wins over its `unifiedWindows` copy only when it
/// says more (a rejection).
pub(crate) fn from_rate_limit(
    info: &RateLimitInfo,
    account: &str,
    run_id: Option<i64>,
    now: DateTime<Utc>,
) -> Vec<Snapshot> {
    let mut out = from_usage(
        &info.windows,
        account,
        SnapshotSource::RateLimitEvent,
        run_id,
        now,
    );
    let Some(window) = info.window.clone() else {
        return out;
    };
    // On credits the plan says rejected, but the request went through: the figure is the
    // Window's own (100 in every recording), never a rejection's.
    let named = if info.status == RateLimitStatus::Rejected && !info.on_credits {
        Some(100.0)
    } else {
        info.utilization.map(|u| u * 100.0)
    };
    let Some(percent) = named else {
        return out;
    };
    let percent = round_percent(percent);
    let resets_at = info.resets_at.and_then(|s| DateTime::from_timestamp(s, 0));
    match out.iter_mut().find(|s| s.window == window) {
        Some(s) if s.percent >= percent => {}
        Some(s) => s.percent = percent,
        None => out.push(Snapshot {
            account: account.to_string(),
            window,
            percent,
            resets_at,
            observed_at: now,
            source: SnapshotSource::RateLimitEvent,
            run_id,
            model: None,
        }),
    }
    out
}

/// The Snapshots an agent event carries, if any.
pub(crate) fn from_event(
    event: &AgentEvent,
    account: &str,
    run_id: Option<i64>,
    now: DateTime<Utc>,
) -> Vec<Snapshot> {
    match event {
        AgentEvent::ControlResponse {
            usage: Some(Usage::Windows(windows)),
            ..
        } => from_usage(windows, account, SnapshotSource::GetUsage, run_id, now),
        AgentEvent::Usage { source, windows } => from_usage(windows, account, *source, run_id, now),
        AgentEvent::RateLimit(info) => from_rate_limit(info, account, run_id, now),
        _ => Vec::new(),
    }
}

/// The extra-usage stop an event calls for: the first sign that a response was billed to
/// usage credits (`isUsingOverage` or `overageInUse`, even under `status: allowed`), on
/// an Account that does not allow extra usage. The Job waits for the reset of the Window
/// the event names.
pub(crate) fn on_credits(event: &AgentEvent, allow_extra_usage: bool) -> Option<StopCause> {
    let AgentEvent::RateLimit(info) = event else {
        return None;
    };
    if !info.on_credits || allow_extra_usage {
        return None;
    }
    Some(StopCause::ExtraUsage(OnCredits {
        window: info.window.clone(),
        until: info.resets_at.and_then(|s| DateTime::from_timestamp(s, 0)),
    }))
}

/// The Ceiling these Snapshots cross for a Run of `run_model` (a per-model Window counts
/// unless it is known to limit another model), if any: the crossed Window that resets
/// last, so the Job waits until every crossed Window has reset.
pub(crate) fn crossing(
    snapshots: &[Snapshot],
    (limits, tonight): (Option<&Limits>, Option<&crate::morning::Tonight>),
    run_model: Option<&str>,
) -> Option<StopCause> {
    snapshots
        .iter()
        .filter(|s| {
            let model = WindowKind::model_of(&s.window, s.model.as_deref());
            WindowKind::limits_model(model.as_deref(), run_model)
        })
        .filter_map(|s| {
            let configured = ceiling_for(&s.window, limits)?;
            let bound = crate::morning::Bound::in_force(configured, s.resets_at, tonight);
            (s.percent >= bound.ceiling).then_some((s, bound.key, bound.ceiling))
        })
        .max_by_key(|(s, _, _)| s.resets_at)
        .map(|(s, key, ceiling)| {
            StopCause::Ceiling(Crossing {
                window: s.window.clone(),
                percent: s.percent,
                limit: key.to_string(),
                ceiling,
                resets_at: s.resets_at,
            })
        })
}

/// What the preflight probe learned.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ProbeOutcome {
    Observed(Vec<WindowUsage>),
    /// The agent answered, but does not know the utilization (never read as 0).
    Unknown,
    /// The agent has no plan login: no credential at all, or only an API key.
    NoPlan,
    /// The agent answered "unknown", and the API it talks to takes no connection: an
    /// outage, backed off as a Run's is.
    Unreachable(String),
    Failed(String),
}

impl ProbeOutcome {
    /// What the probe says of the Account's login: `Some(false)` not logged in,
    /// `Some(true)` logged in, `None` when it could not tell. An Account that logs in with
    /// an API key (the Driver tells) is logged in without a plan, and says `NoPlan` too.
    pub(crate) fn logged_in(&self, uses_api_key: bool) -> Option<bool> {
        match self {
            ProbeOutcome::Observed(_) | ProbeOutcome::Unknown => Some(true),
            ProbeOutcome::NoPlan => Some(uses_api_key),
            ProbeOutcome::Unreachable(_) | ProbeOutcome::Failed(_) => None,
        }
    }
}

impl ProbeOutcome {
    /// A few words for status.
    pub(crate) fn describe(&self) -> String {
        match self {
            ProbeOutcome::Observed(w) if w.is_empty() => "answered with no Window".into(),
            ProbeOutcome::Observed(w) => {
                let parts: Vec<String> = w
                    .iter()
                    .map(|w| format!("{} {}%", w.window, fmt_percent(round_percent(w.percent))))
                    .collect();
                format!("observed {}", parts.join(", "))
            }
            ProbeOutcome::Unknown => "unknown: the agent did not know the utilization".into(),
            ProbeOutcome::NoPlan => "no plan: the agent has no plan login".into(),
            ProbeOutcome::Unreachable(why) => format!("the API is unreachable: {why}"),
            ProbeOutcome::Failed(why) => format!("failed: {why}"),
        }
    }
}

/// Whether the Account's newest figure is too old to start a Run on (for an Account whose
/// Driver reports utilization).
pub(crate) fn needs_probe(view: &AccountView, probe_max_age: Duration, now: DateTime<Utc>) -> bool {
    if !view.has_ceiling {
        return false;
    }
    // A Window that reset since its figure: its figure now is unknown, unless a probe
    // since the reset already asked.
    let reset_unprobed = view.windows.iter().any(|w| {
        w.percent.is_none()
            && w.ceiling.is_some()
            && w.resets_at
                .is_some_and(|r| view.last_probe_at.is_none_or(|p| p < r))
    });
    reset_unprobed || older_than(newest_figure(view), probe_max_age, now)
}

/// The unschedulable Accounts that a probe may free: not logged in, or over a Ceiling on a
/// figure older than `probeMaxAge`, and not probed within `probeMaxAge` either. Without
/// this an Account whose figure never resets would stay parked for good.
pub(crate) fn parked_accounts(
    views: &[AccountView],
    reports_usage: impl Fn(&str) -> bool,
    max_age: Duration,
    now: DateTime<Utc>,
) -> Vec<String> {
    views
        .iter()
        .filter(|v| !v.schedulable)
        .filter(|v| reports_usage(&v.name))
        .filter(|v| older_than(v.last_probe_at, max_age, now))
        // An empty store has no login for a probe to find; a login written there is
        // noticed by the change it makes.
        .filter(|v| !v.store_empty)
        .filter(|v| {
            v.not_logged_in.is_some()
                || (v.windows.iter().any(|w| w.over) && older_than(newest_figure(v), max_age, now))
        })
        .map(|v| v.name.clone())
        .collect()
}

/// When the newest figure that still holds was observed (one from before its Window's
/// reset says nothing about now).
/// Whether an idle tick samples the Account's utilization now, to learn the user's day: in
/// the day (`in_day`), its newest figure missing or older than `every`, and nothing known to
/// stand in the read's way (a lost login, a back-off).
pub(crate) fn sample_due(
    in_day: bool,
    view: &AccountView,
    every: Duration,
    now: DateTime<Utc>,
) -> bool {
    // A read that would only find the login lost, or the API down, again.
    let held = view.not_logged_in.is_some()
        || view.store_empty
        || view.agent_problem.is_some()
        || view.backoff_until.is_some_and(|t| t > now);
    in_day && !held && older_than(newest_figure(view), every, now)
}

fn newest_figure(view: &AccountView) -> Option<DateTime<Utc>> {
    view.windows
        .iter()
        .filter(|w| w.percent.is_some())
        .map(|w| w.observed_at)
        .max()
}

/// Whether `at` is missing or more than `max_age` before `now`.
fn older_than(at: Option<DateTime<Utc>>, max_age: Duration, now: DateTime<Utc>) -> bool {
    let max_age = chrono::Duration::from_std(max_age).unwrap_or(chrono::Duration::MAX);
    at.is_none_or(|t| now - t > max_age)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        crate::clock::parse(s).unwrap()
    }

    fn info(status: &str, window: &str, utilization: Option<f64>) -> RateLimitInfo {
        RateLimitInfo {
            status: RateLimitStatus::parse(status),
            resets_at: Some(1796020271),
            window: Some(window.into()),
            utilization,
            windows: Vec::new(),
            on_credits: false,
        }
    }

    #[test]
    fn the_day_is_sampled_when_its_figure_is_older_than_sample_every_and_nothing_holds_it() {
        let now = t("2026-11-30T12:00:00Z");
        let config = crate::config::parse(
            "stateDir: /tmp/owl\naccounts:\n  work:\n    limits: {fiveHourMax: 60}\n",
            "test",
        )
        .unwrap();
        let figure = |at: &str| crate::model::Snapshot {
            account: "work".into(),
            window: "five_hour".into(),
            percent: 20.0,
            resets_at: Some(t("2026-11-30T15:00:00Z")),
            observed_at: t(at),
            source: SnapshotSource::Probe,
            run_id: None,
            model: None,
        };
        let every = Duration::from_secs(30 * 60);
        let view = |snaps: &[crate::model::Snapshot]| {
            crate::schedule::account_views(&config, snaps, &Default::default(), now).remove(0)
        };
        // No figure yet, and one older than the interval: due; a fresh one: not.
        assert!(sample_due(true, &view(&[]), every, now));
        assert!(sample_due(
            true,
            &view(&[figure("2026-11-30T11:20:00Z")]),
            every,
            now
        ));
        assert!(!sample_due(
            true,
            &view(&[figure("2026-11-30T11:45:00Z")]),
            every,
            now
        ));
        // In the night (the tick's own probe serves there), never.
        assert!(!sample_due(false, &view(&[]), every, now));
        // A lost login or a back-off: a read would only find it again.
        let mut lost = view(&[]);
        lost.not_logged_in = Some("not logged in".into());
        assert!(!sample_due(true, &lost, every, now));
        let mut backing_off = view(&[]);
        backing_off.backoff_until = Some(t("2026-11-30T12:30:00Z"));
        assert!(!sample_due(true, &backing_off, every, now));
    }

    #[test]
    fn float_noise_is_rounded() {
        assert_eq!(round_percent(55.00000000000001), 55.0);
        assert_eq!(round_percent(0.93 * 100.0), 93.0);
        assert_eq!(round_percent(140.0), 100.0);
    }

    #[test]
    fn a_rejected_event_is_100_percent_until_the_reset() {
        let s = from_rate_limit(
            &info("rejected", "five_hour", None),
            "work",
            Some(3),
            t("2026-11-30T03:00:00Z"),
        );
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].percent, 100.0);
        assert_eq!(s[0].resets_at, Some(t("2026-11-30T06:31:11Z")));
        assert_eq!(s[0].source, SnapshotSource::RateLimitEvent);
    }

    #[test]
    fn a_2_1_197_allowed_event_carries_no_figure_but_a_warning_does() {
        let now = t("2026-11-30T03:00:00Z");
        assert!(from_rate_limit(&info("allowed", "five_hour", None), "work", None, now).is_empty());
        let s = from_rate_limit(
            &info("allowed_warning", "five_hour", Some(0.93)),
            "work",
            None,
            now,
        );
        assert_eq!(s[0].percent, 93.0);
    }

    #[test]
    fn crossing_names_the_window_and_the_ceiling() {
        let limits = Limits {
            five_hour_max: Some(60.0),
            weekly_max: Some(50.0),
            model_weekly_max: None,
            allow_extra_usage: false,
            night_max: None,
            min_headroom: None,
            owl_five_hour_max: None,
            owl_weekly_max: None,
            learned: Default::default(),
        };
        let snap = |window: &str, percent, resets: &str| Snapshot {
            account: "work".into(),
            window: window.into(),
            percent,
            resets_at: Some(t(resets)),
            observed_at: t("2026-11-30T03:00:00Z"),
            source: SnapshotSource::GetUsage,
            run_id: None,
            model: None,
        };
        let under = [snap("five_hour", 59.9, "2026-11-30T05:00:00Z")];
        assert_eq!(crossing(&under, (Some(&limits), None), None), None);
        let over = [
            snap("five_hour", 63.0, "2026-11-30T05:00:00Z"),
            snap("seven_day_opus", 12.0, "2026-12-03T00:00:00Z"),
            snap("extra_window", 99.0, "2026-12-03T00:00:00Z"),
        ];
        assert_eq!(
            crossing(&over, (Some(&limits), None), None),
            Some(StopCause::Ceiling(Crossing {
                window: "five_hour".into(),
                percent: 63.0,
                limit: "fiveHourMax".into(),
                ceiling: 60.0,
                resets_at: Some(t("2026-11-30T05:00:00Z")),
            }))
        );
        assert_eq!(crossing(&over, (None, None), None), None);
    }

    #[test]
    fn a_per_model_window_is_under_its_own_key_or_weekly_max_and_spares_another_model() {
        let mut fable = Snapshot {
            account: "work".into(),
            window: "seven_day_overage_included".into(),
            percent: 80.0,
            resets_at: Some(t("2026-12-04T03:00:00Z")),
            observed_at: t("2026-11-30T03:00:00Z"),
            source: SnapshotSource::RateLimitEvent,
            run_id: None,
            model: None,
        };
        let weekly = Limits {
            five_hour_max: None,
            weekly_max: Some(50.0),
            model_weekly_max: None,
            allow_extra_usage: false,
            night_max: None,
            min_headroom: None,
            owl_five_hour_max: None,
            owl_weekly_max: None,
            learned: Default::default(),
        };
        let crossed = |s: &Snapshot, l: &Limits, m: Option<&str>| match crossing(
            std::slice::from_ref(s),
            (Some(l), None),
            m,
        ) {
            Some(StopCause::Ceiling(c)) => Some(c.limit),
            _ => None,
        };
        // Its model unknown: it limits every Run (ADR-0020: unknown applies).
        assert_eq!(
            crossed(&fable, &weekly, Some("claude-sonnet-5-5")).as_deref(),
            Some("weeklyMax")
        );
        let own = Limits {
            model_weekly_max: Some(90.0),
            ..weekly
        };
        assert_eq!(crossed(&fable, &own, None), None, "80 < modelWeeklyMax 90");
        fable.percent = 95.0;
        assert_eq!(
            crossed(&fable, &own, None).as_deref(),
            Some("modelWeeklyMax")
        );
        // Once named, it spares a Run known to use another model, and not one of its own.
        fable.model = Some("Fable".into());
        assert_eq!(crossed(&fable, &own, Some("claude-sonnet-5-5")), None);
        assert_eq!(
            crossed(&fable, &own, Some("claude-fable-5")).as_deref(),
            Some("modelWeeklyMax")
        );
        assert_eq!(
            crossed(&fable, &own, None).as_deref(),
            Some("modelWeeklyMax")
        );
    }
}
