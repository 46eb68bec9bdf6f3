//! Small string helpers for what owl prints and stores.

/// Cuts a string to `max` characters, marking the cut with `…`.
pub fn truncate(s: &str, max: usize) -> String {
    let mut chars = s.chars();
    let head: String = chars.by_ref().take(max).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}

/// The last `max` bytes of a text, cut at a character boundary, for an error's tail.
pub fn tail(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// `1GiB`, `1.5GiB`, `512MiB`, `1000B`: a size in the largest unit it reaches, as
/// config.yaml accepts it.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    match UNITS.iter().find(|(_, size)| bytes >= *size) {
        Some((unit, size)) if bytes.is_multiple_of(*size) => format!("{}{unit}", bytes / size),
        Some((unit, size)) => format!("{:.1}{unit}", bytes as f64 / *size as f64),
        None => format!("{bytes}B"),
    }
}

/// `63`, `55.5`: a percent without float noise.
pub fn fmt_percent(x: f64) -> String {
    let r = (x * 10.0).round() / 10.0;
    if r.fract() == 0.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_at_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "hé…");
        assert_eq!(truncate("hi", 5), "hi");
        assert_eq!(tail("aéb", 2), "b");
        assert_eq!(tail("abc", 10), "abc");
    }
}
