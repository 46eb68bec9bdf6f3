//! Every scenario's Run: the CLI started by the Executor a Run uses, supervised by `supervise::supervise` with its readers, its polls and its stop sequence, a recording observer beside it, and judged by the settlement's classification; so a conformance pass proves what a Run relies on.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::config::Account;
use crate::driver::{AgentEvent, Driver, Invocation};
use crate::model::StopCause;
use crate::outcome::Classified;
use crate::supervise::process::{LostProcesses, Oneshot, Supervisor};
use crate::supervise::{
    Executor, HandleId, LocalExecutor, Observer, RunHandle, RunPlace, RunReport, RunSpec, StopLatch,
};
use crate::sys::Sig;

/// What a supervised scenario saw: owl's report of the Run, every event in order, every
/// line the CLI wrote, and the settlement's verdict on it.
pub(crate) struct Supervised {
    pub(crate) report: RunReport,
    pub(crate) events: Vec<AgentEvent>,
    /// Every stdout line, as the Run's log kept it, parsed (a line that is not JSON is
    /// kept as a string).
    pub(crate) lines: Vec<Value>,
    pub(crate) classified: Classified,
    /// When the observer asked owl to stop the Run, if it did.
    pub(crate) stopped: Option<Instant>,
    /// When the turn's result was read, if it was.
    pub(crate) result_at: Option<Instant>,
    /// When the supervision ended (the CLI reaped, its streams read).
    pub(crate) ended: Instant,
}

/// When the observer asks owl to stop a Run: never, or once a condition outside the stream
/// holds (a tool's process running), asked at each heartbeat, about twice a second.
pub(crate) enum StopWhen<'a> {
    Never,
    Once(&'a dyn Fn() -> bool),
}

/// Everything a supervised scenario needs.
pub(crate) struct Run<'a> {
    pub(crate) driver: Arc<dyn Driver>,
    pub(crate) command: &'a Path,
    pub(crate) account: &'a Account,
    pub(crate) invocation: &'a Invocation,
    /// The prompt, as the Driver writes it (`""` when it rides in argv).
    pub(crate) prompt: &'a str,
    /// The CLI's working copy.
    pub(crate) workspace: &'a Path,
    /// The Run's own files (its logs).
    pub(crate) files: &'a Path,
    /// How long the Run may take before owl stops it.
    pub(crate) limit: Duration,
    /// How often owl asks for the plan's utilization once the API has answered (as
    /// `usagePollInterval`); `None`: never.
    pub(crate) usage_poll: Option<Duration>,
    /// When the observer asks owl to stop the Run, as a cancel would.
    pub(crate) stop: StopWhen<'a>,
}

/// Supervises `run` to its end as a tick would, with owl's own stop sequence.
pub(crate) fn supervise(run: Run) -> std::io::Result<Supervised> {
    let executor = ScenarioExecutor(LocalExecutor {
        state_dir: run.files.to_path_buf(),
    });
    let mut observer = Recording {
        events: Vec::new(),
        stop: run.stop,
        stopped: None,
        result_at: None,
    };
    let stdout_log = run.files.join("supervised.stdout.jsonl");
    let spec = RunSpec {
        driver: run.driver.clone(),
        command: run.command,
        account: run.account,
        invocation: run.invocation,
        place: RunPlace {
            workspace: run.workspace,
            files: run.files,
            hosts: &[],
        },
        run_id: 0,
        prompt: run.prompt,
        stdout_log: std::fs::File::create(&stdout_log)?,
        stderr_log: std::fs::File::create(run.files.join("supervised.stderr.log"))?,
        max_run_time: run.limit,
        stall_timeout: run.limit,
        grace_window: Duration::from_secs(5),
        usage_poll_interval: run.usage_poll,
        secrets: Vec::new(),
        latch: StopLatch::default(),
    };
    let report = crate::supervise::supervise(spec, &executor, &mut observer)?;
    let ended = Instant::now();
    let classified = crate::settlement::classify(&report, run.account, run.driver.as_ref());
    let lines = std::fs::read(&stdout_log)
        .unwrap_or_default()
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(parsed)
        .collect();
    Ok(Supervised {
        report,
        events: observer.events,
        lines,
        classified,
        stopped: observer.stopped,
        result_at: observer.result_at,
        ended,
    })
}

/// A stdout line as JSON, or as a string when it is not JSON.
fn parsed(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into()))
}

/// Records every event; stops the Run (as a cancel would) when its [`StopWhen`] says so.
struct Recording<'a> {
    events: Vec<AgentEvent>,
    stop: StopWhen<'a>,
    stopped: Option<Instant>,
    result_at: Option<Instant>,
}

impl Recording<'_> {
    fn stop_now(&mut self) -> Option<StopCause> {
        if self.stopped.is_some() {
            return None;
        }
        self.stopped = Some(Instant::now());
        Some(StopCause::Cancelled)
    }
}

impl Observer for Recording<'_> {
    fn spawned(&mut self, _agent: &HandleId) {}

    fn event(&mut self, event: &AgentEvent, _report: &RunReport) -> Option<StopCause> {
        self.events.push(event.clone());
        if matches!(event, AgentEvent::Result(_)) && self.result_at.is_none() {
            self.result_at = Some(Instant::now());
        }
        None
    }

    fn heartbeat(&mut self, _report: &RunReport) -> Option<StopCause> {
        match self.stop {
            StopWhen::Once(holds) if holds() => self.stop_now(),
            _ => None,
        }
    }
}

/// The local Executor, but a scenario's leftovers are those that carry its own marker: the
/// scenarios run side by side in one owl, and the local sweep of every process below owl
/// would take the others' CLIs for this Run's leftovers.
struct ScenarioExecutor(LocalExecutor);

impl Executor for ScenarioExecutor {
    fn kind(&self) -> crate::config::ExecutorKind {
        self.0.kind()
    }
    fn prepare(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn supervisor(&self) -> Supervisor {
        self.0.supervisor()
    }
    fn supervisor_alive(&self, supervisor: &Supervisor) -> bool {
        self.0.supervisor_alive(supervisor)
    }
    fn spawn(&self, inv: &Invocation, place: &RunPlace, run_id: i64) -> std::io::Result<RunHandle> {
        self.0.spawn(inv, place, run_id)
    }
    fn start(&self, inv: &Invocation, cwd: &Path) -> std::io::Result<RunHandle> {
        self.0.start(inv, cwd)
    }
    fn oneshot(&self, call: Oneshot<'_>) -> Result<crate::oneshot::Ended, crate::oneshot::Failed> {
        self.0.oneshot(call)
    }
    fn state(&self, agent: &HandleId) -> Option<char> {
        self.0.state(agent)
    }
    fn signal(&self, agent: &HandleId, signal: Sig) {
        self.0.signal(agent, signal);
    }
    fn kill_leftovers(&self, agent: &HandleId) -> usize {
        // The scenario's own marker (its Run's files are its state dir) finds what its CLI
        // left, in a session of its own or not, as a recovery finds a lost Run's.
        self.0.signal(agent, Sig::KILL);
        self.0.kill_lost(&LostProcesses {
            run_id: 0,
            agent: None,
            boot_id: crate::sys::boot_id(),
        })
    }
    fn kill_lost(&self, lost: &LostProcesses) -> usize {
        self.0.kill_lost(lost)
    }
}
