//! The plan as Claude Code 2.1.332 reports it (its PROTOCOL.md): a figure on every
//! `rate_limit_event`, the per-model weekly Window, and extra usage, replayed from the
//! transcripts the real CLI printed against the loopback mock.

use predicates::prelude::*;

use crate::support::{window, TestEnv};

/// A 2.1.332 transcript beside the 2.1.197 ones the fake agent reads by default.
fn recorded(name: &str) -> String {
    format!("../claude-code-2.1.332/{name}.jsonl")
}

/// One Account `work` with `limits` (a flow map's insides) and a poll that never comes in
/// time: whatever stops a Run comes from the stream.
fn env_with(limits: &str) -> TestEnv {
    env_with_top("", limits)
}

/// Like [`env_with`], with `top` (whole lines) before the Account.
fn env_with_top(top: &str, limits: &str) -> TestEnv {
    let env = TestEnv::new();
    env.write_config(&format!(
        "usagePollInterval: 1h\n{top}accounts:\n  work:\n    credentialStore: {}\n    limits: {{{limits}}}\n",
        env.dir.path().join("creds").display()
    ));
    env
}

#[test]
fn a_run_is_stopped_at_the_allowed_event_that_crosses_not_at_the_next_poll() {
    let env = env_with("fiveHourMax: 50, weeklyMax: 50");
    // Responses 0 and 1 of the recording (42%, then 55%), then a tool that would run 30 s.
    env.script(&format!(
        "read-prompt\nreplay {} 1 6\nsleep 30000\n",
        recorded("unified-windows-allowed")
    ));
    let id = env.add("Climb");
    let tick = env.tick();
    assert_eq!(tick["outcome"], "interrupted", "{tick}");
    assert_eq!(
        tick["stop_reason"],
        "ceiling: five_hour 55% >= fiveHourMax 50"
    );
    // The Job waits for the reset the event named (resetsAt 1796161237).
    let show = env.show(&id);
    assert_eq!(show["state"], "waiting");
    assert_eq!(show["not_before"], "2026-12-01T21:40:37Z");
    assert_eq!(show["runs"][0]["stop"], "ceiling");
    assert_eq!(show["runs"][0]["counts"], false);
    let status = env.status();
    let five = window(&status, "work", "five_hour");
    assert_eq!(five["percent"], 55.0);
    assert_eq!(five["source"], "rate_limit_event");
    assert_eq!(five["kind"], "five_hour");
    assert_eq!(window(&status, "work", "seven_day")["percent"], 30.0);
    // The one poll owl sent (after the first response) was answered "unknown": only the
    // stream could have stopped it.
    let stdin = env.recorded("stdin.jsonl");
    assert!(stdin.contains(r#""subtype":"interrupt""#), "{stdin}");
}

#[test]
fn a_full_model_week_holds_the_account_while_its_week_reads_30() {
    let env = env_with("fiveHourMax: 60, weeklyMax: 50");
    // 7d_oi at 1.0 (status rejected) while the request is allowed, then a long tool.
    env.script(&format!(
        "read-prompt\nreplay {} 1 3\nsleep 30000\n",
        recorded("seven-day-oi-window-rejected-request-allowed")
    ));
    let id = env.add("Fable week");
    let tick = env.tick();
    assert_eq!(tick["outcome"], "interrupted", "{tick}");
    assert_eq!(
        tick["stop_reason"],
        "ceiling: seven_day_overage_included 100% >= weeklyMax 50"
    );
    let status = env.status();
    let week = window(&status, "work", "seven_day");
    assert_eq!(week["percent"], 30.0);
    let fable = window(&status, "work", "seven_day_overage_included");
    assert_eq!(fable["percent"], 100.0);
    assert_eq!(fable["kind"], "model_weekly");
    assert_eq!(status["accounts"][0]["schedulable"], false);
    let reason = status["accounts"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("seven_day_overage_included"), "{reason}");
    // A second Job waits too, and the next tick says which Window holds it.
    env.add("Another");
    let idle = env.tick();
    assert_eq!(idle["action"], "idle", "{idle}");
    assert!(
        idle["reason"]
            .as_str()
            .unwrap()
            .contains("seven_day_overage_included"),
        "{idle}"
    );
    assert_eq!(env.show(&id)["state"], "waiting");
}

#[test]
fn overage_in_use_under_status_allowed_stops_the_run_and_holds_the_account() {
    // No ceiling at all: extra usage is refused whatever the ceilings say.
    let env = TestEnv::new();
    env.script(&format!(
        "read-prompt\nreplay {} 1 3\nsleep 30000\n",
        recorded("overage-in-use-header-only")
    ));
    let id = env.add("On credits");
    let tick = env.tick();
    assert_eq!(tick["outcome"], "interrupted", "{tick}");
    assert_eq!(
        tick["stop_reason"],
        "extra usage: five_hour is used up and the plan billed usage credits (allowExtraUsage is off)"
    );
    let show = env.show(&id);
    let run = &show["runs"][0];
    assert_eq!(run["stop"], "extra_usage");
    assert_eq!(run["counts"], false, "a stop of owl's: not the Job's Run");
    assert_eq!(show["state"], "waiting");
    assert_eq!(show["not_before"], "2026-12-01T21:41:13Z");
    // The Account as a whole is held, though its five-hour figure reads 50%.
    let status = env.status();
    assert_eq!(window(&status, "work", "five_hour")["percent"], 50.0);
    let account = &status["accounts"][0];
    assert_eq!(account["schedulable"], false);
    assert!(
        account["reason"].as_str().unwrap().contains("extra usage"),
        "{account}"
    );
    env.add("Next");
    assert_eq!(env.tick()["action"], "idle");
    env.owl()
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "work: not schedulable — extra usage: five_hour is used up",
        ));
}

#[test]
fn the_first_credited_response_stops_the_run_before_its_tool() {
    let env = TestEnv::new();
    // Response 0 at 97% (a warning), response 1 through on credits: isUsingOverage.
    env.script(&format!(
        "read-prompt\nreplay {} 1 6\nsleep 30000\nreplay {} 7\n",
        recorded("overage-in-use"),
        recorded("overage-in-use")
    ));
    env.add("On credits");
    let tick = env.tick();
    assert_eq!(tick["outcome"], "interrupted", "{tick}");
    assert!(
        tick["stop_reason"]
            .as_str()
            .unwrap()
            .starts_with("extra usage: five_hour"),
        "{tick}"
    );
}

#[test]
fn an_account_that_allows_extra_usage_runs_on() {
    let env = env_with("allowExtraUsage: true");
    env.script(&format!(
        "read-prompt\nreplay {}\n",
        recorded("overage-in-use-header-only")
    ));
    env.add("On credits, allowed");
    let tick = env.tick();
    assert_ne!(tick["outcome"], "interrupted", "{tick}");
    assert!(tick["stop_reason"].is_null(), "{tick}");
    env.owl()
        .args(["config", "check"])
        .assert()
        .success()
        .stdout(predicate::str::contains("allowExtraUsage: true"));
}

#[test]
fn the_clis_own_auth_status_keeps_a_run_off_an_account_without_a_login() {
    let mut env = env_with("fiveHourMax: 60");
    env.script("read-prompt\nreplay success.jsonl\n");
    let id = env.add("Hello");
    env.extra_env.push((
        "FAKE_AGENT_AUTH".into(),
        r#"{"loggedIn":false,"authMethod":"none","apiProvider":"firstParty"}"#.into(),
    ));
    let tick = env.tick();
    assert_eq!(tick["action"], "idle", "{tick}");
    assert!(
        tick["reason"].as_str().unwrap().contains("not logged in"),
        "{tick}"
    );
    let show = env.show(&id);
    assert_eq!(show["state"], "queued");
    assert!(
        show["runs"].as_array().unwrap().is_empty(),
        "no Run started"
    );
    // The Job's own view says why it waits, in the words of status.
    let now = show["now"].as_str().unwrap_or_default();
    assert!(
        now.starts_with("waits for any Account to be schedulable (work: not logged in"),
        "{show}"
    );
    let text = env.owl().args(["show", &id]).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains(&format!("  now:      {now}")), "{text}");
    let status = env.status();
    assert!(status["accounts"][0]["not_logged_in"]
        .as_str()
        .unwrap()
        .contains("auth status"));
    // The login steps once, on the Account's line, ending with the probe that notices it;
    // the queue and the idle line name the Account's standing only.
    let text = env.owl().arg("status").output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert_eq!(text.matches("/login").count(), 1, "{text}");
    assert!(
        text.contains("then /login, then `owl probe work`"),
        "{text}"
    );
    assert!(text.contains("(1 Job waits for it)"), "{text}");
    // An API key where the ceilings need a plan: refused the same way.
    env.extra_env.pop();
    let env2 = env_with("fiveHourMax: 60");
    let mut env2 = env2;
    env2.script("read-prompt\nreplay success.jsonl\n");
    env2.add("Hello");
    env2.extra_env.push((
        "FAKE_AGENT_AUTH".into(),
        r#"{"loggedIn":true,"authMethod":"api_key","apiKeySource":"ANTHROPIC_API_KEY"}"#.into(),
    ));
    let tick = env2.tick();
    assert_eq!(tick["action"], "idle", "{tick}");
    assert!(
        tick["reason"].as_str().unwrap().contains("API key"),
        "{tick}"
    );
}

#[test]
fn a_model_week_named_once_spares_runs_of_another_model() {
    let env = env_with_top(
        "defaults:\n  model: claude-sonnet-5-5\n",
        "fiveHourMax: 60, weeklyMax: 50",
    );
    // The first Run: the stream says 7d_oi 80% before anything named its model, so it
    // counts (unknown applies), and the Run is stopped.
    env.script(&format!(
        "read-prompt\nreplay {} 2 4\nsleep 30000\n",
        recorded("seven-day-oi-allowed")
    ));
    let first = env.add_with(&["--max-runs", "5"], "Sonnet work");
    let tick = env.tick();
    assert_eq!(
        tick["stop_reason"], "ceiling: seven_day_overage_included 80% >= weeklyMax 50",
        "{tick}"
    );
    // The Account is held while the Window's model is unknown. Once the figure is older
    // than probeMaxAge, the probe's usage answer names it: Fable's week (as 2.1.332 answers).
    let mut env = env;
    let answer = r#"{"five_hour":{"utilization":20,"resets_at":"2026-12-01T21:40:42.000Z"},"seven_day":{"utilization":30,"resets_at":"2026-12-05T07:00:42.000Z"},"model_scoped":[{"display_name":"Fable","utilization":80,"resets_at":"2026-12-06T10:47:22.000Z"}]}"#;
    std::fs::write(&env.usage, answer).unwrap();
    env.now = "2026-11-30T03:20:00Z".into();
    env.add("Sonnet work, again");
    env.script(&format!(
        "read-prompt\nreplay {} 2 9\nreplay {} 10 10\n",
        recorded("seven-day-oi-allowed"),
        recorded("seven-day-oi-allowed")
    ));
    let second = env.tick();
    assert_eq!(second["outcome"], "succeeded", "{second}");
    let status = env.status();
    let fable = window(&status, "work", "seven_day_overage_included");
    assert_eq!(fable["model"], "Fable");
    // A Run of claude-sonnet-5-5 was neither held nor stopped by Fable's week at 80-86%.
    assert_eq!(status["accounts"][0]["schedulable"], true, "{status}");
    assert_eq!(env.show(&first)["state"], "waiting");
    env.owl()
        .arg("status")
        .assert()
        .stdout(predicate::str::contains(
            "seven_day_overage_included (Fable)",
        ));
}

#[test]
fn credits_whose_named_reset_is_already_past_hold_the_job_and_the_account_alike() {
    let mut env = TestEnv::new();
    // This clock is past the reset the recorded event names (2026-12-01T21:41:13Z).
    env.now = "2026-12-02T00:00:00Z".into();
    env.script(&format!(
        "read-prompt\nreplay {} 1 3\nsleep 30000\n",
        recorded("overage-in-use-header-only")
    ));
    let id = env.add("On credits");
    assert_eq!(env.tick()["outcome"], "interrupted");
    assert_eq!(env.show(&id)["not_before"], "2026-12-02T00:30:00Z");
    let status = env.status();
    assert_eq!(status["accounts"][0]["schedulable"], false, "{status}");
    env.add("Next");
    assert_eq!(env.tick()["action"], "idle");
}

/// Issue 23: a login made after "not logged in" was found is noticed at the next tick, by
/// the change it makes to the credential store, not after `probeMaxAge`.
#[test]
fn a_login_written_to_the_store_is_noticed_at_the_next_tick() {
    let mut env = env_with("fiveHourMax: 60");
    env.five_hour(&[20.0], "2026-11-30T05:00:00.000Z");
    env.script(&crate::support::done_script("success.jsonl", 0));
    let id = env.add("Hello");
    env.extra_env.push((
        "FAKE_AGENT_AUTH".into(),
        r#"{"loggedIn":false,"authMethod":"none","apiProvider":"firstParty"}"#.into(),
    ));
    assert_eq!(env.tick()["action"], "idle");
    env.extra_env.pop();
    // Nothing changed in the store: still not logged in, nothing starts.
    assert_eq!(env.tick()["action"], "idle");
    // `claude /login` writes the store.
    let login = env.dir.path().join("creds/.credentials.json");
    std::fs::write(&login, crate::support::LOGGED_IN_STORE).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&login)
        .unwrap()
        .set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(60))
        .unwrap();
    let tick = env.tick();
    assert_eq!(tick["outcome"], "succeeded", "{tick}");
    assert_eq!(env.show(&id)["state"], "done");
}
