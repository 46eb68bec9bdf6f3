//! The PostgreSQL server the store's tests run against (`.ci/postgres`), and a fresh database on it per test.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use super::Store;

/// The test cluster's port: started by the first test that asks, then shared.
pub(crate) fn server_port() -> u16 {
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
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{script} printed no port: {e}"))
    })
}

/// A database of its own on the test server, dropped with it.
pub(crate) struct TestDatabase {
    pub(crate) name: String,
    port: u16,
}

impl TestDatabase {
    pub(crate) fn new() -> TestDatabase {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let port = server_port();
        let name = format!(
            "owl_unit_{}_{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut admin = admin(port);
        for sql in [
            format!("DROP DATABASE IF EXISTS {name}"),
            format!("CREATE DATABASE {name}"),
        ] {
            admin.batch_execute(&sql).expect("creating a test database");
        }
        TestDatabase { name, port }
    }

    /// The URL owl is given (the superuser, trusted on loopback: no password to pass).
    pub(crate) fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{}", self.port, self.name)
    }

    /// owl's store on it.
    pub(crate) fn store(&self) -> Store {
        let url = crate::config::PgUrl::parse(&self.url()).expect("the test URL");
        Store::open_postgres(&url).expect("opening the test database")
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let _ = admin(self.port).batch_execute(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ));
    }
}

fn admin(port: u16) -> postgres::Client {
    postgres::Client::connect(
        &format!("host=127.0.0.1 port={port} user=postgres dbname=postgres"),
        postgres::NoTls,
    )
    .expect("connecting to the test server")
}
