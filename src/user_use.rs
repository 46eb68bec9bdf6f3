//! The user's own use of a plan: a Window's movement between two figures owl observed, less what owl's own Runs moved it, kept by hour; and what was learned of it.
//!
//! Utilization is account-wide: between two figures a Window moves by what everyone spent.
//! Where no Run of owl's was live, and the later figure is not a Run's, that movement is the
//! user's. Where one was, the movement is owl's (the user's concurrent use counted as owl's,
//! as owl's share counts it) and the interval says nothing of the user. An hour with no such
//! pair of figures in it is not observed: unknown, never 0.

use chrono::{DateTime, Duration, DurationRound, Utc};

mod profile;

pub(crate) use profile::{margin, start_of_day, Kept, Profile};

/// One figure of a Window as folding reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Figure {
    pub(crate) at: DateTime<Utc>,
    pub(crate) percent: f64,
    /// The instance it is of (`None`: a figure that names no reset).
    pub(crate) resets_at: Option<DateTime<Utc>>,
    /// A Run of owl's was live since the figure before, or this is a Run's own figure: the
    /// movement to it is owl's.
    pub(crate) owl: bool,
}

/// What the kind of owl's own use by hour starts with in the store (`owl_weekly`): kept
/// beside the user's, for the report to draw them side by side.
pub(crate) const OWLS: &str = "owl_";

/// The use in each hour the figures observe, the user's and owl's apart.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Hours {
    /// `(the hour's start, points)`, in order, one entry an hour (0 where the Window did not
    /// move; none where only owl's Runs moved it).
    pub(crate) users: Vec<(DateTime<Utc>, f64)>,
    /// The same of owl's Runs (the user's use beside a Run counted as owl's).
    pub(crate) owls: Vec<(DateTime<Utc>, f64)>,
}

/// The use in each hour the figures observe. `before` is the last figure folded already,
/// the start of the first pair.
pub(crate) fn by_hour(before: Option<&Figure>, figures: &[Figure]) -> Hours {
    let mut hours = Hours::default();
    let all: Vec<&Figure> = before.into_iter().chain(figures).collect();
    for pair in all.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        // A move of owl's tells nothing of the user (their use beside it is owl's).
        let Some(points) = moved(a, b) else {
            continue;
        };
        let side = if b.owl {
            &mut hours.owls
        } else {
            &mut hours.users
        };
        let hour = hour_of(b.at);
        match side.last_mut() {
            Some((h, p)) if *h == hour => *p += points,
            _ => side.push((hour, points)),
        }
    }
    hours
}

/// The longest pair of figures whose move is placed in the hour of its second: a longer
/// gap (the machine asleep, a night without a tick) says what was used, not when.
pub(crate) const MAX_PAIR_SPAN: Duration = Duration::hours(2);

/// The move from `a` to `b`; `None` when it cannot be placed (a figure naming no
/// instance, or too long after `a`).
fn moved(a: &Figure, b: &Figure) -> Option<f64> {
    if b.at - a.at > MAX_PAIR_SPAN {
        return None;
    }
    match (a.resets_at, b.resets_at) {
        // `a`'s instance reset before `b` was read: all of `b`'s is the new instance's,
        // the user's (no Run of owl's in between).
        (Some(x), Some(_)) if b.at >= x => Some(b.percent.max(0.0)),
        // The same instance, its reset moved or not (the plan moves a week's reset now and
        // then): what it rose by (a figure never falls but by a reset).
        (Some(_), Some(_)) => Some((b.percent - a.percent).max(0.0)),
        _ => None,
    }
}

/// The start of the hour `t` is in.
pub(crate) fn hour_of(t: DateTime<Utc>) -> DateTime<Utc> {
    t.duration_trunc(Duration::hours(1)).unwrap_or(t)
}

/// What was learned of the user's use of one Account, from the hours observed.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Learned {
    /// The local days with any hour observed.
    pub(crate) days: usize,
    /// Points of the week the user spends on a weekday (Monday to Friday), and on a weekend
    /// day: typical (the median day) and the quantile; `None` before such a day was seen.
    pub(crate) weekday: Option<Spread>,
    pub(crate) weekend: Option<Spread>,
    /// Points of a five-hour Window the user spends in their first five hours of a day.
    pub(crate) first_five_hours: Option<Spread>,
}

/// A typical figure and a high quantile of it, in percentage points.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub(crate) struct Spread {
    pub(crate) typical: f64,
    pub(crate) quantile: f64,
}

/// Learns from the user's use by hour of the weekly (`week`) and five-hour (`five`) Windows,
/// days taken in `tz`, at quantile `q` (0.9: P90).
pub(crate) fn learn<Tz: chrono::TimeZone>(
    week: &[(DateTime<Utc>, f64)],
    five: &[(DateTime<Utc>, f64)],
    tz: &Tz,
    q: f64,
) -> Learned {
    use chrono::Datelike;
    let daily = by_day(week, tz);
    let weekend = |d: &chrono::NaiveDate| d.weekday().number_from_monday() > 5;
    let of = |keep: &dyn Fn(&chrono::NaiveDate) -> bool| {
        spread(
            daily
                .iter()
                .filter(|(d, _)| keep(d))
                .map(|(_, p)| *p)
                .collect(),
            q,
        )
    };
    let mut days: Vec<chrono::NaiveDate> = daily.iter().map(|(d, _)| *d).collect();
    days.extend(by_day(five, tz).into_iter().map(|(d, _)| d));
    days.sort_unstable();
    days.dedup();
    Learned {
        days: days.len(),
        weekday: of(&|d| !weekend(d)),
        weekend: of(&weekend),
        first_five_hours: spread(first_five_hours(five, tz), q),
    }
}

/// Each observed local day's total, in order.
fn by_day<Tz: chrono::TimeZone>(
    hours: &[(DateTime<Utc>, f64)],
    tz: &Tz,
) -> Vec<(chrono::NaiveDate, f64)> {
    let mut days: Vec<(chrono::NaiveDate, f64)> = Vec::new();
    for (hour, points) in hours {
        let day = hour.with_timezone(tz).date_naive();
        match days.last_mut() {
            Some((d, p)) if *d == day => *p += points,
            _ => days.push((day, *points)),
        }
    }
    days
}

/// Each observed day's use in the five hours from its first hour of use.
fn first_five_hours<Tz: chrono::TimeZone>(hours: &[(DateTime<Utc>, f64)], tz: &Tz) -> Vec<f64> {
    let mut out = Vec::new();
    let mut start: Option<(chrono::NaiveDate, DateTime<Utc>)> = None;
    for (hour, points) in hours {
        let day = hour.with_timezone(tz).date_naive();
        match start {
            Some((d, from)) if d == day && *hour < from + Duration::hours(5) => {
                if let Some(last) = out.last_mut() {
                    *last += points;
                }
            }
            Some((d, _)) if d == day => {}
            _ if *points > 0.0 => {
                start = Some((day, *hour));
                out.push(*points);
            }
            _ => {}
        }
    }
    out
}

/// The median and the `q` quantile (nearest rank) of `values`; `None` for none.
fn spread(mut values: Vec<f64>, q: f64) -> Option<Spread> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let rank = |p: f64| {
        let i = (p * values.len() as f64).ceil() as usize;
        values[i.clamp(1, values.len()) - 1]
    };
    Some(Spread {
        typical: crate::model::round_percent(rank(0.5)),
        quantile: crate::model::round_percent(rank(q)),
    })
}

/// A Window instance the user reached 100% of in their day after owl's Runs had used some
/// of it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct UserLimited {
    pub(crate) window: String,
    #[serde(serialize_with = "crate::clock::ser")]
    pub(crate) resets_at: DateTime<Utc>,
    /// When a figure first showed it full.
    #[serde(serialize_with = "crate::clock::ser")]
    pub(crate) at: DateTime<Utc>,
    pub(crate) percent: f64,
    /// The points owl's Runs used of it.
    pub(crate) owl_points: f64,
}

/// A Window instance the user found full, in words: "Tue 10:40: five_hour at 100%, owl
/// used 31 pp of it".
pub(crate) fn describe_limited<Tz: chrono::TimeZone>(limited: &UserLimited, tz: &Tz) -> String
where
    Tz::Offset: std::fmt::Display,
{
    let pct = crate::text::fmt_percent;
    format!(
        "{}: {} at {}%, owl used {} pp of it",
        limited.at.with_timezone(tz).format("%a %H:%M"),
        limited.window,
        pct(limited.percent),
        pct(limited.owl_points)
    )
}

/// What was learned, in words: "learned from 19 days: weekdays 9 pp of the week (P90 14),
/// weekends 2 pp (P90 3); your first five hours 18 pp of a five-hour window (P90 26)".
pub(crate) fn describe(learned: &Learned, q: f64) -> String {
    if learned.days == 0 {
        return "nothing learned yet: owl samples your day at no token cost".into();
    }
    let pct = crate::text::fmt_percent;
    let name = format!("P{}", pct(q * 100.0));
    let said =
        |s: &Spread, of: &str| format!("{} pp{of} ({name} {})", pct(s.typical), pct(s.quantile));
    let mut parts = Vec::new();
    if let Some(s) = &learned.weekday {
        parts.push(format!("weekdays {}", said(s, " of the week")));
    }
    if let Some(s) = &learned.weekend {
        parts.push(format!("weekends {}", said(s, "")));
    }
    let mut text = format!(
        "learned from {} {}",
        learned.days,
        if learned.days == 1 { "day" } else { "days" }
    );
    if !parts.is_empty() {
        text.push_str(&format!(": {}", parts.join(", ")));
    }
    if let Some(s) = &learned.first_five_hours {
        text.push_str(&format!(
            "; your first five hours {}",
            said(s, " of a five-hour window")
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        crate::clock::parse(s).unwrap()
    }

    fn fig(at: &str, percent: f64, reset: &str, owl: bool) -> Figure {
        Figure {
            at: t(at),
            percent,
            resets_at: Some(t(reset)),
            owl,
        }
    }

    #[test]
    fn the_users_use_is_the_move_between_figures_less_owls_by_hour() {
        let reset = "2026-11-30T15:00:00Z";
        let figures = [
            fig("2026-11-30T10:10:00Z", 10.0, reset, false),
            fig("2026-11-30T10:40:00Z", 14.0, reset, false),
            fig("2026-11-30T11:10:00Z", 14.0, reset, false),
            // A Run of owl's took it to 30: owl's.
            fig("2026-11-30T11:40:00Z", 30.0, reset, true),
            fig("2026-11-30T12:10:00Z", 33.0, reset, false),
        ];
        let before = fig("2026-11-30T09:50:00Z", 7.0, reset, false);
        assert_eq!(
            by_hour(Some(&before), &figures).users,
            [
                (t("2026-11-30T10:00:00Z"), 7.0),
                (t("2026-11-30T11:00:00Z"), 0.0),
                (t("2026-11-30T12:00:00Z"), 3.0),
            ]
        );
        // owl's, apart: 14 to 30 at 11:40.
        assert_eq!(
            by_hour(Some(&before), &figures).owls,
            [(t("2026-11-30T11:00:00Z"), 16.0)]
        );
    }

    #[test]
    fn a_reset_between_figures_gives_the_user_the_new_instances_figure() {
        let figures = [
            fig("2026-11-30T14:50:00Z", 40.0, "2026-11-30T15:00:00Z", false),
            fig("2026-11-30T15:20:00Z", 6.0, "2026-11-30T20:00:00Z", false),
        ];
        assert_eq!(
            by_hour(None, &figures).users,
            [(t("2026-11-30T15:00:00Z"), 6.0)],
            "the first figure starts the pairs; the second is the new instance's"
        );
    }

    #[test]
    fn an_hour_without_a_pair_is_not_observed() {
        let reset = "2026-12-04T00:00:00Z";
        let figures = [
            fig("2026-11-30T09:30:00Z", 10.0, reset, false),
            fig("2026-11-30T10:30:00Z", 11.0, reset, false),
            // Four hours asleep: the 2 points are not placed in any hour.
            fig("2026-11-30T14:30:00Z", 13.0, reset, false),
            fig("2026-11-30T15:00:00Z", 13.0, reset, false),
        ];
        // 11:00 to 14:00 are unknown, not 0; 15:00 is observed, at 0.
        assert_eq!(
            by_hour(None, &figures).users,
            [
                (t("2026-11-30T10:00:00Z"), 1.0),
                (t("2026-11-30T15:00:00Z"), 0.0)
            ]
        );
    }

    /// Hours of use: `(local day of November 2026, hour, points)`, UTC.
    fn hours(list: &[(u32, u32, f64)]) -> Vec<(DateTime<Utc>, f64)> {
        list.iter()
            .map(|(d, h, p)| (t(&format!("2026-11-{d:02}T{h:02}:00:00Z")), *p))
            .collect()
    }

    #[test]
    fn nothing_observed_is_nothing_learned_never_zero_use() {
        let learned = learn(&[], &[], &Utc, 0.9);
        assert_eq!(learned.days, 0);
        assert_eq!(learned.weekday, None);
        assert!(describe(&learned, 0.9).starts_with("nothing learned"));
    }

    #[test]
    fn a_high_quantile_over_noisy_days_and_weekends_apart() {
        // Mon 23 to Sun 29 November: weekdays 8, 10, 9, 30 (a heavy day), 9; weekend 2, 1.
        let week = hours(&[
            (23, 10, 8.0),
            (24, 10, 10.0),
            (25, 10, 9.0),
            (26, 10, 20.0),
            (26, 14, 10.0),
            (27, 10, 9.0),
            (28, 11, 2.0),
            (29, 11, 1.0),
        ]);
        // The five-hour Window: from the day's first hour of use, five hours summed.
        let five = hours(&[(23, 9, 0.0), (23, 10, 12.0), (23, 13, 6.0), (23, 16, 30.0)]);
        let learned = learn(&week, &five, &Utc, 0.9);
        assert_eq!(learned.days, 7);
        assert_eq!(
            learned.weekday,
            Some(Spread {
                typical: 9.0,
                quantile: 30.0
            })
        );
        assert_eq!(
            learned.weekend,
            Some(Spread {
                typical: 1.0,
                quantile: 2.0
            })
        );
        assert_eq!(learned.first_five_hours.unwrap().typical, 18.0);
        assert_eq!(
            describe(&learned, 0.9),
            "learned from 7 days: weekdays 9 pp of the week (P90 30), weekends 1 pp (P90 2); \
             your first five hours 18 pp of a five-hour window (P90 18)"
        );
    }

    #[test]
    fn a_day_is_the_users_local_day() {
        // 23:30 UTC on the 22nd is the 23rd in UTC+1.
        let week = hours(&[(22, 23, 4.0), (23, 9, 5.0)]);
        let zone = chrono::FixedOffset::east_opt(3600).unwrap();
        let learned = learn(&week, &[], &zone, 0.9);
        assert_eq!(learned.days, 1);
        assert_eq!(learned.weekday.unwrap().typical, 9.0);
    }

    #[test]
    fn a_weekly_reset_that_moves_is_the_same_instance_until_it_passes() {
        // The plan moved the week's reset from Thursday to Friday with the Window at 40:
        // the user used 1 point, not 41.
        let figures = [
            fig("2026-11-30T10:10:00Z", 40.0, "2026-12-03T05:00:00Z", false),
            fig("2026-11-30T10:40:00Z", 41.0, "2026-12-04T05:00:00Z", false),
            // Moved back, to Wednesday: still the same instance.
            fig("2026-11-30T11:10:00Z", 43.0, "2026-12-02T05:00:00Z", false),
            // Sampled on Wednesday: past its reset, a new instance, at 2.
            fig("2026-12-02T04:50:00Z", 43.0, "2026-12-02T05:00:00Z", false),
            fig("2026-12-02T06:10:00Z", 2.0, "2026-12-09T05:00:00Z", false),
        ];
        assert_eq!(
            by_hour(None, &figures).users,
            [
                (t("2026-11-30T10:00:00Z"), 1.0),
                (t("2026-11-30T11:00:00Z"), 2.0),
                (t("2026-12-02T06:00:00Z"), 2.0),
            ]
        );
    }
}
