//! Prints the reliability figures of docs/reliability.md: how fast owl stops a Run, how
//! much memory it needs on a hostile stream, and what survives a kill -9.
//!
//! Run: `cargo bench --bench reliability`. It drives the real release binaries with the
//! fake agent, like the integration tests, and prints one line per figure.

#[path = "../tests/integration/support.rs"]
#[allow(dead_code)]
mod support;

use std::time::{Duration, Instant};

use support::{done_script, TestEnv};

const ROUNDS: usize = 5;

fn main() {
    println!("owl reliability figures ({ROUNDS} rounds each; graceWindow 2s)");
    figure(
        "SIGTERM to owl, agent honours the interrupt: signal -> owl exited",
        || stop_time(SESSION_TOOL, 1),
    );
    figure("SIGTERM to owl, agent answers the interrupt but never exits and ignores SIGTERM: signal -> owl exited", || {
        stop_time(STUBBORN, 1)
    });
    figure(
        "two SIGTERMs 100 ms apart, stubborn agent: first signal -> owl exited",
        || stop_time(STUBBORN, 2),
    );
    let (rss, took) = peak_rss(&format!(
        "read-prompt\nreplay success.jsonl 1 1\nemit-long {}\nreplay success.jsonl 2 3\nwait-stdin-eof\n",
        64 << 20
    ));
    println!("  peak RSS of owl (with its waited-for children) on one 64 MiB line: {} KiB ({:.1} MiB), run took {:?}", rss, rss as f64 / 1024.0, took);
    let flood: String = (0..200_000)
        .map(|i| format!("emit garbage line {i}\n"))
        .collect();
    let (rss, took) = peak_rss(&format!(
        "read-prompt\n{flood}replay success.jsonl\nwait-stdin-eof\n"
    ));
    println!(
        "  peak RSS of owl on 200,000 garbage lines: {} KiB ({:.1} MiB), run took {:?}",
        rss,
        rss as f64 / 1024.0,
        took
    );
    let survivors: usize = (0..ROUNDS).map(|_| survivors_after_kill_9()).sum();
    println!("  processes alive after kill -9 of owl and the next tick, over {ROUNDS} rounds: {survivors}");
    figure(
        "ceiling crossing -> interrupt on the agent's stdin, baseline: nobody else writes",
        || crossing_to_interrupt(false),
    );
    figure(
        "ceiling crossing -> interrupt on the agent's stdin, another process holding the write lock",
        || crossing_to_interrupt(true),
    );
    let (runs, counted, state) = night_of_ticks(ROUNDS, "no-plan");
    println!("  {ROUNDS} ticks on an Account with no login: {runs} Run(s) started, {counted} counted toward maxRuns, the Job {state}");
    let plan = r#"{"five_hour":{"utilization":10,"resets_at":"2026-11-30T05:00:00.000Z"}}"#;
    let (runs, counted, state) = night_of_ticks(ROUNDS, plan);
    println!("  baseline, the same {ROUNDS} ticks logged in: {runs} Run(s) started, {counted} counted toward maxRuns, the Job {state}");
    match disk_full_unrecorded() {
        Ok((recorded, unrecorded)) => println!(
            "  a disk that fills mid-Run (32 MiB tmpfs): {recorded} Run(s) recorded, {unrecorded} unrecorded"
        ),
        Err(why) => println!("  a disk that fills mid-Run: not measured ({why})"),
    }
}

/// From the moment the agent prints a crossing figure to owl's interrupt on its stdin,
/// optionally while another process holds SQLite's write lock.
fn crossing_to_interrupt(competing_writer: bool) -> Duration {
    let env = TestEnv::with_config("    limits: {fiveHourMax: 60}\nusagePollInterval: 1h\n");
    let gate = env.dir.path().join("cross-now");
    // No usage answers: the only figure is the crossing one.
    env.script(&support::crossing_at_gate_script(&gate));
    env.add("Work");
    let owl = env.spawn_tick();
    env.wait_running();
    let mut db = rusqlite::Connection::open(env.state.join("owl.db")).unwrap();
    let tx = competing_writer.then(|| {
        db.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .unwrap()
    });
    let crossed = Instant::now();
    std::fs::write(&gate, "").unwrap();
    while !env.recorded("stdin.jsonl").contains("\"interrupt\"") {
        assert!(crossed.elapsed() < Duration::from_secs(60), "no interrupt");
        std::thread::sleep(Duration::from_millis(1));
    }
    let took = crossed.elapsed();
    drop(tx);
    owl.wait_with_output().unwrap();
    took
}

/// Ticks on an Account with a ceiling whose agent answers `get_usage` with `usage` (a
/// `rate_limits` value, or `no-plan` for no login): Runs started and counted, the Job's state.
fn night_of_ticks(ticks: usize, usage: &str) -> (usize, usize, String) {
    let env = TestEnv::with_config("    limits: {fiveHourMax: 60}\n");
    std::fs::write(&env.usage, format!("{usage}\n")).unwrap();
    env.script(&done_script("success.jsonl", 0));
    let id = env.add("Work");
    for _ in 0..ticks {
        env.owl().args(["tick"]).assert().success();
    }
    let show = env.show(&id);
    let runs = show["runs"].as_array().unwrap();
    let counted = runs.iter().filter(|r| r["counts"] == true).count();
    (
        runs.len(),
        counted,
        show["state"].as_str().unwrap().to_string(),
    )
}

/// A Run whose agent fills the state dir's filesystem: Runs recorded and left unrecorded.
fn disk_full_unrecorded() -> Result<(usize, usize), String> {
    let env = TestEnv::with_config("minFreeSpace: 6MiB\n");
    std::fs::create_dir_all(&env.state).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=32m", "tmpfs"])
        .arg(&env.state)
        .status()
        .map_err(|e| e.to_string())?;
    if !mounted.success() {
        return Err("mounting a tmpfs needs root".into());
    }
    let filler = env.state.join("filler");
    env.script(&format!(
        "read-prompt\nreplay success.jsonl 1 2\nfill-disk {}\nemit-long 1048576\nsleep 60000\n",
        filler.display()
    ));
    let id = env.add("Build");
    let _ = env.owl().args(["tick"]).output();
    let runs = env.show(&id)["runs"].as_array().unwrap().clone();
    let unrecorded = runs.iter().filter(|r| r["outcome"].is_null()).count();
    let _ = std::process::Command::new("umount")
        .arg("-l")
        .arg(&env.state)
        .status();
    Ok((runs.len() - unrecorded, unrecorded))
}

const SESSION_TOOL: &str =
    "read-prompt\nreplay interrupt-control-request.jsonl 1 2\nspawn-session 600\nsleep 60000\n";
const STUBBORN: &str = "read-prompt\nignore-sigterm\nhang-after-interrupt\nreplay interrupt-control-request.jsonl 1 2\nspawn-session 600\nsleep 60000\n";

fn figure(what: &str, mut measure: impl FnMut() -> Duration) {
    let mut times: Vec<Duration> = (0..ROUNDS).map(|_| measure()).collect();
    times.sort();
    println!(
        "  {what}: median {:?}, max {:?}",
        times[ROUNDS / 2],
        times[ROUNDS - 1]
    );
}

fn wait_running(env: &TestEnv) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !env.record.join("children.txt").exists() || env.status()["running"]["pid"].is_null() {
        assert!(Instant::now() < deadline, "the Run never started");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn stop_time(script: &str, signals: usize) -> Duration {
    let env = TestEnv::new();
    env.script(script);
    env.add("Work");
    let mut owl = env.spawn_tick();
    wait_running(&env);
    let sent = Instant::now();
    for i in 0..signals {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(100));
        }
        unsafe { libc::kill(owl.id() as i32, libc::SIGTERM) };
    }
    owl.wait().unwrap();
    let took = sent.elapsed();
    assert_eq!(alive_children(&env), 0, "a process survived the Run");
    took
}

/// Runs one tick and returns owl's peak RSS (KiB) from wait4, and the tick's duration.
fn peak_rss(script: &str) -> (i64, Duration) {
    let env = TestEnv::new();
    env.script(script);
    env.add("Hostile");
    let started = Instant::now();
    // Reaped by wait4 below, which also reports the peak RSS.
    #[allow(clippy::zombie_processes)]
    let owl = env.spawn_tick();
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::wait4(owl.id() as i32, &mut status, 0, &mut usage) };
    (usage.ru_maxrss, started.elapsed())
}

fn survivors_after_kill_9() -> usize {
    let env = TestEnv::new();
    env.script(SESSION_TOOL);
    env.add("Work");
    let mut owl = env.spawn_tick();
    wait_running(&env);
    owl.kill().unwrap();
    owl.wait().unwrap();
    env.script(&done_script("success.jsonl", 0));
    env.owl().args(["tick"]).assert().success();
    // Give init a moment to reap what owl killed; a zombie is not alive.
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive_children(&env) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    alive_children(&env)
}

/// How many of the processes the fake agent started (itself and its children) still live.
fn alive_children(env: &TestEnv) -> usize {
    let mut pids: Vec<i32> = std::fs::read_to_string(env.record.join("children.txt"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    if let Ok(p) = std::fs::read_to_string(env.record.join("pid.txt")) {
        pids.extend(p.trim().parse::<i32>().ok());
    }
    pids.into_iter().filter(|pid| support::alive(*pid)).count()
}
