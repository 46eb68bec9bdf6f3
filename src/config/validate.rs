//! The checks that turn the raw file into a [`Config`]: each refusal names the line and the key or value at fault.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::defaults::*;
use super::positions::Positions;
use super::raw::{did_you_mean, RawConfig};
use super::units::format_duration;
use super::*;
use crate::error::Error;
/// Where in the file a value stands: every refusal names its line.
pub(super) struct Place<'a> {
    positions: &'a Positions,
    source: &'a str,
}

impl Place<'_> {
    /// An error about the value of `path` (`defaults.maxRuns`), on its line.
    pub(super) fn at(&self, path: &str, msg: String) -> Error {
        let line = self
            .positions
            .value_line(path)
            .or_else(|| self.positions.key_line(path))
            .map(|n| format!("line {n}: "))
            .unwrap_or_default();
        Error::bad_input(format!("reading config {}: {line}{msg}", self.source))
    }

    /// An error about the key `path` itself (an Account's name), on the key's own line.
    fn at_key(&self, path: &str, msg: String) -> Error {
        let line = self
            .positions
            .key_line(path)
            .map(|n| format!("line {n}: "))
            .unwrap_or_default();
        Error::bad_input(format!("reading config {}: {line}{msg}", self.source))
    }

    /// An error about the file as a whole.
    fn whole(&self, msg: &str) -> Error {
        Error::bad_input(format!("reading config {}: {msg}", self.source))
    }

    fn path(&self, path: &str, value: &str) -> Result<PathBuf, Error> {
        config_path_value(value).map_err(|m| self.at(path, m))
    }

    /// A command: a bare name is looked up on PATH; anything else is a path and must be one.
    fn command(&self, key: &str, value: Option<String>, default: &str) -> Result<PathBuf, Error> {
        match value {
            Some(c) if c.contains('/') || c.starts_with('~') || c.contains('$') => {
                self.path(key, &c)
            }
            Some(c) if c.is_empty() => Err(self.at(key, format!("{key} is empty"))),
            Some(c) => Ok(PathBuf::from(c)),
            None => Ok(PathBuf::from(default)),
        }
    }
}

pub(super) fn validate(
    raw: RawConfig,
    positions: &Positions,
    source: &str,
) -> Result<Config, Error> {
    let place = Place { positions, source };
    check_minimums(&raw, &place)?;
    let default_env = raw
        .defaults
        .as_ref()
        .map(|d| d.env.clone())
        .unwrap_or_default();
    let default_executor = raw
        .defaults
        .as_ref()
        .and_then(|d| d.executor)
        .unwrap_or_default();
    let night_window = raw.schedule.as_ref().and_then(|s| s.window);
    let accounts = accounts(
        raw.accounts.unwrap_or_default(),
        &default_env,
        (default_executor, night_window),
        &place,
    )?;
    let defaults = defaults(
        raw.defaults.unwrap_or_default(),
        default_env,
        &accounts,
        &place,
    )?;
    // In the order of the file's checks: the first fault found is the one told.
    let drivers = drivers(raw.drivers.unwrap_or_default(), &place)?;
    let notify = notify(raw.notify, &place)?;
    let sandbox = sandbox(raw.sandbox.unwrap_or_default(), &place)?;
    let state_dir = state_dir(raw.state_dir.as_deref(), &place)?;
    let metrics_file = (raw.metrics_file.as_deref())
        .map(|file| place.path("metricsFile", file))
        .transpose()?;
    let store = raw
        .store
        .as_deref()
        .map(|url| super::PgUrl::parse(url).map_err(|why| place.at("store", why.to_string())))
        .transpose()?;
    let machine = machine(raw.machine, &place)?;
    let lease_length = lease_length(raw.lease_length, &place)?;
    let repos = repos(raw.repos.unwrap_or_default(), &place)?;
    let max_concurrent_runs = max_concurrent_runs(raw.max_concurrent_runs, accounts.len(), &place)?;
    let schedule = schedule(raw.schedule.unwrap_or_default(), &place)?;
    Ok(Config {
        source: source.to_string(),
        state_dir,
        metrics_file,
        store,
        machine,
        lease_length,
        grace_window: raw.grace_window.unwrap_or(Duration::from_secs(30)),
        usage_poll_interval: raw.usage_poll_interval.unwrap_or(Duration::from_secs(60)),
        probe_max_age: raw.probe_max_age.unwrap_or(Duration::from_secs(600)),
        sample_every: raw.sample_every.unwrap_or(DEFAULT_SAMPLE_EVERY),
        user_use_retention: raw.user_use_retention.unwrap_or(USER_USE_RETENTION),
        stall_timeout: raw.stall_timeout.unwrap_or(Duration::from_secs(15 * 60)),
        min_free_space: raw.min_free_space.unwrap_or(DEFAULT_MIN_FREE_SPACE),
        snapshot_retention: raw.snapshot_retention.unwrap_or(SNAPSHOT_RETENTION),
        agent_verification: raw.agent_verification.unwrap_or_default(),
        commit_author: raw
            .commit_author
            .unwrap_or_else(|| "owl <owl@localhost>".into()),
        max_concurrent_runs,
        defaults,
        schedule,
        accounts,
        drivers,
        sandbox,
        notify,
        repos,
    })
}

/// A check's argv: a program first, never an empty list (no check is no key at all).
fn check_argv(
    key: &str,
    argv: Option<Vec<String>>,
    place: &Place,
) -> Result<Option<Vec<String>>, Error> {
    match argv {
        Some(argv) if argv.first().is_none_or(|p| p.trim().is_empty()) => Err(place.at(
            key,
            format!(
                "{key} must name a program first, as a list: [cargo, test, --locked] (leave \
                 the key out for no check)"
            ),
        )),
        Some(mut argv) => {
            argv[0] = super::check_program(&argv[0])
                .map_err(|refused| place.at(key, format!("{key}: {refused}")))?;
            Ok(Some(argv))
        }
        None => Ok(None),
    }
}

/// `repos:`: each repository's path resolved, its check and timeout checked.
fn repos(
    raw: BTreeMap<String, super::raw::RawRepo>,
    place: &Place,
) -> Result<BTreeMap<PathBuf, super::RepoDefaults>, Error> {
    let mut repos = BTreeMap::new();
    for (path, repo) in raw {
        let here = format!("repos.{path}");
        let dir = place.path(&here, &path)?;
        // Jobs name their repository by its canonical path (`owl add` resolves it).
        let dir = dir.canonicalize().unwrap_or(dir);
        if let Some(d) = repo.check_timeout.filter(|d| *d < Duration::from_secs(1)) {
            return Err(place.at(
                &format!("{here}.checkTimeout"),
                format!(
                    "checkTimeout {} is below its minimum of 1s",
                    format_duration(d)
                ),
            ));
        }
        let check = check_argv(&format!("{here}.check"), repo.check, place)?;
        repos.insert(
            dir,
            super::RepoDefaults {
                check,
                check_timeout: repo.check_timeout,
            },
        );
    }
    Ok(repos)
}

/// Each duration at or above its minimum.
fn check_minimums(raw: &RawConfig, place: &Place) -> Result<(), Error> {
    for (path, value, min) in [
        ("graceWindow", raw.grace_window, Duration::from_secs(1)),
        (
            "usagePollInterval",
            raw.usage_poll_interval,
            Duration::from_millis(100),
        ),
        ("probeMaxAge", raw.probe_max_age, Duration::from_secs(1)),
        // More often would read the plan's figures faster than they move.
        ("sampleEvery", raw.sample_every, Duration::from_secs(60)),
        // Under a week would forget the week the profile is learned by.
        (
            "userUseRetention",
            raw.user_use_retention,
            Duration::from_secs(7 * 86_400),
        ),
        ("stallTimeout", raw.stall_timeout, Duration::from_secs(1)),
        // Under a day would prune figures a Window of five hours still needs.
        (
            "snapshotRetention",
            raw.snapshot_retention,
            Duration::from_secs(86_400),
        ),
        (
            "defaults.maxRunTime",
            raw.defaults.as_ref().and_then(|d| d.max_run_time),
            Duration::from_secs(1),
        ),
        (
            "defaults.checkTimeout",
            raw.defaults.as_ref().and_then(|d| d.check_timeout),
            Duration::from_secs(1),
        ),
    ] {
        if let Some(d) = value.filter(|d| *d < min) {
            let key = path.rsplit('.').next().unwrap_or(path);
            return Err(place.at(
                path,
                format!(
                    "{key} {} is below its minimum of {}",
                    format_duration(d),
                    format_duration(min)
                ),
            ));
        }
    }
    Ok(())
}

/// The Accounts: safe names, a credential store each sandboxed one needs, and no store
/// shared by two.
fn accounts(
    raw: BTreeMap<String, super::raw::RawAccount>,
    default_env: &Env,
    (default_executor, night_window): (ExecutorKind, Option<TimeWindow>),
    place: &Place,
) -> Result<BTreeMap<String, Account>, Error> {
    let mut accounts = BTreeMap::new();
    for (name, acc) in raw {
        let here = format!("accounts.{name}");
        if !is_safe_name(&name) {
            // The name is the key: its own line, not that of the mapping under it.
            return Err(place.at_key(
                &here,
                format!("account name '{name}' may hold only letters, digits, '.', '_' and '-'"),
            ));
        }
        let credential_store = match acc.credential_store.as_deref() {
            Some(dir) => Some(place.path(&format!("{here}.credentialStore"), dir)?),
            None => None,
        };
        let executor = acc.executor.unwrap_or(default_executor);
        if executor == ExecutorKind::Sandbox && credential_store.is_none() {
            let key = if acc.executor.is_some() {
                format!("{here}.executor")
            } else {
                "defaults.executor".to_string()
            };
            return Err(place.at(
                &key,
                format!(
                    "account '{name}' runs in the sandbox (executor: sandbox) but names no \
                     credentialStore: the agent CLI writes its login and sessions there, and \
                     the rest of your home is read-only in the sandbox; set \
                     accounts.{name}.credentialStore"
                ),
            ));
        }
        if let Some(store) = &credential_store {
            check_store_unshared(&accounts, &name, store, place)?;
        }
        check_night_max(&name, acc.limits.as_ref(), place)?;
        if let (Some(_), Some(window)) = (acc.morning, night_window) {
            return Err(place.at(
                &format!("{here}.morning"),
                format!(
                    "accounts.{name}.morning beside schedule.window: the morning is where the \
                     window ends ({}); set one of them",
                    window.end.format("%H:%M")
                ),
            ));
        }
        let codex_config = codex_config::validate(&name, acc.codex_config, place)?;
        let allow_hosts = allowed_hosts(&format!("{here}.allowHosts"), acc.allow_hosts, place)?;
        let account = Account {
            codex_config,
            allow_hosts,
            allow_billed_usage: acc.allow_billed_usage,
            learned_reserve: acc.learned_reserve,
            learned_reserve_line: place.positions.key_line(&format!("{here}.learnedReserve")),
            codex_config_line: place.positions.key_line(&format!("{here}.codexConfig")),
            driver: acc.driver.unwrap_or_default(),
            credential_store,
            env: default_env.merged_with(acc.env),
            limits: acc.limits,
            morning: acc.morning,
            backoff: acc.backoff.unwrap_or(super::DEFAULT_BACKOFF),
            executor,
            limits_line: place.positions.key_line(&format!("{here}.limits")),
        };
        accounts.insert(name, account);
    }
    if accounts.is_empty() {
        return Err(place.whole("'accounts' names no Account; owl needs at least one"));
    }
    Ok(accounts)
}

/// The night and the morning: with a `window`, the morning is where it ends, so a
/// `morning` beside it would be a second answer; `dayEnds` says where a `morning`'s day ends.
fn schedule(raw: super::raw::RawSchedule, place: &Place) -> Result<Schedule, Error> {
    if let (Some(window), Some(_)) = (raw.window, raw.morning) {
        return Err(place.at(
            "schedule.morning",
            format!(
                "schedule.morning beside schedule.window: the morning is where the window ends \
                 ({}); set one of them",
                window.end.format("%H:%M")
            ),
        ));
    }
    if raw.day_ends.is_some() && raw.morning.is_none() {
        return Err(place.at(
            "schedule.dayEnds",
            "schedule.dayEnds needs schedule.morning (with schedule.window the day ends where \
             the window starts)"
                .into(),
        ));
    }
    Ok(Schedule {
        window: raw.window,
        morning: raw.morning,
        day_ends: raw.day_ends,
    })
}

/// A night ceiling is the most a Window that resets before the morning may reach: one
/// under a configured ceiling would hold the night's Windows tighter than the day's.
fn check_night_max(name: &str, limits: Option<&Limits>, place: &Place) -> Result<(), Error> {
    match limits.and_then(Limits::over_the_night) {
        Some((key, ceiling, night)) => Err(place.at(
            &format!("accounts.{name}.limits.nightMax"),
            format!(
                "nightMax {night} is under {key} {ceiling}: the night ceiling is what a Window \
                 that resets before the morning may reach, never less than the day's"
            ),
        )),
        None => Ok(()),
    }
}

/// One store is one login and one plan: two Accounts on it would each count the other's use.
fn check_store_unshared(
    accounts: &BTreeMap<String, Account>,
    name: &str,
    store: &std::path::Path,
    place: &Place,
) -> Result<(), Error> {
    let same =
        |other: &Account| other.credential_store.as_deref().map(same_dir) == Some(same_dir(store));
    match accounts.iter().find(|(_, a)| same(a)) {
        Some((other, _)) => Err(place.at(
            &format!("accounts.{name}.credentialStore"),
            format!(
                "accounts {other} and {name} share the credentialStore {}: one store is \
                 one login and one plan, so each Account's ceiling would count the \
                 other's use; give each Account its own",
                store.display()
            ),
        )),
        None => Ok(()),
    }
}

/// What a Job gets unless `owl add` says otherwise.
fn defaults(
    d: super::raw::RawDefaults,
    env: Env,
    accounts: &BTreeMap<String, Account>,
    place: &Place,
) -> Result<JobDefaults, Error> {
    let account = d.account.unwrap_or(None);
    if let Some(name) = account.as_ref().filter(|n| !accounts.contains_key(*n)) {
        let known: Vec<&str> = accounts.keys().map(String::as_str).collect();
        return Err(place.at(
            "defaults.account",
            format!(
                "defaults.account '{name}' is not a configured Account{}",
                did_you_mean(name, &known)
            ),
        ));
    }
    for (key, budget) in [
        ("maxBudgetUsd", d.max_budget_usd),
        ("maxJobBudgetUsd", d.max_job_budget_usd),
    ] {
        if let Some(Some(x)) = budget.filter(|b| b.is_some_and(|x| !x.is_finite() || x <= 0.0)) {
            return Err(place.at(
                &format!("defaults.{key}"),
                format!("{key} must be a finite number greater than 0, not {x}"),
            ));
        }
    }
    if d.max_runs == Some(0) {
        return Err(place.at("defaults.maxRuns", "maxRuns must be at least 1".into()));
    }
    let check = check_argv("defaults.check", d.check, place)?;
    Ok(JobDefaults {
        account,
        priority: d.priority.unwrap_or(0),
        max_run_time: d.max_run_time.unwrap_or(Duration::from_secs(4 * 3600)),
        max_runs: d.max_runs.unwrap_or(5),
        max_budget_usd: d.max_budget_usd.unwrap_or(Some(5.0)),
        max_job_budget_usd: d.max_job_budget_usd.unwrap_or(Some(20.0)),
        // Which modes there are is each Driver's to say (`Driver::check_defaults`).
        permission_mode: d.permission_mode.unwrap_or_else(|| "dontAsk".into()),
        permission_mode_line: place
            .positions
            .value_line("defaults.permissionMode")
            .or_else(|| place.positions.key_line("defaults.permissionMode")),
        allowed_tools: d.allowed_tools.unwrap_or_else(default_allowed_tools),
        disallowed_tools: d.disallowed_tools.unwrap_or_default(),
        model: d.model,
        check,
        check_timeout: d.check_timeout.unwrap_or(DEFAULT_CHECK_TIMEOUT),
        env,
    })
}

/// Each Driver's command, by the name `drivers:` gives it; an unknown name is refused.
fn drivers(drivers: super::raw::RawDrivers, place: &Place) -> Result<Drivers, Error> {
    let known: Vec<&str> = DriverKind::all().map(DriverKind::name).collect();
    if let Some(name) = drivers.keys().find(|n| DriverKind::from_name(n).is_none()) {
        return Err(place.at(
            &format!("drivers.{name}"),
            format!(
                "unknown key '{name}' in 'drivers'{}",
                did_you_mean(name, &known)
            ),
        ));
    }
    let mut commands = BTreeMap::new();
    for kind in DriverKind::all() {
        let set = drivers.get(kind.name()).and_then(|d| d.command.clone());
        let settings = DriverSettings {
            command: place.command(&kind.command_key(), set, kind.default_command())?,
        };
        commands.insert(kind, settings);
    }
    Ok(Drivers(commands))
}

fn notify(raw: Option<super::raw::RawNotify>, place: &Place) -> Result<Option<Notify>, Error> {
    match raw {
        Some(n) if n.command.first().is_none_or(|c| c.is_empty()) => Err(place.at(
            "notify.command",
            "notify.command is empty: give the command as a list, e.g. [notify-send, owl]"
                .to_string(),
        )),
        Some(n) => Ok(Some(Notify {
            command: n.command,
            on: n.on.unwrap_or_else(|| NotifyEvent::ALL.to_vec()),
            timeout: n.timeout.unwrap_or(Duration::from_secs(10)),
        })),
        None => Ok(None),
    }
}

fn sandbox(raw: super::raw::RawSandbox, place: &Place) -> Result<SandboxSettings, Error> {
    Ok(SandboxSettings {
        command: place.command("sandbox.command", raw.command, "bwrap")?,
        writable: raw
            .writable
            .iter()
            .enumerate()
            .map(|(i, dir)| place.path(&format!("sandbox.writable[{i}]"), dir))
            .collect::<Result<_, _>>()?,
        allow_hosts: allowed_hosts("sandbox.allowHosts", raw.allow_hosts, place)?,
    })
}

/// The hosts under `key`, each checked.
fn allowed_hosts(key: &str, hosts: Vec<String>, place: &Place) -> Result<Vec<String>, Error> {
    hosts
        .into_iter()
        .enumerate()
        .map(|(i, host)| allowed_host(&format!("{key}[{i}]"), host, place))
        .collect()
}

/// A host a sandboxed Run may reach: a name or address, with a port or not; never a URL.
fn allowed_host(key: &str, host: String, place: &Place) -> Result<String, Error> {
    let bad = host.is_empty() || host.contains("://") || host.contains('/') || host.contains(' ');
    if bad {
        return Err(place.at(
            key,
            format!("{key} '{host}' is not a host: write a name or address, with ':port' or not (index.crates.io, 127.0.0.1:8080)"),
        ));
    }
    Ok(host)
}

/// How many Runs one state dir takes at once: as set (at least 1), else one per Account.
fn max_concurrent_runs(raw: Option<u32>, accounts: usize, place: &Place) -> Result<u32, Error> {
    match raw {
        Some(0) => Err(place.at(
            "maxConcurrentRuns",
            "maxConcurrentRuns must be at least 1".into(),
        )),
        Some(n) => Ok(n),
        None => Ok(accounts.max(1) as u32),
    }
}

fn state_dir(raw: Option<&str>, place: &Place) -> Result<PathBuf, Error> {
    match raw {
        Some(dir) => place.path("stateDir", dir),
        None => xdg_dir("XDG_STATE_HOME", ".local/state")
            .map(|d| d.join("owl"))
            .ok_or_else(|| {
                place.whole(
                    "neither HOME nor XDG_STATE_HOME is set, so there is no default state \
                     dir; set stateDir to an absolute path",
                )
            }),
    }
}

/// This machine's name: as configured (letters, digits, `.`, `_` and `-`), else the host
/// name.
fn machine(raw: Option<String>, place: &Place) -> Result<String, Error> {
    let Some(name) = raw else {
        return Ok(crate::sys::host_name().unwrap_or_else(|| "localhost".into()));
    };
    let fits = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > 64 || !name.chars().all(fits) {
        return Err(place.at(
            "machine",
            format!("machine '{name}': a name is 1 to 64 letters, digits, '.', '_' or '-'"),
        ));
    }
    Ok(name)
}

fn lease_length(raw: Option<Duration>, place: &Place) -> Result<Duration, Error> {
    let (min, max) = super::LEASE_BOUNDS;
    match raw {
        None => Ok(super::DEFAULT_LEASE),
        Some(d) if d >= min && d <= max => Ok(d),
        Some(d) => Err(place.at(
            "leaseLength",
            format!(
                "leaseLength {}: a lease lasts from {} to {}",
                super::format_duration(d),
                super::format_duration(min),
                super::format_duration(max)
            ),
        )),
    }
}

fn default_allowed_tools() -> Vec<String> {
    [
        "Read",
        "Edit",
        "Write",
        "Glob",
        "Grep",
        "Bash(git add:*)",
        "Bash(git commit:*)",
        "Bash(cargo test:*)",
    ]
    .map(String::from)
    .to_vec()
}

/// A path from the config: absolute, or `~/…` with HOME set. owl expands nothing else:
/// cron and a shell have different environments, so `$VAR` would name two places.
fn config_path_value(value: &str) -> Result<PathBuf, String> {
    if value.trim().is_empty() {
        return Err("the path is empty; give an absolute path".into());
    }
    if value.contains('$') {
        return Err(format!(
            "'{value}' holds '$': owl does not expand variables (cron and a shell have \
             different environments); write the path out"
        ));
    }
    if value == "~" || value.starts_with("~/") {
        if home().is_none() {
            return Err(format!(
                "'{value}' starts with '~', but HOME is not set; write the path out"
            ));
        }
        return Ok(expand_tilde(value));
    }
    let path = PathBuf::from(value);
    if !path.is_absolute() {
        return Err(format!(
            "'{value}' is relative, so it would depend on the directory owl starts in; \
             give an absolute path (or ~/…)"
        ));
    }
    Ok(path)
}

/// A directory as the filesystem names it, so that `~/a`, `/home/me/a/` and a symlink to it
/// are one; as written when it does not exist yet.
fn same_dir(path: &std::path::Path) -> std::path::PathBuf {
    path.canonicalize()
        .unwrap_or_else(|_| path.components().collect())
}
