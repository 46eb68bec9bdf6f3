//! What owl prints: stdout that a closed pipe ends quietly (like ripgrep), and every byte the agent wrote made inert before it reaches a terminal.

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// stdout was closed by its reader (`owl status | head -1`): nothing more is written.
static CLOSED: AtomicBool = AtomicBool::new(false);
/// stdout failed for another reason (a full disk): the command's exit code says so.
static FAILED: Mutex<Option<String>> = Mutex::new(None);

/// Writes to stdout, made inert; never panics. A closed pipe silences the rest.
pub(crate) fn write_out(args: fmt::Arguments) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let raw = args.to_string();
    let text = rendered(&raw);
    let mut out = io::stdout().lock();
    settle(out.write_all(text.as_bytes()).and_then(|()| out.flush()));
}

/// A line as owl prints it: inert, then owl's own styles, marked where the line was made,
/// turned into their escape codes.
fn rendered(raw: &str) -> std::borrow::Cow<'_, str> {
    let text = inert(raw);
    match text.contains([RED, PLAIN]) {
        true => text
            .replace(RED, "\x1b[31m")
            .replace(PLAIN, "\x1b[0m")
            .into(),
        false => text,
    }
}

/// Marks red text in a line owl prints (private-use characters no input holds):
/// [`write_out`] turns them into the terminal's codes after making the rest inert.
pub(crate) const RED: char = '\u{F8F0}';
/// Ends a style [`RED`] began.
pub(crate) const PLAIN: char = '\u{F8F1}';

/// Whether owl's output may be coloured: stdout is a terminal and `NO_COLOR` is not set
/// (no-color.org: any value but the empty one turns colour off).
pub(crate) fn colour() -> bool {
    use std::io::IsTerminal;
    let no_colour = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_colour && io::stdout().is_terminal()
}

/// Takes a stdout write's result: a closed pipe silences what follows; any other failure
/// is kept for the exit code ([`stdout_failure`]) and silences it too.
fn settle(result: io::Result<()>) {
    match result {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => CLOSED.store(true, Ordering::Relaxed),
        Err(e) => {
            CLOSED.store(true, Ordering::Relaxed);
            let mut failed = FAILED.lock().unwrap_or_else(|p| p.into_inner());
            failed.get_or_insert_with(|| e.to_string());
        }
    }
}

/// Writes bytes to stdout exactly as they are (`logs --raw`); a closed pipe is not an error.
pub(crate) fn write_raw(bytes: &[u8]) -> io::Result<()> {
    if CLOSED.load(Ordering::Relaxed) {
        return Ok(());
    }
    match io::stdout().lock().write_all(bytes) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
            CLOSED.store(true, Ordering::Relaxed);
            Ok(())
        }
        other => other,
    }
}

/// Writes to stderr, made inert; never panics (a closed stderr loses the message).
pub(crate) fn write_err(args: fmt::Arguments) {
    let raw = args.to_string();
    let _ = io::stderr().lock().write_all(inert(&raw).as_bytes());
}

/// stderr for the log lines, made inert; a closed stderr loses them, never panics.
pub(crate) struct InertStderr;

impl Write for InertStderr {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let _ = io::stderr().lock().write_all(inert(&text).as_bytes());
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let _ = io::stderr().flush();
        Ok(())
    }
}

/// Whether stdout's reader has gone: a command that would print on and on stops.
pub(crate) fn stdout_closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}

/// Why writing stdout failed, other than a closed pipe.
pub(crate) fn stdout_failure() -> Option<String> {
    FAILED.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Text with every control character but newline and tab shown as `\x1b`, `\r`, …: an
/// agent's ESC, OSC or carriage return cannot clear a screen, write the clipboard or fake
/// a line. owl's own output uses no other control character, so all of it goes through.
pub(crate) fn inert(text: &str) -> std::borrow::Cow<'_, str> {
    let is_live = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(is_live) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\r' => out.push_str("\\r"),
            c if is_live(c) => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.into()
}

/// stdout for output written in pieces (a streamed JSON list): gathered in memory and
/// written in 64 KiB pieces, and like [`write_out`] quiet on a closed pipe and never an
/// error to the writer. A JSON value is written in thousands of small pieces, so each one
/// costs a copy and nothing more.
struct QuietStdout(Vec<u8>);

impl QuietStdout {
    const PIECE: usize = 64 * 1024;

    fn write_gathered(&mut self) {
        if !CLOSED.load(Ordering::Relaxed) {
            settle(io::stdout().lock().write_all(&self.0));
        }
        self.0.clear();
    }
}

impl Write for QuietStdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.extend_from_slice(buf);
        if self.0.len() >= Self::PIECE {
            self.write_gathered();
        }
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.write(buf).map(drop)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write_gathered();
        if !CLOSED.load(Ordering::Relaxed) {
            settle(io::stdout().lock().flush());
        }
        Ok(())
    }
}

/// A JSON value printed to stdout in pieces, made inert like all of owl's JSON.
pub(crate) struct JsonOut(serde_json::Serializer<QuietStdout, InertJson>);

/// A JSON list being printed, one element at a time.
pub(crate) struct JsonList<'a>(serde_json::ser::Compound<'a, QuietStdout, InertJson>);

impl JsonOut {
    /// JSON to stdout.
    pub(crate) fn stdout() -> JsonOut {
        let out = QuietStdout(Vec::with_capacity(QuietStdout::PIECE + 4096));
        JsonOut(serde_json::Serializer::with_formatter(
            out,
            InertJson::default(),
        ))
    }

    /// Ends the line and flushes what is buffered.
    pub(crate) fn finish(self) {
        let mut out = self.0.into_inner();
        let _ = out.write_all(b"\n");
        let _ = out.flush();
    }

    /// Opens a list.
    pub(crate) fn start_list(&mut self) -> anyhow::Result<JsonList<'_>> {
        use serde::Serializer;
        Ok(JsonList((&mut self.0).serialize_seq(None)?))
    }
}

impl JsonList<'_> {
    /// Prints one element.
    pub(crate) fn element(&mut self, value: &impl serde::Serialize) -> anyhow::Result<()> {
        use serde::ser::SerializeSeq;
        Ok(self.0.serialize_element(value)?)
    }

    /// Closes the list.
    pub(crate) fn end(self) -> anyhow::Result<()> {
        use serde::ser::SerializeSeq;
        Ok(self.0.end()?)
    }
}

/// serde_json's pretty formatter, escaping inside strings the control characters serde_json
/// leaves raw (DEL and C1, such as the one-byte CSI `\u{9b}`): JSON owl prints is inert too.
#[derive(Default)]
pub(crate) struct InertJson(serde_json::ser::PrettyFormatter<'static>);

impl serde_json::ser::Formatter for InertJson {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        // In UTF-8, DEL is the byte 0x7f and every C1 character starts with 0xc2: a byte
        // scan finds the candidates, and most fragments have none.
        let bytes = fragment.as_bytes();
        if bytes.iter().all(|&b| b < 0x7f) {
            return w.write_all(bytes);
        }
        let mut start = 0;
        let mut i = 0;
        while i < bytes.len() {
            let len = match (bytes[i], bytes.get(i + 1)) {
                (0x7f, _) => 1,
                (0xc2, Some(0x80..=0x9f)) => 2,
                _ => {
                    i += 1;
                    continue;
                }
            };
            w.write_all(&bytes[start..i])?;
            let c = fragment[i..].chars().next().unwrap_or_default();
            write!(w, "\\u{:04x}", c as u32)?;
            i += len;
            start = i;
        }
        w.write_all(&bytes[start..])
    }

    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn end_object_key<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_key(w)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// `println!` for owl: made inert, and quiet on a closed pipe.
#[macro_export]
macro_rules! outln {
    () => {
        $crate::output::write_out(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` for owl: made inert, and never a panic.
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::output::write_err(format_args!("{}\n", format_args!($($arg)*)))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owls_own_colour_reaches_the_terminal_and_nothing_else_does() {
        let line = format!("a {RED}▆{PLAIN} b \x1b[2J");
        assert_eq!(rendered(&line), "a \x1b[31m▆\x1b[0m b \\x1b[2J");
    }

    #[test]
    fn control_characters_are_shown_not_obeyed() {
        assert_eq!(inert("plain\ttext\n"), "plain\ttext\n");
        assert_eq!(
            inert("\x1b]52;c;ZXZpbA==\x07 \x1b[2J done\r[result] success"),
            "\\x1b]52;c;ZXZpbA==\\x07 \\x1b[2J done\\r[result] success"
        );
        assert_eq!(inert("\u{9b}31m"), "\\x9b31m");
    }

    #[test]
    fn json_escapes_every_control_character() {
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut out, InertJson::default());
        serde::Serialize::serialize(&["a\u{1b}[2J\u{9b}1m\u{7f}z"], &mut ser).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        let back: Vec<String> = serde_json::from_str(&text).unwrap();
        assert_eq!(back[0], "a\u{1b}[2J\u{9b}1m\u{7f}z");
    }
}
