//! An Account's limits: its ceilings on the plan's Windows, the night's, owl's own share, the least headroom a Run starts under, and whether extra usage may be spent.

use serde::{Deserialize, Serialize};

use super::raw::de_percent;

/// The Ceilings of one Account, in percent of each Window.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Limits {
    #[serde(default, deserialize_with = "de_percent")]
    pub(crate) five_hour_max: Option<f64>,
    #[serde(default, deserialize_with = "de_percent")]
    pub(crate) weekly_max: Option<f64>,
    /// The ceiling of every per-model weekly Window (the "Fable limit"); `weeklyMax`
    /// governs them when it is not set.
    #[serde(default, deserialize_with = "de_percent")]
    pub(crate) model_weekly_max: Option<f64>,
    /// The ceiling of a Window that resets before the user's morning, in the night
    /// (`morning::DEFAULT_NIGHT_MAX` when unset); never below the ceilings above.
    #[serde(default, deserialize_with = "de_percent")]
    pub(crate) night_max: Option<f64>,
    /// The most percentage points of one five-hour Window instance owl's own Runs may use,
    /// whatever the user used of it.
    #[serde(default, deserialize_with = "de_percent")]
    pub(crate) owl_five_hour_max: Option<f64>,
    /// The same of one week (and of each model's week).
    #[serde(default, deserialize_with = "de_percent")]
    pub(crate) owl_weekly_max: Option<f64>,
    /// The least headroom (percentage points) under the binding ceiling for a Run to start
    /// (`schedule::DEFAULT_MIN_HEADROOM` when unset; 0 turns it off).
    #[serde(default, deserialize_with = "de_percent")]
    pub(crate) min_headroom: Option<f64>,
    /// Whether a Run may go on when the plan bills extra usage (paid credits). Off by
    /// default: the first sign of it stops the Run.
    #[serde(default)]
    pub(crate) allow_extra_usage: bool,
}

impl Limits {
    /// Whether any Ceiling is set.
    pub(crate) fn any_ceiling(&self) -> bool {
        self.five_hour_max.is_some()
            || self.weekly_max.is_some()
            || self.model_weekly_max.is_some()
            || self.owl_five_hour_max.is_some()
            || self.owl_weekly_max.is_some()
    }

    /// The cap on owl's own share of a Window of this kind, with its key.
    pub(crate) fn owl_cap(&self, window: &str) -> Option<(&'static str, f64)> {
        match crate::model::WindowKind::of(window) {
            crate::model::WindowKind::FiveHour => {
                self.owl_five_hour_max.map(|c| ("owlFiveHourMax", c))
            }
            crate::model::WindowKind::Weekly | crate::model::WindowKind::ModelWeekly => {
                self.owl_weekly_max.map(|c| ("owlWeeklyMax", c))
            }
            crate::model::WindowKind::Other => None,
        }
    }
}
