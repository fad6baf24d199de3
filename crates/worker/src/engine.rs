//! The one place the binary picks the container engine. Every mode that runs or removes
//! containers gets its [`Executor`] here; the libraries only ever hold one.

use worker_sandbox::{Executor, SandboxError};

/// Connects to the engine the worker runs on: the Docker Engine, through its API
/// (`DOCKER_HOST` or the default socket).
pub async fn connect() -> Result<Executor, SandboxError> {
    worker_docker::connect().await
}
