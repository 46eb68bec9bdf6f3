//! The command line (clap derive): owl's commands, each with the arguments its own file declares; doc comments are the help text.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use super::{
    add::AddArgs,
    cancel::{CancelArgs, RequeueArgs},
    check::CheckArgs,
    clean::CleanArgs,
    doctor::DoctorArgs,
    jobs::JobsArgs,
    logs::LogsArgs,
    move_jobs::MoveArgs,
    probe::ProbeArgs,
    report::ReportArgs,
    shell::CompletionsArgs,
    show::ShowArgs,
    status::StatusArgs,
    tick::TickArgs,
};

/// owl runs coding agents unattended overnight, and stops before the Account is spent.
#[derive(Debug, Parser)]
#[command(name = "owl", version, about, long_about = None)]
pub(crate) struct Cli {
    /// The config file (default: $OWL_CONFIG, else $XDG_CONFIG_HOME/owl/config.yaml).
    #[arg(long, global = true, value_name = "PATH")]
    pub(crate) config: Option<PathBuf>,

    #[command(subcommand)]
    pub(crate) command: Command,
}

/// What owl can be asked to do.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// One scheduling step: run the next eligible Job once, then exit.
    Tick(TickArgs),
    /// Accounts and their windows, the current Run, the queue, and why nothing runs.
    Status(StatusArgs),
    /// Queue a Job; prints its id alone on stdout.
    Add(Box<AddArgs>),
    /// The Jobs (default: those not finished).
    Jobs(JobsArgs),
    /// One Job, its Runs and its Handoff.
    Show(ShowArgs),
    /// A Run's transcript, readable.
    Logs(LogsArgs),
    /// Run a Job's check now in its worktree and print the result; exits 0 when it passes.
    Check(CheckArgs),
    /// Stop a Job (a running Run is terminated) and never run it again.
    Cancel(CancelArgs),
    /// Put a failed, blocked or cancelled Job back in the queue, with a fresh allowance of Runs.
    Requeue(RequeueArgs),
    /// Hand Jobs not yet run to another machine sharing the store, or bring a renamed
    /// machine's Jobs to this one (`--from OLD`).
    Move(MoveArgs),
    /// Remove the worktrees of finished Jobs (their branches stay, so no work is lost).
    ///
    /// Run logs are never pruned, by this or anything else: a Job's transcripts stay in
    /// `<stateDir>/logs/<job-id>/` until you remove that folder by hand.
    Clean(CleanArgs),
    /// Work with the config.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Work with the store owl keeps its state in.
    #[command(subcommand)]
    Store(StoreCommand),
    /// Check the agent CLI and its version, each Account's login, git, the database.
    Doctor(DoctorArgs),
    /// Ask each Account's agent for its utilization and login now (no prompt, no tokens),
    /// record the figures and print them. Exits 1 when an Account is not logged in.
    Probe(ProbeArgs),
    /// The night at a glance: each Job a Run touched, each Account's utilization against
    /// its ceiling, with the Runs and their stops. Default period: since the latest
    /// `schedule.window` began, else the last 12 hours.
    Report(ReportArgs),
    /// Print the completion script for a shell (needs no config).
    Completions(CompletionsArgs),
    /// Print owl's man page, in roff (needs no config): `owl man > owl.1`.
    Man,
}

/// `owl config ...`
#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Validate the config and print it resolved.
    Check,
}

/// `owl store ...`
#[derive(Debug, Subcommand)]
pub(crate) enum StoreCommand {
    /// Copy this machine's SQLite state (Jobs, Runs, Snapshots, notes) into an empty
    /// PostgreSQL store, in one transaction, naming this machine on its rows.
    Copy(super::store_copy::StoreCopyArgs),
}

/// A hint for a command line clap refused that a person writes by mistake: a prompt of
/// several words left unquoted, which clap sees as arguments after the prompt.
pub(crate) fn hint_for(error: &clap::Error, args: &[std::ffi::OsString]) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let adding = subcommand(args).is_some_and(|a| a == "add");
    let extra = match error.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(arg)) => arg.clone(),
        _ => return None,
    };
    (adding && error.kind() == ErrorKind::UnknownArgument && !extra.starts_with('-')).then(|| {
        "a prompt of several words is one argument: quote it (`owl add \"Fix the parser \
         please\"`), or give it in a file (`--prompt-file FILE`) or on stdin (`-`)"
            .to_string()
    })
}

/// The subcommand on a command line: the first word that is not a global option or its
/// value (`owl --config FILE add …`).
fn subcommand(args: &[std::ffi::OsString]) -> Option<&std::ffi::OsString> {
    let mut words = args.iter().skip(1);
    while let Some(word) = words.next() {
        if word == "--config" {
            words.next();
        } else if !word.to_str().is_some_and(|w| w.starts_with("--config=")) {
            return Some(word);
        }
    }
    None
}

/// `--priority N`: a whole number, higher first; said so when it is not one.
pub(crate) fn parse_priority(text: &str) -> Result<i64, NotAPriority> {
    text.trim()
        .parse()
        .map_err(|_| NotAPriority(text.to_string()))
}

/// A `--priority` that is not a whole number.
#[derive(Debug, thiserror::Error)]
#[error("'{0}' is not a priority: a whole number, higher runs first (e.g. 10 or -5)")]
pub(crate) struct NotAPriority(String);
