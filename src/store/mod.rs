//! owl's state: SQLite at `stateDir/owl.db` (the default) or PostgreSQL at the `store:` URL, opened safely and migrated, every write in one transaction.

mod backfill;
mod copy;
mod engine;
mod jobs;
mod machines;
mod metrics;
mod migrations;
mod notes;
mod pg_conn;
mod pgpass;
pub(crate) mod postgres;
mod queue;
mod runs;
mod settle;
mod shares;
mod snapshots;
#[cfg(test)]
mod suite;
#[cfg(test)]
pub(crate) mod testing;
mod tls;
mod user_use;
mod verdicts;

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use rusqlite::Connection;

use engine::{params, Db};

pub(crate) use copy::NotEmpty;
pub(crate) use jobs::ListedJob;
pub(crate) use machines::{Machine, NameTaken};
pub(crate) use runs::RunIdentity;
pub(crate) use runs::RunStart;
pub(crate) use verdicts::Verdict;

/// How long a write waits for another process's write lock, outside a Run's supervision.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// The open database.
pub(crate) struct Store {
    db: Db,
    location: Location,
    /// The machine this process runs on, for what a shared store keeps per machine.
    machine: Option<String>,
}

/// Where the state is kept.
#[derive(Debug, Clone)]
pub(crate) enum Location {
    /// SQLite, in the state dir.
    File(PathBuf),
    /// PostgreSQL, shared by machines.
    Postgres(Box<postgres::PgUrl>),
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::File(path) => write!(f, "{}", path.display()),
            Location::Postgres(url) => write!(f, "{url}"),
        }
    }
}

impl Store {
    /// Opens (creating if needed, 0600) and migrates the database.
    pub(crate) fn open(path: &Path) -> Result<Store> {
        if !path.exists() {
            // Create it ourselves so it is 0600 from its first byte; SQLite gives the
            // -wal and -shm files the same mode as the database.
            OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(path)
                .with_context(|| format!("creating database {}", path.display()))?;
        }
        let conn = Connection::open(path)
            .with_context(|| format!("opening database {}", path.display()))?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .with_context(|| format!("setting WAL on {}", path.display()))?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        // The WAL outlives the process: a process that wrote does not fold it into the
        // database as it closes (a flush of both files, and the WAL made and removed
        // again by the next), and SQLite folds it in as it grows past 1,000 pages. The
        // state is owl.db with owl.db-wal beside it (docs/performance.md).
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
            true,
        )?;
        let mut conn = conn;
        let was = migrations::migrate(&mut conn)
            .with_context(|| format!("migrating database {}", path.display()))?;
        let mut store = Store {
            db: Db::sqlite(conn),
            location: Location::File(path.to_path_buf()),
            machine: None,
        };
        store.after_migrating(was)?;
        Ok(store)
    }

    /// Connects to PostgreSQL (within [`postgres::CONNECT_TIMEOUT`]) and migrates it.
    pub(crate) fn open_postgres(url: &postgres::PgUrl) -> Result<Store> {
        // The process's last connection, its schema checked when it was made.
        if let Some(connected) = pg_conn::unpark(url) {
            return Ok(Store {
                db: Db::postgres(connected, url.clone()),
                location: Location::Postgres(Box::new(url.clone())),
                machine: None,
            });
        }
        let mut connected = postgres::connect(url, BUSY_TIMEOUT)?;
        let was = postgres::migrate(&mut connected.client, url, migrations::SCHEMA_VERSION)
            .with_context(|| format!("migrating the store {url}"))?;
        let mut store = Store {
            db: Db::postgres(connected, url.clone()),
            location: Location::Postgres(Box::new(url.clone())),
            machine: None,
        };
        store.after_migrating(was)?;
        Ok(store)
    }

    /// What a migration adds that only git knows, done once by the process that migrated
    /// from the version `was` at: the commits of the Runs recorded before owl kept them.
    fn after_migrating(&mut self, was: Option<i64>) -> Result<()> {
        match was {
            Some(v) if v < migrations::COMMITS_RECORDED => self.count_earlier_commits(),
            _ => Ok(()),
        }
    }

    /// Opens an existing database for reading without creating it; `None` when there is none yet.
    pub(crate) fn open_existing(path: &Path) -> Result<Option<Store>> {
        if !path.exists() {
            return Ok(None);
        }
        Store::open(path).map(Some)
    }

    /// How long a write waits for another process's write lock. The settlement lowers it
    /// while it retries.
    pub(crate) fn set_busy_timeout(&mut self, timeout: Duration) -> Result<()> {
        self.wait_at_most(timeout)
    }

    /// How long one statement may wait for another's lock: SQLite's busy timeout, or
    /// PostgreSQL's `lock_timeout`.
    fn wait_at_most(&mut self, timeout: Duration) -> Result<()> {
        self.db.wait_at_most(timeout)
    }

    /// Puts the store in the mode of the supervision loop, or back out of it. While a Run
    /// goes on, a write must never delay a stop: it waits `busy_timeout` at most for
    /// another process's lock, and its commit does not wait for the disk
    /// (`synchronous=NORMAL`: in WAL mode a commit still survives owl being killed, which
    /// is what "recorded before acted on" guards against; only a power cut can lose it,
    /// and a flush on a loaded disk took longer than the CLI takes to send its next
    /// request). Out of it, every commit is flushed and a write waits as long as any may.
    pub(crate) fn supervising(&mut self, busy_timeout: Option<Duration>) -> Result<()> {
        let (timeout, synchronous) = match busy_timeout {
            Some(timeout) => (timeout, "NORMAL"),
            None => (BUSY_TIMEOUT, "FULL"),
        };
        self.wait_at_most(timeout)?;
        if let Some(conn) = self.db.sqlite_conn() {
            conn.pragma_update(None, "synchronous", synchronous)?;
        }
        Ok(())
    }

    /// Names the machine this process runs on: on a shared store what one machine learns
    /// of an Account (its login, its probe, its agent CLI) is kept for that machine alone.
    pub(crate) fn on_machine(mut self, name: &str) -> Store {
        self.machine = Some(name.to_string());
        self
    }

    /// The machine whose own notes are read and written, on a shared store; `None` on a
    /// store one machine has.
    fn local_machine(&self) -> Option<&str> {
        self.machine.as_deref().filter(|_| self.is_shared())
    }

    /// Whether machines may share this store (PostgreSQL): Runs hold leases there.
    pub(crate) fn is_shared(&self) -> bool {
        self.db.is_postgres()
    }

    /// Where the state is kept.
    pub(crate) fn location(&self) -> &Location {
        &self.location
    }

    /// How the connection reached a PostgreSQL store (`doctor` says it); `None` for SQLite.
    pub(crate) fn reach(&self) -> Option<postgres::Reach> {
        self.db.reach()
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction: the write lock is taken up front, so
    /// a concurrent writer waits on the busy timeout instead of failing mid-transaction.
    pub(crate) fn write<T>(&mut self, f: impl FnOnce(&Db) -> Result<T>) -> Result<T> {
        self.db.transaction(f)
    }

    /// Runs every write `f` makes through the store as one transaction: one commit, one
    /// flush of the disk, all of them or none. Inside another, it is part of that one.
    pub(crate) fn write_all<T>(&mut self, f: impl FnOnce(&mut Store) -> Result<T>) -> Result<T> {
        if self.db.in_transaction() {
            return f(self);
        }
        self.db.begin()?;
        let done = f(self);
        self.db.end(done)
    }

    /// Like [`Store::write`], for a write whose loss at a power cut costs nothing the next
    /// tick does not learn again (a tick's heartbeat, the agent CLI's check): its commit
    /// does not wait for the disk. It still survives owl being killed (SQLite's WAL, in the
    /// kernel's cache), and the next flushed commit flushes it too.
    pub(crate) fn write_unflushed<T>(&mut self, f: impl FnOnce(&Db) -> Result<T>) -> Result<T> {
        if self.db.in_transaction() {
            return self.write(f);
        }
        let Some(conn) = self.db.sqlite_conn() else {
            return self.write(|tx| {
                tx.execute_batch("SET LOCAL synchronous_commit = off")?;
                f(tx)
            });
        };
        let was: i64 = conn.pragma_query_value(None, "synchronous", |r| r.get(0))?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        let done = self.write(f);
        if let Some(conn) = self.db.sqlite_conn() {
            conn.pragma_update(None, "synchronous", was)?;
        }
        done
    }

    /// Like [`Store::write`], for a write that must land even on a full disk: when SQLite
    /// cannot grow the database, the state dir's reserve is given back and it is tried once
    /// more.
    pub(crate) fn write_must_land<T>(&mut self, f: impl Fn(&Db) -> Result<T>) -> Result<T> {
        self.write_all_must_land(|store| store.write(&f))
    }

    /// [`Store::write_all`] for writes that must land even on a full disk (see
    /// [`Store::write_must_land`]); inside another transaction, the outermost one retries.
    pub(crate) fn write_all_must_land<T>(
        &mut self,
        f: impl Fn(&mut Store) -> Result<T>,
    ) -> Result<T> {
        let nested = self.db.in_transaction();
        match self.write_all(&f) {
            Err(e) if !nested && crate::disk::is_disk_full(&e) => {
                let Location::File(path) = &self.location else {
                    return Err(e);
                };
                let state_dir = path.parent().unwrap_or(Path::new("."));
                if !crate::disk::release_reserve(state_dir) {
                    return Err(e);
                }
                self.write_all(f)
            }
            other => other,
        }
    }

    /// The schema version this database is at.
    pub(crate) fn schema_version(&self) -> Result<i64> {
        match self.db.sqlite_conn() {
            Some(conn) => Ok(conn.pragma_query_value(None, "user_version", |r| r.get(0))?),
            None => self
                .db
                .query_one("SELECT version FROM owl_schema", params![], |r| r.get(0)),
        }
    }

    /// Whether the database takes a write: the write lock is taken and let go, nothing changes.
    pub(crate) fn check_writable(&self) -> Result<()> {
        // A real write, rolled back: a read-only file or filesystem refuses it.
        let check = match self.db.sqlite_conn() {
            Some(_) => "BEGIN IMMEDIATE; CREATE TABLE owl_doctor_check(x); ROLLBACK;",
            None => "BEGIN; CREATE TABLE owl_doctor_check(x BIGINT); ROLLBACK;",
        };
        self.db
            .execute_batch(check)
            .context("a test write, rolled back")?;
        Ok(())
    }

    /// A quick integrity check for `owl doctor`.
    /// PostgreSQL checks its own pages as it reads them: "ok" once it answers.
    pub(crate) fn quick_check(&self) -> Result<String> {
        match self.db.sqlite_conn() {
            Some(conn) => Ok(conn.query_row("PRAGMA quick_check", [], |r| r.get(0))?),
            None => self.db.query_one("SELECT 'ok'", params![], |r| r.get(0)),
        }
    }
}

fn json_vec(v: &[String]) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "[]".into())
}

fn parse_json_vec<T: serde::de::DeserializeOwned>(s: &str) -> Vec<T> {
    serde_json::from_str(s).unwrap_or_default()
}

fn time_col(s: Option<String>) -> Option<chrono::DateTime<chrono::Utc>> {
    s.as_deref().and_then(crate::clock::parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synchronous(store: &Store) -> i64 {
        store
            .db
            .sqlite_conn()
            .unwrap()
            .pragma_query_value(None, "synchronous", |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn a_commit_waits_for_the_disk_except_while_a_run_is_supervised() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("owl.db")).unwrap();
        const FULL: i64 = 2;
        const NORMAL: i64 = 1;
        assert_eq!(synchronous(&store), FULL);
        store.supervising(Some(Duration::from_millis(250))).unwrap();
        assert_eq!(synchronous(&store), NORMAL);
        store.supervising(None).unwrap();
        assert_eq!(synchronous(&store), FULL);
    }

    fn session_setting(store: &Store, name: &str) -> String {
        store
            .db
            .query_one(&format!("SHOW {name}"), &[], |r| r.get::<String>(0))
            .unwrap()
    }

    #[test]
    fn a_postgresql_session_bounds_each_statement_on_the_server_too() {
        let db = testing::TestDatabase::new();
        let mut store = db.store();
        // From the startup packet: a lock waited for 30 s, a statement 35 s in all.
        assert_eq!(session_setting(&store, "lock_timeout"), "30s");
        assert_eq!(session_setting(&store, "statement_timeout"), "35s");
        // While a Run is supervised, both shrink with the lock wait.
        store.supervising(Some(Duration::from_millis(250))).unwrap();
        assert_eq!(session_setting(&store, "lock_timeout"), "250ms");
        assert_eq!(session_setting(&store, "statement_timeout"), "5250ms");
        store.supervising(None).unwrap();
        assert_eq!(session_setting(&store, "statement_timeout"), "35s");
    }
}
