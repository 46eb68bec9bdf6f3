//! The night planned around the morning: when the user's morning comes, and which ceiling holds a Window in the night (one that resets before the morning is the night's to spend, up to the night ceiling; one still open at the morning keeps its configured ceiling).

use chrono::{DateTime, Duration, NaiveDateTime, NaiveTime, TimeZone, Utc};

use crate::config::{Config, Limits};

/// The night ceiling when an Account sets none: a figure is only as new as the last
/// response, and the largest move of one response in the recorded transcripts is 13
/// percentage points (`unified-windows-allowed`, 42% to 55%); stopping at 85 leaves the
/// Run's last response room to land under 100, where a plan would refuse or bill.
pub(crate) const DEFAULT_NIGHT_MAX: f64 = 85.0;

/// The largest move of one response in the recorded transcripts, in percentage points: the
/// margin a bound keeps below what it must not reach, since a figure is only as new as the
/// last response.
pub(crate) const LARGEST_RESPONSE_MOVE: f64 = 13.0;

/// Where the user's day ends when only the morning is named.
pub(crate) const DEFAULT_DAY_ENDS: NaiveTime = match NaiveTime::from_hms_opt(22, 0, 0) {
    Some(t) => t,
    None => NaiveTime::MIN,
};

/// The user's day as owl plans around it, in local time: it starts at `morning` and ends
/// at `ends`; the rest is the night.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Day {
    pub(crate) morning: NaiveTime,
    pub(crate) ends: NaiveTime,
}

impl Day {
    /// The day `config` names for `account`: where `schedule.window` ends and starts, or
    /// the Account's `morning` (else `schedule.morning`) and `schedule.dayEnds`; `None` when
    /// it names no morning.
    pub(crate) fn of(config: &Config, account: &crate::config::Account) -> Option<Day> {
        let morning = account.morning.or(config.schedule.morning);
        match (config.schedule.window, morning) {
            (Some(night), _) => Some(Day {
                morning: night.end,
                ends: night.start,
            }),
            (None, Some(morning)) => Some(Day {
                morning,
                ends: config.schedule.day_ends.unwrap_or(DEFAULT_DAY_ENDS),
            }),
            (None, None) => None,
        }
    }

    /// Whether local time `t` is in the night (from the day's end to the morning).
    fn is_night(&self, t: NaiveTime) -> bool {
        if self.ends <= self.morning {
            self.ends <= t && t < self.morning
        } else {
            t >= self.ends || t < self.morning
        }
    }

    /// The next morning after `now`, seen in `tz`, from the night or from the day: the one
    /// the user wakes to next.
    pub(crate) fn following_morning<Tz: TimeZone>(
        &self,
        now: DateTime<Utc>,
        tz: &Tz,
    ) -> DateTime<Utc> {
        let local = now.with_timezone(tz).naive_local();
        let date = local.date();
        let day = match local.time() < self.morning {
            true => date,
            false => date.succ_opt().unwrap_or(date),
        };
        instant(tz, day.and_time(self.morning))
    }

    /// When the night that ends at `morning` began: the day's end before it, seen in `tz`.
    pub(crate) fn night_before<Tz: TimeZone>(
        &self,
        morning: DateTime<Utc>,
        tz: &Tz,
    ) -> DateTime<Utc> {
        let date = morning.with_timezone(tz).naive_local().date();
        let day = match self.ends <= self.morning {
            true => date,
            false => date.pred_opt().unwrap_or(date),
        };
        instant(tz, day.and_time(self.ends))
    }

    /// The morning that ends the night `now` is in, seen in `tz`; `None` from inside the
    /// user's day (a Window closing at 15:00 seen at 12:00 is the user's).
    pub(crate) fn next_morning<Tz: TimeZone>(
        &self,
        now: DateTime<Utc>,
        tz: &Tz,
    ) -> Option<DateTime<Utc>> {
        let local = now.with_timezone(tz).naive_local();
        if !self.is_night(local.time()) {
            return None;
        }
        let date = local.date();
        let day = if local.time() < self.morning {
            date
        } else {
            date.succ_opt()?
        };
        Some(instant(tz, day.and_time(self.morning)))
    }
}

/// A local date and time as an instant: the earlier of two in an autumn fold, the first
/// that exists after a spring gap.
fn instant<Tz: TimeZone>(tz: &Tz, local: NaiveDateTime) -> DateTime<Utc> {
    let mut at = local;
    for _ in 0..8 {
        if let Some(t) = tz.from_local_datetime(&at).earliest() {
            return t.with_timezone(&Utc);
        }
        at += Duration::minutes(15);
    }
    // No zone skips two hours; read as UTC rather than fail.
    local.and_utc()
}

/// The night as one Account keeps it: when its morning comes, and its night ceiling.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Tonight {
    pub(crate) morning: DateTime<Utc>,
    pub(crate) night_max: f64,
}

impl Tonight {
    /// The night `now` is in for an Account with `limits` under `config`, seen in `tz`;
    /// `None` with no morning configured or from inside the user's day.
    pub(crate) fn of<Tz: TimeZone>(
        config: &Config,
        account: &crate::config::Account,
        now: DateTime<Utc>,
        tz: &Tz,
    ) -> Option<Tonight> {
        Tonight::of_day(Day::of(config, account)?, account.limits.as_ref(), now, tz)
    }

    /// The night `now` is in under `day`, for an Account with `limits`; `None` from inside
    /// the user's day.
    pub(crate) fn of_day<Tz: TimeZone>(
        day: Day,
        limits: Option<&Limits>,
        now: DateTime<Utc>,
        tz: &Tz,
    ) -> Option<Tonight> {
        Some(Tonight {
            morning: day.next_morning(now, tz)?,
            night_max: night_max(limits),
        })
    }
}

/// The Account's night ceiling: its `nightMax`, else [`DEFAULT_NIGHT_MAX`], never below its
/// own highest ceiling (config refuses a `nightMax` that is).
pub(crate) fn night_max(limits: Option<&Limits>) -> f64 {
    let Some(limits) = limits else {
        return DEFAULT_NIGHT_MAX;
    };
    limits.night_max.unwrap_or_else(|| {
        [
            limits.five_hour_max,
            limits.weekly_max,
            limits.model_weekly_max,
        ]
        .into_iter()
        .flatten()
        .fold(DEFAULT_NIGHT_MAX, f64::max)
    })
}

/// The ceiling in force for one Window, and which setting it is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Bound {
    /// The config key: `fiveHourMax`, `weeklyMax`, `modelWeeklyMax` or `nightMax`.
    pub(crate) key: &'static str,
    pub(crate) ceiling: f64,
    /// With the night ceiling: the morning the Window resets before.
    pub(crate) before_morning: Option<DateTime<Utc>>,
}

impl Bound {
    /// The configured ceiling `(key, ceiling)` of a Window that resets at `resets_at`, as
    /// it holds tonight: raised to the night ceiling when the Window resets before the
    /// morning (by its reported reset, never a guessed one).
    pub(crate) fn in_force(
        (key, ceiling): (&'static str, f64),
        resets_at: Option<DateTime<Utc>>,
        tonight: Option<&Tonight>,
    ) -> Bound {
        match (tonight, resets_at) {
            (Some(night), Some(reset)) if reset <= night.morning && night.night_max > ceiling => {
                Bound {
                    key: "nightMax",
                    ceiling: night.night_max,
                    before_morning: Some(night.morning),
                }
            }
            _ => Bound {
                key,
                ceiling,
                before_morning: None,
            },
        }
    }
}

#[cfg(test)]
mod tests;
