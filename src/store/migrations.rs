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
    // 7: reads that cost the same after a year of nights. The newest figure of each Window
    // in a table of its own (one row per Account and Window, kept by insert_snapshot);
    // Snapshots by age, for pruning; Runs in progress and Runs by end, through indexes; Jobs
    // by state.
    r#"
    CREATE TABLE latest_snapshots (
        account     TEXT NOT NULL,
        window      TEXT NOT NULL,
        percent     REAL NOT NULL,
        resets_at   TEXT,
        observed_at TEXT NOT NULL,
        source      TEXT NOT NULL,
        run_id      INTEGER,
        PRIMARY KEY (account, window)
    );
    -- One pass over snapshots_latest finds each Window's newest time; the newest id wins a tie.
    INSERT INTO latest_snapshots
        SELECT s.account, s.window, s.percent, s.resets_at, s.observed_at, s.source, s.run_id
        FROM snapshots s
        JOIN (SELECT account, window, MAX(observed_at) AS newest
              FROM snapshots GROUP BY account, window) m
          ON s.account = m.account AND s.window = m.window AND s.observed_at = m.newest
        WHERE s.id = (SELECT MAX(t.id) FROM snapshots t WHERE t.account = s.account
                      AND t.window = s.window AND t.observed_at = m.newest);
    CREATE INDEX snapshots_observed ON snapshots(observed_at);
    CREATE INDEX runs_in_progress ON runs(id) WHERE outcome IS NULL;
    CREATE INDEX runs_ended ON runs(ended_at) WHERE outcome IS NOT NULL;
    CREATE INDEX jobs_state ON jobs(state, seq);
    "#,
    // 8: the agent CLI file that last passed the version check, with its version.
    r#"
    ALTER TABLE account_notes ADD COLUMN agent_checked TEXT;
    ALTER TABLE account_notes ADD COLUMN agent_checked_at TEXT;
    "#,
    // 9: each Job's Run count on its row, kept by the database itself as Runs are added or
    // removed, so that listing ten thousand Jobs does not count a hundred thousand Runs.
    r#"
    ALTER TABLE jobs ADD COLUMN run_count INTEGER NOT NULL DEFAULT 0;
    UPDATE jobs SET run_count = (SELECT COUNT(*) FROM runs WHERE runs.job_id = jobs.id);
    CREATE TRIGGER runs_counted AFTER INSERT ON runs BEGIN
        UPDATE jobs SET run_count = run_count + 1 WHERE id = NEW.job_id;
    END;
    CREATE TRIGGER runs_uncounted AFTER DELETE ON runs BEGIN
        UPDATE jobs SET run_count = run_count - 1 WHERE id = OLD.job_id;
    END;
    -- The plan reads the unfinished Jobs from the index alone, never from their rows.
    DROP INDEX jobs_state;
    CREATE INDEX jobs_state ON jobs(state, seq, id, priority, account, not_before, reason);
    "#,
    // 10: a Job's reason as data (JSON of `JobReason`) beside its rendered words; the
    // words of older rows are kept as a note.
    r#"
    ALTER TABLE jobs ADD COLUMN reason_data TEXT;
    UPDATE jobs SET reason_data = json_object('kind', 'note', 'text', reason)
        WHERE reason IS NOT NULL;
    "#,
    // 11: the kind of stop owl made of a Run, as data; older Runs' kinds read once from the
    // words owl wrote for them.
    r#"
    ALTER TABLE runs ADD COLUMN stop TEXT;
    UPDATE runs SET stop = CASE
        WHEN stop_reason LIKE 'ceiling:%' THEN 'ceiling'
        WHEN stop_reason LIKE 'rate limited:%' THEN 'rate_limited'
        WHEN stop_reason = 'maxRunTime reached' THEN 'max_run_time'
        WHEN stop_reason = 'stalled' THEN 'stalled'
        WHEN stop_reason = 'cancelled' THEN 'cancelled'
        WHEN stop_reason LIKE 'owl received %' THEN 'signal'
        WHEN stop_reason LIKE 'disk full: writing the log:%' THEN 'disk_full'
        WHEN stop_reason LIKE 'writing the log:%' THEN 'log_write'
    END
    WHERE outcome IN ('interrupted', 'timed_out', 'rate_limited', 'failed');
    "#,
    // 12: each agent CLI binary's conformance verdict, by its identity (path, size, mtime).
    r#"
    CREATE TABLE agent_verdicts (
        identity   TEXT PRIMARY KEY,
        version    TEXT NOT NULL,
        passed     INTEGER NOT NULL,
        failed     TEXT,
        checked_at TEXT NOT NULL
    );
    "#,
    // 13: a reactive Account's wait after a rate limit (its Driver reports no utilization).
    r#"
    ALTER TABLE account_notes ADD COLUMN rate_limited_until TEXT;
    "#,
    // 14: the model family a per-model Window limits ("Fable"); an Account held off extra
    // usage (paid credits) until the reset of the Window that sent it there.
    r#"
    ALTER TABLE snapshots ADD COLUMN model TEXT;
    ALTER TABLE latest_snapshots ADD COLUMN model TEXT;
    ALTER TABLE account_notes ADD COLUMN on_credits_until TEXT;
    ALTER TABLE account_notes ADD COLUMN on_credits_window TEXT;
    "#,
    // 15: when "not logged in" was found, so that a login made since (the credential
    // store's files changed after it) is noticed at the next tick.
    r#"
    ALTER TABLE account_notes ADD COLUMN not_logged_in_at TEXT;
    "#,
    // 16: the Executor that ran each Run, so that recovery and `status` ask that one
    // whether its supervisor lives and what survives of it. Older Runs had the local one's
    // processes (a sandbox's are local processes with the Run's marker): NULL reads local.
    // The checked agent CLI's identity and version, in two columns (they were one, split
    // on a tab).
    r#"
    ALTER TABLE runs ADD COLUMN executor TEXT;
    ALTER TABLE account_notes ADD COLUMN agent_checked_version TEXT;
    UPDATE account_notes
        SET agent_checked_version = substr(agent_checked, instr(agent_checked, char(9)) + 1),
            agent_checked = substr(agent_checked, 1, instr(agent_checked, char(9)) - 1)
        WHERE instr(agent_checked, char(9)) > 0;
    "#,
    // 17: a Job's check (argv as JSON, its timeout), fixed when it is queued; what the
    // check found after a Run, as JSON (`model::CheckRecord`), on the Run and (the latest)
    // on its Job, so that a listing of every Job reads it from the Job's row. NULL: none.
    r#"
    ALTER TABLE jobs ADD COLUMN check_argv TEXT;
    ALTER TABLE jobs ADD COLUMN check_timeout_secs INTEGER;
    ALTER TABLE runs ADD COLUMN check_data TEXT;
    ALTER TABLE jobs ADD COLUMN last_check TEXT;
    "#,
    // 18: Jobs that wait for Jobs (`owl add --after`), and the Job whose branch tip a
    // stacked Job starts from, resolved at its first Run. The same list on the Job's row
    // (JSON, never changed after `add`), so that a listing of every Job reads no other table.
    r#"
    CREATE TABLE job_deps (
        job_id TEXT NOT NULL,
        after_id TEXT NOT NULL,
        PRIMARY KEY (job_id, after_id)
    );
    CREATE INDEX job_deps_after ON job_deps(after_id);
    ALTER TABLE jobs ADD COLUMN base_after TEXT;
    ALTER TABLE jobs ADD COLUMN after_ids TEXT;
    "#,
    // 19: each Job's counted Runs (ended, and the Job's doing) on its row, kept by the
    // database itself as a Run is added, ends or is removed, so that listing ten thousand
    // Jobs counts no Runs (as `run_count`, migration 9).
    r#"
    ALTER TABLE jobs ADD COLUMN counted_runs INTEGER NOT NULL DEFAULT 0;
    UPDATE jobs SET counted_runs = (SELECT COUNT(*) FROM runs WHERE runs.job_id = jobs.id
        AND outcome IS NOT NULL AND (cause IS NULL OR cause = 'job'));
    CREATE TRIGGER runs_counted_added AFTER INSERT ON runs BEGIN
        UPDATE jobs SET counted_runs = (SELECT COUNT(*) FROM runs WHERE runs.job_id = NEW.job_id
            AND outcome IS NOT NULL AND (cause IS NULL OR cause = 'job'))
        WHERE id = NEW.job_id;
    END;
    CREATE TRIGGER runs_counted_ended AFTER UPDATE OF outcome, cause ON runs BEGIN
        UPDATE jobs SET counted_runs = (SELECT COUNT(*) FROM runs WHERE runs.job_id = NEW.job_id
            AND outcome IS NOT NULL AND (cause IS NULL OR cause = 'job'))
        WHERE id = NEW.job_id;
    END;
    CREATE TRIGGER runs_counted_removed AFTER DELETE ON runs BEGIN
        UPDATE jobs SET counted_runs = (SELECT COUNT(*) FROM runs WHERE runs.job_id = OLD.job_id
            AND outcome IS NOT NULL AND (cause IS NULL OR cause = 'job'))
        WHERE id = OLD.job_id;
    END;
    "#,
    // 20: a Job waiting only for Jobs that are all done is queued, not "waiting — after X":
    // released by the database itself the moment its last dependency becomes done, whatever
    // path wrote that (a Run's settlement, a requeue's check, a recorded lost Run).
    r#"
    CREATE TRIGGER jobs_done_release_dependents AFTER UPDATE OF state ON jobs
    WHEN NEW.state = 'done' AND OLD.state != 'done' BEGIN
        UPDATE jobs SET state = 'queued', reason = NULL, reason_data = NULL,
            updated_at = NEW.updated_at
        WHERE state = 'waiting' AND not_before IS NULL
            AND json_extract(reason_data, '$.kind') = 'after'
            AND id IN (SELECT job_id FROM job_deps WHERE after_id = NEW.id)
            AND NOT EXISTS (SELECT 1 FROM job_deps d JOIN jobs j ON j.id = d.after_id
                WHERE d.job_id = jobs.id AND j.state != 'done');
    END;
    UPDATE jobs SET state = 'queued', reason = NULL, reason_data = NULL
    WHERE state = 'waiting' AND not_before IS NULL
        AND json_extract(reason_data, '$.kind') = 'after'
        AND NOT EXISTS (SELECT 1 FROM job_deps d JOIN jobs j ON j.id = d.after_id
            WHERE d.job_id = jobs.id AND j.state != 'done');
    "#,
    // 21: a conformance verdict holds for the pair of binary and version: a wrapper or a
    // version manager's shim is one file for every version it runs, and checking 2.2.1 must
    // not forget that 2.2.0 passed.
    r#"
    CREATE TABLE agent_verdicts_by_version (
        identity   TEXT NOT NULL,
        version    TEXT NOT NULL,
        passed     INTEGER NOT NULL,
        failed     TEXT,
        checked_at TEXT NOT NULL,
        PRIMARY KEY (identity, version)
    );
    INSERT INTO agent_verdicts_by_version SELECT identity, version, passed, failed, checked_at
        FROM agent_verdicts;
    DROP TABLE agent_verdicts;
    ALTER TABLE agent_verdicts_by_version RENAME TO agent_verdicts;
    "#,
    // 22: owl's own share of each Window instance (a Window and its reset), per Run: the
    // figure before the Run and the highest during it, kept when the Run settles (the
    // Snapshots they come from are pruned after `snapshotRetention`).
    r#"
    CREATE TABLE run_windows (
        run_id         INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        account        TEXT NOT NULL,
        window         TEXT NOT NULL,
        resets_at      TEXT NOT NULL,
        baseline       REAL NOT NULL,
        baseline_known INTEGER NOT NULL,
        peak           REAL NOT NULL,
        PRIMARY KEY (run_id, window, resets_at)
    );
    CREATE INDEX run_windows_instance ON run_windows(account, window, resets_at);
    "#,
    // 23: machines sharing one store. The machine each Run ran on and each Job runs on
    // (NULL: older rows, made when a store had one machine: this one); each machine's
    // last tick and host; a live Run's lease and fencing token (kept on PostgreSQL, where
    // another machine judges it); what happened to a Run after its outcome (a fenced
    // supervisor's own finding); and at most one live Run per Account, as a constraint.
    r#"
    ALTER TABLE runs ADD COLUMN machine TEXT;
    ALTER TABLE jobs ADD COLUMN machine TEXT;
    ALTER TABLE runs ADD COLUMN lease_until TEXT;
    ALTER TABLE runs ADD COLUMN fence INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE machines (
        name      TEXT PRIMARY KEY,
        host      TEXT NOT NULL,
        last_tick TEXT NOT NULL
    );
    CREATE TABLE run_events (
        id      INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        at      TEXT NOT NULL,
        machine TEXT,
        text    TEXT NOT NULL
    );
    CREATE INDEX run_events_run ON run_events(run_id, id);
    CREATE UNIQUE INDEX runs_one_live_per_account ON runs(account) WHERE outcome IS NULL;
    "#,
    // 24: what one machine learns of an Account that holds on that machine alone (its login
    // there, its probe, the agent CLI installed there), kept apart on a shared store. On a
    // store one machine has, these stay in `account_notes`. The same in both dialects.
    MACHINE_NOTES,
    // 25: each Run's commits, counted when it ends (and once, from git, for the Runs
    // recorded before: see `Store::count_earlier_commits`). The open Jobs tallied by
    // Account, state, time and machine, kept by the database itself as Jobs are added,
    // move and are removed, so that an idle tick says what waits behind a held Account
    // without reading the queue; and the open Jobs that wait for Jobs, indexed apart.
    r#"
    ALTER TABLE runs ADD COLUMN commits INTEGER;
    DROP INDEX jobs_state;
    CREATE INDEX jobs_state ON jobs(state, seq, id, priority, account, not_before, reason, machine);
    CREATE INDEX jobs_with_deps ON jobs(state) WHERE after_ids IS NOT NULL;
    CREATE TABLE queue_tally (
        account    TEXT NOT NULL,
        state      TEXT NOT NULL,
        not_before TEXT NOT NULL,
        machine    TEXT NOT NULL,
        jobs       INTEGER NOT NULL,
        PRIMARY KEY (account, state, not_before, machine)
    );
    INSERT INTO queue_tally
        SELECT COALESCE(account, ''), state, COALESCE(not_before, ''), COALESCE(machine, ''),
            COUNT(*)
        FROM jobs WHERE state IN ('queued', 'waiting')
        GROUP BY COALESCE(account, ''), state, COALESCE(not_before, ''), COALESCE(machine, '');
    CREATE TRIGGER jobs_tally_added AFTER INSERT ON jobs
    WHEN NEW.state IN ('queued', 'waiting') BEGIN
        INSERT INTO queue_tally (account, state, not_before, machine, jobs)
            VALUES (COALESCE(NEW.account, ''), NEW.state, COALESCE(NEW.not_before, ''),
                COALESCE(NEW.machine, ''), 1)
            ON CONFLICT (account, state, not_before, machine) DO UPDATE SET jobs = jobs + 1;
    END;
    CREATE TRIGGER jobs_tally_removed AFTER DELETE ON jobs
    WHEN OLD.state IN ('queued', 'waiting') BEGIN
        UPDATE queue_tally SET jobs = jobs - 1
            WHERE account = COALESCE(OLD.account, '') AND state = OLD.state
                AND not_before = COALESCE(OLD.not_before, '')
                AND machine = COALESCE(OLD.machine, '');
        DELETE FROM queue_tally WHERE jobs <= 0;
    END;
    CREATE TRIGGER jobs_tally_moved AFTER UPDATE OF state, account, not_before, machine ON jobs
    WHEN OLD.state IN ('queued', 'waiting') OR NEW.state IN ('queued', 'waiting') BEGIN
        UPDATE queue_tally SET jobs = jobs - 1
            WHERE OLD.state IN ('queued', 'waiting')
                AND account = COALESCE(OLD.account, '') AND state = OLD.state
                AND not_before = COALESCE(OLD.not_before, '')
                AND machine = COALESCE(OLD.machine, '');
        INSERT INTO queue_tally (account, state, not_before, machine, jobs)
            SELECT COALESCE(NEW.account, ''), NEW.state, COALESCE(NEW.not_before, ''),
                COALESCE(NEW.machine, ''), 1
            WHERE NEW.state IN ('queued', 'waiting')
            ON CONFLICT (account, state, not_before, machine) DO UPDATE SET jobs = jobs + 1;
        DELETE FROM queue_tally WHERE jobs <= 0;
    END;
    "#,
    // 26: the hosts a Job's sandboxed Runs may reach beyond its Account's (`add --allow-host`).
    super::migrations::JOB_ALLOW_HOSTS,
    // 27: a store one machine has names no machine on its rows: each is this machine's,
    // whatever `machine:` says now, so naming the machine after first use strands nothing
    // (until now every Job and Run was stamped with the host name).
    r#"
    UPDATE jobs SET machine = NULL WHERE machine IS NOT NULL;
    UPDATE runs SET machine = NULL WHERE machine IS NOT NULL;
    DELETE FROM machines;
    "#,
    // 28: the user's own use of each Account's Windows, by hour (see `user_use`).
    super::migrations::USER_USE,
    // 29: the Window instances the user was limited by after owl's Runs used them.
    super::migrations::USER_LIMITED,
    // 30: nothing here: SQLite counts the open Jobs in `queue_tally` (migration 25);
    // PostgreSQL's own count of them is its migration 30.
    "SELECT 1",
];

/// Migration 28, written alike for SQLite and PostgreSQL: the user's use of an Account's
/// five-hour and weekly Windows by hour (`points`, 0 for an hour observed still), and the
/// last figure of each Window folded into it.
pub(super) const USER_USE: &str = r#"
    CREATE TABLE user_use (
        account TEXT NOT NULL,
        kind    TEXT NOT NULL,
        hour    TEXT NOT NULL,
        points  REAL NOT NULL,
        PRIMARY KEY (account, kind, hour)
    );
    CREATE TABLE user_use_folded (
        account     TEXT NOT NULL,
        "window"    TEXT NOT NULL,
        observed_at TEXT NOT NULL,
        percent     REAL NOT NULL,
        resets_at   TEXT,
        PRIMARY KEY (account, "window")
    );
    "#;

/// Migration 29, written alike for SQLite and PostgreSQL: each Window instance the user
/// reached 100% of in their day after owl's Runs had used some of it (one row an instance:
/// when it was first seen full, and owl's points of it then).
pub(super) const USER_LIMITED: &str = r#"
    CREATE TABLE user_limited (
        account    TEXT NOT NULL,
        "window"   TEXT NOT NULL,
        resets_at  TEXT NOT NULL,
        at         TEXT NOT NULL,
        percent    REAL NOT NULL,
        owl_points REAL NOT NULL,
        PRIMARY KEY (account, "window", resets_at)
    );
    "#;

/// Migration 26, written alike for SQLite and PostgreSQL.
pub(super) const JOB_ALLOW_HOSTS: &str =
    "ALTER TABLE jobs ADD COLUMN allow_hosts TEXT NOT NULL DEFAULT '[]';";

/// Migration 24, written alike for SQLite and PostgreSQL.
pub(super) const MACHINE_NOTES: &str = r#"
    CREATE TABLE machine_notes (
        account               TEXT NOT NULL,
        machine               TEXT NOT NULL,
        not_logged_in         TEXT,
        not_logged_in_at      TEXT,
        agent_problem         TEXT,
        last_probe            TEXT,
        last_probe_at         TEXT,
        agent_checked         TEXT,
        agent_checked_at      TEXT,
        agent_checked_version TEXT,
        updated_at            TEXT NOT NULL,
        PRIMARY KEY (account, machine)
    );
    "#;

/// The first schema version at which a Run's commits are recorded.
pub(super) const COMMITS_RECORDED: i64 = 25;

/// The schema version this binary writes.
pub(super) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings the database up to [`SCHEMA_VERSION`], refusing one written by a newer owl; the
/// version it was at, `None` for a new one.
pub(super) fn migrate(conn: &mut Connection) -> Result<Option<i64>> {
    migrate_to(conn, SCHEMA_VERSION)
}

/// Brings the database up to `target`, in one transaction; the version it was at.
pub(super) fn migrate_to(conn: &mut Connection, target: i64) -> Result<Option<i64>> {
    // Every command opens the store: one that is current is read, not write-locked.
    let current: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if current == target {
        return Ok(Some(current));
    }
    let tx = rusqlite::Transaction::new(conn, rusqlite::TransactionBehavior::Immediate)?;
    let current: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if current > SCHEMA_VERSION {
        bail!(
            "the database is at schema version {current}, but this owl only knows up to \
             {SCHEMA_VERSION}: it was written by a newer owl; upgrade owl rather than risk it"
        );
    }
    for (i, sql) in MIGRATIONS
        .iter()
        .enumerate()
        .take(target as usize)
        .skip(current as usize)
    {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", i as i64 + 1)?;
    }
    tx.commit()?;
    Ok((current > 0).then_some(current))
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

    /// Rows as an owl of schema 1 wrote them; every later schema only adds to them.
    const V1_ROWS: &str = "
        INSERT INTO jobs (id, prompt, repo, base, max_runs, max_run_time_secs, permission_mode,
                          state, reason, created_at, updated_at)
        VALUES ('a', 'p', '/r', 'HEAD', 3, 60, 'dontAsk', 'done', NULL, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z'),
               ('b', 'p', '/r', 'HEAD', 3, 60, 'dontAsk', 'queued', 'Run 9 was lost; queued again', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z');
        INSERT INTO runs (job_id, account, outcome, started_at, ended_at)
        VALUES ('a', 'work', 'succeeded', '2026-01-01T01:00:00Z', '2026-01-01T02:00:00Z'),
               ('b', 'work', NULL, '2026-01-02T01:00:00Z', NULL);
        INSERT INTO snapshots (account, window, percent, resets_at, observed_at, source)
        VALUES ('work', 'five_hour', 10, NULL, '2026-01-01T01:00:00Z', 'get_usage'),
               ('work', 'five_hour', 30, NULL, '2026-01-01T03:00:00Z', 'get_usage'),
               ('work', 'five_hour', 20, NULL, '2026-01-01T02:00:00Z', 'probe'),
               ('work', 'seven_day', 5, NULL, '2026-01-01T01:00:00Z', 'probe');
        INSERT INTO account_notes (account, not_logged_in, updated_at)
        VALUES ('work', 'not logged in: 401', '2026-01-01T00:00:00Z');";

    /// A year of state as a schema-5 owl left it, in a real file: a million Snapshots,
    /// ten thousand Jobs and a hundred thousand Runs all come through the migrations.
    #[test]
    fn a_schema_5_database_with_a_million_snapshots_migrates_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("owl.db");
        let mut conn = Connection::open(&path).unwrap();
        migrate_to(&mut conn, 5).unwrap();
        conn.execute_batch(
            "BEGIN;
             WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 9999)
             INSERT INTO jobs (id, prompt, repo, base, max_runs, max_run_time_secs,
                               permission_mode, state, created_at, updated_at)
             SELECT 'j' || i, 'p', '/r', 'HEAD', 20, 60, 'dontAsk',
                    CASE WHEN i < 1000 THEN 'queued' ELSE 'done' END,
                    '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z' FROM n;
             WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 99999)
             INSERT INTO runs (job_id, account, outcome, started_at, ended_at)
             SELECT 'j' || (i % 10000), 'work', 'succeeded', '2026-01-01T01:00:00Z',
                    '2026-01-01T02:00:00Z' FROM n;
             WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 999999)
             INSERT INTO snapshots (account, window, percent, resets_at, observed_at, source)
             SELECT 'work', CASE i % 2 WHEN 0 THEN 'five_hour' ELSE 'seven_day' END,
                    i % 100, NULL, printf('2026-%02d-%02dT00:00:00Z', 1 + i / 100000, 1 + i % 28),
                    'get_usage' FROM n;
             COMMIT;",
        )
        .unwrap();
        drop(conn);

        let mut conn = Connection::open(&path).unwrap();
        migrate(&mut conn).unwrap();
        let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
        assert_eq!(count("PRAGMA user_version"), SCHEMA_VERSION);
        assert_eq!(count("SELECT COUNT(*) FROM jobs"), 10_000);
        assert_eq!(count("SELECT COUNT(*) FROM runs"), 100_000);
        assert_eq!(count("SELECT COUNT(*) FROM snapshots"), 1_000_000);
        assert_eq!(count("SELECT SUM(run_count) FROM jobs"), 100_000);
        assert_eq!(count("SELECT run_count FROM jobs WHERE id = 'j7'"), 10);
        // Each Window's newest figure, found once: the last rows written are of October.
        assert_eq!(count("SELECT COUNT(*) FROM latest_snapshots"), 2);
        let newest: String = conn
            .query_row(
                "SELECT observed_at FROM latest_snapshots WHERE window = 'five_hour'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(newest.starts_with("2026-10-"), "{newest}");
    }

    #[test]
    fn the_checked_agent_splits_into_its_identity_and_its_version() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate_to(&mut conn, 15).unwrap();
        conn.execute_batch(
            "INSERT INTO account_notes (account, agent_checked, updated_at) VALUES \
             ('work', '/usr/bin/claude:123:456' || char(9) || '2.1.332', '2026-01-01T00:00:00Z'), \
             ('home', NULL, '2026-01-01T00:00:00Z');",
        )
        .unwrap();
        migrate(&mut conn).unwrap();
        let checked = |account: &str| -> (Option<String>, Option<String>) {
            conn.query_row(
                "SELECT agent_checked, agent_checked_version FROM account_notes WHERE account = ?1",
                [account],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap()
        };
        assert_eq!(
            checked("work"),
            (
                Some("/usr/bin/claude:123:456".into()),
                Some("2.1.332".into())
            )
        );
        assert_eq!(checked("home"), (None, None));
    }

    #[test]
    fn rows_stamped_with_the_host_name_become_this_machines_whatever_it_is_named() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate_to(&mut conn, 26).unwrap();
        conn.execute_batch(
            "INSERT INTO jobs (id, prompt, repo, base, max_runs, max_run_time_secs, \
             permission_mode, state, created_at, updated_at, machine) \
             VALUES ('a', 'p', '/r', 'HEAD', 3, 60, 'dontAsk', 'queued', 't', 't', 'vm');
             INSERT INTO runs (job_id, account, started_at, machine) VALUES ('a', 'w', 't', 'vm');
             INSERT INTO machines (name, host, last_tick) VALUES ('vm', 'h', 't');",
        )
        .unwrap();
        migrate(&mut conn).unwrap();
        let named = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
        assert_eq!(
            named("SELECT COUNT(*) FROM jobs WHERE machine IS NOT NULL"),
            0
        );
        assert_eq!(
            named("SELECT COUNT(*) FROM runs WHERE machine IS NOT NULL"),
            0
        );
        assert_eq!(named("SELECT COUNT(*) FROM machines"), 0);
        // The queue's tally follows the Job to no machine.
        assert_eq!(
            named("SELECT COUNT(*) FROM queue_tally WHERE machine = '' AND jobs = 1"),
            1
        );
    }

    #[test]
    fn older_runs_get_the_kind_of_their_stop_from_their_words() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate_to(&mut conn, 10).unwrap();
        conn.execute_batch(V1_ROWS).unwrap();
        let runs = [
            (
                "interrupted",
                "ceiling: five_hour 65% >= fiveHourMax 60",
                Some("ceiling"),
            ),
            ("interrupted", "cancelled", Some("cancelled")),
            ("interrupted", "owl received SIGTERM", Some("signal")),
            ("timed_out", "maxRunTime reached", Some("max_run_time")),
            ("timed_out", "stalled", Some("stalled")),
            (
                "rate_limited",
                "rate limited: the provider rejected five_hour",
                Some("rate_limited"),
            ),
            (
                "failed",
                "disk full: writing the log: No space left",
                Some("disk_full"),
            ),
            (
                "failed",
                "the agent ended with exit code 1 and no result line",
                None,
            ),
            ("succeeded", "ceiling: in the agent's own words", None),
        ];
        for (outcome, reason, _) in runs {
            conn.execute(
                "INSERT INTO runs (job_id, account, outcome, stop_reason, started_at) \
                 VALUES ('a', 'w', ?1, ?2, '2026-01-01T00:00:00Z')",
                [outcome, reason],
            )
            .unwrap();
        }
        migrate(&mut conn).unwrap();
        for (_, reason, kind) in runs {
            let stop: Option<String> = conn
                .query_row(
                    "SELECT stop FROM runs WHERE stop_reason = ?1",
                    [reason],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(stop.as_deref(), kind, "{reason}");
        }
    }

    #[test]
    fn every_earlier_schema_with_rows_migrates_in_place() {
        for from in 1..SCHEMA_VERSION {
            let mut conn = Connection::open_in_memory().unwrap();
            migrate_to(&mut conn, from).unwrap();
            conn.execute_batch(V1_ROWS).unwrap();
            if from >= 14 {
                // From schema 14 on, with the model a per-model Window limits.
                conn.execute_batch(
                    "INSERT INTO latest_snapshots SELECT account, window, percent, resets_at, \
                     MAX(observed_at), source, run_id, NULL FROM snapshots GROUP BY account, window",
                )
                .unwrap();
            } else if from >= 7 {
                // From schema 7 on, owl keeps each Window's newest figure as it records.
                conn.execute_batch(
                    "INSERT INTO latest_snapshots SELECT account, window, percent, resets_at, \
                     MAX(observed_at), source, run_id FROM snapshots GROUP BY account, window",
                )
                .unwrap();
            }
            migrate(&mut conn).unwrap();
            let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
            assert_eq!(count("SELECT COUNT(*) FROM jobs"), 2, "from {from}");
            assert_eq!(count("SELECT COUNT(*) FROM runs"), 2, "from {from}");
            // A reason in words from an older owl reads back as the same words.
            let (data, text): (Option<String>, Option<String>) = conn
                .query_row(
                    "SELECT reason_data, reason FROM jobs WHERE id = 'b'",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .unwrap();
            let reason = crate::model::JobReason::from_stored(data.as_deref(), text.as_deref());
            assert_eq!(
                reason,
                Some(crate::model::JobReason::Note {
                    text: "Run 9 was lost; queued again".into()
                }),
                "from {from}"
            );
            // Each Job's Runs counted on its row, and counted on as Runs are added.
            assert_eq!(
                count("SELECT run_count FROM jobs WHERE id = 'a'"),
                1,
                "from {from}"
            );
            conn.execute_batch(
                "INSERT INTO runs (job_id, account, started_at) VALUES ('a', 'w', '2026-01-03T00:00:00Z')",
            )
            .unwrap();
            assert_eq!(
                count("SELECT run_count FROM jobs WHERE id = 'a'"),
                2,
                "from {from}"
            );
            conn.execute_batch("DELETE FROM runs WHERE started_at = '2026-01-03T00:00:00Z'")
                .unwrap();
            assert_eq!(
                count("SELECT run_count FROM jobs WHERE id = 'a'"),
                1,
                "from {from}"
            );
            assert_eq!(count("SELECT COUNT(*) FROM snapshots"), 4, "from {from}");
            assert_eq!(
                count("SELECT COUNT(*) FROM account_notes"),
                1,
                "from {from}"
            );
            // The newest figure of each Window, found once and kept apart.
            assert_eq!(
                count("SELECT CAST(percent AS INTEGER) FROM latest_snapshots WHERE window = 'five_hour'"),
                30,
                "from {from}"
            );
            assert_eq!(
                count("SELECT COUNT(*) FROM latest_snapshots"),
                2,
                "from {from}"
            );
            // The Run in progress is found through its index.
            let plan: String = conn
                .query_row(
                    "EXPLAIN QUERY PLAN SELECT id FROM runs WHERE outcome IS NULL ORDER BY id",
                    [],
                    |r| r.get(3),
                )
                .unwrap();
            assert!(plan.contains("runs_in_progress"), "from {from}: {plan}");
        }
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
