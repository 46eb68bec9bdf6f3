//! What a Driver reads the agent's output into: its events, usage answers and rate limits, its result, its session log, and how it is interrupted and polled.

use super::*;

/// One line of the agent's output, understood.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AgentEvent {
    /// The agent started its session.
    Init {
        session_id: Option<String>,
        model: Option<String>,
        version: Option<String>,
        /// What the CLI says it took from somewhere owl did not configure: a key other
        /// than the Account's login, an MCP server, a plugin; empty: nothing.
        unconfigured: Vec<String>,
    },
    /// The CLI ran something owl did not configure (a hook), in words.
    Unconfigured(String),
    /// The model said something or asked for a tool. `synthetic`: the CLI wrote it itself
    /// because the model could not be reached; `error` is the CLI's word for why
    /// (`authentication_failed`, `server_error`, `rate_limit`, `unknown`).
    Assistant {
        summary: String,
        synthetic: bool,
        error: Option<String>,
    },
    /// A tool ran (or was refused) and its result went back to the model.
    ToolResult {
        is_error: bool,
        /// A tool the CLI's policy refused, when only this line says so (Gemini).
        denied: Option<PermissionDenial>,
    },
    /// The CLI's word that its turn was cut short by an interrupt (owl's: no person types
    /// into an unattended Run), as Claude Code writes `[Request interrupted by user]`.
    Interrupted,
    /// The agent is retrying a failing API call.
    ApiRetry {
        attempt: i64,
        max_retries: i64,
        error_status: Option<i64>,
    },
    /// The provider's view of the Account's rate limit.
    RateLimit(RateLimitInfo),
    /// The Account's utilization, told outside stdout: a line of the agent's own usage log
    /// (Codex's rollout file), or a probe run beside the agent. `source` names which.
    Usage {
        source: crate::model::SnapshotSource,
        windows: Vec<WindowUsage>,
    },
    /// The answer to a control request owl wrote on stdin; `usage` when it answered a usage request.
    ControlResponse {
        request_id: String,
        ok: bool,
        usage: Option<Usage>,
        /// The session's cost so far, when the answer tells it (Claude Code's `get_usage`).
        cost_usd: Option<f64>,
    },
    /// How the turn ended.
    Result(AgentResult),
    /// A line of a type this Driver does not use.
    Other { kind: String },
}

impl AgentEvent {
    /// A few words for `owl status`'s "last event".
    pub(crate) fn describe(&self) -> String {
        match self {
            AgentEvent::Init { model, .. } => {
                format!("init ({})", model.as_deref().unwrap_or("unknown model"))
            }
            AgentEvent::Assistant { summary, .. } => format!("assistant: {summary}"),
            AgentEvent::ToolResult {
                is_error: false, ..
            } => "tool result".into(),
            AgentEvent::ToolResult { is_error: true, .. } => "tool result (error)".into(),
            AgentEvent::Interrupted => "interrupted by owl".into(),
            AgentEvent::ApiRetry {
                attempt,
                max_retries,
                error_status,
            } => format!(
                "api retry {attempt}/{max_retries} (status {})",
                error_status.map_or("none".into(), |s| s.to_string())
            ),
            AgentEvent::RateLimit(info) => format!(
                "rate limit {} ({})",
                info.status,
                info.window.as_deref().unwrap_or("unknown window")
            ),
            AgentEvent::Usage { source, .. } => format!("utilization ({source})"),
            AgentEvent::Unconfigured(what) => format!("unconfigured: {what}"),
            AgentEvent::ControlResponse { request_id, .. } => {
                format!("control response {request_id}")
            }
            AgentEvent::Result(r) => format!("result {}", r.subtype),
            AgentEvent::Other { kind } => kind.clone(),
        }
    }
}

/// The Account's utilization as the agent reported it when asked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Usage {
    /// The agent does not know (yet): never read as 0.
    Unknown,
    Windows(Vec<WindowUsage>),
    /// The agent has no plan login: no credential at all, or an API key (which has no plan).
    NoPlan,
}

/// One Window of a usage answer, already in percent 0–100.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WindowUsage {
    pub(crate) window: String,
    pub(crate) percent: f64,
    pub(crate) resets_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The model family a per-model Window limits ("Fable"), when the agent named it.
    pub(crate) model: Option<String>,
}

/// The provider's word on a request, as the CLI passes it on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RateLimitStatus {
    Allowed,
    /// Allowed, nearing a limit (the only state in which older CLIs give a figure).
    AllowedWarning,
    /// Refused until the limit resets (or billed to credits: see `on_credits`).
    Rejected,
    /// A word this Driver does not know, kept as said.
    Other(String),
}

impl RateLimitStatus {
    /// The CLI's word (`allowed`, `allowed_warning`, `rejected`).
    pub(crate) fn parse(word: &str) -> RateLimitStatus {
        match word {
            "allowed" => RateLimitStatus::Allowed,
            "allowed_warning" => RateLimitStatus::AllowedWarning,
            "rejected" => RateLimitStatus::Rejected,
            other => RateLimitStatus::Other(other.to_string()),
        }
    }
}

impl std::fmt::Display for RateLimitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RateLimitStatus::Allowed => "allowed",
            RateLimitStatus::AllowedWarning => "allowed_warning",
            RateLimitStatus::Rejected => "rejected",
            RateLimitStatus::Other(word) => word,
        })
    }
}

/// A `rate_limit_event`, in the agent's units.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RateLimitInfo {
    pub(crate) status: RateLimitStatus,
    /// Epoch seconds.
    pub(crate) resets_at: Option<i64>,
    pub(crate) window: Option<String>,
    /// A fraction 0–1; only present in warning states.
    pub(crate) utilization: Option<f64>,
    /// Every Window's figure the event carries (Claude Code 2.1.332's `unifiedWindows`, on
    /// every event, `allowed` ones included), already in percent.
    pub(crate) windows: Vec<WindowUsage>,
    /// The response was billed to extra usage (paid credits): `isUsingOverage` (the plan
    /// says rejected, credits let it through) or `overageInUse` (billed to credits, even
    /// under `status: allowed`).
    pub(crate) on_credits: bool,
}

/// A file the agent writes during a Run that tells more than its stdout (Codex's rollout
/// file: the Account's utilization, the commands its sandbox blocked): found under `root`
/// by its name's end once the session is named, and followed line by line.
#[derive(Debug, Clone)]
pub(crate) struct SessionLog {
    /// Where to look, at any depth up to [`SessionLog::DEPTH`].
    pub(crate) root: PathBuf,
    /// How the file's name starts (Codex: `rollout-`).
    pub(crate) name_starts: &'static str,
    /// How the file's name ends (`-<thread id>.jsonl`).
    pub(crate) name_ends: String,
    /// What one line tells owl: [`AgentEvent::Usage`], a denied [`AgentEvent::ToolResult`].
    pub(crate) parse: fn(&[u8]) -> Vec<AgentEvent>,
}

impl SessionLog {
    /// How deep under `root` the file may be (Codex: `sessions/YYYY/MM/DD/`).
    pub(crate) const DEPTH: usize = 3;

    /// The file, once the agent has written it.
    pub(crate) fn find(&self) -> Option<PathBuf> {
        find_log(&self.root, self.name_starts, &self.name_ends, Self::DEPTH)
    }
}

/// The file under `root`, at most `depth` directories down, whose name starts with
/// `name_starts` and ends with `name_ends`; the newest directories are looked at first.
pub(super) fn find_log(
    root: &std::path::Path,
    name_starts: &str,
    name_ends: &str,
    depth: usize,
) -> Option<PathBuf> {
    let mut entries: Vec<_> = std::fs::read_dir(root)
        .ok()?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(|e| std::cmp::Reverse(e.file_name()));
    entries.into_iter().find_map(|entry| {
        let path = entry.path();
        let kind = entry.file_type().ok()?;
        if kind.is_dir() && depth > 0 {
            find_log(&path, name_starts, name_ends, depth - 1)
        } else {
            let name = entry.file_name();
            let name = name.to_str()?;
            (kind.is_file() && name.starts_with(name_starts) && name.ends_with(name_ends))
                .then_some(path)
        }
    })
}

/// How a running agent is asked for the Account's utilization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UsagePoll {
    /// It cannot be asked.
    None,
    /// A request on the agent's stdin ([`Driver::usage_request_input`]).
    Stdin,
    /// The zero-token probe, run beside the agent ([`Driver::probe_invocation`]).
    Probe,
}

/// How a running agent is asked to abort its turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Interrupt {
    /// These bytes on its stdin.
    Stdin(Vec<u8>),
    /// SIGINT to its process group (the CLI aborts the turn and kills its tools).
    Sigint,
}

/// The agent's own account of how its turn ended.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct AgentResult {
    pub(crate) subtype: String,
    pub(crate) is_error: bool,
    pub(crate) api_error_status: Option<i64>,
    /// The agent stopped because it reached its spending cap.
    pub(crate) budget_exhausted: bool,
    pub(crate) text: Option<String>,
    pub(crate) errors: Vec<String>,
    pub(crate) terminal_reason: Option<String>,
    /// The CLI's typed word for an API error (`usage_limit_reached` for a limit stop,
    /// Claude Code 2.1.332 on): read before any words of the text.
    pub(crate) api_error: Option<String>,
    pub(crate) session_id: Option<String>,
    pub(crate) cost_usd: Option<f64>,
    pub(crate) num_turns: Option<i64>,
    pub(crate) input_tokens: Option<i64>,
    pub(crate) output_tokens: Option<i64>,
    pub(crate) permission_denials: Vec<PermissionDenial>,
}

/// Why a stdout line could not be turned into an event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LineError {
    NotUtf8,
    NotJson(String),
    NoType,
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LineError::NotUtf8 => f.write_str("not UTF-8"),
            LineError::NotJson(e) => write!(f, "not JSON: {e}"),
            LineError::NoType => f.write_str("a JSON line without a 'type'"),
        }
    }
}
