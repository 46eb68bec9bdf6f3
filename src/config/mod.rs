//! config.yaml: the raw file (serde, unknown keys refused) turned into a validated [`Config`].

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

use crate::error::BadInput;
use crate::text::format_size;

mod positions;
use positions::Positions;

/// The largest config file owl reads: far more than any config, and a bound on the work.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The config used when no file exists: one Account on the user's normal agent login.
pub const EMBEDDED_DEFAULTS: &str = r#"
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
pub struct Config {
    /// Where the config came from: a file, or the embedded defaults.
    #[serde(skip)]
    pub source: String,
    pub state_dir: PathBuf,
    #[serde(serialize_with = "ser_duration")]
    pub grace_window: Duration,
    #[serde(serialize_with = "ser_duration")]
    pub usage_poll_interval: Duration,
    #[serde(serialize_with = "ser_duration")]
    pub probe_max_age: Duration,
    #[serde(serialize_with = "ser_duration")]
    pub stall_timeout: Duration,
    /// Below this much free space on the state dir's or a Job's repository's filesystem,
    /// no Run starts (0: never checked).
    #[serde(serialize_with = "ser_size")]
    pub min_free_space: u64,
    /// How long utilization Snapshots are kept; older ones are pruned by the tick.
    #[serde(serialize_with = "ser_duration")]
    pub snapshot_retention: Duration,
    pub commit_author: String,
    pub defaults: JobDefaults,
    pub schedule: Schedule,
    pub accounts: BTreeMap<String, Account>,
    pub drivers: Drivers,
}

impl Config {
    /// An error about the value at `line` of this config, for a check a layer above makes.
    pub fn error_at(&self, line: Option<usize>, msg: &str) -> BadInput {
        let line = line.map(|n| format!("line {n}: ")).unwrap_or_default();
        BadInput(format!("reading config {}: {line}{msg}", self.source))
    }
}

/// What every Job gets unless `owl add` overrides it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobDefaults {
    pub account: Option<String>,
    pub priority: i64,
    #[serde(serialize_with = "ser_duration")]
    pub max_run_time: Duration,
    pub max_runs: u32,
    pub max_budget_usd: Option<f64>,
    pub max_job_budget_usd: Option<f64>,
    pub permission_mode: String,
    pub allowed_tools: Vec<String>,
    pub disallowed_tools: Vec<String>,
    pub model: Option<String>,
}

/// When a tick may start a Run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Schedule {
    pub window: Option<TimeWindow>,
}

/// A configured agent Account.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Account {
    pub driver: DriverKind,
    /// claude-code: becomes `CLAUDE_CONFIG_DIR`; `None` uses the user's normal login.
    pub credential_store: Option<PathBuf>,
    /// Extra environment for the agent. Never logged, stored or printed: only the keys are shown.
    pub env: Env,
    pub limits: Option<Limits>,
    /// The line of its `limits:` key, for an error a layer above finds in it.
    #[serde(skip)]
    pub limits_line: Option<usize>,
}

/// Environment variables for the agent. Their values may be credentials, so `Debug` and
/// `Serialize` show only the keys, each with `<hidden>`.
#[derive(Clone, Default, PartialEq, Deserialize)]
#[serde(transparent)]
pub struct Env(pub BTreeMap<String, String>);

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
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for value in self.secrets() {
            out = out.replace(value.as_str(), "<hidden>");
        }
        out
    }

    /// The values long enough to be secrets. Short ones ("1", "max") are settings, and
    /// replacing them would garble the text; so are the paths of an environment.
    pub fn secrets(&self) -> Vec<String> {
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

/// The Ceilings of one Account, in percent of each Window.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Limits {
    #[serde(default, deserialize_with = "de_percent")]
    pub five_hour_max: Option<f64>,
    #[serde(default, deserialize_with = "de_percent")]
    pub weekly_max: Option<f64>,
}

/// The agent CLIs owl has a Driver for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DriverKind {
    #[serde(rename = "claude-code")]
    ClaudeCode,
}

impl DriverKind {
    /// The name used in config.yaml.
    pub fn name(self) -> &'static str {
        match self {
            DriverKind::ClaudeCode => "claude-code",
        }
    }
}

/// Per-Driver settings.
#[derive(Debug, Clone, Serialize)]
pub struct Drivers {
    #[serde(rename = "claude-code")]
    pub claude_code: DriverSettings,
}

impl Drivers {
    /// The settings of one Driver.
    pub fn get(&self, kind: DriverKind) -> &DriverSettings {
        match kind {
            DriverKind::ClaudeCode => &self.claude_code,
        }
    }
}

/// How to start one agent CLI.
#[derive(Debug, Clone, Serialize)]
pub struct DriverSettings {
    pub command: PathBuf,
}

/// Local times of day between which a tick may start a Run; may wrap midnight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWindow {
    pub start: chrono::NaiveTime,
    pub end: chrono::NaiveTime,
}

impl TimeWindow {
    /// Whether a local time of day falls inside the window.
    pub fn contains(&self, t: chrono::NaiveTime) -> bool {
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

// ---------------------------------------------------------------------------
// The raw file. Every struct refuses unknown keys: a misspelled ceiling must not
// look like no ceiling (ADR-0014, ADR-0020).

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawConfig {
    state_dir: Option<String>,
    #[serde(default, deserialize_with = "de_duration")]
    grace_window: Option<Duration>,
    #[serde(default, deserialize_with = "de_duration")]
    usage_poll_interval: Option<Duration>,
    #[serde(default, deserialize_with = "de_duration")]
    probe_max_age: Option<Duration>,
    #[serde(default, deserialize_with = "de_duration")]
    stall_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "de_size")]
    min_free_space: Option<u64>,
    #[serde(default, deserialize_with = "de_duration")]
    snapshot_retention: Option<Duration>,
    commit_author: Option<String>,
    defaults: Option<RawDefaults>,
    schedule: Option<RawSchedule>,
    accounts: Option<BTreeMap<String, RawAccount>>,
    drivers: Option<RawDrivers>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawDefaults {
    /// `Some(None)`: written as `null`, any Account.
    #[serde(default, deserialize_with = "de_explicit_null")]
    account: Option<Option<String>>,
    priority: Option<i64>,
    #[serde(default, deserialize_with = "de_duration")]
    max_run_time: Option<Duration>,
    max_runs: Option<u32>,
    #[serde(default, deserialize_with = "de_explicit_null")]
    max_budget_usd: Option<Option<f64>>,
    #[serde(default, deserialize_with = "de_explicit_null")]
    max_job_budget_usd: Option<Option<f64>>,
    permission_mode: Option<String>,
    allowed_tools: Option<Vec<String>>,
    disallowed_tools: Option<Vec<String>>,
    model: Option<String>,
    /// Environment for every Account's agent (an Account's own `env:` wins per key): the
    /// place for a `PATH` that lets the agent's tools find cargo or npm under cron.
    #[serde(default)]
    env: Env,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSchedule {
    #[serde(default, deserialize_with = "de_time_window")]
    window: Option<TimeWindow>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawAccount {
    driver: Option<DriverKind>,
    credential_store: Option<String>,
    #[serde(default)]
    env: Env,
    limits: Option<Limits>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDrivers {
    #[serde(rename = "claude-code")]
    claude_code: Option<RawDriverSettings>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDriverSettings {
    command: Option<String>,
}

/// The permission modes Claude Code accepts; `bypassPermissions` is refused on purpose
/// because nobody is watching an unattended Run (ADR-0006).
const PERMISSION_MODES: &[&str] = &["acceptEdits", "default", "dontAsk", "plan", "auto"];

/// Where the config file is looked for, in order.
/// Where the config is read from: `--config`, else `$OWL_CONFIG`, else
/// `$XDG_CONFIG_HOME/owl/config.yaml` (`~/.config/owl/config.yaml`); `None` when there is
/// no home to look in.
pub fn config_path(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("OWL_CONFIG").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    xdg_dir("XDG_CONFIG_HOME", ".config").map(|d| d.join("owl/config.yaml"))
}

/// Loads the config: the file when it exists (or was named explicitly), else the embedded defaults.
pub fn load(explicit: Option<&Path>) -> Result<Config, BadInput> {
    let Some(path) = config_path(explicit) else {
        return parse(EMBEDDED_DEFAULTS, "embedded defaults");
    };
    let must_exist = explicit.is_some() || std::env::var_os("OWL_CONFIG").is_some();
    match read_config_file(&path) {
        Ok(text) => parse(&text, &path.display().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !must_exist => {
            parse(EMBEDDED_DEFAULTS, "embedded defaults")
        }
        Err(e) => Err(BadInput(format!("reading config {}: {e}", path.display()))),
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
pub fn parse(text: &str, source: &str) -> Result<Config, BadInput> {
    // The parser's own positions first: a key given twice (which serde_yaml would settle
    // silently, last one wins) and input no config has are refused before anything else.
    let positions = Positions::read(text).map_err(|e| {
        let line = e.line.map(|n| format!("line {n}: ")).unwrap_or_default();
        BadInput(format!("reading config {source}: {line}{}", e.message))
    })?;
    // An empty file is an empty mapping, not an error.
    let raw: RawConfig = if text.trim().is_empty() {
        RawConfig::default()
    } else {
        serde_yaml::from_str(text)
            .map_err(|e| BadInput(describe_yaml_error(source, &positions, &e)))?
    };
    validate(raw, &positions, source)
}

fn validate(raw: RawConfig, positions: &Positions, source: &str) -> Result<Config, BadInput> {
    // `path` names the key (`defaults.maxRuns`): the error stands on its line.
    let at = |path: &str, msg: String| {
        let line = positions
            .value_line(path)
            .or_else(|| positions.key_line(path))
            .map(|n| format!("line {n}: "))
            .unwrap_or_default();
        BadInput(format!("reading config {source}: {line}{msg}"))
    };
    let path_at = |path: &str, value: &str| config_path_value(value).map_err(|m| at(path, m));
    for (path, value, min) in [
        ("graceWindow", raw.grace_window, Duration::from_secs(1)),
        (
            "usagePollInterval",
            raw.usage_poll_interval,
            Duration::from_millis(100),
        ),
        ("probeMaxAge", raw.probe_max_age, Duration::from_secs(1)),
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
    ] {
        if let Some(d) = value.filter(|d| *d < min) {
            let key = path.rsplit('.').next().unwrap_or(path);
            return Err(at(
                path,
                format!(
                    "{key} {} is below its minimum of {}",
                    format_duration(d),
                    format_duration(min)
                ),
            ));
        }
    }

    let default_env = raw
        .defaults
        .as_ref()
        .map(|d| d.env.clone())
        .unwrap_or_default();
    let mut accounts = BTreeMap::new();
    for (name, acc) in raw.accounts.unwrap_or_default() {
        let here = format!("accounts.{name}");
        if !is_safe_name(&name) {
            return Err(at(
                &here,
                format!("account name '{name}' may hold only letters, digits, '.', '_' and '-'"),
            ));
        }
        let driver = acc.driver.unwrap_or(DriverKind::ClaudeCode);
        let limits_line = positions.key_line(&format!("{here}.limits"));
        let credential_store = match acc.credential_store.as_deref() {
            Some(dir) => Some(path_at(&format!("{here}.credentialStore"), dir)?),
            None => None,
        };
        accounts.insert(
            name,
            Account {
                driver,
                credential_store,
                env: default_env.merged_with(acc.env),
                limits: acc.limits,
                limits_line,
            },
        );
    }
    if accounts.is_empty() {
        return Err(BadInput(format!(
            "reading config {source}: 'accounts' names no Account; owl needs at least one"
        )));
    }

    let d = raw.defaults.unwrap_or_default();
    let account = d.account.unwrap_or(None);
    if let Some(name) = &account {
        if !accounts.contains_key(name) {
            let known: Vec<&str> = accounts.keys().map(String::as_str).collect();
            return Err(at(
                "defaults.account",
                format!(
                    "defaults.account '{name}' is not a configured Account{}",
                    did_you_mean(name, &known)
                ),
            ));
        }
    }
    let permission_mode = d.permission_mode.unwrap_or_else(|| "dontAsk".into());
    if !PERMISSION_MODES.contains(&permission_mode.as_str()) {
        return Err(at(
            "defaults.permissionMode",
            format!(
                "permissionMode '{permission_mode}' is not one of {}{}",
                PERMISSION_MODES.join(", "),
                did_you_mean(&permission_mode, PERMISSION_MODES)
            ),
        ));
    }
    for (key, budget) in [
        ("maxBudgetUsd", d.max_budget_usd),
        ("maxJobBudgetUsd", d.max_job_budget_usd),
    ] {
        if let Some(Some(x)) = budget {
            if !x.is_finite() || x <= 0.0 {
                return Err(at(
                    &format!("defaults.{key}"),
                    format!("{key} must be a finite number greater than 0, not {x}"),
                ));
            }
        }
    }
    if d.max_runs == Some(0) {
        return Err(at("defaults.maxRuns", "maxRuns must be at least 1".into()));
    }
    let defaults = JobDefaults {
        account,
        priority: d.priority.unwrap_or(0),
        max_run_time: d.max_run_time.unwrap_or(Duration::from_secs(4 * 3600)),
        max_runs: d.max_runs.unwrap_or(5),
        max_budget_usd: d.max_budget_usd.unwrap_or(Some(5.0)),
        max_job_budget_usd: d.max_job_budget_usd.unwrap_or(Some(20.0)),
        permission_mode,
        allowed_tools: d.allowed_tools.unwrap_or_else(default_allowed_tools),
        disallowed_tools: d.disallowed_tools.unwrap_or_default(),
        model: d.model,
    };

    let drivers = raw.drivers.unwrap_or_default();
    let claude_command = match drivers.claude_code.and_then(|d| d.command) {
        // A bare name is looked up on PATH; anything else is a path and must be one.
        Some(c) if c.contains('/') || c.starts_with('~') || c.contains('$') => {
            path_at("drivers.claude-code.command", &c)?
        }
        Some(c) if c.is_empty() => {
            return Err(at(
                "drivers.claude-code.command",
                "drivers.claude-code.command is empty".into(),
            ))
        }
        Some(c) => PathBuf::from(c),
        None => PathBuf::from("claude"),
    };

    let state_dir = match raw.state_dir.as_deref() {
        Some(dir) => path_at("stateDir", dir)?,
        None => xdg_dir("XDG_STATE_HOME", ".local/state")
            .map(|d| d.join("owl"))
            .ok_or_else(|| {
                BadInput(format!(
                    "reading config {source}: neither HOME nor XDG_STATE_HOME is set, so there \
                     is no default state dir; set stateDir to an absolute path"
                ))
            })?,
    };

    Ok(Config {
        source: source.to_string(),
        state_dir,
        grace_window: raw.grace_window.unwrap_or(Duration::from_secs(30)),
        usage_poll_interval: raw.usage_poll_interval.unwrap_or(Duration::from_secs(60)),
        probe_max_age: raw.probe_max_age.unwrap_or(Duration::from_secs(600)),
        stall_timeout: raw.stall_timeout.unwrap_or(Duration::from_secs(15 * 60)),
        min_free_space: raw.min_free_space.unwrap_or(DEFAULT_MIN_FREE_SPACE),
        snapshot_retention: raw
            .snapshot_retention
            .unwrap_or(Duration::from_secs(35 * 86_400)),
        commit_author: raw
            .commit_author
            .unwrap_or_else(|| "owl <owl@localhost>".into()),
        defaults,
        schedule: Schedule {
            window: raw.schedule.and_then(|s| s.window),
        },
        accounts,
        drivers: Drivers {
            claude_code: DriverSettings {
                command: claude_command,
            },
        },
    })
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

/// Whether a name is safe to use as a path component and a branch name suffix.
pub fn is_safe_name(name: &str) -> bool {
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
pub fn expand_tilde(path: &str) -> PathBuf {
    match (path.strip_prefix('~'), std::env::var_os("HOME")) {
        (Some(""), Some(home)) => PathBuf::from(home),
        (Some(rest), Some(home)) if rest.starts_with('/') => {
            PathBuf::from(home).join(rest.trim_start_matches('/'))
        }
        _ => PathBuf::from(path),
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

// ---------------------------------------------------------------------------
// Error messages

/// Turns a serde_yaml error into `reading config F: line N: ...`, with a suggestion for
/// an unknown key. The line comes from the parser's positions: serde_yaml names only the
/// enclosing mapping of a value it refuses.
fn describe_yaml_error(source: &str, positions: &Positions, e: &serde_yaml::Error) -> String {
    let full = e.to_string();
    // serde_yaml appends " at line L column C"; we say the line ourselves, first.
    let msg = match full.rfind(" at line ") {
        Some(i) => &full[..i],
        None => &full,
    };
    // A nested error starts with its path, e.g. "accounts.work.limits: unknown field ...".
    let (path, msg) = match msg.split_once(": ") {
        Some((p, m)) if !p.contains(' ') => (Some(p), m),
        _ => (None, msg),
    };
    let within = path.map(|p| format!(" in '{p}'")).unwrap_or_default();
    let (line, explained) = if let Some(rest) = msg.strip_prefix("unknown field `") {
        let (key, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let known = backticked(expected);
        let full_key = path.map_or(key.to_string(), |p| format!("{p}.{key}"));
        (
            positions.key_line(&full_key),
            format!("unknown key '{key}'{within}{}", did_you_mean(key, &known)),
        )
    } else if let Some(rest) = msg.strip_prefix("unknown variant `") {
        let (value, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let known = backticked(expected);
        (
            positions.find_value(path.unwrap_or(""), value),
            format!(
                "unknown value '{value}'{within}, expected one of: {}{}",
                known.join(", "),
                did_you_mean(value, &known)
            ),
        )
    } else {
        // Our own value errors quote the value: find it inside the mapping named.
        let line = quoted(msg).and_then(|v| positions.find_value(path.unwrap_or(""), v));
        (line, format!("{msg}{within}"))
    };
    let line = line
        .or_else(|| e.location().map(|l| l.line()))
        .map(|n| format!("line {n}: "))
        .unwrap_or_default();
    format!("reading config {source}: {line}{explained}")
}

/// The first `'quoted'` value in a message.
fn quoted(msg: &str) -> Option<&str> {
    let start = msg.find('\'')? + 1;
    let len = msg[start..].find('\'')?;
    Some(&msg[start..start + len])
}

fn backticked(s: &str) -> Vec<&str> {
    s.split('`').skip(1).step_by(2).collect()
}

/// `" (did you mean 'x'?)"` when a known word is close to the unknown one.
pub fn did_you_mean(unknown: &str, known: &[&str]) -> String {
    let lower = unknown.to_lowercase();
    known
        .iter()
        .map(|k| (edit_distance(&lower, &k.to_lowercase()), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 3))
        .min()
        .map(|(_, k)| format!(" (did you mean '{k}'?)"))
        .unwrap_or_default()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

// ---------------------------------------------------------------------------
// Value types

/// The default `minFreeSpace`: 1 GiB, room for a night of logs, commits and the database.
pub const DEFAULT_MIN_FREE_SPACE: u64 = 1 << 30;

/// Parses a size: `1GiB`, `500MiB`, `64KiB`, `2GB`, `100MB`, `4096` (bytes), `0`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let bad = || format!("'{s}' is not a size (use e.g. 1GiB, 500MiB, 2GB, 0)");
    let t = s.trim();
    let digits = t
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b'.')
        .count();
    let n: f64 = t[..digits].parse().map_err(|_| bad())?;
    let factor: u64 = match t[digits..].trim() {
        "" | "B" => 1,
        "KiB" | "K" => 1 << 10,
        "MiB" | "M" => 1 << 20,
        "GiB" | "G" => 1 << 30,
        "TiB" | "T" => 1 << 40,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => return Err(bad()),
    };
    let bytes = n * factor as f64;
    if !bytes.is_finite() || bytes > u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes as u64)
}

/// Parses `30s`, `15m`, `4h`, `1h30m`, `2d`, `500ms`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("'{s}' is not a duration (use e.g. 30s, 15m, 4h, 1h30m)");
    let s = s.trim();
    if s.is_empty() {
        return Err(bad());
    }
    let mut total_ms: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let factor = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total_ms = n
            .checked_mul(factor)
            .and_then(|x| total_ms.checked_add(x))
            .ok_or_else(bad)?;
    }
    Ok(Duration::from_millis(total_ms))
}

/// Formats a duration the way config.yaml writes it: `1h30m`, `45s`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis() as u64;
    if !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let mut secs = ms / 1000;
    if secs == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
        if secs >= size {
            out.push_str(&format!("{}{unit}", secs / size));
            secs %= size;
        }
    }
    out
}

fn ser_size<S: serde::Serializer>(bytes: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_size(*bytes))
}

fn de_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    // A bare number is bytes; YAML hands it over as a number, not a string.
    let v = serde_yaml::Value::deserialize(d)?;
    let text = match &v {
        serde_yaml::Value::Number(n) => n.to_string(),
        serde_yaml::Value::String(s) => s.clone(),
        _ => {
            return Err(serde::de::Error::custom(
                "a size is a number or text like 1GiB",
            ))
        }
    };
    parse_size(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

fn ser_duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_duration(*d))
}

fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let s = String::deserialize(d)?;
    parse_duration(&s)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

fn de_percent<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let x = f64::deserialize(d)?;
    if !(0.0..=100.0).contains(&x) {
        return Err(serde::de::Error::custom(format!(
            "'{x}' is out of range: a ceiling is a percent from 0 to 100"
        )));
    }
    Ok(Some(x))
}

fn de_explicit_null<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

fn de_time_window<'de, D: Deserializer<'de>>(d: D) -> Result<Option<TimeWindow>, D::Error> {
    let s = String::deserialize(d)?;
    let bad = || {
        serde::de::Error::custom(format!(
            "'{s}' is not a time window (use local times like \"22:00-07:00\")"
        ))
    };
    let (a, b) = s.split_once('-').ok_or_else(bad)?;
    let t = |x: &str| chrono::NaiveTime::parse_from_str(x.trim(), "%H:%M");
    Ok(Some(TimeWindow {
        start: t(a).map_err(|_| bad())?,
        end: t(b).map_err(|_| bad())?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(text, "/c.yaml").unwrap_err().0
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
    fn bypass_permissions_is_refused() {
        let e = err("defaults:\n  permissionMode: bypassPermissions\naccounts: {a: {}}\n");
        assert!(e.contains("permissionMode 'bypassPermissions'"), "{e}");
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
