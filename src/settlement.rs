//! A Run's settlement, decided: from what the Run reported, what is known of its Job and Account, and the time, the Run's record, its Job's next state and its Account's holds; pure (the tick does git before it and the one write after).

use chrono::{DateTime, Utc};

use crate::config::Account;
use crate::driver;
use crate::handoff::{Handoff, HandoffError};
use crate::model::{
    Cause, CheckRecord, Job, JobReason, JobState, RejectionHold, RunFinish, RunOutcome, Settlement,
    StopCause,
};
use crate::outcome::{self, AfterRun, Classified, RunReport};

/// What git made of the Job's working copy after the Run (the tick's doing, before the
/// settlement).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct GitAfter {
    /// Why the clone was left alone whole: what the Run planted in its `.git`.
    pub(crate) tampered: Option<String>,
    /// owl's commit of what the Run left uncommitted.
    pub(crate) safety_commit: Option<String>,
    /// What went wrong bringing a sandboxed Run's branch home, if anything.
    pub(crate) published: Option<String>,
    /// The Job's branch head after all that.
    pub(crate) head_after: Option<String>,
    /// The commits the Run added to the branch, counted then.
    pub(crate) commits: Option<i64>,
    /// What the seal undid, in words.
    pub(crate) neutralised: Option<String>,
    /// Why the working copy's head is not what the repository holds under the Job's branch,
    /// when the agent said done and it is not: nothing is checked or called done then.
    pub(crate) not_home: Option<String>,
}

/// What is known of the Run's Job and Account when it ends, besides its report.
#[derive(Debug)]
pub(crate) struct Facts<'a> {
    pub(crate) run_id: i64,
    pub(crate) job: &'a Job,
    pub(crate) account_name: &'a str,
    pub(crate) account: &'a Account,
    /// The Job's Runs charged to it before this one.
    pub(crate) counted_runs: u32,
    /// What the Job's Runs cost before this one.
    pub(crate) spent_usd: f64,
    /// This Run's `--max-budget-usd`.
    pub(crate) budget_usd: Option<f64>,
    /// The Handoff's text on the Job's branch after the Run, or why there is none to read.
    pub(crate) handoff: Result<Option<String>, HandoffError>,
    pub(crate) git: GitAfter,
    /// A provider's rejection held the Account before this Run.
    pub(crate) rejection_held: bool,
    /// What the Job's check found after the Run, when it ran.
    pub(crate) check: Option<CheckRecord>,
}

/// Decides how the Run ended and what that does to its Job and Account.
pub(crate) fn settle(
    report: &RunReport,
    facts: &Facts,
    now: DateTime<Utc>,
) -> (Settlement, Classified) {
    let account = facts.account;
    let driver = driver::for_kind(account.driver);
    let classified = classify(report, account, driver.as_ref());
    let transition = transition_of(report, facts, &classified, driver.as_ref(), now);
    // A tampered clone is the user's to look at before any Run works there again.
    let not_home = facts
        .git
        .not_home
        .as_ref()
        .filter(|_| transition.state == JobState::Done);
    let (job_state, job_reason, not_before) = match (&facts.git.tampered, not_home) {
        (Some(why), _) => (
            JobState::Blocked,
            Some(JobReason::Blocked {
                summary: why.clone(),
            }),
            None,
        ),
        // Done is what the user merges and a hook pushes: the very commit on the branch.
        (None, Some(why)) => (
            JobState::Blocked,
            Some(JobReason::Blocked {
                summary: format!(
                    "the agent said done, but its work is not on {} in {}: {why}; nothing \
                     was checked or called done: bring the work home by hand (or drop it), \
                     then `owl requeue {}`",
                    facts.job.branch(),
                    facts.job.repo,
                    facts.job.id
                ),
            }),
            None,
        ),
        (None, None) => (
            transition.state,
            transition.reason.clone(),
            transition.not_before,
        ),
    };
    // A provider's rejection holds the whole Account, ceilings or not and for every Driver,
    // as long as it holds this Job: no other Job is started into the same rejection.
    let rejected_until = (classified.cause == Cause::RateLimited)
        .then_some(transition.not_before)
        .flatten()
        .filter(|t| *t > now);
    let settlement = Settlement {
        run_id: facts.run_id,
        job_id: facts.job.id.clone(),
        account: facts.account_name.to_string(),
        finish: finish(report, facts, &classified),
        job_state,
        job_reason,
        not_before,
        // The Account as a whole is on credits, not only this Job: held until the reset.
        on_credits: match &report.stop {
            Some(StopCause::ExtraUsage(credits)) => Some((
                credits.window.clone().unwrap_or_else(|| "a window".into()),
                outcome::credits_wait(credits, now),
            )),
            _ => None,
        },
        rejection: match rejected_until {
            Some(until) => Some(RejectionHold::Until(until)),
            None => (report.reached_model && facts.rejection_held).then_some(RejectionHold::Lifted),
        },
        ended_at: now,
    };
    (settlement, classified)
}

/// The Job's next state from how the Run ended, its Handoff, its Runs and budget, and when
/// a limit resets.
fn transition_of(
    report: &RunReport,
    facts: &Facts,
    classified: &Classified,
    driver: &dyn driver::Driver,
    now: DateTime<Utc>,
) -> outcome::JobTransition {
    let account = facts.account;
    let r = report.result.as_ref();
    // Without a result line the Run may have spent up to its cap.
    let this_cost = r
        .and_then(|r| r.cost_usd)
        .or(facts.budget_usd.filter(|_| !report.never_started))
        .unwrap_or(0.0);
    // When the limit resets: the agent's rate-limit event, the words of its error, or the
    // reset of a Window it reported full.
    let named_reset = report
        .rate_limit_reset
        .and_then(|s| DateTime::from_timestamp(s, 0))
        .or_else(|| r.and_then(|r| driver.named_reset(r, now)))
        .or(report.full_window_reset);
    // A reactive Account (no utilization to watch) waits as a whole after a rate limit:
    // until the reset it was told, or its `backoff`.
    let reactive_wait = (!driver.capabilities().usage_reporting)
        .then(|| outcome::reactive_wait(classified, named_reset, account.backoff, now))
        .flatten();
    let handoff = match &facts.handoff {
        Ok(Some(text)) => Handoff::parse(text),
        Ok(None) => Err(HandoffError::Missing),
        Err(e) => Err(e.clone()),
    };
    outcome::next_job_state(&AfterRun {
        outcome: classified,
        stop: report.stop.as_ref(),
        rate_limit_reset: reactive_wait.or(named_reset),
        handoff,
        runs: facts.counted_runs + u32::from(classified.cause.counts()),
        max_runs: facts.job.max_runs,
        budget_left: crate::budget::job_budget_left(facts.job, facts.spent_usd, this_cost),
        check: facts.check.as_ref(),
        now,
    })
}

/// How the Run ended, its words scrubbed of the Account's credentials.
pub(crate) fn classify(
    report: &RunReport,
    account: &Account,
    driver: &dyn driver::Driver,
) -> Classified {
    let mut classified = outcome::classify(&outcome::RunFacts {
        result: report.result.as_ref(),
        exit: report.exit,
        stop: report.stop.as_ref(),
        stderr_tail: &report.stderr_tail,
        failure: report
            .result
            .as_ref()
            .and_then(|r| driver.failure(r, report.agent_error.as_deref(), report.reached_model)),
        signalled_after_result: report.signalled_after_result,
        unkillable: report.unkillable.as_deref(),
        login_refused: report
            .result
            .is_none()
            .then(|| driver.login_refused(&report.stderr_tail))
            .flatten()
            .as_deref(),
    });
    if report.never_started && report.stop.is_none() {
        // owl's failure, not the Job's: it neither counts toward maxRuns nor costs.
        classified = Classified {
            outcome: RunOutcome::Failed,
            stop_reason: Some(report.stderr_tail.clone()),
            cause: Cause::Stopped,
        };
    }
    // What the agent printed may echo the Account's credentials: never stored.
    classified.stop_reason = classified.stop_reason.map(|s| account.env.scrub(&s));
    classified
}

/// The Run's own record.
fn finish(report: &RunReport, facts: &Facts, classified: &Classified) -> RunFinish {
    let env = &facts.account.env;
    let r = report.result.as_ref();
    let git = &facts.git;
    RunFinish {
        outcome: Some(classified.outcome),
        stop_reason: classified.stop_reason.clone(),
        exit_code: report.exit.code.or(report.exit.signal.map(|s| 128 + s)),
        session_id: report.session_id.clone(),
        cost_usd: r
            .and_then(|r| r.cost_usd)
            .or(report.never_started.then_some(0.0)),
        num_turns: r.and_then(|r| r.num_turns),
        input_tokens: r.and_then(|r| r.input_tokens),
        output_tokens: r.and_then(|r| r.output_tokens),
        permission_denials: r
            .map(|r| r.permission_denials.clone())
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| report.denials.clone()),
        api_retries: report.api_retries,
        last_event: report.last_event.as_deref().map(|e| env.scrub(e)),
        survivors_killed: Some(report.survivors_killed as i64),
        skipped_lines: Some(report.skipped_lines as i64),
        head_after: git.head_after.clone(),
        commits: git.commits,
        safety_commit: git.safety_commit.clone(),
        cause: Some(classified.cause),
        note: report
            .late_stop
            .as_ref()
            .map(|c| env.scrub(&format!("after the result: {}", c.reason())))
            .into_iter()
            .chain(report.network.clone())
            .chain(git.tampered.clone())
            .chain(git.neutralised.clone())
            .chain(git.published.clone())
            .reduce(|a, b| format!("{a}; {b}")),
        stop: report.stop.as_ref().map(StopCause::kind),
        // What the check printed is the agent's work speaking: it may echo a secret.
        check: facts.check.clone().map(|mut c| {
            c.detail = c.detail.map(|d| env.scrub(&d));
            c
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::{AgentEvent, ClaudeCode, Driver, RateLimitStatus};
    use crate::model::{CheckStatus, ExitInfo, OnCredits};

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().to_utc()
    }

    const NOW: &str = "2026-11-30T03:00:00Z";

    /// A recorded transcript of the real CLI, folded into a report as the supervisor
    /// folds it, with the CLI's exit code.
    fn reported(name: &str, code: i32) -> RunReport {
        let path = format!(
            "{}/tests/fixtures/claude-code-2.1.197/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut report = RunReport {
            exit: ExitInfo {
                code: Some(code),
                signal: None,
            },
            ..Default::default()
        };
        for line in std::fs::read_to_string(path).unwrap().lines() {
            match ClaudeCode.parse_line(line.as_bytes()).unwrap() {
                AgentEvent::Assistant {
                    synthetic, error, ..
                } => {
                    report.reached_model |= !synthetic;
                    report.agent_error = error.or(report.agent_error.take());
                }
                AgentEvent::RateLimit(info) if info.status == RateLimitStatus::Rejected => {
                    report.rate_limit_reset = info.resets_at;
                }
                AgentEvent::Result(r) => {
                    report.session_id = r.session_id.clone();
                    report.result = Some(r);
                }
                _ => {}
            }
        }
        report
    }

    fn job() -> Job {
        Job {
            id: "j1".into(),
            max_runs: 5,
            ..Default::default()
        }
    }

    fn settle_with(
        report: &RunReport,
        handoff: Option<&str>,
        git: GitAfter,
        held: bool,
    ) -> (Settlement, Classified) {
        let (job, account) = (job(), Account::plain());
        let facts = Facts {
            run_id: 7,
            job: &job,
            account_name: "work",
            account: &account,
            counted_runs: 1,
            spent_usd: 0.5,
            budget_usd: Some(2.0),
            handoff: Ok(handoff.map(String::from)),
            git,
            check: None,
            rejection_held: held,
        };
        settle(report, &facts, at(NOW))
    }

    /// A Run of the recorded success transcript that hands off done, with what its check
    /// found, its Job at its `counted` Runs before this one of `max_runs`.
    fn settle_checked(status: CheckStatus, counted: u32, max_runs: u32) -> Settlement {
        let report = reported("success.jsonl", 0);
        let job = Job { max_runs, ..job() };
        let account = Account::plain();
        let facts = Facts {
            run_id: 7,
            job: &job,
            account_name: "work",
            account: &account,
            counted_runs: counted,
            spent_usd: 0.0,
            budget_usd: None,
            handoff: Ok(Some("status: done\n\nAll done.\n".into())),
            git: GitAfter::default(),
            rejection_held: false,
            check: Some(CheckRecord {
                command: vec!["sh".into(), "-c".into(), "test -f fixed".into()],
                status,
                exit_code: (status == CheckStatus::Failed).then_some(1),
                duration_ms: 20,
                detail: None,
                commit: None,
            }),
        };
        settle(&report, &facts, at(NOW)).0
    }

    #[test]
    fn a_done_run_is_done_only_when_its_check_passes() {
        let passed = settle_checked(CheckStatus::Passed, 0, 5);
        assert_eq!(passed.job_state, JobState::Done);
        assert_eq!(
            passed.finish.check.as_ref().map(|c| c.status),
            Some(CheckStatus::Passed)
        );
        for status in [CheckStatus::Failed, CheckStatus::TimedOut] {
            let failed = settle_checked(status, 0, 5);
            assert_eq!(failed.job_state, JobState::Queued, "{status:?}");
            assert!(matches!(failed.job_reason, Some(JobReason::CheckFailed(_))));
            // The Run counts toward maxRuns like any in which the model worked.
            assert_eq!(failed.finish.cause, Some(Cause::Job));
        }
        // At maxRuns the Job fails, saying the check still fails.
        let last = settle_checked(CheckStatus::Failed, 4, 5);
        assert_eq!(last.job_state, JobState::Failed);
        let reason = last.job_reason.unwrap();
        assert!(matches!(reason, JobReason::CheckStillFailing(_)));
        assert_eq!(
            reason.to_string(),
            "check still failing: `sh -c 'test -f fixed'` exited 1 after 0s"
        );
    }

    #[test]
    fn a_check_that_cannot_start_blocks_and_one_cut_short_decides_nothing() {
        let missing = settle_checked(CheckStatus::CannotStart, 4, 5);
        assert_eq!(missing.job_state, JobState::Blocked);
        assert!(matches!(
            missing.job_reason,
            Some(JobReason::CheckCannotStart(_))
        ));
        assert!(missing
            .job_reason
            .unwrap()
            .to_string()
            .contains("owl requeue"));
        let stopped = settle_checked(CheckStatus::NotFinished, 4, 5);
        assert_eq!(stopped.job_state, JobState::Queued);
        assert!(stopped
            .job_reason
            .unwrap()
            .to_string()
            .contains("did not finish"));
    }

    #[test]
    fn a_run_that_hands_off_done_is_done_with_its_cost_and_session() {
        let report = reported("success.jsonl", 0);
        let git = GitAfter {
            head_after: Some("abc".into()),
            ..Default::default()
        };
        let (s, c) = settle_with(&report, Some("status: done\n\nAll done.\n"), git, false);
        assert_eq!(c.outcome, RunOutcome::Succeeded);
        assert_eq!(s.job_state, JobState::Done);
        assert_eq!(s.finish.outcome, Some(RunOutcome::Succeeded));
        assert_eq!(s.finish.cause, Some(Cause::Job));
        assert_eq!(s.finish.head_after.as_deref(), Some("abc"));
        assert_eq!(
            s.finish.session_id.as_deref(),
            Some("7859bb08-6e62-4362-bef3-c4e1b305f720")
        );
        assert!(s.finish.cost_usd.unwrap() > 0.0);
        assert_eq!(
            (s.run_id, s.job_id.as_str(), s.account.as_str()),
            (7, "j1", "work")
        );
        assert_eq!(s.ended_at, at(NOW));
        assert_eq!(s.rejection, None);
    }

    #[test]
    fn a_rejection_waits_the_job_and_holds_the_account_until_the_reset() {
        let report = reported("rate-limit-rejected.jsonl", 1);
        let (s, c) = settle_with(&report, None, GitAfter::default(), false);
        assert_eq!(c.outcome, RunOutcome::RateLimited);
        assert_eq!(s.job_state, JobState::Waiting);
        let until = s.not_before.expect("the reset");
        assert!(until > at(NOW));
        assert_eq!(s.rejection, Some(RejectionHold::Until(until)));
    }

    #[test]
    fn a_run_past_a_rejection_lifts_it_and_one_without_the_model_does_not() {
        let (s, _) = settle_with(
            &reported("success.jsonl", 0),
            None,
            GitAfter::default(),
            true,
        );
        assert_eq!(s.rejection, Some(RejectionHold::Lifted));
        let (s, _) = settle_with(
            &reported("not-logged-in.jsonl", 1),
            None,
            GitAfter::default(),
            true,
        );
        assert_eq!(s.rejection, None);
    }

    #[test]
    fn no_login_is_not_the_jobs_and_costs_nothing_more() {
        let (s, c) = settle_with(
            &reported("not-logged-in.jsonl", 1),
            None,
            GitAfter::default(),
            false,
        );
        assert_eq!(c.cause, Cause::NotLoggedIn);
        assert!(!c.cause.counts());
        assert_eq!(s.job_state, JobState::Queued);
    }

    #[test]
    fn a_run_owl_never_started_is_owls_failure_at_no_cost() {
        let report = RunReport {
            stderr_tail: "owl could not run the agent: no such file".into(),
            never_started: true,
            ..Default::default()
        };
        let (s, c) = settle_with(&report, None, GitAfter::default(), false);
        assert_eq!((c.outcome, c.cause), (RunOutcome::Failed, Cause::Stopped));
        assert_eq!(s.finish.cost_usd, Some(0.0));
        assert_eq!(s.job_state, JobState::Queued);
    }

    #[test]
    fn done_with_the_work_not_on_the_repositorys_branch_is_blocked_not_done() {
        let git = GitAfter {
            not_home: Some("the Run rewrote owl/x's history".into()),
            ..Default::default()
        };
        let (s, _) = settle_with(
            &reported("success.jsonl", 0),
            Some("status: done\n"),
            git.clone(),
            false,
        );
        assert_eq!(s.job_state, JobState::Blocked);
        let reason = s.job_reason.unwrap().to_string();
        assert!(
            reason.contains("rewrote") && reason.contains("owl requeue"),
            "{reason}"
        );
        // Only a done is held to it: a Run that goes on is not blocked for it.
        let (s, _) = settle_with(
            &reported("success.jsonl", 0),
            Some("status: continue\n"),
            git,
            false,
        );
        assert_eq!(s.job_state, JobState::Queued);
    }

    #[test]
    fn a_tampered_clone_blocks_the_job_and_says_why_in_the_note() {
        let git = GitAfter {
            tampered: Some("the clone's .git/hooks is a symlink".into()),
            published: Some("the branch was not brought into the repository".into()),
            ..Default::default()
        };
        let (s, _) = settle_with(
            &reported("success.jsonl", 0),
            Some("status: done\n"),
            git,
            false,
        );
        assert_eq!(s.job_state, JobState::Blocked);
        assert_eq!(s.not_before, None);
        assert_eq!(
            s.finish.note.as_deref(),
            Some("the clone's .git/hooks is a symlink; the branch was not brought into the repository")
        );
    }

    #[test]
    fn extra_usage_holds_the_account_on_credits_until_the_windows_reset() {
        let mut report = reported("success.jsonl", 0);
        report.stop = Some(StopCause::ExtraUsage(OnCredits {
            window: Some("five_hour".into()),
            until: Some(at("2026-11-30T05:00:00Z")),
        }));
        let (s, c) = settle_with(&report, None, GitAfter::default(), false);
        assert_eq!(c.outcome, RunOutcome::Interrupted);
        assert_eq!(
            s.on_credits,
            Some(("five_hour".into(), at("2026-11-30T05:00:00Z")))
        );
    }

    #[test]
    fn the_agents_words_are_scrubbed_of_the_accounts_credentials() {
        let mut account = Account::plain();
        account.env.0.insert(
            "CLAUDE_CODE_OAUTH_TOKEN".into(),
            "sk-ant-oat01-SECRET-TOKEN".into(),
        );
        let report = RunReport {
            exit: ExitInfo {
                code: Some(1),
                signal: None,
            },
            stderr_tail: "auth failed for sk-ant-oat01-SECRET-TOKEN".into(),
            last_event: Some("token sk-ant-oat01-SECRET-TOKEN".into()),
            ..Default::default()
        };
        let job = job();
        let facts = Facts {
            run_id: 1,
            job: &job,
            account_name: "work",
            account: &account,
            counted_runs: 0,
            spent_usd: 0.0,
            budget_usd: None,
            handoff: Ok(None),
            check: None,
            git: GitAfter::default(),
            rejection_held: false,
        };
        let (s, _) = settle(&report, &facts, at(NOW));
        let said = format!("{:?} {:?}", s.finish.stop_reason, s.finish.last_event);
        assert!(!said.contains("SECRET"), "{said}");
    }
}
