//! Machines sharing one store: each one's last tick and host, a live Run's lease and fencing token, and what happened to a Run after its outcome was recorded.

use std::time::Duration;

use anyhow::Result;
use chrono::{DateTime, Utc};

use super::engine::params;
use super::Store;
use crate::clock::rfc3339;
use crate::model::{JobReason, JobState};

/// What happened to a Run after its outcome: when, on which machine, in words.
pub(crate) type RunEvent = (String, Option<String>, String);

/// One machine as the store knows it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Machine {
    pub(crate) name: String,
    /// The host it last ticked from.
    pub(crate) host: String,
    pub(crate) last_tick: Option<DateTime<Utc>>,
}

/// A Run whose lease expired: another machine's supervisor stopped renewing it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Expired {
    pub(crate) run_id: i64,
    pub(crate) job_id: String,
    pub(crate) machine: String,
}

/// Another host ticked under this machine's name within a lease.
#[derive(Debug, thiserror::Error)]
#[error(
    "another host ticked as machine '{name}' at {at}: two machines cannot share a name \
     (set `machine:` in each one's config to a name of its own)"
)]
pub(crate) struct NameTaken {
    pub(crate) name: String,
    pub(crate) at: String,
}

impl Store {
    /// Records this machine's tick: its name, its host and the time. Refused when another
    /// host ticked under the same name within `lease`: two machines would take each
    /// other's Runs for their own.
    pub(crate) fn record_tick(
        &mut self,
        name: &str,
        host: &str,
        lease: Duration,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let recent = rfc3339(now - chrono::Duration::from_std(lease).unwrap_or_default());
        // Not flushed: a power cut that loses it loses a heartbeat the next tick writes.
        self.write_unflushed(|tx| {
            let other = tx.query_opt(
                "SELECT last_tick FROM machines WHERE name = ?1 AND host != ?2 \
                 AND last_tick >= ?3",
                params![name, host, recent],
                |r| r.get::<String>(0),
            )?;
            if let Some(at) = other {
                return Err(NameTaken {
                    name: name.to_string(),
                    at,
                }
                .into());
            }
            if !tx.is_postgres() {
                // One machine: under the name it has now (a renamed one is not two).
                tx.execute("DELETE FROM machines WHERE name != ?1", params![name])?;
            }
            tx.execute(
                "INSERT INTO machines (name, host, last_tick) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (name) DO UPDATE SET host = excluded.host, \
                 last_tick = excluded.last_tick",
                params![name, host, rfc3339(now)],
            )?;
            Ok(())
        })
    }

    /// Forgets the machines that have not ticked since `before` and that nothing waits on
    /// (no unfinished Job, no live Run): a name once used is not listed for ever.
    pub(crate) fn forget_machines(&mut self, before: DateTime<Utc>) -> Result<usize> {
        const FORGET: &str = "DELETE FROM machines WHERE last_tick < ?1 \
             AND name NOT IN (SELECT machine FROM jobs WHERE machine IS NOT NULL \
                 AND state IN ('queued', 'waiting', 'running')) \
             AND name NOT IN (SELECT machine FROM runs WHERE machine IS NOT NULL \
                 AND outcome IS NULL)";
        let before = rfc3339(before);
        // One statement is its own transaction on PostgreSQL: one round trip, not three (a
        // commit that deleted nothing writes nothing to flush). SQLite's is not flushed.
        if self.db.is_postgres() {
            return self.db.execute(FORGET, params![before]);
        }
        self.write_unflushed(|tx| tx.execute(FORGET, params![before]))
    }

    /// Every machine that ever ticked, by name.
    pub(crate) fn machines(&self) -> Result<Vec<Machine>> {
        self.db.query_map(
            "SELECT name, last_tick, host FROM machines ORDER BY name",
            params![],
            |r| {
                Ok(Machine {
                    name: r.get(0)?,
                    last_tick: super::time_col(r.get(1)?),
                    host: r.get(2)?,
                })
            },
        )
    }

    /// Renews a live Run's lease from now (the server's clock) when its fencing token
    /// still holds; `false` when another machine recorded the Run since (the supervisor
    /// lost it). Only a shared store keeps leases: on SQLite it always holds.
    pub(crate) fn renew_lease(&mut self, run_id: i64, fence: i64, lease: Duration) -> Result<bool> {
        if !self.db.is_postgres() {
            return Ok(true);
        }
        let n = self.db.execute(
            "UPDATE runs SET lease_until = now() + make_interval(secs => ?3) \
             WHERE id = ?1 AND fence = ?2 AND outcome IS NULL",
            params![run_id, fence, lease.as_secs_f64()],
        )?;
        Ok(n == 1)
    }

    /// Records every live Run of another machine whose lease expired (by the server's
    /// clock) as `lost`, in one transaction, moving its fencing token on so that its
    /// supervisor, if it still lives, writes nothing more; its Job back in the queue (or
    /// failed on its last try: a lost Run counts). The machine that ran it kills what is
    /// left of it. Two machines expiring one Run at once: the row lock makes one of them
    /// find it recorded.
    pub(crate) fn expire_leases(&mut self, here: &str, now: DateTime<Utc>) -> Result<Vec<Expired>> {
        if !self.db.is_postgres() {
            return Ok(Vec::new());
        }
        // Most ticks find none: one round trip to know, where the transaction takes three.
        let any = self.db.exists(
            "SELECT 1 FROM runs WHERE outcome IS NULL AND lease_until < now() AND machine != ?1 \
             LIMIT 1",
            params![here],
        )?;
        if !any {
            return Ok(Vec::new());
        }
        self.write(|tx| {
            let expired = tx.query_map(
                "UPDATE runs SET fence = fence + 1, outcome = 'lost', cause = 'job', \
                 ended_at = ?2, stop_reason = 'its lease expired at ' || \
                   to_char(lease_until AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') || \
                   ': machine ' || machine || ' stopped renewing it (stopped, or cut off \
                   from the store); recorded by machine ' || ?1 \
                 WHERE outcome IS NULL AND lease_until < now() AND machine != ?1 \
                 RETURNING id, job_id, machine",
                params![here, rfc3339(now)],
                |r| {
                    Ok(Expired {
                        run_id: r.get(0)?,
                        job_id: r.get(1)?,
                        machine: r.get(2)?,
                    })
                },
            )?;
            for run in &expired {
                let (counted, max_runs): (u32, u32) = tx.query_one(
                    "SELECT counted_runs, max_runs FROM jobs WHERE id = ?1",
                    params![run.job_id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )?;
                let (state, reason) = match crate::outcome::max_runs_reached(counted, max_runs) {
                    Some(why) => (JobState::Failed, why),
                    None => (JobState::Queued, JobReason::Lost { run_id: run.run_id }),
                };
                tx.execute(
                    "UPDATE jobs SET state = ?2, reason = ?3, reason_data = ?4, \
                     not_before = NULL, updated_at = ?5 WHERE id = ?1 AND state = 'running'",
                    params![
                        run.job_id,
                        state.as_str(),
                        reason.to_string(),
                        reason.to_stored(),
                        rfc3339(now)
                    ],
                )?;
            }
            Ok(expired)
        })
    }

    /// This machine's Runs another machine recorded lost (their leases expired) whose
    /// leftovers this machine has not looked for yet: only here can its processes be
    /// found and killed.
    pub(crate) fn lost_elsewhere(&self, here: &str) -> Result<Vec<super::RunIdentity>> {
        if !self.db.is_postgres() {
            return Ok(Vec::new());
        }
        Ok(self
            .lost_runs_of(here)?
            .into_iter()
            .filter(|r| r.machine.as_deref() == Some(here))
            .collect())
    }

    /// Records how many of a Run's processes were found alive and killed.
    pub(crate) fn set_survivors_killed(&mut self, run_id: i64, killed: usize) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "UPDATE runs SET survivors_killed = ?2 WHERE id = ?1",
                params![run_id, killed],
            )?;
            Ok(())
        })
    }

    /// Keeps what happened to a Run after its outcome was recorded (a fenced supervisor's
    /// own finding), for `show`.
    pub(crate) fn add_run_event(
        &mut self,
        run_id: i64,
        machine: &str,
        text: &str,
        now: DateTime<Utc>,
    ) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO run_events (run_id, at, machine, text) VALUES (?1, ?2, ?3, ?4)",
                params![run_id, rfc3339(now), machine, text],
            )?;
            Ok(())
        })
    }

    /// The events of every Run of a Job, each with its Run's id, in order: one query
    /// however many Runs it had.
    pub(crate) fn job_run_events(&self, job_id: &str) -> Result<Vec<(i64, RunEvent)>> {
        self.db.query_map(
            "SELECT e.run_id, e.at, e.machine, e.text FROM run_events e \
             JOIN runs r ON r.id = e.run_id WHERE r.job_id = ?1 ORDER BY e.id",
            params![job_id],
            |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?))),
        )
    }
}
