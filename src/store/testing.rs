//! A database of its own per store test, on the server the tests start (`.ci/postgres`), through the same helper the integration tests use.

#[path = "../../tests/integration/pg_server.rs"]
#[allow(dead_code, unreachable_pub)]
mod pg_server;

use super::Store;

/// A database of its own on the test server, dropped with it.
pub(crate) struct TestDatabase(pg_server::Database);

impl TestDatabase {
    pub(crate) fn new() -> TestDatabase {
        TestDatabase(pg_server::Database::new())
    }

    /// owl's store on it, as the superuser (trusted on loopback: no password to pass).
    pub(crate) fn store(&self) -> Store {
        let url = format!(
            "postgres://postgres@127.0.0.1:{}/{}",
            pg_server::port(),
            self.0.name
        );
        let url = crate::config::PgUrl::parse(&url).expect("the test URL");
        Store::open_postgres(&url).expect("opening the test database")
    }
}
