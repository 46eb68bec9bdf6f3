//! Starting a Run: the Job's working copy made for its Executor, and the answer when the Job moved since the pick.

use super::*;

/// The Job's working copy, made for its Executor; a copy that cannot be made blocks the Job
/// (one a Run tampered with) or sets it aside a while with its reason.
pub(super) fn working_copy(
    ctx: &Ctx,
    store: &mut Store,
    executor: &dyn Executor,
    job: &Job,
    now: DateTime<Utc>,
) -> Result<Workspace> {
    let stacked = stack_base(store, job)?;
    let job = stacked.as_ref().unwrap_or(job);
    let prepared = if executor.own_clone() {
        crate::workspace::prepare_clone(job, &ctx.worktrees_dir(), &ctx.config.commit_author)
    } else {
        crate::workspace::prepare(job, &ctx.worktrees_dir(), &ctx.config.commit_author)
    };
    match prepared {
        Ok(w) => Ok(w),
        Err(e) if e.downcast_ref::<crate::workspace::Tampered>().is_some() => {
            // What a Run before left in the clone: the user's to look at, not a tick's.
            let why = JobReason::Blocked {
                summary: format!("{e:#}"),
            };
            let from = [JobState::Queued, JobState::Waiting];
            store.move_job(&job.id, &from, JobState::Blocked, Some(&why), now)?;
            Err(e.context(format!("job {} is blocked", job.id)))
        }
        Err(e) => {
            // A locked index, an unmounted disk, an I/O error: nothing the Job did, and
            // likely gone by a later tick. The Job is set aside a while with its reason,
            // so that the Jobs behind it run meanwhile; the exit code says it.
            let why = JobReason::WorktreeFailed {
                error: format!("{e:#}"),
            };
            let from = [JobState::Queued, JobState::Waiting];
            let until = now + chrono::Duration::from_std(PREPARE_RETRY).unwrap_or_default();
            store.move_job_until(
                &job.id,
                &from,
                JobState::Waiting,
                Some(&why),
                Some(until),
                now,
            )?;
            Err(e.context(format!(
                "job {} waits until {}",
                job.id,
                crate::clock::local_hm(until)
            )))
        }
    }
}

/// A stacked Job's first Run starts where the Job it waits for ended: that Job's branch
/// tip, resolved now and recorded as its base; `None` when there is nothing to resolve (not
/// stacked, or its branch is made already).
fn stack_base(store: &mut Store, job: &Job) -> Result<Option<Job>> {
    let Some(dep) = &job.base_after else {
        return Ok(None);
    };
    let repo = std::path::Path::new(&job.repo);
    if crate::workspace::branch_tip(repo, &job.branch())?.is_some() {
        return Ok(None);
    }
    let branch = format!("{}{dep}", crate::model::BRANCH_PREFIX);
    let commit = match crate::workspace::branch_tip(repo, &branch)? {
        Some(commit) => commit,
        // Merged and deleted, as one does: the work is where its last Run left it, a commit
        // owl recorded, still in the repository (now in the branch it was merged into).
        None => match last_recorded_commit(store, dep)? {
            Some(commit) if crate::workspace::has_commit(repo, &commit) => commit,
            recorded => {
                // Never silently unstacked: without the work it waits for, it is not the Job.
                let why = JobReason::Blocked {
                    summary: format!(
                        "it starts where job {dep} ended, but {branch} is not in {} and {}; \
                         queue it again with --base naming where that work is",
                        job.repo,
                        match recorded {
                            Some(c) => format!("{dep}'s last commit {c} is not there either"),
                            None => format!("owl recorded no commit of {dep}'s"),
                        }
                    ),
                };
                let from = [JobState::Queued, JobState::Waiting];
                store.move_job(
                    &job.id,
                    &from,
                    JobState::Blocked,
                    Some(&why),
                    crate::clock::now()?,
                )?;
                anyhow::bail!("job {} is blocked: {why}", job.id);
            }
        },
    };
    store.set_base(&job.id, &branch, &commit)?;
    Ok(Some(Job {
        base: branch,
        base_commit: Some(commit),
        ..job.clone()
    }))
}

/// The commit a Job's last Run left its branch at, as owl recorded it.
fn last_recorded_commit(store: &Store, job_id: &str) -> Result<Option<String>> {
    Ok(store
        .runs_of(job_id)?
        .into_iter()
        .rev()
        .find_map(|r| r.head_after))
}

/// A cancel (or another hand) moved the Job since the pick: no agent starts.
pub(super) fn not_started(store: &Store, job: &Job, account: String) -> Result<TickJson> {
    let state = store.job_state(&job.id)?;
    // Still queued: another machine's Run took the Account since the pick (one live Run
    // per Account is the store's own constraint).
    let taken = match state {
        Some(JobState::Queued | JobState::Waiting) => store
            .running_runs()?
            .into_iter()
            .find(|r| r.account == account),
        _ => None,
    };
    let reason = match &taken {
        Some(run) => format!(
            "account {account} was taken by run {} of job {}{} since the pick; nothing was \
             started",
            run.id,
            run.job_id,
            run.machine
                .as_deref()
                .map(|m| format!(" on machine {m}"))
                .unwrap_or_default()
        ),
        None => format!(
            "job {} is {} since it was picked; nothing was started",
            job.id,
            state.map_or("gone".into(), |s| s.to_string())
        ),
    };
    let busy = taken.is_some();
    Ok(TickJson {
        job_id: Some(job.id.clone()),
        account: Some(account),
        job_state: state,
        ..TickJson::said(
            if busy {
                TickAction::Busy
            } else {
                TickAction::Idle
            },
            reason,
            false,
        )
    })
}

/// A Run recorded as started: what the rest of the tick needs of it.
pub(super) struct StartedRun<'a> {
    pub(crate) job: &'a Job,
    pub(crate) account: &'a str,
    pub(crate) run_id: i64,
    pub(crate) budget_usd: Option<f64>,
}

/// Readies owl to supervise and records the Run as started, with the budget it gets; `None`
/// when the Job moved since the pick (nothing is started). A stop signal before it starts
/// nothing.
#[allow(clippy::too_many_arguments)]
pub(super) fn record_start(
    config: &crate::config::Config,
    store: &mut Store,
    executor: &dyn Executor,
    driver: &dyn Driver,
    job: &Job,
    account: &str,
    version: String,
    head_before: Option<String>,
    latch: &crate::supervise::StopLatch,
    now: DateTime<Utc>,
) -> Result<Option<(i64, Option<f64>)>> {
    executor
        .prepare()
        .context("readying owl to supervise the Run")?;
    let supervisor = executor.supervisor();
    // A cap the Driver cannot hand the CLI is no cap: the Run gets none, and none is
    // counted as spent when it ends without a cost.
    if let Some(sig) = latch.fired() {
        anyhow::bail!(
            "owl received {sig} before job {} started; nothing was started",
            job.id
        );
    }
    let spent = store.job_cost(&job.id)?;
    let budget_usd = driver
        .capabilities()
        .budget_cap
        .then(|| crate::budget::run_budget(job, spent))
        .flatten();
    let started = store.start_run(&RunStart {
        job_id: job.id.clone(),
        account: account.to_string(),
        agent_version: Some(version),
        owl_pid: supervisor.pid.unwrap_or_default(),
        owl_start_time: supervisor.start_time,
        boot_id: supervisor.boot_id,
        started_at: now,
        head_before,
        budget_usd,
        executor: executor.kind(),
        machine: config.machine.clone(),
        lease: config.lease_length,
    })?;
    Ok(started.map(|run_id| (run_id, budget_usd)))
}
