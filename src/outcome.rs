//! How a Run ended and what happens to its Job next: pure functions, unit-tested.

use chrono::{DateTime, Duration, Utc};

use crate::driver::{AgentFailure, AgentResult};
use crate::handoff::{Handoff, HandoffError, HandoffStatus};
use crate::model::{
    AccountNote, Cause, CheckRecord, CheckStatus, ExitInfo, JobReason, JobState, RunOutcome,
    StopCause,
};

/// What happened in a Run, as the loop saw it.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunReport {
    pub(crate) result: Option<AgentResult>,
    pub(crate) exit: ExitInfo,
    pub(crate) stop: Option<StopCause>,
    pub(crate) stderr_tail: String,
    pub(crate) session_id: Option<String>,
    pub(crate) agent_version: Option<String>,
    pub(crate) api_retries: i64,
    pub(crate) last_event: Option<String>,
    /// When a `rejected` rate limit resets (epoch seconds).
    pub(crate) rate_limit_reset: Option<i64>,
    /// When the latest Window reported full (100%) resets: a rate limit's reset told by
    /// the figures rather than by the error (Codex's rollout after a usage-limit 429).
    pub(crate) full_window_reset: Option<DateTime<Utc>>,
    pub(crate) lines: u64,
    pub(crate) skipped_lines: u64,
    /// Processes still alive after the agent exited, killed by owl.
    pub(crate) survivors_killed: usize,
    /// What went through a confined network ("network: 41 to api.anthropic.com; refused:
    /// 1 to 127.0.0.1:45123"); `None` where the network is not confined or nothing went.
    pub(crate) network: Option<String>,
    pub(crate) log_error: Option<String>,
    /// A real model answer was seen, not the CLI's synthetic stand-in.
    pub(crate) reached_model: bool,
    /// The CLI's error word on its last synthetic answer (`authentication_failed`, …).
    pub(crate) agent_error: Option<String>,
    /// owl signalled the agent after its result line (its teardown overran, or a stop came late).
    pub(crate) signalled_after_result: bool,
    /// A stop cause raised after the result line: a note, never the outcome.
    pub(crate) late_stop: Option<StopCause>,
    /// The agent outlived SIGKILL for a grace window: owl gave up waiting for it.
    pub(crate) unkillable: Option<String>,
    /// Tools the CLI's policy refused, seen on their own lines (a CLI whose result line
    /// does not list them).
    pub(crate) denials: Vec<crate::model::PermissionDenial>,
    /// owl failed before the agent was started (a log it could not create, a sandbox it
    /// could not build): the model never ran, so nothing is charged to the Job.
    pub(crate) never_started: bool,
}

impl RunReport {
    /// A Run stopped by `signal` before its agent was started: nothing to stop, nothing
    /// spent.
    pub(crate) fn stopped_before_start(signal: &'static str) -> RunReport {
        RunReport {
            stop: Some(StopCause::Signal(signal)),
            stderr_tail: format!("owl received {signal} before the agent was started"),
            never_started: true,
            ..Default::default()
        }
    }
}

/// A Run's outcome, the words recorded with it, and who it is charged to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Classified {
    pub(crate) outcome: RunOutcome,
    pub(crate) stop_reason: Option<String>,
    pub(crate) cause: Cause,
}

/// What the supervisor saw of a Run: the facts [`classify`] decides on.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunFacts<'a> {
    pub(crate) result: Option<&'a AgentResult>,
    pub(crate) exit: ExitInfo,
    /// The stop owl began before the agent's result line (a later one is only a note).
    pub(crate) stop: Option<&'a StopCause>,
    pub(crate) stderr_tail: &'a str,
    /// What the Driver reads in an error result: a login, a rate limit, an outage.
    pub(crate) failure: Option<AgentFailure>,
    /// With no result line: the login the CLI's vendor refused before the first turn, as
    /// its Driver reads the stderr (a Gemini tier retired), in words.
    pub(crate) login_refused: Option<&'a str>,
    /// owl signalled the agent after its result line, because its teardown overran.
    pub(crate) signalled_after_result: bool,
    /// The agent outlived SIGKILL: why owl gave up on it.
    pub(crate) unkillable: Option<&'a str>,
}

/// Decides a Run's outcome and who it is charged to: from the agent's result line first,
/// the exit status only when there is none (the CLI reports API errors as `subtype:
/// success` with `is_error`).
pub(crate) fn classify(f: &RunFacts) -> Classified {
    let done = |outcome, reason: Option<String>, cause| Classified {
        outcome,
        stop_reason: reason,
        cause,
    };
    if let Some(why) = f.unkillable {
        return done(RunOutcome::Failed, Some(why.to_string()), Cause::Stopped);
    }
    if let Some(stop) = f.stop {
        let (outcome, cause) = match stop {
            StopCause::MaxRunTime | StopCause::Stalled => (RunOutcome::TimedOut, Cause::Job),
            StopCause::DiskFull(_) => (RunOutcome::Failed, Cause::DiskFull),
            StopCause::LogWrite(_) => (RunOutcome::Failed, Cause::Stopped),
            StopCause::RateLimited(_) => (RunOutcome::RateLimited, Cause::RateLimited),
            // What the Job's branch planted: the Job's doing.
            StopCause::Unconfigured(_) => (RunOutcome::Interrupted, Cause::Job),
            StopCause::Ceiling { .. }
            | StopCause::ExtraUsage(_)
            | StopCause::Cancelled
            | StopCause::Signal(_)
            | StopCause::LeaseLost(_) => (RunOutcome::Interrupted, Cause::Stopped),
        };
        return done(outcome, Some(stop.reason()), cause);
    }
    let Some(r) = f.result else {
        if let Some(why) = f.login_refused {
            // The vendor's refusal of the login, not the Job's doing: the Job waits for it.
            let why = format!("not logged in: {why}");
            return done(RunOutcome::Failed, Some(why), Cause::NotLoggedIn);
        }
        let tail = f.stderr_tail.trim();
        let exit = f.exit;
        let why = if tail.is_empty() {
            format!("the agent ended with {exit} and no result line")
        } else {
            format!("the agent ended with {exit} and no result line: {tail}")
        };
        // A crash is the Job's: it may be what the Job makes the agent do.
        return done(RunOutcome::Failed, Some(why), Cause::Job);
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
        return done(RunOutcome::BudgetExhausted, Some(said()), Cause::Job);
    }
    if r.is_error {
        if f.failure == Some(AgentFailure::NotLoggedIn) {
            let why = format!("not logged in: {}", said());
            return done(RunOutcome::Failed, Some(why), Cause::NotLoggedIn);
        }
        if f.failure == Some(AgentFailure::RateLimited) {
            return done(RunOutcome::RateLimited, Some(said()), Cause::RateLimited);
        }
        if f.failure == Some(AgentFailure::Unavailable) {
            let why = format!("the API is unavailable: {}", said());
            return done(RunOutcome::Failed, Some(why), Cause::Outage);
        }
        let why = match r.api_error_status {
            Some(status) => format!("API error {status}: {}", said()),
            None => said(),
        };
        return done(RunOutcome::Failed, Some(why), Cause::Job);
    }
    if r.subtype != "success" {
        return done(RunOutcome::Failed, Some(said()), Cause::Job);
    }
    // A success is a success however owl had to end the process after it.
    if f.exit.code != Some(0) && !f.signalled_after_result {
        let why = format!("the agent reported success but ended with {}", f.exit);
        return done(RunOutcome::Failed, Some(why), Cause::Job);
    }
    done(RunOutcome::Succeeded, None, Cause::Job)
}

/// How long an Account waits after its `outages`th Run in a row that could not reach the
/// model: 5 minutes, doubling, at most an hour.
pub(crate) fn outage_backoff(outages: u32) -> Duration {
    let minutes = 5i64.saturating_mul(1i64 << outages.saturating_sub(1).min(16));
    Duration::minutes(minutes.min(60))
}

/// Whether a Job has used up its Runs: `runs` counts only the Runs charged to the Job.
pub(crate) fn max_runs_reached(runs: u32, max_runs: u32) -> Option<JobReason> {
    (runs >= max_runs).then_some(JobReason::MaxRuns { runs })
}

/// Where a Job goes after a Run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JobTransition {
    pub(crate) state: JobState,
    pub(crate) reason: Option<JobReason>,
    pub(crate) not_before: Option<DateTime<Utc>>,
}

/// How long a rate-limited Job waits when the provider did not say when the limit resets.
pub(crate) const UNKNOWN_RESET_WAIT: Duration = Duration::minutes(30);

/// Until when a Run found on extra usage holds its Job and its Account: the reset the
/// event named, or (none, or one already past by this clock) [`UNKNOWN_RESET_WAIT`].
pub(crate) fn credits_wait(credits: &crate::model::OnCredits, now: DateTime<Utc>) -> DateTime<Utc> {
    credits
        .until
        .filter(|t| *t > now)
        .unwrap_or(now + UNKNOWN_RESET_WAIT)
}

/// The inputs to [`next_job_state`].
#[derive(Debug, Clone)]
pub(crate) struct AfterRun<'a> {
    pub(crate) outcome: &'a Classified,
    pub(crate) stop: Option<&'a StopCause>,
    /// When a `rejected` rate limit resets, if the agent said.
    pub(crate) rate_limit_reset: Option<DateTime<Utc>>,
    pub(crate) handoff: Result<Handoff, HandoffError>,
    /// Runs of this Job charged to it so far, this one included if it counts.
    pub(crate) runs: u32,
    pub(crate) max_runs: u32,
    /// What the Job's budget has left after this Run (`None`: no Job budget).
    pub(crate) budget_left: Option<f64>,
    /// What the Job's check found after this Run, when it ran (the agent said done).
    pub(crate) check: Option<&'a CheckRecord>,
    pub(crate) now: DateTime<Utc>,
}

/// Decides the Job's next state: a cancel first, then the waits (a ceiling, a rate
/// limit), then a Run that was not the Job's doing (queued again, never failed), then
/// the Handoff, then the budget and `maxRuns`.
pub(crate) fn next_job_state(a: &AfterRun) -> JobTransition {
    let to = |state, reason: Option<JobReason>, not_before| JobTransition {
        state,
        reason,
        not_before,
    };
    let wait_or_fail = |t: JobTransition| {
        if a.budget_left.is_some_and(|left| left <= 0.0) {
            let spent = JobReason::BudgetSpent {
                spent: None,
                budget: None,
            };
            to(JobState::Failed, Some(spent), None)
        } else if let Some(why) = max_runs_reached(a.runs, a.max_runs) {
            to(JobState::Failed, Some(why), None)
        } else {
            t
        }
    };
    match a.stop {
        Some(StopCause::Cancelled) => {
            return to(JobState::Cancelled, Some(JobReason::Cancelled), None)
        }
        Some(StopCause::Ceiling(crossing)) => {
            let reason = JobReason::Ceiling(crossing.clone());
            return to(JobState::Waiting, Some(reason), crossing.resets_at);
        }
        Some(StopCause::Unconfigured(what)) => return blocked_by_unconfigured(what),
        Some(StopCause::ExtraUsage(credits)) => {
            let reason = JobReason::ExtraUsage(credits.clone());
            return to(
                JobState::Waiting,
                Some(reason),
                Some(credits_wait(credits, a.now)),
            );
        }
        _ => {}
    }
    if a.outcome.outcome == RunOutcome::RateLimited {
        let until = a
            .rate_limit_reset
            .filter(|t| *t > a.now)
            .unwrap_or(a.now + UNKNOWN_RESET_WAIT);
        return to(JobState::Waiting, Some(JobReason::RateLimited), Some(until));
    }
    if !a.outcome.cause.counts() {
        // Not the Job's doing: it keeps its place and its Runs; the Account's note (a
        // login, an outage's back-off) or the free-space check keeps it from running
        // until the cause is gone.
        let reason = JobReason::NotTheJobs {
            cause: a.outcome.cause,
            why: a.outcome.stop_reason.clone().unwrap_or_default(),
        };
        return to(JobState::Queued, Some(reason), None);
    }
    match &a.handoff {
        Ok(h) => match h.status {
            HandoffStatus::Done => match a.check {
                // Without a check the agent's word decides; with one, its exit code does.
                None => to(JobState::Done, None, None),
                Some(check) => after_check(check, a, to(JobState::Done, None, None)),
            },
            HandoffStatus::Blocked => {
                let summary = h.summary();
                to(
                    JobState::Blocked,
                    Some(JobReason::Blocked { summary }),
                    None,
                )
            }
            HandoffStatus::Continue => wait_or_fail(to(JobState::Queued, None, None)),
        },
        Err(problem) => {
            let reason = JobReason::Handoff(problem.clone());
            wait_or_fail(to(JobState::Queued, Some(reason), None))
        }
    }
}

/// A Job whose Run's CLI used what owl did not configure: blocked for a person, never run
/// again on its own, since the next Run would start on the same files.
fn blocked_by_unconfigured(what: &str) -> JobTransition {
    let summary = format!(
        "its Run was stopped: the agent CLI used what owl did not configure: {what}; look at \
         the Job's branch (`owl show`), then `owl requeue` or cancel it"
    );
    JobTransition {
        state: JobState::Blocked,
        reason: Some(JobReason::Blocked { summary }),
        not_before: None,
    }
}

/// The Job's next state once the agent said done and its check ran: done when it passed;
/// blocked when it cannot start (the environment's fault, for a person); queued again when
/// it failed or did not finish, told why, and failed once the Runs reach `maxRuns` (or the
/// budget is spent) with the check still failing.
fn after_check(check: &CheckRecord, a: &AfterRun, done: JobTransition) -> JobTransition {
    let to = |state, reason| JobTransition {
        state,
        reason: Some(reason),
        not_before: None,
    };
    match check.status {
        CheckStatus::Passed => done,
        CheckStatus::CannotStart => to(
            JobState::Blocked,
            JobReason::CheckCannotStart(check.clone()),
        ),
        // owl was stopped: the check decides nothing, and the Job runs again.
        CheckStatus::NotFinished => to(JobState::Queued, JobReason::CheckFailed(check.clone())),
        CheckStatus::Failed | CheckStatus::TimedOut => {
            if a.budget_left.is_some_and(|left| left <= 0.0)
                || max_runs_reached(a.runs, a.max_runs).is_some()
            {
                to(
                    JobState::Failed,
                    JobReason::CheckStillFailing(check.clone()),
                )
            } else {
                to(JobState::Queued, JobReason::CheckFailed(check.clone()))
            }
        }
    }
}

/// Until when a reactive Account (its Driver reports no utilization) waits after this Run:
/// after a rate limit, the reset the agent named, or `backoff` from now.
pub(crate) fn reactive_wait(
    classified: &Classified,
    named_reset: Option<DateTime<Utc>>,
    backoff: std::time::Duration,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    if classified.cause != Cause::RateLimited {
        return None;
    }
    let backoff = Duration::from_std(backoff).unwrap_or(Duration::hours(1));
    Some(named_reset.filter(|t| *t > now).unwrap_or(now + backoff))
}

/// What a Run changes of its Account's note; `None` leaves that part as it is.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct AccountChange {
    /// `Some(Some(why))`: mark it not logged in; `Some(None)`: clear the mark.
    pub(crate) not_logged_in: Option<Option<String>>,
    /// `Some((until, outages))`: back off until then (`None`: no back-off) after that many
    /// outages in a row.
    pub(crate) backoff: Option<(Option<DateTime<Utc>>, u32)>,
}

/// What a Run tells of its Account beyond its Job: a missing login, an outage (the
/// Account backs off, longer each time), or that both are over because the model answered.
pub(crate) fn account_after_run(
    classified: &Classified,
    reached_model: bool,
    note: &AccountNote,
    now: DateTime<Utc>,
) -> AccountChange {
    let mut change = AccountChange::default();
    if classified.cause == Cause::NotLoggedIn {
        let why = classified.stop_reason.as_deref().unwrap_or("not logged in");
        change.not_logged_in = Some(Some(why.to_string()));
    } else if reached_model && note.not_logged_in.is_some() {
        change.not_logged_in = Some(None);
    }
    if classified.cause == Cause::Outage && !reached_model {
        let outages = note.outages + 1;
        change.backoff = Some((Some(now + outage_backoff(outages)), outages));
    } else if reached_model && (note.outages > 0 || note.backoff_until.is_some()) {
        change.backoff = Some((None, 0));
    }
    change
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::{AgentEvent, ClaudeCode, Driver};

    /// A recorded transcript of the real CLI, folded the way the supervisor folds it.
    struct Transcript {
        result: Option<AgentResult>,
        reached_model: bool,
        agent_error: Option<String>,
    }

    fn transcript(name: &str) -> Transcript {
        let path = format!(
            "{}/tests/fixtures/claude-code-2.1.197/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut t = Transcript {
            result: None,
            reached_model: false,
            agent_error: None,
        };
        for line in std::fs::read_to_string(path).unwrap().lines() {
            match ClaudeCode.parse_line(line.as_bytes()).unwrap() {
                AgentEvent::Assistant {
                    synthetic, error, ..
                } => {
                    t.reached_model |= !synthetic;
                    t.agent_error = error.or(t.agent_error.take());
                }
                AgentEvent::Result(r) => t.result = Some(r),
                _ => {}
            }
        }
        t
    }

    fn classify_transcript(name: &str, code: i32) -> Classified {
        let t = transcript(name);
        classify(&RunFacts {
            result: t.result.as_ref(),
            exit: exit(code),
            failure: t
                .result
                .as_ref()
                .and_then(|r| ClaudeCode.failure(r, t.agent_error.as_deref(), t.reached_model)),
            ..Default::default()
        })
    }

    fn exit(code: i32) -> ExitInfo {
        ExitInfo {
            code: Some(code),
            signal: None,
        }
    }

    fn oc(c: &Classified) -> (RunOutcome, Cause) {
        (c.outcome, c.cause)
    }

    #[test]
    fn a_success_is_the_jobs_run() {
        let c = classify_transcript("success.jsonl", 0);
        assert_eq!(oc(&c), (RunOutcome::Succeeded, Cause::Job));
        assert!(c.cause.counts());
    }

    #[test]
    fn an_empty_credential_store_is_not_logged_in() {
        // is_error, api_error_status null, "Not logged in · Please run /login".
        let c = classify_transcript("not-logged-in.jsonl", 1);
        assert_eq!(oc(&c), (RunOutcome::Failed, Cause::NotLoggedIn));
        assert_eq!(
            c.stop_reason.as_deref(),
            Some("not logged in: Not logged in · Please run /login")
        );
        assert!(!c.cause.counts());
    }

    #[test]
    fn an_expired_login_401_is_not_logged_in() {
        for name in ["api-401-oauth.jsonl", "api-401-max-retries-1.jsonl"] {
            let c = classify_transcript(name, 1);
            assert_eq!(oc(&c), (RunOutcome::Failed, Cause::NotLoggedIn), "{name}");
        }
    }

    #[test]
    fn an_unreachable_api_is_an_outage() {
        let c = classify_transcript("unreachable-default-retries.jsonl", 1);
        assert_eq!(oc(&c), (RunOutcome::Failed, Cause::Outage));
        assert!(c.stop_reason.unwrap().contains("Unable to connect to API"));
    }

    #[test]
    fn a_5xx_after_the_retries_is_an_outage() {
        let c = classify_transcript("api-500-max-retries-2.jsonl", 1);
        assert_eq!(oc(&c), (RunOutcome::Failed, Cause::Outage));
    }

    #[test]
    fn a_rate_limit_is_not_the_jobs() {
        for name in ["api-429-apikey.jsonl", "rate-limit-rejected.jsonl"] {
            let c = classify_transcript(name, 1);
            assert_eq!(
                oc(&c),
                (RunOutcome::RateLimited, Cause::RateLimited),
                "{name}"
            );
        }
    }

    #[test]
    fn a_spent_budget_is_the_jobs() {
        let c = classify_transcript("max-budget.jsonl", 1);
        assert_eq!(oc(&c), (RunOutcome::BudgetExhausted, Cause::Job));
    }

    #[test]
    fn other_errors_are_the_jobs() {
        let r = AgentResult {
            subtype: "error_during_execution".into(),
            is_error: true,
            text: Some("said".into()),
            ..Default::default()
        };
        let c = classify(&RunFacts {
            result: Some(&r),
            exit: exit(1),
            ..Default::default()
        });
        assert_eq!(oc(&c), (RunOutcome::Failed, Cause::Job));
        let r = AgentResult {
            subtype: "success".into(),
            ..Default::default()
        };
        let c = classify(&RunFacts {
            result: Some(&r),
            exit: exit(3),
            ..Default::default()
        });
        assert_eq!(oc(&c), (RunOutcome::Failed, Cause::Job));
    }

    #[test]
    fn a_signal_owl_sent_after_a_success_keeps_it_a_success() {
        let t = transcript("success.jsonl");
        let c = classify(&RunFacts {
            result: t.result.as_ref(),
            exit: exit(143),
            signalled_after_result: true,
            ..Default::default()
        });
        assert_eq!(oc(&c), (RunOutcome::Succeeded, Cause::Job));
    }

    #[test]
    fn no_result_line_is_a_crash_with_the_stderr_tail() {
        let c = classify(&RunFacts {
            exit: exit(143),
            stderr_tail: "boom\n",
            ..Default::default()
        });
        assert_eq!(oc(&c), (RunOutcome::Failed, Cause::Job));
        assert_eq!(
            c.stop_reason.unwrap(),
            "the agent ended with exit code 143 and no result line: boom"
        );
    }

    #[test]
    fn a_stop_cause_decides_who_is_charged() {
        let t = transcript("interrupt-control-request.jsonl");
        let with = |stop: StopCause| {
            classify(&RunFacts {
                result: t.result.as_ref(),
                exit: exit(1),
                stop: Some(&stop),
                ..Default::default()
            })
        };
        assert_eq!(
            oc(&with(StopCause::MaxRunTime)),
            (RunOutcome::TimedOut, Cause::Job)
        );
        assert_eq!(
            oc(&with(StopCause::Stalled)),
            (RunOutcome::TimedOut, Cause::Job)
        );
        let ceiling = with(StopCause::Ceiling(crate::model::Crossing {
            window: "five_hour".into(),
            percent: 63.0,
            limit: "fiveHourMax".into(),
            ceiling: 60.0,
            resets_at: None,
        }));
        assert_eq!(oc(&ceiling), (RunOutcome::Interrupted, Cause::Stopped));
        assert_eq!(
            ceiling.stop_reason.as_deref(),
            Some("ceiling: five_hour 63% >= fiveHourMax 60")
        );
        let sig = with(StopCause::Signal("SIGTERM"));
        assert_eq!(oc(&sig), (RunOutcome::Interrupted, Cause::Stopped));
        assert_eq!(sig.stop_reason.as_deref(), Some("owl received SIGTERM"));
        let disk = with(StopCause::DiskFull("No space left on device".into()));
        assert_eq!(oc(&disk), (RunOutcome::Failed, Cause::DiskFull));
        assert!(disk.stop_reason.unwrap().starts_with("disk full: "));
        let unkillable = classify(&RunFacts {
            unkillable: Some("the agent could not be killed: pid 7 in state D"),
            ..Default::default()
        });
        assert_eq!(oc(&unkillable), (RunOutcome::Failed, Cause::Stopped));
    }

    #[test]
    fn causes_round_trip_through_their_names() {
        for c in Cause::ALL {
            assert_eq!(c.as_str().parse::<Cause>().unwrap(), c);
        }
    }

    fn after(
        outcome: RunOutcome,
        handoff: Result<Handoff, HandoffError>,
        runs: u32,
    ) -> JobTransition {
        after_cause(outcome, Cause::Job, handoff, runs)
    }

    fn after_cause(
        outcome: RunOutcome,
        cause: Cause,
        handoff: Result<Handoff, HandoffError>,
        runs: u32,
    ) -> JobTransition {
        let now = crate::clock::parse("2026-11-30T02:00:00Z").unwrap();
        let c = Classified {
            outcome,
            stop_reason: Some("not logged in: Not logged in · Please run /login".into()),
            cause,
        };
        next_job_state(&AfterRun {
            outcome: &c,
            stop: None,
            rate_limit_reset: None,
            handoff,
            runs,
            max_runs: 3,
            budget_left: None,
            check: None,
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
            (b.state, b.reason),
            (
                JobState::Blocked,
                Some(JobReason::Blocked {
                    summary: "needs a token".into()
                })
            )
        );
        let missing = after(RunOutcome::Succeeded, Err(HandoffError::Missing), 1);
        assert_eq!(missing.state, JobState::Queued);
        assert_eq!(
            missing.reason,
            Some(JobReason::Handoff(HandoffError::Missing))
        );
        assert_eq!(
            missing.reason.unwrap().to_string(),
            "warning: the Run left no .owl/handoff.md"
        );
        let spent = after(RunOutcome::Succeeded, h("status: continue\n"), 3);
        assert_eq!(spent.state, JobState::Failed);
        assert_eq!(spent.reason, Some(JobReason::MaxRuns { runs: 3 }));
        // done on the last Run is still done
        assert_eq!(
            after(RunOutcome::Succeeded, h("status: done\n"), 3).state,
            JobState::Done
        );
    }

    #[test]
    fn rate_limited_waits_for_the_reset_or_a_default() {
        let t = after(RunOutcome::RateLimited, Err(HandoffError::Missing), 1);
        assert_eq!(t.state, JobState::Waiting);
        let now = crate::clock::parse("2026-11-30T02:00:00Z").unwrap();
        assert_eq!(t.not_before, Some(now + UNKNOWN_RESET_WAIT));
    }

    #[test]
    fn a_run_not_charged_to_the_job_never_fails_it() {
        // At maxRuns, with no Handoff: the Job's own Run would fail it.
        let t = after_cause(
            RunOutcome::Failed,
            Cause::NotLoggedIn,
            Err(HandoffError::Missing),
            3,
        );
        assert_eq!(t.state, JobState::Queued);
        assert!(
            matches!(
                &t.reason,
                Some(JobReason::NotTheJobs { cause: Cause::NotLoggedIn, why }) if why.contains("not logged in")
            ),
            "{:?}",
            t.reason
        );
        for cause in [Cause::Outage, Cause::DiskFull, Cause::Stopped] {
            let t = after_cause(RunOutcome::Failed, cause, Err(HandoffError::Missing), 3);
            assert_eq!(t.state, JobState::Queued, "{cause:?}");
        }
        let t = after_cause(
            RunOutcome::Failed,
            Cause::Job,
            Err(HandoffError::Missing),
            3,
        );
        assert_eq!(t.state, JobState::Failed);
    }

    #[test]
    fn an_outage_backs_off_doubling_up_to_an_hour() {
        let m = |n| outage_backoff(n).num_minutes();
        assert_eq!(
            [m(1), m(2), m(3), m(4), m(5), m(40)],
            [5, 10, 20, 40, 60, 60]
        );
    }

    #[test]
    fn a_run_tells_its_account_of_a_login_and_an_outage_and_that_both_are_over() {
        let now = crate::clock::parse("2026-11-30T03:00:00Z").unwrap();
        let classified = |cause, reason: Option<&str>| Classified {
            outcome: RunOutcome::Failed,
            stop_reason: reason.map(String::from),
            cause,
        };
        let none = AccountNote::default();
        let login = account_after_run(
            &classified(Cause::NotLoggedIn, Some("401")),
            false,
            &none,
            now,
        );
        assert_eq!(login.not_logged_in, Some(Some("401".into())));
        let outage = AccountNote {
            outages: 2,
            ..AccountNote::default()
        };
        let again = account_after_run(&classified(Cause::Outage, None), false, &outage, now);
        assert_eq!(again.backoff, Some((Some(now + outage_backoff(3)), 3)));
        let marked = AccountNote {
            not_logged_in: Some("401".into()),
            outages: 2,
            ..AccountNote::default()
        };
        let answered = account_after_run(&classified(Cause::Job, None), true, &marked, now);
        assert_eq!(answered.not_logged_in, Some(None));
        assert_eq!(answered.backoff, Some((None, 0)));
        let quiet = account_after_run(&classified(Cause::Job, None), true, &none, now);
        assert_eq!(quiet, AccountChange::default());
    }

    #[test]
    fn a_reactive_account_waits_for_the_named_reset_or_its_backoff() {
        let now = crate::clock::parse("2026-12-01T03:00:00Z").unwrap();
        let limited = Classified {
            outcome: RunOutcome::RateLimited,
            stop_reason: None,
            cause: Cause::RateLimited,
        };
        let hour = std::time::Duration::from_secs(3600);
        let named = now + Duration::seconds(2);
        assert_eq!(reactive_wait(&limited, Some(named), hour, now), Some(named));
        assert_eq!(
            reactive_wait(&limited, None, hour, now),
            Some(now + Duration::hours(1))
        );
        // A reset already past says nothing: the backoff holds.
        assert_eq!(
            reactive_wait(&limited, Some(now - Duration::seconds(1)), hour, now),
            Some(now + Duration::hours(1))
        );
        let job = Classified {
            cause: Cause::Job,
            ..limited
        };
        assert_eq!(reactive_wait(&job, Some(named), hour, now), None);
    }
}
