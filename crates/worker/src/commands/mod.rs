//! One handler per mode of the `worker` binary. Each takes the checked values of its
//! [`crate::cli::Command`], does the work through the library, prints the result (JSON on
//! stdout; errors as one `worker: error: ...` line on stderr) and returns the [`ExitCode`];
//! `main` only dispatches and turns that code into the process's status.

pub mod completions;
pub mod doctor;
pub mod explain;
pub mod feed;
pub mod gc;
pub mod local_request;
mod local_run;
pub mod make_request;
pub mod plan;
pub mod preflight;
pub mod rehearse;
pub mod rehearse_batch;
mod rehearse_exit;
mod rehearse_parallel;
pub mod reproduce;
pub mod request;
pub mod run_regression;
pub mod serve;
pub mod stage;
pub mod validate_candidate;

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::exit::ExitCode;
use worker_sandbox::{Executor, SandboxError};
use worker_store::staging_root::StagingRootError;

/// The time in unix seconds a command checks a job's window or a request's expiry at, read
/// from the one clock ([`worker_store::clock`]): the binary is where the system clock is
/// picked, and the libraries take the time from their caller.
pub fn now_unix() -> u64 {
    worker_store::clock::unix_secs(&worker_store::clock::SystemClock::new())
}

/// Writes `value` as one line of JSON on stdout; an unwritable result is an internal failure.
pub(crate) fn print_json(value: &impl serde::Serialize) -> ExitCode {
    let written = serde_json::to_string(value)
        .map_err(std::io::Error::other)
        .and_then(|json| writeln!(std::io::stdout().lock(), "{json}"));
    match written {
        Ok(()) => ExitCode::Success,
        Err(error) => {
            cli_support::end_if_stdout_gone(&error);
            fail(
                ExitCode::Internal,
                &format_args!("writing the result: {error}"),
            )
        }
    }
}

/// Writes `text` on stdout as it is.
pub(crate) fn print_text(text: &impl std::fmt::Display) -> ExitCode {
    match write!(std::io::stdout().lock(), "{text}") {
        Ok(()) => ExitCode::Success,
        Err(error) => {
            cli_support::end_if_stdout_gone(&error);
            fail(ExitCode::Internal, &error)
        }
    }
}

/// Set by `main` when the command line has `--json`: failures then also print the error
/// object on stdout, so a caller parsing stdout always gets JSON.
pub static JSON_ERRORS: AtomicBool = AtomicBool::new(false);

/// Reports `error` on stderr (and, under `--json`, as the error object on stdout) and returns
/// `code`.
pub(crate) fn fail(code: ExitCode, error: &dyn std::fmt::Display) -> ExitCode {
    cli_support::eprint_error("worker", &format!("worker: error: {error}"));
    if JSON_ERRORS.load(Ordering::Relaxed) {
        cli_support::print_error_json(
            code.name(crate::exit::Binary::Worker),
            code.code(),
            &error.to_string(),
        );
    }
    code
}

/// Whether a batch shows its progress lines on stderr: not when `quiet`, and not under JSON
/// logs, where stderr is one log object per line (the steps are debug events there). The one
/// rule for `feed`, `preflight` and `reproduce`.
pub(crate) fn progress_lines(quiet: bool) -> bool {
    !quiet && cli_support::log_format() == cli_support::LogFormat::Text
}

/// A staging root that cannot be settled on is a configuration problem in every mode.
pub(crate) fn staging_root_failed(error: &StagingRootError) -> ExitCode {
    fail(ExitCode::Config, error)
}

/// Runs a future on a runtime made for this one command; async stays out of the library's
/// synchronous paths (staging, snapshot).
pub(crate) fn block_on<F: std::future::Future>(future: F) -> Result<F::Output, std::io::Error> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    Ok(runtime.block_on(future))
}

/// [`block_on`] for the modes that run containers: on SIGINT/SIGTERM the work is dropped, this
/// process's containers removed, what was interrupted printed, and `Err(130 or 143)` returned.
pub(crate) fn block_on_interruptible<F: std::future::Future>(
    future: F,
    what: &str,
) -> Result<Result<F::Output, std::io::Error>, ExitCode> {
    match block_on(crate::interrupt::run_interruptible(future)) {
        Ok(Ok(Ok(output))) => Ok(Ok(output)),
        Ok(Ok(Err(stopped))) => Err(fail(stopped.signal.exit_code(), &stopped.message(what))),
        Ok(Err(error)) | Err(error) => Ok(Err(error)),
    }
}

/// Connects to the engine and removes stale containers of dead workers; a failed sweep is
/// only logged (the containers of a live worker are never touched either way).
/// Containers are created under the OCI runtime `oci_runtime` (`--oci-runtime`).
pub(crate) async fn connect_swept(oci_runtime: &str) -> Result<Executor, SandboxError> {
    let executor = crate::engine::connect_under(oci_runtime).await?;
    if let Err(error) = executor.cleanup_stale().await {
        tracing::warn!(%error, "could not clean up stale sandbox containers");
    }
    Ok(executor)
}
