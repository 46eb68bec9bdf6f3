//! The Codex CLI Driver (0.171.x): `codex exec --json` in the worktree's sandbox, the prompt in argv, the Account's `CODEX_HOME`. Reactive for now: following the rollout file for utilization is still to come (issue 14).

use super::codex_protocol;
use super::{
    AgentCliError, AgentEvent, AgentFailure, AgentResult, Capabilities, Driver, Invocation,
    LineError, RunRequest,
};
use crate::config::{Account, DriverKind};

pub struct Codex;

/// The versions owl is tested against: 0.171.x (recorded on 0.171.0).
const TESTED_MAJOR_MINOR: (u64, u64) = (0, 171);

impl Codex {
    pub const CAPABILITIES: Capabilities = Capabilities {
        usage_reporting: false,
        usage_probe: false,
        budget_cap: false,
        tool_policy: false,
        graceful_interrupt: false,
        session_id: true,
    };
}

impl Driver for Codex {
    fn kind(&self) -> DriverKind {
        DriverKind::Codex
    }

    fn capabilities(&self) -> Capabilities {
        Self::CAPABILITIES
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
        args.push(format!(
            "{}\n\n---\n\n{}",
            req.standing_instructions, req.prompt
        ));
        account_invocation(req.command, req.account, args)
    }

    fn conformance(
        &self,
        _command: &std::path::Path,
        _record: Option<&std::path::Path>,
    ) -> Vec<super::conformance::Check> {
        vec![super::conformance::Check::failed(
            "Codex conformance checks",
            "not written yet",
        )]
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
            Some(dir) => format!("CODEX_HOME={} codex", dir.display()),
            None => "codex".into(),
        }
    }

    fn login_hint(&self, account: &Account) -> String {
        format!("log in with `{} login`", self.interactive_command(account))
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
        &["OPENAI_API_KEY"],
    )
}
