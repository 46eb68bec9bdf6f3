//! Every syscall owl makes about processes: spawning into a process group, signals, the subreaper, /proc.

use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Stdio};

use crate::driver::Invocation;

/// The environment marker every descendant of a Run inherits, so that survivors can be
/// found by identity even in another session.
pub const RUN_ID_VAR: &str = "OWL_RUN_ID";
/// Run ids are per database: the state dir beside the id makes the marker unique on a
/// machine where several owls (users, state dirs) run.
pub const STATE_DIR_VAR: &str = "OWL_STATE_DIR";

/// What marks every process of one Run: `OWL_RUN_ID` and `OWL_STATE_DIR`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunMarker {
    pub run_id: String,
    pub state_dir: std::path::PathBuf,
}

impl RunMarker {
    fn vars(&self) -> [(String, Vec<u8>); 2] {
        use std::os::unix::ffi::OsStrExt;
        [
            (RUN_ID_VAR.to_string(), self.run_id.as_bytes().to_vec()),
            (
                STATE_DIR_VAR.to_string(),
                self.state_dir.as_os_str().as_bytes().to_vec(),
            ),
        ]
    }
}

/// Starts commands for Runs: today a local child process, later a container (ADR-0005).
pub trait Executor {
    /// Starts the agent with piped stdio in `cwd`.
    fn spawn(&self, inv: &Invocation, cwd: &Path, run_id: i64) -> io::Result<Child>;
}

/// Runs the agent as a direct child of owl.
pub struct LocalExecutor {
    pub state_dir: std::path::PathBuf,
}

impl Executor for LocalExecutor {
    fn spawn(&self, inv: &Invocation, cwd: &Path, run_id: i64) -> io::Result<Child> {
        let marker = RunMarker {
            run_id: run_id.to_string(),
            state_dir: self.state_dir.clone(),
        };
        spawn(inv, cwd, &marker)
    }
}

/// Starts a command as owl's direct child, in its own process group, with piped stdio
/// and the Run's marker in its environment.
pub fn spawn(inv: &Invocation, cwd: &Path, marker: &RunMarker) -> io::Result<Child> {
    {
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
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: only async-signal-safe calls (prctl, getppid, _exit) run between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                // If owl dies, the agent is told at once instead of spending the Account alone.
                // PDEATHSIG follows the forking thread: owl spawns from its main thread.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // owl may have died between fork and prctl; then nobody would signal us.
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        cmd.spawn()
    }
}

/// Sends a signal to a whole process group; a group already gone is not an error.
pub fn signal_group(pgid: i32, signal: i32) {
    // SAFETY: kill(2) with a negative pid signals the group; no memory is touched.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

/// Sends a signal to one process; one already gone is not an error.
pub fn signal_pid(pid: i32, signal: i32) {
    // SAFETY: kill(2) touches no memory.
    unsafe {
        libc::kill(pid, signal);
    }
}

/// Makes owl a child subreaper: processes orphaned under it (the CLI's Bash tool runs in
/// its own session, so a group kill misses it) are reparented to owl instead of init.
pub fn become_subreaper() -> io::Result<()> {
    // SAFETY: prctl with integer arguments touches no memory.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Kills every process below owl and reaps it; returns how many there were.
///
/// As a subreaper owl inherits every orphan of a Run, so after the agent is gone each
/// remaining descendant is a leftover: a tool process, a forked server, a grandchild
/// holding a pipe.
pub fn kill_descendants() -> usize {
    let me = std::process::id() as i32;
    let mut killed = std::collections::BTreeSet::new();
    // Killing a process reparents its children to us; a few passes catch every level. A
    // process just sent SIGKILL may not be dead yet on the next pass: count it once.
    for _ in 0..32 {
        let found = descendants_of(me);
        if found.is_empty() {
            break;
        }
        for pid in found {
            if killed.insert(pid) {
                let name = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let name = String::from_utf8_lossy(&name).replace('\0', " ");
                tracing::info!(
                    pid,
                    "killing a process the Run left behind: {}",
                    name.trim()
                );
            }
            signal_pid(pid, libc::SIGKILL);
        }
        reap_children();
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    reap_children();
    killed.len()
}

/// Reaps every exited child without blocking.
pub fn reap_children() {
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes only to `status`.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            break;
        }
    }
}

/// Every live (non-zombie) process whose chain of parents leads to `root`.
pub fn descendants_of(root: i32) -> Vec<i32> {
    // The kernel's own lists of children, when it keeps them, cost a few reads; a scan of
    // every process on the machine costs hundreds.
    children_lists(root).unwrap_or_else(|| scan_descendants(root))
}

/// Descendants through `/proc/<pid>/task/<tid>/children`; `None` where the kernel has no
/// such files (CONFIG_PROC_CHILDREN).
fn children_lists(root: i32) -> Option<Vec<i32>> {
    let mut out = Vec::new();
    let mut frontier = vec![root];
    let mut read_any = false;
    while let Some(parent) = frontier.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{parent}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Ok(list) = std::fs::read_to_string(task.path().join("children")) else {
                continue;
            };
            read_any = true;
            for pid in list
                .split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok())
            {
                if out.contains(&pid) {
                    continue;
                }
                frontier.push(pid);
                if stat(pid).is_some_and(|s| s.state != 'Z') {
                    out.push(pid);
                }
            }
        }
    }
    read_any.then_some(out)
}

fn scan_descendants(root: i32) -> Vec<i32> {
    let table: Vec<(i32, i32, char)> = all_pids()
        .into_iter()
        .filter_map(|pid| stat(pid).map(|s| (pid, s.ppid, s.state)))
        .collect();
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for (pid, ppid, state) in &table {
            if *ppid == parent && !out.contains(pid) {
                frontier.push(*pid);
                if *state != 'Z' {
                    out.push(*pid);
                }
            }
        }
    }
    out
}

/// Every live process whose environment carries the Run's marker: the agent and
/// everything it started, even in another session, even reparented to init.
pub fn processes_with_marker(marker: &RunMarker) -> Vec<i32> {
    let needles: Vec<Vec<u8>> = marker
        .vars()
        .into_iter()
        .map(|(k, v)| [k.as_bytes(), b"=", &v].concat())
        .collect();
    let me = std::process::id() as i32;
    all_pids()
        .into_iter()
        .filter(|pid| *pid != me)
        .filter(|pid| stat(*pid).is_some_and(|s| s.state != 'Z'))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                needles
                    .iter()
                    .all(|n| env.split(|b| *b == 0).any(|var| var == n.as_slice()))
            })
        })
        .collect()
}

fn all_pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The fields of `/proc/<pid>/stat` owl uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
    /// Clock ticks since boot: with the pid and the boot id, identifies a process for good.
    pub start_time: i64,
}

/// Reads `/proc/<pid>/stat`; `None` when the process is gone.
pub fn stat(pid: i32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

fn parse_stat(text: &str) -> Option<ProcStat> {
    // The command name is in parentheses and may itself hold spaces and ')'.
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// This boot's id, which tells a pid from before a reboot from one after.
pub fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_a_hostile_command_name() {
        let line = "1234 (a) b (c) S 1 1234 1234 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 987654 0 0";
        let s = parse_stat(line).unwrap();
        assert_eq!(
            (s.state, s.ppid, s.pgrp, s.start_time),
            ('S', 1, 1234, 987654)
        );
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn both_ways_of_finding_descendants_find_a_grandchild() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .unwrap();
        let me = std::process::id() as i32;
        let sh = child.id() as i32;
        // Wait (bounded) for the shell to have started its sleep.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let grandchild = loop {
            let found = scan_descendants(sh);
            if let Some(pid) = found.first() {
                break *pid;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "sh never started sleep"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        let listed = children_lists(me).expect("this kernel keeps children lists");
        assert!(
            listed.contains(&sh) && listed.contains(&grandchild),
            "{listed:?}"
        );
        assert!(descendants_of(me).contains(&grandchild));
        signal_pid(grandchild, libc::SIGKILL);
        let _ = child.wait();
    }

    #[test]
    fn reads_our_own_stat() {
        let s = stat(std::process::id() as i32).unwrap();
        assert!(s.start_time > 0);
        assert!(boot_id().is_some_and(|b| b.len() >= 32));
    }
}
