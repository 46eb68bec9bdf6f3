//! owl's locks, each an flock: the pick lock (on the state dir itself, held while a tick picks and records its Run; owl's pid in `tick.lock`), and on files owl never deletes, each Account's run lock (held for a Run's whole life) and each Job's lock, owl's pid written inside.

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
        let mut file = open_regular(path, false)?;
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

/// [`try_lock`], waiting for it at most `wait`: `None` when another process held it all
/// that time.
pub(crate) fn within(path: &Path, wait: Duration) -> Result<Option<Held>> {
    let deadline = Instant::now() + wait;
    loop {
        if let Some(held) = try_lock(path)? {
            return Ok(Some(held));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Takes the pick lock without waiting: an flock on the state dir itself, which no `rm` of a
/// file in it can undo (a directory holding owl's database is not removed under a live owl),
/// with owl's pid written in `pid_file` for people. `Ok(None)` when another tick holds it.
pub(crate) fn try_pick(state_dir: &Path, pid_file: &Path) -> Result<Option<Held>> {
    let dir = File::open(state_dir)
        .with_context(|| format!("opening the state dir {}", state_dir.display()))?;
    if dir.try_lock_exclusive().is_err() {
        return Ok(None);
    }
    // For people (`busy: … (pid N)`); the flock on the directory is what counts.
    let mut pid = open_regular(pid_file, true)?;
    writeln!(pid, "{}", std::process::id())?;
    Ok(Some(Held { _file: dir }))
}

/// [`try_pick`], waiting for it at most `wait`, or until `stopped` says to give up (a stop
/// signal): `None` then too.
pub(crate) fn pick_within(
    state_dir: &Path,
    pid_file: &Path,
    wait: Duration,
    stopped: &dyn Fn() -> bool,
) -> Result<Option<Held>> {
    let deadline = Instant::now() + wait;
    loop {
        if let Some(held) = try_pick(state_dir, pid_file)? {
            return Ok(Some(held));
        }
        if Instant::now() >= deadline || stopped() {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Why a lock's path cannot be used: something other than owl's own file is there.
#[derive(Debug, thiserror::Error)]
#[error("lock {path} is {what}, not owl's lock file: owl neither follows nor writes it; remove it (owl makes it anew)")]
pub(crate) struct NotALockFile {
    pub(crate) path: String,
    pub(crate) what: &'static str,
}

/// Opens (or creates) a lock file for writing as a regular file only: a symlink at its path
/// is never followed (owl would truncate and write what it points to), and a FIFO or a
/// device is refused at once, named, instead of failing every tick with a bare errno.
fn open_regular(path: &Path, truncate: bool) -> Result<File> {
    let shown = || path.display().to_string();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => anyhow::Error::new(NotALockFile {
                path: shown(),
                what: "a symlink",
            }),
            _ => anyhow::Error::new(e).context(format!("opening lock {}", shown())),
        })?;
    let kind = file
        .metadata()
        .with_context(|| format!("reading lock {}", shown()))?
        .file_type();
    if !kind.is_file() {
        let what = crate::untrusted::kind_name(kind);
        return Err(NotALockFile {
            path: shown(),
            what,
        }
        .into());
    }
    if truncate {
        file.set_len(0)
            .with_context(|| format!("writing {}", shown()))?;
    }
    Ok(file)
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
    crate::untrusted::read_to_string(path, 64)
        .ok()?
        .trim()
        .parse()
        .ok()
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
    fn a_symlink_or_fifo_at_a_lock_path_is_refused_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        let link = dir.path().join("a.lock");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let err = try_lock(&link).err().expect("a symlink was followed");
        let refused = err.downcast_ref::<NotALockFile>().expect("{err:#}");
        assert_eq!(refused.what, "a symlink");
        assert!(format!("{err:#}").contains(&link.display().to_string()));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        let pid_link = dir.path().join("tick.lock");
        std::os::unix::fs::symlink(&victim, &pid_link).unwrap();
        assert!(try_pick(dir.path(), &pid_link).is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");

        let fifo = dir.path().join("b.lock");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        let err = try_lock(&fifo).err().expect("a FIFO was taken for a lock");
        assert_eq!(err.downcast_ref::<NotALockFile>().unwrap().what, "a FIFO");
        assert_eq!(holder(&fifo), None);
    }

    #[test]
    fn a_wait_for_a_held_pick_lock_ends_at_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("tick.lock");
        let _held = try_pick(dir.path(), &pid_file).unwrap().unwrap();
        let started = Instant::now();
        let waited =
            pick_within(dir.path(), &pid_file, Duration::from_millis(100), &|| false).unwrap();
        assert!(waited.is_none());
        assert!(started.elapsed() >= Duration::from_millis(100));
    }

    #[test]
    fn the_pick_lock_holds_when_its_file_is_deleted_under_it() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("tick.lock");
        let held = try_pick(dir.path(), &pid_file).unwrap().expect("free");
        assert_eq!(holder(&pid_file), Some(std::process::id()));
        std::fs::remove_file(&pid_file).unwrap();
        assert!(try_pick(dir.path(), &pid_file).unwrap().is_none());
        drop(held);
        assert!(try_pick(dir.path(), &pid_file).unwrap().is_some());
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
