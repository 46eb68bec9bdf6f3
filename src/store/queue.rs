//! The queue as an idle tick sees it: the open Jobs counted in groups, never read row by row (SQLite keeps the tally with triggers; PostgreSQL counts from its index).

use anyhow::Result;

use super::engine::{params, Row};
use super::Store;
use crate::model::JobState;
use crate::schedule::{QueueCount, QueueGroup};

/// One group's key: Account, state, time to wait for and machine, as stored.
type Key = (Option<String>, String, Option<String>, Option<String>);

impl Store {
    /// The unfinished Jobs counted in groups alike in all the plan asks of them (their
    /// Account, state, time to wait for, whether they run on a machine other than `here`
    /// or wait for a Job not done), and the running ones by id: what an idle tick says
    /// without reading a queued Job's row.
    pub(crate) fn count_queue(&self, here: &str) -> Result<QueueCount> {
        let tallied = match self.db.is_postgres() {
            false => self.db.query_map(
                "SELECT NULLIF(account, ''), state, NULLIF(not_before, ''), \
                 NULLIF(machine, ''), jobs FROM queue_tally",
                params![],
                keyed,
            )?,
            true => self.pg_tally()?,
        };
        // Those that wait for a Job not done: few, found through their own index.
        let after = self.db.query_map(
            "SELECT j.account, j.state, j.not_before, j.machine, COUNT(*) FROM jobs j \
             WHERE j.after_ids IS NOT NULL AND j.state IN ('queued', 'waiting') \
               AND EXISTS (SELECT 1 FROM job_deps d JOIN jobs a ON a.id = d.after_id \
                 WHERE d.job_id = j.id AND a.state <> 'done') \
             GROUP BY j.account, j.state, j.not_before, j.machine",
            params![],
            keyed,
        )?;
        let running = self.db.query_map(
            "SELECT id FROM jobs WHERE state = 'running' ORDER BY seq",
            params![],
            |r| r.get(0),
        )?;
        let mut groups = Vec::new();
        for (key, all) in tallied {
            let waiting_after = after.iter().find(|(k, _)| *k == key).map_or(0, |(_, n)| *n);
            groups.push(group(&key, here, false, all.saturating_sub(waiting_after)));
            groups.push(group(&key, here, true, waiting_after));
        }
        groups.retain(|g| g.count > 0);
        Ok(QueueCount { groups, running })
    }
}

impl Store {
    /// PostgreSQL's count of the open Jobs: the sum of the moves' deltas per group (see its
    /// migration 30), read in one statement whatever the queue's length. Past a few rows a
    /// group, the rows are folded into one per group, in one statement (a move appended
    /// meanwhile is not in it and stays); two machines folding at once each fold what they
    /// saw, and the sums hold. A fold that fails is left for the next tick.
    fn pg_tally(&self) -> Result<Vec<(Key, usize)>> {
        let mut rows = 0;
        let tallied = self.db.query_map(
            "SELECT account, state, not_before, machine, SUM(delta)::BIGINT, COUNT(*) \
             FROM queue_deltas GROUP BY account, state, not_before, machine",
            params![],
            |r| {
                rows += r.get::<i64>(5)?;
                keyed(r)
            },
        )?;
        if rows > FOLD_PAST + 4 * tallied.len() as i64 {
            let folded = self.db.execute(
                "WITH gone AS (DELETE FROM queue_deltas \
                   RETURNING account, state, not_before, machine, delta) \
                 INSERT INTO queue_deltas \
                 SELECT account, state, not_before, machine, SUM(delta) FROM gone \
                 GROUP BY account, state, not_before, machine HAVING SUM(delta) <> 0",
                params![],
            );
            if let Err(e) = folded {
                tracing::warn!("folding the queue's count: {e:#}; the next tick tries again");
            }
        }
        Ok(tallied)
    }
}

/// How many rows of moves the queue's count on PostgreSQL reads before it folds them.
const FOLD_PAST: i64 = 256;

fn keyed(r: &Row) -> Result<(Key, usize)> {
    let key = (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
    Ok((key, r.get::<i64>(4)?.max(0) as usize))
}

fn group(
    (account, state, not_before, machine): &Key,
    here: &str,
    after: bool,
    count: usize,
) -> QueueGroup {
    QueueGroup {
        account: account.clone(),
        state: state.parse().unwrap_or(JobState::Failed),
        not_before: not_before.as_deref().and_then(crate::clock::parse),
        elsewhere: machine.as_deref().is_some_and(|m| m != here),
        after,
        count,
    }
}
