//! The evidence record (DESIGN §5): what one run observed, serialized as JSON.
//!
//! The caller computes the record's content address over its canonical bytes and fills in
//! `response_hash`; this module only holds the data. No floats: times are unix milliseconds
//! (our clock) or the engine's RFC 3339 strings (its clock), kept as reported.

use serde::{Deserialize, Serialize};

use super::decision::{Decision, StoppedBy};
use super::profile::Isolation;
use super::streams::StreamEvidence;

/// Schema of [`EvidenceRecord`]; bump on any change of shape or meaning.
pub const EVIDENCE_SCHEMA_VERSION: &str = "agent-bounties/regression-evidence-v1";
/// Names the executor that produced a record; a test double must use a different name.
pub const DOCKER_EXECUTOR: &str = "docker-engine";

/// One run's evidence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceRecord {
    /// Always [`EVIDENCE_SCHEMA_VERSION`].
    pub schema_version: String,
    /// Always [`DOCKER_EXECUTOR`] for the real executor.
    pub executor: String,
    /// The run id from the spec (also a container label).
    pub run_id: String,
    /// Set by the caller once the response hash is known.
    pub response_hash: Option<String>,
    /// The worker's version (also a container label).
    pub worker_version: String,
    /// Facts about the engine and host.
    pub engine: EngineFacts,
    /// The image actually run; `None` when it could not be resolved.
    pub image: Option<ImageFacts>,
    /// The argv and limits asked for.
    pub request: RequestFacts,
    /// Requested and observed isolation; `None` before a container existed.
    pub isolation: Option<IsolationEvidence>,
    /// Container identity; `None` when create failed.
    pub container: Option<ContainerFacts>,
    /// When each phase happened.
    pub timestamps: Timestamps,
    /// How the process ended.
    pub exit: ExitFacts,
    /// Resource use, where the engine reported it.
    pub resources: ResourceFacts,
    /// Captured stdout.
    pub stdout: StreamEvidence,
    /// Captured stderr.
    pub stderr: StreamEvidence,
    /// The decision under the verdict contract.
    pub outcome: Decision,
}

/// Engine and kernel facts from `/version` and `/info`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineFacts {
    /// Engine version, e.g. `20.10.24+dfsg1`.
    pub version: String,
    /// Engine API version.
    pub api_version: String,
    /// Kernel version.
    pub kernel_version: String,
    /// `1` or `2`.
    pub cgroup_version: String,
    /// `cgroupfs` or `systemd`.
    pub cgroup_driver: String,
    /// Engine `os/arch`.
    pub platform: String,
}

/// The resolved image.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageFacts {
    /// The pinned reference asked for.
    pub reference: String,
    /// Local image id (`sha256:…`).
    pub id: String,
    /// The repo digest matching the reference.
    pub repo_digest: String,
    /// The image's `os/arch` (plus `/variant` when set).
    pub platform: String,
}

/// What was asked for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestFacts {
    /// The command.
    pub argv: Vec<String>,
    /// Requested platform.
    pub platform: String,
    /// Timeout in milliseconds.
    pub timeout_ms: u64,
    /// CPU in thousandths of a core.
    pub cpu_millis: u64,
    /// Memory (and memory+swap) in bytes.
    pub memory_bytes: u64,
    /// Process limit.
    pub pids_limit: u64,
    /// Combined output cap.
    pub max_output_bytes: u64,
    /// Size of `/tmp` (and of `/tmp/home`).
    pub tmpfs_bytes: u64,
    /// `AGENT_BOUNTIES_TEST_SEED`.
    pub test_seed: u64,
}

/// Requested versus observed isolation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IsolationEvidence {
    /// The profile asked for.
    pub requested: Isolation,
    /// The profile the engine reported after create.
    pub observed: Isolation,
    /// Names of differing fields; non-empty means the run was refused.
    pub mismatches: Vec<String>,
}

/// The container's identity.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerFacts {
    /// Engine container id.
    pub id: String,
    /// Container name.
    pub name: String,
}

/// Phase times: `*_ms` are our clock (unix ms), `engine_*` are the engine's reports.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timestamps {
    /// Run began (before the image check).
    pub begin_ms: u64,
    /// Container created.
    pub create_ms: Option<u64>,
    /// Start call returned; the timeout clock starts here.
    pub start_ms: Option<u64>,
    /// Container observed stopped.
    pub finish_ms: Option<u64>,
    /// Removal confirmed.
    pub remove_ms: Option<u64>,
    /// `Created` as the engine reports it.
    pub engine_created: Option<String>,
    /// `State.StartedAt`.
    pub engine_started: Option<String>,
    /// `State.FinishedAt`.
    pub engine_finished: Option<String>,
}

/// How the process ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitFacts {
    /// The engine's state shows the container started.
    pub started: bool,
    /// `State.ExitCode`.
    pub exit_code: Option<i64>,
    /// `State.OOMKilled`.
    pub oom_killed: bool,
    /// Whether the sandbox killed it.
    pub stopped_by: StoppedBy,
    /// `State.Error` when non-empty.
    pub engine_error: Option<String>,
    /// Removal of the container was confirmed by a 404 from the engine.
    pub removed: bool,
}

impl Default for ExitFacts {
    fn default() -> Self {
        Self {
            started: false,
            exit_code: None,
            oom_killed: false,
            stopped_by: StoppedBy::None,
            engine_error: None,
            removed: false,
        }
    }
}

/// Resource use sampled from the engine's stats stream while the container ran.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceFacts {
    /// Highest memory usage reported (cgroup v1 `max_usage`, else the highest `usage` seen).
    pub peak_memory_bytes: Option<u64>,
    /// Total CPU time in nanoseconds at the last sample.
    pub cpu_time_ns: Option<u64>,
}
