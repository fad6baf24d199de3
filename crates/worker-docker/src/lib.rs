//! The Docker Engine behind [`worker_sandbox::Engine`]: the only crate of the workspace that
//! names the engine client (`bollard`; never the `docker` CLI). [`DockerExecutor`] connects,
//! sweeps stale containers and drives the run's lifecycle; the other modules turn the engine's
//! answers into the sandbox's types: `profile` builds the create request and reads it back,
//! `image` accepts or refuses the inspected image, `events` judges the event stream,
//! `executable` resolves `argv[0]` through the archive API, `output` reads the log stream,
//! `teardown` kills, removes and reads the final state, `engine` holds the remaining calls and
//! `endpoint` explains an engine that does not answer.
//!
//! It decides nothing the sandbox's pure steps decide, and knows nothing of jobs, the service
//! or exit codes; the binary is the one place that picks it.

mod alternatives;
pub mod api;
mod docker;
pub mod doctor;
pub mod endpoint;
mod engine;
mod events;
pub mod executable;
mod image;
mod output;
pub mod profile;
pub mod runtime;
mod teardown;

#[cfg(test)]
mod fake;
#[cfg(test)]
mod lifecycle_tests;

// The sandbox's names, visible to this crate's modules as they were inside `sandbox/`.
use worker_sandbox::{
    InputPhase, LABEL_OWNER, LABEL_RUN_ID, LABEL_VERIFIER, LABEL_WORKER_VERSION, PULL_FAILED,
    RunHooks, RunReport, SandboxError, SandboxSpec, decision, evidence, exec_cache, hits, owner,
    spec, streams,
};

pub use docker::DockerExecutor;

/// Connects to the Docker Engine (`DOCKER_HOST` or the default socket) and returns the
/// executor every caller holds.
pub async fn connect() -> Result<worker_sandbox::Executor, SandboxError> {
    Ok(worker_sandbox::Executor::new(
        DockerExecutor::connect().await?,
    ))
}

/// [`connect`], creating every container under the OCI runtime `oci_runtime` (`runc` or
/// `runsc`, the operator's `--oci-runtime`); when the engine does not offer it every run ends
/// without a verdict (`runtime_unavailable`) before any container is created.
pub async fn connect_under(oci_runtime: &str) -> Result<worker_sandbox::Executor, SandboxError> {
    Ok(worker_sandbox::Executor::new(
        DockerExecutor::connect_under(oci_runtime).await?,
    ))
}
