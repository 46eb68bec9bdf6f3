//! The `store:` key: a PostgreSQL URL, checked on its line, that never carries a password.

use std::str::FromStr;

/// A `store:` URL, checked: PostgreSQL's, with no password in it.
#[derive(Debug, Clone)]
pub(crate) struct PgUrl {
    config: postgres::Config,
    /// The URL as owl prints it: host, port, database and role, never a password.
    shown: String,
}

impl PgUrl {
    /// Reads a `store:` value; the reason it is refused otherwise (never echoing a password).
    pub(crate) fn parse(text: &str) -> Result<PgUrl, RefusedUrl> {
        Self::checked(text).map_err(RefusedUrl)
    }

    fn checked(text: &str) -> Result<PgUrl, String> {
        if !(text.starts_with("postgres://") || text.starts_with("postgresql://")) {
            return Err(format!(
                "store must be a postgres:// URL (or left out for the state dir's SQLite \
                 file), not '{}'",
                redacted(text)
            ));
        }
        let config = postgres::Config::from_str(text)
            .map_err(|e| format!("store: {}: {e}", redacted(text)))?;
        if config.get_password().is_some() {
            return Err(format!(
                "store: {} carries a password; a password never goes in the config: \
                 give it in PGPASSWORD, a PGPASSFILE or ~/.pgpass",
                redacted(text)
            ));
        }
        if config.get_user().is_none() {
            return Err(format!(
                "store: {text} names no role: write it before the host (postgres://ROLE@HOST/DB)"
            ));
        }
        let shown = show(&config);
        Ok(PgUrl { config, shown })
    }

    /// The driver's own form, to connect with.
    pub(crate) fn config(&self) -> &postgres::Config {
        &self.config
    }
}

/// Why a `store:` value is refused, in words that never hold its password.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct RefusedUrl(String);

impl serde::Serialize for PgUrl {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.shown)
    }
}

impl std::fmt::Display for PgUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

/// A URL as printed: a password in it (after the role, or as a `password=` parameter) is
/// written `***`, so a refused URL is told without it.
fn redacted(text: &str) -> String {
    let (text, query) = match text.split_once('?') {
        Some((url, query)) => (url, Some(query)),
        None => (text, None),
    };
    let mut out = match text.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('@') {
            Some((userinfo, host)) if userinfo.contains(':') => {
                let user = userinfo.split(':').next().unwrap_or_default();
                format!("{scheme}://{user}:***@{host}")
            }
            _ => text.to_string(),
        },
        None => text.to_string(),
    };
    if let Some(query) = query {
        let params: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((key, _)) if key == "password" => format!("{key}=***"),
                _ => p.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&params.join("&"));
    }
    out
}

fn show(config: &postgres::Config) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            postgres::config::Host::Tcp(name) => name.clone(),
            postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or_default();
    let db = config.get_dbname().unwrap_or(user);
    format!("postgres://{user}@{host}:{port}/{db}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_with_a_password_is_refused_without_printing_it() {
        let e = PgUrl::parse("postgres://owl:hunter2@db.example/owl")
            .unwrap_err()
            .to_string();
        assert!(e.contains("carries a password"), "{e}");
        assert!(!e.contains("hunter2"), "{e}");
        let e = PgUrl::parse("postgres://owl@db.example/owl?password=hunter2")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("carries a password") && !e.contains("hunter2"),
            "{e}"
        );
        let e = PgUrl::parse("mysql://owl:hunter2@db.example/owl")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("hunter2"), "{e}");
        let url = PgUrl::parse("postgres://owl@db.example/night").unwrap();
        assert_eq!(url.to_string(), "postgres://owl@db.example:5432/night");
    }
}
