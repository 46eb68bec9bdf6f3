//! Months of history: what a tick, `status` and `show` ask of the store and of git stays
//! bounded by what they print, not by how many Jobs wait or how many Runs a Job had.

use serde_json::Value;

use crate::support::{done_script, git, TestEnv};

/// The statements a command sent the store, each with the rows it returned (or changed),
/// as `OWL_LOG=owl::sql=debug` tells them.
fn statements(stderr: &str) -> Vec<(String, usize)> {
    stderr
        .lines()
        .filter_map(|line| {
            let (_, said) = line.split_once(" sql: ")?;
            let (sql, rows) = said.rsplit_once(" rows=")?;
            Some((sql.to_string(), rows.trim().parse().ok()?))
        })
        .collect()
}

/// Runs `owl ARGS` with the store's statements traced: its JSON and the statements.
fn traced(env: &TestEnv, args: &[&str]) -> (Value, Vec<(String, usize)>) {
    let out = env
        .owl_std()
        .args(args)
        .env("OWL_LOG", "warn,owl::sql=debug")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{args:?}: {stderr}"
    );
    let json = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)));
    let statements = statements(&stderr);
    assert!(!statements.is_empty(), "no statement traced: {stderr}");
    (json, statements)
}

/// Queues `n` Jobs from plan files (a file holds 1,000 at most), each with `extra` lines;
/// the first named `first`.
fn queue(env: &TestEnv, n: usize, extra: &str) {
    let plan = env.dir.path().join("queue.yaml");
    let mut text = String::from("- name: first\n  repo: repo\n  prompt: The first\n");
    for i in 1..=n {
        if i == n || i % 500 == 0 {
            std::fs::write(&plan, std::mem::take(&mut text)).unwrap();
            let out = env.add_from(&plan);
            assert!(out.status.success(), "{out:?}");
        }
        if i < n {
            text.push_str(&format!("- repo: repo\n  prompt: Job {i}\n{extra}"));
        }
    }
}

#[test]
fn an_idle_tick_behind_a_held_account_reads_no_queued_job() {
    let env = TestEnv::with_config("    limits: {fiveHourMax: 60}\n");
    env.five_hour(&[65.0], "2026-11-30T05:00:00.000Z");
    queue(&env, 1000, "");
    // The first tick probes the Account and finds it over its ceiling.
    assert_eq!(env.tick()["action"], "idle");
    let (tick, statements) = traced(&env, &["tick", "--json"]);
    assert_eq!(tick["action"], "idle", "{tick}");
    let reason = tick["reason"].as_str().unwrap();
    assert!(reason.ends_with("(1000 Jobs wait for it)"), "{reason}");
    // What waits is counted by the store: no statement brings the queue's rows to owl.
    let rows: usize = statements.iter().map(|(_, n)| n).sum();
    assert!(rows < 40, "{rows} rows read: {statements:#?}");
}

#[test]
fn status_asks_a_fixed_number_of_questions_however_many_jobs_wait_for_you() {
    let asked = |n: usize| {
        let env = TestEnv::new();
        queue(&env, n + 1, "  after: [first]\n");
        // Every Job but the first failed: they wait for a person.
        let db = rusqlite::Connection::open(env.state.join("owl.db")).unwrap();
        db.execute(
            "UPDATE jobs SET state = 'failed', reason = 'its check failed', reason_data = NULL WHERE name IS NULL",
            [],
        )
        .unwrap();
        let (status, statements) = traced(&env, &["status", "--json"]);
        assert_eq!(status["attention"].as_array().unwrap().len(), n, "{status}");
        assert_eq!(status["attention"][0]["reason"], "its check failed");
        statements
    };
    let (one, thousand) = (asked(1), asked(1000));
    let sql = |s: &[(String, usize)]| s.iter().map(|(q, _)| q.clone()).collect::<Vec<_>>();
    assert!(
        sql(&one) == sql(&thousand),
        "{} statements for one Job, {} for a thousand",
        one.len(),
        thousand.len()
    );
}

#[test]
fn show_counts_each_runs_commits_after_its_branch_is_rewritten_or_its_repository_deleted() {
    let env = TestEnv::new();
    env.script(&done_script("success.jsonl", 0));
    let id = env.add("Fix the flaky test");
    assert_eq!(env.tick()["job_state"], "done");
    let shown = env.show(&id);
    assert_eq!(shown["runs"][0]["commits"], 1);
    // The branch where the Run left it: its commits are the Run's, as recorded.
    let branch_said = |shown: &Value| (shown["commits"].clone(), shown["files_changed"].clone());
    assert_eq!(branch_said(&shown), (1.into(), 1.into()));
    // The branch moved back to where it started: the Run still made its one commit, and
    // the branch, walked, has none beyond its base.
    let branch = shown["branch"].as_str().unwrap().to_string();
    git(
        &env.repo,
        &["update-ref", &format!("refs/heads/{branch}"), "main"],
    );
    let shown = env.show(&id);
    assert_eq!(shown["runs"][0]["commits"], 1);
    assert_eq!(branch_said(&shown), (0.into(), 0.into()));
    std::fs::remove_dir_all(&env.repo).unwrap();
    assert_eq!(env.show(&id)["runs"][0]["commits"], 1);
    let text = crate::support::show_text(&env, &id);
    assert!(text.contains("  commits: 1\n"), "{text}");
    // Not "not created yet": the Run made it, in a repository that is gone.
    assert!(
        text.contains("its repository is not there; each Run's commits are as recorded"),
        "{text}"
    );
}

/// The fsyncs `owl ARGS` makes of files under the state dir, as strace sees them: each
/// with the file it synced.
fn state_syncs(env: &TestEnv, args: &[&str]) -> Vec<String> {
    let owl = env.owl_std();
    let trace = env.dir.path().join("syncs.trace");
    let mut cmd = std::process::Command::new("strace");
    cmd.args([
        "-f",
        "-y",
        "-qq",
        "-e",
        "trace=fsync,fdatasync,sync_file_range,syncfs,sync",
    ])
    .arg("-o")
    .arg(&trace)
    .arg(owl.get_program())
    .args(args);
    for (k, v) in owl.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = cmd.output().expect("strace runs (apt-get install strace)");
    assert!(out.status.success(), "{out:?}");
    let state = env.state.display().to_string();
    std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .filter(|l| l.contains(&format!("<{state}/")) || l.contains(&format!("<{state}>")))
        .map(String::from)
        .collect()
}

#[test]
fn a_runs_tick_syncs_the_state_as_often_as_docs_performance_says() {
    let env = TestEnv::new();
    env.script(&done_script("success.jsonl", 0));
    let id = env.add("Fix the flaky test");
    let syncs = state_syncs(&env, &["tick", "--json"]);
    assert_eq!(env.status()["recent_runs"][0]["outcome"], "succeeded");
    let state = env.state.display().to_string();
    let mut synced: Vec<String> = syncs
        .iter()
        .map(|l| {
            let (_, file) = l.split_once(&format!("<{state}")).unwrap();
            file.split_once('>').unwrap().0.replace(&id, "JOB")
        })
        .collect();
    synced.sort();
    // The Run recorded before its agent starts (the WAL, and the state dir on the first
    // flush of the process), its transcript, its outcome kept beside it, its end recorded.
    assert_eq!(
        synced,
        [
            "",
            "/logs/JOB/1.jsonl",
            "/logs/JOB/1.outcome.json.partial",
            "/owl.db-wal",
            "/owl.db-wal"
        ],
        "{syncs:#?}"
    );
    // An idle tick flushes nothing: its heartbeat is not worth a flush.
    assert_eq!(state_syncs(&env, &["tick", "--json"]), Vec::<String>::new());
}

/// Statements sent, each with the rows it returned or changed.
type Sent = Vec<(String, usize)>;

/// The statements an idle tick behind a held Account and `status` send a PostgreSQL store
/// with `queued` Jobs waiting: each one round trip.
fn asked_of_postgres(queued: usize) -> (Sent, Sent) {
    let db = std::sync::Arc::new(crate::support::pg_server::Database::new());
    let env = TestEnv::machine(&db, "alpha", &["work"], "    limits: {fiveHourMax: 60}\n");
    env.five_hour(&[65.0], "2026-11-30T05:00:00.000Z");
    queue(&env, queued, "");
    // The first tick probes the Account and the next folds what it saw into the user's
    // day: from then on each is what every tick behind the held Account is.
    for _ in 0..2 {
        assert_eq!(env.tick()["action"], "idle");
    }
    let (tick, ticked) = traced(&env, &["tick", "--json"]);
    assert_eq!(tick["action"], "idle", "{tick}");
    let (status, statused) = traced(&env, &["status", "--json"]);
    let summary = status["summary"].as_str().unwrap();
    assert!(summary.contains(&format!("({queued} Job")), "{summary}");
    (ticked, statused)
}

#[test]
fn an_idle_tick_and_status_on_postgresql_send_a_few_statements_however_long_the_queue() {
    let (one, thousand) = (asked_of_postgres(1), asked_of_postgres(1000));
    let sql = |s: &[(String, usize)]| s.iter().map(|(q, _)| q.clone()).collect::<Vec<_>>();
    for (what, one, thousand, bound) in [
        ("idle tick", &one.0, &thousand.0, 29),
        ("status", &one.1, &thousand.1, 16),
    ] {
        assert_eq!(
            sql(one),
            sql(thousand),
            "{what}: the same statements, whatever waits"
        );
        // One connection for the whole command: its schema checked once.
        let checks = thousand
            .iter()
            .filter(|(q, _)| q.contains("FROM owl_schema"))
            .count();
        assert_eq!(checks, 1, "{what}: {:#?}", sql(thousand));
        assert!(
            thousand.len() <= bound,
            "{what}: {} statements after the connection (at most {bound}): {:#?}",
            thousand.len(),
            sql(thousand)
        );
    }
}
