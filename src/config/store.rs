//! The `store:` key: a PostgreSQL URL, checked on its line, that never carries a password, and how it is reached (TLS).

use std::str::FromStr;

/// A `store:` URL, checked: PostgreSQL's, with no password in it.
#[derive(Debug, Clone)]
pub(crate) struct PgUrl {
    config: postgres::Config,
    /// TLS as libpq's settings say, checked against where the store is.
    tls: super::tls::Tls,
    /// The URL as owl prints it: host, port, database and role, never a password.
    shown: String,
}

impl PgUrl {
    /// Reads a `store:` value; the reason it is refused otherwise (never echoing a password).
    pub(crate) fn parse(text: &str) -> Result<PgUrl, RefusedUrl> {
        Self::checked(text).map_err(RefusedUrl)
    }

    fn checked(text: &str) -> Result<PgUrl, String> {
        // A value owl refuses is never echoed: a password can hide anywhere in what it
        // cannot read (a libpq key=value string, an `@` or `?` inside the password, a
        // parameter spelled otherwise), so the whole value is `***`.
        if !(text.starts_with("postgres://") || text.starts_with("postgresql://")) {
            return Err(format!(
                "store must be a postgres:// URL (or left out for the state dir's SQLite \
                 file), not '{HIDDEN}' (a value owl refuses is not printed: it may hold a \
                 password)"
            ));
        }
        let split = super::tls::split(text).map_err(|e| e.to_string())?;
        let config = postgres::Config::from_str(&split.rest).map_err(|e| {
            format!(
                "store: '{HIDDEN}' is not a URL owl can read ({})",
                why_unreadable(&e)
            )
        })?;
        if config.get_password().is_some() {
            return Err(format!(
                "store: '{HIDDEN}' carries a password; a password never goes in the config: \
                 give it in PGPASSWORD, a PGPASSFILE or ~/.pgpass"
            ));
        }
        let shown = show(&config);
        if config.get_user().is_none() {
            return Err(format!(
                "store: {shown} names no role: write it before the host (postgres://ROLE@HOST/DB)"
            ));
        }
        let local = config.get_hosts().iter().all(super::tls::is_local)
            && config.get_hostaddrs().iter().all(|a| a.is_loopback());
        let tls = split
            .tls(local, &super::tls::Places::of_process())
            .map_err(|e| e.to_string())?;
        Ok(PgUrl { config, tls, shown })
    }

    /// How the store is reached: TLS as its settings say.
    pub(crate) fn tls(&self) -> &super::tls::Tls {
        &self.tls
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

/// What a refused `store:` value is printed as.
const HIDDEN: &str = "***";

/// The driver's reason a URL cannot be read, without the URL or any part of it: its kind
/// alone (the driver's message can quote the value).
fn why_unreadable(e: &postgres::Error) -> &'static str {
    let said = e.to_string();
    if said.contains("port") {
        "a port that is not a number"
    } else if said.contains("unknown option") || said.contains("invalid") {
        "an option it does not know or a value it cannot take"
    } else {
        "its form"
    }
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
        // Every form a password can take, parsed or not: none is printed, in part or whole.
        for (value, secret) in [
            ("host=db user=owl password=X9secret dbname=owl", "X9secret"),
            ("postgres://owl:Abc@Def@host/owl", "Def"),
            ("postgres://owl:Abc?Def@host/owl", "Abc"),
            ("postgres://owl:Abc#Def@host/owl", "Abc"),
            ("postgres://owl:Abc/Def@host/owl", "Abc"),
            ("postgres://owl:Abc%40Def@host/owl", "Abc"),
            ("postgres://owl@host/owl?password=Zz9secret", "Zz9secret"),
            ("postgres://owl@host/owl?PASSWORD=Zz9secret", "Zz9secret"),
            ("postgres://owl@host/owl?Password=Zz9secret", "Zz9secret"),
            ("postgres://owl:Qq9secret@host/owl ", "Qq9secret"),
            ("postgresql://owl:Qq9secret@host:notaport/owl", "Qq9secret"),
        ] {
            let e = PgUrl::parse(value).unwrap_err().to_string();
            assert!(!e.contains(secret), "{value}: {e}");
            assert!(e.contains("'***'"), "{value}: {e}");
        }
        let url = PgUrl::parse("postgres://owl@db.example/night").unwrap();
        assert_eq!(url.to_string(), "postgres://owl@db.example:5432/night");
    }
}
