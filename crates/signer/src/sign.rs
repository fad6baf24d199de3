//! Signing every candidate of a run: the per-candidate checks in order, then signing and
//! writing, each candidate isolated so one bad candidate never blocks the others.
//!
//! Order per candidate: the manifest entry and the file agree on the job id; a job of the
//! platform's other verification mode (`deterministic_module`) is not ours (code
//! `other_verification_mode`, before any rule reads it); this signer is an eligible verifier
//! of the candidate's job (else "not ours", not a refusal: a slot signs only jobs committed
//! to its own address); the candidate carries the worker's evidence record
//! (a reference-runner candidate has none and is refused, naming that); the current
//! job is re-fetched and the candidate revalidated against it and against the chain at one
//! pinned block ([`bounty_chain::revalidate`]); `isVerifier(signer)` at that block; the
//! deadline rule; the local EIP-712 digest must equal the contract's `attestationDigest` at
//! that block; the local digest is signed and the signature must recover to the signer before
//! anything is written. Between the digest check and the signature the signing history is
//! asked ([`crate::history`]): the other verdict already signed for the same scope refuses the
//! candidate (code `contradicts_history`); the same verdict already signed, with its deadline
//! still usable, returns the stored signature and signs nothing; otherwise the new signature
//! is committed to the history before its attestation is written.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use bounty_chain::{
    AttestationQuery, ChainReadError, ChainReader, CheckedCandidate, JobSource, Refusal,
    refetch_and_revalidate,
};
use serde::Serialize;
use serde_json::Value;
use verifier_sdk::artifacts::ATTESTATION_SCHEMA;
use verifier_sdk::{
    Address, ArtifactError, AttestationFields, AttestationFile, AttestationManifest,
    AttestationManifestEntry, AttestationSignature, Bytes32, Candidate, CandidateEntry,
    CandidateManifest, DeadlineError, EvidenceError, JobError, Network, ParsedCandidate,
    SignatureError, attestation_deadline, attestation_digest, check_required_runtime,
    recover_signer,
};

use crate::exit::ExitCode;
use crate::files::{FileError, MAX_CANDIDATE_BYTES, MAX_MANIFEST_BYTES, read_json, write_json};
use crate::history::{History, HistoryError, Prior, Scope, SignedRecord, describe};
use crate::key::{AttestationKey, KeySignError, RemoteError};

/// Name of the candidate manifest inside the candidates directory.
pub const CANDIDATE_MANIFEST_FILE: &str = "manifest.json";
pub use verifier_sdk::artifacts::{
    ATTESTATION_MANIFEST_FILE, ATTESTATION_MANIFEST_SCHEMA, REFERENCE_ATTESTATION_MANIFEST_FILE,
    attestation_file_name,
};
/// `schema` of the run report.
pub const REPORT_SCHEMA: &str = "agent-bounties/regression-signer-report-v1";

/// What one run signs and where.
#[derive(Debug, Clone)]
pub struct SignConfig {
    /// Directory holding `manifest.json` and the candidate files.
    pub candidates_dir: PathBuf,
    /// Directory the attestations, their manifest are written to (created if absent).
    pub out_dir: PathBuf,
    /// The verifier address this run signs as; must be the key's address.
    pub signer: Address,
    /// The network the manifest must be for.
    pub network: Network,
    /// The most candidates one run handles:
    /// [`verifier_sdk::MAX_MANIFEST_CANDIDATES`], the bound the producers write to (tests
    /// inject a smaller one). Of a longer manifest the earliest-expiring are handled and the
    /// rest reported as deferred.
    pub max_candidates: usize,
    /// `--require-oci-runtime`: the OCI runtime every signed run must have used; `None`
    /// accepts either runtime the sandbox supports.
    pub require_oci_runtime: Option<String>,
}

/// Why the whole run could not proceed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The candidates directory or its manifest is unusable.
    #[error("invalid candidates input: {0}")]
    InvalidInput(String),
    /// The key does not belong to the configured signer address.
    #[error("the key's address {key} is not the configured signer {signer}")]
    KeyMismatch {
        /// The key's address.
        key: Address,
        /// `--signer`.
        signer: Address,
    },
    /// The output could not be written.
    #[error("writing output failed: {0}")]
    Output(#[source] FileError),
    /// The signing history could not be read or written: nothing more is signed, and what
    /// was signed but not recorded never leaves the process.
    #[error("signing history: {0}")]
    History(#[source] HistoryError),
}

impl RunError {
    /// The exit code this failure maps to.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Self::InvalidInput(_) => ExitCode::InvalidInput,
            Self::KeyMismatch { .. } => ExitCode::Config,
            Self::Output(_) | Self::History(_) => ExitCode::Internal,
        }
    }
}

/// Why one candidate was not signed.
#[derive(Debug, thiserror::Error)]
pub enum CandidateRefusal {
    /// The manifest lists the same job id twice.
    #[error("the manifest lists this job id more than once")]
    DuplicateEntry,
    /// The candidate file is unreadable.
    #[error("candidate file: {0}")]
    File(#[source] FileError),
    /// The candidate file is not a candidate.
    #[error("candidate: {0}")]
    Malformed(#[source] ArtifactError),
    /// The candidate's job id is not the manifest entry's.
    #[error("candidate job id does not match its manifest entry")]
    JobIdMismatch,
    /// The candidate's job does not validate.
    #[error("candidate job is invalid: {0}")]
    CandidateJob(#[source] JobError),
    /// Revalidation against the feed and the chain failed.
    #[error(transparent)]
    Revalidation(#[from] Refusal),
    /// A read at the pinned block failed.
    #[error("reading the bounty failed: {0}")]
    ChainRead(#[source] ChainReadError),
    /// `isVerifier(signer)` is false at the pinned block.
    #[error("the contract does not list this signer as a verifier")]
    NotOnChainVerifier,
    /// The candidate carries no evidence record: the reference runner writes candidates in
    /// this shape, and this signer signs only what the worker's evidence record backs.
    #[error(
        "reference-runner candidate without evidence: this signer requires the worker's evidence \
         record (run the job with this repository's `worker feed`, which writes it)"
    )]
    WithoutEvidence,
    /// The evidence does not show a run under the OCI runtime `--require-oci-runtime` names.
    #[error("--require-oci-runtime {required}: {source}")]
    OciRuntime {
        /// The required runtime.
        required: String,
        /// Why the evidence does not show it.
        #[source]
        source: EvidenceError,
    },
    /// Too little time is left to sign.
    #[error(transparent)]
    Deadline(#[from] DeadlineError),
    /// The contract's `attestationDigest` differs from the local EIP-712 digest.
    #[error("contract attestationDigest {onchain} differs from the local digest {local}")]
    DigestMismatch {
        /// Computed locally from the checked job and outcome.
        local: Bytes32,
        /// What the RPC returned.
        onchain: Bytes32,
    },
    /// The fresh signature failed its own check (shape or recovery).
    #[error("the signature failed its own check: {0}")]
    SignatureCheck(String),
    /// This key already signed the other verdict for the same scope (chain, contract, bounty
    /// id, round, submission): signing now would contradict it.
    #[error(
        "refusing to contradict an earlier signature of this key for the same submission: {}",
        describe(.0)
    )]
    ContradictsHistory(Box<SignedRecord>),
    /// The remote signer did not answer (a retry may sign it).
    #[error("{0}")]
    RemoteUnavailable(String),
    /// The signing history failed (the run stops; see [`RunError::History`]).
    #[error("signing history: {0}")]
    History(#[source] HistoryError),
}

impl CandidateRefusal {
    /// A stable snake_case code for reports; never renamed.
    pub fn code(&self) -> &'static str {
        match self {
            Self::DuplicateEntry => "duplicate_entry",
            Self::File(_) => "candidate_unreadable",
            Self::Malformed(_) => "candidate_malformed",
            Self::JobIdMismatch => "candidate_job_id_mismatch",
            Self::CandidateJob(_) => "candidate_job_invalid",
            Self::Revalidation(r) => r.code(),
            Self::ChainRead(_) => "chain_read_failed",
            Self::NotOnChainVerifier => "not_onchain_verifier",
            // The code the sdk's re-check gives a missing record, kept so reports and alerts
            // that match on it still do; the detail names the cause.
            Self::WithoutEvidence => "evidence_rejected",
            Self::OciRuntime { .. } => "oci_runtime_refused",
            Self::Deadline(_) => "deadline_too_close",
            Self::DigestMismatch { .. } => "digest_mismatch",
            Self::SignatureCheck(_) => "signature_check_failed",
            Self::ContradictsHistory(_) => CONTRADICTS_HISTORY,
            Self::History(_) => "history_failed",
            Self::RemoteUnavailable(_) => "remote_signer_unavailable",
        }
    }

    /// Whether an unavailable RPC or API caused it (a retry may succeed).
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::Revalidation(r) => r.is_unavailable(),
            Self::ChainRead(e) => e.is_transient(),
            Self::RemoteUnavailable(_) => true,
            _ => false,
        }
    }
}

/// The refusal code of a candidate whose verdict contradicts the signing history.
pub const CONTRADICTS_HISTORY: &str = "contradicts_history";

/// What happened to one candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CandidateStatus {
    /// An attestation was written.
    Signed,
    /// This signer is not an eligible verifier of the job.
    NotOurs,
    /// Refused; see the code.
    Refused,
    /// Not looked at: the manifest lists more than the bound, and this candidate expires later
    /// than those handled (code `manifest_bound`). The next run offers it again.
    Deferred,
    /// The RPC or API was unavailable; see the code.
    Unavailable,
}

/// One candidate's line in the report.
#[derive(Debug, Clone, Serialize)]
pub struct CandidateReport {
    /// The manifest entry's job id.
    pub job_id: String,
    /// What happened.
    pub status: CandidateStatus,
    /// Refusal code, when refused or unavailable; `other_verification_mode` for a job of the
    /// platform's other verification mode (not ours).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
    /// On-chain mismatch codes, when the code is `onchain_mismatch`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mismatches: Vec<&'static str>,
    /// Human-readable reason, when refused or unavailable (or not ours by its mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The attestation file written, when signed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attestation_file: Option<String>,
    /// The verdict signed, when signed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passed: Option<bool>,
    /// The deadline signed, when signed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<u64>,
    /// True when the attestation is the signing history's stored one for this scope and
    /// verdict (nothing new was signed).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub from_history: bool,
}

/// The run report (stdout with `--json`).
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// [`REPORT_SCHEMA`].
    pub schema: &'static str,
    /// The network.
    pub network: &'static str,
    /// The signer address.
    pub signer: Address,
    /// One entry per manifest entry: in manifest order, or, for a manifest longer than the
    /// bound, those handled in expiry order and then the deferred ones.
    pub candidates: Vec<CandidateReport>,
    /// How many were signed.
    pub signed: usize,
    /// How many were not ours.
    pub not_ours: usize,
    /// How many were refused.
    pub refused: usize,
    /// How many hit an unavailable service.
    pub unavailable: usize,
    /// How many were deferred past the manifest bound.
    pub deferred: usize,
    /// How many of the refused contradicted the signing history (code `contradicts_history`).
    pub contradictions: usize,
}

impl RunReport {
    /// 10 when any candidate contradicted the signing history (an operator must look, before
    /// anything else), else 5 when any hit an unavailable service, else 3 when any was
    /// refused, else 0 (a deferred candidate is not a failure: the next run offers it again).
    pub fn exit_code(&self) -> ExitCode {
        if self.contradictions > 0 {
            ExitCode::ContradictsHistory
        } else if self.unavailable > 0 {
            ExitCode::Unavailable
        } else if self.refused > 0 {
            ExitCode::NotDone
        } else {
            ExitCode::Success
        }
    }

    /// The human summary for stderr.
    pub fn summary(&self) -> String {
        let mut out = format!(
            "signer {} on {}: {} signed, {} not ours, {} refused, {} unavailable",
            self.signer, self.network, self.signed, self.not_ours, self.refused, self.unavailable
        );
        if self.deferred > 0 {
            out.push_str(&format!(
                ", {} deferred (warning: the manifest lists more than {} candidates; the \
                 earliest-expiring were handled, the rest wait for the next run)",
                self.deferred,
                self.candidates.len() - self.deferred
            ));
        }
        out.push('\n');
        for c in &self.candidates {
            let status = match c.status {
                CandidateStatus::Signed => "signed",
                CandidateStatus::NotOurs => "not ours",
                CandidateStatus::Refused => "refused",
                CandidateStatus::Deferred => "deferred",
                CandidateStatus::Unavailable => "unavailable",
            };
            out.push_str(&format!("  {} {status}", c.job_id));
            if let Some(code) = c.code {
                out.push_str(&format!(" [{code}]"));
            }
            if let Some(detail) = &c.detail {
                out.push_str(&format!(": {detail}"));
            }
            out.push('\n');
        }
        out
    }
}

fn read_manifest(cfg: &SignConfig) -> Result<CandidateManifest, RunError> {
    let path = cfg.candidates_dir.join(CANDIDATE_MANIFEST_FILE);
    let raw =
        read_json(&path, MAX_MANIFEST_BYTES).map_err(|e| RunError::InvalidInput(e.to_string()))?;
    let manifest = CandidateManifest::from_value(&raw)
        .map_err(|e| RunError::InvalidInput(format!("{}: {e}", path.display())))?;
    if Network::from_alias(&manifest.network) != Some(cfg.network) {
        return Err(RunError::InvalidInput(format!(
            "manifest is for network {:?}, not {}",
            manifest.network.chars().take(64).collect::<String>(),
            cfg.network
        )));
    }
    Ok(manifest)
}

/// The `verification_expires_at` of an entry's candidate, for ordering an over-long manifest;
/// `None` when the file does not read as a candidate (it then sorts last, and is refused if
/// it is reached at all).
fn candidate_expiry(cfg: &SignConfig, entry: &CandidateEntry) -> Option<u64> {
    let raw = read_json(&cfg.candidates_dir.join(&entry.file), MAX_CANDIDATE_BYTES).ok()?;
    let candidate = Candidate::from_value(&raw).ok()?;
    Some(ParsedCandidate::parse(candidate).ok()?.job().expires_at())
}

/// A signed attestation ready to be written.
struct Signed {
    file: AttestationFile,
    file_name: String,
    /// The candidate signed, written next to the attestation: with independent execution it is
    /// the slot's own run, whose response hash the keeper must be able to check.
    candidate: Value,
    /// The history's stored signature, not a new one.
    from_history: bool,
}

enum Decision {
    /// Not ours; with the mode when the job is of the platform's other verification mode
    /// (reported with its code).
    NotOurs(Option<verifier_sdk::OtherVerificationMode>),
    Sign(Box<Signed>),
}

#[allow(clippy::too_many_arguments)] // the run's parts, each borrowed once
async fn check_and_sign(
    cfg: &SignConfig,
    entry: &CandidateEntry,
    key: &AttestationKey,
    history: &mut History,
    source: &impl JobSource,
    reader: &impl ChainReader,
    now: u64,
) -> Result<Decision, CandidateRefusal> {
    // The manifest constructor already checked that the file name derives from the job id,
    // so the join below cannot leave the candidates directory.
    let raw = read_json(&cfg.candidates_dir.join(&entry.file), MAX_CANDIDATE_BYTES)
        .map_err(CandidateRefusal::File)?;
    let candidate = Candidate::from_value(&raw).map_err(CandidateRefusal::Malformed)?;
    if candidate.job.get("job_id").and_then(Value::as_str) != Some(entry.job_id.as_str()) {
        return Err(CandidateRefusal::JobIdMismatch);
    }
    // Before any rule reads the job: another verification mode's job is valid but not ours.
    if let Some(other) = verifier_sdk::other_verification_mode(&candidate.job) {
        return Ok(Decision::NotOurs(Some(other)));
    }
    // Parsed once here; the re-check below works on the parsed job.
    let candidate = ParsedCandidate::parse(candidate).map_err(CandidateRefusal::CandidateJob)?;
    let claimed = candidate.job();
    claimed
        .check_live(now)
        .map_err(CandidateRefusal::CandidateJob)?;
    if !claimed.eligible_verifiers().contains(&cfg.signer) {
        return Ok(Decision::NotOurs(None));
    }
    // Before the feed or the chain is asked: the re-check below would refuse it anyway, with a
    // message that does not say where such a candidate comes from.
    if candidate.candidate().evidence.is_none() {
        return Err(CandidateRefusal::WithoutEvidence);
    }
    // The operator's requirement, also before the feed or the chain is asked: no answer of
    // theirs can make a run under another runtime acceptable.
    if let Some(required) = &cfg.require_oci_runtime {
        check_required_runtime(candidate.candidate().evidence.as_ref(), required).map_err(
            |source| CandidateRefusal::OciRuntime {
                required: required.clone(),
                source,
            },
        )?;
    }

    let CheckedCandidate {
        job,
        outcome,
        state,
    } = refetch_and_revalidate(&candidate, source, reader, now).await?;
    let bounty = job.bounty_contract();
    let block = state.block_number;

    let listed = reader
        .is_verifier(bounty, block, cfg.signer)
        .await
        .map_err(CandidateRefusal::ChainRead)?;
    if !listed {
        return Err(CandidateRefusal::NotOnChainVerifier);
    }

    // The contract checks the deadline against `block.timestamp`, which can run ahead of this
    // machine's clock (a node that mines faster than wall time, or a local clock running
    // late): count from whichever is later, so the keeper and the contract still see the
    // deadline's full margin.
    let now = now.max(state.block_timestamp);
    let deadline = attestation_deadline(now, job.expires_at())?;
    let fields = AttestationFields::for_outcome(&job, &outcome, cfg.signer, deadline);
    let local = attestation_digest(state.chain_id, &fields);
    let onchain = reader
        .attestation_digest(
            bounty,
            block,
            AttestationQuery {
                verifier: cfg.signer,
                passed: fields.passed,
                response_hash: fields.response_hash,
                deadline,
            },
        )
        .await
        .map_err(CandidateRefusal::ChainRead)?;
    if onchain != local {
        return Err(CandidateRefusal::DigestMismatch { local, onchain });
    }

    let scope = Scope {
        chain_id: state.chain_id,
        verifying_contract: bounty,
        bounty_id: fields.bounty_id,
        round: fields.round,
        submission_hash: fields.submission_hash,
    };
    match history
        .prior(cfg.signer, &scope, fields.passed)
        .map_err(CandidateRefusal::History)?
    {
        Prior::Contradicts(earlier) => return Err(CandidateRefusal::ContradictsHistory(earlier)),
        Prior::Same(stored, Some(text)) => {
            if let Some(signed) = reuse(cfg, entry, &job, &fields, &stored, &text, now) {
                return Ok(Decision::Sign(Box::new(signed)));
            }
        }
        // The same verdict without a stored candidate (imported), or past its deadline: a new
        // signature of the same verdict contradicts nothing.
        Prior::Same(_, None) | Prior::None => {}
    }

    let candidate_text =
        serde_json::to_string(&raw).map_err(|e| CandidateRefusal::SignatureCheck(e.to_string()))?;
    let signature = sign_and_record(
        cfg,
        key,
        history,
        SignedRecordInput {
            chain_id: state.chain_id,
            fields: &fields,
            digest: local,
            candidate: &candidate_text,
            now,
        },
    )
    .await?;

    Ok(Decision::Sign(Box::new(Signed {
        file_name: attestation_file_name(job.job_id(), &cfg.signer),
        file: AttestationFile {
            schema: ATTESTATION_SCHEMA.into(),
            job_id: job.job_id().to_owned(),
            bounty_contract: bounty,
            verifier: cfg.signer,
            passed: fields.passed,
            response_hash: fields.response_hash,
            deadline,
            signature: signature.to_hex(),
            candidate_file: entry.file.clone(),
        },
        candidate: raw,
        from_history: false,
    })))
}

/// What a new signature is over, and the candidate it signs.
#[derive(Clone, Copy)]
struct SignedRecordInput<'a> {
    chain_id: u64,
    fields: &'a AttestationFields,
    digest: Bytes32,
    candidate: &'a str,
    now: u64,
}

/// Signs the digest, checks the signature recovers to the signer, and commits it to the
/// history; only then may it be written.
async fn sign_and_record(
    cfg: &SignConfig,
    key: &AttestationKey,
    history: &mut History,
    input: SignedRecordInput<'_>,
) -> Result<AttestationSignature, CandidateRefusal> {
    let raw_sig = key
        .sign(input.chain_id, input.fields, &input.digest)
        .await
        .map_err(|e| match e {
            KeySignError::Remote(r @ RemoteError::Request(_)) => {
                CandidateRefusal::RemoteUnavailable(r.to_string())
            }
            other => CandidateRefusal::SignatureCheck(other.to_string()),
        })?;
    let signature = AttestationSignature::from_slice(&raw_sig)
        .map_err(|e: SignatureError| CandidateRefusal::SignatureCheck(e.to_string()))?;
    let recovered = recover_signer(&input.digest, &signature)
        .map_err(|e| CandidateRefusal::SignatureCheck(e.to_string()))?;
    if recovered != cfg.signer {
        return Err(CandidateRefusal::SignatureCheck(format!(
            "recovers to {recovered}, not {}",
            cfg.signer
        )));
    }
    // Committed (on disk) before the attestation is written: a crash after this line leaves a
    // record the next run honours, never a signature the history does not know.
    let record = SignedRecord::verified(
        input.chain_id,
        input.fields,
        input.digest,
        signature,
        input.now,
    )
    .map_err(|e| CandidateRefusal::SignatureCheck(e.to_string()))?;
    history
        .record(&record, Some(input.candidate))
        .map_err(|e| match e {
            HistoryError::Contradiction { earlier } => {
                CandidateRefusal::ContradictsHistory(earlier)
            }
            other => CandidateRefusal::History(other),
        })?;
    Ok(signature)
}

/// The stored attestation of `stored` for this candidate's entry, when it can still be used:
/// its candidate is of this job, it commits to the evidence and policy hashes the contract
/// holds now (`fields`, just checked against `attestationDigest`), and its deadline leaves the
/// margin the keeper needs. Otherwise a new signature of the same verdict is made: it
/// contradicts nothing.
fn reuse(
    cfg: &SignConfig,
    entry: &CandidateEntry,
    job: &verifier_sdk::ValidatedJob,
    fields: &AttestationFields,
    stored: &SignedRecord,
    candidate_text: &str,
    now: u64,
) -> Option<Signed> {
    if stored.deadline() <= now.saturating_add(verifier_sdk::artifacts::MIN_DEADLINE_MARGIN_SECS) {
        return None;
    }
    let was = stored.fields();
    if was.evidence_hash != fields.evidence_hash || was.policy_hash != fields.policy_hash {
        return None;
    }
    let candidate: Value = serde_json::from_str(candidate_text).ok()?;
    if candidate
        .get("job")
        .and_then(|j| j.get("job_id"))
        .and_then(Value::as_str)
        != Some(job.job_id())
    {
        return None;
    }
    Some(Signed {
        file_name: attestation_file_name(job.job_id(), &cfg.signer),
        file: AttestationFile {
            schema: ATTESTATION_SCHEMA.into(),
            job_id: job.job_id().to_owned(),
            bounty_contract: stored.scope().verifying_contract,
            verifier: cfg.signer,
            passed: stored.passed(),
            response_hash: stored.response_hash(),
            deadline: stored.deadline(),
            signature: stored.signature().to_hex(),
            candidate_file: entry.file.clone(),
        },
        candidate,
        from_history: true,
    })
}

fn write_attestation(out_dir: &Path, signed: &Signed) -> Result<(), FileError> {
    let value = serde_json::to_value(&signed.file).map_err(|e| FileError::Json {
        path: out_dir.join(&signed.file_name),
        detail: e.to_string(),
    })?;
    // Re-parse what is about to be written with the keeper's strict reader.
    if let Err(e) = AttestationFile::from_value(&value) {
        return Err(FileError::Json {
            path: out_dir.join(&signed.file_name),
            detail: e.to_string(),
        });
    }
    write_json(out_dir, &signed.file_name, &value).map(|_| ())
}

/// Signs every candidate listed in `cfg.candidates_dir/manifest.json` at unix time `now`,
/// writing one attestation per signed candidate and an attestation manifest to
/// `cfg.out_dir`. Per-candidate failures are in the report; only an unusable manifest, a key
/// for another address or an unwritable output directory fail the run.
pub async fn sign_candidates(
    cfg: &SignConfig,
    key: &AttestationKey,
    history: &mut History,
    source: &impl JobSource,
    reader: &impl ChainReader,
    now: u64,
) -> Result<RunReport, RunError> {
    let key_address = key.address();
    if key_address != cfg.signer {
        return Err(RunError::KeyMismatch {
            key: key_address,
            signer: cfg.signer,
        });
    }
    let mut manifest = read_manifest(cfg)?;
    // Past the bound: the earliest-expiring first, as every producer writes them, and never
    // nothing signed.
    let deferred = manifest.keep_earliest(cfg.max_candidates, |e| candidate_expiry(cfg, e));
    if !deferred.is_empty() {
        tracing::warn!(
            listed = manifest.candidates.len() + deferred.len(),
            bound = cfg.max_candidates,
            deferred = deferred.len(),
            "the manifest lists more candidates than the bound; the rest are deferred"
        );
    }
    std::fs::create_dir_all(&cfg.out_dir).map_err(|e| {
        RunError::Output(FileError::Io {
            path: cfg.out_dir.clone(),
            source: e,
        })
    })?;

    let mut report = RunReport {
        schema: REPORT_SCHEMA,
        network: cfg.network.name(),
        signer: cfg.signer,
        candidates: Vec::new(),
        signed: 0,
        not_ours: 0,
        refused: 0,
        unavailable: 0,
        deferred: 0,
        contradictions: 0,
    };
    let mut written = AttestationManifest::new(cfg.network.name(), cfg.signer);
    let mut seen = HashSet::new();
    for entry in &manifest.candidates {
        let result = if seen.insert(entry.job_id.as_str()) {
            check_and_sign(cfg, entry, key, history, source, reader, now).await
        } else {
            Err(CandidateRefusal::DuplicateEntry)
        };
        let mut line = CandidateReport {
            job_id: entry.job_id.clone(),
            status: CandidateStatus::Refused,
            code: None,
            mismatches: Vec::new(),
            detail: None,
            attestation_file: None,
            passed: None,
            deadline: None,
            from_history: false,
        };
        if let Err(CandidateRefusal::History(e)) = result {
            return Err(RunError::History(e));
        }
        match result {
            Ok(Decision::NotOurs(mode)) => {
                line.status = CandidateStatus::NotOurs;
                line.code = mode.map(|_| verifier_sdk::OtherVerificationMode::CODE);
                line.detail = mode.map(|m| m.to_string());
                report.not_ours += 1;
            }
            Ok(Decision::Sign(signed)) => {
                write_json(&cfg.out_dir, &signed.file.candidate_file, &signed.candidate)
                    .map_err(RunError::Output)?;
                write_attestation(&cfg.out_dir, &signed).map_err(RunError::Output)?;
                line.status = CandidateStatus::Signed;
                line.attestation_file = Some(signed.file_name.clone());
                line.passed = Some(signed.file.passed);
                line.deadline = Some(signed.file.deadline);
                line.from_history = signed.from_history;
                report.signed += 1;
                written.attestations.push(AttestationManifestEntry {
                    job_id: signed.file.job_id.clone(),
                    file: signed.file_name.clone(),
                    candidate_file: signed.file.candidate_file.clone(),
                });
            }
            Err(refusal) => {
                tracing::debug!(job_id = %entry.job_id, code = refusal.code(), "candidate not signed: {refusal}");
                if refusal.is_unavailable() {
                    line.status = CandidateStatus::Unavailable;
                    report.unavailable += 1;
                } else {
                    report.refused += 1;
                }
                if matches!(refusal, CandidateRefusal::ContradictsHistory(_)) {
                    report.contradictions += 1;
                    tracing::error!(job_id = %entry.job_id, "{refusal}");
                }
                line.code = Some(refusal.code());
                if let CandidateRefusal::Revalidation(r) = &refusal {
                    line.mismatches = r.mismatch_codes();
                }
                line.detail = Some(refusal.to_string().chars().take(1024).collect());
            }
        }
        report.candidates.push(line);
    }
    for entry in deferred {
        report.deferred += 1;
        report
            .candidates
            .push(deferred_line(entry.job_id, cfg.max_candidates));
    }

    write_manifest(&cfg.out_dir, ATTESTATION_MANIFEST_FILE, &written)?;
    // The same list in the reference pipeline's layout, so a reference relay can read this
    // directory (PROTOCOL §7).
    write_manifest(
        &cfg.out_dir,
        REFERENCE_ATTESTATION_MANIFEST_FILE,
        &written.to_reference(),
    )?;
    Ok(report)
}

fn deferred_line(job_id: String, bound: usize) -> CandidateReport {
    CandidateReport {
        job_id,
        status: CandidateStatus::Deferred,
        code: Some("manifest_bound"),
        mismatches: Vec::new(),
        detail: Some(format!(
            "the manifest lists more than {bound} candidates; this one expires later than \
             those handled"
        )),
        attestation_file: None,
        passed: None,
        deadline: None,
        from_history: false,
    }
}

fn write_manifest(dir: &Path, name: &str, manifest: &impl Serialize) -> Result<(), RunError> {
    let value = serde_json::to_value(manifest).map_err(|e| {
        RunError::Output(FileError::Json {
            path: dir.join(name),
            detail: e.to_string(),
        })
    })?;
    write_json(dir, name, &value).map_err(RunError::Output)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use keyfile::LoadedKey;
    use verifier_sdk::fixtures::{JobParams, job_value};
    use verifier_sdk::{attestation_digest, candidate_file_name, validate_job};

    const DEV_KEY: &str = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";

    /// A stored record of `job`'s scope and the candidate it signed, at unix time 1_000_000.
    fn stored(job: &verifier_sdk::ValidatedJob) -> (AttestationFields, SignedRecord, String) {
        let key = LoadedKey::from_hex_text(DEV_KEY).unwrap();
        let fields = AttestationFields {
            bounty: job.bounty_contract(),
            bounty_id: format!("0x{}", "b".repeat(64)).parse().unwrap(),
            round: 7,
            verifier: Address::from(key.address()),
            submission_hash: format!("0x{}", "c".repeat(64)).parse().unwrap(),
            evidence_hash: format!("0x{}", "d".repeat(64)).parse().unwrap(),
            policy_hash: format!("0x{}", "e".repeat(64)).parse().unwrap(),
            passed: true,
            response_hash: format!("0x{}", "f".repeat(64)).parse().unwrap(),
            deadline: 1_000_900,
        };
        let digest = attestation_digest(8453, &fields);
        let sig = AttestationSignature::from_slice(&key.sign_prehash(digest.as_bytes()).unwrap())
            .unwrap();
        let record = SignedRecord::verified(8453, &fields, digest, sig, 1_000_000).unwrap();
        let candidate = serde_json::json!({"job": {"job_id": job.job_id()}}).to_string();
        (fields, record, candidate)
    }

    #[test]
    fn a_stored_attestation_is_reused_only_while_it_can_still_settle_the_same_terms() {
        let raw = job_value(&JobParams {
            expires_at: 2_000_000,
            ..JobParams::default()
        });
        let job = validate_job(&raw, 1_000_000).unwrap();
        let (fields, record, candidate) = stored(&job);
        let cfg = SignConfig {
            candidates_dir: PathBuf::new(),
            out_dir: PathBuf::new(),
            signer: record.verifier(),
            network: Network::BaseMainnet,
            max_candidates: 1,
            require_oci_runtime: None,
        };
        let entry = CandidateEntry {
            job_id: job.job_id().to_owned(),
            file: candidate_file_name(job.job_id()),
        };
        let now = 1_000_000;
        let reused = reuse(&cfg, &entry, &job, &fields, &record, &candidate, now).unwrap();
        assert!(reused.from_history);
        assert_eq!(reused.file.signature, record.signature().to_hex());
        assert_eq!(reused.file.deadline, 1_000_900);

        // Too close to its deadline for the keeper: signed anew instead.
        assert!(reuse(&cfg, &entry, &job, &fields, &record, &candidate, 1_000_800).is_none());
        // The contract's evidence or policy hash is not what it signed: it cannot settle.
        let mut moved = fields;
        moved.evidence_hash = format!("0x{}", "1".repeat(64)).parse().unwrap();
        assert!(reuse(&cfg, &entry, &job, &moved, &record, &candidate, now).is_none());
        let mut moved = fields;
        moved.policy_hash = format!("0x{}", "2".repeat(64)).parse().unwrap();
        assert!(reuse(&cfg, &entry, &job, &moved, &record, &candidate, now).is_none());
        // A stored candidate of another job is not written next to this one's attestation.
        let other = serde_json::json!({"job": {"job_id": "another-job"}}).to_string();
        assert!(reuse(&cfg, &entry, &job, &fields, &record, &other, now).is_none());
    }
}
