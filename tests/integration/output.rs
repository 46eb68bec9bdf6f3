//! What owl prints: a closed pipe ends a command quietly, the agent's bytes reach no
//! terminal as commands, colours only on a terminal.

use std::process::Stdio;

use predicates::prelude::*;

use crate::support::{done_script, TestEnv};

/// Runs owl with `args`, its stdout a pipe whose reader is already gone; returns the
/// exit code and stderr.
fn with_closed_stdout(env: &TestEnv, args: &[&str]) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = env
        .owl_std()
        .args(args)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let env = TestEnv::new();
    // So that doctor passes, and its exit code says only how the pipe was handled.
    std::fs::create_dir_all(env.dir.path().join("creds")).unwrap();
    env.script(&done_script("success.jsonl", 0));
    let id = env.add("Hello");
    env.tick();
    let repo = env.repo.display().to_string();
    let commands: Vec<Vec<&str>> = vec![
        vec!["status"],
        vec!["status", "--json"],
        vec!["jobs", "--all"],
        vec!["jobs", "--all", "--json"],
        vec!["show", &id],
        vec!["show", "--json", &id],
        vec!["logs", "1"],
        vec!["logs", "--raw", "1"],
        vec!["config", "check"],
        vec!["doctor"],
        vec!["tick", "--dry-run"],
        vec!["probe"],
        vec!["--help"],
        vec!["add", "--repo", &repo, "--name", "piped", "Hello again"],
    ];
    for args in &commands {
        let (code, stderr) = with_closed_stdout(&env, args);
        assert!(!stderr.contains("panicked"), "owl {args:?}: {stderr}");
        assert_eq!(code, Some(0), "owl {args:?}: {stderr}");
    }
    // The Job was added before its id could not be printed.
    assert_eq!(env.show("piped")["state"], "queued");
}

#[test]
fn the_agents_control_characters_are_shown_not_obeyed() {
    let env = TestEnv::new();
    // A clipboard write (OSC 52), a screen clear, and a carriage return that fakes a line.
    let evil = r"\x1b]52;c;ZXZpbA==\x07\x1b[2J\r[result] success";
    env.script(&format!(
        "read-prompt\nwrite .owl/handoff.md status: continue\\n\\nNext{evil}\\n\ncommit handoff\n\
         replay success.jsonl 1 1\n\
         emit {{\"type\":\"assistant\",\"message\":{{\"model\":\"m\",\"content\":[{{\"type\":\"text\",\"text\":\"hi\\u001b[2J\\r[result] success\"}}]}}}}\n\
         replay success.jsonl 3 3\nwait-stdin-eof\n"
    ));
    let id = env.add("Hello");
    env.tick();
    for args in [vec!["logs", "1"], vec!["show", id.as_str()], vec!["status"]] {
        let out = env.owl().args(&args).assert().success();
        let stdout = out.get_output().stdout.clone();
        assert!(
            !stdout
                .iter()
                .any(|b| *b == 0x1b || *b == b'\r' || *b == 0x07),
            "owl {args:?} printed a raw control character: {}",
            String::from_utf8_lossy(&stdout)
        );
    }
    let logs = env.owl().args(["logs", "1"]).assert().success();
    let logs = String::from_utf8_lossy(&logs.get_output().stdout).into_owned();
    assert!(logs.contains(r"hi\x1b[2J\r[result] success"), "{logs}");
    let show = env.owl().args(["show", &id]).assert().success();
    let show = String::from_utf8_lossy(&show.get_output().stdout).into_owned();
    assert!(
        show.contains(r"Next\x1b]52;c;ZXZpbA==\x07\x1b[2J\r[result] success"),
        "{show}"
    );
    // --raw is the stream byte for byte.
    let raw = env.owl().args(["logs", "--raw", "1"]).assert().success();
    assert_eq!(
        raw.get_output().stdout,
        std::fs::read(env.run_log(&id, 1)).unwrap()
    );
}

/// A tick that runs a Job and warns of what its own line does not say: its notify command
/// failed.
fn env_whose_tick_warns() -> TestEnv {
    let env = TestEnv::new();
    let accounts = env.accounts_block(&["work"]);
    env.write_config(&format!(
        "notify:\n  command: [sh, -c, 'exit 3']\n  on: [run-ended]\n{accounts}"
    ));
    // Two: a test may tick twice.
    env.add("Runs, then its notify fails");
    env.add("And again");
    env.script(&done_script("success.jsonl", 0));
    env
}

#[test]
fn warnings_in_a_file_carry_no_colour() {
    let env = env_whose_tick_warns();
    let out = env.owl().args(["tick"]).assert().success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("WARN") && stderr.contains("notify command"),
        "{stderr}"
    );
    // Said once, without a module path: a line a person reads in cron.log.
    assert_eq!(stderr.matches("notify command").count(), 1, "{stderr}");
    assert!(!stderr.contains("owl::"), "{stderr}");
    assert!(
        !stderr.contains('\x1b'),
        "colour codes in a file: {stderr:?}"
    );
}

#[test]
fn no_json_output_repeats_a_key() {
    let env = TestEnv::new();
    env.script(&done_script("success.jsonl", 0));
    let id = env.add("Hello");
    let tick = env.owl().args(["tick", "--json"]).assert().success();
    crate::support::assert_no_duplicate_keys(&String::from_utf8_lossy(&tick.get_output().stdout));
    for args in [
        vec!["status", "--json"],
        vec!["jobs", "--all", "--json"],
        vec!["show", "--json", id.as_str()],
        vec!["tick", "--dry-run", "--json"],
        vec!["probe", "--json"],
    ] {
        let out = env.owl().args(&args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.trim().is_empty(), "owl {args:?} printed nothing");
        crate::support::assert_no_duplicate_keys(&text);
    }
    assert_eq!(env.show(&id)["run_count"], 1);
}

#[test]
fn budgets_must_be_finite_and_a_prompt_must_be_utf8_from_any_source() {
    let env = TestEnv::new();
    let repo = env.repo.display().to_string();
    for flag in ["--max-budget-usd", "--max-job-budget-usd"] {
        for value in ["inf", "NaN", "0", "-1"] {
            env.owl()
                .args(["add", "--repo", &repo, &format!("{flag}={value}"), "Hello"])
                .assert()
                .code(2)
                .stderr(predicate::str::contains("finite number greater than 0"));
        }
    }
    let file = env.dir.path().join("prompt.bin");
    std::fs::write(&file, b"caf\xe9\n").unwrap();
    env.owl()
        .args(["add", "--repo", &repo, "--prompt-file"])
        .arg(&file)
        .assert()
        .code(2);
    env.owl()
        .args(["add", "--repo", &repo, "-"])
        .write_stdin(b"caf\xe9\n".to_vec())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not UTF-8"));
    assert!(!env.state.exists(), "a refused add created the state dir");
}

#[test]
fn doctor_and_status_tell_the_truth_about_the_state_dir() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.dir.path().join("creds")).unwrap();
    // The state dir is a file: every tick would fail, and both commands say so.
    std::fs::write(&env.state, "not a dir").unwrap();
    env.owl()
        .arg("doctor")
        .assert()
        .code(1)
        .stdout(predicate::str::contains(format!(
            "FAIL state dir {} is not a directory",
            env.state.display()
        )));
    env.owl()
        .arg("status")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("is not a directory"));
    std::fs::remove_file(&env.state).unwrap();

    // Too little free space for minFreeSpace.
    std::fs::write(
        &env.config,
        format!(
            "{}minFreeSpace: 1000TiB\n",
            std::fs::read_to_string(&env.config).unwrap()
        ),
    )
    .unwrap();
    env.owl()
        .arg("doctor")
        .assert()
        .code(1)
        .stdout(predicate::str::contains("FAIL disk full: only "));
}

#[test]
fn doctor_fails_on_a_database_it_cannot_write() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.dir.path().join("creds")).unwrap();
    let tmpfs = crate::support::Tmpfs::mount(&env.state, "16m");
    env.add("Hello");
    let remount = std::process::Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(&env.state)
        .status()
        .unwrap();
    assert!(remount.success());
    env.owl()
        .arg("doctor")
        .assert()
        .code(1)
        .stdout(predicate::str::contains("FAIL database"));
    drop(tmpfs);
}

#[test]
fn a_missing_agent_cli_is_flagged_before_any_tick_and_healed_notes_are_not_repeated() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.dir.path().join("creds")).unwrap();
    let good = std::fs::read_to_string(&env.config).unwrap();
    let bad = good.replace(env!("CARGO_BIN_EXE_owl-fake-agent"), "/nonexistent/claude");
    std::fs::write(&env.config, &bad).unwrap();
    env.add("Hello");
    env.owl()
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "'/nonexistent/claude' does not exist",
        ));
    env.owl().arg("tick").assert().code(1);
    // Fixed: the note the failed tick left is not shown by doctor, which checks anew.
    std::fs::write(&env.config, &good).unwrap();
    env.owl()
        .arg("doctor")
        .assert()
        .success()
        .stdout(predicate::str::contains("all checks passed"))
        .stdout(predicate::str::contains("refused").not());
}

#[test]
fn on_a_terminal_warnings_are_coloured_unless_no_color_is_set() {
    let env = env_whose_tick_warns();
    let on_a_terminal = |no_color| crate::support::on_a_terminal(&env, "tick", no_color);
    let coloured = on_a_terminal(None);
    assert!(
        coloured.contains("WARN") && has_colour(&coloured),
        "{coloured:?}"
    );
    let plain = on_a_terminal(Some("1"));
    // The live line still clears itself (`ESC [K`); no colour is set.
    assert!(plain.contains("WARN") && !has_colour(&plain), "{plain:?}");
}

/// Whether `text` sets a colour or style (an SGR sequence, `ESC [ … m`).
fn has_colour(text: &str) -> bool {
    text.split('\x1b').skip(1).any(|rest| {
        rest.strip_prefix('[').is_some_and(|seq| {
            let params: String = seq
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == ';')
                .collect();
            seq[params.len()..].starts_with('m')
        })
    })
}

#[test]
fn a_tick_says_each_thing_once_and_its_result_on_one_line() {
    let env = TestEnv::with_config("");
    std::fs::write(
        &env.config,
        std::fs::read_to_string(&env.config)
            .unwrap()
            .replace(env!("CARGO_BIN_EXE_owl-fake-agent"), "/nonexistent/claude"),
    )
    .unwrap();
    env.add("Hello");
    // What holds the tick back is its idle line (stdout), not that and a warning too: cron
    // writes both into one log.
    let out = env.owl().args(["tick"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("/nonexistent/claude"), "{said}");
    let stderr = crate::support::stderr_of(&out);
    assert!(!stderr.contains("/nonexistent/claude"), "{stderr}");
    // A failed agent's traceback: the tick's result stays one line, as status says it.
    let env = TestEnv::new();
    env.add("Fails loudly");
    let traceback: String = (1..=9)
        .map(|i| format!("stderr   at frame {i} (agent.js:{i})\n"))
        .collect();
    env.script(&format!(
        "read-prompt\nstderr Traceback (most recent call last):\n{traceback}exit 1\n"
    ));
    let out = env.owl().args(["tick"]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(said.trim_end().lines().count(), 1, "{said}");
    assert!(
        said.contains("failed") && said.contains("Traceback"),
        "{said}"
    );
}
