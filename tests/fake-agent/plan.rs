//! A modelled plan for the morning plan's benchmark: `FAKE_AGENT_PLAN=FILE` holds the plan's
//! state and its costs, `OWL_NOW=@CLOCK` the simulated time. Each `plan-work` step is five
//! minutes of agent work: it moves the clock, opens a five-hour window at its first request
//! when none is open (resetting five hours later), resets the week when its time has come,
//! adds the step's cost to both, and prints the `rate_limit_event` Claude Code 2.1.332 prints
//! (`unifiedWindows`). A get_usage answer reads the same state.

use std::fs;
use std::path::PathBuf;

use serde_json::{json, Value};

/// One step of agent work, in simulated minutes.
pub const STEP_MINUTES: i64 = 5;

fn paths() -> Option<(PathBuf, PathBuf)> {
    let plan = std::env::var_os("FAKE_AGENT_PLAN")?;
    let clock = std::env::var("OWL_NOW")
        .ok()?
        .strip_prefix('@')?
        .to_string();
    Some((PathBuf::from(plan), PathBuf::from(clock)))
}

fn now(clock: &PathBuf) -> i64 {
    let text = fs::read_to_string(clock).unwrap();
    chrono::DateTime::parse_from_rfc3339(text.trim())
        .unwrap()
        .timestamp()
}

fn iso(t: i64) -> String {
    chrono::DateTime::from_timestamp(t, 0)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The state as of `t`: a five-hour window past its reset is closed (none open), a week past
/// its reset starts again from 0. (The learned reserve's bench rolls the user's day with it.)
pub fn rolled(mut state: Value, t: i64) -> Value {
    if state["five_hour"]["resets_at"]
        .as_i64()
        .is_some_and(|r| r <= t)
    {
        state["five_hour"] = json!({"resets_at": null, "used": 0.0});
    }
    while state["week"]["resets_at"].as_i64().is_some_and(|r| r <= t) {
        let next = state["week"]["resets_at"].as_i64().unwrap() + 7 * 86_400;
        state["week"] = json!({"resets_at": next, "used": 0.0});
    }
    state
}

/// Whether this agent models a plan.
pub fn on() -> bool {
    paths().is_some()
}

/// One step of work: the clock moves, the windows move, and the line the CLI prints.
pub fn step() -> String {
    let (plan, clock) = paths().unwrap();
    let t = now(&clock) + STEP_MINUTES * 60;
    fs::write(&clock, iso(t)).unwrap();
    let mut state = rolled(
        serde_json::from_str(&fs::read_to_string(&plan).unwrap()).unwrap(),
        t,
    );
    if state["five_hour"]["resets_at"].is_null() {
        // The first request opens the window: it lasts five hours from here.
        state["five_hour"]["resets_at"] = json!(t - STEP_MINUTES * 60 + 5 * 3600);
    }
    let five = state["five_hour"]["used"].as_f64().unwrap() + state["cost_five"].as_f64().unwrap();
    let week = state["week"]["used"].as_f64().unwrap() + state["cost_week"].as_f64().unwrap();
    state["five_hour"]["used"] = json!(five);
    state["week"]["used"] = json!(week);
    state["steps"] = json!(state["steps"].as_i64().unwrap_or(0) + 1);
    fs::write(&plan, state.to_string()).unwrap();
    let (r5, rw) = (
        state["five_hour"]["resets_at"].as_i64().unwrap(),
        state["week"]["resets_at"].as_i64().unwrap(),
    );
    json!({"type": "rate_limit_event", "rate_limit_info": {"status": "allowed", "resetsAt": r5,
        "rateLimitType": "five_hour", "isUsingOverage": false, "unifiedWindows": {
        "five_hour": {"utilization": five / 100.0, "resetsAt": r5},
        "seven_day": {"utilization": week / 100.0, "resetsAt": rw}}},
        "uuid": "00000000-0000-4000-8000-000000000000", "session_id": "plan"})
    .to_string()
}

/// The `rate_limits` of a get_usage answer, from the state now: no five-hour figure while
/// none is open (the window has not begun).
pub fn usage() -> String {
    let (plan, clock) = paths().unwrap();
    let t = now(&clock);
    let state = rolled(
        serde_json::from_str(&fs::read_to_string(&plan).unwrap()).unwrap(),
        t,
    );
    let week = json!({"utilization": state["week"]["used"], "resets_at": iso(state["week"]["resets_at"].as_i64().unwrap())});
    match state["five_hour"]["resets_at"].as_i64() {
        Some(r) => json!({"five_hour": {"utilization": state["five_hour"]["used"], "resets_at": iso(r)}, "seven_day": week}),
        None => json!({"seven_day": week}),
    }
    .to_string()
}
