//! The zero-token probe: starts the agent with an Account's environment only to ask for its utilization.

use std::io::BufRead;
use std::io::BufReader;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::process;
use crate::config::Account;
use crate::driver::{AgentEvent, Driver, Usage};
use crate::usage::{ProbeOutcome, PROBE_TIMEOUT};

/// Starts the agent with the Account's environment, asks only for its utilization, and
/// stops it. No prompt is written, so no tokens are spent.
pub fn probe(driver: &dyn Driver, command: &Path, account: &Account, cwd: &Path) -> ProbeOutcome {
    probe_reporting(driver, command, account, cwd, &|_| {})
}

/// [`probe`], telling `spawned` the probe's pid (the leader of its own group) once it runs.
pub fn probe_reporting(
    driver: &dyn Driver,
    command: &Path,
    account: &Account,
    cwd: &Path,
    spawned: &dyn Fn(i32),
) -> ProbeOutcome {
    let Some(request) = driver.usage_request_input("owl-probe") else {
        return ProbeOutcome::Failed("the driver cannot report utilization".into());
    };
    let invocation = driver.probe_invocation(command, account);
    let marker = process::RunMarker {
        run_id: "probe".into(),
        state_dir: cwd.to_path_buf(),
    };
    let mut child = match process::spawn(&invocation, cwd, &marker) {
        Ok(c) => c,
        Err(e) => return ProbeOutcome::Failed(format!("starting '{}': {e}", command.display())),
    };
    let pid = child.id() as i32;
    spawned(pid);
    let mut stdin = child.stdin.take();
    if let Some(s) = stdin.as_mut() {
        use std::io::Write;
        if let Err(e) = s.write_all(&request).and_then(|()| s.flush()) {
            stop_probe(child, pid, stdin);
            return ProbeOutcome::Failed(format!("writing the usage request: {e}"));
        }
    }
    let (tx, rx) = mpsc::channel();
    if let Some(stdout) = child.stdout.take() {
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).split(b'\n') {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    if let Some(stderr) = child.stderr.take() {
        std::thread::spawn(move || {
            std::io::copy(&mut BufReader::new(stderr), &mut std::io::sink())
        });
    }
    let deadline = Instant::now() + PROBE_TIMEOUT;
    let outcome = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => match driver.parse_line(&line) {
                Ok(AgentEvent::ControlResponse { usage: Some(u), .. }) => {
                    break match u {
                        Usage::Unknown => ProbeOutcome::Unknown,
                        Usage::Windows(w) => ProbeOutcome::Observed(w),
                        Usage::NoPlan => ProbeOutcome::NoPlan,
                    }
                }
                Ok(AgentEvent::ControlResponse { ok: false, .. }) => {
                    break ProbeOutcome::Failed("the agent refused the usage request".into())
                }
                _ => continue,
            },
            Err(mpsc::RecvTimeoutError::Timeout) => {
                break ProbeOutcome::Failed(format!(
                    "no answer within {}s",
                    PROBE_TIMEOUT.as_secs()
                ))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break ProbeOutcome::Failed("the agent exited without answering".into())
            }
        }
    };
    stop_probe(child, pid, stdin);
    outcome
}

/// Closes stdin (the CLI exits on EOF), waits for the exit (not polling it), and makes
/// sure the probe and its group are gone.
fn stop_probe(child: std::process::Child, pid: i32, stdin: Option<std::process::ChildStdin>) {
    drop(stdin);
    let (tx, rx) = mpsc::channel();
    let mut child = child;
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    if rx.recv_timeout(Duration::from_secs(2)).is_err() {
        let _ = crate::sys::signal_group(pid, crate::sys::Sig::KILL);
        let _ = rx.recv();
    }
    // Whatever the probe started in its group goes with it.
    let _ = crate::sys::signal_group(pid, crate::sys::Sig::KILL);
}
