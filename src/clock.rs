//! "Now" for scheduling: the system clock, or `OWL_NOW` when a test injects the time.

use chrono::{DateTime, Utc};

/// The environment variable that fixes "now" (RFC 3339), for tests and for rehearsing a night.
pub const OWL_NOW: &str = "OWL_NOW";

/// The current time, as scheduling sees it.
///
/// Deadlines inside a Run (grace, stall, maxRunTime) use the monotonic clock instead:
/// only decisions about wall time (windows resetting, `not_before`) come from here.
pub fn now() -> anyhow::Result<DateTime<Utc>> {
    match std::env::var(OWL_NOW) {
        Ok(s) if !s.is_empty() => DateTime::parse_from_rfc3339(&s)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|e| {
                crate::error::BadInput(format!("{OWL_NOW}='{s}' is not an RFC 3339 time: {e}"))
                    .into()
            }),
        _ => Ok(Utc::now()),
    }
}

/// An RFC 3339 UTC string with second precision, as stored and printed.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Parses a stored RFC 3339 time.
pub fn parse(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// A short human duration: `45s`, `12m`, `1h12m`, `2d3h`.
pub fn human(d: chrono::Duration) -> String {
    let s = d.num_seconds().max(0);
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86_399 => match (s % 3600) / 60 {
            0 => format!("{}h", s / 3600),
            m => format!("{}h{m}m", s / 3600),
        },
        _ => match (s % 86_400) / 3600 {
            0 => format!("{}d", s / 86_400),
            h => format!("{}d{h}h", s / 86_400),
        },
    }
}

/// The local wall-clock time of day, `HH:MM`, for "resets in 1h12m (03:40)".
pub fn local_hm(t: DateTime<Utc>) -> String {
    t.with_timezone(&chrono::Local).format("%H:%M").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations() {
        let d = chrono::Duration::seconds;
        assert_eq!(human(d(45)), "45s");
        assert_eq!(human(d(720)), "12m");
        assert_eq!(human(d(4320)), "1h12m");
        assert_eq!(human(d(7200)), "2h");
        assert_eq!(human(d(86_400 * 2 + 3 * 3600)), "2d3h");
        assert_eq!(human(d(-5)), "0s");
    }
}
