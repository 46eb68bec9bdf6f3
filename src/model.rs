//! The vocabulary of DESIGN.md: Job, Run, Snapshot and their states, as owl holds them in memory.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::handoff::HandoffError;
use crate::text::fmt_percent;

/// A stored name (a state, an outcome, a cause) this owl does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} '{name}'")]
pub struct UnknownName {
    pub what: &'static str,
    pub name: String,
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
        UnknownName::find(&JobState::ALL, JobState::as_str, "job state", s)
    }
}

/// How a Run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
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
        UnknownName::find(&RunOutcome::ALL, RunOutcome::as_str, "run outcome", s)
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
    pub reason: Option<JobReason>,
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
    /// What kind of stop owl made of it, when it stopped the Run.
    pub stop: Option<StopKind>,
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
    // A fold from +0.0, not `sum`: the sum of no f64 is -0.0, printed "$-0.00".
    runs.iter()
        .filter_map(Run::cost_or_cap)
        .fold(0.0, |a, b| a + b)
}

/// Everything recorded when a Run ends.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunFinish {
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
    /// Processes left alive after the agent exited, killed by owl.
    pub survivors_killed: Option<i64>,
    /// stdout lines logged but not understood (garbage, overlong, not UTF-8).
    pub skipped_lines: Option<i64>,
    /// The Job's branch head when the Run ended (after owl's safety-net commit).
    pub head_after: Option<String>,
    /// owl's commit of what the Run left uncommitted.
    pub safety_commit: Option<String>,
    /// Who the Run is charged to.
    pub cause: Option<Cause>,
    /// Something that happened after the result line.
    pub note: Option<String>,
    /// The kind of stop owl made of the Run, if it stopped it.
    pub stop: Option<StopKind>,
}

/// Everything a Run's end writes: the Run, its Job's next state, and what holds its
/// Account from now on.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Settlement {
    pub run_id: i64,
    pub job_id: String,
    pub account: String,
    pub finish: RunFinish,
    pub job_state: JobState,
    pub job_reason: Option<JobReason>,
    pub not_before: Option<DateTime<Utc>>,
    /// The Account as a whole on credits: the Window it went over and its reset.
    pub on_credits: Option<(String, DateTime<Utc>)>,
    /// What the Run says of a provider's rejection of the whole Account, if anything.
    pub rejection: Option<RejectionHold>,
    pub ended_at: DateTime<Utc>,
}

/// A provider's rejection, as a Run's end changes it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RejectionHold {
    /// Rejected until then: no Job starts on the Account before.
    Until(DateTime<Utc>),
    /// The Run got past a rejection recorded before: lifted.
    Lifted,
}

/// A tool call the agent's permission mode refused.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct PermissionDenial {
    pub tool_name: String,
    /// A short rendering of the tool input (the Bash command, the file path).
    pub detail: String,
}

/// Drops float noise from a reported percent: the CLI turns a header's 0.55 into
/// `55.00000000000001`.
pub fn round_percent(x: f64) -> f64 {
    ((x * 10_000.0).round() / 10_000.0).clamp(0.0, 100.0)
}

/// The observed utilization of one Window of one Account.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Snapshot {
    pub account: String,
    pub window: String,
    pub percent: f64,
    pub resets_at: Option<DateTime<Utc>>,
    pub observed_at: DateTime<Utc>,
    pub source: SnapshotSource,
    pub run_id: Option<i64>,
    /// The model family a per-model Window limits, when the agent named it.
    pub model: Option<String>,
}

/// Where a figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotSource {
    /// The agent's answer to owl's usage request on its stdin.
    GetUsage,
    /// A `rate_limit_event` in the agent's stream.
    RateLimitEvent,
    /// The zero-token probe, before a Run or beside it.
    Probe,
    /// A line of Codex's rollout file.
    Rollout,
}

impl SnapshotSource {
    const ALL: [SnapshotSource; 4] = [
        SnapshotSource::GetUsage,
        SnapshotSource::RateLimitEvent,
        SnapshotSource::Probe,
        SnapshotSource::Rollout,
    ];

    /// The name stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            SnapshotSource::GetUsage => "get_usage",
            SnapshotSource::RateLimitEvent => "rate_limit_event",
            SnapshotSource::Probe => "probe",
            SnapshotSource::Rollout => "rollout",
        }
    }
}

impl fmt::Display for SnapshotSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SnapshotSource {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        UnknownName::find(
            &SnapshotSource::ALL,
            SnapshotSource::as_str,
            "figure source",
            s,
        )
    }
}

/// What a Window limits, read once from its name, so that the ceilings, `status` and the
/// report agree on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowKind {
    /// `five_hour`: the plan's session Window.
    FiveHour,
    /// `seven_day` (and any other account-wide `seven_day*`).
    Weekly,
    /// A weekly Window of one model family: `seven_day_overage_included` (Claude Code
    /// 2.1.332's "Fable limit", `model_scoped` in `get_usage`), `seven_day_opus`,
    /// `seven_day_sonnet`.
    ModelWeekly,
    /// A Window owl has no ceiling for.
    Other,
}

impl WindowKind {
    /// The kind of the Window of this name.
    pub fn of(window: &str) -> WindowKind {
        match window {
            "five_hour" => WindowKind::FiveHour,
            "seven_day_opus" | "seven_day_sonnet" => WindowKind::ModelWeekly,
            w if w.starts_with("seven_day_overage_included") => WindowKind::ModelWeekly,
            w if w.starts_with("seven_day") => WindowKind::Weekly,
            _ => WindowKind::Other,
        }
    }

    /// How long a Window of this kind is: a figure over a Ceiling whose reset is unknown
    /// expires after it. A Window owl does not know gets the shortest it could be.
    pub fn length(self) -> chrono::Duration {
        match self {
            WindowKind::Weekly | WindowKind::ModelWeekly => chrono::Duration::days(7),
            WindowKind::FiveHour | WindowKind::Other => chrono::Duration::hours(5),
        }
    }

    /// The model family a Window limits: the name the agent gave it, or the one its own
    /// name says (`seven_day_opus`).
    pub fn model_of(window: &str, named: Option<&str>) -> Option<String> {
        match window {
            "seven_day_opus" => Some("Opus".into()),
            "seven_day_sonnet" => Some("Sonnet".into()),
            _ if WindowKind::of(window) == WindowKind::ModelWeekly => named.map(String::from),
            _ => None,
        }
    }

    /// Whether a per-model Window limits a Run of `run_model` (a model id such as
    /// `claude-fable-5`). Conservative (ADR-0020): it does unless both are known and the
    /// id does not name the family.
    pub fn limits_model(window_model: Option<&str>, run_model: Option<&str>) -> bool {
        let (Some(family), Some(run)) = (window_model, run_model) else {
            return true;
        };
        let family = family.split_whitespace().next().unwrap_or(family);
        run.to_lowercase().contains(&family.to_lowercase())
    }
}

/// A Run billed to extra usage (paid credits), and the Window whose reset ends it.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct OnCredits {
    /// The Window that is used up (the event's `rateLimitType`), when it said.
    pub window: Option<String>,
    pub until: Option<DateTime<Utc>>,
}

impl fmt::Display for OnCredits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let window = self.window.as_deref().unwrap_or("a window");
        write!(
            f,
            "extra usage: {window} is used up and the plan billed usage credits \
             (allowExtraUsage is off)"
        )
    }
}

/// A Ceiling crossed: the Window, its figure, and the limit it crossed.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Crossing {
    pub window: String,
    pub percent: f64,
    /// The config key of the limit (`fiveHourMax`, `weeklyMax`).
    pub limit: String,
    pub ceiling: f64,
    /// When the Window resets, if the figure said.
    pub resets_at: Option<DateTime<Utc>>,
}

impl fmt::Display for Crossing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ceiling: {} {}% >= {} {}",
            self.window,
            fmt_percent(self.percent),
            self.limit,
            fmt_percent(self.ceiling)
        )
    }
}

/// The provider's rate limiter refused the Account (`status: rejected`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Rejection {
    /// The Window it named, if any.
    pub window: Option<String>,
    /// When it resets, if it said.
    pub until: Option<DateTime<Utc>>,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let window = self.window.as_deref().unwrap_or("a window");
        write!(f, "rate limited: the provider rejected {window}")?;
        if let Some(t) = self.until {
            write!(f, " until {}", crate::clock::rfc3339(t))?;
        }
        Ok(())
    }
}

/// Why owl stopped a Run before the agent finished it.
#[derive(Debug, Clone, PartialEq)]
pub enum StopCause {
    /// The Account crossed a Ceiling; the Job waits until the Window resets.
    Ceiling(Crossing),
    /// The provider rejected the Account (`rate_limit_event` with `status: rejected`).
    RateLimited(Rejection),
    /// The plan started billing extra usage (paid credits), which the Account does not allow.
    ExtraUsage(OnCredits),
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

/// The kind of a [`StopCause`], as stored with the Run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopKind {
    Ceiling,
    RateLimited,
    ExtraUsage,
    MaxRunTime,
    Stalled,
    Cancelled,
    Signal,
    DiskFull,
    LogWrite,
}

impl StopKind {
    pub const ALL: [StopKind; 9] = [
        StopKind::Ceiling,
        StopKind::RateLimited,
        StopKind::ExtraUsage,
        StopKind::MaxRunTime,
        StopKind::Stalled,
        StopKind::Cancelled,
        StopKind::Signal,
        StopKind::DiskFull,
        StopKind::LogWrite,
    ];

    /// The name stored.
    pub fn as_str(self) -> &'static str {
        match self {
            StopKind::Ceiling => "ceiling",
            StopKind::RateLimited => "rate_limited",
            StopKind::ExtraUsage => "extra_usage",
            StopKind::MaxRunTime => "max_run_time",
            StopKind::Stalled => "stalled",
            StopKind::Cancelled => "cancelled",
            StopKind::Signal => "signal",
            StopKind::DiskFull => "disk_full",
            StopKind::LogWrite => "log_write",
        }
    }
}

impl FromStr for StopKind {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        UnknownName::find(&StopKind::ALL, StopKind::as_str, "stop kind", s)
    }
}

impl StopCause {
    /// Its kind, stored with the Run.
    pub fn kind(&self) -> StopKind {
        match self {
            StopCause::Ceiling(_) => StopKind::Ceiling,
            StopCause::RateLimited(_) => StopKind::RateLimited,
            StopCause::ExtraUsage(_) => StopKind::ExtraUsage,
            StopCause::MaxRunTime => StopKind::MaxRunTime,
            StopCause::Stalled => StopKind::Stalled,
            StopCause::Cancelled => StopKind::Cancelled,
            StopCause::Signal(_) => StopKind::Signal,
            StopCause::DiskFull(_) => StopKind::DiskFull,
            StopCause::LogWrite(_) => StopKind::LogWrite,
        }
    }

    /// The `stop_reason` recorded on the Run.
    pub fn reason(&self) -> String {
        match self {
            StopCause::Ceiling(crossing) => crossing.to_string(),
            StopCause::RateLimited(rejection) => rejection.to_string(),
            StopCause::ExtraUsage(credits) => credits.to_string(),
            StopCause::MaxRunTime => "maxRunTime reached".into(),
            StopCause::Stalled => "stalled".into(),
            StopCause::Cancelled => "cancelled".into(),
            StopCause::Signal(sig) => format!("owl received {sig}"),
            StopCause::DiskFull(e) => format!("disk full: writing the log: {e}"),
            StopCause::LogWrite(e) => format!("writing the log: {e}"),
        }
    }
}

/// Why a Job is where it is, as the tick, a cancel or a person left it: stored with the
/// Job (as JSON beside its rendered words) and rendered in one place, [`fmt::Display`].
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JobReason {
    /// A Run crossed the Account's Ceiling; the Job waits for the Window's reset.
    Ceiling(Crossing),
    /// The provider refused the Account; the Job waits for the reset it named (or a default).
    RateLimited,
    /// A Run was stopped at the first sign of extra usage; the Job waits for the reset.
    ExtraUsage(OnCredits),
    /// A Run ended for a cause that is not the Job's (a login, an outage, a full disk, a
    /// stop of owl's): the Job keeps its place. `why` is the Run's stop reason.
    NotTheJobs { cause: Cause, why: String },
    /// The agent said the Job is blocked; `summary` is the first line of its Handoff's body.
    Blocked { summary: String },
    /// The Run left no usable Handoff; the Job runs again.
    Handoff(HandoffError),
    /// The Job's Runs used up `maxRuns` without it being done.
    MaxRuns { runs: u32 },
    /// The Job's budget across Runs is spent (`spent` and `budget` when known).
    BudgetSpent {
        spent: Option<f64>,
        budget: Option<f64>,
    },
    /// A cancel stopped its Run.
    Cancelled,
    /// A person cancelled the Job.
    CancelledByPerson,
    /// A person queued it again.
    Requeued,
    /// Its Run was lost (the tick supervising it died).
    Lost { run_id: i64 },
    /// Its worktree could not be prepared; it is set aside a while, then tried again.
    WorktreeFailed { error: String },
    /// Words from before reasons were typed (a database older than schema 10).
    Note { text: String },
}

impl fmt::Display for JobReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobReason::Ceiling(crossing) => crossing.fmt(f),
            JobReason::RateLimited => f.write_str("rate limited by the provider"),
            JobReason::ExtraUsage(credits) => credits.fmt(f),
            JobReason::NotTheJobs { why, .. } => write!(f, "waiting: {why}"),
            JobReason::Blocked { summary } => f.write_str(summary),
            JobReason::Handoff(problem) => write!(f, "warning: {problem}"),
            JobReason::MaxRuns { runs } => {
                write!(f, "maxRuns reached ({runs} Runs without done)")
            }
            JobReason::BudgetSpent {
                spent: Some(spent),
                budget: Some(budget),
            } => write!(f, "job budget spent: ${spent:.2} of ${budget:.2}"),
            JobReason::BudgetSpent { .. } => f.write_str("job budget spent"),
            JobReason::Cancelled => f.write_str("cancelled"),
            JobReason::CancelledByPerson => f.write_str("cancelled by a person"),
            JobReason::Requeued => f.write_str("requeued by a person"),
            JobReason::Lost { run_id } => write!(f, "Run {run_id} was lost; queued again"),
            JobReason::WorktreeFailed { error } => write!(
                f,
                "preparing the worktree failed: {error}; set aside, tried again later"
            ),
            JobReason::Note { text } => f.write_str(text),
        }
    }
}

impl JobReason {
    /// The reason as stored: JSON that reads back as the same reason.
    pub fn to_stored(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| {
            serde_json::json!({"kind": "note", "text": self.to_string()}).to_string()
        })
    }

    /// A stored reason: its JSON, or (from an older owl, or JSON this owl does not know)
    /// its words kept as a note.
    pub fn from_stored(data: Option<&str>, text: Option<&str>) -> Option<JobReason> {
        data.and_then(|d| serde_json::from_str(d).ok()).or_else(|| {
            text.map(|t| JobReason::Note {
                text: t.to_string(),
            })
        })
    }
}

/// Who a Run's ending is charged to. Only the Job's own Runs count toward `maxRuns`: a
/// night without a login, a network or a disk must not use up the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
        UnknownName::find(&Cause::ALL, Cause::as_str, "run cause", s)
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
            reason: j.reason.as_ref().map(|r| r.to_string()),
        }
    }
}

/// What owl has learned about an Account that status and doctor must tell.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AccountNote {
    /// Set by any sign of a missing login (a Run's or a probe's); cleared when a probe or
    /// a Run shows the Account logged in.
    pub not_logged_in: Option<String>,
    /// The newest change of the credential store when `not_logged_in` was found.
    pub not_logged_in_at: Option<DateTime<Utc>>,
    /// Set when the agent CLI is missing or of an untested version; cleared when it checks out.
    pub agent_problem: Option<String>,
    /// What the last preflight probe learned, and when.
    pub last_probe: Option<String>,
    pub last_probe_at: Option<DateTime<Utc>>,
    pub updated_at: Option<DateTime<Utc>>,
    /// The API was unreachable or failing for a whole Run: no Run starts before this.
    pub backoff_until: Option<DateTime<Utc>>,
    /// Runs or probes in a row that could not reach the API (an outage).
    pub outages: u32,
    /// The agent CLI file that last passed the version check (its identity: path, size,
    /// mtime), the version it answered, and when.
    pub agent_checked: Option<String>,
    pub agent_checked_version: Option<String>,
    pub agent_checked_at: Option<DateTime<Utc>>,
    /// A reactive Account (its Driver reports no utilization) waits after a rate limit
    /// until this time.
    pub rate_limited_until: Option<DateTime<Utc>>,
    /// A Run found the plan billing extra usage: no Run starts before this, the reset of
    /// `on_credits_window`.
    pub on_credits_until: Option<DateTime<Utc>>,
    pub on_credits_window: Option<String>,
    /// What a look at this machine, without starting the agent, shows keeps any Run off the
    /// Account (its CLI not found, bubblewrap missing, an empty credential store). Read
    /// when a plan is made, never stored.
    pub unready: Option<String>,
    /// Whether the Account's login was ever seen to work (a figure observed, a Run that
    /// succeeded). Read when a plan is made, never stored.
    pub login_seen: bool,
    /// Its credential store is missing or empty: no login there for a probe to find. Read
    /// when a plan is made, never stored.
    pub store_empty: bool,
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
                "waiting: not logged in: 401",
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
