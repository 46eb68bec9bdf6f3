//! The supervision loop driven without a process: a scripted agent behind a fake Executor
//! writes recorded transcripts in arbitrary chunks, reads what owl sends it, and exits.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::config::Account;
use crate::driver::ClaudeCode;
use crate::model::ExitInfo;
use crate::supervise::process::{LostProcesses, Supervisor};

/// A recorded transcript of the real CLI (`tests/fixtures/`).
fn fixture(path: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    std::fs::read_to_string(root.join(path))
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

/// What the scripted agent does, step by step.
#[derive(Clone)]
enum Step {
    /// Writes these bytes on stdout, `chunk` bytes per write.
    Stdout { bytes: Vec<u8>, chunk: usize },
    /// Blocks until a stdin line containing this text arrives (or stdin closes).
    AwaitStdin(&'static str),
    /// Exits with this code.
    Exit(i32),
    /// Takes no notice of anything but SIGKILL, stdin's end included.
    Hang,
}

/// What the fake Executor saw owl do.
#[derive(Default)]
struct Seen {
    stdin: Vec<String>,
    signals: Vec<Sig>,
    leftovers_killed: bool,
}

/// Starts a scripted agent on threads: its streams are pipes, its exit a channel.
struct ScriptedExecutor {
    script: Vec<Step>,
    seen: Arc<Mutex<Seen>>,
    /// Where SIGKILL ends the scripted agent: its exit, and its thread (which closes its
    /// stdout as it goes).
    killed: Mutex<Option<(mpsc::Sender<ExitInfo>, mpsc::Sender<()>)>>,
}

impl ScriptedExecutor {
    fn new(script: Vec<Step>) -> ScriptedExecutor {
        ScriptedExecutor {
            script,
            seen: Arc::default(),
            killed: Mutex::new(None),
        }
    }
}

fn lines(lines: &[String], chunk: usize) -> Step {
    Step::Stdout {
        bytes: lines
            .iter()
            .flat_map(|l| format!("{l}\n").into_bytes())
            .collect(),
        chunk,
    }
}

impl Executor for ScriptedExecutor {
    fn kind(&self) -> crate::config::ExecutorKind {
        crate::config::ExecutorKind::Local
    }
    fn prepare(&self) -> io::Result<()> {
        Ok(())
    }
    fn supervisor(&self) -> Supervisor {
        Supervisor::default()
    }
    fn supervisor_alive(&self, _: &Supervisor) -> bool {
        false
    }
    fn spawn(&self, _: &Invocation, _: &RunPlace, _: i64) -> io::Result<RunHandle> {
        let (stdin_rx, stdin_tx) = io::pipe()?;
        let (stdout_rx, mut stdout_tx) = io::pipe()?;
        let (stderr_rx, stderr_tx) = io::pipe()?;
        let (exit_tx, exit_rx) = mpsc::channel();
        let (kill_tx, kill_rx) = mpsc::channel();
        *self.killed.lock().unwrap() = Some((exit_tx.clone(), kill_tx));
        let (script, seen) = (self.script.clone(), self.seen.clone());
        std::thread::spawn(move || {
            let _stderr = stderr_tx;
            let mut stdin = BufReader::new(stdin_rx).lines();
            for step in script {
                match step {
                    Step::Stdout { bytes, chunk } => {
                        for part in bytes.chunks(chunk) {
                            if stdout_tx.write_all(part).is_err() {
                                return;
                            }
                        }
                    }
                    Step::AwaitStdin(text) => {
                        while let Some(Ok(line)) = stdin.next() {
                            let found = line.contains(text);
                            seen.lock().unwrap().stdin.push(line);
                            if found {
                                break;
                            }
                        }
                    }
                    Step::Hang => {
                        let _ = kill_rx.recv();
                        return;
                    }
                    Step::Exit(code) => {
                        drop(stdout_tx);
                        let _ = exit_tx.send(ExitInfo {
                            code: Some(code),
                            signal: None,
                        });
                        return;
                    }
                }
            }
        });
        Ok(RunHandle {
            id: HandleId {
                pid: 4242,
                start_time: Some(1),
            },
            stdin: Box::new(stdin_tx),
            stdout: Box::new(stdout_rx),
            stderr: Box::new(stderr_rx),
            exit: Box::new(move || exit_rx.recv().unwrap_or_default()),
        })
    }
    fn start(&self, _: &Invocation, _: &Path) -> io::Result<RunHandle> {
        Err(io::Error::other("this script starts no probe"))
    }
    fn oneshot(
        &self,
        call: process::Oneshot<'_>,
    ) -> Result<crate::oneshot::Ended, crate::oneshot::Failed> {
        Err(crate::oneshot::Failed::Spawn {
            program: call.invocation.program.display().to_string(),
            source: io::Error::other("this script runs no short command"),
        })
    }
    fn state(&self, _: &HandleId) -> Option<char> {
        Some('S')
    }
    fn signal(&self, _: &HandleId, signal: Sig) {
        self.seen.lock().unwrap().signals.push(signal);
        if signal == Sig::KILL {
            if let Some((exit, kill)) = self.killed.lock().unwrap().as_ref() {
                let _ = exit.send(ExitInfo {
                    code: None,
                    signal: Some(9),
                });
                let _ = kill.send(());
            }
        }
    }
    fn kill_leftovers(&self, _: &HandleId) -> usize {
        self.seen.lock().unwrap().leftovers_killed = true;
        0
    }
    fn kill_lost(&self, _: &LostProcesses) -> usize {
        0
    }
}

/// Records what the loop told it; stops the Run at the first event `stop_at` picks.
struct Recording {
    events: Vec<AgentEvent>,
    spawned: Option<HandleId>,
    stop_at: fn(&AgentEvent) -> bool,
    stopped: bool,
}

impl Recording {
    fn new(stop_at: fn(&AgentEvent) -> bool) -> Recording {
        Recording {
            events: Vec::new(),
            spawned: None,
            stop_at,
            stopped: false,
        }
    }
}

impl Observer for Recording {
    fn spawned(&mut self, agent: &HandleId) {
        self.spawned = Some(*agent);
    }
    fn event(&mut self, event: &AgentEvent, _: &RunReport) -> Option<StopCause> {
        self.events.push(event.clone());
        let stop = !self.stopped && (self.stop_at)(event);
        self.stopped |= stop;
        stop.then_some(StopCause::Cancelled)
    }
    fn heartbeat(&mut self, _: &RunReport) -> Option<StopCause> {
        None
    }
}

/// Supervises one scripted Run of Claude Code to its end.
fn supervise_scripted(
    executor: &ScriptedExecutor,
    observer: &mut Recording,
) -> (RunReport, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let account = Account::plain();
    let invocation = Invocation {
        program: PathBuf::from("claude"),
        args: Vec::new(),
        env_set: Vec::new(),
        env_remove: Vec::new(),
        files: Vec::new(),
    };
    let stdout_log = dir.path().join("run.jsonl");
    let spec = RunSpec {
        driver: Arc::new(ClaudeCode),
        command: Path::new("claude"),
        account: &account,
        invocation: &invocation,
        place: RunPlace {
            workspace: dir.path(),
            files: dir.path(),
            hosts: &[],
        },
        run_id: 1,
        prompt: "Say hello.",
        stdout_log: File::create(&stdout_log).unwrap(),
        stderr_log: File::create(dir.path().join("run.stderr")).unwrap(),
        max_run_time: Duration::from_secs(60),
        stall_timeout: Duration::from_secs(60),
        grace_window: Duration::from_secs(2),
        usage_poll_interval: None,
        secrets: Vec::new(),
        latch: StopLatch::default(),
    };
    let report = supervise(spec, executor, observer).unwrap();
    (report, stdout_log, dir)
}

fn never(_: &AgentEvent) -> bool {
    false
}

#[test]
fn a_transcript_split_across_reads_is_read_line_by_line_and_logged_whole() {
    let transcript = fixture("claude-code-2.1.197/success.jsonl");
    for chunk in [1, 7, 4096] {
        let executor = ScriptedExecutor::new(vec![lines(&transcript, chunk), Step::Exit(0)]);
        let mut observer = Recording::new(never);
        let (report, log, _dir) = supervise_scripted(&executor, &mut observer);
        assert_eq!(observer.events.len(), transcript.len(), "chunks of {chunk}");
        assert!(
            matches!(observer.events.last(), Some(AgentEvent::Result(_))),
            "chunks of {chunk}: {:?}",
            observer.events.last()
        );
        let result = report.result.as_ref().expect("the result line was read");
        assert_eq!(result.subtype, "success", "chunks of {chunk}");
        assert_eq!(report.exit.code, Some(0));
        assert_eq!(report.stop, None);
        assert_eq!(observer.spawned.map(|a| a.pid), Some(4242));
        // The prompt went to stdin; the log holds the transcript byte for byte.
        let logged = std::fs::read_to_string(&log).unwrap();
        assert_eq!(logged, transcript.join("\n") + "\n", "chunks of {chunk}");
        assert!(executor.seen.lock().unwrap().leftovers_killed);
    }
}

#[test]
fn a_stop_is_asked_on_stdin_when_the_driver_can_interrupt_and_the_turn_ends_by_itself() {
    // 2.1.332's own answer to an interrupt: the tool call, the event, then (once asked)
    // the control response, the rejected tool and the result.
    let recorded = fixture("claude-code-2.1.332/conformance-interrupt.jsonl");
    let (before, after) = recorded.split_at(3);
    let executor = ScriptedExecutor::new(vec![
        lines(before, 64),
        Step::AwaitStdin("\"interrupt\""),
        lines(after, 64),
        Step::Exit(0),
    ]);
    let mut observer = Recording::new(|e| matches!(e, AgentEvent::Assistant { .. }));
    let (report, _log, _dir) = supervise_scripted(&executor, &mut observer);
    let seen = executor.seen.lock().unwrap();
    let asked = seen.stdin.last().expect("an interrupt on stdin");
    let asked: serde_json::Value = serde_json::from_str(asked).unwrap();
    assert_eq!(asked["type"], "control_request", "{asked}");
    assert_eq!(asked["request"]["subtype"], "interrupt", "{asked}");
    // Asked, not forced: no SIGTERM, and the turn's result was read. (Once the result of a
    // Run owl stopped is read, its group is killed at once, so that nothing the CLI has
    // queued starts: a SIGKILL then, unless its exit was seen first.)
    assert!(!seen.signals.contains(&Sig::TERM), "{:?}", seen.signals);
    assert!(
        seen.signals.is_empty() || report.signalled_after_result,
        "{:?}",
        seen.signals
    );
    assert_eq!(report.stop, Some(StopCause::Cancelled));
    assert!(report.result.is_some(), "{report:?}");
    assert_eq!(observer.events.len(), recorded.len());
}

#[test]
fn an_agent_deaf_to_the_interrupt_is_signalled_then_killed() {
    let transcript = fixture("claude-code-2.1.332/conformance-interrupt.jsonl");
    // It takes the interrupt and goes on as if it had not, its stdin closed or not: owl
    // escalates to SIGTERM, then SIGKILL.
    let executor = ScriptedExecutor::new(vec![
        lines(&transcript[..2], 64),
        Step::AwaitStdin("\"interrupt\""),
        Step::Hang,
    ]);
    let mut observer = Recording::new(|e| matches!(e, AgentEvent::Assistant { .. }));
    let (report, _log, _dir) = supervise_scripted(&executor, &mut observer);
    let seen = executor.seen.lock().unwrap();
    assert!(
        seen.stdin.iter().any(|l| l.contains("\"interrupt\"")),
        "{:?}",
        seen.stdin
    );
    assert_eq!(seen.signals, [Sig::TERM, Sig::KILL]);
    assert_eq!(report.exit.signal, Some(9));
    assert_eq!(report.stop, Some(StopCause::Cancelled));
}
