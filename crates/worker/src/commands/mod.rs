//! One handler per mode of the `worker` binary. Each takes the checked values of its
//! [`crate::cli::Command`], does the work through the library, prints the result (JSON on
//! stdout; errors as one `worker: error: ...` line on stderr) and returns the [`ExitCode`];
//! `main` only dispatches and turns that code into the process's status.

pub mod explain;
pub mod feed;
pub mod plan;
pub mod rehearse;
pub mod request;
pub mod run_regression;
pub mod stage;
pub mod validate_candidate;

use std::io::Write;

use crate::exit::ExitCode;
use crate::sandbox::{DockerExecutor, SandboxError};
use crate::staging_root::StagingRootError;

/// Writes `value` as one line of JSON on stdout; an unwritable result is an internal failure.
pub(crate) fn print_json(value: &impl serde::Serialize) -> ExitCode {
    let written = serde_json::to_string(value)
        .map_err(std::io::Error::other)
        .and_then(|json| writeln!(std::io::stdout().lock(), "{json}"));
    match written {
        Ok(()) => ExitCode::Success,
        Err(error) => fail(
            ExitCode::Internal,
            &format_args!("writing the result: {error}"),
        ),
    }
}

/// Writes `text` on stdout as it is.
pub(crate) fn print_text(text: &impl std::fmt::Display) -> ExitCode {
    match write!(std::io::stdout().lock(), "{text}") {
        Ok(()) => ExitCode::Success,
        Err(error) => fail(ExitCode::Internal, &error),
    }
}

/// Reports `error` on stderr and returns `code`.
pub(crate) fn fail(code: ExitCode, error: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("worker: error: {error}");
    code
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

/// Connects to the engine and removes stale containers of dead workers; a failed sweep is
/// only logged (the containers of a live worker are never touched either way).
pub(crate) async fn connect_swept() -> Result<DockerExecutor, SandboxError> {
    let executor = DockerExecutor::connect().await?;
    if let Err(error) = executor.cleanup_stale().await {
        tracing::warn!(%error, "could not clean up stale sandbox containers");
    }
    Ok(executor)
}
