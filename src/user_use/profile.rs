//! What the user will use of a Window until its reset, forecast from the hours learned, and what a learned reserve keeps for them of it.

use std::collections::BTreeMap;

use chrono::{DateTime, Datelike, Duration, TimeZone, Timelike, Utc};

use super::{hour_of, spread};

/// How much the margin grows for each day in the learning weeks on which the user was
/// limited by a Window owl's Runs had used, in percentage points.
pub(crate) const MARGIN_GROWTH: f64 = 5.0;

/// The most the margin grows by, however many such days there were.
pub(crate) const MARGIN_GROWTH_MAX: f64 = 20.0;

/// The user's use by hour, as observed, and its quantiles by hour of the week: what a
/// forecast is made of. Hours are the user's local ones (`tz`), so a change of clocks moves
/// them with the user.
#[derive(Debug, Clone)]
pub(crate) struct Profile<Tz: TimeZone> {
    /// Each observed hour's points.
    observed: BTreeMap<DateTime<Utc>, f64>,
    /// The quantile of each (weekday from Monday, hour) observed: for an hour of a past week
    /// that was not.
    of_week: BTreeMap<(u32, u32), f64>,
    /// The quantile of each hour of the day observed, over every day: for an hour of the
    /// week never observed.
    of_day: BTreeMap<u32, f64>,
    q: f64,
    tz: Tz,
}

impl<Tz: TimeZone> Profile<Tz> {
    /// The profile of `history` (the user's points by hour) at quantile `q` (0.9: P90).
    pub(crate) fn learn(history: &[(DateTime<Utc>, f64)], tz: Tz, q: f64) -> Profile<Tz> {
        let mut of_week: BTreeMap<(u32, u32), Vec<f64>> = BTreeMap::new();
        let mut of_day: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
        for (hour, points) in history {
            let (day, h) = week_hour(*hour, &tz);
            of_week.entry((day, h)).or_default().push(*points);
            of_day.entry(h).or_default().push(*points);
        }
        let quantile = |values: Vec<f64>| spread(values, q).map_or(0.0, |s| s.quantile);
        Profile {
            observed: history.iter().copied().collect(),
            of_week: of_week.into_iter().map(|(k, v)| (k, quantile(v))).collect(),
            of_day: of_day.into_iter().map(|(k, v)| (k, quantile(v))).collect(),
            q,
            tz,
        }
    }

    /// The user's use forecast from `from` to `until`: the quantile, over the past weeks,
    /// of what the user used in the same span of each (the same local hours a week, two
    /// weeks… before), a week counted where any hour of its span was observed. An hour of
    /// such a span not observed takes its hour of the week's quantile, else its hour of the
    /// day's; an hour never observed at all (the night, which owl works in and does not
    /// sample) counts 0, its Windows kept by the night ceiling. With no week observed in
    /// the span, the same fill alone is the forecast.
    ///
    /// A quantile of the spans' totals, not a total of each hour's quantile: one heavy day a
    /// week falls on a different day each week, and the total of each hour's P90 would keep
    /// a heavy day for every day.
    pub(crate) fn forecast(&self, (from, until): (DateTime<Utc>, DateTime<Utc>)) -> f64 {
        let hours = hours_between(hour_of(from), until);
        let Some(earliest) = self.observed.keys().next().copied() else {
            return 0.0;
        };
        let mut totals = Vec::new();
        for weeks in 1.. {
            let shifted: Vec<DateTime<Utc>> = hours
                .iter()
                .filter_map(|h| self.weeks_before(*h, weeks))
                .collect();
            if shifted.last().is_none_or(|last| *last < earliest) {
                break;
            }
            if shifted.iter().any(|h| self.observed.contains_key(h)) {
                totals.push(shifted.iter().map(|h| self.points(*h)).sum::<f64>());
            }
        }
        let total = match spread(totals, self.q) {
            Some(s) => s.quantile,
            None => hours.iter().map(|h| self.filled(*h)).sum(),
        };
        crate::model::round_percent(total)
    }

    /// The hour `weeks` weeks before `hour` by the user's clock; `None` for a local time
    /// that did not exist then (skipped by a change of clocks).
    fn weeks_before(&self, hour: DateTime<Utc>, weeks: i64) -> Option<DateTime<Utc>> {
        let local = hour.with_timezone(&self.tz).naive_local() - Duration::weeks(weeks);
        self.tz
            .from_local_datetime(&local)
            .earliest()
            .map(|t| t.with_timezone(&Utc))
    }

    /// An hour's points: as observed, else filled.
    fn points(&self, hour: DateTime<Utc>) -> f64 {
        self.observed
            .get(&hour)
            .copied()
            .unwrap_or_else(|| self.filled(hour))
    }

    /// The points of an hour not observed: its hour of the week's quantile, else its hour
    /// of the day's, else 0.
    fn filled(&self, hour: DateTime<Utc>) -> f64 {
        let key = week_hour(hour, &self.tz);
        self.of_week
            .get(&key)
            .or_else(|| self.of_day.get(&key.1))
            .copied()
            .unwrap_or(0.0)
    }

    /// How far the user's use today (local) runs ahead of the forecast for the hours of
    /// today until now, the current hour whole; 0 when it does not. `history` is what the
    /// profile was learned from (today's hours in it count at once).
    pub(crate) fn ahead(&self, history: &[(DateTime<Utc>, f64)], now: DateTime<Utc>) -> f64 {
        let today = start_of_day(now, &self.tz);
        let used: f64 = history
            .iter()
            .filter(|(hour, _)| *hour >= today && *hour <= now)
            .map(|(_, points)| points)
            .sum();
        let expected = self.forecast((today, hour_of(now) + Duration::hours(1)));
        crate::model::round_percent((used - expected).max(0.0))
    }
}

/// The start of each hour from `from` (an hour's start) to `until`.
fn hours_between(from: DateTime<Utc>, until: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let mut hours = Vec::new();
    let mut hour = from;
    while hour < until {
        hours.push(hour);
        hour += Duration::hours(1);
    }
    hours
}

/// The (weekday from Monday, hour) of `t` in `tz`.
fn week_hour<Tz: TimeZone>(t: DateTime<Utc>, tz: &Tz) -> (u32, u32) {
    let local = t.with_timezone(tz);
    (local.weekday().num_days_from_monday(), local.hour())
}

/// The start of the local day `now` is in (its first instant, across a change of clocks).
pub(crate) fn start_of_day<Tz: TimeZone>(now: DateTime<Utc>, tz: &Tz) -> DateTime<Utc> {
    let midnight = now
        .with_timezone(tz)
        .date_naive()
        .and_time(chrono::NaiveTime::MIN);
    tz.from_local_datetime(&midnight)
        .earliest()
        .map_or(now, |t| t.with_timezone(&Utc))
}

/// What a learned reserve keeps for the user of one Window until its reset, in points.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub(crate) struct Kept {
    /// The forecast of the user's use until the reset.
    pub(crate) forecast: f64,
    /// How far the user runs ahead of their usual today: kept on top.
    pub(crate) ahead: f64,
    /// The margin: the largest move of one response, grown after days the user was limited.
    pub(crate) margin: f64,
    /// The least kept, whatever the forecast.
    pub(crate) floor: f64,
}

impl Kept {
    /// The points kept: the forecast, what the user runs ahead by and the margin, never
    /// less than the floor.
    pub(crate) fn points(&self) -> f64 {
        crate::model::round_percent((self.forecast + self.ahead + self.margin).max(self.floor))
    }

    /// The Window's bound: what is not kept, never above the night ceiling.
    pub(crate) fn bound(&self, night_max: f64) -> f64 {
        crate::model::round_percent((100.0 - self.points()).clamp(0.0, night_max))
    }
}

/// The margin after `limited` days on which the user was limited by a Window owl's Runs had
/// used: the largest move of one response, and [`MARGIN_GROWTH`] more for each such day, at
/// most [`MARGIN_GROWTH_MAX`] more.
pub(crate) fn margin(limited: usize) -> f64 {
    crate::morning::LARGEST_RESPONSE_MOVE + (MARGIN_GROWTH * limited as f64).min(MARGIN_GROWTH_MAX)
}

#[cfg(test)]
mod tests;
