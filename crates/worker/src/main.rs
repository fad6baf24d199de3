//! The `worker` binary: parses the command line into a checked [`Command`] (usage errors exit
//! 2 through clap), dispatches it to its handler in `worker::commands`, and turns the handler's
//! [`worker::exit::ExitCode`] into the process status (the only place that happens). JSON
//! results go to stdout; errors go to stderr as one `worker: error: ...` line; logs go to
//! stderr, filtered by the `WORKER_LOG` environment variable (`tracing` env-filter syntax,
//! default `warn`), as text or, with `--log-format json` or `VERIFIER_LOG_FORMAT=json`, one
//! JSON object per line. The exit codes of each mode are listed in its handler's module.

use std::sync::atomic::Ordering;

use worker::cli::{self, Command};
use worker::commands;
use worker::exit::ExitCode;

fn main() -> std::process::ExitCode {
    cli_support::quiet_broken_stdout();
    if cli_support::version::verbose_requested(std::env::args_os().skip(1)) {
        cli_support::version::print_verbose("worker");
        return std::process::ExitCode::SUCCESS;
    }
    // Before any work: every evidence record, cache key, ledger row and metric names this
    // build (version and commit), not only the version every commit shares.
    verifier_sdk::build::record(cli_support::VERSION);
    // The executable's own digest, read on first use (evidence records, in-toto statements):
    // /proc/self/exe stays the file that was started even if its path is replaced meanwhile.
    verifier_sdk::build::record_binary_digest(|| {
        cli_support::version::self_sha256()
            .ok()
            .and_then(|hex| format!("sha256:{hex}").parse().ok())
    });
    // Under --json every failure also prints the error object on stdout (see commands::fail).
    let json = cli_support::json_requested(std::env::args_os().skip(1));
    commands::JSON_ERRORS.store(json, Ordering::Relaxed);
    // clap prints its own message and exits with 2 (usage) or 0 (help, version).
    let parsed = cli::parse();
    cli_support::init_logging_as(
        "WORKER_LOG",
        "warn",
        cli_support::LogFormat::choose(parsed.log_format),
    );
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
            oci_runtime,
            evidence,
            in_toto,
        } => commands::run_regression::run_regression(
            &request,
            pull,
            oci_runtime.name(),
            evidence.as_deref(),
            in_toto.as_deref(),
        ),
        Command::ValidateCandidate { request, json } => {
            commands::validate_candidate::validate_candidate(&request, json)
        }
        Command::Feed(args) => commands::feed::feed(&args, quiet),
        Command::Rehearse(args) => commands::rehearse::rehearse(args, quiet),
        Command::Reproduce(args) => commands::reproduce::reproduce(&args, quiet),
        Command::Preflight(args) => commands::preflight::preflight(&args, quiet),
        Command::Serve(args) => commands::serve::serve(&args),
        Command::Ledger { state, action } => commands::serve::ledger(&state, &action),
        Command::Explain {
            evidence,
            json,
            lines,
        } => commands::explain::explain(&evidence, json, lines),
        Command::Request(args) => commands::make_request::request(&args),
        Command::Gc(args) => commands::gc::gc(&args),
        Command::Completions(args) => commands::completions::completions(&args),
        Command::Doctor(args) => commands::doctor::doctor(&args),
        Command::Plan {
            request,
            staging_root,
            json,
            oci_runtime,
        } => commands::plan::plan(&request, staging_root.as_deref(), oci_runtime.name(), json),
    }
}
