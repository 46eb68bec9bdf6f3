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
pub(super) const LINE_CAP: usize = 16 * 1024 * 1024;

/// How much of stderr is kept for the reason of a Run that ended without a result.
pub(super) const STDERR_TAIL: usize = 2048;

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
pub(super) fn read_stdout(
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

/// Reads `pipe` to EOF and hands `each` every complete line (without its newline) of at
/// most [`LINE_CAP`] bytes, as a Run's reader does: a longer one is read and dropped, never
/// held. Stops when `each` returns false.
pub(crate) fn each_line(mut pipe: impl Read, mut each: impl FnMut(&[u8]) -> bool) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut line: Vec<u8> = Vec::new();
    let mut overlong = false;
    loop {
        let n = match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let mut rest = &buf[..n];
        while let Some(i) = memchr::memchr(b'\n', rest) {
            append_capped(&mut line, &rest[..i], &mut overlong);
            let whole = !std::mem::take(&mut overlong);
            if whole && !each(&line) {
                return;
            }
            line.clear();
            rest = &rest[i + 1..];
        }
        append_capped(&mut line, rest, &mut overlong);
    }
    if !line.is_empty() && !overlong {
        each(&line);
    }
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
pub(super) fn read_stderr(
    mut pipe: impl Read,
    mut log: File,
    secrets: &[String],
    tx: SyncSender<Event>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut tail: Vec<u8> = Vec::new();
    let mut line: Vec<u8> = Vec::new();
    let mut log_ok = true;
    let longest_secret = secrets.iter().map(String::len).max().unwrap_or(0);
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
            // A line without end: written in pieces, so memory stays bounded. Its secrets
            // are hidden first, and its last bytes held back: they may be a secret's start,
            // whose rest comes in the next read.
            let hidden = scrub(&line, secrets).into_owned();
            let cut = hidden.len() - longest_secret.saturating_sub(1).min(hidden.len());
            write(&hidden[..cut], &mut tail);
            line = hidden[cut..].to_vec();
        }
    }
    write(&line, &mut tail);
    let text = String::from_utf8_lossy(&tail);
    let tail = crate::text::tail(&text, STDERR_TAIL).to_string();
    let _ = tx.send(Event::Happened(Happened::StderrClosed(tail)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::{AgentEvent, ClaudeCode};

    /// A pipe that hands out `chunks` one read at a time, an interruption between each.
    struct Chunks(std::collections::VecDeque<Option<Vec<u8>>>);

    impl Chunks {
        fn new(chunks: &[&[u8]]) -> Chunks {
            Chunks(
                chunks
                    .iter()
                    // A pipe's read is never empty before its end.
                    .filter(|c| !c.is_empty())
                    .flat_map(|c| [None, Some(c.to_vec())])
                    .collect(),
            )
        }
    }

    impl Read for Chunks {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match self.0.pop_front() {
                None => Ok(0),
                Some(None) => Err(std::io::Error::from(ErrorKind::Interrupted)),
                Some(Some(chunk)) => {
                    let n = chunk.len().min(buf.len());
                    buf[..n].copy_from_slice(&chunk[..n]);
                    if n < chunk.len() {
                        self.0.push_front(Some(chunk[n..].to_vec()));
                    }
                    Ok(n)
                }
            }
        }
    }

    /// What each stdout read made of the lines, as words: `line` for one understood,
    /// `skipped: …` for one not, `|` between reads; and the bytes logged.
    fn stdout_of(chunks: &[&[u8]]) -> (Vec<String>, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let (tx, rx) = std::sync::mpsc::sync_channel(1024);
        read_stdout(
            Chunks::new(chunks),
            File::create(&path).unwrap(),
            Arc::new(ClaudeCode),
            tx,
        );
        let mut seen = Vec::new();
        for event in rx.try_iter() {
            match event {
                Event::Batch(events) => {
                    for e in events {
                        seen.push(match e {
                            Event::Line(ev) if matches!(*ev, AgentEvent::Result(_)) => {
                                "result".to_string()
                            }
                            Event::Line(_) => "line".to_string(),
                            Event::Skipped(why) => format!("skipped: {why}"),
                            _ => "?".to_string(),
                        });
                    }
                    seen.push("|".into());
                }
                Event::Happened(Happened::StdoutClosed) => seen.push("closed".into()),
                _ => seen.push("?".into()),
            }
        }
        (seen, std::fs::read(&path).unwrap())
    }

    const INIT: &[u8] = br#"{"type":"system","subtype":"init","session_id":"s"}"#;
    const RESULT: &[u8] =
        br#"{"type":"result","subtype":"success","is_error":false,"session_id":"s"}"#;

    fn lines(parts: &[&[u8]]) -> Vec<u8> {
        parts
            .iter()
            .flat_map(|p| [*p, b"\n"])
            .flatten()
            .copied()
            .collect()
    }

    #[test]
    fn lines_are_the_same_however_the_reads_cut_them() {
        let whole = lines(&[INIT, RESULT]);
        for cut in 0..=whole.len() {
            let (seen, logged) = stdout_of(&[&whole[..cut], &whole[cut..]]);
            assert_eq!(logged, whole, "cut at {cut}");
            let words: Vec<&str> = seen
                .iter()
                .map(String::as_str)
                .filter(|w| *w != "|")
                .collect();
            assert_eq!(words, ["line", "result", "closed"], "cut at {cut}");
        }
    }

    #[test]
    fn one_batch_per_read_not_per_line() {
        let (seen, _) = stdout_of(&[&lines(&[INIT, INIT, RESULT])]);
        assert_eq!(seen, ["line", "line", "result", "|", "closed"]);
    }

    #[test]
    fn a_last_line_without_its_newline_still_counts() {
        let (seen, logged) = stdout_of(&[&lines(&[INIT]), RESULT]);
        assert_eq!(seen, ["line", "|", "result", "|", "closed"]);
        assert_eq!(logged.len(), INIT.len() + 1 + RESULT.len());
    }

    #[test]
    fn a_line_at_the_cap_is_read_and_one_past_it_is_logged_whole_and_skipped() {
        // Padding inside a JSON string, so the line at the cap is still one the Driver reads.
        let line_of = |len: usize| {
            let head = br#"{"type":"user","pad":""#;
            let tail = br#""}"#;
            let mut l = head.to_vec();
            l.resize(len - tail.len(), b'x');
            l.extend_from_slice(tail);
            l
        };
        let at_cap = line_of(LINE_CAP);
        let over = line_of(LINE_CAP + 1);
        let input = lines(&[&at_cap, &over, RESULT]);
        // Cut in reads of 1 MiB, as a pipe would hand it over.
        let reads: Vec<&[u8]> = input.chunks(1 << 20).collect();
        let (seen, logged) = stdout_of(&reads);
        let words: Vec<&str> = seen
            .iter()
            .map(String::as_str)
            .filter(|w| *w != "|")
            .collect();
        assert_eq!(
            words,
            [
                "line",
                "skipped: a line longer than 16 MiB",
                "result",
                "closed"
            ]
        );
        assert_eq!(logged.len(), input.len(), "every byte is logged");
    }

    /// What stderr's reader logged and kept, its secrets hidden.
    /// The lines `each_line` hands out, by their lengths, for the reads `chunks`.
    fn each_line_lengths(chunks: &[&[u8]]) -> Vec<usize> {
        let mut seen = Vec::new();
        each_line(Chunks::new(chunks), |line| {
            seen.push(line.len());
            true
        });
        seen
    }

    #[test]
    fn each_line_cuts_at_newlines_wherever_the_reads_cut_and_drops_what_passes_the_cap() {
        let whole = lines(&[INIT, RESULT]);
        for cut in 0..=whole.len() {
            assert_eq!(
                each_line_lengths(&[&whole[..cut], &whole[cut..]]),
                [INIT.len(), RESULT.len()],
                "cut at {cut}"
            );
        }
        // At the cap it is handed out; one byte past it is read and dropped, in pieces or
        // whole, and the line after it is still found.
        let at_cap = vec![b'x'; LINE_CAP];
        let past = vec![b'y'; LINE_CAP + 1];
        let stream = [&at_cap[..], b"\n", &past[..], b"\n", INIT].concat();
        assert_eq!(each_line_lengths(&[&stream]), [LINE_CAP, INIT.len()]);
        let (a, b) = stream.split_at(LINE_CAP + 10);
        assert_eq!(each_line_lengths(&[a, b]), [LINE_CAP, INIT.len()]);
        // A last line past the cap and without its newline is dropped too.
        assert_eq!(each_line_lengths(&[INIT, b"\n", &past]), [INIT.len()]);
        // Asked to stop, it reads no further.
        let mut seen = 0;
        each_line(Chunks::new(&[&lines(&[INIT, INIT, INIT])]), |_| {
            seen += 1;
            seen < 2
        });
        assert_eq!(seen, 2);
    }

    fn stderr_of(chunks: &[&[u8]], secrets: &[String]) -> (String, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let (tx, rx) = std::sync::mpsc::sync_channel(16);
        read_stderr(
            Chunks::new(chunks),
            File::create(&path).unwrap(),
            secrets,
            tx,
        );
        let tail = rx
            .try_iter()
            .find_map(|e| match e {
                Event::Happened(Happened::StderrClosed(tail)) => Some(tail),
                _ => None,
            })
            .unwrap();
        (
            String::from_utf8(std::fs::read(&path).unwrap()).unwrap(),
            tail,
        )
    }

    #[test]
    fn a_secret_is_hidden_wherever_the_reads_cut_it() {
        let secret = "sk-ant-oat01-SECRET".to_string();
        let text = format!("auth failed with {secret} again\n");
        for cut in 0..=text.len() {
            let (logged, tail) = stderr_of(
                &[&text.as_bytes()[..cut], &text.as_bytes()[cut..]],
                std::slice::from_ref(&secret),
            );
            assert_eq!(logged, "auth failed with <hidden> again\n", "cut at {cut}");
            assert!(!tail.contains("SECRET"), "cut at {cut}");
        }
    }

    #[test]
    fn a_secret_in_a_line_without_end_is_hidden_across_its_pieces() {
        // A line longer than the piece it is written in (64 KiB), the secret straddling
        // each place it could be cut.
        let secret = "sk-ant-oat01-SECRET".to_string();
        let around = |at: usize| (at - secret.len())..=at;
        let places = [64 * 1024, 68 * 1024, 72 * 1024]
            .into_iter()
            .flat_map(around);
        for before in places {
            let text = format!("{}{secret}{}", "x".repeat(before), "y".repeat(100));
            let reads: Vec<&[u8]> = text.as_bytes().chunks(4096).collect();
            let (logged, _) = stderr_of(&reads, std::slice::from_ref(&secret));
            assert!(!logged.contains("SECRET"), "{before} bytes before it");
            assert_eq!(logged.len(), text.len() - secret.len() + "<hidden>".len());
        }
    }
}
