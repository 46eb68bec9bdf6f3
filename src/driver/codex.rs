//! The Codex CLI Driver (0.171.x): `codex exec --json` in the worktree's sandbox, the prompt in argv, the Account's `CODEX_HOME`; utilization from the thread's rollout file and `codex app-server`, SIGINT to abort a turn.

use std::path::PathBuf;

use super::codex_protocol;
use super::{
    AgentCliError, AgentEvent, AgentFailure, AgentResult, Capabilities, Driver, Interrupt,
    Invocation, LineError, RunRequest, SessionLog, UsagePoll,
};
use crate::config::{Account, DriverKind};

pub(crate) struct Codex;

/// The versions owl is tested against: 0.171.x (recorded on 0.171.0).
const TESTED_MAJOR_MINOR: (u64, u64) = (0, 171);

impl Codex {
    /// A zero-token probe only with a ChatGPT login: an API key has no plan
    /// (`probe_invocation`).
    pub(crate) const CAPABILITIES: Capabilities = Capabilities {
        // The rollout file carries the plan's windows whatever the login (PROTOCOL.md §5.2).
        usage_reporting: true,
        budget_cap: false,
        tool_policy: false,
        // SIGINT aborts the turn and kills its tools (§7).
        session_id: true,
    };
}

/// `codex app-server` in the Account's environment: JSON-RPC on stdio, where owl asks for the
/// plan's windows (and, with an API key, is told there is no plan).
pub(crate) fn app_server(command: &std::path::Path, account: &Account) -> Invocation {
    // It cannot leave `config.toml` out; what owl's config says outranks it.
    let mut args = vec!["app-server".to_string()];
    args.extend(config_args(account));
    account_invocation(command, account, args)
}

/// The Account's `codexConfig` as Codex's command line takes it: `-c key=<TOML value>` each.
fn config_args(account: &Account) -> Vec<String> {
    account
        .codex_config
        .iter()
        .flatten()
        .flat_map(|(key, value)| ["-c".to_string(), format!("{key}={}", toml_value(value))])
        .collect()
}

/// The values under keys ending `base_url` in the Account's `codexConfig`.
fn collect_urls(v: &serde_json::Value, out: &mut Vec<String>) {
    if let serde_json::Value::Object(map) = v {
        for (k, v) in map {
            match v {
                serde_json::Value::String(url) if k.ends_with("base_url") => out.push(url.clone()),
                other => collect_urls(other, out),
            }
        }
    }
}

/// A value of owl's config as TOML writes it inline (validation left no null).
fn toml_value(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        // JSON's string escapes are TOML's basic string escapes.
        Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null => v.to_string(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(toml_value).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) => {
            let pairs: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{} = {}", Value::String(k.clone()), toml_value(v)))
                .collect();
            format!("{{{}}}", pairs.join(", "))
        }
    }
}

/// Where the Account's Codex keeps its login and sessions: `CODEX_HOME` as the Account's
/// `env` or `credentialStore` sets it, else the CLI's default `~/.codex`.
fn codex_home(account: &Account) -> Option<PathBuf> {
    account
        .env
        .get("CODEX_HOME")
        .map(PathBuf::from)
        .or_else(|| account.credential_store.clone())
        .or_else(|| {
            let home = account.env.get("HOME").map(PathBuf::from);
            Some(
                home.or_else(|| std::env::var_os("HOME").map(PathBuf::from))?
                    .join(".codex"),
            )
        })
}

/// The largest `auth.json` read: a login is a few KiB.
const AUTH_CAP: u64 = 1 << 20;

/// Whether the Account logs in to ChatGPT (a plan, whose utilization `codex app-server`
/// reads without a turn), as its `auth.json` says; an API key in `env` wins, as in the CLI.
fn chatgpt_login(account: &Account) -> bool {
    if account.env.contains_key("OPENAI_API_KEY") {
        return false;
    }
    let Some(auth) = codex_home(account)
        // The agent can write its credential store: a FIFO or a huge file there is refused.
        .and_then(|home| crate::untrusted::read(&home.join("auth.json"), AUTH_CAP).ok())
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
    else {
        return false;
    };
    auth["auth_mode"] == "chatgpt" || (auth["auth_mode"].is_null() && auth["tokens"].is_object())
}

/// A Run's Codex reads neither `$CODEX_HOME/config.toml` nor any `.rules` file: the
/// credential store is the agent's to write (in the sandbox by design), and a rule can let a
/// command out of the sandbox. What the Account wants is its `codexConfig`, given with `-c`.
/// A project's own `.codex/` is read only for a project Codex trusts, and the worktree is
/// trusted nowhere once the user's config is not read.
const IGNORE_WRITABLE_CONFIG: &[&str] = &["--ignore-user-config", "--ignore-rules"];

impl Driver for Codex {
    fn default_store(&self, account: &Account) -> Option<PathBuf> {
        codex_home(account)
    }

    fn kind(&self) -> DriverKind {
        DriverKind::Codex
    }

    fn capabilities(&self) -> Capabilities {
        Self::CAPABILITIES
    }

    fn probe_invocation(&self, command: &std::path::Path, account: &Account) -> Option<Invocation> {
        // JSON-RPC on stdio; no thread is started, so no token is spent. An API key has no
        // plan to read.
        chatgpt_login(account).then(|| app_server(command, account))
    }

    fn usage_request_input(&self, _request_id: &str) -> Option<Vec<u8>> {
        Some(codex_protocol::rate_limits_request())
    }

    fn usage_poll(&self) -> UsagePoll {
        UsagePoll::Probe
    }

    fn session_log(&self, account: &Account, session_id: &str) -> Option<SessionLog> {
        // `sessions/YYYY/MM/DD/rollout-<local time>-<thread id>.jsonl`: the date is local,
        // so the file is found by its thread id, not by a path computed here.
        let safe = !session_id.is_empty()
            && session_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !safe {
            return None;
        }
        Some(SessionLog {
            root: codex_home(account)?.join("sessions"),
            name_starts: "rollout-",
            name_ends: format!("-{session_id}.jsonl"),
            parse: codex_protocol::rollout_events,
        })
    }

    fn interrupt(&self, _request_id: &str) -> Option<Interrupt> {
        Some(Interrupt::Sigint)
    }

    fn version_invocation(&self, command: &std::path::Path, account: &Account) -> Invocation {
        account_invocation(command, account, vec!["--version".into()])
    }

    fn check_version(&self, stdout: &str) -> Result<String, AgentCliError> {
        let line = stdout.trim();
        let version = line
            .strip_prefix("codex-cli ")
            .filter(|v| v.split('.').count() == 3 && v.split('.').all(|p| p.parse::<u64>().is_ok()))
            .ok_or_else(|| AgentCliError::Unrecognised {
                output: line.to_string(),
                agent: "Codex",
            })?;
        let mut parts = version.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
        if (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) != TESTED_MAJOR_MINOR {
            return Err(AgentCliError::Untested {
                agent: "Codex",
                version: version.to_string(),
                range: format!("{}.{}.x", TESTED_MAJOR_MINOR.0, TESTED_MAJOR_MINOR.1),
                tested: "0.171.0".into(),
            });
        }
        Ok(version.to_string())
    }

    fn network_endpoints(&self, _invocation: &Invocation, account: &Account) -> Vec<String> {
        // Every base URL the Account's codexConfig names (its providers', ChatGPT's), else
        // OpenAI's API, ChatGPT's backend and where a ChatGPT login is refreshed.
        let mut urls = Vec::new();
        collect_urls(
            &serde_json::Value::Object(account.codex_config.clone().unwrap_or_default()),
            &mut urls,
        );
        let named: Vec<String> = urls
            .iter()
            .filter_map(|u| super::url_host_port(u))
            .collect();
        if !named.is_empty() {
            return named;
        }
        [
            "api.openai.com:443",
            "chatgpt.com:443",
            "auth.openai.com:443",
        ]
        .map(String::from)
        .to_vec()
    }

    fn takes_codex_config(&self) -> bool {
        true
    }

    fn invocation(&self, req: &RunRequest) -> Invocation {
        // The strictest sandbox that still lets a commit land: the worktree and the git
        // directories writable, nothing else (PROTOCOL.md §4); `exec` never asks for
        // approval. The prompt goes in argv: with a stdin left open the CLI waits for it to
        // close, so owl closes it at once (the default, empty `prompt_input`).
        let mut args = vec![
            "exec".to_string(),
            "--json".into(),
            "-C".into(),
            req.cwd.display().to_string(),
            "-s".into(),
            "workspace-write".into(),
        ];
        for dir in req.writable_dirs {
            args.push("--add-dir".into());
            args.push(dir.display().to_string());
        }
        if let Some(model) = req.model {
            args.push("-m".into());
            args.push(model.into());
        }
        args.extend(IGNORE_WRITABLE_CONFIG.iter().map(|a| a.to_string()));
        args.extend(config_args(req.account));
        args.push(format!(
            "{}\n\n---\n\n{}",
            req.standing_instructions, req.prompt
        ));
        let mut inv = account_invocation(req.command, req.account, args);
        // Codex will not set up its sandbox helper for a CODEX_HOME inside its temp dir, and
        // then no command of the agent runs: such a home gets the Run's own temp dir.
        let inside_tmp =
            codex_home(req.account).is_some_and(|home| home.starts_with(std::env::temp_dir()));
        if inside_tmp && !req.account.env.contains_key("TMPDIR") {
            let tmp = req.files_dir.join("tmp");
            inv.env_set
                .push(("TMPDIR".into(), tmp.display().to_string()));
            inv.files.push((tmp.join(".owl"), String::new()));
        }
        inv
    }

    fn failure(
        &self,
        r: &AgentResult,
        _agent_error: Option<&str>,
        _reached_model: bool,
    ) -> Option<AgentFailure> {
        codex_protocol::failure(r)
    }

    fn named_reset(
        &self,
        r: &AgentResult,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Option<chrono::DateTime<chrono::Utc>> {
        codex_protocol::named_reset(r.text.as_deref()?, now)
    }

    fn interactive_command(&self, account: &Account) -> String {
        match &account.credential_store {
            Some(dir) => format!(
                "CODEX_HOME={} codex",
                crate::text::shell_quote(&dir.display().to_string())
            ),
            None => "codex".into(),
        }
    }

    fn login_hint(&self, account: &Account) -> String {
        format!("log in with `{} login`", self.interactive_command(account))
    }

    fn resume_command(&self, account: &Account, session_id: &str) -> Option<String> {
        crate::text::is_uuid(session_id)
            .then(|| format!("{} resume {session_id}", self.interactive_command(account)))
    }

    fn blind_spots(&self) -> Option<&'static str> {
        // PROTOCOL.md §3: a command the sandbox blocks leaves no item on stdout.
        Some(
            "Codex often writes no line for a command its sandbox blocks: owl lists a blocked \
             write from its 'Read-only file system' output in the session's rollout file, \
             but a command refused another way (a network call, say) is not listed",
        )
    }

    fn uses_api_key(&self, account: &Account) -> bool {
        account.env.contains_key("OPENAI_API_KEY")
    }

    fn parse_line(&self, line: &[u8]) -> Result<AgentEvent, LineError> {
        codex_protocol::parse_line(line)
    }
}

fn account_invocation(
    command: &std::path::Path,
    account: &Account,
    args: Vec<String>,
) -> Invocation {
    super::account_command(
        command,
        account,
        args,
        "CODEX_HOME",
        &[],
        &[],
        &INHERITED_CREDENTIALS,
    )
}

/// Inherited credentials that would replace the Account's own login.
pub(super) const INHERITED_CREDENTIALS: [&str; 1] = ["OPENAI_API_KEY"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_config_reaches_the_command_line_as_toml_values() {
        let mut account = Account::local(DriverKind::Codex, None, crate::config::Env::default());
        account.codex_config = serde_json::json!({
            "model": "o3",
            "model_providers": {"mock": {"base_url": "http://127.0.0.1:9/v1", "retries": 0, "quoted \"key\"": [true, 1.5]}},
        })
        .as_object()
        .cloned();
        assert_eq!(
            config_args(&account),
            [
                "-c",
                "model=\"o3\"",
                "-c",
                r#"model_providers={"mock" = {"base_url" = "http://127.0.0.1:9/v1", "quoted \"key\"" = [true, 1.5], "retries" = 0}}"#,
            ]
        );
    }

    fn account(store: PathBuf) -> Account {
        Account::local(DriverKind::Codex, Some(store), Default::default())
    }

    fn tmpdir_of(account: &Account) -> Option<String> {
        let files = PathBuf::from("/state/logs/j/1.files");
        let inv = Codex.invocation(&RunRequest {
            command: std::path::Path::new("codex"),
            account,
            permission_mode: "default",
            max_budget_usd: None,
            allowed_tools: &[],
            disallowed_tools: &[],
            model: None,
            standing_instructions: "s",
            prompt: "p",
            files_dir: &files,
            cwd: std::path::Path::new("/wt"),
            writable_dirs: &[],
        });
        inv.env_set
            .iter()
            .find(|(k, _)| k == "TMPDIR")
            .map(|(_, v)| v.clone())
    }

    #[test]
    fn a_codex_home_inside_the_temp_dir_gets_the_runs_own_temp_dir() {
        let inside = account(std::env::temp_dir().join("codex-home"));
        assert_eq!(
            tmpdir_of(&inside).as_deref(),
            Some("/state/logs/j/1.files/tmp")
        );
        assert_eq!(tmpdir_of(&account("/home/me/.codex-work".into())), None);
    }
}
