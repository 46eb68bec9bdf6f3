//! `owl doctor`: checks the agent CLI and its version, each Account's login, the state dir, the free space, git and the database — as they are now.

use anyhow::Result;
use serde::Serialize;

use super::{print_json, Ctx};
use crate::config::Account;
use crate::driver::{self, Driver};

/// What doctor found, in order: checks that pass or fail, and notes beside them.
#[derive(Debug, Default, Serialize)]
struct Findings {
    /// No check failed.
    passed: bool,
    /// How many checks failed.
    problems: usize,
    findings: Vec<Finding>,
}

#[derive(Debug, Serialize)]
struct Finding {
    /// `true`/`false` for a check; `null` for a note (a capability, a posture).
    ok: Option<bool>,
    text: String,
}

impl Findings {
    fn check(&mut self, ok: bool, text: String) {
        self.problems += usize::from(!ok);
        self.findings.push(Finding { ok: Some(ok), text });
    }

    fn note(&mut self, text: String) {
        self.findings.push(Finding { ok: None, text });
    }
}

/// What `owl doctor` was asked.
#[derive(Debug, clap::Args)]
pub(crate) struct DoctorArgs {
    /// Instead: prove each Account's agent CLI keeps the protocol owl relies on, against
    /// a loopback mock (no real credential, no token, nothing leaves the machine), and
    /// record the verdict for that binary. Exits 1 when a check fails.
    #[arg(long)]
    pub(crate) conformance: bool,
    /// With --conformance: only this Account's CLI.
    #[arg(long, requires = "conformance")]
    pub(crate) account: Option<String>,
    /// Print as JSON (with --conformance: the checks).
    #[arg(long)]
    pub(crate) json: bool,
    /// With --conformance: keep what the CLI wrote in each scenario in this directory,
    /// as fixtures (`conformance-<scenario>.jsonl`; see scripts/record-fixtures).
    #[arg(long, requires = "conformance", value_name = "DIR")]
    pub(crate) record: Option<std::path::PathBuf>,
}

pub(super) fn run(ctx: &Ctx, json: bool) -> Result<u8> {
    let mut found = Findings::default();
    examine(ctx, &mut found);
    found.passed = found.problems == 0;
    if json {
        print_json(&found)?;
    } else {
        for f in &found.findings {
            match f.ok {
                Some(true) => outln!("ok   {}", f.text),
                Some(false) => outln!("FAIL {}", f.text),
                None => outln!("     {}", f.text),
            }
        }
        if found.passed {
            outln!("all checks passed");
        } else {
            outln!(
                "{} problem{} found",
                found.problems,
                if found.problems == 1 { "" } else { "s" }
            );
        }
    }
    Ok(if found.passed {
        0
    } else {
        crate::error::EXIT_FAILURE
    })
}

fn examine(ctx: &Ctx, found: &mut Findings) {
    found.check(true, format!("config: {}", ctx.config.source));
    let git = git2::Version::get();
    let (maj, min, rev) = git.libgit2_version();
    found.check(true, format!("git: libgit2 {maj}.{min}.{rev}"));
    for (name, account) in &ctx.config.accounts {
        examine_account(ctx, name, account, found);
    }
    examine_state(ctx, found);
}

/// One Account: its agent CLI, its credential store and login, its Executor, its env.
fn examine_account(ctx: &Ctx, name: &str, account: &Account, found: &mut Findings) {
    let d = driver::for_kind(account.driver);
    let command = &ctx.config.drivers.get(account.driver).command;
    let executor = ctx.executor_of(account);
    let cli_ok = agent_cli(executor.as_ref(), d.as_ref(), command, name, account, found);
    // A store that shows no login is told once, and the CLI is not started in it (it
    // would make the store, and two more lines would say the same).
    let no_login = super::plan::empty_store(account);
    let fix = driver::login_fix(account, name);
    match (&no_login, &account.credential_store) {
        (Some(why), _) => found.check(false, format!("account {name}: {why}; {fix}")),
        (None, Some(dir)) => found.check(
            true,
            format!("account {name}: credential store {}", dir.display()),
        ),
        (None, None) => found.check(
            true,
            format!("account {name}: uses the user's normal agent login"),
        ),
    }
    let cli_ok = cli_ok && no_login.is_none();
    let mut refused = false;
    // The CLI's own answer on its login, local and without a turn, where it has one.
    if let Some(login) = cli_ok
        .then(|| crate::supervise::check_login(executor.as_ref(), d.as_ref(), command, account))
        .flatten()
    {
        match login.refusal(account.has_ceiling()) {
            None => found.check(
                true,
                format!(
                    "account {name}: auth status: logged in, {}",
                    login.describe()
                ),
            ),
            Some(why) => {
                refused = true;
                found.check(false, format!("account {name}: {why}; {fix}"));
            }
        }
    }
    // One missing login is one finding: the probe is not asked what the CLI just said.
    probe_finding(
        ctx,
        executor.as_ref(),
        d.as_ref(),
        name,
        account,
        cli_ok,
        no_login.is_none() && !refused,
        found,
    );
    if let Some(served) = d.logins_served() {
        found.note(format!("account {name}: {served}"));
    }
    if let Some(why) = super::plan::billed_without_leave(account) {
        found.check(false, format!("account {name}: {why}"));
    }
    executor_finding(ctx, name, account, found);
    if !account.env.is_empty() {
        let keys: Vec<&str> = account.env.keys().map(String::as_str).collect();
        found.check(
            true,
            format!("account {name}: sets {} (values hidden)", keys.join(", ")),
        );
    }
}

/// The zero-token probe: a credential store that exists may still hold no login.
#[allow(clippy::too_many_arguments)]
fn probe_finding(
    ctx: &Ctx,
    executor: &dyn crate::supervise::Executor,
    d: &dyn Driver,
    name: &str,
    account: &Account,
    cli_ok: bool,
    store_may_hold_a_login: bool,
    found: &mut Findings,
) {
    let command = &ctx.config.drivers.get(account.driver).command;
    // Run in the state dir when there is one (doctor makes it only to record what a probe
    // learned, below).
    let cwd = Some(ctx.config.state_dir.clone())
        .filter(|d| d.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    if !driver::offers_probe(d, account) {
        // Nothing to ask without spending a token: the first Run tells.
        found.note(format!(
            "account {name}: login not checked: the {} driver has no zero-token probe{}",
            account.driver.name(),
            // It can be asked for utilization, just not without a token on this login.
            if d.usage_request_input("owl-doctor").is_some() {
                " for this login"
            } else {
                ""
            }
        ));
    } else if store_may_hold_a_login {
        let probe = if cli_ok {
            let probe = crate::supervise::probe::probe(executor, d, command, account, &cwd);
            if let Err(e) = super::probe::record_found(ctx, name, &probe) {
                found.note(format!(
                    "account {name}: the probe's answer was not recorded: {e:#}"
                ));
            }
            probe
        } else {
            crate::usage::ProbeOutcome::Failed("the agent CLI is unusable (above)".into())
        };
        match probe.logged_in(d.uses_api_key(account)) {
            Some(true) => found.check(
                true,
                format!("account {name}: logged in (probe: {})", probe.describe()),
            ),
            Some(false) => found.check(
                false,
                format!(
                    "account {name}: not logged in (probe: {}); {}",
                    probe.describe(),
                    driver::login_fix(account, name)
                ),
            ),
            None => found.check(
                false,
                format!(
                    "account {name}: could not check the login: {}",
                    probe.describe()
                ),
            ),
        }
    }
}

/// The agent CLI runs and its version is one owl tested; what its Driver can and cannot do.
fn agent_cli(
    executor: &dyn crate::supervise::Executor,
    d: &dyn Driver,
    command: &std::path::Path,
    name: &str,
    account: &Account,
    found: &mut Findings,
) -> bool {
    match crate::supervise::check_agent(executor, d, command, account) {
        Ok(v) => {
            let what = format!("{} {v} at '{}'", account.driver.name(), command.display());
            found.check(true, format!("account {name}: {what}"));
            let (has, lacks): (Vec<_>, Vec<_>) = d
                .capabilities()
                .named(
                    driver::offers_probe(d, account),
                    d.interrupt("owl-doctor").is_some(),
                )
                .into_iter()
                .partition(|(_, on)| *on);
            let names = |caps: Vec<(&str, bool)>| -> String {
                let names: Vec<&str> = caps.into_iter().map(|(n, _)| n).collect();
                if names.is_empty() {
                    "none".into()
                } else {
                    names.join(", ")
                }
            };
            found.note(format!(
                "capabilities: {}; lacks: {}",
                names(has),
                names(lacks)
            ));
            let caps = d.capabilities();
            if !caps.tool_policy {
                found.note(format!(
                    "allowedTools and disallowedTools do not reach the {} CLI: its own \
                     sandbox is the posture (see README, Drivers)",
                    account.driver.name()
                ));
            }
            if !caps.budget_cap {
                found.note(format!(
                    "maxBudgetUsd cannot cap a Run of the {} CLI: no cap is recorded or \
                     charged",
                    account.driver.name()
                ));
            }
            true
        }
        Err(why) => {
            found.check(false, format!("account {name}: {why}"));
            false
        }
    }
}

/// Which Executor runs the Account's Runs, and whether it can.
fn executor_finding(ctx: &Ctx, name: &str, account: &Account, found: &mut Findings) {
    match account.executor {
        crate::config::ExecutorKind::Local => {
            found.note(format!(
                "account {name}: executor local: the agent runs with your rights (see \
                 README, Sandbox)"
            ));
            let runs_code = runs_the_projects_code(&ctx.config.defaults.allowed_tools);
            if !runs_code.is_empty() {
                found.note(format!(
                    "account {name}: executor local: {} run the project's code, which the \
                     agent writes, as you: the list of allowed tools is not a boundary here; \
                     executor: sandbox is",
                    runs_code.join(", ")
                ));
            }
        }
        crate::config::ExecutorKind::Sandbox => {
            match crate::supervise::sandbox::check(&ctx.config.sandbox.command) {
                Ok(()) => found.check(
                    true,
                    format!(
                        "account {name}: executor sandbox: bubblewrap ('{}') confines its \
                         Runs, their network included (its API and {} listed host(s) reached \
                         through owl's proxy)",
                        ctx.config.sandbox.command.display(),
                        ctx.config.sandbox.allow_hosts.len()
                    ),
                ),
                Err(why) => found.check(false, format!("account {name}: {why}")),
            }
        }
    }
}

/// The allowed tools that run code the agent can write: every shell command but git's
/// own `add` and `commit` (which run only the repository's hooks, outside the worktree
/// the agent edits). `Bash(cargo test:*)` runs build scripts and tests.
fn runs_the_projects_code(allowed: &[String]) -> Vec<String> {
    const GIT_ONLY: &[&str] = &["Bash(git add:*)", "Bash(git commit:*)"];
    allowed
        .iter()
        .filter(|t| t.starts_with("Bash") && !GIT_ONLY.contains(&t.as_str()))
        .cloned()
        .collect()
}

/// The state dir, its free space and the database.
fn examine_state(ctx: &Ctx, found: &mut Findings) {
    let state_dir = &ctx.config.state_dir;
    match state_dir_writable(state_dir) {
        Ok(what) => found.check(true, what),
        Err(why) => found.check(false, why),
    }
    let free = crate::disk::check_free_space(&[state_dir.as_path()], ctx.config.min_free_space);
    match free {
        Ok(()) => found.check(
            true,
            format!(
                "free space: at least minFreeSpace {} on the filesystem of {}",
                crate::text::format_size(ctx.config.min_free_space),
                state_dir.display()
            ),
        ),
        Err(why) => found.check(false, why.to_string()),
    }
    // Notes from earlier ticks are not repeated: every condition they record (the agent
    // CLI, the login) was checked again above, and only what holds now is shown.
    match ctx.read_store() {
        Ok(Some(store)) => {
            let version = store.schema_version().unwrap_or(-1);
            let integrity = store.quick_check().unwrap_or_else(|e| e.to_string());
            found.check(
                integrity == "ok",
                format!(
                    "database {}: schema {version}, integrity {integrity}",
                    store.location()
                ),
            );
            // A certificate checked is a check passed; anything less is the posture the
            // URL asked for (a plain loopback, `require`, `disable`), said as a note.
            match store.reach() {
                Some(reach) if reach.verified() => {
                    found.check(true, format!("database: reached {reach}"))
                }
                Some(reach) => found.note(format!("database: reached {reach}")),
                None => {}
            }
            match store.check_writable() {
                Ok(()) => found.check(true, "database: opens read-write".into()),
                Err(e) => found.check(false, format!("database: cannot be written: {e:#}")),
            }
        }
        Ok(None) => found.check(
            true,
            format!(
                "database: none yet at {}",
                ctx.config.state().db().display()
            ),
        ),
        Err(e) => found.check(false, format!("database: {e:#}")),
    }
}

/// Whether owl can write its state dir: a directory it can create a file in, or before the
/// first tick one it can create.
fn state_dir_writable(dir: &std::path::Path) -> Result<String, String> {
    if dir.exists() && !dir.is_dir() {
        return Err(format!("state dir {} is not a directory", dir.display()));
    }
    let probe_in = match dir.ancestors().find(|p| p.exists()) {
        Some(p) if p.is_dir() => p.to_path_buf(),
        Some(p) => {
            return Err(format!(
                "state dir {}: {} is not a directory",
                dir.display(),
                p.display()
            ))
        }
        None => return Err(format!("state dir {}: no part of it exists", dir.display())),
    };
    let probe = probe_in.join(format!(".owl-doctor-{}", std::process::id()));
    match std::fs::File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            if probe_in == dir {
                Ok(format!("state dir {}: writable", dir.display()))
            } else {
                Ok(format!(
                    "state dir {}: not created yet; {} is writable",
                    dir.display(),
                    probe_in.display()
                ))
            }
        }
        Err(e) => Err(format!(
            "state dir {}: cannot write in {}: {e}",
            dir.display(),
            probe_in.display()
        )),
    }
}
