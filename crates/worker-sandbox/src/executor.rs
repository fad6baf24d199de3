//! The seam to a container engine. Every caller (the run step, the service, rehearsal, `gc`,
//! interrupt handling) holds an [`Executor`]; which engine stands behind it is decided once,
//! by the binary, when it builds one from an [`Engine`] implementation.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use crate::evidence::EngineFacts;
use crate::{RunHooks, RunReport, SandboxError, SandboxSpec};

/// An engine's own error, kept whole as the source of a [`SandboxError`].
pub type EngineError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What the engine reports it can hold (its `/info`); either value may be missing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostResources {
    /// Cores the engine sees (`NCPU`).
    pub cpus: Option<i64>,
    /// Memory the engine sees, in bytes (`MemTotal`).
    pub memory_bytes: Option<i64>,
}

/// A container engine that runs sandboxed commands.
#[async_trait::async_trait]
pub trait Engine: Send + Sync + std::fmt::Debug {
    /// Engine and kernel facts recorded in every evidence record.
    fn facts(&self) -> &EngineFacts;

    /// Runs `spec` and decides its outcome. Every contract failure is a no-verdict report;
    /// `Err` only when the engine cannot be reached at all.
    async fn run(
        &self,
        spec: &SandboxSpec,
        hooks: &dyn RunHooks,
    ) -> Result<RunReport, SandboxError>;

    /// Removes labelled containers whose owning worker process is provably gone and returns
    /// their ids; a live owner's containers are left alone.
    async fn cleanup_stale(&self) -> Result<Vec<String>, SandboxError>;

    /// Removes every labelled container this process owns and returns their ids.
    async fn remove_own_containers(&self) -> Result<Vec<String>, SandboxError>;

    /// What the engine can hold.
    async fn host_resources(&self) -> Result<HostResources, SandboxError>;

    /// Host paths that any container (running or stopped, ours or not) bind-mounts.
    async fn mounted_paths(&self) -> Result<BTreeSet<PathBuf>, SandboxError>;

    /// The engine's image calls ([`crate::images`]: pulls ahead of jobs, eviction).
    fn images(&self) -> &dyn crate::images::ImageStore;
}

/// Runs sandboxed commands on the engine it was built from. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Executor {
    engine: Arc<dyn Engine>,
}

impl Executor {
    /// An executor over `engine`.
    pub fn new(engine: impl Engine + 'static) -> Self {
        Self {
            engine: Arc::new(engine),
        }
    }

    /// Engine and kernel facts recorded in every evidence record.
    pub fn engine(&self) -> &EngineFacts {
        self.engine.facts()
    }

    /// See [`Engine::run`].
    pub async fn run(
        &self,
        spec: &SandboxSpec,
        hooks: &dyn RunHooks,
    ) -> Result<RunReport, SandboxError> {
        self.engine.run(spec, hooks).await
    }

    /// See [`Engine::cleanup_stale`].
    pub async fn cleanup_stale(&self) -> Result<Vec<String>, SandboxError> {
        self.engine.cleanup_stale().await
    }

    /// See [`Engine::remove_own_containers`].
    pub async fn remove_own_containers(&self) -> Result<Vec<String>, SandboxError> {
        self.engine.remove_own_containers().await
    }

    /// See [`Engine::host_resources`].
    pub async fn host_resources(&self) -> Result<HostResources, SandboxError> {
        self.engine.host_resources().await
    }

    /// See [`Engine::images`].
    pub fn images(&self) -> &dyn crate::images::ImageStore {
        self.engine.images()
    }

    /// See [`Engine::mounted_paths`].
    pub async fn mounted_paths(&self) -> Result<BTreeSet<PathBuf>, SandboxError> {
        self.engine.mounted_paths().await
    }
}
