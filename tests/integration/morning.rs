//! The night planned around the morning (issue 38): a Window that resets before the user's
//! morning is held to the night ceiling, seen from the night; one still open at the morning
//! keeps its configured ceiling, and so does every Window seen from the user's day.

use crate::support::{window, TestEnv};

/// An Account `work` under `fiveHourMax: 60`, polled every 200 ms, with `schedule` as given.
fn env_with(schedule: &str) -> TestEnv {
    let env = TestEnv::new();
    env.write_config(&format!(
        "usagePollInterval: 200ms\n{schedule}accounts:\n  work:\n    limits:\n      fiveHourMax: 60\n"
    ));
    env
}

/// The get_usage answers the fake agent gives, in order: five-hour figures and their resets.
fn answers(env: &TestEnv, figures: &[(f64, &str)]) {
    let lines: Vec<String> = figures
        .iter()
        .map(|(p, reset)| format!(r#"{{"five_hour":{{"utilization":{p},"resets_at":"{reset}"}}}}"#))
        .collect();
    std::fs::write(&env.usage, lines.join("\n")).unwrap();
}

/// A Run that works until owl stops it: the first API response, then a long tool call.
const LONG_RUN: &str = "read-prompt\nreplay interrupt-control-request.jsonl 1 2\nsleep 30000\n";

const NIGHT: &str = "schedule:\n  window: \"22:00-07:00\"\n";

#[test]
fn a_window_that_resets_before_the_morning_runs_to_the_night_ceiling() {
    // 03:00; the five-hour Window resets at 05:00, before the morning at 07:00.
    let env = env_with(NIGHT);
    answers(
        &env,
        &[
            (70.0, "2026-11-30T05:00:00.000Z"),
            (80.0, "2026-11-30T05:00:00.000Z"),
            (86.0, "2026-11-30T05:00:00.000Z"),
        ],
    );
    env.script(LONG_RUN);
    env.add("Spend the night's window");
    let tick = env.tick();
    // 70 and 80 are over fiveHourMax 60 but under the night ceiling: the Run went on.
    assert_eq!(
        tick["stop_reason"], "ceiling: five_hour 86% >= nightMax 85",
        "{tick}"
    );
    assert_eq!(env.recorded("stdin.jsonl").matches("get_usage").count(), 3);
}

#[test]
fn a_run_still_going_when_the_mornings_window_opens_is_held_to_its_ceiling() {
    // The Window that closes at 05:00 is the night's; the one the Run finds open after it
    // resets at 10:00, after the morning: its ceiling is fiveHourMax again.
    let env = env_with(NIGHT);
    answers(
        &env,
        &[
            (70.0, "2026-11-30T05:00:00.000Z"),
            (65.0, "2026-11-30T10:00:00.000Z"),
        ],
    );
    env.script(LONG_RUN);
    env.add("Cross into the morning's window");
    let tick = env.tick();
    assert_eq!(
        tick["stop_reason"], "ceiling: five_hour 65% >= fiveHourMax 60",
        "{tick}"
    );
}

#[test]
fn status_shows_the_ceiling_in_force_and_why() {
    let env = env_with(NIGHT);
    answers(&env, &[(70.0, "2026-11-30T05:00:00.000Z")]);
    env.owl().args(["probe", "work"]).assert().success();
    let status = env.status();
    assert_eq!(status["accounts"][0]["schedulable"], true, "{status}");
    let five = window(&status, "work", "five_hour");
    assert_eq!(five["ceiling"], 85.0);
    assert_eq!(five["night"]["limit"], "fiveHourMax");
    assert_eq!(five["night"]["configured"], 60.0);
    assert_eq!(five["night"]["morning"], "2026-11-30T07:00:00Z");
    let text = env.owl().arg("status").output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(
            "night ceiling 85: resets 05:00, before the morning at 07:00 (fiveHourMax 60 by day)"
        ),
        "{text}"
    );
    // The same figure without a morning: over its ceiling, as owl has always held it.
    let plain = env_with("");
    answers(&plain, &[(70.0, "2026-11-30T05:00:00.000Z")]);
    plain.owl().args(["probe", "work"]).assert().success();
    let status = plain.status();
    assert_eq!(status["accounts"][0]["schedulable"], false, "{status}");
    let five = window(&status, "work", "five_hour");
    assert_eq!(five["ceiling"], 60.0);
    assert!(five.get("night").is_none(), "{five}");
}

#[test]
fn a_window_that_closes_in_the_users_day_is_the_users() {
    // Noon, with the morning named: the Window resetting at 15:00 keeps fiveHourMax.
    let mut env = env_with("schedule:\n  morning: \"07:00\"\n");
    env.now = "2026-11-30T12:00:00Z".into();
    answers(&env, &[(70.0, "2026-11-30T15:00:00.000Z")]);
    env.owl().args(["probe", "work"]).assert().success();
    let status = env.status();
    assert_eq!(status["accounts"][0]["schedulable"], false, "{status}");
    assert_eq!(window(&status, "work", "five_hour")["ceiling"], 60.0);
    // At 23:00 the day is over (dayEnds 22:00 by default): a Window closing at 02:00 is
    // the night's.
    env.now = "2026-11-30T23:00:00Z".into();
    answers(&env, &[(70.0, "2026-12-01T02:00:00.000Z")]);
    env.owl().args(["probe", "work"]).assert().success();
    let status = env.status();
    assert_eq!(status["accounts"][0]["schedulable"], true, "{status}");
    let five = window(&status, "work", "five_hour");
    assert_eq!(five["night"]["morning"], "2026-12-01T07:00:00Z");
}

#[test]
fn a_morning_in_berlin_is_seven_local_across_the_autumn_change() {
    // 2026-10-25: Berlin leaves summer time at 03:00 local (01:00 UTC). At 23:00 UTC on the
    // 24th it is 01:00 summer time; the morning at 07:00 local is winter time, 06:00 UTC.
    let mut env = env_with("schedule:\n  morning: \"07:00\"\n");
    env.extra_env.push(("TZ".into(), "Europe/Berlin".into()));
    env.now = "2026-10-24T23:00:00Z".into();
    answers(&env, &[(70.0, "2026-10-25T05:30:00.000Z")]);
    env.owl().args(["probe", "work"]).assert().success();
    let status = env.status();
    let five = window(&status, "work", "five_hour");
    assert_eq!(five["night"]["morning"], "2026-10-25T06:00:00Z", "{five}");
    assert_eq!(five["ceiling"], 85.0);
}

#[test]
fn night_settings_that_would_weaken_the_morning_are_refused_on_their_line() {
    let env = TestEnv::new();
    for (body, says) in [
        (
            "accounts:\n  work:\n    limits:\n      fiveHourMax: 60\n      nightMax: 50\n",
            "line 10: nightMax 50 is under fiveHourMax 60",
        ),
        (
            "accounts:\n  work:\n    limits:\n      nightMax: 101\n",
            "'101' is out of range",
        ),
        (
            "schedule:\n  window: \"22:00-07:00\"\n  morning: \"07:00\"\naccounts:\n  work: {}\n",
            "line 8: schedule.morning beside schedule.window",
        ),
        (
            "schedule:\n  morning: \"7am\"\naccounts:\n  work: {}\n",
            "'7am' is not a time of day",
        ),
    ] {
        env.write_config(body);
        let out = env.owl().args(["config", "check"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{body}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{body}: {err}");
    }
}

#[test]
fn no_run_starts_within_the_minimum_headroom_unless_asked_to_ignore_the_ceiling() {
    let env = env_with("");
    answers(&env, &[(59.0, "2026-11-30T05:00:00.000Z")]);
    env.owl().args(["probe", "work"]).assert().success();
    let id = env.add("One point left");
    let status = env.status();
    assert_eq!(status["accounts"][0]["schedulable"], false, "{status}");
    let text = env.owl().arg("status").output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(
            "five_hour 59% is within 2 pp of fiveHourMax 60 (minHeadroom): a Run would be \
             stopped at once — not scheduled until 05:00 (in 2h)"
        ),
        "{text}"
    );
    assert_eq!(env.tick()["action"], "idle");
    // --ignore-ceiling ignores every cap owl adds, the minimum too, and says so.
    env.script(&crate::support::done_script("success.jsonl", 0));
    let out = env
        .owl()
        .args(["tick", "--job", &id, "--ignore-ceiling", "--json"])
        .output()
        .unwrap();
    let tick: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tick["action"], "ran", "{tick}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--ignore-ceiling"));
    // minHeadroom: 0 turns the minimum off.
    let off = TestEnv::new();
    off.write_config(
        "accounts:\n  work:\n    limits:\n      fiveHourMax: 60\n      minHeadroom: 0\n",
    );
    answers(&off, &[(59.0, "2026-11-30T05:00:00.000Z")]);
    off.owl().args(["probe", "work"]).assert().success();
    assert_eq!(off.status()["accounts"][0]["schedulable"], true);
}

#[test]
fn the_runs_prompt_tells_the_agent_where_it_will_be_stopped() {
    let env = env_with(NIGHT);
    answers(&env, &[(70.0, "2026-11-30T05:00:00.000Z")]);
    env.owl().args(["probe", "work"]).assert().success();
    env.script(&crate::support::done_script("success.jsonl", 0));
    env.add("Spend the night's window");
    assert_eq!(env.tick()["action"], "ran");
    let first: serde_json::Value =
        serde_json::from_str(env.recorded("stdin.jsonl").lines().next().unwrap()).unwrap();
    let prompt = first["message"]["content"].as_str().unwrap();
    let budget = prompt
        .split("\n---\n")
        .find(|part| part.starts_with("Your budget"))
        .unwrap_or_else(|| panic!("no budget in the prompt: {prompt}"));
    insta::assert_snapshot!(budget.trim_end(), @"Your budget: the plan's five_hour window is at 70%, and owl stops this Run when it reaches 85% (nightMax), about 15 points from now. Commit your work as you go, and write the Handoff well before then.");
}

#[test]
fn a_job_for_any_account_spends_first_the_room_that_expires_first() {
    let env = TestEnv::new();
    let usage = |name: &str, line: &str| {
        let path = env.dir.path().join(format!("{name}.usage"));
        std::fs::write(&path, line).unwrap();
        path.display().to_string()
    };
    // work: 70% of a Window that resets at 05:00, before the morning (15 points of room
    // under the night ceiling, gone at 05:00); home: 10% of one that resets at 10:00.
    let work = usage(
        "work",
        r#"{"five_hour":{"utilization":70,"resets_at":"2026-11-30T05:00:00.000Z"}}"#,
    );
    let home = usage(
        "home",
        r#"{"five_hour":{"utilization":10,"resets_at":"2026-11-30T10:00:00.000Z"}}"#,
    );
    env.write_config(&format!(
        "{NIGHT}defaults:\n  account: null\naccounts:\n  home:\n    limits: {{fiveHourMax: 60}}\n    env: {{FAKE_AGENT_USAGE: {home}}}\n  work:\n    limits: {{fiveHourMax: 60}}\n    env: {{FAKE_AGENT_USAGE: {work}}}\n"
    ));
    for name in ["home", "work"] {
        env.owl().args(["probe", name]).assert().success();
    }
    let id = env.add("Any account will do");
    let status = env.status();
    let entry = &status["queue"][0];
    assert_eq!(entry["job_id"], id.as_str());
    assert_eq!(entry["account"], "work", "{status}");
    assert_eq!(
        entry["reason"],
        "next: runs on work: its five_hour resets at 05:00, before the morning, and the room \
         left under its night ceiling expires then"
    );
    // The dry run says the same, with the ceiling in force for each Window.
    let dry = env.owl().args(["tick", "--dry-run"]).output().unwrap();
    let dry = String::from_utf8_lossy(&dry.stdout);
    assert!(
        dry.contains("next: runs on work: its five_hour resets at 05:00"),
        "{dry}"
    );
    assert!(
        dry.contains("night ceiling 85: resets 05:00, before the morning at 07:00"),
        "{dry}"
    );
    // Without a morning, the most headroom wins, as always, and nothing needs saying.
    let plain = TestEnv::new();
    plain.write_config(&format!(
        "defaults:\n  account: null\naccounts:\n  home:\n    limits: {{fiveHourMax: 60}}\n    env: {{FAKE_AGENT_USAGE: {home}}}\n  work:\n    limits: {{fiveHourMax: 90}}\n    env: {{FAKE_AGENT_USAGE: {work}}}\n"
    ));
    for name in ["home", "work"] {
        plain.owl().args(["probe", name]).assert().success();
    }
    plain.add("Any account will do");
    let status = plain.status();
    assert_eq!(status["queue"][0]["account"], "home", "{status}");
    assert_eq!(status["queue"][0]["reason"], "next: runs on home");
}

/// Runs `owl probe work` answered with `probe` (a get_usage answer), then one Run that ends
/// by itself, its get_usage answered with five_hour at `during` (a percent and its reset).
fn run_seeing(env: &TestEnv, probe: &str, during: (f64, &str)) -> String {
    std::fs::write(&env.usage, probe).unwrap();
    env.owl().args(["probe", "work"]).assert().success();
    answers(env, &[during]);
    env.script(&crate::support::done_script("success.jsonl", 0));
    let id = env.add("Use a little");
    assert_eq!(env.tick()["action"], "ran");
    id
}

/// A get_usage answer with only the week: a figure of the Account, none of its five hours.
const WEEK_ONLY: &str =
    r#"{"seven_day":{"utilization":20,"resets_at":"2026-12-04T00:00:00.000Z"}}"#;

#[test]
fn each_run_records_what_it_used_of_each_window() {
    // Seen at 40% before the Run, 47% during it: 7 points were owl's.
    let env = env_with(NIGHT);
    let id = run_seeing(
        &env,
        r#"{"five_hour":{"utilization":40,"resets_at":"2026-11-30T05:00:00.000Z"}}"#,
        (47.0, "2026-11-30T05:00:00.000Z"),
    );
    let show = env.show(&id);
    let share = &show["runs"][0]["owl_share"][0];
    assert_eq!(share["window"], "five_hour", "{show}");
    assert_eq!(share["resets_at"], "2026-11-30T05:00:00Z");
    assert_eq!(share["points"], 7.0);
    assert_eq!(share["upper_bound"], false);
    assert_eq!(show["owl_share"][0]["points"], 7.0);
    let text = env.owl().args(["show", &id]).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("owl's share: used 7 pp of five_hour"),
        "{text}"
    );
    assert!(text.contains("\n  used 7 pp of five_hour\n"), "{text}");
    // jobs --json carries the Job's sum too.
    let jobs = env
        .owl()
        .args(["jobs", "--all", "--json"])
        .output()
        .unwrap();
    let jobs: serde_json::Value = serde_json::from_slice(&jobs.stdout).unwrap();
    assert_eq!(jobs[0]["owl_share"][0]["points"], 7.0, "{jobs}");
    // The report tells the Account's Window apart: owl's points, and the rest, the user's.
    let report = env.owl().args(["report", "--json"]).output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(report["jobs"][0]["owl_share"][0]["points"], 7.0, "{report}");
    let share = &report["accounts"][0]["owl_share"][0];
    assert_eq!(share["window"], "five_hour", "{report}");
    assert_eq!(
        (share["points"].as_f64(), share["percent"].as_f64()),
        (Some(7.0), Some(47.0))
    );
    let text = env.owl().arg("report").output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("owl used 7 pp of five_hour, the rest (40 pp) was yours"),
        "{text}"
    );
    assert!(text.contains("ceiling 60% (night ceiling 85%)"), "{text}");
    // The page draws the night ceiling and the mornings, and says owl's share.
    let page = env.dir.path().join("report.html");
    env.owl()
        .args(["report", "--since", "2d", "--html"])
        .arg(&page)
        .assert()
        .success();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains(r#"<line class="night" data-percent="85""#),
        "{html}"
    );
    assert_eq!(
        html.matches(r#"<line class="morning""#).count(),
        2,
        "{html}"
    );
    assert!(html.contains("owl used 7 pp of five_hour, the rest (40 pp) was yours"));
}

#[test]
fn a_share_without_a_figure_from_before_is_an_upper_bound_unless_the_run_opened_the_window() {
    // Never seen before the Run, open since before it (it resets at 05:00): at most 47.
    let env = env_with(NIGHT);
    let id = run_seeing(&env, WEEK_ONLY, (47.0, "2026-11-30T05:00:00.000Z"));
    let share = &env.show(&id)["runs"][0]["owl_share"][0];
    assert_eq!(
        (share["points"].as_f64(), share["upper_bound"].as_bool()),
        (Some(47.0), Some(true))
    );
    let text = env.owl().args(["show", &id]).output().unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains("used at most 47 pp of five_hour"));
    // A Window that resets at 08:00 began at 03:00, with the Run: it started from 0.
    let opened = env_with(NIGHT);
    let id = run_seeing(&opened, WEEK_ONLY, (3.0, "2026-11-30T08:00:00.000Z"));
    let share = &opened.show(&id)["runs"][0]["owl_share"][0];
    assert_eq!(
        (share["points"].as_f64(), share["upper_bound"].as_bool()),
        (Some(3.0), Some(false))
    );
}

#[test]
fn owls_share_of_a_window_is_capped_whatever_the_user_used() {
    let env = TestEnv::new();
    env.write_config(
        "usagePollInterval: 200ms\naccounts:\n  work:\n    limits:\n      owlFiveHourMax: 10\n",
    );
    // 40% before the Run (the user's), then 45 and 52 during it: 12 points are owl's.
    answers(&env, &[(40.0, "2026-11-30T05:00:00.000Z")]);
    env.owl().args(["probe", "work"]).assert().success();
    answers(
        &env,
        &[
            (45.0, "2026-11-30T05:00:00.000Z"),
            (52.0, "2026-11-30T05:00:00.000Z"),
        ],
    );
    env.script(LONG_RUN);
    let id = env.add("Use owl's share");
    let tick = env.tick();
    assert_eq!(
        tick["stop_reason"], "ceiling: owl's share of five_hour 12 pp >= owlFiveHourMax 10",
        "{tick}"
    );
    assert_eq!(env.show(&id)["owl_share"][0]["points"], 12.0);
    // The Account is held by the cap, which says so; the user's 40% is not counted.
    let text = env.owl().arg("status").output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(
            "owl's Runs used 12 pp of this five_hour, at owlFiveHourMax 10: the rest is yours \
             — not scheduled until 05:00 (in 2h)"
        ),
        "{text}"
    );
    // A cap over 100 is refused on its line.
    env.write_config("accounts:\n  work:\n    limits:\n      owlWeeklyMax: 130\n");
    let out = env.owl().args(["config", "check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 9") && err.contains("'130' is out of range"),
        "{err}"
    );
}

#[test]
fn status_forecasts_each_window_at_the_morning() {
    let env = TestEnv::new();
    env.write_config(&format!(
        "{NIGHT}accounts:\n  work:\n    limits: {{fiveHourMax: 60, weeklyMax: 50, owlWeeklyMax: 30}}\n"
    ));
    std::fs::write(
        &env.usage,
        r#"{"five_hour":{"utilization":70,"resets_at":"2026-11-30T04:00:00.000Z"},"seven_day":{"utilization":47,"resets_at":"2026-12-04T00:00:00.000Z"}}"#,
    )
    .unwrap();
    env.owl().args(["probe", "work"]).assert().success();
    let text = env.owl().arg("status").output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(
            "at 07:00: five_hour fresh (resets 04:00), seven_day 47% (ceiling 50%, owl's share \
             0 of 30 pp)"
        ),
        "{text}"
    );
    let status = env.status();
    let morning = &status["accounts"][0]["morning"];
    assert_eq!(morning["at"], "2026-11-30T07:00:00Z", "{status}");
    assert_eq!(morning["windows"][0]["window"], "five_hour");
    assert_eq!(morning["windows"][0]["fresh"], true);
    assert_eq!(morning["windows"][1]["percent"], 47.0);
    assert_eq!(morning["windows"][1]["owl_cap"], 30.0);
    // Without a morning there is nothing to forecast.
    let plain = env_with("");
    answers(&plain, &[(10.0, "2026-11-30T04:00:00.000Z")]);
    plain.owl().args(["probe", "work"]).assert().success();
    assert!(plain.status()["accounts"][0].get("morning").is_none());
}

#[test]
fn an_account_may_name_its_own_morning() {
    // Its user starts at 09:00: a Window resetting at 08:00 is the night's for it.
    let env = TestEnv::new();
    env.write_config(
        "accounts:\n  work:\n    morning: \"09:00\"\n    limits:\n      fiveHourMax: 60\n",
    );
    answers(&env, &[(70.0, "2026-11-30T08:00:00.000Z")]);
    env.owl().args(["probe", "work"]).assert().success();
    let five = window(&env.status(), "work", "five_hour").clone();
    assert_eq!(five["night"]["morning"], "2026-11-30T09:00:00Z", "{five}");
    // Beside a schedule window, whose end is the morning, it is refused on its line.
    env.write_config(&format!(
        "{NIGHT}accounts:\n  work:\n    morning: \"09:00\"\n"
    ));
    let out = env.owl().args(["config", "check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 10: accounts.work.morning beside schedule.window"),
        "{err}"
    );
}

#[test]
fn a_clock_file_is_read_at_every_use_and_a_missing_one_is_refused() {
    let mut env = env_with("");
    let clock = env.dir.path().join("clock");
    std::fs::write(&clock, "2026-11-30T03:00:00Z\n").unwrap();
    env.now = format!("@{}", clock.display());
    answers(&env, &[(70.0, "2026-11-30T05:00:00.000Z")]);
    env.owl().args(["probe", "work"]).assert().success();
    let reason = |env: &TestEnv| env.status()["accounts"][0]["reason"].clone();
    assert!(
        reason(&env).as_str().unwrap().contains("(in 2h)"),
        "{}",
        reason(&env)
    );
    std::fs::write(&clock, "2026-11-30T04:00:00Z").unwrap();
    assert!(
        reason(&env).as_str().unwrap().contains("(in 1h)"),
        "{}",
        reason(&env)
    );
    std::fs::remove_file(&clock).unwrap();
    let out = env.owl().arg("status").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("OWL_NOW='@"));
}
