//! `owl add`: check the repository and the base, then queue a Job and print its id alone.

use std::io::Read;

use anyhow::{Context, Result};

use super::Ctx;
use crate::bad_input;
use crate::config::{did_you_mean, is_safe_name};
use crate::model::NewJob;

/// What `owl add` was asked.
#[derive(Debug, clap::Args)]
pub(crate) struct AddArgs {
    /// The git repository to work in (default: the current directory).
    #[arg(long, value_name = "PATH")]
    pub repo: Option<std::path::PathBuf>,
    /// The ref the Job's branch starts from, resolved to its commit now (default: HEAD; with
    /// one --after Job in the same repository, that Job's branch tip when it is done).
    #[arg(long, value_name = "REF")]
    pub base: Option<String>,
    /// Run only once this Job is done (verified, where it has a check); repeatable. With one
    /// in the same repository and no --base, the branch starts where that Job's ended.
    #[arg(long, value_name = "JOB")]
    pub after: Vec<String>,
    /// The Account to run on (default: defaults.account, else the one with the most headroom).
    #[arg(long, value_name = "NAME")]
    pub account: Option<String>,
    /// Higher runs first.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub priority: Option<i64>,
    /// Fail the Job after this many Runs without `done`.
    #[arg(long, value_name = "N")]
    pub max_runs: Option<u32>,
    /// The spending cap of each Run, in USD.
    #[arg(long, value_name = "X")]
    pub max_budget_usd: Option<f64>,
    /// The spending cap of all the Job's Runs together, in USD.
    #[arg(long, value_name = "X")]
    pub max_job_budget_usd: Option<f64>,
    /// A name for the Job, used as its id (letters, digits, '.', '_', '-').
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// The check the Job's work must pass to be done, as a shell would split it (quotes
    /// honoured, nothing expanded, no shell run): `--check 'cargo test --locked'`.
    /// Default: the repository's `check` in config.yaml, else `defaults.check`.
    #[arg(long, value_name = "CMD", conflicts_with = "no_check")]
    pub check: Option<String>,
    /// No check for this Job, whatever config.yaml says: the agent's word decides.
    #[arg(long)]
    pub no_check: bool,
    /// Read the prompt from a file.
    #[arg(long, value_name = "FILE", conflicts_with = "prompt")]
    pub prompt_file: Option<std::path::PathBuf>,
    /// The prompt; `-` reads it from stdin.
    pub prompt: Option<String>,
}

pub(super) fn run(ctx: &Ctx, args: AddArgs) -> Result<u8> {
    let prompt = read_prompt(&args)?;
    let repo = match &args.repo {
        Some(r) => r.clone(),
        None => std::env::current_dir().context("reading the current directory")?,
    };
    let base = args.base.clone().unwrap_or_else(|| "HEAD".into());
    let (repo, base_commit) = crate::workspace::check_repo(&repo, &base)
        .map_err(|e| crate::error::Error::bad_input(format!("{e:#}")))?;

    let defaults = &ctx.config.defaults;
    let account = args.account.clone().or_else(|| defaults.account.clone());
    if let Some(name) = &account {
        if !ctx.config.accounts.contains_key(name) {
            let known: Vec<&str> = ctx.config.accounts.keys().map(String::as_str).collect();
            bad_input!(
                "account '{name}' is not configured in {}{}",
                ctx.config.source,
                did_you_mean(name, &known)
            );
        }
    }
    check_limits(ctx, &args, account.as_deref())?;
    let check = job_check(ctx, &args, &repo)?;

    // Every check that can refuse comes before the state dir is created: exit 2 changes
    // nothing, not even on a fresh install.
    if let Some(name) = &args.name {
        check_name(name)?;
        if let Some(store) = ctx.read_store()? {
            if store.job_exists(name)? {
                bad_input!("a job named '{name}' exists already");
            }
        }
    }
    let after = match ctx.read_store()? {
        Some(store) => check_after(&store, &args.after)?,
        None if args.after.is_empty() => Vec::new(),
        None => bad_input!("--after {}: no jobs have been added yet", args.after[0]),
    };
    let mut store = ctx.open_store()?;
    let id = match &args.name {
        Some(name) => name.clone(),
        None => fresh_id(&store)?,
    };
    let job = NewJob {
        id: id.clone(),
        name: args.name.clone(),
        prompt,
        repo: repo.display().to_string(),
        base,
        base_commit,
        account,
        priority: args.priority.unwrap_or(defaults.priority),
        max_runs: args.max_runs.unwrap_or(defaults.max_runs),
        max_run_time_secs: defaults.max_run_time.as_secs(),
        max_budget_usd: args.max_budget_usd.or(defaults.max_budget_usd),
        max_job_budget_usd: args.max_job_budget_usd.or(defaults.max_job_budget_usd),
        permission_mode: defaults.permission_mode.clone(),
        allowed_tools: defaults.allowed_tools.clone(),
        disallowed_tools: defaults.disallowed_tools.clone(),
        model: defaults.model.clone(),
        check,
        base_after: stacked_on(&after, &repo, args.base.is_some()),
        after: after.into_iter().map(|j| j.id).collect(),
    };
    store.insert_job(&job, crate::clock::now()?)?;
    outln!("{id}");
    Ok(crate::error::EXIT_OK)
}

/// The budgets and `--max-runs`: numbers a Job can keep, and a per-Run cap only where the
/// Account's CLI can keep one.
fn check_limits(ctx: &Ctx, args: &AddArgs, account: Option<&str>) -> Result<()> {
    for (flag, value) in [
        ("--max-budget-usd", args.max_budget_usd),
        ("--max-job-budget-usd", args.max_job_budget_usd),
    ] {
        if value.is_some_and(|x| !x.is_finite() || x <= 0.0) {
            bad_input!("{flag} must be a finite number greater than 0");
        }
    }
    if args.max_budget_usd.is_some() {
        check_budget_cap(ctx, account)?;
    }
    if args.max_runs == Some(0) {
        bad_input!("--max-runs must be at least 1");
    }
    Ok(())
}

/// The Job's check, fixed now: `--check`, `--no-check`, or the configured default.
fn job_check(
    ctx: &Ctx,
    args: &AddArgs,
    repo: &std::path::Path,
) -> Result<Option<crate::model::Check>> {
    if args.no_check {
        return Ok(None);
    }
    let Some(line) = &args.check else {
        return Ok(ctx.config.default_check(repo));
    };
    let Some(argv) = shlex::split(line) else {
        bad_input!("--check '{line}' has an unclosed quote or a trailing backslash");
    };
    if argv.first().is_none_or(|p| p.is_empty()) {
        bad_input!("--check is empty: name the command to run (or use --no-check)");
    }
    Ok(Some(crate::model::Check {
        argv,
        timeout_secs: ctx.config.check_timeout(repo).as_secs(),
    }))
}

/// The Jobs `--after` names, each known (by id or name) and not cancelled: a cancelled
/// one would never be done.
fn check_after(store: &crate::store::Store, after: &[String]) -> Result<Vec<crate::model::Job>> {
    let mut jobs: Vec<crate::model::Job> = Vec::new();
    for id in after {
        let Some(job) = store.job(id)? else {
            let mut known = Vec::new();
            store.for_each_listed_job(true, |j| {
                known.push(j.id.to_string());
                Ok(())
            })?;
            let known: Vec<&str> = known.iter().map(String::as_str).collect();
            bad_input!("--after {id}: no such job{}", did_you_mean(id, &known));
        };
        if job.state == crate::model::JobState::Cancelled {
            bad_input!("--after {id}: job {id} is cancelled, so it will never be done");
        }
        if !jobs.iter().any(|j| j.id == job.id) {
            jobs.push(job);
        }
    }
    Ok(jobs)
}

/// The Job a new one stacks on: with no `--base` and exactly one `--after` Job in the same
/// repository, that one (its branch tip, resolved at the first Run).
fn stacked_on(
    after: &[crate::model::Job],
    repo: &std::path::Path,
    explicit_base: bool,
) -> Option<String> {
    let same: Vec<&crate::model::Job> = after
        .iter()
        .filter(|j| std::path::Path::new(&j.repo) == repo)
        .collect();
    match (explicit_base, same.as_slice()) {
        (false, [one]) => Some(one.id.clone()),
        _ => None,
    }
}

/// A Job name is its id and its branch `owl/<name>`: refused unless both are safe.
fn check_name(name: &str) -> Result<()> {
    if !is_safe_name(name) {
        bad_input!(
            "job name '{name}' may hold only letters, digits, '.', '_' and '-', \
             must not start with '.' or '-', and must not contain '..'"
        );
    }
    // git's own reference-name rules: `a.` passes the check above and would fail only at
    // the first tick.
    if !git2::Reference::is_valid_name(&format!("refs/heads/owl/{name}")) {
        bad_input!("job name '{name}' cannot name a git branch (owl/{name})");
    }
    Ok(())
}

fn read_prompt(args: &AddArgs) -> Result<String> {
    let prompt = match (&args.prompt_file, args.prompt.as_deref()) {
        (Some(file), _) => std::fs::read_to_string(file).map_err(|e| {
            crate::error::Error::bad_input(format!("reading prompt file {}: {e}", file.display()))
        })?,
        (None, Some("-")) => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .context("reading the prompt from stdin")?;
            String::from_utf8(bytes).map_err(|e| {
                crate::error::Error::bad_input(format!(
                    "the prompt on stdin is not UTF-8 text (byte {})",
                    e.utf8_error().valid_up_to()
                ))
            })?
        }
        (None, Some(p)) => p.to_string(),
        (None, None) => {
            bad_input!("owl add needs a prompt: PROMPT, --prompt-file FILE, or - for stdin")
        }
    };
    if prompt.trim().is_empty() {
        bad_input!("the prompt is empty");
    }
    Ok(prompt)
}

/// A short random id, like a git short hash: typable, and unlikely to collide with a
/// branch left by an earlier state dir.
fn fresh_id(store: &crate::store::Store) -> Result<String> {
    let mut urandom = std::fs::File::open("/dev/urandom").context("opening /dev/urandom")?;
    loop {
        let mut bytes = [0u8; 3];
        urandom.read_exact(&mut bytes)?;
        let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        // An id of digits only would read like a Run id.
        if id.bytes().all(|b| b.is_ascii_digit()) || store.job_exists(&id)? {
            continue;
        }
        return Ok(id);
    }
}

/// `--max-budget-usd` is a cap the agent CLI keeps (Claude Code's own flag): refused for a
/// Job whose Account's Driver cannot hand it on, or, with no Account named, when no
/// configured Account can. Stored, it would promise what no one keeps.
fn check_budget_cap(ctx: &Ctx, account: Option<&str>) -> Result<()> {
    let keeps =
        |a: &crate::config::Account| crate::driver::for_kind(a.driver).capabilities().budget_cap;
    let accounts = &ctx.config.accounts;
    match account {
        Some(name) if !keeps(&accounts[name]) => bad_input!(
            "--max-budget-usd: account '{name}' runs {}, whose CLI takes no per-Run budget \
             cap, so none could be kept; leave it out, or use an Account on claude-code",
            accounts[name].driver.name()
        ),
        None if !accounts.values().any(keeps) => bad_input!(
            "--max-budget-usd: no configured Account's CLI takes a per-Run budget cap \
             (only claude-code does), so none could be kept; leave it out"
        ),
        _ => Ok(()),
    }
}
