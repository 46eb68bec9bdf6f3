//! The units config.yaml writes values in: durations (`1h30m`) and sizes (`1GiB`), parsed and written back.

use std::time::Duration;

use crate::text::format_size;

/// A value that is not of its unit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ValueError {
    #[error("'{0}' is not a duration (use e.g. 30s, 15m, 4h, 1h30m)")]
    NotADuration(String),
    #[error("'{0}' is not a size (use e.g. 1GiB, 500MiB, 2GB, 0)")]
    NotASize(String),
}

/// The default `minFreeSpace`: 1 GiB, room for a night of logs, commits and the database.
pub(crate) const DEFAULT_MIN_FREE_SPACE: u64 = 1 << 30;

/// Parses a size: `1GiB`, `500MiB`, `64KiB`, `2GB`, `100MB`, `4096` (bytes), `0`.
pub(crate) fn parse_size(s: &str) -> Result<u64, ValueError> {
    let bad = || ValueError::NotASize(s.to_string());
    let t = s.trim();
    let digits = t
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b'.')
        .count();
    let n: f64 = t[..digits].parse().map_err(|_| bad())?;
    let factor: u64 = match t[digits..].trim() {
        "" | "B" => 1,
        "KiB" | "K" => 1 << 10,
        "MiB" | "M" => 1 << 20,
        "GiB" | "G" => 1 << 30,
        "TiB" | "T" => 1 << 40,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => return Err(bad()),
    };
    let bytes = n * factor as f64;
    if !bytes.is_finite() || bytes > u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes as u64)
}

/// Parses `30s`, `15m`, `4h`, `1h30m`, `2d`, `500ms`.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, ValueError> {
    let bad = || ValueError::NotADuration(s.to_string());
    let s = s.trim();
    if s.is_empty() {
        return Err(bad());
    }
    let mut total_ms: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let factor = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total_ms = n
            .checked_mul(factor)
            .and_then(|x| total_ms.checked_add(x))
            .ok_or_else(bad)?;
    }
    Ok(Duration::from_millis(total_ms))
}

/// Formats a duration the way config.yaml writes it: `1h30m`, `45s`.
pub(crate) fn format_duration(d: Duration) -> String {
    let ms = d.as_millis() as u64;
    if !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let mut secs = ms / 1000;
    if secs == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
        if secs >= size {
            out.push_str(&format!("{}{unit}", secs / size));
            secs %= size;
        }
    }
    out
}

pub(super) fn ser_size<S: serde::Serializer>(bytes: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_size(*bytes))
}

pub(super) fn ser_opt_duration<S: serde::Serializer>(
    d: &Option<Duration>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => ser_duration(d, s),
        None => s.serialize_none(),
    }
}

/// A time of day as config.yaml writes it: `HH:MM`.
pub(super) fn ser_opt_time<S: serde::Serializer>(
    t: &Option<chrono::NaiveTime>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.collect_str(&t.format("%H:%M")),
        None => s.serialize_none(),
    }
}

pub(super) fn ser_duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_duration(*d))
}
