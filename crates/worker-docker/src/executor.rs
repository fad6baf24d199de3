//! The executor the binary builds: connects to the Docker Engine, reads its facts and the OCI
//! runtime's registration, and hands the run lifecycle ([`worker_sandbox::lifecycle`]) the
//! engine behind [`DockerEngine`].

use std::time::Duration;

use bollard::Docker;
use verifier_sdk::oci_runtime::RUNC;
use worker_sandbox::evidence::EngineFacts;
use worker_sandbox::lifecycle::Lifecycle;
use worker_sandbox::{RunHooks, RunReport, SandboxError, SandboxSpec, owner};

use crate::client::{DockerEngine, enum_text};

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
        // Three independent questions: asked at once they cost one round trip, not three
        // (about 7 ms each on an idle engine, on every run).
        let (docker, version, info) = tokio::try_join!(
            docker.clone().negotiate_version(),
            docker.version(),
            docker.info()
        )
        .map_err(crate::endpoint::unavailable)?;
        let doctor = crate::doctor::answers(&version, &info);
        let mut engine = EngineFacts {
            version: version.version.unwrap_or_default(),
            api_version: version.api_version.unwrap_or_default(),
            kernel_version: info
                .kernel_version
                .or(version.kernel_version)
                .unwrap_or_default(),
            cgroup_version: enum_text(info.cgroup_version),
            cgroup_driver: enum_text(info.cgroup_driver),
            platform: format!(
                "{}/{}",
                version.os.unwrap_or_default(),
                version.arch.unwrap_or_default()
            ),
            host: None,
        };
        let runtime = crate::runtime::resolve(
            oci_runtime,
            info.runtimes.as_ref(),
            info.runc_commit.as_ref(),
        )
        .await;
        // `worker doctor`'s facts, once per process, into every run's evidence.
        engine.host = Some(crate::host_facts::gather(doctor, &runtime));
        Ok(Self(Lifecycle::owned_by(
            DockerEngine(docker),
            engine,
            runtime,
            owner::current(),
        )))
    }

    /// Sets the per-request timeout of the engine client (default two minutes). Runs longer than
    /// it are unaffected: waits and output streams are long-lived by design.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        let client = self.0.client_mut();
        client.0 = client.0.clone().with_timeout(timeout);
        self
    }

    /// The underlying client, for callers that need read-only engine queries (tests).
    pub fn client(&self) -> &Docker {
        &self.0.client().0
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
