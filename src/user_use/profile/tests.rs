use chrono::{FixedOffset, LocalResult, NaiveDate, NaiveDateTime};

use super::*;

fn t(s: &str) -> DateTime<Utc> {
    crate::clock::parse(s).unwrap()
}

/// Hours of use: `(day, hour, points)` of `month` 2026, UTC.
fn hours(month: u32, list: &[(u32, u32, f64)]) -> Vec<(DateTime<Utc>, f64)> {
    list.iter()
        .map(|(d, h, p)| (t(&format!("2026-{month:02}-{d:02}T{h:02}:00:00Z")), *p))
        .collect()
}

/// Central European time as 2026 keeps it: UTC+1, and UTC+2 from 29 March 01:00 UTC (02:00
/// local becomes 03:00). A zone with a real change of clocks, without a zone database.
#[derive(Debug, Clone, Copy)]
struct Cet;

const SUMMER_FROM: &str = "2026-03-29T01:00:00Z";

impl Cet {
    fn offset_at(utc: &NaiveDateTime) -> FixedOffset {
        let summer = utc.and_utc() >= t(SUMMER_FROM);
        FixedOffset::east_opt(if summer { 7200 } else { 3600 }).unwrap()
    }
}

impl TimeZone for Cet {
    type Offset = FixedOffset;
    fn from_offset(_: &FixedOffset) -> Cet {
        Cet
    }
    fn offset_from_local_date(&self, local: &NaiveDate) -> LocalResult<FixedOffset> {
        self.offset_from_local_datetime(&local.and_time(chrono::NaiveTime::MIN))
    }
    fn offset_from_local_datetime(&self, local: &NaiveDateTime) -> LocalResult<FixedOffset> {
        // Read as winter time, then as summer time: each reading that lands on its own
        // side of the change is a valid one (none in the skipped hour).
        let valid = |secs: i32| {
            let offset = FixedOffset::east_opt(secs).unwrap();
            let utc = *local - Duration::seconds(i64::from(secs));
            (Cet::offset_at(&utc) == offset).then_some(offset)
        };
        match (valid(3600), valid(7200)) {
            (Some(a), Some(b)) => LocalResult::Ambiguous(a, b),
            (Some(a), None) | (None, Some(a)) => LocalResult::Single(a),
            (None, None) => LocalResult::None,
        }
    }
    fn offset_from_utc_date(&self, utc: &NaiveDate) -> FixedOffset {
        Cet::offset_at(&utc.and_time(chrono::NaiveTime::MIN))
    }
    fn offset_from_utc_datetime(&self, utc: &NaiveDateTime) -> FixedOffset {
        Cet::offset_at(utc)
    }
}

#[test]
fn a_forecast_sums_each_hours_quantile_until_the_reset() {
    // Three Mondays: 10:00 used 2, 4 and 9; 11:00 used 1 on one Monday only.
    let history = hours(
        11,
        &[(9, 10, 2.0), (16, 10, 4.0), (23, 10, 9.0), (23, 11, 1.0)],
    );
    let monday = |h: u32| t(&format!("2026-11-30T{h:02}:00:00Z"));
    // Monday 10:00 to 12:00: P90 of 10:00 (9) and of 11:00 (1).
    let p90 = Profile::learn(&history, Utc, 0.9);
    assert_eq!(p90.forecast((monday(10), monday(12))), 10.0);
    // The median instead: 4 + 1.
    let median = Profile::learn(&history, Utc, 0.5);
    assert_eq!(median.forecast((monday(10), monday(12))), 5.0);
    // A Tuesday never seen at 10:00 takes 10:00 of any day; 3:00, never seen, is 0.
    let tuesday = |h: u32| t(&format!("2026-12-01T{h:02}:00:00Z"));
    assert_eq!(p90.forecast((tuesday(3), tuesday(11))), 9.0);
}

#[test]
fn a_cold_start_forecasts_nothing_and_runs_ahead_of_nothing() {
    let profile = Profile::learn(&[], Utc, 0.9);
    let now = t("2026-11-30T12:30:00Z");
    assert_eq!(profile.forecast((now, now + Duration::days(3))), 0.0);
    assert_eq!(profile.ahead(&[], now), 0.0);
}

#[test]
fn a_day_without_samples_is_unknown_not_a_day_of_no_use() {
    // Mondays 2, 16 and 23 November used 6 at 10:00; Monday 9 was never sampled (the
    // machine was off). Were it a 0, the median would fall to 6 of four, and P25 to 0.
    let history = hours(11, &[(2, 10, 6.0), (16, 10, 6.0), (23, 10, 6.0)]);
    let p25 = Profile::learn(&history, Utc, 0.25);
    let monday = t("2026-11-30T10:00:00Z");
    assert_eq!(p25.forecast((monday, monday + Duration::hours(1))), 6.0);
}

#[test]
fn a_high_quantile_over_noisy_days_keeps_the_heavy_one() {
    // Ten Mondays at 10:00: 3 to 5 points, and one at 20 (twice a busy day).
    let noisy = [3.0, 4.0, 5.0, 4.0, 3.0, 20.0, 4.0, 5.0, 3.0, 4.0];
    let history: Vec<(DateTime<Utc>, f64)> = noisy
        .iter()
        .enumerate()
        .map(|(i, p)| (t("2026-09-21T10:00:00Z") + Duration::weeks(i as i64), *p))
        .collect();
    let monday = t("2026-11-30T10:00:00Z");
    let hour = (monday, monday + Duration::hours(1));
    assert_eq!(Profile::learn(&history, Utc, 0.5).forecast(hour), 4.0);
    // P90 of ten is the ninth: 5; P100 the heavy day itself.
    assert_eq!(Profile::learn(&history, Utc, 0.9).forecast(hour), 5.0);
    assert_eq!(Profile::learn(&history, Utc, 1.0).forecast(hour), 20.0);
}

#[test]
fn a_forecast_follows_the_users_clock_across_a_change_of_time() {
    // Mondays before the change, the user works at 10:00 local: 09:00 UTC.
    let history = hours(3, &[(16, 9, 6.0), (23, 9, 6.0)]);
    let profile = Profile::learn(&history, Cet, 0.9);
    // The Monday after the change, 10:00 local is 08:00 UTC; 09:00 UTC is 11:00, unused.
    let at = |s: &str| (t(s), t(s) + Duration::hours(1));
    assert_eq!(profile.forecast(at("2026-03-30T08:00:00Z")), 6.0);
    assert_eq!(profile.forecast(at("2026-03-30T09:00:00Z")), 0.0);
    // The day of the change has 23 hours: Sunday, never observed, takes 10:00 of any day,
    // once.
    assert_eq!(
        profile.forecast((t("2026-03-28T23:00:00Z"), t("2026-03-29T22:00:00Z"))),
        6.0
    );
    // Today starts at local midnight, whichever offset it has.
    assert_eq!(
        start_of_day(t("2026-03-30T12:00:00Z"), &Cet),
        t("2026-03-29T22:00:00Z")
    );
    assert_eq!(
        start_of_day(t("2026-03-29T12:00:00Z"), &Cet),
        t("2026-03-28T23:00:00Z")
    );
}

#[test]
fn a_user_ahead_of_their_usual_today_is_kept_what_they_run_ahead_by() {
    // Three Mondays: 2 points at 09:00 and at 10:00.
    let mut history = hours(
        11,
        &[
            (9, 9, 2.0),
            (9, 10, 2.0),
            (16, 9, 2.0),
            (16, 10, 2.0),
            (23, 9, 2.0),
            (23, 10, 2.0),
        ],
    );
    let profile = Profile::learn(&history, Utc, 0.9);
    let now = t("2026-11-30T10:20:00Z");
    // Today so far: 3 and 6, where 2 and 2 are usual: 5 ahead.
    history.extend(hours(11, &[(30, 9, 3.0), (30, 10, 6.0)]));
    assert_eq!(profile.ahead(&history, now), 5.0);
    // Behind (a quiet morning) keeps nothing extra: the forecast already keeps the rest.
    let quiet = [(t("2026-11-30T09:00:00Z"), 1.0)];
    assert_eq!(profile.ahead(&quiet, now), 0.0);
    // Yesterday's use is not today's.
    let yesterday = [(t("2026-11-29T15:00:00Z"), 30.0)];
    assert_eq!(profile.ahead(&yesterday, now), 0.0);
}

#[test]
fn a_bound_keeps_the_forecast_and_the_margin_never_less_than_the_floor() {
    let kept = |forecast, ahead, margin, floor| Kept {
        forecast,
        ahead,
        margin,
        floor,
    };
    // 25 pp forecast + 13 margin: 62.
    assert_eq!(kept(25.0, 0.0, 13.0, 10.0).bound(85.0), 62.0);
    // Running 8 ahead today: 8 more kept.
    assert_eq!(kept(25.0, 8.0, 13.0, 10.0).bound(85.0), 54.0);
    // A light user: the floor (20) binds before the margin alone (13).
    assert_eq!(kept(0.0, 0.0, 13.0, 20.0).bound(85.0), 80.0);
    // Never above the night ceiling.
    assert_eq!(kept(0.0, 0.0, 0.0, 0.0).bound(85.0), 85.0);
    // A heavy user: nothing left for owl, never below 0.
    assert_eq!(kept(95.0, 0.0, 13.0, 10.0).bound(85.0), 0.0);
}

#[test]
fn the_margin_grows_with_each_day_the_user_was_limited_up_to_a_most() {
    assert_eq!(margin(0), crate::morning::LARGEST_RESPONSE_MOVE);
    assert_eq!(
        margin(1),
        crate::morning::LARGEST_RESPONSE_MOVE + MARGIN_GROWTH
    );
    assert_eq!(
        margin(100),
        crate::morning::LARGEST_RESPONSE_MOVE + MARGIN_GROWTH_MAX
    );
}

#[test]
fn a_heavy_day_that_moves_each_week_is_kept_once_a_week_not_every_day() {
    // Four weeks from Monday 2 November: 4 points at 10:00 each weekday, and one day a week
    // at 8, a different day each week; the weekends' 10:00 observed unused.
    let mut history = Vec::new();
    for week in 0..4 {
        for day in 0..7 {
            let at = t("2026-11-02T10:00:00Z") + Duration::weeks(week) + Duration::days(day);
            let points = match day {
                5 | 6 => 0.0,
                _ if day == week => 8.0,
                _ => 4.0,
            };
            history.push((at, points));
        }
    }
    let profile = Profile::learn(&history, Utc, 0.9);
    // The week from Monday 30 November: each past week came to 24; a total of each hour's
    // P90 (8 on every weekday) would keep 40.
    let monday = t("2026-11-30T00:00:00Z");
    assert_eq!(
        profile.forecast((monday, monday + Duration::weeks(1))),
        24.0
    );
}
