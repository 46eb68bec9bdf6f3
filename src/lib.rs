//! owl: runs coding agents unattended overnight, and stops before the Account is spent.

pub mod cli;
pub mod clock;
pub mod commands;
pub mod config;
pub mod disk;
pub mod driver;
pub mod error;
pub mod handoff;
pub mod lock;
pub mod model;
pub mod outcome;
pub mod prompt;
pub mod recover;
pub mod schedule;
pub mod store;
pub mod supervise;
pub mod text;
pub mod usage;
pub mod workspace;

use std::process::ExitCode;

use clap::Parser;

/// Parses the command line, runs the command, and maps a failure to its exit code.
pub fn run() -> ExitCode {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                error::EXIT_BAD_INPUT
            } else {
                0
            });
        }
    };
    init_tracing();
    match commands::dispatch(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("owl: {e:#}");
            ExitCode::from(error::exit_code(&e))
        }
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("OWL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
