//! Runs: started with the Job moving to `running`, finished with the Job's next state, in one transaction each.

use super::engine::{params, Row, ToParam};
use super::{parse_json_vec, time_col, Store};
use crate::clock::rfc3339;
use crate::config::ExecutorKind;
use crate::model::{Cause, JobReason, JobState, Run, RunFinish, RunOutcome, StopKind};
use anyhow::{Context, Result};
use chrono::{DateTime, Utc};

/// What is known about a Run when it starts.
#[derive(Debug, Clone)]
pub(crate) struct RunStart {
    pub(crate) job_id: String,
    pub(crate) account: String,
    pub(crate) agent_version: Option<String>,
    /// owl's own pid, start time (clock ticks since boot) and the boot id: together they
    /// identify the supervising tick even after its pid is reused.
    pub(crate) owl_pid: i64,
    pub(crate) owl_start_time: Option<i64>,
    pub(crate) boot_id: Option<String>,
    pub(crate) started_at: DateTime<Utc>,
    /// The Job's branch head when the Run started.
    pub(crate) head_before: Option<String>,
    /// The Run's `--max-budget-usd`.
    pub(crate) budget_usd: Option<f64>,
    /// The Executor that runs it.
    pub(crate) executor: ExecutorKind,
    /// The machine it runs on.
    pub(crate) machine: String,
    /// How long its lease lasts unless renewed, on a shared store.
    pub(crate) lease: std::time::Duration,
}

/// Who supervised a Run and who ran it: enough to tell a dead tick from a live one, and
/// the agent from a process that reused its pid.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RunIdentity {
    pub(crate) run_id: i64,
    pub(crate) job_id: String,
    pub(crate) account: String,
    pub(crate) owl_pid: Option<i64>,
    pub(crate) owl_start_time: Option<i64>,
    pub(crate) boot_id: Option<String>,
    pub(crate) pid: Option<i64>,
    pub(crate) child_start_time: Option<i64>,
    /// The Executor that ran it: the one to ask about it.
    pub(crate) executor: ExecutorKind,
    /// The machine that runs it; `None`: a Run from before machines (this one's).
    pub(crate) machine: Option<String>,
    /// Its fencing token: a write of its supervisor's carries it, and updates nothing
    /// once another machine recorded the Run (which moves the token on).
    pub(crate) fence: i64,
    /// Until when its lease holds (RFC 3339, the server's clock), on a shared store.
    pub(crate) lease_until: Option<String>,
    /// Its lease has run out by the server's clock: the next tick records the Run lost.
    pub(crate) lease_expired: bool,
}

const RUN_COLUMNS: &str = "id, job_id, account, outcome, stop_reason, exit_code, session_id, \
    cost_usd, num_turns, input_tokens, output_tokens, permission_denials, api_retries, \
    last_event, agent_version, pid, started_at, ended_at, survivors_killed, skipped_lines, \
    head_before, head_after, safety_commit, cause, note, budget_usd, stop, check_data, machine, \
    commits";

fn run_from_row(r: &Row) -> Result<Run> {
    let outcome: Option<String> = r.get(3)?;
    Ok(Run {
        id: r.get(0)?,
        job_id: r.get(1)?,
        account: r.get(2)?,
        outcome: outcome.and_then(|o| o.parse().ok()),
        stop_reason: r.get(4)?,
        exit_code: r.get(5)?,
        session_id: r.get(6)?,
        cost_usd: r.get(7)?,
        num_turns: r.get(8)?,
        input_tokens: r.get(9)?,
        output_tokens: r.get(10)?,
        permission_denials: parse_json_vec(r.text(11)?),
        api_retries: r.get(12)?,
        last_event: r.get(13)?,
        agent_version: r.get(14)?,
        pid: r.get(15)?,
        started_at: time_col(r.get(16)?).unwrap_or_default(),
        ended_at: time_col(r.get(17)?),
        survivors_killed: r.get(18)?,
        skipped_lines: r.get(19)?,
        head_before: r.get(20)?,
        head_after: r.get(21)?,
        safety_commit: r.get(22)?,
        cause: r.get::<Option<String>>(23)?.and_then(|c| c.parse().ok()),
        note: r.get(24)?,
        budget_usd: r.get(25)?,
        stop: r.get::<Option<String>>(26)?.and_then(|s| s.parse().ok()),
        check: r
            .get::<Option<String>>(27)?
            .and_then(|c| serde_json::from_str(&c).ok()),
        machine: r.get(28)?,
        commits: r.get(29)?,
    })
}

impl Store {
    /// Records a new Run and moves its Job to `running`, atomically, only if the Job is
    /// still queued or waiting and no live Run holds its Account (on any machine: a
    /// constraint of the database): `None` when either is not so (a cancel landed since
    /// the pick, or another machine started a Run on the Account), and then nothing is
    /// recorded and no agent may start. On PostgreSQL the Run holds a lease from the
    /// server's clock.
    pub(crate) fn start_run(&mut self, start: &RunStart) -> Result<Option<i64>> {
        let lease = match self.db.is_postgres() {
            true => "now() + make_interval(secs => ?12)",
            // One machine: its Runs are judged by their processes, not a lease.
            false => "(CASE WHEN ?12 < 0 THEN NULL END)",
        };
        let insert = format!(
            "INSERT INTO runs (job_id, account, agent_version, owl_pid, owl_start_time, \
             boot_id, started_at, head_before, budget_usd, executor, machine, lease_until) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, {lease}) RETURNING id"
        );
        let shared = self.db.is_postgres();
        let started = self.write(|tx| {
            // The claim: the Job's row locked for this transaction, or passed over when
            // another machine's claim holds it (it is taken; waiting would only find so).
            if shared
                && !tx.exists(
                    "SELECT 1 FROM jobs WHERE id = ?1 AND state IN ('queued', 'waiting') \
                     FOR UPDATE SKIP LOCKED",
                    params![start.job_id],
                )?
            {
                return Ok(None);
            }
            let moved = tx.execute(
                "UPDATE jobs SET state = 'running', reason = NULL, reason_data = NULL, not_before = NULL, \
                 updated_at = ?2 WHERE id = ?1 AND state IN ('queued', 'waiting')",
                params![start.job_id, rfc3339(start.started_at)],
            )?;
            if moved == 0 {
                return Ok(None);
            }
            let id = tx
                .query_one(
                    &insert,
                    params![
                        start.job_id,
                        start.account,
                        start.agent_version,
                        start.owl_pid,
                        start.owl_start_time,
                        start.boot_id,
                        rfc3339(start.started_at),
                        start.head_before,
                        start.budget_usd,
                        start.executor.name(),
                        // One machine's store names none: each Run is this machine's.
                        shared.then_some(start.machine.as_str()),
                        start.lease.as_secs_f64(),
                    ],
                    |r| r.get::<i64>(0),
                )
                .with_context(|| format!("recording a run of job {}", start.job_id))?;
            Ok(Some(id))
        });
        match started {
            Err(e) if super::engine::is_unique_violation(&e) => Ok(None),
            other => other,
        }
    }

    /// Records the agent's process identity once it is spawned: not flushed, since what
    /// it guards against (owl killed, its Run's processes left) it survives, and a power
    /// cut leaves no process to find.
    pub(crate) fn set_run_process(
        &mut self,
        run_id: i64,
        pid: i64,
        start_time: Option<i64>,
    ) -> Result<()> {
        self.write_unflushed(|tx| {
            tx.execute(
                "UPDATE runs SET pid = ?2, pgid = ?2, child_start_time = ?3 WHERE id = ?1",
                params![run_id, pid, start_time],
            )?;
            Ok(())
        })
    }

    /// Records live progress of a Run in flight, for `owl status` (not flushed: the Run's
    /// end records it again).
    pub(crate) fn set_run_progress(
        &mut self,
        run_id: i64,
        last_event: &str,
        api_retries: i64,
        session_id: Option<&str>,
    ) -> Result<()> {
        self.write_unflushed(|tx| {
            tx.execute(
                "UPDATE runs SET last_event = ?2, api_retries = ?3, \
                 session_id = COALESCE(?4, session_id) WHERE id = ?1",
                params![run_id, last_event, api_retries, session_id],
            )?;
            Ok(())
        })
    }

    /// Records how a Run ended and moves its Job on, atomically: a crash between the two
    /// would otherwise leave a finished Run with a Job stuck in `running`. This write must
    /// land: when the disk is full, the state dir's reserve is given back and it is tried
    /// once more. The first outcome wins: `false` (nothing written) when the Run has one
    /// already (another machine recorded it lost, or this write landed before).
    pub(crate) fn finish_run(
        &mut self,
        run_id: i64,
        finish: &RunFinish,
        job_state: JobState,
        job_reason: Option<&JobReason>,
        not_before: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        self.write_must_land(|tx| {
            let recorded = tx.execute(
                "UPDATE runs SET outcome = ?2, stop_reason = ?3, exit_code = ?4, \
                 session_id = COALESCE(?5, session_id), cost_usd = ?6, num_turns = ?7, \
                 input_tokens = ?8, output_tokens = ?9, permission_denials = ?10, \
                 api_retries = ?11, last_event = COALESCE(?12, last_event), ended_at = ?13, \
                 survivors_killed = ?14, skipped_lines = ?15, head_after = ?16, safety_commit = ?17, \
                 cause = ?18, note = ?19, stop = ?20, check_data = ?21, commits = ?22 \
                 WHERE id = ?1 AND outcome IS NULL",
                params![
                    run_id,
                    finish.outcome.map(RunOutcome::as_str),
                    finish.stop_reason,
                    finish.exit_code,
                    finish.session_id,
                    finish.cost_usd,
                    finish.num_turns,
                    finish.input_tokens,
                    finish.output_tokens,
                    serde_json::to_string(&finish.permission_denials)?,
                    finish.api_retries,
                    finish.last_event,
                    rfc3339(now),
                    finish.survivors_killed,
                    finish.skipped_lines,
                    finish.head_after,
                    finish.safety_commit,
                    finish.cause.map(Cause::as_str),
                    finish.note,
                    finish.stop.map(StopKind::as_str),
                    finish
                        .check
                        .as_ref()
                        .map(serde_json::to_string)
                        .transpose()?,
                    finish.commits,
                ],
            )?;
            if recorded == 0 {
                return Ok(false);
            }
            if finish.check.is_some() {
                // The latest check, on its Job's row too: what a listing of every Job reads.
                tx.execute(
                    "UPDATE jobs SET last_check = \
                     (SELECT check_data FROM runs WHERE id = ?1) \
                     WHERE id = (SELECT job_id FROM runs WHERE id = ?1)",
                    params![run_id],
                )?;
            }
            // Only the Job's Run in progress moves it on: a cancel written meanwhile stays.
            tx.execute(
                "UPDATE jobs SET state = ?2, reason = ?3, not_before = ?4, updated_at = ?5, \
                 reason_data = ?6 \
                 WHERE id = (SELECT job_id FROM runs WHERE id = ?1) AND state = 'running'",
                params![
                    run_id,
                    job_state.as_str(),
                    job_reason.map(|r| r.to_string()),
                    not_before.map(rfc3339),
                    rfc3339(now),
                    job_reason.map(JobReason::to_stored)
                ],
            )?;
            Ok(true)
        })
    }

    /// The identities of every Run still marked running.
    pub(crate) fn running_identities(&self) -> Result<Vec<RunIdentity>> {
        self.identities_where("outcome IS NULL", params![])
    }

    /// The identities of `machine`'s Runs recorded lost whose leftovers no one looked for.
    pub(crate) fn lost_runs_of(&self, machine: &str) -> Result<Vec<RunIdentity>> {
        self.identities_where(
            "machine = ?1 AND outcome = 'lost' AND survivors_killed IS NULL",
            params![machine],
        )
    }

    fn identities_where(&self, clause: &str, params: &[&dyn ToParam]) -> Result<Vec<RunIdentity>> {
        // The lease is the server's clock: it judges the expiry too.
        let lease = match self.db.is_postgres() {
            true => {
                "to_char(lease_until AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), \
                     (CASE WHEN lease_until < now() THEN 1 ELSE 0 END)::BIGINT"
            }
            false => "lease_until, 0",
        };
        self.db.query_map(
            &format!(
                "SELECT id, job_id, owl_pid, owl_start_time, boot_id, pid, child_start_time, \
                 executor, account, machine, fence, {lease} FROM runs WHERE {clause} \
                 ORDER BY id"
            ),
            params,
            |r| {
                Ok(RunIdentity {
                    run_id: r.get(0)?,
                    job_id: r.get(1)?,
                    owl_pid: r.get(2)?,
                    owl_start_time: r.get(3)?,
                    boot_id: r.get(4)?,
                    pid: r.get(5)?,
                    child_start_time: r.get(6)?,
                    executor: r
                        .get::<Option<String>>(7)?
                        .as_deref()
                        .and_then(ExecutorKind::from_name)
                        .unwrap_or_default(),
                    account: r.get(8)?,
                    machine: r.get(9)?,
                    fence: r.get(10)?,
                    lease_until: r.get(11)?,
                    lease_expired: r.get::<i64>(12)? != 0,
                })
            },
        )
    }

    /// One Run by id.
    pub(crate) fn run(&self, id: i64) -> Result<Option<Run>> {
        self.db.query_opt(
            &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"),
            params![id],
            run_from_row,
        )
    }

    /// Records what a finished Run's check found when it was run again (`owl requeue` of a
    /// Job whose check could not start).
    pub(crate) fn set_run_check(
        &mut self,
        run_id: i64,
        check: &crate::model::CheckRecord,
    ) -> Result<()> {
        let data = serde_json::to_string(check)?;
        self.write(|tx| {
            tx.execute(
                "UPDATE runs SET check_data = ?2 WHERE id = ?1",
                params![run_id, data],
            )?;
            tx.execute(
                "UPDATE jobs SET last_check = ?2 WHERE id = (SELECT job_id FROM runs WHERE id = ?1)",
                params![run_id, data],
            )?;
            Ok(())
        })
    }

    /// The Runs of one Job, oldest first.
    pub(crate) fn runs_of(&self, job_id: &str) -> Result<Vec<Run>> {
        self.runs_where("job_id = ?1 ORDER BY id", params![job_id])
    }

    /// How many of the Job's finished Runs count toward its `maxRuns` ([`Run::counts`], in
    /// SQL: a Job's thousandth Run costs no more to start than its first).
    pub(crate) fn counted_runs(&self, job_id: &str) -> Result<u32> {
        let n: i64 = self.db.query_one(
            "SELECT COUNT(*) FROM runs WHERE job_id = ?1 AND outcome IS NOT NULL \
             AND (cause IS NULL OR cause = 'job')",
            params![job_id],
            |r| r.get(0),
        )?;
        Ok(n as u32)
    }

    /// What the Job's Runs have cost ([`crate::model::total_cost`], in SQL): each by its
    /// result line, a finished one without it by its cap.
    pub(crate) fn job_cost(&self, job_id: &str) -> Result<f64> {
        self.db.query_one(
            "SELECT COALESCE(SUM(COALESCE(cost_usd, \
               CASE WHEN outcome IS NOT NULL THEN budget_usd END)), 0.0) \
             FROM runs WHERE job_id = ?1",
            params![job_id],
            |r| r.get(0),
        )
    }

    /// The Job's newest finished Run other than `except`.
    pub(crate) fn last_finished_run(&self, job_id: &str, except: i64) -> Result<Option<Run>> {
        self.db.query_opt(
            &format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE job_id = ?1 AND id != ?2 \
                 AND outcome IS NOT NULL ORDER BY id DESC LIMIT 1"
            ),
            params![job_id, except],
            run_from_row,
        )
    }

    /// Runs still in progress (at most one, unless a tick died).
    pub(crate) fn running_runs(&self) -> Result<Vec<Run>> {
        self.runs_where("outcome IS NULL ORDER BY id", params![])
    }

    /// Runs that ended at or after `since`, newest first: what happened overnight.
    pub(crate) fn runs_ended_since(&self, since: DateTime<Utc>) -> Result<Vec<Run>> {
        self.runs_where(
            // Ordered by the index's own column, so that SQLite walks runs_ended instead
            // of scanning every Run by id.
            "outcome IS NOT NULL AND ended_at >= ?1 ORDER BY ended_at DESC, id DESC",
            params![rfc3339(since)],
        )
    }

    /// Runs that went on at any time from `since` to `until` (started by `until`, and
    /// started, ended or still running after `since`),
    /// oldest first: what a report covers.
    pub(crate) fn runs_touching(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Vec<Run>> {
        self.runs_where(
            "started_at <= ?2 AND (started_at >= ?1 OR ended_at >= ?1 OR outcome IS NULL) \
             ORDER BY started_at, id",
            params![rfc3339(since), rfc3339(until)],
        )
    }

    fn runs_where(&self, clause: &str, params: &[&dyn ToParam]) -> Result<Vec<Run>> {
        self.db.query_map(
            &format!("SELECT {RUN_COLUMNS} FROM runs WHERE {clause}"),
            params,
            run_from_row,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Cause;
    use crate::model::NewJob;

    #[test]
    fn a_runs_row_names_its_executor_and_an_older_one_reads_local() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("owl.db")).unwrap();
        let now = crate::clock::parse("2026-11-30T03:00:00Z").unwrap();
        for id in ["a", "b"] {
            store.insert_job(&job(id), now).unwrap();
        }
        store
            .start_run(&start("a", None, ExecutorKind::Sandbox, now))
            .unwrap();
        // On another Account: one live Run per Account is a constraint of the database.
        let mut on_two = start("b", None, ExecutorKind::Sandbox, now);
        on_two.account = "two".into();
        let older = store.start_run(&on_two).unwrap();
        // A Run from before schema 16 has no executor on its row.
        store
            .db
            .execute(
                "UPDATE runs SET executor = NULL WHERE id = ?1",
                params![older],
            )
            .unwrap();
        let kinds: Vec<_> = store
            .running_identities()
            .unwrap()
            .into_iter()
            .map(|r| (r.job_id, r.executor))
            .collect();
        assert_eq!(
            kinds,
            [
                ("a".to_string(), ExecutorKind::Sandbox),
                ("b".to_string(), ExecutorKind::Local)
            ]
        );
    }

    fn start(
        job: &str,
        budget_usd: Option<f64>,
        executor: ExecutorKind,
        now: DateTime<Utc>,
    ) -> RunStart {
        RunStart {
            job_id: job.into(),
            account: "work".into(),
            agent_version: None,
            owl_pid: 1,
            owl_start_time: None,
            boot_id: None,
            started_at: now,
            head_before: None,
            budget_usd,
            executor,
            machine: "here".into(),
            lease: std::time::Duration::from_secs(60),
        }
    }

    fn job(id: &str) -> NewJob {
        NewJob {
            id: id.into(),
            name: None,
            prompt: "p".into(),
            repo: "/r".into(),
            base: "HEAD".into(),
            base_commit: Some("0".repeat(40)),
            account: None,
            priority: 0,
            max_runs: 10,
            max_run_time_secs: 60,
            max_budget_usd: Some(0.5),
            max_job_budget_usd: None,
            permission_mode: "dontAsk".into(),
            allowed_tools: vec![],
            disallowed_tools: vec![],
            allow_hosts: vec![],
            model: None,
            check: None,
            after: vec![],
            base_after: None,
            machine: None,
        }
    }

    #[test]
    fn the_sql_sums_agree_with_the_model() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("owl.db")).unwrap();
        let now = crate::clock::parse("2026-11-30T03:00:00Z").unwrap();
        store.insert_job(&job("j"), now).unwrap();
        // (cost, cap, cause): a result, a kill without one, an outage, an old Run, in progress.
        let runs = [
            (Some(0.25), Some(0.5), Some(Cause::Job)),
            (None, Some(0.5), Some(Cause::Job)),
            (Some(0.0), Some(0.5), Some(Cause::Outage)),
            (Some(0.1), None, None),
        ];
        let start = |cap| start("j", cap, ExecutorKind::Local, now);
        for (cost, cap, cause) in runs {
            let id = store.start_run(&start(cap)).unwrap().unwrap();
            let finish = RunFinish {
                outcome: Some(RunOutcome::Failed),
                cost_usd: cost,
                cause,
                ..Default::default()
            };
            store
                .finish_run(id, &finish, JobState::Queued, None, None, now)
                .unwrap();
        }
        // And one still in progress: it counts for neither.
        store.start_run(&start(Some(0.5))).unwrap();
        let all = store.runs_of("j").unwrap();
        let counted = all.iter().filter(|r| r.counts()).count() as u32;
        assert_eq!(store.counted_runs("j").unwrap(), counted);
        assert_eq!(counted, 3);
        // The count on the Job's row, kept by the database, agrees (what listings read).
        let mut listed = Vec::new();
        store
            .for_each_listed_job(true, |j| {
                listed.push(j.counted_runs);
                Ok(())
            })
            .unwrap();
        assert_eq!(listed, [counted as usize]);
        let cost = crate::model::total_cost(&all);
        assert!((store.job_cost("j").unwrap() - cost).abs() < 1e-9);
        assert!((cost - 0.85).abs() < 1e-9, "{cost}");
        let last = store.last_finished_run("j", 5).unwrap().unwrap();
        assert_eq!(last.id, 4);
    }
}
