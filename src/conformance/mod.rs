//! The conformance check (ADR-0018): an agent CLI run against owl's own loopback mock of its API, each protocol fact owl relies on a named check with what was seen; each Driver's scenarios in a file of their own, the mocks beside them.

mod claude_code;
mod codex;
mod gemini;
pub mod mock;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use crate::config::DriverKind;
use crate::driver::Invocation;

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

/// An agent CLI process in stream-json mode: stdin written line by line, stdout read on a
/// thread, every line kept.
pub(crate) struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Vec<u8>>,
    /// Every stdout line so far, parsed (a line that is not JSON is kept as a string).
    pub seen: Vec<Value>,
    pid: i32,
}

impl Session {
    /// Starts `inv` in `cwd`, in its own process group, with stderr discarded.
    pub(crate) fn start(inv: &Invocation, cwd: &Path) -> std::io::Result<Session> {
        use std::os::unix::process::CommandExt;
        inv.write_files()?;
        let mut cmd = inv.command();
        cmd.current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0);
        let mut child = cmd.spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).split(b'\n') {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let pid = child.id() as i32;
        Ok(Session {
            stdin: child.stdin.take(),
            child,
            lines,
            seen: Vec::new(),
            pid,
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
        let _ = crate::sys::signal_group(self.pid, signal);
    }

    /// The agent's exit, waited for up to `limit`; `None` when it is still running.
    pub(crate) fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                _ => return None,
            }
        }
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
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(bytes) => {
                    let value = serde_json::from_slice(&bytes)
                        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
                    self.seen.push(value.clone());
                    if wanted(&value) {
                        return Some(value);
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// Closes stdin and waits (bounded) for the agent to exit, killing its group after
    /// that; returns every stdout line it wrote.
    pub(crate) fn finish(mut self, limit: Duration) -> Vec<Value> {
        self.close_stdin();
        let deadline = Instant::now() + limit;
        let mut exited = false;
        while !exited && Instant::now() < deadline {
            exited = matches!(self.child.try_wait(), Ok(Some(_)));
            if !exited {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if !exited {
            let _ = crate::sys::signal_group(self.pid, crate::sys::Sig::KILL);
            let _ = self.child.wait();
        }
        while let Ok(bytes) = self.lines.recv_timeout(Duration::from_millis(200)) {
            self.seen.push(
                serde_json::from_slice(&bytes)
                    .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into())),
            );
        }
        self.seen
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

/// The control response to `request_id`.
pub(crate) fn control_response_to(line: &Value, request_id: &str) -> bool {
    line["type"] == "control_response" && line["response"]["request_id"] == request_id
}

/// The check every Driver makes first: `--version` runs (with `env` set) and its answer
/// parses, in the tested range or outside it.
pub(crate) fn version_check(
    driver: &dyn crate::driver::Driver,
    command: &Path,
    env: &[(&str, &str)],
) -> Check {
    const NAME: &str = "--version parses";
    let out = std::process::Command::new(command)
        .arg("--version")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    match out {
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
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
