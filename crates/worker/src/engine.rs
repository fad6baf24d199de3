//! The one place the binary picks the container engine. Every mode that runs or removes
//! containers gets its [`Executor`] here; the libraries only ever hold one.

use worker_sandbox::{Executor, SandboxError};

/// Connects to the engine the worker runs on: the Docker Engine, through its API
/// (`DOCKER_HOST` or the default socket).
pub async fn connect() -> Result<Executor, SandboxError> {
    worker_docker::connect().await
}

/// [`connect`], with every container created under the OCI runtime `oci_runtime` (the
/// operator's `--oci-runtime`: `runc` or `runsc`); an engine without it gives no verdict.
pub async fn connect_under(oci_runtime: &str) -> Result<Executor, SandboxError> {
    worker_docker::connect_under(oci_runtime).await
}
