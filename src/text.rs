//! Small string helpers for what owl prints and stores.

/// Cuts a string to `max` characters, marking the cut with `…`.
/// An I/O error in words, without the `(os error N)` the standard library adds.
pub(crate) fn io_words(e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match e.kind() {
        ErrorKind::NotFound => "it does not exist".into(),
        ErrorKind::PermissionDenied => "permission denied".into(),
        ErrorKind::IsADirectory => "it is a directory".into(),
        ErrorKind::NotADirectory => "a part of its path is not a directory".into(),
        _ => {
            let text = e.to_string();
            match text.find(" (os error ") {
                Some(at) => text[..at].to_string(),
                None => text,
            }
        }
    }
}

pub(crate) fn truncate(s: &str, max: usize) -> String {
    let mut chars = s.chars();
    let head: String = chars.by_ref().take(max).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}

/// `s` on one line of at most `max` characters: every run of whitespace (a traceback's
/// newlines) one space, then truncated. For a reason said in a line of its own.
pub(crate) fn one_line(s: &str, max: usize) -> String {
    let joined: Vec<&str> = s.split_whitespace().collect();
    truncate(&joined.join(" "), max)
}

/// `s` as one word of a POSIX shell command: as it is when only safe characters make it,
/// otherwise in single quotes. Every value owl prints into a command to copy goes through it.
pub(crate) fn shell_quote(s: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Whether `s` is a UUID (`8-4-4-4-12` hex digits): the shape of every agent CLI's session
/// id, and the only one owl offers to resume.
pub(crate) fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()))
}

/// The first `max` bytes of a text, cut at a character boundary and marked with `…`.
pub(crate) fn truncate_bytes(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// The last `max` bytes of a text, cut at a character boundary, for an error's tail.
pub(crate) fn tail(s: &str, max: usize) -> &str {
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
pub(crate) fn format_size(bytes: u64) -> String {
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
pub(crate) fn fmt_percent(x: f64) -> String {
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
    fn a_value_in_a_command_is_one_word_whatever_it_holds() {
        assert_eq!(shell_quote("/home/me/.config/owl"), "/home/me/.config/owl");
        assert_eq!(shell_quote("my dir"), "'my dir'");
        assert_eq!(
            shell_quote("x$(touch /tmp/pwned); echo 'hi'"),
            r#"'x$(touch /tmp/pwned); echo '\''hi'\'''"#
        );
        assert_eq!(shell_quote(""), "''");
        // What sh makes of the quoted word is the value itself.
        let tricky = "a'b\"$c`d`\n e";
        let out = std::process::Command::new("sh")
            .args(["-c", &format!("printf %s {}", shell_quote(tricky))])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), tricky);
    }

    #[test]
    fn only_a_uuid_is_a_session_id() {
        assert!(is_uuid("7859bb08-6e62-4362-bef3-c4e1b305f720"));
        assert!(!is_uuid("x$(touch /tmp/pwned); echo pwned"));
        assert!(!is_uuid("7859bb08-6e62-4362-bef3-c4e1b305f72"));
        assert!(!is_uuid("7859bb08-6e62-4362-bef3-c4e1b305f72g"));
    }

    #[test]
    fn cuts_at_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "hé…");
        assert_eq!(truncate("hi", 5), "hi");
        assert_eq!(tail("aéb", 2), "b");
        assert_eq!(tail("abc", 10), "abc");
    }
}
