//! `worker completions <shell>`: prints the completion script (generated from the clap definition, so it always knows every flag and subcommand).

use clap::CommandFactory;

use crate::cli::CompletionsArgs;
use crate::exit::ExitCode;

/// Prints the script on stdout.
pub fn completions(args: &CompletionsArgs) -> ExitCode {
    write_completions(args.shell, &mut std::io::stdout().lock());
    ExitCode::Success
}

/// Writes the completion script for `shell` to `out`.
pub fn write_completions(shell: clap_complete::Shell, out: &mut dyn std::io::Write) {
    let mut command = crate::cli::Cli::command();
    clap_complete::generate(shell, &mut command, "worker", out);
}
