//! Reading a file owl did not make: one a Run could have written (the sandbox's report, a credential store's files, a session log) never through a symlink, and one a person named (a prompt file, a plan file) through their links; both never blocking on a FIFO or a device, never more than a cap.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Why an untrusted file was not read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refused {
    #[error("{path} is a symlink; not followed")]
    Symlink { path: String },
    #[error("{path} is {kind}, not a regular file; not read")]
    NotAFile { path: String, kind: &'static str },
    #[error("{path} is over {cap} bytes; not read")]
    TooLarge { path: String, cap: u64 },
    #[error("{path}: {}", crate::text::io_words(source))]
    Io { path: String, source: io::Error },
}

impl Refused {
    /// The file is simply not there: the usual case for an optional file.
    pub(crate) fn is_missing(&self) -> bool {
        matches!(self, Refused::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// Opens `path` for reading as a regular file only: the last component is not followed if
/// it is a symlink, and a FIFO or device is refused at once instead of blocking in `open`
/// or reading without end.
pub(crate) fn open(path: &Path) -> Result<File, Refused> {
    open_regular(path, libc::O_NOFOLLOW)
}

/// [`open`] for a file a person named on the command line or in a plan: a symlink there is
/// theirs and is followed, but what it leads to must be a regular file all the same.
pub(crate) fn open_named(path: &Path) -> Result<File, Refused> {
    open_regular(path, 0)
}

fn open_regular(path: &Path, follow: libc::c_int) -> Result<File, Refused> {
    let shown = || path.display().to_string();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(follow | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|source| match source.raw_os_error() {
            Some(libc::ELOOP) => Refused::Symlink { path: shown() },
            _ => Refused::Io {
                path: shown(),
                source,
            },
        })?;
    let kind = file
        .metadata()
        .map_err(|source| Refused::Io {
            path: shown(),
            source,
        })?
        .file_type();
    if !kind.is_file() {
        return Err(Refused::NotAFile {
            path: shown(),
            kind: kind_name(kind),
        });
    }
    Ok(file)
}

/// Reads the whole of `path`, refusing a file over `cap` bytes (see [`open`]).
pub(crate) fn read(path: &Path, cap: u64) -> Result<Vec<u8>, Refused> {
    read_from(open(path)?, path, cap)
}

/// Reads the whole of a file a person named (see [`open_named`]), refusing one over `cap`
/// bytes: a prompt file that is `/dev/zero` or a FIFO is refused at once, never read
/// until memory is gone nor waited on.
pub(crate) fn read_named(path: &Path, cap: u64) -> Result<Vec<u8>, Refused> {
    read_from(open_named(path)?, path, cap)
}

fn read_from(file: File, path: &Path, cap: u64) -> Result<Vec<u8>, Refused> {
    let mut bytes = Vec::new();
    // One byte past the cap tells a file over it from one exactly at it, whatever its size
    // says (a file still being written).
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| Refused::Io {
            path: path.display().to_string(),
            source,
        })?;
    if bytes.len() as u64 > cap {
        return Err(Refused::TooLarge {
            path: path.display().to_string(),
            cap,
        });
    }
    Ok(bytes)
}

/// [`read`], as text (invalid UTF-8 replaced).
pub(crate) fn read_to_string(path: &Path, cap: u64) -> Result<String, Refused> {
    read(path, cap).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// What a file that is not a regular one is, in a few words: "a FIFO".
pub(crate) fn kind_name(kind: std::fs::FileType) -> &'static str {
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_a_device_and_a_symlink_are_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        // With no writer, a blocking open would wait for ever.
        let err = read(&fifo, 10).unwrap_err();
        assert!(
            matches!(err, Refused::NotAFile { kind: "a FIFO", .. }),
            "{err}"
        );

        let zero = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(matches!(read(&zero, 10), Err(Refused::Symlink { .. })));
        let err = read(Path::new("/dev/zero"), 10).unwrap_err();
        assert!(err.to_string().contains("a character device"), "{err}");
    }

    #[test]
    fn a_file_over_its_cap_is_refused_and_one_at_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"12345").unwrap();
        assert_eq!(read(&path, 5).unwrap(), b"12345");
        let err = read(&path, 4).unwrap_err();
        assert!(matches!(err, Refused::TooLarge { cap: 4, .. }), "{err}");
        assert!(read(&dir.path().join("none"), 4).unwrap_err().is_missing());
    }
}
