//! The decisions of one Run's supervision as a state machine: events and deadlines in, actions out; no threads, no processes, no clock of its own.

use std::time::{Duration, Instant};

use crate::driver::{AgentEvent, Interrupt, RateLimitStatus, UsagePoll};
use crate::model::{ExitInfo, StopCause};
use crate::sys::Sig;

use super::RunReport;

/// How long an interrupted agent gets to write its `result` line.
pub(crate) use crate::driver::INTERRUPT_WAIT;
/// How long an agent whose stdin was closed by a stop gets to exit by itself before SIGTERM.
pub(crate) const CLOSE_WAIT: Duration = Duration::from_secs(2);
/// How long an agent gets, after a normal `result` line and stdin closed, to finish its
/// teardown and exit by itself before SIGTERM. Claude Code takes about 5 s to stop a
/// background task and exit; a SIGTERM sooner makes 2.1.197 turn the task's notification
/// into extra, unsupervised API turns. Not `graceWindow`, which stays the SIGTERM→SIGKILL gap.
pub(crate) const TEARDOWN_WAIT: Duration = Duration::from_secs(15);
/// How long the readers get to reach EOF once the agent has exited and its leftovers are killed.
pub(crate) const READER_WAIT: Duration = Duration::from_secs(2);
/// How often the observer is asked to look around (a cancel, a figure from elsewhere).
pub(crate) const HEARTBEAT: Duration = Duration::from_millis(500);

/// How a Run is asked to stop and for its utilization, from what the Driver declares and
/// offers for the Account, and whether the agent's stdin is open: an interrupt on stdin
/// needs stdin, a SIGINT does not; the probe beside the agent needs a zero-token probe.
pub(crate) fn negotiate(
    probe: bool,
    offered_interrupt: Option<Interrupt>,
    offered_poll: UsagePoll,
    stdin_open: bool,
) -> (Option<Interrupt>, UsagePoll) {
    // The interrupt the Driver offers is the capability: there is no second declaration.
    let interrupt = offered_interrupt.filter(|how| stdin_open || *how == Interrupt::Sigint);
    let poll = match offered_poll {
        UsagePoll::Probe if probe => UsagePoll::Probe,
        UsagePoll::Probe | UsagePoll::None => UsagePoll::None,
        UsagePoll::Stdin => UsagePoll::Stdin,
    };
    (interrupt, poll)
}

/// The limits and abilities a Run is supervised under.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) max_run_time: Duration,
    pub(crate) stall_timeout: Duration,
    /// The gap between SIGTERM and SIGKILL, and how long owl waits after SIGKILL.
    pub(crate) grace: Duration,
    /// How often to ask the agent for utilization; `None` when its Driver cannot answer.
    pub(crate) usage_poll_interval: Option<Duration>,
    /// The first poll is due one interval after the start: the answer comes from beside
    /// the agent (a probe), so it needs no API response first.
    pub(crate) poll_from_start: bool,
    /// How the agent can be asked to abort its turn, if at all.
    pub(crate) interrupt: Option<InterruptBy>,
}

/// How an interrupt reaches the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InterruptBy {
    /// A request on its stdin, while stdin is open.
    Stdin,
    /// SIGINT to its group.
    Signal,
}

/// The signals that tell owl itself to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OwlSignal {
    Term,
    Int,
    Hup,
}

impl OwlSignal {
    fn name(self) -> &'static str {
        match self {
            OwlSignal::Term => "SIGTERM",
            OwlSignal::Int => "SIGINT",
            OwlSignal::Hup => "SIGHUP",
        }
    }
}

/// What happened to the agent's process, its pipes and logs, or to owl: told by the
/// threads of a Run, taken by the machine as it is.
#[derive(Debug)]
pub(crate) enum Happened {
    /// owl closed the agent's stdin before the Run began (its prompt is in argv).
    StdinClosed,
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
    Signal(OwlSignal),
}

/// What the machine is told.
#[derive(Debug)]
pub(crate) enum Input<'a> {
    /// A stdout line the Driver understood.
    Line(&'a AgentEvent),
    /// A stdout line logged but not understood.
    Skipped,
    /// What was learned beside stdout (the agent's session log, a probe): no output of the
    /// agent's, so it moves no stall timer.
    Side(&'a AgentEvent),
    Happened(Happened),
    /// The observer asks for a stop (a ceiling crossed, a cancel).
    Stop(StopCause),
}

/// What the machine asks the plumbing around it to do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Ask the agent to abort its turn, the Driver's way (stdin or SIGINT).
    Interrupt,
    /// Write the Driver's usage request number `n` to the agent's stdin.
    AskUsage(u64),
    /// Close the agent's stdin.
    CloseStdin,
    /// Send a signal to the agent's process group.
    Signal(Sig),
    /// The agent exited: kill and count what it left, and report it with
    /// [`Machine::leftovers_killed`].
    KillLeftovers,
    /// Ask the observer to look around; a stop it wants comes back as [`Input::Stop`].
    Heartbeat,
    /// The agent outlived SIGKILL: report its state with [`Machine::gave_up`].
    GiveUp,
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
    /// The agent has exited.
    Exited,
}

/// One Run's supervision.
pub(crate) struct Machine {
    limits: Limits,
    stage: Stage,
    report: RunReport,
    started: Instant,
    last_output: Instant,
    last_heartbeat: Instant,
    stdin_open: bool,
    stdout_open: bool,
    stderr_open: bool,
    readers_deadline: Option<Instant>,
    /// The first poll waits for the first API response: before it the CLI may not know.
    next_poll: Option<Instant>,
    polls: u64,
    signals_seen: u32,
    agent: super::HandleId,
}

impl Machine {
    /// A Run whose agent was started at `now`, its prompt written.
    pub(crate) fn new(limits: Limits, agent: super::HandleId, now: Instant) -> Machine {
        Machine {
            limits,
            stage: Stage::Running,
            report: RunReport::default(),
            started: now,
            last_output: now,
            last_heartbeat: now,
            stdin_open: true,
            stdout_open: true,
            stderr_open: true,
            readers_deadline: None,
            next_poll: limits
                .usage_poll_interval
                .filter(|_| limits.poll_from_start)
                .map(|every| now + every),
            polls: 0,
            signals_seen: 0,
            agent,
        }
    }

    /// What happened so far.
    pub(crate) fn report(&self) -> &RunReport {
        &self.report
    }

    /// What happened.
    pub(crate) fn into_report(self) -> RunReport {
        self.report
    }

    /// Whether supervision is over: the agent exited and its pipes closed (or a descendant
    /// owl could not kill holds them past the readers' deadline), or it could not be killed.
    pub(crate) fn is_done(&self, now: Instant) -> bool {
        let exited = self.stage == Stage::Exited;
        (exited && !self.stdout_open && !self.stderr_open)
            || self.readers_deadline.is_some_and(|d| now >= d)
            || self.report.unkillable.is_some()
    }

    /// The latest time the plumbing may wait before calling [`Machine::on_deadline`].
    pub(crate) fn next_deadline(&self, now: Instant) -> Instant {
        let mut wake = now.max(self.last_heartbeat + HEARTBEAT);
        if self.stage == Stage::Running {
            wake = wake
                .min(self.started + self.limits.max_run_time)
                .min(self.last_output + self.limits.stall_timeout);
        }
        let deadlines = [self.stage_deadline(), self.readers_deadline, self.next_poll];
        for d in deadlines.into_iter().flatten() {
            wake = wake.min(d);
        }
        wake
    }

    /// Takes one input; returns what to do about it.
    pub(crate) fn on_event(&mut self, input: Input, now: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        match input {
            Input::Line(ev) => self.on_line(ev, now, &mut out),
            Input::Side(AgentEvent::Usage { windows, .. }) => self.on_figures(windows, now),
            Input::Side(AgentEvent::ToolResult {
                denied: Some(denial),
                ..
            }) => self.report.denials.push(denial.clone()),
            Input::Side(_) => {}
            Input::Skipped => {
                self.last_output = now;
                self.report.lines += 1;
                self.report.skipped_lines += 1;
            }
            Input::Happened(Happened::StdinClosed) => self.stdin_open = false,
            Input::Happened(Happened::StdoutClosed) => {
                self.stdout_open = false;
                // The conversation is over even if the process lingers.
                if self.stage == Stage::Running {
                    self.close_stdin(&mut out);
                    self.stage = Stage::Closing(now + CLOSE_WAIT);
                }
            }
            Input::Happened(Happened::StderrClosed(tail)) => {
                self.stderr_open = false;
                self.report.stderr_tail = tail;
            }
            Input::Happened(Happened::LogFailed { error, disk_full }) => {
                if self.report.log_error.is_none() {
                    self.report.log_error = Some(error.clone());
                    let cause = if disk_full {
                        StopCause::DiskFull(error)
                    } else {
                        StopCause::LogWrite(error)
                    };
                    self.begin_stop(cause, now, &mut out);
                }
            }
            Input::Happened(Happened::Exited(info)) => {
                self.report.exit = info;
                self.stage = Stage::Exited;
                self.close_stdin(&mut out);
                out.push(Action::KillLeftovers);
                self.readers_deadline = Some(now + READER_WAIT);
            }
            Input::Happened(Happened::Signal(sig)) => self.on_signal(sig, now, &mut out),
            Input::Stop(cause) => self.begin_stop(cause, now, &mut out),
        }
        out
    }

    /// A stdout line: output seen, the first poll timed from the first API response, the
    /// result settling the Run.
    fn on_line(&mut self, ev: &AgentEvent, now: Instant, out: &mut Vec<Action>) {
        self.last_output = now;
        self.report.lines += 1;
        self.note(ev);
        if let Some(what) = unconfigured(ev) {
            self.begin_stop(StopCause::Unconfigured(what), now, out);
        }
        let api_response = matches!(ev, AgentEvent::Assistant { .. } | AgentEvent::RateLimit(_));
        if api_response && self.polls == 0 && self.next_poll.is_none() {
            self.next_poll = self.limits.usage_poll_interval.map(|_| now);
        }
        if let AgentEvent::Result(r) = ev {
            self.report.result = Some(r.clone());
            self.settled(now, out);
        }
    }
}

/// What the line says the CLI used that owl did not configure, in words; `None`: nothing.
fn unconfigured(ev: &AgentEvent) -> Option<String> {
    match ev {
        AgentEvent::Init { unconfigured, .. } if !unconfigured.is_empty() => {
            Some(unconfigured.join(", "))
        }
        AgentEvent::Unconfigured(what) => Some(what.clone()),
        _ => None,
    }
}

impl Machine {
    /// Figures learned beside stdout: a full Window's reset kept; the next ask waits a full
    /// interval, since figures arrive without being asked.
    fn on_figures(&mut self, windows: &[crate::driver::WindowUsage], now: Instant) {
        let full = windows.iter().filter(|w| w.percent >= 100.0);
        if let Some(reset) = full.filter_map(|w| w.resets_at).max() {
            self.report.full_window_reset = Some(reset);
        }
        if let (Some(every), Stage::Running) = (self.limits.usage_poll_interval, self.stage) {
            self.next_poll = Some(now + every);
        }
    }

    /// A stop signal to owl: the stop sequence, or at the second (not SIGHUP) a kill now.
    fn on_signal(&mut self, sig: OwlSignal, now: Instant, out: &mut Vec<Action>) {
        self.signals_seen += 1;
        if self.signals_seen > 1 && sig != OwlSignal::Hup && self.stage != Stage::Exited {
            // Asked twice: the person means it.
            tracing::warn!("second {}: killing the agent now", sig.name());
            self.kill_now(now, out);
        } else {
            self.begin_stop(StopCause::Signal(sig.name()), now, out);
        }
    }

    /// Moves on whatever is due at `now`: limits, polls, heartbeats, the stop sequence.
    pub(crate) fn on_deadline(&mut self, now: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        if self.stage == Stage::Running {
            if now >= self.started + self.limits.max_run_time {
                self.begin_stop(StopCause::MaxRunTime, now, &mut out);
            } else if now >= self.last_output + self.limits.stall_timeout {
                self.begin_stop(StopCause::Stalled, now, &mut out);
            }
        }
        if now >= self.last_heartbeat + HEARTBEAT {
            self.last_heartbeat = now;
            if self.stage != Stage::Exited {
                out.push(Action::Heartbeat);
            }
        }
        if let (Some(due), Some(every)) = (self.next_poll, self.limits.usage_poll_interval) {
            if self.stage != Stage::Running || self.report.result.is_some() {
                self.next_poll = None;
            } else if now >= due {
                self.polls += 1;
                out.push(Action::AskUsage(self.polls));
                self.next_poll = Some(now + every);
            }
        }
        self.advance(now, &mut out);
        out
    }

    /// The agent exited and `n` processes it left were killed.
    pub(crate) fn leftovers_killed(&mut self, n: usize) {
        self.report.survivors_killed = n;
    }

    /// What went through the Run's confined network, once it is over.
    pub(crate) fn network(&mut self, said: Option<String>) {
        self.report.network = said;
    }

    /// owl gives up on an agent that outlived SIGKILL; `state` is its scheduler state.
    pub(crate) fn gave_up(&mut self, state: Option<char>) {
        // Only an uninterruptible sleep (state D: a hung filesystem, a device) outlives
        // SIGKILL this long.
        self.report.unkillable = Some(format!(
            "the agent could not be killed: {} in state {}",
            self.agent,
            state.unwrap_or('?')
        ));
    }

    fn stage_deadline(&self) -> Option<Instant> {
        match self.stage {
            Stage::Interrupting(d)
            | Stage::Closing(d)
            | Stage::Terminating(d)
            | Stage::Killing(d) => Some(d),
            Stage::Running | Stage::Exited => None,
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
            AgentEvent::ToolResult {
                denied: Some(denial),
                ..
            } => self.report.denials.push(denial.clone()),
            AgentEvent::RateLimit(info) if info.status == RateLimitStatus::Rejected => {
                self.report.rate_limit_reset = info.resets_at;
            }
            AgentEvent::Result(r) if r.session_id.is_some() => {
                self.report.session_id = r.session_id.clone();
            }
            _ => {}
        }
    }

    fn close_stdin(&mut self, out: &mut Vec<Action>) {
        if self.stdin_open {
            self.stdin_open = false;
            out.push(Action::CloseStdin);
        }
    }

    /// The agent's result line settles the Run: one turn per Run, so stdin closes. After a
    /// normal result the CLI gets [`TEARDOWN_WAIT`] to exit by itself; after the result of
    /// a Run owl stopped, the group is killed at once, so that nothing the CLI still has
    /// queued (a background task's notification) can start another API request or tool.
    fn settled(&mut self, now: Instant, out: &mut Vec<Action>) {
        self.close_stdin(out);
        match self.stage {
            Stage::Running if self.report.stop.is_none() => {
                self.stage = Stage::Closing(now + TEARDOWN_WAIT);
            }
            Stage::Running | Stage::Interrupting(_) | Stage::Closing(_) => self.kill_now(now, out),
            Stage::Terminating(_) | Stage::Killing(_) | Stage::Exited => {}
        }
    }

    /// Starts the stop sequence (once; a later cause does not replace the first). A cause
    /// raised after the result line is kept as a note and ends the process at once.
    fn begin_stop(&mut self, cause: StopCause, now: Instant, out: &mut Vec<Action>) {
        if self.report.stop.is_some() || self.stage == Stage::Exited {
            return;
        }
        if self.report.result.is_some() {
            if self.report.late_stop.is_none() {
                tracing::info!(agent = %self.agent, "after the result: {}", cause.reason());
                self.report.late_stop = Some(cause);
                if matches!(self.stage, Stage::Closing(_)) {
                    self.kill_now(now, out);
                }
            }
            return;
        }
        tracing::info!(agent = %self.agent, "stopping the run: {}", cause.reason());
        // A lost lease stops the agent at once: another machine may start on the Account
        // the moment the lease runs out, and an interrupt's answer could take longer.
        // So does a CLI that uses what owl did not configure: what it took from a planted
        // file (a hook, a server, a key) must not go on running.
        let at_once = matches!(cause, StopCause::LeaseLost(_) | StopCause::Unconfigured(_));
        self.report.stop = Some(cause);
        if self.stage != Stage::Running {
            return;
        }
        if at_once {
            self.kill_now(now, out);
            return;
        }
        let can_interrupt = match self.limits.interrupt {
            Some(InterruptBy::Stdin) => self.stdin_open,
            Some(InterruptBy::Signal) => true,
            None => false,
        };
        if can_interrupt {
            out.push(Action::Interrupt);
            self.stage = Stage::Interrupting(now + INTERRUPT_WAIT);
        } else {
            self.close_stdin(out);
            self.stage = Stage::Closing(now + CLOSE_WAIT);
        }
    }

    /// SIGKILL to the group now; owl waits one grace window for the exit, then gives up.
    fn kill_now(&mut self, now: Instant, out: &mut Vec<Action>) {
        self.signal(Sig::KILL, out);
        self.stage = Stage::Killing(now + self.limits.grace);
    }

    fn signal(&mut self, sig: Sig, out: &mut Vec<Action>) {
        if self.report.result.is_some() {
            self.report.signalled_after_result = true;
        }
        out.push(Action::Signal(sig));
    }

    /// Moves the stop sequence on when its current deadline has passed.
    fn advance(&mut self, now: Instant, out: &mut Vec<Action>) {
        match self.stage {
            Stage::Interrupting(d) if now >= d => {
                self.close_stdin(out);
                self.stage = Stage::Closing(now + CLOSE_WAIT);
            }
            Stage::Closing(d) if now >= d => {
                self.signal(Sig::TERM, out);
                self.stage = Stage::Terminating(now + self.limits.grace);
            }
            Stage::Terminating(d) if now >= d => self.kill_now(now, out),
            Stage::Killing(d) if now >= d && self.report.unkillable.is_none() => {
                out.push(Action::GiveUp);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stop_and_the_poll_are_what_the_driver_declares_and_the_pipe_allows() {
        let all = true;
        let on_stdin = Interrupt::Stdin(b"{}".to_vec());
        // Claude Code: an interrupt and a poll on stdin, while stdin is open.
        assert_eq!(
            negotiate(all, Some(on_stdin.clone()), UsagePoll::Stdin, true),
            (Some(on_stdin.clone()), UsagePoll::Stdin)
        );
        // A closed stdin takes no interrupt written to it; a SIGINT still goes.
        assert_eq!(
            negotiate(all, Some(on_stdin.clone()), UsagePoll::Stdin, false).0,
            None
        );
        assert_eq!(
            negotiate(all, Some(Interrupt::Sigint), UsagePoll::None, false).0,
            Some(Interrupt::Sigint)
        );
        // A side probe the Driver would poll with but has none for this Account is not
        // used; an interrupt it offers is its capability.
        let none = false;
        assert_eq!(
            negotiate(none, Some(Interrupt::Sigint), UsagePoll::Probe, true),
            (Some(Interrupt::Sigint), UsagePoll::None)
        );
        assert_eq!(
            negotiate(all, None, UsagePoll::Probe, true),
            (None, UsagePoll::Probe)
        );
    }
    use crate::driver::{ClaudeCode, Driver};

    const GRACE: Duration = Duration::from_secs(2);
    const POLL: Duration = Duration::from_secs(60);
    const STALL: Duration = Duration::from_secs(600);
    const MAX_RUN: Duration = Duration::from_secs(3600);

    /// The lines of a transcript recorded from the real CLI, as the Driver reads them.
    fn recorded(name: &str) -> Vec<AgentEvent> {
        crate::driver::recorded_lines("claude-code-2.1.197", name)
            .iter()
            .map(|l| ClaudeCode.parse_line(l.as_bytes()).unwrap())
            .collect()
    }

    fn first(events: &[AgentEvent], pick: impl Fn(&AgentEvent) -> bool) -> AgentEvent {
        events
            .iter()
            .find(|e| pick(e))
            .cloned()
            .expect("in the transcript")
    }

    fn result_line() -> AgentEvent {
        first(&recorded("success.jsonl"), |e| {
            matches!(e, AgentEvent::Result(_))
        })
    }

    fn assistant_line() -> AgentEvent {
        first(&recorded("tool-use.jsonl"), |e| {
            matches!(
                e,
                AgentEvent::Assistant {
                    synthetic: false,
                    ..
                }
            )
        })
    }

    /// A Run under a fake clock: `t` is the machine's only time.
    struct Run {
        m: Machine,
        t: Instant,
        t0: Instant,
    }

    impl Run {
        fn new(interrupt: bool) -> Run {
            Run::with(false, interrupt.then_some(InterruptBy::Stdin))
        }

        /// A Run of a Driver that polls with a probe from the start and stops by SIGINT
        /// (Codex), its stdin closed at once.
        fn by_probe_and_signal() -> Run {
            let mut run = Run::with(true, Some(InterruptBy::Signal));
            run.event(Input::Happened(Happened::StdinClosed));
            run
        }

        fn with(poll_from_start: bool, interrupt: Option<InterruptBy>) -> Run {
            let t0 = Instant::now();
            let limits = Limits {
                max_run_time: MAX_RUN,
                stall_timeout: STALL,
                grace: GRACE,
                usage_poll_interval: Some(POLL),
                poll_from_start,
                interrupt,
            };
            Run {
                m: Machine::new(
                    limits,
                    crate::supervise::HandleId {
                        pid: 4242,
                        start_time: None,
                    },
                    t0,
                ),
                t: t0,
                t0,
            }
        }

        fn at(&mut self, since_start: Duration) -> &mut Run {
            self.t = self.t0 + since_start;
            self
        }

        fn event(&mut self, input: Input) -> Vec<Action> {
            self.m.on_event(input, self.t)
        }

        fn line(&mut self, ev: &AgentEvent) -> Vec<Action> {
            self.event(Input::Line(ev))
        }

        /// Moves the clock to each deadline in turn until `until` holds; every action on the way.
        fn run_deadlines(&mut self, until: impl Fn(&Machine) -> bool) -> Vec<(Duration, Action)> {
            let mut seen = Vec::new();
            for _ in 0..10_000 {
                if until(&self.m) {
                    return seen;
                }
                self.t = self.m.next_deadline(self.t).max(self.t);
                for a in self.m.on_deadline(self.t) {
                    if a == Action::GiveUp {
                        self.m.gave_up(Some('D'));
                    }
                    if a != Action::Heartbeat {
                        seen.push((self.t - self.t0, a));
                    }
                }
            }
            panic!("never reached the condition; saw {seen:?}");
        }
    }

    fn ceiling() -> StopCause {
        StopCause::Ceiling(crate::model::Crossing {
            window: "five_hour".into(),
            percent: 63.0,
            limit: "fiveHourMax".into(),
            ceiling: 60.0,
            resets_at: None,
        })
    }

    #[test]
    fn an_answered_interrupt_ends_the_group_at_the_result() {
        let mut run = Run::new(true);
        run.line(&assistant_line());
        let stop = run
            .at(Duration::from_secs(30))
            .event(Input::Stop(ceiling()));
        assert_eq!(stop, vec![Action::Interrupt]);
        // The recorded answer to an interrupt: a result line, within the wait.
        let answer = first(&recorded("interrupt-control-request.jsonl"), |e| {
            matches!(e, AgentEvent::Result(_))
        });
        let after = run.at(Duration::from_secs(31)).line(&answer);
        assert_eq!(after, vec![Action::CloseStdin, Action::Signal(Sig::KILL)]);
        assert_eq!(run.m.report().stop, Some(ceiling()));
        assert!(run.m.report().result.is_some());
        let exited = run.event(Input::Happened(Happened::Exited(ExitInfo::default())));
        assert_eq!(exited, vec![Action::KillLeftovers]);
    }

    #[test]
    fn an_ignored_interrupt_closes_stdin_then_terms_then_kills() {
        let mut run = Run::new(true);
        run.line(&assistant_line());
        run.event(Input::Stop(StopCause::Cancelled));
        let seen = run.run_deadlines(|m| m.report().unkillable.is_some());
        let expect = vec![
            (INTERRUPT_WAIT, Action::CloseStdin),
            (INTERRUPT_WAIT + CLOSE_WAIT, Action::Signal(Sig::TERM)),
            (
                INTERRUPT_WAIT + CLOSE_WAIT + GRACE,
                Action::Signal(Sig::KILL),
            ),
            (INTERRUPT_WAIT + CLOSE_WAIT + 2 * GRACE, Action::GiveUp),
        ];
        assert_eq!(seen, expect);
        assert_eq!(
            run.m.report().unkillable.as_deref(),
            Some("the agent could not be killed: pid 4242 in state D")
        );
        assert!(run.m.is_done(run.t));
    }

    #[test]
    fn an_agent_deaf_to_sigterm_is_killed_after_the_grace_window() {
        let mut run = Run::new(false);
        run.event(Input::Stop(StopCause::MaxRunTime));
        let seen = run.run_deadlines(|m| matches!(m.stage, Stage::Killing(_)));
        assert_eq!(
            seen,
            vec![
                (CLOSE_WAIT, Action::Signal(Sig::TERM)),
                (CLOSE_WAIT + GRACE, Action::Signal(Sig::KILL)),
            ]
        );
        // SIGKILL works: the exit ends the sequence, and the leftovers are counted.
        let t = CLOSE_WAIT + GRACE + Duration::from_millis(5);
        let exited = run.at(t).event(Input::Happened(Happened::Exited(ExitInfo {
            code: None,
            signal: Some(9),
        })));
        assert_eq!(exited, vec![Action::KillLeftovers]);
        run.m.leftovers_killed(2);
        run.event(Input::Happened(Happened::StdoutClosed));
        run.event(Input::Happened(Happened::StderrClosed("bye".into())));
        assert!(run.m.is_done(run.t));
        assert_eq!(run.m.report().survivors_killed, 2);
        assert_eq!(run.m.report().stderr_tail, "bye");
    }

    #[test]
    fn a_ceiling_crossed_mid_turn_interrupts_once_and_keeps_the_first_cause() {
        let mut run = Run::new(true);
        run.line(&assistant_line());
        assert_eq!(run.event(Input::Stop(ceiling())), vec![Action::Interrupt]);
        // A second cause (a cancel a moment later) changes nothing.
        assert!(run.event(Input::Stop(StopCause::Cancelled)).is_empty());
        assert_eq!(run.m.report().stop, Some(ceiling()));
    }

    #[test]
    fn a_signal_interrupt_needs_no_stdin_and_the_exit_ends_it() {
        let mut run = Run::by_probe_and_signal();
        assert_eq!(run.event(Input::Stop(ceiling())), vec![Action::Interrupt]);
        // The recorded answer to SIGINT: exit 1 within 50 ms, no line on stdout.
        let exited = run
            .at(Duration::from_millis(50))
            .event(Input::Happened(Happened::Exited(ExitInfo {
                code: Some(1),
                signal: None,
            })));
        assert_eq!(exited, vec![Action::KillLeftovers]);
        assert_eq!(run.m.report().stop, Some(ceiling()));
        // An agent that ignores it gets the usual backstop: SIGTERM, then SIGKILL.
        let mut deaf = Run::by_probe_and_signal();
        deaf.event(Input::Stop(ceiling()));
        let seen = deaf.run_deadlines(|m| m.report().unkillable.is_some());
        let signals: Vec<&Action> = seen
            .iter()
            .map(|(_, a)| a)
            .filter(|a| matches!(a, Action::Signal(_)))
            .collect();
        assert_eq!(
            signals,
            [&Action::Signal(Sig::TERM), &Action::Signal(Sig::KILL)]
        );
    }

    #[test]
    fn a_probe_poll_is_due_from_the_start_and_figures_beside_stdout_defer_it() {
        let mut run = Run::by_probe_and_signal();
        assert_eq!(run.m.next_deadline(run.t), run.t0 + HEARTBEAT);
        let first = run.run_deadlines(|m| m.polls == 1);
        assert_eq!(first.last(), Some(&(POLL, Action::AskUsage(1))));
        // A figure from the session log: the next ask waits a full interval from it, and the
        // stall timer (stdout's) does not move.
        let usage = AgentEvent::Usage {
            source: crate::model::SnapshotSource::Rollout,
            windows: Vec::new(),
        };
        let at = POLL + Duration::from_secs(30);
        assert!(run.at(at).event(Input::Side(&usage)).is_empty());
        assert_eq!(run.m.next_poll, Some(run.t0 + at + POLL));
        assert_eq!(run.m.last_output, run.t0);
        assert_eq!(run.m.report().lines, 0);
    }

    #[test]
    fn a_cancel_before_any_output_interrupts_too() {
        let mut run = Run::new(true);
        let init = first(&recorded("success.jsonl"), |e| {
            matches!(e, AgentEvent::Init { .. })
        });
        run.line(&init);
        let cancel = run
            .at(Duration::from_secs(1))
            .event(Input::Stop(StopCause::Cancelled));
        assert_eq!(cancel, vec![Action::Interrupt]);
        assert_eq!(run.m.report().stop, Some(StopCause::Cancelled));
    }

    #[test]
    fn a_silent_agent_is_stopped_as_stalled_at_the_stall_timeout() {
        let mut run = Run::new(true);
        run.line(&assistant_line());
        // The first model answer makes the first usage poll due at once.
        assert_eq!(run.m.next_deadline(run.t), run.t0);
        let seen = run.run_deadlines(|m| m.report().stop.is_some());
        // Polls went out every minute until the stall; the stall interrupts.
        let polls = seen
            .iter()
            .filter(|(_, a)| matches!(a, Action::AskUsage(_)))
            .count();
        assert_eq!(polls, (STALL.as_secs() / POLL.as_secs()) as usize);
        assert_eq!(seen.last(), Some(&(STALL, Action::Interrupt)));
        assert_eq!(run.m.report().stop, Some(StopCause::Stalled));
    }

    #[test]
    fn output_keeps_a_run_from_stalling_until_max_run_time() {
        let mut run = Run::new(false);
        let line = assistant_line();
        for minute in 1..=60 {
            run.at(Duration::from_secs(minute * 60 - 1)).line(&line);
            run.m.on_deadline(run.t);
            if run.m.report().stop.is_some() {
                break;
            }
        }
        run.at(MAX_RUN);
        let actions = run.m.on_deadline(run.t);
        assert!(actions.contains(&Action::CloseStdin), "{actions:?}");
        assert_eq!(run.m.report().stop, Some(StopCause::MaxRunTime));
    }

    #[test]
    fn a_figure_after_the_result_is_a_note_and_ends_the_teardown_at_once() {
        let mut run = Run::new(true);
        run.line(&assistant_line());
        let settled = run.at(Duration::from_secs(40)).line(&result_line());
        assert_eq!(settled, vec![Action::CloseStdin], "one turn per Run");
        // A late figure over the ceiling: a note, never the outcome.
        let late = run
            .at(Duration::from_secs(41))
            .event(Input::Stop(ceiling()));
        assert_eq!(late, vec![Action::Signal(Sig::KILL)]);
        assert_eq!(run.m.report().stop, None, "the result settled the outcome");
        assert_eq!(run.m.report().late_stop, Some(ceiling()));
        assert!(run.m.report().signalled_after_result);
    }

    #[test]
    fn a_normal_result_gets_the_teardown_wait_then_sigterm() {
        let mut run = Run::new(true);
        run.line(&result_line());
        let seen = run.run_deadlines(|m| matches!(m.stage, Stage::Terminating(_)));
        assert_eq!(seen, vec![(TEARDOWN_WAIT, Action::Signal(Sig::TERM))]);
        assert!(run.m.report().signalled_after_result);
        assert_eq!(run.m.report().stop, None);
    }

    #[test]
    fn a_second_sigint_kills_at_once_but_a_second_sighup_does_not() {
        let mut run = Run::new(true);
        assert_eq!(
            run.event(Input::Happened(Happened::Signal(OwlSignal::Hup))),
            vec![Action::Interrupt]
        );
        assert!(run
            .event(Input::Happened(Happened::Signal(OwlSignal::Hup)))
            .is_empty());
        assert_eq!(
            run.event(Input::Happened(Happened::Signal(OwlSignal::Int))),
            vec![Action::Signal(Sig::KILL)]
        );
        assert_eq!(run.m.report().stop, Some(StopCause::Signal("SIGHUP")));
    }

    #[test]
    fn a_lost_lease_kills_at_once_without_an_interrupt() {
        let mut run = Run::new(true);
        let lost = StopCause::LeaseLost("another machine recorded it".into());
        assert_eq!(
            run.event(Input::Stop(lost.clone())),
            vec![Action::Signal(Sig::KILL)]
        );
        assert_eq!(run.m.report().stop, Some(lost));
    }

    #[test]
    fn a_log_that_cannot_be_written_stops_the_run_as_disk_full() {
        let mut run = Run::new(false);
        let actions = run.event(Input::Happened(Happened::LogFailed {
            error: "No space left on device".into(),
            disk_full: true,
        }));
        assert_eq!(actions, vec![Action::CloseStdin]);
        assert_eq!(
            run.m.report().stop,
            Some(StopCause::DiskFull("No space left on device".into()))
        );
    }

    #[test]
    fn usage_polls_start_at_the_first_model_answer_and_stop_at_the_result() {
        let mut run = Run::new(true);
        let before = run.m.on_deadline(run.t0 + Duration::from_secs(120));
        assert!(
            !before.iter().any(|a| matches!(a, Action::AskUsage(_))),
            "before the first model answer the CLI may not know: {before:?}"
        );
        run.at(Duration::from_secs(120)).line(&assistant_line());
        let due = run.m.on_deadline(run.t);
        assert!(due.contains(&Action::AskUsage(1)), "{due:?}");
        let later = run.m.on_deadline(run.t + POLL);
        assert!(later.contains(&Action::AskUsage(2)), "{later:?}");
        run.at(Duration::from_secs(200)).line(&result_line());
        let after = run.m.on_deadline(run.t + POLL);
        assert!(
            !after.iter().any(|a| matches!(a, Action::AskUsage(_))),
            "{after:?}"
        );
    }

    #[test]
    fn stdout_closing_while_running_closes_stdin_and_waits_to_term() {
        let mut run = Run::new(true);
        assert_eq!(
            run.event(Input::Happened(Happened::StdoutClosed)),
            vec![Action::CloseStdin]
        );
        let seen = run.run_deadlines(|m| matches!(m.stage, Stage::Terminating(_)));
        assert_eq!(seen, vec![(CLOSE_WAIT, Action::Signal(Sig::TERM))]);
    }

    #[test]
    fn readers_that_never_close_are_given_up_on_after_the_exit() {
        let mut run = Run::new(true);
        run.line(&result_line());
        run.at(Duration::from_secs(1))
            .event(Input::Happened(Happened::Exited(ExitInfo::default())));
        assert!(!run.m.is_done(run.t), "the pipes are still open");
        assert!(run.m.is_done(run.t + READER_WAIT));
    }
}
