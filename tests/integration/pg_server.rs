//! The PostgreSQL server the tests run owl against (`.ci/postgres`, started by the first test that needs it), and a database of its own per test.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The password of the role `owl` on the test server: given to owl in `PGPASSWORD`, as a
/// user's machine gives it, never in the config.
pub const PASSWORD: &str = "owl-test-password";

/// The test server's port.
pub fn port() -> u16 {
    static PORT: OnceLock<u16> = OnceLock::new();
    *PORT.get_or_init(|| {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/postgres");
        let out = std::process::Command::new(script)
            .output()
            .unwrap_or_else(|e| panic!("running {script}: {e}"));
        assert!(
            out.status.success(),
            "{script} could not start the test server: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    })
}

/// The port of a PgBouncer in `pool_mode` `mode` in front of the test server
/// (`.ci/pgbouncer`, started by the first test that asks): the suite's URLs go through it
/// when `OWL_TEST_PG_BOUNCER` names a mode, as CI runs the machines' tests.
pub fn bouncer(mode: &str) -> u16 {
    bouncer_of(mode, 40)
}

/// The port of a PgBouncer in `pool_mode` `mode` with `pool` server connections per
/// database and role.
pub fn bouncer_of(mode: &str, pool: usize) -> u16 {
    static PORTS: std::sync::Mutex<Vec<(String, u16)>> = std::sync::Mutex::new(Vec::new());
    let mut ports = PORTS.lock().unwrap_or_else(|p| p.into_inner());
    let key = format!("{mode}-{pool}");
    if let Some((_, port)) = ports.iter().find(|(m, _)| *m == key) {
        return *port;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/pgbouncer");
    let out = std::process::Command::new(script)
        .args([mode, &pool.to_string()])
        .output()
        .unwrap_or_else(|e| panic!("running {script}: {e}"));
    assert!(
        out.status.success(),
        "{script} could not start PgBouncer: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let port = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    ports.push((key, port));
    port
}

/// The port the suite's `store:` URLs name: PgBouncer's when the suite runs through it
/// (`OWL_TEST_PG_BOUNCER`), else the server's.
pub fn store_port() -> u16 {
    match std::env::var("OWL_TEST_PG_BOUNCER") {
        Ok(mode) => bouncer(&mode),
        Err(_) => port(),
    }
}

/// The CA that signed the test server's certificate (for 127.0.0.1 and localhost).
pub fn ca() -> std::path::PathBuf {
    port();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/postgres");
    let out = std::process::Command::new(script)
        .arg("dir")
        .output()
        .unwrap();
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    std::path::Path::new(&dir).join("tls/ca.crt")
}

/// What the suite's `store:` URLs add: `sslmode=verify-full` with the test CA when the
/// suite runs over TLS (`OWL_TEST_PG_TLS=verify-full`, as CI runs it), else nothing.
pub fn tls_query() -> String {
    match std::env::var("OWL_TEST_PG_TLS").as_deref() {
        Ok("verify-full") => format!("?sslmode=verify-full&sslrootcert={}", ca().display()),
        _ => String::new(),
    }
}

/// A database of its own, owned by the role `owl`; dropped with it.
pub struct Database {
    pub name: String,
}

impl Database {
    pub fn new() -> Database {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "owl_it_{}_{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut admin = admin();
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
            .unwrap();
        admin
            .batch_execute(&format!("CREATE DATABASE {name} OWNER owl"))
            .unwrap();
        Database { name }
    }

    /// The `store:` URL: the role and no password.
    pub fn url(&self) -> String {
        format!(
            "postgres://owl@127.0.0.1:{}/{}{}",
            store_port(),
            self.name,
            tls_query()
        )
    }

    /// A connection as the superuser, to look at what owl wrote or to break things.
    pub fn admin(&self) -> postgres::Client {
        connect(&self.name)
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let _ = admin().batch_execute(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ));
    }
}

/// A database for a TestEnv when the suite runs on PostgreSQL (`OWL_TEST_STORE=postgres`).
pub fn for_test_env() -> Option<Database> {
    (std::env::var("OWL_TEST_STORE").as_deref() == Ok("postgres")).then(Database::new)
}

fn admin() -> postgres::Client {
    connect("postgres")
}

fn connect(db: &str) -> postgres::Client {
    postgres::Client::connect(
        &format!("host=127.0.0.1 port={} user=postgres dbname={db}", port()),
        postgres::NoTls,
    )
    .expect("connecting to the test server")
}

/// A TCP proxy between one machine and the test server, which a test can cut: every
/// connection through it is shut at once and new ones are refused, as a machine whose
/// network went away sees it; or silence: every byte is accepted (TCP acknowledges it) and
/// held, none forwarded, as a stuck middlebox or a server that stopped answering does.
pub struct Proxy {
    pub port: u16,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    silent: std::sync::Arc<std::sync::atomic::AtomicBool>,
    streams: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl Proxy {
    pub fn start() -> Proxy {
        use std::net::{TcpListener, TcpStream};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let silent = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let streams = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (cut_seen, kept, held) = (cut.clone(), streams.clone(), silent.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if cut_seen.load(Ordering::SeqCst) {
                    continue; // dropped: the connection is closed at once
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", self::store_port())) else {
                    continue;
                };
                let mut kept = kept.lock().unwrap();
                for (from, to) in [(&client, &server), (&server, &client)] {
                    let (from, to) = (from.try_clone().unwrap(), to.try_clone().unwrap());
                    let held = held.clone();
                    std::thread::spawn(move || forward(from, to, &held));
                }
                kept.push(client);
                kept.push(server);
            }
        });
        Proxy {
            port,
            cut,
            silent,
            streams,
        }
    }

    /// Holds every byte from now on, forwarding none, and answers nothing; connections
    /// stay open and new ones are accepted.
    pub fn silence(&self) {
        self.silent.store(true, Ordering::SeqCst);
    }

    /// Cuts every connection through the proxy, and every one after.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for s in self.streams.lock().unwrap().iter() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// Copies `from` to `to` until either ends; while `held`, what was read is kept back.
fn forward(
    mut from: std::net::TcpStream,
    mut to: std::net::TcpStream,
    held: &std::sync::atomic::AtomicBool,
) {
    use std::io::{Read, Write};
    let mut buf = [0u8; 16 * 1024];
    while let Ok(n @ 1..) = from.read(&mut buf) {
        while held.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
}

/// `.ci/postgres ARGS` on the cluster in `dir` (`OWL_TEST_PG_DIR`).
pub fn ci_postgres(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/postgres");
    std::process::Command::new(script)
        .args(args)
        .env("OWL_TEST_PG_DIR", dir)
        .output()
        .unwrap()
}

/// A PostgreSQL server of its own (`.ci/postgres` in a directory of its own), for a test
/// that stops and starts it: the shared one serves other tests meanwhile. Stopped and
/// removed when dropped.
pub struct OwnServer {
    dir: std::path::PathBuf,
    pub port: u16,
}

impl OwnServer {
    pub fn start() -> OwnServer {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        // Outside any private temp dir: the server runs as `postgres` when the tests run as
        // root, and must reach it.
        let dir = std::path::PathBuf::from(format!(
            "/tmp/owl-own-postgres-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let out = ci_postgres(&dir, &[]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        let server = OwnServer { dir, port };
        let mut admin = server.admin();
        admin
            .batch_execute("CREATE DATABASE owl OWNER owl")
            .unwrap();
        server
    }

    pub fn url(&self) -> String {
        format!("postgres://owl@127.0.0.1:{}/owl", self.port)
    }

    /// Where its cluster lives (`OWL_TEST_PG_DIR` for .ci/postgres).
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    pub fn admin(&self) -> postgres::Client {
        postgres::Client::connect(
            &format!(
                "host=127.0.0.1 port={} user=postgres dbname=postgres",
                self.port
            ),
            postgres::NoTls,
        )
        .unwrap()
    }

    /// `pg_ctl stop` (fast: open connections are cut) or `start`, waiting for it.
    pub fn ctl(&self, what: &str) {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("bin/pg_ctl"))
            .find(|p| p.exists())
            .unwrap();
        let data = self.dir.join("data");
        let log = data.join("server.log");
        let mut args = vec![
            bin.display().to_string(),
            "-D".into(),
            data.display().to_string(),
            "-w".into(),
            "-l".into(),
            log.display().to_string(),
            "-m".into(),
            "fast".into(),
            what.into(),
        ];
        // The server refuses to run as root: as `postgres`, as .ci/postgres made it.
        if rustix_is_root() {
            args.splice(0..0, ["runuser", "-u", "postgres", "--"].map(String::from));
        }
        let status = std::process::Command::new(&args[0])
            .args(&args[1..])
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "pg_ctl {what}");
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        self.ctl("stop");
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn rustix_is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.starts_with(b"0\n"))
        .unwrap_or(false)
}
