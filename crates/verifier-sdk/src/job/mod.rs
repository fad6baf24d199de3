//! The verification job (PROTOCOL §2): the only way to get a [`ValidatedJob`] is
//! [`ValidatedJob::parse`] (every structural rule, in `rules`, read through the path-carrying
//! cursor in `fields`) or [`validate_job`] (parse, then liveness), which check every rule before
//! anything may run.
//!
//! Hashes are recomputed over the received `serde_json::Value` (never a typed copy), and the
//! raw value is kept so later stages (signer, keeper) can re-run the same checks on it.

mod fields;
mod rules;

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::digest::validate_relative_path;
use crate::manifest::{ManifestError, RunnerManifest};
use crate::types::{Address, Bytes32, Sha256Digest};

/// The engine name this crate implements.
pub const ENGINE: &str = "sandboxed_regression_v1";
/// The only verification mode and policy mechanism accepted.
pub const SIGNED_QUORUM: &str = "signed_quorum";
/// The platform's other verification mode, served to every verifier: an on-chain verifier
/// module decides the bounty and no quorum signs it (see [`other_verification_mode`]).
pub const DETERMINISTIC_MODULE: &str = "deterministic_module";
/// `terms.document.schema_version` accepted.
pub const TERMS_SCHEMA_VERSION: &str = "agent-bounties/terms-v1";
/// Longest `job_id`.
pub const MAX_JOB_ID_LEN: usize = 200;
/// Longest subdirectory string accepted.
pub const MAX_SUBDIRECTORY_LEN: usize = 4096;

/// A supported chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Network {
    /// Base mainnet, chain id 8453.
    BaseMainnet,
    /// Base Sepolia, chain id 84532.
    BaseSepolia,
}

impl Network {
    /// Resolves a network name or alias (ASCII case-insensitive); `None` if unsupported.
    pub fn from_alias(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "base-mainnet" | "base" | "mainnet" | "8453" => Some(Self::BaseMainnet),
            "base-sepolia" | "sepolia" | "84532" => Some(Self::BaseSepolia),
            _ => None,
        }
    }
    /// The EIP-155 chain id.
    pub const fn chain_id(self) -> u64 {
        match self {
            Self::BaseMainnet => 8453,
            Self::BaseSepolia => 84532,
        }
    }
    /// The canonical name used in receipts and API queries.
    pub const fn name(self) -> &'static str {
        match self {
            Self::BaseMainnet => "base-mainnet",
            Self::BaseSepolia => "base-sepolia",
        }
    }
    /// The network of a chain id, if supported.
    pub const fn from_chain_id(id: u64) -> Option<Self> {
        match id {
            8453 => Some(Self::BaseMainnet),
            84532 => Some(Self::BaseSepolia),
            _ => None,
        }
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A GitHub repository `owner/name` with GitHub's character rules.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GithubRepo {
    owner: String,
    name: String,
}

impl GithubRepo {
    /// Checks and builds a repository from its two parts.
    pub fn new(owner: &str, name: &str) -> Option<Self> {
        let owner_ok = (1..=39).contains(&owner.len())
            && !owner.starts_with('-')
            && owner
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-');
        let name_ok = (1..=100).contains(&name.len())
            && name != "."
            && name != ".."
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        (owner_ok && name_ok).then(|| Self {
            owner: owner.to_owned(),
            name: name.to_owned(),
        })
    }
    /// Parses `owner/name`.
    pub fn parse(s: &str) -> Option<Self> {
        let (owner, name) = s.split_once('/')?;
        Self::new(owner, name)
    }
    /// The owner (user or organisation).
    pub fn owner(&self) -> &str {
        &self.owner
    }
    /// The repository name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for GithubRepo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}

/// A full 40-hex git commit id, stored lowercase.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CommitId(String);

impl CommitId {
    /// Parses 40 hex digits; uppercase is accepted only when `allow_uppercase` is set.
    pub fn parse(s: &str, allow_uppercase: bool) -> Option<Self> {
        let ok = s.len() == 40
            && s.bytes().all(|b| {
                b.is_ascii_digit()
                    || (b'a'..=b'f').contains(&b)
                    || (allow_uppercase && (b'A'..=b'F').contains(&b))
            });
        ok.then(|| Self(s.to_ascii_lowercase()))
    }
    /// The lowercase hex.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CommitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A normalized relative directory: `.` or `/`-separated components, none empty, `.`, `..`,
/// or containing `\` or NUL.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RelativeDir(String);

impl RelativeDir {
    /// The tree root.
    pub fn root() -> Self {
        Self(".".into())
    }
    /// Parses a normalized relative directory; non-normalized spellings are refused, not
    /// repaired, so every implementation selects the same directory.
    pub fn parse(s: &str) -> Option<Self> {
        if s == "." {
            return Some(Self::root());
        }
        if s.len() > MAX_SUBDIRECTORY_LEN || s.starts_with('/') {
            return None;
        }
        validate_relative_path(s).ok()?;
        Some(Self(s.to_owned()))
    }
    /// The path text (`.` for the root).
    pub fn as_str(&self) -> &str {
        &self.0
    }
    /// Whether this is the root.
    pub fn is_root(&self) -> bool {
        self.0 == "."
    }
}

impl fmt::Display for RelativeDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The solver's source: repository and exact commit from `artifact_reference`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRef {
    /// The repository.
    pub repository: GithubRepo,
    /// The commit.
    pub commit: CommitId,
}

/// `benchmark.source`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchmarkSource {
    /// The repository.
    pub repository: GithubRepo,
    /// The commit.
    pub commit: CommitId,
    /// The subdirectory holding the benchmark.
    pub subdirectory: RelativeDir,
}

/// What a receipt is about (PROTOCOL §2 "Receipt scope", in that order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scope {
    /// Canonical network name.
    pub network: String,
    /// `bounty_id` exactly as the job gave it.
    pub bounty_id: String,
    /// The bounty contract.
    pub bounty_contract: Address,
    /// The round.
    pub round: u64,
    /// The solver.
    pub solver_wallet: Address,
    /// `artifact_hash`.
    pub submission_hash: Bytes32,
    /// `evidence_hash`.
    pub evidence_hash: Bytes32,
    /// `terms_hash`.
    pub terms_hash: Bytes32,
    /// `terms.policy_hash`.
    pub committed_policy_hash: Bytes32,
    /// `verification_expires_at`.
    pub verification_expires_at: u64,
}

/// Why a job was rejected. Each variant names the rule and the field that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    /// A value that must be an object is not.
    #[error("{field} is not a json object")]
    NotAnObject {
        /// Path of the value.
        field: &'static str,
    },
    /// A required field is absent (or null).
    #[error("{field} is missing")]
    Missing {
        /// Path of the field.
        field: &'static str,
    },
    /// A field has the wrong JSON type or does not fit its integer type.
    #[error("{field} must be {expected}")]
    WrongType {
        /// Path of the field.
        field: &'static str,
        /// What was expected.
        expected: &'static str,
    },
    /// `job_id` breaks `[A-Za-z0-9_.:-]{1,200}`.
    #[error("job_id must match [A-Za-z0-9_.:-]{{1,200}}")]
    JobId,
    /// A network name is not an alias of a supported chain.
    #[error("{field} {value:?} is not a supported network")]
    UnknownNetwork {
        /// Path of the field.
        field: &'static str,
        /// The value (truncated).
        value: String,
    },
    /// A network resolves to a different chain than the job's.
    #[error("{field} resolves to chain {found}, the job is on chain {expected}")]
    NetworkMismatch {
        /// Path of the field.
        field: &'static str,
        /// The job's chain id.
        expected: u64,
        /// This field's chain id.
        found: u64,
    },
    /// `terms.document.schema_version` is not [`TERMS_SCHEMA_VERSION`].
    #[error("terms.document.schema_version is not {TERMS_SCHEMA_VERSION}")]
    TermsSchemaVersion,
    /// `verification_mode` is not `signed_quorum`.
    #[error("verification_mode must be signed_quorum")]
    VerificationMode,
    /// A verifier module is set.
    #[error("verifier_module must be null or absent")]
    VerifierModule,
    /// `threshold` is zero.
    #[error("threshold must be at least 1")]
    ThresholdZero,
    /// `threshold` differs from the number of eligible verifiers.
    #[error("threshold {threshold} differs from the {verifiers} eligible verifiers")]
    ThresholdMismatch {
        /// The threshold.
        threshold: u64,
        /// Number of eligible verifiers.
        verifiers: usize,
    },
    /// An address field is malformed.
    #[error("{field} is not a 0x-prefixed 20-byte address")]
    InvalidAddress {
        /// Path of the field.
        field: &'static str,
    },
    /// A bytes32 field is malformed.
    #[error("{field} is not a 0x-prefixed 32-byte hex value")]
    InvalidBytes32 {
        /// Path of the field.
        field: &'static str,
    },
    /// An eligible verifier appears twice.
    #[error("eligible verifier {0} appears more than once")]
    DuplicateVerifier(Address),
    /// `round` is zero.
    #[error("round must be greater than zero")]
    RoundZero,
    /// The job's verification window has closed.
    #[error("job expired at {expires_at} (now {now})")]
    Expired {
        /// `verification_expires_at`.
        expires_at: u64,
        /// The injected clock.
        now: u64,
    },
    /// A committed hash does not equal its recomputation.
    #[error("{field} does not match its recomputation {computed}")]
    HashMismatch {
        /// Path of the hash field.
        field: &'static str,
        /// What the sdk computed.
        computed: Bytes32,
    },
    /// The evidence's scope differs from the job's.
    #[error("submission_evidence.{field} differs from the job's {field}")]
    ScopeMismatch {
        /// The differing field.
        field: &'static str,
    },
    /// `artifact_reference` is not an exact GitHub commit URL.
    #[error(
        "artifact_reference is not https://github.com/<owner>/<repo>/commit/<40 lowercase hex>: {0}"
    )]
    ArtifactReference(&'static str),
    /// The verification policy disagrees with the job.
    #[error("verification_policy.{field} does not match the job")]
    PolicyMismatch {
        /// The differing field.
        field: &'static str,
    },
    /// An engine name is not [`ENGINE`].
    #[error("{field} must be {ENGINE}")]
    Engine {
        /// Path of the field.
        field: &'static str,
    },
    /// `benchmark.source` breaks a rule; the reason says which.
    #[error("benchmark.source is invalid: {0}")]
    BenchmarkSource(&'static str),
    /// A subdirectory is not a normalized relative path.
    #[error("{field} is not a normalized relative path")]
    Subdirectory {
        /// Path of the field.
        field: &'static str,
    },
    /// `evidence.source_snapshot_digest` is not `sha256:<64 lowercase hex>`.
    #[error("submission_evidence.evidence.source_snapshot_digest is not sha256:<64 lowercase hex>")]
    SourceSnapshotDigest,
    /// The runner manifest is invalid.
    #[error("benchmark.runner_manifest: {0}")]
    Manifest(#[from] ManifestError),
}

/// The five terms hashes a bounty commits to on chain (`termsHash()`, `policyHash()`,
/// `acceptanceCriteriaHash()`, `benchmarkHash()`, `evidenceSchemaHash()`), each recomputed
/// over the job's terms document (PROTOCOL §2 rule 3). One type for the job's side and the
/// chain's: the signer and the keeper compare the two field by field, since the attestation
/// digest binds only the policy hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TermsCommitment {
    /// `terms.terms_hash`: of the whole terms document.
    pub terms_hash: Bytes32,
    /// `terms.policy_hash`.
    pub policy_hash: Bytes32,
    /// `terms.acceptance_criteria_hash`.
    pub acceptance_criteria_hash: Bytes32,
    /// `terms.benchmark_hash`.
    pub benchmark_hash: Bytes32,
    /// `terms.evidence_schema_hash`.
    pub evidence_schema_hash: Bytes32,
}

/// A job that passed every structural rule of PROTOCOL §2. Built only by
/// [`ValidatedJob::parse`] (which does not look at the clock, so an expired job's fields can
/// still be read, e.g. to find its settlement record) and [`validate_job`] (parse, then
/// [`ValidatedJob::check_live`]). A job may run or be signed only after `check_live`.
#[derive(Debug, Clone)]
pub struct ValidatedJob {
    raw: Value,
    job_id: String,
    network: Network,
    scope: Scope,
    bounty_id: Bytes32,
    commitment: TermsCommitment,
    eligible_verifiers: Vec<Address>,
    threshold: u8,
    manifest: RunnerManifest,
    source_snapshot_digest: Sha256Digest,
    benchmark_source: BenchmarkSource,
    source: SourceRef,
    source_subdirectory: RelativeDir,
}

impl ValidatedJob {
    /// Checks every rule of PROTOCOL §2 except liveness, once per process: the stages after
    /// it read the typed fields instead of parsing the raw job again.
    pub fn parse(raw: &Value) -> Result<Self, JobError> {
        rules::parse_job(raw)
    }
    /// The liveness rule: the verification window is still open at `now_unix`.
    pub fn check_live(&self, now_unix: u64) -> Result<(), JobError> {
        if self.is_live(now_unix) {
            Ok(())
        } else {
            Err(JobError::Expired {
                expires_at: self.expires_at(),
                now: now_unix,
            })
        }
    }
    /// The job exactly as received.
    pub fn raw(&self) -> &Value {
        &self.raw
    }
    /// `job_id`.
    pub fn job_id(&self) -> &str {
        &self.job_id
    }
    /// The network.
    pub fn network(&self) -> Network {
        self.network
    }
    /// The chain id (8453 or 84532).
    pub fn chain_id(&self) -> u64 {
        self.network.chain_id()
    }
    /// The receipt scope (PROTOCOL §2 order).
    pub fn scope(&self) -> &Scope {
        &self.scope
    }
    /// The bounty contract (one contract per bounty; the EIP-712 verifying contract).
    pub fn bounty_contract(&self) -> Address {
        self.scope.bounty_contract
    }
    /// `bounty_id` as bytes.
    pub fn bounty_id(&self) -> Bytes32 {
        self.bounty_id
    }
    /// `round`.
    pub fn round(&self) -> u64 {
        self.scope.round
    }
    /// `solver_wallet`.
    pub fn solver(&self) -> Address {
        self.scope.solver_wallet
    }
    /// `artifact_hash`, the on-chain submission hash.
    pub fn submission_hash(&self) -> Bytes32 {
        self.scope.submission_hash
    }
    /// `evidence_hash`.
    pub fn evidence_hash(&self) -> Bytes32 {
        self.scope.evidence_hash
    }
    /// The five terms hashes the bounty must hold on chain.
    pub fn commitment(&self) -> &TermsCommitment {
        &self.commitment
    }
    /// `terms.policy_hash`.
    pub fn policy_hash(&self) -> Bytes32 {
        self.commitment.policy_hash
    }
    /// `terms.terms_hash`.
    pub fn terms_hash(&self) -> Bytes32 {
        self.commitment.terms_hash
    }
    /// `terms.acceptance_criteria_hash`.
    pub fn acceptance_criteria_hash(&self) -> Bytes32 {
        self.commitment.acceptance_criteria_hash
    }
    /// `terms.benchmark_hash`.
    pub fn benchmark_hash(&self) -> Bytes32 {
        self.commitment.benchmark_hash
    }
    /// `terms.evidence_schema_hash`.
    pub fn evidence_schema_hash(&self) -> Bytes32 {
        self.commitment.evidence_schema_hash
    }
    /// `verification_expires_at` (unix seconds; dead at or after it).
    pub fn expires_at(&self) -> u64 {
        self.scope.verification_expires_at
    }
    /// Eligible verifiers in policy order.
    pub fn eligible_verifiers(&self) -> &[Address] {
        &self.eligible_verifiers
    }
    /// The quorum threshold (equal to the number of verifiers).
    pub fn threshold(&self) -> u8 {
        self.threshold
    }
    /// The validated runner manifest.
    pub fn manifest(&self) -> &RunnerManifest {
        &self.manifest
    }
    /// `evidence.source_snapshot_digest`: the staged source must hash to this.
    pub fn source_snapshot_digest(&self) -> Sha256Digest {
        self.source_snapshot_digest
    }
    /// `benchmark.source`.
    pub fn benchmark_source(&self) -> &BenchmarkSource {
        &self.benchmark_source
    }
    /// Repository and commit of the solver's source, from `artifact_reference`.
    pub fn source(&self) -> &SourceRef {
        &self.source
    }
    /// `evidence.source_subdirectory` (default `.`).
    pub fn source_subdirectory(&self) -> &RelativeDir {
        &self.source_subdirectory
    }
    /// Whether the job is still open at `now_unix`.
    pub fn is_live(&self, now_unix: u64) -> bool {
        now_unix < self.expires_at()
    }
}

fn valid_job_id(s: &str) -> bool {
    (1..=MAX_JOB_ID_LEN).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
}

/// Parses `https://github.com/<owner>/<repo>/commit/<40 lowercase hex>` exactly.
pub fn parse_artifact_reference(s: &str) -> Result<SourceRef, JobError> {
    let rest = s
        .strip_prefix("https://github.com/")
        .ok_or(JobError::ArtifactReference(
            "must start with https://github.com/",
        ))?;
    if rest.contains(['?', '#', '@']) {
        return Err(JobError::ArtifactReference(
            "must not contain userinfo, a query or a fragment",
        ));
    }
    let mut parts = rest.split('/');
    let (Some(owner), Some(repo), Some(kind), Some(sha), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return Err(JobError::ArtifactReference(
            "must have exactly owner, repo, commit and sha segments",
        ));
    };
    if kind != "commit" {
        return Err(JobError::ArtifactReference("third segment must be commit"));
    }
    let repository = GithubRepo::new(owner, repo).ok_or(JobError::ArtifactReference(
        "owner or repository name is invalid",
    ))?;
    let commit = CommitId::parse(sha, false).ok_or(JobError::ArtifactReference(
        "commit must be 40 lowercase hex digits",
    ))?;
    Ok(SourceRef { repository, commit })
}

/// A feed entry of the platform's other verification mode: a valid job that is not ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OtherVerificationMode {
    /// The entry's `verification_mode`, one of the platform's modes we do not serve.
    pub mode: &'static str,
}

impl OtherVerificationMode {
    /// The stable reason code every reader reports it under (a skip, never a rejection).
    pub const CODE: &'static str = "other_verification_mode";
}

impl fmt::Display for OtherVerificationMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "verification_mode {}: the platform's other verification mode (an on-chain \
             verifier module decides it, no quorum signs it); not a {SIGNED_QUORUM} job, so \
             nothing here runs or signs it",
            self.mode
        )
    }
}

/// Whether a raw feed entry is a job of the platform's other verification mode
/// ([`DETERMINISTIC_MODULE`]), read before any validation: every reader of a feed or of a job
/// from one (the worker's feed and serve, `reproduce`, the signer) asks this first and skips
/// such a job with [`OtherVerificationMode::CODE`], instead of rejecting a valid job that is
/// simply not ours. Any other value, `signed_quorum` or not, is `None` and left to
/// [`ValidatedJob::parse`], which rejects an unknown mode (fail closed: only a mode the
/// platform is known to serve is passed over quietly).
pub fn other_verification_mode(raw: &Value) -> Option<OtherVerificationMode> {
    (raw.get("verification_mode").and_then(Value::as_str) == Some(DETERMINISTIC_MODULE)).then_some(
        OtherVerificationMode {
            mode: DETERMINISTIC_MODULE,
        },
    )
}

/// Validates a job against every rule of PROTOCOL §2 with `now_unix` as the clock:
/// [`ValidatedJob::parse`], then [`ValidatedJob::check_live`].
pub fn validate_job(raw: &Value, now_unix: u64) -> Result<ValidatedJob, JobError> {
    let job = ValidatedJob::parse(raw)?;
    job.check_live(now_unix)?;
    Ok(job)
}

#[cfg(test)]
mod tests;
