//! The night the Drivers were built for: three Accounts on three agent CLIs (Claude Code,
//! Codex, Gemini), each real, each at its own loopback mock, each running a Job in turn.

use serde_json::json;

use owl::mock::api::{MockApi, Reply};
use owl::mock::gemini::{MockGemini, Step as GeminiStep};
use owl::mock::openai::{MockOpenAi, Step as CodexStep};

use crate::support::{git, TestEnv};

/// Commits `file` with a Handoff that says done, through the agent's shell.
fn commit(file: &str) -> String {
    format!(
        "mkdir -p .owl && printf 'status: done\\n\\nAdded {file}.\\n' > .owl/handoff.md && echo hi > {file} && git add {file} .owl/handoff.md && git commit -m 'Add {file}'"
    )
}

fn identity(name: &str) -> String {
    format!(
        "      GIT_AUTHOR_NAME: {name}\n      GIT_AUTHOR_EMAIL: {name}@example.com\n      GIT_COMMITTER_NAME: {name}\n      GIT_COMMITTER_EMAIL: {name}@example.com\n"
    )
}

#[test]
#[ignore = "needs the real Claude Code, Codex and Gemini CLIs"]
fn e2e_three_accounts_on_three_drivers_each_run_a_job() {
    let mut env = TestEnv::new();
    // The CLIs name resets on the real clock.
    env.now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let claude_api = MockApi::start().unwrap();
    let openai = MockOpenAi::start().unwrap();
    let gemini_api = MockGemini::start().unwrap();
    let codex_home = env.dir.path().join("codex-home");
    openai.write_codex_home(&codex_home, true, "").unwrap();
    // Codex will not set up its sandbox helper for a CODEX_HOME inside its temp dir.
    let codex_tmp = env.dir.path().join("codex-tmp");
    std::fs::create_dir_all(&codex_tmp).unwrap();
    let gemini_home = env.dir.path().join("gemini-home");
    crate::gemini::write_gemini_home(&gemini_home);
    let config = format!(
        r#"stateDir: {state}
graceWindow: 2s
usagePollInterval: 200ms
drivers:
  claude-code:
    command: {claude}
  codex:
    command: {codex}
  gemini:
    command: {gemini}
defaults:
  allowedTools: [Read, Write, Edit, "Bash(git add:*)", "Bash(git commit:*)"]
accounts:
  claude:
    credentialStore: {claude_config}
    limits: {{fiveHourMax: 80}}
    env:
{claude_env}  gpt:
    driver: codex
    credentialStore: {codex_home}
    codexConfig: {codex_config}
    limits: {{fiveHourMax: 80}}
    env:
      TMPDIR: {codex_tmp}
{codex_id}  flash:
    driver: gemini
    credentialStore: {gemini_home}
    backoff: 2h
    allowBilledUsage: true
    env:
      GEMINI_API_KEY: AIza-FAKE-owl-e2e
      GOOGLE_GEMINI_BASE_URL: {gemini_base}
{gemini_id}"#,
        state = env.state.display(),
        claude = crate::e2e::real_claude().display(),
        codex = crate::codex::real_codex().display(),
        gemini = crate::gemini::real_gemini().display(),
        claude_config = env.dir.path().join("claude-config").display(),
        claude_env = crate::e2e::fake_login_env(&claude_api.base_url()),
        codex_home = codex_home.display(),
        codex_config = openai.codex_config(true, ""),
        codex_id = identity("Codex"),
        codex_tmp = codex_tmp.display(),
        gemini_home = gemini_home.display(),
        gemini_base = gemini_api.base_url(),
        gemini_id = identity("Gemini"),
    );
    std::fs::write(&env.config, config).unwrap();

    let on_claude = env.add_with(&["--account", "claude"], "Add claude.txt and commit.");
    let on_gpt = env.add_with(&["--account", "gpt"], "Add codex.txt and commit.");
    let on_flash = env.add_with(&["--account", "flash"], "Add gemini.txt and commit.");
    let reset = chrono::Utc::now().timestamp() + 3 * 3600;
    // One figure throughout: whichever answer the last usage poll got, it says 31%.
    let handoff = "status: done\n\nAdded the file.\n";
    let wt = crate::e2e::worktree(&env, &on_claude);
    claude_api.script(vec![
        Reply::tool("Write", json!({"file_path": wt.join("claude.txt"), "content": "hi\n"}))
            .with_five_hour("allowed", 0.31, reset),
        Reply::tool("Write", json!({"file_path": wt.join(".owl/handoff.md"), "content": handoff}))
            .with_five_hour("allowed", 0.31, reset),
        Reply::tool(
            "Bash",
            json!({"command": "git add claude.txt .owl/handoff.md && git commit -m 'Add claude.txt'", "description": "Commit"}),
        )
        .with_five_hour("allowed", 0.31, reset),
        Reply::text("Done.").with_five_hour("allowed", 0.31, reset),
    ]);
    openai.script(vec![
        CodexStep::Shell(commit("codex.txt")).at(21.5, 7.0),
        CodexStep::Text("Done.".into()).at(22.0, 7.0),
    ]);
    let wt = crate::e2e::worktree(&env, &on_flash);
    let write = |path: std::path::PathBuf, content: &str| GeminiStep {
        call: Some(json!({"name": "write_file", "args": {"file_path": path, "content": content}})),
        ..GeminiStep::text("Writing.")
    };
    gemini_api.script(vec![
        write(wt.join("gemini.txt"), "hi\n"),
        write(wt.join(".owl/handoff.md"), handoff),
        GeminiStep::shell("git add gemini.txt .owl/handoff.md && git commit -m 'Add gemini.txt'"),
        GeminiStep::text("Done."),
    ]);

    // One Run a tick, each Job on its own Account, in the order they were queued.
    for (id, account, file) in [
        (&on_claude, "claude", "claude.txt"),
        (&on_gpt, "gpt", "codex.txt"),
        (&on_flash, "flash", "gemini.txt"),
    ] {
        let tick = env.tick();
        let log = std::fs::read_to_string(env.run_log(id, 1)).unwrap_or_default();
        assert_eq!(tick["job_id"], id.as_str(), "{tick}");
        assert_eq!(tick["account"], account, "{tick}");
        assert_eq!(tick["outcome"], "succeeded", "{tick}\n{log}");
        assert_eq!(tick["job_state"], "done", "{tick}\n{log}");
        let branch = format!("owl/{id}");
        assert_eq!(
            git(&env.repo, &["log", "-1", "--format=%s", &branch]).trim(),
            format!("Add {file}")
        );
    }
    assert_eq!(env.tick()["action"], "idle");

    // status: the two Accounts that report utilization show their Windows, the reactive
    // one says so.
    let status = env.status();
    let account = |name: &str| {
        status["accounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in {status}"))
    };
    let five_hour = |a: &serde_json::Value| {
        a["windows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["window"] == "five_hour")
            .map(|w| w["percent"].as_f64().unwrap())
    };
    assert_eq!(five_hour(&account("claude")), Some(31.0), "{status}");
    assert_eq!(five_hour(&account("gpt")), Some(22.0), "{status}");
    let flash = account("flash");
    assert!(flash["windows"].as_array().unwrap().is_empty(), "{flash}");
    let reason = flash["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("reactive: no utilization reported; runs until a rate limit")
            && reason.ends_with("2h"),
        "{reason}"
    );
    let text = env.owl().arg("status").output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("reactive: no utilization reported"), "{text}");
}
