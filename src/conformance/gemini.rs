//! The protocol facts owl relies on in the Gemini CLI, each checked against the loopback mock of the Gemini API under a fake API key in a throwaway `GEMINI_CLI_HOME`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::config::{Account, Env};
use crate::conformance::mock::gemini::{MockGemini, Step};
use crate::conformance::supervised::{self, StopWhen, Supervised};
use crate::conformance::{is, run_scenarios, words, Check, Scratch};
use crate::driver::gemini::GeminiCli;
use crate::driver::{AgentEvent, AgentFailure, Driver, RunRequest};

/// What owl puts before the prompt here, to find it in the request.
const MARKER: &str = "owl-conformance-marker: find me in the prompt";
/// How long a turn against the mock may take (the CLI starts in about 2 s).
const TURN: Duration = Duration::from_secs(25);

/// Every check, the scenarios run side by side.
pub(super) fn run(command: &Path, record: Option<&Path>) -> Vec<Check> {
    run_scenarios(
        command,
        record,
        &[version, turn, denied, quota, supervised_turn, planted],
    )
}

fn version(command: &Path, _record: Option<&Path>) -> Vec<Check> {
    vec![crate::conformance::version_check(
        &GeminiCli,
        command,
        &[("GEMINI_CLI_NO_RELAUNCH", "true")],
    )]
}

/// A scenario's CLI: its scratch dir, its mock, its Account and owl's Run argv.
struct Bench {
    scratch: Scratch,
    mock: MockGemini,
    account: Account,
    invocation: crate::driver::Invocation,
}

fn bench(
    label: &'static str,
    command: &Path,
    steps: Vec<Step>,
    allowed: &[&str],
) -> Result<Bench, String> {
    bench_planted(label, command, (steps, allowed), |_| Ok(()))
}

/// Like [`bench`], with `plant` writing in the scratch dir (the CLI's project, its
/// `gemini-home` store) before owl composes the Run's invocation.
fn bench_planted(
    label: &'static str,
    command: &Path,
    (steps, allowed): (Vec<Step>, &[&str]),
    plant: impl FnOnce(&Path) -> std::io::Result<()>,
) -> Result<Bench, String> {
    let scratch = Scratch::new(label).map_err(|e| format!("making a scratch dir: {e}"))?;
    let mock = MockGemini::start().map_err(|e| format!("starting the mock API: {e}"))?;
    mock.script(steps);
    let home = scratch.0.join("gemini-home");
    let settings = json!({"security": {"auth": {"selectedType": "gemini-api-key"}},
        "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false, "maxAttempts": 1},
        "privacy": {"usageStatisticsEnabled": false}});
    std::fs::create_dir_all(home.join(".gemini"))
        .and_then(|()| std::fs::write(home.join(".gemini/settings.json"), settings.to_string()))
        .map_err(|e| format!("writing the throwaway settings: {e}"))?;
    let mut env = BTreeMap::new();
    env.insert(
        "GEMINI_API_KEY".to_string(),
        "AIza-FAKE-owl-conformance".to_string(),
    );
    env.insert("GOOGLE_GEMINI_BASE_URL".to_string(), mock.base_url());
    plant(&scratch.0).map_err(|e| format!("planting settings: {e}"))?;
    let account = Account::local(crate::config::DriverKind::Gemini, Some(home), Env(env));
    let allowed: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
    let inv = GeminiCli.invocation(&RunRequest {
        command,
        account: &account,
        permission_mode: "default",
        max_budget_usd: None,
        allowed_tools: &allowed,
        disallowed_tools: &[],
        model: None,
        standing_instructions: MARKER,
        prompt: "Do what the replies say.",
        files_dir: &scratch.0.join("files"),
        cwd: &scratch.0,
        writable_dirs: &[],
    });
    Ok(Bench {
        scratch,
        mock,
        account,
        invocation: inv,
    })
}

impl Bench {
    /// One Run of the CLI (its prompt in argv, its stdin closed at once), supervised by owl
    /// to its end.
    fn supervise(&self, command: &Path) -> Result<Supervised, String> {
        let files = self.scratch.0.join("files");
        std::fs::create_dir_all(&files).map_err(|e| format!("making {}: {e}", files.display()))?;
        supervised::supervise(supervised::Run {
            driver: std::sync::Arc::new(GeminiCli),
            command,
            account: &self.account,
            invocation: &self.invocation,
            prompt: "Do what the replies say.",
            workspace: &self.scratch.0,
            files: &files,
            limit: TURN,
            usage_poll: None,
            stop: StopWhen::Never,
        })
        .map_err(|e| format!("starting '{}': {e}", command.display()))
    }
}

/// One turn: the lines the CLI wrote, and the requests the mock saw.
fn one_turn(
    label: &'static str,
    command: &Path,
    record: Option<&Path>,
    steps: Vec<Step>,
    allowed: &[&str],
) -> Result<(Vec<Value>, Vec<Value>), String> {
    let bench = bench(label, command, steps, allowed)?;
    let lines = bench.supervise(command)?.lines;
    if let Some(dir) = record {
        if let Err(e) = crate::conformance::record(dir, label, &bench.scratch.0, &lines) {
            tracing::warn!("recording the {label} scenario: {e}");
        }
    }
    let requests = bench
        .mock
        .requests
        .lock()
        .map(|r| r.clone())
        .unwrap_or_default();
    Ok((lines, requests))
}

fn parse(line: &Value) -> Option<AgentEvent> {
    GeminiCli.parse_line(line.to_string().as_bytes()).ok()
}

/// A turn with a text answer: init with a session id first, a result the Driver reads, and
/// owl's words in the prompt the model got.
fn turn(command: &Path, record: Option<&Path>) -> Vec<Check> {
    const INIT: &str = "the stream starts with init and a session id";
    const RESULT: &str = "the result line says success with its token counts";
    const PROMPT: &str = "owl's standing instructions reach the request";
    let (lines, requests) = match one_turn("turn", command, record, vec![Step::text("Hello.")], &[])
    {
        Ok(t) => t,
        Err(why) => return vec![Check::failed(INIT, why)],
    };
    let init = match lines.first() {
        Some(l) if is(l, "init", None) && l["session_id"].is_string() => {
            Check::new(INIT, true, format!("session {}", l["session_id"]))
        }
        Some(l) => Check::failed(INIT, crate::text::truncate(&l.to_string(), 160)),
        None => Check::failed(INIT, "no output"),
    };
    let result = match lines.iter().rev().find_map(|l| match parse(l) {
        Some(AgentEvent::Result(r)) => Some(r),
        _ => None,
    }) {
        Some(r) => Check::new(
            RESULT,
            !r.is_error && r.input_tokens.is_some() && r.output_tokens.is_some(),
            format!(
                "status {}, tokens {}/{}",
                r.subtype,
                words::or_none(r.input_tokens),
                words::or_none(r.output_tokens)
            ),
        ),
        None => Check::failed(RESULT, format!("no result within {}s", TURN.as_secs())),
    };
    let prompt = Check::new(
        PROMPT,
        requests.iter().any(|r| r.to_string().contains(MARKER)),
        format!("{} request(s) to the model", requests.len()),
    );
    vec![init, result, prompt]
}

/// A command outside the allow-list is refused by the policy, and the line says so.
fn denied(command: &Path, record: Option<&Path>) -> Vec<Check> {
    const NAME: &str = "a command outside the policy is denied on its tool_result line";
    let steps = vec![
        Step::shell("rm -f owl-conformance.txt"),
        Step::text("Tried."),
    ];
    let lines = match one_turn("denied", command, record, steps, &["Bash(git status:*)"]) {
        Ok((lines, _)) => lines,
        Err(why) => return vec![Check::failed(NAME, why)],
    };
    let denied = lines.iter().find_map(crate::driver::gemini::denial);
    vec![match denied {
        Some(d) => Check::new(NAME, true, format!("{} denied", d.tool_name)),
        None => Check::failed(NAME, "no tool_result with a policy_violation"),
    }]
}

/// A quota 429 is an error result whose words the Driver reads as a rate limit.
fn quota(command: &Path, record: Option<&Path>) -> Vec<Check> {
    const NAME: &str = "a quota 429 reads as a rate limit";
    let lines = match one_turn("quota", command, record, vec![Step::daily_quota()], &[]) {
        Ok((lines, _)) => lines,
        Err(why) => return vec![Check::failed(NAME, why)],
    };
    let result = lines.iter().rev().find_map(|l| match parse(l) {
        Some(AgentEvent::Result(r)) => Some(r),
        _ => None,
    });
    vec![match result {
        Some(r) => {
            let failure = GeminiCli.failure(&r, None, false);
            Check::new(
                NAME,
                failure == Some(AgentFailure::RateLimited),
                format!("status {}, read as {}", r.subtype, words::failure(failure)),
            )
        }
        None => Check::failed(NAME, format!("no result within {}s", TURN.as_secs())),
    }]
}
/// owl supervises a Run of the CLI (its prompt in argv, its stdin closed at once) to its
/// result and exit, and judges it succeeded.
fn supervised_turn(command: &Path, _record: Option<&Path>) -> Vec<Check> {
    const NAME: &str = "owl supervises a turn to its result and exit, and judges it succeeded";
    let bench = match bench("supervised-turn", command, vec![Step::text("Hello.")], &[]) {
        Ok(b) => b,
        Err(why) => return vec![Check::failed(NAME, why)],
    };
    match bench.supervise(command) {
        Ok(run) => {
            let ok = run.report.result.is_some()
                && run.report.exit.code == Some(0)
                && run.classified.outcome == crate::model::RunOutcome::Succeeded;
            vec![Check::new(
                NAME,
                ok,
                format!(
                    "{} events, {}, judged {}",
                    run.events.len(),
                    run.report.exit,
                    run.classified.outcome
                ),
            )]
        }
        Err(why) => vec![Check::failed(NAME, why)],
    }
}

/// What the planted scenario's `GEMINI.md` says, found again in the model's request.
const PLANTED_MEMORY: &str = "owl-conformance-gemini-md: the repository's own instructions";

/// Settings files an agent can write, planted in the project (`.gemini/settings.json`) and
/// in the store (`gemini-home/.gemini/settings.json`), each with hooks, an MCP server and
/// a tool discovery command that leave a mark, are not obeyed by a Run started as owl
/// starts one; the project's `GEMINI.md` still reaches the model. A version that reads one
/// of them again fails here.
fn planted(command: &Path, record: Option<&Path>) -> Vec<Check> {
    const OBEYS: &str = "settings files the agent can write are not obeyed";
    const MEMORY: &str = "the repository's GEMINI.md reaches the model";
    let bench = match bench_planted("planted", command, (vec![Step::text("Done.")], &[]), plant) {
        Ok(b) => b,
        Err(why) => return vec![Check::failed(OBEYS, why)],
    };
    let lines = match bench.supervise(command) {
        Ok(run) => run.lines,
        Err(why) => return vec![Check::failed(OBEYS, why)],
    };
    if let Some(dir) = record {
        if let Err(e) = crate::conformance::record(dir, "planted", &bench.scratch.0, &lines) {
            tracing::warn!("recording the planted scenario: {e}");
        }
    }
    let marks = crate::conformance::marks_left(&bench.scratch.0);
    let first = bench.mock.requests.lock().map_or(String::new(), |r| {
        r.first().map(Value::to_string).unwrap_or_default()
    });
    vec![
        Check::new(
            OBEYS,
            marks.is_empty() && !first.is_empty(),
            if marks.is_empty() {
                "nothing planted ran".to_string()
            } else {
                format!("ran: {}", marks.join(", "))
            },
        ),
        crate::conformance::memory_check(MEMORY, &first, PLANTED_MEMORY),
    ]
}

/// Writes the planted files under `dir`: marks go to `dir/marks/`, one per command run.
fn plant(dir: &Path) -> std::io::Result<()> {
    crate::conformance::make_in_scratch(dir, &["marks", ".gemini"])?;
    let settings = |from: &str| {
        let mark = |what: &str| {
            format!(
                "touch '{}'",
                dir.join("marks").join(format!("{from}-{what}")).display()
            )
        };
        let hook = |event: &str| json!([{"matcher": "*", "hooks": [{"name": event, "type": "command", "command": mark(event)}]}]);
        json!({
            "hooks": {"SessionStart": hook("SessionStart"), "BeforeAgent": hook("BeforeAgent"), "AfterAgent": hook("AfterAgent")},
            "hooksConfig": {"enabled": true},
            "mcpServers": {"planted": {"command": "sh", "args": ["-c", mark("mcp-server")]}},
        })
    };
    std::fs::write(
        dir.join(".gemini/settings.json"),
        settings("project").to_string(),
    )?;
    let store = dir.join("gemini-home/.gemini/settings.json");
    let mut kept: Value = serde_json::from_str(&std::fs::read_to_string(&store)?)?;
    for (k, v) in settings("store").as_object().into_iter().flatten() {
        kept[k] = v.clone();
    }
    std::fs::write(store, kept.to_string())?;
    std::fs::write(dir.join("GEMINI.md"), format!("{PLANTED_MEMORY}\n"))
}
