//! The protocol facts owl relies on in the Codex CLI, each checked against the loopback mock of the Responses API and ChatGPT's usage endpoint, under a throwaway `CODEX_HOME` with a fake API key or a fake ChatGPT login.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::config::{Account, DriverKind, Env};
use crate::conformance::mock::openai::{MockOpenAi, Step};
use crate::conformance::supervised::{self, StopWhen, Supervised};
use crate::conformance::{run_scenarios, words, Check, Scratch};
use crate::driver::codex::Codex;
use crate::driver::{AgentEvent, AgentFailure, Driver, RunRequest, Usage};
use crate::usage::ProbeOutcome;

/// What owl puts before the prompt here, to find it in the request.
const MARKER: &str = "owl-conformance-marker: find me in the prompt";
/// How long a turn against the mock may take (the CLI starts in well under a second).
const TURN: Duration = Duration::from_secs(30);
/// How long SIGINT may take to end the turn: the recording shows about 50 ms.
const SIGINT_EXIT: Duration = Duration::from_secs(2);

/// Every check, the scenarios run side by side.
pub(super) fn run(command: &Path, record: Option<&Path>) -> Vec<Check> {
    run_scenarios(
        command,
        record,
        &[
            version,
            turn,
            commit,
            usage_limit,
            sigint,
            probe,
            supervised_turn,
            planted,
        ],
    )
}

fn version(command: &Path, _record: Option<&Path>) -> Vec<Check> {
    vec![crate::conformance::version_check(&Codex, command, &[])]
}

/// A scratch git repository with one commit, a mock, and an Account at it.
struct Bench {
    scratch: Scratch,
    mock: MockOpenAi,
    account: Account,
}

impl Bench {
    fn new(label: &str, chatgpt: bool) -> Result<Bench, String> {
        let scratch = Scratch::new(label).map_err(|e| format!("making a scratch dir: {e}"))?;
        let repo = scratch.0.join("repo");
        init_repo(&repo).map_err(|e| format!("making a scratch repository: {e}"))?;
        let mock = MockOpenAi::start().map_err(|e| format!("starting the mock API: {e}"))?;
        let home = scratch.0.join("codex-home");
        mock.write_codex_home(&home, chatgpt, "OWL_MOCK_OPENAI_KEY")
            .map_err(|e| format!("writing the throwaway CODEX_HOME: {e}"))?;
        let mut env = BTreeMap::new();
        env.insert(
            "OWL_MOCK_OPENAI_KEY".to_string(),
            "sk-FAKE-owl-conformance".to_string(),
        );
        // Codex will not set up its sandbox helper for a CODEX_HOME inside its temp dir,
        // and the scratch dir is in the machine's: the CLI gets a temp dir beside the home.
        let tmp = scratch.0.join("tmp");
        std::fs::create_dir_all(&tmp).map_err(|e| format!("making {}: {e}", tmp.display()))?;
        env.insert("TMPDIR".to_string(), tmp.display().to_string());
        for key in ["GIT_AUTHOR", "GIT_COMMITTER"] {
            env.insert(format!("{key}_NAME"), "owl conformance".into());
            env.insert(format!("{key}_EMAIL"), "owl@example.com".into());
        }
        let mut account = Account::local(DriverKind::Codex, Some(home), Env(env));
        // As a user's Account says it: a Run reads no config.toml.
        account.codex_config = mock
            .codex_config(chatgpt, "OWL_MOCK_OPENAI_KEY")
            .as_object()
            .cloned();
        Ok(Bench {
            scratch,
            mock,
            account,
        })
    }

    fn repo(&self) -> PathBuf {
        self.scratch.0.join("repo")
    }

    /// One Run of the CLI against `steps`, supervised by owl to its end, in the scratch
    /// repository; owl stops it when `stop` says so.
    fn supervise(
        &self,
        command: &Path,
        steps: Vec<Step>,
        stop: StopWhen,
    ) -> Result<Supervised, String> {
        self.mock.script(steps);
        let files = self.scratch.0.join("files");
        std::fs::create_dir_all(&files).map_err(|e| format!("making {}: {e}", files.display()))?;
        let invocation = self.invocation(command);
        supervised::supervise(supervised::Run {
            driver: std::sync::Arc::new(Codex),
            command,
            account: &self.account,
            invocation: &invocation,
            prompt: "Do what the replies say.",
            workspace: &self.repo(),
            files: &files,
            limit: TURN,
            usage_poll: None,
            stop,
        })
        .map_err(|e| format!("starting '{}': {e}", command.display()))
    }

    /// One Run's command, as owl builds it.
    fn invocation(&self, command: &Path) -> crate::driver::Invocation {
        let repo = self.repo();
        Codex.invocation(&RunRequest {
            command,
            account: &self.account,
            permission_mode: "default",
            max_budget_usd: None,
            allowed_tools: &[],
            disallowed_tools: &[],
            model: None,
            standing_instructions: MARKER,
            prompt: "Do what the replies say.",
            files_dir: &self.scratch.0.join("files"),
            cwd: &repo,
            writable_dirs: &[repo.join(".git")],
        })
    }

    /// One whole turn: every stdout line, once the turn has ended.
    fn turn(
        &self,
        label: &str,
        command: &Path,
        record: Option<&Path>,
        steps: Vec<Step>,
    ) -> Result<Vec<Value>, String> {
        let lines = self.supervise(command, steps, StopWhen::Never)?.lines;
        if let Some(dir) = record {
            if let Err(e) = crate::conformance::record(dir, label, &self.scratch.0, &lines) {
                tracing::warn!("recording the {label} scenario: {e}");
            }
        }
        Ok(lines)
    }

    fn requests(&self) -> Vec<Value> {
        self.mock
            .requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }
}

/// `git init` with one commit, as a Job's worktree has.
fn init_repo(dir: &Path) -> Result<(), git2::Error> {
    let repo = git2::Repository::init(dir)?;
    let sig = git2::Signature::now("owl conformance", "owl@example.com")?;
    let tree = repo.treebuilder(None)?.write()?;
    let tree = repo.find_tree(tree)?;
    repo.commit(Some("HEAD"), &sig, &sig, "start", &tree, &[])?;
    Ok(())
}

fn parse(line: &Value) -> Option<AgentEvent> {
    Codex.parse_line(line.to_string().as_bytes()).ok()
}

fn thread_id(lines: &[Value]) -> Option<String> {
    lines.iter().find_map(|l| match parse(l) {
        Some(AgentEvent::Init {
            session_id: Some(id),
            ..
        }) => Some(id),
        _ => None,
    })
}

/// A turn with a text answer at known figures: the thread named first, a result the
/// Driver reads, owl's words in the request, and the figures in the thread's rollout file.
fn turn(command: &Path, record: Option<&Path>) -> Vec<Check> {
    const INIT: &str = "the stream starts with thread.started and a thread id";
    const RESULT: &str = "turn.completed reads as success with its token counts";
    const PROMPT: &str = "owl's standing instructions reach the request";
    const ROLLOUT: &str = "the rollout file, found by thread id, carries the plan's windows";
    let bench = match Bench::new("turn", false) {
        Ok(b) => b,
        Err(why) => return vec![Check::failed(INIT, why)],
    };
    let steps = vec![Step::Text("Hello.".into()).at(42.5, 13.0)];
    let lines = match bench.turn("turn", command, record, steps) {
        Ok(lines) => lines,
        Err(why) => return vec![Check::failed(INIT, why)],
    };
    let id = thread_id(&lines);
    let init = match (lines.first(), &id) {
        (Some(l), Some(id)) if l["type"] == "thread.started" => {
            Check::new(INIT, true, format!("thread {id}"))
        }
        (Some(l), _) => Check::failed(INIT, crate::text::truncate(&l.to_string(), 160)),
        (None, _) => Check::failed(INIT, "no output"),
    };
    let result = match lines.iter().rev().find_map(|l| match parse(l) {
        Some(AgentEvent::Result(r)) => Some(r),
        _ => None,
    }) {
        Some(r) => Check::new(
            RESULT,
            !r.is_error && r.input_tokens.is_some() && r.output_tokens.is_some(),
            format!(
                "{}, tokens {}/{}",
                r.subtype,
                words::or_none(r.input_tokens),
                words::or_none(r.output_tokens)
            ),
        ),
        None => Check::failed(RESULT, format!("no turn end within {}s", TURN.as_secs())),
    };
    let requests = bench.requests();
    let prompt = Check::new(
        PROMPT,
        requests.iter().any(|r| r.to_string().contains(MARKER)),
        format!("{} request(s) to the model", requests.len()),
    );
    vec![
        init,
        result,
        prompt,
        rollout(&bench, id.as_deref(), ROLLOUT),
    ]
}

fn rollout(bench: &Bench, thread: Option<&str>, name: &'static str) -> Check {
    let Some(log) = thread.and_then(|id| Codex.session_log(&bench.account, id)) else {
        return Check::failed(name, "no thread id to find it by");
    };
    let Some(path) = log.find() else {
        return Check::failed(
            name,
            format!("no rollout-*{} under {}", log.name_ends, log.root.display()),
        );
    };
    let text = std::fs::read(&path).unwrap_or_default();
    let figures: Vec<(String, f64)> = text
        .split(|b| *b == b'\n')
        .flat_map(|line| (log.parse)(line))
        .filter_map(|e| match e {
            AgentEvent::Usage { windows, .. } => Some(windows),
            _ => None,
        })
        .flatten()
        .map(|w| (w.window, w.percent))
        .collect();
    let want = [
        ("five_hour".to_string(), 42.5),
        ("seven_day".to_string(), 13.0),
    ];
    Check::new(
        name,
        figures.ends_with(&want),
        format!(
            "{} in {}",
            figures
                .iter()
                .map(|(w, p)| format!("{w} {}%", crate::text::fmt_percent(*p)))
                .collect::<Vec<_>>()
                .join(", "),
            path.display()
        ),
    )
}

/// The sandbox owl asks for is strict and still lets the Run commit: the worktree and its
/// git directory writable, nothing else.
fn commit(command: &Path, record: Option<&Path>) -> Vec<Check> {
    const NAME: &str = "the sandbox owl asks for lets a commit land";
    const OUTSIDE: &str = "a write outside the worktree is refused, and the rollout says so";
    let bench = match Bench::new("commit", false) {
        Ok(b) => b,
        Err(why) => return vec![Check::failed(NAME, why)],
    };
    // Not under the temp dir, which `workspace-write` leaves writable: where the recording
    // saw the refusal.
    let outside = PathBuf::from(format!("/usr/owl-conformance-{}", std::process::id()));
    let steps = vec![
        Step::Shell(
            "echo hi > conformance.txt && git add conformance.txt && git commit -m conformance"
                .into(),
        ),
        Step::Shell(format!("touch {}", outside.display())),
        Step::Text("Done.".into()),
    ];
    let lines = match bench.turn("commit", command, record, steps) {
        Ok(lines) => lines,
        Err(why) => return vec![Check::failed(NAME, why)],
    };
    let head = git2::Repository::open(bench.repo()).and_then(|r| {
        let commit = r.head()?.peel_to_commit()?;
        Ok(commit.summary().unwrap_or("").to_string())
    });
    let committed = match head {
        Ok(summary) => Check::new(
            NAME,
            summary == "conformance",
            format!("HEAD is '{summary}'"),
        ),
        Err(e) => Check::failed(NAME, format!("reading HEAD: {e}")),
    };
    let denials: Vec<String> = thread_id(&lines)
        .and_then(|id| Codex.session_log(&bench.account, &id))
        .and_then(|log| Some((log.find()?, log.parse)))
        .map(|(path, parse)| {
            std::fs::read(path)
                .unwrap_or_default()
                .split(|b| *b == b'\n')
                .flat_map(parse)
                .filter_map(|e| match e {
                    AgentEvent::ToolResult {
                        denied: Some(d), ..
                    } => Some(d.detail),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let written = outside.exists();
    if written {
        let _ = std::fs::remove_file(&outside);
    }
    let refused = Check::new(
        OUTSIDE,
        !written && denials.len() == 1,
        if denials.is_empty() {
            format!("no denial; the file was written: {written}")
        } else {
            denials.join("; ")
        },
    );
    vec![committed, refused]
}

/// A usage-limit 429 ends the turn at once; the Driver reads a rate limit and its reset.
fn usage_limit(command: &Path, record: Option<&Path>) -> Vec<Check> {
    const NAME: &str = "a usage-limit 429 reads as a rate limit with the reset it names";
    let bench = match Bench::new("usage-limit", false) {
        Ok(b) => b,
        Err(why) => return vec![Check::failed(NAME, why)],
    };
    let lines = match bench.turn(
        "usage-limit",
        command,
        record,
        vec![Step::UsageLimit { secs: 7200 }],
    ) {
        Ok(lines) => lines,
        Err(why) => return vec![Check::failed(NAME, why)],
    };
    let Some(result) = lines.iter().rev().find_map(|l| match parse(l) {
        Some(AgentEvent::Result(r)) => Some(r),
        _ => None,
    }) else {
        return vec![Check::failed(NAME, "no turn.failed")];
    };
    let now = chrono::Utc::now();
    let failure = Codex.failure(&result, None, false);
    let reset = Codex.named_reset(&result, now);
    // The words name a minute of the local clock: within a few minutes of two hours on.
    let ahead = reset.map(|r| (r - now).num_seconds());
    vec![Check::new(
        NAME,
        failure == Some(AgentFailure::RateLimited)
            && ahead.is_some_and(|s| (7200 - 300..=7200 + 300).contains(&s)),
        format!(
            "read as {}, reset in {} s",
            words::failure(failure),
            words::or_none(ahead)
        ),
    )]
}

/// owl's stop (SIGINT to the CLI's group) aborts the turn: codex exits 1 at once. Its tool
/// is killed too, mostly; when SIGINT comes right after the tool started, 0.171.0 was seen
/// to leave it running (reparented, in its own session), which owl's sweep of a Run's
/// leftovers catches.
fn sigint(command: &Path, _record: Option<&Path>) -> Vec<Check> {
    const NAME: &str = "SIGINT aborts the turn and codex exits 1";
    let bench = match Bench::new("sigint", false) {
        Ok(b) => b,
        Err(why) => return vec![Check::failed(NAME, why)],
    };
    // A number no other process has in its command line.
    let tool = format!("sleep {}", 600 + std::process::id() % 1000);
    let alive = |needle: &str| {
        crate::sys::all_pids()
            .into_iter()
            .any(|pid| crate::sys::cmdline(pid).contains(needle))
    };
    // The tool runs in a session of its own: owl stops the Run once it is there.
    let tool_running = || alive(&tool);
    let run = bench.supervise(
        command,
        vec![Step::Shell(tool.clone())],
        StopWhen::Once(&tool_running),
    );
    // Killed is not yet gone from the process table: give it a moment.
    let deadline = std::time::Instant::now() + SIGINT_EXIT;
    while alive(&tool) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<i32> = crate::sys::all_pids()
        .into_iter()
        .filter(|pid| crate::sys::cmdline(*pid).contains(&tool))
        .collect();
    for pid in &left {
        let _ = crate::sys::signal_pid(*pid, crate::sys::Sig::KILL);
    }
    let run = match run {
        Ok(run) => run,
        Err(why) => return vec![Check::failed(NAME, why)],
    };
    let Some(asked) = run.stopped else {
        return vec![Check::failed(NAME, "the tool never started")];
    };
    let took = run.ended.saturating_duration_since(asked);
    vec![Check::new(
        NAME,
        run.report.exit.code == Some(1) && took <= SIGINT_EXIT,
        format!(
            "exit {} within {} ms; the tool {}",
            words::or_none(run.report.exit.code),
            took.as_millis(),
            if left.is_empty() {
                "was killed with it".to_string()
            } else {
                format!(
                    "was left running ({} processes, killed by the check)",
                    left.len()
                )
            }
        ),
    )]
}

/// `codex app-server` reads a ChatGPT plan's windows without a turn, and refuses an API key.
fn probe(command: &Path, _record: Option<&Path>) -> Vec<Check> {
    const PLAN: &str = "app-server reads a ChatGPT plan's windows without a model turn";
    const KEY: &str = "app-server says an API key has no plan";
    let ask = |chatgpt: bool| -> Result<(Option<Usage>, usize), String> {
        let bench = Bench::new(if chatgpt { "probe-plan" } else { "probe-key" }, chatgpt)?;
        let local = crate::supervise::LocalExecutor {
            state_dir: bench.scratch.0.clone(),
        };
        // owl's own probe; with an API key (for which owl never probes) its app-server
        // all the same: the answer is why owl does not.
        let invocation = crate::driver::codex::app_server(command, &bench.account);
        let outcome =
            crate::supervise::probe::probe_with(&local, &Codex, &invocation, &bench.scratch.0);
        let usage = match outcome {
            ProbeOutcome::Observed(w) => Some(Usage::Windows(w)),
            ProbeOutcome::NoPlan => Some(Usage::NoPlan),
            ProbeOutcome::Unknown => Some(Usage::Unknown),
            ProbeOutcome::Failed(why) | ProbeOutcome::Unreachable(why) => return Err(why),
        };
        Ok((usage, bench.mock.calls()))
    };
    let plan = match ask(true) {
        Ok((Some(Usage::Windows(w)), 0)) => {
            let five = w.iter().find(|w| w.window == "five_hour");
            Check::new(
                PLAN,
                five.is_some_and(|w| w.percent == 42.0 && w.resets_at.is_some()),
                words::windows(&w),
            )
        }
        Ok((usage, turns)) => Check::failed(
            PLAN,
            format!("{}, {turns} model request(s)", words::usage(usage.as_ref())),
        ),
        Err(why) => Check::failed(PLAN, why),
    };
    let key = match ask(false) {
        Ok((usage, _)) => Check::new(
            KEY,
            usage == Some(Usage::NoPlan),
            words::usage(usage.as_ref()),
        ),
        Err(why) => Check::failed(KEY, why),
    };
    vec![plan, key]
}
/// owl supervises a Run of the CLI to its result and exit, following its rollout file for
/// the plan's figures, and judges it succeeded.
fn supervised_turn(command: &Path, _record: Option<&Path>) -> Vec<Check> {
    const NAME: &str =
        "owl supervises a turn to its result and exit, its rollout followed for the figures";
    let bench = match Bench::new("supervised-turn", false) {
        Ok(b) => b,
        Err(why) => return vec![Check::failed(NAME, why)],
    };
    let run = match bench.supervise(
        command,
        vec![Step::Text("Hello.".into()).at(42.5, 13.0)],
        StopWhen::Never,
    ) {
        Ok(run) => run,
        Err(why) => return vec![Check::failed(NAME, why)],
    };
    let figure = run.events.iter().find_map(|e| match e {
        AgentEvent::Usage { windows, .. } => windows
            .iter()
            .find(|w| (w.percent - 42.5).abs() < 0.5)
            .map(|w| w.window.clone()),
        _ => None,
    });
    let ok = run.report.result.is_some()
        && run.report.exit.code == Some(0)
        && figure.is_some()
        && run.classified.outcome == crate::model::RunOutcome::Succeeded;
    vec![Check::new(
        NAME,
        ok,
        format!(
            "{} events, the rollout's figure: {}, {}, judged {}",
            run.events.len(),
            figure.as_deref().unwrap_or("none"),
            run.report.exit,
            run.classified.outcome
        ),
    )]
}

/// Configuration an agent can write, planted in the credential store's `config.toml` and
/// in the project's `.codex/config.toml` (a notify command and an MCP server that leave a
/// mark each), is not obeyed by a Run started as owl starts one. A version that reads the
/// store's file despite `--ignore-user-config`, or a project's untrusted one, fails here.
fn planted(command: &Path, record: Option<&Path>) -> Vec<Check> {
    const OBEYS: &str = "configuration the agent can write is not obeyed";
    let bench = match Bench::new("planted", false) {
        Ok(b) => b,
        Err(why) => return vec![Check::failed(OBEYS, why)],
    };
    if let Err(e) = plant(&bench.scratch.0) {
        return vec![Check::failed(
            OBEYS,
            format!("planting the configuration: {e}"),
        )];
    }
    let steps = vec![Step::Text("Done.".into())];
    if let Err(why) = bench.turn("planted", command, record, steps) {
        return vec![Check::failed(OBEYS, why)];
    }
    let marks = crate::conformance::marks_left(&bench.scratch.0);
    let calls = bench.mock.calls();
    vec![Check::new(
        OBEYS,
        marks.is_empty() && calls > 0,
        if marks.is_empty() {
            format!("nothing planted ran; {calls} request(s) to the Account's endpoint")
        } else {
            format!("ran: {}", marks.join(", "))
        },
    )]
}

/// Appends a notify command and an MCP server to the store's `config.toml` and writes the
/// same in the project's `.codex/config.toml`; each leaves a mark under `dir/marks/`.
fn plant(dir: &Path) -> std::io::Result<()> {
    crate::conformance::make_in_scratch(dir, &["marks", "repo/.codex"])?;
    let config = |from: &str| {
        let mark = |what: &str| {
            let path = dir.join("marks").join(format!("{from}-{what}"));
            serde_json::Value::String(format!("touch '{}'", path.display())).to_string()
        };
        (
            format!("notify = [\"sh\", \"-c\", {}]\n", mark("notify")),
            format!(
                "[mcp_servers.planted]\ncommand = \"sh\"\nargs = [\"-c\", {}]\n",
                mark("mcp-server")
            ),
        )
    };
    let store = dir.join("codex-home/config.toml");
    let (top, table) = config("store");
    let kept = std::fs::read_to_string(&store)?;
    std::fs::write(&store, format!("{top}{kept}\n{table}"))?;
    let (top, table) = config("project");
    std::fs::write(
        dir.join("repo/.codex/config.toml"),
        format!("{top}\n{table}"),
    )
}
