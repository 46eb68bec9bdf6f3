//! Utilization Snapshots: every observation kept, the newest per Window read back.

use anyhow::Result;
use rusqlite::params;

use super::{time_col, Store};
use crate::clock::rfc3339;
use crate::model::Snapshot;

impl Store {
    /// Records one observation; the history is kept.
    pub fn insert_snapshot(&mut self, s: &Snapshot) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO snapshots (account, window, percent, resets_at, observed_at, source, run_id) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    s.account,
                    s.window,
                    s.percent,
                    s.resets_at.map(rfc3339),
                    rfc3339(s.observed_at),
                    s.source,
                    s.run_id
                ],
            )?;
            Ok(())
        })
    }

    /// The newest Snapshot of every Window of every Account.
    pub fn latest_snapshots(&self) -> Result<Vec<Snapshot>> {
        let mut stmt = self.conn.prepare(
            "SELECT account, window, percent, resets_at, observed_at, source, run_id \
             FROM snapshots s WHERE id = (SELECT id FROM snapshots t \
               WHERE t.account = s.account AND t.window = s.window \
               ORDER BY observed_at DESC, id DESC LIMIT 1) \
             ORDER BY account, window",
        )?;
        let rows = stmt
            .query_map([], |r| {
                Ok(Snapshot {
                    account: r.get(0)?,
                    window: r.get(1)?,
                    percent: r.get(2)?,
                    resets_at: time_col(r.get(3)?),
                    observed_at: time_col(r.get(4)?).unwrap_or_default(),
                    source: r.get(5)?,
                    run_id: r.get(6)?,
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }
}
