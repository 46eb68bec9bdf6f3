//! The protocol facts owl relies on in Claude Code, each checked against the loopback mock: a fake plan login in a throwaway `CLAUDE_CONFIG_DIR`, no real credential, no token, nothing off the machine.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::config::{Account, Env};
use crate::conformance::mock::api::{MockApi, Reply};
use crate::conformance::supervised::{self, StopWhen, Supervised};
use crate::conformance::{is, run_scenarios, words, Check, Scratch};
use crate::driver::ClaudeCode;
use crate::driver::{AgentEvent, AgentFailure, Driver, RateLimitStatus, RunRequest, Usage};
use crate::usage::ProbeOutcome;

mod interrupt;
mod plan;
mod verdicts;
use interrupt::*;
use plan::*;
use verdicts::*;

/// What owl appends to the system prompt here, to find it in the request.
const MARKER: &str = "owl-conformance-marker: find me in the system prompt";
/// How long a turn against the mock may take: a bound for a CLI that hangs, far above
/// the second or two a turn takes, since a loaded machine (CI) slows every node start.
const TURN: Duration = Duration::from_secs(40);

/// Every check, the scenarios run side by side (each its own CLI, mock and config dir).
/// With `record`, what the CLI wrote in each scenario is kept there.
pub(super) fn run(command: &Path, record: Option<&Path>) -> Vec<Check> {
    run_scenarios(
        command,
        record,
        &[
            version,
            probe,
            turn,
            interrupt,
            denied,
            api_error,
            budget,
            no_login,
            windows,
            limit,
            auth_status,
            planted,
        ],
    )
}

/// An Account on a fake plan login at the mock, its credential store in `dir`.
fn account(dir: &Path, mock: &MockApi, logged_in: bool) -> Account {
    let mut env = BTreeMap::new();
    if logged_in {
        for (k, v) in [
            (
                "CLAUDE_CODE_OAUTH_TOKEN",
                "sk-ant-oat01-FAKE-owl-conformance-FAKE",
            ),
            ("CLAUDE_CODE_OAUTH_SCOPES", "user:inference user:profile"),
            ("CLAUDE_CODE_SUBSCRIPTION_TYPE", "max"),
        ] {
            env.insert(k.to_string(), v.to_string());
        }
    }
    for (k, v) in [
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_string()),
        ("ANTHROPIC_BASE_URL", mock.base_url()),
        ("CLAUDE_CODE_MAX_RETRIES", "0".to_string()),
        ("HOME", dir.display().to_string()),
    ] {
        env.insert(k.to_string(), v);
    }
    Account::local(
        crate::config::DriverKind::ClaudeCode,
        Some(dir.join("claude-config")),
        Env(env),
    )
}

/// A scenario's Run: its own mock, scratch dir and Account, the CLI started with owl's Run
/// argv and supervised by owl.
struct Scene {
    label: &'static str,
    mock: MockApi,
    scratch: Scratch,
    account: Account,
}

/// How often owl asks for the plan's utilization in a scenario that polls: the first ask
/// goes at the API's first answer, and a turn against the mock ends well before a second.
const POLL: Duration = Duration::from_secs(30);

impl Scene {
    /// Runs the CLI on `prompt` with `request`'s settings, supervised by owl to its end
    /// (polling every `poll`, stopped when `stop` says); with `record`, keeps what it wrote
    /// as a fixture.
    fn run(
        &self,
        command: &Path,
        (request, prompt): (RunRequestOwned, &str),
        poll: Option<Duration>,
        stop: StopWhen,
        record: Option<&Path>,
    ) -> Result<Supervised, String> {
        let dir = &self.scratch.0;
        let invocation = ClaudeCode.invocation(&RunRequest {
            command,
            account: &self.account,
            permission_mode: "dontAsk",
            max_budget_usd: request.max_budget_usd,
            allowed_tools: &request.allowed_tools,
            disallowed_tools: &[],
            model: None,
            standing_instructions: MARKER,
            prompt: "",
            files_dir: dir,
            cwd: dir,
            writable_dirs: &[],
        });
        let run = supervised::supervise(supervised::Run {
            driver: std::sync::Arc::new(ClaudeCode),
            command,
            account: &self.account,
            invocation: &invocation,
            prompt,
            workspace: dir,
            files: dir,
            limit: TURN,
            usage_poll: poll,
            stop,
        })
        .map_err(|e| format!("starting '{}': {e}", command.display()))?;
        if let Some(to) = record {
            if let Err(e) = crate::conformance::record(to, self.label, dir, &run.lines) {
                tracing::warn!("recording the {} scenario: {e}", self.label);
            }
        }
        Ok(run)
    }
}

fn scene(label: &'static str, replies: Vec<Reply>, logged_in: bool) -> Result<Scene, String> {
    let scratch = Scratch::new(label).map_err(|e| format!("making a scratch dir: {e}"))?;
    let mock = MockApi::start().map_err(|e| format!("starting the mock API: {e}"))?;
    mock.script(replies);
    let account = account(&scratch.0, &mock, logged_in);
    Ok(Scene {
        label,
        mock,
        scratch,
        account,
    })
}

/// The parts of a [`RunRequest`] a scenario chooses.
struct RunRequestOwned {
    max_budget_usd: Option<f64>,
    allowed_tools: Vec<String>,
}

fn tools(names: &[&str]) -> RunRequestOwned {
    RunRequestOwned {
        max_budget_usd: None,
        allowed_tools: names.iter().map(|s| s.to_string()).collect(),
    }
}

fn short(line: &Value) -> String {
    crate::text::truncate(&line.to_string(), 160)
}

fn version(command: &Path, _record: Option<&Path>) -> Vec<Check> {
    vec![crate::conformance::version_check(&ClaudeCode, command, &[])]
}

/// The zero-token probe owl runs before a Run: `get_usage` answered before any prompt.
fn probe(command: &Path, _record: Option<&Path>) -> Vec<Check> {
    const NAME: &str = "get_usage answered before the first message";
    let s = match scene("probe", Vec::new(), true) {
        Ok(s) => s,
        Err(why) => return vec![Check::failed(NAME, why)],
    };
    let local = crate::supervise::LocalExecutor {
        state_dir: s.scratch.0.clone(),
    };
    let outcome =
        crate::supervise::probe::probe(&local, &ClaudeCode, command, &s.account, &s.scratch.0);
    let usage = match outcome {
        ProbeOutcome::Observed(w) => Usage::Windows(w),
        ProbeOutcome::Unknown => Usage::Unknown,
        ProbeOutcome::NoPlan => Usage::NoPlan,
        ProbeOutcome::Failed(why) | ProbeOutcome::Unreachable(why) => {
            return vec![Check::failed(NAME, why)]
        }
    };
    vec![Check::new(NAME, true, words::usage(Some(&usage)))]
}

/// A turn with a tool, owl polling: get_usage mid-turn, a rate-limit warning, the init and
/// result lines, the system prompt in the request, and owl's verdict on the Run.
fn turn(command: &Path, record: Option<&Path>) -> Vec<Check> {
    let reset = chrono::Utc::now().timestamp() + 3 * 3600;
    let replies = vec![
        Reply::tool(
            "Bash",
            json!({"command": "sleep 2", "description": "Wait a little"}),
        )
        .with_five_hour("allowed_warning", 0.85, reset)
        .with_five_hour_warning(0.8),
        Reply::text("Done.")
            .with_five_hour("allowed_warning", 0.85, reset)
            .with_five_hour_warning(0.8),
    ];
    let run = scene("turn", replies, true).and_then(|s| {
        let asked = (tools(&["Bash(sleep:*)"]), "Wait a little, then say done.");
        let run = s.run(command, asked, Some(POLL), StopWhen::Never, record)?;
        Ok((s, run))
    });
    let (s, run) = match run {
        Ok(both) => both,
        Err(why) => return vec![Check::failed("the CLI starts", why)],
    };
    vec![
        init_first(&run),
        warning_event(&run),
        usage_mid_turn(&run),
        result_fields(&run),
        system_prompt_sent(&s),
        supervised_turn(&run),
    ]
}

fn init_first(run: &Supervised) -> Check {
    // 2.1.332 given `--settings` (owl's own layer) says `system/ui_invalidate` first: its
    // interface's bookkeeping, no turn yet.
    let init = run
        .lines
        .iter()
        .find(|l| l["type"] != "control_response" && !is(l, "system", Some("ui_invalidate")));
    match init {
        Some(l) if is(l, "system", Some("init")) && l["session_id"].is_string() => Check::new(
            "the stream starts with system/init and a session id",
            true,
            format!("session {}", l["session_id"]),
        ),
        Some(l) => Check::failed(
            "the stream starts with system/init and a session id",
            short(l),
        ),
        None => Check::failed(
            "the stream starts with system/init and a session id",
            "no line after the prompt",
        ),
    }
}

fn warning_event(run: &Supervised) -> Check {
    let event = run.events.iter().find_map(|e| match e {
        AgentEvent::RateLimit(info) => Some(info),
        _ => None,
    });
    match event {
        Some(info)
            if info.status == RateLimitStatus::AllowedWarning && info.utilization.is_some() =>
        {
            Check::new(
                "a rate_limit_event with utilization in a warning state",
                true,
                format!("{} at {}", info.status, words::fraction(info.utilization)),
            )
        }
        Some(info) => Check::failed(
            "a rate_limit_event with utilization in a warning state",
            format!(
                "{} at {} ({})",
                info.status,
                words::fraction(info.utilization),
                words::or_none(info.window.as_deref())
            ),
        ),
        None => Check::failed(
            "a rate_limit_event with utilization in a warning state",
            "none after a response with warning headers",
        ),
    }
}

/// owl's own poll, asked at the API's first answer while the tool ran.
fn usage_mid_turn(run: &Supervised) -> Check {
    const NAME: &str = "get_usage answered mid-turn with the rate_limits owl parses";
    let answer = run.events.iter().find_map(|e| match e {
        AgentEvent::ControlResponse { usage, .. } => Some(usage),
        _ => None,
    });
    match answer {
        Some(Some(Usage::Windows(w)))
            if w.iter()
                .any(|w| w.window == "five_hour" && (w.percent - 85.0).abs() < 0.5) =>
        {
            Check::new(NAME, true, "five_hour at 85%")
        }
        Some(usage) => Check::failed(NAME, words::usage(usage.as_ref())),
        None => Check::failed(
            NAME,
            format!("owl's poll got no answer in a {}s turn", TURN.as_secs()),
        ),
    }
}

fn result_fields(run: &Supervised) -> Check {
    let result = run.lines.iter().find(|l| is(l, "result", None));
    match result {
        Some(l) => {
            let missing: Vec<&str> = [
                "subtype",
                "is_error",
                "total_cost_usd",
                "usage",
                "num_turns",
                "session_id",
                "permission_denials",
            ]
            .into_iter()
            .filter(|k| l.get(*k).is_none())
            .collect();
            Check::new(
                "the result line has the fields owl reads",
                missing.is_empty() && run.report.result.is_some(),
                if missing.is_empty() {
                    format!("subtype {}", l["subtype"])
                } else {
                    format!("missing {}", missing.join(", "))
                },
            )
        }
        None => Check::failed(
            "the result line has the fields owl reads",
            format!(
                "no result within {}s: stream-json input not accepted?",
                TURN.as_secs()
            ),
        ),
    }
}

fn system_prompt_sent(s: &Scene) -> Check {
    let first = s
        .mock
        .requests
        .lock()
        .map(|r| r.first().cloned())
        .ok()
        .flatten();
    match first {
        Some(req) if req["system"].to_string().contains(MARKER) => Check::new(
            "--append-system-prompt reaches the request",
            true,
            "the system prompt carries owl's words",
        ),
        Some(_) => Check::failed(
            "--append-system-prompt reaches the request",
            "the first request's system prompt lacks owl's words",
        ),
        None => Check::failed(
            "--append-system-prompt reaches the request",
            "no request reached the mock",
        ),
    }
}

/// One prompt's turn in a fresh scene, supervised by owl, its result judged by `judge`
/// (with every event owl read); a missing result fails the check.
fn one_turn(
    (name, label): (&'static str, &'static str),
    command: &Path,
    record: Option<&Path>,
    (replies, request): (Vec<Reply>, RunRequestOwned),
    logged_in: bool,
    judge: impl FnOnce(&crate::driver::AgentResult, &[AgentEvent]) -> Check,
) -> Vec<Check> {
    let run = scene(label, replies, logged_in).and_then(|s| {
        let asked = (request, "Do what the replies say.");
        s.run(command, asked, None, StopWhen::Never, record)
    });
    vec![match run {
        Ok(run) => match &run.report.result {
            Some(r) => judge(r, &run.events),
            None => Check::failed(name, format!("no result within {}s", TURN.as_secs())),
        },
        Err(why) => Check::failed(name, why),
    }]
}

/// A tool outside `allowedTools` under `dontAsk` lands in `permission_denials`.
fn denied(command: &Path, record: Option<&Path>) -> Vec<Check> {
    const NAME: &str = "a tool denied under dontAsk lands in permission_denials";
    let replies = vec![
        Reply::tool(
            "Write",
            json!({"file_path": "/tmp/owl-conformance-denied.txt", "content": "no"}),
        ),
        Reply::text("I could not write it."),
    ];
    one_turn(
        (NAME, "denied"),
        command,
        record,
        (replies, tools(&["Read"])),
        true,
        |r, _| {
            let denied = r.permission_denials.iter().any(|d| d.tool_name == "Write");
            let said = format!("denials: {}", words::denials(&r.permission_denials));
            Check::new(NAME, denied, said)
        },
    )
}

/// An API 500 surfaces as an error result with its status.
fn api_error(command: &Path, record: Option<&Path>) -> Vec<Check> {
    const NAME: &str = "an API 500 surfaces as is_error with api_error_status";
    let replies = vec![Reply::error(500), Reply::error(500), Reply::error(500)];
    one_turn(
        (NAME, "api500"),
        command,
        record,
        (replies, tools(&[])),
        true,
        |r, _| {
            let failure = ClaudeCode.failure(r, None, false);
            Check::new(
                NAME,
                r.is_error
                    && r.api_error_status == Some(500)
                    && failure == Some(AgentFailure::Unavailable),
                format!(
                    "is_error {}, status {}, read as {}",
                    r.is_error,
                    words::or_none(r.api_error_status),
                    words::failure(failure)
                ),
            )
        },
    )
}

/// `--max-budget-usd` stops the turn once a response costs more.
fn budget(command: &Path, record: Option<&Path>) -> Vec<Check> {
    const NAME: &str = "--max-budget-usd stops the turn";
    let replies = vec![
        Reply::tool(
            "Bash",
            json!({"command": "sleep 0", "description": "Nothing"}),
        ),
        Reply::tool(
            "Bash",
            json!({"command": "sleep 0", "description": "Nothing"}),
        ),
        Reply::text("Done."),
    ];
    let request = RunRequestOwned {
        max_budget_usd: Some(0.0001),
        allowed_tools: vec!["Bash(sleep:*)".into()],
    };
    one_turn(
        (NAME, "budget"),
        command,
        record,
        (replies, request),
        true,
        |r, _| Check::new(NAME, r.budget_exhausted, format!("subtype {}", r.subtype)),
    )
}

/// An empty credential store is reported the way owl's login detection reads it.
fn no_login(command: &Path, record: Option<&Path>) -> Vec<Check> {
    const NAME: &str = "an empty credential store reads as not logged in";
    one_turn(
        (NAME, "nologin"),
        command,
        record,
        (Vec::new(), tools(&[])),
        false,
        |r, seen| {
            let agent_error = seen.iter().rev().find_map(|e| match e {
                AgentEvent::Assistant { error, .. } => error.clone(),
                _ => None,
            });
            let failure = ClaudeCode.failure(r, agent_error.as_deref(), false);
            Check::new(
                NAME,
                failure == Some(AgentFailure::NotLoggedIn),
                format!(
                    "{}, read as {}",
                    crate::text::truncate(r.text.as_deref().unwrap_or(""), 80),
                    words::failure(failure)
                ),
            )
        },
    )
}

/// Settings files an agent can write, each planted where the CLI looks (the project's
/// `.claude/settings.json` and `settings.local.json`, `.mcp.json`, the credential store's
/// `settings.json`: hooks, a key helper, another endpoint, an MCP server), are not obeyed
/// by a Run started with owl's command line; the repository's `CLAUDE.md` still reaches the
/// model. A version that starts reading one of them again fails here.
fn planted(command: &Path, record: Option<&Path>) -> Vec<Check> {
    const OBEYS: &str = "settings files the agent can write are not obeyed";
    const MEMORY: &str = "the repository's CLAUDE.md reaches the model";
    let s = match scene("planted", vec![Reply::text("Done.")], true) {
        Ok(s) => s,
        Err(why) => return vec![Check::failed(OBEYS, why)],
    };
    let dir = &s.scratch.0;
    if let Err(e) = plant_settings(dir) {
        return vec![Check::failed(OBEYS, format!("planting the settings: {e}"))];
    }
    let run = match s.run(
        command,
        (tools(&[]), "Say hello."),
        None,
        StopWhen::Never,
        record,
    ) {
        Ok(run) => run,
        Err(why) => return vec![Check::failed(OBEYS, why)],
    };
    let marks = crate::conformance::marks_left(dir);
    let init = run.lines.iter().find(|l| is(l, "system", Some("init")));
    let hooks = run
        .lines
        .iter()
        .filter(|l| is(l, "system", Some("hook_started")))
        .count();
    let key = init.and_then(|l| l["apiKeySource"].as_str()).unwrap_or("?");
    let servers = init.map_or(0, |l| l["mcp_servers"].as_array().map_or(0, Vec::len));
    let calls = s.mock.calls();
    let first = s.mock.requests.lock().map_or(String::new(), |r| {
        r.first().map(Value::to_string).unwrap_or_default()
    });
    vec![
        Check::new(
            OBEYS,
            marks.is_empty() && hooks == 0 && key == "none" && servers == 0 && calls == 1,
            format!(
                "ran: {}; hook lines {hooks}; apiKeySource {key}; MCP servers {servers}; \
                 {calls} request(s) to the Account's endpoint",
                if marks.is_empty() {
                    "nothing planted".to_string()
                } else {
                    marks.join(", ")
                }
            ),
        ),
        crate::conformance::memory_check(MEMORY, &first, PLANTED_MEMORY),
    ]
}

/// What the scenario's `CLAUDE.md` says, found again in the model's request.
const PLANTED_MEMORY: &str = "owl-conformance-claude-md: the repository's own instructions";

/// Writes, in a scenario's scratch dir (the CLI's project and its credential store under
/// it), every settings file the planted scenario must find ignored. Each planted command
/// leaves a file under `marks/` named for what ran.
fn plant_settings(dir: &Path) -> std::io::Result<()> {
    crate::conformance::make_in_scratch(dir, &["marks", ".claude", "claude-config"])?;
    let marks = dir.join("marks");
    let mark = |name: &str| format!("touch '{}'", marks.join(name).display());
    let hooks = |from: &str| {
        let mut hooks = serde_json::Map::new();
        for event in ["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"] {
            let command = mark(&format!("{from}-{event}"));
            hooks.insert(
                event.into(),
                json!([{"hooks": [{"type": "command", "command": command}]}]),
            );
        }
        Value::Object(hooks)
    };
    let closed = "http://127.0.0.1:9";
    let files = [
        (
            ".claude/settings.json",
            json!({
                "hooks": hooks("project"),
                "apiKeyHelper": format!("{} && echo sk-ant-api03-PLANTED", mark("key-helper")),
                "env": {"ANTHROPIC_BASE_URL": closed},
            }),
        ),
        (
            ".claude/settings.local.json",
            json!({"hooks": hooks("local")}),
        ),
        (
            ".mcp.json",
            json!({"mcpServers": {"planted": {
                "type": "stdio", "command": "sh", "args": ["-c", mark("mcp-server")]
            }}}),
        ),
        (
            "claude-config/settings.json",
            json!({"hooks": hooks("store")}),
        ),
    ];
    for (path, body) in files {
        std::fs::write(dir.join(path), body.to_string())?;
    }
    std::fs::write(dir.join("CLAUDE.md"), format!("{PLANTED_MEMORY}\n"))
}
