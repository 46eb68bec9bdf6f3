//! How a Run ended and what happens to its Job next: pure functions, unit-tested.

use chrono::{DateTime, Duration, Utc};

use crate::driver::AgentResult;
use crate::handoff::{Handoff, HandoffStatus};
use crate::model::{JobState, RunOutcome};

/// Why owl stopped a Run before the agent finished it.
#[derive(Debug, Clone, PartialEq)]
pub enum StopCause {
    /// The Account crossed a Ceiling; the Job waits until the Window resets.
    Ceiling {
        reason: String,
        resets_at: Option<DateTime<Utc>>,
    },
    /// The provider rejected the Account (`rate_limit_event` with `status: rejected`).
    RateLimited(String),
    MaxRunTime,
    Stalled,
    Cancelled,
    /// owl itself was told to stop (SIGTERM, SIGINT, SIGHUP).
    Signal(&'static str),
    /// The Run's log could not be written.
    LogWrite(String),
}

impl StopCause {
    /// The `stop_reason` recorded on the Run.
    pub fn reason(&self) -> String {
        match self {
            StopCause::Ceiling { reason, .. } => reason.clone(),
            StopCause::RateLimited(reason) => reason.clone(),
            StopCause::MaxRunTime => "maxRunTime reached".into(),
            StopCause::Stalled => "stalled".into(),
            StopCause::Cancelled => "cancelled".into(),
            StopCause::Signal(sig) => format!("owl received {sig}"),
            StopCause::LogWrite(e) => format!("writing the log: {e}"),
        }
    }
}

/// How the agent's process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExitInfo {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl std::fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (Some(c), _) => write!(f, "exit code {c}"),
            (None, Some(s)) => write!(f, "signal {s}"),
            (None, None) => f.write_str("an unknown status"),
        }
    }
}

/// A Run's outcome and the words recorded with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Classified {
    pub outcome: RunOutcome,
    pub stop_reason: Option<String>,
}

/// Decides a Run's outcome from the agent's result line first, and the exit status only
/// when there is none: the CLI reports API errors as `subtype: success` with `is_error`.
pub fn classify(
    result: Option<&AgentResult>,
    exit: ExitInfo,
    stop: Option<&StopCause>,
    stderr_tail: &str,
) -> Classified {
    let done = |outcome, reason: Option<String>| Classified {
        outcome,
        stop_reason: reason,
    };
    if let Some(cause) = stop {
        let outcome = match cause {
            StopCause::MaxRunTime | StopCause::Stalled => RunOutcome::TimedOut,
            StopCause::LogWrite(_) => RunOutcome::Failed,
            StopCause::RateLimited(_) => RunOutcome::RateLimited,
            _ => RunOutcome::Interrupted,
        };
        return done(outcome, Some(cause.reason()));
    }
    let Some(r) = result else {
        let tail = stderr_tail.trim();
        let why = if tail.is_empty() {
            format!("the agent ended with {exit} and no result line")
        } else {
            format!("the agent ended with {exit} and no result line: {tail}")
        };
        return done(RunOutcome::Failed, Some(why));
    };
    let said = || {
        r.text
            .clone()
            .or_else(|| r.errors.first().cloned())
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| match r.subtype.as_str() {
                "" => "the agent's result line says nothing of how the turn ended".into(),
                s => s.into(),
            })
    };
    if r.budget_exhausted {
        return done(RunOutcome::BudgetExhausted, Some(said()));
    }
    match (r.is_error, r.api_error_status) {
        (true, Some(429)) => done(RunOutcome::RateLimited, Some(said())),
        (true, Some(401)) => done(
            RunOutcome::Failed,
            Some(format!("not logged in (401): {}", said())),
        ),
        (true, Some(status)) => done(
            RunOutcome::Failed,
            Some(format!("API error {status}: {}", said())),
        ),
        (true, None) => done(RunOutcome::Failed, Some(said())),
        (false, _) if r.subtype != "success" => done(RunOutcome::Failed, Some(said())),
        (false, _) if exit.code != Some(0) => done(
            RunOutcome::Failed,
            Some(format!("the agent reported success but ended with {exit}")),
        ),
        (false, _) => done(RunOutcome::Succeeded, None),
    }
}

/// Where a Job goes after a Run.
#[derive(Debug, Clone, PartialEq)]
pub struct JobTransition {
    pub state: JobState,
    pub reason: Option<String>,
    pub not_before: Option<DateTime<Utc>>,
}

/// How long a rate-limited Job waits when the provider did not say when the limit resets.
pub const UNKNOWN_RESET_WAIT: Duration = Duration::minutes(30);

/// The inputs to [`next_job_state`].
#[derive(Debug, Clone)]
pub struct AfterRun<'a> {
    pub outcome: &'a Classified,
    pub stop: Option<&'a StopCause>,
    /// When a `rejected` rate limit resets, if the agent said.
    pub rate_limit_reset: Option<DateTime<Utc>>,
    pub handoff: Result<Handoff, String>,
    /// Runs of this Job so far, this one included.
    pub runs: u32,
    pub max_runs: u32,
    /// What the Job's budget has left after this Run (`None`: no Job budget).
    pub budget_left: Option<f64>,
    pub now: DateTime<Utc>,
}

/// Decides the Job's next state: the waits first (a ceiling, a rate limit), then the
/// Handoff, then `maxRuns`.
pub fn next_job_state(a: &AfterRun) -> JobTransition {
    let to = |state, reason: Option<String>, not_before| JobTransition {
        state,
        reason,
        not_before,
    };
    let wait_or_fail = |t: JobTransition| {
        if a.budget_left.is_some_and(|left| left <= 0.0) {
            to(JobState::Failed, Some("job budget spent".into()), None)
        } else if a.runs >= a.max_runs {
            to(
                JobState::Failed,
                Some(format!("maxRuns reached ({} Runs without done)", a.runs)),
                None,
            )
        } else {
            t
        }
    };
    match a.stop {
        Some(StopCause::Cancelled) => {
            return to(JobState::Cancelled, Some("cancelled".into()), None)
        }
        Some(StopCause::Ceiling { reason, resets_at }) => {
            return wait_or_fail(to(JobState::Waiting, Some(reason.clone()), *resets_at))
        }
        _ => {}
    }
    if a.outcome.outcome == RunOutcome::RateLimited {
        let until = a
            .rate_limit_reset
            .filter(|t| *t > a.now)
            .unwrap_or(a.now + UNKNOWN_RESET_WAIT);
        return wait_or_fail(to(
            JobState::Waiting,
            Some("rate limited by the provider".into()),
            Some(until),
        ));
    }
    match &a.handoff {
        Ok(h) => match h.status {
            HandoffStatus::Done => to(JobState::Done, None, None),
            HandoffStatus::Blocked => to(JobState::Blocked, Some(h.summary()), None),
            HandoffStatus::Continue => wait_or_fail(to(JobState::Queued, None, None)),
        },
        Err(why) => wait_or_fail(to(JobState::Queued, Some(format!("warning: {why}")), None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(subtype: &str, is_error: bool, status: Option<i64>) -> AgentResult {
        AgentResult {
            subtype: subtype.into(),
            is_error,
            api_error_status: status,
            budget_exhausted: subtype == "error_max_budget_usd",
            text: Some("said".into()),
            ..Default::default()
        }
    }

    fn exit(code: i32) -> ExitInfo {
        ExitInfo {
            code: Some(code),
            signal: None,
        }
    }

    #[test]
    fn outcome_comes_from_the_result_line() {
        let c = |r: &AgentResult, code| classify(Some(r), exit(code), None, "").outcome;
        assert_eq!(c(&result("success", false, None), 0), RunOutcome::Succeeded);
        assert_eq!(
            c(&result("success", true, Some(429)), 1),
            RunOutcome::RateLimited
        );
        assert_eq!(
            c(&result("success", true, Some(401)), 1),
            RunOutcome::Failed
        );
        assert_eq!(
            c(&result("success", true, Some(500)), 1),
            RunOutcome::Failed
        );
        assert_eq!(
            c(&result("error_max_budget_usd", true, None), 1),
            RunOutcome::BudgetExhausted
        );
        assert_eq!(
            c(&result("error_during_execution", true, None), 1),
            RunOutcome::Failed
        );
        assert_eq!(c(&result("success", false, None), 3), RunOutcome::Failed);
        let r401 = classify(Some(&result("success", true, Some(401))), exit(1), None, "");
        assert!(r401.stop_reason.unwrap().starts_with("not logged in"));
    }

    #[test]
    fn no_result_line_is_failed_with_the_stderr_tail() {
        let c = classify(None, exit(143), None, "boom\n");
        assert_eq!(c.outcome, RunOutcome::Failed);
        assert_eq!(
            c.stop_reason.unwrap(),
            "the agent ended with exit code 143 and no result line: boom"
        );
    }

    #[test]
    fn a_stop_cause_wins_over_the_result() {
        let r = result("error_during_execution", true, None);
        let c = classify(Some(&r), exit(1), Some(&StopCause::MaxRunTime), "");
        assert_eq!(c.outcome, RunOutcome::TimedOut);
        let c = classify(Some(&r), exit(1), Some(&StopCause::Signal("SIGTERM")), "");
        assert_eq!(c.outcome, RunOutcome::Interrupted);
        assert_eq!(c.stop_reason.as_deref(), Some("owl received SIGTERM"));
    }

    fn after(outcome: RunOutcome, handoff: Result<Handoff, String>, runs: u32) -> JobTransition {
        let now = crate::clock::parse("2026-11-30T02:00:00Z").unwrap();
        let c = Classified {
            outcome,
            stop_reason: None,
        };
        next_job_state(&AfterRun {
            outcome: &c,
            stop: None,
            rate_limit_reset: None,
            handoff,
            runs,
            max_runs: 3,
            budget_left: None,
            now,
        })
    }

    #[test]
    fn the_handoff_decides_then_max_runs() {
        let h = |s| Ok(Handoff::parse(s).unwrap());
        assert_eq!(
            after(RunOutcome::Succeeded, h("status: done\n"), 1).state,
            JobState::Done
        );
        assert_eq!(
            after(RunOutcome::Succeeded, h("status: continue\n"), 1).state,
            JobState::Queued
        );
        let b = after(
            RunOutcome::Succeeded,
            h("status: blocked\nneeds a token\n"),
            1,
        );
        assert_eq!(
            (b.state, b.reason.as_deref()),
            (JobState::Blocked, Some("needs a token"))
        );
        let missing = after(RunOutcome::Succeeded, Err("no handoff".into()), 1);
        assert_eq!(missing.state, JobState::Queued);
        assert_eq!(missing.reason.as_deref(), Some("warning: no handoff"));
        let spent = after(RunOutcome::Succeeded, h("status: continue\n"), 3);
        assert_eq!(spent.state, JobState::Failed);
        assert!(spent.reason.unwrap().starts_with("maxRuns reached"));
        // done on the last Run is still done
        assert_eq!(
            after(RunOutcome::Succeeded, h("status: done\n"), 3).state,
            JobState::Done
        );
    }

    #[test]
    fn rate_limited_waits_for_the_reset_or_a_default() {
        let t = after(RunOutcome::RateLimited, Err("x".into()), 1);
        assert_eq!(t.state, JobState::Waiting);
        let now = crate::clock::parse("2026-11-30T02:00:00Z").unwrap();
        assert_eq!(t.not_before, Some(now + UNKNOWN_RESET_WAIT));
    }
}
