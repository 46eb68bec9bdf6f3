//! One Run from spawn to reaped: reader threads, a waiter and a stdin writer feed one event loop, which owns every decision and the stop sequence.

pub mod process;
mod reader;

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError, Sender, SyncSender};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use signal_hook::iterator::Signals;

use crate::driver::{AgentEvent, AgentResult, Driver, Invocation};
use crate::outcome::{ExitInfo, StopCause};
pub use process::{Executor, LocalExecutor};
pub use reader::LINE_CAP;

/// How long an interrupted agent gets to write its `result` line.
pub const INTERRUPT_WAIT: Duration = Duration::from_secs(10);
/// How long an agent whose stdin was closed by a stop gets to exit by itself before SIGTERM.
const CLOSE_WAIT: Duration = Duration::from_secs(2);
/// How long an agent gets, after a normal `result` line and stdin closed, to finish its
/// teardown and exit by itself before SIGTERM. Claude Code takes about 5 s to stop a
/// background task and exit; a SIGTERM sooner makes 2.1.197 turn the task's notification
/// into extra, unsupervised API turns. Not `graceWindow`, which stays the SIGTERM→SIGKILL gap.
pub const TEARDOWN_WAIT: Duration = Duration::from_secs(15);
/// How long the readers get to reach EOF once the agent has exited and its leftovers are killed.
const READER_WAIT: Duration = Duration::from_secs(2);
/// How often the loop wakes with nothing to read, to let the observer look around.
const HEARTBEAT: Duration = Duration::from_millis(500);

/// What the threads of a Run tell the event loop. They only report; the loop decides.
#[derive(Debug)]
pub enum Event {
    /// A stdout line the Driver understood.
    Line(Box<AgentEvent>),
    /// A stdout line logged but not understood (garbage, too long, unknown shape).
    Skipped(String),
    /// The `Line`s and `Skipped`s of one read from stdout, in order.
    Batch(Vec<Event>),
    StdoutClosed,
    /// stderr reached end of file; carries its tail.
    StderrClosed(String),
    /// A log could not be written: the Run must stop. `disk_full`: for lack of space.
    LogFailed {
        error: String,
        disk_full: bool,
    },
    /// The agent process exited and was reaped.
    Exited(ExitInfo),
    /// owl itself received a signal (SIGTERM, SIGINT, SIGHUP).
    Signal(i32),
}

/// Everything needed to supervise one Run.
pub struct RunSpec<'a> {
    pub driver: Arc<dyn Driver>,
    pub invocation: &'a Invocation,
    pub cwd: &'a Path,
    pub run_id: i64,
    pub prompt: &'a str,
    pub stdout_log: File,
    pub stderr_log: File,
    pub max_run_time: Duration,
    pub stall_timeout: Duration,
    pub grace_window: Duration,
    /// How often to ask the agent for utilization; `None` when its Driver cannot answer.
    pub usage_poll_interval: Option<Duration>,
    /// Values (the Account's credentials) hidden from everything kept of the agent's stderr.
    pub secrets: Vec<String>,
}

/// The step that started the Run, told what happens as it happens.
pub trait Observer {
    /// The agent is running as `pid`, leader of its own process group.
    fn spawned(&mut self, pid: i32);
    /// A line was understood; returning a cause stops the Run (e.g. a ceiling crossed).
    fn event(&mut self, event: &AgentEvent, report: &RunReport) -> Option<StopCause>;
    /// Called about twice a second; returning a cause stops the Run (e.g. a cancel).
    fn heartbeat(&mut self, report: &RunReport) -> Option<StopCause>;
}

/// What happened in a Run, as the loop saw it.
#[derive(Debug, Clone, Default)]
pub struct RunReport {
    pub result: Option<AgentResult>,
    pub exit: ExitInfo,
    pub stop: Option<StopCause>,
    pub stderr_tail: String,
    pub session_id: Option<String>,
    pub agent_version: Option<String>,
    pub api_retries: i64,
    pub last_event: Option<String>,
    /// When a `rejected` rate limit resets (epoch seconds).
    pub rate_limit_reset: Option<i64>,
    pub lines: u64,
    pub skipped_lines: u64,
    /// Processes still alive after the agent exited, killed by owl.
    pub survivors_killed: usize,
    pub log_error: Option<String>,
    /// A real model answer was seen, not the CLI's synthetic stand-in.
    pub reached_model: bool,
    /// The CLI's error word on its last synthetic answer (`authentication_failed`, …).
    pub agent_error: Option<String>,
    /// owl signalled the agent after its result line (its teardown overran, or a stop came late).
    pub signalled_after_result: bool,
    /// A stop cause raised after the result line: a note, never the outcome.
    pub late_stop: Option<StopCause>,
    /// The agent outlived SIGKILL for a grace window: owl gave up waiting for it.
    pub unkillable: Option<String>,
}

/// Where the stop sequence is.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stage {
    Running,
    /// An interrupt was written; waiting for the `result` line.
    Interrupting(Instant),
    /// stdin is closed; waiting for the agent to exit by itself.
    Closing(Instant),
    /// SIGTERM went to the group; SIGKILL after the grace window.
    Terminating(Instant),
    /// SIGKILL went to the group; owl gives up on the agent after one more grace window.
    Killing(Instant),
    Killed,
}

/// Runs the agent to its end and returns what happened. An error means it never started.
pub fn supervise(
    spec: RunSpec,
    executor: &dyn Executor,
    observer: &mut dyn Observer,
) -> io::Result<RunReport> {
    let (tx, rx) = mpsc::sync_channel::<Event>(1024);
    // systemd stopping the unit, a person pressing Ctrl-C: the Run is stopped and recorded,
    // not abandoned. Installed before the spawn, so no signal finds the agent unguarded;
    // the handlers stay installed after the Run, so a late signal cannot cut the
    // recording short (it queues in the closed iterator and is dropped).
    let mut signals = Signals::new([libc::SIGTERM, libc::SIGINT, libc::SIGHUP])?;
    let signal_handle = signals.handle();
    spawn_thread("owl-signals", {
        let tx = tx.clone();
        move || {
            for sig in signals.forever() {
                if tx.send(Event::Signal(sig)).is_err() {
                    break;
                }
            }
        }
    });
    let mut child = match executor.spawn(spec.invocation, spec.cwd, spec.run_id) {
        Ok(child) => child,
        Err(e) => {
            signal_handle.close();
            return Err(e);
        }
    };
    let pid = child.id() as i32;
    observer.spawned(pid);

    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let stdin = child.stdin.take().expect("stdin is piped");
    spawn_thread("owl-stdout", {
        let (tx, driver) = (tx.clone(), spec.driver.clone());
        move || reader::read_stdout(stdout, spec.stdout_log, driver, tx)
    });
    spawn_thread("owl-stderr", {
        let tx = tx.clone();
        let secrets = spec.secrets.clone();
        move || reader::read_stderr(stderr, spec.stderr_log, &secrets, tx)
    });
    spawn_thread("owl-waiter", move || wait_for(child, tx));
    let mut stdin = Some(spawn_stdin_writer(stdin));

    send(&stdin, spec.driver.prompt_input(spec.prompt));
    let mut lp = Loop {
        driver: spec.driver.as_ref(),
        pid,
        stage: Stage::Running,
        report: RunReport::default(),
        grace: spec.grace_window,
    };
    let started = Instant::now();
    let mut last_output = Instant::now();
    let mut last_heartbeat = Instant::now();
    let (mut stdout_open, mut stderr_open) = (true, true);
    let mut readers_deadline: Option<Instant> = None;
    // The first poll waits for the first API response: before it the CLI may not know.
    let mut next_poll: Option<Instant> = None;
    let mut polls = 0u64;
    let mut signals_seen = 0;

    // Lines of a batch not yet handled: the loop takes them one by one, as if each had
    // come alone.
    let mut queued: std::collections::VecDeque<Event> = std::collections::VecDeque::new();
    loop {
        if lp.report_exited() && !stdout_open && !stderr_open && queued.is_empty() {
            break;
        }
        if readers_deadline.is_some_and(|d| Instant::now() >= d) && queued.is_empty() {
            // A descendant we could not kill still holds a pipe: do not wait forever.
            break;
        }
        let now = Instant::now();
        let mut wake = now + HEARTBEAT;
        if lp.stage == Stage::Running && !lp.report_exited() {
            wake = wake
                .min(started + spec.max_run_time)
                .min(last_output + spec.stall_timeout);
        }
        if let Some(d) = lp.stage_deadline() {
            wake = wake.min(d);
        }
        if let Some(d) = readers_deadline {
            wake = wake.min(d);
        }
        if let Some(d) = next_poll {
            wake = wake.min(d);
        }
        let received = match queued.pop_front() {
            Some(event) => Ok(event),
            None => rx.recv_timeout(wake.saturating_duration_since(now)),
        };
        match received {
            Ok(Event::Batch(events)) => {
                queued.extend(events);
                continue;
            }
            Ok(Event::Line(ev)) => {
                let ev = *ev;
                last_output = Instant::now();
                lp.report.lines += 1;
                lp.note(&ev);
                let api_response =
                    matches!(ev, AgentEvent::Assistant { .. } | AgentEvent::RateLimit(_));
                if api_response && polls == 0 && next_poll.is_none() {
                    next_poll = spec.usage_poll_interval.map(|_| Instant::now());
                }
                if let AgentEvent::Result(r) = &ev {
                    lp.report.result = Some(r.clone());
                    lp.settled(Instant::now(), &mut stdin);
                }
                if let Some(cause) = observer.event(&ev, &lp.report) {
                    lp.begin_stop(cause, Instant::now(), &mut stdin);
                }
            }
            Ok(Event::Skipped(why)) => {
                last_output = Instant::now();
                lp.report.lines += 1;
                lp.report.skipped_lines += 1;
                tracing::debug!(run = spec.run_id, "skipped a stdout line: {why}");
            }
            Ok(Event::StdoutClosed) => {
                stdout_open = false;
                // The conversation is over even if the process lingers.
                if lp.stage == Stage::Running && !lp.report_exited() {
                    stdin = None;
                    lp.stage = Stage::Closing(Instant::now() + CLOSE_WAIT);
                }
            }
            Ok(Event::StderrClosed(tail)) => {
                stderr_open = false;
                lp.report.stderr_tail = tail;
            }
            Ok(Event::LogFailed { error, disk_full }) => {
                if lp.report.log_error.is_none() {
                    lp.report.log_error = Some(error.clone());
                    let cause = if disk_full {
                        StopCause::DiskFull(error)
                    } else {
                        StopCause::LogWrite(error)
                    };
                    lp.begin_stop(cause, Instant::now(), &mut stdin);
                }
            }
            Ok(Event::Exited(info)) => {
                lp.report.exit = info;
                lp.stage = Stage::Killed;
                stdin = None;
                // Whatever the agent left behind, in its group or reparented to us (we are a
                // subreaper), is below us now: count it, kill it, reap it.
                lp.report.survivors_killed = process::kill_descendants();
                process::signal_group(pid, libc::SIGKILL);
                readers_deadline = Some(Instant::now() + READER_WAIT);
            }
            Ok(Event::Signal(sig)) => {
                signals_seen += 1;
                if signals_seen > 1 && sig != libc::SIGHUP && !lp.report_exited() {
                    // Asked twice: the person means it.
                    tracing::warn!("second {} : killing the agent now", signal_name(sig));
                    lp.kill_now(Instant::now());
                } else {
                    lp.begin_stop(
                        StopCause::Signal(signal_name(sig)),
                        Instant::now(),
                        &mut stdin,
                    );
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }

        let now = Instant::now();
        if lp.stage == Stage::Running && !lp.report_exited() {
            if now >= started + spec.max_run_time {
                lp.begin_stop(StopCause::MaxRunTime, now, &mut stdin);
            } else if now >= last_output + spec.stall_timeout {
                lp.begin_stop(StopCause::Stalled, now, &mut stdin);
            }
        }
        if now >= last_heartbeat + HEARTBEAT {
            last_heartbeat = now;
            if !lp.report_exited() {
                if let Some(cause) = observer.heartbeat(&lp.report) {
                    lp.begin_stop(cause, now, &mut stdin);
                }
            }
        }
        if let (Some(due), Some(every)) = (next_poll, spec.usage_poll_interval) {
            if lp.stage != Stage::Running || lp.report.result.is_some() {
                next_poll = None;
            } else if now >= due {
                polls += 1;
                if let Some(bytes) = spec
                    .driver
                    .usage_request_input(&format!("owl-usage-{polls}"))
                {
                    send(&stdin, bytes);
                }
                next_poll = Some(now + every);
            }
        }
        lp.advance(Instant::now(), &mut stdin);
        if lp.report.unkillable.is_some() {
            // Waiting longer would hold the tick lock for good; the waiter and readers are
            // left behind, and end with this process.
            break;
        }
    }
    signal_handle.close();
    Ok(lp.report)
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

struct Loop<'a> {
    driver: &'a dyn Driver,
    pid: i32,
    stage: Stage,
    report: RunReport,
    grace: Duration,
}

impl Loop<'_> {
    fn report_exited(&self) -> bool {
        self.stage == Stage::Killed
    }

    fn stage_deadline(&self) -> Option<Instant> {
        match self.stage {
            Stage::Interrupting(d)
            | Stage::Closing(d)
            | Stage::Terminating(d)
            | Stage::Killing(d) => Some(d),
            Stage::Running | Stage::Killed => None,
        }
    }

    fn note(&mut self, ev: &AgentEvent) {
        self.report.last_event = Some(ev.describe());
        match ev {
            AgentEvent::Init {
                session_id,
                version,
                ..
            } => {
                self.report.session_id = session_id.clone().or(self.report.session_id.take());
                self.report.agent_version = version.clone();
            }
            AgentEvent::Assistant {
                synthetic, error, ..
            } => {
                self.report.reached_model |= !synthetic;
                if error.is_some() {
                    self.report.agent_error = error.clone();
                }
            }
            AgentEvent::ApiRetry { .. } => self.report.api_retries += 1,
            AgentEvent::RateLimit(info) if info.status == "rejected" => {
                self.report.rate_limit_reset = info.resets_at;
            }
            AgentEvent::Result(r) if r.session_id.is_some() => {
                self.report.session_id = r.session_id.clone();
            }
            _ => {}
        }
    }

    /// The agent's result line settles the Run: one turn per Run, so stdin closes. After a
    /// normal result the CLI gets [`TEARDOWN_WAIT`] to exit by itself; after the result of
    /// a Run owl stopped, the group is killed at once, so that nothing the CLI still has
    /// queued (a background task's notification) can start another API request or tool.
    fn settled(&mut self, now: Instant, stdin: &mut Option<Sender<Vec<u8>>>) {
        *stdin = None;
        match self.stage {
            Stage::Running if self.report.stop.is_none() => {
                self.stage = Stage::Closing(now + TEARDOWN_WAIT);
            }
            Stage::Running | Stage::Interrupting(_) | Stage::Closing(_) => self.kill_now(now),
            Stage::Terminating(_) | Stage::Killing(_) | Stage::Killed => {}
        }
    }

    /// Starts the stop sequence (once; a later cause does not replace the first). A cause
    /// raised after the result line is kept as a note and ends the process at once.
    fn begin_stop(&mut self, cause: StopCause, now: Instant, stdin: &mut Option<Sender<Vec<u8>>>) {
        if self.report.stop.is_some() || self.stage == Stage::Killed {
            return;
        }
        if self.report.result.is_some() {
            if self.report.late_stop.is_none() {
                tracing::info!(pid = self.pid, "after the result: {}", cause.reason());
                self.report.late_stop = Some(cause);
                if matches!(self.stage, Stage::Closing(_)) {
                    self.kill_now(now);
                }
            }
            return;
        }
        tracing::info!(pid = self.pid, "stopping the run: {}", cause.reason());
        self.report.stop = Some(cause);
        if self.stage != Stage::Running {
            return;
        }
        let interrupt = self
            .driver
            .capabilities()
            .interrupt
            .then(|| self.driver.interrupt_input("owl-interrupt"))
            .flatten();
        match (interrupt, stdin.as_ref()) {
            (Some(bytes), Some(_)) => {
                send(stdin, bytes);
                self.stage = Stage::Interrupting(now + INTERRUPT_WAIT);
            }
            _ => {
                *stdin = None;
                self.stage = Stage::Closing(now + CLOSE_WAIT);
            }
        }
    }

    /// SIGKILL to the group now; owl waits one grace window for the exit, then gives up.
    fn kill_now(&mut self, now: Instant) {
        self.signal(libc::SIGKILL);
        self.stage = Stage::Killing(now + self.grace);
    }

    fn signal(&mut self, sig: i32) {
        if self.report.result.is_some() {
            self.report.signalled_after_result = true;
        }
        process::signal_group(self.pid, sig);
    }

    /// Moves the stop sequence on when its current deadline has passed.
    fn advance(&mut self, now: Instant, stdin: &mut Option<Sender<Vec<u8>>>) {
        match self.stage {
            Stage::Interrupting(d) if now >= d => {
                *stdin = None;
                self.stage = Stage::Closing(now + CLOSE_WAIT);
            }
            Stage::Closing(d) if now >= d => {
                self.signal(libc::SIGTERM);
                self.stage = Stage::Terminating(now + self.grace);
            }
            Stage::Terminating(d) if now >= d => self.kill_now(now),
            Stage::Killing(d) if now >= d => {
                // Only an uninterruptible sleep (state D: a hung filesystem, a device)
                // outlives SIGKILL this long.
                let state = process::stat(self.pid).map_or('?', |s| s.state);
                self.report.unkillable = Some(format!(
                    "the agent could not be killed: pid {} in state {state}",
                    self.pid
                ));
            }
            _ => {}
        }
    }
}

fn spawn_thread(name: &str, f: impl FnOnce() + Send + 'static) {
    thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .expect("spawning a supervisor thread");
}

fn wait_for(mut child: std::process::Child, tx: SyncSender<Event>) {
    use std::os::unix::process::ExitStatusExt;
    let info = match child.wait() {
        Ok(status) => ExitInfo {
            code: status.code(),
            signal: status.signal(),
        },
        Err(_) => ExitInfo::default(),
    };
    let _ = tx.send(Event::Exited(info));
}

/// The agent's stdin lives on its own thread: a child that stops reading must never
/// block the loop. Dropping the returned sender closes stdin.
fn spawn_stdin_writer(mut stdin: std::process::ChildStdin) -> Sender<Vec<u8>> {
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    spawn_thread("owl-stdin", move || {
        for bytes in rx {
            if stdin
                .write_all(&bytes)
                .and_then(|()| stdin.flush())
                .is_err()
            {
                break;
            }
        }
    });
    tx
}

fn send(stdin: &Option<Sender<Vec<u8>>>, bytes: Vec<u8>) {
    if let Some(tx) = stdin {
        let _ = tx.send(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::ClaudeCode;

    /// A pid no process can have (above any pid_max): signals to it go nowhere, the way
    /// they do to an agent stuck in uninterruptible sleep.
    const NO_PID: i32 = i32::MAX;
    const GRACE: Duration = Duration::from_secs(2);

    fn looped(driver: &ClaudeCode) -> Loop<'_> {
        Loop {
            driver,
            pid: NO_PID,
            stage: Stage::Running,
            report: RunReport::default(),
            grace: GRACE,
        }
    }

    fn success() -> AgentResult {
        AgentResult {
            subtype: "success".into(),
            ..Default::default()
        }
    }

    #[test]
    fn an_agent_that_outlives_sigkill_is_given_up_on_within_a_bound() {
        let driver = ClaudeCode;
        let mut lp = looped(&driver);
        let mut stdin = None;
        let t0 = Instant::now();
        lp.begin_stop(StopCause::MaxRunTime, t0, &mut stdin);
        assert_eq!(lp.stage, Stage::Closing(t0 + CLOSE_WAIT));
        let mut now = t0;
        while lp.report.unkillable.is_none() {
            now = lp.stage_deadline().expect("a stop stage has a deadline");
            lp.advance(now, &mut stdin);
        }
        // stdin closed, SIGTERM, SIGKILL, one more grace window: then owl lets go.
        assert_eq!(now - t0, CLOSE_WAIT + 2 * GRACE);
        assert_eq!(
            lp.report.unkillable.as_deref(),
            Some(format!("the agent could not be killed: pid {NO_PID} in state ?").as_str())
        );
    }

    #[test]
    fn a_stop_cause_after_the_result_is_a_note_and_ends_the_process_at_once() {
        let driver = ClaudeCode;
        let mut lp = looped(&driver);
        let (tx, _rx) = mpsc::channel();
        let mut stdin = Some(tx);
        let t0 = Instant::now();
        lp.report.result = Some(success());
        lp.settled(t0, &mut stdin);
        assert!(stdin.is_none(), "one turn per Run: stdin closes");
        assert_eq!(lp.stage, Stage::Closing(t0 + TEARDOWN_WAIT));
        let ceiling = StopCause::Ceiling {
            reason: "ceiling: five_hour 63% >= fiveHourMax 60".into(),
            resets_at: None,
        };
        lp.begin_stop(ceiling.clone(), t0, &mut stdin);
        assert_eq!(lp.report.stop, None, "the result settled the outcome");
        assert_eq!(lp.report.late_stop, Some(ceiling));
        assert_eq!(lp.stage, Stage::Killing(t0 + GRACE));
        assert!(lp.report.signalled_after_result);
    }

    #[test]
    fn a_normal_result_gets_the_teardown_wait_not_the_grace_window() {
        let driver = ClaudeCode;
        let mut lp = looped(&driver);
        let mut stdin = None;
        let t0 = Instant::now();
        lp.report.result = Some(success());
        lp.settled(t0, &mut stdin);
        lp.advance(t0 + GRACE, &mut stdin);
        assert_eq!(lp.stage, Stage::Closing(t0 + TEARDOWN_WAIT));
        assert!(!lp.report.signalled_after_result);
        lp.advance(t0 + TEARDOWN_WAIT, &mut stdin);
        assert!(matches!(lp.stage, Stage::Terminating(_)));
        assert!(lp.report.signalled_after_result);
    }

    #[test]
    fn the_result_of_a_stopped_run_ends_the_group_at_once() {
        let driver = ClaudeCode;
        let mut lp = looped(&driver);
        let (tx, _rx) = mpsc::channel();
        let mut stdin = Some(tx);
        let t0 = Instant::now();
        lp.begin_stop(StopCause::Cancelled, t0, &mut stdin);
        assert_eq!(lp.stage, Stage::Interrupting(t0 + INTERRUPT_WAIT));
        lp.report.result = Some(success());
        let t1 = t0 + Duration::from_millis(300);
        lp.settled(t1, &mut stdin);
        assert_eq!(lp.stage, Stage::Killing(t1 + GRACE));
        assert_eq!(lp.report.stop, Some(StopCause::Cancelled));
    }
}
