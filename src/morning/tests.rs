use chrono::FixedOffset;

use super::*;

fn hm(s: &str) -> NaiveTime {
    NaiveTime::parse_from_str(s, "%H:%M").unwrap()
}

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

/// 22:00 to 07:00, the night of `schedule.window: "22:00-07:00"`.
fn night() -> Day {
    Day {
        morning: hm("07:00"),
        ends: hm("22:00"),
    }
}

#[test]
fn the_morning_is_the_next_one_seen_from_the_night_and_none_from_the_day() {
    let utc = Utc;
    assert_eq!(
        night().next_morning(at("2026-12-04T23:30:00Z"), &utc),
        Some(at("2026-12-05T07:00:00Z"))
    );
    assert_eq!(
        night().next_morning(at("2026-12-05T03:00:00Z"), &utc),
        Some(at("2026-12-05T07:00:00Z"))
    );
    // Inside the user's day: a Window closing at 15:00, seen at 12:00, is the user's.
    assert_eq!(night().next_morning(at("2026-12-05T12:00:00Z"), &utc), None);
    assert_eq!(night().next_morning(at("2026-12-05T07:00:00Z"), &utc), None);
}

#[test]
fn the_morning_is_local_time() {
    // 23:30 UTC is 08:30 the next day in Tokyo: the user's day there.
    let tokyo = FixedOffset::east_opt(9 * 3600).unwrap();
    assert_eq!(
        night().next_morning(at("2026-12-04T23:30:00Z"), &tokyo),
        None
    );
    // 13:30 UTC is 22:30 in Tokyo: the night, whose morning is 07:00 Tokyo, 22:00 UTC.
    assert_eq!(
        night().next_morning(at("2026-12-04T13:30:00Z"), &tokyo),
        Some(at("2026-12-04T22:00:00Z"))
    );
}

#[test]
fn a_day_that_ends_after_midnight_has_its_night_between() {
    let late = Day {
        morning: hm("09:00"),
        ends: hm("01:30"),
    };
    assert_eq!(late.next_morning(at("2026-12-05T00:30:00Z"), &Utc), None);
    assert_eq!(
        late.next_morning(at("2026-12-05T02:00:00Z"), &Utc),
        Some(at("2026-12-05T09:00:00Z"))
    );
}

fn tonight() -> Tonight {
    Tonight {
        morning: at("2026-12-05T07:00:00Z"),
        night_max: 85.0,
    }
}

#[test]
fn a_window_that_resets_before_the_morning_is_the_nights_up_to_the_night_ceiling() {
    let five = ("fiveHourMax", 60.0);
    // Opened at 22:00, it closes at 03:00: the night's.
    let b = Bound::in_force(five, Some(at("2026-12-05T03:00:00Z")), Some(&tonight()));
    assert_eq!(
        b,
        Bound {
            key: "nightMax",
            ceiling: 85.0,
            before_morning: Some(at("2026-12-05T07:00:00Z"))
        }
    );
    // Opened at 03:00 it closes at 08:00, after the morning: the morning's, as configured.
    let b = Bound::in_force(five, Some(at("2026-12-05T08:00:00Z")), Some(&tonight()));
    assert_eq!(
        (b.key, b.ceiling, b.before_morning),
        ("fiveHourMax", 60.0, None)
    );
    // A Window that resets at the very morning is spent by then.
    let b = Bound::in_force(five, Some(at("2026-12-05T07:00:00Z")), Some(&tonight()));
    assert_eq!(b.key, "nightMax");
}

#[test]
fn the_week_that_resets_before_the_morning_is_the_nights_too() {
    let b = Bound::in_force(
        ("weeklyMax", 50.0),
        Some(at("2026-12-05T05:00:00Z")),
        Some(&tonight()),
    );
    assert_eq!((b.key, b.ceiling), ("nightMax", 85.0));
}

#[test]
fn without_a_morning_or_a_reported_reset_the_configured_ceiling_holds() {
    let five = ("fiveHourMax", 60.0);
    let none = Bound::in_force(five, Some(at("2026-12-05T03:00:00Z")), None);
    assert_eq!((none.key, none.ceiling), ("fiveHourMax", 60.0));
    // No reset reported: never a guessed one.
    let unknown = Bound::in_force(five, None, Some(&tonight()));
    assert_eq!((unknown.key, unknown.ceiling), ("fiveHourMax", 60.0));
}

#[test]
fn the_night_ceiling_defaults_to_85_and_never_under_the_accounts_own() {
    assert_eq!(night_max(None), 85.0);
    let limits = |five: Option<f64>, night: Option<f64>| Limits {
        five_hour_max: five,
        night_max: night,
        ..Limits::default()
    };
    assert_eq!(night_max(Some(&limits(Some(60.0), None))), 85.0);
    assert_eq!(night_max(Some(&limits(Some(95.0), None))), 95.0);
    assert_eq!(night_max(Some(&limits(Some(60.0), Some(92.0)))), 92.0);
    // A night ceiling at or under the configured one changes nothing.
    let low = Tonight {
        night_max: 60.0,
        ..tonight()
    };
    let b = Bound::in_force(
        ("fiveHourMax", 60.0),
        Some(at("2026-12-05T03:00:00Z")),
        Some(&low),
    );
    assert_eq!(b.key, "fiveHourMax");
}

#[test]
fn a_morning_in_a_spring_gap_is_the_first_time_that_exists() {
    // A zone that skips 02:00-03:00 on 2026-03-29 (as central Europe does).
    #[derive(Clone, Copy)]
    struct Spring;
    impl TimeZone for Spring {
        type Offset = FixedOffset;
        fn from_offset(_: &FixedOffset) -> Spring {
            Spring
        }
        fn offset_from_local_date(
            &self,
            _: &chrono::NaiveDate,
        ) -> chrono::LocalResult<FixedOffset> {
            chrono::LocalResult::Single(FixedOffset::east_opt(3600).unwrap())
        }
        fn offset_from_local_datetime(
            &self,
            local: &NaiveDateTime,
        ) -> chrono::LocalResult<FixedOffset> {
            let gap_from = "2026-03-29T02:00:00".parse::<NaiveDateTime>().unwrap();
            let gap_to = "2026-03-29T03:00:00".parse::<NaiveDateTime>().unwrap();
            match *local {
                t if t < gap_from => {
                    chrono::LocalResult::Single(FixedOffset::east_opt(3600).unwrap())
                }
                t if t < gap_to => chrono::LocalResult::None,
                _ => chrono::LocalResult::Single(FixedOffset::east_opt(7200).unwrap()),
            }
        }
        fn offset_from_utc_date(&self, _: &chrono::NaiveDate) -> FixedOffset {
            FixedOffset::east_opt(3600).unwrap()
        }
        fn offset_from_utc_datetime(&self, utc: &NaiveDateTime) -> FixedOffset {
            let switch = "2026-03-29T01:00:00".parse::<NaiveDateTime>().unwrap();
            FixedOffset::east_opt(if *utc < switch { 3600 } else { 7200 }).unwrap()
        }
    }
    let early = Day {
        morning: hm("02:30"),
        ends: hm("22:00"),
    };
    // 23:00 local (UTC+1) on the 28th: the morning of the 29th at 02:30 does not exist;
    // it is 03:00 local (UTC+2), 01:00 UTC.
    assert_eq!(
        early.next_morning(at("2026-03-28T22:00:00Z"), &Spring),
        Some(at("2026-03-29T01:00:00Z"))
    );
}
