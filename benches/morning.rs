//! Prints the figures of docs/performance.md's "The night planned around the morning": a week
//! of nights on one Account, owl's real tick loop under a simulated clock (`OWL_NOW=@FILE`)
//! that the fake agent moves five minutes a step as it works a modelled plan
//! (`FAKE_AGENT_PLAN`: five-hour windows opening at their first request and resetting five
//! hours later, a weekly reset early on one morning, the user's own daytime use); with the
//! static ceilings and with the morning plan side by side, in two worlds.
//!
//! Run: `cargo bench --bench morning`. It drives the real binaries, like the integration
//! tests.

#[path = "../tests/integration/support.rs"]
#[allow(dead_code)]
mod support;

#[path = "common/world.rs"]
mod world;

use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};

use support::TestEnv;
use world::{at, iso, World, SCRIPT, WORLDS};

/// The first night starts Monday 22:00; the week resets early on Thursday morning.
const FIRST_EVENING: &str = "2026-11-30T22:00:00Z";
const WEEK_RESET: &str = "2026-12-03T05:00:00Z";
/// The user's own use each day: a five-hour window of theirs is closed by 22:00; the week
/// grows by this much.
const USER_WEEK_PER_DAY: f64 = 4.0;
const NIGHTS: i64 = 7;
/// How often the timer starts a tick, in simulated minutes.
const TIMER_MINUTES: i64 = 10;

/// What a week of nights came to.
struct Week {
    agent_hours: f64,
    mornings: Vec<String>,
    over: usize,
}

fn main() {
    println!(
        "owl: a week of nights (22:00-07:00) on one Account, fiveHourMax 60, weeklyMax 50; \
         a tick every {TIMER_MINUTES} simulated minutes; each Run 2 h of work in 5-minute \
         steps; the user's own use {USER_WEEK_PER_DAY} pp of the week a day; the week resets \
         Thursday 05:00"
    );
    for world in &WORLDS {
        println!(
            "\n{}: an hour of agent work costs {} pp of the five-hour window and {} pp of the week",
            world.name, world.five_per_hour, world.week_per_hour
        );
        let night = "schedule:\n  window: \"22:00-07:00\"\n";
        let fixed = week(world, "", "");
        let planned = week(world, night, "");
        let ninety = week(world, night, ", nightMax: 90");
        for (name, w) in [
            ("static ceilings", &fixed),
            ("the morning plan (nightMax 85, the default)", &planned),
            ("the morning plan with nightMax 90", &ninety),
        ] {
            println!(
                "  {name}: {:.2} agent-hours; mornings with a window over its ceiling: {}",
                w.agent_hours, w.over
            );
            for m in &w.mornings {
                println!("    {m}");
            }
        }
        println!(
            "  the morning plan: {:.2}x the work ({:.2}x with nightMax 90)",
            planned.agent_hours / fixed.agent_hours,
            ninety.agent_hours / fixed.agent_hours
        );
    }
}

/// One week of nights under `schedule` (empty: the static ceilings, no morning known), the
/// Account's limits with `more`.
fn week(world: &World, schedule: &str, more: &str) -> Week {
    let mut env = TestEnv::new();
    let clock = env.dir.path().join("clock");
    let plan = env.dir.path().join("plan.json");
    std::fs::write(&clock, FIRST_EVENING).unwrap();
    env.now = format!("@{}", clock.display());
    env.extra_env
        .push(("FAKE_AGENT_PLAN".into(), plan.display().to_string()));
    env.extra_env
        .push(("FAKE_AGENT_VERSION".into(), "2.1.332 (Claude Code)".into()));
    let step = 5.0 / 60.0;
    std::fs::write(
        &plan,
        json!({"cost_five": world.five_per_hour * step, "cost_week": world.week_per_hour * step,
            "five_hour": {"resets_at": null, "used": 0.0},
            "week": {"resets_at": at(WEEK_RESET).timestamp(), "used": 20.0}, "steps": 0})
        .to_string(),
    )
    .unwrap();
    env.write_config(&format!(
        "{schedule}accounts:\n  work:\n    limits: {{fiveHourMax: 60, weeklyMax: 50{more}}}\n"
    ));
    env.script(SCRIPT);
    for i in 0..3 {
        env.owl()
            .args(["add", "--max-runs", "1000", "--repo"])
            .arg(&env.repo)
            .arg(format!("Keep working {i}"))
            .assert()
            .success();
    }
    let mut mornings = Vec::new();
    let mut over = 0;
    for night in 0..NIGHTS {
        let evening = at(FIRST_EVENING) + Duration::days(night);
        let morning = evening + Duration::hours(9);
        if night > 0 {
            daytime(&plan, evening);
        }
        let evening_week = week_used(&plan);
        let mut t = evening;
        while t < morning {
            std::fs::write(&clock, iso(t)).unwrap();
            let _ = env.owl().arg("tick").output().unwrap();
            let after = at(std::fs::read_to_string(&clock).unwrap().trim());
            t = (t + Duration::minutes(TIMER_MINUTES)).max(after);
        }
        let (said, crossed) = at_morning(&plan, morning, evening_week);
        over += crossed;
        mornings.push(format!("{}: {said}", morning.format("%a %H:%M")));
    }
    let state: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    Week {
        agent_hours: state["steps"].as_f64().unwrap() * 5.0 / 60.0,
        mornings,
        over,
    }
}

/// The user's day: their own five-hour window has closed by the evening, and the week
/// grew by their use (after its reset, if it reset during the day).
fn daytime(plan: &std::path::Path, evening: DateTime<Utc>) {
    let mut state: Value = serde_json::from_str(&std::fs::read_to_string(plan).unwrap()).unwrap();
    state["five_hour"] = json!({"resets_at": null, "used": 0.0});
    while state["week"]["resets_at"].as_i64().unwrap() <= evening.timestamp() {
        let next = state["week"]["resets_at"].as_i64().unwrap() + 7 * 86_400;
        state["week"] = json!({"resets_at": next, "used": 0.0});
    }
    let used = state["week"]["used"].as_f64().unwrap() + USER_WEEK_PER_DAY;
    state["week"]["used"] = json!(used);
    std::fs::write(plan, state.to_string()).unwrap();
}

/// The week's figure now.
fn week_used(plan: &std::path::Path) -> f64 {
    let state: Value = serde_json::from_str(&std::fs::read_to_string(plan).unwrap()).unwrap();
    state["week"]["used"].as_f64().unwrap()
}

/// Each window as the user finds it at `morning`, and how many owl's night left over their
/// ceiling (a week the user's own day had already put over it, and owl did not move, is not
/// owl's doing).
fn at_morning(
    plan: &std::path::Path,
    morning: DateTime<Utc>,
    evening_week: f64,
) -> (String, usize) {
    let state: Value = serde_json::from_str(&std::fs::read_to_string(plan).unwrap()).unwrap();
    let mut over = 0;
    let five = match state["five_hour"]["resets_at"].as_i64() {
        Some(r) if r > morning.timestamp() => {
            let used = state["five_hour"]["used"].as_f64().unwrap();
            over += usize::from(used > 60.0);
            format!("five_hour {used:.0}%")
        }
        _ => "five_hour fresh".to_string(),
    };
    let week = match state["week"]["resets_at"].as_i64() {
        Some(r) if r > morning.timestamp() => {
            let used = state["week"]["used"].as_f64().unwrap();
            over += usize::from(used > 50.0 && used > evening_week);
            format!("week {used:.0}%")
        }
        _ => "week fresh".to_string(),
    };
    (format!("{five}, {week}"), over)
}
