//! Utilization (ADR-0020): Snapshots from what the agent reports — usage answers, rate-limit events, the preflight probe — and the Ceiling check.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::config::Limits;
use crate::driver::{AgentEvent, RateLimitInfo, Usage, WindowUsage};
use crate::model::{Crossing, Snapshot, StopCause};
use crate::schedule::{ceiling_for, fmt_percent, AccountView};

/// Where a Snapshot came from.
pub const SOURCE_GET_USAGE: &str = "get_usage";
pub const SOURCE_RATE_LIMIT_EVENT: &str = "rate_limit_event";
pub const SOURCE_PROBE: &str = "probe";

/// How long the preflight probe waits for the agent's answer.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// Drops float noise from a reported percent: the CLI turns a header's 0.55 into
/// `55.00000000000001`.
pub fn round_percent(x: f64) -> f64 {
    ((x * 10_000.0).round() / 10_000.0).clamp(0.0, 100.0)
}

/// Snapshots from a usage answer (percent 0–100 already).
pub fn from_usage(
    windows: &[WindowUsage],
    account: &str,
    source: &str,
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
            source: source.to_string(),
            run_id,
        })
        .collect()
}

/// A Snapshot from a `rate_limit_event`: `utilization` is a fraction 0–1 and only present
/// in warning states; `rejected` means the Window is at 100% until `resetsAt`.
pub fn from_rate_limit(
    info: &RateLimitInfo,
    account: &str,
    run_id: Option<i64>,
    now: DateTime<Utc>,
) -> Option<Snapshot> {
    let window = info.window.clone()?;
    let percent = if info.status == "rejected" {
        100.0
    } else {
        info.utilization? * 100.0
    };
    Some(Snapshot {
        account: account.to_string(),
        window,
        percent: round_percent(percent),
        resets_at: info.resets_at.and_then(|s| DateTime::from_timestamp(s, 0)),
        observed_at: now,
        source: SOURCE_RATE_LIMIT_EVENT.to_string(),
        run_id,
    })
}

/// The Snapshots an agent event carries, if any.
pub fn from_event(
    event: &AgentEvent,
    account: &str,
    run_id: Option<i64>,
    now: DateTime<Utc>,
) -> Vec<Snapshot> {
    match event {
        AgentEvent::ControlResponse {
            usage: Some(Usage::Windows(windows)),
            ..
        } => from_usage(windows, account, SOURCE_GET_USAGE, run_id, now),
        AgentEvent::Usage { source, windows } => from_usage(windows, account, source, run_id, now),
        AgentEvent::RateLimit(info) => from_rate_limit(info, account, run_id, now)
            .into_iter()
            .collect(),
        _ => Vec::new(),
    }
}

/// The Ceiling these Snapshots cross, if any: the crossed Window that resets last, so the
/// Job waits until every crossed Window has reset.
pub fn crossing(snapshots: &[Snapshot], limits: Option<&Limits>) -> Option<StopCause> {
    snapshots
        .iter()
        .filter_map(|s| {
            let (key, ceiling) = ceiling_for(&s.window, limits)?;
            (s.percent >= ceiling).then_some((s, key, ceiling))
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
pub enum ProbeOutcome {
    Observed(Vec<WindowUsage>),
    /// The agent answered, but does not know the utilization (never read as 0).
    Unknown,
    /// The agent has no plan login: no credential at all, or only an API key.
    NoPlan,
    Failed(String),
}

impl ProbeOutcome {
    /// What the probe says of the Account's login: `Some(false)` not logged in,
    /// `Some(true)` logged in, `None` when it could not tell. An Account that logs in with
    /// an API key (the Driver tells) is logged in without a plan, and says `NoPlan` too.
    pub fn logged_in(&self, uses_api_key: bool) -> Option<bool> {
        match self {
            ProbeOutcome::Observed(_) | ProbeOutcome::Unknown => Some(true),
            ProbeOutcome::NoPlan => Some(uses_api_key),
            ProbeOutcome::Failed(_) => None,
        }
    }
}

impl ProbeOutcome {
    /// A few words for status.
    pub fn describe(&self) -> String {
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
            ProbeOutcome::Failed(why) => format!("failed: {why}"),
        }
    }
}

/// Whether the Account's newest figure is too old to start a Run on (for an Account whose
/// Driver reports utilization).
pub fn needs_probe(view: &AccountView, probe_max_age: Duration, now: DateTime<Utc>) -> bool {
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
pub fn parked_accounts(
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
        .filter(|v| {
            v.not_logged_in.is_some()
                || (v.windows.iter().any(|w| w.over) && older_than(newest_figure(v), max_age, now))
        })
        .map(|v| v.name.clone())
        .collect()
}

/// When the newest figure that still holds was observed (one from before its Window's
/// reset says nothing about now).
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

    #[test]
    fn float_noise_is_rounded() {
        assert_eq!(round_percent(55.00000000000001), 55.0);
        assert_eq!(round_percent(0.93 * 100.0), 93.0);
        assert_eq!(round_percent(140.0), 100.0);
    }

    #[test]
    fn a_rejected_event_is_100_percent_until_the_reset() {
        let info = RateLimitInfo {
            status: "rejected".into(),
            resets_at: Some(1796020271),
            window: Some("five_hour".into()),
            utilization: None,
        };
        let s = from_rate_limit(&info, "work", Some(3), t("2026-11-30T03:00:00Z")).unwrap();
        assert_eq!(s.percent, 100.0);
        assert_eq!(s.resets_at, Some(t("2026-11-30T06:31:11Z")));
        assert_eq!(s.source, "rate_limit_event");
    }

    #[test]
    fn an_allowed_event_carries_no_figure() {
        let info = RateLimitInfo {
            status: "allowed".into(),
            resets_at: Some(1796016657),
            window: Some("five_hour".into()),
            utilization: None,
        };
        assert!(from_rate_limit(&info, "work", None, t("2026-11-30T03:00:00Z")).is_none());
        let warning = RateLimitInfo {
            status: "allowed_warning".into(),
            utilization: Some(0.93),
            ..info
        };
        let s = from_rate_limit(&warning, "work", None, t("2026-11-30T03:00:00Z")).unwrap();
        assert_eq!(s.percent, 93.0);
    }

    #[test]
    fn crossing_names_the_window_and_the_ceiling() {
        let limits = Limits {
            five_hour_max: Some(60.0),
            weekly_max: Some(50.0),
        };
        let snap = |window: &str, percent, resets: &str| Snapshot {
            account: "work".into(),
            window: window.into(),
            percent,
            resets_at: Some(t(resets)),
            observed_at: t("2026-11-30T03:00:00Z"),
            source: SOURCE_GET_USAGE.into(),
            run_id: None,
        };
        let under = [snap("five_hour", 59.9, "2026-11-30T05:00:00Z")];
        assert_eq!(crossing(&under, Some(&limits)), None);
        let over = [
            snap("five_hour", 63.0, "2026-11-30T05:00:00Z"),
            snap("seven_day_opus", 12.0, "2026-12-03T00:00:00Z"),
            snap("extra_window", 99.0, "2026-12-03T00:00:00Z"),
        ];
        assert_eq!(
            crossing(&over, Some(&limits)),
            Some(StopCause::Ceiling(Crossing {
                window: "five_hour".into(),
                percent: 63.0,
                limit: "fiveHourMax".into(),
                ceiling: 60.0,
                resets_at: Some(t("2026-11-30T05:00:00Z")),
            }))
        );
        assert_eq!(crossing(&over, None), None);
    }
}
