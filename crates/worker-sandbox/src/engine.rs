//! The container engine as the run lifecycle ([`crate::lifecycle`]) uses it: one trait,
//! [`ContainerEngine`], of the calls the lifecycle makes, over this crate's own small types.
//! `worker-docker` implements it over the Docker Engine API; the lifecycle tests implement it
//! with a scripted engine, so every path of the lifecycle (deadline, output cap, OOM, external
//! kill, an engine restart, removal confirmation) runs without a daemon.
//!
//! The types carry only what the lifecycle reads or compares; turning an engine's own answers
//! into them (and the requested profile into its create request) is the implementation's job.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use verifier_sdk::oci_runtime::OciRuntimeFacts;

use crate::SandboxError;
use crate::evidence::EngineFacts;
use crate::profile::Isolation;

/// An engine's own error, kept whole as the source of a [`SandboxError`].
pub type EngineError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What the engine reports it can hold (the Docker Engine's `/info`); either value may be
/// missing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostResources {
    /// Cores the engine sees (`NCPU`).
    pub cpus: Option<i64>,
    /// Memory the engine sees, in bytes (`MemTotal`).
    pub memory_bytes: Option<i64>,
}

/// The OCI runtime an engine creates its containers under (issue #28), as the engine
/// registers it; the lifecycle's refusal of one it does not offer is
/// [`OciRuntime::unavailable`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OciRuntime {
    /// The name asked for (the Docker Engine's `HostConfig.Runtime`).
    pub name: String,
    /// The engine's registration of it; `None` when the engine does not offer it.
    pub facts: Option<OciRuntimeFacts>,
    /// The names the engine does offer, sorted, for the refusal's message.
    pub offered: Vec<String>,
}

/// Where an engine puts a container's cgroup on this host, so that the lifecycle can read the
/// container's main process and resources from the cgroup files instead of asking the engine
/// (`lifecycle::resources`). Paths are relative to a cgroup mount, `{id}` standing for the
/// container's id. An empty layout says the engine's containers cannot be found there: the
/// engine is asked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CgroupLayout {
    /// Where one container's process group may live, tried in order (by driver and cgroup
    /// version).
    pub procs_dirs: Vec<String>,
    /// Where the engine makes every container's cgroup, when a container's absence there
    /// proves it stopped and was cleaned up; empty when an absence proves nothing (a driver
    /// that places cgroups elsewhere).
    pub parents: Vec<String>,
}

/// A stream of engine answers, owned (it outlives the call that opened it).
pub type Answers<T> = Pin<Box<dyn futures_util::Stream<Item = Result<T, CallError>> + Send>>;

/// Why one engine call failed, as far as the lifecycle tells failures apart.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The engine answered that it does not know the object (an image, a container, a path).
    #[error("{message}")]
    NotFound {
        /// The engine's own words.
        message: String,
    },
    /// The engine answered and refused the request for another reason.
    #[error("the engine answered {status}: {message}")]
    Refused {
        /// The engine's status code (HTTP for the Docker Engine API).
        status: u16,
        /// The engine's own words, which the author can act on.
        message: String,
    },
    /// No answer: the connection failed, was dropped or timed out.
    #[error(transparent)]
    Unreachable(EngineError),
}

impl CallError {
    /// Whether the engine said the object does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }

    /// The engine's own message when it answered, else the error's text.
    pub fn message(&self) -> String {
        match self {
            Self::NotFound { message } | Self::Refused { message, .. } => message.clone(),
            Self::Unreachable(error) => error.to_string(),
        }
    }
}

/// The container to create: the requested profile, its environment and labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateRequest {
    /// The container's name.
    pub name: String,
    /// The digest-pinned image reference.
    pub image: String,
    /// The requested profile (the read-back in [`Inspected::profile`] is compared to it).
    pub profile: Isolation,
    /// The command's exact environment, `KEY=value`.
    pub env: Vec<String>,
    /// The container's labels.
    pub labels: HashMap<String, String>,
}

/// An inspected image: what the image check reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageInspected {
    /// The image id (`sha256:…`).
    pub id: Option<String>,
    /// The `name@sha256:…` references the image is known by.
    pub repo_digests: Option<Vec<String>>,
    /// `linux`, …
    pub os: Option<String>,
    /// `amd64`, `arm`, …
    pub architecture: Option<String>,
    /// `v7`, …
    pub variant: Option<String>,
    /// The image's configured environment, `KEY=value`.
    pub env: Option<Vec<String>>,
}

/// One image the engine holds, as listed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageSummary {
    /// The image id (`sha256:…`).
    pub id: String,
    /// The `name@sha256:…` references it is known by (how a digest pull records it).
    pub repo_digests: Vec<String>,
    /// The `name:tag` references it is known by.
    pub repo_tags: Vec<String>,
    /// Its size on disk, counting layers it shares with other images (the engine's `Size`).
    pub size_bytes: u64,
}

/// The free space of the file system holding the engine's images (its data root).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FreeSpace {
    /// Bytes available to the engine there.
    Known(u64),
    /// Cannot be told from here (a remote daemon, a data root not visible on this host): why.
    Unknown(String),
}

/// A container's state as the engine reports it; absent values are unknown.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerState {
    /// Whether it runs now.
    pub running: Option<bool>,
    /// Its main process on the host.
    pub pid: Option<i64>,
    /// When it started (the engine's timestamp; a never-started container's is a zero date).
    pub started_at: Option<String>,
    /// When it stopped.
    pub finished_at: Option<String>,
    /// Its exit status.
    pub exit_code: Option<i64>,
    /// Whether the kernel's OOM killer ended it.
    pub oom_killed: Option<bool>,
    /// The engine's error starting or running it.
    pub error: Option<String>,
}

/// An inspected container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inspected {
    /// When the engine created it (its timestamp).
    pub created: Option<String>,
    /// The profile fields read back (absent values read as empty/zero so they differ).
    pub profile: Isolation,
    /// Its state.
    pub state: ContainerState,
}

/// One labelled container, as listed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerSummary {
    /// Its id.
    pub id: Option<String>,
    /// Its labels.
    pub labels: HashMap<String, String>,
    /// Whether it runs, is paused or is restarting (anything but stopped).
    pub running: bool,
    /// When it was created, in Unix seconds.
    pub created: Option<i64>,
    /// The host paths it mounts.
    pub mount_sources: Vec<String>,
}

/// One action on a container, from the engine's event stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Event {
    /// `start`, `die`, `kill`, `exec_create: …`, …
    pub action: String,
    /// The container acted on.
    pub actor: Option<String>,
    /// The signal of a `kill` (`9`, `KILL`, `15`, …).
    pub signal: Option<String>,
}

/// One piece of the container's attached output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Written on stdout.
    Stdout(bytes::Bytes),
    /// Written on stderr.
    Stderr(bytes::Bytes),
    /// Anything else the engine sends (ignored).
    Other,
}

/// One resource sample of a running container.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatsSample {
    /// Highest memory usage so far (or the current usage where no maximum is kept).
    pub peak_memory_bytes: Option<u64>,
    /// Total CPU time so far, in nanoseconds.
    pub cpu_time_ns: Option<u64>,
}

/// One archive stat of a path in a container.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PathStat {
    /// The mode, in Go's `os.FileMode` bits (type bits high, permission bits low).
    pub file_mode: u32,
    /// A symlink's target as stored.
    pub link_target: String,
}

/// The engine calls the run lifecycle makes.
pub trait ContainerEngine: Clone + Send + Sync + std::fmt::Debug + 'static {
    /// The evidence's `executor`: which engine ran the container. Only the Docker Engine's
    /// ([`verifier_sdk::evidence::DOCKER_EXECUTOR`]) may back a signature, so any other engine
    /// (a test double above all) must name itself otherwise.
    fn executor(&self) -> &'static str;
    /// Where this engine, described by `facts` (its own [`Self::engine_facts`]), puts a
    /// container's cgroup on this host.
    fn cgroup_layout(&self, facts: &EngineFacts) -> CgroupLayout;
    /// The engine's and kernel's facts every evidence record carries (asked once, when the
    /// lifecycle is built: [`crate::lifecycle::Lifecycle::connect`]).
    fn engine_facts(&self) -> impl Future<Output = Result<EngineFacts, CallError>> + Send;
    /// The OCI runtime `name` as the engine registers it (`facts` is `None` when the engine
    /// does not offer it: runs then end before create, never under another runtime).
    fn oci_runtime(&self, name: &str)
    -> impl Future<Output = Result<OciRuntime, CallError>> + Send;
    /// What the engine can hold.
    fn host_resources(&self) -> impl Future<Output = Result<HostResources, CallError>> + Send;
    /// Every container (running or not); with `label` (`key=value`) only those carrying it.
    fn list_containers(
        &self,
        label: Option<&str>,
    ) -> impl Future<Output = Result<Vec<ContainerSummary>, CallError>> + Send;
    /// The image known by `reference`.
    fn inspect_image(
        &self,
        reference: &str,
    ) -> impl Future<Output = Result<ImageInspected, CallError>> + Send;
    /// Pulls `reference` (digest-pinned), to its end or its first error.
    fn pull_image(&self, reference: &str) -> impl Future<Output = Result<(), CallError>> + Send;
    /// Every image the engine holds.
    fn list_images(&self) -> impl Future<Output = Result<Vec<ImageSummary>, CallError>> + Send;
    /// Removes image `id` (never forced: the engine refuses one a container still uses).
    fn remove_image(&self, id: &str) -> impl Future<Output = Result<(), CallError>> + Send;
    /// The free space of the engine's data root (`/info` `DockerRootDir`).
    fn image_free_space(&self) -> impl Future<Output = Result<FreeSpace, CallError>> + Send;
    /// Creates the container; returns its id.
    fn create_container(
        &self,
        request: &CreateRequest,
    ) -> impl Future<Output = Result<String, CallError>> + Send;
    /// Inspects container `id`.
    fn inspect_container(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Inspected, CallError>> + Send;
    /// Attaches to the stdout and stderr of the (not yet started) container.
    fn attach(&self, id: &str) -> impl Future<Output = Result<Answers<Output>, CallError>> + Send;
    /// Starts it.
    fn start(&self, id: &str) -> impl Future<Output = Result<(), CallError>> + Send;
    /// Resolves when the engine reports it not running (also when it already stopped);
    /// `Err` when the wait itself failed, which says nothing about the container.
    fn wait_stopped(&self, id: &str) -> impl Future<Output = Result<(), CallError>> + Send;
    /// Its events from `since` (Unix seconds: the engine replays its buffer) on.
    fn events(&self, id: &str, since: u64) -> Answers<Event>;
    /// Its resource samples while it runs.
    fn stats(&self, id: &str) -> Answers<StatsSample>;
    /// Sends it SIGKILL.
    fn kill(&self, id: &str) -> impl Future<Output = Result<(), CallError>> + Send;
    /// Force-removes it with its anonymous volumes. `Ok` only once the engine no longer knows
    /// the container (the Docker Engine answers 204 after deleting it from its store), and
    /// [`CallError::NotFound`] when it did not know it: the lifecycle takes either answer as
    /// the removal's confirmation, with no inspect after it.
    fn remove(&self, id: &str) -> impl Future<Output = Result<(), CallError>> + Send;
    /// Stats `path` inside it (without following a final symlink).
    fn archive_stat(
        &self,
        id: &str,
        path: &str,
    ) -> impl Future<Output = Result<PathStat, CallError>> + Send;
    /// `path` inside it as a tar stream.
    fn archive_read(&self, id: &str, path: &str) -> Answers<bytes::Bytes>;
    /// The run's error when the engine does not answer at all, explained in the operator's
    /// terms (which endpoint was tried, how to point the worker at a daemon).
    fn unreachable(&self, source: EngineError) -> SandboxError {
        SandboxError::RuntimeUnavailable(source)
    }
}
