//! The conformance check (ADR-0018): an agent CLI run against owl's own loopback mock of its API, each protocol fact owl relies on a named check with what was seen; each Driver's scenarios in a file of their own, the mocks beside them.

mod claude_code;
mod codex;
mod gemini;
pub mod mock;
mod supervised;
mod words;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use crate::config::DriverKind;
use crate::driver::Invocation;
use crate::model::ExitInfo;
use crate::supervise::{Executor, HandleId, LocalExecutor, Oneshot, RunHandle};

/// Every protocol fact owl relies on in the agent CLI at `command` (of the Driver `kind`),
/// checked against a loopback mock under a throwaway login (no real credential, no token).
/// With `record`, what the CLI wrote in each scenario is kept there as a fixture
/// (`conformance-<scenario>.jsonl`).
pub(crate) fn check(kind: DriverKind, command: &Path, record: Option<&Path>) -> Vec<Check> {
    match kind {
        DriverKind::ClaudeCode => claude_code::run(command, record),
        DriverKind::Gemini => gemini::run(command, record),
        DriverKind::Codex => codex::run(command, record),
    }
}

/// One protocol fact, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Check {
    pub name: &'static str,
    pub ok: bool,
    /// What was seen: the evidence for `ok`, or what was there instead.
    pub seen: String,
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

/// An agent CLI in stream-json mode, started through the local Executor as owl starts it:
/// stdin written line by line, stdout read on a thread with a Run's line cap, every line kept.
pub(crate) struct Session {
    executor: LocalExecutor,
    id: HandleId,
    stdin: Option<Box<dyn Write + Send>>,
    lines: Receiver<Vec<u8>>,
    exit: Receiver<ExitInfo>,
    exited: Option<ExitInfo>,
    /// Every stdout line so far, parsed (a line that is not JSON is kept as a string).
    pub seen: Vec<Value>,
}

impl Session {
    /// Starts `inv` in `cwd`, in its own process group, with stderr read and dropped.
    pub(crate) fn start(inv: &Invocation, cwd: &Path) -> std::io::Result<Session> {
        let executor = LocalExecutor {
            state_dir: cwd.to_path_buf(),
        };
        let RunHandle {
            id,
            stdin,
            stdout,
            stderr,
            exit,
        } = executor.start(inv, cwd)?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            crate::supervise::reader::each_line(stdout, |line| tx.send(line.to_vec()).is_ok());
        });
        std::thread::spawn(move || std::io::copy(&mut { stderr }, &mut std::io::sink()));
        let exit_rx = crate::wait::on_thread(exit);
        Ok(Session {
            executor,
            id,
            stdin: Some(stdin),
            lines,
            exit: exit_rx,
            exited: None,
            seen: Vec::new(),
        })
    }

    /// Writes bytes to the agent's stdin (a line the Driver built).
    pub(crate) fn send(&mut self, bytes: &[u8]) {
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = stdin.write_all(bytes).and_then(|()| stdin.flush());
        }
    }

    pub(crate) fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Sends `signal` to the agent's process group.
    pub(crate) fn signal(&self, signal: crate::sys::Sig) {
        self.executor.signal(&self.id, signal);
    }

    /// The agent's exit, waited for (not polled) up to `limit`; `None` when it is still
    /// running.
    pub(crate) fn wait_exit(&mut self, limit: Duration) -> Option<ExitInfo> {
        if self.exited.is_none() {
            self.exited = crate::wait::within(&self.exit, limit);
        }
        self.exited
    }

    /// The first line of the whole stream for which `wanted` holds: one already read, or
    /// one read within `limit`; `None` when the time ran out or stdout closed first. Lines
    /// read while waiting for something else are kept, so no answer is lost to the order
    /// in which a scenario asks.
    pub(crate) fn wait_for(
        &mut self,
        limit: Duration,
        wanted: impl Fn(&Value) -> bool,
    ) -> Option<Value> {
        if let Some(line) = self.seen.iter().find(|l| wanted(l)) {
            return Some(line.clone());
        }
        let deadline = Instant::now() + limit;
        loop {
            let crate::wait::Waited::Got(bytes) = crate::wait::until(&self.lines, deadline, None)
            else {
                return None;
            };
            let value = parsed(&bytes);
            self.seen.push(value.clone());
            if wanted(&value) {
                return Some(value);
            }
        }
    }

    /// Closes stdin and waits (bounded) for the agent to exit, killing its group after
    /// that; returns every stdout line it wrote.
    pub(crate) fn finish(mut self, limit: Duration) -> Vec<Value> {
        self.close_stdin();
        if self.wait_exit(limit).is_none() {
            self.signal(crate::sys::Sig::KILL);
            let _ = self.wait_exit(limit);
        }
        while let Some(bytes) = crate::wait::within(&self.lines, Duration::from_millis(200)) {
            self.seen.push(parsed(&bytes));
        }
        self.seen
    }
}

/// A stdout line as JSON, or as a string when it is not JSON.
fn parsed(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into()))
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

/// The control response to `request_id`.
pub(crate) fn control_response_to(line: &Value, request_id: &str) -> bool {
    line["type"] == "control_response" && line["response"]["request_id"] == request_id
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

/// A throwaway directory for one check run, removed when dropped.
pub(crate) struct Scratch(pub PathBuf);

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
        crate::supervise::kill_descendants();
        // Held until owl exits: no scenario makes another scratch directory meanwhile.
        let mut live = live_scratch();
        for dir in live.drain(..) {
            let _ = std::fs::remove_dir_all(dir);
        }
        crate::supervise::kill_descendants();
        errln!("owl: the conformance check was stopped by a signal; nothing of it is left");
        std::process::exit(128 + sig);
    });
    Ok(())
}
