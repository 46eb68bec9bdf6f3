//! The protocol facts owl relies on in Claude Code, each checked against the loopback mock: a fake plan login in a throwaway `CLAUDE_CONFIG_DIR`, no real credential, no token, nothing off the machine.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::config::{Account, Env};
use crate::conformance::mock::api::{MockApi, Reply};
use crate::conformance::{control_response_to, is, run_scenarios, words, Check, Scratch, Session};
use crate::driver::ClaudeCode;
use crate::driver::{AgentEvent, AgentFailure, Driver, RateLimitStatus, RunRequest, Usage};

mod interrupt;
mod plan;
mod supervised;
use interrupt::*;
use plan::*;
use supervised::*;

/// What owl appends to the system prompt here, to find it in the request.
const MARKER: &str = "owl-conformance-marker: find me in the system prompt";
/// How long the CLI gets to start and answer its first control request.
const START: Duration = Duration::from_secs(15);
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
            turn,
            interrupt,
            denied,
            api_error,
            budget,
            no_login,
            windows,
            limit,
            auth_status,
            supervised_turn,
            supervised_stop,
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

/// A scenario's CLI: its own mock, scratch dir and session, with owl's Run argv.
struct Scene {
    label: &'static str,
    mock: MockApi,
    session: Session,
    scratch: Scratch,
}

impl Scene {
    /// Ends the CLI; with `record`, keeps what it wrote as a fixture.
    fn end(self, record: Option<&Path>) {
        let lines = self.session.finish(Duration::from_secs(10));
        if let Some(dir) = record {
            if let Err(e) = crate::conformance::record(dir, self.label, &self.scratch.0, &lines) {
                tracing::warn!("recording the {} scenario: {e}", self.label);
            }
        }
    }
}

fn scene(
    label: &'static str,
    command: &Path,
    replies: Vec<Reply>,
    request: impl FnOnce(&Account) -> RunRequestOwned,
    logged_in: bool,
) -> Result<Scene, String> {
    let scratch = Scratch::new(label).map_err(|e| format!("making a scratch dir: {e}"))?;
    let mock = MockApi::start().map_err(|e| format!("starting the mock API: {e}"))?;
    mock.script(replies);
    let account = account(&scratch.0, &mock, logged_in);
    let owned = request(&account);
    let inv = ClaudeCode.invocation(&RunRequest {
        command,
        account: &account,
        permission_mode: "dontAsk",
        max_budget_usd: owned.max_budget_usd,
        allowed_tools: &owned.allowed_tools,
        disallowed_tools: &[],
        model: None,
        standing_instructions: MARKER,
        prompt: "",
        files_dir: &scratch.0,
        cwd: &scratch.0,
        writable_dirs: &[],
    });
    let session = Session::start(&inv, &scratch.0)
        .map_err(|e| format!("starting '{}': {e}", command.display()))?;
    Ok(Scene {
        label,
        mock,
        session,
        scratch,
    })
}

/// The parts of a [`RunRequest`] a scenario chooses.
struct RunRequestOwned {
    max_budget_usd: Option<f64>,
    allowed_tools: Vec<String>,
}

fn tools(names: &[&str]) -> impl FnOnce(&Account) -> RunRequestOwned {
    let allowed_tools = names.iter().map(|s| s.to_string()).collect();
    move |_| RunRequestOwned {
        max_budget_usd: None,
        allowed_tools,
    }
}

/// The result line, parsed by the Driver.
fn result_of(line: &Value) -> Option<crate::driver::AgentResult> {
    match ClaudeCode.parse_line(line.to_string().as_bytes()) {
        Ok(AgentEvent::Result(r)) => Some(r),
        _ => None,
    }
}

fn short(line: &Value) -> String {
    crate::text::truncate(&line.to_string(), 160)
}

fn version(command: &Path, _record: Option<&Path>) -> Vec<Check> {
    vec![crate::conformance::version_check(&ClaudeCode, command, &[])]
}

/// A turn with a tool: get_usage before the prompt and mid-turn, a rate-limit warning, the
/// init and result lines, and the system prompt in the request.
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
    let mut s = match scene("turn", command, replies, tools(&["Bash(sleep:*)"]), true) {
        Ok(s) => s,
        Err(why) => return vec![Check::failed("the CLI starts", why)],
    };
    let mut checks = vec![usage_before_the_prompt(&mut s)];
    s.session
        .send(&ClaudeCode.prompt_input("Wait a little, then say done."));
    let started = s.session.wait_for(TURN, |l| {
        is(l, "assistant", None)
            && l["message"]["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_use"))
    });
    checks.push(init_first(&s));
    checks.push(warning_event(&mut s));
    checks.push(usage_mid_turn(&mut s, started.is_some()));
    checks.push(result_fields(&mut s));
    checks.push(system_prompt_sent(&s));
    s.end(record);
    checks
}

/// The CLI's line as the Driver reads it.
fn usage(line: &Value) -> Result<AgentEvent, crate::driver::LineError> {
    ClaudeCode.parse_line(line.to_string().as_bytes())
}

fn usage_before_the_prompt(s: &mut Scene) -> Check {
    s.session
        .send(&ClaudeCode.usage_request_input("r0").unwrap_or_default());
    let before = s.session.wait_for(START, |l| control_response_to(l, "r0"));
    match before.as_ref().map(usage) {
        Some(Ok(AgentEvent::ControlResponse {
            ok: true,
            usage: Some(u),
            ..
        })) => Check::new(
            "get_usage answered before the first message",
            true,
            words::usage(Some(&u)),
        ),
        Some(_) => Check::failed(
            "get_usage answered before the first message",
            format!(
                "an answer owl cannot read: {}",
                short(before.as_ref().unwrap_or(&Value::Null))
            ),
        ),
        None => Check::failed(
            "get_usage answered before the first message",
            format!("no answer within {}s", START.as_secs()),
        ),
    }
}

fn init_first(s: &Scene) -> Check {
    let init = s
        .session
        .seen
        .iter()
        .find(|l| l["type"] != "control_response");
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

fn warning_event(s: &mut Scene) -> Check {
    let event = s
        .session
        .seen
        .iter()
        .find_map(|l| match usage(l) {
            Ok(AgentEvent::RateLimit(info)) => Some(info),
            _ => None,
        })
        .or_else(|| {
            s.session
                .wait_for(Duration::from_secs(3), |l| is(l, "rate_limit_event", None))
                .and_then(|l| match usage(&l) {
                    Ok(AgentEvent::RateLimit(info)) => Some(info),
                    _ => None,
                })
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

fn usage_mid_turn(s: &mut Scene, started: bool) -> Check {
    if started {
        s.session
            .send(&ClaudeCode.usage_request_input("r1").unwrap_or_default());
        let mid = s.session.wait_for(TURN, |l| control_response_to(l, "r1"));
        return match mid.as_ref().map(usage) {
            Some(Ok(AgentEvent::ControlResponse {
                usage: Some(Usage::Windows(w)),
                ..
            })) if w
                .iter()
                .any(|w| w.window == "five_hour" && (w.percent - 85.0).abs() < 0.5) =>
            {
                Check::new(
                    "get_usage answered mid-turn with the rate_limits owl parses",
                    true,
                    "five_hour at 85%",
                )
            }
            Some(_) => Check::failed(
                "get_usage answered mid-turn with the rate_limits owl parses",
                short(mid.as_ref().unwrap_or(&Value::Null)),
            ),
            None => Check::failed(
                "get_usage answered mid-turn with the rate_limits owl parses",
                format!("no answer within {}s", TURN.as_secs()),
            ),
        };
    }
    Check::failed(
        "get_usage answered mid-turn with the rate_limits owl parses",
        "the turn never called its tool",
    )
}

fn result_fields(s: &mut Scene) -> Check {
    let result = s.session.wait_for(TURN, |l| is(l, "result", None));
    match &result {
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
                missing.is_empty() && result_of(l).is_some(),
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

/// One prompt's turn in a fresh scene, its result judged by `judge` (with the lines the
/// CLI wrote); a missing result fails the check.
#[allow(clippy::too_many_arguments)]
fn one_turn(
    name: &'static str,
    label: &'static str,
    command: &Path,
    record: Option<&Path>,
    replies: Vec<Reply>,
    request: impl FnOnce(&Account) -> RunRequestOwned,
    logged_in: bool,
    judge: impl FnOnce(&crate::driver::AgentResult, &[Value]) -> Check,
) -> Vec<Check> {
    let mut s = match scene(label, command, replies, request, logged_in) {
        Ok(s) => s,
        Err(why) => return vec![Check::failed(name, why)],
    };
    s.session
        .send(&ClaudeCode.prompt_input("Do what the replies say."));
    let result = s.session.wait_for(TURN, |l| is(l, "result", None));
    let check = match result.as_ref().and_then(result_of) {
        Some(r) => judge(&r, &s.session.seen),
        None => Check::failed(name, format!("no result within {}s", TURN.as_secs())),
    };
    s.end(record);
    vec![check]
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
        NAME,
        "denied",
        command,
        record,
        replies,
        tools(&["Read"]),
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
        NAME,
        "api500",
        command,
        record,
        replies,
        tools(&[]),
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
    let request = |_: &Account| RunRequestOwned {
        max_budget_usd: Some(0.0001),
        allowed_tools: vec!["Bash(sleep:*)".into()],
    };
    one_turn(
        NAME,
        "budget",
        command,
        record,
        replies,
        request,
        true,
        |r, _| Check::new(NAME, r.budget_exhausted, format!("subtype {}", r.subtype)),
    )
}

/// An empty credential store is reported the way owl's login detection reads it.
fn no_login(command: &Path, record: Option<&Path>) -> Vec<Check> {
    const NAME: &str = "an empty credential store reads as not logged in";
    one_turn(
        NAME,
        "nologin",
        command,
        record,
        Vec::new(),
        tools(&[]),
        false,
        |r, seen| {
            let agent_error = seen.iter().rev().find_map(|l| {
                match ClaudeCode.parse_line(l.to_string().as_bytes()) {
                    Ok(AgentEvent::Assistant { error, .. }) => error,
                    _ => None,
                }
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
