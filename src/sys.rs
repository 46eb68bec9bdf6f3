//! The platform: every syscall and `/proc` read owl makes about processes, as safe functions whose errors are surfaced. The only `unsafe` in owl is here.

use std::io;
use std::os::fd::OwnedFd;
use std::process::Command;

use rustix::process::{Pid, Signal};

/// The signals owl sends.
pub(crate) use rustix::process::Signal as Sig;

fn pid(raw: i32) -> io::Result<Pid> {
    Pid::from_raw(raw).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))
}

/// The newest modification time of `dir` and what lies in it, `depth` levels down (no
/// link followed, at most a few thousand entries looked at): when a login was written there.
pub(crate) fn newest_change(
    dir: &std::path::Path,
    depth: usize,
) -> Option<chrono::DateTime<chrono::Utc>> {
    let mut newest = std::fs::symlink_metadata(dir).ok()?.modified().ok()?;
    let mut dirs = vec![(dir.to_path_buf(), 0)];
    let mut seen = 0;
    while let Some((at, level)) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > 4096 {
                return Some(newest.into());
            }
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            if let Ok(modified) = meta.modified() {
                newest = newest.max(modified);
            }
            if meta.is_dir() && level + 1 < depth {
                dirs.push((entry.path(), level + 1));
            }
        }
    }
    Some(newest.into())
}

/// The peak resident memory of this process's own address space, in KiB (`VmHWM`).
pub(crate) fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line["VmHWM:".len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// The `(device, inode)` of the file owl's stderr is, as `fstat` gives them; `None` when
/// stderr is closed.
pub(crate) fn stderr_file_id() -> Option<(u64, u64)> {
    let stat = rustix::fs::fstat(std::io::stderr()).ok()?;
    Some((stat.st_dev, stat.st_ino))
}

/// owl's own pid.
pub(crate) fn own_pid() -> i32 {
    rustix::process::getpid().as_raw_nonzero().get()
}

/// Makes `cmd`, once spawned, a child that gets SIGTERM when owl dies, and that never
/// starts at all when owl died while it was being forked.
pub(crate) fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = rustix::process::getpid();
    // SAFETY: between fork and exec the closure makes only raw syscalls (prctl, getppid),
    // which are async-signal-safe, and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            // If owl dies, the agent is told at once instead of spending the Account alone.
            // PDEATHSIG follows the forking thread: owl spawns from its main thread.
            rustix::process::set_parent_process_death_signal(Some(Signal::TERM))?;
            // owl may have died between fork and prctl; then nobody would signal us. An
            // error here ends the child before exec.
            if rustix::process::getppid() != Some(parent) {
                return Err(io::Error::other("owl died while starting the agent"));
            }
            Ok(())
        });
    }
}

/// Sends a signal to a whole process group. One already gone is not an error.
pub(crate) fn signal_group(pgid: i32, signal: Signal) -> io::Result<()> {
    match rustix::process::kill_process_group(pid(pgid)?, signal) {
        Err(rustix::io::Errno::SRCH) => Ok(()),
        other => Ok(other?),
    }
}

/// Whether any process is in the group `pgid`, a zombie not yet reaped included (a signal
/// of 0: nothing is sent).
pub(crate) fn group_exists(pgid: i32) -> bool {
    pid(pgid).is_ok_and(|p| rustix::process::test_kill_process_group(p).is_ok())
}

/// The live processes of the group `pgid`, from a scan of every process.
pub(crate) fn group_members(pgid: i32) -> Vec<i32> {
    all_pids()
        .into_iter()
        .filter(|p| stat(*p).is_some_and(|s| s.pgrp == pgid && s.is_alive()))
        .collect()
}

/// Sends a signal to one process. One already gone is not an error.
pub(crate) fn signal_pid(target: i32, signal: Signal) -> io::Result<()> {
    match rustix::process::kill_process(pid(target)?, signal) {
        Err(rustix::io::Errno::SRCH) => Ok(()),
        other => Ok(other?),
    }
}

/// Makes owl a child subreaper: processes orphaned under it are reparented to owl.
pub(crate) fn become_subreaper() -> io::Result<()> {
    Ok(rustix::process::set_child_subreaper(Some(
        rustix::process::getpid(),
    ))?)
}

/// Reaps every exited child without blocking.
pub(crate) fn reap_children() {
    while let Ok(Some(_)) = rustix::process::waitpid(None, rustix::process::WaitOptions::NOHANG) {}
}

/// A process held by a pidfd: once open, it names that process and no other, even if the
/// pid is reused after it dies. This closes the window between checking a pid's identity
/// and signalling it.
pub(crate) struct ProcessHandle {
    fd: OwnedFd,
    pid: i32,
}

impl ProcessHandle {
    /// Opens a handle on `pid`; `None` when it is gone (or pidfds are not supported).
    pub(crate) fn open(target: i32) -> Option<ProcessHandle> {
        let fd =
            rustix::process::pidfd_open(pid(target).ok()?, rustix::process::PidfdFlags::empty())
                .ok()?;
        Some(ProcessHandle { fd, pid: target })
    }

    /// The process's stat, read after the handle was opened: if it matches, the handle
    /// holds that very process.
    pub(crate) fn stat(&self) -> Option<ProcStat> {
        stat(self.pid)
    }

    /// Sends `signal` to the held process (and nobody else, whatever its pid is now).
    pub(crate) fn signal(&self, signal: Signal) -> io::Result<()> {
        match rustix::process::pidfd_send_signal(&self.fd, signal) {
            Err(rustix::io::Errno::SRCH) => Ok(()),
            other => Ok(other?),
        }
    }

    /// Waits up to `timeout` for the held process to exit (its pidfd becomes readable then,
    /// child or not); true when it has.
    pub(crate) fn wait_gone(&self, timeout: std::time::Duration) -> bool {
        use std::os::fd::AsRawFd;
        let mut poll = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: one valid pollfd, owned here, for the length of the call.
        let ready = unsafe { libc::poll(&mut poll, 1, ms) };
        ready > 0
    }
}

/// The fields of `/proc/<pid>/stat` owl uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    pub(crate) state: char,
    pub(crate) ppid: i32,
    pub(crate) pgrp: i32,
    /// Clock ticks since boot: with the pid and the boot id, identifies a process for good.
    pub(crate) start_time: i64,
}

impl ProcStat {
    /// Alive (a zombie is dead, only not yet reaped).
    pub(crate) fn is_alive(&self) -> bool {
        self.state != 'Z'
    }
}

/// Reads `/proc/<pid>/stat`; `None` when the process is gone.
pub(crate) fn stat(pid: i32) -> Option<ProcStat> {
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
pub(crate) fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
}

/// This machine's host name (`uname`'s node name), or `None` when it has none.
pub(crate) fn host_name() -> Option<String> {
    let uname = rustix::system::uname();
    let name = uname.nodename().to_string_lossy().trim().to_string();
    (!name.is_empty()).then_some(name)
}

/// What tells this host from another of the same name: its machine id, else its boot id.
pub(crate) fn host_identity() -> String {
    std::fs::read_to_string("/etc/machine-id")
        .ok()
        .map(|id| id.trim().to_string())
        .filter(|id| !id.is_empty())
        .or_else(boot_id)
        .unwrap_or_default()
}

/// A process's command line, for the log.
pub(crate) fn cmdline(pid: i32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&raw)
        .replace('\0', " ")
        .trim()
        .to_string()
}

/// Whether a process's environment holds every one of `vars` (each `NAME=value`).
pub(crate) fn environ_has_all(pid: i32, vars: &[Vec<u8>]) -> bool {
    std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
        vars.iter()
            .all(|n| env.split(|b| *b == 0).any(|var| var == n.as_slice()))
    })
}

/// Every pid on the machine.
pub(crate) fn all_pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Every live (non-zombie) process whose chain of parents leads to `root`.
pub(crate) fn descendants_of(root: i32) -> Vec<i32> {
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
                if stat(pid).is_some_and(|s| s.is_alive()) {
                    out.push(pid);
                }
            }
        }
    }
    read_any.then_some(out)
}

/// Descendants of `root` from a scan of every process's parent: slower than the kernel's
/// children lists, but never missing one (those lists can, while they change under a read).
pub(crate) fn scan_descendants(root: i32) -> Vec<i32> {
    let table: Vec<(i32, ProcStat)> = all_pids()
        .into_iter()
        .filter_map(|pid| stat(pid).map(|s| (pid, s)))
        .collect();
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for (pid, s) in &table {
            if s.ppid == parent && !out.contains(pid) {
                frontier.push(*pid);
                if s.is_alive() {
                    out.push(*pid);
                }
            }
        }
    }
    out
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
        let me = own_pid();
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
        signal_pid(grandchild, Signal::KILL).unwrap();
        let _ = child.wait();
    }

    #[test]
    fn reads_our_own_stat() {
        let s = stat(own_pid()).unwrap();
        assert!(s.start_time > 0);
        assert!(boot_id().is_some_and(|b| b.len() >= 32));
    }

    #[test]
    fn a_handle_signals_the_process_it_was_opened_on_and_outlives_it() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let handle = ProcessHandle::open(child.id() as i32).expect("pidfd_open");
        assert!(handle.stat().is_some_and(|s| s.is_alive()));
        handle.signal(Signal::KILL).unwrap();
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9));
        // Reaped: the pid may be anyone's now, and the handle still refers to the dead one.
        handle.signal(Signal::KILL).unwrap();
    }

    #[test]
    fn signalling_a_gone_process_is_not_an_error() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        signal_pid(pid, Signal::TERM).unwrap();
        assert!(signal_pid(0, Signal::TERM).is_err());
    }
}
