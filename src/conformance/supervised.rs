//! A scenario run through owl's own supervision: the CLI started as a Run by the Executor and supervised by `supervise::supervise`, a recording observer beside it, and the Run judged by the settlement's classification, so that one run proves both the CLI and owl's handling of it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::config::Account;
use crate::driver::{AgentEvent, Driver, Invocation};
use crate::model::StopCause;
use crate::outcome::Classified;
use crate::supervise::process::{LostProcesses, Oneshot, Supervisor};
use crate::supervise::{
    Executor, HandleId, LocalExecutor, Observer, RunHandle, RunPlace, RunReport, RunSpec, StopLatch,
};
use crate::sys::Sig;

/// What a supervised scenario saw: owl's report of the Run, every event in order, and the
/// settlement's verdict on it.
pub(crate) struct Supervised {
    pub report: RunReport,
    pub events: Vec<AgentEvent>,
    pub classified: Classified,
    /// The stop the observer asked for, if it did.
    pub stopped: bool,
}

/// Everything a supervised scenario needs.
pub(crate) struct Run<'a> {
    pub driver: Arc<dyn Driver>,
    pub command: &'a Path,
    pub account: &'a Account,
    pub invocation: &'a Invocation,
    /// The prompt, as the Driver writes it (`""` when it rides in argv).
    pub prompt: &'a str,
    /// The CLI's working copy and the Run's own files (its logs).
    pub dir: &'a Path,
    /// How long the Run may take before owl stops it.
    pub limit: Duration,
    /// The observer asks owl to stop the Run at the first event this picks.
    pub stop_at: fn(&AgentEvent) -> bool,
}

/// Supervises `run` to its end as a tick would, with owl's own stop sequence.
pub(crate) fn supervise(run: Run) -> std::io::Result<Supervised> {
    let executor = ScenarioExecutor(LocalExecutor {
        state_dir: run.dir.to_path_buf(),
    });
    let mut observer = Recording {
        events: Vec::new(),
        stop_at: run.stop_at,
        stopped: false,
    };
    let spec = RunSpec {
        driver: run.driver.clone(),
        command: run.command,
        account: run.account,
        invocation: run.invocation,
        place: RunPlace {
            workspace: run.dir,
            files: run.dir,
        },
        run_id: 0,
        prompt: run.prompt,
        stdout_log: std::fs::File::create(run.dir.join("supervised.stdout.jsonl"))?,
        stderr_log: std::fs::File::create(run.dir.join("supervised.stderr.log"))?,
        max_run_time: run.limit,
        stall_timeout: run.limit,
        grace_window: Duration::from_secs(5),
        usage_poll_interval: None,
        secrets: Vec::new(),
        latch: StopLatch::default(),
    };
    let report = crate::supervise::supervise(spec, &executor, &mut observer)?;
    let classified = crate::settlement::classify(&report, run.account, run.driver.as_ref());
    Ok(Supervised {
        report,
        events: observer.events,
        classified,
        stopped: observer.stopped,
    })
}

/// Records every event; stops the Run (as a cancel would) at the first `stop_at` picks.
struct Recording {
    events: Vec<AgentEvent>,
    stop_at: fn(&AgentEvent) -> bool,
    stopped: bool,
}

impl Observer for Recording {
    fn spawned(&mut self, _agent: &HandleId) {}

    fn event(&mut self, event: &AgentEvent, _report: &RunReport) -> Option<StopCause> {
        self.events.push(event.clone());
        if !self.stopped && (self.stop_at)(event) {
            self.stopped = true;
            return Some(StopCause::Cancelled);
        }
        None
    }

    fn heartbeat(&mut self, _report: &RunReport) -> Option<StopCause> {
        None
    }
}

/// The local Executor, but a scenario's leftovers are its own group's only: the scenarios
/// run side by side in one owl, and the local sweep of every process below owl would take
/// the others' CLIs for this Run's leftovers.
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
        self.0.signal(agent, Sig::KILL);
        0
    }
    fn kill_lost(&self, lost: &LostProcesses) -> usize {
        self.0.kill_lost(lost)
    }
}
