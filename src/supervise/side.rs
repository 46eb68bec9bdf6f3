//! What a Run learns beside the agent's stdout: the session log the agent writes (followed as it grows) and the zero-token probe run next to it at the poll interval.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::process::{Executor, HandleId};
use super::{probe, Event};
use crate::config::Account;
use crate::driver::{AgentEvent, Driver, SessionLog};
use crate::usage::ProbeOutcome;

/// How often a session log is looked for and read, like `tail -f`. The CLI writes a figure
/// 10–20 ms after a model response; this keeps owl's reaction well under a second.
const FOLLOW_EVERY: Duration = Duration::from_millis(50);

/// The longest line of a session log owl holds while waiting for its end; a longer one is
/// skipped (a rollout line carries a whole request's instructions, never this much).
const LINE_CAP: usize = 16 << 20;

/// Follows a session log on its own thread until `stop` is set or the loop is gone.
pub(super) fn follow(log: SessionLog, tx: SyncSender<Event>, stop: Arc<AtomicBool>) {
    let stopped = || stop.load(Ordering::Relaxed);
    let file = loop {
        if stopped() {
            return;
        }
        // Written a moment after the session starts, under a date owl cannot know.
        // The agent writes where its logs are: a FIFO there must not block this thread.
        if let Some(file) = log
            .find()
            .and_then(|path| crate::untrusted::open(&path).ok())
        {
            break file;
        }
        std::thread::sleep(FOLLOW_EVERY);
    };
    let mut lines = Lines::new(file);
    loop {
        // Read once more after the stop: the agent writes its last lines (a figure, a
        // refused command) just before it exits.
        let last = stopped();
        match lines.next_batch() {
            Ok(batch) => {
                for event in batch.iter().flat_map(|line| (log.parse)(line)) {
                    let sent = if last {
                        // The loop no longer reads: never block on a full channel.
                        tx.try_send(Event::Side(Box::new(event))).is_ok()
                    } else {
                        tx.send(Event::Side(Box::new(event))).is_ok()
                    };
                    if !sent {
                        return;
                    }
                }
                if last {
                    return;
                }
                if batch.is_empty() {
                    std::thread::sleep(FOLLOW_EVERY);
                }
            }
            Err(e) => {
                tracing::warn!("reading the session log: {e}");
                return;
            }
        }
    }
}

/// Whole lines of a file that is still being written: a partial last line waits for its end.
struct Lines {
    file: File,
    partial: Vec<u8>,
    skipping: bool,
}

impl Lines {
    fn new(file: File) -> Lines {
        Lines {
            file,
            partial: Vec::new(),
            skipping: false,
        }
    }

    /// The lines completed since the last call (none when the file has not grown).
    fn next_batch(&mut self) -> std::io::Result<Vec<Vec<u8>>> {
        let mut chunk = Vec::new();
        self.file.read_to_end(&mut chunk)?;
        let mut done = Vec::new();
        for piece in chunk.split_inclusive(|b| *b == b'\n') {
            let ends = piece.ends_with(b"\n");
            if !self.skipping {
                self.partial.extend_from_slice(piece);
            }
            if ends {
                let line = std::mem::take(&mut self.partial);
                if !self.skipping {
                    done.push(line);
                }
                self.skipping = false;
            } else if self.partial.len() > LINE_CAP {
                self.partial.clear();
                self.skipping = true;
            }
        }
        Ok(done)
    }
}

/// The zero-token probe, run beside the agent when a poll is due: one at a time, started
/// through the Run's Executor, its answer read on a thread and sent to the loop as a side
/// event.
pub(super) struct SideProbe {
    driver: Arc<dyn Driver>,
    command: PathBuf,
    account: Account,
    cwd: PathBuf,
    in_flight: Option<(JoinHandle<()>, HandleId)>,
}

impl SideProbe {
    pub(super) fn new(
        driver: Arc<dyn Driver>,
        command: &Path,
        account: &Account,
        cwd: &Path,
    ) -> SideProbe {
        SideProbe {
            driver,
            command: command.to_path_buf(),
            account: account.clone(),
            cwd: cwd.to_path_buf(),
            in_flight: None,
        }
    }

    /// Starts a probe unless one is still out (a slow answer is not asked twice).
    pub(super) fn ask(&mut self, executor: &dyn Executor, tx: &SyncSender<Event>) {
        if self
            .in_flight
            .as_ref()
            .is_some_and(|(h, _)| !h.is_finished())
        {
            return;
        }
        let started = match probe::start(
            executor,
            self.driver.as_ref(),
            &self.command,
            &self.account,
            &self.cwd,
        ) {
            Ok(started) => started,
            Err(failed) => {
                tracing::debug!("a probe during the Run: {}", failed.describe());
                return;
            }
        };
        let id = started.id;
        let (driver, tx) = (self.driver.clone(), tx.clone());
        let handle = std::thread::Builder::new()
            .name("owl-usage-probe".into())
            .spawn(move || {
                let event = match probe::answer(driver.as_ref(), started) {
                    ProbeOutcome::Observed(windows) => AgentEvent::Usage {
                        source: crate::model::SnapshotSource::Probe,
                        windows,
                    },
                    other => {
                        tracing::debug!("a probe during the Run: {}", other.describe());
                        return;
                    }
                };
                let _ = tx.send(Event::Side(Box::new(event)));
            });
        match handle {
            Ok(handle) => self.in_flight = Some((handle, id)),
            Err(e) => {
                tracing::warn!("reading a usage probe's answer: {e}");
                executor.signal(&id, crate::sys::Sig::KILL);
            }
        }
    }

    /// Ends a probe still out, before owl counts what the agent left behind: the probe is
    /// owl's, not a leftover of the Run.
    pub(super) fn cancel(&mut self, executor: &dyn Executor) {
        if let Some((handle, id)) = self.in_flight.take() {
            if !handle.is_finished() {
                executor.signal(&id, crate::sys::Sig::KILL);
            }
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_growing_file_gives_whole_lines_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut writer = File::create(&path).unwrap();
        let mut lines = Lines::new(File::open(&path).unwrap());
        assert!(lines.next_batch().unwrap().is_empty());
        writer.write_all(b"{\"a\":1}\n{\"b\"").unwrap();
        assert_eq!(lines.next_batch().unwrap(), vec![b"{\"a\":1}\n".to_vec()]);
        assert!(
            lines.next_batch().unwrap().is_empty(),
            "the half line waits"
        );
        writer.write_all(b":2}\n").unwrap();
        assert_eq!(lines.next_batch().unwrap(), vec![b"{\"b\":2}\n".to_vec()]);
    }
}
