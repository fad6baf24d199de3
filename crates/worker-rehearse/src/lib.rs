//! `worker rehearse`: runs a runner manifest on local trees exactly as a job would run it, with
//! no job and no chain, so bounty authors and solvers can see before committing anything which
//! digests a bounty would commit, the exact sandbox, and the verdict with its reasons.
//!
//! Beyond one run it answers the two questions that make a benchmark usable for a bounty: is
//! the verdict stable across fresh containers (`--repeat`), and does the benchmark tell the
//! unsolved tree from the solution (`--base`)? With `--adversarial` it also asks whether a
//! tree that solves nothing passes.
//!
//! Split by responsibility: `exec` runs one container and holds what every run shares
//! (the lowest step; it imports none of the others); [`run`] reads the manifest, stages the trees and runs the
//! containers; [`report`] turns the runs into the answer (stability, discrimination, verdict,
//! problems, the [`Answer`]); [`render`] prints it for a person; [`adversarial`] builds and runs the
//! stub solutions, [`checks`] names the checks a rehearsal did not make, [`references`] finds
//! what the benchmark names under `/workspace` and [`judgement`] words what the stubs allow us
//! to say; [`git`] stages a tree inside a repository as its exact-commit archive, and
//! [`revisions`] says which revision each tree is staged at; [`warnings`] repeats what must be
//! seen beside the verdict; [`store_hint`] notes a grown store; [`test_count`] says how many tests
//! the runs printed; [`passing_run`] warns about a pass that printed no test results or used
//! most of a limit; [`mutants`] scores the benchmark on mutants of the solution's changed
//! lines (`--mutants`); [`batch`] rehearses many tasks side by side, under one limit on the
//! containers running at once, into one report (`batch_render` prints it and writes its JUnit
//! XML). [`verdict`] holds the words they all share (the verdict, one
//! stub's result) and imports none of them; [`rehearsed`] joins a report with its stub runs,
//! above all of them.
//!
//! A library: it runs containers only through a `worker_sandbox::Executor` it is given, and
//! parses no command line and names no exit code (`worker rehearse` in the binary does those).

pub mod adversarial;
pub mod batch;
mod batch_render;
pub mod checks;
pub mod culprit;
pub mod determinism;
mod exec;
pub mod git;
pub mod judgement;
pub mod limits;
pub mod mutants;
pub mod passing_run;
pub mod references;
pub mod rehearsed;
pub mod render;
pub mod report;
pub mod revisions;
pub mod run;
pub mod sandbox_block;
pub mod store_hint;
pub mod stub_files;
pub mod test_count;
pub mod verdict;
pub mod warnings;

use std::path::PathBuf;

use verifier_sdk::Sha256Digest;

use worker_sandbox::SandboxError;
use worker_store::stage::StageError;

pub use rehearsed::Rehearsed;
pub use report::{
    Answer, Commitments, Discrimination, Report, RunResult, Stability, Verdict, answer,
    zero_tests_ran,
};
pub use run::{Prepared, prepare, rehearse, rehearse_at};

/// Schema of the `--json` report; bump on any change of shape or meaning.
pub const REHEARSAL_SCHEMA_VERSION: &str = "agent-bounties/regression-rehearsal-v1";
/// The `benchmark_digest` an author writes before knowing the digest: "fill it in from the
/// benchmark directory".
pub const PLACEHOLDER_DIGEST: &str =
    "sha256:0000000000000000000000000000000000000000000000000000000000000000";
/// Largest manifest file read; a manifest is well under a KiB.
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;
/// Most runs `--repeat` accepts: enough to expose flakiness, few enough to stay a rehearsal.
pub const MAX_REPEAT: u32 = 20;

/// What to rehearse.
#[derive(Debug, Clone)]
pub struct RehearseOptions {
    /// The solution (or any) source tree.
    pub source: PathBuf,
    /// The benchmark tree.
    pub benchmark: PathBuf,
    /// The runner manifest file.
    pub manifest: PathBuf,
    /// Fresh containers to run the solution in (1..=[`MAX_REPEAT`]).
    pub repeat: u32,
    /// An unsolved tree the benchmark should fail on.
    pub base: Option<PathBuf>,
    /// Where trees are staged and evidence written.
    pub staging_root: PathBuf,
    /// Pull the image by its digest when missing.
    pub pull: bool,
    /// The git revision staged for the source and benchmark trees inside a repository.
    pub rev: String,
    /// Whether `rev` was asked for (`--rev`) rather than the default `HEAD`.
    pub rev_explicit: bool,
    /// The base tree's own revision (`--base-rev`, or `--base DIR@REV`); `HEAD` when `None`.
    pub base_rev: Option<String>,
    /// Stage the directories as they are on disk, even inside a git repository.
    pub worktree: bool,
    /// Show no progress (it is also hidden when stderr is not a terminal).
    pub quiet: bool,
    /// Where each run's full output and evidence are written, when given.
    pub log_dir: Option<PathBuf>,
    /// The OCI runtime the runs are created under (the operator's `--oci-runtime`): the
    /// `sandbox` shown is planned under it, so it is the profile the runs get.
    pub oci_runtime: String,
    /// In a batch, the task every progress line names (`task 2/5 rpc-failover`); `None` alone.
    pub task: Option<String>,
}

/// Why a rehearsal could not produce a report.
#[derive(Debug, thiserror::Error)]
pub enum RehearseError {
    /// `--repeat` out of range.
    #[error("--repeat must be 1 to {MAX_REPEAT}, got {0}")]
    Repeat(u32),
    /// The manifest file could not be read.
    #[error("reading manifest {path:?}: {source}")]
    ManifestIo {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The manifest file is larger than [`MAX_MANIFEST_BYTES`].
    #[error("manifest is larger than {MAX_MANIFEST_BYTES} bytes")]
    ManifestTooLarge,
    /// The manifest file is not JSON.
    #[error("manifest is not valid json: {0}")]
    ManifestJson(#[source] serde_json::Error),
    /// The manifest breaks a protocol rule (the same rules a job's manifest must meet).
    #[error("{0}")]
    Manifest(#[from] verifier_sdk::ManifestError),
    /// The manifest names a benchmark digest other than the benchmark tree's.
    #[error(
        "manifest benchmark_digest {manifest} does not match the benchmark directory ({staged}); \
         fix the manifest, or write {PLACEHOLDER_DIGEST} to have it filled in"
    )]
    BenchmarkMismatch {
        /// What the manifest says.
        manifest: Sha256Digest,
        /// What the tree hashes to.
        staged: Sha256Digest,
    },
    /// A tree's git revision could not be staged as an archive holds it.
    #[error("staging the {what} tree from git: {source}")]
    Git {
        /// `source`, `benchmark` or `base`.
        what: &'static str,
        /// The underlying error.
        #[source]
        source: git::GitTreeError,
    },
    /// A tree could not be staged.
    #[error("staging the {what} tree: {source}")]
    Stage {
        /// `source`, `benchmark` or `base`.
        what: &'static str,
        /// The underlying error.
        #[source]
        source: StageError,
    },
    /// The image still has the placeholder digest of the example manifests.
    #[error(
        "manifest image {0:?} has the placeholder digest: pin the image you built or pulled \
         (its repo digest, e.g. from `docker image inspect` or .work/images.json)"
    )]
    PlaceholderImage(String),
    /// The manifest's numbers do not fit the engine.
    #[error("manifest does not fit the engine: {0}")]
    Plan(String),
    /// `--base` and `--base-rev` do not make one base.
    #[error(transparent)]
    BaseSpec(#[from] revisions::BaseSpecError),
    /// The staging root is unusable.
    #[error("staging root {path:?} is unusable: {detail}")]
    StagingRoot {
        /// The root.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A tree is over a limit of the manifest; the message names the field, the value, the
    /// tree's real count and size, its largest directories, and who can do what.
    #[error("{0}")]
    TreeLimit(String),
    /// `--log-dir` could not be written.
    #[error("log directory {path:?}: {detail}")]
    LogDir {
        /// The path that failed.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// The engine failed outside a run (unreachable, or a request failed).
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// An evidence record could not be written.
    #[error("writing the evidence record: {0}")]
    Evidence(#[source] std::io::Error),
}

impl RehearseError {
    /// Whether the input (manifest, trees, arguments) is at fault rather than the machine.
    pub fn is_input_error(&self) -> bool {
        match self {
            Self::Stage { source, .. } => {
                matches!(source, StageError::Tree(e) if e.is_input_error())
            }
            Self::Git { .. }
            | Self::Repeat(_)
            | Self::ManifestIo { .. }
            | Self::ManifestTooLarge
            | Self::ManifestJson(_)
            | Self::Manifest(_)
            | Self::BenchmarkMismatch { .. }
            | Self::PlaceholderImage(_)
            | Self::TreeLimit(_)
            | Self::BaseSpec(_)
            | Self::Plan(_) => true,
            Self::StagingRoot { .. }
            | Self::LogDir { .. }
            | Self::Sandbox(_)
            | Self::Evidence(_) => false,
        }
    }
}
