//! `owl store copy`: a SQLite state copied whole into an empty PostgreSQL store, in one transaction, its rows named for this machine.

use anyhow::{Context, Result};

use super::engine::{params, Db, Param, ToParam};
use super::Store;

/// owl's tables in the order their references need: each row's Job and Run first.
const TABLES: [&str; 14] = [
    "jobs",
    "job_deps",
    "runs",
    "snapshots",
    "latest_snapshots",
    "account_notes",
    "agent_verdicts",
    "run_windows",
    "run_events",
    "machines",
    "machine_notes",
    "user_use",
    "user_use_folded",
    "user_limited",
];

/// The columns whose numbers PostgreSQL hands out: moved past the copied ones.
const IDENTITIES: [(&str, &str); 4] = [
    ("jobs", "seq"),
    ("runs", "id"),
    ("snapshots", "id"),
    ("run_events", "id"),
];

/// A target that already holds rows of owl's.
#[derive(Debug, thiserror::Error)]
#[error("{store} is not empty: its {table} table has rows; owl copies only into an empty store")]
pub(crate) struct NotEmpty {
    pub(crate) store: String,
    pub(crate) table: &'static str,
}

/// One value of a row, owned while it is copied.
enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
}

impl ToParam for Value {
    fn to_param(&self) -> Param<'_> {
        match self {
            Value::Null => Param::Null,
            Value::Int(i) => Param::Int(*i),
            Value::Real(r) => Param::Real(*r),
            Value::Text(t) => Param::Text(t),
        }
    }
}

impl Store {
    /// Copies every row of this SQLite store into `to`, an empty PostgreSQL store, in one
    /// transaction: all of it or nothing. Rows from before machines are named `machine`'s.
    /// How many rows each table had.
    pub(crate) fn copy_into(
        &self,
        to: &mut Store,
        machine: &str,
    ) -> Result<Vec<(&'static str, usize)>> {
        let from = self
            .db
            .sqlite_conn()
            .context("the store to copy from is not a SQLite file")?;
        anyhow::ensure!(to.is_shared(), "the store to copy into is not PostgreSQL");
        for table in TABLES {
            if to
                .db
                .exists(&format!("SELECT 1 FROM {table} LIMIT 1"), params![])?
            {
                return Err(NotEmpty {
                    store: to.location().to_string(),
                    table,
                }
                .into());
            }
        }
        let counts = to.write(|tx| {
            let mut counts = Vec::new();
            for table in TABLES {
                counts.push((table, copy_table(from, tx, table)?));
            }
            name_for(tx, machine)?;
            for (table, column) in IDENTITIES {
                tx.execute_batch(&format!(
                    "SELECT setval(pg_get_serial_sequence('{table}', '{column}'), \
                     COALESCE((SELECT MAX({column}) FROM {table}), 0) + 1, false)"
                ))?;
            }
            Ok(counts)
        })?;
        // The planner's statistics of the tables just filled: without them its first plans
        // over a year of history are guesses.
        to.db.execute_batch("ANALYZE")?;
        Ok(counts)
    }
}

/// Copies every row of one table, in its order (a Job's dependencies in the order given);
/// how many.
fn copy_table(from: &rusqlite::Connection, tx: &Db, table: &str) -> Result<usize> {
    let order = if table == "job_deps" { "rowid" } else { "1" };
    let mut stmt = from.prepare(&format!("SELECT * FROM {table} ORDER BY {order}"))?;
    let columns: Vec<String> = stmt
        .column_names()
        .iter()
        .map(|c| format!("\"{c}\""))
        .collect();
    let marks: Vec<String> = (1..=columns.len()).map(|i| format!("?{i}")).collect();
    let insert = format!(
        "INSERT INTO {table} ({}) VALUES ({})",
        columns.join(", "),
        marks.join(", ")
    );
    let mut rows = stmt.query([])?;
    let mut n = 0;
    while let Some(row) = rows.next()? {
        let values = (0..columns.len())
            .map(|i| owned(row.get_ref(i)?))
            .collect::<Result<Vec<Value>>>()?;
        let params: Vec<&dyn ToParam> = values.iter().map(|v| v as &dyn ToParam).collect();
        tx.execute(&insert, &params)
            .with_context(|| format!("copying a row of {table}"))?;
        n += 1;
    }
    Ok(n)
}

/// Names `machine` on the rows a store of one machine left unnamed: its Runs and Jobs,
/// what it learned of each Account (its login, probe, agent CLI), its binaries' verdicts.
fn name_for(tx: &Db, machine: &str) -> Result<()> {
    for table in ["runs", "jobs"] {
        tx.execute(
            &format!("UPDATE {table} SET machine = ?1 WHERE machine IS NULL"),
            params![machine],
        )?;
    }
    // The machine under the name it has now, not one it had before `machine:` named it.
    tx.execute("DELETE FROM machines WHERE name != ?1", params![machine])?;
    tx.execute(
        "INSERT INTO machine_notes (account, machine, not_logged_in, not_logged_in_at, \
         agent_problem, last_probe, last_probe_at, agent_checked, agent_checked_at, \
         agent_checked_version, updated_at) \
         SELECT account, ?1, not_logged_in, not_logged_in_at, agent_problem, \
         last_probe, last_probe_at, agent_checked, agent_checked_at, \
         agent_checked_version, updated_at FROM account_notes \
         ON CONFLICT DO NOTHING",
        params![machine],
    )?;
    tx.execute(
        "UPDATE agent_verdicts SET identity = ?1 || chr(9) || identity",
        params![machine],
    )?;
    Ok(())
}

fn owned(value: rusqlite::types::ValueRef<'_>) -> Result<Value> {
    use rusqlite::types::ValueRef;
    Ok(match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Int(i),
        ValueRef::Real(r) => Value::Real(r),
        ValueRef::Text(t) => Value::Text(String::from_utf8(t.to_vec())?),
        ValueRef::Blob(_) => anyhow::bail!("a blob, which owl never writes"),
    })
}
