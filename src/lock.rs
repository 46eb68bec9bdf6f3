//! owl's locks, each an flock on a file in the state dir that is never deleted by owl: the pick lock (`tick.lock`, held while a tick picks and records its Run), each Account's run lock (held for a Run's whole life) and each Job's lock; owl's pid written inside.

use std::fs::{File, OpenOptions};
use std::io::{Seek, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use fs2::FileExt;

/// Held while it lives; the lock is released when this is dropped (or owl dies).
pub(crate) struct Held {
    _file: File,
}

/// How often a lock whose path was replaced under it is tried again before giving up.
const REPLACED_TRIES: usize = 8;

/// Takes the lock without waiting: `Ok(None)` when another process holds it.
///
/// The file is never deleted by owl: deleting a lock file lets two processes lock two
/// different inodes. Someone else may delete or replace it all the same (a cleanup script, a
/// person's `rm`), so once locked the path must still name the file locked: if it does not,
/// the lock is taken again on what the path names now. (What a lock cannot see, a Run whose
/// lock file was deleted while it held it, the tick finds by the Run's recorded supervisor.)
/// std opens it close-on-exec, so the agent never inherits it.
pub(crate) fn try_lock(path: &Path) -> Result<Option<Held>> {
    for _ in 0..REPLACED_TRIES {
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
        if !names_file(path, &file) {
            // Replaced or deleted between the open and the lock: this inode guards nothing.
            continue;
        }
        // The pid is for people reading the file; the flock is what counts.
        file.set_len(0)?;
        file.rewind()?;
        writeln!(file, "{}", std::process::id())?;
        return Ok(Some(Held { _file: file }));
    }
    anyhow::bail!(
        "lock {} was replaced under owl {REPLACED_TRIES} times in a row; is something deleting it?",
        path.display()
    )
}

/// Takes the lock, waiting for it at most `wait`: `Ok(None)` when another process held it
/// all that while.
pub(crate) fn lock_within(path: &Path, wait: Duration) -> Result<Option<Held>> {
    let deadline = Instant::now() + wait;
    loop {
        if let Some(held) = try_lock(path)? {
            return Ok(Some(held));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `path` names the file `file` is open on (the same device and inode).
fn names_file(path: &Path, file: &File) -> bool {
    match (std::fs::metadata(path), file.metadata()) {
        (Ok(now), Ok(locked)) => now.dev() == locked.dev() && now.ino() == locked.ino(),
        _ => false,
    }
}

/// The pid written by the process that holds (or last held) the lock.
pub(crate) fn holder(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_is_held_until_dropped_and_taken_again_after() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        let held = try_lock(&path).unwrap().expect("free");
        // flock is per open file description: a second open in this process is refused too.
        assert!(try_lock(&path).unwrap().is_none());
        assert_eq!(holder(&path), Some(std::process::id()));
        drop(held);
        assert!(try_lock(&path).unwrap().is_some());
    }

    #[test]
    fn a_wait_for_a_held_lock_ends_at_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        let _held = try_lock(&path).unwrap().unwrap();
        let started = Instant::now();
        assert!(lock_within(&path, Duration::from_millis(100))
            .unwrap()
            .is_none());
        assert!(started.elapsed() >= Duration::from_millis(100));
    }

    #[test]
    fn a_file_replaced_under_a_lock_is_not_taken_for_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .unwrap();
        assert!(names_file(&path, &file));
        std::fs::remove_file(&path).unwrap();
        assert!(!names_file(&path, &file));
        std::fs::write(&path, "").unwrap();
        assert!(!names_file(&path, &file));
    }
}
