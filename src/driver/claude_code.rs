//! The claude-code Driver: Claude Code's `-p` stream-json protocol, as recorded from 2.1.197.

use serde_json::{json, Value};

use super::{
    AgentCliError, AgentEvent, AgentFailure, AgentResult, Capabilities, Driver, Interrupt,
    Invocation, LineError, Login, RateLimitInfo, RateLimitStatus, Refused, RunRequest, Usage,
    UsagePoll, WindowUsage,
};
use crate::config::{Account, DriverKind};
use crate::model::PermissionDenial;
use crate::text::truncate;

mod stream;
use stream::*;

/// The Claude Code CLI.
pub(crate) struct ClaudeCode;

/// Inherited credentials that would silently replace the Account's plan login: with an API
/// key the CLI reports no utilization at all (PROTOCOL.md §4.1).
pub(super) const INHERITED_CREDENTIALS: [&str; 3] = [
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
];

/// Where the CLI refreshes a plan login's token (2.1.332: `https://platform.claude.com/v1/oauth/token`).
const OAUTH_TOKEN_HOST: &str = "platform.claude.com:443";

/// The environment variable the CLI honours to leave its self-updater off, and its value.
pub(super) const AUTOUPDATER_SWITCH: (&str, &str) = ("DISABLE_AUTOUPDATER", "1");

/// The versions owl is tested against: 2.1.x (recorded on 2.1.197).
const TESTED_MAJOR_MINOR: (u64, u64) = (2, 1);

/// The versions CI runs the end-to-end tests and the conformance check against, from the
/// one file that lists them (`claude-code-versions.txt`).
const TESTED_VERSIONS: &str = include_str!("../../claude-code-versions.txt");

/// The tested versions, "2.1.197 and 2.1.332".
fn tested_versions() -> String {
    let versions: Vec<&str> = TESTED_VERSIONS
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    versions.join(" and ")
}

impl ClaudeCode {
    /// What Claude Code can do for owl.
    pub(crate) const CAPABILITIES: Capabilities = Capabilities {
        usage_reporting: true,
        budget_cap: true,
        tool_policy: true,
        session_id: true,
    };
}

/// The permission modes Claude Code accepts; `bypassPermissions` is refused on purpose
/// because nobody is watching an unattended Run (ADR-0006).
const PERMISSION_MODES: &[&str] = &["acceptEdits", "default", "dontAsk", "plan", "auto"];

impl Driver for ClaudeCode {
    fn check_defaults(&self, defaults: &crate::config::JobDefaults) -> Result<(), Refused> {
        let mode = defaults.permission_mode.as_str();
        if PERMISSION_MODES.contains(&mode) {
            return Ok(());
        }
        Err(Refused::PermissionMode {
            mode: mode.to_string(),
            accepted: PERMISSION_MODES,
        })
    }

    fn kind(&self) -> DriverKind {
        DriverKind::ClaudeCode
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
            .strip_suffix(" (Claude Code)")
            .filter(|v| v.split('.').count() == 3 && v.split('.').all(is_number))
            .ok_or_else(|| AgentCliError::Unrecognised {
                output: line.to_string(),
                agent: "Claude Code",
            })?;
        let mut parts = version.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
        let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        if (major, minor) != TESTED_MAJOR_MINOR {
            return Err(AgentCliError::Untested {
                agent: "Claude Code",
                version: version.to_string(),
                range: format!("{}.{}.x", TESTED_MAJOR_MINOR.0, TESTED_MAJOR_MINOR.1),
                tested: tested_versions(),
            });
        }
        Ok(version.to_string())
    }

    fn invocation(&self, req: &RunRequest) -> Invocation {
        let mut args = stream_json_args(req.permission_mode);
        if let Some(budget) = req.max_budget_usd {
            args.push("--max-budget-usd".into());
            args.push(format_usd(budget));
        }
        // Both take space-separated values until the next option.
        if !req.allowed_tools.is_empty() {
            args.push("--allowedTools".into());
            args.extend(req.allowed_tools.iter().cloned());
        }
        if !req.disallowed_tools.is_empty() {
            args.push("--disallowedTools".into());
            args.extend(req.disallowed_tools.iter().cloned());
        }
        if let Some(model) = req.model {
            args.push("--model".into());
            args.push(model.into());
        }
        args.extend(settings_args());
        args.push("--append-system-prompt".into());
        args.push(super::with_instruction_files(
            req.standing_instructions,
            req.cwd,
            PROJECT_INSTRUCTIONS,
        ));
        account_invocation(req.command, req.account, args)
    }

    fn probe_invocation(&self, command: &std::path::Path, account: &Account) -> Option<Invocation> {
        // No prompt is ever written, so the CLI makes no API call and spends nothing.
        // It reads no settings the agent can write either: a planted SessionStart hook
        // would otherwise run at every probe.
        let mut args = stream_json_args("dontAsk");
        args.extend(settings_args());
        Some(account_invocation(command, account, args))
    }

    fn prompt_input(&self, prompt: &str) -> Vec<u8> {
        let msg = json!({"type": "user", "message": {"role": "user", "content": prompt}});
        line_bytes(&msg)
    }

    fn interrupt(&self, request_id: &str) -> Option<Interrupt> {
        Some(Interrupt::Stdin(control_request(
            request_id,
            json!({"subtype": "interrupt"}),
        )))
    }

    fn usage_poll(&self) -> UsagePoll {
        UsagePoll::Stdin
    }

    fn usage_request_input(&self, request_id: &str) -> Option<Vec<u8>> {
        // `skip_behaviors` spares the CLI its scan of local transcripts (honoured from
        // 2.1.332 on, ignored by 2.1.197).
        Some(control_request(
            request_id,
            json!({"subtype": "get_usage", "skip_behaviors": true}),
        ))
    }

    fn interactive_command(&self, account: &Account) -> String {
        // The login lives in the Account's credential store: the command names it.
        match &account.credential_store {
            Some(dir) => format!(
                "CLAUDE_CONFIG_DIR={} claude",
                crate::text::shell_quote(&dir.display().to_string())
            ),
            None => "claude".into(),
        }
    }

    fn login_hint(&self, account: &Account) -> String {
        format!(
            "log in with `{}`, then /login",
            self.interactive_command(account)
        )
    }

    fn failure(
        &self,
        r: &AgentResult,
        agent_error: Option<&str>,
        reached_model: bool,
    ) -> Option<AgentFailure> {
        if !r.is_error {
            return None;
        }
        if login_failed(r, agent_error) {
            Some(AgentFailure::NotLoggedIn)
        } else if rate_limited(r, agent_error) {
            Some(AgentFailure::RateLimited)
        } else if api_unavailable(r, agent_error, reached_model) {
            Some(AgentFailure::Unavailable)
        } else {
            None
        }
    }

    fn default_store(&self, account: &Account) -> Option<std::path::PathBuf> {
        // As the CLI finds it: CLAUDE_CONFIG_DIR (the Account's, else owl's), else ~/.claude.
        let set = account
            .env
            .get("CLAUDE_CONFIG_DIR")
            .map(std::path::PathBuf::from)
            .or_else(|| std::env::var_os("CLAUDE_CONFIG_DIR").map(std::path::PathBuf::from));
        set.or_else(|| Some(std::path::PathBuf::from(std::env::var_os("HOME")?).join(".claude")))
    }

    fn store_shows_no_login(&self, store: &std::path::Path) -> Option<String> {
        // On Linux a plan login lives in `.credentials.json` (PROTOCOL.md of 2.1.332, §5);
        // the CLI writes `.claude.json` and more on any start, logged in or not. A settings
        // file may log in otherwise (`apiKeyHelper`, an `env` token): then owl cannot tell.
        let present = |name: &str| std::fs::symlink_metadata(store.join(name)).is_ok();
        super::store_missing_or_empty(store).or_else(|| {
            (!present(".credentials.json")
                && !present("settings.json")
                && !present("settings.local.json"))
            .then(|| {
                format!(
                    "its credential store {} holds no login (no .credentials.json)",
                    store.display()
                )
            })
        })
    }

    fn network_endpoints(&self, invocation: &Invocation, _account: &Account) -> Vec<String> {
        // The API, and where 2.1.332 refreshes a plan login's token (its TOKEN_URL).
        let api = self
            .api_endpoint(invocation)
            .as_deref()
            .and_then(super::url_host_port);
        api.into_iter()
            .chain([OAUTH_TOKEN_HOST.to_string()])
            .collect()
    }

    fn api_endpoint(&self, invocation: &Invocation) -> Option<String> {
        // Bedrock, Vertex and Foundry each have endpoints of their own: not judged.
        let other_provider = [
            "CLAUDE_CODE_USE_BEDROCK",
            "CLAUDE_CODE_USE_VERTEX",
            "CLAUDE_CODE_USE_FOUNDRY",
        ]
        .iter()
        .any(|k| invocation.env_var(k).is_some_and(|v| v != "0"));
        (!other_provider).then(|| {
            invocation
                .env_var("ANTHROPIC_BASE_URL")
                .unwrap_or_else(|| "https://api.anthropic.com".into())
        })
    }

    fn uses_api_key(&self, account: &Account) -> bool {
        ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"]
            .iter()
            .any(|k| account.env.contains_key(*k))
    }

    fn parse_line(&self, line: &[u8]) -> Result<AgentEvent, LineError> {
        parse_line(line)
    }

    fn login_invocation(&self, command: &std::path::Path, account: &Account) -> Option<Invocation> {
        // Local and about 0.3 s; never a request to the API base URL, never a token (§5).
        Some(account_invocation(
            command,
            account,
            // The login a Run will use: its settings are not read (a planted
            // `apiKeyHelper` in the credential store would otherwise read as the login).
            // The option goes before the subcommand, which refuses it.
            vec![
                "--setting-sources=".into(),
                "auth".into(),
                "status".into(),
                "--json".into(),
            ],
        ))
    }

    fn parse_login(&self, stdout: &str) -> Option<Login> {
        let v: Value = serde_json::from_str(stdout.trim()).ok()?;
        Some(Login {
            logged_in: v.get("loggedIn")?.as_bool()?,
            method: string_at(&v, "authMethod").unwrap_or_else(|| "unknown".into()),
            plan: string_at(&v, "subscriptionType"),
        })
    }
}

/// The settings a Run's CLI reads: none of the files the agent can write. No setting
/// source is read (the project's `.claude/settings.json` and `settings.local.json`, the
/// credential store's `settings.json`: the agent commits the first two and writes the
/// third), no MCP server but the none owl names (`.mcp.json`, the servers kept in the
/// credential store's `.claude.json`), and hooks are off whatever else supplies them. Only
/// the machine's managed policy, which the user's root owns, still applies. Both values
/// are given inline, so no file exists for the agent to replace; `--mcp-config` takes
/// values until the next option, so an option always follows it.
pub(crate) fn settings_args() -> Vec<String> {
    [
        "--setting-sources=",
        "--settings",
        OWL_SETTINGS,
        "--strict-mcp-config",
        "--mcp-config",
        NO_MCP_SERVERS,
    ]
    .map(String::from)
    .to_vec()
}

/// The project's instruction files, which the CLI reads only with the project's setting
/// source (2.1.332: `--setting-sources` governs `CLAUDE.md` too), relative to the worktree.
const PROJECT_INSTRUCTIONS: &[&str] = &["CLAUDE.md", ".claude/CLAUDE.md"];

/// The one settings layer a Run reads besides the machine's policy: no hook runs.
pub(crate) const OWL_SETTINGS: &str = r#"{"disableAllHooks":true}"#;

/// The MCP servers a Run may start: none.
pub(crate) const NO_MCP_SERVERS: &str = r#"{"mcpServers":{}}"#;

fn stream_json_args(permission_mode: &str) -> Vec<String> {
    [
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        // stream-json output without --verbose is refused by the CLI.
        "--verbose",
        "--permission-mode",
        permission_mode,
    ]
    .map(String::from)
    .to_vec()
}

/// The Account's environment around `args`: its credential store, its `env:`, and no
/// inherited credential it did not ask for.
fn account_invocation(
    command: &std::path::Path,
    account: &Account,
    args: Vec<String>,
) -> Invocation {
    // The version owl checked is the version that runs: the CLI must not update itself in
    // the middle of a night (`claude doctor` then says "Auto-updates: disabled (set by env:
    // DISABLE_AUTOUPDATER)"; proven against the real binary in the end-to-end tests).
    super::account_command(
        command,
        account,
        args,
        "CLAUDE_CONFIG_DIR",
        &[],
        &[AUTOUPDATER_SWITCH],
        &INHERITED_CREDENTIALS,
    )
}

fn control_request(request_id: &str, request: Value) -> Vec<u8> {
    line_bytes(&json!({
        "type": "control_request",
        "request_id": request_id,
        "request": request
    }))
}

/// Any of the CLI's signs of a missing or refused login: a 401, its
/// `authentication_failed` error word, or its "Not logged in · Please run /login" text
/// (an empty credential store gives the last two with `api_error_status: null`).
fn login_failed(r: &AgentResult, agent_error: Option<&str>) -> bool {
    let text = r.text.as_deref().unwrap_or("");
    r.api_error_status == Some(401)
        || agent_error == Some("authentication_failed")
        || text.contains("Not logged in")
        || text.contains("Please run /login")
}

/// A limit stopped the turn: the typed `api_error` first (2.1.332 words its limits anew,
/// "You've hit your 5-hour limit"), then the status and the CLI's error word.
fn rate_limited(r: &AgentResult, agent_error: Option<&str>) -> bool {
    r.api_error.as_deref() == Some("usage_limit_reached")
        || r.api_error_status == Some(429)
        || agent_error == Some("rate_limit")
}

/// The API could not be used: a 5xx or 529 after the CLI's retries, its `server_error` or
/// `overloaded` error word, or an "API Error" before any model answer (unreachable).
fn api_unavailable(r: &AgentResult, agent_error: Option<&str>, reached_model: bool) -> bool {
    let text = r.text.as_deref().unwrap_or("");
    r.api_error_status.is_some_and(|s| s >= 500)
        || matches!(agent_error, Some("server_error" | "overloaded"))
        || (r.api_error_status.is_none() && !reached_model && text.starts_with("API Error"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Account;
    use std::collections::BTreeMap;
    use std::path::Path;

    const FIXTURES: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/claude-code-2.1.197"
    );

    /// Recorded from 2.1.332: usage windows, extra usage, limit stops (its PROTOCOL.md).
    const FIXTURES_332: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/claude-code-2.1.332"
    );

    fn events_332(name: &str) -> Vec<AgentEvent> {
        let text = std::fs::read_to_string(format!("{FIXTURES_332}/{name}.jsonl")).unwrap();
        text.lines()
            .map(|l| ClaudeCode.parse_line(l.as_bytes()).unwrap())
            .collect()
    }

    #[test]
    fn what_a_planted_settings_file_made_the_cli_use_is_read_from_its_lines() {
        // Recorded from 2.1.332 with a committed .claude/settings.json (a SessionStart hook,
        // an apiKeyHelper) and .mcp.json, and owl's command line before it named its own
        // settings (tests/fixtures/claude-code-2.1.332/SETTINGS.md).
        let events = events_332("planted-obeyed");
        let said: Vec<String> = events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Unconfigured(what) => Some(what.clone()),
                AgentEvent::Init { unconfigured, .. } => Some(unconfigured.join("; ")),
                _ => None,
            })
            .collect();
        assert_eq!(
            said,
            [
                "a hook ran on SessionStart (SessionStart:startup)",
                "a key from apiKeyHelper in place of the Account's login; an MCP server \
                 'planted' (from project)",
            ]
        );
    }

    #[test]
    fn a_plain_runs_init_line_names_nothing_unconfigured() {
        for name in [
            "unified-windows-allowed",
            "get-usage-shapes",
            "overage-in-use",
        ] {
            let init = events_332(name)
                .into_iter()
                .find(|e| matches!(e, AgentEvent::Init { .. }))
                .unwrap();
            assert!(
                matches!(&init, AgentEvent::Init { unconfigured, .. } if unconfigured.is_empty()),
                "{name}: {init:?}"
            );
        }
    }

    #[test]
    fn the_repositorys_instruction_files_reach_the_run_after_owls_own() {
        let worktree = tempfile::tempdir().unwrap();
        std::fs::write(worktree.path().join("CLAUDE.md"), "Use tabs.\n").unwrap();
        let text = crate::driver::with_instruction_files(
            "owl's words",
            worktree.path(),
            PROJECT_INSTRUCTIONS,
        );
        assert!(text.starts_with("owl's words\n\nThe repository's instructions (CLAUDE.md)"));
        assert!(text.ends_with("Use tabs."), "{text}");
        // One the agent made a symlink (to a secret, say) is not read.
        std::fs::create_dir(worktree.path().join(".claude")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", worktree.path().join(".claude/CLAUDE.md"))
            .unwrap();
        let text =
            crate::driver::with_instruction_files("x", worktree.path(), PROJECT_INSTRUCTIONS);
        assert!(!text.contains("root:"));
    }

    #[test]
    fn the_clis_interrupt_line_reads_as_an_interrupt_not_a_tool_result() {
        let text =
            std::fs::read_to_string(format!("{FIXTURES}/interrupt-control-request.jsonl")).unwrap();
        let events: Vec<AgentEvent> = text
            .lines()
            .map(|l| ClaudeCode.parse_line(l.as_bytes()).unwrap())
            .collect();
        let interrupted: Vec<String> = events
            .iter()
            .filter(|e| matches!(e, AgentEvent::Interrupted))
            .map(AgentEvent::describe)
            .collect();
        assert_eq!(interrupted, ["interrupted by owl"]);
    }

    fn rate_limits(events: &[AgentEvent]) -> Vec<RateLimitInfo> {
        events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::RateLimit(i) => Some(i.clone()),
                _ => None,
            })
            .collect()
    }

    fn percents(info: &RateLimitInfo, window: &str) -> Option<f64> {
        info.windows
            .iter()
            .find(|w| w.window == window)
            .map(|w| crate::model::round_percent(w.percent))
    }

    fn usage_answers(events: &[AgentEvent]) -> Vec<Vec<WindowUsage>> {
        events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ControlResponse {
                    usage: Some(Usage::Windows(w)),
                    ..
                } if !w.is_empty() => Some(w.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn every_2_1_332_event_carries_each_windows_figure_allowed_ones_too() {
        let allowed = rate_limits(&events_332("unified-windows-allowed"));
        assert!(allowed
            .iter()
            .all(|i| i.status == RateLimitStatus::Allowed && i.utilization.is_none()));
        let five: Vec<Option<f64>> = allowed.iter().map(|i| percents(i, "five_hour")).collect();
        assert_eq!(five, [Some(42.0), Some(55.0), Some(63.0)]);
        assert!(allowed
            .iter()
            .all(|i| percents(i, "seven_day") == Some(30.0)));
        assert!(allowed.iter().all(|i| !i.on_credits));
        // Above 1, and the integer 1, are figures too.
        let over = rate_limits(&events_332("unified-windows-over-one"));
        let raw = |i: &RateLimitInfo| {
            i.windows
                .iter()
                .find(|w| w.window == "five_hour")
                .map(|w| w.percent)
        };
        let figures: Vec<Option<f64>> = over.iter().map(raw).collect();
        assert!((figures[0].unwrap() - 107.0).abs() < 1e-9, "{figures:?}");
        assert_eq!(figures[1], Some(100.0), "{figures:?}");
        // A 2.1.197 event has no unifiedWindows: nothing is made up.
        let old = events("rate-limit-sequence.jsonl");
        assert!(rate_limits(&old).iter().all(|i| i.windows.is_empty()));
    }

    #[test]
    fn the_per_model_week_is_one_window_in_the_stream_and_in_get_usage() {
        let ev = events_332("seven-day-oi-allowed");
        let stream = rate_limits(&ev);
        assert_eq!(
            percents(&stream[0], "seven_day_overage_included"),
            Some(80.0)
        );
        let answers = usage_answers(&ev);
        let scoped = answers
            .iter()
            .flatten()
            .find(|w| w.model.is_some())
            .expect("a model_scoped row");
        assert_eq!(scoped.window, "seven_day_overage_included");
        assert_eq!(scoped.model.as_deref(), Some("Fable"));
        assert_eq!(scoped.percent, 80.0);
        assert!(scoped.resets_at.is_some());
        // At 100 while the week reads 30: the wall the Account would be scheduled into.
        let full = usage_answers(&events_332("seven-day-oi-window-rejected-request-allowed"));
        let last = full.last().unwrap();
        let find = |name: &str| last.iter().find(|w| w.window == name).map(|w| w.percent);
        assert_eq!(find("seven_day_overage_included"), Some(100.0));
        assert_eq!(find("seven_day"), Some(30.0));
    }

    #[test]
    fn credits_are_seen_in_either_flag_allowed_status_included() {
        for name in ["overage-in-use", "overage-warning", "fable-on-credits"] {
            let events = rate_limits(&events_332(name));
            let first = events
                .iter()
                .find(|i| i.on_credits)
                .unwrap_or_else(|| panic!("{name}"));
            assert_eq!(first.status, RateLimitStatus::Rejected, "{name}");
        }
        let header_only = rate_limits(&events_332("overage-in-use-header-only"));
        let billed = header_only
            .iter()
            .find(|i| i.on_credits)
            .expect("overageInUse");
        assert_eq!(billed.status, RateLimitStatus::Allowed);
        assert_eq!(billed.window.as_deref(), Some("five_hour"));
        assert!(billed.resets_at.is_some());
        // Refused credits are a rate limit, not a bill.
        for name in [
            "overage-rejected-org_level_disabled",
            "overage-rejected-out_of_credits",
            "overage-rejected-noreason",
            "overage-credits-required",
        ] {
            assert!(
                rate_limits(&events_332(name)).iter().all(|i| !i.on_credits),
                "{name}"
            );
        }
    }

    #[test]
    fn a_limit_stop_is_read_from_its_typed_fields_before_its_words() {
        for name in [
            "seven-day-oi-rejected",
            "seven-day-oi-rejected-fable",
            "overage-rejected-org_level_disabled",
            "overage-rejected-noreason",
            "overage-exhausted",
            "overage-claim-rejected",
            "overage-credits-required",
            "auto-continue-default-stdin-open",
        ] {
            let ev = events_332(name);
            let r = ev
                .iter()
                .find_map(|e| match e {
                    AgentEvent::Result(r) => Some(r.clone()),
                    _ => None,
                })
                .unwrap();
            assert_eq!(
                r.api_error.as_deref(),
                Some("usage_limit_reached"),
                "{name}"
            );
            assert_eq!(r.terminal_reason.as_deref(), Some("api_error"), "{name}");
            assert_eq!(
                ClaudeCode.failure(&r, None, true),
                Some(AgentFailure::RateLimited),
                "{name}"
            );
            // The typed field alone decides, whatever the words and the status say.
            let bare = AgentResult {
                api_error_status: None,
                text: Some("You've hit your 5-hour limit".into()),
                ..r
            };
            assert_eq!(
                ClaudeCode.failure(&bare, None, true),
                Some(AgentFailure::RateLimited)
            );
        }
    }

    #[test]
    fn auth_status_answers_for_none_a_plan_and_an_api_key() {
        let text = std::fs::read_to_string(format!("{FIXTURES_332}/auth-status.json")).unwrap();
        let cases: Vec<Value> = serde_json::from_str(&text).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for case in &cases {
            // Recorded parsed when it was JSON, as text when it was `--text`.
            let stdout = match &case["stdout"] {
                Value::String(text) => text.clone(),
                json => json.to_string(),
            };
            let stdout = stdout.as_str();
            // `--text` answers are not read.
            let Some(login) = ClaudeCode.parse_login(stdout) else {
                assert!(!stdout.trim_start().starts_with('{'), "{stdout}");
                continue;
            };
            assert_eq!(login.logged_in, case["exit_code"] == 0, "{stdout}");
            seen.insert(login.method.clone());
            match login.method.as_str() {
                "none" => assert!(login.refusal(false).unwrap().contains("not logged in")),
                "api_key" => {
                    assert_eq!(login.refusal(false), None);
                    assert!(login.refusal(true).unwrap().contains("plan login"));
                }
                "claude.ai" => {
                    assert_eq!(login.plan.as_deref(), Some("max"));
                    assert_eq!(login.refusal(true), None);
                }
                _ => assert_eq!(login.refusal(true), None),
            }
        }
        assert_eq!(
            seen.into_iter().collect::<Vec<_>>(),
            ["api_key", "claude.ai", "none", "oauth_token"]
        );
    }

    fn events(name: &str) -> Vec<AgentEvent> {
        let text = std::fs::read_to_string(format!("{FIXTURES}/{name}")).unwrap();
        text.lines()
            .map(|l| ClaudeCode.parse_line(l.as_bytes()).unwrap())
            .collect()
    }

    fn result_of(name: &str) -> AgentResult {
        events(name)
            .into_iter()
            .find_map(|e| match e {
                AgentEvent::Result(r) => Some(r),
                _ => None,
            })
            .expect("a result line")
    }

    #[test]
    fn success_transcript() {
        let ev = events("success.jsonl");
        assert!(matches!(&ev[0], AgentEvent::Init { version: Some(v), .. } if v == "2.1.197"));
        let r = result_of("success.jsonl");
        assert!(!r.is_error);
        assert_eq!(r.subtype, "success");
        assert_eq!(r.cost_usd, Some(0.006375));
        assert_eq!(r.num_turns, Some(1));
        assert_eq!(r.input_tokens, Some(1200));
        assert_eq!(r.output_tokens, Some(15));
        assert_eq!(r.terminal_reason.as_deref(), Some("completed"));
        assert!(r.session_id.is_some());
    }

    #[test]
    fn denied_tool_is_read_from_permission_denials() {
        let r = result_of("tool-denied.jsonl");
        assert!(!r.is_error);
        assert_eq!(r.permission_denials.len(), 1);
        assert_eq!(r.permission_denials[0].tool_name, "Bash");
        assert!(r.permission_denials[0]
            .detail
            .starts_with("git add hello.txt"));
    }

    #[test]
    fn max_budget_401_429_500() {
        let r = result_of("max-budget.jsonl");
        assert!(r.budget_exhausted && r.is_error);
        assert_eq!(r.errors, vec!["Reached maximum budget ($0.0001)"]);
        assert_eq!(result_of("api-401-oauth.jsonl").api_error_status, Some(401));
        assert_eq!(
            result_of("rate-limit-rejected.jsonl").api_error_status,
            Some(429)
        );
        assert_eq!(
            result_of("api-500-max-retries-2.jsonl").api_error_status,
            Some(500)
        );
        let retries = events("api-500-max-retries-2.jsonl")
            .into_iter()
            .filter(|e| {
                matches!(
                    e,
                    AgentEvent::ApiRetry {
                        error_status: Some(500),
                        ..
                    }
                )
            })
            .count();
        assert_eq!(retries, 2);
    }

    #[test]
    fn the_fast_way_reads_every_recorded_line_as_the_general_way_does() {
        let mut fast = 0;
        for entry in std::fs::read_dir(FIXTURES).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "jsonl") {
                continue;
            }
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                if let Some(event) = parse_fast(line) {
                    fast += 1;
                    assert_eq!(Ok(event), parse_general(line), "{}: {line}", path.display());
                }
            }
        }
        assert!(fast > 20, "only {fast} lines took the fast way");
        // A line without a message, and one with a huge unknown field, read alike.
        for line in [
            r#"{"type":"assistant","x":"aaaa"}"#,
            r#"{"type":"user","error":"e","x":{"y":[1,2]}}"#,
        ] {
            assert_eq!(Ok(parse_fast(line).unwrap()), parse_general(line), "{line}");
        }
        // A line of a shape the fast way does not know goes the general way.
        let odd = r#"{"type":"assistant","message":{"content":"just text"}}"#;
        assert!(parse_fast(odd).is_none());
        assert!(parse_line(odd.as_bytes()).is_ok());
    }

    #[test]
    fn a_usage_answer_tells_the_sessions_cost_so_far() {
        let costs: Vec<f64> = events("get-usage-midturn.jsonl")
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ControlResponse {
                    cost_usd: Some(c), ..
                } => Some(*c),
                _ => None,
            })
            .collect();
        assert!(
            !costs.is_empty() && costs.iter().all(|c| *c > 0.0),
            "{costs:?}"
        );
    }

    #[test]
    fn not_logged_in_transcript() {
        let ev = events("not-logged-in.jsonl");
        assert!(matches!(
            &ev[0],
            AgentEvent::ControlResponse {
                usage: Some(Usage::NoPlan),
                ..
            }
        ));
        assert!(ev.iter().any(|e| matches!(e,
            AgentEvent::Assistant { synthetic: true, error: Some(err), .. } if err == "authentication_failed")));
        let r = result_of("not-logged-in.jsonl");
        assert!(r.is_error);
        assert_eq!(r.api_error_status, None);
        assert_eq!(r.text.as_deref(), Some("Not logged in · Please run /login"));
    }

    #[test]
    fn a_plan_login_is_not_no_plan() {
        let usage = events("get-usage.jsonl").into_iter().find_map(|e| match e {
            AgentEvent::ControlResponse { usage, .. } => usage,
            _ => None,
        });
        assert_eq!(usage, Some(Usage::Unknown));
        let real = events("success.jsonl").into_iter().any(|e| {
            matches!(
                e,
                AgentEvent::Assistant {
                    synthetic: false,
                    error: None,
                    ..
                }
            )
        });
        assert!(real, "a real model answer is not synthetic");
    }

    #[test]
    fn rejected_rate_limit_event() {
        let rl = events("rate-limit-rejected.jsonl")
            .into_iter()
            .find_map(|e| match e {
                AgentEvent::RateLimit(i) => Some(i),
                _ => None,
            })
            .unwrap();
        assert_eq!(rl.status, RateLimitStatus::Rejected);
        assert_eq!(rl.resets_at, Some(1796020271));
        assert_eq!(rl.window.as_deref(), Some("five_hour"));
    }

    #[test]
    fn garbage_never_panics() {
        for line in [
            &b"not json"[..],
            b"\xff\xfe",
            b"{}",
            b"[]",
            b"{\"type\":42}",
            b"{\"type\":\"result\"}",
            b"{\"type\":\"assistant\",\"message\":{\"content\":\"x\"}}",
            b"{\"type\":\"rate_limit_event\",\"rate_limit_info\":[1]}",
            b"{\"type\":\"brand_new\"}",
            b"\0\0\0",
        ] {
            let _ = ClaudeCode.parse_line(line);
        }
        assert_eq!(ClaudeCode.parse_line(b"\xff"), Err(LineError::NotUtf8));
        assert_eq!(ClaudeCode.parse_line(b"{}"), Err(LineError::NoType));
        assert!(matches!(
            ClaudeCode.parse_line(b"{\"type\":\"brand_new\"}"),
            Ok(AgentEvent::Other { .. })
        ));
        let r = match ClaudeCode.parse_line(b"{\"type\":\"result\"}") {
            Ok(AgentEvent::Result(r)) => r,
            other => panic!("{other:?}"),
        };
        assert!(!r.is_error && r.cost_usd.is_none());
    }

    #[test]
    fn versions() {
        let d = ClaudeCode;
        assert_eq!(
            d.check_version("2.1.197 (Claude Code)\n").unwrap(),
            "2.1.197"
        );
        assert_eq!(d.check_version("2.1.0 (Claude Code)").unwrap(), "2.1.0");
        let untested = d.check_version("2.2.0 (Claude Code)").unwrap_err();
        assert!(
            matches!(&untested, AgentCliError::Untested { version, .. } if version == "2.2.0"),
            "{untested:?}"
        );
        assert_eq!(
            untested.to_string(),
            "Claude Code 2.2.0 is outside the tested range 2.1.x (tested on 2.1.197 and 2.1.332)"
        );
        assert!(matches!(
            d.check_version("3.1.197 (Claude Code)"),
            Err(AgentCliError::Untested { .. })
        ));
        assert_eq!(
            d.check_version("hello"),
            Err(AgentCliError::Unrecognised {
                output: "hello".into(),
                agent: "Claude Code"
            })
        );
    }

    #[test]
    fn invocation_removes_inherited_keys_unless_the_account_sets_them() {
        let mut env = BTreeMap::new();
        env.insert("CLAUDE_CODE_OAUTH_TOKEN".to_string(), "tok".to_string());
        let account = Account::local(
            DriverKind::ClaudeCode,
            Some("/creds/work".into()),
            crate::config::Env(env),
        );
        let tools = vec!["Read".to_string(), "Bash(git add:*)".to_string()];
        let inv = ClaudeCode.invocation(&RunRequest {
            command: Path::new("claude"),
            account: &account,
            permission_mode: "dontAsk",
            max_budget_usd: Some(2.5),
            allowed_tools: &tools,
            disallowed_tools: &[],
            model: Some("claude-sonnet-4-5"),
            standing_instructions: "be good",
            prompt: "on stdin, not in argv",
            files_dir: Path::new("/unused"),
            cwd: Path::new("/unused"),
            writable_dirs: &[],
        });
        assert_eq!(
            inv.args,
            [
                "-p",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--verbose",
                "--permission-mode",
                "dontAsk",
                "--max-budget-usd",
                "2.5",
                "--allowedTools",
                "Read",
                "Bash(git add:*)",
                "--model",
                "claude-sonnet-4-5",
                "--setting-sources=",
                "--settings",
                r#"{"disableAllHooks":true}"#,
                "--strict-mcp-config",
                "--mcp-config",
                r#"{"mcpServers":{}}"#,
                "--append-system-prompt",
                "be good"
            ]
        );
        assert!(inv
            .env_set
            .contains(&("CLAUDE_CONFIG_DIR".into(), "/creds/work".into())));
        assert!(inv
            .env_set
            .contains(&("CLAUDE_CODE_OAUTH_TOKEN".into(), "tok".into())));
        assert_eq!(
            inv.env_remove,
            [
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_AUTH_TOKEN",
                "PGPASSWORD",
                "PGPASSFILE"
            ]
        );
    }

    #[test]
    fn prompt_is_one_stream_json_user_line() {
        let bytes = ClaudeCode.prompt_input("fix \"it\"\nplease");
        assert_eq!(bytes.iter().filter(|b| **b == b'\n').count(), 1);
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["type"], "user");
        assert_eq!(v["message"]["content"], "fix \"it\"\nplease");
    }
}
