//! The commands of DESIGN §4, one file each; this file holds what they share.

mod add;
mod cancel;
mod clean;
mod config_check;
mod conformance;
mod doctor;
mod jobs;
mod logs;
mod plan;
mod probe;
mod report;
mod shell;
mod show;
mod status;
mod tick;

use std::borrow::Cow;
use std::fs::{DirBuilder, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::cli::{Cli, Command, ConfigCommand};
use crate::config::Config;
use crate::model::Job;
use crate::store::{ListedJob, Store};

/// Runs one command; the returned code is the process's exit code.
pub(crate) fn dispatch(cli: Cli) -> Result<u8> {
    // What describes owl itself needs no config.
    let needs_config = !matches!(cli.command, Command::Completions { .. } | Command::Man);
    if !needs_config {
        return describe_owl(&cli.command);
    }
    let config = crate::config::load(cli.config.as_deref())?;
    check_capabilities(&config)?;
    let ctx = Ctx { config };
    match cli.command {
        Command::Tick {
            dry_run,
            json,
            job,
            ignore_ceiling,
        } => tick::run(
            &ctx,
            &tick::TickArgs {
                dry_run,
                json,
                job,
                ignore_ceiling,
            },
        ),
        Command::Status { json } => status::run(&ctx, json),
        Command::Add(args) => add::run(&ctx, args),
        Command::Jobs { all, json } => jobs::run(&ctx, all, json),
        Command::Show { job, json } => show::run(&ctx, &job, json),
        Command::Logs { run, raw, follow } => logs::run(&ctx, &run, raw, follow),
        Command::Cancel { job } => cancel::cancel(&ctx, &job),
        Command::Requeue {
            job,
            max_job_budget_usd,
        } => cancel::requeue(&ctx, &job, max_job_budget_usd),
        Command::Clean { job, finished } => clean::run(&ctx, job.as_deref(), finished),
        Command::Config(ConfigCommand::Check) => config_check::run(&ctx),
        Command::Doctor {
            conformance: false,
            json,
            ..
        } => doctor::run(&ctx, json),
        Command::Doctor {
            conformance: true,
            account,
            json,
            record,
        } => conformance::run(&ctx, account.as_deref(), json, record.as_deref()),
        Command::Probe { account, json } => probe::run(&ctx, account.as_deref(), json),
        Command::Report {
            since,
            night,
            json,
            html,
        } => report::run(
            &ctx,
            &report::ReportArgs {
                since,
                night,
                json,
                html,
            },
        ),
        Command::Completions { .. } | Command::Man => describe_owl(&cli.command),
    }
}

/// The commands that print owl's own description: completions and the man page.
fn describe_owl(command: &Command) -> Result<u8> {
    match command {
        Command::Completions { shell } => shell::completions(*shell),
        _ => shell::man(),
    }
}

/// What every command works from.
pub(crate) struct Ctx {
    pub config: Config,
}

impl Ctx {
    fn db_path(&self) -> PathBuf {
        self.config.state().db()
    }

    fn lock_path(&self) -> PathBuf {
        self.config.state().lock()
    }

    fn worktrees_dir(&self) -> PathBuf {
        self.config.state().worktrees()
    }

    /// What runs `account`'s agent: its Runs, and the CLI's checks and probes.
    fn executor_of(&self, account: &crate::config::Account) -> Box<dyn crate::supervise::Executor> {
        crate::supervise::executor_of(account, &self.config)
    }

    /// [`Ctx::worktrees_dir`] as printed.
    fn worktrees_text(&self) -> String {
        self.worktrees_dir().display().to_string()
    }

    /// Opens the database for a command that writes, creating the state dir (0700).
    fn open_store(&self) -> Result<Store> {
        ensure_private_dir(&self.config.state_dir)?;
        Store::open(&self.db_path())
    }

    /// Opens the database for a command that only reads; `None` before the first write.
    fn read_store(&self) -> Result<Option<Store>> {
        let dir = &self.config.state_dir;
        if dir.exists() && !dir.is_dir() {
            // Not "nothing yet": every tick would fail here.
            anyhow::bail!("state dir {} is not a directory", dir.display());
        }
        Store::open_existing(&self.db_path())
    }

    /// The Account named `only`, or every Account; a name not configured is bad input.
    fn accounts_named(&self, only: Option<&str>) -> Result<Vec<String>> {
        let accounts = &self.config.accounts;
        match only {
            Some(name) if accounts.contains_key(name) => Ok(vec![name.to_string()]),
            Some(name) => {
                let known: Vec<&str> = accounts.keys().map(String::as_str).collect();
                crate::bad_input!(
                    "no account '{name}' in {} (accounts: {}){}",
                    self.config.source,
                    known.join(", "),
                    crate::config::did_you_mean(name, &known)
                )
            }
            None => Ok(accounts.keys().cloned().collect()),
        }
    }

    /// Looks a Job up, or fails with a usage error naming it.
    fn job(&self, store: &Store, id: &str) -> Result<Job> {
        if let Some(job) = store.job(id)? {
            return Ok(job);
        }
        let mut ids = Vec::new();
        store.for_each_listed_job(true, |j| {
            ids.push(j.id.to_string());
            Ok(())
        })?;
        let known: Vec<&str> = ids.iter().map(String::as_str).collect();
        let hint = crate::config::did_you_mean(id, &known);
        Err(
            crate::error::Error::bad_input(format!("no job '{id}'{hint} (see `owl jobs --all`)"))
                .into(),
        )
    }
}

/// Refuses a config that asks a Driver for what it cannot do: above both the file format
/// and the Drivers, so that neither knows the other. A Driver without usage reporting
/// cannot be scheduled under a Ceiling at all, only reactively against rate-limit errors
/// (ADR-0020): `limits` on it would be a promise nobody keeps.
fn check_capabilities(config: &Config) -> Result<(), crate::error::Error> {
    check_capabilities_with(config, crate::driver::capabilities)?;
    // Each Driver an Account runs judges the settings it is handed; one no Account runs
    // judges nothing (Claude Code's permission modes do not bind a Codex-only night).
    let kinds: std::collections::BTreeSet<_> = config.accounts.values().map(|a| a.driver).collect();
    for kind in kinds {
        if let Err(why) = crate::driver::for_kind(kind).check_defaults(&config.defaults) {
            return Err(config.error_at(config.defaults.permission_mode_line, &why));
        }
    }
    Ok(())
}

fn check_capabilities_with(
    config: &Config,
    capabilities: impl Fn(crate::config::DriverKind) -> crate::driver::Capabilities,
) -> Result<(), crate::error::Error> {
    for (name, account) in &config.accounts {
        if account.limits.is_some() && !capabilities(account.driver).usage_reporting {
            return Err(config.error_at(
                account.limits_line,
                &format!(
                    "account '{name}' sets limits, but the {} driver cannot report \
                     utilization, so no ceiling could be kept; remove 'limits'",
                    account.driver.name()
                ),
            ));
        }
    }
    Ok(())
}

/// Creates a directory (and its parents) readable by the user alone.
pub(crate) fn ensure_private_dir(dir: &Path) -> Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))
}

/// Creates a new file readable by the user alone.
fn create_private_file(path: &Path) -> Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))
}

/// A Job as `jobs --json` and `show --json` print it (a stable shape, separate from the
/// row), borrowing the row's text: ten thousand Jobs are printed without copying them.
#[derive(Debug, Serialize)]
pub(crate) struct JobJson<'a> {
    pub id: &'a str,
    pub name: Option<&'a str>,
    pub state: &'static str,
    pub reason: Option<Cow<'a, str>>,
    pub repo: &'a str,
    pub base: &'a str,
    /// The commit `base` named when the Job was queued; the branch starts there.
    pub base_commit: Option<&'a str>,
    pub branch: Joined<'a>,
    pub worktree: Joined<'a>,
    pub account: Option<&'a str>,
    pub priority: i64,
    pub not_before: Option<Cow<'a, str>>,
    /// How many Runs the Job has had (`runs` in `show --json` is the list of them).
    pub run_count: usize,
    /// How many of them count toward `max_runs`: a Run that was not the Job's doing (a
    /// ceiling, a missing login, an outage) does not.
    pub counted_runs: usize,
    pub max_runs: u32,
    pub created_at: Cow<'a, str>,
    pub updated_at: Cow<'a, str>,
    pub prompt: &'a str,
}

impl<'a> JobJson<'a> {
    /// A Job read whole; `worktrees` is [`Ctx::worktrees_dir`] as text.
    fn new(worktrees: &'a str, job: &'a Job, runs: &[crate::model::Run]) -> JobJson<'a> {
        JobJson {
            id: &job.id,
            name: job.name.as_deref(),
            state: job.state.as_str(),
            reason: job.reason.as_ref().map(|r| r.to_string().into()),
            repo: &job.repo,
            base: &job.base,
            base_commit: job.base_commit.as_deref(),
            branch: Joined(crate::model::BRANCH_PREFIX, "", &job.id),
            worktree: Joined(worktrees, "/", &job.id),
            account: job.account.as_deref(),
            priority: job.priority,
            not_before: job.not_before.map(|t| crate::clock::rfc3339(t).into()),
            run_count: runs.len(),
            counted_runs: runs.iter().filter(|r| r.counts()).count(),
            max_runs: job.max_runs,
            created_at: crate::clock::rfc3339(job.created_at).into(),
            updated_at: crate::clock::rfc3339(job.updated_at).into(),
            prompt: &job.prompt,
        }
    }

    /// A Job as listed, times printed as stored.
    fn listed(worktrees: &'a str, job: &ListedJob<'a>) -> JobJson<'a> {
        use crate::clock::printable;
        JobJson {
            id: job.id,
            name: job.name,
            state: job.state.as_str(),
            reason: job.reason.map(Cow::Borrowed),
            repo: job.repo,
            base: job.base,
            base_commit: job.base_commit,
            branch: Joined(crate::model::BRANCH_PREFIX, "", job.id),
            worktree: Joined(worktrees, "/", job.id),
            account: job.account,
            priority: job.priority,
            not_before: job.not_before.map(printable),
            run_count: job.run_count,
            counted_runs: job.counted_runs,
            max_runs: job.max_runs,
            created_at: printable(job.created_at),
            updated_at: printable(job.updated_at),
            prompt: job.prompt,
        }
    }
}

impl JobJson<'_> {
    /// `1/5`, or with Runs that did not count `0/5 counted, 1 not counted`: `maxRuns`
    /// counts only the Job's own Runs, and so does the first figure.
    pub(crate) fn runs_text(&self) -> String {
        match self.run_count.saturating_sub(self.counted_runs) {
            0 => format!("{}/{}", self.counted_runs, self.max_runs),
            n => format!(
                "{}/{} counted, {n} not counted",
                self.counted_runs, self.max_runs
            ),
        }
    }
}

/// Three pieces of text printed as one string, built only as it is written.
#[derive(Debug)]
pub(crate) struct Joined<'a>(&'a str, &'a str, &'a str);

impl std::fmt::Display for Joined<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)?;
        f.write_str(self.1)?;
        f.write_str(self.2)
    }
}

impl Serialize for Joined<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Put together on the stack: formatting machinery costs more than the copy.
        let mut buf = [0u8; 512];
        let parts = [self.0, self.1, self.2];
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > buf.len() {
            return s.collect_str(self);
        }
        let mut at = 0;
        for part in parts {
            buf[at..at + part.len()].copy_from_slice(part.as_bytes());
            at += part.len();
        }
        // Whole UTF-8 strings one after another are UTF-8.
        s.serialize_str(std::str::from_utf8(&buf[..len]).unwrap_or_default())
    }
}

/// Prints JSON for scripts, pretty, with every control character escaped: serde_json
/// escapes C0 itself, and the formatter the rest, so no pass over the text is needed.
fn print_json(value: &impl Serialize) -> Result<()> {
    let mut out = Vec::with_capacity(4096);
    let mut ser =
        serde_json::Serializer::with_formatter(&mut out, crate::output::InertJson::default());
    value.serialize(&mut ser)?;
    out.push(b'\n');
    crate::output::write_raw(&out).context("writing JSON to stdout")?;
    Ok(())
}

fn opt_time(t: Option<DateTime<Utc>>) -> Option<String> {
    t.map(crate::clock::rfc3339)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Capabilities;

    #[test]
    fn limits_need_a_driver_that_reports_usage() {
        let config = crate::config::parse(
            "accounts:\n  work:\n    limits: {fiveHourMax: 60}\n  home: {}\n",
            "x.yaml",
        )
        .unwrap();
        let blind = |_| Capabilities {
            usage_reporting: false,
            usage_probe: false,
            budget_cap: false,
            tool_policy: false,
            graceful_interrupt: false,
            session_id: false,
        };
        let e = check_capabilities_with(&config, blind).unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::BadInput);
        let e = e.message;
        assert_eq!(
            e,
            "reading config x.yaml: line 3: account 'work' sets limits, but the claude-code \
             driver cannot report utilization, so no ceiling could be kept; remove 'limits'"
        );
        assert!(
            check_capabilities(&config).is_ok(),
            "claude-code reports usage"
        );
        let unlimited = crate::config::parse("accounts:\n  home: {}\n", "x.yaml").unwrap();
        assert!(check_capabilities_with(&unlimited, blind).is_ok());
    }

    #[test]
    fn a_permission_mode_is_judged_by_the_drivers_that_run_and_by_no_other() {
        let with = |mode: &str, drivers: &str| {
            let text = format!("defaults:\n  permissionMode: {mode}\naccounts:\n{drivers}");
            check_capabilities(&crate::config::parse(&text, "x.yaml").unwrap())
        };
        // Claude Code refuses `bypassPermissions` (nobody watches an unattended Run).
        let e = with("bypassPermissions", "  work: {}\n").unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::BadInput);
        assert!(
            e.message.starts_with(
                "reading config x.yaml: line 2: permissionMode 'bypassPermissions' is not one of"
            ),
            "{}",
            e.message
        );
        let e = with("dontask", "  work: {}\n  cx: {driver: codex}\n").unwrap_err();
        assert!(
            e.message.contains("did you mean 'dontAsk'"),
            "{}",
            e.message
        );
        // A night of Codex and Gemini Accounts only: Claude Code's modes bind nothing (on
        // this morning's main this config was refused).
        with("dontask", "  cx: {driver: codex}\n  gm: {driver: gemini}\n").unwrap();
        with("acceptEdits", "  work: {}\n").unwrap();
    }
}
