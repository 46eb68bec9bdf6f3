//! How a Run's processes are started and found again: the Executor seam, the Run's marker, and the cleanup of what a Run leaves behind (the syscalls are in `sys`).

use std::io::{self, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Stdio};

use crate::config::ExecutorKind;
use crate::driver::Invocation;
use crate::model::ExitInfo;
use crate::sys::{self, Sig};

/// The environment marker every descendant of a Run inherits, so that survivors can be
/// found by identity even in another session.
pub(crate) const RUN_ID_VAR: &str = "OWL_RUN_ID";
/// Run ids are per database: the state dir beside the id makes the marker unique on a
/// machine where several owls (users, state dirs) run.
pub(crate) const STATE_DIR_VAR: &str = "OWL_STATE_DIR";

/// What marks every process of one Run: `OWL_RUN_ID` and `OWL_STATE_DIR`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunMarker {
    pub(crate) run_id: String,
    pub(crate) state_dir: std::path::PathBuf,
}

impl RunMarker {
    /// The marker as it stands in an environment: `NAME=value`, one entry per variable.
    fn needles(&self) -> Vec<Vec<u8>> {
        use std::os::unix::ffi::OsStrExt;
        [
            (RUN_ID_VAR, self.run_id.as_bytes()),
            (STATE_DIR_VAR, self.state_dir.as_os_str().as_bytes()),
        ]
        .into_iter()
        .map(|(k, v)| [k.as_bytes(), b"=", v].concat())
        .collect()
    }
}

/// Who supervises a Run, recorded with it: a later tick (or `status`) tells from it whether
/// that supervisor still lives — the same pid, started at the same time, in the same boot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Supervisor {
    pub(crate) pid: Option<i64>,
    pub(crate) start_time: Option<i64>,
    pub(crate) boot_id: Option<String>,
}

/// A Run whose supervisor died, as recorded: what a later tick needs to kill what is left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LostProcesses {
    pub(crate) run_id: i64,
    /// The agent's pid and start time, when they were recorded.
    pub(crate) agent: Option<(i32, i64)>,
    /// The boot the Run ran in.
    pub(crate) boot_id: Option<String>,
}

/// How an Executor names the agent it started: recorded with the Run (`pid`,
/// `child_start_time`), all that a later tick or `owl status` needs, with the same
/// Executor, to stop the agent or tell that it lives. A local process's id and the time it
/// started, so that a reused pid is never taken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HandleId {
    pub(crate) pid: i32,
    pub(crate) start_time: Option<i64>,
}

impl std::fmt::Display for HandleId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {}", self.pid)
    }
}

/// An agent as its Executor started it, all the supervision loop holds of it: its three
/// streams, its end, and its id, by which the Executor stops it. Nothing here is a
/// process: a test's scripted agent, a container or a remote machine is one as well.
pub(crate) struct RunHandle {
    pub(crate) id: HandleId,
    pub(crate) stdin: Box<dyn Write + Send>,
    pub(crate) stdout: Box<dyn Read + Send>,
    pub(crate) stderr: Box<dyn Read + Send>,
    /// Waits for the agent's exit (on a thread of its own: it blocks).
    pub(crate) exit: Box<dyn FnOnce() -> ExitInfo + Send>,
}

impl RunHandle {
    /// The handle of a local child with piped stdio.
    pub(crate) fn of_child(mut child: Child) -> RunHandle {
        let pid = child.id() as i32;
        let piped = "the agent's stdio is piped";
        RunHandle {
            id: HandleId {
                pid,
                start_time: sys::stat(pid).map(|s| s.start_time),
            },
            stdin: Box::new(child.stdin.take().expect(piped)),
            stdout: Box::new(child.stdout.take().expect(piped)),
            stderr: Box::new(child.stderr.take().expect(piped)),
            exit: Box::new(move || {
                use std::os::unix::process::ExitStatusExt;
                match child.wait() {
                    Ok(status) => ExitInfo {
                        code: status.code(),
                        signal: status.signal(),
                    },
                    Err(_) => ExitInfo::default(),
                }
            }),
        }
    }
}

/// A short command an Executor runs to its end or its deadline: the agent CLI's version or
/// login answer, asked outside a Run.
#[derive(Debug)]
pub(crate) struct Oneshot<'a> {
    pub(crate) invocation: &'a Invocation,
    /// Its cwd; when `None`, the state dir (or `/` before there is one): never the
    /// directory owl was started in.
    pub(crate) cwd: Option<&'a Path>,
    /// Written whole to its stdin, on a thread; `None`: stdin is `/dev/null`.
    pub(crate) input: Option<Vec<u8>>,
    /// When it is killed, with what it started in its group.
    pub(crate) timeout: std::time::Duration,
    /// The most of each output stream kept.
    pub(crate) cap: usize,
}

/// Where a Run works: its working copy (the agent's cwd) and the Run's own files (what its
/// Driver writes for it, what its Executor keeps of it).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunPlace<'a> {
    pub(crate) workspace: &'a Path,
    pub(crate) files: &'a Path,
    /// The hosts (`host` or `host:port`) the Run may reach where its network is confined
    /// (the sandbox): its Account's endpoints and `sandbox.allowHosts`.
    pub(crate) hosts: &'a [String],
}

/// The whole mechanism of running an agent (ADR-0005): starting it, telling its processes
/// apart, signalling them and cleaning up after them, now or after a crash. A local child
/// process today; a sandbox implements this one trait and touches nothing else.
pub(crate) trait Executor: Send + Sync {
    /// Which Executor this is, as a Run's row records it: recovery and `status` ask the
    /// same one again.
    fn kind(&self) -> ExecutorKind;
    /// Readies this process to supervise Runs (the local one becomes a child subreaper,
    /// so a Run's orphans are reparented to owl instead of init).
    fn prepare(&self) -> io::Result<()>;
    /// This supervisor, as it is recorded with a Run.
    fn supervisor(&self) -> Supervisor;
    /// Whether a Run's recorded supervisor is alive (and is not this process).
    fn supervisor_alive(&self, supervisor: &Supervisor) -> bool;
    /// What a look at this machine shows missing, cheaply and without running anything
    /// (a sandbox's bubblewrap not found).
    fn missing(&self) -> Option<String> {
        None
    }
    /// Whether Runs can start here now (a sandbox's bubblewrap works); why not.
    fn ready(&self) -> Result<(), super::sandbox::Unusable> {
        Ok(())
    }
    /// Whether the agent must work in a clone of its own rather than a worktree of the
    /// user's repository (it could write that repository's `.git` through a worktree's).
    fn own_clone(&self) -> bool {
        false
    }
    /// Starts the agent in its place with its stdio piped to owl, leader of its own
    /// process group.
    fn spawn(&self, inv: &Invocation, place: &RunPlace, run_id: i64) -> io::Result<RunHandle>;
    /// Starts the agent CLI for a talk that is not a Run (the zero-token probe), in `cwd`,
    /// stdio piped, leader of its own group; it is stopped with [`Executor::signal`].
    fn start(&self, inv: &Invocation, cwd: &Path) -> io::Result<RunHandle>;
    /// Runs a short command of the agent CLI (its version, its login) to its end or its
    /// deadline, where this Executor runs the CLI's checks.
    fn oneshot(&self, call: Oneshot<'_>) -> Result<crate::oneshot::Ended, crate::oneshot::Failed>;
    /// The agent's scheduler state (`D`: uninterruptible), for the record.
    fn state(&self, agent: &HandleId) -> Option<char>;
    /// Sends a signal to the agent and what it started in its group.
    fn signal(&self, agent: &HandleId, signal: Sig);
    /// Kills and reaps what the Run left once its agent exited; how many there were.
    fn kill_leftovers(&self, agent: &HandleId) -> usize;
    /// What went through the Run's network where this Executor confines it, said once the
    /// Run is over (and the way out closed); `None` where it does not.
    fn network(&self) -> Option<String> {
        None
    }
    /// Kills what survives of a Run whose supervisor died; how many there were.
    fn kill_lost(&self, lost: &LostProcesses) -> usize;
}

/// The marker of a CLI started for a talk that is not a Run: no Run's id, so that no
/// recovery takes it for a Run's survivor.
const PROBE_MARK: &str = "probe";

/// How long the recovery waits for a lost Run's processes to die of SIGKILL.
const LOST_GONE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs the agent as a direct child of owl.
pub(crate) struct LocalExecutor {
    pub(crate) state_dir: std::path::PathBuf,
}

impl LocalExecutor {
    fn marker(&self, run_id: i64) -> RunMarker {
        RunMarker {
            run_id: run_id.to_string(),
            state_dir: self.state_dir.clone(),
        }
    }
}

impl Executor for LocalExecutor {
    fn kind(&self) -> ExecutorKind {
        ExecutorKind::Local
    }

    fn prepare(&self) -> io::Result<()> {
        sys::become_subreaper()
    }

    fn supervisor(&self) -> Supervisor {
        let pid = sys::own_pid();
        Supervisor {
            pid: Some(pid.into()),
            start_time: sys::stat(pid).map(|s| s.start_time),
            boot_id: sys::boot_id(),
        }
    }

    fn supervisor_alive(&self, supervisor: &Supervisor) -> bool {
        let (Some(pid), Some(start)) = (supervisor.pid, supervisor.start_time) else {
            return false;
        };
        if pid == i64::from(sys::own_pid()) || supervisor.boot_id != sys::boot_id() {
            return false;
        }
        i32::try_from(pid)
            .ok()
            .and_then(sys::stat)
            .is_some_and(|s| s.start_time == start && s.is_alive())
    }

    fn spawn(&self, inv: &Invocation, place: &RunPlace, run_id: i64) -> io::Result<RunHandle> {
        spawn(inv, place.workspace, &self.marker(run_id)).map(RunHandle::of_child)
    }

    fn start(&self, inv: &Invocation, cwd: &Path) -> io::Result<RunHandle> {
        let marker = RunMarker {
            run_id: PROBE_MARK.into(),
            state_dir: self.state_dir.clone(),
        };
        spawn(inv, cwd, &marker).map(RunHandle::of_child)
    }

    fn oneshot(&self, call: Oneshot<'_>) -> Result<crate::oneshot::Ended, crate::oneshot::Failed> {
        let mut command = call.invocation.command();
        // A directory owl chose, never the caller's: the state dir once there is one.
        match call.cwd {
            Some(cwd) => {
                command.current_dir(cwd);
            }
            None if self.state_dir.is_dir() => {
                command.current_dir(&self.state_dir);
            }
            None => {}
        }
        crate::oneshot::run(command, call.input, call.timeout, call.cap)
    }

    fn state(&self, agent: &HandleId) -> Option<char> {
        sys::stat(agent.pid).map(|s| s.state)
    }

    fn signal(&self, agent: &HandleId, signal: Sig) {
        signal_group(agent.pid, signal);
    }

    fn kill_leftovers(&self, agent: &HandleId) -> usize {
        // Whatever the agent left behind, in its group or reparented to us (we are a
        // subreaper), is below us now: count it, kill it, reap it.
        let mut killed = kill_descendants();
        // The kernel's children lists can miss a process while owl's threads come and go
        // (proc(5): they hold only for stopped children). One still in the agent's group
        // is found by a scan, then, and counted with the rest.
        if sys::group_exists(agent.pid) {
            killed += kill_until_none(|| sys::group_members(agent.pid));
        }
        signal_group(agent.pid, Sig::KILL);
        killed
    }

    fn kill_lost(&self, lost: &LostProcesses) -> usize {
        if lost.boot_id.is_none() || lost.boot_id != sys::boot_id() {
            // A reboot since: nothing of that Run can be alive.
            return 0;
        }
        let mut victims = processes_with_marker(&self.marker(lost.run_id));
        if let Some((pid, start)) = lost.agent {
            // Held by a pidfd first, then recognised: the pid cannot be reused in between.
            if let Some(agent) = sys::ProcessHandle::open(pid) {
                if agent
                    .stat()
                    .is_some_and(|s| s.start_time == start && s.is_alive())
                {
                    if let Err(e) = agent.signal(Sig::KILL) {
                        tracing::warn!(pid, "could not kill a lost Run's agent: {e}");
                    }
                    signal_group(pid, Sig::KILL);
                    if !victims.contains(&pid) {
                        victims.push(pid);
                    }
                }
            }
        }
        let needles = self.marker(lost.run_id).needles();
        let mut killed = Vec::new();
        for pid in &victims {
            // Held, then found to carry the marker still: that process, not a reused pid.
            if let Some(p) = sys::ProcessHandle::open(*pid) {
                if sys::environ_has_all(*pid, &needles) || Some(*pid) == lost.agent.map(|a| a.0) {
                    let _ = p.signal(Sig::KILL);
                    killed.push(p);
                }
            }
        }
        // Gone before anything touches what they worked on: a git still dying could write
        // its lock again after the recovery cleared it.
        let deadline = std::time::Instant::now() + LOST_GONE_WAIT;
        for p in &killed {
            if !p.wait_gone(deadline.saturating_duration_since(std::time::Instant::now())) {
                tracing::warn!("a lost Run's process outlived SIGKILL for {LOST_GONE_WAIT:?}");
                break;
            }
        }
        victims.len()
    }
}

/// Sends `signal` to the process group `pgid`; a failure is warned of.
/// Kills the agent's process group, as every Executor's SIGKILL does: what a thread beside
/// the loop can do without the Executor.
pub(crate) fn kill_group(agent: &HandleId) {
    signal_group(agent.pid, Sig::KILL);
}

fn signal_group(pgid: i32, signal: Sig) {
    if let Err(e) = sys::signal_group(pgid, signal) {
        tracing::warn!(pgid, "could not signal the agent's group: {e}");
    }
}

/// Starts a command as owl's direct child, in its own process group, with piped stdio
/// and the Run's marker in its environment.
pub(crate) fn spawn(inv: &Invocation, cwd: &Path, marker: &RunMarker) -> io::Result<Child> {
    inv.write_files()?;
    // The Run's marker goes on after the Invocation's environment: no `env:` hides it.
    let mut cmd = inv.command();
    cmd.current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env(RUN_ID_VAR, &marker.run_id)
        .env(STATE_DIR_VAR, &marker.state_dir)
        // Its own process group, so one signal reaches the agent and what it started
        // in that group (not its Bash tool, which makes its own session: see the subreaper).
        .process_group(0);
    sys::die_with_parent(&mut cmd);
    cmd.spawn()
}

/// Kills every process below owl and reaps it; returns how many there were.
///
/// As a subreaper owl inherits every orphan of a Run, so after the agent is gone each
/// remaining descendant is a leftover: a tool process, a forked server, a grandchild
/// holding a pipe.
pub(crate) fn kill_descendants() -> usize {
    let me = sys::own_pid();
    // A process already dying — a zombie, or one whose memory is gone (its command line
    // reads empty) — is reaped, not counted as something the Run left alive: a sandbox's
    // bubblewrap exits a moment after the process owl waited for.
    kill_until_none(|| {
        sys::descendants_of(me)
            .into_iter()
            .filter(|pid| sys::stat(*pid).is_some_and(|s| s.state != 'Z'))
            .filter(|pid| !sys::cmdline(*pid).is_empty())
            .collect()
    })
}

/// Kills every process `find` names, again and again until it names none (killing a
/// process reparents its children, and one just sent SIGKILL may not be dead yet on the
/// next pass: each is counted once), reaping what was ours; returns how many there were.
pub(crate) fn kill_until_none(find: impl Fn() -> Vec<i32>) -> usize {
    let mut killed = std::collections::BTreeSet::new();
    for _ in 0..32 {
        let found = find();
        if found.is_empty() {
            break;
        }
        for pid in found {
            if killed.insert(pid) {
                let name = sys::cmdline(pid);
                tracing::info!(pid, "killing a process the Run left behind: {name}");
            }
            if let Err(e) = sys::signal_pid(pid, Sig::KILL) {
                tracing::warn!(pid, "could not kill a leftover: {e}");
            }
        }
        sys::reap_children();
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    sys::reap_children();
    killed.len()
}

/// Every live process whose environment carries the Run's marker: the agent and
/// everything it started, even in another session, even reparented to init.
pub(crate) fn processes_with_marker(marker: &RunMarker) -> Vec<i32> {
    let needles = marker.needles();
    let me = sys::own_pid();
    sys::all_pids()
        .into_iter()
        .filter(|pid| *pid != me)
        .filter(|pid| sys::stat(*pid).is_some_and(|s| s.is_alive()))
        .filter(|pid| sys::environ_has_all(*pid, &needles))
        .collect()
}
