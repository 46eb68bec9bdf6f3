//! owl's error: one type whose kind decides the exit code, in one place (`ErrorKind::exit_code`).

/// Exit code: the command did its work.
pub(crate) const EXIT_OK: u8 = 0;
/// Exit code: owl itself failed (database, git, the agent CLI missing or of an untested version).
pub(crate) const EXIT_FAILURE: u8 = 1;
/// Exit code: bad usage or bad config; nothing in the state was changed.
pub(crate) const EXIT_BAD_INPUT: u8 = 2;

/// What kind of failure ended a command; the exit code follows from it alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    /// Bad usage or bad config: the message names the file, line and key or value at fault,
    /// and nothing in the state was changed.
    BadInput,
    /// The agent CLI is missing, unusable, or of a version owl has not been tested with.
    AgentCli,
    /// A filesystem owl writes to has less free space than `minFreeSpace`.
    DiskSpace,
    /// Anything else owl itself failed at: the database, git, a file.
    Failure,
}

impl ErrorKind {
    /// The process's exit code for a command that ended with this kind of error.
    pub(crate) fn exit_code(self) -> u8 {
        match self {
            ErrorKind::BadInput => EXIT_BAD_INPUT,
            ErrorKind::AgentCli | ErrorKind::DiskSpace | ErrorKind::Failure => EXIT_FAILURE,
        }
    }
}

/// An error of a known kind, with the words that explain it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub(crate) struct Error {
    pub(crate) kind: ErrorKind,
    pub(crate) message: String,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }

    /// Bad usage or bad config.
    pub(crate) fn bad_input(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::BadInput, message)
    }
}

/// Returns early with a [`ErrorKind::BadInput`] error.
#[macro_export]
macro_rules! bad_input {
    ($($arg:tt)*) => {
        return Err($crate::error::Error::bad_input(format!($($arg)*)).into())
    };
}

/// The kind of an error that ended a command: the first owl [`Error`] in its chain, or a
/// [`ErrorKind::Failure`] when there is none (a database or git error, say).
pub(crate) fn kind_of(err: &anyhow::Error) -> ErrorKind {
    err.chain()
        .find_map(|e| e.downcast_ref::<Error>())
        .map_or(ErrorKind::Failure, |e| e.kind)
}

/// The exit code for an error that ended a command.
pub(crate) fn exit_code(err: &anyhow::Error) -> u8 {
    kind_of(err).exit_code()
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn the_kind_decides_the_exit_code_through_any_context() {
        let bad: anyhow::Error = Error::bad_input("unknown key 'x'").into();
        let bad = bad.context("reading config");
        assert_eq!(kind_of(&bad), ErrorKind::BadInput);
        assert_eq!(exit_code(&bad), EXIT_BAD_INPUT);
        let cli: anyhow::Result<()> =
            Err(Error::new(ErrorKind::AgentCli, "claude is not on PATH").into());
        let cli = cli.context("starting job abc").unwrap_err();
        assert_eq!(kind_of(&cli), ErrorKind::AgentCli);
        assert_eq!(exit_code(&cli), EXIT_FAILURE);
        let io = anyhow::Error::from(std::io::Error::other("disk"));
        assert_eq!(kind_of(&io), ErrorKind::Failure);
        assert_eq!(exit_code(&io), EXIT_FAILURE);
    }
}
