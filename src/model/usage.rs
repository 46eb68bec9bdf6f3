//! Utilization as owl holds it: a Window's figure (Snapshot) and where it came from, what a Window limits, and the crossings, rejections and extra usage a Run meets.

use super::*;

/// A provider's rejection, as a Run's end changes it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RejectionHold {
    /// Rejected until then: no Job starts on the Account before.
    Until(DateTime<Utc>),
    /// The Run got past a rejection recorded before: lifted.
    Lifted,
}

/// Drops float noise from a reported percent: the CLI turns a header's 0.55 into
/// `55.00000000000001`.
pub(crate) fn round_percent(x: f64) -> f64 {
    ((x * 10_000.0).round() / 10_000.0).clamp(0.0, 100.0)
}

/// The observed utilization of one Window of one Account.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Snapshot {
    pub(crate) account: String,
    pub(crate) window: String,
    pub(crate) percent: f64,
    pub(crate) resets_at: Option<DateTime<Utc>>,
    pub(crate) observed_at: DateTime<Utc>,
    pub(crate) source: SnapshotSource,
    pub(crate) run_id: Option<i64>,
    /// The model family a per-model Window limits, when the agent named it.
    pub(crate) model: Option<String>,
}

/// Where a figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SnapshotSource {
    /// The agent's answer to owl's usage request on its stdin.
    GetUsage,
    /// A `rate_limit_event` in the agent's stream.
    RateLimitEvent,
    /// The zero-token probe, before a Run or beside it.
    Probe,
    /// A line of Codex's rollout file.
    Rollout,
}

impl SnapshotSource {
    pub(super) const ALL: [SnapshotSource; 4] = [
        SnapshotSource::GetUsage,
        SnapshotSource::RateLimitEvent,
        SnapshotSource::Probe,
        SnapshotSource::Rollout,
    ];

    /// The name stored and printed.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SnapshotSource::GetUsage => "get_usage",
            SnapshotSource::RateLimitEvent => "rate_limit_event",
            SnapshotSource::Probe => "probe",
            SnapshotSource::Rollout => "rollout",
        }
    }
}

impl fmt::Display for SnapshotSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SnapshotSource {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        UnknownName::find(
            &SnapshotSource::ALL,
            SnapshotSource::as_str,
            "figure source",
            s,
        )
    }
}

/// What a Window limits, read once from its name, so that the ceilings, `status` and the
/// report agree on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum WindowKind {
    /// `five_hour`: the plan's session Window.
    FiveHour,
    /// `seven_day` (and any other account-wide `seven_day*`).
    Weekly,
    /// A weekly Window of one model family: `seven_day_overage_included` (Claude Code
    /// 2.1.332's "Fable limit", `model_scoped` in `get_usage`), `seven_day_opus`,
    /// `seven_day_sonnet`.
    ModelWeekly,
    /// A Window owl has no ceiling for.
    Other,
}

impl WindowKind {
    /// The kind of the Window of this name.
    pub(crate) fn of(window: &str) -> WindowKind {
        match window {
            "five_hour" => WindowKind::FiveHour,
            "seven_day_opus" | "seven_day_sonnet" => WindowKind::ModelWeekly,
            w if w.starts_with("seven_day_overage_included") => WindowKind::ModelWeekly,
            w if w.starts_with("seven_day") => WindowKind::Weekly,
            _ => WindowKind::Other,
        }
    }

    /// How long a Window of this kind is: a figure over a Ceiling whose reset is unknown
    /// expires after it. A Window owl does not know gets the shortest it could be.
    pub(crate) fn length(self) -> chrono::Duration {
        match self {
            WindowKind::Weekly | WindowKind::ModelWeekly => chrono::Duration::days(7),
            WindowKind::FiveHour | WindowKind::Other => chrono::Duration::hours(5),
        }
    }

    /// The model family a Window limits: the name the agent gave it, or the one its own
    /// name says (`seven_day_opus`).
    pub(crate) fn model_of(window: &str, named: Option<&str>) -> Option<String> {
        match window {
            "seven_day_opus" => Some("Opus".into()),
            "seven_day_sonnet" => Some("Sonnet".into()),
            _ if WindowKind::of(window) == WindowKind::ModelWeekly => named.map(String::from),
            _ => None,
        }
    }

    /// Whether a per-model Window limits a Run of `run_model` (a model id such as
    /// `claude-fable-5`). Conservative (ADR-0020): it does unless both are known and the
    /// id does not name the family.
    pub(crate) fn limits_model(window_model: Option<&str>, run_model: Option<&str>) -> bool {
        let (Some(family), Some(run)) = (window_model, run_model) else {
            return true;
        };
        let family = family.split_whitespace().next().unwrap_or(family);
        run.to_lowercase().contains(&family.to_lowercase())
    }
}

/// A Run billed to extra usage (paid credits), and the Window whose reset ends it.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub(crate) struct OnCredits {
    /// The Window that is used up (the event's `rateLimitType`), when it said.
    pub(crate) window: Option<String>,
    pub(crate) until: Option<DateTime<Utc>>,
}

impl fmt::Display for OnCredits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let window = self.window.as_deref().unwrap_or("a window");
        write!(
            f,
            "extra usage: {window} is used up and the plan billed usage credits \
             (allowExtraUsage is off)"
        )
    }
}

/// A Ceiling crossed: the Window, its figure, and the limit it crossed.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub(crate) struct Crossing {
    pub(crate) window: String,
    pub(crate) percent: f64,
    /// The config key of the limit (`fiveHourMax`, `weeklyMax`).
    pub(crate) limit: String,
    pub(crate) ceiling: f64,
    /// When the Window resets, if the figure said.
    pub(crate) resets_at: Option<DateTime<Utc>>,
}

impl fmt::Display for Crossing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // An owl-share cap is of owl's own points, not of the Window's figure.
        if self.limit.starts_with("owl") {
            return write!(
                f,
                "ceiling: owl's share of {} {} pp >= {} {}",
                self.window,
                fmt_percent(self.percent),
                self.limit,
                fmt_percent(self.ceiling)
            );
        }
        write!(
            f,
            "ceiling: {} {}% >= {} {}",
            self.window,
            fmt_percent(self.percent),
            self.limit,
            fmt_percent(self.ceiling)
        )
    }
}

/// The provider's rate limiter refused the Account (`status: rejected`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub(crate) struct Rejection {
    /// The Window it named, if any.
    pub(crate) window: Option<String>,
    /// When it resets, if it said.
    pub(crate) until: Option<DateTime<Utc>>,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let window = self.window.as_deref().unwrap_or("a window");
        write!(f, "rate limited: the provider rejected {window}")?;
        if let Some(t) = self.until {
            write!(f, " until {}", crate::clock::rfc3339(t))?;
        }
        Ok(())
    }
}

/// What one Run used of one Window instance (a Window and its reset): the figure it started
/// from and the highest it saw. The user's own use meanwhile counts as the Run's: in the
/// user's favour.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RunShare {
    pub(crate) run_id: i64,
    pub(crate) window: String,
    pub(crate) resets_at: DateTime<Utc>,
    pub(crate) baseline: f64,
    /// Whether `baseline` was seen (or the Run opened the instance); if not, it counts as 0
    /// and the share is an upper bound.
    pub(crate) baseline_known: bool,
    pub(crate) peak: f64,
}

impl RunShare {
    /// Percentage points of the instance the Run used.
    pub(crate) fn points(&self) -> f64 {
        (self.peak - self.baseline).max(0.0)
    }
}

/// Two reported resets this close are one Window instance (a stream's epoch seconds and a
/// usage answer's milliseconds name the same reset).
pub(crate) const SAME_RESET: chrono::Duration = chrono::Duration::minutes(10);

/// Whether two reported resets name the same Window instance.
pub(crate) fn same_reset(a: DateTime<Utc>, b: DateTime<Utc>) -> bool {
    (a - b).abs() <= SAME_RESET
}

/// owl's points of the instance of `window` resetting at `reset`, among `(window, reset,
/// points)`; 0 when none is recorded.
pub(crate) fn points_of(
    shares: &[(String, DateTime<Utc>, f64)],
    window: &str,
    reset: DateTime<Utc>,
) -> f64 {
    shares
        .iter()
        .find(|(name, r, _)| name == window && same_reset(*r, reset))
        .map_or(0.0, |(_, _, p)| *p)
}

/// Shares summed per Window name, in the order first seen: (window, points, every baseline
/// known).
pub(crate) fn sum_by_window<'a>(
    shares: impl IntoIterator<Item = &'a RunShare>,
) -> Vec<(String, f64, bool)> {
    let mut by_window: Vec<(String, f64, bool)> = Vec::new();
    for s in shares {
        match by_window.iter_mut().find(|(w, ..)| *w == s.window) {
            Some(e) => {
                e.1 += s.points();
                e.2 &= s.baseline_known;
            }
            None => by_window.push((s.window.clone(), s.points(), s.baseline_known)),
        }
    }
    by_window
}

/// "used 7 pp of five_hour, at most 40 pp of seven_day": shares summed per Window name.
pub(crate) fn describe_shares<'a>(
    shares: impl IntoIterator<Item = &'a RunShare>,
) -> Option<String> {
    let mut by_window = sum_by_window(shares);
    // A Window the Run did not move is not worth a word (it is in the JSON).
    by_window.retain(|(_, points, known)| *points > 0.0 || !known);
    if by_window.is_empty() {
        return None;
    }
    let parts: Vec<String> = by_window
        .iter()
        .map(|(w, p, known)| {
            let bound = if *known { "" } else { "at most " };
            format!("{bound}{} pp of {w}", crate::text::fmt_percent(*p))
        })
        .collect();
    Some(format!("used {}", parts.join(", ")))
}
