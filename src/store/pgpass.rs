//! The store's password where libpq looks for it (`PGPASSWORD`, then the password file), and a failed connection's cause in words: what was looked in, what the network said.

use std::path::PathBuf;

/// The password found for a connection, and where owl looked, in words.
pub(super) struct Found {
    pub(super) password: Option<Vec<u8>>,
    /// Each place looked in and what it held, for the error when the server asks for a
    /// password and none was found.
    looked: Vec<String>,
}

/// The password for this connection, where libpq looks: `PGPASSWORD`, then the password
/// file (`PGPASSFILE`, else `~/.pgpass`), whose first line matching host, port, database
/// and role wins.
pub(super) fn find(config: &postgres::Config) -> Found {
    if let Some(pw) = std::env::var_os("PGPASSWORD").filter(|p| !p.is_empty()) {
        return Found {
            password: Some(pw.into_encoded_bytes()),
            looked: Vec::new(),
        };
    }
    let mut looked = vec!["PGPASSWORD is not set".to_string()];
    let file = std::env::var_os("PGPASSFILE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pgpass")));
    let Some(file) = file else {
        looked.push("no password file (neither PGPASSFILE nor HOME is set)".into());
        return Found {
            password: None,
            looked,
        };
    };
    let wanted = wanted(config);
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) => {
            let why = crate::text::io_words(&e);
            looked.push(format!(
                "the password file {} cannot be read: {why}",
                file.display()
            ));
            return Found {
                password: None,
                looked,
            };
        }
    };
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    let wanted_refs = wanted.each();
    let password = lines
        .iter()
        .find_map(|line| pgpass_match(line, wanted_refs))
        .map(String::into_bytes);
    if password.is_none() {
        looked.push(no_line(&file, &lines, &wanted));
    }
    Found { password, looked }
}

/// What a `.pgpass` line must match: host, port, database and role.
struct Wanted {
    host: String,
    port: String,
    db: String,
    user: String,
}

impl Wanted {
    fn each(&self) -> [&str; 4] {
        [&self.host, &self.port, &self.db, &self.user]
    }
}

fn wanted(config: &postgres::Config) -> Wanted {
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(name)) => name.clone(),
        Some(postgres::config::Host::Unix(_)) | None => "localhost".into(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user().unwrap_or_default().to_string();
    let db = config.get_dbname().unwrap_or(&user).to_string();
    Wanted {
        host,
        port,
        db,
        user,
    }
}

/// Why the password file had no line for this connection, with the likely mistake when a
/// line differs in one field only (a database or role spelled otherwise).
fn no_line(file: &std::path::Path, lines: &[&str], w: &Wanted) -> String {
    let mut said = format!(
        "the password file {} has no line for {}:{}:{}:{}",
        file.display(),
        w.host,
        w.port,
        w.db,
        w.user
    );
    let fields = ["host", "port", "database", "role"];
    for (i, field) in fields.iter().enumerate() {
        let mut other = w.each();
        other[i] = "*";
        if lines.iter().any(|l| pgpass_match(l, other).is_some()) {
            said.push_str(&format!(
                " (it has one for another {field}: is the {field} in `store:` right?)"
            ));
            break;
        }
    }
    said
}

/// A `.pgpass` line's password when its four fields match (`*` matches anything; `\:`
/// and `\\` are a colon and a backslash). A wanted `*` matches any field of the line.
fn pgpass_match(line: &str, wanted: [&str; 4]) -> Option<String> {
    let mut fields = Vec::with_capacity(5);
    let mut field = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => field.extend(chars.next()),
            ':' if fields.len() < 4 => fields.push(std::mem::take(&mut field)),
            c => field.push(c),
        }
    }
    fields.push(field);
    if fields.len() != 5 {
        return None;
    }
    let matches = fields[..4]
        .iter()
        .zip(wanted)
        .all(|(have, want)| have == "*" || want == "*" || have == want);
    matches.then(|| fields.pop().unwrap_or_default())
}

/// What the resolver's error says when a host has no address (the driver gives no kind).
const NO_ADDRESS: &str = "failed to lookup address information";

/// A failed connection in words: the server's own message when it sent one; else what the
/// network said (no such host, nothing listening, no answer) or, when the server asked for
/// a password owl did not find, every place it looked.
pub(super) fn connect_error(
    e: &postgres::Error,
    config: &postgres::Config,
    found: &Found,
) -> String {
    if e.as_db_error().is_some() {
        return super::postgres::describe(e);
    }
    let w = wanted(config);
    let chain = super::postgres::describe(e);
    if chain.contains("password missing") {
        return format!(
            "the server asked for role {}'s password and owl found none: {}",
            w.user,
            found.looked.join("; ")
        );
    }
    let io = std::error::Error::source(e).and_then(|s| s.downcast_ref::<std::io::Error>());
    match io.map(std::io::Error::kind) {
        Some(std::io::ErrorKind::ConnectionRefused) => format!(
            "nothing listens at {}:{} (connection refused): is the server running, on that port?",
            w.host, w.port
        ),
        Some(std::io::ErrorKind::TimedOut) => {
            format!("{}:{} did not answer (timed out)", w.host, w.port)
        }
        _ if chain.contains(NO_ADDRESS) => format!(
            "the host {} is not known: no address was found for it (DNS)",
            w.host
        ),
        _ => chain,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pgpass_line_matches_by_its_four_fields() {
        let want = ["db", "5432", "owl", "owl"];
        assert_eq!(
            pgpass_match("db:5432:owl:owl:s3cret", want),
            Some("s3cret".into())
        );
        assert_eq!(pgpass_match("*:*:*:owl:a\\:b", want), Some("a:b".into()));
        assert_eq!(pgpass_match("other:5432:owl:owl:x", want), None);
        assert_eq!(pgpass_match("db:5432:owl", want), None);
    }

    #[test]
    fn a_line_for_another_database_is_named_as_the_likely_mistake() {
        let w = Wanted {
            host: "db".into(),
            port: "5432".into(),
            db: "owl_typo".into(),
            user: "owl".into(),
        };
        let said = no_line(
            std::path::Path::new("/h/.pgpass"),
            &["db:5432:owl:owl:pw"],
            &w,
        );
        assert_eq!(
            said,
            "the password file /h/.pgpass has no line for db:5432:owl_typo:owl (it has one \
             for another database: is the database in `store:` right?)"
        );
    }
}
