//! The pipe readers: stdout written byte-exact to the Run's log and parsed line by line, stderr logged with its tail kept.

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;

use super::machine::Happened;
use super::Event;
use crate::driver::Driver;

/// A stdout line longer than this is still logged whole, but not parsed: owl's memory
/// stays bounded whatever the agent prints.
pub const LINE_CAP: usize = 16 * 1024 * 1024;

/// How much of stderr is kept for the reason of a Run that ended without a result.
pub const STDERR_TAIL: usize = 2048;

fn log_failed(e: &std::io::Error) -> Event {
    Event::Happened(Happened::LogFailed {
        error: e.to_string(),
        disk_full: e.raw_os_error() == Some(libc::ENOSPC) || e.kind() == ErrorKind::StorageFull,
    })
}

/// `bytes` with every secret replaced by `<hidden>`.
fn scrub<'a>(bytes: &'a [u8], secrets: &[String]) -> std::borrow::Cow<'a, [u8]> {
    let mut out = std::borrow::Cow::Borrowed(bytes);
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        let needle = secret.as_bytes();
        if out.windows(needle.len()).any(|w| w == needle) {
            let mut replaced = Vec::with_capacity(out.len());
            let mut rest: &[u8] = &out;
            while let Some(i) = rest.windows(needle.len()).position(|w| w == needle) {
                replaced.extend_from_slice(&rest[..i]);
                replaced.extend_from_slice(b"<hidden>");
                rest = &rest[i + needle.len()..];
            }
            replaced.extend_from_slice(rest);
            out = std::borrow::Cow::Owned(replaced);
        }
    }
    out
}

/// Reads the agent's stdout to EOF: every byte to `log`, every complete line to the Driver.
pub fn read_stdout(
    mut pipe: impl Read,
    mut log: File,
    driver: Arc<dyn Driver>,
    tx: SyncSender<Event>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut line: Vec<u8> = Vec::new();
    let mut overlong = false;
    let mut log_ok = true;
    let mut batch: Vec<Event> = Vec::new();
    loop {
        let n = match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let chunk = &buf[..n];
        if log_ok {
            if let Err(e) = log.write_all(chunk) {
                log_ok = false;
                let _ = tx.send(log_failed(&e));
            }
        }
        // Keep draining after a log failure: a full pipe would block the agent forever.
        let mut rest = chunk;
        while let Some(i) = memchr::memchr(b'\n', rest) {
            if line.is_empty() && !overlong {
                // The whole line is in this chunk: parsed where it lies, not copied.
                emit(&rest[..i], false, driver.as_ref(), &mut batch);
            } else {
                append_capped(&mut line, &rest[..i], &mut overlong);
                emit(&line, overlong, driver.as_ref(), &mut batch);
                line.clear();
                overlong = false;
            }
            rest = &rest[i + 1..];
        }
        append_capped(&mut line, rest, &mut overlong);
        // One message per chunk read, not per line: the loop wakes once for many lines.
        if !batch.is_empty() {
            let _ = tx.send(Event::Batch(std::mem::take(&mut batch)));
        }
    }
    if !line.is_empty() || overlong {
        emit(&line, overlong, driver.as_ref(), &mut batch);
        let _ = tx.send(Event::Batch(batch));
    }
    if log_ok {
        if let Err(e) = log.sync_all() {
            let _ = tx.send(log_failed(&e));
        }
    }
    let _ = tx.send(Event::Happened(Happened::StdoutClosed));
}

fn append_capped(line: &mut Vec<u8>, bytes: &[u8], overlong: &mut bool) {
    if *overlong {
        return;
    }
    if line.len() + bytes.len() > LINE_CAP {
        *overlong = true;
        // Give the memory back now, not when the line ends.
        *line = Vec::new();
    } else {
        line.extend_from_slice(bytes);
    }
}

fn emit(line: &[u8], overlong: bool, driver: &dyn Driver, batch: &mut Vec<Event>) {
    let event = if overlong {
        Event::Skipped(format!("a line longer than {} MiB", LINE_CAP >> 20))
    } else if line.iter().all(u8::is_ascii_whitespace) {
        return;
    } else {
        match driver.parse_line(line) {
            Ok(ev) => Event::Line(Box::new(ev)),
            Err(e) => Event::Skipped(e.to_string()),
        }
    };
    batch.push(event);
}

/// Reads the agent's stderr to EOF into `log`, keeping the tail.
pub fn read_stderr(mut pipe: impl Read, mut log: File, secrets: &[String], tx: SyncSender<Event>) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut tail: Vec<u8> = Vec::new();
    let mut line: Vec<u8> = Vec::new();
    let mut log_ok = true;
    let mut write = |bytes: &[u8], tail: &mut Vec<u8>| {
        // stderr is for people (and echoes of the environment): a credential the agent
        // prints there is hidden line by line before it is logged or kept.
        let bytes = scrub(bytes, secrets);
        if log_ok {
            if let Err(e) = log.write_all(&bytes) {
                log_ok = false;
                let _ = tx.send(log_failed(&e));
            }
        }
        tail.extend_from_slice(&bytes);
        if tail.len() > STDERR_TAIL * 2 {
            tail.drain(..tail.len() - STDERR_TAIL);
        }
    };
    loop {
        let n = match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        line.extend_from_slice(&buf[..n]);
        if let Some(end) = line.iter().rposition(|b| *b == b'\n') {
            write(&line[..=end], &mut tail);
            line.drain(..=end);
        } else if line.len() > 64 * 1024 {
            // A line without end: written in pieces, so memory stays bounded.
            write(&line, &mut tail);
            line.clear();
        }
    }
    write(&line, &mut tail);
    let text = String::from_utf8_lossy(&tail);
    let tail = crate::text::tail(&text, STDERR_TAIL).to_string();
    let _ = tx.send(Event::Happened(Happened::StderrClosed(tail)));
}
