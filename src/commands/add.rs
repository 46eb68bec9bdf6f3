//! `owl add`: check the repository and the base, then queue a Job and print its id alone.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::Ctx;
use crate::bad_input;
use crate::config::{did_you_mean, is_safe_name};
use crate::model::NewJob;

mod from;

/// What `owl add` was asked.
#[derive(Debug, clap::Args)]
pub(crate) struct AddArgs {
    /// The git repository to work in (default: the current directory).
    #[arg(long, value_name = "PATH")]
    pub(crate) repo: Option<std::path::PathBuf>,
    /// The ref the Job's branch starts from, resolved to its commit now (default: HEAD; with
    /// one --after Job in the same repository, that Job's branch tip when it is done).
    #[arg(long, value_name = "REF")]
    pub(crate) base: Option<String>,
    /// Run only once this Job is done (verified, where it has a check); repeatable. With one
    /// in the same repository and no --base, the branch starts where that Job's ended.
    #[arg(long, value_name = "JOB")]
    pub(crate) after: Vec<String>,
    /// The Account to run on (default: defaults.account, else the one with the most headroom).
    #[arg(long, value_name = "NAME")]
    pub(crate) account: Option<String>,
    /// Higher runs first.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = super::cli::parse_priority)]
    pub(crate) priority: Option<i64>,
    /// Fail the Job after this many Runs without `done`.
    #[arg(long, value_name = "N")]
    pub(crate) max_runs: Option<u32>,
    /// The spending cap of each Run, in USD.
    #[arg(long, value_name = "X")]
    pub(crate) max_budget_usd: Option<f64>,
    /// The spending cap of all the Job's Runs together, in USD.
    #[arg(long, value_name = "X")]
    pub(crate) max_job_budget_usd: Option<f64>,
    /// A name for the Job, used as its id (letters, digits, '.', '_', '-').
    #[arg(long, value_name = "NAME")]
    pub(crate) name: Option<String>,
    /// The check the Job's work must pass to be done, as a shell would split it (quotes
    /// honoured, nothing expanded, no shell run): `--check 'cargo test --locked'`.
    /// Default: the repository's `check` in config.yaml, else `defaults.check`.
    #[arg(long, value_name = "CMD", conflicts_with = "no_check")]
    pub(crate) check: Option<String>,
    /// No check for this Job, whatever config.yaml says: the agent's word decides.
    #[arg(long)]
    pub(crate) no_check: bool,
    /// Queue every Job of a plan file (YAML, or JSON Lines for `.jsonl`), all or none;
    /// prints their ids, one a line.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["prompt", "prompt_file", "name", "after", "check", "no_check", "base", "repo", "account", "priority", "max_runs", "max_budget_usd", "max_job_budget_usd"])]
    pub(crate) from: Option<PathBuf>,
    /// Read the prompt from a file.
    #[arg(long, value_name = "FILE", conflicts_with = "prompt")]
    pub(crate) prompt_file: Option<std::path::PathBuf>,
    /// The prompt; `-` reads it from stdin.
    pub(crate) prompt: Option<String>,
    /// The machine to run it on, sharing this store (default: this one). For another
    /// machine, --repo is the repository's absolute path there, and its base is resolved
    /// at its first Run.
    #[arg(long, value_name = "NAME")]
    pub(crate) machine: Option<String>,
    /// A host (`name` or `name:port`) its sandboxed Runs may reach beyond its Account's
    /// (repeat it for more).
    #[arg(long = "allow-host", value_name = "HOST")]
    pub(crate) allow_hosts: Vec<String>,
}

pub(super) fn run(ctx: &Ctx, args: AddArgs) -> Result<u8> {
    if let Some(file) = &args.from {
        return from::run(ctx, file);
    }
    if args.machine.is_some() && args.repo.is_none() {
        bad_input!("--machine needs --repo: the repository's absolute path on that machine");
    }
    let prompt = read_prompt(&args)?;
    let repo = match &args.repo {
        Some(r) => r.clone(),
        None => std::env::current_dir().context("reading the current directory")?,
    };
    let check = match (&args.check, args.no_check) {
        (_, true) => AskedCheck::Off,
        (Some(line), false) => AskedCheck::Line(line.clone()),
        (None, false) => AskedCheck::Default,
    };
    let asked = Asked {
        prompt,
        repo,
        base: args.base.clone(),
        account: args.account.clone(),
        priority: args.priority,
        max_runs: args.max_runs,
        max_budget_usd: args.max_budget_usd,
        max_job_budget_usd: args.max_job_budget_usd,
        name: args.name.clone(),
        check,
        after: args.after.clone(),
        machine: args.machine.clone(),
        allow_hosts: args.allow_hosts.clone(),
    };
    // Every check that can refuse comes before the state dir is created: exit 2 changes
    // nothing, not even on a fresh install.
    let known = ctx.read_store()?;
    let batch = Batch {
        store: known.as_ref(),
        earlier: &[],
    };
    let asked_repo = asked
        .repo
        .canonicalize()
        .unwrap_or_else(|_| asked.repo.clone());
    let mut job = match build(ctx, asked, &batch, Spelling::Flags)? {
        Ok(job) => job,
        Err(refused) => bad_input!("{}", refused.why),
    };
    if Path::new(&job.repo) != asked_repo {
        // Taken from a subdirectory, as git would: said, so that nobody wonders which.
        errln!(
            "owl: {} is inside the repository {}: the Job works there",
            asked_repo.display(),
            job.repo
        );
    }
    drop(known);
    let mut store = ctx.open_store()?;
    if job.id.is_empty() {
        job.id = fresh_id(&store, &[])?;
    }
    store.insert_job(&job, crate::clock::now()?)?;
    outln!("{}", job.id);
    Ok(crate::error::EXIT_OK)
}

/// A Job as asked for, by `owl add`'s flags or an entry of `owl add --from FILE`, before it
/// is checked.
#[derive(Debug, Default)]
pub(super) struct Asked {
    pub(crate) prompt: String,
    pub(crate) repo: PathBuf,
    pub(crate) base: Option<String>,
    pub(crate) account: Option<String>,
    pub(crate) priority: Option<i64>,
    pub(crate) max_runs: Option<u32>,
    pub(crate) max_budget_usd: Option<f64>,
    pub(crate) max_job_budget_usd: Option<f64>,
    pub(crate) name: Option<String>,
    pub(crate) check: AskedCheck,
    pub(crate) after: Vec<String>,
    /// The machine it runs on, when not this one's (`--machine`).
    pub(crate) machine: Option<String>,
    /// More hosts its sandboxed Runs may reach (`--allow-host`).
    pub(crate) allow_hosts: Vec<String>,
}

/// The check asked for.
#[derive(Debug, Default)]
pub(super) enum AskedCheck {
    /// The repository's, else `defaults.check`.
    #[default]
    Default,
    /// None: the agent's word decides.
    Off,
    /// A command line, split as a shell would.
    Line(String),
    /// argv.
    Argv(Vec<String>),
}

/// Why an asked Job is refused: the key at fault, as a plan file spells it (its line is
/// the one told), and why, in the words of the input it came from.
#[derive(Debug)]
pub(super) struct Refused {
    pub(crate) key: &'static str,
    pub(crate) why: String,
}

/// How a key is named back to the user: `--max-runs` on the command line, `maxRuns` in a
/// plan file.
#[derive(Debug, Clone, Copy)]
pub(super) enum Spelling {
    Flags,
    Keys,
}

impl Spelling {
    /// `key` (camelCase) as this input spells it.
    fn of(self, key: &str) -> String {
        match self {
            Spelling::Keys => key.to_string(),
            Spelling::Flags => {
                let mut flag = String::from("--");
                for c in key.chars() {
                    if c.is_ascii_uppercase() {
                        flag.push('-');
                    }
                    flag.push(c.to_ascii_lowercase());
                }
                flag
            }
        }
    }
}

/// The Jobs an asked one may name: the store's, and those of the same file made before it.
pub(super) struct Batch<'a> {
    pub(crate) store: Option<&'a crate::store::Store>,
    pub(crate) earlier: &'a [NewJob],
}

/// Checks an asked Job and makes it whole: its repository and base, Account, limits,
/// check, name and the Jobs it waits for. An unnamed Job's id is left empty, for the
/// caller to draw once the store is open.
pub(super) fn build(
    ctx: &Ctx,
    asked: Asked,
    batch: &Batch,
    spelling: Spelling,
) -> Result<Result<NewJob, Refused>> {
    let refuse = |key: &'static str, why: String| Ok(Err(Refused { key, why }));
    let base = asked.base.clone().unwrap_or_else(|| "HEAD".into());
    let machine = asked
        .machine
        .clone()
        .unwrap_or_else(|| ctx.config.machine.clone());
    let (repo, base_commit) = match machine == ctx.config.machine {
        true => match crate::workspace::check_repo(&asked.repo, &base) {
            Ok((repo, commit)) => (repo, Some(commit)),
            Err(e) => return refuse("repo", format!("{e:#}")),
        },
        false => match elsewhere(ctx, &machine, &asked.repo) {
            Ok(repo) => (repo, None),
            Err(why) => return refuse("machine", why),
        },
    };
    let defaults = &ctx.config.defaults;
    let account = asked.account.clone().or_else(|| defaults.account.clone());
    if let Some(name) = &account {
        if !ctx.config.accounts.contains_key(name) {
            let known: Vec<&str> = ctx.config.accounts.keys().map(String::as_str).collect();
            let why = format!(
                "account '{name}' is not configured in {}{}",
                ctx.config.source,
                did_you_mean(name, &known)
            );
            return refuse("account", why);
        }
    }
    if let Err(refused) = check_limits(ctx, &asked, account.as_deref(), spelling) {
        return Ok(Err(refused));
    }
    let check = match job_check(ctx, &asked.check, &repo, spelling) {
        Ok(check) => check,
        Err(why) => return refuse("check", why),
    };
    if let Some(name) = &asked.name {
        if let Err(why) = check_name(name, batch)? {
            return refuse("name", why);
        }
    }
    let after = match check_after(batch, &asked.after, spelling)? {
        Ok(after) => after,
        Err(why) => return refuse("after", why),
    };
    if let Err(why) = check_hosts(&asked.allow_hosts, spelling) {
        return refuse("allowHosts", why);
    }
    Ok(Ok(NewJob {
        id: asked.name.clone().unwrap_or_default(),
        name: asked.name.clone(),
        prompt: asked.prompt,
        repo: repo.display().to_string(),
        base,
        base_commit,
        account,
        priority: asked.priority.unwrap_or(defaults.priority),
        max_runs: asked.max_runs.unwrap_or(defaults.max_runs),
        max_run_time_secs: defaults.max_run_time.as_secs(),
        max_budget_usd: asked.max_budget_usd.or(defaults.max_budget_usd),
        max_job_budget_usd: asked.max_job_budget_usd.or(defaults.max_job_budget_usd),
        permission_mode: defaults.permission_mode.clone(),
        allowed_tools: defaults.allowed_tools.clone(),
        disallowed_tools: defaults.disallowed_tools.clone(),
        model: defaults.model.clone(),
        check,
        base_after: stacked_on(&after, &repo, asked.base.is_some()),
        after: after.into_iter().map(|(id, _)| id).collect(),
        // Its repository is that machine's path: it runs there. A store one machine has
        // names none: each Job on it is this machine's, whatever `machine:` says later.
        machine: (ctx.config.store.is_some() || machine != ctx.config.machine).then_some(machine),
        allow_hosts: asked.allow_hosts,
    }))
}

/// Each host a Job allows names a host (a name or address, with a port or not), not a URL.
fn check_hosts(hosts: &[String], spelling: Spelling) -> Result<(), String> {
    let is_host =
        |h: &String| !h.is_empty() && !h.contains("://") && !h.contains('/') && !h.contains(' ');
    let Some(host) = hosts.iter().find(|h| !is_host(h)) else {
        return Ok(());
    };
    let said = match spelling {
        Spelling::Flags => "--allow-host",
        Spelling::Keys => "allowHosts",
    };
    Err(format!(
        "{said} '{host}' is not a host: write a name or address, with ':port' or not \
         (index.crates.io, 127.0.0.1:8080)"
    ))
}

/// A Job's repository on another machine: a path there, which this machine cannot check,
/// on a store that machine shares.
fn elsewhere(ctx: &Ctx, machine: &str, repo: &Path) -> Result<std::path::PathBuf, String> {
    if ctx.config.store.is_none() {
        return Err(format!(
            "--machine {machine}: a Job for another machine needs a store machines share \
             (`store:` in {}), which this config has not",
            ctx.config.source
        ));
    }
    if !repo.is_absolute() {
        return Err(format!(
            "--machine {machine}: give --repo as the repository's absolute path on {machine}"
        ));
    }
    Ok(repo.to_path_buf())
}

/// The budgets and the most Runs: numbers a Job can keep, and a per-Run cap only where the
/// Account's CLI can keep one.
fn check_limits(
    ctx: &Ctx,
    asked: &Asked,
    account: Option<&str>,
    spelling: Spelling,
) -> Result<(), Refused> {
    for (key, value) in [
        ("maxBudgetUsd", asked.max_budget_usd),
        ("maxJobBudgetUsd", asked.max_job_budget_usd),
    ] {
        if value.is_some_and(|x| !x.is_finite() || x <= 0.0) {
            let why = format!(
                "{} must be a finite number greater than 0",
                spelling.of(key)
            );
            return Err(Refused { key, why });
        }
    }
    if asked.max_budget_usd.is_some() {
        if let Err(why) = check_budget_cap(ctx, account, &spelling.of("maxBudgetUsd")) {
            return Err(Refused {
                key: "maxBudgetUsd",
                why,
            });
        }
    }
    if asked.max_runs == Some(0) {
        let why = format!("{} must be at least 1", spelling.of("maxRuns"));
        return Err(Refused {
            key: "maxRuns",
            why,
        });
    }
    Ok(())
}

/// The Job's check, fixed now: the one asked for, none, or the configured default.
fn job_check(
    ctx: &Ctx,
    asked: &AskedCheck,
    repo: &std::path::Path,
    spelling: Spelling,
) -> Result<Option<crate::model::Check>, String> {
    let key = spelling.of("check");
    let mut argv = match asked {
        AskedCheck::Off => return Ok(None),
        AskedCheck::Default => return Ok(ctx.config.default_check(repo)),
        AskedCheck::Argv(argv) => argv.clone(),
        AskedCheck::Line(line) => match shlex::split(line) {
            Some(argv) => argv,
            None => {
                return Err(format!(
                    "{key} '{line}' has an unclosed quote or a trailing backslash"
                ))
            }
        },
    };
    if argv.first().is_none_or(|p| p.trim().is_empty()) {
        let off = match spelling {
            Spelling::Flags => "--no-check",
            Spelling::Keys => "noCheck: true",
        };
        return Err(format!(
            "{key} is empty: name the command to run (or use {off})"
        ));
    }
    argv[0] = crate::config::check_program(&argv[0]).map_err(|e| e.to_string())?;
    Ok(Some(crate::model::Check {
        argv,
        timeout_secs: ctx.config.check_timeout(repo).as_secs(),
    }))
}

/// The Jobs an asked one waits for, each known (the store's by id or name, or one of the
/// same file made before it) and not cancelled, a cancelled one would never be done: each
/// id with its repository.
fn check_after(
    batch: &Batch,
    after: &[String],
    spelling: Spelling,
) -> Result<Result<Vec<(String, String)>, String>> {
    let key = spelling.of("after");
    let mut found: Vec<(String, String)> = Vec::new();
    for id in after {
        let job = match batch.earlier.iter().find(|j| &j.id == id) {
            Some(j) => Some((
                j.id.clone(),
                j.repo.clone(),
                crate::model::JobState::Waiting,
            )),
            None => match batch.store {
                Some(store) => store.job(id)?.map(|j| (j.id, j.repo, j.state)),
                None => None,
            },
        };
        let Some((id, repo, state)) = job else {
            let mut known: Vec<String> = batch.earlier.iter().map(|j| j.id.clone()).collect();
            if let Some(store) = batch.store {
                store.for_each_listed_job(true, |j| {
                    known.push(j.id.to_string());
                    Ok(())
                })?;
            }
            let known: Vec<&str> = known.iter().map(String::as_str).collect();
            return Ok(Err(format!(
                "{key} {id}: no such job{}",
                did_you_mean(id, &known)
            )));
        };
        if state == crate::model::JobState::Cancelled {
            return Ok(Err(format!(
                "{key} {id}: job {id} is cancelled, so it will never be done"
            )));
        }
        if !found.iter().any(|(known, _)| *known == id) {
            found.push((id, repo));
        }
    }
    Ok(Ok(found))
}

/// The Job a new one stacks on: with no base asked for and exactly one Job it waits for
/// in the same repository, that one (its branch tip, resolved at the first Run).
fn stacked_on(
    after: &[(String, String)],
    repo: &std::path::Path,
    explicit_base: bool,
) -> Option<String> {
    let same: Vec<&(String, String)> = after
        .iter()
        .filter(|(_, r)| std::path::Path::new(r) == repo)
        .collect();
    match (explicit_base, same.as_slice()) {
        (false, [(id, _)]) => Some(id.clone()),
        _ => None,
    }
}

/// A Job name is its id and its branch `owl/<name>`: refused unless both are safe and it
/// is not taken.
fn check_name(name: &str, batch: &Batch) -> Result<Result<(), String>> {
    if !is_safe_name(name) {
        return Ok(Err(format!(
            "job name '{name}' may hold only letters, digits, '.', '_' and '-', \
             must not start with '.' or '-', and must not contain '..'"
        )));
    }
    // `owl logs 1` and every other place that takes a Run or a Job read a number as a
    // Run's id: a Job named so could never be named there.
    if name.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(Err(format!(
            "job name '{name}' is digits only, which owl reads as a Run's id: give it a letter"
        )));
    }
    // git's own reference-name rules: `a.` passes the check above and would fail only at
    // the first tick.
    if !git2::Reference::is_valid_name(&format!("refs/heads/owl/{name}")) {
        return Ok(Err(format!(
            "job name '{name}' cannot name a git branch (owl/{name})"
        )));
    }
    let taken = batch.earlier.iter().any(|j| j.id == name)
        || match batch.store {
            Some(store) => store.job_exists(name)?,
            None => false,
        };
    if taken {
        return Ok(Err(format!("a job named '{name}' exists already")));
    }
    Ok(Ok(()))
}

fn read_prompt(args: &AddArgs) -> Result<String> {
    let prompt = match (&args.prompt_file, args.prompt.as_deref()) {
        (Some(file), _) => {
            read_prompt_file(file).map_err(|e| crate::error::Error::bad_input(e.to_string()))?
        }
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

/// The most a prompt file may hold: a long brief, not a data set.
pub(super) const PROMPT_FILE_CAP: u64 = 1024 * 1024;

/// A prompt file's text, read as owl reads every file it did not make: a regular file
/// only (a FIFO is refused, never waited on), at most [`PROMPT_FILE_CAP`] bytes, UTF-8.
pub(super) fn read_prompt_file(file: &std::path::Path) -> Result<String, PromptFileError> {
    let bytes =
        crate::untrusted::read_named(file, PROMPT_FILE_CAP).map_err(PromptFileError::Read)?;
    String::from_utf8(bytes).map_err(|e| PromptFileError::NotText {
        file: file.to_path_buf(),
        valid_up_to: e.utf8_error().valid_up_to(),
    })
}

/// Why a prompt file gives no prompt.
#[derive(Debug, thiserror::Error)]
pub(super) enum PromptFileError {
    #[error("reading prompt file: {0}")]
    Read(crate::untrusted::Refused),
    #[error("prompt file {} is not UTF-8 text (byte {valid_up_to})", file.display())]
    NotText {
        file: std::path::PathBuf,
        valid_up_to: usize,
    },
}

/// A short random id, like a git short hash: typable, and unlikely to collide with a
/// branch left by an earlier state dir.
pub(super) fn fresh_id(store: &crate::store::Store, batch: &[NewJob]) -> Result<String> {
    let mut urandom = std::fs::File::open("/dev/urandom").context("opening /dev/urandom")?;
    loop {
        let mut bytes = [0u8; 3];
        urandom.read_exact(&mut bytes)?;
        let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        // An id of digits only would read like a Run id.
        let taken = batch.iter().any(|j| j.id == id) || store.job_exists(&id)?;
        if id.bytes().all(|b| b.is_ascii_digit()) || taken {
            continue;
        }
        return Ok(id);
    }
}

/// `--max-budget-usd` is a cap the agent CLI keeps (Claude Code's own flag): refused for a
/// Job whose Account's Driver cannot hand it on, or, with no Account named, when no
/// configured Account can. Stored, it would promise what no one keeps.
fn check_budget_cap(ctx: &Ctx, account: Option<&str>, key: &str) -> Result<(), String> {
    let keeps =
        |a: &crate::config::Account| crate::driver::for_kind(a.driver).capabilities().budget_cap;
    let accounts = &ctx.config.accounts;
    match account {
        Some(name) if !keeps(&accounts[name]) => Err(format!(
            "{key}: account '{name}' runs {}, whose CLI takes no per-Run budget \
             cap, so none could be kept; leave it out, or use an Account on claude-code",
            accounts[name].driver.name()
        )),
        None if !accounts.values().any(keeps) => Err(format!(
            "{key}: no configured Account's CLI takes a per-Run budget cap \
             (only claude-code does), so none could be kept; leave it out"
        )),
        _ => Ok(()),
    }
}
