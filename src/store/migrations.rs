//! Schema migrations, numbered by `PRAGMA user_version`.

use anyhow::{bail, Result};
use rusqlite::Connection;

/// Each entry moves the schema from version `i` to `i + 1`. Append only; never edit one
/// that has shipped.
const MIGRATIONS: &[&str] = &[
    // 1: Jobs, Runs, utilization Snapshots, and per-Account notes.
    r#"
    CREATE TABLE jobs (
        seq                INTEGER PRIMARY KEY AUTOINCREMENT,
        id                 TEXT NOT NULL UNIQUE,
        name               TEXT,
        prompt             TEXT NOT NULL,
        repo               TEXT NOT NULL,
        base               TEXT NOT NULL,
        account            TEXT,
        priority           INTEGER NOT NULL DEFAULT 0,
        max_runs           INTEGER NOT NULL,
        max_run_time_secs  INTEGER NOT NULL,
        max_budget_usd     REAL,
        max_job_budget_usd REAL,
        permission_mode    TEXT NOT NULL,
        allowed_tools      TEXT NOT NULL DEFAULT '[]',
        disallowed_tools   TEXT NOT NULL DEFAULT '[]',
        model              TEXT,
        state              TEXT NOT NULL CHECK (state IN
                             ('queued','running','waiting','done','blocked','failed','cancelled')),
        reason             TEXT,
        not_before         TEXT,
        created_at         TEXT NOT NULL,
        updated_at         TEXT NOT NULL
    );
    CREATE TABLE runs (
        id                 INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id             TEXT NOT NULL REFERENCES jobs(id),
        account            TEXT NOT NULL,
        outcome            TEXT CHECK (outcome IN ('succeeded','failed','interrupted','timed_out',
                             'budget_exhausted','rate_limited','lost')),
        stop_reason        TEXT,
        exit_code          INTEGER,
        session_id         TEXT,
        cost_usd           REAL,
        num_turns          INTEGER,
        input_tokens       INTEGER,
        output_tokens      INTEGER,
        permission_denials TEXT NOT NULL DEFAULT '[]',
        api_retries        INTEGER NOT NULL DEFAULT 0,
        last_event         TEXT,
        agent_version      TEXT,
        owl_pid            INTEGER,
        owl_start_time     INTEGER,
        boot_id            TEXT,
        pid                INTEGER,
        pgid               INTEGER,
        child_start_time   INTEGER,
        started_at         TEXT NOT NULL,
        ended_at           TEXT
    );
    CREATE INDEX runs_job ON runs(job_id, id);
    CREATE TABLE snapshots (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        account     TEXT NOT NULL,
        window      TEXT NOT NULL,
        percent     REAL NOT NULL,
        resets_at   TEXT,
        observed_at TEXT NOT NULL,
        source      TEXT NOT NULL,
        run_id      INTEGER REFERENCES runs(id)
    );
    CREATE INDEX snapshots_latest ON snapshots(account, window, observed_at);
    CREATE TABLE account_notes (
        account       TEXT PRIMARY KEY,
        not_logged_in TEXT,
        agent_problem TEXT,
        updated_at    TEXT NOT NULL
    );
    "#,
    // 2: the outcome of the last preflight probe of each Account.
    r#"
    ALTER TABLE account_notes ADD COLUMN last_probe TEXT;
    ALTER TABLE account_notes ADD COLUMN last_probe_at TEXT;
    "#,
    // 3: what a Run left behind, and what of its stream owl could not read.
    r#"
    ALTER TABLE runs ADD COLUMN survivors_killed INTEGER;
    ALTER TABLE runs ADD COLUMN skipped_lines INTEGER;
    "#,
    // 4: the branch head before and after a Run, and owl's safety-net commit.
    r#"
    ALTER TABLE runs ADD COLUMN head_before TEXT;
    ALTER TABLE runs ADD COLUMN head_after TEXT;
    ALTER TABLE runs ADD COLUMN safety_commit TEXT;
    "#,
    // 5: the commit a Job's base ref named when it was queued.
    r#"
    ALTER TABLE jobs ADD COLUMN base_commit TEXT;
    "#,
    // 6: who a Run is charged to, a note raised after its result, its budget cap; an
    // Account's outage back-off.
    r#"
    ALTER TABLE runs ADD COLUMN cause TEXT;
    ALTER TABLE runs ADD COLUMN note TEXT;
    ALTER TABLE runs ADD COLUMN budget_usd REAL;
    ALTER TABLE account_notes ADD COLUMN backoff_until TEXT;
    ALTER TABLE account_notes ADD COLUMN outages INTEGER NOT NULL DEFAULT 0;
    "#,
];

/// The schema version this binary writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings the database up to [`SCHEMA_VERSION`], refusing one written by a newer owl.
pub fn migrate(conn: &mut Connection) -> Result<()> {
    let tx = rusqlite::Transaction::new(conn, rusqlite::TransactionBehavior::Immediate)?;
    let current: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if current > SCHEMA_VERSION {
        bail!(
            "the database is at schema version {current}, but this owl only knows up to \
             {SCHEMA_VERSION}: it was written by a newer owl; upgrade owl rather than risk it"
        );
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", i as i64 + 1)?;
    }
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrates_a_fresh_database_and_is_idempotent() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        migrate(&mut conn).unwrap();
        let v: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(v, SCHEMA_VERSION);
    }

    #[test]
    fn refuses_a_newer_database() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        let e = migrate(&mut conn).unwrap_err().to_string();
        assert!(e.contains("newer owl"), "{e}");
    }
}
