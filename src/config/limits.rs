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
    /// Which of the ceilings above a learned reserve set (never read from a file): what a
    /// stop names as its limit.
    #[serde(skip)]
    pub(crate) learned: LearnedCeilings,
}

/// The ceilings a learned reserve set on an Account's limits, in force of the configured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct LearnedCeilings {
    pub(crate) five_hour: bool,
    pub(crate) weekly: bool,
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

    /// A day's ceiling above the night's (`nightMax`), which config refuses: its key, its
    /// value and the night's.
    pub(crate) fn over_the_night(&self) -> Option<(&'static str, f64, f64)> {
        let night = self.night_max?;
        [
            ("fiveHourMax", self.five_hour_max),
            ("weeklyMax", self.weekly_max),
            ("modelWeeklyMax", self.model_weekly_max),
        ]
        .into_iter()
        .find_map(|(key, c)| c.filter(|c| *c > night).map(|c| (key, c, night)))
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

/// A reserve learned from the user's own days (`learnedReserve:`): the bound of each Window
/// open in the user's day is what the user will use until its reset (a high quantile of
/// their past use, hour by hour) plus a margin, kept back; a `fiveHourMax` or `weeklyMax`
/// beside it stays a hard cap.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct LearnedReserve {
    /// The quantile of the user's past use kept for them, in (0, 1] (0.9: P90).
    #[serde(default = "default_quantile", deserialize_with = "de_quantile")]
    pub(crate) quantile: f64,
    /// The least kept back for the user whatever was learned, in percentage points.
    #[serde(default = "default_floor", deserialize_with = "de_floor")]
    pub(crate) floor: f64,
    /// The days of the user's use observed before it replaces the configured ceilings.
    #[serde(default = "default_min_days")]
    pub(crate) min_days: u32,
    /// The weeks of the user's past use it learns from.
    #[serde(default = "default_weeks")]
    pub(crate) weeks: u32,
}

impl Default for LearnedReserve {
    fn default() -> Self {
        LearnedReserve {
            quantile: default_quantile(),
            floor: default_floor(),
            min_days: default_min_days(),
            weeks: default_weeks(),
        }
    }
}

fn default_quantile() -> f64 {
    0.9
}

fn default_floor() -> f64 {
    10.0
}

fn default_min_days() -> u32 {
    7
}

fn default_weeks() -> u32 {
    4
}

fn de_quantile<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let q = f64::deserialize(d)?;
    if !(q > 0.0 && q <= 1.0) {
        return Err(serde::de::Error::custom(format!(
            "'{q}' is out of range: a quantile is above 0 and at most 1 (0.9 is P90)"
        )));
    }
    Ok(q)
}

fn de_floor<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let floor = f64::deserialize(d)?;
    if !(0.0..=100.0).contains(&floor) {
        return Err(serde::de::Error::custom(format!(
            "'{floor}' is out of range: a floor is percentage points from 0 to 100"
        )));
    }
    Ok(floor)
}
