//! The metrics file (`metricsFile`): what monitoring reads of owl, in Prometheus's text format for node_exporter's textfile collector, written whole at each tick and at a Run's start (a temporary file in the same directory, then a rename: a reader finds the old file or the new, never a mix).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};

use super::Ctx;
use crate::schedule::AccountView;
use crate::store::Store;

/// The name every metric starts with.
const PREFIX: &str = "owl";

/// Writes the metrics file, when one is configured; `succeeded`: this tick did its work
/// (else the last success stays the one the file holds). A failure to write is a warning:
/// monitoring must not stop the night.
pub(super) fn write(ctx: &Ctx, succeeded: bool, now: DateTime<Utc>) {
    let Some(path) = ctx.config.metrics_file.as_deref() else {
        return;
    };
    if let Err(e) = write_to(ctx, path, succeeded, now) {
        tracing::warn!("writing the metrics file {}: {e:#}", path.display());
    }
}

fn write_to(ctx: &Ctx, path: &Path, succeeded: bool, now: DateTime<Utc>) -> Result<()> {
    let last_success = match succeeded {
        true => Some(now.timestamp() as f64),
        false => last_success_in(path),
    };
    let text = match ctx.read_store()? {
        Some(store) => render(ctx, &store, (now, last_success))?,
        None => render_without_state(ctx, (now, last_success)),
    };
    replace(path, &text)
}

/// The last success the file at `path` records, if it holds one.
fn last_success_in(path: &Path) -> Option<f64> {
    let text = crate::untrusted::read_to_string(path, 1 << 20).ok()?;
    let name = format!("{PREFIX}_last_success_timestamp_seconds ");
    text.lines()
        .find_map(|l| l.strip_prefix(&name))
        .and_then(|v| v.trim().parse().ok())
}

/// Writes `text` to `path` through a temporary file in the same directory and a rename.
fn replace(path: &Path, text: &str) -> Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let name = path
        .file_name()
        .context("the metrics file names no file")?
        .to_string_lossy();
    // Not `*.prom`: the textfile collector reads only those, so it never sees this one.
    let temporary = dir
        .unwrap_or(Path::new("."))
        .join(format!(".{name}.{}.tmp", std::process::id()));
    let written = std::fs::File::create(&temporary)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .and_then(|()| std::fs::rename(&temporary, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written.with_context(|| format!("through {}", temporary.display()))
}

/// One metric's lines: its help, its type, and each sample.
struct Metric<'a> {
    name: &'a str,
    kind: &'a str,
    help: &'a str,
    samples: Vec<(Vec<(&'a str, String)>, f64)>,
}

impl Metric<'_> {
    fn write(&self, out: &mut String) {
        let _ = writeln!(out, "# HELP {PREFIX}_{} {}", self.name, self.help);
        let _ = writeln!(out, "# TYPE {PREFIX}_{} {}", self.name, self.kind);
        for (labels, value) in &self.samples {
            let labels: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                .collect();
            let labels = match labels.is_empty() {
                true => String::new(),
                false => format!("{{{}}}", labels.join(",")),
            };
            let _ = writeln!(out, "{PREFIX}_{}{labels} {value}", self.name);
        }
    }
}

/// A label value as the text format quotes it.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The ticks' times and the build: what every file says, state or none.
fn heartbeat(ctx: &Ctx, (now, last_success): (DateTime<Utc>, Option<f64>)) -> Vec<Metric<'static>> {
    let mut metrics = vec![Metric {
        name: "last_tick_timestamp_seconds",
        kind: "gauge",
        help: "When a tick last ran (Unix time).",
        samples: vec![(vec![], now.timestamp() as f64)],
    }];
    if let Some(at) = last_success {
        metrics.push(Metric {
            name: "last_success_timestamp_seconds",
            kind: "gauge",
            help: "When a tick last did its work without an error (Unix time).",
            samples: vec![(vec![], at)],
        });
    }
    let engine = match ctx.config.store {
        Some(_) => "postgres",
        None => "sqlite",
    };
    metrics.push(Metric {
        name: "build_info",
        kind: "gauge",
        help: "owl's version and its store's engine.",
        samples: vec![(
            vec![
                ("version", env!("CARGO_PKG_VERSION").to_string()),
                ("store", engine.to_string()),
            ],
            1.0,
        )],
    });
    metrics
}

fn render_without_state(ctx: &Ctx, times: (DateTime<Utc>, Option<f64>)) -> String {
    let mut out = String::new();
    for metric in heartbeat(ctx, times) {
        metric.write(&mut out);
    }
    out
}

fn render(ctx: &Ctx, store: &Store, times: (DateTime<Utc>, Option<f64>)) -> Result<String> {
    let (views, _) = super::plan::make_plan(ctx, store, times.0)?;
    let mut metrics = heartbeat(ctx, times);
    metrics.push(Metric {
        name: "jobs",
        kind: "gauge",
        help: "Jobs by state.",
        samples: store
            .jobs_by_state()?
            .into_iter()
            .map(|(state, n)| (vec![("state", state)], n as f64))
            .collect(),
    });
    metrics.push(Metric {
        name: "runs_total",
        kind: "counter",
        help: "Runs ended, by Account and outcome (counted from the history).",
        samples: store
            .runs_by_outcome()?
            .into_iter()
            .map(|(account, outcome, n)| {
                (vec![("account", account), ("outcome", outcome)], n as f64)
            })
            .collect(),
    });
    metrics.extend(accounts(&views));
    let mut out = String::new();
    for metric in &metrics {
        metric.write(&mut out);
    }
    Ok(out)
}

/// Each Account's Windows (utilization, the bound in force and which setting it is, owl's
/// share) and whether it can start a Run now.
fn accounts(views: &[AccountView]) -> Vec<Metric<'static>> {
    let mut utilization = Vec::new();
    let mut bound = Vec::new();
    let mut share = Vec::new();
    for view in views {
        for w in &view.windows {
            let labels = vec![("account", view.name.clone()), ("window", w.label())];
            if let Some(p) = w.percent {
                utilization.push((labels.clone(), p / 100.0));
            }
            if let (Some(ceiling), Some(limit)) = (w.ceiling, w.limit) {
                let mut labels = labels.clone();
                labels.push(("limit", limit.to_string()));
                bound.push((labels, ceiling / 100.0));
            }
            if w.resets_at.is_some() {
                share.push((labels, view.owl_points(w) / 100.0));
            }
        }
    }
    vec![
        Metric {
            name: "window_utilization_ratio",
            kind: "gauge",
            help: "Each Window's newest figure (0-1), account-wide: your use and owl's.",
            samples: utilization,
        },
        Metric {
            name: "window_bound_ratio",
            kind: "gauge",
            help: "The bound in force on each Window (0-1), and the setting it is.",
            samples: bound,
        },
        Metric {
            name: "window_owl_share_ratio",
            kind: "gauge",
            help: "What owl's Runs used of each Window's current instance (0-1).",
            samples: share,
        },
        Metric {
            name: "account_schedulable",
            kind: "gauge",
            help: "Whether an Account can start a Run now (1) or not (0).",
            samples: views
                .iter()
                .map(|v| {
                    (
                        vec![("account", v.name.clone())],
                        f64::from(u8::from(v.schedulable)),
                    )
                })
                .collect(),
        },
    ]
}
