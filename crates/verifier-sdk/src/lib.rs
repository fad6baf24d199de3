//! Protocol core of `sandboxed_regression_v1`.
//!
//! This crate defines what the other crates agree on: typed jobs and manifests, canonical
//! JSON, every hash and its preimage, the directory digest, receipts and the response hash,
//! EIP-712 attestation digests, and settlement calldata and events.
//!
//! It deliberately does no network I/O, talks to no container runtime, holds no keys and
//! has no async runtime: everything here is a pure function of its inputs (the reference
//! directory walk reads files, nothing else), so the worker, signer and keeper can each
//! re-run the same checks on the bytes they received.
//!
//! # Using it
//!
//! Untrusted JSON becomes a checked type only through a verifying constructor:
//!
//! - worker: [`validate_job`]`(&raw_job, now)` → [`ValidatedJob`] (chain, scope, manifest,
//!   source and benchmark refs, snapshot digest); stage and run; then
//!   [`Outcome::for_job`]`(&job, facts)` derives the verdict from the exit
//!   code and computes the response hash. Without a verdict, print a [`NoVerdictOutcome`].
//!   Write a [`Candidate`] to [`candidate_file_name`]`(job_id)`.
//! - signer: [`Candidate::from_value`], then [`validate_job`] and
//!   [`validate_outcome`]`(&candidate.outcome, &job)` on the raw values again;
//!   [`attestation_deadline`], [`AttestationFields::for_outcome`] and [`attestation_digest`]
//!   (compare with the contract's `attestationDigest`, see [`settle::IBounty`]).
//! - keeper: [`AttestationFile::from_value`], [`AttestationSignature::from_hex`],
//!   [`recover_signer`], [`verifier_set_hash`], [`settle::attestation`] and
//!   [`settle_calldata`]; confirm with [`settle::decode_settlement_event`].
//!
//! The whole walk-through, run as a doc test (it needs the `fixtures` feature, which
//! `cargo test --workspace --doc` enables through the other crates' dev-dependencies; without
//! it the test is listed as ignored):
//!
#![cfg_attr(feature = "fixtures", doc = "```")]
#![cfg_attr(not(feature = "fixtures"), doc = "```ignore")]
//! use verifier_sdk::*;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A verifier key and its address (the signer loads it from its key file).
//! let key = k256::ecdsa::SigningKey::from_bytes((&[7u8; 32]).into())?;
//! let point = key.verifying_key().to_encoded_point(false);
//! let hash = alloy_primitives::keccak256(&point.as_bytes()[1..]);
//! let verifier = Address::from_bytes(hash[12..].try_into()?);
//!
//! // worker: validate the job, stage and run it, derive the outcome, write a candidate.
//! let now = fixtures::NOW;
//! let raw_job = fixtures::job_value(&fixtures::JobParams {
//!     verifiers: vec![verifier.to_string()],
//!     ..fixtures::JobParams::default()
//! });
//! let job = validate_job(&raw_job, now)?;
//! let facts = ExecutionFacts {
//!     exit_code: 0,
//!     stdout_sha256: Sha256Digest::from_bytes([0xd1; 32]),
//!     stderr_sha256: Sha256Digest::from_bytes([0xd2; 32]),
//!     stdout_bytes: 3,
//!     stderr_bytes: 0,
//! };
//! let outcome = Outcome::for_job(&job, facts);
//! assert_eq!(outcome.verdict, Verdict::Passed);
//! let (_, evidence) = fixtures::completed_run(&job, facts); // the executor's record
//! let candidate = Candidate::new(
//!     raw_job.clone(),
//!     serde_json::to_value(&outcome)?,
//!     "revision".into(),
//!     Some(evidence),
//! );
//! let file = candidate_file_name(job.job_id());
//! let written = serde_json::to_value(&candidate)?;
//!
//! // signer: parse the candidate, re-check it against the re-fetched job, sign the digest.
//! let parsed = ParsedCandidate::parse(Candidate::from_value(&written)?)?;
//! let checked = revalidate_parsed(&parsed, &raw_job, now)?;
//! let deadline = attestation_deadline(now, checked.job.expires_at())?;
//! let fields = AttestationFields::for_outcome(&checked.job, &checked.outcome, verifier, deadline);
//! let digest = attestation_digest(checked.job.chain_id(), &fields);
//! let (sig, recid) = key.sign_prehash_recoverable(digest.as_bytes())?;
//! let mut raw = [0u8; 65];
//! raw[..64].copy_from_slice(&sig.to_bytes());
//! raw[64] = 27 + recid.to_byte();
//! let signature = AttestationSignature::from_slice(&raw)?;
//!
//! // keeper: recover every signature locally, check it against the committed set, settle.
//! assert_eq!(recover_signer(&digest, &signature)?, verifier);
//! assert_eq!(verifier_set_hash(checked.job.eligible_verifiers()), verifier_set_hash(&[verifier]));
//! let call = settle_calldata(&[settle::attestation(
//!     verifier,
//!     fields.passed,
//!     fields.response_hash,
//!     deadline,
//!     &signature,
//! )]);
//! assert_eq!(call[..4], [0xe3, 0x45, 0x71, 0x86]);
//! assert!(file.starts_with("candidate-"));
//! # Ok(())
//! # }
//! ```
//!
//! Hex is printed lowercase; [`Bytes32`] and [`Address`] accept either case, staged
//! [`Sha256Digest`]s only lowercase. Enable the `fixtures` feature for [`fixtures`], builders
//! of complete hash-consistent jobs for tests.

#![warn(missing_docs)]

pub mod agreement;
pub mod artifacts;
pub mod attest;
pub mod build;
pub mod canonical;
pub mod digest;
pub mod engine_host;
pub mod evidence;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod job;
pub mod manifest;
pub mod oci_runtime;
pub mod profile;
pub mod readiness;
pub mod receipt;
pub mod revalidate;
pub mod runtimes;
pub mod settle;
pub mod settlement;
pub mod types;

pub use agreement::{
    Agreement, Commitment, CompareError, OutputDifference, compare_candidates, compare_for_job,
    compare_outcomes, compare_with_validated, validate_reference,
};
pub use artifacts::{
    ArtifactError, AttestationFile, AttestationManifest, AttestationManifestEntry, Candidate,
    CandidateEntry, CandidateManifest, DeadlineError, MAX_MANIFEST_CANDIDATES, ParsedCandidate,
    ReferenceAttestationEntry, ReferenceAttestationManifest, attestation_deadline,
    attestation_file_name, candidate_file_name, check_candidate_file_name,
};
pub use attest::{
    AttestationFields, AttestationSignature, SignatureError, attestation_digest,
    attestation_typehash, domain_separator, recover_signer, struct_hash, verifier_set_hash,
};
pub use canonical::{canonical_json, keccak_json, sha256_digest, sha256_json, sha256_utf8};
pub use digest::{DigestError, DirectoryHasher, Snapshot, TreeLimits, digest_directory};
pub use evidence::{EvidenceRecord, RequestFacts, StreamEvidence};
pub use job::{
    BenchmarkSource, CommitId, GithubRepo, JobError, Network, OtherVerificationMode, RelativeDir,
    SourceRef, TermsCommitment, ValidatedJob, other_verification_mode, validate_job,
};
pub use manifest::{ManifestError, RunnerManifest, command_hash, runner_manifest_hash};
pub use profile::{ContainerProfile, ProfileInputs, check_recorded_profile, expected_profile};
pub use receipt::{
    Execution, ExecutionFacts, Isolation, NoVerdict, NoVerdictOutcome, NoVerdictReason, Outcome,
    OutcomeError, Receipt, RunOutput, Scope, ValidatedOutcome, Verdict, response_hash,
    validate_outcome,
};
pub use revalidate::{
    EvidenceError, Revalidated, RevalidationError, check_evidence, check_isolation, check_record,
    check_required_runtime, expected_request, job_changes, revalidate_candidate,
    revalidate_outcome, revalidate_parsed,
};
pub use settle::{
    BountyStatus, SettlementEvent, VerificationMode, settle_calldata, verification_hash,
};
pub use types::{Address, Bytes32, ParseValueError, Sha256Digest};

#[cfg(test)]
mod end_to_end_tests;
