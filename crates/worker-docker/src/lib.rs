//! The Docker Engine behind [`worker_sandbox::engine::ContainerEngine`]: the only crate of the
//! workspace that names the engine client (`bollard`; never the `docker` CLI). [`client`]
//! implements the lifecycle's engine calls and converts bollard's types to the sandbox's and
//! back, `profile` builds the create request and reads the profile back, `runtime` reads the
//! OCI runtime's registration, `cgroups` says where dockerd puts a container's cgroup, `endpoint` explains an engine that does not answer, `doctor`
//! reads what `worker doctor` examines, and [`DockerExecutor`] connects and hands the engine to
//! the run lifecycle, which lives in `worker-sandbox` ([`worker_sandbox::lifecycle`]).
//!
//! It decides nothing and sequences nothing the lifecycle does, and knows nothing of jobs, the
//! service or exit codes; the binary is the one place that picks it.

use worker_sandbox::SandboxError;

mod cgroups;
pub mod client;
pub mod doctor;
pub mod endpoint;
mod executor;
mod host_facts;
pub mod profile;
pub mod runtime;

pub use client::DockerEngine;
pub use executor::DockerExecutor;
/// The `argv[0]` probe, at its old path (it lives with the lifecycle now).
pub use worker_sandbox::lifecycle::executable;

/// Connects to the Docker Engine (`DOCKER_HOST` or the default socket) and returns the
/// executor every caller holds.
pub async fn connect() -> Result<worker_sandbox::Executor, SandboxError> {
    Ok(DockerExecutor::connect().await?.into())
}

/// [`connect`], creating every container under the OCI runtime `oci_runtime` (`runc` or
/// `runsc`, the operator's `--oci-runtime`); when the engine does not offer it every run ends
/// without a verdict (`runtime_unavailable`) before any container is created.
pub async fn connect_under(oci_runtime: &str) -> Result<worker_sandbox::Executor, SandboxError> {
    Ok(DockerExecutor::connect_under(oci_runtime).await?.into())
}
