//! config.yaml as written: the raw serde types (each refusing unknown keys, so that a misspelled ceiling never looks like no ceiling: ADR-0014, ADR-0020), their value parsers, and serde_yaml's errors told with the line they stand on.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use super::positions::Positions;
use super::units::{parse_duration, parse_size};
use super::{DriverKind, Env, Limits, TimeWindow};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RawConfig {
    pub(super) state_dir: Option<String>,
    pub(super) metrics_file: Option<String>,
    pub(super) store: Option<String>,
    pub(super) machine: Option<String>,
    #[serde(default, deserialize_with = "de_duration")]
    pub(super) lease_length: Option<Duration>,
    #[serde(default, deserialize_with = "de_duration")]
    pub(super) grace_window: Option<Duration>,
    #[serde(default, deserialize_with = "de_duration")]
    pub(super) usage_poll_interval: Option<Duration>,
    #[serde(default, deserialize_with = "de_duration")]
    pub(super) probe_max_age: Option<Duration>,
    #[serde(default, deserialize_with = "de_duration")]
    pub(super) sample_every: Option<Duration>,
    #[serde(default, deserialize_with = "de_duration")]
    pub(super) user_use_retention: Option<Duration>,
    #[serde(default, deserialize_with = "de_duration")]
    pub(super) stall_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "de_size")]
    pub(super) min_free_space: Option<u64>,
    #[serde(default, deserialize_with = "de_duration")]
    pub(super) snapshot_retention: Option<Duration>,
    pub(super) agent_verification: Option<super::AgentVerification>,
    pub(super) commit_author: Option<String>,
    pub(super) max_concurrent_runs: Option<u32>,
    pub(super) defaults: Option<RawDefaults>,
    pub(super) schedule: Option<RawSchedule>,
    pub(super) accounts: Option<BTreeMap<String, RawAccount>>,
    pub(super) drivers: Option<RawDrivers>,
    pub(super) sandbox: Option<RawSandbox>,
    pub(super) notify: Option<RawNotify>,
    /// Per-repository defaults, keyed by the repository's path.
    pub(super) repos: Option<BTreeMap<String, RawRepo>>,
}

/// What one repository's Jobs get unless `owl add` overrides it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RawRepo {
    pub(super) check: Option<Vec<String>>,
    #[serde(default, deserialize_with = "de_duration")]
    pub(super) check_timeout: Option<Duration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNotify {
    pub(super) command: Vec<String>,
    #[serde(default)]
    pub(super) on: Option<Vec<super::NotifyEvent>>,
    #[serde(default, deserialize_with = "de_duration")]
    pub(super) timeout: Option<Duration>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSandbox {
    pub(super) command: Option<String>,
    #[serde(default)]
    pub(super) writable: Vec<String>,
    #[serde(default, rename = "allowHosts")]
    pub(super) allow_hosts: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RawDefaults {
    /// `Some(None)`: written as `null`, any Account.
    #[serde(default, deserialize_with = "de_explicit_null")]
    pub(super) account: Option<Option<String>>,
    pub(super) priority: Option<i64>,
    #[serde(default, deserialize_with = "de_duration")]
    pub(super) max_run_time: Option<Duration>,
    pub(super) max_runs: Option<u32>,
    #[serde(default, deserialize_with = "de_explicit_null")]
    pub(super) max_budget_usd: Option<Option<f64>>,
    #[serde(default, deserialize_with = "de_explicit_null")]
    pub(super) max_job_budget_usd: Option<Option<f64>>,
    pub(super) permission_mode: Option<String>,
    pub(super) allowed_tools: Option<Vec<String>>,
    pub(super) disallowed_tools: Option<Vec<String>>,
    pub(super) model: Option<String>,
    /// The check every Job's work must pass to be done: argv, no shell.
    pub(super) check: Option<Vec<String>>,
    #[serde(default, deserialize_with = "de_duration")]
    pub(super) check_timeout: Option<Duration>,
    pub(super) executor: Option<super::ExecutorKind>,
    /// Environment for every Account's agent (an Account's own `env:` wins per key): the
    /// place for a `PATH` that lets the agent's tools find cargo or npm under cron.
    #[serde(default)]
    pub(super) env: Env,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawSchedule {
    #[serde(default, deserialize_with = "de_time_window")]
    pub(super) window: Option<TimeWindow>,
    #[serde(default, deserialize_with = "de_time_of_day")]
    pub(super) morning: Option<chrono::NaiveTime>,
    #[serde(default, deserialize_with = "de_time_of_day")]
    pub(super) day_ends: Option<chrono::NaiveTime>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RawAccount {
    pub(super) driver: Option<DriverKind>,
    pub(super) credential_store: Option<String>,
    #[serde(default)]
    pub(super) env: Env,
    pub(super) limits: Option<Limits>,
    #[serde(default, deserialize_with = "de_duration")]
    pub(super) backoff: Option<Duration>,
    #[serde(default, deserialize_with = "de_time_of_day")]
    pub(super) morning: Option<chrono::NaiveTime>,
    pub(super) executor: Option<super::ExecutorKind>,
    /// A codex Account's configuration for its Runs, in place of `$CODEX_HOME/config.toml`.
    pub(super) codex_config: Option<serde_json::Value>,
    /// More hosts its sandboxed Runs may reach, beyond `sandbox.allowHosts`.
    #[serde(default)]
    pub(super) allow_hosts: Vec<String>,
    /// Runs may spend a login that bills per token (an API key with no plan behind it).
    #[serde(default)]
    pub(super) allow_billed_usage: bool,
    /// A reserve learned from the user's own days, in place of guessed ceilings.
    pub(super) learned_reserve: Option<super::limits::LearnedReserve>,
}

/// `drivers:`, by each Driver's name; a name no Driver has is refused in validation.
pub(super) type RawDrivers = std::collections::BTreeMap<String, RawDriverSettings>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDriverSettings {
    pub(super) command: Option<String>,
}

/// Turns a serde_yaml error into `reading config F: line N: ...`, with a suggestion for
/// an unknown key. The line comes from the parser's positions: serde_yaml names only the
/// enclosing mapping of a value it refuses.
pub(super) fn describe_yaml_error(
    source: &str,
    positions: &Positions,
    e: &serde_yaml::Error,
) -> String {
    format!(
        "reading config {source}: {}",
        explain_yaml_error(positions, e)
    )
}

/// A serde_yaml error as a person reads it, `line N: …` first: an unknown key with the one
/// meant, a value that is not one of those allowed, a percent written with `%`. A list
/// entry's path (`[1]`, a plan file's second entry) is said as "in entry 2".
/// How YAML writes a float Rust prints as `value` (`NaN`, `inf`, `-inf`).
fn yaml_spellings(value: &str) -> &'static [&'static str] {
    match value {
        "NaN" => &[".nan", ".NaN", ".NAN"],
        "inf" => &[".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"],
        "-inf" => &["-.inf", "-.Inf", "-.INF"],
        _ => &[],
    }
}

pub(crate) fn explain_yaml_error(positions: &Positions, e: &serde_yaml::Error) -> String {
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
    let within = match path.map(entry_of) {
        Some(Ok(n)) => format!(" in entry {n}"),
        Some(Err(p)) => format!(" in '{p}'"),
        None => String::new(),
    };
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
    } else if let Some(value) = msg
        .strip_prefix("invalid type: string \"")
        .and_then(|rest| rest.strip_suffix("\", expected f64"))
    {
        // `fiveHourMax: 60%` is how a person writes a percent; the file wants the number.
        let hint = if value.trim_end().ends_with('%') {
            format!(
                ": write a number, without %: {}",
                value.trim_end().trim_end_matches('%').trim()
            )
        } else {
            String::new()
        };
        (
            positions.find_value(path.unwrap_or(""), value),
            format!("'{value}' is not a number{within}{hint}"),
        )
    } else {
        // Our own value errors quote the value: find it inside the mapping named, as the
        // file spells it (a float Rust prints `NaN` YAML writes `.nan`).
        let found = quoted(msg).and_then(|v| {
            std::iter::once(v)
                .chain(yaml_spellings(v).iter().copied())
                .find_map(|spelled| positions.find_value_at(path.unwrap_or(""), spelled))
        });
        match found {
            // Its own key named, where the value was found.
            Some((at, line)) => (Some(line), format!("{msg} in '{at}'")),
            None => (None, format!("{msg}{within}")),
        }
    };
    let line = line
        .or_else(|| e.location().map(|l| l.line()))
        .map(|n| format!("line {n}: "))
        .unwrap_or_default();
    format!("{line}{explained}")
}

/// `[1]`, a list entry's path, as the entry's number from 1; any other path as it is.
fn entry_of(path: &str) -> Result<usize, &str> {
    path.trim_start_matches('.')
        .strip_prefix('[')
        .and_then(|p| p.strip_suffix(']'))
        .and_then(|n| n.parse::<usize>().ok())
        .map(|n| n + 1)
        .ok_or(path)
}

/// serde's "unknown field `promt`, expected one of `a`, `b`" in a person's words, with the
/// key meant; `None` for any other message.
pub(crate) fn explain_unknown_key(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    let (key, expected) = rest.split_once('`').unwrap_or((rest, ""));
    let known = backticked(expected);
    Some(format!("unknown key '{key}'{}", did_you_mean(key, &known)))
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
pub(crate) fn did_you_mean(unknown: &str, known: &[&str]) -> String {
    let lower = unknown.to_lowercase();
    known
        .iter()
        .map(|k| (strsim::levenshtein(&lower, &k.to_lowercase()), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 3))
        .min()
        .map(|(_, k)| format!(" (did you mean '{k}'?)"))
        .unwrap_or_default()
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

fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let s = String::deserialize(d)?;
    parse_duration(&s)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

pub(super) fn de_percent<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
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

fn de_time_of_day<'de, D: Deserializer<'de>>(d: D) -> Result<Option<chrono::NaiveTime>, D::Error> {
    let s = String::deserialize(d)?;
    chrono::NaiveTime::parse_from_str(s.trim(), "%H:%M")
        .map(Some)
        .map_err(|_| {
            serde::de::Error::custom(format!(
                "'{s}' is not a time of day (use a local time like \"07:00\")"
            ))
        })
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

/// The YAML parser's refusal of a file's shape, in a person's words, on the line at fault:
/// a tab in an indentation (the parser may name the line before it), a tab after a
/// key's colon, a key indented unlike its siblings.
pub(crate) fn explain_structure(text: &str, e: &super::positions::StructureError) -> String {
    let lines: Vec<&str> = text.lines().collect();
    // A tab where YAML wants spaces: found by a look at the text, whatever the parser said.
    if let Some(said) = tab_indented(text) {
        return said;
    }
    let at = e
        .line
        .and_then(|n| Some((n, *lines.get(n.checked_sub(1)?)?)));
    match at {
        Some((n, line)) if line.contains(":\t") => format!(
            "line {n}: a tab after a key's ':'; YAML wants a space there: `{}`",
            line.replace(":\t", ": ").trim()
        ),
        Some((n, line)) if e.message.contains("did not find expected key") => {
            let indent = |l: &str| l.len() - l.trim_start().len();
            let above = lines[..n - 1]
                .iter()
                .rev()
                .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
                .map_or(0, |l| indent(l));
            format!(
                "line {n}: '{}' is indented {} spaces, which lines up with no key around it \
                 (the line above is indented {above}): a key is indented as far as the other \
                 keys of its mapping",
                line.trim(),
                indent(line)
            )
        }
        _ => {
            let line = e.line.map(|n| format!("line {n}: ")).unwrap_or_default();
            format!("{line}{}", e.message)
        }
    }
}

/// The first line indented with a tab, said with the fix; asked only once the parser has
/// refused the file (a tab inside a block of text is the text's own).
pub(crate) fn tab_indented(text: &str) -> Option<String> {
    let (n, line) = text.lines().enumerate().find(|(_, l)| {
        l.chars()
            .take_while(|c| c.is_whitespace())
            .any(|c| c == '\t')
    })?;
    let column = line.find('\t').unwrap_or(0) + 1;
    Some(format!(
        "line {}: a tab in the indentation (column {column}); YAML indents with spaces, never \
         tabs: replace it with spaces",
        n + 1
    ))
}
