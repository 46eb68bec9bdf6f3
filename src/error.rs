//! The error kinds that decide owl's exit code: 2 for bad usage or config, 1 for the rest.

use std::fmt;

/// Exit code: the command did its work.
pub const EXIT_OK: u8 = 0;
/// Exit code: owl itself failed (database, git, the agent CLI missing or of an untested version).
pub const EXIT_FAILURE: u8 = 1;
/// Exit code: bad usage or bad config; nothing in the state was changed.
pub const EXIT_BAD_INPUT: u8 = 2;

/// Bad usage or bad config: the message names the file, line and key or value at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadInput(pub String);

impl fmt::Display for BadInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

/// Returns early with a [`BadInput`] error.
#[macro_export]
macro_rules! bad_input {
    ($($arg:tt)*) => {
        return Err($crate::error::BadInput(format!($($arg)*)).into())
    };
}

/// The exit code for an error that ended a command.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    if err.chain().any(|e| e.downcast_ref::<BadInput>().is_some()) {
        EXIT_BAD_INPUT
    } else {
        EXIT_FAILURE
    }
}
