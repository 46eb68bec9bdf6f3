//! The vocabulary of DESIGN.md: Job, Run, Snapshot and their states, as owl holds them in memory.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::Serialize;

/// A stored name (a state, an outcome, a cause) this owl does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} '{name}'")]
pub struct UnknownName {
    pub what: &'static str,
    pub name: String,
}

/// Where a Job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
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
    pub const ALL: [JobState; 7] = [
        JobState::Queued,
        JobState::Running,
        JobState::Waiting,
        JobState::Done,
        JobState::Blocked,
        JobState::Failed,
        JobState::Cancelled,
    ];

    /// The name stored and printed.
    pub fn as_str(self) -> &'static str {
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
    pub fn is_finished(self) -> bool {
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
        JobState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownName {
                what: "job state",
                name: s.to_string(),
            })
    }
}

/// How a Run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
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
    pub fn as_str(self) -> &'static str {
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
        RunOutcome::ALL
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| UnknownName {
                what: "run outcome",
                name: s.to_string(),
            })
    }
}

/// A unit of work: a prompt against a repository at a base ref.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Job {
    pub id: String,
    pub name: Option<String>,
    pub prompt: String,
    pub repo: String,
    pub base: String,
    /// The commit `base` named when the Job was queued: the branch starts there, whatever
    /// the ref points at by the time the first Run starts.
    pub base_commit: Option<String>,
    /// `None`: any schedulable Account.
    pub account: Option<String>,
    pub priority: i64,
    pub max_runs: u32,
    pub max_run_time_secs: u64,
    pub max_budget_usd: Option<f64>,
    pub max_job_budget_usd: Option<f64>,
    pub permission_mode: String,
    pub allowed_tools: Vec<String>,
    pub disallowed_tools: Vec<String>,
    pub model: Option<String>,
    pub state: JobState,
    /// Why the Job is in its state, in words (e.g. the Handoff's blocked reason).
    pub reason: Option<String>,
    pub not_before: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Job {
    /// The Job's branch in its repository.
    pub fn branch(&self) -> String {
        format!("{BRANCH_PREFIX}{}", self.id)
    }
}

/// Every Job's branch is this and its id.
pub const BRANCH_PREFIX: &str = "owl/";

/// A Job as `owl add` describes it, before it has an id.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub id: String,
    pub name: Option<String>,
    pub prompt: String,
    pub repo: String,
    pub base: String,
    pub base_commit: String,
    pub account: Option<String>,
    pub priority: i64,
    pub max_runs: u32,
    pub max_run_time_secs: u64,
    pub max_budget_usd: Option<f64>,
    pub max_job_budget_usd: Option<f64>,
    pub permission_mode: String,
    pub allowed_tools: Vec<String>,
    pub disallowed_tools: Vec<String>,
    pub model: Option<String>,
}

/// One execution of the agent on a Job.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub id: i64,
    pub job_id: String,
    pub account: String,
    /// `None` while the Run is in progress.
    pub outcome: Option<RunOutcome>,
    pub stop_reason: Option<String>,
    pub exit_code: Option<i32>,
    pub session_id: Option<String>,
    pub cost_usd: Option<f64>,
    pub num_turns: Option<i64>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub permission_denials: Vec<PermissionDenial>,
    pub api_retries: i64,
    pub last_event: Option<String>,
    pub agent_version: Option<String>,
    pub pid: Option<i64>,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    /// Processes left alive after the agent exited, killed by owl.
    pub survivors_killed: Option<i64>,
    /// stdout lines logged but not understood.
    pub skipped_lines: Option<i64>,
    /// The Job's branch head before and after the Run.
    pub head_before: Option<String>,
    pub head_after: Option<String>,
    /// owl's commit of what the Run left uncommitted.
    pub safety_commit: Option<String>,
    /// Who the Run is charged to; `None` for Runs recorded before owl knew.
    pub cause: Option<Cause>,
    /// Something that happened after the result line (a late stop cause).
    pub note: Option<String>,
    /// The `--max-budget-usd` the Run was started with.
    pub budget_usd: Option<f64>,
}

impl Run {
    /// Whether the Run counts toward its Job's `maxRuns` (Runs from before owl kept the
    /// cause count, as they did then).
    pub fn counts(&self) -> bool {
        self.outcome.is_some() && self.cause.is_none_or(Cause::counts)
    }

    /// What the Run cost: its result line's figure, or for a finished Run without one
    /// (killed, lost) its budget cap, since it may have spent up to that.
    pub fn cost_or_cap(&self) -> Option<f64> {
        match (self.cost_usd, self.outcome) {
            (Some(c), _) => Some(c),
            (None, Some(_)) => self.budget_usd,
            (None, None) => None,
        }
    }

    /// The cost as `show` prints it: "$0.12", or "unknown (≤ $0.50)" without a result line.
    pub fn describe_cost(&self) -> String {
        match (self.cost_usd, self.budget_usd) {
            (Some(c), _) => format!("${c:.2}"),
            (None, Some(cap)) if self.outcome.is_some() => format!("unknown (≤ ${cap:.2})"),
            _ => "unknown".into(),
        }
    }
}

/// What a Job's Runs cost together: each by its result line, or by its cap when it has
/// none, so a Job whose Runs are killed cannot overrun its budget unseen.
pub fn total_cost(runs: &[Run]) -> f64 {
    runs.iter().filter_map(Run::cost_or_cap).sum()
}

/// A tool call the agent's permission mode refused.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct PermissionDenial {
    pub tool_name: String,
    /// A short rendering of the tool input (the Bash command, the file path).
    pub detail: String,
}

/// The observed utilization of one Window of one Account.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Snapshot {
    pub account: String,
    pub window: String,
    pub percent: f64,
    pub resets_at: Option<DateTime<Utc>>,
    pub observed_at: DateTime<Utc>,
    /// `get_usage`, `rate_limit_event` or `probe`.
    pub source: String,
    pub run_id: Option<i64>,
}

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
    /// The Run's log could not be written because its filesystem is full.
    DiskFull(String),
    /// The Run's log could not be written for another reason.
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
            StopCause::DiskFull(e) => format!("disk full: writing the log: {e}"),
            StopCause::LogWrite(e) => format!("writing the log: {e}"),
        }
    }
}

/// Who a Run's ending is charged to. Only the Job's own Runs count toward `maxRuns`: a
/// night without a login, a network or a disk must not use up the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// The model worked, and the Run ended by its own result, its budget, `maxRunTime`, a
    /// stall or a crash.
    Job,
    /// The Account has no usable login (none, expired, revoked).
    NotLoggedIn,
    /// The API was unreachable, or answered 5xx or overloaded, after the CLI's retries.
    Outage,
    /// The provider's rate limiter refused the Account.
    RateLimited,
    /// A filesystem owl writes to is full.
    DiskFull,
    /// owl stopped the Run for a reason of its own: a ceiling, a signal, a cancel, a log
    /// it could not write, an agent it could not kill.
    Stopped,
}

impl Cause {
    pub const ALL: [Cause; 6] = [
        Cause::Job,
        Cause::NotLoggedIn,
        Cause::Outage,
        Cause::RateLimited,
        Cause::DiskFull,
        Cause::Stopped,
    ];

    /// The name stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Job => "job",
            Cause::NotLoggedIn => "not_logged_in",
            Cause::Outage => "outage",
            Cause::RateLimited => "rate_limited",
            Cause::DiskFull => "disk_full",
            Cause::Stopped => "stopped",
        }
    }

    /// Whether a Run so ended counts toward the Job's `maxRuns`.
    pub fn counts(self) -> bool {
        self == Cause::Job
    }
}

impl std::str::FromStr for Cause {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Cause::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| UnknownName {
                what: "run cause",
                name: s.to_string(),
            })
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

/// What the plan reads of a Job: no prompt, no tool lists, so that planning a thousand
/// queued Jobs reads little.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanJob {
    pub id: String,
    pub state: JobState,
    pub priority: i64,
    /// `None`: any schedulable Account.
    pub account: Option<String>,
    pub not_before: Option<DateTime<Utc>>,
    pub reason: Option<String>,
}

impl From<&Job> for PlanJob {
    fn from(j: &Job) -> PlanJob {
        PlanJob {
            id: j.id.clone(),
            state: j.state,
            priority: j.priority,
            account: j.account.clone(),
            not_before: j.not_before,
            reason: j.reason.clone(),
        }
    }
}

/// What owl has learned about an Account that status and doctor must tell.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AccountNote {
    /// Set by any sign of a missing login (a Run's or a probe's); cleared when a probe or
    /// a Run shows the Account logged in.
    pub not_logged_in: Option<String>,
    /// Set when the agent CLI is missing or of an untested version; cleared when it checks out.
    pub agent_problem: Option<String>,
    /// What the last preflight probe learned, and when.
    pub last_probe: Option<String>,
    pub last_probe_at: Option<DateTime<Utc>>,
    pub updated_at: Option<DateTime<Utc>>,
    /// The API was unreachable or failing for a whole Run: no Run starts before this.
    pub backoff_until: Option<DateTime<Utc>>,
    /// Runs in a row that could not reach the model for an outage.
    pub outages: u32,
    /// The agent CLI file that last passed the version check (its identity, a tab, its
    /// version), and when.
    pub agent_checked: Option<String>,
    pub agent_checked_at: Option<DateTime<Utc>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_through_their_names() {
        for st in JobState::ALL {
            assert_eq!(st.as_str().parse::<JobState>().unwrap(), st);
        }
        for o in RunOutcome::ALL {
            assert_eq!(o.as_str().parse::<RunOutcome>().unwrap(), o);
        }
        assert!("nope".parse::<JobState>().is_err());
    }
}
