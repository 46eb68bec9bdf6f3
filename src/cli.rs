//! The command line (clap derive): the commands and their flags; doc comments are the help text.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// owl runs coding agents unattended overnight, and stops before the Account is spent.
#[derive(Debug, Parser)]
#[command(name = "owl", version, about, long_about = None)]
pub(crate) struct Cli {
    /// The config file (default: $OWL_CONFIG, else $XDG_CONFIG_HOME/owl/config.yaml).
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

/// What owl can be asked to do.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// One scheduling step: run the next eligible Job once, then exit.
    Tick {
        /// Print the decision and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        /// Run this Job now, if it is eligible, instead of the queue's next.
        #[arg(long, value_name = "ID")]
        job: Option<String>,
        /// With --job: run it even over its Account's ceiling, and do not stop it at one
        /// (said loudly on stderr). Logins, backoffs and the Job's own state still hold.
        #[arg(long, requires = "job")]
        ignore_ceiling: bool,
    },
    /// Accounts and their windows, the current Run, the queue, and why nothing runs.
    Status {
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Queue a Job; prints its id alone on stdout.
    Add(AddArgs),
    /// The Jobs (default: those not finished).
    Jobs {
        /// Include finished Jobs.
        #[arg(long)]
        all: bool,
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
    /// One Job, its Runs and its Handoff.
    Show {
        /// The Job's id.
        job: String,
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
    /// A Run's transcript, readable.
    Logs {
        /// A Run's id, or a Job's id or name for its newest Run.
        #[arg(value_name = "RUN|JOB")]
        run: String,
        /// Print the stream exactly as recorded, byte for byte: control characters the
        /// agent wrote reach your terminal as they are (the readable form shows them
        /// escaped, like \x1b).
        #[arg(long)]
        raw: bool,
        /// Keep printing as the Run writes more, until it ends.
        #[arg(long)]
        follow: bool,
    },
    /// Stop a Job (a running Run is terminated) and never run it again.
    Cancel {
        /// The Job's id.
        job: String,
    },
    /// Put a failed, blocked or cancelled Job back in the queue, with a fresh allowance of Runs.
    Requeue {
        /// The Job's id.
        job: String,
        /// A new budget for all the Job's Runs together (what was spent still counts).
        #[arg(long, value_name = "X")]
        max_job_budget_usd: Option<f64>,
    },
    /// Remove the worktrees of finished Jobs (their branches stay, so no work is lost).
    ///
    /// Run logs are never pruned, by this or anything else: a Job's transcripts stay in
    /// `<stateDir>/logs/<job-id>/` until you remove that folder by hand.
    Clean {
        /// The Job whose worktree to remove.
        #[arg(required_unless_present = "finished", conflicts_with = "finished")]
        job: Option<String>,
        /// Every done, failed, blocked or cancelled Job.
        #[arg(long)]
        finished: bool,
    },
    /// Work with the config.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Check the agent CLI and its version, each Account's login, git, the database.
    Doctor {
        /// Instead: prove each Account's agent CLI keeps the protocol owl relies on, against
        /// a loopback mock (no real credential, no token, nothing leaves the machine), and
        /// record the verdict for that binary. Exits 1 when a check fails.
        #[arg(long)]
        conformance: bool,
        /// With --conformance: only this Account's CLI.
        #[arg(long, requires = "conformance")]
        account: Option<String>,
        /// Print as JSON (with --conformance: the checks).
        #[arg(long)]
        json: bool,
        /// With --conformance: keep what the CLI wrote in each scenario in this directory,
        /// as fixtures (`conformance-<scenario>.jsonl`; see scripts/record-fixtures).
        #[arg(long, requires = "conformance", value_name = "DIR")]
        record: Option<std::path::PathBuf>,
    },
    /// Ask each Account's agent for its utilization and login now (no prompt, no tokens),
    /// record the figures and print them. Exits 1 when an Account is not logged in.
    Probe {
        /// Only this Account.
        account: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// The night at a glance: each Job a Run touched, each Account's utilization against
    /// its ceiling, with the Runs and their stops. Default period: since the latest
    /// `schedule.window` began, else the last 12 hours.
    Report {
        /// The period: this long before now (`8h`, `2d`).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "night")]
        since: Option<std::time::Duration>,
        /// The period: since the latest `schedule.window` began (the default with one).
        #[arg(long)]
        night: bool,
        /// The same data as JSON (the chart as its series of Snapshots).
        #[arg(long)]
        json: bool,
        /// Write one self-contained HTML page (inline SVG and CSS) to FILE.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
    },
    /// Print the completion script for a shell (needs no config).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print owl's man page, in roff (needs no config): `owl man > owl.1`.
    Man,
}

/// `owl config ...`
#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Validate the config and print it resolved.
    Check,
}

/// `owl add`
#[derive(Debug, Args)]
pub(crate) struct AddArgs {
    /// The git repository to work in (default: the current directory).
    #[arg(long, value_name = "PATH")]
    pub repo: Option<PathBuf>,
    /// The ref the Job's branch starts from, resolved to its commit now.
    #[arg(long, value_name = "REF", default_value = "HEAD")]
    pub base: String,
    /// The Account to run on (default: defaults.account, else the one with the most headroom).
    #[arg(long, value_name = "NAME")]
    pub account: Option<String>,
    /// Higher runs first.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub priority: Option<i64>,
    /// Fail the Job after this many Runs without `done`.
    #[arg(long, value_name = "N")]
    pub max_runs: Option<u32>,
    /// The spending cap of each Run, in USD.
    #[arg(long, value_name = "X")]
    pub max_budget_usd: Option<f64>,
    /// The spending cap of all the Job's Runs together, in USD.
    #[arg(long, value_name = "X")]
    pub max_job_budget_usd: Option<f64>,
    /// A name for the Job, used as its id (letters, digits, '.', '_', '-').
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Read the prompt from a file.
    #[arg(long, value_name = "FILE", conflicts_with = "prompt")]
    pub prompt_file: Option<PathBuf>,
    /// The prompt; `-` reads it from stdin.
    pub prompt: Option<String>,
}

/// A duration as config.yaml writes them (`90s`, `8h`, `2d`).
fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    crate::config::parse_duration(s).map_err(|e| e.to_string())
}
