//! The README's Quick start walked as a new user lives it: a fresh home, the real Claude
//! Code CLI where the README installs it, no login and no network. What owl says at each
//! step is asserted line for line (insta snapshots), and no line promises a Run that does
//! not happen.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::e2e::real_claude;
use crate::support::{closed_port, git};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A fresh home with owl where `cargo install` puts it, the CLI where the README links
/// it, and a repository to work on.
struct Home {
    dir: tempfile::TempDir,
    /// No network: every connection the CLI (and owl) makes goes to a proxy port nothing
    /// listens on, as on a machine without a route out.
    proxy_port: u16,
    /// What each step printed, redacted, for the snapshots.
    seen: Vec<String>,
}

/// What a step printed and how it exited.
struct Step {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Home {
    fn new() -> Home {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        let cargo_bin = home.join(".cargo/bin");
        std::fs::create_dir_all(&cargo_bin).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_owl"), cargo_bin.join("owl")).unwrap();
        let local_bin = home.join(".local/bin");
        std::fs::create_dir_all(&local_bin).unwrap();
        std::os::unix::fs::symlink(real_claude(), local_bin.join("claude")).unwrap();
        let repo = home.join("src/myproject");
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("dates.py"), "def parse_dates(): ...\n").unwrap();
        git(&repo, &["add", "dates.py"]);
        git(&repo, &["commit", "-q", "-m", "initial"]);
        Home {
            dir,
            proxy_port: closed_port(),
            seen: Vec::new(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Runs one line as the user's shell would, in the home, at a fixed time.
    fn run(&mut self, line: &str) -> Step {
        let home = self.path();
        let out = Command::new("/bin/bash")
            .args(["-c", line])
            .env_clear()
            .env("HOME", home)
            .env(
                "PATH",
                format!(
                    "{0}/.cargo/bin:{0}/.local/bin:/usr/bin:/bin",
                    home.display()
                ),
            )
            .env("LANG", "C.UTF-8")
            .env("TZ", "UTC")
            .env("OWL_NOW", "2026-12-02T01:00:00Z")
            .env(
                "HTTPS_PROXY",
                format!("http://127.0.0.1:{}", self.proxy_port),
            )
            .current_dir(home)
            .output()
            .unwrap();
        let step = Step {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        self.seen.push(format!("$ {line}\n{}", step.stdout));
        step
    }

    /// The text a user sees, with what differs from one run of the test to the next
    /// (the home, the Job's id, the commit, the port) named instead.
    fn redact(&self, text: &str, job: &str) -> String {
        let mut text = text
            .replace(&self.path().display().to_string(), "~")
            .replace(
                &format!("127.0.0.1:{}", self.proxy_port),
                "127.0.0.1:[port]",
            );
        if !job.is_empty() {
            text = text.replace(job, "[job]");
        }
        let commit = git(&self.path().join("src/myproject"), &["rev-parse", "HEAD"]);
        text.replace(&commit.trim()[..12], "[commit]")
    }
}

/// The lines of the README's fenced block that follows `marker`.
fn readme_block(marker: &str) -> String {
    let readme = std::fs::read_to_string(format!("{ROOT}/README.md")).unwrap();
    let at = readme
        .find(marker)
        .unwrap_or_else(|| panic!("README: {marker}"));
    let rest = &readme[at..];
    let open = rest.find("```").unwrap();
    let body = &rest[open..];
    let body = &body[body.find('\n').unwrap() + 1..];
    let close = body.find("```").unwrap();
    // The README indents its steps' blocks under their list item.
    body[..close]
        .lines()
        .map(|l| l.strip_prefix("   ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The README's line that starts with `start`, inside its Quick start.
fn readme_line(start: &str) -> String {
    let readme = std::fs::read_to_string(format!("{ROOT}/README.md")).unwrap();
    readme
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("README: no line starting {start}"))
        .to_string()
}

fn config_path(home: &Path) -> PathBuf {
    home.join(".config/owl/config.yaml")
}

#[test]
#[ignore = "needs the real Claude Code CLI"]
fn e2e_the_quick_start_on_a_fresh_home_with_no_login_and_no_network() {
    let mut home = Home::new();

    // Step 2 as printed (step 1, the login, is what a new user has not done yet).
    let config = readme_block("A minimal one:");
    std::fs::create_dir_all(config_path(home.path()).parent().unwrap()).unwrap();
    std::fs::write(config_path(home.path()), format!("{config}\n")).unwrap();
    let check = home.run("owl config check");
    assert_eq!(check.code, 0, "{}", check.stderr);
    let doctor = home.run("owl doctor");
    assert_eq!(doctor.code, 1, "{}", doctor.stdout);
    let fails: Vec<&str> = doctor
        .stdout
        .lines()
        .filter(|l| l.starts_with("FAIL"))
        .collect();
    assert_eq!(fails.len(), 1, "one problem, told once: {}", doctor.stdout);
    assert!(
        fails[0].contains("not logged in: its credential store")
            && fails[0].contains("does not exist"),
        "{}",
        fails[0]
    );
    // doctor made nothing: the store is still the user's to make.
    assert!(!home.path().join(".config/owl/accounts/work").exists());

    // Step 3 as printed.
    let add = readme_line("id=$(owl add --repo ~/src/myproject");
    let id = home.run(&format!("{add} && echo \"$id\""));
    assert_eq!(id.code, 0, "{}", id.stderr);
    let job = id.stdout.trim().to_string();
    assert_eq!(job.len(), 6, "{job}");

    // Step 4 as printed, with the dry run a careful user tries first.
    let status = home.run("owl status");
    let dry = home.run("owl tick --dry-run");
    let tick = home.run("owl tick");
    assert_eq!(tick.code, 0, "{}", tick.stderr);
    let show = home.run(&format!("owl show {job}"));
    let logs = home.run(&format!("owl logs {job}"));
    assert_eq!(logs.code, 2);
    assert!(
        logs.stderr.contains(&format!("job {job} has no Run yet")),
        "{}",
        logs.stderr
    );
    let report = home.run("owl report");
    insta::assert_snapshot!(
        "quick_start_before_the_login",
        home.redact(
            &format!(
                "$ owl status\n{}\n$ owl tick --dry-run\n{}\n$ owl tick\n{}\n$ owl show $id\n{}\n$ owl report\n{}",
                status.stdout, dry.stdout, tick.stdout, show.stdout, report.stdout
            ),
            &job
        )
    );

    // The user starts the CLI in the store and leaves without /login: the store now has
    // the CLI's files and still no login.
    let store = home.path().join(".config/owl/accounts/work");
    let started = home.run(&format!(
        "CLAUDE_CONFIG_DIR={} claude auth status",
        store.display()
    ));
    assert_eq!(started.code, 1, "the real CLI says: no login");
    assert!(
        store.join(".claude.json").exists(),
        "the CLI made its store"
    );
    let status = home.run("owl status");

    // Then logs in (the file /login writes, in the shape the real CLI reads; recorded
    // in PROTOCOL.md of 2.1.332, §5), with no network: the login is not promised, the
    // probe the hint names finds the API unreachable, and the Account backs off.
    std::fs::write(
        store.join(".credentials.json"),
        crate::support::LOGGED_IN_STORE,
    )
    .unwrap();
    let logged_in = home.run("owl status");
    let probe = home.run("owl probe work");
    assert_eq!(probe.code, 1);
    let tick = home.run("owl tick");
    assert_eq!(tick.code, 0, "{}", tick.stderr);
    let after = home.run(&format!("owl show {job}"));
    insta::assert_snapshot!(
        "quick_start_the_login_and_no_network",
        home.redact(
            &format!(
                "$ owl status   # the CLI started in the store, no /login\n{}\n$ owl status   # after /login\n{}\n$ owl probe work\n{}\n$ owl tick\n{}\n$ owl show $id\n{}",
                status.stdout, logged_in.stdout, probe.stdout, tick.stdout, after.stdout
            ),
            &job
        )
    );

    // No Run happened, and nothing said one would.
    let jobs = home.run("owl jobs --json");
    let jobs: serde_json::Value = serde_json::from_str(&jobs.stdout).unwrap();
    assert_eq!(jobs[0]["run_count"], 0, "{jobs}");
    for said in &home.seen {
        assert!(
            !said.contains("The next tick runs") && !said.contains("next: runs on"),
            "a Run promised that did not happen:\n{said}"
        );
    }
}
