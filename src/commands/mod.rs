//! The commands of DESIGN §4, one file each with its arguments; this file only dispatches.

mod add;
mod cancel;
mod capabilities;
mod check;
mod clean;
mod cli;
mod config_check;
mod conformance;
mod ctx;
mod doctor;
mod job_json;
mod jobs;
mod logs;
mod metrics;
mod move_jobs;
mod plan;
mod probe;
mod report;
mod reserve;
mod shell;
mod show;
mod status;
mod store_copy;
mod tick;

use anyhow::Result;

use capabilities::check_capabilities;
pub(crate) use cli::{hint_for, Cli};
use cli::{Command, ConfigCommand, StoreCommand};
pub(crate) use ctx::ensure_private_dir;
use ctx::{create_private_file, opt_time, print_json, Ctx};
use job_json::JobJson;

/// Runs one command; the returned code is the process's exit code.
pub(crate) fn dispatch(cli: Cli) -> Result<u8> {
    // What describes owl itself needs no config.
    match &cli.command {
        Command::Completions(args) => return shell::completions(args.shell),
        Command::Man => return shell::man(),
        _ => {}
    }
    let config = crate::config::load(cli.config.as_deref())?;
    check_capabilities(&config)?;
    let ctx = Ctx {
        config,
        reserves: Default::default(),
    };
    match cli.command {
        Command::Tick(args) => tick::run(&ctx, &args),
        Command::Status(args) => status::run(&ctx, &args),
        Command::Add(args) => add::run(&ctx, *args),
        Command::Jobs(args) => jobs::run(&ctx, &args),
        Command::Show(args) => show::run(&ctx, &args),
        Command::Logs(args) => logs::run(&ctx, &args),
        Command::Check(args) => check::run(&ctx, &args),
        Command::Cancel(args) => cancel::cancel(&ctx, &args),
        Command::Requeue(args) => cancel::requeue(&ctx, &args),
        Command::Move(args) => move_jobs::run(&ctx, &args),
        Command::Clean(args) => clean::run(&ctx, &args),
        Command::Config(ConfigCommand::Check) => config_check::run(&ctx),
        Command::Store(StoreCommand::Copy(args)) => store_copy::copy(&ctx, &args),
        Command::Doctor(args) if args.conformance => conformance::run(
            &ctx,
            args.account.as_deref(),
            args.json,
            args.record.as_deref(),
        ),
        Command::Doctor(args) => doctor::run(&ctx, args.json),
        Command::Probe(args) => probe::run(&ctx, &args),
        Command::Report(args) => report::run(&ctx, &args),
        Command::Completions(args) => shell::completions(args.shell),
        Command::Man => shell::man(),
    }
}
