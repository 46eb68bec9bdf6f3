//! `owl doctor --conformance`: proves each Account's agent CLI keeps the protocol owl relies on, and records the verdict for that binary.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use super::{print_json, Ctx};
use crate::conformance::Check;
use crate::driver::{self, AgentCliError, Driver};
use crate::store::Verdict;

#[derive(Debug, Serialize)]
struct ConformanceJson {
    account: String,
    command: String,
    version: Option<String>,
    passed: bool,
    checks: Vec<Check>,
}

pub(super) fn run(ctx: &Ctx, only: Option<&str>, json: bool, record: Option<&Path>) -> Result<u8> {
    let names = ctx.accounts_named(only)?;
    crate::conformance::end_cleanly_on_stop()?;
    let mut store = ctx.open_store()?;
    let now = crate::clock::now()?;
    let mut out = Vec::new();
    for name in names {
        let account = &ctx.config.accounts[&name];
        let d = driver::for_kind(account.driver);
        let command = &ctx.config.drivers.get(account.driver).command;
        let version = tested_or_not(
            ctx.executor_of(account).as_ref(),
            d.as_ref(),
            command,
            account,
        );
        let checks = match &version {
            Ok(_) => crate::conformance::check(account.driver, command, record),
            Err(why) => vec![Check::failed("the agent CLI runs", why.to_string())],
        };
        let passed = checks.iter().all(|c| c.ok);
        if let (Ok(version), Some(identity)) = (&version, driver::identity(command)) {
            let verdict = Verdict {
                version: version.clone(),
                passed,
                failed: failed_names(&checks),
                checked_at: now,
            };
            store.set_verdict(&identity, &verdict)?;
        }
        out.push(ConformanceJson {
            account: name,
            command: command.display().to_string(),
            version: version.ok(),
            passed,
            checks,
        });
    }
    let all_passed = out.iter().all(|c| c.passed);
    if json {
        print_json(&out)?;
    } else {
        for c in &out {
            outln!(
                "account {}: {} {}",
                c.account,
                c.command,
                c.version.as_deref().unwrap_or("(no version)")
            );
            for check in &c.checks {
                let mark = if check.ok { "ok  " } else { "FAIL" };
                outln!("  {mark} {} — {}", check.name, check.seen);
            }
            let verdict = if c.passed {
                "passed: owl runs this binary whatever its version"
            } else {
                "failed: owl does not run this binary outside its tested range"
            };
            outln!("  {verdict}");
        }
    }
    Ok(if all_passed { 0 } else { 1 })
}

/// The CLI's version, in the tested range or not; an error when it cannot be told.
pub(super) fn tested_or_not(
    executor: &dyn crate::supervise::Executor,
    d: &dyn Driver,
    command: &std::path::Path,
    account: &crate::config::Account,
) -> Result<String, AgentCliError> {
    match crate::supervise::check_agent(executor, d, command, account) {
        Ok(version) | Err(AgentCliError::Untested { version, .. }) => Ok(version),
        Err(e) => Err(e),
    }
}

/// The names of the checks that failed.
pub(super) fn failed_names(checks: &[Check]) -> Vec<String> {
    checks
        .iter()
        .filter(|c| !c.ok)
        .map(|c| c.name.to_string())
        .collect()
}
