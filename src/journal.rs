//! systemd's journal as owl's stderr: whether it is (`JOURNAL_STREAM` names stderr's file), and each log line's priority prefix, which the journal reads as its level.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::FmtContext;
use tracing_subscriber::registry::LookupSpan;

/// Whether stderr is a stream to the journal: systemd sets `JOURNAL_STREAM` to the
/// `device:inode` of the stream it connected a service's stderr (or stdout) to. A child
/// whose stderr was redirected elsewhere inherits the variable but not the stream, so the
/// file itself is compared.
pub(crate) fn is_stderr() -> bool {
    std::env::var("JOURNAL_STREAM")
        .ok()
        .and_then(|value| parse(&value))
        .is_some_and(|stream| crate::sys::stderr_file_id() == Some(stream))
}

/// `device:inode` as systemd writes it.
fn parse(value: &str) -> Option<(u64, u64)> {
    let (dev, ino) = value.split_once(':')?;
    Some((dev.parse().ok()?, ino.parse().ok()?))
}

/// The syslog priority of a level, as the journal reads `<N>` at a line's start: error 3,
/// warning 4, info 6, debug 7.
pub(crate) fn priority(level: Level) -> u8 {
    match level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        _ => 7,
    }
}

/// The prefix of owl's own last line when a command fails: `<3>` to the journal, nothing
/// elsewhere.
pub(crate) fn error_prefix(journal: bool) -> &'static str {
    if journal {
        "<3>"
    } else {
        ""
    }
}

/// A log line for the journal: its priority, then the message and its fields; no time (the
/// journal keeps its own) and no level word (the priority is the level).
pub(crate) struct JournalFormat;

impl<S, N> FormatEvent<S, N> for JournalFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        write!(writer, "<{}>", priority(*event.metadata().level()))?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_is_named_as_systemd_writes_it() {
        assert_eq!(parse("8:1234"), Some((8, 1234)));
        assert_eq!(parse("8"), None);
        assert_eq!(parse("a:1"), None);
    }

    #[test]
    fn each_level_has_the_journals_priority() {
        assert_eq!(priority(Level::ERROR), 3);
        assert_eq!(priority(Level::WARN), 4);
        assert_eq!(priority(Level::INFO), 6);
        assert_eq!(priority(Level::DEBUG), 7);
    }
}
