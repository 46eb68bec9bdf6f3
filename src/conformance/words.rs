//! What a conformance check saw, in the words a person reads: no Rust debug values (`Some(0.85)`, `PermissionDenial { … }`) in `doctor --conformance`.

use std::fmt::Display;

use crate::driver::{AgentFailure, Usage, WindowUsage};
use crate::model::PermissionDenial;

/// A value, or "none" when there was none.
pub(super) fn or_none<T: Display>(value: Option<T>) -> String {
    value.map_or_else(|| "none".into(), |v| v.to_string())
}

/// How owl read an error result: the failure it names, or "nothing of the Account's".
pub(super) fn failure(read: Option<AgentFailure>) -> String {
    match read {
        Some(AgentFailure::NotLoggedIn) => "no login".into(),
        Some(AgentFailure::RateLimited) => "a rate limit".into(),
        Some(AgentFailure::Unavailable) => "the API unavailable".into(),
        None => "no failure of the Account's".into(),
    }
}

/// Tools the CLI refused: `Write (/tmp/x)`, or "none".
pub(super) fn denials(denied: &[PermissionDenial]) -> String {
    if denied.is_empty() {
        return "none".into();
    }
    denied
        .iter()
        .map(|d| format!("{} ({})", d.tool_name, d.detail))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Usage Windows: `five_hour 42%, seven_day 13%`.
pub(super) fn windows(windows: &[WindowUsage]) -> String {
    if windows.is_empty() {
        return "no Window".into();
    }
    windows
        .iter()
        .map(|w| {
            let model = w
                .model
                .as_deref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default();
            format!(
                "{}{model} {}%",
                w.window,
                crate::text::fmt_percent(w.percent)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A usage answer.
pub(super) fn usage(usage: Option<&Usage>) -> String {
    match usage {
        None => "no answer".into(),
        Some(Usage::Unknown) => "not known yet".into(),
        Some(Usage::NoPlan) => "no plan".into(),
        Some(Usage::Windows(w)) => windows(w),
    }
}

/// A fraction 0–1 as a percent: `85%`.
pub(super) fn fraction(value: Option<f64>) -> String {
    value.map_or_else(
        || "none".into(),
        |v| format!("{}%", crate::text::fmt_percent(v * 100.0)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_was_seen_reads_as_words() {
        assert_eq!(or_none(Some(500)), "500");
        assert_eq!(or_none(None::<i32>), "none");
        assert_eq!(failure(Some(AgentFailure::RateLimited)), "a rate limit");
        assert_eq!(fraction(Some(0.85)), "85%");
        let denied = [PermissionDenial {
            tool_name: "Write".into(),
            detail: "/tmp/x".into(),
        }];
        assert_eq!(denials(&denied), "Write (/tmp/x)");
        let w = WindowUsage {
            window: "five_hour".into(),
            percent: 42.0,
            resets_at: None,
            model: None,
        };
        assert_eq!(usage(Some(&Usage::Windows(vec![w]))), "five_hour 42%");
        assert_eq!(usage(Some(&Usage::NoPlan)), "no plan");
    }
}
