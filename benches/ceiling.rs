//! Prints how far past a ceiling a Run goes before owl stops it, on the real Claude Code
//! CLI against the loopback mock, for the two ways owl learns the figure: from every
//! `rate_limit_event` (2.1.332's `unifiedWindows`) and from `get_usage` polls alone (what
//! owl did before, and what it still does on a CLI that carries no figure on an allowed
//! event).
//!
//! Run: `OWL_E2E_CLAUDE=target/claude-code-2.1.332/node_modules/.bin/claude cargo bench
//! --bench ceiling` (jq on PATH). The plan's five-hour figure rises 5 points per response
//! (30%, 35%, …), each response a one-second tool call, against `fiveHourMax: 50`: the
//! response that shows 50% is the crossing. For each path it prints the API requests the
//! mock answered after the crossing response and the overshoot in points at the stop (the
//! figure of the last response answered, minus the ceiling). The poll-only path is the same
//! CLI behind a filter that drops `unifiedWindows` from its events.

#[path = "../tests/integration/support.rs"]
#[allow(dead_code)]
mod support;

use std::path::{Path, PathBuf};

use owl::mock::api::{MockApi, Reply};
use serde_json::{json, Value};
use support::TestEnv;

const START: f64 = 0.30;
const STEP: f64 = 0.05;
const CEILING: f64 = 50.0;
const RESPONSES: usize = 12;

fn main() {
    let Some(claude) = std::env::var_os("OWL_E2E_CLAUDE").map(PathBuf::from) else {
        eprintln!("set OWL_E2E_CLAUDE to the real Claude Code CLI (see the README's Development)");
        std::process::exit(2);
    };
    // The response (1-based) whose figure first reaches the ceiling.
    let crossing = (0..RESPONSES)
        .find(|i| figure(*i) >= CEILING)
        .map_or(RESPONSES, |i| i + 1);
    println!(
        "owl ceiling stop on the real CLI ({}), fiveHourMax {CEILING}, the figure {}% +{} per response, a 1 s tool each; the crossing is response {crossing}",
        String::from_utf8_lossy(&std::process::Command::new(&claude).arg("--version").output().unwrap().stdout).trim(),
        START * 100.0,
        STEP * 100.0
    );
    let filtered = poll_only_wrapper(&claude);
    for (name, cli, poll) in [
        (
            "every event (unifiedWindows), usagePollInterval 60s",
            claude.clone(),
            "60s",
        ),
        (
            "get_usage polls only, usagePollInterval 60s (the default)",
            filtered.0.clone(),
            "60s",
        ),
        (
            "get_usage polls only, usagePollInterval 15s",
            filtered.0.clone(),
            "15s",
        ),
        (
            "get_usage polls only, usagePollInterval 5s",
            filtered.0.clone(),
            "5s",
        ),
    ] {
        let (calls, stop) = night(&cli, poll);
        let after = calls.saturating_sub(crossing);
        let last = figure(calls.saturating_sub(1));
        println!(
            "  {name}: {after} request(s) answered after the crossing, overshoot {:+.0} points (last figure {last:.0}%); {calls} requests in all; stop: {stop}",
            last - CEILING
        );
    }
}

/// The five-hour figure (percent) of response `i` (0-based).
fn figure(i: usize) -> f64 {
    ((START + STEP * i as f64) * 100.0).round()
}

/// One Run of a Job against a fresh mock: the requests answered and how owl stopped it.
fn night(cli: &Path, poll: &str) -> (usize, String) {
    let mut env = TestEnv::new();
    env.now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let mock = MockApi::start().unwrap();
    let reset = chrono::Utc::now().timestamp() + 3 * 3600;
    let mut replies: Vec<Reply> = (0..RESPONSES)
        .map(|i| {
            Reply::tool("Bash", json!({"command": "sleep 1", "description": "Work"}))
                .with_five_hour("allowed", figure(i) / 100.0, reset)
        })
        .collect();
    replies.push(Reply::text("Done."));
    mock.script(replies);
    std::fs::write(
        &env.config,
        format!(
            r#"stateDir: {state}
graceWindow: 2s
usagePollInterval: {poll}
drivers:
  claude-code:
    command: {cli}
defaults:
  allowedTools: ["Bash(sleep:*)"]
accounts:
  work:
    credentialStore: {creds}
    limits: {{fiveHourMax: {CEILING}}}
    env:
      CLAUDE_CODE_OAUTH_TOKEN: sk-ant-oat01-FAKE-owl-bench-FAKE
      CLAUDE_CODE_OAUTH_SCOPES: "user:inference user:profile"
      CLAUDE_CODE_SUBSCRIPTION_TYPE: max
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1"
      ANTHROPIC_BASE_URL: {base}
"#,
            state = env.state.display(),
            cli = cli.display(),
            creds = env.dir.path().join("claude-config").display(),
            base = mock.base_url(),
        ),
    )
    .unwrap();
    env.add("Work until told to stop.");
    let tick: Value = env.tick();
    env.extra_env.clear();
    let stop = tick["stop_reason"]
        .as_str()
        .map_or(format!("none ({})", tick["outcome"]), String::from);
    (mock.calls(), stop)
}

/// The CLI behind a filter that drops `unifiedWindows` from every `rate_limit_event`: the
/// poll-only path on the same binary. The temp dir lives as long as the returned value.
fn poll_only_wrapper(claude: &Path) -> (PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("claude-poll-only");
    let script = format!(
        "#!/bin/sh\ncase \"$1\" in --version|auth) exec '{cli}' \"$@\";; esac\n\
         '{cli}' \"$@\" | jq --unbuffered -c 'if .type == \"rate_limit_event\" then del(.rate_limit_info.unifiedWindows) else . end'\n",
        cli = claude.display()
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    (path, dir)
}
