//! The Driver seam (ADR-0018): what owl needs from an agent CLI, and the events it turns output into.

mod claude_code;
pub mod codex;
pub mod codex_protocol;
pub mod gemini;

use std::path::PathBuf;

use crate::config::{Account, DriverKind};
use crate::model::PermissionDenial;

pub use claude_code::ClaudeCode;

/// What a Driver can do; owl plans around what is missing instead of assuming it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// The agent reports the Account's utilization, so a Ceiling can be kept.
    pub usage_reporting: bool,
    /// An Account's utilization can be read without spending a token (the preflight probe).
    pub usage_probe: bool,
    /// A Run can be capped in money (`--max-budget-usd`).
    pub budget_cap: bool,
    /// `allowedTools`/`disallowedTools` can be expressed to the CLI.
    pub tool_policy: bool,
    /// The agent can be asked to abort its turn and still report how it ended.
    pub graceful_interrupt: bool,
    /// The agent names its session, so a Run can be looked at (and resumed by hand) later.
    pub session_id: bool,
}

impl Capabilities {
    /// Each capability with its name as `owl doctor` prints it.
    pub fn named(&self) -> [(&'static str, bool); 6] {
        [
            ("usage_reporting", self.usage_reporting),
            ("usage_probe", self.usage_probe),
            ("budget_cap", self.budget_cap),
            ("tool_policy", self.tool_policy),
            ("graceful_interrupt", self.graceful_interrupt),
            ("session_id", self.session_id),
        ]
    }
}

/// The capabilities of a configured kind's Driver, as the Driver declares them.
pub fn capabilities(kind: DriverKind) -> Capabilities {
    for_kind(kind).capabilities()
}

/// The Driver for a configured kind: the registry, one line a Driver (its name and default
/// command are its row in `config`'s table).
pub fn for_kind(kind: DriverKind) -> Box<dyn Driver> {
    match kind {
        DriverKind::ClaudeCode => Box::new(ClaudeCode),
        DriverKind::Gemini => Box::new(gemini::GeminiCli),
        DriverKind::Codex => Box::new(codex::Codex),
    }
}

/// A command to start: argv and environment changes, never a shell string.
#[derive(Clone, PartialEq)]
pub struct Invocation {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Variables set for the child. May hold credentials: never log the values.
    pub env_set: Vec<(String, String)>,
    /// Inherited variables removed from the child's environment.
    pub env_remove: Vec<String>,
    /// Files the command reads, with their contents: written (readable by the user alone)
    /// before it starts.
    pub files: Vec<(PathBuf, String)>,
}

impl Invocation {
    /// Writes the files the command reads, readable by the user alone (a policy may name
    /// the commands a Run may use; nobody else needs to read it).
    pub fn write_files(&self) -> std::io::Result<()> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        for (path, content) in &self.files {
            if let Some(dir) = path.parent() {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)?;
            }
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(path)?;
            std::io::Write::write_all(&mut file, content.as_bytes())?;
        }
        Ok(())
    }

    /// A variable as the command will see it: what it sets, else what owl's own
    /// environment gives it (unless removed).
    pub fn env_var(&self, key: &str) -> Option<String> {
        match self.env_set.iter().rev().find(|(k, _)| k == key) {
            Some((_, value)) => Some(value.clone()),
            None if self.env_remove.iter().any(|k| k == key) => None,
            None => std::env::var(key).ok(),
        }
        .filter(|v| !v.is_empty())
    }

    /// The command: program, argv and environment changes, no shell. The caller sets
    /// its stdio and the rest.
    pub fn command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.program);
        cmd.args(&self.args);
        for key in &self.env_remove {
            cmd.env_remove(key);
        }
        for (key, value) in &self.env_set {
            cmd.env(key, value);
        }
        cmd
    }
}

impl std::fmt::Debug for Invocation {
    /// The values set may be credentials: only their keys are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<&str> = self.env_set.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("Invocation")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env_set (values hidden)", &keys)
            .field("env_remove", &self.env_remove)
            .finish()
    }
}

/// What a Driver needs to build one Run's command.
#[derive(Debug, Clone)]
pub struct RunRequest<'a> {
    pub command: &'a std::path::Path,
    pub account: &'a Account,
    pub permission_mode: &'a str,
    pub max_budget_usd: Option<f64>,
    pub allowed_tools: &'a [String],
    pub disallowed_tools: &'a [String],
    pub model: Option<&'a str>,
    /// owl's standing instructions, appended to the agent's system prompt.
    pub standing_instructions: &'a str,
    /// The Run's prompt, for a CLI that takes it in argv (the others get it on stdin).
    pub prompt: &'a str,
    /// A private directory for the files the command reads (a policy file, say).
    pub files_dir: &'a std::path::Path,
    /// Where the Run works (the Job's worktree).
    pub cwd: &'a std::path::Path,
    /// Directories beyond `cwd` the Run must write: the repository's git directory, which
    /// a commit in a worktree writes.
    pub writable_dirs: &'a [PathBuf],
}

/// One line of the agent's output, understood.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// The agent started its session.
    Init {
        session_id: Option<String>,
        model: Option<String>,
        version: Option<String>,
    },
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
    pub fn describe(&self) -> String {
        match self {
            AgentEvent::Init { model, .. } => {
                format!("init ({})", model.as_deref().unwrap_or("unknown model"))
            }
            AgentEvent::Assistant { summary, .. } => format!("assistant: {summary}"),
            AgentEvent::ToolResult {
                is_error: false, ..
            } => "tool result".into(),
            AgentEvent::ToolResult { is_error: true, .. } => "tool result (error)".into(),
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
pub enum Usage {
    /// The agent does not know (yet): never read as 0.
    Unknown,
    Windows(Vec<WindowUsage>),
    /// The agent has no plan login: no credential at all, or an API key (which has no plan).
    NoPlan,
}

/// One Window of a usage answer, already in percent 0–100.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowUsage {
    pub window: String,
    pub percent: f64,
    pub resets_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The model family a per-model Window limits ("Fable"), when the agent named it.
    pub model: Option<String>,
}

/// The provider's word on a request, as the CLI passes it on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RateLimitStatus {
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
    pub fn parse(word: &str) -> RateLimitStatus {
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
pub struct RateLimitInfo {
    pub status: RateLimitStatus,
    /// Epoch seconds.
    pub resets_at: Option<i64>,
    pub window: Option<String>,
    /// A fraction 0–1; only present in warning states.
    pub utilization: Option<f64>,
    /// Every Window's figure the event carries (Claude Code 2.1.332's `unifiedWindows`, on
    /// every event, `allowed` ones included), already in percent.
    pub windows: Vec<WindowUsage>,
    /// The response was billed to extra usage (paid credits): `isUsingOverage` (the plan
    /// says rejected, credits let it through) or `overageInUse` (billed to credits, even
    /// under `status: allowed`).
    pub on_credits: bool,
}

/// A file the agent writes during a Run that tells more than its stdout (Codex's rollout
/// file: the Account's utilization, the commands its sandbox blocked): found under `root`
/// by its name's end once the session is named, and followed line by line.
#[derive(Debug, Clone)]
pub struct SessionLog {
    /// Where to look, at any depth up to [`SessionLog::DEPTH`].
    pub root: PathBuf,
    /// How the file's name starts (Codex: `rollout-`).
    pub name_starts: &'static str,
    /// How the file's name ends (`-<thread id>.jsonl`).
    pub name_ends: String,
    /// What one line tells owl: [`AgentEvent::Usage`], a denied [`AgentEvent::ToolResult`].
    pub parse: fn(&[u8]) -> Vec<AgentEvent>,
}

impl SessionLog {
    /// How deep under `root` the file may be (Codex: `sessions/YYYY/MM/DD/`).
    pub const DEPTH: usize = 3;

    /// The file, once the agent has written it.
    pub fn find(&self) -> Option<PathBuf> {
        find_log(&self.root, self.name_starts, &self.name_ends, Self::DEPTH)
    }
}

/// The file under `root`, at most `depth` directories down, whose name starts with
/// `name_starts` and ends with `name_ends`; the newest directories are looked at first.
fn find_log(
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
pub enum UsagePoll {
    /// It cannot be asked.
    None,
    /// A request on the agent's stdin ([`Driver::usage_request_input`]).
    Stdin,
    /// The zero-token probe, run beside the agent ([`Driver::probe_invocation`]).
    Probe,
}

/// How a running agent is asked to abort its turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interrupt {
    /// These bytes on its stdin.
    Stdin(Vec<u8>),
    /// SIGINT to its process group (the CLI aborts the turn and kills its tools).
    Sigint,
}

/// The agent's own account of how its turn ended.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgentResult {
    pub subtype: String,
    pub is_error: bool,
    pub api_error_status: Option<i64>,
    /// The agent stopped because it reached its spending cap.
    pub budget_exhausted: bool,
    pub text: Option<String>,
    pub errors: Vec<String>,
    pub terminal_reason: Option<String>,
    /// The CLI's typed word for an API error (`usage_limit_reached` for a limit stop,
    /// Claude Code 2.1.332 on): read before any words of the text.
    pub api_error: Option<String>,
    pub session_id: Option<String>,
    pub cost_usd: Option<f64>,
    pub num_turns: Option<i64>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub permission_denials: Vec<PermissionDenial>,
}

/// Why a stdout line could not be turned into an event.
#[derive(Debug, Clone, PartialEq)]
pub enum LineError {
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

/// Knows one agent CLI: its command line, its environment, its output.
pub trait Driver: Send + Sync {
    /// The kind, as named in config.yaml.
    fn kind(&self) -> DriverKind;

    /// Whether the Jobs' defaults ask this agent for what it can take (a permission mode
    /// it has); why not. A Driver that ignores a setting takes any value of it.
    fn check_defaults(&self, _defaults: &crate::config::JobDefaults) -> Result<(), String> {
        Ok(())
    }

    /// What this agent can do, with any login.
    fn capabilities(&self) -> Capabilities;

    /// What this agent can do with this Account's login (a probe may need a plan login).
    fn account_capabilities(&self, _account: &Account) -> Capabilities {
        self.capabilities()
    }

    /// The command that makes the CLI print its version, in the Account's environment
    /// (scrubbed like every other process owl starts).
    fn version_invocation(&self, command: &std::path::Path, account: &Account) -> Invocation;

    /// The version from the CLI's `--version` output, or why owl will not run it.
    fn check_version(&self, stdout: &str) -> Result<String, AgentCliError>;

    /// The command for one Run.
    fn invocation(&self, req: &RunRequest) -> Invocation;

    /// The bytes that hand the prompt to the agent on stdin.
    /// Empty for a CLI that takes its prompt in argv: owl then closes its stdin at once.
    fn prompt_input(&self, _prompt: &str) -> Vec<u8> {
        Vec::new()
    }

    /// How the agent is asked to abort its turn, when it can be asked.
    fn interrupt(&self, _request_id: &str) -> Option<Interrupt> {
        None
    }

    /// How the running agent is asked for utilization at `usagePollInterval`.
    fn usage_poll(&self) -> UsagePoll {
        UsagePoll::None
    }

    /// The file this agent writes while its session runs that tells more than stdout (the
    /// Account's utilization); `None` when it writes none.
    fn session_log(&self, _account: &Account, _session_id: &str) -> Option<SessionLog> {
        None
    }

    /// The bytes that ask the agent for the Account's utilization, when it can be asked.
    fn usage_request_input(&self, _request_id: &str) -> Option<Vec<u8>> {
        None
    }

    /// The command that starts the agent only to ask it for utilization: no prompt, no tokens.
    /// Only called for a Driver that declares `usage_probe`.
    fn probe_invocation(&self, command: &std::path::Path, account: &Account) -> Invocation {
        self.version_invocation(command, account)
    }

    /// Why the Account's credential store shows no login at all, by a look at its files
    /// (never their contents) and without starting the CLI; `None` when it may hold one.
    /// By default: the store is missing or empty.
    fn store_shows_no_login(&self, store: &std::path::Path) -> Option<String> {
        store_missing_or_empty(store)
    }

    /// The API the CLI started by `invocation` talks to, as a URL, for owl to tell an
    /// answer of "unknown" from an unreachable API; `None` when owl cannot know it (another
    /// provider's endpoint), and nothing is judged.
    fn api_endpoint(&self, _invocation: &Invocation) -> Option<String> {
        None
    }

    /// The command a person types to use the CLI as this Account (`CLAUDE_CONFIG_DIR=… claude`).
    fn interactive_command(&self, account: &Account) -> String;

    /// How a person logs this Account in, in a few words with the command.
    fn login_hint(&self, account: &Account) -> String;

    /// The command a person types in the worktree to take a Run's session up by hand; `None`
    /// for an id that is not the shape the CLI gives (the agent's stream names it).
    fn resume_command(&self, account: &Account, session_id: &str) -> Option<String> {
        crate::text::is_uuid(session_id).then(|| {
            format!(
                "{} --resume {session_id}",
                self.interactive_command(account)
            )
        })
    }

    /// What owl cannot see of this agent's Runs, said under each in `show`; `None` when
    /// its output tells everything owl reports.
    fn blind_spots(&self) -> Option<&'static str> {
        None
    }

    /// What an error `result` means beyond the Job (a missing login, a rate limit, an API
    /// that cannot be used), from the CLI's own signs: only its Driver can read them.
    /// `agent_error` is the CLI's error word on its last synthetic answer.
    fn failure(
        &self,
        result: &AgentResult,
        agent_error: Option<&str>,
        reached_model: bool,
    ) -> Option<AgentFailure>;

    /// When a rate limit resets, as the words of the agent's error result name it
    /// (`None` when they do not, or when the agent tells it another way).
    fn named_reset(
        &self,
        _result: &AgentResult,
        _now: chrono::DateTime<chrono::Utc>,
    ) -> Option<chrono::DateTime<chrono::Utc>> {
        None
    }

    /// Whether the Account logs in with an API key (which has no plan and no utilization).
    fn uses_api_key(&self, account: &Account) -> bool;

    /// Turns one stdout line (without its newline) into an event.
    fn parse_line(&self, line: &[u8]) -> Result<AgentEvent, LineError>;

    /// The command that asks the CLI for its login without a turn (`claude auth status`),
    /// if it has one.
    fn login_invocation(
        &self,
        _command: &std::path::Path,
        _account: &Account,
    ) -> Option<Invocation> {
        None
    }

    /// Reads that command's answer.
    fn parse_login(&self, _stdout: &str) -> Option<Login> {
        None
    }
}

/// How long an agent asked to interrupt its turn has to write its `result` line: owl waits
/// this long in a Run, and the conformance check holds the CLI to it.
pub const INTERRUPT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// What an agent's error result means, when it is not the Job's doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentFailure {
    /// The Account has no usable login (none, expired, revoked).
    NotLoggedIn,
    /// The provider's rate limiter refused the Account.
    RateLimited,
    /// The API was unreachable, or failing, after the CLI's retries.
    Unavailable,
}

/// Why owl will not run an agent CLI.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentCliError {
    #[error("'{}' does not exist", .0.display())]
    Missing(PathBuf),
    #[error("'{}' is not an executable file", .0.display())]
    NotExecutable(PathBuf),
    #[error("'{}' is not on PATH ({path}); set {key} to its absolute path", command.display())]
    NotOnPath {
        command: PathBuf,
        path: String,
        /// The config key that names the command (`drivers.codex.command`, `sandbox.command`).
        key: String,
    },
    #[error("cannot run '{}': {error}", command.display())]
    CannotRun { command: PathBuf, error: String },
    #[error("'{}' --version did not answer", .0.display())]
    NoAnswer(PathBuf),
    #[error("'{output}' is not a {agent} version")]
    Unrecognised { output: String, agent: &'static str },
    #[error("{agent} {version} is not verified: run `owl doctor --conformance`")]
    Unverified {
        agent: &'static str,
        version: String,
    },
    #[error(
        "{agent} {version} failed the conformance check ({failed}); owl does not run it \
         (see `owl doctor --conformance`)"
    )]
    FailedConformance {
        agent: &'static str,
        version: String,
        failed: String,
    },
    #[error("{agent} {version} is outside the tested range {range} (tested on {tested})")]
    Untested {
        agent: &'static str,
        version: String,
        range: String,
        tested: String,
    },
}

impl From<AgentCliError> for crate::error::Error {
    fn from(e: AgentCliError) -> Self {
        crate::error::Error::new(crate::error::ErrorKind::AgentCli, e.to_string())
    }
}

/// Why a credential store holds nothing: it does not exist, or is an empty directory.
pub(crate) fn store_missing_or_empty(store: &std::path::Path) -> Option<String> {
    match std::fs::read_dir(store) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(format!(
            "its credential store {} does not exist",
            store.display()
        )),
        Ok(mut entries) => entries
            .next()
            .is_none()
            .then(|| format!("its credential store {} is empty", store.display())),
        Err(_) => None,
    }
}

/// The command for an Account, as every Driver builds it: `first` (what the Driver sets
/// and an Account may change), the credential store under `store_var`, the Account's
/// `env:`, then `last` (what the Driver insists on); `inherited` credentials are removed
/// unless the Account sets them.
pub(crate) fn account_command(
    command: &std::path::Path,
    account: &Account,
    args: Vec<String>,
    store_var: &str,
    first: &[(&str, &str)],
    last: &[(&str, &str)],
    inherited: &[&str],
) -> Invocation {
    let pair = |(k, v): &(&str, &str)| (k.to_string(), v.to_string());
    let mut env_set: Vec<(String, String)> = first.iter().map(pair).collect();
    if let Some(store) = &account.credential_store {
        env_set.push((store_var.to_string(), store.display().to_string()));
    }
    env_set.extend(account.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env_set.extend(last.iter().map(pair));
    let env_remove = inherited
        .iter()
        .filter(|k| !account.env.contains_key(**k))
        .map(|k| k.to_string())
        .collect();
    Invocation {
        program: command.to_path_buf(),
        args,
        env_set,
        env_remove,
        files: Vec::new(),
    }
}

/// The lines of a transcript recorded from a real CLI (`tests/fixtures/<cli>/<name>`), for
/// unit tests that replay them.
#[cfg(test)]
pub(crate) fn recorded_lines(cli: &str, name: &str) -> Vec<String> {
    let path = format!("{}/tests/fixtures/{cli}/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .lines()
        .map(String::from)
        .collect()
}

/// Every credential variable a Driver keeps its CLI from inheriting: what owl's other
/// children (the notify command) are kept from too.
pub fn inherited_credentials() -> impl Iterator<Item = &'static str> {
    claude_code::INHERITED_CREDENTIALS
        .into_iter()
        .chain(codex::INHERITED_CREDENTIALS)
        .chain(gemini::INHERITED_CREDENTIALS)
}

/// Finds a command (an agent CLI, bubblewrap) without running it: a path must be an
/// executable file, a bare name must be one on `PATH` (as the tick's environment has it).
/// `key` is the config key that names it, for the fix.
pub fn locate(command: &std::path::Path, key: &str) -> Result<std::path::PathBuf, AgentCliError> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &std::path::Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if command.components().count() > 1 || command.is_absolute() {
        return if executable(command) {
            Ok(command.to_path_buf())
        } else if command.exists() {
            Err(AgentCliError::NotExecutable(command.to_path_buf()))
        } else {
            Err(AgentCliError::Missing(command.to_path_buf()))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(command))
        .find(|p| executable(p))
        .ok_or_else(|| AgentCliError::NotOnPath {
            command: command.to_path_buf(),
            path: path.to_string_lossy().into_owned(),
            key: key.to_string(),
        })
}

/// What identifies the agent CLI's file: its resolved path, size, modification time, inode
/// and device. An update (npm's, or the native installer's new version directory) changes
/// it; `None` when the file cannot be found.
pub fn identity(command: &std::path::Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let path = locate(command, "the command").ok()?.canonicalize().ok()?;
    let m = path.metadata().ok()?;
    Some(format!(
        "{}|{}|{}.{}|{}|{}",
        path.display(),
        m.len(),
        m.mtime(),
        m.mtime_nsec(),
        m.ino(),
        m.dev()
    ))
}

/// What the CLI says of its login, read locally and without a token: it cannot see a
/// login that expired or was revoked (only a Run or a probe can).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Login {
    pub logged_in: bool,
    /// How: `none`, `claude.ai` (a plan login), `oauth_token`, `api_key`, …
    pub method: String,
    /// The plan the stored login names (`max`), when it does.
    pub plan: Option<String>,
}

impl Login {
    /// Whether it bills per token instead of a plan: no utilization to keep under a ceiling.
    pub fn is_api_key(&self) -> bool {
        self.method == "api_key"
    }

    /// Why no Run may start on this login, if none may: none at all, or an API key on an
    /// Account whose ceilings need a plan's utilization (and which would bill per token).
    pub fn refusal(&self, needs_plan: bool) -> Option<String> {
        if !self.logged_in {
            Some(format!(
                "not logged in (the CLI's auth status: authMethod {})",
                self.method
            ))
        } else if self.is_api_key() && needs_plan {
            Some(
                "logged in with an API key, which reports no utilization and bills per token: \
                 an Account with ceilings needs a plan login"
                    .into(),
            )
        } else {
            None
        }
    }

    /// A few words: `claude.ai (plan max)`.
    pub fn describe(&self) -> String {
        match &self.plan {
            Some(plan) => format!("{} (plan {plan})", self.method),
            None => self.method.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_limit_word_is_read_once_and_an_unknown_one_kept() {
        for word in ["allowed", "allowed_warning", "rejected", "throttled"] {
            assert_eq!(RateLimitStatus::parse(word).to_string(), word);
        }
        assert_eq!(
            RateLimitStatus::parse("rejected"),
            RateLimitStatus::Rejected
        );
        assert_eq!(
            RateLimitStatus::parse("throttled"),
            RateLimitStatus::Other("throttled".into())
        );
    }

    #[test]
    fn the_log_is_found_by_its_name_under_any_date() {
        let dir = tempfile::tempdir().unwrap();
        let day = dir.path().join("2026/11/30");
        std::fs::create_dir_all(&day).unwrap();
        std::fs::create_dir_all(dir.path().join("2026/12/01")).unwrap();
        let want = day.join("rollout-2026-11-30T19-11-28-0199-abc.jsonl");
        std::fs::write(&want, "").unwrap();
        std::fs::write(day.join("rollout-2026-11-30T19-11-28-0199-other.jsonl"), "").unwrap();
        assert_eq!(
            find_log(dir.path(), "rollout-", "-0199-abc.jsonl", 3),
            Some(want)
        );
        assert_eq!(
            find_log(dir.path(), "rollout-", "-0199-abc.jsonl", 2),
            None,
            "deeper than allowed"
        );
        assert_eq!(find_log(dir.path(), "rollout-", "-nope.jsonl", 3), None);
        assert_eq!(
            find_log(
                &dir.path().join("missing"),
                "rollout-",
                "-0199-abc.jsonl",
                3
            ),
            None
        );
    }
}
