//! What a tick does once its Run ended: the git step (the clone resealed, the work brought
//! home), the settlement, one write, then the notify hook told.

use super::*;

/// Records the Run's end and moves its Job on: when the agent says done and the Job has a
/// check, the check runs first, and decides.
pub(super) fn record(
    ctx: &Ctx,
    store: &mut Store,
    run: &StartedRun,
    workspace: &mut Workspace,
    report: &RunReport,
    executor: &dyn Executor,
    latch: &crate::supervise::StopLatch,
) -> Result<(outcome::Classified, JobState)> {
    let StartedRun {
        job,
        account,
        run_id,
        ..
    } = *run;
    let now = crate::clock::now()?;
    // A sandboxed Run wrote its clone's `.git` too: before owl, outside the sandbox, commits
    // or reads there, what it planted is undone, or the clone is left alone whole.
    let sealed = workspace.reseal(job);
    let tampered = sealed.as_ref().err().map(|e| format!("{e:#}"));
    let (began_at, budget_usd) = store
        .run(run_id)?
        .map_or((None, None), |r| (r.head_before, r.budget_usd));
    let home = match &sealed {
        // Committed before the Handoff is read, so a Handoff the agent wrote but did not
        // commit still counts.
        Ok(_) => workspace.bring_home(
            job,
            &crate::workspace::HomeRun {
                author: &ctx.config.commit_author,
                run_id,
                began_at: began_at.as_deref(),
                mark: &ctx.config.state().publish_mark(&job.id, run_id),
            },
        ),
        Err(e) => {
            tracing::warn!("run {run_id}: {e:#}");
            crate::workspace::BroughtHome::default()
        }
    };
    let mut facts = crate::settlement::Facts {
        run_id,
        job,
        account_name: account,
        account: &ctx.config.accounts[account],
        counted_runs: store.counted_runs(&job.id)?,
        spent_usd: store.job_cost(&job.id).unwrap_or(0.0),
        budget_usd,
        handoff: workspace.handoff(),
        git: git_after(
            workspace,
            sealed.is_ok(),
            tampered,
            home,
            began_at.as_deref(),
        ),
        rejection_held: store.account_note(account)?.rate_limited_until.is_some(),
        check: None,
    };
    let (mut settlement, mut classified) = crate::settlement::settle(report, &facts, now);
    if settlement.job_state == JobState::Done {
        verify_done(ctx, store, run, workspace, executor, latch, &mut facts)?;
        (settlement, classified) = crate::settlement::settle(report, &facts, crate::clock::now()?);
    }
    let state = settlement.job_state;
    store.settle(
        &settlement,
        &ctx.config.state().kept_outcome(&job.id, run_id),
    )?;
    let credential_store = ctx.config.accounts[account].credential_store.as_deref();
    note_account(
        store,
        account,
        credential_store,
        run_id,
        &classified,
        report,
        now,
    )?;
    let state = store.job_state(&job.id)?.unwrap_or(state);
    Ok((classified, state))
}

/// What git shows once the Run's work is home: its head, the commits it added since
/// `began_at`, and what sealing its clone undid.
fn git_after(
    workspace: &Workspace,
    sealed: bool,
    tampered: Option<String>,
    home: crate::workspace::BroughtHome,
    began_at: Option<&str>,
) -> crate::settlement::GitAfter {
    let head_after = workspace.head();
    // What was undone when the clone was opened for this Run counts too (a tick that died
    // before sealing what the Run before planted).
    let neutralised =
        (sealed && !workspace.sealed().is_empty()).then(|| neutralised_note(workspace.sealed()));
    crate::settlement::GitAfter {
        tampered,
        safety_commit: home.safety_commit,
        published: home.not_published,
        commits: workspace.commits_added(began_at, head_after.as_deref()),
        head_after,
        neutralised,
        not_home: None,
    }
}

/// What decides a done: the work must be on the Job's branch in the repository (what the
/// user merges and what a hook pushes; anything else is neither checked nor called done),
/// then the Job's check, if it has one, at that very commit.
fn verify_done(
    ctx: &Ctx,
    store: &Store,
    run: &StartedRun,
    workspace: &mut Workspace,
    executor: &dyn Executor,
    latch: &crate::supervise::StopLatch,
    facts: &mut crate::settlement::Facts,
) -> Result<()> {
    let job = run.job;
    facts.git.not_home = match &facts.git.published {
        Some(why) => Some(why.clone()),
        // Not knowing is not knowing it is there: never verified on a guess.
        None => workspace
            .not_at_home(job)
            .unwrap_or_else(|e| Some(format!("{e:#}"))),
    };
    let (None, Some(check)) = (&facts.git.not_home, &job.check) else {
        return Ok(());
    };
    // At the branch's final commit (the safety net is in), where the agent worked.
    let mut record = run_check(ctx, run, check, workspace, executor, store, latch)?;
    record.commit = workspace.head();
    facts.check = Some(record);
    // The check ran the agent's code (the project's tests) with the clone's `.git` writable:
    // sealed again before anyone, the user's morning git included, opens it.
    if let Err(e) = workspace.reseal(job) {
        facts.git.tampered = Some(format!("{e:#}"));
    }
    facts.git.neutralised =
        (!workspace.sealed().is_empty()).then(|| neutralised_note(workspace.sealed()));
    Ok(())
}

/// Runs the Job's check in its working copy through the Account's Executor, its output
/// beside the Run's transcript.
fn run_check(
    ctx: &Ctx,
    run: &StartedRun,
    check: &crate::model::Check,
    workspace: &Workspace,
    executor: &dyn Executor,
    store: &Store,
    latch: &crate::supervise::StopLatch,
) -> Result<crate::model::CheckRecord> {
    let state = ctx.config.state();
    let files = state.run_files(&run.job.id, run.run_id);
    let output = create_private_file(&state.run_check_log(&run.job.id, run.run_id))?;
    let account = &ctx.config.accounts[run.account];
    let mut hosts = ctx.config.allow_hosts_of(account);
    hosts.extend(run.job.allow_hosts.iter().cloned());
    tracing::info!(
        "run {}: the agent says done; running its check `{}`",
        run.run_id,
        check.command_line()
    );
    let (env_set, env_remove) = crate::supervise::check::check_env(account);
    Ok(crate::supervise::check::run_check(
        executor,
        crate::supervise::check::CheckRun {
            check,
            place: crate::supervise::RunPlace {
                workspace: workspace.path(),
                files: &files,
                hosts: &hosts,
            },
            run_id: run.run_id,
            env_set,
            env_remove,
            output,
            latch,
            cancelled: &|| store.job_state(&run.job.id).ok().flatten() == Some(JobState::Cancelled),
        },
    ))
}

/// The Run's note on what owl undid in the clone before opening it.
pub(super) fn neutralised_note(undone: &[String]) -> String {
    format!(
        "owl undid what the Run planted in its clone's .git, which would run or redirect git \
         outside the sandbox: {}",
        undone.join(", ")
    )
}

/// Tells the notify command what the Run did: after it is recorded, so nothing the
/// command does (or fails to do) can change it.
pub(super) fn tell(
    ctx: &Ctx,
    store: &mut Store,
    notify: &crate::config::Notify,
    run: &StartedRun,
    outcome: &outcome::Classified,
    handoff: Option<&str>,
) -> Result<()> {
    let (run_id, account) = (run.run_id, run.account);
    let now = crate::clock::now()?;
    let Some(job) = store.job(&run.job.id)? else {
        return Ok(());
    };
    let (views, _) = super::super::plan::make_plan(ctx, store, now)?;
    let waiting_until = views
        .iter()
        .find(|a| a.name == account && !a.schedulable)
        .map(|a| a.until);
    let run = store.run(run_id)?;
    let cost = run.as_ref().and_then(|r| r.cost_usd);
    let check = run.and_then(|r| r.check);
    let until = match waiting_until {
        Some(until) => until,
        None => job.not_before.filter(|t| *t > now),
    };
    let payload = crate::notify::Payload {
        event: "",
        at: String::new(),
        job_id: job.id.clone(),
        job_name: job.name.clone(),
        job_state: job.state,
        job_reason: job
            .reason
            .as_ref()
            .map(|r| crate::text::truncate(&r.to_string(), crate::notify::WORDS_CAP)),
        repo: job.repo.clone(),
        branch: job.branch(),
        run_id,
        account: account.to_string(),
        outcome: outcome.outcome.to_string(),
        stop_reason: outcome
            .stop_reason
            .as_deref()
            .map(|s| crate::text::truncate(s, crate::notify::WORDS_CAP)),
        cost_usd: cost,
        until: until.map(crate::clock::rfc3339),
        prompt_summary: crate::text::truncate(job.prompt.trim().lines().next().unwrap_or(""), 200),
        handoff: handoff.map(|h| crate::text::truncate_bytes(h, crate::notify::HANDOFF_CAP)),
        verified: job.state == JobState::Done && check.as_ref().is_some_and(|c| c.passed()),
        check: check.as_ref().map(crate::notify::PayloadCheck::of),
    };
    let events =
        crate::notify::events_of(payload.job_state, waiting_until.is_some(), check.as_ref());
    crate::notify::send(notify, &events, &payload, now);
    Ok(())
}

/// Records what a Run tells of its Account beyond this Job (see `outcome::account_after_run`).
pub(super) fn note_account(
    store: &mut Store,
    account: &str,
    credential_store: Option<&std::path::Path>,
    run_id: i64,
    classified: &outcome::Classified,
    report: &RunReport,
    now: DateTime<Utc>,
) -> Result<()> {
    let note = store.account_note(account)?;
    let change = outcome::account_after_run(classified, report.reached_model, &note, now);
    if let Some(login) = change.not_logged_in {
        store.set_not_logged_in_seen(account, login.as_deref(), credential_store, now)?;
    }
    if let Some((until, outages)) = change.backoff {
        if let Some(until) = until {
            tracing::warn!("run {run_id}: the API was unavailable; {account} waits until {until}");
        }
        store.set_backoff(account, until, outages, now)?;
    }
    Ok(())
}
