//! TestEnv: a temp dir with a real git repository, a state dir, a config pointing at the
//! fake agent, and helpers to drive the real `owl` binary.

use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;

use assert_cmd::Command;

#[path = "pg_server.rs"]
pub mod pg_server;
use serde_json::Value;

/// The credentials file of a plan login, in the shape Claude Code 2.1.332 writes it
/// (PROTOCOL.md, `auth status`), with fake tokens.
pub const LOGGED_IN_STORE: &str = r#"{"claudeAiOauth":{"accessToken":"sk-ant-oat01-owl-test","refreshToken":"sk-ant-ort01-owl-test","expiresAt":4102444800000,"scopes":["user:inference","user:profile"],"subscriptionType":"max","rateLimitTier":"default_claude_max_20x"}}"#;

/// The fixed "now" of the tests: before the recorded transcripts' reset times.
pub const NOW: &str = "2026-11-30T03:00:00Z";

pub struct TestEnv {
    pub dir: tempfile::TempDir,
    pub repo: PathBuf,
    pub state: PathBuf,
    pub config: PathBuf,
    pub script: PathBuf,
    pub record: PathBuf,
    /// What the fake agent answers to `get_usage`, one `rate_limits` JSON per line.
    pub usage: PathBuf,
    pub extra_env: Vec<(String, String)>,
    /// "Now" for owl's scheduling.
    pub now: String,
    /// The PostgreSQL database owl keeps its state in, when the tests run on PostgreSQL
    /// (`OWL_TEST_STORE=postgres`); `None`: the state dir's SQLite file.
    pub store: Option<std::sync::Arc<pg_server::Database>>,
    /// This env's `machine:` name, when a test names it.
    pub machine: Option<String>,
}

impl TestEnv {
    /// A repository with one commit on `main`, and a config with one Account `work`.
    pub fn new() -> TestEnv {
        Self::with_config("")
    }

    /// Like [`TestEnv::new`], with extra top-level config lines appended.
    pub fn with_config(extra: &str) -> TestEnv {
        Self::in_dir(tempfile::tempdir().unwrap(), extra)
    }

    /// A test env whose Account `work` runs in the sandbox. It lives under the target dir,
    /// not `/tmp`: the sandbox gives a Run a private `/tmp`, which would hide it. The fake
    /// agent's record dir is one more writable directory; `sandbox` holds more lines of
    /// the `sandbox:` key.
    pub fn sandboxed(sandbox: &str) -> TestEnv {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let record = dir.path().join("record");
        Self::in_dir(
            dir,
            &format!(
                "    executor: sandbox\nsandbox:\n  writable: [{}]\n{sandbox}",
                record.display()
            ),
        )
    }

    fn in_dir(dir: tempfile::TempDir, extra: &str) -> TestEnv {
        let root = dir.path().to_path_buf();
        let repo = root.join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("README.md"), "demo\n").unwrap();
        git(&repo, &["add", "README.md"]);
        git(&repo, &["commit", "-q", "-m", "initial"]);
        let env = TestEnv {
            state: root.join("state"),
            config: root.join("config.yaml"),
            script: root.join("agent.script"),
            record: root.join("record"),
            usage: root.join("usage.jsonl"),
            now: NOW.to_string(),
            repo,
            dir,
            extra_env: Vec::new(),
            store: pg_server::for_test_env().map(std::sync::Arc::new),
            machine: None,
        };
        env.write_config(&format!(
            "accounts:\n  work:\n    driver: claude-code\n    credentialStore: {}\n{extra}",
            root.join("creds").display()
        ));
        // A store logged in as the real CLI leaves it (PROTOCOL.md of 2.1.332, auth status):
        // owl takes an empty one for no login before it starts anything.
        std::fs::create_dir_all(root.join("creds")).unwrap();
        std::fs::write(root.join("creds/.credentials.json"), LOGGED_IN_STORE).unwrap();
        // The home's own default store is logged in too, as a user's is: an Account a test
        // writes without `credentialStore` uses it.
        std::fs::create_dir_all(root.join("home/.claude")).unwrap();
        std::fs::write(root.join("home/.claude/.credentials.json"), LOGGED_IN_STORE).unwrap();
        env
    }

    /// Writes config.yaml with stateDir and the fake agent filled in, plus `body`.
    pub fn write_config(&self, body: &str) {
        let mut text = format!(
            "stateDir: {}\ngraceWindow: 2s\ndrivers:\n  claude-code:\n    command: {}\n{body}",
            self.state.display(),
            env!("CARGO_BIN_EXE_owl-fake-agent")
        );
        // Last, so that every line a test names in an error stays where it was.
        if !text.ends_with('\n') {
            text.push('\n');
        }
        if let Some(db) = &self.store {
            text.push_str(&format!("store: {}\n", db.url()));
        }
        if let Some(name) = &self.machine {
            text.push_str(&format!("machine: {name}\n"));
        }
        std::fs::write(&self.config, text).unwrap();
    }

    /// A machine named `name` on the shared store `db`: its own repository, state dir and
    /// credential stores, plan Accounts `accounts`, and `extra` config lines.
    pub fn machine(
        db: &std::sync::Arc<pg_server::Database>,
        name: &str,
        accounts: &[&str],
        extra: &str,
    ) -> TestEnv {
        let mut env = TestEnv::new();
        env.store = Some(db.clone());
        env.machine = Some(name.to_string());
        env.write_config(&format!("{}{extra}", env.accounts_block(accounts)));
        env
    }

    /// The `accounts:` block of plan Accounts named `names`, each with a logged-in
    /// credential store of its own under the test's dir.
    pub fn accounts_block(&self, names: &[&str]) -> String {
        let mut body = String::from("accounts:\n");
        for name in names {
            let store = self.dir.path().join(format!("creds-{name}"));
            std::fs::create_dir_all(&store).unwrap();
            std::fs::write(store.join(".credentials.json"), LOGGED_IN_STORE).unwrap();
            body.push_str(&format!(
                "  {name}:\n    credentialStore: {}\n",
                store.display()
            ));
        }
        body
    }

    /// Sets what the fake agent does on its next Run.
    pub fn script(&self, text: &str) {
        std::fs::write(&self.script, text).unwrap();
    }

    /// Sets the fake agent's answers to `get_usage`: each a five_hour percent resetting at
    /// `resets_at`; a process starts from the first again.
    pub fn five_hour(&self, percents: &[f64], resets_at: &str) {
        let lines: Vec<String> = percents
            .iter()
            .map(|p| format!(r#"{{"five_hour":{{"utilization":{p},"resets_at":"{resets_at}"}},"seven_day":{{"utilization":20,"resets_at":"2026-12-04T00:00:00.000Z"}}}}"#))
            .collect();
        std::fs::write(&self.usage, lines.join("\n")).unwrap();
    }

    /// `owl add --from PLAN`, its output whatever it was.
    pub fn add_from(&self, plan: &Path) -> std::process::Output {
        self.owl()
            .arg("add")
            .arg("--from")
            .arg(plan)
            .output()
            .unwrap()
    }

    /// The `owl` binary with this environment.
    pub fn owl(&self) -> Command {
        Command::from_std(self.owl_std())
    }

    /// The `owl` binary as a std Command (for running it in the background).
    pub fn owl_std(&self) -> StdCommand {
        let mut cmd = StdCommand::new(env!("CARGO_BIN_EXE_owl"));
        cmd.env("OWL_CONFIG", &self.config)
            .env("HOME", self.dir.path().join("home"))
            .env("TZ", "UTC")
            .env("OWL_NOW", &self.now)
            .env("FAKE_AGENT_USAGE", &self.usage)
            .env("FAKE_AGENT_SCRIPT", &self.script)
            .env("FAKE_AGENT_RECORD", &self.record)
            // The fake agent talks to no API; owl, told "unknown" by a probe, checks that
            // the CLI's API takes a connection, and finds this one.
            .env("ANTHROPIC_BASE_URL", loopback_api())
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .env_remove("ALL_PROXY")
            .env_remove("all_proxy")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_STATE_HOME")
            // No background `git maintenance`/`gc --auto` after the agent's commits: a
            // detached git would be one more process for owl to find, at random.
            .env("GIT_CONFIG_COUNT", "2")
            .env("GIT_CONFIG_KEY_0", "maintenance.auto")
            .env("GIT_CONFIG_VALUE_0", "false")
            .env("GIT_CONFIG_KEY_1", "gc.auto")
            .env("GIT_CONFIG_VALUE_1", "0");
        if self.store.is_some() {
            cmd.env("PGPASSWORD", pg_server::PASSWORD);
        }
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Queues a Job against the test repository and returns its id.
    pub fn add(&self, prompt: &str) -> String {
        self.add_with(&[], prompt)
    }

    /// Queues a Job with extra `owl add` flags and returns its id.
    pub fn add_with(&self, flags: &[&str], prompt: &str) -> String {
        let out = self
            .owl()
            .arg("add")
            .args(flags)
            .arg("--repo")
            .arg(&self.repo)
            .arg(prompt)
            .assert()
            .success();
        let id = String::from_utf8(out.get_output().stdout.clone()).unwrap();
        id.trim().to_string()
    }

    /// Starts `owl tick --json` in the background.
    pub fn spawn_tick(&self) -> std::process::Child {
        self.owl_std()
            .args(["tick", "--json"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Waits (bounded) until a background tick has its Run recorded and its agent's pid.
    pub fn wait_running(&self) {
        wait_until("the tick never started its Run", || {
            !self.status()["running"]["pid"].is_null()
        });
    }

    /// The fake agent's pid, once it has started and said it (bounded wait).
    pub fn agent_pid(&self) -> i32 {
        let path = self.record.join("pid.txt");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            if let Some(pid) = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                return pid;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the agent never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Runs `owl tick --json` and returns its output.
    pub fn tick(&self) -> Value {
        let out = self.owl().args(["tick", "--json"]).assert().success();
        serde_json::from_slice(&out.get_output().stdout).unwrap()
    }

    pub fn show(&self, job: &str) -> Value {
        let out = self.owl().args(["show", "--json", job]).assert().success();
        serde_json::from_slice(&out.get_output().stdout).unwrap()
    }

    pub fn status(&self) -> Value {
        let out = self.owl().args(["status", "--json"]).assert().success();
        serde_json::from_slice(&out.get_output().stdout).unwrap()
    }

    /// What the fake agent recorded of its last Run.
    /// Where a test releases a Run held by [`held_run_script`].
    pub fn release_file(&self) -> PathBuf {
        self.record.join("release")
    }

    /// Releases a Run held by [`held_run_script`], even one whose agent has not started
    /// yet (its record dir is made here, then).
    pub fn release(&self) {
        std::fs::create_dir_all(&self.record).unwrap();
        std::fs::write(self.release_file(), b"go").unwrap();
    }

    pub fn recorded(&self, name: &str) -> String {
        std::fs::read_to_string(self.record.join(name)).unwrap_or_default()
    }

    pub fn run_log(&self, job: &str, run: i64) -> PathBuf {
        self.state
            .join("logs")
            .join(job)
            .join(format!("{run}.jsonl"))
    }
}

/// The URL of a loopback server that takes every connection: an API that is reachable, for
/// the fake agent's Accounts. A real CLI relayed to by a test that asks it anything gets a
/// 404 its SDK is told not to retry (`x-should-retry: false`), so it ends at once.
pub fn loopback_api() -> &'static str {
    static URL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    URL.get_or_init(|| {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for conn in listener.incoming().map_while(Result::ok) {
                std::thread::spawn(move || answer_not_found(conn));
            }
        });
        url
    })
}

fn answer_not_found(mut conn: std::net::TcpStream) {
    use std::io::{Read, Write};
    let _ = conn.set_read_timeout(Some(std::time::Duration::from_millis(200)));
    let mut request = [0u8; 4096];
    let _ = conn.read(&mut request);
    let _ = conn.write_all(
        b"HTTP/1.1 404 Not Found\r\nx-should-retry: false\r\ncontent-type: application/json\r\n\
          content-length: 2\r\nconnection: close\r\n\r\n{}",
    );
}

/// A loopback port nothing listens on: an API that cannot be reached.
pub fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs git in `dir`, failing the test if it fails; returns stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = StdCommand::new("git")
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Whether a process exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
    })
}

/// A recorded transcript from tests/fixtures.
pub fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/claude-code-2.1.197")
            .join(name),
    )
    .unwrap()
}

/// A script that finishes the Job: writes and commits a Handoff, then replays `transcript`.
pub fn done_script(transcript: &str, exit: i32) -> String {
    format!(
        "read-prompt\nwrite .owl/handoff.md status: done\\n\\nAll done.\\n\ncommit owl handoff\nreplay {transcript}\nwait-stdin-eof\nexit {exit}\n"
    )
}

/// A Run held open at `release`: the agent answers once, then waits until the test creates
/// that file (see [`TestEnv::release`]); `then` runs after it.
pub fn held_run_script(release: &Path, then: &str) -> String {
    format!(
        "read-prompt\nreplay success.jsonl 1 1\nwait-for {}\n{then}replay success.jsonl 2 3\nwait-stdin-eof\n",
        release.display()
    )
}

/// One Window of one Account in `status --json`.
pub fn window<'a>(status: &'a Value, account: &str, name: &str) -> &'a Value {
    let account = status["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == account)
        .unwrap();
    account["windows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["window"] == name)
        .unwrap_or(&Value::Null)
}

/// A script that starts a Run, waits until `gate` exists, then prints a recorded-shape
/// `rate_limit_event` warning that puts `five_hour` at 70%, and works on.
pub fn crossing_at_gate_script(gate: &Path) -> String {
    format!(
        "read-prompt\nreplay success.jsonl 1 2\nwait-file {}\n\
         emit {{\"type\":\"rate_limit_event\",\"rate_limit_info\":{{\"status\":\"allowed_warning\",\"resetsAt\":1796020271,\"rateLimitType\":\"five_hour\",\"utilization\":0.7}}}}\n\
         sleep 60000\n",
        gate.display()
    )
}

/// Asserts a tick was idle for a reason containing `why`, and the Job has no Run.
pub fn assert_idle_without_runs(env: &TestEnv, tick: &Value, job: &str, why: &str) {
    assert_eq!(tick["action"], "idle", "{tick}");
    assert!(tick["reason"].as_str().unwrap().contains(why), "{tick}");
    assert!(env.show(job)["runs"].as_array().unwrap().is_empty());
}

/// Asserts a JSON text never repeats a key in one object (serde_json's `Value` would keep
/// the last one silently).
pub fn assert_no_duplicate_keys(text: &str) {
    use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
    struct Unique;
    impl<'de> Deserialize<'de> for Unique {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(UniqueVisitor)
        }
    }
    struct UniqueVisitor;
    impl<'de> Visitor<'de> for UniqueVisitor {
        type Value = Unique;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Unique, A::Error> {
            let mut seen = std::collections::BTreeSet::new();
            while let Some(key) = map.next_key::<String>()? {
                if !seen.insert(key.clone()) {
                    return Err(serde::de::Error::custom(format!("key '{key}' twice")));
                }
                map.next_value::<Unique>()?;
            }
            Ok(Unique)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Unique, A::Error> {
            while seq.next_element::<Unique>()?.is_some() {}
            Ok(Unique)
        }
        fn visit_bool<E>(self, _: bool) -> Result<Unique, E> {
            Ok(Unique)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Unique, E> {
            Ok(Unique)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Unique, E> {
            Ok(Unique)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Unique, E> {
            Ok(Unique)
        }
        fn visit_str<E>(self, _: &str) -> Result<Unique, E> {
            Ok(Unique)
        }
        fn visit_unit<E>(self) -> Result<Unique, E> {
            Ok(Unique)
        }
    }
    if let Err(e) = serde_json::from_str::<Unique>(text) {
        panic!("{e}: {text}");
    }
}

/// A tmpfs of `size` mounted on `dir` for the life of the guard. The test needs root
/// (CI runs as root); one that cannot mount fails rather than pass without testing.
pub struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    pub fn mount(dir: &std::path::Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let out = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir)
            .output()
            .expect("running mount");
        assert!(
            out.status.success(),
            "this test mounts a small tmpfs and needs root: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Checks `value` against the JSON Schema `docs/schemas/<name>.schema.json` (the contract
/// docs/json.md writes out), naming every violation.
pub fn assert_schema(name: &str, value: &Value) {
    let path = format!(
        "{}/docs/schemas/{name}.schema.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{path}: {e}"));
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{name} output breaks its schema:\n{}\n{value:#}",
        errors.join("\n")
    );
}

/// Every live process whose command line holds `needle`.
pub fn processes_with(needle: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| alive(*pid))
        .filter_map(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).ok())
        .map(|cmd| String::from_utf8_lossy(&cmd).replace('\0', " "))
        .filter(|cmd| cmd.contains(needle))
        .collect()
}

/// Runs `owl doctor --conformance --json` with one Account of `driver` on the real CLI at
/// `command`: every check must pass, at least `min_checks` of them, and the output keeps
/// its schema.
pub fn assert_conformance_passes(driver: &str, command: &Path, min_checks: usize) {
    let env = TestEnv::new();
    std::fs::write(
        &env.config,
        format!(
            "stateDir: {}\ndrivers:\n  {driver}:\n    command: {}\naccounts:\n  one:\n    driver: {driver}\n",
            env.state.display(),
            command.display()
        ),
    )
    .unwrap();
    // Its scratch dirs and the CLI's temp files go with the test's dir.
    let tmp = env.dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let out = env
        .owl()
        .args(["doctor", "--conformance", "--json"])
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_schema("conformance", &json);
    let checks = json[0]["checks"].as_array().unwrap();
    let failed: Vec<&Value> = checks.iter().filter(|c| c["ok"] == false).collect();
    assert!(failed.is_empty(), "{failed:#?}");
    assert!(checks.len() >= min_checks, "{checks:#?}");
    assert_eq!(out.status.code(), Some(0));
    assert_seen_in_words(checks);
}

/// What each conformance check saw is said in words a person reads, never as Rust's debug
/// values (`Some(0.85)`, `PermissionDenial { … }`).
pub fn assert_seen_in_words(checks: &[Value]) {
    for check in checks {
        let seen = check["seen"].as_str().unwrap_or_default();
        for debug in ["Some(", "None", " { ", "[\"", "Ok(", "Err("] {
            assert!(!seen.contains(debug), "{}: {seen}", check["name"]);
        }
    }
}

/// Waits until `done` holds, polling every 20 ms; fails with `never` after 30 s.
/// Waits for a background `owl tick --json`, which must succeed, and returns what it printed.
pub fn finish(child: std::process::Child) -> Value {
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "tick failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Waits for each background tick and returns its `action`, in order.
pub fn actions(ticks: Vec<std::process::Child>) -> Vec<String> {
    ticks
        .into_iter()
        .map(|t| finish(t)["action"].as_str().unwrap().to_string())
        .collect()
}

/// Waits (at most `within`) until no more than `keep` of `ticks` are still running: the
/// others met a Run in progress and ended.
pub fn wait_until_ticks_left(
    ticks: &mut [std::process::Child],
    keep: usize,
    within: std::time::Duration,
) {
    let deadline = std::time::Instant::now() + within;
    while ticks
        .iter_mut()
        .map(|t| t.try_wait().unwrap().is_none())
        .filter(|running| *running)
        .count()
        > keep
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the ticks did not end"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

pub fn wait_until(never: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{never}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Like [`wait_until`], for an event `child` should cause: a child that ends first fails
/// the test at once with what it printed, instead of a wait that only says it never came.
pub fn wait_for_child(child: &mut std::process::Child, never: &str, done: impl Fn() -> bool) {
    use std::io::Read as _;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !done() {
        if let Ok(Some(status)) = child.try_wait() {
            let mut said = String::new();
            for pipe in [
                child
                    .stdout
                    .take()
                    .map(|p| Box::new(p) as Box<dyn std::io::Read>),
                child
                    .stderr
                    .take()
                    .map(|p| Box::new(p) as Box<dyn std::io::Read>),
            ]
            .into_iter()
            .flatten()
            {
                let mut pipe = pipe;
                let _ = pipe.read_to_string(&mut said);
            }
            panic!("{never}: the process ended first ({status}), saying:\n{said}");
        }
        assert!(std::time::Instant::now() < deadline, "{never}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// What a command wrote on stderr, as text.
pub fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// What `owl show JOB` prints.
pub fn show_text(env: &TestEnv, id: &str) -> String {
    let out = env.owl().args(["show", id]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The pid a test's process wrote to `path` (whole, by a rename).
pub fn read_pid(path: &Path) -> i32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Queues a Job whose check writes a pid to `pidfile` (whole, by a rename), starts a tick
/// in the background and waits until its check has: the Job, the tick, the pid.
pub fn tick_into_check(
    env: &TestEnv,
    check: &str,
    pidfile: &Path,
) -> (String, std::process::Child, i32) {
    let id = env.add_with(&["--check", check], "Stopped mid-check");
    let tick = env.spawn_tick();
    wait_until("the check never started", || pidfile.exists());
    (id, tick, read_pid(pidfile))
}

/// What `owl ARGS` prints on a terminal: `script` gives it a pty and copies what it printed
/// there; `no_color` is `NO_COLOR`'s value, or `None` to leave it unset.
pub fn on_a_terminal(env: &TestEnv, args: &str, no_color: Option<&str>) -> String {
    let owl = env.owl_std();
    let mut script = std::process::Command::new("script");
    script.args([
        "-qec",
        &format!("{} {args}", env!("CARGO_BIN_EXE_owl")),
        "/dev/null",
    ]);
    for (k, v) in owl.get_envs() {
        match v {
            Some(v) => script.env(k, v),
            None => script.env_remove(k),
        };
    }
    match no_color {
        Some(v) => script.env("NO_COLOR", v),
        None => script.env_remove("NO_COLOR"),
    };
    let out = script.output().expect("running script(1) from util-linux");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A stand-in Gemini CLI in the test's dir: it says its version (0.61.0) and, started for
/// anything else, leaves the file it returns as a mark. Returns `(its path, the mark)`.
pub fn marking_gemini(env: &TestEnv) -> (PathBuf, PathBuf) {
    let gemini = env.dir.path().join("gemini");
    let ran = env.dir.path().join("gemini-ran");
    std::fs::write(
        &gemini,
        format!(
            "#!/bin/sh\n[ \"$1\" = --version ] && {{ echo 0.61.0; exit 0; }}\ntouch {}\n",
            ran.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&gemini, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    (gemini, ran)
}
