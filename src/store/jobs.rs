//! Jobs: insert, look up, list and move between states.

use super::engine::{params, Db, Row};
use super::{json_vec, parse_json_vec, time_col, Store};
use crate::clock::rfc3339;
use crate::model::{Job, JobReason, JobState, NewJob};
use anyhow::{Context, Result};
use chrono::{DateTime, Utc};

const JOB_COLUMNS: &str = "id, name, prompt, repo, base, account, priority, max_runs, \
    max_run_time_secs, max_budget_usd, max_job_budget_usd, permission_mode, allowed_tools, \
    disallowed_tools, model, state, reason, not_before, created_at, updated_at, base_commit, \
    reason_data, check_argv, check_timeout_secs, base_after, after_ids, machine, allow_hosts";

fn job_from_row(r: &Row) -> Result<Job> {
    let state: String = r.get(15)?;
    Ok(Job {
        id: r.get(0)?,
        name: r.get(1)?,
        prompt: r.get(2)?,
        repo: r.get(3)?,
        base: r.get(4)?,
        account: r.get(5)?,
        priority: r.get(6)?,
        max_runs: r.get(7)?,
        max_run_time_secs: r.get::<i64>(8)?.max(0) as u64,
        max_budget_usd: r.get(9)?,
        max_job_budget_usd: r.get(10)?,
        permission_mode: r.get(11)?,
        allowed_tools: parse_json_vec(r.text(12)?),
        disallowed_tools: parse_json_vec(r.text(13)?),
        model: r.get(14)?,
        state: state.parse().unwrap_or(JobState::Failed),
        reason: JobReason::from_stored(r.opt_text(21)?, r.opt_text(16)?),
        not_before: time_col(r.get(17)?),
        created_at: time_col(r.get(18)?).unwrap_or_default(),
        updated_at: time_col(r.get(19)?).unwrap_or_default(),
        base_commit: r.get(20)?,
        check: check_from(r.get(22)?, r.get(23)?),
        base_after: r.get(24)?,
        machine: r.get(26)?,
        allow_hosts: parse_json_vec(r.text(27)?),
        // Filled by `Store::job` from `job_deps`.
        after: Vec::new(),
    })
}

/// A Job's check as stored: its argv as JSON and its timeout; `None` without one.
fn check_from(argv: Option<String>, timeout_secs: Option<i64>) -> Option<crate::model::Check> {
    let argv: Vec<String> = serde_json::from_str(argv.as_deref()?).ok()?;
    (!argv.is_empty()).then(|| crate::model::Check {
        argv,
        timeout_secs: timeout_secs.unwrap_or(0).max(1) as u64,
    })
}

/// A Job that waits for a person, as `status` lists it.
#[derive(Debug)]
pub(crate) struct AttentionJob {
    pub(crate) id: String,
    pub(crate) state: JobState,
    pub(crate) account: Option<String>,
    pub(crate) reason: Option<JobReason>,
}

/// A Job as `owl jobs` lists it: the columns it prints, borrowed from the row, times as
/// stored.
#[derive(Debug)]
pub(crate) struct ListedJob<'r> {
    pub(crate) id: &'r str,
    pub(crate) name: Option<&'r str>,
    pub(crate) prompt: &'r str,
    pub(crate) repo: &'r str,
    pub(crate) base: &'r str,
    pub(crate) account: Option<&'r str>,
    pub(crate) priority: i64,
    pub(crate) max_runs: u32,
    pub(crate) state: JobState,
    pub(crate) reason: Option<&'r str>,
    pub(crate) not_before: Option<&'r str>,
    pub(crate) created_at: &'r str,
    pub(crate) updated_at: &'r str,
    pub(crate) base_commit: Option<&'r str>,
    pub(crate) run_count: usize,
    /// Its Runs that count toward `maxRuns` (ended, and the Job's doing).
    pub(crate) counted_runs: usize,
    /// The check its work must pass to be done.
    pub(crate) check: Option<crate::model::Check>,
    /// What its latest check found, if one ran.
    pub(crate) last_check: Option<crate::model::CheckRecord>,
    /// The Jobs it waits for.
    pub(crate) after: Vec<String>,
    /// The Job whose branch tip it starts from, when its first Run resolves it.
    pub(crate) base_after: Option<&'r str>,
    /// The machine it runs on; `None`: this one (a store one machine has names none).
    pub(crate) machine: Option<&'r str>,
}

impl Store {
    /// Queues a new Job; fails when its id is taken.
    pub(crate) fn insert_job(&mut self, job: &NewJob, now: DateTime<Utc>) -> Result<()> {
        self.write(|tx| insert_one(tx, job, now))
    }

    /// Queues new Jobs all at once or none: one transaction (`owl add --from`).
    pub(crate) fn insert_jobs(&mut self, jobs: &[NewJob], now: DateTime<Utc>) -> Result<()> {
        self.write(|tx| {
            for job in jobs {
                insert_one(tx, job, now)?;
            }
            Ok(())
        })
    }

    /// The Jobs `id` waits for, in the order given.
    pub(crate) fn job_deps(&self, id: &str) -> Result<Vec<String>> {
        self.db.query_map(
            "SELECT after_id FROM job_deps WHERE job_id = ?1 ORDER BY rowid",
            params![id],
            |r| r.get(0),
        )
    }

    /// A stacked Job's base, resolved at its first Run: the commit its dependency's branch
    /// ended at, named as that branch.
    pub(crate) fn set_base(&mut self, id: &str, base: &str, commit: &str) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "UPDATE jobs SET base = ?2, base_commit = ?3 WHERE id = ?1",
                params![id, base, commit],
            )?;
            Ok(())
        })
    }

    /// Whether a Job id is taken.
    pub(crate) fn job_exists(&self, id: &str) -> Result<bool> {
        self.db
            .exists("SELECT 1 FROM jobs WHERE id = ?1", params![id])
    }

    /// One Job by id.
    pub(crate) fn job(&self, id: &str) -> Result<Option<Job>> {
        let job = self.db.query_opt(
            &format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1"),
            params![id],
            job_from_row,
        )?;
        match job {
            Some(mut job) => {
                job.after = self.job_deps(&job.id)?;
                Ok(Some(job))
            }
            None => Ok(None),
        }
    }

    /// The Jobs in any of `states`, in the order they were added: through the state index,
    /// so that a year of finished Jobs costs nothing here, and their dependencies in one
    /// more query however many there are.
    pub(crate) fn jobs_in(&self, states: &[JobState]) -> Result<Vec<Job>> {
        let states = state_list(states);
        let mut jobs: Vec<Job> = self.db.query_map(
            &format!("SELECT {JOB_COLUMNS} FROM jobs WHERE state IN ({states}) ORDER BY seq"),
            params![],
            job_from_row,
        )?;
        let index = positions(jobs.iter().map(|j| j.id.as_str()));
        self.db.for_each(
            &format!(
                "SELECT d.job_id, d.after_id FROM job_deps d JOIN jobs j ON j.id = d.job_id \
                 WHERE j.state IN ({states}) ORDER BY d.rowid"
            ),
            params![],
            |r| {
                if let Some(&i) = index.get(r.text(0)?) {
                    jobs[i].after.push(r.get(1)?);
                }
                Ok(())
            },
        )?;
        Ok(jobs)
    }

    /// The Jobs waiting for a person (blocked or failed), oldest first, with the columns
    /// `status` prints: one query however many there are.
    pub(crate) fn attention_jobs(&self) -> Result<Vec<AttentionJob>> {
        self.db.query_map(
            "SELECT id, state, account, reason, reason_data FROM jobs \
             WHERE state IN ('blocked', 'failed') ORDER BY seq",
            params![],
            |r| {
                Ok(AttentionJob {
                    id: r.get(0)?,
                    state: r.text(1)?.parse().unwrap_or(JobState::Failed),
                    account: r.get(2)?,
                    reason: JobReason::from_stored(r.opt_text(4)?, r.opt_text(3)?),
                })
            },
        )
    }

    /// The unfinished Jobs as the plan reads them: six columns, through the state index.
    pub(crate) fn plan_jobs(&self) -> Result<Vec<crate::model::PlanJob>> {
        let mut jobs = self.db.query_map(
            "SELECT seq, id, state, priority, account, not_before, reason, machine FROM jobs \
             WHERE state IN ('queued', 'running', 'waiting')",
            params![],
            |r| {
                let state = r.text(2)?;
                let job = crate::model::PlanJob {
                    id: r.get(1)?,
                    state: state.parse().unwrap_or(JobState::Failed),
                    priority: r.get(3)?,
                    account: r.get(4)?,
                    not_before: r.opt_text(5)?.and_then(crate::clock::parse),
                    reason: r.get(6)?,
                    after: Vec::new(),
                    machine: r.get(7)?,
                    elsewhere: None,
                };
                Ok((r.get::<i64>(0)?, job))
            },
        )?;
        // In the order they were added: sorted here, since the three states' runs of the
        // index each come in order but not merged.
        jobs.sort_unstable_by_key(|(seq, _)| *seq);
        let mut jobs: Vec<crate::model::PlanJob> = jobs.into_iter().map(|(_, job)| job).collect();
        // What each open Job waits for, with its state now.
        let deps = self.db.query_map(
            "SELECT d.job_id, d.after_id, a.state FROM job_deps d \
             JOIN jobs j ON j.id = d.job_id JOIN jobs a ON a.id = d.after_id \
             WHERE j.state IN ('queued', 'running', 'waiting') ORDER BY d.rowid",
            params![],
            |r| {
                Ok((
                    r.get::<String>(0)?,
                    r.get::<String>(1)?,
                    r.text(2)?.parse().unwrap_or(JobState::Failed),
                ))
            },
        )?;
        let index = positions(jobs.iter().map(|j| j.id.as_str()));
        for (job_id, after, state) in deps {
            if let Some(&i) = index.get(&job_id) {
                jobs[i].after.push((after, state));
            }
        }
        Ok(jobs)
    }

    /// Calls `each` with every Job (finished ones only when `all`) as listings show it, in
    /// order, one row at a time and borrowing the row's text: ten thousand Jobs are listed
    /// without holding them, and without copying or parsing what is printed as stored.
    pub(crate) fn for_each_listed_job(
        &self,
        all: bool,
        mut each: impl FnMut(&ListedJob<'_>) -> Result<()>,
    ) -> Result<()> {
        let filter = if all {
            ""
        } else {
            "WHERE state IN ('queued', 'running', 'waiting')"
        };
        let sql = format!(
            "SELECT id, name, prompt, repo, base, account, priority, max_runs, state, reason, \
             not_before, created_at, updated_at, base_commit, run_count, counted_runs, \
             check_argv, check_timeout_secs, last_check, \
             after_ids, base_after, machine \
             FROM jobs {filter} ORDER BY seq"
        );
        self.db.for_each(&sql, params![], |r| {
            let text = |i| r.text(i);
            let opt_text = |i| r.opt_text(i);
            each(&ListedJob {
                id: text(0)?,
                name: opt_text(1)?,
                prompt: text(2)?,
                repo: text(3)?,
                base: text(4)?,
                account: opt_text(5)?,
                priority: r.get(6)?,
                max_runs: r.get(7)?,
                state: text(8)?.parse().unwrap_or(JobState::Failed),
                reason: opt_text(9)?,
                not_before: opt_text(10)?,
                created_at: text(11)?,
                updated_at: text(12)?,
                base_commit: opt_text(13)?,
                run_count: r.get::<i64>(14)?.max(0) as usize,
                counted_runs: r.get::<i64>(15)?.max(0) as usize,
                check: check_from(r.get(16)?, r.get(17)?),
                last_check: opt_text(18)?.and_then(|c| serde_json::from_str(c).ok()),
                after: opt_text(19)?.map(parse_json_vec).unwrap_or_default(),
                base_after: opt_text(20)?,
                machine: opt_text(21)?,
            })
        })
    }

    /// Moves a Job to `state` only if it is in one of `from`; whether it moved. Every
    /// transition that may race a person's `cancel` (or a tick) goes through here.
    pub(crate) fn move_job(
        &mut self,
        id: &str,
        from: &[JobState],
        state: JobState,
        reason: Option<&JobReason>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        self.move_job_until(id, from, state, reason, None, now)
    }

    /// [`Store::move_job`], with no Run before `not_before`.
    pub(crate) fn move_job_until(
        &mut self,
        id: &str,
        from: &[JobState],
        state: JobState,
        reason: Option<&JobReason>,
        not_before: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let sql = format!(
            "UPDATE jobs SET state = ?2, reason = ?3, reason_data = ?5, not_before = ?6, \
             updated_at = ?4 WHERE id = ?1 AND state IN ({})",
            state_list(from)
        );
        self.write(|tx| {
            let n = tx.execute(
                &sql,
                params![
                    id,
                    state.as_str(),
                    reason.map(|r| r.to_string()),
                    rfc3339(now),
                    reason.map(JobReason::to_stored),
                    not_before.map(rfc3339)
                ],
            )?;
            Ok(n == 1)
        })
    }

    /// Sets how many Runs the Job may have in all, and its budget across Runs.
    pub(crate) fn set_job_limits(
        &mut self,
        id: &str,
        max_runs: u32,
        max_job_budget_usd: Option<f64>,
    ) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "UPDATE jobs SET max_runs = ?2, max_job_budget_usd = ?3 WHERE id = ?1",
                params![id, max_runs, max_job_budget_usd],
            )?;
            Ok(())
        })
    }

    /// The Job's state as stored right now (a cancel from another process shows here).
    pub(crate) fn job_state(&self, id: &str) -> Result<Option<JobState>> {
        let s: Option<String> =
            self.db
                .query_opt("SELECT state FROM jobs WHERE id = ?1", params![id], |r| {
                    r.get(0)
                })?;
        Ok(s.and_then(|s| s.parse().ok()))
    }
}

/// Inserts one new Job and what it waits for: `waiting` (after those Jobs) while any of
/// them is not done, else `queued`.
fn insert_one(tx: &Db, job: &NewJob, now: DateTime<Utc>) -> Result<()> {
    let mut unmet = 0;
    for after in &job.after {
        let done = tx.exists(
            "SELECT 1 FROM jobs WHERE id = ?1 AND state = 'done'",
            params![after],
        )?;
        unmet += usize::from(!done);
    }
    let (state, reason) = match unmet == 0 {
        true => (JobState::Queued, None),
        false => (
            JobState::Waiting,
            Some(JobReason::After {
                jobs: job.after.clone(),
            }),
        ),
    };
    tx.execute(
        &format!(
            "INSERT INTO jobs ({JOB_COLUMNS}) VALUES \
             (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?21,?22,NULL,?16,?16,?17,?23,?18,?19,?20,?24,?25,?26)"
        ),
        params![
            job.id,
            job.name,
            job.prompt,
            job.repo,
            job.base,
            job.account,
            job.priority,
            job.max_runs,
            job.max_run_time_secs as i64,
            job.max_budget_usd,
            job.max_job_budget_usd,
            job.permission_mode,
            json_vec(&job.allowed_tools),
            json_vec(&job.disallowed_tools),
            job.model,
            rfc3339(now),
            job.base_commit,
            job.check.as_ref().map(|c| json_vec(&c.argv)),
            job.check.as_ref().map(|c| c.timeout_secs as i64),
            job.base_after,
            state.as_str(),
            reason.as_ref().map(|r| r.to_string()),
            reason.as_ref().map(JobReason::to_stored),
            (!job.after.is_empty()).then(|| json_vec(&job.after)),
            job.machine,
            json_vec(&job.allow_hosts),
        ],
    )
    .with_context(|| format!("inserting job {}", job.id))?;
    for after in &job.after {
        tx.execute(
            "INSERT INTO job_deps (job_id, after_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            params![job.id, after],
        )?;
    }
    Ok(())
}

/// States as an SQL list: the words are owl's own, never input, so they are written into
/// the statement (one statement per set of states, prepared once).
/// Where each Job is in a list, by its id: for the rows of another table to find their Job.
fn positions<'a>(ids: impl Iterator<Item = &'a str>) -> std::collections::HashMap<String, usize> {
    ids.enumerate().map(|(i, id)| (id.to_string(), i)).collect()
}

impl Store {
    /// The Jobs not yet run that wait on `machine`, in the order they were added.
    pub(crate) fn unstarted_jobs_on(&self, machine: &str) -> Result<Vec<String>> {
        self.db.query_map(
            "SELECT id FROM jobs WHERE machine = ?1 AND state IN ('queued', 'waiting') \
             ORDER BY seq",
            params![machine],
            |r| r.get(0),
        )
    }

    /// Hands Jobs not running nor finished to machine `to` (with their repository's path
    /// there when it is another), all or none; the ids of those that moved.
    pub(crate) fn move_to_machine(
        &mut self,
        ids: &[String],
        to: &str,
        repo: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Vec<String>> {
        self.write(|tx| {
            let mut moved = Vec::new();
            for id in ids {
                let n = tx.execute(
                    "UPDATE jobs SET machine = ?2, repo = COALESCE(?3, repo), updated_at = ?4 \
                     WHERE id = ?1 AND state IN ('queued', 'waiting')",
                    params![id, to, repo, rfc3339(now)],
                )?;
                if n == 1 {
                    moved.push(id.clone());
                }
            }
            Ok(moved)
        })
    }
}

fn state_list(states: &[JobState]) -> String {
    let words: Vec<String> = states.iter().map(|s| format!("'{}'", s.as_str())).collect();
    match words.is_empty() {
        true => "NULL".into(),
        false => words.join(", "),
    }
}
