//! `owl completions` and `owl man`: the shell's view of owl, generated from the same clap definitions as the parser.

use anyhow::Result;
use clap::CommandFactory;

use super::cli::Cli;

/// What `owl completions` was asked.
#[derive(Debug, clap::Args)]
pub(crate) struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    pub(crate) shell: clap_complete::Shell,
}

/// Prints the completion script for `shell`.
pub(super) fn completions(shell: clap_complete::Shell) -> Result<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "owl", &mut script);
    crate::output::write_raw(&script)?;
    Ok(0)
}

/// Prints the man page: owl(1), one page with a section per command. It names no other
/// page (clap_mangen's own SUBCOMMANDS section points at `owl-tick(1)` and the like, which
/// are not installed), and its synopses show each option's value (`--config <PATH>`).
pub(super) fn man() -> Result<u8> {
    let command = Cli::command();
    let man = clap_mangen::Man::new(command.clone());
    let mut page = Vec::new();
    man.render_title(&mut page)?;
    man.render_name_section(&mut page)?;
    page.extend_from_slice(b".SH SYNOPSIS\n");
    page.extend_from_slice(synopsis(&command, "owl").as_bytes());
    page.extend_from_slice(b".br\n\\fBowl\\fR \\fICOMMAND\\fR [\\fIOPTIONS\\fR]\n");
    man.render_description_section(&mut page)?;
    man.render_options_section(&mut page)?;
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        let title = format!("OWL {}", sub.get_name().to_uppercase());
        page.extend_from_slice(format!(".SH \"{title}\"\n").as_bytes());
        let name = format!("owl {}", sub.get_name());
        page.extend_from_slice(synopsis(sub, &name).as_bytes());
        for nested in sub.get_subcommands().filter(|s| !s.is_hide_set()) {
            page.extend_from_slice(b".br\n");
            let nested_name = format!("{name} {}", nested.get_name());
            page.extend_from_slice(synopsis(nested, &nested_name).as_bytes());
        }
        let man = clap_mangen::Man::new(sub.clone());
        man.render_description_section(&mut page)?;
        man.render_options_section(&mut page)?;
    }
    man.render_version_section(&mut page)?;
    crate::output::write_raw(&page)?;
    Ok(0)
}

/// One synopsis line in roff: the command in bold, then each of its arguments as it is
/// typed, optional ones in brackets, every value named (`[--since <D>]`, `<JOB>`).
fn synopsis(command: &clap::Command, name: &str) -> String {
    let mut line = format!("\\fB{}\\fR", roff_text(name));
    for arg in command.get_arguments().filter(|a| !a.is_hide_set()) {
        let id = arg.get_id().as_str();
        if id == "help" || id == "version" {
            continue;
        }
        let value = || {
            arg.get_value_names()
                .and_then(|names| names.first())
                .map(|n| n.to_string())
                .unwrap_or_else(|| id.to_uppercase())
        };
        let word = if arg.is_positional() {
            format!("\\fI<{}>\\fR", roff_text(&value()))
        } else {
            let flag = match (arg.get_long(), arg.get_short()) {
                (Some(long), _) => format!("--{long}"),
                (None, Some(short)) => format!("-{short}"),
                (None, None) => continue,
            };
            if arg.get_action().takes_values() {
                format!(
                    "\\fB{}\\fR \\fI<{}>\\fR",
                    roff_text(&flag),
                    roff_text(&value())
                )
            } else {
                format!("\\fB{}\\fR", roff_text(&flag))
            }
        };
        if arg.is_required_set() {
            line.push_str(&format!(" {word}"));
        } else {
            line.push_str(&format!(" [{word}]"));
        }
    }
    line.push('\n');
    line
}

/// Text as roff prints it: a hyphen that is a minus sign, a backslash shown.
fn roff_text(text: &str) -> String {
    text.replace('\\', "\\e").replace('-', "\\-")
}
