//! Prints the figure of docs/performance.md's "Ticks started together": three Accounts whose
//! probes each take PROBE_MS (a slow network), one Job bound to each, three ticks started
//! together; beside it, measured in the same run, one tick alone on one such Account. Before
//! issue 36 the pick lock was held through the probe, and the three Runs started one probe
//! after another (about 3x); now each probe runs under its own Account's lock.
//!
//! Run: `cargo bench --bench pick`. It drives the real binaries, like the integration tests.

#[path = "../tests/integration/support.rs"]
#[allow(dead_code)]
mod support;

use std::time::{Duration, Instant};

use support::TestEnv;

/// How long each Account's probe takes to answer.
const PROBE_MS: u64 = 3_000;
/// How many times each figure is measured; the median is printed.
const ROUNDS: usize = 3;

fn main() {
    println!(
        "owl: ticks started together, each Account's probe {PROBE_MS} ms ({ROUNDS} rounds, median)"
    );
    let alone = median((0..ROUNDS).map(|_| together(&["a"], 1)).collect());
    let three = median((0..ROUNDS).map(|_| together(&["a", "b", "c"], 3)).collect());
    let four = median((0..ROUNDS).map(|_| together(&["a", "b", "c"], 4)).collect());
    println!(
        "  one tick alone, one Account:          {:.2} s",
        alone.as_secs_f64()
    );
    println!(
        "  3 ticks, 3 Accounts, all Runs ended:  {:.2} s ({:.2}x one tick alone)",
        three.as_secs_f64(),
        three.as_secs_f64() / alone.as_secs_f64()
    );
    println!(
        "  4 ticks, 3 Accounts, all Runs ended:  {:.2} s ({:.2}x one tick alone)",
        four.as_secs_f64(),
        four.as_secs_f64() / alone.as_secs_f64()
    );
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Starts `ticks` ticks at once on `accounts` (each with a slow probe and one bound Job) and
/// returns the time until every tick ended, every Job run once.
fn together(accounts: &[&str], ticks: usize) -> Duration {
    let env = TestEnv::new();
    let mut body = env.accounts_block(accounts);
    for name in accounts {
        body = body.replace(
            &format!("  {name}:\n"),
            &format!(
                "  {name}:\n    limits: {{fiveHourMax: 60}}\n    env: {{FAKE_AGENT_USAGE_DELAY_MS: '{PROBE_MS}'}}\n"
            ),
        );
    }
    env.write_config(&body);
    env.five_hour(&[10.0], "2026-11-30T05:00:00.000Z");
    env.script(&support::done_script("success.jsonl", 0));
    let jobs: Vec<String> = accounts
        .iter()
        .map(|n| env.add_with(&["--account", n], &format!("On {n}")))
        .collect();
    let started = Instant::now();
    let children: Vec<std::process::Child> = (0..ticks).map(|_| env.spawn_tick()).collect();
    for child in children {
        child.wait_with_output().unwrap();
    }
    let took = started.elapsed();
    for id in &jobs {
        assert_eq!(env.show(id)["state"], "done", "job {id} did not run");
    }
    took
}
