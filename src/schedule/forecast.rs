//! The morning, forecast: what each of an Account's Windows will be at the user's next morning if nothing more runs, and what owl's share of it is.

use super::*;

/// One Window at the next morning, if nothing more runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct MorningWindow {
    pub(crate) window: String,
    /// It resets before the morning: the user finds it fresh.
    pub(crate) fresh: bool,
    /// Its figure then (the newest now); `None` when fresh or unknown.
    pub(crate) percent: Option<f64>,
    #[serde(serialize_with = "crate::clock::ser_opt")]
    pub(crate) resets_at: Option<DateTime<Utc>>,
    /// The ceiling it keeps by day (the configured one).
    pub(crate) ceiling: Option<f64>,
    /// owl's share of it (points), when a cap on that share is set.
    pub(crate) owl_points: Option<f64>,
    /// That cap (points).
    pub(crate) owl_cap: Option<f64>,
    /// With a learned reserve in force: what the user is forecast to use of it from the
    /// morning until its reset (points); `None` otherwise.
    pub(crate) your_use: Option<f64>,
}

/// Each of `view`'s Windows with a figure as it will stand at `morning`: a Window that
/// resets before it is fresh; any other keeps its figure, beside the ceiling it keeps by
/// day and owl's share of it under a cap.
pub(crate) fn at_morning(
    view: &AccountView,
    limits: Option<&crate::config::Limits>,
    morning: DateTime<Utc>,
) -> Vec<MorningWindow> {
    view.windows
        .iter()
        .filter(|w| w.kind != WindowKind::Other)
        .map(|w| {
            let fresh = w.resets_at.is_some_and(|r| r <= morning);
            let by_day = w.night.map(|n| n.ceiling).or(w.ceiling);
            let owl_cap = limits
                .and_then(|l| l.owl_cap(&w.window))
                .filter(|_| !fresh)
                .map(|(_, cap)| cap);
            MorningWindow {
                window: w.label(),
                fresh,
                percent: w.percent.filter(|_| !fresh),
                resets_at: w.resets_at,
                ceiling: by_day,
                owl_points: owl_cap.map(|_| view.owl_points(w)),
                owl_cap,
                your_use: None,
            }
        })
        .collect()
}

/// "at 07:00: five_hour fresh (resets 04:00), seven_day 47% (ceiling 50%, owl's share 18 of
/// 30 pp)".
pub(crate) fn describe(morning: DateTime<Utc>, windows: &[MorningWindow]) -> Option<String> {
    if windows.is_empty() {
        return None;
    }
    let parts: Vec<String> = windows
        .iter()
        .map(|w| {
            if w.fresh {
                let at = w.resets_at.map_or("?".into(), local_hm);
                return format!("{} fresh (resets {at})", w.window);
            }
            let figure = w
                .percent
                .map_or("unknown".into(), |p| format!("{}%", fmt_percent(p)));
            let mut notes = Vec::new();
            if let Some(c) = w.ceiling {
                notes.push(format!("ceiling {}%", fmt_percent(c)));
            }
            if let Some(yours) = w.your_use {
                notes.push(format!(
                    "your use until its reset {} pp",
                    fmt_percent(yours)
                ));
            }
            if let (Some(points), Some(cap)) = (w.owl_points, w.owl_cap) {
                notes.push(format!(
                    "owl's share {} of {} pp",
                    fmt_percent(points),
                    fmt_percent(cap)
                ));
            }
            match notes.is_empty() {
                true => format!("{} {figure}", w.window),
                false => format!("{} {figure} ({})", w.window, notes.join(", ")),
            }
        })
        .collect();
    Some(format!("at {}: {}", local_hm(morning), parts.join(", ")))
}
