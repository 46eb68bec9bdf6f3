//! A Job's check, run where its Run worked: through the Account's Executor (inside the sandbox when the Account is sandboxed), with the Run's marker, its two output streams interleaved into one bounded file, and killed with what it started at its timeout or at a stop of owl's.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Executor, RunPlace, StopLatch};
use crate::driver::Invocation;
use crate::model::{Check, CheckRecord, CheckStatus, ExitInfo};
use crate::sys::Sig;
use crate::wait::Waited;

/// The most of a check's output kept in its file: a test suite's log, not a flood.
pub(crate) const OUTPUT_CAP: u64 = 4 * 1024 * 1024;
/// How often the wait looks at the stop latch and the deadline.
const TICK: Duration = Duration::from_millis(50);
/// How long the output is waited for once the check has exited and its leftovers are
/// killed: anything still holding a pipe then is gone.
const DRAIN_WAIT: Duration = Duration::from_secs(2);

/// One attempt of a Job's check.
pub(crate) struct CheckRun<'a> {
    pub(crate) check: &'a Check,
    /// The working copy (its cwd) and the Run's own files (for the sandbox's report).
    pub(crate) place: RunPlace<'a>,
    /// The Run the check follows: its processes carry that Run's marker, so a recovery
    /// after owl's death finds them as the Run's survivors.
    pub(crate) run_id: i64,
    /// Variables set for it (the Account's settings, no credential).
    pub(crate) env_set: Vec<(String, String)>,
    /// Inherited variables removed (every credential owl knows of).
    pub(crate) env_remove: Vec<String>,
    /// Where its stdout and stderr go, interleaved, at most [`OUTPUT_CAP`] bytes.
    pub(crate) output: File,
    /// A stop of owl's ends the check at once.
    pub(crate) latch: &'a StopLatch,
    /// Whether the Job was cancelled meanwhile (asked at most every [`CANCEL_POLL`]): a
    /// cancel stops a check as it stops a Run.
    pub(crate) cancelled: &'a dyn Fn() -> bool,
}

/// How often a running check asks whether its Job was cancelled.
const CANCEL_POLL: Duration = Duration::from_millis(500);

/// Runs the check to its end, its timeout or a stop of owl's, and says how it went. It
/// never fails: what goes wrong is the record's.
pub(crate) fn run_check(executor: &dyn Executor, run: CheckRun) -> CheckRecord {
    let started = Instant::now();
    let record = |status, exit_code, detail| CheckRecord {
        command: run.check.argv.clone(),
        status,
        exit_code,
        duration_ms: started.elapsed().as_millis() as u64,
        detail,
        commit: None,
    };
    let path = run
        .env_set
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var("PATH").ok())
        .unwrap_or_default();
    let program = match resolve_program(&run.check.argv[0], run.place.workspace, &path) {
        Ok(p) => p,
        Err(why) => return record(CheckStatus::CannotStart, None, Some(why)),
    };
    let invocation = Invocation {
        program,
        args: run.check.argv[1..].to_vec(),
        env_set: run.env_set.clone(),
        env_remove: run.env_remove.clone(),
        files: Vec::new(),
    };
    let handle = match executor.spawn(&invocation, &run.place, run.run_id) {
        Ok(h) => h,
        Err(e) => {
            let why = format!("'{}' cannot be run: {e}", run.check.argv[0]);
            return record(CheckStatus::CannotStart, None, Some(why));
        }
    };
    let id = handle.id;
    // No input: its stdin is closed at once, so a check that reads it sees the end.
    drop(handle.stdin);
    let sink = Arc::new(Mutex::new(Bounded::new(run.output)));
    let readers = [handle.stdout, handle.stderr].map(|stream| copy_into(stream, sink.clone()));
    let exited = crate::wait::on_thread(handle.exit);
    let deadline = started + run.check.timeout();
    let (status, exit) = wait_for(executor, &id, &exited, (run.latch, run.cancelled), deadline);
    // What the check left behind (a server it forked, a build daemon) dies with it.
    let left = executor.kill_leftovers(&id);
    if left > 0 {
        tracing::info!(
            run_id = run.run_id,
            "the check left {left} processes; killed"
        );
    }
    for done in readers {
        let _ = crate::wait::within(&done, DRAIN_WAIT);
    }
    let exit_code = exit.and_then(|e| e.code.or(e.signal.map(|s| 128 + s)));
    let detail = (status != CheckStatus::Passed).then(|| {
        let kept = sink.lock().unwrap_or_else(|e| e.into_inner()).tail();
        crate::output::inert(&crate::model::output_tail(&kept)).into_owned()
    });
    record(status, exit_code, detail.filter(|d| !d.is_empty()))
}

/// Waits for the check's exit, its deadline, a stop of owl's or a cancel; how it ended, and
/// its exit when it ended by itself. Stopped, it is killed.
fn wait_for(
    executor: &dyn Executor,
    id: &super::HandleId,
    exited: &mpsc::Receiver<ExitInfo>,
    (latch, cancelled): (&StopLatch, &dyn Fn() -> bool),
    deadline: Instant,
) -> (CheckStatus, Option<ExitInfo>) {
    let mut asked = Instant::now();
    let mut stop = || {
        latch.fired().is_some()
            || asked.elapsed() >= CANCEL_POLL && {
                asked = Instant::now();
                cancelled()
            }
    };
    let status = match crate::wait::until(exited, deadline, Some((TICK, &mut stop))) {
        Waited::Got(exit) => return (verdict_of(exit), Some(exit)),
        Waited::Closed => return (CheckStatus::Failed, None),
        Waited::Stopped => CheckStatus::NotFinished,
        Waited::TimedOut => CheckStatus::TimedOut,
    };
    executor.signal(id, Sig::KILL);
    let _ = crate::wait::within(exited, DRAIN_WAIT);
    (status, None)
}

/// The environment of a Job's check: the Account's settings (a `PATH` for cargo under
/// cron), never a credential: a variable named like one (a key, a token, a secret, a
/// password) and every credential variable a Driver knows are removed, so that the
/// agent's code cannot print them into the check's log.
pub(crate) fn check_env(account: &crate::config::Account) -> (Vec<(String, String)>, Vec<String>) {
    let (secret, plain): (Vec<_>, Vec<_>) = account
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .partition(|(k, _)| names_a_credential(k));
    let remove = secret
        .into_iter()
        .map(|(k, _)| k)
        .chain(crate::driver::inherited_credentials().map(String::from))
        .chain(crate::driver::STORE_CREDENTIALS.map(String::from))
        .collect();
    (plain, remove)
}

/// Whether a variable's name says it holds a credential.
fn names_a_credential(key: &str) -> bool {
    let key = key.to_ascii_uppercase();
    [
        "KEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "AUTH",
        "CREDENTIAL",
        "COOKIE",
    ]
    .iter()
    .any(|word| key.contains(word))
}

/// Passed on exit 0; anything else failed.
fn verdict_of(exit: ExitInfo) -> CheckStatus {
    match exit.code {
        Some(0) => CheckStatus::Passed,
        _ => CheckStatus::Failed,
    }
}

/// The program a check's argv names, found as `execvp` would find it from the working copy:
/// a path with a `/` from there, a bare name on `PATH`. Why not, in words a person can act
/// on: a missing or non-executable program is the environment's fault.
fn resolve_program(name: &str, cwd: &Path, path: &str) -> Result<PathBuf, String> {
    // A `~/…` stored by an owl that did not expand it: the home's, never the working copy's.
    let expanded = crate::config::check_program(name).map_err(|e| e.to_string())?;
    let name = expanded.as_str();
    if name.starts_with('/') {
        return match executable(Path::new(name)) {
            Ok(()) => Ok(PathBuf::from(name)),
            Err(why) => Err(format!("'{name}' {why}")),
        };
    }
    if name.contains('/') {
        let program = cwd.join(name);
        return match executable(&program) {
            Ok(()) => Ok(program),
            Err(why) => Err(format!("'{name}' {why}")),
        };
    }
    std::env::split_paths(path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|p| executable(p).is_ok())
        .ok_or_else(|| format!("'{name}' is not found on PATH ({path})"))
}

/// Whether `path` is a file its owner may execute; why not.
fn executable(path: &Path) -> Result<(), &'static str> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(path) {
        Err(_) => Err("does not exist"),
        Ok(m) if !m.is_file() => Err("is not a file"),
        Ok(m) if m.permissions().mode() & 0o111 == 0 => Err("is not executable"),
        Ok(_) => Ok(()),
    }
}

/// The check's output file, written up to [`OUTPUT_CAP`]; its end is kept in memory too,
/// for the tail the next prompt carries.
struct Bounded {
    file: File,
    written: u64,
    cut: bool,
    tail: Vec<u8>,
}

impl Bounded {
    fn new(file: File) -> Bounded {
        Bounded {
            file,
            written: 0,
            cut: false,
            tail: Vec::new(),
        }
    }

    fn take(&mut self, bytes: &[u8]) {
        self.tail.extend_from_slice(bytes);
        let keep = 2 * crate::model::TAIL_BYTES;
        if self.tail.len() > keep {
            self.tail.drain(..self.tail.len() - keep);
        }
        let room = OUTPUT_CAP.saturating_sub(self.written) as usize;
        let now = &bytes[..bytes.len().min(room)];
        if self.file.write_all(now).is_ok() {
            self.written += now.len() as u64;
        }
        if now.len() < bytes.len() && !self.cut {
            self.cut = true;
            let _ = writeln!(
                self.file,
                "\n[owl: the check's output was cut at {OUTPUT_CAP} bytes]"
            );
        }
    }

    /// The end of what the check printed, as text.
    fn tail(&self) -> String {
        String::from_utf8_lossy(&self.tail).into_owned()
    }
}

/// Copies a stream into the shared file on a thread of its own; word when it ended.
fn copy_into(mut stream: Box<dyn Read + Send>, sink: Arc<Mutex<Bounded>>) -> mpsc::Receiver<()> {
    let (tx, done) = mpsc::channel();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        loop {
            match stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => sink
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        let _ = tx.send(());
    });
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_is_found_as_execvp_would_and_why_not_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("check.sh");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        assert_eq!(
            resolve_program("./check.sh", dir.path(), "/bin"),
            Err("'./check.sh' is not executable".into())
        );
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            resolve_program("./check.sh", dir.path(), "/bin"),
            Ok(dir.path().join("./check.sh"))
        );
        assert_eq!(
            resolve_program(
                "check.sh",
                Path::new("/"),
                &dir.path().display().to_string()
            ),
            Ok(script)
        );
        let missing = resolve_program("no-such-check", dir.path(), "/nowhere:/bin").unwrap_err();
        assert_eq!(
            missing,
            "'no-such-check' is not found on PATH (/nowhere:/bin)"
        );
        assert_eq!(
            resolve_program("./gone", dir.path(), "/bin"),
            Err("'./gone' does not exist".into())
        );
    }

    #[test]
    fn the_output_file_is_cut_at_its_cap_and_the_tail_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let mut b = Bounded::new(File::create(&path).unwrap());
        let line = vec![b'x'; 64 * 1024];
        for _ in 0..(OUTPUT_CAP as usize / line.len() + 3) {
            b.take(&line);
        }
        b.take(b"\nthe last words\n");
        let written = std::fs::metadata(&path).unwrap().len();
        assert!(
            written > OUTPUT_CAP && written < OUTPUT_CAP + 200,
            "{written}"
        );
        assert!(b.tail().ends_with("the last words\n"));
        assert!(b.tail().len() <= 2 * crate::model::TAIL_BYTES);
    }
}
