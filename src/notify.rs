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

fn run(notify: &Notify, payload: &Payload) -> Result<(), String> {
    let (program, args) = notify
        .command
        .split_first()
        .ok_or_else(|| "no command".to_string())?;
    let body = serde_json::to_vec(payload).map_err(|e| e.to_string())?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot run '{program}': {e}"))?;
    let pid = child.id() as i32;
    if let Some(mut stdin) = child.stdin.take() {
        // A command that does not read its stdin is fine: a closed pipe is not an error.
        let _ = stdin.write_all(&body).and_then(|()| stdin.write_all(b"\n"));
    }
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    match rx.recv_timeout(notify.timeout) {
        Ok(Ok(status)) if status.success() => Ok(()),
        Ok(Ok(status)) => Err(format!("'{program}' ended with {status}")),
        Ok(Err(e)) => Err(format!("waiting for '{program}': {e}")),
        Err(_) => {
            let _ = crate::sys::signal_pid(pid, crate::sys::Sig::KILL);
            let _ = rx.recv();
            Err(format!(
                "'{program}' took longer than {}s and was killed",
                notify.timeout.as_secs()
            ))
        }
    }
}
