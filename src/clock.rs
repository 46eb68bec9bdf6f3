//! "Now" for scheduling: the system clock, or `OWL_NOW` when a test injects the time.

use chrono::{DateTime, Utc};

/// The environment variable that fixes "now" (RFC 3339), for tests and for rehearsing a night.
pub(crate) const OWL_NOW: &str = "OWL_NOW";

/// The current time, as scheduling sees it.
///
/// Deadlines inside a Run (grace, stall, maxRunTime) use the monotonic clock instead:
/// only decisions about wall time (windows resetting, `not_before`) come from here.
pub(crate) fn now() -> anyhow::Result<DateTime<Utc>> {
    match std::env::var(OWL_NOW) {
        // `@FILE`: a clock a simulation moves (the morning plan's benchmark), read anew at
        // every use, so that a night of hours passes in seconds.
        Ok(s) if s.starts_with('@') => {
            let text = std::fs::read_to_string(&s[1..])
                .map_err(|e| crate::error::Error::bad_input(format!("{OWL_NOW}='{s}': {e}")))?;
            DateTime::parse_from_rfc3339(text.trim())
                .map(|t| t.with_timezone(&Utc))
                .map_err(|e| crate::error::Error::bad_input(format!("{OWL_NOW}='{s}': {e}")).into())
        }
        Ok(s) if !s.is_empty() => {
            let fixed = DateTime::parse_from_rfc3339(&s)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|e| {
                    crate::error::Error::bad_input(format!(
                        "{OWL_NOW}='{s}' is not an RFC 3339 time: {e}"
                    ))
                })?;
            // A fixed clock left in a crontab would plan every night as that one: said,
            // once per process, wherever it is honoured.
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| errln!("owl: the clock is fixed at {s} by {OWL_NOW}"));
            Ok(fixed)
        }
        _ => Ok(Utc::now()),
    }
}

/// Serializes a time in the one stored shape ([`rfc3339`]), for `#[serde(serialize_with)]`.
pub(crate) fn ser<S: serde::Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&rfc3339(*t))
}

/// [`ser`] for a time that may be missing (`null`).
pub(crate) fn ser_opt<S: serde::Serializer>(
    t: &Option<DateTime<Utc>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => ser(t, s),
        None => s.serialize_none(),
    }
}

/// [`ser`] for a list of times.
pub(crate) fn ser_vec<S: serde::Serializer>(ts: &[DateTime<Utc>], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(ts.iter().map(|t| rfc3339(*t)))
}

/// An RFC 3339 UTC string with second precision, as stored and printed.
pub(crate) fn rfc3339(t: DateTime<Utc>) -> String {
    use chrono::{Datelike, Timelike};
    // The one shape owl stores and prints, written directly: listing ten thousand Jobs
    // writes twenty thousand of these.
    if (0..=9999).contains(&t.year()) {
        let mut b = *b"0000-00-00T00:00:00Z";
        let mut put = |at: usize, width: usize, mut n: u32| {
            for i in (at..at + width).rev() {
                b[i] = b'0' + (n % 10) as u8;
                n /= 10;
            }
        };
        put(0, 4, t.year() as u32);
        put(5, 2, t.month());
        put(8, 2, t.day());
        put(11, 2, t.hour());
        put(14, 2, t.minute());
        put(17, 2, t.second());
        return String::from_utf8_lossy(&b).into_owned();
    }
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A stored time as owl prints it: the stored text itself when it has the one shape owl
/// writes (listings print ten thousand without parsing them), else parsed and written anew.
pub(crate) fn printable(stored: &str) -> std::borrow::Cow<'_, str> {
    match parse_stored(stored) {
        Some(_) => stored.into(),
        None => rfc3339(parse(stored).unwrap_or_default()).into(),
    }
}

/// Parses a stored RFC 3339 time.
pub(crate) fn parse(s: &str) -> Option<DateTime<Utc>> {
    // owl stores one shape, `2026-11-30T03:00:00Z`: read it directly, since listing ten
    // thousand Jobs parses thirty thousand of these; anything else goes the general way.
    parse_stored(s).or_else(|| {
        DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    })
}

fn parse_stored(s: &str) -> Option<DateTime<Utc>> {
    let b = s.as_bytes();
    if b.len() != 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'Z'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        b[r].iter().try_fold(0u32, |n, d| {
            d.is_ascii_digit().then(|| n * 10 + u32::from(d - b'0'))
        })
    };
    let date = chrono::NaiveDate::from_ymd_opt(num(0..4)? as i32, num(5..7)?, num(8..10)?)?;
    let time = date.and_hms_opt(num(11..13)?, num(14..16)?, num(17..19)?)?;
    Some(time.and_utc())
}

/// A short human duration: `45s`, `12m`, `1h12m`, `2d3h`.
pub(crate) fn human(d: chrono::Duration) -> String {
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
pub(crate) fn local_hm(t: DateTime<Utc>) -> String {
    t.with_timezone(&chrono::Local).format("%H:%M").to_string()
}

/// The two ends of a span as a person reads them, in `tz`: as `within_a_day` formats them
/// (`%H:%M`) while the span is shorter than a day, and with their dates once it is not (a
/// week's ends fall on the same weekday and time: "Fri 05:10 → Fri 05:10" says nothing).
pub(crate) fn span_ends<Tz: chrono::TimeZone>(
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    tz: &Tz,
    within_a_day: &str,
) -> (String, String)
where
    Tz::Offset: std::fmt::Display,
{
    let format = if until - since < chrono::Duration::days(1) {
        within_a_day
    } else {
        "%a %-d %b %H:%M"
    };
    let at = |t: DateTime<Utc>| t.with_timezone(tz).format(format).to_string();
    (at(since), at(until))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_of_a_day_or_more_says_its_dates() {
        let tz = chrono::FixedOffset::east_opt(0).unwrap();
        let at = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        assert_eq!(
            span_ends(
                at("2026-11-27T05:10:00Z"),
                at("2026-12-04T05:10:00Z"),
                &tz,
                "%a %H:%M"
            ),
            ("Fri 27 Nov 05:10".into(), "Fri 4 Dec 05:10".into())
        );
        assert_eq!(
            span_ends(
                at("2026-12-03T22:00:00Z"),
                at("2026-12-04T07:00:00Z"),
                &tz,
                "%H:%M"
            ),
            ("22:00".into(), "07:00".into())
        );
    }

    #[test]
    fn the_stored_shape_is_written_as_chrono_writes_it() {
        for text in [
            "2026-11-30T03:00:00Z",
            "2024-02-29T23:59:59Z",
            "0001-01-01T00:00:00Z",
        ] {
            let t = DateTime::parse_from_rfc3339(text)
                .unwrap()
                .with_timezone(&Utc);
            assert_eq!(
                rfc3339(t),
                t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            );
        }
    }

    #[test]
    fn a_stored_time_prints_as_parsing_and_writing_it_would() {
        for stored in [
            "2026-11-30T03:00:00Z",
            "2026-11-30T04:00:00+01:00",
            "2026-11-30T03:00:00.250Z",
            "2026-02-30T03:00:00Z",
            "not a time",
        ] {
            let written = rfc3339(parse(stored).unwrap_or_default());
            assert_eq!(printable(stored), written, "{stored}");
        }
        assert!(matches!(
            printable("2026-11-30T03:00:00Z"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn the_stored_shape_parses_as_rfc3339_does() {
        for text in [
            "2026-11-30T03:00:00Z",
            "2024-02-29T23:59:59Z",
            "1970-01-01T00:00:00Z",
        ] {
            let general = DateTime::parse_from_rfc3339(text)
                .unwrap()
                .with_timezone(&Utc);
            assert_eq!(parse_stored(text), Some(general), "{text}");
        }
        for odd in [
            "2026-02-30T03:00:00Z",
            "2026-11-30T25:00:00Z",
            "2026-11-30 03:00:00Z",
            "2026-1x-30T03:00:00Z",
        ] {
            assert_eq!(parse_stored(odd), None, "{odd}");
        }
        // Other shapes still parse the general way.
        assert!(parse("2026-11-30T03:00:00.5+01:00").is_some());
    }

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
