//! The vocabulary of DESIGN.md: Job, Run, Snapshot and their states, as owl holds them in memory.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::handoff::HandoffError;
use crate::text::fmt_percent;

mod stop;
pub(crate) use stop::*;

mod usage;
pub(crate) use usage::*;

mod check;
pub(crate) use check::*;

/// A stored name (a state, an outcome, a cause) this owl does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} '{name}'")]
pub(crate) struct UnknownName {
    pub(crate) what: &'static str,
    pub(crate) name: String,
}

impl UnknownName {
    /// The one of `all` whose name is `name`, or this error.
    fn find<T: Copy>(
        all: &[T],
        name_of: fn(T) -> &'static str,
        what: &'static str,
        name: &str,
    ) -> Result<T, UnknownName> {
        all.iter()
            .copied()
            .find(|x| name_of(*x) == name)
            .ok_or_else(|| UnknownName {
                what,
                name: name.to_string(),
            })
    }
}

/// Where a Job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum JobState {
    #[default]
    Queued,
    Running,
    /// Waits until `not_before`, e.g. a Window's reset.
    Waiting,
    Done,
    Blocked,
    Failed,
    Cancelled,
}

impl JobState {
    /// Every state, in lifecycle order.
    pub(crate) const ALL: [JobState; 7] = [
        JobState::Queued,
        JobState::Running,
        JobState::Waiting,
        JobState::Done,
        JobState::Blocked,
        JobState::Failed,
        JobState::Cancelled,
    ];

    /// The name stored and printed.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Waiting => "waiting",
            JobState::Done => "done",
            JobState::Blocked => "blocked",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    /// A finished Job is never picked again unless a person requeues it.
    pub(crate) fn is_finished(self) -> bool {
        matches!(
            self,
            JobState::Done | JobState::Blocked | JobState::Failed | JobState::Cancelled
        )
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JobState {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        UnknownName::find(&JobState::ALL, JobState::as_str, "job state", s)
    }
}

/// How a Run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RunOutcome {
    Succeeded,
    /// The agent reported an error, exited non-zero, or never said how it ended.
    Failed,
    /// Stopped by owl: a ceiling, a cancel, or owl itself being told to stop.
    Interrupted,
    TimedOut,
    BudgetExhausted,
    /// Rejected by the provider's rate limiter.
    RateLimited,
    /// The supervising tick died; found by a later tick.
    Lost,
}

impl RunOutcome {
    const ALL: [RunOutcome; 7] = [
        RunOutcome::Succeeded,
        RunOutcome::Failed,
        RunOutcome::Interrupted,
        RunOutcome::TimedOut,
        RunOutcome::BudgetExhausted,
        RunOutcome::RateLimited,
        RunOutcome::Lost,
    ];

    /// The name stored and printed.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Succeeded => "succeeded",
            RunOutcome::Failed => "failed",
            RunOutcome::Interrupted => "interrupted",
            RunOutcome::TimedOut => "timed_out",
            RunOutcome::BudgetExhausted => "budget_exhausted",
            RunOutcome::RateLimited => "rate_limited",
            RunOutcome::Lost => "lost",
        }
    }
}

impl fmt::Display for RunOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RunOutcome {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        UnknownName::find(&RunOutcome::ALL, RunOutcome::as_str, "run outcome", s)
    }
}

/// A unit of work: a prompt against a repository at a base ref.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Job {
    pub(crate) id: String,
    pub(crate) name: Option<String>,
    pub(crate) prompt: String,
    pub(crate) repo: String,
    pub(crate) base: String,
    /// The commit `base` named when the Job was queued: the branch starts there, whatever
    /// the ref points at by the time the first Run starts.
    pub(crate) base_commit: Option<String>,
    /// `None`: any schedulable Account.
    pub(crate) account: Option<String>,
    pub(crate) priority: i64,
    pub(crate) max_runs: u32,
    pub(crate) max_run_time_secs: u64,
    pub(crate) max_budget_usd: Option<f64>,
    pub(crate) max_job_budget_usd: Option<f64>,
    pub(crate) permission_mode: String,
    pub(crate) allowed_tools: Vec<String>,
    pub(crate) disallowed_tools: Vec<String>,
    pub(crate) model: Option<String>,
    /// The check its work must pass to be done; `None`: the agent's word decides.
    pub(crate) check: Option<Check>,
    /// The Jobs it waits for: it runs once every one of them is done.
    pub(crate) after: Vec<String>,
    /// The Job whose branch tip it starts from, resolved when its first Run prepares its
    /// worktree (so the work stacks); `None`: `base` as given.
    pub(crate) base_after: Option<String>,
    /// The machine it runs on (its repository is that machine's path); `None`: a Job
    /// from before machines, on a store one machine had.
    pub(crate) machine: Option<String>,
    /// More hosts its sandboxed Runs may reach through owl's proxy (`add --allow-host`).
    pub(crate) allow_hosts: Vec<String>,
    pub(crate) state: JobState,
    /// Why the Job is in its state, in words (e.g. the Handoff's blocked reason).
    pub(crate) reason: Option<JobReason>,
    pub(crate) not_before: Option<DateTime<Utc>>,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) updated_at: DateTime<Utc>,
}

impl Job {
    /// The Job's branch in its repository.
    pub(crate) fn branch(&self) -> String {
        format!("{BRANCH_PREFIX}{}", self.id)
    }
}

/// Every Job's branch is this and its id.
pub(crate) const BRANCH_PREFIX: &str = "owl/";

/// A Job as `owl add` describes it, before it has an id.
#[derive(Debug, Clone)]
pub(crate) struct NewJob {
    pub(crate) id: String,
    pub(crate) name: Option<String>,
    pub(crate) prompt: String,
    pub(crate) repo: String,
    pub(crate) base: String,
    /// The commit `base` named at `add`; `None` for a Job added on another machine for
    /// this one, whose base is resolved at its first Run.
    pub(crate) base_commit: Option<String>,
    pub(crate) account: Option<String>,
    pub(crate) priority: i64,
    pub(crate) max_runs: u32,
    pub(crate) max_run_time_secs: u64,
    pub(crate) max_budget_usd: Option<f64>,
    pub(crate) max_job_budget_usd: Option<f64>,
    pub(crate) permission_mode: String,
    pub(crate) allowed_tools: Vec<String>,
    pub(crate) disallowed_tools: Vec<String>,
    pub(crate) model: Option<String>,
    pub(crate) check: Option<Check>,
    pub(crate) after: Vec<String>,
    pub(crate) base_after: Option<String>,
    /// The machine it runs on: the one it is added on, or the one `add --machine` names.
    pub(crate) machine: Option<String>,
    /// More hosts its sandboxed Runs may reach through owl's proxy (`add --allow-host`).
    pub(crate) allow_hosts: Vec<String>,
}

/// One execution of the agent on a Job.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Run {
    pub(crate) id: i64,
    pub(crate) job_id: String,
    pub(crate) account: String,
    /// `None` while the Run is in progress.
    pub(crate) outcome: Option<RunOutcome>,
    pub(crate) stop_reason: Option<String>,
    pub(crate) exit_code: Option<i32>,
    pub(crate) session_id: Option<String>,
    pub(crate) cost_usd: Option<f64>,
    pub(crate) num_turns: Option<i64>,
    pub(crate) input_tokens: Option<i64>,
    pub(crate) output_tokens: Option<i64>,
    pub(crate) permission_denials: Vec<PermissionDenial>,
    pub(crate) api_retries: i64,
    pub(crate) last_event: Option<String>,
    pub(crate) agent_version: Option<String>,
    pub(crate) pid: Option<i64>,
    pub(crate) started_at: DateTime<Utc>,
    pub(crate) ended_at: Option<DateTime<Utc>>,
    /// Processes left alive after the agent exited, killed by owl.
    pub(crate) survivors_killed: Option<i64>,
    /// stdout lines logged but not understood.
    pub(crate) skipped_lines: Option<i64>,
    /// The Job's branch head before and after the Run.
    pub(crate) head_before: Option<String>,
    pub(crate) head_after: Option<String>,
    /// The commits the Run added to the Job's branch, counted when it ended: what `show`
    /// says of it after the branch is rewritten or the repository deleted. `None`: not
    /// known (no head recorded, or a repository gone before it was counted).
    pub(crate) commits: Option<i64>,
    /// owl's commit of what the Run left uncommitted.
    pub(crate) safety_commit: Option<String>,
    /// Who the Run is charged to; `None` for Runs recorded before owl knew.
    pub(crate) cause: Option<Cause>,
    /// Something that happened after the result line (a late stop cause).
    pub(crate) note: Option<String>,
    /// The `--max-budget-usd` the Run was started with.
    pub(crate) budget_usd: Option<f64>,
    /// What kind of stop owl made of it, when it stopped the Run.
    pub(crate) stop: Option<StopKind>,
    /// The Job's check after the Run, when the agent said done and the Job has one.
    pub(crate) check: Option<CheckRecord>,
    /// The machine that ran it; `None`: a Run from before machines (this one's).
    pub(crate) machine: Option<String>,
}

impl Run {
    /// Whether the Run counts toward its Job's `maxRuns` (Runs from before owl kept the
    /// cause count, as they did then).
    pub(crate) fn counts(&self) -> bool {
        self.outcome.is_some() && self.cause.is_none_or(Cause::counts)
    }

    /// What the Run cost: its result line's figure, or for a finished Run without one
    /// (killed, lost) its budget cap, since it may have spent up to that.
    pub(crate) fn cost_or_cap(&self) -> Option<f64> {
        match (self.cost_usd, self.outcome) {
            (Some(c), _) => Some(c),
            (None, Some(_)) => self.budget_usd,
            (None, None) => None,
        }
    }

    /// The cost as `show` prints it: "$0.12", or "unknown (≤ $0.50)" without a result line.
    pub(crate) fn describe_cost(&self) -> String {
        match (self.cost_usd, self.budget_usd) {
            (Some(c), _) => format!("${c:.2}"),
            (None, Some(cap)) if self.outcome.is_some() => format!("unknown (≤ ${cap:.2})"),
            _ => "unknown".into(),
        }
    }
}

/// What a Job's Runs cost together: each by its result line, or by its cap when it has
/// none, so a Job whose Runs are killed cannot overrun its budget unseen.
pub(crate) fn total_cost(runs: &[Run]) -> f64 {
    // A fold from +0.0, not `sum`: the sum of no f64 is -0.0, printed "$-0.00".
    runs.iter()
        .filter_map(Run::cost_or_cap)
        .fold(0.0, |a, b| a + b)
}

/// Everything recorded when a Run ends.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct RunFinish {
    pub(crate) outcome: Option<RunOutcome>,
    pub(crate) stop_reason: Option<String>,
    pub(crate) exit_code: Option<i32>,
    pub(crate) session_id: Option<String>,
    pub(crate) cost_usd: Option<f64>,
    pub(crate) num_turns: Option<i64>,
    pub(crate) input_tokens: Option<i64>,
    pub(crate) output_tokens: Option<i64>,
    pub(crate) permission_denials: Vec<PermissionDenial>,
    pub(crate) api_retries: i64,
    pub(crate) last_event: Option<String>,
    /// Processes left alive after the agent exited, killed by owl.
    pub(crate) survivors_killed: Option<i64>,
    /// stdout lines logged but not understood (garbage, overlong, not UTF-8).
    pub(crate) skipped_lines: Option<i64>,
    /// The Job's branch head when the Run ended (after owl's safety-net commit).
    pub(crate) head_after: Option<String>,
    /// The commits the Run added to the Job's branch.
    #[serde(default)]
    pub(crate) commits: Option<i64>,
    /// owl's commit of what the Run left uncommitted.
    pub(crate) safety_commit: Option<String>,
    /// Who the Run is charged to.
    pub(crate) cause: Option<Cause>,
    /// Something that happened after the result line.
    pub(crate) note: Option<String>,
    /// The kind of stop owl made of the Run, if it stopped it.
    pub(crate) stop: Option<StopKind>,
    /// The Job's check after the Run, when the agent said done and the Job has one.
    #[serde(default)]
    pub(crate) check: Option<CheckRecord>,
}

/// Everything a Run's end writes: the Run, its Job's next state, and what holds its
/// Account from now on.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Settlement {
    pub(crate) run_id: i64,
    pub(crate) job_id: String,
    pub(crate) account: String,
    pub(crate) finish: RunFinish,
    pub(crate) job_state: JobState,
    pub(crate) job_reason: Option<JobReason>,
    pub(crate) not_before: Option<DateTime<Utc>>,
    /// The Account as a whole on credits: the Window it went over and its reset.
    pub(crate) on_credits: Option<(String, DateTime<Utc>)>,
    /// What the Run says of a provider's rejection of the whole Account, if anything.
    pub(crate) rejection: Option<RejectionHold>,
    pub(crate) ended_at: DateTime<Utc>,
}

/// How the agent's process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ExitInfo {
    pub(crate) code: Option<i32>,
    pub(crate) signal: Option<i32>,
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

/// What the plan reads of a Job: no prompt, no tool lists, so that planning a thousand
/// queued Jobs reads little.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PlanJob {
    pub(crate) id: String,
    pub(crate) state: JobState,
    pub(crate) priority: i64,
    /// `None`: any schedulable Account.
    pub(crate) account: Option<String>,
    pub(crate) not_before: Option<DateTime<Utc>>,
    pub(crate) reason: Option<String>,
    /// The Jobs it waits for, each with its state now.
    pub(crate) after: Vec<(String, JobState)>,
    /// The machine it runs on, as stored (`None`: any, from before machines).
    pub(crate) machine: Option<String>,
    /// Why it cannot run on this machine ("runs on machine build"), set by the caller
    /// that knows which machine this is.
    pub(crate) elsewhere: Option<String>,
}

impl From<&Job> for PlanJob {
    fn from(j: &Job) -> PlanJob {
        PlanJob {
            id: j.id.clone(),
            state: j.state,
            priority: j.priority,
            account: j.account.clone(),
            not_before: j.not_before,
            reason: j.reason.as_ref().map(|r| r.to_string()),
            after: Vec::new(),
            machine: j.machine.clone(),
            elsewhere: None,
        }
    }
}

/// What owl has learned about an Account that status and doctor must tell.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct AccountNote {
    /// Set by any sign of a missing login (a Run's or a probe's); cleared when a probe or
    /// a Run shows the Account logged in.
    pub(crate) not_logged_in: Option<String>,
    /// The newest change of the credential store when `not_logged_in` was found.
    pub(crate) not_logged_in_at: Option<DateTime<Utc>>,
    /// Set when the agent CLI is missing or of an untested version; cleared when it checks out.
    pub(crate) agent_problem: Option<String>,
    /// What the last preflight probe learned, and when.
    pub(crate) last_probe: Option<String>,
    pub(crate) last_probe_at: Option<DateTime<Utc>>,
    pub(crate) updated_at: Option<DateTime<Utc>>,
    /// The API was unreachable or failing for a whole Run: no Run starts before this.
    pub(crate) backoff_until: Option<DateTime<Utc>>,
    /// Runs or probes in a row that could not reach the API (an outage).
    pub(crate) outages: u32,
    /// The agent CLI file that last passed the version check (its identity: path, size,
    /// mtime), the version it answered, and when.
    pub(crate) agent_checked: Option<String>,
    pub(crate) agent_checked_version: Option<String>,
    pub(crate) agent_checked_at: Option<DateTime<Utc>>,
    /// A reactive Account (its Driver reports no utilization) waits after a rate limit
    /// until this time.
    pub(crate) rate_limited_until: Option<DateTime<Utc>>,
    /// A Run found the plan billing extra usage: no Run starts before this, the reset of
    /// `on_credits_window`.
    pub(crate) on_credits_until: Option<DateTime<Utc>>,
    pub(crate) on_credits_window: Option<String>,
    /// What a look at this machine, without starting the agent, shows keeps any Run off the
    /// Account (its CLI not found, bubblewrap missing, an empty credential store). Read
    /// when a plan is made, never stored.
    pub(crate) unready: Option<String>,
    /// Whether the Account's login was ever seen to work (a figure observed, a Run that
    /// succeeded). Read when a plan is made, never stored.
    pub(crate) login_seen: bool,
    /// Its credential store is missing or empty: no login there for a probe to find. Read
    /// when a plan is made, never stored.
    pub(crate) store_empty: bool,
    /// owl's share (percentage points, summed over its Runs) of each Window instance the
    /// Account's newest figures are of: (window, reset, points). Read when a plan is made.
    pub(crate) owl_shares: Vec<(String, DateTime<Utc>, f64)>,
}

/// A tool call the agent's permission mode refused.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub(crate) struct PermissionDenial {
    pub(crate) tool_name: String,
    /// A short rendering of the tool input (the Bash command, the file path).
    pub(crate) detail: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_runs_cost_zero_not_negative_zero() {
        assert_eq!(format!("{:.2}", total_cost(&[])), "0.00");
    }

    #[test]
    fn states_round_trip_through_their_names() {
        for st in JobState::ALL {
            assert_eq!(st.as_str().parse::<JobState>().unwrap(), st);
        }
        for o in RunOutcome::ALL {
            assert_eq!(o.as_str().parse::<RunOutcome>().unwrap(), o);
        }
        for source in SnapshotSource::ALL {
            assert_eq!(source.as_str().parse::<SnapshotSource>().unwrap(), source);
            let json = serde_json::to_string(&source).unwrap();
            assert_eq!(
                json,
                format!("\"{source}\""),
                "stored, printed and in JSON alike"
            );
        }
        assert!("nope".parse::<JobState>().is_err());
    }

    #[test]
    fn every_job_reason_reads_back_as_stored_and_renders_in_words() {
        let crossing = Crossing {
            window: "five_hour".into(),
            percent: 63.0,
            limit: "fiveHourMax".into(),
            ceiling: 60.0,
            resets_at: crate::clock::parse("2026-11-30T05:00:00Z"),
        };
        let cases = [
            (
                JobReason::Ceiling(crossing),
                "ceiling: five_hour 63% >= fiveHourMax 60",
            ),
            (JobReason::RateLimited, "rate limited by the provider"),
            (
                JobReason::NotTheJobs {
                    cause: Cause::NotLoggedIn,
                    why: "not logged in: 401".into(),
                },
                "its last Run ended for a cause not its own (not logged in: 401); not charged to it",
            ),
            (
                JobReason::Blocked {
                    summary: "needs a token".into(),
                },
                "needs a token",
            ),
            (
                JobReason::Handoff(HandoffError::UnknownStatus("maybe".into())),
                "warning: .owl/handoff.md has status 'maybe'; expected done, continue or blocked",
            ),
            (
                JobReason::MaxRuns { runs: 3 },
                "maxRuns reached (3 Runs without done)",
            ),
            (
                JobReason::BudgetSpent {
                    spent: Some(5.0),
                    budget: Some(5.0),
                },
                "job budget spent: $5.00 of $5.00",
            ),
            (
                JobReason::BudgetSpent {
                    spent: None,
                    budget: None,
                },
                "job budget spent",
            ),
            (JobReason::Cancelled, "cancelled"),
            (JobReason::CancelledByPerson, "cancelled by a person"),
            (JobReason::Requeued, "requeued by a person"),
            (
                JobReason::Lost { run_id: 9 },
                "Run 9 was lost; queued again",
            ),
            (
                JobReason::WorktreeFailed {
                    error: "index locked".into(),
                },
                "preparing the worktree failed: index locked; set aside, tried again later",
            ),
            (
                JobReason::Note {
                    text: "from before".into(),
                },
                "from before",
            ),
        ];
        for (reason, words) in cases {
            assert_eq!(reason.to_string(), words);
            let stored = reason.to_stored();
            assert_eq!(
                JobReason::from_stored(Some(&stored), Some(words)),
                Some(reason),
                "{stored}"
            );
        }
        // JSON this owl does not know keeps its words.
        assert_eq!(
            JobReason::from_stored(Some(r#"{"kind":"from_the_future"}"#), Some("later")),
            Some(JobReason::Note {
                text: "later".into()
            })
        );
        assert_eq!(JobReason::from_stored(None, None), None);
    }
}
