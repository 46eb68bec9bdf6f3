//! The Handoff (ADR-0026): `.owl/handoff.md` on the Job's branch, which carries a Job from one Run to the next.

/// Where the agent leaves the Handoff, relative to the worktree root.
pub(crate) const HANDOFF_PATH: &str = ".owl/handoff.md";

/// The largest Handoff owl reads: far more than a note for the next Run needs, and it goes
/// into that Run's prompt. A bigger one is not read at all.
pub(crate) const HANDOFF_CAP: usize = 256 * 1024;

/// What the agent says about the Job on the Handoff's first line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HandoffStatus {
    Done,
    Continue,
    Blocked,
}

/// Why a Run's Handoff cannot carry its Job on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[serde(tag = "problem", content = "detail", rename_all = "snake_case")]
pub(crate) enum HandoffError {
    #[error("the Run left no {HANDOFF_PATH}")]
    Missing,
    #[error("reading {HANDOFF_PATH}: {0}")]
    Unreadable(String),
    #[error("{HANDOFF_PATH} is {0}, not a file; not read")]
    NotAFile(String),
    #[error("{HANDOFF_PATH} is {0} bytes, over the {cap} owl reads; not read", cap = HANDOFF_CAP)]
    TooLarge(u64),
    #[error("{HANDOFF_PATH} does not start with 'status: ...' (found '{}')", crate::text::truncate(.0, 60))]
    NoStatus(String),
    #[error("{HANDOFF_PATH} has status '{0}'; expected done, continue or blocked")]
    UnknownStatus(String),
}

/// A parsed Handoff.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Handoff {
    pub(crate) status: HandoffStatus,
    /// Everything after the status line.
    pub(crate) body: String,
}

impl Handoff {
    /// Parses a Handoff; the first non-empty line must be `status: done|continue|blocked`.
    pub(crate) fn parse(text: &str) -> Result<Handoff, HandoffError> {
        let mut lines = text.lines().skip_while(|l| l.trim().is_empty());
        let first = lines.next().unwrap_or("").trim();
        let value = first
            .strip_prefix("status:")
            .map(str::trim)
            .ok_or_else(|| HandoffError::NoStatus(first.to_string()))?;
        let status = match value.to_ascii_lowercase().as_str() {
            "done" => HandoffStatus::Done,
            "continue" => HandoffStatus::Continue,
            "blocked" => HandoffStatus::Blocked,
            other => return Err(HandoffError::UnknownStatus(other.to_string())),
        };
        let body = lines.collect::<Vec<_>>().join("\n").trim().to_string();
        Ok(Handoff { status, body })
    }

    /// The first line of the body: the reason shown for a blocked Job.
    pub(crate) fn summary(&self) -> String {
        self.body
            .lines()
            .map(|l| l.trim().trim_start_matches('#').trim())
            .find(|l| !l.is_empty())
            .unwrap_or("the Handoff gives no reason")
            .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_and_body() {
        let h = Handoff::parse("\nstatus: Blocked\n\n## Why\nneeds credentials\n").unwrap();
        assert_eq!(h.status, HandoffStatus::Blocked);
        assert_eq!(h.summary(), "Why");
        assert!(h.body.contains("needs credentials"));
        assert_eq!(
            Handoff::parse("status: maybe"),
            Err(HandoffError::UnknownStatus("maybe".into()))
        );
        let hello = Handoff::parse("hello").unwrap_err();
        assert_eq!(hello, HandoffError::NoStatus("hello".into()));
        assert_eq!(
            hello.to_string(),
            ".owl/handoff.md does not start with 'status: ...' (found 'hello')"
        );
        assert_eq!(Handoff::parse(""), Err(HandoffError::NoStatus("".into())));
    }
}
