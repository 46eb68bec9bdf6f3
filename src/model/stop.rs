//! Why a Run stopped and why a Job waits: stop causes with their facts, their stored kinds, Job reasons and whose doing a Run's end was.

use super::*;

/// Why owl stopped a Run before the agent finished it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StopCause {
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
    /// Its supervisor lost the Run's lease on a shared store (another machine recorded it
    /// lost, or the store could not be reached to renew it before it expired).
    LeaseLost(String),
    /// The agent CLI used what owl did not configure (a key helper, an MCP server, a hook:
    /// a settings file the agent could write); the Job is blocked for a person.
    Unconfigured(String),
}

/// The kind of a [`StopCause`], as stored with the Run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StopKind {
    Ceiling,
    RateLimited,
    ExtraUsage,
    MaxRunTime,
    Stalled,
    Cancelled,
    Signal,
    DiskFull,
    LogWrite,
    LeaseLost,
    Unconfigured,
}

impl StopKind {
    pub(crate) const ALL: [StopKind; 11] = [
        StopKind::Ceiling,
        StopKind::RateLimited,
        StopKind::ExtraUsage,
        StopKind::MaxRunTime,
        StopKind::Stalled,
        StopKind::Cancelled,
        StopKind::Signal,
        StopKind::DiskFull,
        StopKind::LogWrite,
        StopKind::LeaseLost,
        StopKind::Unconfigured,
    ];

    /// The name stored.
    pub(crate) fn as_str(self) -> &'static str {
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
            StopKind::LeaseLost => "lease_lost",
            StopKind::Unconfigured => "unconfigured",
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
    pub(crate) fn kind(&self) -> StopKind {
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
            StopCause::LeaseLost(_) => StopKind::LeaseLost,
            StopCause::Unconfigured(_) => StopKind::Unconfigured,
        }
    }

    /// The `stop_reason` recorded on the Run.
    pub(crate) fn reason(&self) -> String {
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
            StopCause::LeaseLost(why) => format!("lease lost: {why}"),
            StopCause::Unconfigured(what) => {
                format!("unconfigured: the agent CLI used what owl did not configure: {what}")
            }
        }
    }
}

/// Why a Job is where it is, as the tick, a cancel or a person left it: stored with the
/// Job (as JSON beside its rendered words) and rendered in one place, [`fmt::Display`].
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum JobReason {
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
    /// The agent said done, but the Job's check did not pass (failed, timed out, or was
    /// cut short by a stop of owl's): the Job runs again, told why.
    CheckFailed(CheckRecord),
    /// The Job's check still failed when its Runs reached `maxRuns`.
    CheckStillFailing(CheckRecord),
    /// The Job's check cannot start (its program missing or not executable): the
    /// environment's fault, for a person to fix before `owl requeue`.
    CheckCannotStart(CheckRecord),
    /// It waits for other Jobs to be done (`owl add --after`).
    After { jobs: Vec<String> },
    /// Words from before reasons were typed (a database older than schema 10).
    Note { text: String },
}

impl fmt::Display for JobReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobReason::Ceiling(crossing) => crossing.fmt(f),
            JobReason::RateLimited => f.write_str("rate limited by the provider"),
            JobReason::ExtraUsage(credits) => credits.fmt(f),
            // What happened to its last Run, not why it waits now: a queued Job after a
            // stopped Run does not wait on that stop (`status` says what it waits for).
            JobReason::NotTheJobs {
                cause: Cause::Stopped,
                why,
            } => write!(f, "its last Run was stopped ({why}); not charged to it"),
            JobReason::NotTheJobs { why, .. } => write!(
                f,
                "its last Run ended for a cause not its own ({why}); not charged to it"
            ),
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
            JobReason::CheckFailed(check) if check.status == CheckStatus::NotFinished => {
                write!(f, "{check}; queued again")
            }
            JobReason::CheckFailed(check) => {
                write!(f, "the agent said done, but its check failed: {check}")
            }
            JobReason::CheckStillFailing(check) => write!(f, "check still failing: {check}"),
            JobReason::CheckCannotStart(check) => write!(
                f,
                "{check}; install it or fix the check in config.yaml, then `owl requeue` the job"
            ),
            JobReason::After { jobs } => write!(f, "after {}", jobs.join(", ")),
            JobReason::Note { text } => f.write_str(text),
        }
    }
}

impl JobReason {
    /// The reason as stored: JSON that reads back as the same reason.
    pub(crate) fn to_stored(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| {
            serde_json::json!({"kind": "note", "text": self.to_string()}).to_string()
        })
    }

    /// A stored reason: its JSON, or (from an older owl, or JSON this owl does not know)
    /// its words kept as a note.
    pub(crate) fn from_stored(data: Option<&str>, text: Option<&str>) -> Option<JobReason> {
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
pub(crate) enum Cause {
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
    pub(crate) const ALL: [Cause; 6] = [
        Cause::Job,
        Cause::NotLoggedIn,
        Cause::Outage,
        Cause::RateLimited,
        Cause::DiskFull,
        Cause::Stopped,
    ];

    /// The name stored and printed.
    pub(crate) fn as_str(self) -> &'static str {
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
    pub(crate) fn counts(self) -> bool {
        self == Cause::Job
    }
}

impl std::str::FromStr for Cause {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        UnknownName::find(&Cause::ALL, Cause::as_str, "run cause", s)
    }
}
