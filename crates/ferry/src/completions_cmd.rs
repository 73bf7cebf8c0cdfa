//! `ferry completions SHELL` and the hidden `ferry manpage`: shell completions and a man page,
//! both generated from the same clap definitions that parse the command line, so neither can
//! fall behind it. `scripts/dist.sh` runs them to put both into the release archives and the
//! Debian package.

use std::io::Write as _;

use anyhow::{Context as _, Result};
use clap::{Args, CommandFactory as _, ValueEnum};

/// Arguments of `ferry completions`.
#[derive(Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to write completions for (bash: source it or put it in
    /// /usr/share/bash-completion/completions/ferry; zsh: a `_ferry` file on $fpath; fish:
    /// ~/.config/fish/completions/ferry.fish).
    shell: Shell,
}

/// The shells completions are written for.
#[derive(Clone, Copy, ValueEnum)]
enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// Arguments of `ferry manpage`.
#[derive(Args)]
pub(crate) struct ManpageArgs {}

/// Writes the completion script for `args.shell` to stdout.
pub(crate) fn run_completions(args: CompletionsArgs) -> Result<()> {
    let shell = match args.shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut crate::Cli::command(), "ferry", &mut out);
    write_stdout(&out)
}

/// Writes `ferry(1)` in roff to stdout: the top-level page, with every subcommand's options in
/// a section of its own (one page, so `man ferry` shows everything).
pub(crate) fn run_manpage(_: ManpageArgs) -> Result<()> {
    let command = crate::Cli::command();
    let mut out = Vec::new();
    let man = clap_mangen::Man::new(command.clone());
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    // No SUBCOMMANDS list: it would point at a page per subcommand (ferry-node(1), …), and
    // this is one page with a section for each.
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        render_subcommand(&mut out, command.get_name(), sub)?;
    }
    man.render_version_section(&mut out)?;
    writeln!(
        out,
        ".SH FILES\n\
         .TP\n\
         \\fI$XDG_CONFIG_HOME/ferry/node.toml\\fR\n\
         The node's configuration when \\fB--config\\fR is not given (every key: \
         docs/configuration.md).\n\
         .TP\n\
         \\fI$XDG_DATA_HOME/ferry/\\fR\n\
         The node's store, identity and API token, unless \\fBdata_dir\\fR says otherwise.\n\
         .SH ENVIRONMENT\n\
         .TP\n\
         \\fBFERRY_API\\fR\n\
         The node API the client commands talk to (default 127.0.0.1:4550).\n\
         .TP\n\
         \\fBFERRY_API_TOKEN\\fR\n\
         The API's token, when the client cannot find the node's copy.\n\
         .TP\n\
         \\fBRUST_LOG\\fR\n\
         Log filter of \\fBferry node\\fR, overriding \\fB-v\\fR."
    )?;
    write_stdout(&out)
}

/// One section per subcommand: its synopsis, description and options, and those of its own
/// subcommands (`ferry bundle create`), each under a heading that names the whole command.
fn render_subcommand(out: &mut Vec<u8>, prefix: &str, sub: &clap::Command) -> Result<()> {
    let name = format!("{prefix} {}", sub.get_name());
    writeln!(out, ".SH \"{}\"", name.to_uppercase())?;
    let page = clap_mangen::Man::new(sub.clone().bin_name(name.clone()));
    let mut section = Vec::new();
    page.render_synopsis_section(&mut section)?;
    page.render_description_section(&mut section)?;
    page.render_options_section(&mut section)?;
    // Each rendered part starts with its own `.SH`; below a subcommand's heading they are
    // subsections.
    let text = String::from_utf8(section).context("clap_mangen wrote invalid UTF-8")?;
    for line in text.lines() {
        match line.strip_prefix(".SH ") {
            Some(title) => writeln!(out, ".SS {title}")?,
            None => writeln!(out, "{line}")?,
        }
    }
    for inner in sub.get_subcommands().filter(|s| !s.is_hide_set()) {
        render_subcommand(out, &name, inner)?;
    }
    Ok(())
}

fn write_stdout(bytes: &[u8]) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(bytes)?;
    stdout.flush().context("writing to stdout")
}
