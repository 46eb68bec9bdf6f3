//! Free space: the check that keeps a Run from starting on a full disk, and the reserve that lets a Run that fills one still be recorded.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::text::format_size;

/// The file in the state dir whose space owl gives back to SQLite when the disk is full.
pub(crate) const RESERVE_FILE: &str = "reserve";
/// Enough for the final writes of a Run (a few WAL frames), many times over.
pub(crate) const RESERVE_SIZE: u64 = 4 << 20;

/// Why no Run may start on a filesystem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SpaceError {
    #[error(
        "disk full: only {} free on the filesystem of {} (minFreeSpace {})",
        format_size(*free),
        path.display(),
        format_size(*min)
    )]
    Low { path: PathBuf, free: u64, min: u64 },
    #[error("reading the free space of {}: {error}", path.display())]
    Unreadable { path: PathBuf, error: String },
}

impl From<SpaceError> for crate::error::Error {
    fn from(e: SpaceError) -> Self {
        crate::error::Error::new(crate::error::ErrorKind::DiskSpace, e.to_string())
    }
}

/// Why no Run may start: the first of `paths` whose filesystem has less than `min` free.
pub(crate) fn check_free_space(paths: &[&Path], min: u64) -> Result<(), SpaceError> {
    if min == 0 {
        return Ok(());
    }
    for path in paths {
        let at = existing_ancestor(path);
        match fs2::available_space(&at) {
            Ok(free) if free < min => {
                return Err(SpaceError::Low {
                    path: at,
                    free,
                    min,
                })
            }
            Ok(_) => {}
            Err(e) => {
                return Err(SpaceError::Unreadable {
                    path: at,
                    error: e.to_string(),
                })
            }
        }
    }
    Ok(())
}

/// The path itself, or its nearest ancestor that exists (the state dir may not yet).
fn existing_ancestor(path: &Path) -> PathBuf {
    path.ancestors()
        .find(|p| p.exists())
        .unwrap_or(Path::new("/"))
        .to_path_buf()
}

/// Room the reserve needs to be made: itself, and as much again for what a tick writes
/// before a Run starts.
const RESERVE_ROOM: u64 = 2 * RESERVE_SIZE;

/// Why a Run may not start for want of its reserve: it is missing and cannot be made. A
/// reserve not made yet that can be (a fresh install) is no reason: the tick makes it.
pub(crate) fn reserve_missing(state_dir: &Path) -> Option<String> {
    if state_dir
        .join(RESERVE_FILE)
        .metadata()
        .is_ok_and(|m| m.len() == RESERVE_SIZE)
    {
        return None;
    }
    let at = existing_ancestor(state_dir);
    match fs2::available_space(&at) {
        Ok(free) if free >= RESERVE_ROOM => None,
        Ok(free) => Some(format!(
            "disk full: no room to set aside the {} that records a Run that fills the disk \
             ({} free on the filesystem of {})",
            format_size(RESERVE_SIZE),
            format_size(free),
            at.display()
        )),
        Err(e) => Some(format!("reading the free space of {}: {e}", at.display())),
    }
}

/// Makes sure the reserve file exists when there is room for it and more: it is put back
/// once space is back after a full disk.
pub(crate) fn ensure_reserve(state_dir: &Path) {
    let path = state_dir.join(RESERVE_FILE);
    if path.metadata().is_ok_and(|m| m.len() == RESERVE_SIZE) {
        return;
    }
    if fs2::available_space(state_dir).is_ok_and(|free| free >= RESERVE_ROOM) {
        // Real bytes, not a sparse file: only blocks actually held can be given back.
        let write = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .and_then(|mut f| f.write_all(&vec![0u8; RESERVE_SIZE as usize]));
        if let Err(e) = write {
            tracing::warn!("creating the reserve {}: {e}", path.display());
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Gives the reserve's space back to the filesystem; whether there was one.
pub(crate) fn release_reserve(state_dir: &Path) -> bool {
    let released = std::fs::remove_file(state_dir.join(RESERVE_FILE)).is_ok();
    if released {
        tracing::warn!(
            "the disk is full: released {} reserved in {} to record the Run",
            format_size(RESERVE_SIZE),
            state_dir.display()
        );
    }
    released
}

/// Whether an error is SQLite's or the filesystem's "no space left".
pub(crate) fn is_disk_full(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        if let Some(rusqlite::Error::SqliteFailure(f, _)) = cause.downcast_ref::<rusqlite::Error>()
        {
            return f.code == rusqlite::ErrorCode::DiskFull;
        }
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.raw_os_error() == Some(libc::ENOSPC))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_threshold_above_the_free_space_names_the_filesystem() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("not/yet");
        assert_eq!(check_free_space(&[&missing], 0), Ok(()));
        assert_eq!(check_free_space(&[&missing], 1), Ok(()));
        let e = check_free_space(&[&missing], u64::MAX).unwrap_err();
        let SpaceError::Low { path, min, .. } = &e else {
            panic!("{e:?}")
        };
        assert_eq!((path.as_path(), *min), (dir.path(), u64::MAX));
        let e = e.to_string();
        assert!(e.starts_with("disk full: only "), "{e}");
        assert!(e.contains(&dir.path().display().to_string()), "{e}");
    }

    #[test]
    fn the_reserve_is_made_and_released() {
        let dir = tempfile::tempdir().unwrap();
        ensure_reserve(dir.path());
        let meta = std::fs::metadata(dir.path().join(RESERVE_FILE)).unwrap();
        assert_eq!(meta.len(), RESERVE_SIZE);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert!(release_reserve(dir.path()));
        assert!(!release_reserve(dir.path()));
    }

    #[test]
    fn sqlite_full_is_disk_full() {
        let e = anyhow::Error::new(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(13),
            Some("database or disk is full".into()),
        ))
        .context("recording run 3");
        assert!(is_disk_full(&e));
        assert!(!is_disk_full(&anyhow::anyhow!("other")));
    }
}
