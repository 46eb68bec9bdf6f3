//! PostgreSQL as owl's store: the `store:` URL, its password from libpq's places (never the config), a bounded connect, and the schema.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};

pub(crate) use crate::config::PgUrl;

/// How long a tick waits for the server before it gives up: a tick must not hang behind
/// an unreachable database.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The schema PostgreSQL starts at: migrations 1-22 of SQLite, in one step.
const SCHEMA: &str = include_str!("postgres_schema.sql");
const SCHEMA_BASE: i64 = 22;

/// Connects within [`CONNECT_TIMEOUT`], with the password libpq would use; an error names
/// the host and role, never the password.
pub(crate) fn connect(url: &PgUrl) -> Result<postgres::Client> {
    let mut config = url.config().clone();
    config
        .connect_timeout(CONNECT_TIMEOUT)
        .application_name("owl")
        .keepalives(true)
        .keepalives_idle(Duration::from_secs(10));
    if let Some(password) = password(&config) {
        config.password(password);
    }
    config
        .connect(postgres::NoTls)
        .map_err(|e| anyhow::anyhow!("{}", describe(&e)))
        .with_context(|| format!("connecting to the store {url}"))
}

/// A driver error in words: the server's own message when it sent one.
pub(crate) fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => match std::error::Error::source(e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        },
    }
}

/// The password for this connection, where libpq looks: `PGPASSWORD`, then the password
/// file (`PGPASSFILE`, else `~/.pgpass`), whose first line matching host, port, database
/// and role wins.
fn password(config: &postgres::Config) -> Option<Vec<u8>> {
    if let Some(pw) = std::env::var_os("PGPASSWORD").filter(|p| !p.is_empty()) {
        return Some(pw.into_encoded_bytes());
    }
    let file = std::env::var_os("PGPASSFILE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pgpass")))?;
    let text = std::fs::read_to_string(file).ok()?;
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
    let user = config.get_user().unwrap_or_default();
    let db = config.get_dbname().unwrap_or(user);
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| pgpass_match(line, [&host, &port, db, user]))
        .map(String::into_bytes)
}

/// A `.pgpass` line's password when its four fields match (`*` matches anything; `\:`
/// and `\\` are a colon and a backslash).
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
        .all(|(have, want)| have == "*" || have == want);
    matches.then(|| fields.pop().unwrap_or_default())
}

/// Brings the database to `version` (owl's schema version): made whole in one transaction
/// when it is empty, refused when a newer owl wrote it. An advisory lock held for the
/// transaction alone (released when it ends, even when the client dies) keeps two machines
/// from making it at once.
pub(super) fn migrate(client: &mut postgres::Client, version: i64) -> Result<()> {
    let mut tx = client.transaction()?;
    tx.batch_execute(
        "SELECT pg_advisory_xact_lock(7270617);
         CREATE TABLE IF NOT EXISTS owl_schema (version BIGINT NOT NULL)",
    )
    .map_err(|e| anyhow::anyhow!("{}", describe(&e)))?;
    let found: Option<i64> = tx
        .query_opt("SELECT version FROM owl_schema", &[])?
        .map(|r| r.get(0));
    match found {
        Some(v) if v > version => anyhow::bail!(
            "the store is at schema version {v}, newer than this owl's {version}: \
             upgrade owl on this machine"
        ),
        Some(_) => {}
        None => {
            tx.batch_execute(SCHEMA)
                .map_err(|e| anyhow::anyhow!("{}", describe(&e)))
                .context("making owl's tables")?;
            tx.execute(
                "INSERT INTO owl_schema (version) VALUES ($1)",
                &[&SCHEMA_BASE],
            )?;
        }
    }
    anyhow::ensure!(
        version == SCHEMA_BASE,
        "no PostgreSQL migration to schema version {version}"
    );
    tx.commit()?;
    Ok(())
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
}
