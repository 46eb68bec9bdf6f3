//! What the morning plan's and the learned reserve's benches share: the two worlds of the fake agent's plan model, the Run they queue, and times as the clock file holds them.

use chrono::{DateTime, Utc};

/// A Run's work before it hands off: 24 steps of five simulated minutes.
pub const SCRIPT: &str = "read-prompt\nplan-work 24\nwrite .owl/handoff.md status: continue\\n\\nMore to do.\\n\ncommit owl handoff\nreplay success.jsonl\nwait-stdin-eof\nexit 0\n";

/// A world: what an hour of agent work costs of the five-hour window and of the week.
pub struct World {
    pub name: &'static str,
    pub five_per_hour: f64,
    pub week_per_hour: f64,
}

pub const WORLDS: [World; 2] = [
    World {
        name: "the five-hour window binds",
        five_per_hour: 20.0,
        week_per_hour: 1.0,
    },
    World {
        name: "the week binds",
        five_per_hour: 10.0,
        week_per_hour: 3.0,
    },
];

pub fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

pub fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}
