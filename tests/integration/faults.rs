//! Fault injection: owl killed or signalled mid-Run, agents that misbehave, hostile
//! streams, storage faults, and a crowd of ticks. Processes are proven dead through
//! /proc, never by sleeping and hoping.

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use crate::support::{alive, done_script, finish, held_run_script, TestEnv};

/// Waits (bounded) for a process to be gone; true when it is.
fn gone_within(pid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while alive(pid) {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Waits until the fake agent has started its Run and recorded `file`.
fn wait_for_file(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if !text.trim().is_empty() {
                return text;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn pids(text: &str) -> Vec<i32> {
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// The agent's first API response, a tool process in its own session, then a long tool call.
const SESSION_TOOL: &str =
    "read-prompt\nreplay interrupt-control-request.jsonl 1 2\nspawn-session 600\nsleep 60000\n";

#[test]
fn kill_9_of_owl_leaves_a_lost_run_that_the_next_tick_cleans_up() {
    let env = TestEnv::new();
    env.script(&format!(
        "write wip.txt work in progress\\n\n{SESSION_TOOL}"
    ));
    let id = env.add("Work");
    let mut owl = env.spawn_tick();
    let tool = pids(&wait_for_file(&env.record.join("children.txt")))[0];
    let agent: i32 = wait_for_file(&env.record.join("pid.txt"))
        .trim()
        .parse()
        .unwrap();
    owl.kill().unwrap(); // SIGKILL
    owl.wait().unwrap();
    // PR_SET_PDEATHSIG ends the agent; its tool, in a session of its own, lives on.
    assert!(
        gone_within(agent, Duration::from_secs(10)),
        "the agent outlived owl"
    );
    assert!(
        alive(tool),
        "the test needs a survivor to prove the cleanup"
    );
    assert_eq!(env.show(&id)["state"], "running");

    env.script(&done_script("success.jsonl", 0));
    let tick = env.owl().args(["tick", "--json"]).assert().success();
    let stderr = String::from_utf8_lossy(&tick.get_output().stderr).to_string();
    assert!(stderr.contains("run 1 of job"), "{stderr}");
    assert!(
        gone_within(tool, Duration::from_secs(5)),
        "the lost Run's tool process survived"
    );
    let show = env.show(&id);
    let lost = &show["runs"][0];
    assert_eq!(lost["outcome"], "lost");
    assert!(lost["stop_reason"].as_str().unwrap().contains("died"));
    assert_eq!(lost["survivors_killed"], 1);
    // What the lost Run wrote was committed by owl on the Job's branch.
    assert!(lost["safety_commit"].is_string());
    let branch = format!("owl/{id}");
    assert_eq!(
        crate::support::git(&env.repo, &["show", &format!("{branch}:wip.txt")]),
        "work in progress\n"
    );
    // The Job went back to the queue and the same tick ran it.
    assert_eq!(show["runs"][1]["outcome"], "succeeded");
    assert_eq!(show["state"], "done");
}

#[test]
fn sigterm_to_owl_interrupts_the_run_and_nothing_survives() {
    let env = TestEnv::new();
    env.script(SESSION_TOOL);
    let id = env.add("Work");
    let owl = env.spawn_tick();
    let tool = pids(&wait_for_file(&env.record.join("children.txt")))[0];
    let agent: i32 = wait_for_file(&env.record.join("pid.txt"))
        .trim()
        .parse()
        .unwrap();
    assert_eq!(env.status()["running"]["supervisor_alive"], true);
    let sent = Instant::now();
    unsafe { libc::kill(owl.id() as i32, libc::SIGTERM) };
    let tick = finish(owl);
    let took = sent.elapsed();
    eprintln!("figure: SIGTERM to owl -> run recorded in {took:?}");
    // graceWindow is 2s in the tests.
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert_eq!(tick["outcome"], "interrupted");
    assert_eq!(tick["stop_reason"], "owl received SIGTERM");
    assert!(!alive(agent) && !alive(tool));
    let run = &env.show(&id)["runs"][0];
    assert_eq!(run["survivors_killed"], 1);
    // The interrupt came first, the agent answered with its own result.
    assert!(env
        .recorded("stdin.jsonl")
        .contains(r#""subtype":"interrupt""#));
}

#[test]
fn an_agent_that_ignores_sigterm_is_killed_after_the_grace_window() {
    let env = TestEnv::with_config("defaults:\n  maxRunTime: 1s\n");
    env.script("read-prompt\nignore-sigterm\nhang-after-interrupt\nreplay interrupt-control-request.jsonl 1 2\nsleep 60000\n");
    let id = env.add("Stubborn");
    let started = Instant::now();
    let tick = env.tick();
    let took = started.elapsed();
    eprintln!(
        "figure: maxRunTime 1s, agent ignoring SIGTERM -> killed, run recorded after {took:?}"
    );
    assert_eq!(tick["outcome"], "timed_out");
    let run = &env.show(&id)["runs"][0];
    assert_eq!(run["exit_code"], 128 + 9, "killed by SIGKILL");
    // 1s run time + 2s for stdin close + 2s grace, and not the 60s the agent wanted.
    assert!(took < Duration::from_secs(15), "{took:?}");
    let agent = env.agent_pid();
    assert!(!alive(agent));
}

#[test]
fn a_second_sigterm_goes_straight_to_sigkill() {
    let env = TestEnv::new();
    env.script("read-prompt\nignore-sigterm\nhang-after-interrupt\nreplay interrupt-control-request.jsonl 1 2\nsleep 60000\n");
    let id = env.add("Stubborn");
    let owl = env.spawn_tick();
    wait_for_file(&env.record.join("pid.txt"));
    env.wait_running();
    let sent = Instant::now();
    unsafe { libc::kill(owl.id() as i32, libc::SIGTERM) };
    // The second signal once the first has taken effect: owl wrote its interrupt.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !env
        .recorded("stdin.jsonl")
        .contains(r#""subtype":"interrupt""#)
    {
        assert!(Instant::now() < deadline, "owl never interrupted the agent");
        std::thread::sleep(Duration::from_millis(5));
    }
    unsafe { libc::kill(owl.id() as i32, libc::SIGTERM) };
    let tick = finish(owl);
    // Without the second signal the agent, deaf to the interrupt and to SIGTERM, would get
    // SIGKILL only after the interrupt's 10 s wait, the stdin close and the grace window:
    // the bound is half of the least of that, so a loaded machine cannot fail it.
    assert!(
        sent.elapsed() < owl::INTERRUPT_WAIT / 2,
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(tick["outcome"], "interrupted");
    assert_eq!(env.show(&id)["runs"][0]["exit_code"], 128 + 9);
}

#[test]
fn a_stalled_agent_is_timed_out() {
    let env = TestEnv::with_config("stallTimeout: 1s\n");
    env.script("read-prompt\nreplay success.jsonl 1 1\nsleep 60000\n");
    let id = env.add("Hang");
    let tick = env.tick();
    assert_eq!(tick["outcome"], "timed_out");
    assert_eq!(tick["stop_reason"], "stalled");
    assert_eq!(env.show(&id)["state"], "queued");
}

#[test]
fn sixteen_ticks_at_once_run_exactly_one_agent() {
    let env = TestEnv::new();
    env.script(&held_run_script(
        &env.release_file(),
        "write .owl/handoff.md status: done\\n\ncommit handoff\n",
    ));
    let id = env.add("Once");
    let mut ticks: Vec<Child> = (0..16).map(|_| env.spawn_tick()).collect();
    // The Run is held until every other tick has ended: all sixteen met it in progress.
    crate::support::wait_until_ticks_left(&mut ticks, 1, Duration::from_secs(60));
    env.release();
    let actions = crate::support::actions(ticks);
    assert_eq!(
        actions.iter().filter(|a| *a == "ran").count(),
        1,
        "{actions:?}"
    );
    assert!(
        actions
            .iter()
            .all(|a| a == "ran" || a == "busy" || a == "idle"),
        "{actions:?}"
    );
    assert_eq!(env.show(&id)["runs"].as_array().unwrap().len(), 1);
}

#[test]
fn hostile_lines_are_logged_skipped_and_counted() {
    let env = TestEnv::new();
    env.script(
        "read-prompt\nreplay success.jsonl 1 1\nemit this is not json\nemit-bytes \\xff\\xfe{\\n\nemit-bytes \\0\\0\\0\\n\n\
         emit {\"type\":\"brand_new_event\",\"x\":1}\nemit []\nemit {\"type\":\"result\"}\nwait-stdin-eof\n",
    );
    let id = env.add("Garbage");
    let tick = env.tick();
    assert_eq!(tick["outcome"], "failed");
    assert_eq!(
        tick["stop_reason"],
        "the agent's result line says nothing of how the turn ended"
    );
    let run = &env.show(&id)["runs"][0];
    // not JSON, not UTF-8, NUL bytes, and a JSON line without a type.
    assert_eq!(run["skipped_lines"], 4);
    let log = std::fs::read(env.run_log(&id, 1)).unwrap();
    assert_eq!(log, std::fs::read(env.record.join("stdout.bin")).unwrap());
}

/// Runs one tick and returns the peak resident set (KiB) of that owl process, from wait4
/// in a clean parent (the fake agent's `--peak-rss-into`): an upper bound on owl's own,
/// since it includes the children owl waited for.
fn tick_peak_rss_kib(env: &TestEnv) -> i64 {
    let figure = env.dir.path().join("peak-rss");
    let owl = env.owl_std();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_owl-fake-agent"));
    for (key, value) in owl.get_envs() {
        match value {
            Some(value) => cmd.env(key, value),
            None => cmd.env_remove(key),
        };
    }
    let status = cmd
        .arg("--peak-rss-into")
        .arg(&figure)
        .arg(owl.get_program())
        .args(["tick", "--json"])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "{status}");
    std::fs::read_to_string(&figure).unwrap().parse().unwrap()
}

#[test]
fn a_64_mib_line_is_logged_whole_and_owl_stays_small() {
    let env = TestEnv::new();
    env.script(&format!("read-prompt\nreplay success.jsonl 1 1\nemit-long {}\n{}", 64 << 20, "write .owl/handoff.md status: done\\n\ncommit handoff\nreplay success.jsonl 2 3\nwait-stdin-eof\n"));
    let id = env.add("Big");
    let peak = tick_peak_rss_kib(&env);
    eprintln!(
        "figure: peak RSS of owl (and the children it waited for) with a 64 MiB line: {peak} KiB"
    );
    assert!(peak < 64 * 1024, "peak {peak} KiB");
    assert_eq!(env.show(&id)["runs"][0]["outcome"], "succeeded");
    let run = &env.show(&id)["runs"][0];
    assert_eq!(run["skipped_lines"], 1);
    let log_len = std::fs::metadata(env.run_log(&id, 1)).unwrap().len();
    assert!(log_len > 64 << 20, "{log_len}");
    assert_eq!(
        std::fs::read(env.run_log(&id, 1)).unwrap(),
        std::fs::read(env.record.join("stdout.bin")).unwrap()
    );
}

#[test]
fn stdout_closed_while_the_process_lingers() {
    let env = TestEnv::new();
    env.script("read-prompt\nreplay success.jsonl 1 2\nclose-stdout\nsleep 60000\n");
    let id = env.add("Close");
    let started = Instant::now();
    let tick = env.tick();
    // Not the agent's 60000 s: owl did not wait for it once stdout closed.
    assert!(started.elapsed() < Duration::from_secs(300));
    assert_eq!(tick["outcome"], "failed");
    assert!(
        tick["stop_reason"]
            .as_str()
            .unwrap()
            .contains("no result line"),
        "{tick}"
    );
    let agent = env.agent_pid();
    assert!(!alive(agent));
    assert_eq!(env.show(&id)["state"], "queued");
}

#[test]
fn a_grandchild_holding_stdout_is_killed_and_the_run_recorded() {
    let env = TestEnv::new();
    env.script(&format!("{}spawn-holding 600\nexit 0\n", "read-prompt\nwrite .owl/handoff.md status: done\\n\ncommit handoff\nreplay success.jsonl\n"));
    let id = env.add("Hold");
    let started = Instant::now();
    let tick = env.tick();
    // Not the holder's 600 s: owl stopped waiting for the pipe it held. (Half of it, not
    // a few seconds: a loaded machine must not fail this.)
    assert!(
        started.elapsed() < Duration::from_secs(300),
        "owl waited for the pipe the grandchild held"
    );
    assert_eq!(tick["outcome"], "succeeded");
    let holder = pids(&env.recorded("children.txt"))[0];
    assert!(!alive(holder), "the grandchild holding stdout survived");
    assert_eq!(env.show(&id)["runs"][0]["survivors_killed"], 1);
}

#[test]
fn a_log_that_cannot_be_written_fails_the_run_and_keeps_the_row() {
    let env = TestEnv::new();
    env.script("read-prompt\nreplay success.jsonl 1 2\nsleep 60000\n");
    let id = env.add("Full disk");
    let logs = env.state.join("logs").join(&id);
    std::fs::create_dir_all(&logs).unwrap();
    std::os::unix::fs::symlink("/dev/full", logs.join("1.jsonl")).unwrap();
    let tick = env.tick();
    assert_eq!(tick["outcome"], "failed");
    assert!(
        tick["stop_reason"]
            .as_str()
            .unwrap()
            .starts_with("disk full: writing the log: No space left on device"),
        "{tick}"
    );
    let show = env.show(&id);
    assert_eq!(show["runs"][0]["outcome"], "failed");
    // Not the Job's doing: it keeps its place and its Runs.
    assert_eq!(show["runs"][0]["cause"], "disk_full");
    assert_eq!(show["state"], "queued");
}

#[test]
fn a_database_held_by_another_writer_delays_the_tick_but_does_not_fail_it() {
    let env = TestEnv::new();
    env.script(&done_script("success.jsonl", 0));
    let id = env.add("Patient");
    let conn = rusqlite::Connection::open(env.state.join("owl.db")).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE; UPDATE jobs SET priority = priority WHERE 0;")
        .unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        conn.execute_batch("COMMIT").unwrap();
    });
    let tick = env.tick();
    release.join().unwrap();
    assert_eq!(tick["outcome"], "succeeded");
    assert_eq!(env.show(&id)["state"], "done");
}

#[test]
fn the_lock_is_kept_holds_the_pid_and_is_not_inherited() {
    let env = TestEnv::new();
    env.script(&done_script("success.jsonl", 0));
    env.add("Hello");
    env.tick();
    let lock = env.state.join("tick.lock");
    assert!(lock.exists(), "the lock file is never deleted");
    assert!(std::fs::read_to_string(&lock)
        .unwrap()
        .trim()
        .parse::<u32>()
        .is_ok());
    let fds = env.recorded("fds.txt");
    assert!(
        !fds.contains("tick.lock"),
        "the agent inherited owl's lock: {fds}"
    );
    assert!(
        !fds.contains("owl.db"),
        "the agent inherited owl's database: {fds}"
    );
}

/// Issue 23: a stop signal that reaches owl after the Run is recorded but before the agent
/// is supervised (here: owl held opening the Run's log, a FIFO the test put there) ends with
/// the Run recorded `interrupted`, not counted, nothing spent, no agent started; not a Run
/// left without an outcome for the next tick to find lost.
#[test]
fn a_stop_signal_as_a_run_starts_is_recorded_not_lost() {
    use std::os::unix::fs::OpenOptionsExt;
    let env = TestEnv::new();
    env.script(&done_script("success.jsonl", 0));
    let id = env.add_with(&["--max-runs", "1"], "Hello");
    let logs = env.state.join("logs").join(&id);
    std::fs::create_dir_all(&logs).unwrap();
    let fifo = logs.join("1.jsonl");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let mut tick = env.spawn_tick();
    // The Run is recorded; owl waits in opening its log.
    let deadline = Instant::now() + Duration::from_secs(30);
    while env.show(&id)["runs"].as_array().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the Run was never recorded");
        std::thread::sleep(Duration::from_millis(20));
    }
    unsafe { libc::kill(tick.id() as i32, libc::SIGTERM) };
    // A reader lets the open go on (not blocking here either way).
    let _reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    let status = wait_bounded(&mut tick, Duration::from_secs(30));
    assert!(
        status.code().is_some(),
        "owl died of the signal: {status:?}"
    );
    let show = env.show(&id);
    let run = &show["runs"][0];
    assert_eq!(run["outcome"], "interrupted", "{run}");
    assert_eq!(run["stop"], "signal", "{run}");
    assert_eq!(run["counts"], false, "{run}");
    assert_eq!(run["cost_usd"], 0.0, "{run}");
    assert!(!env.record.join("pid.txt").exists(), "no agent started");
    // The Job, allowed one Run, is not charged for it.
    assert_eq!(show["state"], "queued", "{show}");
    // The next tick finds nothing lost.
    std::fs::remove_file(&fifo).unwrap();
    let next = env.tick();
    assert_eq!(next["outcome"], "succeeded", "{next}");
    assert_eq!(env.show(&id)["runs"][0]["outcome"], "interrupted");
}

fn wait_bounded(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("owl ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A Run that answers, commits its Handoff, then waits at `release` before it exits: the
/// test takes the database's write lock in between, so that owl's final write meets it.
fn held_at_the_end_script(release: &Path) -> String {
    format!(
        "read-prompt\nwrite .owl/handoff.md status: done\\n\\nAll done.\\n\ncommit owl handoff\nreplay success.jsonl\nwait-for {}\nwait-stdin-eof\nexit 0\n",
        release.display()
    )
}

/// Holds the database's write lock, as another writer would (a backup tool, a `sqlite3`
/// left open): every write of owl's fails on its busy timeout until it is let go.
fn hold_write_lock(env: &TestEnv) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(env.state.join("owl.db")).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE; UPDATE jobs SET priority = priority WHERE 0;")
        .unwrap();
    conn
}

/// Waits (bounded) until the Run's transcript has the agent's result line.
fn wait_for_result_line(env: &TestEnv, job: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(env.run_log(job, 1))
        .unwrap_or_default()
        .contains("\"type\":\"result\"")
    {
        assert!(Instant::now() < deadline, "the agent never gave its result");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The file a Run's outcome is kept in until the database has it.
fn kept_outcome(env: &TestEnv, job: &str) -> std::path::PathBuf {
    env.state.join("logs").join(job).join("1.outcome.json")
}

/// A tick whose Run has given its result and whose final write meets the database held
/// by another writer: the tick, the lock (let it go to let the write land), and the
/// line owl said when it first tried the write again (bounded wait); its stderr is read on
/// a thread, whose lines the handle gives.
struct HeldAtTheEnd {
    tick: std::process::Child,
    conn: rusqlite::Connection,
    retry_said: String,
    stderr: std::thread::JoinHandle<Vec<String>>,
}

fn held_at_the_end_until_a_retry(env: &TestEnv, id: &str) -> HeldAtTheEnd {
    use std::io::BufRead;
    let mut tick = env.spawn_tick();
    let stderr = std::io::BufReader::new(tick.stderr.take().unwrap());
    wait_for_result_line(env, id);
    let conn = hold_write_lock(env);
    env.release();
    let (said, said_rx) = std::sync::mpsc::channel();
    let stderr = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in stderr.lines().map_while(Result::ok) {
            if line.contains("trying again") {
                let _ = said.send(line.clone());
            }
            lines.push(line);
        }
        lines
    });
    let retry_said = said_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("owl never said it would try the write again");
    HeldAtTheEnd {
        tick,
        conn,
        retry_said,
        stderr,
    }
}

/// Issue 23: a final write that fails (the database held by another writer past the busy
/// timeout) is tried again, and lands when the database is let go.
#[test]
fn a_final_write_that_fails_is_tried_again_and_lands() {
    let env = TestEnv::new();
    env.script(&held_at_the_end_script(&env.release_file()));
    let id = env.add("Held at the end");
    // owl says it will try again; only then is the lock let go.
    let mut held = held_at_the_end_until_a_retry(&env, &id);
    assert!(held.retry_said.contains("run 1"), "{}", held.retry_said);
    held.conn.execute_batch("COMMIT").unwrap();
    let status = wait_bounded(&mut held.tick, Duration::from_secs(60));
    let stderr = held.stderr.join().unwrap().join("\n");
    assert!(status.success(), "the tick failed: {stderr}");
    let show = env.show(&id);
    assert_eq!(show["runs"][0]["outcome"], "succeeded", "{show}");
    assert_eq!(show["state"], "done", "{show}");
    assert!(
        !kept_outcome(&env, &id).exists(),
        "the kept outcome outlived its write"
    );
}

/// Runs a tick whose Run gives its result and whose final write never lands (the
/// database held by another writer until the tick gives up), then lets the database go:
/// the tick's stderr, and its exit code asserted 1.
fn tick_whose_final_write_never_lands(env: &TestEnv, id: &str) -> String {
    let tick = env.spawn_tick();
    wait_for_result_line(env, id);
    let conn = hold_write_lock(env);
    env.release();
    let out = tick.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    conn.execute_batch("COMMIT").unwrap();
    stderr
}

/// Issue 23: a final write that cannot land at all leaves the Run's outcome in a file
/// beside its transcript, and the next tick records it from there: the Run's own outcome
/// (not `lost`), its cost, and its Job's next state.
#[test]
fn a_final_write_that_cannot_land_is_recorded_by_the_next_tick() {
    let env = TestEnv::new();
    env.script(&held_at_the_end_script(&env.release_file()));
    let id = env.add("Held at the end");
    let stderr = tick_whose_final_write_never_lands(&env, &id);
    let kept = kept_outcome(&env, &id);
    assert!(
        stderr.contains(&format!("kept in {}", kept.display()))
            && stderr.contains("the next tick records it"),
        "{stderr}"
    );
    // Nothing is recorded yet: the Run is still running in the database.
    assert!(env.show(&id)["runs"][0]["outcome"].is_null());
    let next = env.owl().args(["tick", "--json"]).assert().success();
    let next_err = String::from_utf8_lossy(&next.get_output().stderr).into_owned();
    assert!(
        next_err.contains("run 1 of job") && next_err.contains("recorded from"),
        "{next_err}"
    );
    let show = env.show(&id);
    let run = &show["runs"][0];
    assert_eq!(run["outcome"], "succeeded", "{run}");
    assert_eq!(run["counts"], true, "{run}");
    assert!(run["cost_usd"].as_f64().unwrap() > 0.0, "{run}");
    assert_eq!(show["state"], "done", "{show}");
    assert!(!kept.exists(), "the kept outcome outlived its write");
}

/// Issue 23: when not even the file can be kept (here a directory stands in its place),
/// the next tick records the Run `lost` with what its transcript says: the agent's result,
/// its cost and its session; never a Run without an outcome.
#[test]
fn a_run_whose_outcome_could_not_be_kept_is_recorded_from_its_transcript() {
    let env = TestEnv::new();
    env.script(&held_at_the_end_script(&env.release_file()));
    let id = env.add("Held at the end");
    let kept = kept_outcome(&env, &id);
    std::fs::create_dir_all(kept.join("in-the-way")).unwrap();
    let stderr = tick_whose_final_write_never_lands(&env, &id);
    assert!(stderr.contains("could not be kept"), "{stderr}");
    env.owl().args(["tick", "--json"]).assert().success();
    let show = env.show(&id);
    let run = &show["runs"][0];
    assert_eq!(run["outcome"], "lost", "{run}");
    let reason = run["stop_reason"].as_str().unwrap();
    assert!(
        reason.contains("its transcript has the agent's result (success)"),
        "{reason}"
    );
    assert!(run["cost_usd"].as_f64().unwrap() > 0.0, "{run}");
    assert_eq!(
        run["session_id"], "7859bb08-6e62-4362-bef3-c4e1b305f720",
        "{run}"
    );
}

/// Issue 23: a stop signal while the Run's end is being written (here: during the retry
/// of a final write held up by another writer) does not cut the record short: the Run is
/// recorded with its own outcome once the write lands.
#[test]
fn a_stop_signal_while_the_run_is_recorded_does_not_lose_it() {
    let env = TestEnv::new();
    env.script(&held_at_the_end_script(&env.release_file()));
    let id = env.add("Held at the end");
    let mut held = held_at_the_end_until_a_retry(&env, &id);
    unsafe { libc::kill(held.tick.id() as i32, libc::SIGTERM) };
    held.conn.execute_batch("COMMIT").unwrap();
    let status = wait_bounded(&mut held.tick, Duration::from_secs(60));
    let stderr = held.stderr.join().unwrap().join("\n");
    assert!(status.code().is_some(), "owl died of the signal: {stderr}");
    let show = env.show(&id);
    assert_eq!(show["runs"][0]["outcome"], "succeeded", "{show}");
    assert_eq!(show["state"], "done", "{show}");
}

/// Issue 24: a CLI whose `--version` leaves a process holding its stdout (a wrapper
/// script's background job, in a session of its own) does not hold owl: the answer is read
/// when the CLI exits, not when the last writer lets the pipe go.
#[test]
fn a_version_check_whose_cli_leaves_its_stdout_held_does_not_hang() {
    let env = TestEnv::new();
    let mut doctor = env.owl_std();
    doctor.arg("doctor").env("FAKE_AGENT_VERSION_HOLD", "120");
    let out = crate::hostile::run_bounded(doctor, Duration::from_secs(15));
    let holder: i32 = env.recorded("version-holder.txt").trim().parse().unwrap();
    unsafe { libc::kill(holder, libc::SIGKILL) };
    assert!(
        out.stdout
            .contains("ok   account work: claude-code 2.1.197"),
        "{}",
        out.stdout
    );
}
