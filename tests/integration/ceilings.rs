//! Utilization ceilings (ADR-0020): scheduling under them, stopping a Run that crosses
//! one, and running again after the Window resets.

use predicates::prelude::*;

use crate::support::{done_script, window, TestEnv};

/// One Account `work` with `fiveHourMax: 60, weeklyMax: 50`, polled every 200 ms.
fn ceiling_env() -> TestEnv {
    let env = TestEnv::new();
    env.write_config(
        "usagePollInterval: 200ms\naccounts:\n  work:\n    limits:\n      fiveHourMax: 60\n      weeklyMax: 50\n",
    );
    env
}

/// A Run that works until owl stops it: the first API response, then a long tool call.
const LONG_RUN: &str = "read-prompt\nreplay interrupt-control-request.jsonl 1 2\nsleep 30000\n";

#[test]
fn a_run_crossing_the_ceiling_is_stopped_and_runs_again_after_the_reset() {
    let mut env = ceiling_env();
    env.five_hour(&[40.0, 55.0, 65.0], "2026-11-30T05:00:00.000Z");
    env.script(LONG_RUN);
    let id = env.add("Climb");

    // The agent answers three polls (40, 55, then 65%): the third crosses, and owl
    // interrupts a Run that would otherwise work for 30 s.
    let tick = env.tick();
    assert_eq!(tick["outcome"], "interrupted");
    assert_eq!(
        tick["stop_reason"],
        "ceiling: five_hour 65% >= fiveHourMax 60"
    );
    assert_eq!(tick["job_state"], "waiting");
    let show = env.show(&id);
    assert_eq!(show["not_before"], "2026-11-30T05:00:00Z");
    assert_eq!(show["reason"], "ceiling: five_hour 65% >= fiveHourMax 60");
    // owl asked politely first: the interrupt went in on stdin after the usage requests.
    let stdin = env.recorded("stdin.jsonl");
    assert_eq!(
        stdin.matches(r#""subtype":"get_usage""#).count(),
        3,
        "{stdin}"
    );
    assert!(stdin.contains(r#""subtype":"interrupt""#));

    // The figure that crossed is recorded, with its source and Run.
    let status = env.status();
    let five = window(&status, "work", "five_hour");
    assert_eq!(five["percent"], 65.0);
    assert_eq!(five["source"], "get_usage");
    assert_eq!(five["run_id"], 1);
    assert_eq!(status["accounts"][0]["schedulable"], false);
    assert_eq!(status["queue"][0]["state"], "waiting");
    env.owl()
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains("work: not schedulable — five_hour 65% >= fiveHourMax 60 — not scheduled until 05:00 (in 2h)"))
        .stdout(predicate::str::contains("resets in 2h (05:00)"));

    // Before the reset: nothing runs.
    env.now = "2026-11-30T04:59:00Z".into();
    assert_eq!(env.tick()["action"], "idle");

    // The first tick after the reset probes (the figure is stale), then runs the Job.
    env.now = "2026-11-30T05:00:30Z".into();
    env.five_hour(&[5.0], "2026-11-30T10:00:00.000Z");
    env.script(&done_script("success.jsonl", 0));
    let tick = env.tick();
    assert_eq!(tick["action"], "ran");
    assert_eq!(tick["job_state"], "done");
    let status = env.status();
    assert_eq!(window(&status, "work", "five_hour")["percent"], 5.0);
    assert!(status["accounts"][0]["last_probe"]
        .as_str()
        .unwrap()
        .contains("five_hour 5%"));
}

#[test]
fn the_probe_finds_the_account_over_its_ceiling_and_starts_nothing() {
    let mut env = ceiling_env();
    env.five_hour(&[70.0], "2026-11-30T04:00:00.000Z");
    env.script(&done_script("success.jsonl", 0));
    let id = env.add("Hello");

    let tick = env.tick();
    assert_eq!(tick["action"], "idle");
    assert!(
        tick["reason"]
            .as_str()
            .unwrap()
            .contains("five_hour 70% >= fiveHourMax 60"),
        "{tick}"
    );
    assert!(env.show(&id)["runs"].as_array().unwrap().is_empty());
    assert_eq!(env.show(&id)["state"], "queued");
    // The probe wrote no prompt: no tokens were spent.
    let stdin = env.recorded("stdin.jsonl");
    assert!(!stdin.contains(r#""type":"user""#), "{stdin}");
    assert!(stdin.contains("get_usage"));
    env.owl()
        .args(["tick", "--dry-run"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "work: five_hour 70% >= fiveHourMax 60 — not scheduled until 04:00 (in 1h)",
        ));

    // After the reset the old 70% no longer counts: owl probes again and runs.
    env.now = "2026-11-30T04:00:01Z".into();
    let status = env.status();
    let five = window(&status, "work", "five_hour");
    assert!(
        five["percent"].is_null(),
        "a figure from before the reset is discarded: {five}"
    );
    assert_eq!(five["stale"], true);
    env.five_hour(&[10.0], "2026-11-30T09:00:00.000Z");
    assert_eq!(env.tick()["job_state"], "done");
}

#[test]
fn a_probe_that_learns_nothing_is_unknown_never_zero() {
    let env = ceiling_env();
    std::fs::write(&env.usage, "null\n").unwrap();
    env.script(&done_script("success.jsonl", 0));
    env.add("Hello");
    let tick = env.tick();
    assert_eq!(tick["action"], "ran");
    let status = env.status();
    assert!(status["accounts"][0]["last_probe"]
        .as_str()
        .unwrap()
        .starts_with("unknown"));
    assert!(window(&status, "work", "five_hour")["percent"].is_null());
}

/// Issue 23: the CLI answers "unknown" whether its API is there or not (2.1.332 asks the
/// API nothing before a prompt); with the Account's API taking no connection, the probe
/// says so, records an outage and backs the Account off as a Run's outage does, and no
/// Run is spent finding out.
#[test]
fn a_probe_that_cannot_reach_the_api_backs_the_account_off_before_any_run() {
    let env = TestEnv::new();
    let port = crate::support::closed_port();
    env.write_config(&format!(
        "accounts:\n  work:\n    env:\n      ANTHROPIC_BASE_URL: http://127.0.0.1:{port}\n    limits:\n      fiveHourMax: 60\n"
    ));
    std::fs::write(&env.usage, "null\n").unwrap();
    env.script(&done_script("success.jsonl", 0));
    let id = env.add("Hello");
    let tick = env.tick();
    assert_eq!(tick["action"], "idle", "{tick}");
    assert!(env.show(&id)["runs"].as_array().unwrap().is_empty());
    assert!(
        !env.record.join("stdin.jsonl").exists()
            || !env.recorded("stdin.jsonl").contains("\"type\":\"user\"")
    );
    let status = env.status();
    let account = &status["accounts"][0];
    assert_eq!(account["outages"], 1, "{account}");
    assert_eq!(
        account["backoff_until"], "2026-11-30T03:05:00Z",
        "{account}"
    );
    assert_eq!(account["schedulable"], false, "{account}");
    let last = account["last_probe"].as_str().unwrap();
    assert!(
        last.starts_with(&format!(
            "the API is unreachable: connecting to 127.0.0.1:{port}: "
        )),
        "{last}"
    );
    // `owl probe` says it in words and in JSON, exits 1, and backs off again (doubling).
    let out = env.owl().args(["probe", "--json"]).assert().code(1);
    let probe: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(probe[0]["result"], "unreachable", "{probe}");
    assert_eq!(probe[0]["logged_in"], serde_json::Value::Null, "{probe}");
    assert_eq!(
        env.status()["accounts"][0]["backoff_until"],
        "2026-11-30T03:10:00Z"
    );
    env.owl()
        .arg("probe")
        .assert()
        .code(1)
        .stdout(predicate::str::starts_with(
            "work: the API is unreachable: connecting to 127.0.0.1:",
        ));
}

#[test]
fn a_rejected_event_stops_the_run_as_rate_limited() {
    let env = ceiling_env();
    env.five_hour(&[30.0], "2026-11-30T05:00:00.000Z");
    env.script("read-prompt\nreplay rate-limit-rejected.jsonl\nwait-stdin-eof\nexit 1\n");
    let id = env.add("Hello");
    let tick = env.tick();
    assert_eq!(tick["outcome"], "rate_limited");
    assert_eq!(
        tick["stop_reason"],
        "rate limited: the provider rejected five_hour until 2026-11-30T06:31:11Z"
    );
    assert_eq!(env.show(&id)["not_before"], "2026-11-30T06:31:11Z");
    let status = env.status();
    let five = window(&status, "work", "five_hour");
    assert_eq!(five["percent"], 100.0);
    assert_eq!(five["source"], "rate_limit_event");
    assert_eq!(five["resets_at"], "2026-11-30T06:31:11Z");
}

#[test]
fn a_429_result_without_a_reset_time_waits_a_default_time() {
    let env = TestEnv::new();
    env.script("read-prompt\nreplay api-429-apikey.jsonl\nwait-stdin-eof\nexit 1\n");
    let id = env.add("Hello");
    let tick = env.tick();
    assert_eq!(tick["outcome"], "rate_limited");
    assert_eq!(tick["job_state"], "waiting");
    assert_eq!(env.show(&id)["not_before"], "2026-11-30T03:30:00Z");
    // No Window read 100%, yet the Account is held as long as its Job.
    let status = env.status();
    let reason = status["accounts"][0]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("rejected by the provider until 03:30"),
        "{reason}"
    );
}

#[test]
fn unknown_windows_are_kept_and_float_noise_is_dropped() {
    let env = ceiling_env();
    std::fs::write(
        &env.usage,
        r#"{"five_hour":{"utilization":55.00000000000001,"resets_at":"2026-11-30T05:00:00.000Z"},"seven_day_sonnet":null,"mystery_window":{"utilization":12,"resets_at":"2026-12-01T00:00:00.000Z"},"extra_usage":{"is_enabled":false,"utilization":null}}"#,
    )
    .unwrap();
    env.script(&done_script("success.jsonl", 0));
    env.add("Hello");
    env.tick();
    let status = env.status();
    assert_eq!(window(&status, "work", "five_hour")["percent"], 55.0);
    let mystery = window(&status, "work", "mystery_window");
    assert_eq!(mystery["percent"], 12.0);
    assert!(mystery["ceiling"].is_null());
    assert!(window(&status, "work", "seven_day_sonnet").is_null());
    assert!(window(&status, "work", "extra_usage").is_null());
    env.owl()
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains("55.0000").not())
        .stdout(predicate::str::contains("55%"));
}

#[test]
fn a_job_with_no_account_goes_to_the_one_with_the_most_headroom() {
    let env = TestEnv::new();
    let usage = |name: &str, percent: f64| {
        let path = env.dir.path().join(format!("{name}.usage"));
        std::fs::write(&path, format!(r#"{{"five_hour":{{"utilization":{percent},"resets_at":"2026-11-30T05:00:00.000Z"}}}}"#)).unwrap();
        path.display().to_string()
    };
    env.write_config(&format!(
        "defaults:\n  account: null\naccounts:\n  work:\n    env: {{FAKE_AGENT_USAGE: {}}}\n    limits: {{fiveHourMax: 60}}\n  home:\n    env: {{FAKE_AGENT_USAGE: {}}}\n    limits: {{fiveHourMax: 60}}\n",
        usage("work", 50.0),
        usage("home", 20.0)
    ));
    env.script(&done_script("success.jsonl", 0));
    env.add("Anywhere");
    // Probes of both Accounts tell owl their headroom; the Job goes to home (40 points left).
    let first = env.tick();
    assert_eq!(first["action"], "ran", "{first}");
    assert_eq!(first["account"], "home");
}

#[test]
fn limits_are_refused_when_misspelled_or_out_of_range() {
    let env = TestEnv::new();
    env.write_config(
        "accounts:\n  work:\n    limits:\n      fiveHourMax: 60\n      weeklymax: 50\n",
    );
    env.owl()
        .args(["config", "check"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
        "line 10: unknown key 'weeklymax' in 'accounts.work.limits' (did you mean 'weeklyMax'?)",
    ));
    env.write_config("accounts:\n  work:\n    limits:\n      fiveHourMax: 160\n");
    env.owl()
        .args(["config", "check"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("line 9: '160' is out of range"));
    env.write_config("accounts:\n  work:\n    limits:\n      fiveHourMax: 60\n");
    env.owl()
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains("no ceiling").not());
    env.write_config("accounts:\n  work: {}\n");
    env.owl()
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains("work: schedulable — no ceiling"));
}

#[test]
fn snapshots_older_than_the_retention_are_pruned_and_runs_kept() {
    let env = TestEnv::new();
    env.write_config(&format!(
        "snapshotRetention: 35d\naccounts:\n  work:\n    credentialStore: {}\n",
        env.dir.path().join("creds").display()
    ));
    env.script(&done_script("success.jsonl", 0));
    let id = env.add("Hello");
    env.tick();
    // A year of figures, written the way an old owl kept them: one a day.
    let db = rusqlite::Connection::open(env.state.join("owl.db")).unwrap();
    let now = chrono::DateTime::parse_from_rfc3339(crate::support::NOW).unwrap();
    for day in 0..365 {
        let at = (now - chrono::Duration::days(day)).to_utc();
        db.execute(
            "INSERT INTO snapshots (account, window, percent, observed_at, source) \
             VALUES ('work', 'five_hour', 10, ?1, 'get_usage')",
            [at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)],
        )
        .unwrap();
    }
    drop(db);
    env.tick();
    let db = rusqlite::Connection::open(env.state.join("owl.db")).unwrap();
    let count = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    // 35 days kept (days 0 to 34 and the boundary), the rest gone.
    let left = count("SELECT COUNT(*) FROM snapshots");
    assert!((35..=36).contains(&left), "{left} Snapshots left");
    assert_eq!(
        count("SELECT COUNT(*) FROM snapshots WHERE observed_at < '2026-10-26T03:00:00Z'"),
        0
    );
    assert_eq!(count("SELECT COUNT(*) FROM runs"), 1);
    assert_eq!(env.show(&id)["runs"].as_array().unwrap().len(), 1);
}

/// Issue 23: a provider's rejection holds the Account whatever its ceilings, so that no
/// other Job is started into the same rejection.
#[test]
fn a_rejection_holds_an_account_without_ceilings_until_its_reset() {
    let env = TestEnv::new();
    env.script("read-prompt\nreplay rate-limit-rejected.jsonl\nwait-stdin-eof\nexit 1\n");
    env.add("First");
    let tick = env.tick();
    assert_eq!(tick["outcome"], "rate_limited", "{tick}");
    let second = env.add("Second");
    let status = env.status();
    let account = &status["accounts"][0];
    assert_eq!(account["schedulable"], false, "{account}");
    let reason = account["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("rejected by the provider until 06:31"),
        "{reason}"
    );
    let tick = env.tick();
    assert_eq!(tick["action"], "idle", "{tick}");
    assert_eq!(env.show(&second)["runs"].as_array().unwrap().len(), 0);
    // After the reset, the Account runs again.
    let mut env = env;
    env.now = "2026-11-30T06:32:00Z".into();
    env.script(&done_script("success.jsonl", 0));
    assert_eq!(env.tick()["action"], "ran");
}

/// Issue 23: `runs` counts what `maxRuns` counts, and names the Runs that did not count.
#[test]
fn runs_are_shown_counted_against_max_runs_and_uncounted_beside() {
    let env = ceiling_env();
    env.five_hour(&[40.0, 65.0], "2026-11-30T05:00:00.000Z");
    env.script(LONG_RUN);
    let id = env.add("Climb");
    assert_eq!(env.tick()["outcome"], "interrupted");
    let show = env.show(&id);
    assert_eq!(
        (show["run_count"].clone(), show["counted_runs"].clone()),
        (1.into(), 0.into())
    );
    let text = env.owl().args(["show", &id]).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("runs 0/5 counted, 1 not counted"), "{text}");
    assert!(!text.contains("runs 1/5"), "{text}");
    let jobs = env.owl().args(["jobs", "--json"]).output().unwrap();
    let jobs: serde_json::Value = serde_json::from_slice(&jobs.stdout).unwrap();
    assert_eq!(jobs[0]["counted_runs"], 0, "{jobs}");
    assert_eq!(jobs[0]["run_count"], 1, "{jobs}");
    let text = env.owl().arg("jobs").output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains(" 0/5+1 "), "{text}");
}
