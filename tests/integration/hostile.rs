//! A hostile agent (issue 22): nothing a Run writes — its clone's `.git`, the sandbox's
//! report, a credential store, the Handoff — makes owl, outside the sandbox and as the user,
//! reach what the sandbox hides, write the user's repository, hang, or spend. Real
//! bubblewrap, real git repositories, real FIFOs; each case's time and memory bounded.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::support::{git, show_text, TestEnv};

/// How a bounded command ended: its status, how long it took, its peak memory.
pub struct Bounded {
    pub status: ExitStatus,
    pub took: Duration,
    /// owl's own peak (`VmHWM`), as it logs it under `OWL_LOG=owl::peak=debug`. Not the
    /// child's rusage: a spawned child's `ru_maxrss` starts at what the test process holds.
    pub max_rss_mib: u64,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cmd` (an owl command) to its end, failing the test (after killing it) past
/// `limit`; reads owl's peak memory from its own log line.
pub fn run_bounded(mut cmd: Command, limit: Duration) -> Bounded {
    use std::io::Read;
    let start = Instant::now();
    let mut child = cmd
        .env("OWL_LOG", "warn,owl::peak=debug")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read on threads, and waited for only until the limit: a process the command left
    // behind holding its output (`owl tick 2>&1 | cat`) fails the test, not hangs it.
    let reader = |mut pipe: Box<dyn Read + Send>| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            let _ = tx.send(String::from_utf8_lossy(&bytes).into_owned());
        });
        rx
    };
    let out = reader(Box::new(child.stdout.take().unwrap()));
    let err = reader(Box::new(child.stderr.take().unwrap()));
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the command ran past {limit:?}: {cmd:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = start.elapsed();
    let stdout = out
        .recv_timeout(limit.saturating_sub(start.elapsed()))
        .expect("its stdout was held open past the limit");
    let stderr = err
        .recv_timeout(limit.saturating_sub(start.elapsed()))
        .expect("its stderr was held open past the limit");
    let max_rss_mib = stderr
        .lines()
        .find_map(|l| l.split("peak memory: ").nth(1))
        .and_then(|kib| kib.trim_end_matches(" KiB").trim().parse::<u64>().ok())
        .map_or(u64::MAX, |kib| kib / 1024);
    Bounded {
        status,
        took,
        max_rss_mib,
        stdout,
        stderr,
    }
}

/// Every file of the user's `.git` but its objects and the Job's own branch (which owl may
/// create and move), with its bytes: what "byte-identical" is checked against.
fn git_files(repo: &Path, job: &str) -> BTreeMap<PathBuf, Vec<u8>> {
    let git = repo.join(".git");
    let own = [
        PathBuf::from(format!("refs/heads/owl/{job}")),
        PathBuf::from(format!("logs/refs/heads/owl/{job}")),
    ];
    let mut files = BTreeMap::new();
    let mut dirs = vec![git.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let rel = path.strip_prefix(&git).unwrap().to_path_buf();
            if rel.starts_with("objects") || own.contains(&rel) {
                continue;
            }
            if entry.file_type().unwrap().is_dir() {
                dirs.push(path);
            } else {
                files.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

fn assert_same_files(before: &BTreeMap<PathBuf, Vec<u8>>, after: &BTreeMap<PathBuf, Vec<u8>>) {
    let changed: Vec<_> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .collect();
    assert!(
        changed.is_empty(),
        "the user's .git changed: {changed:?} {:?}",
        changed
            .iter()
            .map(|k| String::from_utf8_lossy(after.get(*k).map(|v| v.as_slice()).unwrap_or(b"")))
            .collect::<Vec<_>>()
    );
}

/// Adds a Job and makes the branch owl creates for it, so that the user's `.git` can be
/// taken before its Run.
fn add_with_branch(env: &TestEnv, prompt: &str) -> String {
    let id = env.add(prompt);
    git(&env.repo, &["branch", &format!("owl/{id}"), "main"]);
    id
}

#[test]
fn a_git_symlink_to_the_users_repository_is_not_followed() {
    let env = TestEnv::sandboxed("");
    let id = add_with_branch(&env, "Take over the repository");
    let before = git_files(&env.repo, &id);
    let main = git(&env.repo, &["rev-parse", "main"]);
    env.script(&format!(
        "read-prompt\nreplay success.jsonl 1 1\n\
         sh rm -rf .git && ln -s {}/.git .git\n\
         write left.txt left uncommitted\\n\n\
         replay success.jsonl 2 3\nwait-stdin-eof\n",
        env.repo.display()
    ));
    let tick = env.tick();
    assert_eq!(tick["action"], "ran", "{tick}");
    // Nothing was committed on the user's main, nor to its index, nor anywhere else.
    assert_eq!(git(&env.repo, &["rev-parse", "main"]), main);
    assert_same_files(&before, &git_files(&env.repo, &id));
    assert_eq!(
        git(&env.repo, &["rev-parse", &format!("owl/{id}")]),
        main,
        "the Job's branch did not move either"
    );
    // The Run is recorded, its note says what was found, and the Job waits for the user.
    let show = env.show(&id);
    assert_eq!(show["state"], "blocked", "{show}");
    let note = show["runs"][0]["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("tampered") && note.contains(".git is a symlink"),
        "{note}"
    );
    // A later tick does not open it either.
    let again = env.owl().args(["tick", "--json"]).output().unwrap();
    assert_eq!(again.status.code(), Some(0), "{again:?}");
    assert_same_files(&before, &git_files(&env.repo, &id));
}

#[test]
fn a_planted_core_worktree_does_not_commit_the_home_the_sandbox_hides() {
    let env = TestEnv::sandboxed("");
    let home = env.dir.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_canary"), "CANARY-SECRET\n").unwrap();
    let id = add_with_branch(&env, "Look around");
    let before = git_files(&env.repo, &id);
    env.script(
        "read-prompt\nreplay success.jsonl 1 1\n\
         sh cat ~/.ssh/id_canary\n\
         sh git config core.worktree \"$HOME\"\n\
         write .owl/handoff.md status: continue\\n\\nMore to do.\\n\n\
         replay success.jsonl 2 3\nwait-stdin-eof\n",
    );
    let tick = env.tick();
    assert_eq!(tick["action"], "ran", "{tick}");
    let branch = format!("owl/{id}");
    // owl's safety net committed the clone's work tree, the Handoff in it; not the home.
    let files = git(&env.repo, &["ls-tree", "-r", "--name-only", &branch]);
    assert!(files.contains(".owl/handoff.md"), "{files}");
    assert!(!files.contains("id_canary"), "{files}");
    let everything = git(&env.repo, &["log", "--all", "-p", "--format=%H"]);
    assert!(!everything.contains("CANARY-SECRET"));
    assert_same_files(&before, &git_files(&env.repo, &id));
    // The clone's config is owl's again, and the Run's note says what was undone.
    let clone = env.state.join("worktrees").join(&id);
    let config = std::fs::read_to_string(clone.join(".git/config")).unwrap();
    assert!(!config.contains("worktree"), "{config}");
    let note = env.show(&id)["runs"][0]["note"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(note.contains("config core.worktree"), "{note}");
    assert_eq!(env.show(&id)["state"], "queued");
}

#[test]
fn git_config_and_hooks_planted_in_the_clone_never_run_when_the_user_opens_it() {
    let env = TestEnv::sandboxed("");
    // Outside the sandbox's reach: only a command run as the user could make it.
    let marker = env.dir.path().join("ran-as-the-user");
    let id = add_with_branch(&env, "Leave a trap");
    let before = git_files(&env.repo, &id);
    let touch = format!("touch {}", marker.display());
    env.script(&format!(
        "read-prompt\nreplay success.jsonl 1 1\n\
         write .owl/handoff.md status: continue\\n\\nMore.\\n\n\
         commit Handoff\n\
         sh git config core.fsmonitor '{touch}'\n\
         sh git config core.hooksPath /nonexistent\n\
         sh git config core.sshCommand '{touch}'\n\
         sh git config filter.trap.clean '{touch}'\n\
         sh git config include.path ../../trap.config\n\
         sh printf '#!/bin/sh\\n{touch}\\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout\n\
         sh cp .git/hooks/post-checkout .git/hooks/pre-commit\n\
         sh echo {repo}/.git > .git/commondir\n\
         sh echo '*.txt filter=trap' > .gitattributes\n\
         sh git init -q sub && git -C sub -c user.name=A -c user.email=a@b commit -q --allow-empty -m s && git update-index --add --cacheinfo 160000,$(git -C sub rev-parse HEAD),sub && git -C sub config core.fsmonitor '{touch}'\n\
         write left.txt uncommitted\\n\n\
         replay success.jsonl 2 3\nwait-stdin-eof\n",
        repo = env.repo.display()
    ));
    let tick = env.tick();
    assert_eq!(tick["action"], "ran", "{tick}");
    assert!(!marker.exists(), "owl ran a planted command");
    assert_same_files(&before, &git_files(&env.repo, &id));

    // The user's morning: status, a commit, a checkout in the clone, with the real git.
    let clone = env.state.join("worktrees").join(&id);
    git(&clone, &["status"]);
    git(&clone, &["add", "-A"]);
    git(
        &clone,
        &[
            "-c",
            "user.name=User",
            "-c",
            "user.email=user@example.com",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "morning",
        ],
    );
    git(&clone, &["checkout", "-q", "-b", "morning"]);
    assert!(
        !marker.exists(),
        "git in the clone ran what the agent planted"
    );

    let note = env.show(&id)["runs"][0]["note"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    for undone in [
        "config core.fsmonitor",
        "config core.hookspath",
        "config core.sshcommand",
        "config filter.trap.clean",
        "config include.path",
        "hooks/post-checkout",
        "hooks/pre-commit",
        "commondir",
        "sub/.git",
    ] {
        assert!(note.contains(undone), "{undone} not in {note}");
    }
    let text = show_text(&env, &id);
    assert!(text.contains("owl undid what the Run planted"), "{text}");
    let report = env.owl().arg("report").output().unwrap();
    let report = String::from_utf8_lossy(&report.stdout);
    assert!(
        report.contains("note: owl undid what the Run planted"),
        "{report}"
    );
}

#[test]
fn a_fifo_or_dev_zero_for_the_sandbox_report_neither_hangs_owl_nor_fills_its_memory() {
    for (name, plant) in [
        // With owl's init inside killed, nothing ever opens the FIFO's other end.
        (
            "fifo",
            "rm -f \"$R\" && mkfifo \"$R\" && read -r _ _ _ init _ < /proc/$PPID/stat && kill -9 $init",
        ),
        ("dev-zero", "rm -f \"$R\" && ln -s /dev/zero \"$R\""),
    ] {
        let env = TestEnv::sandboxed("");
        let id = env.add("Replace the report");
        let report = env
            .state
            .join("logs")
            .join(&id)
            .join("1.files/sandbox-report");
        env.script(&format!(
            "read-prompt\nreplay success.jsonl 1 3\n\
             sh R={}; {plant}\nwait-stdin-eof\n",
            report.display()
        ));
        let mut tick = env.owl_std();
        tick.args(["tick", "--json"]);
        let ran = run_bounded(tick, Duration::from_secs(120));
        assert!(ran.status.success(), "{name}: {}", ran.stderr);
        let tick: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
        assert_eq!(tick["action"], "ran", "{name}: {tick}");
        // The Run itself takes a second or two; owl waits on nothing after it.
        assert!(ran.took < Duration::from_secs(60), "{name}: {:?}", ran.took);
        assert!(ran.max_rss_mib < 256, "{name}: {} MiB", ran.max_rss_mib);
        assert!(
            ran.stderr.contains("sandbox's report"),
            "{name}: {}",
            ran.stderr
        );
        // The lock was let go: the next tick is not `busy`.
        let next = env.owl().args(["tick", "--json"]).output().unwrap();
        let next: serde_json::Value = serde_json::from_slice(&next.stdout).unwrap();
        assert_ne!(next["action"], "busy", "{name}: {next}");
    }
}

#[test]
fn a_codex_credential_store_whose_login_is_a_fifo_does_not_hang_doctor() {
    let env = TestEnv::new();
    let store = env.dir.path().join("codex-home");
    std::fs::create_dir_all(&store).unwrap();
    let fifo = std::ffi::CString::new(store.join("auth.json").to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    std::fs::write(
        &env.config,
        format!(
            "stateDir: {}\ndrivers:\n  codex:\n    command: {}\naccounts:\n  gpt:\n    driver: codex\n    credentialStore: {}\n",
            env.state.display(),
            env!("CARGO_BIN_EXE_owl-fake-agent"),
            store.display()
        ),
    )
    .unwrap();
    for args in [
        &["doctor"][..],
        &["status"],
        &["tick", "--json", "--dry-run"],
    ] {
        let mut cmd = env.owl_std();
        cmd.args(args);
        let ran = run_bounded(cmd, Duration::from_secs(60));
        assert!(ran.status.code().is_some(), "{args:?}: {}", ran.stderr);
    }
}

/// A Handoff of 128 MiB, committed in the Run: owl reads at most its cap, after the Run, in
/// `show`, in `report` and for the next prompt, and says it was too large. The commit is
/// made by the test's own git while the agent waits, as an agent's tool would.
#[test]
fn a_huge_handoff_is_never_read_whole() {
    let env = TestEnv::new();
    let ready = env.dir.path().join("ready");
    let release = env.release_file();
    env.script(&format!(
        "read-prompt\nreplay success.jsonl 1 1\nsh touch {}\nwait-for {}\n\
         replay success.jsonl 2 3\nwait-stdin-eof\n",
        ready.display(),
        release.display()
    ));
    let id = env.add("Write a long Handoff");
    let worktree = env.state.join("worktrees").join(&id);
    let committer = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !ready.exists() {
            assert!(Instant::now() < deadline, "the Run never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::fs::create_dir_all(worktree.join(".owl")).unwrap();
        let handoff = std::fs::File::create(worktree.join(".owl/handoff.md")).unwrap();
        handoff.set_len(128 << 20).unwrap();
        handoff
            .set_modified(std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_500_000_000))
            .unwrap();
        // Streamed into a pack, never held whole, and not racily clean for owl to re-read.
        git(
            &worktree,
            &["-c", "core.bigFileThreshold=1m", "add", ".owl"],
        );
        git(
            &worktree,
            &[
                "-c",
                "user.name=A",
                "-c",
                "user.email=a@b",
                "commit",
                "-qm",
                "Big",
            ],
        );
        std::fs::write(release, "go").unwrap();
    });
    let mut tick = env.owl_std();
    tick.args(["tick", "--json"]);
    let ran = run_bounded(tick, Duration::from_secs(120));
    committer.join().unwrap();
    assert!(ran.status.success(), "{}", ran.stderr);
    assert!(ran.max_rss_mib < 96, "tick: {} MiB", ran.max_rss_mib);
    let show = env.show(&id);
    let reason = show["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("134217728 bytes, over the 262144 owl reads"),
        "{show}"
    );
    for args in [
        &["show", id.as_str()][..],
        &["report"],
        &["show", &id, "--json"],
    ] {
        let mut cmd = env.owl_std();
        cmd.args(args);
        let ran = run_bounded(cmd, Duration::from_secs(60));
        assert!(ran.status.success(), "{args:?}: {}", ran.stderr);
        assert!(ran.max_rss_mib < 96, "{args:?}: {} MiB", ran.max_rss_mib);
    }
    // The next Run starts, without the Handoff in its prompt.
    env.script("read-prompt\nreplay success.jsonl 1 3\nwait-stdin-eof\n");
    let mut tick = env.owl_std();
    tick.args(["tick", "--json"]);
    let ran = run_bounded(tick, Duration::from_secs(120));
    assert!(ran.status.success(), "{}", ran.stderr);
    assert!(ran.max_rss_mib < 96, "next tick: {} MiB", ran.max_rss_mib);
    assert!(env.show(&id)["runs"].as_array().unwrap().len() == 2);
    let prompt = env.recorded("stdin.jsonl");
    assert!(prompt.len() < 1 << 20, "{} bytes of prompt", prompt.len());
}

#[test]
fn a_handoff_committed_as_a_directory_does_not_stop_later_runs() {
    let env = TestEnv::new();
    env.script(
        "read-prompt\nreplay success.jsonl 1 1\n\
         write .owl/handoff.md/inside not a file\\n\n\
         commit A directory for a Handoff\nreplay success.jsonl 2 3\nwait-stdin-eof\n",
    );
    let id = env.add_with(&["--max-runs", "3"], "Make the Handoff a directory");
    env.tick();
    let show = env.show(&id);
    assert!(
        show["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("is a directory, not a file"),
        "{show}"
    );
    // The next Run's agent starts and works: its Run is the Job's, not a failure of owl's.
    std::fs::remove_file(env.record.join("stdin.jsonl")).ok();
    env.script("read-prompt\nreplay success.jsonl 1 3\nwait-stdin-eof\n");
    let tick = env.tick();
    assert_eq!(tick["outcome"], "succeeded", "{tick}");
    assert!(env.record.join("stdin.jsonl").exists(), "the agent started");
}

#[test]
fn a_run_whose_agent_never_started_is_recorded_and_charged_nothing() {
    let env = TestEnv::new();
    env.script(&crate::support::done_script("success.jsonl", 0));
    let id = env.add_with(
        &["--max-runs", "1", "--max-budget-usd", "5"],
        "Never gets to run",
    );
    // The Run's log cannot be made: owl fails before the agent is started.
    std::fs::create_dir_all(env.state.join("logs").join(&id).join("1.jsonl")).unwrap();
    let tick = env.owl().args(["tick", "--json"]).output().unwrap();
    let tick: serde_json::Value = serde_json::from_slice(&tick.stdout).unwrap();
    assert_eq!(tick["action"], "ran", "{tick}");
    assert!(!env.record.join("stdin.jsonl").exists(), "no agent started");
    let show = env.show(&id);
    let run = &show["runs"][0];
    assert_eq!(run["outcome"], "failed", "{run}");
    assert!(
        run["stop_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("owl could not run the agent"),
        "{run}"
    );
    assert_eq!(run["cost_usd"], 0.0, "{run}");
    assert_eq!(show["cost_usd"], 0.0, "{show}");
    // Not charged to maxRuns: the Job, allowed one Run, is still queued.
    assert_eq!(show["state"], "queued", "{show}");
}

#[test]
fn a_session_id_not_in_the_clis_shape_is_never_offered_as_a_command() {
    let env = TestEnv::new();
    let evil = "x$(touch /tmp/owl-pwned); echo pwned";
    let emits: String = crate::support::fixture("success.jsonl")
        .lines()
        .map(|l| {
            format!(
                "emit {}\n",
                l.replace("7859bb08-6e62-4362-bef3-c4e1b305f720", evil)
            )
        })
        .collect();
    env.script(&format!(
        "read-prompt\nwrite .owl/handoff.md status: done\\n\\nDone.\\n\ncommit Done\n{emits}wait-stdin-eof\n"
    ));
    let id = env.add("Name a session");
    env.tick();
    assert_eq!(env.show(&id)["runs"][0]["session_id"], evil);
    let text = show_text(&env, &id);
    assert!(!text.contains("--resume"), "{text}");
    assert!(
        text.contains("session: 'x$(touch /tmp/owl-pwned); echo pwned'"),
        "{text}"
    );

    // A session id of the CLI's shape is offered, and the store in the command is quoted.
    let env = TestEnv::new();
    let store = env.dir.path().join("my creds");
    std::fs::create_dir_all(&store).unwrap();
    std::fs::write(
        store.join(".credentials.json"),
        crate::support::LOGGED_IN_STORE,
    )
    .unwrap();
    env.write_config(&format!(
        "accounts:\n  work:\n    driver: claude-code\n    credentialStore: {}\n",
        store.display()
    ));
    env.script(&crate::support::done_script("success.jsonl", 0));
    let id = env.add("Name a session");
    env.tick();
    let text = show_text(&env, &id);
    let line = text
        .lines()
        .find(|l| l.contains("--resume"))
        .unwrap_or_default();
    assert!(
        line.contains(&format!(
            "CLAUDE_CONFIG_DIR='{}' claude --resume 7859bb08-6e62-4362-bef3-c4e1b305f720",
            store.display()
        )),
        "{text}"
    );
}
