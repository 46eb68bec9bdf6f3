//! `owl probe`: ask each Account's agent for its utilization and login now, without a prompt, and record what it says.

use anyhow::Result;
use serde::Serialize;

use super::{print_json, Ctx};
use crate::usage::ProbeOutcome;

#[derive(Debug, Serialize)]
struct ProbeJson {
    account: String,
    /// `observed`, `unknown`, `no_plan` or `failed`.
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

pub fn run(ctx: &Ctx, account: Option<&str>, json: bool) -> Result<u8> {
    let names: Vec<String> = match account {
        Some(name) if ctx.config.accounts.contains_key(name) => vec![name.to_string()],
        Some(name) => {
            let known: Vec<&str> = ctx.config.accounts.keys().map(String::as_str).collect();
            crate::bad_input!(
                "no account '{name}' in {} (accounts: {})",
                ctx.config.source,
                known.join(", ")
            )
        }
        None => ctx.config.accounts.keys().cloned().collect(),
    };
    super::ensure_private_dir(&ctx.config.state_dir)?;
    let mut store = ctx.open_store()?;
    let now = crate::clock::now()?;
    let mut out = Vec::new();
    for name in names {
        let outcome = super::tick::probe_and_record(ctx, &mut store, &name, now)?;
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
                ProbeOutcome::Failed(_) => "failed",
            },
            logged_in: outcome.logged_in(cfg),
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
                    let store = ctx.config.accounts[&p.account].credential_store.as_deref();
                    let fix = crate::schedule::login_command(store);
                    format!(" — not logged in: log in with `{fix}`, then /login")
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
