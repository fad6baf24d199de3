//! Receipt v1, outcomes and the response hash (PROTOCOL §5).
//!
//! Every struct here is declared in the protocol's field order: serde writes them in that
//! order and the hash preimage is built in the same order, and a test pins that the two agree.
//! Parsing is strict (`deny_unknown_fields`) so nothing outside the hash can ride along.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::canonical::{compact_json_in_order, ordered_value};
pub use crate::job::Scope;
use crate::job::ValidatedJob;
use crate::manifest::{RunnerManifest, command_hash, runner_manifest_hash};
use crate::types::{Bytes32, Sha256Digest};

/// `schema_version` of a receipt and of the response-hash preimage.
pub const RECEIPT_SCHEMA_VERSION: &str = "agent-bounties/regression-sandbox-receipt-v1";
/// Longest `no_verdict.detail` we write or accept, in bytes.
pub const MAX_NO_VERDICT_DETAIL: usize = 4096;

/// The isolation profile a receipt attests. Only [`Isolation::profile`] is valid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Isolation {
    /// `docker`.
    pub runtime: String,
    /// `none`.
    pub network: String,
    /// `true`.
    pub rootfs_read_only: bool,
    /// `true`.
    pub source_read_only: bool,
    /// `true`.
    pub benchmark_read_only: bool,
    /// `none`.
    pub capabilities: String,
    /// `true`.
    pub no_new_privileges: bool,
    /// `65532:65532`: the protocol's fixed name for "an unprivileged, non-root user" (PROTOCOL
    /// §5), the same in every receipt so the response hash never depends on the host. The
    /// host uid a run really had is one of the sandbox range
    /// ([`crate::profile::SANDBOX_UID_FIRST`]), leased to that sandbox alone; the evidence
    /// record's profile names it and the signer checks it.
    pub user: String,
}

impl Isolation {
    /// The one fixed profile of PROTOCOL §5.
    pub fn profile() -> Self {
        Self {
            runtime: "docker".into(),
            network: "none".into(),
            rootfs_read_only: true,
            source_read_only: true,
            benchmark_read_only: true,
            capabilities: "none".into(),
            no_new_privileges: true,
            user: "65532:65532".into(),
        }
    }
}

/// What the executor observed about a completed command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecutionFacts {
    /// Exit code of the command that completed on its own.
    pub exit_code: i64,
    /// SHA-256 of all of stdout.
    pub stdout_sha256: Sha256Digest,
    /// SHA-256 of all of stderr.
    pub stderr_sha256: Sha256Digest,
    /// Length of stdout.
    pub stdout_bytes: u64,
    /// Length of stderr.
    pub stderr_bytes: u64,
}

/// `receipt.execution`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Execution {
    /// Exit code; decides the verdict.
    pub exit_code: i64,
    /// `sha256:` of stdout.
    pub stdout_sha256: Sha256Digest,
    /// `sha256:` of stderr.
    pub stderr_sha256: Sha256Digest,
    /// Bytes of stdout.
    pub stdout_bytes: u64,
    /// Bytes of stderr.
    pub stderr_bytes: u64,
    /// The isolation profile.
    pub isolation: Isolation,
}

/// Receipt v1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    /// [`RECEIPT_SCHEMA_VERSION`].
    pub schema_version: String,
    /// What was verified.
    pub scope: Scope,
    /// Hash of the runner manifest that ran.
    pub runner_manifest_hash: Sha256Digest,
    /// Hash of its argv.
    pub command_hash: Sha256Digest,
    /// Digest of the staged source tree.
    pub source_digest: Sha256Digest,
    /// Digest of the staged benchmark tree.
    pub benchmark_digest: Sha256Digest,
    /// The digest-pinned image.
    pub image: String,
    /// What happened.
    pub execution: Execution,
}

impl Receipt {
    /// Builds a receipt for a completed run of `manifest` on `source_digest`.
    pub fn new(
        scope: Scope,
        manifest: &RunnerManifest,
        source_digest: Sha256Digest,
        facts: ExecutionFacts,
    ) -> Self {
        Self {
            schema_version: RECEIPT_SCHEMA_VERSION.into(),
            scope,
            runner_manifest_hash: runner_manifest_hash(manifest),
            command_hash: command_hash(manifest.command()),
            source_digest,
            benchmark_digest: manifest.benchmark_digest(),
            image: manifest.image().to_owned(),
            execution: Execution {
                exit_code: facts.exit_code,
                stdout_sha256: facts.stdout_sha256,
                stderr_sha256: facts.stderr_sha256,
                stdout_bytes: facts.stdout_bytes,
                stderr_bytes: facts.stderr_bytes,
                isolation: Isolation::profile(),
            },
        }
    }

    /// The verdict this receipt's exit code implies.
    pub fn verdict(&self) -> Verdict {
        Verdict::from_exit_code(self.execution.exit_code)
    }

    /// The receipt as JSON with keys in declared order (part of the response-hash preimage):
    /// its derived serialization, since every field is declared in preimage order.
    pub fn to_ordered_value(&self) -> Value {
        ordered_value(self)
    }
}

/// A verdict of a command that completed on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Exit code 0.
    Passed,
    /// Any other exit code.
    Failed,
}

impl Verdict {
    /// 0 → passed, anything else → failed: the solver owns every way its code can end.
    pub const fn from_exit_code(exit_code: i64) -> Self {
        if exit_code == 0 {
            Self::Passed
        } else {
            Self::Failed
        }
    }
    /// Whether this is `passed` (the EIP-712 `passed` flag).
    pub const fn passed(self) -> bool {
        matches!(self, Self::Passed)
    }
    /// `passed` or `failed`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed => "failed",
        }
    }
}

/// The `response_hash` preimage, fields in declared order.
#[derive(Serialize)]
struct ResponsePreimage<'a> {
    schema_version: &'static str,
    verdict: Verdict,
    receipt: &'a Receipt,
}

/// `response_hash` = SHA-256 of `{schema_version, verdict, receipt}` in declared order.
pub fn response_hash(verdict: Verdict, receipt: &Receipt) -> Bytes32 {
    let preimage = ordered_value(&ResponsePreimage {
        schema_version: RECEIPT_SCHEMA_VERSION,
        verdict,
        receipt,
    });
    Bytes32::from_bytes(Sha256::digest(compact_json_in_order(&preimage).as_bytes()).into())
}

/// A run with a verdict: `{verdict, receipt, response_hash}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outcome {
    /// Derived from the receipt's exit code.
    pub verdict: Verdict,
    /// The receipt.
    pub receipt: Receipt,
    /// Commits to verdict and receipt.
    pub response_hash: Bytes32,
}

impl Outcome {
    /// Wraps a receipt, deriving the verdict from its exit code and computing the hash.
    pub fn new(receipt: Receipt) -> Self {
        let verdict = receipt.verdict();
        let response_hash = response_hash(verdict, &receipt);
        Self {
            verdict,
            receipt,
            response_hash,
        }
    }

    /// Builds the outcome of a completed run for `job`. The receipt's source digest is the one
    /// the job commits to: the worker stages and re-verifies the source against exactly that
    /// digest before and after the run, so there is no other digest to pass.
    pub fn for_job(job: &ValidatedJob, facts: ExecutionFacts) -> Self {
        Self::new(Receipt::new(
            job.scope().clone(),
            job.manifest(),
            job.source_snapshot_digest(),
            facts,
        ))
    }
}

/// Why an outcome was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutcomeError {
    /// The outcome does not parse strictly (unknown, missing or mistyped field).
    #[error("outcome is malformed: {0}")]
    Malformed(String),
    /// The receipt's `schema_version` is wrong.
    #[error("receipt schema_version is not {RECEIPT_SCHEMA_VERSION}")]
    SchemaVersion,
    /// The receipt's scope differs from the job's.
    #[error("receipt scope differs from the job")]
    Scope,
    /// `runner_manifest_hash` differs from the job's manifest.
    #[error("receipt runner_manifest_hash differs from the job's manifest")]
    ManifestHash,
    /// `command_hash` differs from the job's manifest.
    #[error("receipt command_hash differs from the job's manifest")]
    CommandHash,
    /// `source_digest` differs from `evidence.source_snapshot_digest`.
    #[error("source digest differs from the job's source_snapshot_digest")]
    SourceDigest,
    /// `benchmark_digest` differs from the manifest.
    #[error("receipt benchmark_digest differs from the job's manifest")]
    BenchmarkDigest,
    /// `image` differs from the manifest.
    #[error("receipt image differs from the job's manifest")]
    Image,
    /// The isolation block is not the fixed profile.
    #[error("receipt isolation differs from the fixed profile")]
    Isolation,
    /// The verdict contradicts the exit code.
    #[error("verdict {verdict} contradicts exit code {exit_code}")]
    VerdictMismatch {
        /// The claimed verdict.
        verdict: &'static str,
        /// The receipt's exit code.
        exit_code: i64,
    },
    /// `response_hash` does not recompute.
    #[error("response_hash does not match its recomputation {computed}")]
    ResponseHash {
        /// What the sdk computed.
        computed: Bytes32,
    },
}

/// An outcome that matches its job in every re-derivable field. Built only by
/// [`validate_outcome`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedOutcome(Outcome);

impl ValidatedOutcome {
    /// The outcome.
    pub fn outcome(&self) -> &Outcome {
        &self.0
    }
    /// The verdict.
    pub fn verdict(&self) -> Verdict {
        self.0.verdict
    }
    /// The response hash (recomputed and equal).
    pub fn response_hash(&self) -> Bytes32 {
        self.0.response_hash
    }
    /// The receipt.
    pub fn receipt(&self) -> &Receipt {
        &self.0.receipt
    }
    /// Unwraps the outcome.
    pub fn into_inner(self) -> Outcome {
        self.0
    }
}

/// Parses `outcome` strictly and re-derives every field that the job determines: for bytes
/// read from outside the process (a candidate, a cache entry). An outcome this process holds
/// typed is checked with [`Outcome::check_for`], without a detour through JSON.
pub fn validate_outcome(
    outcome: &Value,
    job: &ValidatedJob,
) -> Result<ValidatedOutcome, OutcomeError> {
    Outcome::deserialize(outcome)
        .map_err(|e| OutcomeError::Malformed(e.to_string().chars().take(512).collect()))?
        .check_for(job)
}

impl Outcome {
    /// Re-derives every field that `job` determines (scope, manifest, command, digests,
    /// image, isolation, verdict, response hash), as [`validate_outcome`] does after parsing.
    pub fn check_for(self, job: &ValidatedJob) -> Result<ValidatedOutcome, OutcomeError> {
        check_outcome(self, job)
    }
}

fn check_outcome(parsed: Outcome, job: &ValidatedJob) -> Result<ValidatedOutcome, OutcomeError> {
    let r = &parsed.receipt;
    let manifest = job.manifest();
    if r.schema_version != RECEIPT_SCHEMA_VERSION {
        return Err(OutcomeError::SchemaVersion);
    }
    if &r.scope != job.scope() {
        return Err(OutcomeError::Scope);
    }
    if r.runner_manifest_hash != runner_manifest_hash(manifest) {
        return Err(OutcomeError::ManifestHash);
    }
    if r.command_hash != command_hash(manifest.command()) {
        return Err(OutcomeError::CommandHash);
    }
    if r.source_digest != job.source_snapshot_digest() {
        return Err(OutcomeError::SourceDigest);
    }
    if r.benchmark_digest != manifest.benchmark_digest() {
        return Err(OutcomeError::BenchmarkDigest);
    }
    if r.image != manifest.image() {
        return Err(OutcomeError::Image);
    }
    if r.execution.isolation != Isolation::profile() {
        return Err(OutcomeError::Isolation);
    }
    if parsed.verdict != r.verdict() {
        return Err(OutcomeError::VerdictMismatch {
            verdict: parsed.verdict.as_str(),
            exit_code: r.execution.exit_code,
        });
    }
    // Bytes32 parsing is case-insensitive, so this compares the hex case-insensitively.
    let computed = response_hash(parsed.verdict, r);
    if parsed.response_hash != computed {
        return Err(OutcomeError::ResponseHash { computed });
    }
    Ok(ValidatedOutcome(parsed))
}

/// Machine-readable reason a run produced no verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoVerdictReason {
    /// The command hit `timeout_seconds`.
    Timeout,
    /// stdout + stderr exceeded `max_output_bytes`.
    OutputLimit,
    /// The kernel killed the command for memory.
    Oom,
    /// An input was missing or did not match its digest (before or after the run).
    InputMismatch,
    /// The pinned image is not present.
    ImageMissing,
    /// The image's platform differs from the manifest's.
    ImagePlatformMismatch,
    /// The image does not match its pinned digest.
    ImageDigestMismatch,
    /// The engine could not create the container.
    CreateFailed,
    /// The engine could not start the command (including executable not found).
    StartFailed,
    /// The container's observed settings differ from the profile.
    IsolationMismatch,
    /// Something other than the worker killed, stopped, removed or otherwise acted on the
    /// running container (an operator's `docker kill`, a daemon stop, another process's
    /// cleanup), so its exit code is not the program's own.
    ExternallyStopped,
    /// The job or manifest is invalid.
    InvalidJob,
    /// The job expired.
    Expired,
    /// A bug or unexpected failure in the worker.
    InternalError,
    /// The container runtime could not be reached.
    RuntimeUnavailable,
}

impl NoVerdictReason {
    /// The snake_case wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::OutputLimit => "output_limit",
            Self::Oom => "oom",
            Self::InputMismatch => "input_mismatch",
            Self::ImageMissing => "image_missing",
            Self::ImagePlatformMismatch => "image_platform_mismatch",
            Self::ImageDigestMismatch => "image_digest_mismatch",
            Self::CreateFailed => "create_failed",
            Self::StartFailed => "start_failed",
            Self::IsolationMismatch => "isolation_mismatch",
            Self::ExternallyStopped => "externally_stopped",
            Self::InvalidJob => "invalid_job",
            Self::Expired => "expired",
            Self::InternalError => "internal_error",
            Self::RuntimeUnavailable => "runtime_unavailable",
        }
    }
}

/// `no_verdict`: why, and a human-readable detail (at most [`MAX_NO_VERDICT_DETAIL`] bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoVerdict {
    /// The reason.
    pub reason: NoVerdictReason,
    /// Detail for humans; never parsed by machines.
    pub detail: String,
}

/// `{verdict: null, no_verdict: {reason, detail}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoVerdictOutcome {
    /// Always JSON `null`.
    pub verdict: (),
    /// Why there is no verdict.
    pub no_verdict: NoVerdict,
}

impl NoVerdictOutcome {
    /// Builds a no-verdict outcome, truncating `detail` on a character boundary so a hostile
    /// error message cannot make the output unbounded.
    pub fn new(reason: NoVerdictReason, detail: &str) -> Self {
        let mut end = detail.len().min(MAX_NO_VERDICT_DETAIL);
        while !detail.is_char_boundary(end) {
            end -= 1;
        }
        let detail = detail.get(..end).unwrap_or_default().to_owned();
        Self {
            verdict: (),
            no_verdict: NoVerdict { reason, detail },
        }
    }
}

/// What `worker --run-regression` prints: a verdict or a reasoned absence of one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
// Built and printed once per run; boxing would only make matching on it clumsier.
#[allow(clippy::large_enum_variant)]
pub enum RunOutput {
    /// A completed command.
    Verdict(Outcome),
    /// No verdict.
    NoVerdict(NoVerdictOutcome),
}

#[cfg(test)]
mod tests;
