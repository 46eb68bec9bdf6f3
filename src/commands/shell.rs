//! `owl completions` and `owl man`: the shell's view of owl, generated from the same clap definitions as the parser.

use anyhow::Result;
use clap::CommandFactory;

use crate::cli::Cli;

/// Prints the completion script for `shell`.
pub fn completions(shell: clap_complete::Shell) -> Result<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "owl", &mut script);
    crate::output::write_raw(&script)?;
    Ok(0)
}

/// Prints the man page: owl(1), with a section per command.
pub fn man() -> Result<u8> {
    let command = Cli::command();
    let mut page = Vec::new();
    clap_mangen::Man::new(command.clone()).render(&mut page)?;
    // One section per command, so `man owl` tells what each does and takes.
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        let title = format!("OWL {}", sub.get_name().to_uppercase());
        page.extend_from_slice(format!(".SH \"{title}\"\n").as_bytes());
        let man = clap_mangen::Man::new(sub.clone());
        man.render_synopsis_section(&mut page)?;
        man.render_description_section(&mut page)?;
        man.render_options_section(&mut page)?;
    }
    crate::output::write_raw(&page)?;
    Ok(0)
}
