//! `owl probe`: ask each Account's agent for its utilization and login now, without a prompt, and record what it says.

use anyhow::Result;
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{print_json, Ctx};
use crate::driver;
use crate::store::Store;
use crate::usage::{self, ProbeOutcome};

#[derive(Debug, Serialize)]
struct ProbeJson {
    account: String,
    /// `observed`, `unknown`, `no_plan`, `unreachable` or `failed`.
    result: &'static str,
    /// `null` when the probe could not tell.
    logged_in: Option<bool>,
    /// What the probe learned, in words.
    detail: String,
    windows: Vec<WindowJson>,
}

#[derive(Debug, Serialize)]
struct WindowJson {
    window: String,
    percent: f64,
    resets_at: Option<String>,
}

/// What `owl probe` was asked.
#[derive(Debug, clap::Args)]
pub(crate) struct ProbeArgs {
    /// Only this Account.
    account: Option<String>,
    #[arg(long)]
    json: bool,
}

pub(super) fn run(ctx: &Ctx, args: &ProbeArgs) -> Result<u8> {
    let (account, json) = (args.account.as_deref(), args.json);
    let names = ctx.accounts_named(account)?;
    super::ensure_private_dir(&ctx.config.state_dir)?;
    let mut store = ctx.open_store()?;
    let now = crate::clock::now()?;
    // A login written since a "not logged in" finding is what this probe is asked to see.
    super::plan::notice_logins(ctx, &mut store, now)?;
    let mut out = Vec::new();
    for name in names {
        let outcome = probe_and_record(ctx, &mut store, &name, now)?;
        let cfg = &ctx.config.accounts[&name];
        let windows = match &outcome {
            ProbeOutcome::Observed(w) => w
                .iter()
                .map(|w| WindowJson {
                    window: w.window.clone(),
                    percent: crate::usage::round_percent(w.percent),
                    resets_at: w.resets_at.map(crate::clock::rfc3339),
                })
                .collect(),
            _ => Vec::new(),
        };
        out.push(ProbeJson {
            result: match outcome {
                ProbeOutcome::Observed(_) => "observed",
                ProbeOutcome::Unknown => "unknown",
                ProbeOutcome::NoPlan => "no_plan",
                ProbeOutcome::Unreachable(_) => "unreachable",
                ProbeOutcome::Failed(_) => "failed",
            },
            logged_in: outcome.logged_in(driver::for_kind(cfg.driver).uses_api_key(cfg)),
            detail: outcome.describe(),
            account: name,
            windows,
        });
    }
    if json {
        print_json(&out)?;
    } else {
        for p in &out {
            let login = match p.logged_in {
                Some(false) => {
                    let account = &ctx.config.accounts[&p.account];
                    let fix = driver::for_kind(account.driver).login_hint(account);
                    format!(" — not logged in: {fix}")
                }
                _ => String::new(),
            };
            outln!("{}: {}{login}", p.account, p.detail);
        }
    }
    let failed = out.iter().any(|p| p.logged_in != Some(true));
    Ok(if failed {
        crate::error::EXIT_FAILURE
    } else {
        0
    })
}

/// Probes one Account and records the figures, the login it shows, and the probe itself.
pub(super) fn probe_and_record(
    ctx: &Ctx,
    store: &mut Store,
    account: &str,
    now: DateTime<Utc>,
) -> Result<usage::ProbeOutcome> {
    let cfg = &ctx.config.accounts[account];
    let d = driver::for_kind(cfg.driver);
    let command = &ctx.config.drivers.get(cfg.driver).command;
    let executor = ctx.executor_of(cfg);
    let outcome = crate::supervise::probe::probe(
        executor.as_ref(),
        d.as_ref(),
        command,
        cfg,
        &ctx.config.state_dir,
    );
    record(ctx, store, account, &outcome, now)?;
    Ok(outcome)
}

/// What another command's probe learned (`doctor`'s), recorded as `owl probe` records it:
/// the next `status` and tick need not ask again.
pub(super) fn record_found(ctx: &Ctx, account: &str, outcome: &ProbeOutcome) -> Result<()> {
    super::ensure_private_dir(&ctx.config.state_dir)?;
    let mut store = ctx.open_store()?;
    let now = crate::clock::now()?;
    record(ctx, &mut store, account, outcome, now)
}

/// Records a probe's figures, the login it shows, an outage, and the probe itself.
fn record(
    ctx: &Ctx,
    store: &mut Store,
    account: &str,
    outcome: &ProbeOutcome,
    now: DateTime<Utc>,
) -> Result<()> {
    let cfg = &ctx.config.accounts[account];
    let d = driver::for_kind(cfg.driver);
    if let usage::ProbeOutcome::Observed(windows) = outcome {
        for s in usage::from_usage(
            windows,
            account,
            crate::model::SnapshotSource::Probe,
            None,
            now,
        ) {
            store.insert_snapshot(&s)?;
        }
    }
    match outcome.logged_in(d.uses_api_key(cfg)) {
        Some(false) => store.set_not_logged_in_seen(
            account,
            Some("not logged in: the agent has no plan login (found by a probe)"),
            cfg.credential_store.as_deref(),
            now,
        )?,
        Some(true) if store.account_note(account)?.not_logged_in.is_some() => {
            store.set_not_logged_in(account, None, now)?
        }
        _ => {}
    }
    if let usage::ProbeOutcome::Unreachable(why) = outcome {
        // An outage, as a Run's: the Account backs off before a Run is spent finding out.
        let outages = store.account_note(account)?.outages + 1;
        let until = now + crate::outcome::outage_backoff(outages);
        tracing::debug!("{account}: the API is unreachable ({why}); it waits until {until}");
        store.set_backoff(account, Some(until), outages, now)?;
    }
    store.set_last_probe(account, &outcome.describe(), now)?;
    Ok(())
}
