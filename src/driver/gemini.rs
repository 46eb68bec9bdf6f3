//! The Gemini CLI Driver (0.61.x): one process, the prompt in argv, stream-json out, a policy file for the allow-list; reactive only, since the CLI reports no utilization.

use serde_json::Value;

use super::{
    AgentCliError, AgentEvent, AgentFailure, AgentResult, Capabilities, Driver, Invocation,
    LineError, RunRequest,
};
use crate::config::{Account, DriverKind};
use crate::model::PermissionDenial;

mod home;
mod login;

pub(crate) struct GeminiCli;

/// The versions owl is tested against: 0.61.x (recorded on 0.61.0).
const TESTED_MAJOR_MINOR: (u64, u64) = (0, 61);

impl GeminiCli {
    /// Reactive: nothing about the plan's utilization ever reaches its output (PROTOCOL.md
    /// §5), it cannot be capped in money, and a signal ends it without a final line (§7).
    pub(crate) const CAPABILITIES: Capabilities = Capabilities {
        usage_reporting: false,
        budget_cap: false,
        tool_policy: true,
        session_id: true,
    };
}

/// The file beside a Run's logs that carries its allow-list as a Gemini policy.
pub(crate) const POLICY_FILE: &str = "gemini-policy.toml";

impl Driver for GeminiCli {
    fn kind(&self) -> DriverKind {
        DriverKind::Gemini
    }

    fn capabilities(&self) -> Capabilities {
        Self::CAPABILITIES
    }

    fn version_invocation(&self, command: &std::path::Path, account: &Account) -> Invocation {
        account_invocation(command, account, vec!["--version".into()])
    }

    fn check_version(&self, stdout: &str) -> Result<String, AgentCliError> {
        let line = stdout.trim();
        let parts: Vec<&str> = line.split('.').collect();
        if parts.len() != 3
            || !parts
                .iter()
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        {
            return Err(AgentCliError::Unrecognised {
                output: line.to_string(),
                agent: "Gemini CLI",
            });
        }
        let num = |i: usize| parts[i].parse::<u64>().unwrap_or(u64::MAX);
        if (num(0), num(1)) != TESTED_MAJOR_MINOR {
            return Err(AgentCliError::Untested {
                agent: "Gemini CLI",
                version: line.to_string(),
                range: format!("{}.{}.x", TESTED_MAJOR_MINOR.0, TESTED_MAJOR_MINOR.1),
                tested: "0.61.0".into(),
            });
        }
        Ok(line.to_string())
    }

    fn network_endpoints(&self, invocation: &Invocation, _account: &Account) -> Vec<String> {
        // The API (the Account's base URL, else Google's), and for a Google login its Code
        // Assist endpoint and where its token is refreshed.
        let api = invocation
            .env_var("GOOGLE_GEMINI_BASE_URL")
            .as_deref()
            .and_then(super::url_host_port)
            .unwrap_or_else(|| "generativelanguage.googleapis.com:443".into());
        [
            api,
            "cloudcode-pa.googleapis.com:443".into(),
            "oauth2.googleapis.com:443".into(),
        ]
        .into()
    }

    fn invocation(&self, req: &RunRequest) -> Invocation {
        let policy = req.files_dir.join(POLICY_FILE);
        // No system prompt of its own to append to: owl's standing instructions lead. The
        // prompt goes in argv, and owl closes stdin at once (the default, empty
        // `prompt_input`): the CLI reads a piped stdin as more prompt.
        // GEMINI.md, which the CLI skips in the untrusted worktree a Run starts in, follows
        // owl's own words.
        let standing =
            super::with_instruction_files(req.standing_instructions, req.cwd, &["GEMINI.md"]);
        let prompt = format!("{standing}\n\n---\n\n{}", req.prompt);
        let mut args = vec![
            "-p".to_string(),
            prompt,
            "-o".into(),
            "stream-json".into(),
            "--policy".into(),
            policy.display().to_string(),
        ];
        if let Some(model) = req.model {
            args.push("-m".into());
            args.push(model.into());
        }
        let mut inv = account_invocation(req.command, req.account, args);
        inv.files.push((policy, policy_toml(req.allowed_tools)));
        // A home of the Run's own, and the worktree untrusted: the CLI reads no settings
        // file the agent can write (README: What a Run plants). Set last, over the
        // Account's `env`.
        let home = home::run_home(req.account, req.files_dir);
        inv.env_set.extend([
            (
                "GEMINI_CLI_HOME".to_string(),
                home.dir.display().to_string(),
            ),
            (
                "GEMINI_CLI_TRUST_WORKSPACE".to_string(),
                "false".to_string(),
            ),
        ]);
        inv.files.extend(home.files);
        inv
    }

    fn failure(
        &self,
        r: &AgentResult,
        _agent_error: Option<&str>,
        _reached_model: bool,
    ) -> Option<AgentFailure> {
        if !r.is_error {
            return None;
        }
        let text = r.text.as_deref().unwrap_or("");
        // The CLI's words for a 429 (its exit code, 173, says the same: PROTOCOL.md §6).
        let quota = [
            "exceeded your current quota",
            "exhausted your daily quota",
            "Resource has been exhausted",
        ];
        if quota.iter().any(|q| text.contains(q)) {
            Some(AgentFailure::RateLimited)
        } else if text.contains("\"code\":5")
            || text.contains("\"status\":\"INTERNAL\"")
            || text.contains("\"UNAVAILABLE\"")
        {
            Some(AgentFailure::Unavailable)
        } else if text.contains("API key not valid") || text.contains("\"UNAUTHENTICATED\"") {
            Some(AgentFailure::NotLoggedIn)
        } else {
            None
        }
    }

    fn named_reset(
        &self,
        r: &AgentResult,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Option<chrono::DateTime<chrono::Utc>> {
        // "… Please retry in 2s." (a per-minute quota); a daily quota names no time.
        let text = r.text.as_deref()?;
        let at = text.find("retry in ")? + "retry in ".len();
        let digits: String = text[at..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let secs: f64 = digits.parse().ok()?;
        text[at + digits.len()..].starts_with('s').then_some(())?;
        Some(now + chrono::Duration::milliseconds((secs * 1000.0).ceil() as i64))
    }

    fn interactive_command(&self, account: &Account) -> String {
        match &account.credential_store {
            Some(dir) => format!(
                "GEMINI_CLI_HOME={} gemini",
                crate::text::shell_quote(&dir.display().to_string())
            ),
            None => "gemini".into(),
        }
    }

    fn login_hint(&self, account: &Account) -> String {
        format!(
            "set GEMINI_API_KEY in the Account's env (billed per token: with \
             allowBilledUsage: true), or log in with a Gemini Code Assist Standard or \
             Enterprise licence with `{}` (the Gemini CLI no longer serves Google AI Pro, \
             Ultra, Google One or free logins)",
            self.interactive_command(account)
        )
    }

    fn billed_login(&self, account: &Account) -> Option<String> {
        login::billed_login(account)
    }

    fn logins_served(&self) -> Option<&'static str> {
        Some(login::LOGINS_SERVED)
    }

    fn login_refused(&self, stderr_tail: &str) -> Option<String> {
        login::login_refused(stderr_tail)
    }

    fn uses_api_key(&self, account: &Account) -> bool {
        INHERITED_CREDENTIALS
            .iter()
            .any(|k| account.env.contains_key(*k))
    }

    fn parse_line(&self, line: &[u8]) -> Result<AgentEvent, LineError> {
        let v: Value =
            serde_json::from_slice(line).map_err(|e| LineError::NotJson(e.to_string()))?;
        let text = |k: &str| v[k].as_str().map(String::from);
        Ok(match v["type"].as_str().unwrap_or("") {
            "init" => AgentEvent::Init {
                session_id: text("session_id"),
                model: text("model"),
                version: None,
                unconfigured: Vec::new(),
            },
            "message" if v["role"] == "assistant" => AgentEvent::Assistant {
                summary: crate::text::truncate(v["content"].as_str().unwrap_or(""), 120),
                synthetic: false,
                error: None,
            },
            "tool_result" => AgentEvent::ToolResult {
                is_error: v["status"] == "error",
                denied: denial(&v),
            },
            "result" => AgentEvent::Result(result_of(&v)),
            other => AgentEvent::Other {
                kind: other.to_string(),
            },
        })
    }
}

/// A `result` line: `status` success or error, the error's message, the token counts.
fn result_of(v: &Value) -> AgentResult {
    let stats = &v["stats"];
    let status = v["status"].as_str().unwrap_or("").to_string();
    AgentResult {
        is_error: status != "success",
        subtype: status,
        text: v["error"]["message"].as_str().map(String::from),
        input_tokens: stats["input_tokens"].as_i64(),
        output_tokens: stats["output_tokens"].as_i64(),
        ..Default::default()
    }
}

/// A tool the policy denied, from a `tool_result` line (the CLI's denials leave no trace
/// in its `result`: PROTOCOL.md §4).
pub(crate) fn denial(line: &Value) -> Option<PermissionDenial> {
    (line["type"] == "tool_result" && line["error"]["type"] == "policy_violation").then(|| {
        PermissionDenial {
            tool_name: line["tool_id"]
                .as_str()
                .and_then(|id| id.split("__").next())
                .unwrap_or("?")
                .to_string(),
            detail: crate::text::truncate(line["output"].as_str().unwrap_or(""), 120),
        }
    })
}

/// owl's allow-list as a Gemini policy (the User tier): `Bash(git add:*)` allows shell
/// commands that start with `git add`; the file tools map to Gemini's own names. Anything
/// not listed is denied (`ask_user` is a denial when unattended).
pub(crate) fn policy_toml(allowed: &[String]) -> String {
    let mut prefixes = Vec::new();
    let mut tools = Vec::new();
    for tool in allowed {
        if let Some(rest) = tool.strip_prefix("Bash(").and_then(|r| r.strip_suffix(')')) {
            prefixes.push(
                rest.trim_end_matches(":*")
                    .trim_end_matches('*')
                    .trim()
                    .to_string(),
            );
            continue;
        }
        let mapped: &[&str] = match tool.as_str() {
            "Read" => &["read_file", "read_many_files"],
            "Write" => &["write_file"],
            "Edit" => &["replace"],
            "Glob" => &["glob"],
            "Grep" => &["search_file_content"],
            "LS" => &["list_directory"],
            _ => &[],
        };
        tools.extend(mapped.iter().map(|t| t.to_string()));
    }
    let mut out = String::new();
    for tool in tools {
        out.push_str(&format!(
            "[[rule]]\ntoolName = {}\ndecision = \"allow\"\npriority = 500\n\n",
            toml_string(&tool)
        ));
    }
    if !prefixes.is_empty() {
        let list: Vec<String> = prefixes.iter().map(|p| toml_string(p)).collect();
        out.push_str(&format!(
            "[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = [{}]\ndecision = \"allow\"\npriority = 500\n",
            list.join(", ")
        ));
    }
    out
}

/// A TOML basic string.
fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
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
        "GEMINI_CLI_HOME",
        // One process, so that a signal reaches the CLI itself (its launcher ignores them);
        // owl runs it in the Job's own worktree, which it trusts.
        &[
            ("GEMINI_CLI_NO_RELAUNCH", "true"),
            ("GEMINI_CLI_TRUST_WORKSPACE", "true"),
        ],
        &[],
        &INHERITED_CREDENTIALS,
    )
}

/// Inherited credentials that would replace the Account's own login.
pub(super) const INHERITED_CREDENTIALS: [&str; 2] = ["GEMINI_API_KEY", "GOOGLE_API_KEY"];

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(name: &str) -> Vec<Value> {
        crate::driver::recorded_lines("gemini-cli-0.61.0", name)
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn result(name: &str) -> AgentResult {
        recorded(name)
            .iter()
            .find_map(|l| match GeminiCli.parse_line(l.to_string().as_bytes()) {
                Ok(AgentEvent::Result(r)) => Some(r),
                _ => None,
            })
            .unwrap()
    }

    #[test]
    fn a_recorded_success_is_read_with_its_session_and_tokens() {
        let lines = recorded("success.jsonl");
        let init = GeminiCli
            .parse_line(lines[0].to_string().as_bytes())
            .unwrap();
        assert!(matches!(init, AgentEvent::Init { session_id: Some(ref s), .. } if s.len() == 36));
        let r = result("success.jsonl");
        assert!(!r.is_error);
        assert_eq!(r.subtype, "success");
        assert_eq!((r.input_tokens, r.output_tokens), (Some(1244), Some(57)));
        assert_eq!(GeminiCli.failure(&r, None, true), None);
    }

    #[test]
    fn quota_errors_are_rate_limits_and_a_500_an_outage() {
        for name in [
            "rate-limit-429-daily.jsonl",
            "rate-limit-429-rpm-max-attempts-2.jsonl",
            "rate-limit-429-plain.jsonl",
        ] {
            let r = result(name);
            assert!(r.is_error, "{name}");
            assert_eq!(
                GeminiCli.failure(&r, None, false),
                Some(AgentFailure::RateLimited),
                "{name}"
            );
        }
        let r = result("server-500-max-attempts-3.jsonl");
        assert_eq!(
            GeminiCli.failure(&r, None, false),
            Some(AgentFailure::Unavailable)
        );
        let turns = result("max-session-turns-1.jsonl");
        assert!(turns.is_error);
        assert_eq!(
            GeminiCli.failure(&turns, None, true),
            None,
            "the Job's own doing"
        );
    }

    #[test]
    fn a_per_minute_quota_names_its_reset_and_a_daily_one_does_not() {
        let now = crate::clock::parse("2026-12-01T03:00:00Z").unwrap();
        let rpm = result("rate-limit-429-rpm-max-attempts-2.jsonl");
        assert_eq!(
            GeminiCli.named_reset(&rpm, now),
            Some(now + chrono::Duration::seconds(2))
        );
        let daily = result("rate-limit-429-daily.jsonl");
        assert_eq!(GeminiCli.named_reset(&daily, now), None);
    }

    #[test]
    fn a_tool_the_policy_denied_is_seen_on_its_result_line() {
        let lines = recorded("shell-policy-not-allowlisted.jsonl");
        let denied: Vec<PermissionDenial> = lines.iter().filter_map(denial).collect();
        assert_eq!(denied.len(), 1);
        assert_eq!(denied[0].tool_name, "run_shell_command");
        assert!(recorded("shell-commit-policy.jsonl")
            .iter()
            .all(|l| denial(l).is_none()));
    }

    #[test]
    fn the_allow_list_becomes_the_recorded_policy_shape() {
        let allowed: Vec<String> = [
            "Read",
            "Edit",
            "Bash(git add:*)",
            "Bash(git commit:*)",
            "Bash(cargo test:*)",
        ]
        .map(String::from)
        .to_vec();
        let toml = policy_toml(&allowed);
        assert!(toml.contains("toolName = \"read_file\""));
        assert!(toml.contains("toolName = \"replace\""));
        assert!(toml.contains(
            "commandPrefix = [\"git add\", \"git commit\", \"cargo test\"]\ndecision = \"allow\""
        ));
        assert!(!toml.contains("write_file"), "Write was not allowed");
    }

    #[test]
    fn versions_in_and_out_of_the_tested_range() {
        assert_eq!(GeminiCli.check_version("0.61.0\n").unwrap(), "0.61.0");
        assert!(matches!(
            GeminiCli.check_version("0.62.1"),
            Err(AgentCliError::Untested { .. })
        ));
        assert!(matches!(
            GeminiCli.check_version("2.1.197 (Claude Code)"),
            Err(AgentCliError::Unrecognised { .. })
        ));
    }
}
