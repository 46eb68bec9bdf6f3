//! The notify hook: after a Run, the configured command is told what happened (one JSON document on its stdin per event), with a timeout; it can never change a Run or a Job.

use std::process::Command;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::config::{Notify, NotifyEvent};

/// What a notify command reads on its stdin: one event.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Payload {
    /// `run-ended`, `job-done`, `job-blocked`, `job-failed`, `account-waiting` or
    /// `check-failed`.
    pub(crate) event: &'static str,
    /// When owl sent it (RFC 3339, UTC).
    pub(crate) at: String,
    pub(crate) job_id: String,
    pub(crate) job_name: Option<String>,
    /// The Job's state after the Run.
    pub(crate) job_state: crate::model::JobState,
    /// Why the Job is in that state, in words (`blocked: needs an API token`, a wait).
    pub(crate) job_reason: Option<String>,
    pub(crate) repo: String,
    pub(crate) branch: String,
    pub(crate) run_id: i64,
    pub(crate) account: String,
    /// The Run's outcome (`succeeded`, `interrupted`, `rate_limited`, …).
    pub(crate) outcome: String,
    pub(crate) stop_reason: Option<String>,
    pub(crate) cost_usd: Option<f64>,
    /// When the Job (for `account-waiting`: the Account) may run again; `null` when it is
    /// not waiting.
    pub(crate) until: Option<String>,
    /// The first line of the Job's prompt (a pull request's title), at most 200 characters.
    pub(crate) prompt_summary: String,
    /// The Handoff the Run left on the branch (the agent's words, at most 8 KiB).
    pub(crate) handoff: Option<String>,
    /// What the Job's check found after this Run; `null` when none ran.
    pub(crate) check: Option<PayloadCheck>,
    /// The Job is done and its check passed: verified, not only claimed.
    pub(crate) verified: bool,
}

/// A check's result as a payload carries it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PayloadCheck {
    pub(crate) command: Vec<String>,
    /// `passed`, `failed`, `timed_out`, `cannot_start` or `not_finished`.
    pub(crate) status: &'static str,
    pub(crate) exit_code: Option<i32>,
    pub(crate) duration_ms: u64,
    /// The commit it ran at: for a verified Job, the one commit a hook may push as verified.
    pub(crate) commit: Option<String>,
}

impl PayloadCheck {
    pub(crate) fn of(record: &crate::model::CheckRecord) -> PayloadCheck {
        PayloadCheck {
            command: record.command.clone(),
            status: record.status.as_str(),
            exit_code: record.exit_code,
            duration_ms: record.duration_ms,
            commit: record.commit.clone(),
        }
    }
}

/// The most bytes of a Handoff a payload carries.
pub(crate) const HANDOFF_CAP: usize = 8 * 1024;

/// The events one recorded Run makes, in the order they are sent: `run-ended` first.
pub(crate) fn events_of(
    job_state: crate::model::JobState,
    account_waiting: bool,
    check: Option<&crate::model::CheckRecord>,
) -> Vec<NotifyEvent> {
    use crate::model::{CheckStatus, JobState};
    let mut events = vec![NotifyEvent::RunEnded];
    // A claimed done that its check refused: before the Job's own news (a `job-failed` at
    // maxRuns, a `job-blocked` for a check that cannot start).
    if check.is_some_and(|c| {
        matches!(
            c.status,
            CheckStatus::Failed | CheckStatus::TimedOut | CheckStatus::CannotStart
        )
    }) {
        events.push(NotifyEvent::CheckFailed);
    }
    match job_state {
        JobState::Done => events.push(NotifyEvent::JobDone),
        JobState::Blocked => events.push(NotifyEvent::JobBlocked),
        JobState::Failed => events.push(NotifyEvent::JobFailed),
        _ => {}
    }
    if account_waiting {
        events.push(NotifyEvent::AccountWaiting);
    }
    events
}

/// Tells the command of each event it listens for. A command that fails, cannot start or
/// outlives its timeout is logged and killed; nothing else happens.
pub(crate) fn send(notify: &Notify, events: &[NotifyEvent], payload: &Payload, now: DateTime<Utc>) {
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
pub(crate) const WORDS_CAP: usize = 2000;

/// Runs the command on one payload, bounded in every direction: the payload is written on
/// its own thread, so a command that never reads cannot hold owl past the timeout; the
/// command has a process group of its own, killed whole at the timeout; its stderr is read
/// on a thread, kept to [`STDERR_CAP`] and never passed through; and its environment has
/// none of the agent credentials every other process owl starts is scrubbed of.
fn run(notify: &Notify, payload: &Payload) -> Result<(), String> {
    let (program, args) = notify
        .command
        .split_first()
        .ok_or_else(|| "no command".to_string())?;
    let mut body = serde_json::to_vec(payload).map_err(|e| e.to_string())?;
    body.push(b'\n');
    let mut command = Command::new(program);
    command.args(args);
    for var in crate::driver::inherited_credentials().chain(crate::driver::STORE_CREDENTIALS) {
        command.env_remove(var);
    }
    let said = |stderr: &[u8]| -> Option<String> {
        let said = String::from_utf8_lossy(stderr).trim().to_string();
        if said.is_empty() {
            None
        } else {
            Some(crate::output::inert(&said).to_string())
        }
    };
    let (why, stderr) = match crate::oneshot::run(command, Some(body), notify.timeout, STDERR_CAP) {
        Ok(ended) if ended.status.success() => return Ok(()),
        Ok(ended) => (
            format!("'{program}' ended with {}", ended.status),
            ended.stderr,
        ),
        Err(crate::oneshot::Failed::TimedOut { stderr, .. }) => (
            format!(
                "'{program}' took longer than {}s and was killed, with what it started",
                notify.timeout.as_secs()
            ),
            stderr,
        ),
        Err(e) => (e.to_string(), Vec::new()),
    };
    Err(match said(&stderr) {
        Some(said) => format!("{why}: {said}"),
        None => why,
    })
}
