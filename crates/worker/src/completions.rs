//! `worker completions <shell>`: the shell completion script, generated from the clap
//! definition so it always knows every flag and subcommand.

use clap::CommandFactory;

/// Arguments of `worker completions`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell. Install, e.g.:
    /// `worker completions bash > ~/.local/share/bash-completion/completions/worker`.
    pub shell: clap_complete::Shell,
}

/// Writes the completion script for `shell` to `out`.
pub fn write_completions(shell: clap_complete::Shell, out: &mut dyn std::io::Write) {
    let mut command = crate::cli::Cli::command();
    clap_complete::generate(shell, &mut command, "worker", out);
}
