//! Several machines on one PostgreSQL store (started by the test run): one Run per Account across them, each machine's own Jobs, leases that expire, fencing, a cancel from another machine.

use std::process::Child;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::support::pg_server::Database;
use crate::support::{alive, done_script, finish, held_run_script, wait_until, TestEnv};

/// The shortest lease owl takes, so that a test waits seconds, not a minute, for one to
/// expire.
const LEASE: &str = "leaseLength: 10s\n";

fn live_runs(env: &TestEnv) -> Vec<Value> {
    env.status()["live_runs"].as_array().unwrap().clone()
}

#[test]
fn sixteen_ticks_on_two_machines_over_three_accounts_start_exactly_three_runs() {
    let db = Arc::new(Database::new());
    let accounts = ["work", "two", "three"];
    let a = TestEnv::machine(&db, "alpha", &accounts, LEASE);
    let b = TestEnv::machine(&db, "beta", &accounts, LEASE);
    for env in [&a, &b] {
        env.script(&held_run_script(
            &env.release_file(),
            "write .owl/handoff.md status: done\\n\ncommit handoff\n",
        ));
        for i in 0..3 {
            env.add(&format!("Job {i}"));
        }
    }
    let mut ticks: Vec<Child> = (0..16)
        .map(|i| if i % 2 == 0 { &a } else { &b }.spawn_tick())
        .collect();
    crate::support::wait_until_ticks_left(&mut ticks, 3, Duration::from_secs(120));
    // One plan per Account name, whichever machine runs it: three Runs in all.
    let live = live_runs(&a);
    assert_eq!(live.len(), 3, "{live:?}");
    let mut on: Vec<&str> = live
        .iter()
        .map(|r| r["account"].as_str().unwrap())
        .collect();
    on.sort();
    assert_eq!(on, ["three", "two", "work"]);
    // Each machine runs its own Jobs, and says which machine runs each Run.
    for r in &live {
        let machine = r["machine"].as_str().unwrap();
        let env = if machine == "alpha" { &a } else { &b };
        let job = r["job_id"].as_str().unwrap();
        assert_eq!(env.show(job)["runs"][0]["machine"], machine, "{r}");
        if machine != "alpha" {
            assert!(r["pid"].is_null() && r["supervisor_alive"].is_null(), "{r}");
            assert!(r["lease_until"].is_string(), "{r}");
        }
    }
    let status = a.status();
    crate::support::assert_schema("status", &status);
    let names: Vec<&str> = status["machines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alpha", "beta"]);
    a.release();
    b.release();
    let actions = crate::support::actions(ticks);
    assert_eq!(
        actions.iter().filter(|a| *a == "ran").count(),
        3,
        "{actions:?}"
    );
}

#[test]
fn a_job_added_on_one_machine_waits_for_it_on_another() {
    let db = Arc::new(Database::new());
    let a = TestEnv::machine(&db, "alpha", &["work"], LEASE);
    let b = TestEnv::machine(&db, "beta", &["work"], LEASE);
    let job = a.add("Here only");
    // beta sees the whole queue, and does not take alpha's Job (its repository is alpha's).
    let tick = b.tick();
    assert_eq!(tick["action"], "idle", "{tick}");
    let queue = &b.status()["queue"];
    assert_eq!(queue[0]["job_id"], job.as_str());
    assert_eq!(
        queue[0]["reason"],
        "runs on machine alpha, which has never ticked"
    );
    a.script(&done_script("success.jsonl", 0));
    let ran = a.tick();
    assert_eq!(ran["action"], "ran", "{ran}");
    assert_eq!(b.status()["queue"].as_array().unwrap().len(), 0);
    assert_eq!(b.show(&job)["runs"][0]["machine"], "alpha");
    // Its log is alpha's: beta says where, alpha prints it.
    let out = b.owl().args(["logs", &job]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(crate::support::stderr_of(&out).contains("ran on machine alpha"));
    a.owl().args(["logs", &job]).assert().success();
}

#[test]
fn a_killed_machine_frees_its_account_when_its_lease_expires() {
    let db = Arc::new(Database::new());
    let a = TestEnv::machine(&db, "alpha", &["work"], LEASE);
    let b = TestEnv::machine(&db, "beta", &["work"], LEASE);
    // The agent leaves a tool process in a session of its own, as the Bash tool does.
    a.script(&format!(
        "read-prompt\nreplay success.jsonl 1 1\nspawn-session 6174\nwait-for {}\n",
        a.release_file().display()
    ));
    let tools = || crate::support::processes_with("sleep 6174").len();
    let lost_job = a.add("Killed with its machine");
    let mut tick = a.spawn_tick();
    a.wait_running();
    wait_until("the agent's tool never started", || tools() == 1);
    // The machine's owl dies (kill -9), nothing recorded; its tool lives on, cut off.
    tick.kill().unwrap();
    tick.wait().unwrap();
    b.script(&done_script("success.jsonl", 0));
    let job = b.add("Next on the plan");
    let first = b.tick();
    assert_eq!(
        first["action"], "busy",
        "the Account is held while the lease lasts: {first}"
    );
    // Within the lease and a little more, a tick of beta records the Run lost and runs.
    wait_until("beta never took the Account back", || {
        b.tick()["action"] == "ran"
    });
    let lost = &a.show(&lost_job)["runs"][0];
    assert_eq!(lost["outcome"], "lost", "{lost}");
    let why = lost["stop_reason"].as_str().unwrap();
    assert!(
        why.contains("lease expired") && why.contains("machine alpha") && why.contains("beta"),
        "{why}"
    );
    assert_eq!(b.show(&job)["runs"][0]["outcome"], "succeeded");
    assert_eq!(
        a.show(&lost_job)["state"],
        "queued",
        "queued again, as a lost Run's Job"
    );
    // alpha's next tick kills what is left of its Run there: only alpha can.
    assert_eq!(tools(), 1, "beta cannot reach alpha's processes");
    a.script(&done_script("success.jsonl", 0));
    let out = a.owl().args(["tick", "--json"]).output().unwrap();
    let said = crate::support::stderr_of(&out);
    assert!(said.contains("recorded lost by another machine"), "{said}");
    wait_until("alpha's next tick left its lost Run's tool alive", || {
        tools() == 0
    });
}

#[test]
fn a_dropped_connection_is_made_again_and_the_run_goes_on() {
    let db = Arc::new(Database::new());
    let a = TestEnv::machine(&db, "alpha", &["work"], LEASE);
    a.script(&held_run_script(
        &a.release_file(),
        "write .owl/handoff.md status: done\\n\ncommit handoff\n",
    ));
    let job = a.add("Through a dropped connection");
    let tick = a.spawn_tick();
    a.wait_running();
    let dropped: i64 = db
        .admin()
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = 'owl' AND datname = current_database()",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(dropped >= 1, "the tick's connection was not there to drop");
    a.release();
    let out = finish(tick);
    assert_eq!(out["outcome"], "succeeded", "{out}");
    let run = &a.show(&job)["runs"][0];
    assert_eq!(run["outcome"], "succeeded", "{run}");
    assert_eq!(run["events"].as_array().unwrap().len(), 0);
}

#[test]
fn a_supervisor_whose_run_another_machine_recorded_lost_stops_it_and_the_first_outcome_stays() {
    let db = Arc::new(Database::new());
    let a = TestEnv::machine(&db, "alpha", &["work"], LEASE);
    let b = TestEnv::machine(&db, "beta", &["work"], LEASE);
    a.script(&held_run_script(&a.release_file(), ""));
    let job = a.add("Fenced");
    let tick = a.spawn_tick();
    a.wait_running();
    let agent = a.agent_pid();
    // Its renewals stop reaching the server (as across a cut network): the lease runs out.
    db.admin()
        .batch_execute("UPDATE runs SET lease_until = now() - interval '1 second'")
        .unwrap();
    let taken = b.tick();
    assert_eq!(taken["action"], "idle", "{taken}");
    // alpha's supervisor finds its token stale at its next renewal and stops its agent.
    let out = finish(tick);
    assert_eq!(out["action"], "ran", "{out}");
    wait_until("the fenced Run's agent outlived its stop", || !alive(agent));
    let run = &a.show(&job)["runs"][0];
    assert_eq!(run["outcome"], "lost", "the first outcome stays: {run}");
    let events = run["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{run}");
    let said = events[0]["text"].as_str().unwrap();
    assert!(
        said.contains("lease lost") && said.contains("interrupted"),
        "{said}"
    );
    assert_eq!(events[0]["machine"], "alpha");
    crate::support::assert_schema("show", &a.show(&job));
    let text = crate::support::show_text(&a, &job);
    assert!(text.contains("afterwards ("), "{text}");
}

#[test]
fn a_cancel_on_one_machine_stops_a_run_on_another() {
    let db = Arc::new(Database::new());
    let a = TestEnv::machine(&db, "alpha", &["work"], LEASE);
    let b = TestEnv::machine(&db, "beta", &["work"], LEASE);
    a.script(&held_run_script(&a.release_file(), ""));
    let job = a.add("Cancelled from beta");
    let tick = a.spawn_tick();
    a.wait_running();
    b.owl().args(["cancel", &job]).assert().success();
    let out = finish(tick);
    assert_eq!(out["job_state"], "cancelled", "{out}");
    assert_eq!(b.show(&job)["runs"][0]["stop"], "cancelled");
}

#[test]
fn two_hosts_ticking_under_one_name_are_refused() {
    let db = Arc::new(Database::new());
    let a = TestEnv::machine(&db, "alpha", &["work"], LEASE);
    a.tick();
    // Another host took the name a moment ago: what a copied config would do.
    db.admin()
        .batch_execute("UPDATE machines SET host = 'another host'")
        .unwrap();
    let out = a.owl().args(["tick"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = crate::support::stderr_of(&out);
    assert!(
        said.contains("another host ticked as machine 'alpha'"),
        "{said}"
    );
}

#[test]
fn a_store_url_with_a_password_is_refused_on_its_line_without_printing_it() {
    let mut env = TestEnv::new();
    env.store = None;
    env.write_config(&format!(
        "{}store: postgres://owl:hunter2@db.example/owl\n",
        env.accounts_block(&["work"])
    ));
    let out = env.owl().args(["config", "check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = crate::support::stderr_of(&out);
    assert!(
        said.contains("carries a password") && said.contains("line "),
        "{said}"
    );
    assert!(!said.contains("hunter2"), "{said}");
}

#[test]
fn no_form_of_a_store_value_prints_its_password_anywhere() {
    let mut env = TestEnv::new();
    env.store = None;
    for (value, secret) in [
        (
            "'host=db user=owl password=X9secret dbname=owl'",
            "X9secret",
        ),
        ("postgres://owl:Abc@Def9@host/owl", "Def9"),
        ("postgres://owl:Abc9?Def@host/owl", "Abc9"),
        ("'postgres://owl:Abc9#Def@host/owl'", "Abc9"),
        ("postgres://owl:Abc9%40Def@host/owl", "Abc9"),
        ("postgres://owl@host/owl?PASSWORD=Zz9secret", "Zz9secret"),
        ("'postgres://owl:Qq9secret@host/owl '", "Qq9secret"),
    ] {
        env.write_config(&format!(
            "{}store: {value}\n",
            env.accounts_block(&["work"])
        ));
        for command in [&["config", "check"][..], &["status"][..], &["add", "x"][..]] {
            let out = env.owl().args(command).output().unwrap();
            assert_eq!(out.status.code(), Some(2), "{value} {command:?}: {out:?}");
            let said = crate::support::stderr_of(&out) + &String::from_utf8_lossy(&out.stdout);
            assert!(!said.contains(secret), "{value} {command:?}: {said}");
            assert!(said.contains("line "), "{value} {command:?}: {said}");
        }
    }
}

#[test]
fn an_unreachable_store_fails_fast_naming_host_and_role() {
    let mut env = TestEnv::new();
    env.store = None;
    let port = crate::support::closed_port();
    env.write_config(&format!(
        "{}store: postgres://owl@127.0.0.1:{port}/owl\n",
        env.accounts_block(&["work"])
    ));
    for args in [vec!["tick"], vec!["status", "--json"]] {
        let out = env
            .owl()
            .args(&args)
            .env("PGPASSWORD", "a-secret-password")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let said = crate::support::stderr_of(&out);
        assert!(
            said.contains(&format!("postgres://owl@127.0.0.1:{port}/owl")),
            "{said}"
        );
        assert!(!said.contains("a-secret-password"), "{said}");
    }
    assert!(!env.state.join("worktrees").exists(), "nothing started");
    // A server that refuses the login: the same, with the server's word.
    let db = Database::new();
    env.write_config(&format!(
        "{}store: {}\n",
        env.accounts_block(&["work"]),
        db.url()
    ));
    let out = env
        .owl()
        .args(["status"])
        .env("PGPASSWORD", "not-the-password")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let said = crate::support::stderr_of(&out);
    // The server's word, or PgBouncer's when the suite runs through it.
    assert!(
        said.contains("password authentication failed")
            || said.contains("FATAL: SASL authentication failed"),
        "{said}"
    );
    assert!(said.contains("postgres://owl@127.0.0.1:"), "{said}");
    assert!(!said.contains("not-the-password"), "{said}");
}

#[test]
fn a_sqlite_state_is_copied_whole_into_an_empty_store_and_only_an_empty_one() {
    let mut env = TestEnv::new();
    env.store = None;
    env.machine = Some("laptop".into());
    env.write_config(&env.accounts_block(&["work"]));
    env.script(&done_script("success.jsonl", 0));
    let done = env.add("Done before the move");
    assert_eq!(env.tick()["outcome"], "succeeded");
    let queued = env.add_with(&["--after", &done], "Queued after it");
    let before = env.show(&done);
    let db = Arc::new(Database::new());
    let out = store_copy(&env, &db.url());
    assert!(out.status.success(), "{}", crate::support::stderr_of(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("2 jobs") && said.contains("1 runs"), "{said}");
    // The same machine, now on the store: everything it had, its rows named for it.
    env.store = Some(db.clone());
    env.write_config(&env.accounts_block(&["work"]));
    let after = env.show(&done);
    assert_eq!(after["runs"][0]["outcome"], before["runs"][0]["outcome"]);
    assert_eq!(after["runs"][0]["id"], before["runs"][0]["id"]);
    assert_eq!(after["runs"][0]["machine"], "laptop");
    assert_eq!(env.show(&queued)["state"], "queued");
    // New rows number on from the copied ones.
    env.tick();
    assert_eq!(env.show(&queued)["runs"][0]["id"], 2);
    // A store with owl's rows is refused, and nothing in it changes.
    let again = store_copy(&env, &db.url());
    assert_eq!(again.status.code(), Some(2));
    assert!(crate::support::stderr_of(&again).contains("is not empty"));
    let refused = store_copy(&env, "postgres://owl:hunter2@127.0.0.1/owl");
    assert_eq!(refused.status.code(), Some(2));
    assert!(!crate::support::stderr_of(&refused).contains("hunter2"));
}

#[test]
fn naming_the_machine_after_first_use_strands_nothing_and_the_copy_follows_the_name() {
    // First use, before `machine:`: the host's name is the machine's.
    let mut env = TestEnv::new();
    env.store = None;
    env.write_config(&env.accounts_block(&["work"]));
    env.script(&done_script("success.jsonl", 0));
    let first = env.add("Added before the machine had a name");
    let second = env.add("Also before");
    // Named now: what was queued under the host's name runs here all the same.
    env.machine = Some("laptop".into());
    env.write_config(&env.accounts_block(&["work"]));
    let status = env.owl().arg("status").output().unwrap();
    let said = String::from_utf8_lossy(&status.stdout);
    assert!(!said.contains("runs on machine"), "{said}");
    assert_eq!(env.tick()["job_id"], first.as_str());
    // Moved into a shared store, every row is named for the machine as it is named now,
    // as README's step 4 says, and the queue goes on there.
    let db = Arc::new(Database::new());
    let out = store_copy(&env, &db.url());
    assert!(out.status.success(), "{}", crate::support::stderr_of(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("the rows named for machine laptop"));
    env.store = Some(db.clone());
    env.write_config(&env.accounts_block(&["work"]));
    let status = env.status();
    let names: Vec<&str> = status["machines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["laptop"], "{status}");
    assert_eq!(env.show(&first)["runs"][0]["machine"], "laptop");
    assert_eq!(env.tick()["job_id"], second.as_str());
}

#[test]
fn a_renamed_machine_is_told_what_waits_on_its_old_name_and_moves_it() {
    let db = Arc::new(Database::new());
    let mut env = TestEnv::machine(&db, "vm", &["work"], LEASE);
    assert_eq!(env.tick()["action"], "idle");
    let job = env.add("Queued under the old name");
    let done = env.add("Finished before");
    env.owl().args(["cancel", &done]).assert().success();
    env.machine = Some("laptop".into());
    env.write_config(&env.accounts_block(&["work"]));
    let status = env.owl().arg("status").output().unwrap();
    let said = String::from_utf8_lossy(&status.stdout);
    assert!(
        said.contains("runs on machine vm, which ticked from this host")
            && said.contains("`owl move --from vm`"),
        "{said}"
    );
    // A finished Job does not move; the queued one does, and runs here.
    let refused = env.owl().args(["move", &done]).output().unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(crate::support::stderr_of(&refused).contains("is cancelled"));
    let out = env.owl().args(["move", "--from", "vm"]).output().unwrap();
    assert!(out.status.success(), "{}", crate::support::stderr_of(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("moved to machine laptop: {job}")
    );
    env.script(&done_script("success.jsonl", 0));
    assert_eq!(env.tick()["job_id"], job.as_str());
    // To another machine, with the repository's path there.
    let other = env.add("For beta");
    env.owl()
        .args(["move", &other, "--to", "beta", "--repo", "/srv/repo"])
        .assert()
        .success();
    let jobs = env.owl().args(["jobs", "--json"]).output().unwrap();
    let jobs: Value = serde_json::from_slice(&jobs.stdout).unwrap();
    let moved = jobs
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == other.as_str())
        .unwrap();
    assert_eq!(moved["machine"], "beta", "{moved}");
    assert_eq!(moved["repo"], "/srv/repo", "{moved}");
}

#[test]
fn moving_a_job_on_a_store_one_machine_has_is_refused_in_words() {
    let mut env = TestEnv::new();
    env.store = None;
    env.write_config(&env.accounts_block(&["work"]));
    let job = env.add("Here");
    let out = env
        .owl()
        .args(["move", &job, "--to", "beta"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(crate::support::stderr_of(&out).contains("this store is one machine's"));
}

#[test]
fn show_of_another_machines_job_says_where_its_worktree_log_and_session_are() {
    let db = Arc::new(Database::new());
    let a = TestEnv::machine(&db, "alpha", &["work"], LEASE);
    let b = TestEnv::machine(&db, "beta", &["work"], LEASE);
    b.script(&done_script("success.jsonl", 0));
    let job = b.add("On beta");
    assert_eq!(b.tick()["outcome"], "succeeded");
    let shown = a.show(&job);
    assert_eq!(shown["machine"], "beta", "{shown}");
    assert!(shown["worktree"].is_null(), "{shown}");
    assert_eq!(b.show(&job)["machine"], "beta");
    assert!(b.show(&job)["worktree"].as_str().unwrap().ends_with(&job));
    let out = a.owl().args(["show", &job]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!(
            "worktree: on machine beta, which runs it (`owl show {job}` there)"
        )),
        "{said}"
    );
    assert!(
        said.contains("log: on machine beta (`owl logs 1` there)"),
        "{said}"
    );
    assert!(
        said.contains("(on machine beta, in the worktree:"),
        "{said}"
    );
    assert!(!said.contains(&a.state.display().to_string()), "{said}");
    let jobs = a.owl().args(["jobs", "--all", "--json"]).output().unwrap();
    let jobs: Value = serde_json::from_slice(&jobs.stdout).unwrap();
    assert_eq!(jobs[0]["machine"], "beta", "{jobs}");
}

#[test]
fn a_store_that_cannot_be_reached_or_logged_in_to_says_why_in_words() {
    let db = Arc::new(Database::new());
    let env = TestEnv::machine(&db, "alpha", &["work"], LEASE);
    let status = |config: &str, pgpass: Option<&str>| {
        let file = env.dir.path().join("store.yaml");
        let text = std::fs::read_to_string(&env.config).unwrap();
        std::fs::write(&file, text.replace(&db.url(), config)).unwrap();
        let mut cmd = env.owl();
        cmd.env("OWL_CONFIG", &file).env_remove("PGPASSWORD");
        let passfile = env.dir.path().join("pgpass");
        match pgpass {
            Some(line) => {
                std::fs::write(&passfile, line).unwrap();
                cmd.env("PGPASSFILE", &passfile);
            }
            None => {
                cmd.env("PGPASSFILE", env.dir.path().join("no-such-pgpass"));
            }
        }
        let out = cmd.arg("status").output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        crate::support::stderr_of(&out)
    };
    let port = crate::support::pg_server::store_port();
    let name = db.name.clone();
    // No password anywhere: each place looked in is named.
    let said = status(&db.url(), None);
    assert!(
        said.contains("the server asked for role owl's password and owl found none")
            && said.contains("PGPASSWORD is not set")
            && said.contains("no-such-pgpass cannot be read: it does not exist"),
        "{said}"
    );
    // A database spelled otherwise than the password file's line: the likely mistake.
    let line = format!(
        "127.0.0.1:{port}:{name}:owl:{}\n",
        crate::support::pg_server::PASSWORD
    );
    let typo = db.url().replace(&format!("/{name}"), "/owl_typo");
    let said = status(&typo, Some(&line));
    assert!(
        said.contains(&format!("has no line for 127.0.0.1:{port}:owl_typo:owl"))
            && said.contains("it has one for another database"),
        "{said}"
    );
    // Nothing listening, and a host no one knows: said so, without an OS error number.
    let said = status(&db.url().replace(&format!(":{port}/"), ":1/"), Some(&line));
    assert!(
        said.contains("nothing listens at 127.0.0.1:1 (connection refused)"),
        "{said}"
    );
    assert!(!said.contains("os error"), "{said}");
    let said = status(
        &db.url().replace("127.0.0.1", "owl-no-such-host.invalid"),
        Some(&line),
    );
    assert!(
        said.contains("the host owl-no-such-host.invalid is not known"),
        "{said}"
    );
}

#[test]
fn status_names_the_machines_that_tick_and_forgets_those_long_gone() {
    let db = Arc::new(Database::new());
    let mut gone = TestEnv::machine(&db, "gone", &["work"], LEASE);
    gone.now = "2026-10-01T03:00:00Z".into();
    assert_eq!(gone.tick()["action"], "idle");
    let mut quiet = TestEnv::machine(&db, "quiet", &["work"], LEASE);
    quiet.now = "2026-11-27T03:00:00Z".into();
    assert_eq!(quiet.tick()["action"], "idle");
    let waited_on = TestEnv::machine(&db, "waited-on", &["work"], LEASE);
    let mut old = TestEnv::machine(&db, "old", &["work"], LEASE);
    old.now = "2026-10-02T03:00:00Z".into();
    assert_eq!(old.tick()["action"], "idle");
    waited_on
        .owl()
        .args([
            "add",
            "--machine",
            "old",
            "--repo",
            "/srv/repo",
            "Waits for old",
        ])
        .assert()
        .success();
    let here = TestEnv::machine(&db, "here", &["work"], LEASE);
    assert_eq!(here.tick()["action"], "idle");
    // Past snapshotRetention (35 d) and waited on by nothing: forgotten by the tick.
    let names: Vec<String> = here.status()["machines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["here", "old", "quiet"], "{names:?}");
    // Not seen for days: named on one line, not listed as if it ticked.
    let out = here.owl().arg("status").output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("not seen for a day or more: old, quiet"),
        "{said}"
    );
    assert!(!said.contains("quiet            last tick"), "{said}");
}

fn store_copy(env: &TestEnv, url: &str) -> std::process::Output {
    env.owl()
        .args(["store", "copy", "--to", url])
        .env("PGPASSWORD", crate::support::pg_server::PASSWORD)
        .output()
        .unwrap()
}

#[test]
fn a_login_missing_on_one_machine_holds_the_account_there_only() {
    let db = Arc::new(Database::new());
    let a = TestEnv::machine(&db, "alpha", &["work"], LEASE);
    let b = TestEnv::machine(&db, "beta", &["work"], LEASE);
    // alpha's CLI finds no login there (a 401 from the API).
    a.script("read-prompt\nreplay api-401-oauth.jsonl\nwait-stdin-eof\nexit 1\n");
    a.add("On alpha");
    assert_eq!(a.tick()["outcome"], "failed");
    let on_alpha = &a.status()["accounts"][0];
    assert!(on_alpha["not_logged_in"].is_string(), "{on_alpha}");
    // beta's login is its own: the Account is schedulable there, and runs beta's Job.
    let on_beta = &b.status()["accounts"][0];
    assert!(on_beta["not_logged_in"].is_null(), "{on_beta}");
    b.script(&done_script("success.jsonl", 0));
    let job = b.add("On beta");
    assert_eq!(b.tick()["outcome"], "succeeded");
    assert_eq!(b.show(&job)["runs"][0]["machine"], "beta");
    assert!(
        a.status()["accounts"][0]["not_logged_in"].is_string(),
        "still alpha's"
    );
}

#[test]
fn a_job_added_for_another_machine_runs_there_in_its_repository() {
    let db = Arc::new(Database::new());
    let a = TestEnv::machine(&db, "alpha", &["work"], LEASE);
    let b = TestEnv::machine(&db, "beta", &["work"], LEASE);
    let there = b.repo.display().to_string();
    // alpha cannot check beta's path: it is taken as given, the base resolved on beta.
    let out = a
        .owl()
        .args(["add", "--machine", "beta", "--repo", &there, "For beta"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", crate::support::stderr_of(&out));
    let job = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(a.tick()["action"], "idle");
    b.script(&done_script("success.jsonl", 0));
    let ran = b.tick();
    assert_eq!(ran["outcome"], "succeeded", "{ran}");
    assert_eq!(a.show(&job)["runs"][0]["machine"], "beta");
    let branches = crate::support::git(&b.repo, &["branch", "--list", &format!("owl/{job}")]);
    assert!(branches.contains(&format!("owl/{job}")), "{branches}");
    // Without a shared store, or without the path, it is refused on the spot.
    let mut alone = TestEnv::new();
    alone.store = None;
    alone.write_config(&alone.accounts_block(&["work"]));
    let out = alone
        .owl()
        .args(["add", "--machine", "beta", "--repo", &there, "Nowhere"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = a
        .owl()
        .args(["add", "--machine", "beta", "No path"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// alpha's Run, live, when its path to the store breaks (`fault`), and what it left.
struct Broken {
    a: TestEnv,
    job: String,
    tick: Child,
    /// The URL alpha reaches the store by, through the proxy.
    through: String,
}

/// Starts a Run on alpha, which reaches the store through `proxy`, breaks the path with
/// `fault`, and returns once beta took the Account: never while alpha's agent lived (two
/// Runs on one plan at once).
fn a_run_whose_path_breaks(
    db: &Arc<Database>,
    proxy: &crate::support::pg_server::Proxy,
    fault: impl FnOnce(&crate::support::pg_server::Proxy),
) -> Broken {
    let a = TestEnv::machine(db, "alpha", &["work"], LEASE);
    let through = through_proxy(&a, db, proxy);
    let b = TestEnv::machine(db, "beta", &["work"], LEASE);
    a.script(&held_run_script(&a.release_file(), ""));
    let job = a.add("Behind a path that breaks");
    let tick = a.spawn_tick();
    a.wait_running();
    let agent = a.agent_pid();
    fault(proxy);
    b.script(&done_script("success.jsonl", 0));
    b.add("Waits for the Account");
    wait_until("beta never took the Account", || {
        let ran = b.tick()["action"] == "ran";
        if ran {
            assert!(!alive(agent), "beta started while alpha's agent still ran");
        }
        ran
    });
    Broken {
        a,
        job,
        tick,
        through,
    }
}

#[test]
fn a_machine_cut_off_from_the_store_stops_its_run_before_another_takes_the_account() {
    let db = Arc::new(Database::new());
    let proxy = crate::support::pg_server::Proxy::start();
    let Broken {
        a,
        job,
        tick,
        through,
    } = a_run_whose_path_breaks(&db, &proxy, crate::support::pg_server::Proxy::cut);
    let out = tick.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("lease"), "{said}");
    // The network back: alpha's next tick finds its Run recorded lost by beta, once; its
    // own supervisor could not read the store to settle it when it stopped (see
    // docs/scaling.md), so nothing of its is added.
    let config = std::fs::read_to_string(&a.config).unwrap();
    std::fs::write(&a.config, config.replace(&through, &db.url())).unwrap();
    a.script(&done_script("success.jsonl", 0));
    a.owl().args(["tick"]).assert().success();
    let runs = a.show(&job)["runs"].as_array().unwrap().clone();
    assert_eq!(runs[0]["outcome"], "lost", "{runs:?}");
    assert!(
        runs[0]["stop_reason"]
            .as_str()
            .unwrap()
            .contains("recorded by machine beta"),
        "{runs:?}"
    );
    assert!(
        runs.iter().skip(1).all(|r| r["id"] != runs[0]["id"]),
        "recorded once"
    );
}

/// alpha's config pointed at the store through `proxy`; the URL it reaches it by.
fn through_proxy(env: &TestEnv, db: &Database, proxy: &crate::support::pg_server::Proxy) -> String {
    let through = db.url().replace(
        &format!(":{}/", crate::support::pg_server::store_port()),
        &format!(":{}/", proxy.port),
    );
    let config = std::fs::read_to_string(&env.config).unwrap();
    std::fs::write(&env.config, config.replace(&db.url(), &through)).unwrap();
    through
}

/// Waits for `child` to end, at most `secs`: one that is still running then is killed and
/// fails the test (a command that hangs on the store is the fault under test).
fn ended_within(mut child: Child, secs: u64, what: &str) -> std::process::Output {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what} still ran after {secs} s; it said: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_silent_path_to_the_store_kills_the_agent_by_the_lease_clock_before_another_takes_the_account()
{
    let db = Arc::new(Database::new());
    let proxy = crate::support::pg_server::Proxy::start();
    // Every byte alpha sends is acknowledged and held: no socket timeout ever fires, and
    // the renewal in flight never returns.
    let Broken {
        a,
        job,
        tick,
        through,
    } = a_run_whose_path_breaks(&db, &proxy, crate::support::pg_server::Proxy::silence);
    // alpha's tick does not hang on the statement: it gives up, naming the store and what
    // it was doing, and says its agent was killed.
    let out = ended_within(tick, 30, "alpha's tick");
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    let store = format!("127.0.0.1:{}/", proxy.port);
    assert!(
        said.contains("did not answer within") && said.contains(&store),
        "{said}"
    );
    assert!(said.contains("agent was killed"), "{said}");
    assert!(
        !said.contains(crate::support::pg_server::PASSWORD),
        "{said}"
    );
    // The path back: the Run is lost, recorded once, by beta.
    let config = std::fs::read_to_string(&a.config).unwrap();
    std::fs::write(&a.config, config.replace(&through, &db.url())).unwrap();
    let runs = a.show(&job)["runs"].as_array().unwrap().clone();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["outcome"], "lost", "{runs:?}");
}

#[test]
fn a_silent_store_ends_each_command_within_its_bound_naming_the_store_and_the_step() {
    let db = Arc::new(Database::new());
    let proxy = crate::support::pg_server::Proxy::start();
    let a = TestEnv::machine(&db, "alpha", &["work"], LEASE);
    a.add("Queued before the silence");
    through_proxy(&a, &db, &proxy);
    proxy.silence();
    let store = format!("postgres://owl@127.0.0.1:{}/", proxy.port);
    for args in [
        &["status"][..],
        &["tick"],
        &["add", "Never recorded"],
        &["show", "--json", "1"],
        &["jobs"],
    ] {
        let child = a
            .owl_std()
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The connect's bound is 5 s; the margin is for a loaded machine, not the bound.
        let out = ended_within(child, 20, &format!("owl {args:?}"));
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "owl {args:?}: {said}");
        assert!(said.contains(&store), "owl {args:?}: {said}");
        assert!(
            said.contains("did not answer within 5 s (connecting"),
            "owl {args:?}: {said}"
        );
    }
}

#[test]
fn the_store_stopped_and_started_again_under_a_live_run_loses_nothing() {
    let server = crate::support::pg_server::OwnServer::start();
    let mut a = TestEnv::new();
    a.store = None;
    a.machine = Some("alpha".into());
    a.write_config(&format!(
        "{}{LEASE}store: {}\n",
        a.accounts_block(&["work"]),
        server.url()
    ));
    a.extra_env.push((
        "PGPASSWORD".into(),
        crate::support::pg_server::PASSWORD.into(),
    ));
    a.script(&held_run_script(
        &a.release_file(),
        "write .owl/handoff.md status: done\\n\ncommit handoff\n",
    ));
    let job = a.add("Through a restart");
    let tick = a.spawn_tick();
    a.wait_running();
    // The server goes down under the live Run, and comes back within the lease.
    server.ctl("stop");
    server.ctl("start");
    a.release();
    let out = finish(tick);
    assert_eq!(out["outcome"], "succeeded", "{out}");
    let run = &a.show(&job)["runs"][0];
    assert_eq!(
        run["outcome"], "succeeded",
        "recorded once, when the store was back: {run}"
    );
    assert_eq!(a.show(&job)["runs"].as_array().unwrap().len(), 1);
    assert_eq!(a.show(&job)["state"], "done");
}

#[test]
fn max_concurrent_runs_counts_each_machines_own_runs() {
    let db = Arc::new(Database::new());
    let one_at_a_time = format!("{LEASE}maxConcurrentRuns: 1\n");
    let a = TestEnv::machine(&db, "alpha", &["work", "two"], &one_at_a_time);
    let b = TestEnv::machine(&db, "beta", &["work", "two"], &one_at_a_time);
    a.script(&held_run_script(&a.release_file(), ""));
    a.add("alpha's one Run");
    let held = a.spawn_tick();
    a.wait_running();
    // alpha is at its cap; beta's cap is its own, and the Account alpha holds is not free.
    a.add("alpha's second");
    assert_eq!(a.tick()["action"], "busy");
    b.script(&done_script("success.jsonl", 0));
    b.add("beta's");
    let ran = b.tick();
    assert_eq!(ran["action"], "ran", "{ran}");
    let on = a.status()["live_runs"][0]["account"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(
        ran["account"].as_str().unwrap(),
        on,
        "one live Run per Account"
    );
    a.release();
    finish(held);
}

#[test]
fn a_figure_one_machine_sees_holds_the_account_on_every_other_at_once() {
    let db = Arc::new(Database::new());
    let a = TestEnv::machine(&db, "alpha", &["work"], LEASE);
    let b = TestEnv::machine(&db, "beta", &["work"], LEASE);
    a.write_config(&format!(
        "{}    limits: {{fiveHourMax: 60}}\n{LEASE}",
        a.accounts_block(&["work"])
    ));
    b.write_config(&format!(
        "{}    limits: {{fiveHourMax: 60}}\n{LEASE}",
        b.accounts_block(&["work"])
    ));
    a.five_hour(&[95.0], "2026-11-30T05:00:00.000Z");
    a.owl().args(["probe", "work"]).assert().success();
    let on_beta = &b.status()["accounts"][0];
    assert_eq!(on_beta["schedulable"], false, "{on_beta}");
    assert!(
        on_beta["reason"].as_str().unwrap().contains("95%"),
        "{on_beta}"
    );
}

#[test]
fn a_plan_file_may_queue_jobs_for_another_machine() {
    let db = Arc::new(Database::new());
    let a = TestEnv::machine(&db, "alpha", &["work"], LEASE);
    let b = TestEnv::machine(&db, "beta", &["work"], LEASE);
    let plan = a.dir.path().join("night.yaml");
    std::fs::write(
        &plan,
        format!(
            "- name: here\n  prompt: On alpha\n  repo: {}\n- name: there\n  prompt: On beta\n  repo: {}\n  machine: beta\n",
            a.repo.display(),
            b.repo.display()
        ),
    )
    .unwrap();
    let out = a.add_from(&plan);
    assert!(out.status.success(), "{}", crate::support::stderr_of(&out));
    assert_eq!(a.show("there")["runs"].as_array().unwrap().len(), 0);
    b.script(&done_script("success.jsonl", 0));
    let ran = b.tick();
    assert_eq!(ran["job_id"], "there", "{ran}");
    // An entry for another machine needs that machine's absolute path.
    std::fs::write(
        &plan,
        "- prompt: Where?\n  repo: relative\n  machine: beta\n",
    )
    .unwrap();
    let out = a.add_from(&plan);
    assert_eq!(out.status.code(), Some(2));
    assert!(crate::support::stderr_of(&out).contains("absolute path"));
}

#[test]
fn the_stores_password_never_reaches_an_agent_or_its_check() {
    let db = Arc::new(Database::new());
    let a = TestEnv::machine(&db, "alpha", &["work"], LEASE);
    a.script(&done_script("success.jsonl", 0));
    let job = a.add_with(&["--check", "sh -c 'env > check-env.txt'"], "Checked");
    let ran = a
        .owl()
        .args(["tick", "--json"])
        .env("PGPASSFILE", "/nonexistent/pgpass")
        .assert()
        .success();
    let ran: Value = serde_json::from_slice(&ran.get_output().stdout).unwrap();
    assert_eq!(ran["outcome"], "succeeded", "{ran}");
    let agent_env: Value = serde_json::from_str(&a.recorded("env.json")).unwrap();
    assert!(agent_env.get("PGPASSWORD").is_none(), "{agent_env}");
    assert!(agent_env.get("PGPASSFILE").is_none(), "{agent_env}");
    let worktree = a.state.join("worktrees").join(&job);
    let checked = std::fs::read_to_string(worktree.join("check-env.txt")).unwrap();
    assert!(!checked.contains("PGPASSWORD") && !checked.contains("owl-test-password"));
}

#[test]
fn another_machines_expired_lease_is_said_as_such_in_status() {
    let db = Arc::new(Database::new());
    let a = TestEnv::machine(&db, "alpha", &["work"], LEASE);
    let b = TestEnv::machine(&db, "beta", &["work"], LEASE);
    a.script(&held_run_script(&a.release_file(), ""));
    a.add("Leased");
    let tick = a.spawn_tick();
    a.wait_running();
    // alpha's supervisor renews nothing while it is stopped; its lease runs out. Stopped
    // outside a transaction: one held open would hold the Run's row, and the update below
    // would wait on it for ever.
    let stop = |signal| unsafe { libc::kill(tick.id() as i32, signal) };
    wait_until("alpha was never stopped outside a transaction", || {
        stop(libc::SIGSTOP);
        let open: i64 = db
            .admin()
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 \
                 AND application_name = 'owl' AND state LIKE 'idle in transaction%'",
                &[&db.name],
            )
            .unwrap()
            .get(0);
        if open > 0 {
            stop(libc::SIGCONT);
        }
        open == 0
    });
    db.admin()
        .batch_execute("UPDATE runs SET lease_until = now() - interval '1 second'")
        .unwrap();
    let status = b.status();
    let running = &status["live_runs"][0];
    assert_eq!(running["lease_expired"], true, "{status}");
    crate::support::assert_schema("status", &status);
    let out = b.owl().arg("status").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("on machine alpha, its lease expired at ")
            && text.contains(": the next tick records the Run lost"),
        "{text}"
    );
    assert!(!text.contains("lease until"), "{text}");
    stop(libc::SIGCONT);
    a.release();
    finish(tick);
}

#[test]
fn ci_stops_the_postgresql_server_it_started() {
    // A cluster of its own, as .ci/postgres makes the shared one; then what .ci/run does
    // as it ends, whatever way it ends.
    let server = crate::support::pg_server::OwnServer::start();
    let reachable = || std::net::TcpStream::connect(("127.0.0.1", server.port)).is_ok();
    assert!(reachable());
    let stop = || crate::support::pg_server::ci_postgres(server.dir(), &["stop"]);
    let out = stop();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!reachable(), "the server still listens on {}", server.port);
    // Stopping what is stopped is no error, and .ci/run asks for it on exit.
    assert!(stop().status.success());
    let run = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/run")).unwrap();
    let trap = run
        .lines()
        .find(|l| l.starts_with("trap '"))
        .unwrap_or_default();
    assert!(
        trap.contains(".ci/postgres stop") && trap.contains(".ci/pgbouncer stop"),
        "{run}"
    );
    assert!(
        run.contains("--no-install-recommends --no-upgrade"),
        "{run}"
    );
    server.ctl("start");
}
