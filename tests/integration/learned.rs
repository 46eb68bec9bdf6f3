//! Issue 47: the reserve learned from the user's own days, in force through real ticks on
//! both stores: it replaces the ceilings once enough days are seen, a ceiling the user set
//! still binds, it grows when the user runs ahead today or after a day owl left them short,
//! and a Run is stopped at the bound as it stands at each response.

use crate::support::{done_script, TestEnv};

/// A get_usage answer: the five hours and the week, each at a percent with its reset.
fn usage((five, five_reset): (f64, &str), (week, week_reset): (f64, &str)) -> String {
    format!(
        r#"{{"five_hour":{{"utilization":{five},"resets_at":"{five_reset}"}},"seven_day":{{"utilization":{week},"resets_at":"{week_reset}"}}}}"#
    )
}

/// An idle tick at `at` whose sample reads `answer`: the user's day, sampled.
fn sample(env: &mut TestEnv, at: &str, answer: &str) {
    std::fs::write(&env.usage, answer).unwrap();
    env.now = at.to_string();
    assert_eq!(env.tick()["action"], "idle", "a sampling tick at {at}");
}

const WEEK: &str = "2026-12-04T00:00:00.000Z";

/// Monday 23 November, sampled every half hour: the user used 5 points of each Window
/// between 10:00 and 11:00 and 2 between 11:00 and 12:00.
fn a_monday_of_use(env: &mut TestEnv) {
    for (at, percent) in [
        ("10:00", 20.0),
        ("10:31", 25.0),
        ("11:02", 27.0),
        ("11:33", 27.0),
    ] {
        let answer = usage(
            (percent, "2026-11-23T15:00:00.000Z"),
            (percent, "2026-11-26T00:00:00.000Z"),
        );
        sample(env, &format!("2026-11-23T{at}:00Z"), &answer);
    }
}

/// The Account's reserve lines in `status --json`.
fn reserve(env: &TestEnv) -> Vec<String> {
    let status = env.status();
    status["accounts"][0]["reserve"]
        .as_array()
        .unwrap_or_else(|| panic!("no reserve: {status}"))
        .iter()
        .map(|l| l.as_str().unwrap().to_string())
        .collect()
}

/// The line of `window` (`week` or `five_hour`) among `lines`.
fn line<'a>(lines: &'a [String], window: &str) -> &'a str {
    lines
        .iter()
        .find(|l| l.starts_with(&format!("{window}:")))
        .unwrap_or_else(|| panic!("no {window} line in {lines:?}"))
}

fn config(accounts: &str, more: &str) -> String {
    format!("usagePollInterval: 200ms\nschedule:\n  morning: '07:00'\n{accounts}{more}")
}

#[test]
fn a_learned_reserve_replaces_the_ceiling_after_enough_days_under_the_users_own() {
    let mut env = TestEnv::new();
    let accounts = env.accounts_block(&["work"]);
    env.write_config(&config(&accounts, "    learnedReserve: {minDays: 2}\n"));
    a_monday_of_use(&mut env);
    // Monday 30 November, 09:00: the week at 10, the five hours fresh.
    sample(
        &mut env,
        "2026-11-30T09:00:00Z",
        &usage((0.0, "2026-11-30T14:00:00.000Z"), (10.0, WEEK)),
    );
    // One day seen of two: the configured ceilings (none) hold, and status says so.
    let lines = reserve(&env);
    assert!(
        lines[0].contains("1 of 2 days of your use seen"),
        "{lines:?}"
    );
    // Enough days: the week keeps what the user uses until its reset (10:00 and 11:00 of
    // Monday to Thursday: 4 × 7 = 28 pp) and the margin (13): 59%. The five hours keep
    // 10:00 and 11:00 of today (7) and the margin: 80%.
    env.write_config(&config(&accounts, "    learnedReserve: {minDays: 1}\n"));
    let lines = reserve(&env);
    assert_eq!(
        line(&lines, "week"),
        "week: ceiling 59%: 28 pp kept for you until Fri 00:00 (P90 of your use over 1 day) + 13 pp margin"
    );
    assert_eq!(
        line(&lines, "five_hour"),
        "five_hour: ceiling 80%: 7 pp kept for you until Mon 14:00 (P90 of your use over 1 day) + 13 pp margin"
    );
    // A dry run explains the bounds it plans under, first.
    let dry = env.owl().args(["tick", "--dry-run"]).output().unwrap();
    let dry = String::from_utf8_lossy(&dry.stdout);
    assert!(
        dry.starts_with("work: ") && dry.contains("work: week: ceiling 59%: 28 pp kept for you"),
        "{dry}"
    );
    // A weekly ceiling the user set under it is a hard cap, and said to bind first.
    env.write_config(&config(
        &accounts,
        "    limits: {weeklyMax: 50}\n    learnedReserve: {minDays: 1}\n",
    ));
    assert!(line(&reserve(&env), "week").starts_with("week: ceiling 50%: 28 pp kept for you"));
    assert!(line(&reserve(&env), "week").ends_with("(your configured ceiling binds first)"));
    // The user runs ahead of their usual Monday: 12 points by 10:31 where 5 are usual for
    // the hours so far. What they run ahead by is kept on top, at once.
    env.write_config(&config(&accounts, "    learnedReserve: {minDays: 1}\n"));
    for (at, week) in [("10:00", 10.0), ("10:31", 22.0)] {
        let answer = usage((week - 10.0, "2026-11-30T14:00:00.000Z"), (week, WEEK));
        sample(&mut env, &format!("2026-11-30T{at}:00Z"), &answer);
    }
    assert_eq!(
        line(&reserve(&env), "week"),
        "week: ceiling 52%: 28 pp kept for you until Fri 00:00 (P90 of your use over 2 days) \
         + 7 pp you run ahead of your usual today + 13 pp margin"
    );
    // The morning forecast says what the user will use of the week from Tuesday 07:00 to
    // its reset (10:00 and 11:00 of Tuesday to Thursday: 21 pp); the five hours are fresh.
    let status = env.status();
    let morning = &status["accounts"][0]["morning"]["windows"];
    let week = morning
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["window"] == "seven_day");
    assert_eq!(
        week.map(|w| w["your_use"].clone()),
        Some(21.0.into()),
        "{status}"
    );
    let text = env.owl().arg("status").output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("your use until its reset 21 pp"), "{text}");
    // At 60% of the week a Job waits where no ceiling was configured at all.
    std::fs::write(
        &env.usage,
        usage((12.0, "2026-11-30T14:00:00.000Z"), (60.0, WEEK)),
    )
    .unwrap();
    env.owl().args(["probe", "work"]).assert().success();
    env.script(&done_script("success.jsonl", 0));
    let job = env.add("Waits for the week");
    let tick = env.tick();
    assert_eq!(tick["action"], "idle", "{tick}");
    assert!(env.show(&job)["runs"].as_array().unwrap().is_empty());
    // Without the reserve the same Job runs.
    env.write_config(&config(&accounts, ""));
    assert_eq!(env.tick()["job_id"], job.as_str());
}

#[test]
fn a_run_stops_at_the_learned_bound_as_it_stands_at_each_response() {
    let mut env = TestEnv::new();
    let accounts = env.accounts_block(&["work"]);
    env.write_config(&config(&accounts, "    learnedReserve: {minDays: 1}\n"));
    a_monday_of_use(&mut env);
    // A clock the test moves while the Run goes on.
    let clock = env.dir.path().join("clock");
    std::fs::write(&clock, "2026-11-30T09:00:00Z").unwrap();
    let five = "2026-11-30T14:00:00.000Z";
    std::fs::write(&env.usage, usage((0.0, five), (10.0, WEEK))).unwrap();
    env.now = format!("@{}", clock.display());
    env.owl().args(["probe", "work"]).assert().success();
    // At 09:00 the five hours' bound is 80 (7 pp of today's use ahead, 13 margin). The
    // Run's answers are held until the test says; by then it is 11:30, when only 11:00's
    // 2 pp are ahead: the bound is the night's 85, and 82 does not stop the Run, 86 does.
    let gate = env.dir.path().join("gate");
    env.extra_env
        .push(("FAKE_AGENT_USAGE_GATE".into(), gate.display().to_string()));
    let answers = [82.0, 82.0, 86.0].map(|p| usage((p, five), (12.0, WEEK)));
    std::fs::write(&env.usage, answers.join("\n")).unwrap();
    env.script("read-prompt\nreplay interrupt-control-request.jsonl 1 2\nsleep 30000\n");
    let job = env.add("Works through the morning");
    let tick = env.spawn_tick();
    crate::support::wait_until("the Run's first usage question", || {
        gate.with_extension("waiting").exists()
    });
    std::fs::write(&clock, "2026-11-30T11:30:00Z").unwrap();
    std::fs::write(&gate, "").unwrap();
    let out = tick.wait_with_output().unwrap();
    let tick: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        tick["stop_reason"],
        "ceiling: five_hour 86% >= learnedReserve 85",
        "{tick}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(env.show(&job)["runs"][0]["outcome"], "interrupted");
}

#[test]
fn a_day_owl_left_you_short_is_shown_and_grows_the_margin() {
    let mut env = TestEnv::new();
    let accounts = env.accounts_block(&["work"]);
    env.write_config(&config(&accounts, "    learnedReserve: {minDays: 1}\n"));
    a_monday_of_use(&mut env);
    // Monday 30 November: 10% of the five hours at 02:50, before a Run of owl's at 03:00;
    // 41% during it.
    let five = "2026-11-30T08:00:00.000Z";
    env.now = "2026-11-30T02:50:00Z".into();
    std::fs::write(&env.usage, usage((10.0, five), (20.0, WEEK))).unwrap();
    env.owl().args(["probe", "work"]).assert().success();
    env.now = "2026-11-30T03:00:00Z".into();
    std::fs::write(&env.usage, usage((41.0, five), (22.0, WEEK))).unwrap();
    env.script(&done_script("success.jsonl", 0));
    env.add("Use the night");
    assert_eq!(env.tick()["action"], "ran");
    // 07:20, the user's morning: the five hours full.
    sample(
        &mut env,
        "2026-11-30T07:20:00Z",
        &usage((100.0, five), (30.0, WEEK)),
    );
    let status = env.status();
    let limited = &status["accounts"][0]["limited"];
    assert_eq!(limited.as_array().map(Vec::len), Some(1), "{status}");
    assert_eq!(limited[0]["owl_points"], 31.0, "{status}");
    assert_eq!(
        limited[0]["said"],
        "Mon 07:20: five_hour at 100%, owl used 31 pp of it"
    );
    let text = env.owl().arg("status").output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("you were limited: Mon 07:20: five_hour at 100%, owl used 31 pp of it"),
        "{text}"
    );
    // The report draws the user's hours beside owl's: Monday 23's 10:00 and 11:00 were
    // the user's; owl's Run moved the week by 2 at 03:00 today.
    let report = env
        .owl()
        .args(["report", "--json", "--since", "8d"])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let hours = &report["accounts"][0]["by_hour"];
    let hour = |at: &str| {
        hours
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["hour"] == at)
            .cloned()
            .unwrap_or_else(|| panic!("no {at} in {hours}"))
    };
    assert_eq!(hour("2026-11-23T10:00:00Z")["yours"], 5.0);
    assert_eq!(hour("2026-11-30T03:00:00Z")["owls"], 2.0);
    assert!(hour("2026-11-30T03:00:00Z")["yours"].is_null());
    let text = env
        .owl()
        .args(["report", "--since", "8d"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("Mon 10:00: you 5 pp"), "{text}");
    assert!(text.contains("Mon 03:00: owl 2 pp"), "{text}");
    let page = env.dir.path().join("report.html");
    env.owl()
        .args(["report", "--since", "8d", "--html"])
        .arg(&page)
        .assert()
        .success();
    let page = std::fs::read_to_string(&page).unwrap();
    assert!(
        page.contains("<caption>Your use and owl's of the week by hour"),
        "{page}"
    );
    // The margin grew by 5 pp after it: the week keeps 18, not 13.
    let week = line(&reserve(&env), "week").to_string();
    assert!(
        week.ends_with("+ 18 pp margin (grown by 5 pp after 1 day you were limited)"),
        "{week}"
    );
}
