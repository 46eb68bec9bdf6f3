//! A Job's check, the user's own command that decides whether the agent's work is done, and what one attempt of it found.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The command a Job's work must pass to be done: argv (never a shell string), fixed when
/// the Job is queued, run in the Job's working copy after a Run whose Handoff says `done`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Check {
    pub(crate) argv: Vec<String>,
    /// When a check still running is killed, with what it started.
    pub(crate) timeout_secs: u64,
}

impl Check {
    /// The argv as one line a person can copy into a shell.
    pub(crate) fn command_line(&self) -> String {
        command_line(&self.argv)
    }

    pub(crate) fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs)
    }
}

/// argv as one line a person can copy into a shell.
pub(crate) fn command_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| crate::text::shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// How one attempt of a check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CheckStatus {
    /// It exited 0: the work is verified.
    Passed,
    /// It exited non-zero or was killed by a signal.
    Failed,
    /// It was still running at its timeout, and was killed with what it started.
    TimedOut,
    /// Its program is missing or not executable: the environment's fault, not the work's.
    CannotStart,
    /// owl was told to stop while it ran: it was killed, and decides nothing.
    NotFinished,
}

impl CheckStatus {
    pub(crate) const ALL: [CheckStatus; 5] = [
        CheckStatus::Passed,
        CheckStatus::Failed,
        CheckStatus::TimedOut,
        CheckStatus::CannotStart,
        CheckStatus::NotFinished,
    ];

    /// The name stored and printed.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CheckStatus::Passed => "passed",
            CheckStatus::Failed => "failed",
            CheckStatus::TimedOut => "timed_out",
            CheckStatus::CannotStart => "cannot_start",
            CheckStatus::NotFinished => "not_finished",
        }
    }
}

impl std::str::FromStr for CheckStatus {
    type Err = super::UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        super::UnknownName::find(&CheckStatus::ALL, CheckStatus::as_str, "check status", s)
    }
}

/// What one attempt of a Job's check found, recorded with the Run it followed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct CheckRecord {
    /// The argv that ran.
    pub(crate) command: Vec<String>,
    pub(crate) status: CheckStatus,
    /// Its exit code (128 + the signal when a signal ended it); `None` when it did not end
    /// by itself.
    pub(crate) exit_code: Option<i32>,
    pub(crate) duration_ms: u64,
    /// Why it could not start; or, when it failed, the tail of its output (at most
    /// [`TAIL_LINES`] lines and [`TAIL_BYTES`] bytes, scrubbed of the Account's secrets):
    /// what the next Run's prompt carries.
    pub(crate) detail: Option<String>,
    /// The commit it ran at: the Job's branch tip, which a pass verifies and nothing else
    /// (`None` for a check recorded before owl kept it, or one that never ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) commit: Option<String>,
}

/// The most lines of a failed check's output the next Run's prompt carries.
pub(crate) const TAIL_LINES: usize = 100;
/// The most bytes of a failed check's output the next Run's prompt carries.
pub(crate) const TAIL_BYTES: usize = 8 * 1024;

impl CheckRecord {
    /// Whether the work passed its check.
    pub(crate) fn passed(&self) -> bool {
        self.status == CheckStatus::Passed
    }
}

/// "`cargo test` passed in 41s", "`sh -c 'test -f x'` exited 1 after 0s", …
impl fmt::Display for CheckRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let command = command_line(&self.command);
        let took = crate::clock::human(chrono::Duration::milliseconds(self.duration_ms as i64));
        match (self.status, self.exit_code) {
            (CheckStatus::Passed, _) => write!(f, "`{command}` passed in {took}"),
            (CheckStatus::Failed, Some(code)) => {
                write!(f, "`{command}` exited {code} after {took}")
            }
            (CheckStatus::Failed, None) => write!(f, "`{command}` failed after {took}"),
            (CheckStatus::TimedOut, _) => {
                write!(
                    f,
                    "`{command}` was still running at its timeout ({took}) and was killed"
                )
            }
            (CheckStatus::CannotStart, _) => write!(
                f,
                "`{command}` cannot start: {}",
                self.detail.as_deref().unwrap_or("unknown")
            ),
            (CheckStatus::NotFinished, _) => write!(
                f,
                "`{command}` did not finish: owl was stopped after {took}"
            ),
        }
    }
}

/// The tail of a check's output for a prompt: its last [`TAIL_LINES`] lines, within
/// [`TAIL_BYTES`], cut at a character boundary.
pub(crate) fn output_tail(output: &str) -> String {
    let tail = crate::text::tail(output, TAIL_BYTES);
    let lines: Vec<&str> = tail.lines().collect();
    let keep = lines.len().saturating_sub(TAIL_LINES);
    lines[keep..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_says_how_the_check_ended_with_a_command_to_copy() {
        let rec = |status, exit_code, detail: Option<&str>| CheckRecord {
            command: vec!["sh".into(), "-c".into(), "test -f fixed".into()],
            status,
            exit_code,
            duration_ms: 1_500,
            detail: detail.map(String::from),
            commit: None,
        };
        assert_eq!(
            rec(CheckStatus::Failed, Some(1), None).to_string(),
            "`sh -c 'test -f fixed'` exited 1 after 1s"
        );
        assert_eq!(
            rec(CheckStatus::Passed, Some(0), None).to_string(),
            "`sh -c 'test -f fixed'` passed in 1s"
        );
        assert!(
            rec(CheckStatus::CannotStart, None, Some("'sh' is not on PATH"))
                .to_string()
                .ends_with("cannot start: 'sh' is not on PATH")
        );
        for status in CheckStatus::ALL {
            assert_eq!(status.as_str().parse::<CheckStatus>(), Ok(status));
        }
    }

    #[test]
    fn the_tail_keeps_the_last_lines_within_the_byte_cap() {
        let many: String = (0..500).map(|i| format!("line {i}\n")).collect();
        let tail = output_tail(&many);
        assert_eq!(tail.lines().count(), TAIL_LINES);
        assert!(tail.ends_with("line 499"));
        let wide = "é".repeat(TAIL_BYTES);
        let tail = output_tail(&wide);
        assert!(tail.len() <= TAIL_BYTES && tail.chars().all(|c| c == 'é'));
    }
}
