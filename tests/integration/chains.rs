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
            .contains("1 Job waits for you"),
        "{idle}"
    );
    // Held for a person, who is told what releases it.
    let status = env.status();
    let held: Vec<&Value> = status["attention"].as_array().unwrap().iter().collect();
    assert!(
        held.iter().any(|q| q["job_id"] == "docs"
            && q["reason"]
                == "after callers, which is failed: `owl requeue callers` releases it (or \
                    `owl cancel docs`)"),
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

/// Writes `text` to the plan file and runs `owl add --from` on it.
fn add_from(env: &TestEnv, plan: &std::path::Path, text: &str) -> std::process::Output {
    std::fs::write(plan, text).unwrap();
    env.add_from(plan)
}

fn jobs_json(env: &TestEnv) -> Vec<Value> {
    let out = env
        .owl()
        .args(["jobs", "--all", "--json"])
        .assert()
        .success();
    serde_json::from_slice::<Value>(&out.get_output().stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn add_from_a_yaml_plan_queues_every_job_with_its_chain_and_a_bad_entry_queues_none() {
    let env = TestEnv::new();
    let queued = env.add_with(&["--name", "earlier"], "Already queued");
    // The plan sits beside the repository: `repo: repo` is taken from the file's directory.
    let plan = env.dir.path().join("night.yaml");
    let good = "\
- name: parser
  repo: repo
  prompt: Port the parser
  check: sh -c 'test -f ok'
- repo: repo
  prompt: Update the callers
  after: [parser, earlier]
  maxRuns: 2
- name: docs
  repo: repo
  prompt: Document it
  after: [parser]
  check: [make, docs]
";
    // One bad entry, the third: an Account that is not configured, at its own line.
    let bad = good.replace(
        "  after: [parser]\n",
        "  after: [parser]\n  account: wrok\n",
    );
    let out = add_from(&env, &plan, &bad);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("night.yaml: line 13: account 'wrok' is not configured"),
        "{err}"
    );
    assert!(err.contains("did you mean 'work'"), "{err}");
    assert_eq!(jobs_json(&env).len(), 1, "nothing was queued");

    let out = add_from(&env, &plan, good);
    assert!(out.status.success(), "{out:?}");
    let ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(ids[0], "parser");
    assert_eq!(ids[2], "docs");
    let callers = env.show(&ids[1]);
    assert_eq!(callers["after"], serde_json::json!(["parser", queued]));
    assert_eq!(callers["state"], "waiting");
    assert_eq!(callers["max_runs"], 2);
    // Two Jobs it waits for in the same repository: no stacking, its base is HEAD.
    assert_eq!(callers["base_after"], Value::Null);
    assert_eq!(env.show("docs")["base_after"], "parser");
    assert_eq!(
        env.show("docs")["check"]["command"],
        serde_json::json!(["make", "docs"])
    );
    assert_eq!(
        env.show("parser")["check"]["command"],
        serde_json::json!(["sh", "-c", "test -f ok"])
    );
}

#[test]
fn add_from_json_lines_names_the_line_and_key_and_refuses_a_cycle() {
    let env = TestEnv::new();
    let plan = env.dir.path().join("night.jsonl");
    let out = add_from(&env, &plan, "{\"name\":\"a\",\"repo\":\"repo\",\"prompt\":\"A\"}\n\n{\"name\":\"b\",\"repo\":\"repo\",\"prompt\":\"B\",\"maxRun\":3}\n");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("night.jsonl: line 3: unknown key 'maxRun' (did you mean 'maxRuns'?)"),
        "{err}"
    );

    let out = add_from(&env, &plan, "{\"name\":\"a\",\"repo\":\"repo\",\"prompt\":\"A\",\"after\":[\"b\"]}\n{\"name\":\"b\",\"repo\":\"repo\",\"prompt\":\"B\",\"after\":[\"a\"]}\n");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("a cycle (a → b → a)"), "{err}");
    assert!(
        !env.state.join("owl.db").exists(),
        "a refused plan made the state dir"
    );

    let out = add_from(
        &env,
        &plan,
        "{\"name\":\"a\",\"repo\":\"repo\",\"prompt\":\"A\"}\n{\"repo\":\"repo\",\"prompt\":\"B\",\"after\":[\"a\"],\"noCheck\":true}\n",
    );
    assert!(out.status.success(), "{out:?}");
    let ids = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(ids.lines().count(), 2, "{ids}");
    assert_eq!(jobs_json(&env).len(), 2);
}

#[test]
fn a_job_held_by_a_cancelled_one_waits_for_you_with_the_command_that_releases_it() {
    let env = TestEnv::new();
    let first = env.add("First");
    let second = env.add_with(&["--after", &first], "Second, after the first");
    env.owl().args(["cancel", &first]).assert().success();
    let status = env.status();
    // Not queued work a tick could take, nor a wait until a later time: the person's.
    assert_eq!(status["queue"].as_array().unwrap().len(), 0, "{status}");
    let held = &status["attention"][0];
    assert_eq!(held["job_id"], second.as_str(), "{status}");
    let release = format!("`owl requeue {first}` releases it");
    assert!(
        held["reason"].as_str().unwrap().contains(&release),
        "{held}"
    );
    let summary = status["summary"].as_str().unwrap();
    assert!(summary.contains("1 Job waits for you"), "{summary}");
    assert!(!summary.contains("later time"), "{summary}");
    let text = env.owl().arg("status").output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("Waiting for you") && text.contains(&release),
        "{text}"
    );
    assert!(env.show(&second)["now"]
        .as_str()
        .unwrap()
        .contains(&release));
    // Released as it says: the first queued again, the second waits for it as before.
    env.owl().args(["requeue", &first]).assert().success();
    let status = env.status();
    assert_eq!(status["queue"].as_array().unwrap().len(), 2, "{status}");
    assert!(
        status["attention"].as_array().unwrap().is_empty(),
        "{status}"
    );
}
