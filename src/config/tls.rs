//! How the store is reached: libpq's TLS settings (`sslmode`, `sslrootcert`, `sslcert`, `sslkey`) read from the `store:` URL and the environment, and owl's stricter default to any host but loopback.

use std::path::{Path, PathBuf};

/// libpq's `sslmode`: whether TLS is used, and what of the server's certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    /// Plain TCP only.
    Disable,
    /// Plain first, TLS when the server insists.
    Allow,
    /// TLS when the server offers it, plain otherwise.
    Prefer,
    /// TLS, its certificate checked only when a CA is at hand (as libpq does).
    Require,
    /// TLS, its certificate signed by the CA in `sslrootcert`.
    VerifyCa,
    /// TLS, its certificate signed by the CA and naming the host connected to.
    VerifyFull,
}

impl SslMode {
    const NAMES: [(&'static str, SslMode); 6] = [
        ("disable", SslMode::Disable),
        ("allow", SslMode::Allow),
        ("prefer", SslMode::Prefer),
        ("require", SslMode::Require),
        ("verify-ca", SslMode::VerifyCa),
        ("verify-full", SslMode::VerifyFull),
    ];

    fn parse(text: &str) -> Option<SslMode> {
        Self::NAMES
            .iter()
            .find(|(name, _)| *name == text)
            .map(|(_, mode)| *mode)
    }

    /// The name libpq gives it.
    pub(crate) fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, mode)| *mode == self)
            .map(|(name, _)| *name)
            .unwrap_or("prefer")
    }

    /// Whether a connection in this mode can cross the network without TLS.
    fn may_be_plain(self) -> bool {
        matches!(self, SslMode::Disable | SslMode::Allow | SslMode::Prefer)
    }
}

/// Why owl will not reach the store as its TLS settings say, in words.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Refused(String);

/// Where a setting was said: it is named so in what owl prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Said {
    Url,
    Env(&'static str),
    /// Not said: owl's default (libpq's `prefer` on loopback, `require` elsewhere).
    Default,
}

/// The CAs a server's certificate must be signed by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Roots {
    /// The PEM file at this path (`sslrootcert`, `PGSSLROOTCERT` or `~/.postgresql/root.crt`).
    File(PathBuf),
    /// The system's trusted CAs (`sslrootcert=system`).
    System,
}

/// What is checked of the server's certificate once TLS is up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// Nothing: the channel is encrypted, but anyone on the path can present a certificate.
    Nothing,
    /// Signed by one of the CAs.
    Ca,
    /// Signed by one of the CAs, and naming the host.
    Full,
}

/// How owl reaches the store: the TLS settings as libpq reads them, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tls {
    pub(crate) mode: SslMode,
    pub(crate) said: Said,
    pub(crate) roots: Option<Roots>,
    /// A client certificate and its key (`sslcert`/`sslkey`).
    pub(crate) client: Option<(PathBuf, PathBuf)>,
}

impl Tls {
    /// What is checked of the certificate: `require` checks the CA when one is at hand, as
    /// libpq's does.
    pub(crate) fn check(&self) -> Check {
        match (self.mode, &self.roots) {
            (SslMode::VerifyFull, _) => Check::Full,
            (SslMode::VerifyCa, _) | (SslMode::Require, Some(_)) => Check::Ca,
            _ => Check::Nothing,
        }
    }

    /// `sslmode=…` and where it was said, for a message.
    pub(crate) fn mode_words(&self) -> String {
        let mode = self.mode.name();
        match self.said {
            Said::Url => format!("sslmode={mode}"),
            Said::Env(var) => format!("{var}={mode}"),
            Said::Default => format!("sslmode={mode}, owl's default for this host"),
        }
    }
}

/// The TLS keys owl takes from the URL's query (the driver knows none but `sslmode`'s
/// first three values), and the environment variable libpq reads for each.
const KEYS: [(&str, &str); 4] = [
    ("sslmode", "PGSSLMODE"),
    ("sslrootcert", "PGSSLROOTCERT"),
    ("sslcert", "PGSSLCERT"),
    ("sslkey", "PGSSLKEY"),
];

/// A URL with its TLS keys taken out of its query, and their values (percent-decoded).
pub(super) struct Split {
    pub(super) rest: String,
    values: Vec<(&'static str, String)>,
}

/// Takes the TLS keys out of a URL's query; the rest of the URL is left as it was written,
/// so the driver reads (or refuses) it as before.
pub(super) fn split(url: &str) -> Result<Split, Refused> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok(Split {
            rest: url.to_string(),
            values: Vec::new(),
        });
    };
    let mut kept = Vec::new();
    let mut values = Vec::new();
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match KEYS.iter().find(|(k, _)| *k == key) {
            Some((k, _)) => {
                let value = percent_decode(value).ok_or_else(|| {
                    Refused(format!(
                        "store: the value of {k} is not valid percent-encoded UTF-8"
                    ))
                })?;
                values.push((*k, value));
            }
            None => kept.push(pair),
        }
    }
    let rest = match kept.is_empty() {
        true => base.to_string(),
        false => format!("{base}?{}", kept.join("&")),
    };
    Ok(Split { rest, values })
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = text.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Where libpq looks for what is not said: the environment, then `~/.postgresql/`.
pub(super) struct Places<'a> {
    pub(super) env: &'a dyn Fn(&str) -> Option<String>,
    pub(super) home: Option<PathBuf>,
}

impl Places<'_> {
    /// The places of this process.
    pub(super) fn of_process() -> Places<'static> {
        Places {
            env: &|var| std::env::var(var).ok().filter(|v| !v.is_empty()),
            home: std::env::var_os("HOME").map(PathBuf::from),
        }
    }

    fn default_file(&self, name: &str) -> Option<PathBuf> {
        let path = self.home.as_ref()?.join(".postgresql").join(name);
        path.exists().then_some(path)
    }
}

impl Split {
    /// A key's value from the URL, else its environment variable; and where it was said.
    fn said(&self, key: &str, places: &Places<'_>) -> Option<(String, Said)> {
        if let Some((_, v)) = self.values.iter().rev().find(|(k, _)| *k == key) {
            return Some((v.clone(), Said::Url));
        }
        let (_, var) = KEYS.iter().find(|(k, _)| *k == key)?;
        (places.env)(var).map(|v| (v, Said::Env(var)))
    }

    /// The TLS settings, checked; `local` when every host is loopback or a Unix socket.
    pub(super) fn tls(&self, local: bool, places: &Places<'_>) -> Result<Tls, Refused> {
        let (mode, said) = match self.said("sslmode", places) {
            Some((text, said)) => {
                let mode = SslMode::parse(&text).ok_or_else(|| {
                    let names: Vec<_> = SslMode::NAMES.iter().map(|(n, _)| *n).collect();
                    Refused(format!(
                        "store: sslmode '{text}' ({}) is not one of {}",
                        where_said(said),
                        names.join(", ")
                    ))
                })?;
                (mode, said)
            }
            None if local => (SslMode::Prefer, Said::Default),
            None => (SslMode::Require, Said::Default),
        };
        let roots = match self.said("sslrootcert", places) {
            Some((text, _)) if text == "system" => Some(Roots::System),
            Some((text, _)) => Some(Roots::File(PathBuf::from(text))),
            None => places.default_file("root.crt").map(Roots::File),
        };
        let tls = Tls {
            mode,
            said,
            roots,
            client: self.client(places),
        };
        refused(&tls, local).map_err(Refused)?;
        Ok(tls)
    }

    fn client(&self, places: &Places<'_>) -> Option<(PathBuf, PathBuf)> {
        let cert = match self.said("sslcert", places) {
            Some((text, _)) => PathBuf::from(text),
            None => places.default_file("postgresql.crt")?,
        };
        let key = match self.said("sslkey", places) {
            Some((text, _)) => PathBuf::from(text),
            None => places
                .home
                .as_ref()
                .map(|h| h.join(".postgresql/postgresql.key"))
                .unwrap_or_else(|| Path::new("postgresql.key").to_path_buf()),
        };
        Some((cert, key))
    }
}

fn where_said(said: Said) -> String {
    match said {
        Said::Url => "in the URL".into(),
        Said::Env(var) => format!("from {var}"),
        Said::Default => "owl's default".into(),
    }
}

/// Why owl will not connect so: a mode that may send the password in the clear to a host
/// that is not this machine, a check without the CA it checks against, or the system's
/// CAs with less than the host's name checked (which they vouch for).
fn refused(tls: &Tls, local: bool) -> Result<(), String> {
    let mode = tls.mode_words();
    if !local && tls.mode.may_be_plain() && tls.mode != SslMode::Disable {
        return Err(format!(
            "store: {mode} may connect without TLS, and the host is not this machine: the \
             store's password and every prompt would cross the network in the clear. Write \
             sslmode=verify-full with sslrootcert=CA-FILE in the store's URL (recommended), \
             or sslmode=require; or sslmode=disable to say a plain connection is meant"
        ));
    }
    let verifies = matches!(tls.mode, SslMode::VerifyCa | SslMode::VerifyFull);
    if verifies && tls.roots.is_none() {
        return Err(format!(
            "store: {mode} checks the server's certificate against a CA, and none is given: \
             write sslrootcert=CA-FILE in the store's URL (or PGSSLROOTCERT, or put it at \
             ~/.postgresql/root.crt), or sslrootcert=system for the system's CAs"
        ));
    }
    if tls.roots == Some(Roots::System) && tls.mode != SslMode::VerifyFull {
        return Err(format!(
            "store: sslrootcert=system takes any certificate a public CA signed, so it is used \
             with sslmode=verify-full only (as libpq does), not {mode}"
        ));
    }
    Ok(())
}

/// Whether a host is this machine: loopback by name or address, or a Unix socket. A name
/// is not looked up: `db.example` is another host even when it resolves to 127.0.0.1.
pub(super) fn is_local(host: &postgres::config::Host) -> bool {
    match host {
        postgres::config::Host::Unix(_) => true,
        postgres::config::Host::Tcp(name) => {
            name == "localhost"
                || name
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tls(url: &str, local: bool, env: &[(&str, &str)]) -> Result<Tls, String> {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let lookup = move |var: &str| env.iter().find(|(k, _)| k == var).map(|(_, v)| v.clone());
        let places = Places {
            env: &lookup,
            home: None,
        };
        split(url)
            .and_then(|s| s.tls(local, &places))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_tls_keys_leave_the_url_and_the_rest_is_kept_as_written() {
        let s = split("postgres://owl@db/x?sslmode=verify-full&connect_timeout=3&sslrootcert=%2Ftmp%2Fca%20b.crt").unwrap();
        assert_eq!(s.rest, "postgres://owl@db/x?connect_timeout=3");
        let t = s
            .tls(
                false,
                &Places {
                    env: &|_| None,
                    home: None,
                },
            )
            .unwrap();
        assert_eq!(t.mode, SslMode::VerifyFull);
        assert_eq!(t.roots, Some(Roots::File("/tmp/ca b.crt".into())));
        assert_eq!(t.check(), Check::Full);
        assert_eq!(
            split("postgres://owl@db/x?sslmode=require").unwrap().rest,
            "postgres://owl@db/x"
        );
    }

    #[test]
    fn a_host_that_is_not_this_machine_gets_tls_unless_disable_is_said() {
        let t = tls("postgres://owl@db/x", false, &[]).unwrap();
        assert_eq!(
            (t.mode, t.said, t.check()),
            (SslMode::Require, Said::Default, Check::Nothing)
        );
        let t = tls("postgres://owl@127.0.0.1/x", true, &[]).unwrap();
        assert_eq!(t.mode, SslMode::Prefer);
        for mode in ["prefer", "allow"] {
            let e = tls(&format!("postgres://owl@db/x?sslmode={mode}"), false, &[]).unwrap_err();
            assert!(
                e.contains(&format!("sslmode={mode} may connect without TLS")),
                "{e}"
            );
            assert!(e.contains("sslmode=disable to say"), "{e}");
            let e = tls("postgres://owl@db/x", false, &[("PGSSLMODE", mode)]).unwrap_err();
            assert!(e.contains(&format!("PGSSLMODE={mode}")), "{e}");
        }
        let t = tls("postgres://owl@db/x?sslmode=disable", false, &[]).unwrap();
        assert_eq!(t.mode, SslMode::Disable);
        // The URL wins over the environment, as in libpq.
        let t = tls(
            "postgres://owl@db/x?sslmode=require",
            false,
            &[("PGSSLMODE", "disable")],
        )
        .unwrap();
        assert_eq!((t.mode, t.said), (SslMode::Require, Said::Url));
    }

    #[test]
    fn a_check_needs_its_ca_and_the_system_cas_need_the_name_checked() {
        let e = tls("postgres://owl@db/x?sslmode=verify-ca", false, &[]).unwrap_err();
        assert!(e.contains("sslrootcert=CA-FILE"), "{e}");
        let t = tls(
            "postgres://owl@db/x?sslmode=verify-ca",
            false,
            &[("PGSSLROOTCERT", "/ca.pem")],
        )
        .unwrap();
        assert_eq!(
            (t.check(), t.roots),
            (Check::Ca, Some(Roots::File("/ca.pem".into())))
        );
        let e = tls(
            "postgres://owl@db/x?sslmode=require&sslrootcert=system",
            false,
            &[],
        )
        .unwrap_err();
        assert!(e.contains("verify-full only"), "{e}");
        let t = tls(
            "postgres://owl@db/x?sslmode=require&sslrootcert=/ca.pem",
            false,
            &[],
        )
        .unwrap();
        assert_eq!(
            t.check(),
            Check::Ca,
            "require checks the CA when one is given, as libpq"
        );
        let e = tls("postgres://owl@db/x?sslmode=verify-everything", false, &[]).unwrap_err();
        assert!(
            e.contains("sslmode 'verify-everything' (in the URL) is not one of disable, allow"),
            "{e}"
        );
    }

    #[test]
    fn loopback_and_sockets_are_this_machine_and_names_are_not_looked_up() {
        use postgres::config::Host;
        for local in ["localhost", "127.0.0.1", "127.3.2.1", "::1", "[::1]"] {
            assert!(is_local(&Host::Tcp(local.into())), "{local}");
        }
        assert!(is_local(&Host::Unix("/run/postgresql".into())));
        for remote in ["db.example", "192.0.2.2", "10.0.0.1", "localhost.example"] {
            assert!(!is_local(&Host::Tcp(remote.into())), "{remote}");
        }
    }
}
