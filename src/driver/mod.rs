//! The Driver seam (ADR-0018): what owl needs from an agent CLI, and the events it turns output into.

mod claude_code;
pub(crate) mod codex;
pub(crate) mod codex_protocol;
pub(crate) mod gemini;

use std::path::PathBuf;

use crate::config::{Account, DriverKind};
use crate::model::PermissionDenial;

pub(crate) use claude_code::ClaudeCode;

mod events;
pub(crate) use events::*;

/// What a Driver can do; owl plans around what is missing instead of assuming it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Capabilities {
    /// The agent reports the Account's utilization, so a Ceiling can be kept.
    pub(crate) usage_reporting: bool,
    /// A Run can be capped in money (`--max-budget-usd`).
    pub(crate) budget_cap: bool,
    /// `allowedTools`/`disallowedTools` can be expressed to the CLI.
    pub(crate) tool_policy: bool,
    /// The agent names its session, so a Run can be looked at (and resumed by hand) later.
    pub(crate) session_id: bool,
}

impl Capabilities {
    /// Each capability with its name as `owl doctor` prints it. `usage_probe` and
    /// `graceful_interrupt` are not flags but methods of the Driver, `probe_invocation` and
    /// `interrupt`, which return `Some` when it has one ([`offers_probe`]).
    pub(crate) fn named(
        &self,
        usage_probe: bool,
        graceful_interrupt: bool,
    ) -> [(&'static str, bool); 6] {
        [
            ("usage_reporting", self.usage_reporting),
            ("usage_probe", usage_probe),
            ("budget_cap", self.budget_cap),
            ("tool_policy", self.tool_policy),
            ("graceful_interrupt", graceful_interrupt),
            ("session_id", self.session_id),
        ]
    }
}

/// The capabilities of a configured kind's Driver, as the Driver declares them.
pub(crate) fn capabilities(kind: DriverKind) -> Capabilities {
    for_kind(kind).capabilities()
}

/// What a person does for an Account with no usable login, the same words wherever owl says
/// it (`status`, `doctor`): log in as its CLI does, then let owl see it.
pub(crate) fn login_fix(account: &Account, name: &str) -> String {
    format!(
        "{}, then `owl probe {name}`",
        for_kind(account.driver).login_hint(account)
    )
}

/// Whether the Account's utilization can be read without a token: its Driver offers a probe
/// for its login.
pub(crate) fn offers_probe(driver: &dyn Driver, account: &Account) -> bool {
    driver
        .probe_invocation(std::path::Path::new("probe"), account)
        .is_some()
}

/// The Driver for a configured kind: the registry, one line a Driver (its name and default
/// command are its row in `config`'s table).
pub(crate) fn for_kind(kind: DriverKind) -> Box<dyn Driver> {
    match kind {
        DriverKind::ClaudeCode => Box::new(ClaudeCode),
        DriverKind::Gemini => Box::new(gemini::GeminiCli),
        DriverKind::Codex => Box::new(codex::Codex),
    }
}

/// A command to start: argv and environment changes, never a shell string.
#[derive(Clone, PartialEq)]
pub(crate) struct Invocation {
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<String>,
    /// Variables set for the child. May hold credentials: never log the values.
    pub(crate) env_set: Vec<(String, String)>,
    /// Inherited variables removed from the child's environment.
    pub(crate) env_remove: Vec<String>,
    /// Files the command reads, with their contents: written (readable by the user alone)
    /// before it starts.
    pub(crate) files: Vec<(PathBuf, String)>,
}

impl Invocation {
    /// Writes the files the command reads, readable by the user alone (a policy may name
    /// the commands a Run may use; nobody else needs to read it).
    pub(crate) fn write_files(&self) -> std::io::Result<()> {
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
    pub(crate) fn env_var(&self, key: &str) -> Option<String> {
        match self.env_set.iter().rev().find(|(k, _)| k == key) {
            Some((_, value)) => Some(value.clone()),
            None if self.env_remove.iter().any(|k| k == key) => None,
            None => std::env::var(key).ok(),
        }
        .filter(|v| !v.is_empty())
    }

    /// The command: program, argv and environment changes, no shell. The caller sets
    /// its stdio and the rest.
    pub(crate) fn command(&self) -> std::process::Command {
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
pub(crate) struct RunRequest<'a> {
    pub(crate) command: &'a std::path::Path,
    pub(crate) account: &'a Account,
    pub(crate) permission_mode: &'a str,
    pub(crate) max_budget_usd: Option<f64>,
    pub(crate) allowed_tools: &'a [String],
    pub(crate) disallowed_tools: &'a [String],
    pub(crate) model: Option<&'a str>,
    /// owl's standing instructions, appended to the agent's system prompt.
    pub(crate) standing_instructions: &'a str,
    /// The Run's prompt, for a CLI that takes it in argv (the others get it on stdin).
    pub(crate) prompt: &'a str,
    /// A private directory for the files the command reads (a policy file, say).
    pub(crate) files_dir: &'a std::path::Path,
    /// Where the Run works (the Job's worktree).
    pub(crate) cwd: &'a std::path::Path,
    /// Directories beyond `cwd` the Run must write: the repository's git directory, which
    /// a commit in a worktree writes.
    pub(crate) writable_dirs: &'a [PathBuf],
}

/// Knows one agent CLI: its command line, its environment, its output.
pub(crate) trait Driver: Send + Sync {
    /// The kind, as named in config.yaml.
    fn kind(&self) -> DriverKind;

    /// Whether the Jobs' defaults ask this agent for what it can take (a permission mode
    /// it has); why not. A Driver that ignores a setting takes any value of it.
    fn check_defaults(&self, _defaults: &crate::config::JobDefaults) -> Result<(), Refused> {
        Ok(())
    }

    /// What this agent can do, with any login.
    fn capabilities(&self) -> Capabilities;

    /// Whether its Runs take an Account's `codexConfig:` (given on the command line in
    /// place of a configuration file the agent can write).
    fn takes_codex_config(&self) -> bool {
        false
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

    /// The command that starts the agent only to ask it for utilization: no prompt, no
    /// tokens; `None` when this Driver, or this Account's login, has no such probe. The one
    /// declaration of the `usage_probe` capability: there is no flag beside it.
    fn probe_invocation(
        &self,
        _command: &std::path::Path,
        _account: &Account,
    ) -> Option<Invocation> {
        None
    }

    /// Where the CLI keeps its login for an Account that names no `credentialStore`: its
    /// own default (Claude Code's `~/.claude`), judged as a named store is; `None` when owl
    /// cannot know (the CLI reads no file owl knows of).
    fn default_store(&self, _account: &Account) -> Option<std::path::PathBuf> {
        None
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

    /// The hosts (`host` or `host:port`) a Run of this CLI talks to, for a sandbox whose
    /// network lets through nothing else: its API endpoint as the invocation names it, and
    /// where its login is refreshed.
    fn network_endpoints(&self, invocation: &Invocation, _account: &Account) -> Vec<String> {
        self.api_endpoint(invocation)
            .and_then(|url| url_host_port(&url))
            .into_iter()
            .collect()
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

    /// The login of the Account that bills per token and that nothing else bounds, in words
    /// ("an API key (GEMINI_API_KEY in its env)"), when it has one: owl starts nothing on it
    /// unless the Account allows billed usage. A Driver whose ceilings guard an API key
    /// another way (Claude Code's login check) says `None`.
    fn billed_login(&self, _account: &Account) -> Option<String> {
        None
    }

    /// Which logins this Driver's CLI serves, when its vendor no longer serves them all;
    /// said by `doctor` and README, and in a lost login's reason.
    fn logins_served(&self) -> Option<&'static str> {
        None
    }

    /// What the CLI's stderr says of its login when it ended with no result line (a login
    /// its vendor refuses before the first turn): the reason, in words.
    fn login_refused(&self, _stderr_tail: &str) -> Option<String> {
        None
    }

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
pub(crate) enum AgentFailure {
    /// The Account has no usable login (none, expired, revoked).
    NotLoggedIn,
    /// The provider's rate limiter refused the Account.
    RateLimited,
    /// The API was unreachable, or failing, after the CLI's retries.
    Unavailable,
}

/// Why owl will not run an agent CLI.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AgentCliError {
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
        .chain(STORE_CREDENTIALS.iter())
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

/// The most of one instruction file a Run is given: the CLI itself warns past 40k
/// characters.
const INSTRUCTIONS_CAP: u64 = 64 * 1024;

/// owl's standing instructions, then the repository's own instruction files (`names`,
/// relative to the worktree) as the CLI would have read them, for a CLI that skips them
/// when it reads no project settings: they stay the repository's to give, though its
/// settings do not.
/// A file the agent replaced with a symlink, a FIFO or something too large is left out.
pub(super) fn with_instruction_files(
    standing: &str,
    worktree: &std::path::Path,
    names: &[&str],
) -> String {
    let mut text = standing.to_string();
    for name in names {
        let Ok(body) = crate::untrusted::read_to_string(&worktree.join(name), INSTRUCTIONS_CAP)
        else {
            continue;
        };
        if body.trim().is_empty() {
            continue;
        }
        text.push_str(&format!(
            "\n\nThe repository's instructions ({name}), which owl gives you in place of the \
             CLI:\n\n{}",
            body.trim_end()
        ));
    }
    text
}

/// `host:port` of an `http(s)://` URL (the scheme's port when it names none).
pub(crate) fn url_host_port(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    if authority.is_empty() {
        return None;
    }
    let has_port = authority.rsplit_once(':').is_some_and(|(h, p)| {
        !h.ends_with(':') && p.bytes().all(|b| b.is_ascii_digit()) && !p.is_empty()
    });
    if has_port {
        return Some(authority.to_lowercase());
    }
    let port = match scheme {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    Some(format!("{}:{port}", authority.to_lowercase()))
}

/// A file recorded from a real CLI (`tests/fixtures/<cli>/<name>`), whole.
#[cfg(test)]
pub(crate) fn fixture_text(cli: &str, name: &str) -> String {
    let path = format!("{}/tests/fixtures/{cli}/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
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
/// The store's password, where libpq and owl read it: never passed on to a process owl
/// starts (an agent, its check, a probe, the notify hook), whatever the Account sets.
pub(crate) const STORE_CREDENTIALS: [&str; 2] = ["PGPASSWORD", "PGPASSFILE"];

pub(crate) fn inherited_credentials() -> impl Iterator<Item = &'static str> {
    claude_code::INHERITED_CREDENTIALS
        .into_iter()
        .chain(codex::INHERITED_CREDENTIALS)
        .chain(gemini::INHERITED_CREDENTIALS)
}

/// Finds a command (an agent CLI, bubblewrap) without running it: a path must be an
/// executable file, a bare name must be one on `PATH` (as the tick's environment has it).
/// `key` is the config key that names it, for the fix.
pub(crate) fn locate(
    command: &std::path::Path,
    key: &str,
) -> Result<std::path::PathBuf, AgentCliError> {
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
pub(crate) fn identity(command: &std::path::Path) -> Option<String> {
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
pub(crate) struct Login {
    pub(crate) logged_in: bool,
    /// How: `none`, `claude.ai` (a plan login), `oauth_token`, `api_key`, …
    pub(crate) method: String,
    /// The plan the stored login names (`max`), when it does.
    pub(crate) plan: Option<String>,
}

impl Login {
    /// Whether it bills per token instead of a plan: no utilization to keep under a ceiling.
    pub(crate) fn is_api_key(&self) -> bool {
        self.method == "api_key"
    }

    /// Why no Run may start on this login, if none may: none at all, or an API key on an
    /// Account whose ceilings need a plan's utilization (and which would bill per token).
    pub(crate) fn refusal(&self, needs_plan: bool) -> Option<String> {
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
    pub(crate) fn describe(&self) -> String {
        match &self.plan {
            Some(plan) => format!("{} (plan {plan})", self.method),
            None => self.method.clone(),
        }
    }
}

/// A Job default an agent cannot take.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refused {
    #[error("permissionMode '{mode}' is not one of {}{}", accepted.join(", "), crate::config::did_you_mean(mode, accepted))]
    PermissionMode {
        mode: String,
        accepted: &'static [&'static str],
    },
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
