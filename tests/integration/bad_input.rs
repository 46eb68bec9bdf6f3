//! Strict in: a table of bad inputs, each refused with the exit code and the words that
//! name its file, line, key or value, without a panic, and without a byte of the state dir
//! (or the directory owl was started in) changing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::support::{done_script, TestEnv};

/// One bad input: a config text (`@` stands for the state dir) or a command line.
struct Case {
    name: &'static str,
    /// The config, when the case is about it; else the test's good config.
    config: Option<&'static str>,
    args: &'static [&'static str],
    code: i32,
    /// What stderr must say (the key, the value, `line N`).
    says: &'static [&'static str],
}

const fn config(name: &'static str, text: &'static str, says: &'static [&'static str]) -> Case {
    Case {
        name,
        config: Some(text),
        args: &["status"],
        code: 2,
        says,
    }
}

const fn args(
    name: &'static str,
    args: &'static [&'static str],
    says: &'static [&'static str],
) -> Case {
    Case {
        name,
        config: None,
        args,
        code: 2,
        says,
    }
}

#[rustfmt::skip]
const CASES: &[Case] = &[
    // Keys owl does not know, and keys given twice.
    config("unknown top-level key", "stateDir: @\ngraceWindw: 30s\naccounts: {work: {}}\n", &["line 2", "unknown key 'graceWindw'", "did you mean 'graceWindow'"]),
    config("misspelled ceiling", "stateDir: @\naccounts:\n  work:\n    limits:\n      fiveHourMAx: 60\n", &["line 5", "'fiveHourMAx'", "accounts.work.limits", "did you mean 'fiveHourMax'"]),
    config("unknown key in limits", "stateDir: @\naccounts:\n  work:\n    limits: {fiveHourMax: 60, extra: 1}\n", &["line 4", "unknown key 'extra'"]),
    config("unknown driver section", "stateDir: @\ndrivers:\n  aider: {}\naccounts: {work: {}}\n", &["line 3", "unknown key 'aider'"]),
    config("unknown key in defaults", "stateDir: @\ndefaults:\n  maxRun: 3\naccounts: {work: {}}\n", &["line 3", "'maxRun'", "did you mean 'maxRuns'"]),
    config("an Account given twice", "stateDir: @\naccounts:\n  work:\n    limits: {fiveHourMax: 60}\n  work:\n    driver: claude-code\n", &["line 5", "key 'work' is given twice in 'accounts' (lines 3 and 5)"]),
    config("an env variable given twice", "stateDir: @\naccounts:\n  work:\n    env:\n      TOKEN: a\n      TOKEN: b\n", &["line 6", "key 'TOKEN' is given twice in 'accounts.work.env' (lines 5 and 6)"]),
    config("a top-level key given twice", "stateDir: @\naccounts: {work: {}}\ngraceWindow: 30s\ngraceWindow: 40s\n", &["line 4", "key 'graceWindow' is given twice (lines 3 and 4)"]),
    config("a limit given twice", "stateDir: @\naccounts:\n  work:\n    limits:\n      weeklyMax: 50\n      weeklyMax: 90\n", &["line 6", "'weeklyMax' is given twice"]),
    // Values, each on its own line even when the same value stands earlier.
    config("ceiling out of range", "stateDir: @\ndefaults:\n  priority: 120\naccounts:\n  work:\n    limits:\n      weeklyMax: 120\n", &["line 7", "'120' is out of range"]),
    config("negative ceiling", "stateDir: @\naccounts:\n  work:\n    limits: {fiveHourMax: -5}\n", &["line 4", "'-5' is out of range"]),
    config("ceiling not a number", "stateDir: @\naccounts:\n  work:\n    limits:\n      fiveHourMax: lots\n", &["line 5", "lots"]),
    config("duration without a unit", "stateDir: @\ngraceWindow: 30\naccounts: {work: {}}\n", &["line 2", "'30' is not a duration"]),
    config("negative duration", "stateDir: @\ngraceWindow: -1s\naccounts: {work: {}}\n", &["line 2", "'-1s' is not a duration"]),
    config("unknown duration unit", "stateDir: @\nstallTimeout: 1y\naccounts: {work: {}}\n", &["line 2", "'1y' is not a duration"]),
    config("zero usagePollInterval", "stateDir: @\nusagePollInterval: 0s\naccounts: {work: {}}\n", &["line 2", "usagePollInterval 0s is below its minimum of 100ms"]),
    config("zero stallTimeout", "stateDir: @\naccounts: {work: {}}\nstallTimeout: 0s\n", &["line 3", "stallTimeout 0s is below its minimum of 1s"]),
    config("zero maxRunTime", "stateDir: @\ndefaults:\n  maxRunTime: 0s\naccounts: {work: {}}\n", &["line 3", "maxRunTime 0s is below its minimum"]),
    config("zero graceWindow", "stateDir: @\ngraceWindow: 0s\naccounts: {work: {}}\n", &["line 2", "graceWindow 0s is below its minimum of 1s"]),
    config("zero probeMaxAge", "stateDir: @\nprobeMaxAge: 0ms\naccounts: {work: {}}\n", &["line 2", "probeMaxAge 0s is below its minimum of 1s"]),
    config("a size that is not one", "stateDir: @\nminFreeSpace: lots\naccounts: {work: {}}\n", &["line 2", "'lots' is not a size"]),
    config("a negative size", "stateDir: @\nminFreeSpace: -1GiB\naccounts: {work: {}}\n", &["line 2", "'-1GiB' is not a size"]),
    config("maxRuns 0", "stateDir: @\ndefaults:\n  maxRuns: 0\naccounts: {work: {}}\n", &["line 3", "maxRuns must be at least 1"]),
    config("maxRuns negative", "stateDir: @\ndefaults:\n  maxRuns: -1\naccounts: {work: {}}\n", &["line 3", "maxRuns"]),
    config("budget 0", "stateDir: @\ndefaults:\n  maxBudgetUsd: 0\naccounts: {work: {}}\n", &["line 3", "maxBudgetUsd must be a finite number greater than 0"]),
    config("budget infinite", "stateDir: @\ndefaults:\n  maxBudgetUsd: .inf\naccounts: {work: {}}\n", &["line 3", "finite number greater than 0, not inf"]),
    config("budget NaN", "stateDir: @\ndefaults:\n  maxJobBudgetUsd: .nan\naccounts: {work: {}}\n", &["line 3", "maxJobBudgetUsd must be a finite number"]),
    config("job budget negative", "stateDir: @\naccounts: {work: {}}\ndefaults:\n  maxJobBudgetUsd: -3\n", &["line 4", "maxJobBudgetUsd must be a finite number greater than 0, not -3"]),
    config("bypassPermissions", "stateDir: @\ndefaults:\n  permissionMode: bypassPermissions\naccounts: {work: {}}\n", &["line 3", "bypassPermissions"]),
    config("permission mode misspelled", "stateDir: @\ndefaults:\n  permissionMode: dontask\naccounts: {work: {}}\n", &["line 3", "did you mean 'dontAsk'"]),
    config("default account unknown", "stateDir: @\ndefaults:\n  account: wrok\naccounts: {work: {}}\n", &["line 3", "defaults.account 'wrok'", "did you mean 'work'"]),
    config("no Account", "stateDir: @\naccounts: {}\n", &["names no Account"]),
    config("an Account name with a slash", "stateDir: @\naccounts:\n  a/b: {}\n", &["line 3", "account name 'a/b'"]),
    config("unknown driver", "stateDir: @\naccounts:\n  work:\n    driver: aider\n", &["line 4", "unknown value 'aider'"]),
    config("a ceiling written as a percent", "stateDir: @\naccounts:\n  work:\n    limits:\n      fiveHourMax: 60%\n", &["line 5:", "'60%' is not a number", "write a number, without %: 60"]),
    config("an Account name not ASCII, on its own line", "stateDir: @\naccounts:\n  wörk:\n    driver: claude-code\n", &["line 3:", "account name 'wörk'"]),
    config("two Accounts on one credentialStore", "stateDir: @\naccounts:\n  a:\n    credentialStore: /tmp/owl-shared-store\n    limits: {fiveHourMax: 50}\n  b:\n    credentialStore: /tmp/owl-shared-store/\n    limits: {fiveHourMax: 90}\n", &["line 7:", "accounts a and b share the credentialStore", "give each Account its own"]),
    config("schedule hour 25", "stateDir: @\nschedule:\n  window: \"25:00-07:00\"\naccounts: {work: {}}\n", &["line 3", "'25:00-07:00' is not a time window"]),
    config("schedule nonsense", "stateDir: @\nschedule:\n  window: nightly\naccounts: {work: {}}\n", &["line 3", "'nightly' is not a time window"]),
    config("allowedTools a string", "stateDir: @\ndefaults:\n  allowedTools: Read\naccounts: {work: {}}\n", &["line 3", "allowedTools", "sequence"]),
    config("priority a word", "stateDir: @\ndefaults:\n  priority: high\naccounts: {work: {}}\n", &["line 3", "priority"]),
    config("commitAuthor a list", "stateDir: @\ncommitAuthor: [a, b]\naccounts: {work: {}}\n", &["line 2", "commitAuthor"]),
    // Paths.
    config("stateDir with a variable", "stateDir: $OWL_DIR/state\naccounts: {work: {}}\n", &["line 1", "'$OWL_DIR/state' holds '$'", "does not expand variables"]),
    config("stateDir empty", "stateDir: \"\"\naccounts: {work: {}}\n", &["line 1", "the path is empty"]),
    config("stateDir relative", "stateDir: owl-state\naccounts: {work: {}}\n", &["line 1", "'owl-state' is relative"]),
    config("credentialStore with a variable", "stateDir: @\naccounts:\n  work:\n    credentialStore: $HOME/creds\n", &["line 4", "'$HOME/creds' holds '$'"]),
    config("credentialStore relative", "stateDir: @\naccounts:\n  work:\n    credentialStore: creds/work\n", &["line 4", "'creds/work' is relative"]),
    config("driver command empty", "stateDir: @\ndrivers:\n  claude-code:\n    command: \"\"\naccounts: {work: {}}\n", &["line 4", "command is empty"]),
    config("driver command with a variable", "stateDir: @\ndrivers:\n  claude-code:\n    command: $HOME/bin/claude\naccounts: {work: {}}\n", &["line 4", "holds '$'"]),
    // Input no config has.
    config("nested 40 deep", "stateDir: @\naccounts: {work: {}}\nx: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n", &["line 3", "nested deeper than 32 levels"]),
    config("a YAML alias", "stateDir: @\naccounts:\n  work: &w {}\n  home: *w\n", &["line 4", "aliases"]),
    config("broken YAML", "stateDir: @\naccounts: [\n", &["reading config"]),
    config("a list, not a mapping", "- stateDir\n- accounts\n", &["reading config", "line 1"]),
    config("a tab where YAML wants spaces", "stateDir: @\naccounts:\n\twork: {}\n", &["line 3", "YAML indents with spaces, never tabs"]),
    // The parser names the line before a tab that starts a line after a value.
    config("a tab after a value's line", "stateDir: @\naccounts:\n  work:\n    driver: claude-code\n\tlimits: {}\n", &["line 5", "a tab in the indentation", "replace it with spaces"]),
    config("a tab on a blank line", "stateDir: @\naccounts:\n  work: {}\n\n\t\n", &["line 5", "a tab in the indentation"]),
    config("a tab after a colon", "stateDir: @\naccounts:\n  work:\n    driver:\tclaude-code\n", &["line 4", "a tab after a key's ':'", "`driver: claude-code`"]),
    config("a key indented unlike its siblings", "stateDir: @\ndefaults:\n  maxRuns: 3\n maxRunTime: 1h\naccounts: {work: {}}\n", &["line 4", "'maxRunTime: 1h' is indented 1 spaces", "lines up with no key"]),
    config("a learned reserve's floor over 100", "stateDir: @\naccounts:\n  work:\n    learnedReserve: {floor: 120}\n", &["line 4", "'120' is out of range: a floor is percentage points from 0 to 100"]),
    config("a learned reserve's quantile of 0", "stateDir: @\naccounts:\n  work:\n    learnedReserve:\n      quantile: 0\n", &["line 5", "a quantile is above 0 and at most 1"]),
    config("a learned reserve's quantile over 1", "stateDir: @\naccounts:\n  work:\n    learnedReserve:\n      quantile: 1.5\n", &["line 5", "a quantile is above 0 and at most 1"]),
    config("a learned reserve on a Driver that cannot be sampled", "stateDir: @\naccounts:\n  flash:\n    driver: gemini\n    learnedReserve: {}\n", &["line 5", "accounts.flash.learnedReserve needs your day sampled at no token cost", "the gemini driver has no zero-token read"]),
    // Commands.
    args("a job name with a slash", &["add", "--name", "a/b", "Hello"], &["job name 'a/b'"]),
    args("an unquoted prompt", &["add", "Fix", "the", "parser", "please"], &["unexpected argument 'the'", "hint: a prompt of several words is one argument: quote it"]),
    args("an unquoted prompt after a global option", &["--config", "/nonexistent/config.yaml", "add", "Fix", "the", "parser", "please"], &["unexpected argument 'the'", "hint: a prompt of several words is one argument: quote it"]),
    args("an unquoted prompt after --config=", &["--config=/nonexistent/config.yaml", "add", "Fix", "the", "parser"], &["hint: a prompt of several words is one argument: quote it"]),
    args("a priority in words", &["add", "--priority", "high", "Hello"], &["'high' is not a priority: a whole number, higher runs first"]),
    args("a job name git refuses", &["add", "--name", "a.", "Hello"], &["cannot name a git branch"]),
    args("a job name taken", &["add", "--name", "first", "Hello"], &["a job named 'first' exists already"]),
    args("an infinite budget", &["add", "--max-budget-usd=inf", "Hello"], &["--max-budget-usd must be a finite number"]),
    args("a zero budget", &["add", "--max-job-budget-usd=0", "Hello"], &["--max-job-budget-usd must be a finite number"]),
    args("maxRuns 0", &["add", "--max-runs", "0", "Hello"], &["--max-runs must be at least 1"]),
    args("a priority that is no number", &["add", "--priority", "high", "Hello"], &["--priority", "high"]),
    args("a repository that is not there", &["add", "--repo", "/nonexistent/repo", "Hello"], &["/nonexistent/repo"]),
    args("a base that is not there", &["add", "--base", "no-such-ref", "Hello"], &["no-such-ref"]),
    args("an Account that is not configured", &["add", "--account", "wrok", "Hello"], &["account 'wrok' is not configured", "did you mean 'work'"]),
    args("no prompt", &["add"], &["needs a prompt"]),
    args("an empty prompt", &["add", "  "], &["the prompt is empty"]),
    args("a prompt file that is not there", &["add", "--prompt-file", "/nonexistent/prompt.md"], &["/nonexistent/prompt.md"]),
    args("cancel a job that is not there", &["cancel", "nosuch"], &["no job 'nosuch'"]),
    args("requeue a job that is not there", &["requeue", "nosuch"], &["no job 'nosuch'"]),
    args("requeue a queued job", &["requeue", "first"], &["only a failed, blocked or cancelled Job"]),
    args("requeue with a negative budget", &["requeue", "first", "--max-job-budget-usd=-1"], &["finite number greater than 0"]),
    args("show a job that is not there", &["show", "nosuch"], &["no job 'nosuch'"]),
    args("a job id one letter off", &["cancel", "firsT"], &["no job 'firsT' (did you mean 'first'?)"]),
    args("logs of a run that is not there", &["logs", "999"], &["no run 999"]),
    args("logs of a run that is no number", &["logs", "one"], &["no job 'one'"]),
    args("logs of a job with no run", &["logs", "first"], &["job first has no Run yet"]),
    args("clean with nothing named", &["clean"], &["<JOB>"]),
    args("clean a queued job", &["clean", "first"], &["job first is queued"]),
    args("probe an Account that is not there", &["probe", "wrok"], &["no account 'wrok'"]),
    args("a command that is not one", &["frobnicate"], &["frobnicate"]),
    args("a flag that is not one", &["tick", "--bogus"], &["--bogus"]),
    args("a report period before any date", &["report", "--since", "100000000d"], &["--since reaches 100000000 days back"]),
    args("a report period past counting", &["report", "--since", "5000000000000h"], &["--since reaches"]),
    args("a report page to a directory", &["report", "--html", "/tmp"], &["--html /tmp is a directory"]),
    args("a report page in a missing directory", &["report", "--html", "/nonexistent/night.html"], &["the directory /nonexistent does not exist"]),
];

/// Every file below `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        // SQLite's shared-memory index of the WAL: what readers mark as they read, rebuilt
        // from the WAL when missing; nothing recorded.
        if path.file_name().is_some_and(|n| n == "owl.db-shm") {
            continue;
        }
        if path.is_dir() {
            out.insert(path.clone(), Vec::new());
            out.extend(snapshot(&path));
        } else {
            out.insert(path.clone(), std::fs::read(&path).unwrap_or_default());
        }
    }
    out
}

#[test]
fn every_bad_input_is_refused_on_its_line_and_changes_nothing() {
    assert!(CASES.len() >= 60, "{} cases", CASES.len());
    let env = TestEnv::new();
    env.script(&done_script("success.jsonl", 0));
    // A state with something in it: a Job, a Run, its log and worktree, a queued Job.
    let done = env.add("First");
    env.tick();
    env.add_with(&["--name", "first"], "Queued");
    let _ = done;
    let before = snapshot(&env.state);
    let cwd = tempfile::tempdir().unwrap();
    let bad_config = env.dir.path().join("bad.yaml");
    for case in CASES {
        let mut cmd = env.owl_std();
        if let Some(text) = case.config {
            std::fs::write(
                &bad_config,
                text.replace('@', &env.state.display().to_string()),
            )
            .unwrap();
            cmd.arg("--config").arg(&bad_config);
        }
        let args: Vec<String> = case
            .args
            .iter()
            .map(|a| a.to_string())
            .chain(
                // `add` works on the test repository unless the case names another.
                (case.args.first() == Some(&"add") && !case.args.contains(&"--repo"))
                    .then(|| ["--repo".to_string(), env.repo.display().to_string()])
                    .into_iter()
                    .flatten(),
            )
            .collect();
        let out = cmd
            .args(&args)
            .current_dir(cwd.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let name = case.name;
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        assert_eq!(out.status.code(), Some(case.code), "{name}: {stderr}");
        for said in case.says {
            assert!(
                stderr.contains(said),
                "{name}: stderr lacks {said:?}: {stderr}"
            );
        }
        if case.config.is_some() {
            assert!(
                stderr.contains(&bad_config.display().to_string()),
                "{name}: the file is not named: {stderr}"
            );
        }
        assert!(
            snapshot(&env.state) == before,
            "{name}: the state dir changed"
        );
        assert!(
            snapshot(cwd.path()).is_empty(),
            "{name}: owl wrote in the directory it started in"
        );
    }
}

#[test]
fn a_config_that_is_not_a_small_regular_file_is_refused_at_once() {
    let env = TestEnv::new();
    let dir = env.dir.path();
    let fifo = dir.join("config.fifo");
    let c = std::ffi::CString::new(fifo.display().to_string()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let big = dir.join("big.yaml");
    std::fs::write(
        &big,
        format!("# {}\naccounts: {{work: {{}}}}\n", "x".repeat(2 << 20)),
    )
    .unwrap();
    let latin1 = dir.join("latin1.yaml");
    std::fs::write(&latin1, b"commitAuthor: caf\xe9\naccounts: {work: {}}\n").unwrap();
    for (path, says) in [
        (PathBuf::from("/dev/zero"), "not a regular file"),
        (fifo, "not a regular file"),
        (dir.to_path_buf(), "not a regular file"),
        (big, "larger than 1MiB"),
        (latin1, "not UTF-8"),
        (dir.join("missing.yaml"), "No such file"),
    ] {
        let out = env
            .owl_std()
            .arg("--config")
            .arg(&path)
            .arg("status")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {stderr}", path.display());
        assert!(stderr.contains(says), "{}: {stderr}", path.display());
        assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    }
    assert!(!env.state.exists());
}

#[test]
fn a_home_without_home_is_refused_not_made_relative() {
    let env = TestEnv::new();
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(
        env.dir.path().join("tilde.yaml"),
        "stateDir: ~/owl\naccounts: {work: {}}\n",
    )
    .unwrap();
    let out = env
        .owl_std()
        .env_remove("HOME")
        .arg("--config")
        .arg(env.dir.path().join("tilde.yaml"))
        .arg("status")
        .current_dir(cwd.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("line 1") && stderr.contains("HOME is not set"),
        "{stderr}"
    );
    // With no config and no HOME there is no default state dir: refused, nothing made.
    let out = env
        .owl_std()
        .env_remove("HOME")
        .env_remove("OWL_CONFIG")
        .arg("status")
        .current_dir(cwd.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("neither HOME nor XDG_STATE_HOME is set"),
        "{stderr}"
    );
    assert!(snapshot(cwd.path()).is_empty());
}

#[test]
fn a_refused_command_on_a_fresh_install_creates_no_state() {
    let env = TestEnv::new();
    let repo = env.repo.display().to_string();
    for args in [
        vec!["add", "--repo", &repo, "--name", "a/b", "Hello"],
        vec!["add", "--repo", &repo, "--max-runs", "0", "Hello"],
        vec!["cancel", "nosuch"],
        vec!["requeue", "nosuch"],
        vec!["show", "nosuch"],
        vec!["logs", "1"],
        vec!["clean", "nosuch"],
        vec!["tick", "--job", "nosuch"],
        vec!["report", "--html", "/nonexistent/night.html"],
    ] {
        env.owl().args(&args).assert().code(2);
        assert!(
            !env.state.exists(),
            "owl {args:?} created {}",
            env.state.display()
        );
    }
}

#[test]
fn a_per_run_budget_no_cli_of_the_account_can_keep_is_refused_at_add() {
    let env = TestEnv::new();
    std::fs::write(
        &env.config,
        format!(
            "stateDir: {}\naccounts:\n  gpt:\n    driver: codex\n  claude:\n    driver: claude-code\n",
            env.state.display()
        ),
    )
    .unwrap();
    let repo = env.repo.display().to_string();
    let out = env
        .owl()
        .args([
            "add",
            "--repo",
            &repo,
            "--account",
            "gpt",
            "--max-budget-usd",
            "2",
            "Hi",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("account 'gpt' runs codex, whose CLI takes no per-Run budget cap"),
        "{stderr}"
    );
    assert!(!env.state.exists(), "nothing was made");
    // On an Account whose CLI keeps it, or on any Account when one can, it is taken.
    for account in [&["--account", "claude"][..], &[]] {
        env.owl()
            .args(["add", "--repo", &repo, "--max-budget-usd", "2"])
            .args(account)
            .arg("Hi")
            .assert()
            .success();
    }
}

#[test]
fn a_repository_with_no_commits_is_refused_in_words() {
    let env = TestEnv::new();
    let empty = env.dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    crate::support::git(&empty, &["init", "-q"]);
    // And one on a branch not named by git's default (found by hand: `git init -b main`).
    let main = env.dir.path().join("empty-main");
    std::fs::create_dir_all(&main).unwrap();
    crate::support::git(&main, &["init", "-q", "-b", "main"]);
    for repo in [&empty, &main] {
        let out = env
            .owl()
            .args(["add", "--repo", repo.to_str().unwrap(), "Hi"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("has no commits yet"), "{stderr}");
        assert!(!stderr.contains("revspec"), "{stderr}");
    }
}

#[test]
fn a_ceiling_yaml_spells_as_a_special_float_or_out_of_range_is_refused_on_its_own_line_and_key() {
    let env = TestEnv::new();
    for value in [".nan", ".NaN", ".inf", "-.inf", "100.5"] {
        env.write_config(&format!(
            "accounts:\n  work:\n    limits:\n      fiveHourMax: 60\n      nightMax: {value}\n"
        ));
        let out = env.owl().args(["config", "check"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{value}: {out:?}");
        let said = crate::support::stderr_of(&out);
        // write_config puts five lines before `accounts:`: nightMax is line 10.
        assert!(said.contains("line 10: "), "{value}: {said}");
        assert!(
            said.contains("in 'accounts.work.limits.nightMax'"),
            "{value}: {said}"
        );
    }
}
