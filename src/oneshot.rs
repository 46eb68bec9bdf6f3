//! One short command run to its end or its deadline: its input given whole on its own thread, its output kept to a cap, its process group killed at the deadline, and never a wait on a pipe that something it left behind holds.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::wait::Waited;

/// How long the output is waited for once the command has exited: a process it left in
/// another session may hold its pipes open for ever.
const DRAIN_WAIT: Duration = Duration::from_millis(200);

/// What a command that ended printed.
#[derive(Debug)]
pub(crate) struct Ended {
    pub(crate) status: ExitStatus,
    /// The first `cap` bytes of each stream (the rest was read and dropped).
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: Vec<u8>,
}

/// Why a command gave no answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Failed {
    #[error("cannot run '{program}': {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("waiting for '{program}': {source}")]
    Wait {
        program: String,
        source: std::io::Error,
    },
    /// It was still running at the deadline, and was killed with its process group.
    #[error("'{program}' gave no answer within {}s and was killed, with what it started", timeout.as_secs())]
    TimedOut {
        program: String,
        timeout: Duration,
        /// What it wrote on stderr before (capped).
        stderr: Vec<u8>,
    },
}

/// Runs `command` in a process group of its own (in `/` unless it names a directory of its
/// own), writes `input` (if any) to its stdin on a
/// thread (a command that never reads cannot hold owl), and waits for its exit until
/// `timeout`; at the deadline its whole group is killed. Each output stream is read on its
/// own thread, its first `cap` bytes kept.
pub(crate) fn run(
    mut command: Command,
    input: Option<Vec<u8>>,
    timeout: Duration,
    cap: usize,
) -> Result<Ended, Failed> {
    let program = command.get_program().to_string_lossy().into_owned();
    if command.get_current_dir().is_none() {
        // Never the caller's directory: Claude Code reads a project's settings and hooks from
        // where it starts, and `owl tick` by hand is often run inside a repository.
        command.current_dir("/");
    }
    command
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = command.spawn().map_err(|source| Failed::Spawn {
        program: program.clone(),
        source,
    })?;
    let group = child.id() as i32;
    if let (Some(mut stdin), Some(bytes)) = (child.stdin.take(), input) {
        // A command that does not read its stdin is fine: a closed pipe is not an error.
        std::thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        });
    }
    let stdout = child.stdout.take().map(|pipe| read_capped(pipe, cap));
    let stderr = child.stderr.take().map(|pipe| read_capped(pipe, cap));
    let exited = crate::wait::on_thread(move || child.wait());
    let status = match crate::wait::until(&exited, Instant::now() + timeout, None) {
        Waited::Got(Ok(status)) => status,
        Waited::Got(Err(source)) => return Err(Failed::Wait { program, source }),
        _ => {
            let _ = crate::sys::signal_group(group, crate::sys::Sig::KILL);
            let _ = exited.recv();
            return Err(Failed::TimedOut {
                program,
                timeout,
                stderr: collect(stderr),
            });
        }
    };
    Ok(Ended {
        status,
        stdout: collect(stdout),
        stderr: collect(stderr),
    })
}

/// A stream read on its own thread: what it kept so far, and word when it ended.
struct Reader {
    kept: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    done: mpsc::Receiver<()>,
}

/// Reads `pipe` to its end on a thread, keeping its first `cap` bytes: the rest is read and
/// dropped, so a command that floods a stream neither grows owl nor blocks on a full pipe.
fn read_capped(mut pipe: impl Read + Send + 'static, cap: usize) -> Reader {
    let kept = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (tx, done) = mpsc::channel();
    let shared = kept.clone();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        loop {
            match pipe.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => {
                    let mut kept = shared.lock().unwrap_or_else(|e| e.into_inner());
                    let room = cap.saturating_sub(kept.len()).min(n);
                    kept.extend_from_slice(&chunk[..room]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        let _ = tx.send(());
    });
    Reader { kept, done }
}

/// What a stream's reader got, once the command has exited: its end waited for a moment
/// only, then what was read so far.
fn collect(reader: Option<Reader>) -> Vec<u8> {
    reader.map_or_else(Vec::new, |r| {
        let _ = crate::wait::within(&r.done, DRAIN_WAIT);
        std::mem::take(&mut *r.kept.lock().unwrap_or_else(|e| e.into_inner()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("/bin/sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn the_output_is_kept_to_its_cap_and_the_input_given() {
        let ended = run(
            sh("cat; head -c 100000 /dev/zero"),
            Some(b"hello ".to_vec()),
            Duration::from_secs(10),
            16,
        )
        .unwrap();
        assert!(ended.status.success());
        assert_eq!(ended.stdout, b"hello \0\0\0\0\0\0\0\0\0\0");
    }

    #[test]
    fn a_command_past_its_deadline_is_killed_with_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!("sleep 600 & echo $! > {}; wait", pid_file.display());
        let err = run(sh(&script), None, Duration::from_millis(500), 1024).unwrap_err();
        assert!(matches!(err, Failed::TimedOut { .. }), "{err}");
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // Killed with its group: gone, or a zombie waiting for its reaper.
        let gone = (0..100).any(|_| {
            let alive = crate::sys::stat(pid).is_some_and(|s| s.is_alive());
            if alive {
                std::thread::sleep(Duration::from_millis(10));
            }
            !alive
        });
        assert!(gone, "the group's sleep outlived the deadline");
    }

    #[test]
    fn output_held_by_a_process_left_behind_does_not_hold_the_answer() {
        let started = std::time::Instant::now();
        let ended = run(
            sh("echo 2.1.332; setsid sleep 30 > /dev/stdout &"),
            None,
            Duration::from_secs(10),
            1024,
        )
        .unwrap();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(String::from_utf8_lossy(&ended.stdout).trim(), "2.1.332");
    }
}
