//! The notify hook: after a Run, the configured command is told what happened (one JSON document on its stdin per event), with a timeout; it can never change a Run or a Job.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::mpsc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::config::{Notify, NotifyEvent};

/// What a notify command reads on its stdin: one event.
#[derive(Debug, Clone, Serialize)]
pub struct Payload {
    /// `run-ended`, `job-done`, `job-blocked`, `job-failed` or `account-waiting`.
    pub event: &'static str,
    /// When owl sent it (RFC 3339, UTC).
    pub at: String,
    pub job_id: String,
    pub job_name: Option<String>,
    /// The Job's state after the Run.
    pub job_state: String,
    /// Why the Job is in that state, in words (`blocked: needs an API token`, a wait).
    pub job_reason: Option<String>,
    pub repo: String,
    pub branch: String,
    pub run_id: i64,
    pub account: String,
    /// The Run's outcome (`succeeded`, `interrupted`, `rate_limited`, …).
    pub outcome: String,
    pub stop_reason: Option<String>,
    pub cost_usd: Option<f64>,
    /// When the Job (for `account-waiting`: the Account) may run again; `null` when it is
    /// not waiting.
    pub until: Option<String>,
}

/// The events one recorded Run makes, in the order they are sent: `run-ended` first.
pub fn events_of(job_state: &str, account_waiting: bool) -> Vec<NotifyEvent> {
    let mut events = vec![NotifyEvent::RunEnded];
    match job_state {
        "done" => events.push(NotifyEvent::JobDone),
        "blocked" => events.push(NotifyEvent::JobBlocked),
        "failed" => events.push(NotifyEvent::JobFailed),
        _ => {}
    }
    if account_waiting {
        events.push(NotifyEvent::AccountWaiting);
    }
    events
}

/// Tells the command of each event it listens for. A command that fails, cannot start or
/// outlives its timeout is logged and killed; nothing else happens.
pub fn send(notify: &Notify, events: &[NotifyEvent], payload: &Payload, now: DateTime<Utc>) {
    for event in events.iter().filter(|e| notify.on.contains(e)) {
        let payload = Payload {
            event: event.name(),
            at: crate::clock::rfc3339(now),
            ..payload.clone()
        };
        if let Err(why) = run(notify, &payload) {
            tracing::warn!("notify command for {}: {why}", event.name());
        }
    }
}

/// The most of a notify command's stderr owl keeps, to say in its warning.
const STDERR_CAP: usize = 4096;

/// The most characters of the agent's words (a stop reason, a blocked Job's reason) a
/// payload carries: they are of any length.
pub const WORDS_CAP: usize = 2000;

/// Runs the command on one payload, bounded in every direction: the payload is written on
/// its own thread, so a command that never reads cannot hold owl past the timeout; the
/// command has a process group of its own, killed whole at the timeout; its stderr is read
/// on a thread, kept to [`STDERR_CAP`] and never passed through; and its environment has
/// none of the agent credentials every other process owl starts is scrubbed of.
fn run(notify: &Notify, payload: &Payload) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let (program, args) = notify
        .command
        .split_first()
        .ok_or_else(|| "no command".to_string())?;
    let mut body = serde_json::to_vec(payload).map_err(|e| e.to_string())?;
    body.push(b'\n');
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    for var in crate::driver::inherited_credentials() {
        command.env_remove(var);
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot run '{program}': {e}"))?;
    let group = child.id() as i32;
    if let Some(mut stdin) = child.stdin.take() {
        // A command that does not read its stdin is fine: a closed pipe is not an error.
        std::thread::spawn(move || {
            let _ = stdin.write_all(&body);
        });
    }
    let stderr = child.stderr.take().map(|pipe| {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(read_capped(pipe, STDERR_CAP));
        });
        rx
    });
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let ended = match rx.recv_timeout(notify.timeout) {
        Ok(Ok(status)) if status.success() => Ok(()),
        Ok(Ok(status)) => Err(format!("'{program}' ended with {status}")),
        Ok(Err(e)) => Err(format!("waiting for '{program}': {e}")),
        Err(_) => {
            let _ = crate::sys::signal_group(group, crate::sys::Sig::KILL);
            let _ = rx.recv();
            Err(format!(
                "'{program}' took longer than {}s and was killed, with what it started",
                notify.timeout.as_secs()
            ))
        }
    };
    ended.map_err(|why| {
        // What it said, if its stderr closed with it: a process it left in another session
        // may hold the pipe, and owl does not wait for that.
        let said = stderr
            .and_then(|rx| rx.recv_timeout(std::time::Duration::from_millis(200)).ok())
            .map(|bytes| String::from_utf8_lossy(&bytes).trim().to_string())
            .filter(|s| !s.is_empty());
        match said {
            Some(said) => format!("{why}: {}", crate::output::inert(&said)),
            None => why,
        }
    })
}

/// Reads `pipe` to its end, keeping its first `cap` bytes: the rest is read and dropped,
/// so a command that floods its stderr neither grows owl nor blocks on a full pipe.
fn read_capped(mut pipe: impl std::io::Read, cap: usize) -> Vec<u8> {
    use std::io::Read;
    let mut kept = Vec::new();
    let _ = (&mut pipe).take(cap as u64).read_to_end(&mut kept);
    let _ = std::io::copy(&mut pipe, &mut std::io::sink());
    kept
}
