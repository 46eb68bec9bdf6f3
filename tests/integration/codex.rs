//! End to end against the real Codex CLI (its native binary, found through `OWL_E2E_CODEX`),
//! which talks to the loopback mock of the Responses API. `#[ignore]`d without it.

use std::path::PathBuf;

use owl::driver::mock_openai::{MockOpenAi, Step};

use crate::support::{git, TestEnv};

fn real_codex() -> PathBuf {
    match std::env::var_os("OWL_E2E_CODEX").map(PathBuf::from) {
        Some(path) if path.is_file() => path,
        other => panic!(
            "OWL_E2E_CODEX ({other:?}) names no file: install the CLI with \
             `npm install --prefix target/codex-0.171.0 @openai/codex@0.171.0` and set \
             OWL_E2E_CODEX to its native binary under node_modules/@openai/codex-linux-x64/vendor/"
        ),
    }
}

/// A test env whose Account `gpt` is the real Codex CLI on a fake API key at the mock.
fn codex_env() -> (TestEnv, MockOpenAi) {
    let mut env = TestEnv::new();
    // The CLI names resets on the real clock.
    env.now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let mock = MockOpenAi::start().unwrap();
    let home = env.dir.path().join("codex-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!(
            "model = \"mock-model\"\nmodel_provider = \"mock\"\ncli_auth_credentials_store = \"file\"\n\n\
             [model_providers.mock]\nname = \"mock\"\nbase_url = \"{}\"\nwire_api = \"responses\"\n\
             env_key = \"OWL_MOCK_OPENAI_KEY\"\nrequest_max_retries = 0\nstream_max_retries = 0\n",
            mock.base_url()
        ),
    )
    .unwrap();
    let config = format!(
        "stateDir: {state}\ngraceWindow: 2s\ndrivers:\n  codex:\n    command: {codex}\naccounts:\n  gpt:\n    driver: codex\n    credentialStore: {home}\n    env:\n      OWL_MOCK_OPENAI_KEY: sk-FAKE-owl-e2e\n      GIT_AUTHOR_NAME: Codex\n      GIT_AUTHOR_EMAIL: codex@example.com\n      GIT_COMMITTER_NAME: Codex\n      GIT_COMMITTER_EMAIL: codex@example.com\n",
        state = env.state.display(),
        codex = real_codex().display(),
        home = home.display(),
    );
    std::fs::write(&env.config, config).unwrap();
    (env, mock)
}

#[test]
#[ignore = "needs the real Codex CLI"]
fn e2e_codex_a_run_commits_through_its_shell_tool() {
    let (env, mock) = codex_env();
    let id = env.add("Add hello.txt, hand off, and commit.");
    mock.script(vec![
        Step::Shell(
            "mkdir -p .owl && printf 'status: done\\n\\nAdded hello.txt.\\n' > .owl/handoff.md && echo hello > hello.txt && git add hello.txt .owl/handoff.md && git commit -m 'Add hello'".into(),
        ),
        Step::Text("Done: hello.txt is committed.".into()),
    ]);
    let tick = env.tick();
    let log = std::fs::read_to_string(env.run_log(&id, 1)).unwrap_or_default();
    assert_eq!(tick["outcome"], "succeeded", "{tick}\n{log}");
    assert_eq!(tick["job_state"], "done", "{tick}\n{log}");
    let branch = format!("owl/{id}");
    let rollouts: String = walk(&env.dir.path().join("codex-home/sessions"))
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
        .flat_map(|t| {
            t.lines()
                .filter(|l| l.contains("function_call_output"))
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(
        git(&env.repo, &["log", "-1", "--format=%s", &branch]).trim(),
        "Add hello",
        "{rollouts}"
    );
    let run = &env.show(&id)["runs"][0];
    assert_eq!(run["agent_version"], "0.171.0");
    assert_eq!(run["session_id"].as_str().unwrap().len(), 36, "{run}");
}

#[test]
#[ignore = "needs the real Codex CLI"]
fn e2e_codex_a_usage_limit_is_rate_limited_until_the_reset_it_names() {
    let (env, mock) = codex_env();
    let id = env.add_with(&["--max-runs", "1"], "Say hello.");
    mock.script(vec![Step::UsageLimit { secs: 7200 }]);
    let tick = env.tick();
    assert_eq!(tick["outcome"], "rate_limited", "{tick}");
    let show = env.show(&id);
    assert_eq!(show["state"], "waiting", "{show}");
    assert_eq!(show["runs"][0]["cause"], "rate_limited");
    // The CLI names the reset in local time, to the minute: about two hours on.
    let until = chrono::DateTime::parse_from_rfc3339(show["not_before"].as_str().unwrap()).unwrap();
    let ahead = until.timestamp() - chrono::Utc::now().timestamp();
    assert!((7000..=7300).contains(&ahead), "{show}");
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
