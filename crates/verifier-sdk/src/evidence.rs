//! The evidence record (DESIGN §5): what one run of the worker's Docker executor observed.
//!
//! Defined once here so the worker writes, the signer and keeper check, and `worker explain`
//! reads the same type. The caller computes the record's content address over its canonical
//! bytes and fills in `response_hash`. No floats: times are unix milliseconds (the worker's
//! clock) or the engine's RFC 3339 strings (its clock), kept as reported.

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::engine_host::{DoctorStatus, EngineHostFacts, HostRuntime};
use crate::manifest::RunnerManifest;
use crate::profile::ContainerProfile;
use crate::receipt::NoVerdictReason;
use crate::runtimes::OciRuntimeFacts;
use crate::types::Sha256Digest;

/// Schema of [`EvidenceRecord`]; bump on any change of shape or meaning.
pub const EVIDENCE_SCHEMA_VERSION: &str = "agent-bounties/regression-evidence-v1";
/// The only executor whose evidence may back a signature. Test doubles label themselves
/// differently, so a candidate they produced can never be signed.
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
    /// The sha256 of the worker executable that ran (`/proc/self/exe`), so that a rebuild of
    /// the commit in `worker_version` can be compared with the build that ran (issue #49).
    /// Absent in records of older workers and where the executable could not be read, so their
    /// bytes are unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_binary_sha256: Option<Sha256Digest>,
    /// Facts about the engine and host.
    pub engine: EngineFacts,
    /// The OCI runtime the container ran under, as the engine has it registered; `None` in
    /// records written before it was recorded (the profile's `runtime` names it too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci_runtime: Option<OciRuntimeFacts>,
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
    /// Per-test outcomes as the run's own output printed them (`test-outcomes`): labelled
    /// `solver-controlled-output`, shown to people, and never part of the verdict, the receipt
    /// or the response hash; the signer does not read it. Absent in records of older workers
    /// and of runs that never started a container, so their bytes are unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests: Option<test_outcomes::TestReport>,
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
    /// What `worker doctor` found about the engine's host when the worker connected; absent in
    /// records of older workers, so their bytes are unchanged. Informational: no check reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<EngineHostFacts>,
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

impl RequestFacts {
    /// The request a run of `manifest` records: the command, the platform and every limit,
    /// including the two the container profile does not hold (a longer timeout or a larger
    /// output cap could turn a run without verdict into a pass).
    pub fn for_manifest(manifest: &RunnerManifest) -> Self {
        Self {
            argv: manifest.command().to_vec(),
            platform: manifest.platform().to_owned(),
            timeout_ms: manifest.timeout_seconds().saturating_mul(1000),
            cpu_millis: manifest.cpu_millis(),
            memory_bytes: manifest.memory_bytes(),
            pids_limit: manifest.pids_limit(),
            max_output_bytes: manifest.max_output_bytes(),
            tmpfs_bytes: manifest.tmpfs_bytes(),
            test_seed: manifest.test_seed(),
        }
    }

    /// Names of the fields that differ from `other`, in declared order.
    pub fn differing_fields(&self, other: &Self) -> Vec<String> {
        let (Ok(Value::Object(a)), Ok(Value::Object(b))) =
            (serde_json::to_value(self), serde_json::to_value(other))
        else {
            // Both serialize to objects by construction; fail closed if that ever changes.
            return vec!["request".into()];
        };
        a.iter()
            .filter(|(key, value)| b.get(*key) != Some(*value))
            .map(|(key, _)| key.clone())
            .collect()
    }
}

/// Requested versus observed isolation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IsolationEvidence {
    /// The profile asked for.
    pub requested: ContainerProfile,
    /// The profile the engine reported after create.
    pub observed: ContainerProfile,
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

/// Resource use read while the container ran: from its cgroup files, or from the engine's stats
/// stream where the host cannot read them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceFacts {
    /// Highest memory usage reported (cgroup v1 `max_usage`, else the highest `usage` seen).
    pub peak_memory_bytes: Option<u64>,
    /// Total CPU time in nanoseconds at the last sample.
    pub cpu_time_ns: Option<u64>,
}

/// What the evidence record says about one stream.
///
/// `tail` is the last bytes decoded as lossy UTF-8: it is for reading, not verification (the
/// hash covers the exact bytes), and a multi-byte character cut at the tail's start shows as
/// U+FFFD.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamEvidence {
    /// Digest of every byte received.
    pub sha256: Sha256Digest,
    /// Number of bytes received.
    pub bytes: u64,
    /// Last at most 32 KiB, lossy UTF-8.
    pub tail: String,
    /// True when `tail` holds fewer bytes than were received.
    pub tail_truncated: bool,
}

/// Who ended the container, if anyone other than the program itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoppedBy {
    /// The program ended on its own (or never started).
    None,
    /// The sandbox killed the container at the deadline.
    Timeout,
    /// The sandbox killed the container because combined output passed the cap.
    OutputLimit,
    /// Something other than the sandbox killed, stopped or acted on the running container,
    /// as the engine's event stream showed (or the stream ended before the exit was seen).
    External,
}

/// The outcome of one run under the verdict contract (DESIGN §3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Decision {
    /// The command completed on its own: exit 0 is `passed`, anything else `failed`.
    Completed {
        /// The process's own exit code.
        exit_code: i64,
    },
    /// No verdict; the run must be retried and is never cached as completed.
    NoVerdict {
        /// Stable machine-readable reason.
        reason: NoVerdictReason,
        /// Human-readable detail.
        detail: String,
    },
}

impl Decision {
    /// Shorthand for a no-verdict decision.
    pub fn no_verdict(reason: NoVerdictReason, detail: impl Into<String>) -> Self {
        Self::NoVerdict {
            reason,
            detail: detail.into(),
        }
    }

    /// `Some(true)` for passed, `Some(false)` for failed, `None` for no verdict.
    pub fn passed(&self) -> Option<bool> {
        match self {
            Self::Completed { exit_code } => Some(*exit_code == 0),
            Self::NoVerdict { .. } => None,
        }
    }
}

/// The two fields read before the rest, so a record of another schema or executor is named as
/// such rather than as a shape error.
#[derive(Deserialize)]
struct Header {
    schema_version: String,
    executor: String,
}

/// Why a candidate's evidence record does not back its outcome.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvidenceError {
    /// The candidate carries no evidence record.
    #[error("candidate has no evidence record")]
    Missing,
    /// A field is absent or of the wrong type.
    #[error("evidence field `{0}` is missing or malformed")]
    Malformed(&'static str),
    /// The record's schema is not the one we understand.
    #[error("evidence schema {0:?} is not {EVIDENCE_SCHEMA_VERSION}")]
    Schema(String),
    /// The record was not produced by the real Docker executor.
    #[error("evidence comes from executor {0:?}, not the real docker executor")]
    NotRealExecutor(String),
    /// The record says the run did not complete.
    #[error("evidence does not record a completed run")]
    NotCompleted,
    /// A field of the record disagrees with the outcome.
    #[error("evidence field `{0}` does not match the outcome")]
    Mismatch(&'static str),
    /// The recorded isolation is not the container profile the manifest demands: the run says
    /// it was not sandboxed as required, so it backs no signature.
    #[error("evidence isolation.{record} differs from the container profile in {}", .fields.join(", "))]
    Isolation {
        /// `requested`, `observed` or `mismatches`.
        record: &'static str,
        /// The differing fields.
        fields: Vec<String>,
    },
    /// The record's OCI runtime is not consistent, or not the one required.
    #[error("{0}")]
    OciRuntime(#[source] crate::runtimes::OciRuntimeError),
}

impl EvidenceRecord {
    /// Parses a record the real Docker executor wrote: the schema and executor first, then
    /// the whole record strictly typed. A shape error names the first field that does not
    /// parse (`isolation.observed`, say), so a refusal says where the record is wrong.
    pub fn from_docker_value(v: &Value) -> Result<Self, EvidenceError> {
        let header = Header::deserialize(v).map_err(|_| {
            EvidenceError::Malformed(
                if v.get("schema_version").and_then(Value::as_str).is_none() {
                    "schema_version"
                } else {
                    "executor"
                },
            )
        })?;
        if header.schema_version != EVIDENCE_SCHEMA_VERSION {
            return Err(EvidenceError::Schema(
                header.schema_version.chars().take(96).collect(),
            ));
        }
        if header.executor != DOCKER_EXECUTOR {
            return Err(EvidenceError::NotRealExecutor(
                header.executor.chars().take(96).collect(),
            ));
        }
        Self::deserialize(v).map_err(|_| EvidenceError::Malformed(first_malformed_field(v)))
    }
}

/// The first field of `v` that does not parse as its part of [`EvidenceRecord`].
fn first_malformed_field(v: &Value) -> &'static str {
    fn bad<T: serde::de::DeserializeOwned>(v: &Value, key: &str) -> bool {
        T::deserialize(v.get(key).unwrap_or(&Value::Null)).is_err()
    }
    if let Some(isolation) = v.get("isolation").filter(|i| !i.is_null()) {
        if !isolation.is_object() {
            return "isolation";
        }
        for (key, name) in [
            ("requested", "isolation.requested"),
            ("observed", "isolation.observed"),
        ] {
            if bad::<ContainerProfile>(isolation, key) {
                return name;
            }
        }
        if bad::<Vec<String>>(isolation, "mismatches") {
            return "isolation.mismatches";
        }
    }
    type Check = fn(&Value, &str) -> bool;
    let checks: [(&'static str, Check); 15] = [
        ("run_id", bad::<String>),
        ("response_hash", bad::<Option<String>>),
        ("worker_version", bad::<String>),
        ("engine", bad::<EngineFacts>),
        ("image", bad::<Option<ImageFacts>>),
        ("request", bad::<RequestFacts>),
        ("container", bad::<Option<ContainerFacts>>),
        ("timestamps", bad::<Timestamps>),
        ("exit", bad::<ExitFacts>),
        ("resources", bad::<ResourceFacts>),
        ("stdout", bad::<StreamEvidence>),
        ("stderr", bad::<StreamEvidence>),
        ("outcome", bad::<Decision>),
        ("isolation", bad::<Option<IsolationEvidence>>),
        ("tests", bad::<Option<test_outcomes::TestReport>>),
    ];
    checks
        .into_iter()
        .find(|(key, bad)| bad(v, key))
        .map_or("evidence", |(key, _)| key)
}
