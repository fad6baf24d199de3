//! The sandbox's deciding half: the run's spec and its checked limits ([`spec`]), the pure
//! verdict contract ([`decision`], DESIGN §3), the container profile ([`profile`]), the evidence
//! record ([`evidence`]), limits met that the program saw only as an errno ([`hits`]), the
//! answers of the `argv[0]` probe that depend on the image alone ([`exec_cache`]), the
//! explanation of a run ([`explain`]), the seam to a container engine
//! ([`engine::ContainerEngine`], each engine's adapter supplying its own facts, evidence stamp
//! and cgroup layout), the run lifecycle written once over it ([`lifecycle`]) and the
//! [`Executor`] every caller holds, over the object-safe [`RunLifecycle`]. Two features serve other crates' tests:
//! `fake-engine` exposes the scripted engine (`lifecycle::fake`), so a job, the service or a
//! rehearsal runs without a daemon, and `conformance` the engine trait's contract as one suite
//! (`conformance::exercise`), run over the fake here and over the Docker Engine in
//! `worker-docker`.
//!
//! It deliberately names no engine client library: the engine behind [`Executor`] is chosen by
//! the binary (today `worker-docker`), so this crate, and every crate above it, can be built
//! and tested without one. It does not know about jobs or manifests either: the caller turns
//! those into a [`SandboxSpec`] and supplies [`RunHooks`] that re-check the staged inputs.

#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
pub mod decision;
pub mod engine;
pub mod evidence;
pub mod exec_cache;
mod executor;
pub mod explain;
pub mod hits;
pub mod identity;
pub mod images;
pub mod lifecycle;
pub mod owner;
pub mod profile;
pub mod spec;
pub mod streams;

use std::path::PathBuf;
use verifier_sdk::evidence::RequestFacts;

pub use decision::{
    Decision, EngineEvents, InputCheck, NoVerdictReason, RunObservation, StoppedBy, decide,
};
pub use engine::{EngineError, HostResources};
pub use evidence::{EVIDENCE_SCHEMA_VERSION, EvidenceRecord};
pub use executor::{Executor, RunLifecycle};
pub use spec::SpecError;

/// Label present on every container this worker creates.
pub const LABEL_VERIFIER: &str = "dev.agent-bounties.verifier";
/// Label holding the run id.
pub const LABEL_RUN_ID: &str = "dev.agent-bounties.run-id";
/// Label holding the worker version.
pub const LABEL_WORKER_VERSION: &str = "dev.agent-bounties.worker-version";
/// Label naming the owning worker process (`<boot id>/<pid namespace>/<pid>/<start time>`),
/// used by [`Executor::cleanup_stale`] to tell a provably dead owner from a live one.
pub const LABEL_OWNER: &str = "dev.agent-bounties.owner";

/// How an `image_missing` detail says that pulling by digest was tried and failed; the engine's
/// reason follows it.
pub const PULL_FAILED: &str = "pulling it by its digest failed:";

/// Everything needed to run one command; independent of the job and manifest types. What
/// the run asks for is the sdk's [`RequestFacts`] itself, not a copy of its fields: a job's
/// run takes it from its manifest (`RequestFacts::for_manifest`, what the signer's re-check
/// expects), and the evidence records this very value, so a run cannot ask for one thing and
/// record another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxSpec {
    /// Unique id of this run (label and container name; not trusted for anything else).
    pub run_id: String,
    /// Digest-pinned image reference, `name@sha256:<64 hex>`.
    pub image: String,
    /// The command (`argv[0]` resolved inside the image, PATH for bare names), the required
    /// image platform (`os/arch[/variant]`) and every limit: the wall-clock timeout from
    /// container start, CPU in thousandths of a core, memory (and memory+swap: no swap),
    /// processes and threads, the combined stdout+stderr cap (exceeding it kills the
    /// container), the `/tmp` and `/tmp/home` tmpfs size, and `AGENT_BOUNTIES_TEST_SEED`.
    pub request: RequestFacts,
    /// Verified staged source tree, mounted read-only at `/workspace`.
    pub source_dir: PathBuf,
    /// Verified staged benchmark tree, mounted read-only at `/benchmark`.
    pub benchmark_dir: PathBuf,
    /// Pull the image (by its digest only) when it is not present locally.
    pub pull: bool,
}

/// When the staged inputs are re-checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputPhase {
    /// Immediately before the container is created.
    BeforeCreate,
    /// After the container stopped.
    AfterRun,
}

/// Caller-supplied checks the executor runs at fixed points.
pub trait RunHooks: Send + Sync {
    /// Re-verifies the source and benchmark trees against their digests.
    fn check_inputs(&self, phase: InputPhase) -> InputCheck;

    /// A directory where `argv[0]`'s resolution in an image may be remembered across runs
    /// (created if absent; never read or written through a symlink); `None` probes every run.
    fn executable_cache(&self) -> Option<PathBuf> {
        None
    }

    /// The image inspects this run may take instead of asking the engine again (a batch's,
    /// [`ImageMemo`]); `None` inspects every run.
    fn image_memo(&self) -> Option<&ImageMemo> {
        None
    }

    /// Waits until the run may start: called once its container is created, checked and
    /// attached, right before the start, which is when it begins to use the cpus and memory
    /// it was given. A caller that bounds the containers running at once takes its slot here,
    /// so the next container is created and checked while the runs before it still run
    /// (issue #50 item 1). Ready at once by default.
    fn admit(&self) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(std::future::ready(()))
    }

    /// Called once the engine says the container has stopped: its processes are gone, so it
    /// holds none of the cpus and memory it was given, and only the re-check of the inputs
    /// and its removal are left. A caller that counts running containers against the host's
    /// capacity counts this one out here rather than after the removal (issue #50 item 1).
    /// Not called for a container that may still run (it is force-removed first); then the
    /// caller's count ends when [`Executor::run`] returns.
    fn stopped(&self) {}
}

/// The engine's answers to the image inspects of one batch of runs, by the exact pinned
/// reference asked for, so the runs of a batch on one image inspect it once rather than each
/// inside its slot (issue #50 item 2). What is reused is the engine's answer, never the
/// check: every run still holds it to its own spec ([`lifecycle`]'s image check: the pinned
/// digest among the repo digests, the platform) and creates its container from the
/// digest-pinned reference, which the engine resolves itself. Only an answer that passed that
/// check is kept, and a run whose create fails forgets it, so an image removed during the
/// batch is inspected (and, under `--pull`, pulled) again by the next run. Its holder clears
/// it between batches ([`ImageMemo::clear`]). Cheap to clone; clones share the answers.
#[derive(Clone, Debug, Default)]
pub struct ImageMemo(
    std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, engine::ImageInspected>>>,
);

impl ImageMemo {
    fn with<T>(
        &self,
        f: impl FnOnce(&mut std::collections::HashMap<String, engine::ImageInspected>) -> T,
    ) -> T {
        let mut held = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut held)
    }

    /// The answer kept for `reference`, if any.
    pub fn get(&self, reference: &str) -> Option<engine::ImageInspected> {
        self.with(|m| m.get(reference).cloned())
    }

    /// Keeps `inspected` as the answer for `reference`.
    pub fn put(&self, reference: &str, inspected: engine::ImageInspected) {
        self.with(|m| m.insert(reference.to_owned(), inspected));
    }

    /// Forgets the answer for `reference`.
    pub fn forget(&self, reference: &str) {
        self.with(|m| m.remove(reference));
    }

    /// Forgets every answer: a new batch inspects its images afresh.
    pub fn clear(&self) {
        self.with(std::collections::HashMap::clear);
    }
}

/// What [`Executor::run`] returns: the decision and its evidence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunReport {
    /// Verdict or no-verdict under the contract (also in `evidence.outcome`).
    pub decision: Decision,
    /// The evidence record.
    pub evidence: EvidenceRecord,
    /// Limits met that the program saw only as an errno, as read while it ran; reported
    /// beside the verdict, never part of it or of the evidence.
    pub observed: hits::Observed,
    /// Everything the run wrote, within the output cap (the evidence keeps only tails).
    pub output: streams::FullOutput,
}

/// Failures that prevent a run from producing even a no-verdict report.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The engine could not be reached (maps to the "runtime unavailable" exit code).
    #[error("container runtime unavailable: {0}")]
    RuntimeUnavailable(#[source] EngineError),
    /// An engine request outside a run failed (for example listing stale containers).
    #[error("engine request failed while {context}: {source}")]
    Engine {
        /// What the executor was doing.
        context: &'static str,
        /// The engine's error.
        #[source]
        source: EngineError,
    },
    /// A stale container could not be removed.
    #[error("stale container {id} could not be removed")]
    StaleNotRemoved {
        /// The container id.
        id: String,
    },
}

/// The container profile `spec` would be created with, computed without the engine (the
/// image's `PATH` is added at run time). Used by `worker plan` and rehearsal.
pub fn plan(spec: &SandboxSpec) -> Result<profile::Isolation, SpecError> {
    plan_under(spec, verifier_sdk::oci_runtime::RUNC)
}

/// [`plan`] under the OCI runtime `oci_runtime` ([`verifier_sdk::oci_runtime::RUNC`] or
/// [`verifier_sdk::oci_runtime::RUNSC`]): the profile a run with that `--oci-runtime` is
/// created with (under runsc the pids limit moves into `--ulimit nproc`, see
/// [`verifier_sdk::oci_runtime`]).
pub fn plan_under(spec: &SandboxSpec, oci_runtime: &str) -> Result<profile::Isolation, SpecError> {
    let limits = spec::limits(spec)?;
    let path = |p: &std::path::Path| p.to_string_lossy().into_owned();
    Ok(profile::requested(
        spec,
        limits,
        None,
        &path(&spec.source_dir),
        &path(&spec.benchmark_dir),
        oci_runtime,
        // A run leases its uid when it starts; a plan shows the range's first.
        profile::SANDBOX_UID_FIRST,
    ))
}
