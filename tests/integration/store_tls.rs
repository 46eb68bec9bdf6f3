//! TLS to the store on a real server: verify-full connects and doctor says so; a wrong name, an unknown CA and an expired certificate are refused in words; `require` without a CA connects unverified; a host off this machine gets no plain connection unless `sslmode=disable` says so.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use crate::support::pg_server::{self, Database, OwnServer};
use crate::support::{stderr_of, TestEnv};

/// A config like `env`'s with its store at `url`; owl run with it.
fn owl_at(env: &TestEnv, db: &Database, url: &str) -> assert_cmd::Command {
    let file = env.dir.path().join("store.yaml");
    let text = std::fs::read_to_string(&env.config).unwrap();
    std::fs::write(&file, text.replace(&db.url(), url)).unwrap();
    let mut cmd = env.owl();
    cmd.env("OWL_CONFIG", &file);
    cmd
}

/// The URL of `db` on the shared test server with `query` (no TLS keys of the suite's).
fn url_of(db: &Database, host: &str, query: &str) -> String {
    format!(
        "postgres://owl@{host}:{}/{}?{query}",
        pg_server::port(),
        db.name
    )
}

/// `openssl` with `args`, which must succeed.
fn openssl(args: &[&str]) {
    let out = Command::new("openssl").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        stderr_of(&out)
    );
}

/// `openssl req -new` with a new P-256 key at `key`, written to `out` for `subject`, with
/// `more` arguments (`-x509`: a self-signed certificate rather than a request).
fn new_key(more: &[&str], key: &Path, out: &Path, subject: &str) {
    let (key, out) = (key.to_string_lossy(), out.to_string_lossy());
    let mut args = vec!["req", "-new"];
    args.extend_from_slice(more);
    args.extend_from_slice(&[
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        &key,
        "-out",
        &out,
        "-subj",
        subject,
    ]);
    openssl(&args);
}

/// A CA of the test's own in `dir`: its certificate and key.
fn make_ca(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let (crt, key) = (
        dir.join(format!("{name}.crt")),
        dir.join(format!("{name}.key")),
    );
    new_key(
        &["-x509", "-days", "30"],
        &key,
        &crt,
        &format!("/CN={name}"),
    );
    (crt, key)
}

/// A new EC key at `key` and a request at `csr` for a certificate naming `cn`.
fn key_and_request(key: &Path, csr: &Path, cn: &str) {
    new_key(&[], key, csr, &format!("/CN={cn}"));
}

/// The certificate `crt` for the request `csr`, signed by `ca`, valid `days` from now
/// (negative: it expired that long ago), with `more` arguments.
fn sign(csr: &Path, ca: &(PathBuf, PathBuf), crt: &Path, days: i32, more: &[&str]) {
    let (csr, ca_crt, ca_key, crt) = (
        csr.to_string_lossy(),
        ca.0.to_string_lossy(),
        ca.1.to_string_lossy(),
        crt.to_string_lossy(),
    );
    let days = days.to_string();
    let mut args = vec![
        "x509",
        "-req",
        "-in",
        &csr,
        "-CA",
        &ca_crt,
        "-CAkey",
        &ca_key,
        "-CAcreateserial",
        "-out",
        &crt,
        "-days",
        &days,
    ];
    args.extend_from_slice(more);
    openssl(&args);
}

/// A server certificate for 127.0.0.1 and localhost signed by `ca`, valid `days` from now
/// (negative: it expired that long ago), with its key beside it.
fn make_server_cert(dir: &Path, ca: &(PathBuf, PathBuf), days: i32) -> (PathBuf, PathBuf) {
    let (crt, key, csr, ext) = (
        dir.join("server.crt"),
        dir.join("server.key"),
        dir.join("server.csr"),
        dir.join("server.ext"),
    );
    key_and_request(&key, &csr, "localhost");
    std::fs::write(
        &ext,
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    sign(&csr, ca, &crt, days, &["-extfile", &ext.to_string_lossy()]);
    (crt, key)
}

/// What doctor says of the database, line by line.
fn doctor_lines(mut cmd: assert_cmd::Command) -> String {
    let out = cmd.args(["doctor", "--json"]).output().unwrap();
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr_of(&out)));
    json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| format!("{} {}\n", f["ok"], f["text"].as_str().unwrap()))
        .filter(|line| line.contains("database"))
        .collect()
}

#[test]
fn verify_full_connects_and_doctor_says_the_store_is_reached_verified() {
    let db = Arc::new(Database::new());
    let env = TestEnv::machine(&db, "alpha", &["work"], "");
    let ca = pg_server::ca();
    let url = url_of(
        &db,
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={}", ca.display()),
    );
    let out = owl_at(&env, &db, &url).arg("status").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let said = doctor_lines(owl_at(&env, &db, &url));
    assert!(
        said.contains(&format!(
            "true database: reached over TLS 1.3, verified: signed by a CA in {} and naming \
             the host (sslmode=verify-full)",
            ca.display()
        )),
        "{said}"
    );
    // The same from the environment, as libpq reads it.
    let bare = url_of(&db, "localhost", "");
    let mut cmd = owl_at(&env, &db, bare.trim_end_matches('?'));
    cmd.env("PGSSLMODE", "verify-full")
        .env("PGSSLROOTCERT", &ca);
    let said = doctor_lines(cmd);
    assert!(
        said.contains("verified: signed by a CA in") && said.contains("PGSSLMODE=verify-full"),
        "{said}"
    );
}

#[test]
fn a_certificate_that_does_not_verify_is_refused_naming_the_server_and_why() {
    let db = Arc::new(Database::new());
    let env = TestEnv::machine(&db, "alpha", &["work"], "");
    let ca = pg_server::ca();
    let refused = |url: &str| {
        let out = owl_at(&env, &db, url).arg("status").output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{url}: {}", stderr_of(&out));
        stderr_of(&out)
    };
    // A name the certificate does not carry (reached at 127.0.0.1 by hostaddr).
    let said = refused(&format!(
        "postgres://owl@owl-wrong.example:{}/{}?hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert={}",
        pg_server::port(),
        db.name,
        ca.display()
    ));
    assert!(
        said.contains(&format!(
            "connecting to the store postgres://owl@owl-wrong.example:{}/{}: its certificate is \
             refused (sslmode=verify-full): it does not name owl-wrong.example (it names \
             localhost, 127.0.0.1)",
            pg_server::port(),
            db.name
        )) && said.contains("nothing was sent to it, no password"),
        "{said}"
    );
    // verify-ca checks the CA but not the name: the same host connects.
    let out = owl_at(
        &env,
        &db,
        &format!(
            "postgres://owl@owl-wrong.example:{}/{}?hostaddr=127.0.0.1&sslmode=verify-ca&sslrootcert={}",
            pg_server::port(),
            db.name,
            ca.display()
        ),
    )
    .arg("status")
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    // A CA that did not sign it.
    let other = make_ca(env.dir.path(), "another-ca");
    let said = refused(&url_of(
        &db,
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={}", other.0.display()),
    ));
    assert!(
        said.contains(&format!(
            "its certificate is refused (sslmode=verify-full): it is not signed by a CA in {}",
            other.0.display()
        )),
        "{said}"
    );
    // A CA file that is not there: named, with the setting.
    let said = refused(&url_of(
        &db,
        "127.0.0.1",
        "sslmode=verify-full&sslrootcert=/no/such/ca.crt",
    ));
    assert!(
        said.contains("sslrootcert /no/such/ca.crt: it does not exist"),
        "{said}"
    );
}

#[test]
fn an_expired_server_certificate_is_refused() {
    let server = OwnServer::start();
    let tls = server.dir().join("tls");
    let ca = (tls.join("ca.crt"), tls.join("ca.key"));
    let made = tempfile::tempdir().unwrap();
    let (crt, _) = make_server_cert(made.path(), &ca, -1);
    // The server reads its certificate as it starts: it is given the expired one.
    server.ctl("stop");
    std::fs::copy(&crt, tls.join("server.crt")).unwrap();
    std::fs::copy(made.path().join("server.key"), tls.join("server.key")).unwrap();
    chown_to_server(&tls.join("server.key"));
    server.ctl("start");
    let db = Arc::new(Database::new());
    let env = TestEnv::machine(&db, "alpha", &["work"], "");
    let url = format!(
        "postgres://owl@127.0.0.1:{}/owl?sslmode=verify-full&sslrootcert={}",
        server.port,
        ca.0.display()
    );
    let out = owl_at(&env, &db, &url).arg("status").output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let said = stderr_of(&out);
    assert!(
        said.contains("its certificate is refused (sslmode=verify-full): it has expired"),
        "{said}"
    );
}

/// The server runs as `postgres` when the tests run as root: its key must be its own.
fn chown_to_server(path: &Path) {
    let out = Command::new("id").arg("-u").output().unwrap();
    if out.stdout.starts_with(b"0\n") {
        let status = Command::new("chown")
            .arg("postgres")
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success());
    }
}

#[test]
fn require_without_a_ca_connects_and_doctor_says_it_is_not_verified() {
    let db = Arc::new(Database::new());
    let env = TestEnv::machine(&db, "alpha", &["work"], "");
    let said = doctor_lines(owl_at(
        &env,
        &db,
        &url_of(&db, "localhost", "sslmode=require"),
    ));
    assert!(
        said.contains(
            "null database: reached over TLS 1.3, not verified: any certificate is taken \
             (sslmode=require); sslmode=verify-full with sslrootcert is what owl recommends"
        ),
        "{said}"
    );
    // Plain, said so.
    let said = doctor_lines(owl_at(
        &env,
        &db,
        &url_of(&db, "127.0.0.1", "sslmode=disable"),
    ));
    assert!(
        said.contains("null database: reached over plain TCP, not encrypted (sslmode=disable)"),
        "{said}"
    );
}

/// This machine's address on its network (not loopback): where a route out leaves from.
fn own_address() -> std::net::IpAddr {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    socket
        .connect("192.0.2.1:9")
        .or_else(|_| socket.connect("10.255.255.1:9"))
        .expect("this machine has no route off loopback: the test needs one address that is not");
    let ip = socket.local_addr().unwrap().ip();
    assert!(!ip.is_loopback() && !ip.is_unspecified(), "{ip}");
    ip
}

#[test]
fn a_host_off_this_machine_gets_no_plain_connection_unless_disable_is_said() {
    // A server on this machine's network address, without TLS.
    let server = OwnServer::start();
    let ip = own_address();
    let mut admin = server.admin();
    for setting in [
        "ssl = off".to_string(),
        format!("listen_addresses = '127.0.0.1,{ip}'"),
    ] {
        admin
            .batch_execute(&format!("ALTER SYSTEM SET {setting}"))
            .unwrap();
    }
    std::fs::OpenOptions::new()
        .append(true)
        .open(server.dir().join("data/pg_hba.conf"))
        .and_then(|mut f| {
            use std::io::Write;
            writeln!(f, "host all all {ip}/32 scram-sha-256")
        })
        .unwrap();
    server.ctl("stop");
    server.ctl("start");
    let db = Arc::new(Database::new());
    let env = TestEnv::machine(&db, "alpha", &["work"], "");
    let at = |query: &str| format!("postgres://owl@{ip}:{}/owl{query}", server.port);
    let run = |url: &str| owl_at(&env, &db, url).arg("status").output().unwrap();
    // Nothing said: owl asks for TLS, the server has none, and owl says what allows plain.
    let out = run(&at(""));
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let said = stderr_of(&out);
    assert!(
        said.contains(&format!(
            "the store postgres://owl@{ip}:{}/owl does not offer TLS (sslmode=require, \
             owl's default for this host)",
            server.port
        )) && said.contains("write sslmode=disable in the store's URL"),
        "{said}"
    );
    // libpq's modes that may fall back to plain are refused before anything is sent.
    for mode in ["prefer", "allow"] {
        let out = run(&at(&format!("?sslmode={mode}")));
        assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
        assert!(
            stderr_of(&out).contains(&format!(
                "sslmode={mode} may connect without TLS, and the host is not this machine"
            )),
            "{}",
            stderr_of(&out)
        );
    }
    // Said explicitly, a plain connection is made.
    let out = run(&at("?sslmode=disable"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

/// A client certificate for the role `owl`, signed by `ca`, with its key (mode 600).
fn make_client_cert(dir: &Path, ca: &(PathBuf, PathBuf)) -> (PathBuf, PathBuf) {
    let (crt, key, csr) = (
        dir.join("owl.crt"),
        dir.join("owl.key"),
        dir.join("owl.csr"),
    );
    key_and_request(&key, &csr, "owl");
    // No extensions: a version 1 certificate, as PostgreSQL's documentation makes one.
    sign(&csr, ca, &crt, 30, &[]);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    (crt, key)
}

#[test]
fn a_client_certificate_logs_in_without_a_password_and_a_key_others_can_read_is_refused() {
    // A server that takes the role owl by its certificate alone, over TLS.
    let server = OwnServer::start();
    let tls = server.dir().join("tls");
    let ca = (tls.join("ca.crt"), tls.join("ca.key"));
    let mut admin = server.admin();
    admin
        .batch_execute(&format!(
            "ALTER SYSTEM SET ssl_ca_file = '{}'",
            ca.0.display()
        ))
        .unwrap();
    let hba = server.dir().join("data/pg_hba.conf");
    let rules = std::fs::read_to_string(&hba).unwrap();
    std::fs::write(&hba, format!("hostssl all owl 127.0.0.1/32 cert\n{rules}")).unwrap();
    server.ctl("stop");
    server.ctl("start");
    let made = tempfile::tempdir().unwrap();
    let (crt, key) = make_client_cert(made.path(), &ca);
    let db = Arc::new(Database::new());
    let env = TestEnv::machine(&db, "alpha", &["work"], "");
    let url = format!(
        "postgres://owl@127.0.0.1:{}/owl?sslmode=verify-full&sslrootcert={}&sslcert={}&sslkey={}",
        server.port,
        ca.0.display(),
        crt.display(),
        key.display()
    );
    let status = || {
        let mut cmd = owl_at(&env, &db, &url);
        cmd.env_remove("PGPASSWORD")
            .env("PGPASSFILE", made.path().join("no-such-pgpass"));
        cmd.arg("status").output().unwrap()
    };
    let out = status();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    // A key others can read is refused before it is used, as libpq refuses it.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = status();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains(&format!(
            "the client certificate's key {} (sslkey) can be read by others (mode 644): chmod 600 it",
            key.display()
        )),
        "{}",
        stderr_of(&out)
    );
    // Without the certificate, the server refuses the role (and no password is asked for).
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = owl_at(&env, &db, url.split("&sslcert").next().unwrap())
        .env_remove("PGPASSWORD")
        .arg("status")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
}

#[test]
fn store_copy_over_verify_full_says_the_store_line_with_its_tls_settings() {
    let mut env = TestEnv::new();
    env.store = None;
    env.machine = Some("laptop".into());
    env.write_config(&env.accounts_block(&["work"]));
    env.add("Before the move");
    let db = Database::new();
    let url = url_of(
        &db,
        "localhost",
        &format!(
            "sslmode=verify-full&sslrootcert={}",
            pg_server::ca().display()
        ),
    );
    let out = env
        .owl()
        .args(["store", "copy", "--to", &url])
        .env("PGPASSWORD", pg_server::PASSWORD)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    // The line to copy into the config keeps the settings it was reached with.
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!("next: set `store: {url}`")),
        "{said}"
    );
}
