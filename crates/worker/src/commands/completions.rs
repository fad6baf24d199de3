//! `worker completions <shell>`: prints the completion script (see [`crate::completions`]).

use crate::completions::{CompletionsArgs, write_completions};
use crate::exit::ExitCode;

/// Prints the script on stdout.
pub fn completions(args: &CompletionsArgs) -> ExitCode {
    write_completions(args.shell, &mut std::io::stdout().lock());
    ExitCode::Success
}
