//! Jobs that wait for Jobs: `owl add --after`, the base a stacked Job starts from, a chain
//! held by a dependency that fails until it is requeued and done; `owl add --from FILE`.

use serde_json::Value;

use crate::support::{done_script, git, TestEnv};

/// A Run that ends without a Handoff: with `--max-runs 1` its Job fails.
const NO_HANDOFF: &str = "read-prompt\nreplay success.jsonl\nwait-stdin-eof\n";

fn tick_job(env: &TestEnv) -> Value {
    env.tick()
}

#[test]
fn a_chain_waits_for_a_failed_link_until_it_is_requeued_and_done_and_the_work_stacks() {
    let env = TestEnv::new();
    let a = env.add_with(&["--name", "parser"], "Port the parser");
    let b = env.add_with(
        &["--name", "callers", "--after", "parser", "--max-runs", "1"],
        "Update the callers",
    );
    let c = env.add_with(&["--name", "docs", "--after", "callers"], "Document it");
    let shown = env.show(&c);
    assert_eq!(shown["state"], "waiting");
    assert_eq!(shown["after"], serde_json::json!(["callers"]));
    assert_eq!(shown["base_after"], "callers");
    assert!(
        shown["now"]
            .as_str()
            .unwrap()
            .contains("after callers (waiting)"),
        "{shown}"
    );

    env.script(&done_script("success.jsonl", 0));
    assert_eq!(tick_job(&env)["job_id"], a.as_str());
    // The second link fails (its one Run leaves no Handoff): the third waits, saying so.
    env.script(NO_HANDOFF);
    let tick = tick_job(&env);
    assert_eq!(tick["job_id"], b.as_str());
    assert_eq!(tick["job_state"], "failed");
    let idle = tick_job(&env);
    assert_eq!(idle["action"], "idle", "{idle}");
    assert!(
        idle["reason"]
            .as_str()
            .unwrap()
            .contains("after callers (failed)"),
        "{idle}"
    );
    let status = env.status();
    let queued: Vec<&Value> = status["queue"].as_array().unwrap().iter().collect();
    assert!(
        queued
            .iter()
            .any(|q| q["job_id"] == "docs" && q["reason"] == "after callers (failed)"),
        "{status}"
    );

    // Requeued and done, the second releases the third, which starts where it ended.
    env.owl().args(["requeue", &b]).assert().success();
    env.script(&done_script("success.jsonl", 0));
    assert_eq!(tick_job(&env)["job_id"], b.as_str());
    let callers_tip = git(&env.repo, &["rev-parse", "owl/callers"])
        .trim()
        .to_string();
    let tick = tick_job(&env);
    assert_eq!(tick["job_id"], c.as_str(), "{tick}");
    assert_eq!(tick["job_state"], "done");
    let shown = env.show(&c);
    assert_eq!(shown["base"], "owl/callers");
    assert_eq!(shown["base_commit"], callers_tip.as_str());
    // The work stacks: the parser's commit is in the docs branch, under the callers'.
    git(
        &env.repo,
        &["merge-base", "--is-ancestor", "owl/parser", "owl/docs"],
    );
    git(
        &env.repo,
        &["merge-base", "--is-ancestor", "owl/callers", "owl/docs"],
    );
    let jobs = env.owl().args(["jobs", "--all"]).assert().success();
    let jobs = String::from_utf8_lossy(&jobs.get_output().stdout).into_owned();
    assert!(jobs.contains("[after callers] Document it"), "{jobs}");
}

#[test]
fn add_after_refuses_an_unknown_or_cancelled_job_and_an_explicit_base_wins() {
    let env = TestEnv::new();
    let out = env
        .owl()
        .args(["add", "--repo"])
        .arg(&env.repo)
        .args(["--after", "nope", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let first = env.add_with(&["--name", "first"], "First");
    let out = env
        .owl()
        .args(["add", "--repo"])
        .arg(&env.repo)
        .args(["--after", "frist", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("did you mean 'first'"));
    env.owl().args(["cancel", &first]).assert().success();
    let out = env
        .owl()
        .args(["add", "--repo"])
        .arg(&env.repo)
        .args(["--after", "first", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cancelled"));
    let second = env.add_with(&["--name", "second"], "Second");
    let explicit = env.add_with(&["--after", "second", "--base", "main"], "On main");
    let shown = env.show(&explicit);
    assert_eq!(shown["base_after"], Value::Null);
    assert_eq!(shown["base"], "main");
    assert_eq!(shown["after"], serde_json::json!([second]));
}
