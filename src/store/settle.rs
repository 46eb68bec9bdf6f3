//! A Run's settlement, the last write of its tick: tried again when it fails, and kept in a file beside the Run's transcript until the database has it, for the next tick to record.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

use super::{Store, BUSY_TIMEOUT};
use crate::model::{RejectionHold, Settlement};

/// The pauses before each try of the final write after the first.
const PAUSES: [Duration; 2] = [Duration::from_secs(1), Duration::from_secs(3)];
/// How long each try waits on another process's write lock: three tries of this outlast
/// any write of owl's, and a tick that cannot write gives up in well under a minute.
const TRY_BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// A kept outcome is a few KiB; anything far larger is not owl's.
const KEPT_CAP: u64 = 1024 * 1024;

impl Store {
    /// Writes a Run's settlement: first to `kept` (the record the next tick reads if the
    /// database will not take it), then to the database, tried again after each pause.
    /// An error says where the outcome was kept, or that it could not be.
    pub(crate) fn settle(&mut self, settlement: &Settlement, kept: &Path) -> Result<()> {
        let run_id = settlement.run_id;
        let keep = keep(kept, settlement);
        if let Err(e) = &keep {
            tracing::warn!(
                "run {run_id}: keeping its outcome in {}: {e}",
                kept.display()
            );
        }
        self.set_busy_timeout(TRY_BUSY_TIMEOUT)?;
        let mut landed = self.land(settlement);
        for pause in PAUSES {
            let Err(e) = &landed else { break };
            tracing::warn!(
                "run {run_id}: recording its outcome failed ({e:#}); trying again in {} s",
                pause.as_secs()
            );
            std::thread::sleep(pause);
            landed = self.land(settlement);
        }
        self.set_busy_timeout(BUSY_TIMEOUT)?;
        match (landed, keep) {
            (Ok(()), kept_ok) => {
                if kept_ok.is_ok() {
                    forget(kept);
                }
                Ok(())
            }
            (Err(e), Ok(())) => Err(e.context(format!(
                "recording the outcome of run {run_id}: it is kept in {} and the next tick \
                 records it",
                kept.display()
            ))),
            (Err(e), Err(k)) => Err(e.context(format!(
                "recording the outcome of run {run_id}, which could not be kept on disk \
                 either ({k}): the next tick records it lost, with what its transcript says"
            ))),
        }
    }

    /// Records a settlement kept by a tick whose final write did not land, if `kept`
    /// holds one for this Run; true when it did. Call only for a Run still without an
    /// outcome whose tick is gone.
    pub(crate) fn settle_kept(&mut self, kept: &Path, run_id: i64, job_id: &str) -> Result<bool> {
        let Some(settlement) = read_kept(kept, run_id, job_id) else {
            return Ok(false);
        };
        self.land(&settlement)
            .with_context(|| format!("recording run {run_id} from {}", kept.display()))?;
        forget(kept);
        Ok(true)
    }

    /// One try at the whole settlement, in one transaction (one flush of the disk). Each
    /// write is idempotent, so a try after a failed one redoes whatever did land.
    fn land(&mut self, s: &Settlement) -> Result<()> {
        self.write_all_must_land(|store| store.land_parts(s))
    }

    fn land_parts(&mut self, s: &Settlement) -> Result<()> {
        let recorded = self.finish_run(
            s.run_id,
            &s.finish,
            s.job_state,
            s.job_reason.as_ref(),
            s.not_before,
            s.ended_at,
        )?;
        if !recorded {
            self.keep_late_finding(s)?;
        }
        if let Some((window, until)) = &s.on_credits {
            self.set_on_credits(&s.account, Some((window, *until)), s.ended_at)?;
        }
        match s.rejection {
            Some(RejectionHold::Until(until)) => {
                self.set_rate_limited_until(&s.account, Some(until), s.ended_at)?
            }
            Some(RejectionHold::Lifted) => {
                self.set_rate_limited_until(&s.account, None, s.ended_at)?
            }
            None => {}
        }
        // What the Run used of each Window: kept now, from its Snapshots, which are pruned.
        self.record_shares(s.run_id)?;
        Ok(())
    }
}

/// Writes the settlement whole or not at all: a temporary file, synced, renamed over.
impl Store {
    /// A supervisor's own finding about a Run another machine recorded first (lost, when
    /// its lease expired): the first outcome stays, and this one is kept as an event that
    /// `show` prints. A write of this finding landing twice (a settlement tried again) is
    /// not kept again.
    fn keep_late_finding(&mut self, s: &Settlement) -> Result<()> {
        let Some(run) = self.run(s.run_id)? else {
            return Ok(());
        };
        let (ours, theirs) = (s.finish.outcome, run.outcome);
        if ours == theirs || theirs.is_none() {
            return Ok(());
        }
        let said = s.finish.stop_reason.as_deref().unwrap_or("");
        let text = format!(
            "its supervisor found it {} ({said}) after it was recorded {}",
            ours.map_or("ended".into(), |o| o.as_str().to_string()),
            theirs.map_or("?", |o| o.as_str())
        );
        let machine = run.machine.unwrap_or_default();
        tracing::warn!("run {}: {text}", s.run_id);
        self.add_run_event(s.run_id, &machine, &text, s.ended_at)
    }
}

fn keep(kept: &Path, settlement: &Settlement) -> std::io::Result<()> {
    let text = serde_json::to_vec(settlement)?;
    let temp = kept.with_extension("json.partial");
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temp)
        .and_then(|mut f| {
            f.write_all(&text)?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&temp, kept));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// The kept settlement of this Run; `None` when there is none, or the file is not owl's
/// (unreadable, too large, another Run's): a local Run could have written there.
fn read_kept(kept: &Path, run_id: i64, job_id: &str) -> Option<Settlement> {
    let text = match crate::untrusted::read_to_string(kept, KEPT_CAP) {
        Ok(text) => text,
        Err(e) if e.is_missing() => return None,
        Err(e) => {
            tracing::warn!("run {run_id}: {e}");
            return None;
        }
    };
    match serde_json::from_str::<Settlement>(&text) {
        Ok(s) if s.run_id == run_id && s.job_id == job_id => Some(s),
        Ok(_) => {
            tracing::warn!("{} is not run {run_id}'s; not read", kept.display());
            None
        }
        Err(e) => {
            tracing::warn!("{}: {e}; not read", kept.display());
            None
        }
    }
}

fn forget(kept: &Path) {
    if let Err(e) = std::fs::remove_file(kept) {
        tracing::warn!("removing {}: {e}", kept.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Cause, JobState, RunFinish, RunOutcome};

    fn settlement(run_id: i64) -> Settlement {
        let at = chrono::DateTime::parse_from_rfc3339("2026-11-30T03:00:00Z")
            .unwrap()
            .to_utc();
        Settlement {
            run_id,
            job_id: "j1".into(),
            account: "work".into(),
            finish: RunFinish {
                outcome: Some(RunOutcome::RateLimited),
                cost_usd: Some(0.25),
                cause: Some(Cause::RateLimited),
                ..Default::default()
            },
            job_state: JobState::Waiting,
            job_reason: None,
            not_before: Some(at),
            on_credits: Some(("five_hour".into(), at)),
            rejection: Some(RejectionHold::Lifted),
            ended_at: at,
        }
    }

    #[test]
    fn a_kept_settlement_reads_back_whole_and_only_for_its_own_run() {
        let dir = tempfile::tempdir().unwrap();
        let kept = dir.path().join("7.outcome.json");
        keep(&kept, &settlement(7)).unwrap();
        assert_eq!(read_kept(&kept, 7, "j1"), Some(settlement(7)));
        assert_eq!(read_kept(&kept, 8, "j1"), None, "another Run's");
        assert_eq!(read_kept(&kept, 7, "j2"), None, "another Job's");
        assert!(!kept.with_extension("json.partial").exists());
    }

    #[test]
    fn a_kept_file_that_is_not_owls_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let kept = dir.path().join("7.outcome.json");
        std::fs::write(&kept, "{not json").unwrap();
        assert_eq!(read_kept(&kept, 7, "j1"), None);
        std::fs::remove_file(&kept).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), &kept).unwrap();
        keep(&dir.path().join("elsewhere"), &settlement(7)).unwrap();
        assert_eq!(read_kept(&kept, 7, "j1"), None, "a symlink is not followed");
        assert_eq!(read_kept(&dir.path().join("9.outcome.json"), 9, "j1"), None);
    }
}
