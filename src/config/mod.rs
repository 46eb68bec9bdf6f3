//! config.yaml: the raw file (serde, unknown keys refused) turned into a validated [`Config`].

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::text::format_size;

mod defaults;
mod positions;
mod raw;
mod repos;
mod units;
mod validate;

pub(crate) use positions::Positions;
pub(crate) use raw::did_you_mean;
use raw::{describe_yaml_error, RawConfig};
pub(crate) use raw::{explain_structure, explain_unknown_key, explain_yaml_error};
pub(crate) use units::{format_duration, parse_duration, DEFAULT_MIN_FREE_SPACE};
use units::{ser_duration, ser_opt_time, ser_size};

mod codex_config;
mod drivers;
mod limits;
mod store;
pub(crate) mod tls;
pub(crate) use drivers::*;
pub(crate) use limits::{LearnedReserve, Limits};
pub(crate) use repos::RepoDefaults;
pub(crate) use store::PgUrl;

/// A Run's lease on a shared store, unless `leaseLength` says otherwise, and its bounds:
/// long enough that a heartbeat every few seconds survives a slow moment of the network,
/// short enough that a machine that died frees its Account within minutes.
pub(crate) const DEFAULT_LEASE: Duration = Duration::from_secs(60);
pub(crate) const LEASE_BOUNDS: (Duration, Duration) =
    (Duration::from_secs(10), Duration::from_secs(600));

/// The largest config file owl reads: far more than any config, and a bound on the work.
pub(crate) const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The config used when no file exists: one Account on the user's normal agent login.
pub(crate) const EMBEDDED_DEFAULTS: &str = r#"
accounts:
  default:
    driver: claude-code
    limits:
      fiveHourMax: 60
      weeklyMax: 50
"#;

/// The validated configuration every command works from.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Config {
    /// Where the config came from: a file, or the embedded defaults.
    #[serde(skip)]
    pub(crate) source: String,
    pub(crate) state_dir: PathBuf,
    /// Where every tick writes what monitoring reads (`metricsFile`); `None`: nowhere.
    pub(crate) metrics_file: Option<PathBuf>,
    /// PostgreSQL, when machines share one state (`store:`); `None`: the state dir's
    /// SQLite file. Printed without a password (it never holds one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) store: Option<PgUrl>,
    /// This machine's name among those sharing a store (default: the host name).
    pub(crate) machine: String,
    /// How long a live Run's lease lasts unless its supervisor renews it (a shared store
    /// only): after it, any machine's tick records the Run lost.
    #[serde(serialize_with = "ser_duration")]
    pub(crate) lease_length: Duration,
    #[serde(serialize_with = "ser_duration")]
    pub(crate) grace_window: Duration,
    #[serde(serialize_with = "ser_duration")]
    pub(crate) usage_poll_interval: Duration,
    #[serde(serialize_with = "ser_duration")]
    pub(crate) probe_max_age: Duration,
    /// In the user's day, how old a figure grows before an idle tick reads it (zero-token).
    #[serde(serialize_with = "ser_duration")]
    pub(crate) sample_every: Duration,
    /// How long the user's use by hour is kept.
    #[serde(serialize_with = "ser_duration")]
    pub(crate) user_use_retention: Duration,
    #[serde(serialize_with = "ser_duration")]
    pub(crate) stall_timeout: Duration,
    /// Below this much free space on the state dir's or a Job's repository's filesystem,
    /// no Run starts (0: never checked).
    #[serde(serialize_with = "ser_size")]
    pub(crate) min_free_space: u64,
    /// How long utilization Snapshots are kept; older ones are pruned by the tick.
    #[serde(serialize_with = "ser_duration")]
    pub(crate) snapshot_retention: Duration,
    /// What owl does with an agent CLI outside its tested range.
    pub(crate) agent_verification: AgentVerification,
    pub(crate) commit_author: String,
    /// How many Runs one state dir takes at once (one per Account at most, whatever this
    /// says: an Account runs one at a time). Default: one per Account.
    pub(crate) max_concurrent_runs: u32,
    pub(crate) defaults: JobDefaults,
    pub(crate) schedule: Schedule,
    pub(crate) accounts: BTreeMap<String, Account>,
    pub(crate) drivers: Drivers,
    pub(crate) sandbox: SandboxSettings,
    /// The command told of what happened at night; `None` without a `notify:` key.
    pub(crate) notify: Option<Notify>,
    /// Per-repository defaults (`repos:`), keyed by the repository's path as written,
    /// resolved (`~` expanded, made canonical when it exists).
    pub(crate) repos: BTreeMap<PathBuf, RepoDefaults>,
}

/// What owl tells a command after a Run: `notify:` in config.yaml.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Notify {
    /// argv, never a shell string. Its arguments may hold a secret (a webhook's URL): only
    /// the program is ever printed.
    #[serde(serialize_with = "ser_program_only")]
    pub(crate) command: Vec<String>,
    pub(crate) on: Vec<NotifyEvent>,
    /// How long the command may take before owl kills it (default 10 s).
    #[serde(serialize_with = "ser_duration")]
    pub(crate) timeout: Duration,
}

/// A command as `config check` prints it: the program, its arguments hidden.
fn ser_program_only<S: serde::Serializer>(argv: &[String], s: S) -> Result<S::Ok, S::Error> {
    let shown: Vec<&str> = argv
        .iter()
        .enumerate()
        .map(|(i, a)| if i == 0 { a.as_str() } else { "<hidden>" })
        .collect();
    shown.serialize(s)
}

/// The events a notify command can be told of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum NotifyEvent {
    /// Every Run, when it is recorded.
    RunEnded,
    /// A Job reached `done`.
    JobDone,
    /// A Job is `blocked`: it needs you.
    JobBlocked,
    /// A Job `failed`.
    JobFailed,
    /// A Run ended with its Account waiting (a ceiling, a rate limit, an outage).
    AccountWaiting,
    /// The agent said done, and the Job's check did not pass (it failed, timed out or
    /// could not start).
    CheckFailed,
}

impl NotifyEvent {
    pub(crate) const ALL: [NotifyEvent; 6] = [
        NotifyEvent::RunEnded,
        NotifyEvent::JobDone,
        NotifyEvent::JobBlocked,
        NotifyEvent::JobFailed,
        NotifyEvent::AccountWaiting,
        NotifyEvent::CheckFailed,
    ];

    /// The name used in config.yaml and in the payload's `event`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            NotifyEvent::RunEnded => "run-ended",
            NotifyEvent::JobDone => "job-done",
            NotifyEvent::JobBlocked => "job-blocked",
            NotifyEvent::JobFailed => "job-failed",
            NotifyEvent::AccountWaiting => "account-waiting",
            NotifyEvent::CheckFailed => "check-failed",
        }
    }
}

/// Where a Run's agent runs: as the user, or confined by bubblewrap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ExecutorKind {
    /// A child process of owl with the user's rights (ADR-0006).
    #[default]
    Local,
    /// Under bubblewrap: the Job's own clone, the credential store and a private /tmp
    /// writable, nothing else.
    Sandbox,
}

impl ExecutorKind {
    /// The name used in config.yaml, and on a Run's row.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ExecutorKind::Local => "local",
            ExecutorKind::Sandbox => "sandbox",
        }
    }

    /// The Executor `name` names; `None` for a name no owl wrote.
    pub(crate) fn from_name(name: &str) -> Option<ExecutorKind> {
        [ExecutorKind::Local, ExecutorKind::Sandbox]
            .into_iter()
            .find(|kind| kind.name() == name)
    }
}

/// How the `sandbox` executor confines a Run.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SandboxSettings {
    /// The bubblewrap binary (`bwrap` on PATH by default).
    pub(crate) command: PathBuf,
    /// More directories a Run may write (a build cache, say), beyond its own.
    pub(crate) writable: Vec<PathBuf>,
    /// The hosts (`host` or `host:port`) a sandboxed Run's tools may reach through owl's
    /// proxy, beyond its Account's API endpoints (`sandbox.allowHosts`).
    pub(crate) allow_hosts: Vec<String>,
}

impl Config {
    /// The hosts an Account's sandboxed Runs and checks may reach beyond its API:
    /// `sandbox.allowHosts`, then the Account's own.
    pub(crate) fn allow_hosts_of(&self, account: &Account) -> Vec<String> {
        self.sandbox
            .allow_hosts
            .iter()
            .chain(&account.allow_hosts)
            .cloned()
            .collect()
    }

    /// The state dir's layout: every path owl keeps there.
    pub(crate) fn state(&self) -> StateDir<'_> {
        StateDir(&self.state_dir)
    }

    /// An error about the value at `line` of this config, for a check a layer above makes.
    pub(crate) fn error_at(&self, line: Option<usize>, msg: &str) -> Error {
        let line = line.map(|n| format!("line {n}: ")).unwrap_or_default();
        Error::bad_input(format!("reading config {}: {line}{msg}", self.source))
    }
}

/// The state dir's layout, in one place: the database, the tick lock, the reserve, each
/// Job's working copy and each Run's logs, files and kept outcome.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StateDir<'a>(pub &'a Path);

impl StateDir<'_> {
    pub(crate) fn db(&self) -> PathBuf {
        self.0.join("owl.db")
    }

    pub(crate) fn lock(&self) -> PathBuf {
        self.0.join("tick.lock")
    }

    /// Where each Job's worktree (or sandboxed clone) is made.
    pub(crate) fn worktrees(&self) -> PathBuf {
        self.0.join("worktrees")
    }

    /// One Job's worktree or clone.
    pub(crate) fn worktree(&self, job_id: &str) -> PathBuf {
        self.worktrees().join(job_id)
    }

    /// Where a Job's Run logs are: each Run's transcript, stderr, files and kept outcome.
    pub(crate) fn logs(&self, job_id: &str) -> PathBuf {
        self.0.join("logs").join(job_id)
    }

    /// The transcript (the agent's stdout, byte for byte) of a Run.
    pub(crate) fn run_log(&self, job_id: &str, run_id: i64) -> PathBuf {
        self.logs(job_id).join(format!("{run_id}.jsonl"))
    }

    /// The agent's stderr of a Run, beside its transcript.
    pub(crate) fn run_stderr(&self, job_id: &str, run_id: i64) -> PathBuf {
        self.logs(job_id).join(format!("{run_id}.stderr.txt"))
    }

    /// An Account's run lock: held by a tick for the whole life of a Run on that Account.
    pub(crate) fn account_lock(&self, account: &str) -> PathBuf {
        self.locks().join(format!("{account}.lock"))
    }

    /// Where the Accounts' run locks are.
    pub(crate) fn locks(&self) -> PathBuf {
        self.0.join("locks")
    }

    /// Held by a tick while it runs a Job, and by `owl check` while it checks one: a
    /// check by hand never runs beside a Run of the same Job.
    pub(crate) fn job_lock(&self, job_id: &str) -> PathBuf {
        self.logs(job_id).join("job.lock")
    }

    /// What the last check run by hand (`owl check`) printed.
    pub(crate) fn hand_check_log(&self, job_id: &str) -> PathBuf {
        self.logs(job_id).join("check.txt")
    }

    /// What a Run's check printed (stdout and stderr interleaved), beside its transcript.
    pub(crate) fn run_check_log(&self, job_id: &str, run_id: i64) -> PathBuf {
        self.logs(job_id).join(format!("{run_id}.check.txt"))
    }

    /// The files a Run's CLI reads (its policy) and writes (the sandbox's report).
    /// Owl's mark that it is bringing Run `run_id`'s branch home from its clone: left by owl
    /// killed meanwhile, it tells the recovery that the git locks made since are owl's own.
    pub(crate) fn publish_mark(&self, job_id: &str, run_id: i64) -> PathBuf {
        self.logs(job_id).join(format!("{run_id}.bringing-home"))
    }

    pub(crate) fn run_files(&self, job_id: &str, run_id: i64) -> PathBuf {
        self.logs(job_id).join(format!("{run_id}.files"))
    }

    /// Where a Run's settlement is kept until the database has it.
    pub(crate) fn kept_outcome(&self, job_id: &str, run_id: i64) -> PathBuf {
        self.logs(job_id).join(format!("{run_id}.outcome.json"))
    }
}

/// What owl does with an agent CLI whose version is outside the tested range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum AgentVerification {
    /// The first tick that meets a new binary runs the conformance check on it (once, no
    /// tokens) and runs it only if it passes.
    #[default]
    Auto,
    /// Only the tested range, and binaries that passed `owl doctor --conformance`.
    Off,
}

/// What every Job gets unless `owl add` overrides it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JobDefaults {
    pub(crate) account: Option<String>,
    pub(crate) priority: i64,
    #[serde(serialize_with = "ser_duration")]
    pub(crate) max_run_time: Duration,
    pub(crate) max_runs: u32,
    pub(crate) max_budget_usd: Option<f64>,
    pub(crate) max_job_budget_usd: Option<f64>,
    /// How the agent CLI asks before acting (Claude Code's permission modes), checked by
    /// each Account's Driver.
    pub(crate) permission_mode: String,
    /// Where `defaults.permissionMode` stands in the file, for a Driver's refusal of it.
    #[serde(skip)]
    pub(crate) permission_mode_line: Option<usize>,
    pub(crate) allowed_tools: Vec<String>,
    pub(crate) disallowed_tools: Vec<String>,
    pub(crate) model: Option<String>,
    /// The check every Job's work must pass to be done (argv); `None`: the agent's word.
    pub(crate) check: Option<Vec<String>>,
    /// How long a check may run before it is killed, with what it started.
    #[serde(serialize_with = "ser_duration")]
    pub(crate) check_timeout: Duration,
    /// The environment every Account's agent gets (already merged into each Account's own
    /// `env`); kept here so that `config check` shows where a key came from, keys only.
    pub(crate) env: Env,
}

/// When a tick may start a Run.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Schedule {
    pub(crate) window: Option<TimeWindow>,
    /// When the user's day starts, without a `window` (whose end is the morning then).
    #[serde(serialize_with = "ser_opt_time")]
    pub(crate) morning: Option<chrono::NaiveTime>,
    /// When the user's day ends, with `morning` (`morning::DEFAULT_DAY_ENDS` when unset).
    #[serde(serialize_with = "ser_opt_time")]
    pub(crate) day_ends: Option<chrono::NaiveTime>,
}

/// A configured agent Account.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Account {
    pub(crate) driver: DriverKind,
    /// claude-code: becomes `CLAUDE_CONFIG_DIR`; `None` uses the user's normal login.
    pub(crate) credential_store: Option<PathBuf>,
    /// Extra environment for the agent. Never logged, stored or printed: only the keys are shown.
    pub(crate) env: Env,
    pub(crate) limits: Option<Limits>,
    /// When its user's day starts, when it is not `schedule.morning` (another person's plan).
    #[serde(serialize_with = "ser_opt_time")]
    pub(crate) morning: Option<chrono::NaiveTime>,
    /// How long a reactive Account (its Driver reports no utilization) waits after a rate
    /// limit whose reset the agent did not name.
    #[serde(serialize_with = "ser_duration")]
    pub(crate) backoff: Duration,
    pub(crate) executor: ExecutorKind,
    /// A codex Account's configuration for its Runs (`codexConfig:`), which owl gives the
    /// CLI on its command line: a Run does not read the credential store's `config.toml`,
    /// which the agent can write. A mapping of TOML keys; `None`: Codex's defaults.
    #[serde(serialize_with = "codex_config::serialize")]
    pub(crate) codex_config: Option<serde_json::Map<String, serde_json::Value>>,
    /// More hosts its sandboxed Runs (and their checks) may reach through owl's proxy,
    /// beyond `sandbox.allowHosts` (`allowHosts:`).
    pub(crate) allow_hosts: Vec<String>,
    /// Runs may spend a login billed per token, with no plan to bound it (`allowBilledUsage`).
    pub(crate) allow_billed_usage: bool,
    /// A reserve learned from the user's own days (`learnedReserve:`); `None`: off.
    pub(crate) learned_reserve: Option<LearnedReserve>,
    #[serde(skip)]
    pub(crate) learned_reserve_line: Option<usize>,
    /// The line of its `codexConfig:` key, for the Driver's refusal of it.
    #[serde(skip)]
    pub(crate) codex_config_line: Option<usize>,
    /// The line of its `limits:` key, for an error a layer above finds in it.
    #[serde(skip)]
    pub(crate) limits_line: Option<usize>,
}

impl Account {
    /// An Account with no ceiling whose Runs the local Executor runs (the conformance
    /// checks' own), with the default backoff.
    pub(crate) fn local(
        driver: DriverKind,
        credential_store: Option<PathBuf>,
        env: Env,
    ) -> Account {
        Account {
            driver,
            credential_store,
            env,
            limits: None,
            morning: None,
            backoff: DEFAULT_BACKOFF,
            executor: ExecutorKind::Local,
            codex_config: None,
            allow_hosts: Vec::new(),
            allow_billed_usage: false,
            learned_reserve: None,
            learned_reserve_line: None,
            codex_config_line: None,
            limits_line: None,
        }
    }

    /// A local Claude Code Account with no ceiling, for the unit tests.
    #[cfg(test)]
    pub(crate) fn plain() -> Account {
        Account::local(DriverKind::default(), None, Env::default())
    }
}

/// How long an Account that failed for a reason of its own is set aside (`backoff`).
pub(crate) const DEFAULT_BACKOFF: Duration = Duration::from_secs(3600);

/// Environment variables for the agent. Their values may be credentials, so `Debug` and
/// `Serialize` show only the keys, each with `<hidden>`.
#[derive(Clone, Default, PartialEq, Deserialize)]
#[serde(transparent)]
pub(crate) struct Env(pub(crate) BTreeMap<String, String>);

impl std::ops::Deref for Env {
    type Target = BTreeMap<String, String>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl fmt::Debug for Env {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.keys().map(|k| (k, "<hidden>")))
            .finish()
    }
}

impl Serialize for Env {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.keys().map(|k| (k, "<hidden>")))
    }
}

impl Env {
    /// `text` with every value long enough to be a secret replaced by `<hidden>`: what the
    /// agent printed may echo its credentials, and owl stores that text.
    pub(crate) fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for value in self.secrets() {
            out = out.replace(value.as_str(), "<hidden>");
        }
        out
    }

    /// The values long enough to be secrets. Short ones ("1", "max") are settings, and
    /// replacing them would garble the text; so are the paths of an environment.
    pub(crate) fn secrets(&self) -> Vec<String> {
        const NOT_SECRET: [&str; 5] = ["PATH", "HOME", "LANG", "TZ", "TMPDIR"];
        self.0
            .iter()
            .filter(|(k, v)| v.len() >= 8 && !NOT_SECRET.contains(&k.as_str()))
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// These variables, with `over`'s set on top.
    fn merged_with(&self, over: Env) -> Env {
        let mut all = self.0.clone();
        all.extend(over.0);
        Env(all)
    }
}

impl Account {
    /// Whether it keeps a Ceiling: its login must then be a plan's, which reports utilization.
    pub(crate) fn has_ceiling(&self) -> bool {
        self.limits.as_ref().is_some_and(Limits::any_ceiling)
    }
}

/// Local times of day between which a tick may start a Run; may wrap midnight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimeWindow {
    pub(crate) start: chrono::NaiveTime,
    pub(crate) end: chrono::NaiveTime,
}

impl TimeWindow {
    /// Whether a local time of day falls inside the window.
    pub(crate) fn contains(&self, t: chrono::NaiveTime) -> bool {
        if self.start <= self.end {
            self.start <= t && t < self.end
        } else {
            t >= self.start || t < self.end
        }
    }
}

impl fmt::Display for TimeWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}-{}",
            self.start.format("%H:%M"),
            self.end.format("%H:%M")
        )
    }
}

impl Serialize for TimeWindow {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Where the config file is looked for, in order.
/// Where the config is read from: `--config`, else `$OWL_CONFIG`, else
/// `$XDG_CONFIG_HOME/owl/config.yaml` (`~/.config/owl/config.yaml`); `None` when there is
/// no home to look in.
pub(crate) fn config_path(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("OWL_CONFIG").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    xdg_dir("XDG_CONFIG_HOME", ".config").map(|d| d.join("owl/config.yaml"))
}

/// Loads the config: the file when it exists (or was named explicitly), else the embedded defaults.
pub(crate) fn load(explicit: Option<&Path>) -> Result<Config, Error> {
    let Some(path) = config_path(explicit) else {
        return parse(EMBEDDED_DEFAULTS, "embedded defaults");
    };
    let must_exist = explicit.is_some() || std::env::var_os("OWL_CONFIG").is_some();
    match read_config_file(&path) {
        Ok(text) => parse(&text, &path.display().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !must_exist => {
            parse(EMBEDDED_DEFAULTS, "embedded defaults")
        }
        Err(e) => Err(Error::bad_input(format!(
            "reading config {}: {e}",
            path.display()
        ))),
    }
}

/// Reads a config file, which must be a regular file of at most [`MAX_CONFIG_BYTES`]:
/// `/dev/zero` would never end and a FIFO would block the tick forever.
fn read_config_file(path: &Path) -> std::io::Result<String> {
    use std::io::{Error, ErrorKind, Read};
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "not a regular file (a config is read whole, once)",
        ));
    }
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(MAX_CONFIG_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| match e.kind() {
            ErrorKind::InvalidData => Error::new(ErrorKind::InvalidData, "not UTF-8 text"),
            _ => e,
        })?;
    if text.len() as u64 > MAX_CONFIG_BYTES {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!(
                "larger than {} (no owl config is)",
                format_size(MAX_CONFIG_BYTES)
            ),
        ));
    }
    Ok(text)
}

/// Parses and validates config text; `source` names it in every error.
pub(crate) fn parse(text: &str, source: &str) -> Result<Config, Error> {
    // The parser's own positions first: a key given twice (which serde_yaml would settle
    // silently, last one wins) and input no config has are refused before anything else.
    let positions = Positions::read(text).map_err(|e| {
        Error::bad_input(format!(
            "reading config {source}: {}",
            raw::explain_structure(text, &e)
        ))
    })?;
    // An empty file is an empty mapping, not an error.
    let raw: RawConfig = if text.trim().is_empty() {
        RawConfig::default()
    } else {
        serde_yaml::from_str(text).map_err(|e| {
            Error::bad_input(match raw::tab_indented(text) {
                Some(tab) => format!("reading config {source}: {tab}"),
                None => describe_yaml_error(source, &positions, &e),
            })
        })?
    };
    validate::validate(raw, &positions, source)
}

/// Whether a name is safe to use as a path component and a branch name suffix.
pub(crate) fn is_safe_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && !name.starts_with(['.', '-'])
        && !name.ends_with(".lock")
        && !name.contains("..")
}

/// Expands a leading `~` or `~/` to the home directory.
pub(crate) fn expand_tilde(path: &str) -> PathBuf {
    match (path.strip_prefix('~'), std::env::var_os("HOME")) {
        (Some(""), Some(home)) => PathBuf::from(home),
        (Some(rest), Some(home)) if rest.starts_with('/') => {
            PathBuf::from(home).join(rest.trim_start_matches('/'))
        }
        _ => PathBuf::from(path),
    }
}

/// A check's program as the user meant it. `~/…` is the home's file, as every path in
/// config.yaml is, written out when the Job is queued: unexpanded, it has a `/` and would be
/// found inside the Job's working copy, whose every file the agent writes. `~name/…` is
/// refused, not guessed.
pub(crate) fn check_program(program: &str) -> Result<String, CheckProgramError> {
    if !program.starts_with('~') {
        return Ok(program.to_string());
    }
    let refused = |why| CheckProgramError {
        program: program.to_string(),
        why,
    };
    if program != "~" && !program.starts_with("~/") {
        return Err(refused("owl expands only ~/ (your home)"));
    }
    match home() {
        Some(_) => Ok(expand_tilde(program).display().to_string()),
        None => Err(refused("HOME is not set, so ~ means nothing")),
    }
}

/// Why a check's program cannot be taken as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("check program '{program}': {why}; write the path in full")]
pub(crate) struct CheckProgramError {
    pub(crate) program: String,
    pub(crate) why: &'static str,
}

/// Where a check's program is found, in words for `show`: a path of the user's, a file of
/// the Job's working copy (which the agent can change), or a name looked up on `PATH`.
pub(crate) fn check_program_place(program: &str) -> String {
    if program.starts_with('/') {
        format!("runs {program}")
    } else if program.contains('/') {
        format!("runs {program} in the Job's working copy: a file the agent can change")
    } else {
        format!("runs {program} as found on PATH")
    }
}

/// `$VAR` if it is set to an absolute path (the XDG spec ignores relative ones), else
/// `~/fallback`; `None` when neither is there.
fn xdg_dir(var: &str, fallback: &str) -> Option<PathBuf> {
    match std::env::var_os(var).map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => Some(dir),
        _ => home().map(|h| h.join(fallback)),
    }
}

/// `$HOME`, when it is set to an absolute path.
fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
}

#[cfg(test)]
mod tests {
    use super::units::parse_size;
    use super::*;

    /// The message of a config refused as bad input (any other kind fails the test).
    fn err(text: &str) -> String {
        let e = parse(text, "/c.yaml").unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::BadInput, "{e}");
        e.message
    }

    #[test]
    fn embedded_defaults_have_one_account_with_ceilings() {
        let c = parse(EMBEDDED_DEFAULTS, "embedded defaults").unwrap();
        let acc = &c.accounts["default"];
        assert_eq!(acc.limits.unwrap().five_hour_max, Some(60.0));
        assert_eq!(acc.limits.unwrap().weekly_max, Some(50.0));
        assert_eq!(c.defaults.permission_mode, "dontAsk");
        assert_eq!(c.grace_window, Duration::from_secs(30));
        assert_eq!(c.stall_timeout, Duration::from_secs(900));
    }

    #[test]
    fn misspelled_ceiling_names_file_line_key_and_suggestion() {
        let e = err("accounts:\n  work:\n    limits:\n      fiveHourMAx: 60\n");
        assert_eq!(
            e,
            "reading config /c.yaml: line 4: unknown key 'fiveHourMAx' in 'accounts.work.limits' \
             (did you mean 'fiveHourMax'?)"
        );
    }

    #[test]
    fn unknown_top_level_key_is_refused() {
        let e = err("graceWindw: 30s\naccounts: {a: {}}\n");
        assert!(e.contains("line 1"), "{e}");
        assert!(e.contains("unknown key 'graceWindw'"), "{e}");
        assert!(e.contains("did you mean 'graceWindow'"), "{e}");
    }

    #[test]
    fn unknown_key_far_from_any_gets_no_suggestion() {
        let e = err("accounts: {a: {}}\nzzzzzz: 1\n");
        assert!(e.contains("unknown key 'zzzzzz'"), "{e}");
        assert!(!e.contains("did you mean"), "{e}");
    }

    #[test]
    fn ceiling_out_of_range_is_refused_with_line() {
        let e = err("accounts:\n  a:\n    limits:\n      weeklyMax: 120\n");
        assert!(e.contains("line 4"), "{e}");
        assert!(e.contains("out of range"), "{e}");
    }

    #[test]
    fn bad_duration_is_refused_with_line() {
        let e = err("accounts: {a: {}}\ngraceWindow: 30 seconds\n");
        assert!(e.contains("line 2"), "{e}");
        assert!(e.contains("'30 seconds' is not a duration"), "{e}");
    }

    #[test]
    fn unknown_driver_is_refused() {
        let e = err("accounts:\n  a:\n    driver: claude-cod\n");
        assert!(e.contains("line 3"), "{e}");
        assert!(e.contains("did you mean 'claude-code'"), "{e}");
    }

    #[test]
    fn default_account_must_exist() {
        let e = err("defaults:\n  account: wrok\naccounts:\n  work: {}\n");
        assert!(e.contains("line 2"), "{e}");
        assert!(e.contains("did you mean 'work'"), "{e}");
    }

    #[test]
    fn sizes_parse_and_format() {
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("500MiB"), Ok(500 << 20));
        assert_eq!(parse_size("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("0"), Ok(0));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("1 parsec").is_err());
        assert_eq!(format_size(1 << 30), "1GiB");
        assert_eq!(format_size(1536 << 20), "1.5GiB");
        assert_eq!(format_size(76_952_840 << 10), "73.4GiB");
        assert_eq!(format_size((1536 << 20) + 1), "1.5GiB");
        assert_eq!(format_size(12), "12B");
        let c = parse("minFreeSpace: 256MiB\naccounts: {work: {}}\n", "/c.yaml").unwrap();
        assert_eq!(c.min_free_space, 256 << 20);
        let c = parse("accounts: {work: {}}\n", "/c.yaml").unwrap();
        assert_eq!(c.min_free_space, DEFAULT_MIN_FREE_SPACE);
        let e = err("accounts: {work: {}}\nminFreeSpace: heaps\n");
        assert!(
            e.contains("line 2") && e.contains("'heaps' is not a size"),
            "{e}"
        );
    }

    #[test]
    fn durations_parse_and_format() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("4h").unwrap(), Duration::from_secs(14400));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("30").is_err());
        assert!(parse_duration("h").is_err());
        assert!(parse_duration("99999999999999999999d").is_err());
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
    }

    #[test]
    fn tilde_expands_to_home() {
        let home = std::env::var("HOME").unwrap();
        assert_eq!(expand_tilde("~/x"), PathBuf::from(&home).join("x"));
        assert_eq!(expand_tilde("/abs"), PathBuf::from("/abs"));
        assert_eq!(expand_tilde("~user/x"), PathBuf::from("~user/x"));
    }

    #[test]
    fn a_check_program_with_a_tilde_is_the_homes_never_a_relative_path() {
        let home = std::env::var("HOME").unwrap();
        assert_eq!(
            check_program("~/bin/check"),
            Ok(format!("{}/bin/check", home.trim_end_matches('/')))
        );
        assert_eq!(check_program("cargo"), Ok("cargo".into()));
        assert_eq!(check_program("./ci/check"), Ok("./ci/check".into()));
        let refused = check_program("~other/bin/check").unwrap_err();
        assert_eq!(refused.why, "owl expands only ~/ (your home)");
        assert!(
            refused.to_string().contains("~other/bin/check"),
            "{refused}"
        );
        assert!(check_program_place("./ci/check").contains("the agent can change"));
        assert_eq!(check_program_place("/usr/bin/make"), "runs /usr/bin/make");
    }

    #[test]
    fn time_window_wraps_midnight() {
        let c = parse(
            "schedule:\n  window: \"22:00-07:00\"\naccounts: {a: {}}\n",
            "x",
        )
        .unwrap();
        let w = c.schedule.window.unwrap();
        let t = |s| chrono::NaiveTime::parse_from_str(s, "%H:%M").unwrap();
        assert!(w.contains(t("23:30")));
        assert!(w.contains(t("03:00")));
        assert!(!w.contains(t("12:00")));
        assert!(!w.contains(t("07:00")));
    }

    #[test]
    fn env_values_are_never_serialized() {
        let c = parse(
            "accounts:\n  a:\n    env:\n      CLAUDE_CODE_OAUTH_TOKEN: sk-secret\n",
            "x",
        )
        .unwrap();
        let json = serde_json::to_string(&c).unwrap();
        assert!(!json.contains("sk-secret"));
        assert!(json.contains("CLAUDE_CODE_OAUTH_TOKEN"));
        // Nor shown by Debug, of the config or of a command built from it.
        let debug = format!("{c:?}");
        assert!(
            !debug.contains("sk-secret") && debug.contains("<hidden>"),
            "{debug}"
        );
        use crate::driver::Driver;
        let inv =
            crate::driver::ClaudeCode.version_invocation(Path::new("claude"), &c.accounts["a"]);
        assert!(!format!("{inv:?}").contains("sk-secret"), "{inv:?}");
        assert_eq!(
            c.accounts["a"].env.scrub("token sk-secret!"),
            "token <hidden>!"
        );
        // A short value is a setting: hiding it would garble the text.
        let short = parse("accounts:\n  a:\n    env: {RETRIES: \"1\"}\n", "x").unwrap();
        assert_eq!(
            short.accounts["a"].env.scrub("retry 1 of 10"),
            "retry 1 of 10"
        );
        let long = parse("accounts:\n  a:\n    env: {T: sk-ant-long-secret}\n", "x").unwrap();
        assert_eq!(
            long.accounts["a"].env.scrub("t=sk-ant-long-secret."),
            "t=<hidden>."
        );
    }

    #[test]
    fn safe_names() {
        assert!(is_safe_name("fix-login_2.0"));
        for bad in ["", "../x", "a/b", ".hidden", "-x", "a..b", "x.lock", "a b"] {
            assert!(!is_safe_name(bad), "{bad}");
        }
    }
}
