//! The tick lock at `stateDir/tick.lock`: one tick at a time, never deleted, owl's pid written inside.

use std::fs::{File, OpenOptions};
use std::io::{Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use anyhow::{Context, Result};
use fs2::FileExt;

/// Held for the whole tick; the lock is released when this is dropped (or owl dies).
pub(crate) struct TickLock {
    _file: File,
}

/// Takes the lock without waiting: `Ok(None)` when another tick holds it.
///
/// The file is never deleted: deleting a lock file lets two ticks lock two different
/// inodes. std opens it close-on-exec, so the agent never inherits it.
pub(crate) fn try_lock(path: &Path) -> Result<Option<TickLock>> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("opening lock {}", path.display()))?;
    if file.try_lock_exclusive().is_err() {
        return Ok(None);
    }
    // The pid is for people reading the file; the flock is what counts.
    file.set_len(0)?;
    file.rewind()?;
    writeln!(file, "{}", std::process::id())?;
    Ok(Some(TickLock { _file: file }))
}

/// The pid written by the tick that holds (or last held) the lock.
pub(crate) fn holder(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}
