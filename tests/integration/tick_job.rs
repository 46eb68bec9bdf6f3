//! `owl tick --job ID`: one Job now, if it may run; `--ignore-ceiling` says what it skips;
//! the live line on a terminal and nothing extra off one.

use crate::support::{done_script, TestEnv};

fn ceiling_env() -> TestEnv {
    let env = TestEnv::new();
    env.write_config(
        "usagePollInterval: 200ms\naccounts:\n  work:\n    limits:\n      fiveHourMax: 60\n",
    );
    env
}

#[test]
fn a_named_job_runs_before_the_queues_first() {
    let env = TestEnv::new();
    env.script(&done_script("success.jsonl", 0));
    let first = env.add_with(&["--priority", "9"], "First in the queue");
    let named = env.add("Named");
    let out = env
        .owl()
        .args(["tick", "--json", "--job", &named])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let tick: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tick["job_id"], named.as_str(), "{tick}");
    assert_eq!(tick["job_state"], "done");
    assert_eq!(env.show(&first)["state"], "queued");
    // A finished Job cannot run again: said, with exit 1.
    let out = env
        .owl()
        .args(["tick", "--json", "--job", &named])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let tick: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tick["action"], "idle");
    assert!(
        tick["reason"].as_str().unwrap().contains("is done"),
        "{tick}"
    );
    env.owl().args(["tick", "--job", "nope"]).assert().code(2);
    env.owl()
        .args(["tick", "--ignore-ceiling"])
        .assert()
        .code(2);
}

#[test]
fn over_the_ceiling_a_named_job_waits_unless_told_to_ignore_it_loudly() {
    let env = ceiling_env();
    // Every figure the agent reports is over the ceiling: the probe before the pick finds it.
    env.five_hour(&[65.0], "2026-11-30T05:00:00.000Z");
    let id = env.add("Needed tonight anyway");
    let out = env.owl().args(["tick", "--job", &id]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("fiveHourMax 60"), "{text}");

    // A script that answers 65% to every poll and works a while: not stopped.
    env.script(
        "read-prompt\nreplay interrupt-control-request.jsonl 1 2\nsleep 1500\nwrite .owl/handoff.md status: done\\n\\nDone.\\n\ncommit handoff\nreplay success.jsonl 2 3\nwait-stdin-eof\n",
    );
    let out = env
        .owl()
        .args(["tick", "--json", "--job", &id, "--ignore-ceiling"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--ignore-ceiling: running job")
            && stderr.contains("five_hour 65% >= fiveHourMax 60")
            && stderr.contains("not stopped at a ceiling"),
        "{stderr}"
    );
    let tick: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tick["job_id"], id.as_str(), "{tick}");
    assert_eq!(tick["outcome"], "succeeded", "{tick}");
    // The figures were still recorded.
    let stdin = env.recorded("stdin.jsonl");
    assert!(stdin.contains(r#""subtype":"get_usage""#), "{stdin}");
}

#[test]
fn on_a_terminal_one_live_line_is_drawn_and_off_one_nothing() {
    let env = TestEnv::new();
    env.script("read-prompt\nreplay tool-use.jsonl 1 3\nsleep 700\nwrite .owl/handoff.md status: done\\n\\nDone.\\n\ncommit handoff\nreplay success.jsonl 2 3\nwait-stdin-eof\n");
    let id = env.add("Watch me");
    // `script` gives owl a terminal; its output is what the terminal got.
    let owl = env.owl_std();
    let mut argv = vec![owl.get_program().to_string_lossy().into_owned()];
    argv.extend(["tick".into(), "--job".into(), id.clone()]);
    let mut cmd = std::process::Command::new("script");
    cmd.args(["-qfec", &argv.join(" "), "/dev/null"]);
    for (k, v) in owl.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = cmd.output().unwrap();
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(
        screen.contains(&format!("owl: job {id} on work · 0m0")) && screen.contains("turn"),
        "{screen}"
    );
    assert!(screen.contains("\r\x1b[K"), "redrawn in place: {screen:?}");
    assert!(screen.contains("ran: job"), "{screen}");

    env.script(&done_script("success.jsonl", 0));
    let id = env.add("Nobody watching");
    let out = env.owl().args(["tick", "--job", &id]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("owl: job"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains('\x1b'));
}
