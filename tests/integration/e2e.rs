//! End to end against the real Claude Code CLI: a real `owl tick` drives the real binary
//! (found through `OWL_E2E_CLAUDE`), which talks to the loopback mock of the Messages API.
//! They are `#[ignore]`d in a plain `cargo test`; `.ci/run` installs the CLI and runs them
//! with `--include-ignored`, so in CI a missing CLI fails.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use predicates::prelude::*;
use serde_json::{json, Value};

use crate::support::{assert_idle_without_runs, git, TestEnv};
use owl::mock::api::{MockApi, Reply};

/// The real CLI; a test that was asked to run without it fails. Every test here is
/// `#[ignore]`d in a plain `cargo test`, since it needs the CLI: `.ci/run` installs it and
/// runs them with `--include-ignored`, so a test that did not run is counted as ignored,
/// never as passed.
pub fn real_claude() -> PathBuf {
    match std::env::var_os("OWL_E2E_CLAUDE").map(PathBuf::from) {
        Some(path) if path.is_file() => path,
        other => panic!(
            "OWL_E2E_CLAUDE ({other:?}) names no file: install the CLI with \
             `npm install --prefix target/claude-code-2.1.197 @anthropic-ai/claude-code@2.1.197` and set \
             OWL_E2E_CLAUDE=$PWD/target/claude-code-2.1.197/node_modules/.bin/claude (`bash .ci/run` does both)"
        ),
    }
}

pub struct E2e {
    pub env: TestEnv,
    pub mock: MockApi,
}

/// A test env whose Account `work` is the real CLI on a fake plan login pointed at the mock.
pub fn e2e(limits: &str) -> E2e {
    e2e_with_login(limits, true)
}

/// Like [`e2e`]; `logged_in: false` leaves the Account's credential store empty and gives
/// it no token, as on a fresh install before `/login`.
fn e2e_with_login(limits: &str, logged_in: bool) -> E2e {
    let claude = real_claude();
    let mut env = TestEnv::new();
    env.now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let mock = MockApi::start().unwrap();
    let home = env.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let config = format!(
        r#"stateDir: {state}
graceWindow: 2s
usagePollInterval: 200ms
drivers:
  claude-code:
    command: {claude}
defaults:
  allowedTools: [Read, Write, Edit, "Bash(git add:*)", "Bash(git commit:*)", "Bash(sleep:*)", "Bash(tail:*)", "Bash(sh build.sh)"]
accounts:
  work:
    credentialStore: {creds}
    env:
{env}{limits}"#,
        state = env.state.display(),
        claude = claude.display(),
        creds = env.dir.path().join("claude-config").display(),
        env = fake_login_env(&mock.base_url()),
    );
    let config = if logged_in {
        config
    } else {
        config
            .lines()
            .filter(|l| {
                !l.contains("CLAUDE_CODE_OAUTH_") && !l.contains("CLAUDE_CODE_SUBSCRIPTION_TYPE")
            })
            .map(|l| format!("{l}\n"))
            .collect()
    };
    std::fs::write(&env.config, config).unwrap();
    if !logged_in {
        // A store the CLI has been started in, never logged in, with a settings file: owl
        // takes a store without `.credentials.json` for no login without asking the CLI,
        // unless a settings file could log in otherwise; so here the CLI itself is asked.
        let creds = env.dir.path().join("claude-config");
        std::fs::create_dir_all(&creds).unwrap();
        std::fs::write(creds.join(".claude.json"), "{}\n").unwrap();
        std::fs::write(creds.join("settings.json"), "{}\n").unwrap();
    }
    E2e { env, mock }
}

/// An Account's `env:` lines (indented under it) for the real CLI on a fake plan login at
/// the mock at `base`, with the git identity its commits take.
pub fn fake_login_env(base: &str) -> String {
    format!(
        r#"      CLAUDE_CODE_OAUTH_TOKEN: sk-ant-oat01-FAKE-owl-e2e-FAKE
      CLAUDE_CODE_OAUTH_SCOPES: "user:inference user:profile"
      CLAUDE_CODE_SUBSCRIPTION_TYPE: max
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1"
      ANTHROPIC_BASE_URL: {base}
      CLAUDE_CODE_MAX_RETRIES: "1"
      GIT_AUTHOR_NAME: Claude
      GIT_AUTHOR_EMAIL: claude@example.com
      GIT_COMMITTER_NAME: Claude
      GIT_COMMITTER_EMAIL: claude@example.com
"#
    )
}

pub fn worktree(env: &TestEnv, id: &str) -> PathBuf {
    env.state.join("worktrees").join(id)
}

fn epoch_in(secs: i64) -> i64 {
    chrono::Utc::now().timestamp() + secs
}

fn rfc3339(epoch: i64) -> String {
    chrono::DateTime::from_timestamp(epoch, 0)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[test]
#[ignore = "needs the real Claude Code CLI"]
fn e2e_a_job_done_in_one_run_commits_on_its_branch() {
    let E2e { env, mock } = e2e("");
    let id = env.add("Add src/hello.rs, hand off, and commit.");
    let wt = worktree(&env, &id);
    mock.script(vec![
        Reply::tool("Write", json!({"file_path": wt.join("src/hello.rs"), "content": "pub fn hello() -> &'static str {\n    \"hello\"\n}\n"})),
        Reply::tool("Write", json!({"file_path": wt.join(".owl/handoff.md"), "content": "status: done\n\nAdded src/hello.rs.\n"})),
        Reply::tool("Bash", json!({"command": "git add src/hello.rs .owl/handoff.md && git commit -m 'Add hello'", "description": "Commit the work"})),
        Reply::text("Done: src/hello.rs is committed."),
    ]);
    let tick = env.tick();
    assert_eq!(tick["outcome"], "succeeded", "{tick}");
    assert_eq!(tick["job_state"], "done");
    assert_eq!(mock.calls(), 4);

    let branch = format!("owl/{id}");
    assert_eq!(
        git(&env.repo, &["log", "-1", "--format=%s", &branch]).trim(),
        "Add hello"
    );
    assert!(git(&env.repo, &["show", &format!("{branch}:src/hello.rs")]).contains("\"hello\""));
    let run = &env.show(&id)["runs"][0];
    let session = run["session_id"].as_str().unwrap();
    assert_eq!(session.len(), 36, "a real session id: {session}");
    assert!(run["cost_usd"].as_f64().unwrap() > 0.0, "{run}");
    assert!(run["agent_version"].as_str().unwrap().starts_with("2.1."));
    assert!(run["permission_denials"].as_array().unwrap().is_empty());
    // The prompt went in on stdin; the mock saw it in the first request.
    let first = mock.requests.lock().unwrap()[0].to_string();
    assert!(first.contains("Add src/hello.rs, hand off, and commit."));
    assert!(
        first.contains("You are running unattended under owl"),
        "the standing instructions reach the model"
    );
}

#[test]
#[ignore = "needs the real Claude Code CLI"]
fn e2e_utilization_climbing_past_the_ceiling_stops_the_run() {
    let E2e { env, mock } = e2e("    limits: {fiveHourMax: 60}\n");
    let id = env.add("Read the README twice, then wait.");
    let wt = worktree(&env, &id);
    let reset = epoch_in(2 * 3600);
    mock.script(vec![
        Reply::tool("Read", json!({"file_path": wt.join("README.md")}))
            .with_five_hour("allowed", 0.40, reset),
        Reply::tool("Read", json!({"file_path": wt.join("README.md")}))
            .with_five_hour("allowed", 0.55, reset),
        // A tool that runs until it is stopped. Not a standalone `sleep`: 2.1.332 refuses
        // one longer than a few seconds ("Blocked: standalone sleep 30").
        Reply::tool(
            "Bash",
            json!({"command": "tail -s 600 -f README.md", "description": "Wait"}),
        )
        .with_five_hour("allowed", 0.70, reset),
    ]);
    let started = Instant::now();
    let tick = env.tick();
    assert!(
        started.elapsed() < Duration::from_secs(300),
        "owl let the endless tool call run: {:?}",
        started.elapsed()
    );
    assert_eq!(tick["outcome"], "interrupted", "{tick}");
    let reason = tick["stop_reason"].as_str().unwrap();
    assert!(reason.starts_with("ceiling: five_hour"), "{reason}");
    assert!(reason.ends_with(">= fiveHourMax 60"), "{reason}");
    assert_eq!(tick["job_state"], "waiting");
    assert_eq!(env.show(&id)["not_before"], rfc3339(reset));
    let status = env.status();
    let five = crate::support::window(&status, "work", "five_hour");
    assert!(five["percent"].as_f64().unwrap() >= 60.0, "{five}");
    assert_eq!(status["accounts"][0]["schedulable"], false);
    // The probe before the Run asked the real CLI without spending a call.
    assert!(status["accounts"][0]["last_probe"].is_string());
    assert_eq!(mock.calls(), 3);
}

#[test]
#[ignore = "needs the real Claude Code CLI"]
fn e2e_a_429_rejection_is_rate_limited_until_the_reset() {
    let E2e { env, mock } = e2e("");
    let id = env.add("Say hello.");
    let reset = epoch_in(3 * 3600);
    mock.script(vec![Reply::rejected(reset)]);
    let tick = env.tick();
    assert_eq!(tick["outcome"], "rate_limited", "{tick}");
    assert_eq!(tick["job_state"], "waiting");
    assert_eq!(env.show(&id)["not_before"], rfc3339(reset));
    assert_eq!(
        mock.calls(),
        1,
        "a plan login is not retried on a rejection"
    );
}

#[test]
#[ignore = "needs the real Claude Code CLI"]
fn e2e_a_tool_outside_allowed_tools_is_denied_and_shown() {
    let E2e { env, mock } = e2e("");
    let id = env.add("Fetch a page.");
    mock.script(vec![
        Reply::tool(
            "Bash",
            json!({"command": "curl -s http://127.0.0.1:9/", "description": "Fetch"}),
        ),
        Reply::text("I could not fetch it."),
    ]);
    let tick = env.tick();
    assert_eq!(tick["outcome"], "succeeded", "{tick}");
    let run = &env.show(&id)["runs"][0];
    let denial = &run["permission_denials"][0];
    assert_eq!(denial["tool_name"], "Bash");
    assert!(
        denial["detail"].as_str().unwrap().starts_with("curl -s"),
        "{denial}"
    );
    env.owl()
        .args(["show", &id])
        .assert()
        .success()
        .stdout(predicate::str::contains("denied tools (1)"))
        .stdout(predicate::str::contains(
            "- Bash curl -s http://127.0.0.1:9/",
        ));
}

/// Live processes carrying this state dir's Run marker.
/// Waits (bounded) until a process of the Run runs a command line holding `needle`.
pub fn wait_for_marked(env: &TestEnv, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !marked_processes(env)
        .iter()
        .any(|(_, cmd)| cmd.contains(needle))
    {
        assert!(
            Instant::now() < deadline,
            "the tool never started: {:?}",
            marked_processes(env)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn marked_processes(env: &TestEnv) -> Vec<(i32, String)> {
    let needle = format!("OWL_STATE_DIR={}", env.state.display());
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| crate::support::alive(*pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == needle.as_bytes()))
        })
        .map(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            (pid, String::from_utf8_lossy(&cmd).replace('\0', " "))
        })
        .collect()
}

#[test]
#[ignore = "needs the real Claude Code CLI"]
fn e2e_sigterm_while_the_bash_tool_sleeps_leaves_nothing_behind() {
    let E2e { env, mock } = e2e("");
    let id = env.add("Wait a long time.");
    // Runs until it is killed (2.1.332 refuses a standalone `sleep 600`).
    mock.script(vec![Reply::tool(
        "Bash",
        json!({"command": "tail -s 600 -f README.md", "description": "Wait"}),
    )]);
    let owl = env
        .owl_std()
        .args(["tick", "--json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_marked(&env, "tail -s 600");
    unsafe { libc::kill(owl.id() as i32, libc::SIGTERM) };
    let out = owl.wait_with_output().unwrap();
    let tick: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tick["outcome"], "interrupted", "{tick}");
    assert_eq!(tick["stop_reason"], "owl received SIGTERM");
    let left = marked_processes(&env);
    assert!(left.is_empty(), "processes outlived the Run: {left:?}");
    assert_eq!(env.show(&id)["state"], "queued");
}

#[test]
#[ignore = "needs the real Claude Code CLI"]
fn e2e_an_account_with_no_login_costs_the_job_nothing() {
    // No ceiling, so nothing probes: the CLI's own `auth status` says there is no login,
    // and no Run starts at all.
    let E2e { env, mock } = e2e_with_login("", false);
    let id = env.add_with(&["--max-runs", "1"], "Say hello.");
    let tick = env.tick();
    assert_eq!(tick["action"], "idle", "{tick}");
    assert!(
        tick["reason"]
            .as_str()
            .unwrap()
            .contains("not logged in (the CLI's auth status: authMethod none)"),
        "{tick}"
    );
    assert_eq!(tick["job_state"], Value::Null);
    let show = env.show(&id);
    assert_eq!(show["state"], "queued");
    assert!(show["runs"].as_array().unwrap().is_empty(), "{show}");
    assert_eq!(mock.calls(), 0, "auth status makes no API call");

    // The Account is not scheduled, and status names the fix.
    let status = env.status();
    assert_eq!(status["accounts"][0]["schedulable"], false);
    let creds = env.dir.path().join("claude-config");
    let fix = format!(
        "log in with `CLAUDE_CONFIG_DIR={} claude`, then /login",
        creds.display()
    );
    assert!(
        status["accounts"][0]["reason"]
            .as_str()
            .unwrap()
            .contains(&fix),
        "{status}"
    );
    for _ in 0..3 {
        assert_eq!(env.tick()["action"], "idle");
    }
    assert!(env.show(&id)["runs"].as_array().unwrap().is_empty());
    assert_eq!(env.show(&id)["state"], "queued");
    env.owl()
        .arg("doctor")
        .assert()
        .code(1)
        .stdout(predicate::str::contains("account work: not logged in"));
}

#[test]
#[ignore = "needs the real Claude Code CLI"]
fn e2e_with_a_ceiling_the_probe_finds_no_login_before_any_run() {
    let E2e { env, mock } = e2e_with_login("    limits: {fiveHourMax: 60}\n", false);
    let id = env.add("Say hello.");
    assert_idle_without_runs(&env, &env.tick(), &id, "not logged in");
    assert_eq!(mock.calls(), 0);
}

/// Issue 23: the real CLI's probe answers as if all were well when its API cannot be
/// reached (`rate_limits: null`, as before any response): owl finds the API unreachable
/// itself, backs the Account off, and starts no Run.
#[test]
#[ignore = "needs the real Claude Code CLI"]
fn e2e_a_probe_with_the_api_unreachable_backs_off_and_spends_no_run() {
    let E2e { env, mock } = e2e("    limits: {fiveHourMax: 60}\n");
    let port = crate::support::closed_port();
    let config = std::fs::read_to_string(&env.config)
        .unwrap()
        .replace(&mock.base_url(), &format!("http://127.0.0.1:{port}"));
    std::fs::write(&env.config, config).unwrap();
    let id = env.add("Say hello.");
    let tick = env.tick();
    assert_eq!(tick["action"], "idle", "{tick}");
    assert!(env.show(&id)["runs"].as_array().unwrap().is_empty());
    let account = &env.status()["accounts"][0];
    assert_eq!(account["outages"], 1, "{account}");
    assert!(account["backoff_until"].is_string(), "{account}");
    assert!(
        account["last_probe"]
            .as_str()
            .unwrap()
            .starts_with("the API is unreachable: connecting to 127.0.0.1:"),
        "{account}"
    );
    assert_eq!(mock.calls(), 0);
}

#[test]
#[ignore = "needs the real Claude Code CLI"]
fn e2e_a_turn_that_leaves_a_background_task_succeeds_with_exactly_its_calls() {
    let E2e { env, mock } = e2e("");
    let id = env.add("Start a background wait, hand off, commit.");
    let wt = worktree(&env, &id);
    mock.script(vec![
        Reply::tool(
            "Bash",
            json!({"command": "sleep 120", "description": "Wait in the background", "run_in_background": true}),
        ),
        Reply::tool("Write", json!({"file_path": wt.join(".owl/handoff.md"), "content": "status: done\n\nStarted a wait.\n"})),
        Reply::tool("Bash", json!({"command": "git add .owl/handoff.md && git commit -m 'Hand off'", "description": "Commit"})),
        Reply::text("Done."),
    ]);
    let tick = env.tick();
    assert_eq!(tick["outcome"], "succeeded", "{tick}");
    assert_eq!(tick["job_state"], "done");
    assert_eq!(mock.calls(), 4, "no unsupervised turn after the result");
    let left = marked_processes(&env);
    assert!(left.is_empty(), "processes outlived the Run: {left:?}");
}

#[test]
#[ignore = "needs the real Claude Code CLI"]
fn e2e_a_ceiling_stop_as_a_background_task_starts_is_followed_by_no_request() {
    let E2e { env, mock } = e2e("    limits: {fiveHourMax: 60}\n");
    let id = env.add("Start a background wait.");
    let reset = epoch_in(2 * 3600);
    mock.script(vec![
        // The warning carries the crossing figure on the same response as the tool call.
        // As the plan sends it: with the threshold passed, without which 2.1.197 words the
        // event `allowed` with no figure (PROTOCOL §4.4), and only a poll that happened to
        // fall inside the background tool's few milliseconds could stop the Run in time.
        Reply::tool(
            "Bash",
            json!({"command": "sleep 120", "description": "Wait in the background", "run_in_background": true}),
        )
        .with_five_hour("allowed_warning", 0.70, reset)
        .with_five_hour_warning(0.5),
        Reply::text("Still here."),
        Reply::text("Still here."),
    ]);
    let tick = env.tick();
    assert_eq!(tick["outcome"], "interrupted", "{tick}");
    assert!(tick["stop_reason"]
        .as_str()
        .unwrap()
        .starts_with("ceiling: five_hour"));
    assert_eq!(mock.calls(), 1, "an API request after the stop");
    let left = marked_processes(&env);
    assert!(left.is_empty(), "processes outlived the Run: {left:?}");
    assert_eq!(env.show(&id)["state"], "waiting");
}

/// The mock's plan: each response's five-hour figure a step higher, every Window's figure
/// in the headers (2.1.332 puts them on every `rate_limit_event`).
fn climbing(steps: &[f64], reset: i64, last: Reply) -> Vec<Reply> {
    let tool = |i: usize| {
        Reply::tool(
            "Bash",
            // Response 1's tool runs until it is stopped; the others end at once.
            json!({"command": if i == 1 { "tail -s 600 -f README.md" } else { "tail -n 1 README.md" }, "description": "Wait"}),
        )
    };
    let mut replies: Vec<Reply> = steps
        .iter()
        .enumerate()
        .map(|(i, p)| tool(i).with_five_hour("allowed", *p, reset))
        .collect();
    replies.push(last);
    replies
}

/// Whether the CLI under test puts every Window's figure on every event (2.1.332 on).
fn reports_every_window() -> bool {
    let out = std::process::Command::new(real_claude())
        .arg("--version")
        .env("DISABLE_AUTOUPDATER", "1")
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&out.stdout);
    let v: Vec<u64> = version
        .split_whitespace()
        .next()
        .unwrap_or("")
        .split('.')
        .map(|p| p.parse().unwrap_or(0))
        .collect();
    v >= vec![2, 1, 332]
}

#[test]
#[ignore = "needs the real Claude Code CLI"]
fn e2e_a_run_is_stopped_at_the_event_that_crossed_with_at_most_one_request_after() {
    let E2e { env, mock } = e2e("    limits: {fiveHourMax: 50}\n");
    let every = reports_every_window();
    if every {
        // The stream alone must stop it: no poll comes in time.
        let config = std::fs::read_to_string(&env.config).unwrap();
        std::fs::write(
            &env.config,
            config.replace("usagePollInterval: 200ms", "usagePollInterval: 1h"),
        )
        .unwrap();
    }
    let reset = epoch_in(3 * 3600);
    // 42%, then 55% on the response whose tool runs for 600 s.
    mock.script(climbing(
        &[0.42, 0.55, 0.6, 0.7],
        reset,
        Reply::text("Done."),
    ));
    let id = env.add("Climb.");
    let tick = env.tick();
    assert_eq!(tick["outcome"], "interrupted", "{tick}");
    assert_eq!(
        tick["stop_reason"],
        "ceiling: five_hour 55% >= fiveHourMax 50"
    );
    let status = env.status();
    let five = crate::support::window(&status, "work", "five_hour");
    assert_eq!(five["percent"], 55.0);
    let show = env.show(&id);
    assert_eq!(show["not_before"], rfc3339(reset));
    if every {
        assert_eq!(five["source"], "rate_limit_event", "{status}");
        // The crossing came with response 2 of 2 sent: at most one more may follow.
        assert!(mock.calls() <= 3, "{} requests", mock.calls());
    } else {
        // 2.1.197 carries no figure on an allowed event: a poll stopped it.
        assert_eq!(five["source"], "get_usage", "{status}");
    }
}

#[test]
#[ignore = "needs the real Claude Code CLI"]
fn e2e_the_first_response_billed_to_credits_stops_the_run() {
    // No ceiling at all: credits are refused whatever the ceilings say.
    let E2e { env, mock } = e2e("");
    let reset = epoch_in(2 * 3600);
    let long = Reply::tool(
        "Bash",
        json!({"command": "tail -s 600 -f README.md", "description": "Wait"}),
    );
    // Status allowed, 50%, and yet billed to usage credits (`overageInUse`).
    mock.script(vec![
        long.with_five_hour("allowed", 0.5, reset).on_credits(),
        Reply::text("Done."),
    ]);
    let id = env.add("On credits.");
    let tick = env.tick();
    assert_eq!(tick["outcome"], "interrupted", "{tick}");
    assert!(
        tick["stop_reason"]
            .as_str()
            .unwrap()
            .starts_with("extra usage: five_hour"),
        "{tick}"
    );
    assert_eq!(mock.calls(), 1, "no request after the first billed one");
    let show = env.show(&id);
    assert_eq!(show["runs"][0]["stop"], "extra_usage");
    assert_eq!(show["runs"][0]["counts"], false);
    assert_eq!(show["not_before"], rfc3339(reset));
    let status = env.status();
    assert_eq!(status["accounts"][0]["schedulable"], false, "{status}");
    env.add("Next.");
    assert_eq!(env.tick()["action"], "idle");
    assert_eq!(mock.calls(), 1);
}

#[test]
#[ignore = "needs the real Claude Code CLI"]
fn e2e_a_full_model_week_holds_the_account_while_its_week_reads_30() {
    let E2e { env, mock } = e2e("    limits: {fiveHourMax: 60, weeklyMax: 50}\n");
    let reset = epoch_in(3 * 3600);
    let week = epoch_in(2 * 86_400);
    // 2.1.197 cannot see the Window, so nothing stops its tool: it ends by itself there.
    let every = reports_every_window();
    let command = if every {
        "tail -s 600 -f README.md"
    } else {
        "tail -n 1 README.md"
    };
    mock.script(vec![
        Reply::tool("Bash", json!({"command": command, "description": "Wait"}))
            .with_plan("allowed", 0.2, 0.3, reset)
            .with_model_week(1.0, week),
        Reply::text("Done."),
    ]);
    let id = env.add("The Fable week.");
    let tick = env.tick();
    let status = env.status();
    if every {
        assert_eq!(tick["outcome"], "interrupted", "{tick}");
        assert_eq!(
            tick["stop_reason"],
            "ceiling: seven_day_overage_included 100% >= weeklyMax 50"
        );
        let fable = crate::support::window(&status, "work", "seven_day_overage_included");
        assert_eq!(fable["percent"], 100.0);
        assert_eq!(fable["kind"], "model_weekly");
        assert_eq!(
            crate::support::window(&status, "work", "seven_day")["percent"],
            30.0
        );
        assert_eq!(status["accounts"][0]["schedulable"], false, "{status}");
        assert_eq!(env.show(&id)["not_before"], rfc3339(week));
        env.add("Another.");
        let idle = env.tick();
        assert_eq!(idle["action"], "idle", "{idle}");
        assert!(idle["reason"]
            .as_str()
            .unwrap()
            .contains("seven_day_overage_included"));
    } else {
        // 2.1.197 reads no 7d_oi header: nothing of it reaches owl.
        assert!(
            status["accounts"][0]["windows"]
                .as_array()
                .unwrap()
                .iter()
                .all(|w| w["window"] != "seven_day_overage_included"),
            "{status}"
        );
    }
    assert!(mock.calls() >= 1);
}

#[test]
#[ignore = "needs the real Claude Code CLI"]
fn e2e_a_job_is_done_only_once_its_check_passes_on_the_second_run() {
    let E2e { env, mock } = e2e("");
    let id = env.add_with(
        &[
            "--check",
            "sh -c 'echo \"no fixed yet\" >&2; test -f fixed'",
        ],
        "Make the check pass, hand off, and commit.",
    );
    let wt = worktree(&env, &id);
    let handoff_and_commit = |files: &str| {
        vec![
            Reply::tool(
                "Write",
                json!({"file_path": wt.join(".owl/handoff.md"), "content": "status: done\n\nDone, I think.\n"}),
            ),
            Reply::tool(
                "Bash",
                json!({"command": format!("git add {files} && git commit -m 'Claim done'"), "description": "Commit"}),
            ),
            Reply::text("Done."),
        ]
    };
    // The first Run claims done without the fix.
    mock.script(handoff_and_commit(".owl/handoff.md"));
    let tick = env.tick();
    assert_eq!(tick["outcome"], "succeeded", "{tick}");
    assert_eq!(tick["job_state"], "queued", "{tick}");
    let shown = env.show(&id);
    assert_eq!(shown["runs"][0]["check"]["status"], "failed", "{shown}");
    assert_eq!(shown["verified"], false);
    let calls_first = mock.calls();

    // The second makes the fix, and is told why it must.
    let mut fix = vec![Reply::tool(
        "Write",
        json!({"file_path": wt.join("fixed"), "content": "yes\n"}),
    )];
    fix.extend(handoff_and_commit("fixed .owl/handoff.md"));
    mock.script(fix);
    let tick = env.tick();
    assert_eq!(tick["job_state"], "done", "{tick}");
    let second = mock.requests.lock().unwrap()[calls_first].to_string();
    assert!(
        second.contains("exited 1"),
        "the second Run was not told: {second}"
    );
    assert!(second.contains("no fixed yet"), "{second}");
    let shown = env.show(&id);
    assert_eq!(shown["verified"], true, "{shown}");
    assert_eq!(shown["runs"][1]["check"]["status"], "passed");
    assert!(git(&env.repo, &["show", &format!("owl/{id}:fixed")]).contains("yes"));
}
