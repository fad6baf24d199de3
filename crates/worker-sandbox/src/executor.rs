//! What every caller (the run step, the service, rehearsal, `gc`, interrupt handling) holds:
//! an [`Executor`], the run lifecycle over whichever engine the binary picked, behind the
//! object-safe [`RunLifecycle`] (implemented by [`crate::lifecycle::Lifecycle`] over any
//! [`crate::engine::ContainerEngine`]).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use crate::evidence::EngineFacts;
use crate::{RunHooks, RunReport, SandboxError, SandboxSpec};

use crate::engine::HostResources;

/// The run lifecycle over one engine, as the [`Executor`] drives it: the engine's type erased,
/// so callers never name it.
#[async_trait::async_trait]
pub trait RunLifecycle: Send + Sync + std::fmt::Debug {
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
    lifecycle: Arc<dyn RunLifecycle>,
}

impl Executor {
    /// An executor driving `lifecycle`.
    pub fn new(lifecycle: impl RunLifecycle + 'static) -> Self {
        Self {
            lifecycle: Arc::new(lifecycle),
        }
    }

    /// Engine and kernel facts recorded in every evidence record.
    pub fn facts(&self) -> &EngineFacts {
        self.lifecycle.facts()
    }

    /// See [`RunLifecycle::run`].
    pub async fn run(
        &self,
        spec: &SandboxSpec,
        hooks: &dyn RunHooks,
    ) -> Result<RunReport, SandboxError> {
        self.lifecycle.run(spec, hooks).await
    }

    /// See [`RunLifecycle::cleanup_stale`].
    pub async fn cleanup_stale(&self) -> Result<Vec<String>, SandboxError> {
        self.lifecycle.cleanup_stale().await
    }

    /// See [`RunLifecycle::remove_own_containers`].
    pub async fn remove_own_containers(&self) -> Result<Vec<String>, SandboxError> {
        self.lifecycle.remove_own_containers().await
    }

    /// See [`RunLifecycle::host_resources`].
    pub async fn host_resources(&self) -> Result<HostResources, SandboxError> {
        self.lifecycle.host_resources().await
    }

    /// See [`RunLifecycle::images`].
    pub fn images(&self) -> &dyn crate::images::ImageStore {
        self.lifecycle.images()
    }

    /// See [`RunLifecycle::mounted_paths`].
    pub async fn mounted_paths(&self) -> Result<BTreeSet<PathBuf>, SandboxError> {
        self.lifecycle.mounted_paths().await
    }
}
