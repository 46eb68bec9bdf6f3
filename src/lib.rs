//! owl: runs coding agents unattended overnight, and stops before the Account is spent.
#![warn(unreachable_pub)]

// First, so that its outln!/errln! are in scope in every module below.
#[macro_use]
mod output;

mod agent_settings;
mod budget;
mod clock;
mod commands;
mod config;
mod conformance;
mod disk;
mod driver;
mod error;
mod handoff;
mod journal;
mod lock;
mod model;
mod morning;
mod notify;
mod oneshot;
mod outcome;
mod prompt;
mod recover;
mod schedule;
mod settlement;
mod store;
mod supervise;
mod sys;
mod text;
mod untrusted;
mod usage;
mod user_use;
mod wait;
mod watchdog;
mod workspace;

// owl is a binary: what is public here is what `main.rs`, the integration tests and the
// benches use, and nothing else (the architecture test fails on a public item nothing
// outside the crate names).

/// The loopback mocks of the agents' APIs, for end-to-end tests against the real CLIs.
pub use conformance::mock;
/// How long owl waits for the agent's answer to an interrupt.
pub use driver::INTERRUPT_WAIT;
/// The words owl puts before every prompt.
pub use prompt::STANDING_INSTRUCTIONS;

#[cfg(not(target_os = "linux"))]
compile_error!(
    "owl supervises agents with Linux facilities (prctl, pidfd, /proc): it builds on Linux only"
);

use std::process::ExitCode;

use clap::Parser;

/// Parses the command line, runs the command, and maps a failure to its exit code.
pub fn run() -> ExitCode {
    // Inside a sandbox owl is the agent's init: no config, no database, no command line of
    // its own (`owl __sandbox-init REPORT -- PROGRAM ARGS…`).
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args
        .get(1)
        .is_some_and(|a| a == supervise::sandbox::INIT_COMMAND)
    {
        return match args.get(2..4) {
            Some([report, dashes]) if dashes == "--" => {
                let code = supervise::sandbox::init(std::path::Path::new(report), &args[4..]);
                ExitCode::from(u8::try_from(code).unwrap_or(1))
            }
            _ => {
                errln!(
                    "owl: usage: owl {} REPORT -- PROGRAM ARGS…",
                    supervise::sandbox::INIT_COMMAND
                );
                ExitCode::from(error::EXIT_BAD_INPUT)
            }
        };
    }
    let cli = match commands::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            if let Some(hint) = commands::hint_for(&e, &args) {
                errln!("hint: {hint}");
            }
            return ExitCode::from(if e.use_stderr() {
                error::EXIT_BAD_INPUT
            } else {
                0
            });
        }
    };
    let journaled = journal::is_stderr();
    init_tracing(journaled);
    let result = commands::dispatch(cli);
    // What the command cost in memory, for `OWL_LOG=owl::peak=debug`: the figure the tests
    // bound for each hostile input (a child's rusage would include what its parent held).
    if let Some(kib) = sys::peak_rss_kib() {
        tracing::debug!(target: "owl::peak", "peak memory: {kib} KiB");
    }
    match result {
        Ok(code) => match output::stdout_failure() {
            // The command did its work; what it printed was lost.
            Some(e) => {
                errln!(
                    "{}owl: writing to stdout: {e}",
                    journal::error_prefix(journaled)
                );
                ExitCode::from(error::EXIT_FAILURE)
            }
            None => ExitCode::from(code),
        },
        Err(e) => {
            errln!("{}owl: {e:#}", journal::error_prefix(journaled));
            ExitCode::from(error::exit_code(&e))
        }
    }
}

/// Log lines on stderr: for a person (coloured at a terminal), or for the journal under
/// systemd (each line's level as its priority, no time: the journal keeps its own).
fn init_tracing(journaled: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("OWL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    if journaled {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .event_format(journal::JournalFormat)
            .with_writer(|| output::InertStderr)
            .try_init();
        return;
    }
    let colour = colour_on_stderr();
    // No module path: a person reads these lines in cron.log and the journal.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(colour);
    // Without colour every control character is shown, not obeyed (an agent's \r in a
    // stop reason cannot fake a line of cron.log); with it, tracing escapes ESC itself.
    let _ = if colour {
        builder.with_writer(std::io::stderr).try_init()
    } else {
        builder.with_writer(|| output::InertStderr).try_init()
    };
}

/// Colours only for a person at a terminal: never in cron.log or the journal, and never
/// with `NO_COLOR` set (no-color.org).
fn colour_on_stderr() -> bool {
    use std::io::IsTerminal;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_color && std::io::stderr().is_terminal()
}
