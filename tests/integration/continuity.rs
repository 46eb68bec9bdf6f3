//! Jobs that span Runs (ADR-0026, ADR-0017): a fresh context every Run, continuity
//! through the committed Handoff, owl's safety-net commit, budgets across Runs.

use predicates::prelude::*;
use serde_json::Value;

use crate::support::{git, held_run_script, TestEnv};

/// The user message of the fake agent's last Run.
fn last_prompt(env: &TestEnv) -> String {
    let stdin = env.recorded("stdin.jsonl");
    let first: Value = serde_json::from_str(stdin.lines().next().unwrap()).unwrap();
    first["message"]["content"].as_str().unwrap().to_string()
}

/// A Run that commits `file` and a Handoff with `status`, then ends normally.
fn working_run(file: &str, status: &str, note: &str) -> String {
    format!(
        "read-prompt\nwrite {file} {file}\\n\ncommit add {file}\n\
         write .owl/handoff.md status: {status}\\n{note}\\n\ncommit handoff: {status}\n\
         replay success.jsonl\nwait-stdin-eof\n"
    )
}

#[test]
fn a_job_done_in_three_runs_one_cut_short_at_a_ceiling_tells_its_whole_story() {
    let mut env = TestEnv::new();
    env.write_config(
        "usagePollInterval: 200ms\naccounts:\n  work:\n    limits: {fiveHourMax: 60}\n",
    );

    // Run 1: commits a step and says continue.
    env.five_hour(&[30.0], "2026-11-30T05:00:00.000Z");
    env.script(&working_run(
        "step1.txt",
        "continue",
        "Next: step 2, then tests.",
    ));
    let id = env.add("Build the feature in steps");
    assert_eq!(env.tick()["job_state"], "queued");

    // Run 2: works without committing, and crosses the ceiling.
    env.five_hour(&[50.0, 63.0], "2026-11-30T05:00:00.000Z");
    env.script("read-prompt\nwrite step2.txt half done\\n\nreplay interrupt-control-request.jsonl 1 2\nsleep 30000\n");
    let tick = env.tick();
    assert_eq!(tick["outcome"], "interrupted");
    assert_eq!(tick["job_state"], "waiting");
    let prompt2 = last_prompt(&env);
    assert!(
        prompt2.contains("Next: step 2, then tests."),
        "Run 2 starts from Run 1's Handoff: {prompt2}"
    );
    assert!(
        prompt2.contains("The previous Run: Run 1 ended normally"),
        "{prompt2}"
    );
    // The uncommitted tail was committed by owl, as owl, on the Job's branch.
    let branch = format!("owl/{id}");
    let head = git(&env.repo, &["log", "-1", "--format=%s|%an <%ae>", &branch]);
    assert_eq!(
        head.trim(),
        "owl: uncommitted work left by run 2|owl <owl@localhost>"
    );
    assert_eq!(
        git(&env.repo, &["show", &format!("{branch}:step2.txt")]),
        "half done\n"
    );

    // Run 3, after the reset: told what happened, finishes.
    env.now = "2026-11-30T05:00:01Z".into();
    env.five_hour(&[5.0], "2026-11-30T10:00:00.000Z");
    env.script(&working_run(
        "step3.txt",
        "done",
        "Feature complete; tests pass.",
    ));
    let tick = env.tick();
    assert_eq!(tick["job_state"], "done");
    let prompt3 = last_prompt(&env);
    assert!(prompt3.contains("Run 2 was stopped by owl at a usage ceiling (ceiling: five_hour 63% >= fiveHourMax 60)"), "{prompt3}");
    assert!(
        prompt3.contains("including owl's commit of what it left uncommitted"),
        "{prompt3}"
    );
    assert!(
        prompt3.contains("status: continue"),
        "the Handoff at the branch head is still Run 1's: {prompt3}"
    );

    // Every change is committed on the branch; the user's checkout is untouched.
    for f in ["step1.txt", "step2.txt", "step3.txt", ".owl/handoff.md"] {
        git(&env.repo, &["cat-file", "-e", &format!("{branch}:{f}")]);
    }
    assert_eq!(git(&env.repo, &["status", "--porcelain"]), "");
    assert_eq!(
        git(&env.repo, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "main"
    );

    let show = env.show(&id);
    assert_eq!(show["state"], "done");
    let outcomes: Vec<&str> = show["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["succeeded", "interrupted", "succeeded"]);
    assert_eq!(show["runs"][0]["commits"], 2);
    assert_eq!(show["runs"][1]["commits"], 1);
    assert!(show["runs"][1]["safety_commit"].is_string());
    assert_eq!(show["commits"], 5);
    assert!(show["handoff"]
        .as_str()
        .unwrap()
        .starts_with("status: done"));
    env.owl()
        .args(["show", &id])
        .assert()
        .success()
        .stdout(predicate::str::contains("state:    done"))
        .stdout(predicate::str::contains("5 commits beyond the base"))
        .stdout(predicate::str::contains("Run 2 on work: interrupted"))
        .stdout(predicate::str::contains(
            "reason: ceiling: five_hour 63% >= fiveHourMax 60",
        ))
        .stdout(predicate::str::contains("including owl's commit"))
        .stdout(predicate::str::contains("| Feature complete; tests pass."));
}

#[test]
fn a_job_that_never_says_done_fails_at_max_runs() {
    let env = TestEnv::new();
    env.script(&working_run("x.txt", "continue", "more to do"));
    let id = env.add_with(&["--max-runs", "2"], "Endless");
    assert_eq!(env.tick()["job_state"], "queued");
    assert_eq!(env.tick()["job_state"], "failed");
    let show = env.show(&id);
    assert_eq!(show["reason"], "maxRuns reached (2 Runs without done)");
    assert_eq!(env.tick()["action"], "idle");
    // Requeued by a person, it gets a fresh allowance (defaults.maxRuns: 5).
    env.owl()
        .args(["requeue", &id])
        .assert()
        .success()
        .stdout(predicate::str::contains("up to 5 more Runs"));
    assert_eq!(env.tick()["job_state"], "queued");
    assert_eq!(env.show(&id)["max_runs"], 7);
}

#[test]
fn the_job_budget_caps_each_run_and_fails_the_job_when_spent() {
    let env = TestEnv::new();
    // success.jsonl costs $0.006375 a Run.
    env.script(&working_run("x.txt", "continue", "more"));
    let id = env.add_with(&["--max-job-budget-usd", "0.01"], "Frugal");
    assert_eq!(env.tick()["job_state"], "queued");
    let argv: Vec<String> = serde_json::from_str(&env.recorded("argv.json")).unwrap();
    assert!(
        argv.windows(2).any(|w| w == ["--max-budget-usd", "0.01"]),
        "{argv:?}"
    );

    let tick = env.tick();
    let argv: Vec<String> = serde_json::from_str(&env.recorded("argv.json")).unwrap();
    assert!(
        argv.windows(2)
            .any(|w| w == ["--max-budget-usd", "0.003625"]),
        "the second Run gets what is left: {argv:?}"
    );
    assert_eq!(tick["job_state"], "failed");
    let show = env.show(&id);
    assert_eq!(show["reason"], "job budget spent");
    assert_eq!(show["cost_usd"], 0.01275);
    // Requeued with more money, it runs again.
    env.owl().args(["requeue", &id]).assert().success();
    assert_eq!(env.tick()["action"], "idle", "still no budget left");
    assert_eq!(env.show(&id)["reason"], "job budget spent: $0.01 of $0.01");
    env.owl()
        .args(["requeue", &id, "--max-job-budget-usd", "1"])
        .assert()
        .success();
    assert_eq!(env.tick()["action"], "ran");
}

#[test]
fn clean_removes_finished_worktrees_and_keeps_branches() {
    let env = TestEnv::new();
    env.script(&working_run("x.txt", "done", "all done"));
    let id = env.add("Quick");
    env.tick();
    let worktree = env.state.join("worktrees").join(&id);
    assert!(worktree.exists());
    env.owl()
        .args(["clean", &id])
        .assert()
        .success()
        .stdout(predicate::str::contains("kept"));
    assert!(!worktree.exists());
    git(&env.repo, &["cat-file", "-e", &format!("owl/{id}:x.txt")]);
    assert!(!git(&env.repo, &["worktree", "list"]).contains(&id));
    env.owl()
        .args(["clean", "--finished"])
        .assert()
        .success()
        .stdout(predicate::str::contains("no worktree to remove"));
    env.owl().arg("clean").assert().code(2);
}

#[test]
fn clean_refuses_a_running_job() {
    let env = TestEnv::new();
    env.script(&held_run_script(&env.release_file(), ""));
    let id = env.add("Busy");
    let tick = env.spawn_tick();
    env.wait_running();
    env.owl()
        .args(["clean", &id])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is running"));
    env.release();
    tick.wait_with_output().unwrap();
    assert!(env.state.join("worktrees").join(&id).exists());
}
