//! Prints the figures of docs/performance.md's "A reserve learned from your own days": four
//! weeks on one Account, owl's real tick loop under a simulated clock (`OWL_NOW=@FILE`) that
//! the fake agent moves as it works a modelled plan (`FAKE_AGENT_PLAN`, as benches/morning.rs),
//! and a seeded model of the user's own use spent on the same plan in the day. Four columns in
//! one run: static ceilings, the morning plan, the learned reserve, and an oracle that knows
//! the user's future use exactly and keeps the same margin; three users, two worlds.
//!
//! Run: `cargo bench --bench reserve` (about half an hour on two cores: every tick is the real
//! binary). `OWL_BENCH_WEEKS=N` measures N weeks instead of four.

#[path = "../tests/integration/support.rs"]
#[allow(dead_code)]
mod support;

#[path = "common/world.rs"]
mod world;

#[path = "../tests/fake-agent/plan.rs"]
#[allow(dead_code)]
mod plan;

use chrono::{DateTime, Duration, Timelike, Utc};
use serde_json::{json, Value};

use support::TestEnv;
use world::{at, iso, World, SCRIPT, WORLDS};

/// The measured weeks start on a Monday; the four before it are the user's history, sampled
/// by idle ticks in the day (owl samples whether a reserve is on or not).
const START: &str = "2026-11-02T00:00:00Z";
/// The week resets on Thursday 05:00, as in the morning plan's bench.
const FIRST_WEEK_RESET: &str = "2026-10-08T05:00:00Z";
/// The timer at night, and the user's (and the sampling's) step by day, in minutes.
const NIGHT_STEP: i64 = 10;
const DAY_STEP: i64 = 30;
/// The margin every bound keeps (the largest move of one response) and the night ceiling.
const MARGIN: f64 = 13.0;
const NIGHT_MAX: f64 = 85.0;

/// A user: their weekday's use of the week (points), a weekend day's, what an hour of their
/// work costs of the five-hour window, and the hours they work (local, each a whole hour).
struct User {
    name: &'static str,
    weekday_week: f64,
    weekend_week: f64,
    five_per_hour: f64,
    weekday_hours: &'static [u32],
    weekend_hours: &'static [u32],
}

const USERS: [User; 3] = [
    // About 10 pp of the week a weekday, 2 a weekend day, 15 pp of the morning's window.
    User {
        name: "light",
        weekday_week: 10.0,
        weekend_week: 2.0,
        five_per_hour: 7.5,
        weekday_hours: &[9, 10],
        weekend_hours: &[11],
    },
    // About four hours of work each weekday.
    User {
        name: "typical",
        weekday_week: 12.0,
        weekend_week: 2.0,
        five_per_hour: 10.0,
        weekday_hours: &[9, 10, 14, 15],
        weekend_hours: &[11],
    },
    // About 70% of a week by themselves.
    User {
        name: "heavy",
        weekday_week: 13.0,
        weekend_week: 2.5,
        five_per_hour: 10.0,
        weekday_hours: &[9, 10, 11, 12, 14, 15, 16, 17],
        weekend_hours: &[11, 12],
    },
];

/// The user's wish in one step of the day: points of the five-hour window and of the week.
#[derive(Clone, Copy, Default)]
struct Want {
    five: f64,
    week: f64,
}

/// What one column came to.
#[derive(Default)]
struct Measured {
    agent_hours: Vec<f64>,
    limited_minutes: i64,
}

#[derive(Clone, Copy, PartialEq)]
enum Column {
    Static,
    Morning,
    Learned,
    Oracle,
}

const COLUMNS: [(Column, &str); 4] = [
    (
        Column::Static,
        "static ceilings (fiveHourMax 60, weeklyMax 50)",
    ),
    (Column::Morning, "the morning plan (the same, nightMax 85)"),
    (
        Column::Learned,
        "the learned reserve (P90, 4 weeks, floor 10)",
    ),
    (
        Column::Oracle,
        "the oracle (your future use known, the same margin)",
    ),
];

fn main() {
    let weeks: i64 = std::env::var("OWL_BENCH_WEEKS")
        .ok()
        .and_then(|w| w.parse().ok())
        .unwrap_or(4);
    println!(
        "owl: {weeks} weeks on one Account after four of your days sampled; the night \
         22:00-07:00, a tick every {NIGHT_STEP} simulated minutes at night and every \
         {DAY_STEP} by day (the learned reserve's sampling); each Run 2 h of work in 5-minute \
         steps; the week resets Thursday 05:00; every bound keeps a {MARGIN}-point margin"
    );
    for user in &USERS {
        let wants = user_days(user, weeks);
        let history = warm_up(&wants);
        for world in &WORLDS {
            println!(
                "\n{} user, {}: an hour of agent work costs {} pp of the five-hour window and \
                 {} pp of the week",
                user.name, world.name, world.five_per_hour, world.week_per_hour
            );
            let mut results = Vec::new();
            for (column, name) in COLUMNS {
                let m = measure(world, &wants, column, &history, weeks);
                let mean = m.agent_hours.iter().sum::<f64>() / m.agent_hours.len() as f64;
                println!(
                    "  {name}: {mean:.2} agent-hours a week ({}); user-limited minutes: {}",
                    m.agent_hours
                        .iter()
                        .map(|h| format!("{h:.1}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    m.limited_minutes
                );
                results.push(mean);
            }
            let (fixed, learned, oracle) = (results[0], results[2], results[3]);
            println!(
                "  the learned reserve: {:.0}% of the oracle's agent-hours, {:.2}x the static \
                 ceilings'",
                100.0 * learned / oracle.max(f64::EPSILON),
                learned / fixed.max(f64::EPSILON)
            );
        }
    }
}

/// A small seeded generator (xorshift64*): the same user every run.
struct Seeded(u64);

impl Seeded {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The user's wish at each day step from four weeks before [`START`] to the measured weeks'
/// end: each day their usual use times a noise of ±30%, one weekday a week at twice it.
fn user_days(user: &User, weeks: i64) -> Vec<(DateTime<Utc>, Want)> {
    let mut rng = Seeded(0x5EED_0000 + user.name.len() as u64);
    let first = at(START) - Duration::weeks(4);
    let mut out = Vec::new();
    for day in 0..(4 + weeks) * 7 {
        let date = first + Duration::days(day);
        if day % 7 == 0 {
            rng.unit();
        }
        let weekday = day % 7 < 5;
        let double = (rng.0 % 5) as i64 == day % 7;
        let factor = (0.7 + 0.6 * rng.unit()) * if double { 2.0 } else { 1.0 };
        let (hours, week) = match weekday {
            true => (user.weekday_hours, user.weekday_week),
            false => (user.weekend_hours, user.weekend_week),
        };
        for step in 0..(24 * 60 / DAY_STEP) {
            let t = date + Duration::minutes(step * DAY_STEP);
            let share = DAY_STEP as f64 / 60.0;
            let want = match hours.contains(&t.hour()) {
                true => Want {
                    five: user.five_per_hour * share * factor,
                    week: week / hours.len() as f64 * share * factor,
                },
                false => Want::default(),
            };
            out.push((t, want));
        }
    }
    out
}

/// Spends the user's wish at `t` on the plan; the minutes they were limited (a Window at 100%
/// kept some of it from them).
fn spend(plan: &std::path::Path, t: DateTime<Utc>, want: Want) -> i64 {
    if want.five == 0.0 && want.week == 0.0 {
        return 0;
    }
    let mut state = plan::rolled(read(plan), t.timestamp());
    if state["five_hour"]["resets_at"].is_null() {
        state["five_hour"]["resets_at"] = json!((t + Duration::hours(5)).timestamp());
    }
    let mut limited = 0;
    for (window, wish) in [("five_hour", want.five), ("week", want.week)] {
        let used = state[window]["used"].as_f64().unwrap();
        if used + wish > 100.0 + 1e-9 {
            limited = DAY_STEP;
        }
        state[window]["used"] = json!((used + wish).min(100.0));
    }
    std::fs::write(plan, state.to_string()).unwrap();
    limited
}

fn read(plan: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(plan).unwrap()).unwrap()
}

/// Whether `t` is in the night, 22:00 to 07:00 (UTC, the bench's zone).
fn is_night(t: DateTime<Utc>) -> bool {
    t.hour() >= 22 || t.hour() < 7
}

/// The next moment the bench acts after `t`: the night's timer, or by day the next half
/// hour (the user's step and the sampling's).
fn next_step(t: DateTime<Utc>) -> DateTime<Utc> {
    use chrono::DurationRound;
    match is_night(t) {
        true => t + Duration::minutes(NIGHT_STEP),
        false => {
            let step = Duration::minutes(DAY_STEP);
            t.duration_trunc(step).unwrap_or(t) + step
        }
    }
}

/// An env whose plan and clock are the bench's, at `t`, the week as the user's own days of
/// it since its last reset left it.
fn env_at(
    world: &World,
    t: DateTime<Utc>,
    wants: &[(DateTime<Utc>, Want)],
) -> (TestEnv, std::path::PathBuf, std::path::PathBuf) {
    let mut env = TestEnv::new();
    let clock = env.dir.path().join("clock");
    let plan = env.dir.path().join("plan.json");
    std::fs::write(&clock, iso(t)).unwrap();
    env.now = format!("@{}", clock.display());
    env.extra_env
        .push(("FAKE_AGENT_PLAN".into(), plan.display().to_string()));
    env.extra_env
        .push(("FAKE_AGENT_VERSION".into(), "2.1.332 (Claude Code)".into()));
    let step = 5.0 / 60.0;
    let mut reset = at(FIRST_WEEK_RESET);
    while reset <= t {
        reset += Duration::weeks(1);
    }
    let users: f64 = wants
        .iter()
        .filter(|(w, _)| *w >= reset - Duration::weeks(1) && *w < t)
        .map(|(_, want)| want.week)
        .sum();
    std::fs::write(
        &plan,
        json!({"cost_five": world.five_per_hour * step, "cost_week": world.week_per_hour * step,
            "five_hour": {"resets_at": null, "used": 0.0},
            "week": {"resets_at": reset.timestamp(), "used": users}, "steps": 0})
        .to_string(),
    )
    .unwrap();
    (env, clock, plan)
}

/// Four weeks of the user's days before [`START`], sampled by idle ticks, no Job queued: the
/// store a learned reserve starts the measured weeks with.
fn warm_up(wants: &[(DateTime<Utc>, Want)]) -> [Vec<u8>; 2] {
    let (env, clock, plan) = env_at(&WORLDS[0], wants[0].0, wants);
    env.write_config(&config(Column::Learned));
    for (t, want) in wants.iter().filter(|(t, _)| *t < at(START)) {
        spend(&plan, *t, *want);
        if !is_night(*t) {
            std::fs::write(&clock, iso(*t)).unwrap();
            let _ = env.owl().arg("tick").output().unwrap();
        }
    }
    // The database and its write-ahead log, as a copy of the state dir would take them.
    ["owl.db", "owl.db-wal"].map(|name| std::fs::read(env.state.join(name)).unwrap_or_default())
}

fn config(column: Column) -> String {
    let night = "schedule:\n  window: \"22:00-07:00\"\n";
    let ceilings = "    limits: {fiveHourMax: 60, weeklyMax: 50}\n";
    match column {
        Column::Static => format!("accounts:\n  work:\n{ceilings}"),
        Column::Morning => format!("{night}accounts:\n  work:\n{ceilings}"),
        Column::Learned => {
            format!("{night}accounts:\n  work:\n    learnedReserve: {{minDays: 7}}\n")
        }
        Column::Oracle => format!("{night}accounts:\n  work:\n"),
    }
}

/// The oracle's ceilings at `t`: 100 less the margin and what the user will in fact use of
/// each Window until its reset (a five-hour window owl would open now: the next five hours),
/// never above the night ceiling.
fn oracle_config(
    plan: &std::path::Path,
    t: DateTime<Utc>,
    wants: &[(DateTime<Utc>, Want)],
) -> String {
    let state = plan::rolled(read(plan), t.timestamp());
    let until = |window: &str, default: DateTime<Utc>| {
        state[window]["resets_at"]
            .as_i64()
            .and_then(|r| DateTime::from_timestamp(r, 0))
            .unwrap_or(default)
    };
    let (five_end, week_end) = (until("five_hour", t + Duration::hours(5)), until("week", t));
    let future = |end: DateTime<Utc>, of: fn(&Want) -> f64| -> f64 {
        wants
            .iter()
            .filter(|(w, _)| *w >= t && *w < end)
            .map(|(_, want)| of(want))
            .sum()
    };
    let bound = |used: f64| (100.0 - MARGIN - used).clamp(0.0, NIGHT_MAX).floor();
    format!(
        "schedule:\n  window: \"22:00-07:00\"\naccounts:\n  work:\n    limits: {{fiveHourMax: {}, weeklyMax: {}}}\n",
        bound(future(five_end, |w| w.five)),
        bound(future(week_end, |w| w.week))
    )
}

/// One column over the measured weeks.
fn measure(
    world: &World,
    wants: &[(DateTime<Utc>, Want)],
    column: Column,
    history: &[Vec<u8>; 2],
    weeks: i64,
) -> Measured {
    let start = at(START);
    let (env, clock, plan) = env_at(world, start, wants);
    if column == Column::Learned {
        std::fs::create_dir_all(&env.state).unwrap();
        for (name, bytes) in ["owl.db", "owl.db-wal"].iter().zip(history) {
            if !bytes.is_empty() {
                std::fs::write(env.state.join(name), bytes).unwrap();
            }
        }
    }
    env.write_config(&config(column));
    env.script(SCRIPT);
    for i in 0..3 {
        env.owl()
            .args(["add", "--max-runs", "100000", "--repo"])
            .arg(&env.repo)
            .arg(format!("Keep working {i}"))
            .assert()
            .success();
    }
    let mut m = Measured::default();
    let mut steps_before = 0.0;
    let end = start + Duration::weeks(weeks);
    let mut week_end = start + Duration::weeks(1);
    let mut day = wants.iter().filter(|(w, _)| *w >= start).peekable();
    let mut t = start;
    while t < end {
        // The user's day up to now, spent before owl's next decision.
        while let Some((w, want)) = day.next_if(|(w, _)| *w <= t) {
            m.limited_minutes += spend(&plan, *w, *want);
        }
        if is_night(t) || column == Column::Learned {
            if column == Column::Oracle {
                env.write_config(&oracle_config(&plan, t, wants));
            }
            std::fs::write(&clock, iso(t)).unwrap();
            let _ = env.owl().arg("tick").output().unwrap();
        }
        let after = at(std::fs::read_to_string(&clock).unwrap().trim());
        t = next_step(t).max(after);
        if t >= week_end {
            let steps = read(&plan)["steps"].as_f64().unwrap();
            m.agent_hours.push((steps - steps_before) * 5.0 / 60.0);
            steps_before = steps;
            week_end += Duration::weeks(1);
        }
    }
    m
}
