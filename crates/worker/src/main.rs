//! The `worker` binary: parses the command line into a checked [`Command`] (usage errors exit
//! 2 through clap), dispatches it to its handler in `worker::commands`, and turns the handler's
//! [`worker::exit::ExitCode`] into the process status (the only place that happens). JSON
//! results go to stdout; errors go to stderr as one `worker: error: ...` line; logs go to
//! stderr, filtered by the `WORKER_LOG` environment variable (`tracing` env-filter syntax,
//! default `warn`). The exit codes of each mode are listed in its handler's module.

#![warn(clippy::too_many_lines, clippy::needless_pass_by_value)]

use worker::cli::{self, Command};
use worker::commands;
use worker::exit::ExitCode;

fn main() -> std::process::ExitCode {
    cli_support::restore_sigpipe();
    // clap prints its own message and exits with 2 (usage) or 0 (help, version).
    let parsed = cli::parse();
    cli_support::init_logging("WORKER_LOG", "warn");
    let code = dispatch(parsed.command, parsed.quiet);
    std::process::ExitCode::from(code.code())
}

fn dispatch(command: Command, quiet: bool) -> ExitCode {
    match command {
        Command::SnapshotDirectory { dir, limits } => {
            commands::stage::snapshot(&dir, limits, quiet)
        }
        Command::StageRegressionInput {
            kind,
            dir,
            root,
            limits,
        } => commands::stage::stage(kind, &dir, &root, limits, quiet),
        Command::RunRegression {
            request,
            pull,
            evidence,
        } => commands::run_regression::run_regression(&request, pull, evidence.as_deref()),
        Command::ValidateCandidate { request } => {
            commands::validate_candidate::validate_candidate(&request)
        }
        Command::Feed(args) => commands::feed::feed(&args, quiet),
        Command::Rehearse(args) => commands::rehearse::rehearse(args, quiet),
        Command::Explain {
            evidence,
            json,
            lines,
        } => commands::explain::explain(&evidence, json, lines),
        Command::Plan {
            request,
            staging_root,
        } => commands::plan::plan(&request, staging_root.as_deref()),
    }
}
