//! What people read: `status`, `show` and `tick --dry-run` as text, pinned over fixed states
//! (insta snapshots in tests/integration/snapshots/). A change to the wording shows up as a
//! diff to review with `cargo insta review`, never by accident.

use crate::support::{done_script, TestEnv};

/// The text a command printed, with what differs from one run of the test to the next
/// (temporary paths, Job ids, commit ids) put in words that do not.
fn stable(env: &TestEnv, jobs: &[(&str, &str)], text: &str) -> String {
    let mut text = text.replace(&env.dir.path().display().to_string(), "[TMP]");
    for (id, name) in jobs {
        text = text.replace(id, name);
    }
    without_commit_ids(&text)
}

/// `[COMMIT]` for every word of ten or more hex digits (a commit id, whole or abbreviated;
/// not a piece of a session's UUID, which the fixture fixes).
fn without_commit_ids(text: &str) -> String {
    let mut out = String::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        let in_uuid = out.ends_with('-');
        if word.len() >= 10 && !in_uuid && word.chars().any(|c| c.is_ascii_digit()) {
            out.push_str("[COMMIT]");
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_ascii_hexdigit() && !c.is_ascii_uppercase() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

fn stdout(env: &TestEnv, args: &[&str]) -> String {
    let out = env.owl().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A night's state: one Job stopped at a ceiling and waiting for the reset, one done, one
/// queued behind the ceiling.
fn night() -> (TestEnv, Vec<(String, &'static str)>) {
    let env = TestEnv::new();
    env.write_config(
        "usagePollInterval: 200ms\naccounts:\n  work:\n    limits:\n      fiveHourMax: 60\n      weeklyMax: 50\n",
    );
    env.five_hour(&[30.0], "2026-11-30T05:00:00.000Z");
    env.script(&done_script("success.jsonl", 0));
    let done = env.add("Fix the flaky test");
    assert_eq!(env.tick()["job_state"], "done");

    env.five_hour(&[40.0, 65.0], "2026-11-30T05:00:00.000Z");
    env.script("read-prompt\nreplay interrupt-control-request.jsonl 1 2\nsleep 30000\n");
    let climbed = env.add("Refactor the parser");
    assert_eq!(env.tick()["job_state"], "waiting");
    let queued = env.add("Write the docs");
    (
        env,
        vec![(done, "JOB-D1"), (climbed, "JOB-W2"), (queued, "JOB-Q3")],
    )
}

fn ids<'a>(jobs: &'a [(String, &'static str)]) -> Vec<(&'a str, &'static str)> {
    jobs.iter().map(|(id, name)| (id.as_str(), *name)).collect()
}

#[test]
fn the_text_people_read_over_a_fixed_night() {
    let (env, jobs) = night();
    let (done, waiting) = (jobs[0].0.as_str(), jobs[1].0.as_str());
    for (name, args) in [
        ("status_after_a_run_stopped_at_a_ceiling", vec!["status"]),
        ("show_of_a_job_stopped_at_a_ceiling", vec!["show", waiting]),
        ("show_of_a_job_done_in_one_run", vec!["show", done]),
        ("tick_dry_run_behind_a_ceiling", vec!["tick", "--dry-run"]),
    ] {
        let text = stdout(&env, &args);
        insta::assert_snapshot!(name, stable(&env, &ids(&jobs), &text));
    }
}
