//! One Run from spawn to reaped: reader threads, a waiter and a stdin writer feed one event loop, which owns every decision and the stop sequence.

pub(crate) mod check;
mod checks;
pub(crate) mod machine;
mod netproxy;
pub(crate) mod probe;
pub(crate) mod process;
pub(crate) mod reader;
pub(crate) mod sandbox;
mod side;

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use signal_hook::iterator::Signals;

use crate::sys::Sig;
use crate::wait::Waited;

use crate::config::{Account, Config, ExecutorKind};
use crate::driver::{AgentEvent, Driver, Interrupt, Invocation, UsagePoll};
use crate::model::StopCause;
pub(crate) use crate::outcome::RunReport;
pub(crate) use checks::{check_agent, check_login};
use machine::{Action, Happened, Input, InterruptBy, Limits, Machine, OwlSignal};
pub(crate) use process::{
    kill_descendants, Executor, HandleId, LocalExecutor, Oneshot, RunHandle, RunPlace,
};

/// What the threads of a Run tell the event loop. They only report; the loop decides.
#[derive(Debug)]
pub(crate) enum Event {
    /// A stdout line the Driver understood.
    Line(Box<AgentEvent>),
    /// A stdout line logged but not understood (garbage, too long, unknown shape).
    Skipped(String),
    /// The `Line`s and `Skipped`s of one read from stdout, in order.
    Batch(Vec<Event>),
    /// Learned beside stdout: a line of the agent's session log, a probe's answer.
    Side(Box<AgentEvent>),
    /// Everything else, as the machine takes it.
    Happened(Happened),
    /// A stop decided beside the loop, which may be blocked (the lease's clock ran out).
    Stop(StopCause),
}

/// Everything needed to supervise one Run.
pub(crate) struct RunSpec<'a> {
    pub(crate) driver: Arc<dyn Driver>,
    /// The agent CLI and the Account, for what the Run learns beside it (its usage log, a
    /// probe).
    pub(crate) command: &'a Path,
    pub(crate) account: &'a Account,
    pub(crate) invocation: &'a Invocation,
    /// The working copy (the agent's cwd) and the Run's own files.
    pub(crate) place: RunPlace<'a>,
    pub(crate) run_id: i64,
    pub(crate) prompt: &'a str,
    pub(crate) stdout_log: File,
    pub(crate) stderr_log: File,
    pub(crate) max_run_time: Duration,
    pub(crate) stall_timeout: Duration,
    pub(crate) grace_window: Duration,
    /// How often to ask the agent for utilization; `None` when its Driver cannot answer.
    pub(crate) usage_poll_interval: Option<Duration>,
    /// Values (the Account's credentials) hidden from everything kept of the agent's stderr.
    pub(crate) secrets: Vec<String>,
    /// Stop signals owl received since the Run was picked, before this Run's own handlers.
    pub(crate) latch: StopLatch,
}

/// The stop signals (SIGTERM, SIGINT, SIGHUP) owl received since it was installed: taken
/// from the pick on, so that a signal at any moment before the agent is supervised is kept
/// (not owl's death, which would leave the Run without an outcome) and ends the Run at once.
#[derive(Debug, Clone, Default)]
pub(crate) struct StopLatch(Arc<std::sync::atomic::AtomicUsize>);

/// The latch installed in this process, if any: what a wait deep below a command (a probe's
/// answer) asks so that a stop signal ends it at once.
static INSTALLED: std::sync::OnceLock<StopLatch> = std::sync::OnceLock::new();

impl StopLatch {
    /// Catches the stop signals from now on (one inherited as ignored, as a script's
    /// background job has SIGINT, included); each only sets the latch. Installed once per
    /// process: a second call returns the first latch.
    pub(crate) fn install() -> io::Result<StopLatch> {
        if let Some(latch) = INSTALLED.get() {
            return Ok(latch.clone());
        }
        let latch = StopLatch::default();
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            signal_hook::flag::register_usize(sig, latch.0.clone(), sig as usize)?;
        }
        Ok(INSTALLED.get_or_init(|| latch).clone())
    }

    /// The stop signal this process received, if its latch is installed and one came.
    pub(crate) fn received() -> Option<&'static str> {
        INSTALLED.get().and_then(StopLatch::fired)
    }

    /// The signal received, if one was.
    pub(crate) fn fired(&self) -> Option<&'static str> {
        match self.0.load(std::sync::atomic::Ordering::SeqCst) as i32 {
            0 => None,
            libc::SIGINT => Some("SIGINT"),
            libc::SIGHUP => Some("SIGHUP"),
            _ => Some("SIGTERM"),
        }
    }
}

/// The step that started the Run, told what happens as it happens.
pub(crate) trait Observer {
    /// The agent is running, as its Executor names it.
    fn spawned(&mut self, agent: &HandleId);
    /// A line was understood; returning a cause stops the Run (e.g. a ceiling crossed).
    fn event(&mut self, event: &AgentEvent, report: &RunReport) -> Option<StopCause>;
    /// Called about twice a second; returning a cause stops the Run (e.g. a cancel).
    fn heartbeat(&mut self, report: &RunReport) -> Option<StopCause>;
    /// The Run's lease as this machine's clock keeps it, when it holds one: the agent is
    /// killed when it runs out, whatever the loop is blocked on.
    fn lease_clock(&self) -> Option<Arc<LeaseClock>> {
        None
    }
}

/// A Run's lease on a shared store as this machine's clock keeps it: when it was last
/// renewed, and how long after that the agent may live (the lease's length less the
/// margin its supervisor keeps to stop it). Renewed by the loop; kept by a thread of its
/// own, so that a renewal blocked on a silent store cannot keep the agent alive past it.
#[derive(Debug)]
pub(crate) struct LeaseClock {
    renewed: std::sync::Mutex<Instant>,
    kill_after: Duration,
    length: Duration,
}

impl LeaseClock {
    /// A lease of `length`, renewed at `renewed`, whose agent must be dead `kill_after` a
    /// renewal.
    pub(crate) fn new(renewed: Instant, kill_after: Duration, length: Duration) -> LeaseClock {
        LeaseClock {
            renewed: std::sync::Mutex::new(renewed),
            kill_after,
            length,
        }
    }

    /// The lease was renewed by a statement sent at `at`.
    pub(crate) fn renewed_at(&self, at: Instant) {
        *self.renewed.lock().unwrap_or_else(|e| e.into_inner()) = at;
    }

    /// When the lease was last renewed.
    pub(crate) fn renewed(&self) -> Instant {
        *self.renewed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// When the agent must be dead unless the lease is renewed before.
    fn due(&self) -> Instant {
        self.renewed() + self.kill_after
    }

    /// The stop, in words, once the clock ran out.
    fn ran_out(&self) -> StopCause {
        StopCause::LeaseLost(format!(
            "not renewed for {} s of its {} s (the store did not answer): stopped by this \
             machine's clock before another machine may take the Account",
            self.renewed().elapsed().as_secs(),
            self.length.as_secs()
        ))
    }
}

/// The Executor of an Account's Runs: the one place that knows which there are.
pub(crate) fn executor_of(account: &Account, config: &Config) -> Box<dyn Executor> {
    // Besides the Run's own place: the CLI's own files, and what the user opened.
    let writable = account
        .credential_store
        .iter()
        .chain(&config.sandbox.writable)
        .cloned()
        .collect();
    executor(account.executor, writable, config)
}

/// The Executor a Run's row names, to ask whether its supervisor lives and to kill what
/// survives of it (which needs nothing of its Account).
pub(crate) fn executor_of_run(kind: ExecutorKind, config: &Config) -> Box<dyn Executor> {
    executor(kind, config.sandbox.writable.clone(), config)
}

fn executor(
    kind: ExecutorKind,
    writable: Vec<std::path::PathBuf>,
    config: &Config,
) -> Box<dyn Executor> {
    let local = LocalExecutor {
        state_dir: config.state_dir.clone(),
    };
    match kind {
        ExecutorKind::Local => Box::new(local),
        ExecutorKind::Sandbox => Box::new(sandbox::SandboxExecutor::new(
            local,
            config.sandbox.command.clone(),
            writable,
        )),
    }
}

/// Runs the agent to its end and returns what happened. An error means it never started.
pub(crate) fn supervise(
    spec: RunSpec,
    executor: &dyn Executor,
    observer: &mut dyn Observer,
) -> io::Result<RunReport> {
    let (tx, rx) = mpsc::sync_channel::<Event>(1024);
    // systemd stopping the unit, a person pressing Ctrl-C: the Run is stopped and recorded,
    // not abandoned. Installed before the spawn, so no signal finds the agent unguarded;
    // the handlers stay installed after the Run, so a late signal cannot cut the
    // recording short (it queues in the closed iterator and is dropped).
    let signals = Signals::new([libc::SIGTERM, libc::SIGINT, libc::SIGHUP])?;
    if let Some(sig) = spec.latch.fired() {
        // Stopped before the agent was started: nothing to stop, nothing spent.
        return Ok(RunReport::stopped_before_start(sig));
    }
    let signal_handle = signals.handle();
    forward_signals(signals, tx.clone());
    let agent = executor
        .spawn(spec.invocation, &spec.place, spec.run_id)
        .inspect_err(|_| signal_handle.close())?;
    let id = agent.id;
    observer.spawned(&id);
    // The agent dies with owl if owl gives up on a silent store, and when its lease's
    // clock runs out, whatever the loop is waiting on.
    crate::watchdog::guard_agent(Some(id.pid));
    let lease_keeper = observer
        .lease_clock()
        .map(|clock| keep_lease_clock(clock, id, tx.clone()));
    let logs = (spec.stdout_log, spec.stderr_log);
    let stdin = start_threads(agent, logs, spec.driver.clone(), &spec.secrets, &tx);
    // What is learned beside stdout (a usage log, a probe) comes in on this sender.
    let side_tx = tx;

    let (stdin, interrupt, poll) =
        prompt_and_negotiate(spec.driver.as_ref(), spec.account, spec.prompt, stdin);
    let mut machine = Machine::new(
        limits_of(
            (spec.max_run_time, spec.stall_timeout, spec.grace_window),
            spec.usage_poll_interval,
            interrupt.as_ref(),
            poll,
        ),
        id,
        Instant::now(),
    );
    if stdin.is_none() {
        machine.on_event(Input::Happened(Happened::StdinClosed), Instant::now());
    }
    let mut plumbing = Plumbing {
        driver: spec.driver.as_ref(),
        executor,
        agent: id,
        stdin,
        interrupt,
        probe: (poll == UsagePoll::Probe).then(|| {
            side::SideProbe::new(
                spec.driver.clone(),
                spec.command,
                spec.account,
                spec.place.workspace,
            )
        }),
        tx: side_tx.clone(),
    };
    // The agent's session log is followed from the moment its session is named.
    let mut follower = Follower::new(side_tx.clone());
    drive(
        &rx,
        &mut machine,
        &mut plumbing,
        &mut follower,
        observer,
        spec.account,
    );
    signal_handle.close();
    drop(lease_keeper);
    crate::watchdog::guard_agent(None);
    if let Some(probe) = plumbing.probe.as_mut() {
        probe.cancel(executor);
    }
    drain_follower(follower, &rx, &mut machine, observer);
    Ok(machine.into_report())
}

/// The agent's streams and exit each on a thread of its own, every one reporting to `tx`:
/// stdout to its log and the Driver, stderr to its log (the Account's secrets hidden), the
/// exit waited for. Returns the sender that writes the agent's stdin.
fn start_threads(
    agent: RunHandle,
    (stdout_log, stderr_log): (File, File),
    driver: Arc<dyn Driver>,
    secrets: &[String],
    tx: &SyncSender<Event>,
) -> Sender<Vec<u8>> {
    let RunHandle {
        stdin,
        stdout,
        stderr,
        exit,
        ..
    } = agent;
    spawn_thread("owl-stdout", {
        let tx = tx.clone();
        move || reader::read_stdout(stdout, stdout_log, driver, tx)
    });
    spawn_thread("owl-stderr", {
        let tx = tx.clone();
        let secrets = secrets.to_vec();
        move || reader::read_stderr(stderr, stderr_log, &secrets, tx)
    });
    let tx = tx.clone();
    spawn_thread("owl-waiter", move || {
        let _ = tx.send(Event::Happened(Happened::Exited(exit())));
    });
    spawn_stdin_writer(stdin)
}

/// The event loop: each event to the machine (a batch's lines one by one, as if each had
/// come alone), each action it returns carried out, until the machine is done.
fn drive(
    rx: &Receiver<Event>,
    machine: &mut Machine,
    plumbing: &mut Plumbing,
    follower: &mut Follower,
    observer: &mut dyn Observer,
    account: &Account,
) {
    // Lines of a batch not yet handled: the machine takes them one by one, as if each had
    // come alone.
    let mut queued: std::collections::VecDeque<Event> = std::collections::VecDeque::new();
    loop {
        let now = Instant::now();
        if queued.is_empty() && machine.is_done(now) {
            break;
        }
        let received = match queued.pop_front() {
            Some(event) => Waited::Got(event),
            None => crate::wait::until(rx, machine.next_deadline(now), None),
        };
        let now = Instant::now();
        let actions = match received {
            Waited::Got(Event::Batch(events)) => {
                queued.extend(events);
                continue;
            }
            Waited::Got(Event::Line(ev)) => {
                follower.start_when_named(&ev, plumbing.driver, account);
                let actions = machine.on_event(Input::Line(&ev), now);
                observed(actions, &ev, machine, observer, now)
            }
            Waited::Got(Event::Side(ev)) => {
                let actions = machine.on_event(Input::Side(&ev), now);
                observed(actions, &ev, machine, observer, now)
            }
            Waited::Got(Event::Skipped(why)) => {
                tracing::debug!(agent = %plumbing.agent, "skipped a stdout line: {why}");
                machine.on_event(Input::Skipped, now)
            }
            Waited::Got(Event::Happened(what)) => machine.on_event(Input::Happened(what), now),
            Waited::Got(Event::Stop(cause)) => machine.on_event(Input::Stop(cause), now),
            Waited::TimedOut | Waited::Stopped => Vec::new(),
            Waited::Closed => break,
        };
        plumbing.carry_out(actions, machine, observer);
        let due = machine.on_deadline(Instant::now());
        plumbing.carry_out(due, machine, observer);
    }
}

/// Writes the prompt, and settles how this Run is interrupted and polled: a CLI that takes
/// its prompt in argv gets an empty stdin, closed at once (it would read a pipe left open
/// as more prompt, and wait for it). The stdin sender is `None` once closed.
fn prompt_and_negotiate(
    driver: &dyn Driver,
    account: &Account,
    prompt: &str,
    stdin: Sender<Vec<u8>>,
) -> (Option<Sender<Vec<u8>>>, Option<Interrupt>, UsagePoll) {
    let prompt = driver.prompt_input(prompt);
    let stdin = Some(stdin).filter(|_| !prompt.is_empty());
    send(&stdin, prompt);
    let (interrupt, poll) = machine::negotiate(
        crate::driver::offers_probe(driver, account),
        driver.interrupt("owl-interrupt"),
        driver.usage_poll(),
        stdin.is_some(),
    );
    (stdin, interrupt, poll)
}

/// The session log's last lines, read once more after the agent exited, still count.
fn drain_follower(
    follower: Follower,
    rx: &Receiver<Event>,
    machine: &mut Machine,
    observer: &mut dyn Observer,
) {
    if follower.finish() {
        while let Ok(event) = rx.try_recv() {
            if let Event::Side(ev) = event {
                machine.on_event(Input::Side(&ev), Instant::now());
                observer.event(&ev, machine.report());
            }
        }
    }
}

/// The machine's actions on an event, and the stop the observer asks for on it.
fn observed(
    mut actions: Vec<Action>,
    event: &AgentEvent,
    machine: &mut Machine,
    observer: &mut dyn Observer,
    now: Instant,
) -> Vec<Action> {
    if let Some(cause) = observer.event(event, machine.report()) {
        actions.extend(machine.on_event(Input::Stop(cause), now));
    }
    actions
}

/// Keeps the lease's clock on a thread of its own until the returned sender is dropped:
/// when it runs out, the loop is told why and the agent's group is killed at once (the loop
/// may be blocked on the store that did not renew it).
fn keep_lease_clock(clock: Arc<LeaseClock>, agent: HandleId, tx: SyncSender<Event>) -> Sender<()> {
    let (done, over) = mpsc::channel::<()>();
    spawn_thread("owl-lease", move || loop {
        let left = clock.due().saturating_duration_since(Instant::now());
        if left.is_zero() {
            // Told first: the loop sees the cause before the exit the kill brings.
            let _ = tx.try_send(Event::Stop(clock.ran_out()));
            process::kill_group(&agent);
            return;
        }
        let wake = Instant::now() + left.min(Duration::from_millis(500));
        match crate::wait::until(&over, wake, None) {
            Waited::TimedOut | Waited::Stopped => {}
            Waited::Got(()) | Waited::Closed => return,
        }
    });
    done
}

/// Forwards owl's stop signals to the loop as events, on a thread of their own.
fn forward_signals(mut signals: Signals, tx: SyncSender<Event>) {
    spawn_thread("owl-signals", move || {
        for sig in signals.forever() {
            let sig = match sig {
                libc::SIGINT => OwlSignal::Int,
                libc::SIGHUP => OwlSignal::Hup,
                _ => OwlSignal::Term,
            };
            if tx.send(Event::Happened(Happened::Signal(sig))).is_err() {
                break;
            }
        }
    });
}

/// The machine's limits for this Run, with the interrupt and the poll negotiated.
fn limits_of(
    (max_run_time, stall_timeout, grace): (Duration, Duration, Duration),
    usage_poll_interval: Option<Duration>,
    interrupt: Option<&Interrupt>,
    poll: UsagePoll,
) -> Limits {
    Limits {
        max_run_time,
        stall_timeout,
        grace,
        usage_poll_interval: usage_poll_interval.filter(|_| poll != UsagePoll::None),
        poll_from_start: poll == UsagePoll::Probe,
        interrupt: interrupt.map(|how| match how {
            Interrupt::Stdin(_) => InterruptBy::Stdin,
            Interrupt::Sigint => InterruptBy::Signal,
        }),
    }
}

/// The agent's session log, followed on a thread from the moment its session is named.
struct Follower {
    tx: SyncSender<Event>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Follower {
    fn new(tx: SyncSender<Event>) -> Follower {
        Follower {
            tx,
            stop: Arc::default(),
            thread: None,
        }
    }

    /// Starts following once the agent names its session, if its Driver keeps a log.
    fn start_when_named(&mut self, event: &AgentEvent, driver: &dyn Driver, account: &Account) {
        let AgentEvent::Init {
            session_id: Some(id),
            ..
        } = event
        else {
            return;
        };
        if self.thread.is_some() {
            return;
        }
        if let Some(log) = driver.session_log(account, id) {
            let (tx, stop) = (self.tx.clone(), self.stop.clone());
            self.thread = thread::Builder::new()
                .name("owl-session-log".into())
                .spawn(move || side::follow(log, tx, stop))
                .map_err(|e| tracing::warn!("following the session log: {e}"))
                .ok();
        }
    }

    /// Reads the log once more and ends; whether it was followed at all.
    fn finish(self) -> bool {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        match self.thread {
            Some(thread) => {
                let _ = thread.join();
                true
            }
            None => false,
        }
    }
}

/// The thin part around the [`Machine`]: carries its actions out on the real agent.
struct Plumbing<'a> {
    driver: &'a dyn Driver,
    executor: &'a dyn Executor,
    agent: HandleId,
    /// The agent's stdin; `None` once closed.
    stdin: Option<Sender<Vec<u8>>>,
    interrupt: Option<Interrupt>,
    /// The probe run beside the agent at each poll, when that is how it is asked.
    probe: Option<side::SideProbe>,
    /// Where the probe's answers go.
    tx: SyncSender<Event>,
}

impl Plumbing<'_> {
    fn carry_out(
        &mut self,
        actions: Vec<Action>,
        machine: &mut Machine,
        observer: &mut dyn Observer,
    ) {
        let mut actions = std::collections::VecDeque::from(actions);
        while let Some(action) = actions.pop_front() {
            match action {
                Action::Interrupt => match &self.interrupt {
                    Some(Interrupt::Stdin(bytes)) => send(&self.stdin, bytes.clone()),
                    Some(Interrupt::Sigint) => self.executor.signal(&self.agent, Sig::INT),
                    None => {}
                },
                Action::AskUsage(n) => match self.probe.as_mut() {
                    Some(probe) => probe.ask(self.executor, &self.tx),
                    None => {
                        let id = format!("owl-usage-{n}");
                        if let Some(bytes) = self.driver.usage_request_input(&id) {
                            send(&self.stdin, bytes);
                        }
                    }
                },
                Action::CloseStdin => self.stdin = None,
                Action::Signal(sig) => self.executor.signal(&self.agent, sig),
                Action::KillLeftovers => {
                    if let Some(probe) = self.probe.as_mut() {
                        probe.cancel(self.executor);
                    }
                    machine.leftovers_killed(self.executor.kill_leftovers(&self.agent));
                    machine.network(self.executor.network());
                }
                Action::Heartbeat => {
                    if let Some(cause) = observer.heartbeat(machine.report()) {
                        actions.extend(machine.on_event(Input::Stop(cause), Instant::now()));
                    }
                }
                Action::GiveUp => machine.gave_up(self.executor.state(&self.agent)),
            }
        }
    }
}

fn spawn_thread(name: &str, f: impl FnOnce() + Send + 'static) {
    thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .expect("spawning a supervisor thread");
}

/// The agent's stdin lives on its own thread: a child that stops reading must never
/// block the loop. Dropping the returned sender closes stdin.
fn spawn_stdin_writer(mut stdin: Box<dyn Write + Send>) -> Sender<Vec<u8>> {
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
mod tests;
