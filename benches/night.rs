//! Prints the figures of docs/performance.md's "A night on several Accounts": 12 Jobs on 3
//! Accounts, a fake agent of fixed duration, drained by ticks started as a timer starts
//! them; the wall time with one Run at a time (`maxConcurrentRuns: 1`) beside the one with
//! one Run per Account (the default), measured in the same run, and the idle gap between
//! one Run's end and the next start on the same Account.
//!
//! Run: `cargo bench --bench night`. It drives the real binaries, like the integration
//! tests.

#[path = "../tests/integration/support.rs"]
#[allow(dead_code)]
mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use support::TestEnv;

const JOBS: usize = 12;
const ACCOUNTS: [&str; 3] = ["work", "two", "three"];
/// How long each Run's agent works.
const RUN_MS: u64 = 2_000;
/// How often the timer starts a tick.
const TIMER: Duration = Duration::from_millis(250);

fn main() {
    println!(
        "owl: a night of {JOBS} Jobs on {} Accounts, each Run {RUN_MS} ms of agent work, a tick \
         started every {} ms",
        ACCOUNTS.len(),
        TIMER.as_millis()
    );
    let one = night("maxConcurrentRuns: 1\n");
    let each = night("");
    println!(
        "  one Run at a time (maxConcurrentRuns: 1): {:.1} s; idle gap on an Account between \
         a Run's end and its next start: mean {:.0} ms, max {:.0} ms",
        one.wall.as_secs_f64(),
        one.mean_gap_ms,
        one.max_gap_ms
    );
    println!(
        "  one Run per Account (the default):        {:.1} s; idle gap on an Account: mean {:.0} ms, max {:.0} ms",
        each.wall.as_secs_f64(),
        each.mean_gap_ms,
        each.max_gap_ms
    );
    println!(
        "  per Account / one at a time: {:.2} (the ideal with {} Accounts: {:.2})",
        each.wall.as_secs_f64() / one.wall.as_secs_f64(),
        ACCOUNTS.len(),
        1.0 / ACCOUNTS.len() as f64
    );
}

struct Night {
    wall: Duration,
    mean_gap_ms: f64,
    max_gap_ms: f64,
}

/// Drains the queue with ticks started every [`TIMER`] until every Job's Run has ended.
fn night(extra: &str) -> Night {
    let env = TestEnv::new();
    let log = env.dir.path().join("agent-times.log");
    let agent = wrapper(env.dir.path(), &log);
    let body = format!(
        "stateDir: {}\ngraceWindow: 2s\ndrivers:\n  claude-code:\n    command: {}\n{extra}{}",
        env.state.display(),
        agent.display(),
        env.accounts_block(&ACCOUNTS)
    );
    std::fs::write(&env.config, body).unwrap();
    env.script(&format!(
        "read-prompt\nsleep {RUN_MS}\nwrite .owl/handoff.md status: done\\n\ncommit handoff\nreplay success.jsonl\nwait-stdin-eof\n"
    ));
    for i in 0..JOBS {
        env.add(&format!("Job {i}"));
    }
    let started = Instant::now();
    let mut ticks: Vec<Child> = Vec::new();
    while ends(&log).len() < JOBS {
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "the night never ended"
        );
        ticks.push(env.spawn_tick());
        std::thread::sleep(TIMER);
        ticks.retain_mut(|t| t.try_wait().unwrap().is_none());
    }
    let wall = started.elapsed();
    for mut t in ticks {
        t.wait().unwrap();
    }
    let (mean_gap_ms, max_gap_ms) = gaps(&log);
    Night {
        wall,
        mean_gap_ms,
        max_gap_ms,
    }
}

/// The agent behind a wrapper that writes when each Run's agent starts and ends (its
/// Account by its credential store); the CLI's short checks pass straight through.
fn wrapper(dir: &Path, log: &Path) -> std::path::PathBuf {
    let path = dir.join("timed-agent");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\ncase \" $* \" in *\" --version \"*|*\" auth \"*) exec {fake} \"$@\";; esac\n\
             echo \"start $(date +%s.%N) $CLAUDE_CONFIG_DIR\" >> {log}\n\
             {fake} \"$@\"\nrc=$?\n\
             echo \"end $(date +%s.%N) $CLAUDE_CONFIG_DIR\" >> {log}\nexit $rc\n",
            fake = env!("CARGO_BIN_EXE_owl-fake-agent"),
            log = log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Each line of the log: (event, seconds, Account's store).
fn events(log: &Path) -> Vec<(String, f64, String)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ' ');
            Some((
                parts.next()?.to_string(),
                parts.next()?.parse().ok()?,
                parts.next()?.to_string(),
            ))
        })
        .collect()
}

fn ends(log: &Path) -> Vec<f64> {
    events(log)
        .into_iter()
        .filter(|(what, ..)| what == "end")
        .map(|(_, t, _)| t)
        .collect()
}

/// The idle gaps on each Account between a Run's end and its next start: mean and max, ms.
fn gaps(log: &Path) -> (f64, f64) {
    let mut by_account: BTreeMap<String, Vec<(f64, bool)>> = BTreeMap::new();
    for (what, t, account) in events(log) {
        by_account
            .entry(account)
            .or_default()
            .push((t, what == "start"));
    }
    let mut gaps = Vec::new();
    for mut times in by_account.into_values() {
        times.sort_by(|a, b| a.0.total_cmp(&b.0));
        for pair in times.windows(2) {
            if let [(end, false), (start, true)] = pair {
                gaps.push((start - end) * 1000.0);
            }
        }
    }
    let mean = gaps.iter().sum::<f64>() / gaps.len().max(1) as f64;
    let max = gaps.iter().copied().fold(0.0, f64::max);
    (mean, max)
}
