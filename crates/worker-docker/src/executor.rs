//! The executor the binary builds: connects to the Docker Engine, negotiates its API version,
//! and hands the run lifecycle ([`worker_sandbox::lifecycle`]) the engine behind
//! [`DockerEngine`], through which the lifecycle asks for the engine's facts and the OCI
//! runtime's registration.

use std::time::Duration;

use bollard::Docker;
use verifier_sdk::oci_runtime::RUNC;
use worker_sandbox::lifecycle::Lifecycle;
use worker_sandbox::{RunHooks, RunReport, SandboxError, SandboxSpec, owner};

use crate::client::DockerEngine;

/// Runs sandboxed commands on a Docker Engine: the run lifecycle over [`DockerEngine`].
#[derive(Clone, Debug)]
pub struct DockerExecutor(Lifecycle<DockerEngine>);

impl DockerExecutor {
    /// Connects through `DOCKER_HOST` (or the default socket) and negotiates the API version;
    /// containers run under runc, asked for by name.
    pub async fn connect() -> Result<Self, SandboxError> {
        Self::connect_under(RUNC).await
    }

    /// [`Self::connect`], with containers under the OCI runtime `oci_runtime`.
    pub async fn connect_under(oci_runtime: &str) -> Result<Self, SandboxError> {
        let docker = Docker::connect_with_defaults().map_err(crate::endpoint::unavailable)?;
        // The version negotiation, the engine's description (its facts and the runtime's
        // registration, asked through the engine trait) and the answers `worker doctor` examines
        // are independent: asked at once they cost one round trip. The lifecycle then drives the
        // negotiated client.
        let engine = DockerEngine(docker.clone());
        let (negotiated, (version, info), mut lifecycle) = tokio::try_join!(
            async {
                docker
                    .clone()
                    .negotiate_version()
                    .await
                    .map_err(crate::endpoint::unavailable)
            },
            async {
                tokio::try_join!(docker.version(), docker.info())
                    .map_err(crate::endpoint::unavailable)
            },
            Lifecycle::connect_owned_by(engine, oci_runtime, owner::current())
        )?;
        lifecycle.engine_mut().0 = negotiated;
        // `worker doctor`'s facts, once per process, into every run's evidence.
        let host = crate::host_facts::gather(
            crate::doctor::answers(&version, &info),
            lifecycle.oci_runtime(),
        );
        lifecycle.facts_mut().host = Some(host);
        Ok(Self(lifecycle))
    }

    /// Sets the per-request timeout of the engine client (default two minutes). Runs longer than
    /// it are unaffected: waits and output streams are long-lived by design.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        let client = self.0.engine_mut();
        client.0 = client.0.clone().with_timeout(timeout);
        self
    }

    /// The underlying client, for callers that need read-only engine queries (tests).
    pub fn client(&self) -> &Docker {
        &self.0.engine().0
    }

    /// The run lifecycle this executor drives.
    pub fn lifecycle(&self) -> &Lifecycle<DockerEngine> {
        &self.0
    }

    /// Runs `spec` and decides its outcome; see [`Lifecycle::run`].
    pub async fn run(
        &self,
        spec: &SandboxSpec,
        hooks: &dyn RunHooks,
    ) -> Result<RunReport, SandboxError> {
        self.0.run(spec, hooks).await
    }
}

impl std::ops::Deref for DockerExecutor {
    type Target = Lifecycle<DockerEngine>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl From<DockerExecutor> for worker_sandbox::Executor {
    fn from(executor: DockerExecutor) -> Self {
        worker_sandbox::Executor::new(executor.0)
    }
}
