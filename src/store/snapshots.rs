//! Utilization Snapshots: every observation kept for `snapshotRetention`, the newest per Window kept apart so that reading it costs the same at any size.

use super::engine::{params, Row};
use anyhow::Result;
use chrono::{DateTime, Utc};

use super::{time_col, Store};
use crate::clock::rfc3339;
use crate::model::Snapshot;

impl Store {
    /// Records one observation, and makes it the Window's newest unless a newer one is known.
    pub(crate) fn insert_snapshot(&mut self, s: &Snapshot) -> Result<()> {
        self.insert_snapshots(std::slice::from_ref(s))
    }

    /// Records observations in one transaction (a probe's Windows, a bulk load).
    pub(crate) fn insert_snapshots(&mut self, snapshots: &[Snapshot]) -> Result<()> {
        self.write(|tx| {
            let history =
                "INSERT INTO snapshots (account, \"window\", percent, resets_at, observed_at, source, run_id, model) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
            // RFC 3339 in UTC with a fixed shape compares as text in time order. The stream
            // never names a per-model Window's model: the name a usage answer gave it stays.
            let latest =
                "INSERT INTO latest_snapshots (account, \"window\", percent, resets_at, observed_at, source, run_id, model) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
                 ON CONFLICT(account, \"window\") DO UPDATE SET percent = excluded.percent, \
                   resets_at = excluded.resets_at, observed_at = excluded.observed_at, \
                   source = excluded.source, run_id = excluded.run_id, \
                   model = COALESCE(excluded.model, latest_snapshots.model) \
                 WHERE excluded.observed_at >= latest_snapshots.observed_at";
            for s in snapshots {
                let row = params![
                    s.account,
                    s.window,
                    s.percent,
                    s.resets_at.map(rfc3339),
                    rfc3339(s.observed_at),
                    s.source.as_str(),
                    s.run_id,
                    s.model
                ];
                tx.execute(history, row)?;
                tx.execute(latest, row)?;
            }
            Ok(())
        })
    }

    /// Deletes up to `batch` Snapshots observed before `before`; how many went. The newest
    /// figure of each Window is kept apart, so pruning never loses what scheduling reads.
    pub(crate) fn prune_snapshots(
        &mut self,
        before: chrono::DateTime<chrono::Utc>,
        batch: usize,
    ) -> Result<usize> {
        // Most ticks have nothing to prune: they find that out with a read, no write lock.
        let any = self.db.exists(
            "SELECT 1 FROM snapshots WHERE observed_at < ?1 LIMIT 1",
            params![rfc3339(before)],
        )?;
        if !any {
            return Ok(0);
        }
        self.write(|tx| {
            tx.execute(
                "DELETE FROM snapshots WHERE id IN \
                 (SELECT id FROM snapshots WHERE observed_at < ?1 ORDER BY observed_at LIMIT ?2)",
                params![rfc3339(before), batch as i64],
            )
        })
    }

    /// The Snapshots of one Account's Window observed in `[since, until]`, oldest first (through
    /// the index on account, window and time).
    pub(crate) fn snapshots_between(
        &self,
        account: &str,
        window: &str,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Vec<Snapshot>> {
        self.db.query_map(
            "SELECT account, \"window\", percent, resets_at, observed_at, source, run_id, model \
             FROM snapshots WHERE account = ?1 AND \"window\" = ?2 AND observed_at >= ?3 \
             AND observed_at <= ?4 ORDER BY observed_at, id",
            params![account, window, rfc3339(since), rfc3339(until)],
            snapshot_from_row,
        )
    }

    /// The Windows an Account has any Snapshot of.
    pub(crate) fn windows_of(&self, account: &str) -> Result<Vec<String>> {
        self.db.query_map(
            "SELECT DISTINCT \"window\" FROM latest_snapshots WHERE account = ?1 \
             ORDER BY \"window\"",
            params![account],
            |r| r.get(0),
        )
    }

    /// The newest Snapshot of every Window of every Account.
    pub(crate) fn latest_snapshots(&self) -> Result<Vec<Snapshot>> {
        self.db.query_map(
            "SELECT account, \"window\", percent, resets_at, observed_at, source, run_id, model \
             FROM latest_snapshots ORDER BY account, \"window\"",
            params![],
            snapshot_from_row,
        )
    }
}

/// A Snapshot as stored, in the column order both readers select.
fn snapshot_from_row(r: &Row) -> Result<Snapshot> {
    Ok(Snapshot {
        account: r.get(0)?,
        window: r.get(1)?,
        percent: r.get(2)?,
        resets_at: time_col(r.get(3)?),
        observed_at: time_col(r.get(4)?).unwrap_or_default(),
        source: r.text(5)?.parse()?,
        run_id: r.get(6)?,
        model: r.get(7)?,
    })
}
