//! The conformance check (ADR-0018): an agent CLI run against owl's own loopback mock of its API, each protocol fact owl relies on a named check with what was seen; each Driver's scenarios in a file of their own, the mocks beside them.

mod claude_code;
mod codex;
mod gemini;
pub mod mock;
mod supervised;
mod words;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::config::DriverKind;
use crate::driver::Invocation;
use crate::supervise::{Executor, LocalExecutor, Oneshot};

/// Every protocol fact owl relies on in the agent CLI at `command` (of the Driver `kind`),
/// checked against a loopback mock under a throwaway login (no real credential, no token).
/// With `record`, what the CLI wrote in each scenario is kept there as a fixture
/// (`conformance-<scenario>.jsonl`).
pub(crate) fn check(kind: DriverKind, command: &Path, record: Option<&Path>) -> Vec<Check> {
    let checks = match kind {
        DriverKind::ClaudeCode => claude_code::run(command, record),
        DriverKind::Gemini => gemini::run(command, record),
        DriverKind::Codex => codex::run(command, record),
    };
    // Checks that failed because a stop signal killed their CLIs are no verdict: the
    // signal's own thread is cleaning up, and ends owl.
    if STOPPING.load(std::sync::atomic::Ordering::SeqCst) {
        loop {
            std::thread::park();
        }
    }
    checks
}

/// A stop signal came and its cleanup is under way (see [`end_cleanly_on_stop`]).
static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// One protocol fact, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Check {
    pub(crate) name: &'static str,
    pub(crate) ok: bool,
    /// What was seen: the evidence for `ok`, or what was there instead.
    pub(crate) seen: String,
}

impl Check {
    pub(crate) fn new(name: &'static str, ok: bool, seen: impl Into<String>) -> Check {
        Check {
            name,
            ok,
            seen: seen.into(),
        }
    }

    /// A check that could not be made because `why`.
    pub(crate) fn failed(name: &'static str, why: impl Into<String>) -> Check {
        Check::new(name, false, why)
    }
}

/// Writes a scenario's stdout lines to `dir/conformance-<label>.jsonl`, the scratch dir's
/// path in them replaced by `<cwd>`: a fixture recorded from the CLI, for comparing the
/// shapes of two versions' lines.
pub(crate) fn record(
    dir: &Path,
    label: &str,
    scratch: &Path,
    lines: &[Value],
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let scratch = scratch.display().to_string();
    let text: String = lines
        .iter()
        .map(|l| format!("{}\n", l.to_string().replace(&scratch, "<cwd>")))
        .collect();
    std::fs::write(dir.join(format!("conformance-{label}.jsonl")), text)
}

/// A line's `type` (and `subtype`) is `kind` (and `sub`).
pub(crate) fn is(line: &Value, kind: &str, sub: Option<&str>) -> bool {
    line["type"] == kind && sub.is_none_or(|s| line["subtype"] == s)
}

/// The check every Driver makes first: `--version` runs (with `env` set) through the local
/// Executor, as before a Run, and its answer parses, in the tested range or outside it.
pub(crate) fn version_check(
    driver: &dyn crate::driver::Driver,
    command: &Path,
    env: &[(&str, &str)],
) -> Check {
    const NAME: &str = "--version parses";
    let invocation = Invocation {
        program: command.to_path_buf(),
        args: vec!["--version".into()],
        env_set: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        env_remove: Vec::new(),
        files: Vec::new(),
    };
    let local = LocalExecutor {
        state_dir: std::env::temp_dir(),
    };
    let call = Oneshot {
        invocation: &invocation,
        cwd: None,
        input: None,
        timeout: VERSION_TIMEOUT,
        cap: 64 * 1024,
    };
    match local.oneshot(call) {
        Ok(out) => match driver.check_version(String::from_utf8_lossy(&out.stdout).trim()) {
            Ok(v) => Check::new(NAME, true, format!("{v}, in the tested range")),
            Err(crate::driver::AgentCliError::Untested { version, .. }) => {
                Check::new(NAME, true, format!("{version}, outside the tested range"))
            }
            Err(e) => Check::failed(NAME, e.to_string()),
        },
        Err(e) => Check::failed(NAME, format!("running it: {e}")),
    }
}

/// How long `--version` may take in the check.
const VERSION_TIMEOUT: Duration = Duration::from_secs(20);

/// A scenario of a Driver's conformance check: the CLI, and where to record what it wrote.
pub(crate) type Scenario = fn(&Path, Option<&Path>) -> Vec<Check>;

/// How many scenarios run at once: each starts a CLI (a node process for Claude Code),
/// and more than a few per core only slows every one of them past its time limits.
fn scenarios_at_once() -> usize {
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    (cores * 2).clamp(2, 8)
}

/// Runs `scenarios` side by side, a few at a time (each its own CLI, mock and directory),
/// and gathers their checks in order.
pub(crate) fn run_scenarios(
    command: &Path,
    record: Option<&Path>,
    scenarios: &[Scenario],
) -> Vec<Check> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<Vec<Check>>>> = scenarios
        .iter()
        .map(|_| std::sync::Mutex::new(None))
        .collect();
    std::thread::scope(|scope| {
        for _ in 0..scenarios_at_once().min(scenarios.len()) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(scenario) = scenarios.get(i) else {
                    break;
                };
                let checks = std::panic::catch_unwind(|| scenario(command, record))
                    .unwrap_or_else(|_| vec![Check::failed("scenario", "a scenario panicked")]);
                if let Ok(mut slot) = results[i].lock() {
                    *slot = Some(checks);
                }
            });
        }
    });
    results
        .into_iter()
        .flat_map(|slot| {
            slot.into_inner()
                .ok()
                .flatten()
                .unwrap_or_else(|| vec![Check::failed("scenario", "a scenario did not finish")])
        })
        .collect()
}

/// The marks planted commands left under `dir/marks/`, one file each, by name.
pub(super) fn marks_left(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("marks"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Makes `subs` under a scratch `dir`, one level at a time: a stop signal's cleanup may
/// remove the scratch dir meanwhile, and a recursive create would make it again after it.
pub(super) fn make_in_scratch(dir: &Path, subs: &[&str]) -> std::io::Result<()> {
    for sub in subs {
        match std::fs::create_dir(dir.join(sub)) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// Whether the model's first request carries the planted instruction file's words.
pub(super) fn memory_check(name: &'static str, first: &str, words: &str) -> Check {
    let carried = first.contains(words);
    Check::new(
        name,
        carried,
        format!(
            "the first request {} it",
            if carried { "carries" } else { "lacks" }
        ),
    )
}

/// A throwaway directory for one check run, removed when dropped.
pub(crate) struct Scratch(pub(crate) PathBuf);

/// The scratch directories alive now: what a stop signal removes before owl exits (some hold
/// a fake login).
static LIVE_SCRATCH: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

impl Scratch {
    pub(crate) fn new(label: &str) -> std::io::Result<Scratch> {
        Self::under(&std::env::temp_dir(), label)
    }

    fn under(parent: &Path, label: &str) -> std::io::Result<Scratch> {
        let dir = parent.join(format!(
            "owl-conformance-{label}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        // Made under the lock a stop signal's cleanup holds to the end: none is made after
        // it, and none it misses.
        let mut live = live_scratch();
        std::fs::create_dir_all(&dir)?;
        live.push(dir.clone());
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        live_scratch().retain(|d| d != &self.0);
    }
}

fn live_scratch() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    LIVE_SCRATCH.lock().unwrap_or_else(|e| e.into_inner())
}

/// Removes a scratch directory whose writers were just sent SIGKILL: one that has not died
/// yet can still make a file in it while it is removed (CI saw a directory left so), so the
/// removal is tried again, the writers killed again, until it is gone (at most 2 s).
fn remove_after_its_writers(dir: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while std::fs::remove_dir_all(dir).is_err()
        && dir.exists()
        && std::time::Instant::now() < deadline
    {
        crate::supervise::kill_descendants();
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Makes a stop signal (Ctrl-C, SIGTERM, SIGHUP) during the check end it at once and clean:
/// every CLI it started is killed, then every scratch directory removed, then owl exits
/// 128 + the signal, as a process killed by it would.
pub(crate) fn end_cleanly_on_stop() -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    std::thread::spawn(move || {
        let Some(sig) = signals.forever().next() else {
            return;
        };
        // First, so that no scenario its kill ends can be reported as a verdict.
        STOPPING.store(true, std::sync::atomic::Ordering::SeqCst);
        crate::supervise::kill_descendants();
        // Held until owl exits: no scenario makes another scratch directory meanwhile.
        let mut live = live_scratch();
        for dir in live.drain(..) {
            remove_after_its_writers(&dir);
        }
        crate::supervise::kill_descendants();
        errln!("owl: the conformance check was stopped by a signal; nothing of it is left");
        std::process::exit(128 + sig);
    });
    Ok(())
}
