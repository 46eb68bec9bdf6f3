//! What is checked before every Run: the agent CLI's version against what owl has tested, the Executor ready, and the login as the CLI tells it.

use super::*;

/// The agent CLI's version, from its `--version`, before every Run: a version manager's
/// shim or a wrapper script is the same file whatever version runs behind it, so no file
/// identity can stand in for asking (a node start of a second, beside a Run of minutes).
/// An idle tick never gets here. A verdict holds for the pair of file and version.
pub(super) fn agent_version(
    ctx: &Ctx,
    store: &mut Store,
    executor: &dyn crate::supervise::Executor,
    account: &str,
    driver: &dyn Driver,
    command: &std::path::Path,
    now: DateTime<Utc>,
) -> Result<Result<String, driver::AgentCliError>> {
    let account_cfg = &ctx.config.accounts[account];
    let identity = driver::identity(command);
    let checked = match crate::supervise::check_agent(executor, driver, command, account_cfg) {
        Err(driver::AgentCliError::Untested { agent, version, .. }) => verified(
            ctx,
            store,
            account_cfg.driver,
            command,
            identity.as_deref(),
            agent,
            version,
            now,
        )?,
        other => other,
    };
    if let (Ok(version), Some(identity)) = (&checked, &identity) {
        store.set_agent_checked(account, identity, version, now)?;
    }
    Ok(checked)
}

/// A version outside the tested range runs only when this very binary passed the
/// conformance check: recorded by `owl doctor --conformance`, or (with
/// `agentVerification: auto`) run here, once per binary.
#[allow(clippy::too_many_arguments)]
pub(super) fn verified(
    ctx: &Ctx,
    store: &mut Store,
    kind: crate::config::DriverKind,
    command: &std::path::Path,
    identity: Option<&str>,
    agent: &'static str,
    version: String,
    now: DateTime<Utc>,
) -> Result<Result<String, driver::AgentCliError>> {
    use driver::AgentCliError::{FailedConformance, Unverified};
    let Some(identity) = identity else {
        return Ok(Err(Unverified { agent, version }));
    };
    let known = store.verdict(identity, &version)?;
    let verdict = match (known, ctx.config.agent_verification) {
        (Some(v), _) => v,
        (None, crate::config::AgentVerification::Off) => {
            return Ok(Err(Unverified { agent, version }))
        }
        (None, crate::config::AgentVerification::Auto) => {
            tracing::info!(
                "{agent} {version} is outside the tested range: checking its conformance"
            );
            let checks = crate::conformance::check(kind, command, None);
            let verdict = crate::store::Verdict {
                version: version.clone(),
                passed: checks.iter().all(|c| c.ok),
                failed: super::super::conformance::failed_names(&checks),
                checked_at: now,
            };
            store.set_verdict(identity, &verdict)?;
            verdict
        }
    };
    Ok(if verdict.passed {
        Ok(version)
    } else {
        Err(FailedConformance {
            agent,
            version,
            failed: verdict.failed.join("; "),
        })
    })
}

/// The agent CLI's version, checked, and the Executor ready to run it; else the Account's
/// problem is recorded and the Job stays queued.
#[allow(clippy::too_many_arguments)]
pub(super) fn checked_version(
    ctx: &Ctx,
    store: &mut Store,
    executor: &dyn Executor,
    account: &str,
    driver: &dyn Driver,
    command: &std::path::Path,
    job_id: &str,
    now: DateTime<Utc>,
) -> Result<String> {
    let checked = agent_version(ctx, store, executor, account, driver, command, now)?
        .map_err(crate::error::Error::from)
        .and_then(|version| {
            executor.ready().map_err(|why| {
                crate::error::Error::new(crate::error::ErrorKind::AgentCli, why.to_string())
            })?;
            Ok(version)
        });
    match checked {
        Ok(v) => {
            if store.account_note(account)?.agent_problem.is_some() {
                store.set_agent_problem(account, None, now)?;
            }
            Ok(v)
        }
        Err(why) => {
            // The Job stays queued: a CLI we have not tested must not spend the night.
            store.set_agent_problem(account, Some(&why.message), now)?;
            Err(anyhow::Error::new(why).context(format!("not starting job {job_id} on {account}")))
        }
    }
}

/// The CLI's own word on its `login` (local, no token; `None`: it cannot tell): no Run on
/// an Account it says has none, or only an API key where the ceilings need a plan. The idle
/// tick's answer if so.
pub(super) fn login_refused(
    store: &mut Store,
    login: Option<driver::Login>,
    account: &str,
    job_id: &str,
    account_cfg: &crate::config::Account,
    now: DateTime<Utc>,
) -> Result<Option<TickJson>> {
    let refused = login.and_then(|login| login.refusal(account_cfg.has_ceiling()));
    let Some(why) = refused else {
        return Ok(None);
    };
    let dir = account_cfg.credential_store.as_deref();
    store.set_not_logged_in_seen(account, Some(&why), dir, now)?;
    Ok(Some(TickJson {
        job_id: Some(job_id.to_string()),
        account: Some(account.to_string()),
        ..TickJson::said(
            TickAction::Idle,
            format!("{account}: {why}; job {job_id} stays queued"),
            false,
        )
    }))
}
