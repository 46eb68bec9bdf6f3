//! The shapes of the CLI's lines (keys and value types per line kind) in the fixtures each
//! tested version recorded with scripts/record-fixtures: what changed between the oldest and
//! the newest is a snapshot to review, and a field owl reads may not disappear.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The fields owl reads, by line kind: each must be in every tested version's lines.
const READ_BY_OWL: &[(&str, &str)] = &[
    ("system/init", "session_id"),
    ("system/init", "model"),
    ("assistant", "message.content[].type"),
    ("rate_limit_event", "rate_limit_info.status"),
    ("rate_limit_event", "rate_limit_info.utilization"),
    ("rate_limit_event", "rate_limit_info.resetsAt"),
    ("rate_limit_event", "rate_limit_info.rateLimitType"),
    ("control_response/success", "response.request_id"),
    ("control_response/success", "response.response.rate_limits"),
    (
        "control_response/success",
        "response.response.subscription_type",
    ),
    ("result/success", "is_error"),
    ("result/success", "total_cost_usd"),
    ("result/success", "usage"),
    ("result/success", "num_turns"),
    ("result/success", "session_id"),
    ("result/success", "permission_denials"),
    ("result/success", "api_error_status"),
    ("result/success", "permission_denials[].tool_name"),
    ("result/error_max_budget_usd", "subtype"),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The tested versions, oldest first, from the one file that lists them.
fn versions() -> Vec<String> {
    std::fs::read_to_string(root().join("claude-code-versions.txt"))
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

/// A line's kind: its type, and its subtype when it has one (a control response's is inside).
fn kind(line: &Value) -> String {
    let kind = line["type"].as_str().unwrap_or("?");
    let sub = match kind {
        "control_response" => &line["response"]["subtype"],
        _ => &line["subtype"],
    };
    match sub.as_str() {
        Some(sub) => format!("{kind}/{sub}"),
        None => kind.to_string(),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Every path in `v` with its type: `a.b`, `a[].c` for the elements of an array. Objects
/// keyed by data (model names under `modelUsage`) are shown as `*`.
fn paths(v: &Value, at: &str, out: &mut BTreeSet<String>) {
    out.insert(format!("{at}: {}", type_name(v)));
    match v {
        Value::Object(map) => {
            let by_data = ["modelUsage", "model_usage", "model_usage_since_last_result"]
                .iter()
                .any(|k| at.ends_with(k));
            for (k, v) in map {
                let key = if by_data { "*" } else { k.as_str() };
                let path = if at.is_empty() {
                    key.to_string()
                } else {
                    format!("{at}.{key}")
                };
                paths(v, &path, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                paths(item, &format!("{at}[]"), out);
            }
        }
        _ => {}
    }
}

/// The shapes of one version's recorded lines: kind -> paths with types.
fn shapes(dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("conformance-") && n.ends_with(".jsonl"))
        })
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "{} has no recorded lines: run scripts/record-fixtures",
        dir.display()
    );
    for file in files {
        for line in std::fs::read_to_string(&file).unwrap().lines() {
            let value: Value = serde_json::from_str(line).unwrap();
            let set = out.entry(kind(&value)).or_default();
            let mut found = BTreeSet::new();
            paths(&value, "", &mut found);
            set.extend(found.into_iter().filter(|p| !p.starts_with(": ")));
        }
    }
    out
}

fn fixture_dir(version: &str) -> PathBuf {
    root()
        .join("tests/fixtures")
        .join(format!("claude-code-{version}"))
}

#[test]
fn every_tested_version_has_the_fields_owl_reads() {
    for version in versions() {
        let shapes = shapes(&fixture_dir(&version));
        for (kind, field) in READ_BY_OWL {
            let present = shapes
                .get(*kind)
                .is_some_and(|paths| paths.iter().any(|p| p.split(": ").next() == Some(field)));
            assert!(present, "Claude Code {version}: no {field} in {kind} lines");
        }
    }
}

#[test]
fn what_changed_between_the_oldest_and_the_newest_version_is_reviewed() {
    let versions = versions();
    let (oldest, newest) = (&versions[0], &versions[versions.len() - 1]);
    let old = shapes(&fixture_dir(oldest));
    let new = shapes(&fixture_dir(newest));
    let kinds: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let empty = BTreeSet::new();
    let mut diff = format!("Claude Code {oldest} -> {newest}, by line kind\n");
    for kind in kinds {
        let (before, after) = (
            old.get(kind).unwrap_or(&empty),
            new.get(kind).unwrap_or(&empty),
        );
        let gone: Vec<&String> = before.difference(after).collect();
        let added: Vec<&String> = after.difference(before).collect();
        if gone.is_empty() && added.is_empty() {
            continue;
        }
        diff.push_str(&format!("\n{kind}\n"));
        for p in gone {
            diff.push_str(&format!("  - {p}\n"));
        }
        for p in added {
            diff.push_str(&format!("  + {p}\n"));
        }
    }
    insta::assert_snapshot!(format!("shapes_{oldest}_to_{newest}"), diff);
}

/// The usage fields owl reads from 2.1.332 on (its PROTOCOL.md §1–§3, §6), by line kind.
const USAGE_READ_BY_OWL: &[(&str, &str)] = &[
    (
        "rate_limit_event",
        "rate_limit_info.unifiedWindows.five_hour.utilization",
    ),
    (
        "rate_limit_event",
        "rate_limit_info.unifiedWindows.five_hour.resetsAt",
    ),
    (
        "rate_limit_event",
        "rate_limit_info.unifiedWindows.seven_day.utilization",
    ),
    (
        "rate_limit_event",
        "rate_limit_info.unifiedWindows.seven_day_overage_included.utilization",
    ),
    ("rate_limit_event", "rate_limit_info.isUsingOverage"),
    ("rate_limit_event", "rate_limit_info.overageInUse"),
    (
        "control_response/success",
        "response.response.rate_limits.model_scoped[].display_name",
    ),
    (
        "control_response/success",
        "response.response.rate_limits.model_scoped[].utilization",
    ),
    (
        "control_response/success",
        "response.response.rate_limits.model_scoped[].resets_at",
    ),
    ("result/success", "api_error"),
    ("result/success", "terminal_reason"),
];

/// Every field owl reads of the plan is in the newest version's usage recordings: a
/// re-recording that loses one fails here.
#[test]
fn the_newest_usage_recordings_have_every_field_owl_reads() {
    let dir = fixture_dir("2.1.332");
    let mut found: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if !name.ends_with(".jsonl") || name.starts_with("conformance-") {
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let value: Value = serde_json::from_str(line).unwrap();
            paths(&value, "", found.entry(kind(&value)).or_default());
        }
    }
    for (kind, field) in USAGE_READ_BY_OWL {
        let present = found
            .get(*kind)
            .is_some_and(|paths| paths.iter().any(|p| p.split(": ").next() == Some(field)));
        assert!(present, "no {field} in the 2.1.332 {kind} lines");
    }
}
