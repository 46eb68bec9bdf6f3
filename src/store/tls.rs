//! TLS to the store (rustls): the server's certificate checked as libpq's `sslmode` says, what the handshake showed (for `doctor`), and a refused certificate in words.
//!
//! rustls, not OpenSSL: owl stays one binary with no system TLS library to match, and the
//! checks are owl's own code over rustls's verifier (libpq's `verify-ca`, which checks the
//! CA but not the name, has no switch in either library). The driver's connector
//! (`tokio-postgres-rustls`) keeps owl's code synchronous, and binds SCRAM to the channel
//! (`SCRAM-SHA-256-PLUS`) when the server offers it.

use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};

use crate::config::tls::{Check, Roots, SslMode, Tls};

/// What one connection's handshake showed: its TLS version, and the certificate's refusal
/// when it was refused.
#[derive(Debug, Default)]
struct Handshake {
    version: Option<&'static str>,
    refused: Option<rustls::Error>,
}

/// The handshake of the connection being made, written by its verifier.
#[derive(Debug, Clone, Default)]
pub(super) struct Seen(Arc<Mutex<Handshake>>);

impl Seen {
    fn with<T>(&self, f: impl FnOnce(&mut Handshake) -> T) -> T {
        // A verifier that panicked holding it left a handshake that failed anyway.
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The certificate's refusal, when the handshake refused it.
    pub(super) fn refused(&self) -> Option<rustls::Error> {
        self.with(|h| h.refused.clone())
    }
}

/// How a connection reached the store, as `doctor` says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Over a Unix socket: this machine.
    Socket,
    /// Plain TCP (`sslmode=disable`, or `prefer` to a server on loopback that offers no TLS).
    Plain { mode: String },
    /// TLS, and what of the certificate was checked.
    Tls {
        version: &'static str,
        check: Check,
        mode: String,
        roots: Option<String>,
    },
}

impl Reach {
    /// What a connection showed: TLS when its verifier saw a handshake.
    pub(super) fn of(tls: &Tls, seen: &Seen, socket: bool) -> Reach {
        match seen.with(|h| h.version) {
            _ if socket => Reach::Socket,
            Some(version) => Reach::Tls {
                version,
                check: tls.check(),
                mode: tls.mode_words(),
                roots: tls.roots.as_ref().map(roots_words),
            },
            None => Reach::Plain {
                mode: tls.mode_words(),
            },
        }
    }

    /// Whether the server proved who it is: TLS with its certificate checked.
    pub(crate) fn verified(&self) -> bool {
        matches!(
            self,
            Reach::Tls {
                check: Check::Ca | Check::Full,
                ..
            }
        )
    }
}

impl std::fmt::Display for Reach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reach::Socket => f.write_str("over a Unix socket"),
            Reach::Plain { mode } => write!(f, "over plain TCP, not encrypted ({mode})"),
            Reach::Tls {
                version,
                check,
                mode,
                roots,
            } => {
                let roots = roots.as_deref().unwrap_or("no CA");
                match check {
                    Check::Full => write!(
                        f,
                        "over {version}, verified: signed by {roots} and naming the host ({mode})"
                    ),
                    Check::Ca => write!(
                        f,
                        "over {version}, signed by {roots}; its name is not checked ({mode})"
                    ),
                    Check::Nothing => write!(
                        f,
                        "over {version}, not verified: any certificate is taken ({mode}); \
                         sslmode=verify-full with sslrootcert is what owl recommends"
                    ),
                }
            }
        }
    }
}

fn roots_words(roots: &Roots) -> String {
    match roots {
        Roots::File(path) => format!("a CA in {}", path.display()),
        Roots::System => "a CA the system trusts".into(),
    }
}

/// The driver's TLS mode for owl's: `allow` starts plain (see `postgres::connect`), the
/// verifying modes are the driver's `require` with owl's verifier.
pub(super) fn driver_mode(mode: SslMode) -> postgres::config::SslMode {
    match mode {
        SslMode::Disable | SslMode::Allow => postgres::config::SslMode::Disable,
        SslMode::Prefer => postgres::config::SslMode::Prefer,
        SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
            postgres::config::SslMode::Require
        }
    }
}

/// The connector for one connection: the CAs and the client certificate read from their
/// files now (an error names the file and the setting), its verifier writing to `seen`.
pub(super) fn connector(
    tls: &Tls,
    seen: &Seen,
) -> Result<tokio_postgres_rustls::MakeRustlsConnect> {
    // ring: it builds with the C compiler owl needs anyway (SQLite), where aws-lc-rs adds a
    // long build. Its lack of post-quantum key exchange costs nothing here: PostgreSQL's
    // OpenSSL (3.0 on Debian 12) offers none.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let webpki = match &tls.roots {
        Some(roots) if tls.check() != Check::Nothing => {
            let store = Arc::new(root_store(roots)?);
            Some(
                WebPkiServerVerifier::builder_with_provider(store, provider.clone())
                    .build()
                    .context("the CAs owl checks the store's certificate against")?,
            )
        }
        _ => None,
    };
    let verifier = Arc::new(Verifier {
        check: tls.check(),
        webpki,
        provider: provider.clone(),
        seen: seen.clone(),
    });
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS 1.2 and 1.3 with ring")?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let config = match &tls.client {
        Some((cert, key)) if tls.mode != SslMode::Disable => {
            let (certs, key) = client_identity(cert, key)?;
            let signer = provider_key(&key).with_context(|| {
                format!(
                    "the client certificate's key (sslkey) for {}",
                    cert.display()
                )
            })?;
            let identity = Arc::new(rustls::sign::CertifiedKey::new(certs, signer));
            builder.with_client_cert_resolver(Arc::new(ClientIdentity(identity)))
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// The client certificate's key as ring signs with it.
fn provider_key(key: &PrivateKeyDer<'static>) -> Result<Arc<dyn rustls::sign::SigningKey>> {
    Ok(rustls::crypto::ring::sign::any_supported_type(key)?)
}

/// The client certificate, offered whatever the server asks: given as it is, so a version 1
/// certificate (what `openssl x509 -req` makes without extensions, as PostgreSQL's own
/// documentation has it made) is sent as libpq sends it; rustls's own
/// `with_client_auth_cert` parses it and refuses it.
#[derive(Debug)]
struct ClientIdentity(Arc<rustls::sign::CertifiedKey>);

impl rustls::client::ResolvesClientCert for ClientIdentity {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

fn root_store(roots: &Roots) -> Result<rustls::RootCertStore> {
    let mut store = rustls::RootCertStore::empty();
    match roots {
        Roots::File(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|each| each.collect::<Result<Vec<_>, _>>())
                .map_err(|e| pem_error(e, path, "sslrootcert"))?;
            anyhow::ensure!(
                !certs.is_empty(),
                "sslrootcert {} holds no certificate (PEM, -----BEGIN CERTIFICATE-----)",
                path.display()
            );
            for cert in certs {
                store
                    .add(cert)
                    .with_context(|| format!("a CA in sslrootcert {}", path.display()))?;
            }
        }
        Roots::System => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            anyhow::ensure!(
                added > 0,
                "sslrootcert=system: the system's CAs were not found (Debian: the \
                 ca-certificates package)"
            );
        }
    }
    Ok(store)
}

/// The client certificate and its key, the key refused when others can read it (as libpq
/// refuses it).
fn client_identity(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|each| each.collect::<Result<Vec<_>, _>>())
        .map_err(|e| pem_error(e, cert, "sslcert"))?;
    anyhow::ensure!(
        !certs.is_empty(),
        "sslcert {} holds no certificate",
        cert.display()
    );
    let meta = std::fs::metadata(key)
        .with_context(|| format!("the client certificate's key {} (sslkey)", key.display()))?;
    use std::os::unix::fs::MetadataExt;
    anyhow::ensure!(
        meta.mode() & 0o077 == 0,
        "the client certificate's key {} (sslkey) can be read by others (mode {:o}): \
         chmod 600 it",
        key.display(),
        meta.mode() & 0o777
    );
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| pem_error(e, key, "sslkey"))?;
    Ok((certs, key))
}

fn pem_error(e: rustls::pki_types::pem::Error, path: &std::path::Path, key: &str) -> anyhow::Error {
    match e {
        rustls::pki_types::pem::Error::Io(io) => {
            anyhow::anyhow!("{key} {}: {}", path.display(), crate::text::io_words(&io))
        }
        other => anyhow::anyhow!("{key} {}: not PEM owl can read ({other})", path.display()),
    }
}

/// Why a refused certificate was refused, in words.
pub(super) fn refusal_words(e: &rustls::Error, tls: &Tls, host: &str) -> String {
    let roots = tls.roots.as_ref().map(roots_words).unwrap_or_default();
    let rustls::Error::InvalidCertificate(why) = e else {
        return e.to_string();
    };
    match why {
        CertificateError::UnknownIssuer => format!("it is not signed by {roots}"),
        CertificateError::ExpiredContext { not_after, .. } => {
            format!("it has expired (on {})", day_of(*not_after))
        }
        CertificateError::Expired => "it has expired".into(),
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "it is not valid yet".into()
        }
        CertificateError::NotValidForName => format!("it does not name {host}"),
        CertificateError::NotValidForNameContext { presented, .. } => {
            let names: Vec<&str> = presented.iter().map(|n| bare_name(n)).collect();
            format!("it does not name {host} (it names {})", names.join(", "))
        }
        other => format!("{other:?}"),
    }
}

/// A name as rustls presents it (`DnsName("db.example")`, `IpAddress(10.0.0.1)`), bare.
fn bare_name(presented: &str) -> &str {
    let inner = presented
        .split_once('(')
        .and_then(|(_, rest)| rest.strip_suffix(')'))
        .unwrap_or(presented);
    inner.trim_matches('"')
}

/// A certificate's time as the day and time it names, in UTC.
fn day_of(t: UnixTime) -> String {
    let secs = i64::try_from(t.as_secs()).unwrap_or(i64::MAX);
    chrono::DateTime::from_timestamp(secs, 0)
        .map(|d| d.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|| format!("{secs} s after 1970"))
}

/// libpq's checks of the server's certificate over rustls's: the chain to a CA (and the
/// host's name, for `verify-full`), or nothing for `require` without a CA. It writes what
/// it saw to [`Seen`].
#[derive(Debug)]
struct Verifier {
    check: Check,
    webpki: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
    seen: Seen,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(webpki) = &self.webpki else {
            return Ok(ServerCertVerified::assertion());
        };
        let verdict =
            webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now);
        let verdict = match verdict {
            // webpki checks the chain before the name: a name refused is a chain that holds.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if self.check == Check::Ca => Ok(ServerCertVerified::assertion()),
            other => other,
        };
        if let Err(e) = &verdict {
            self.seen.with(|h| h.refused = Some(e.clone()));
        }
        verdict
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.seen.with(|h| h.version = Some("TLS 1.2"));
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.seen.with(|h| h.version = Some("TLS 1.3"));
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_times_of_a_refused_certificate_are_said_bare() {
        assert_eq!(bare_name("DnsName(\"db.example\")"), "db.example");
        assert_eq!(bare_name("IpAddress(10.0.0.1)"), "10.0.0.1");
        assert_eq!(bare_name("plain"), "plain");
        assert_eq!(
            day_of(UnixTime::since_unix_epoch(std::time::Duration::from_secs(
                1_796_000_000
            ))),
            "2026-11-30 00:53 UTC"
        );
    }
}
