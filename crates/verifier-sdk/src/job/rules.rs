//! The rules of PROTOCOL §2, one function each, applied in the order whose first failure is
//! the error reported. Hashes are recomputed over the received values, never a typed copy.

use std::collections::HashSet;

use serde_json::Value;

use super::fields::Fields;
use super::{
    BenchmarkSource, CommitId, ENGINE, GithubRepo, JobError, Network, RelativeDir, SIGNED_QUORUM,
    Scope, SourceRef, TERMS_SCHEMA_VERSION, TermsCommitment, ValidatedJob,
    parse_artifact_reference, valid_job_id,
};
use crate::canonical::{keccak_json, sha256_json, sha256_utf8};
use crate::manifest::RunnerManifest;
use crate::types::{Address, Bytes32, Sha256Digest};

/// Every structural rule, in order; see [`ValidatedJob::parse`].
pub(super) fn parse_job(raw: &Value) -> Result<ValidatedJob, JobError> {
    let job = Fields::root(raw)?;
    let job_id = job.str("job_id")?;
    if !valid_job_id(job_id) {
        return Err(JobError::JobId);
    }
    let chain = one_chain(job)?;
    let quorum = quorum_shape(job)?;
    let bounty = bounty_fields(job)?;
    let terms = terms_hashes(&chain)?;
    let evidence = evidence_scope(&chain, &bounty)?;
    policy_names_engine_and_verifiers(terms.policy, &quorum)?;
    let (benchmark_source, manifest) = benchmark(terms.benchmark)?;
    let (source_snapshot_digest, source_subdirectory) = source_snapshot(evidence.evidence)?;

    let scope = Scope {
        network: chain.network.name().to_owned(),
        bounty_id: bounty.id_text.to_owned(),
        bounty_contract: bounty.contract,
        round: bounty.round,
        solver_wallet: bounty.solver,
        submission_hash: evidence.submission_hash,
        evidence_hash: evidence.evidence_hash,
        terms_hash: terms.commitment.terms_hash,
        committed_policy_hash: terms.commitment.policy_hash,
        verification_expires_at: quorum.expires_at,
    };
    Ok(ValidatedJob {
        raw: raw.clone(),
        job_id: job_id.to_owned(),
        network: chain.network,
        scope,
        bounty_id: bounty.id,
        commitment: terms.commitment,
        eligible_verifiers: quorum.verifiers,
        threshold: quorum.threshold,
        manifest,
        source_snapshot_digest,
        benchmark_source,
        source: evidence.source,
        source_subdirectory,
    })
}

struct Chain<'a> {
    network: Network,
    evidence: Fields<'a>,
    terms: Fields<'a>,
    document_value: &'a Value,
    document: Fields<'a>,
}

/// Rule 1: one chain across the job, the evidence and the committed terms.
fn one_chain(job: Fields<'_>) -> Result<Chain<'_>, JobError> {
    let network = job.network("network")?;
    let evidence = job.obj("submission_evidence")?;
    let terms = job.obj("terms")?;
    let document_value = terms.value("terms.document")?;
    let document = Fields::object(document_value, "terms.document")?;
    let contract_terms = document.obj("terms.document.contract_terms")?;
    for (o, field) in [
        (evidence, "submission_evidence.network"),
        (contract_terms, "terms.document.contract_terms.network"),
    ] {
        let other = o.network(field)?;
        if other != network {
            return Err(JobError::NetworkMismatch {
                field,
                expected: network.chain_id(),
                found: other.chain_id(),
            });
        }
    }
    Ok(Chain {
        network,
        evidence,
        terms,
        document_value,
        document,
    })
}

struct Quorum {
    threshold: u8,
    verifiers: Vec<Address>,
    expires_at: u64,
}

/// Rule 2: the quorum's shape (liveness is [`ValidatedJob::check_live`]'s).
fn quorum_shape(job: Fields<'_>) -> Result<Quorum, JobError> {
    if job.str("verification_mode")? != SIGNED_QUORUM {
        return Err(JobError::VerificationMode);
    }
    if job.has("verifier_module") {
        return Err(JobError::VerifierModule);
    }
    let threshold_raw = job.u64("threshold")?;
    let threshold = u8::try_from(threshold_raw).map_err(|_| JobError::WrongType {
        field: "threshold",
        expected: "an integer from 1 to 255",
    })?;
    if threshold == 0 {
        return Err(JobError::ThresholdZero);
    }
    let verifiers_raw = job
        .value("eligible_verifiers")?
        .as_array()
        .ok_or(JobError::WrongType {
            field: "eligible_verifiers",
            expected: "an array of addresses",
        })?;
    if verifiers_raw.len() != usize::from(threshold) {
        return Err(JobError::ThresholdMismatch {
            threshold: threshold_raw,
            verifiers: verifiers_raw.len(),
        });
    }
    let verifiers = parse_verifiers(verifiers_raw, "eligible_verifiers")?;
    let mut seen = HashSet::new();
    for v in &verifiers {
        if !seen.insert(*v) {
            return Err(JobError::DuplicateVerifier(*v));
        }
    }
    let expires_at = job.u64("verification_expires_at")?;
    Ok(Quorum {
        threshold,
        verifiers,
        expires_at,
    })
}

struct Bounty<'a> {
    contract: Address,
    id_text: &'a str,
    id: Bytes32,
    round: u64,
    solver: Address,
}

/// The bounty, round and solver the job is about.
fn bounty_fields(job: Fields<'_>) -> Result<Bounty<'_>, JobError> {
    let contract = job.address("bounty_contract")?;
    let id_text = job.str("bounty_id")?;
    let id: Bytes32 = id_text
        .parse()
        .map_err(|_| JobError::InvalidBytes32 { field: "bounty_id" })?;
    let round = job.u64("round")?;
    if round == 0 {
        return Err(JobError::RoundZero);
    }
    let solver = job.address("solver_wallet")?;
    Ok(Bounty {
        contract,
        id_text,
        id,
        round,
        solver,
    })
}

struct Terms<'a> {
    commitment: TermsCommitment,
    policy: &'a Value,
    benchmark: &'a Value,
}

/// Rule 3: the five terms hashes recompute over the committed document.
fn terms_hashes<'a>(chain: &Chain<'a>) -> Result<Terms<'a>, JobError> {
    let (terms, document) = (chain.terms, chain.document);
    if document.str("terms.document.schema_version")? != TERMS_SCHEMA_VERSION {
        return Err(JobError::TermsSchemaVersion);
    }
    let terms_hash = terms.hash("terms.terms_hash", keccak_json(chain.document_value))?;
    let policy = document.value("terms.document.verification_policy")?;
    let policy_hash = terms.hash("terms.policy_hash", keccak_json(policy))?;
    let criteria = document.value("terms.document.acceptance_criteria")?;
    let acceptance_criteria_hash =
        terms.hash("terms.acceptance_criteria_hash", keccak_json(criteria))?;
    let benchmark = document.value("terms.document.benchmark")?;
    let benchmark_hash = terms.hash("terms.benchmark_hash", keccak_json(benchmark))?;
    let schema = document.value("terms.document.evidence_schema")?;
    let evidence_schema_hash = terms.hash("terms.evidence_schema_hash", keccak_json(schema))?;
    Ok(Terms {
        commitment: TermsCommitment {
            terms_hash,
            policy_hash,
            acceptance_criteria_hash,
            benchmark_hash,
            evidence_schema_hash,
        },
        policy,
        benchmark,
    })
}

struct Evidence<'a> {
    submission_hash: Bytes32,
    evidence_hash: Bytes32,
    evidence: Fields<'a>,
    source: SourceRef,
}

/// Rule 4: the evidence is about this bounty, round and solver, and its hashes recompute.
fn evidence_scope<'a>(chain: &Chain<'a>, bounty: &Bounty<'_>) -> Result<Evidence<'a>, JobError> {
    let rec = chain.evidence;
    if rec.address("submission_evidence.bounty_contract")? != bounty.contract {
        return Err(JobError::ScopeMismatch {
            field: "bounty_contract",
        });
    }
    if rec.bytes32("submission_evidence.bounty_id")? != bounty.id {
        return Err(JobError::ScopeMismatch { field: "bounty_id" });
    }
    if rec.u64("submission_evidence.round")? != bounty.round {
        return Err(JobError::ScopeMismatch { field: "round" });
    }
    if rec.address("submission_evidence.solver_wallet")? != bounty.solver {
        return Err(JobError::ScopeMismatch {
            field: "solver_wallet",
        });
    }
    let artifact_reference = rec.str("submission_evidence.artifact_reference")?;
    let submission_hash = rec.hash(
        "submission_evidence.artifact_hash",
        sha256_utf8(artifact_reference),
    )?;
    let evidence_value = rec.value("submission_evidence.evidence")?;
    let evidence = Fields::object(evidence_value, "submission_evidence.evidence")?;
    let evidence_hash = rec.hash(
        "submission_evidence.evidence_hash",
        sha256_json(evidence_value),
    )?;
    let source = parse_artifact_reference(artifact_reference)?;
    Ok(Evidence {
        submission_hash,
        evidence_hash,
        evidence,
        source,
    })
}

/// Rule 5: the committed policy names this engine and exactly these verifiers.
fn policy_names_engine_and_verifiers(policy: &Value, quorum: &Quorum) -> Result<(), JobError> {
    let policy = Fields::object(policy, "terms.document.verification_policy")?;
    if policy.str("terms.document.verification_policy.mechanism")? != SIGNED_QUORUM {
        return Err(JobError::PolicyMismatch { field: "mechanism" });
    }
    if policy.str("terms.document.verification_policy.engine")? != ENGINE {
        return Err(JobError::PolicyMismatch { field: "engine" });
    }
    if policy.u64("terms.document.verification_policy.threshold")? != u64::from(quorum.threshold) {
        return Err(JobError::PolicyMismatch { field: "threshold" });
    }
    let path = "terms.document.verification_policy.verifiers";
    let verifiers = policy.value(path)?.as_array().ok_or(JobError::WrongType {
        field: path,
        expected: "an array of addresses",
    })?;
    if parse_verifiers(verifiers, path)? != quorum.verifiers {
        return Err(JobError::PolicyMismatch { field: "verifiers" });
    }
    Ok(())
}

/// Rule 6: the benchmark names this engine, an exact-commit source and a valid manifest.
fn benchmark(benchmark: &Value) -> Result<(BenchmarkSource, RunnerManifest), JobError> {
    let benchmark = Fields::object(benchmark, "terms.document.benchmark")?;
    if benchmark.str("terms.document.benchmark.engine")? != ENGINE {
        return Err(JobError::Engine {
            field: "terms.document.benchmark.engine",
        });
    }
    let source = parse_benchmark_source(benchmark.obj("terms.document.benchmark.source")?)?;
    let manifest =
        RunnerManifest::from_value(benchmark.value("terms.document.benchmark.runner_manifest")?)?;
    Ok((source, manifest))
}

/// Rule 7: the source snapshot the staged tree must match, and where in the tree it is.
fn source_snapshot(evidence: Fields<'_>) -> Result<(Sha256Digest, RelativeDir), JobError> {
    let digest = evidence
        .str("submission_evidence.evidence.source_snapshot_digest")?
        .parse()
        .map_err(|_| JobError::SourceSnapshotDigest)?;
    let path = "submission_evidence.evidence.source_subdirectory";
    let subdirectory = match evidence.optional(path) {
        None => RelativeDir::root(),
        Some(v) => v
            .as_str()
            .and_then(RelativeDir::parse)
            .ok_or(JobError::Subdirectory { field: path })?,
    };
    Ok((digest, subdirectory))
}

fn parse_verifiers(items: &[Value], field: &'static str) -> Result<Vec<Address>, JobError> {
    items
        .iter()
        .map(|v| {
            v.as_str()
                .and_then(|s| s.parse().ok())
                .ok_or(JobError::InvalidAddress { field })
        })
        .collect()
}

fn parse_benchmark_source(source: Fields<'_>) -> Result<BenchmarkSource, JobError> {
    if source.str("terms.document.benchmark.source.kind")? != "github_commit" {
        return Err(JobError::BenchmarkSource("kind must be github_commit"));
    }
    let repository = GithubRepo::parse(source.str("terms.document.benchmark.source.repository")?)
        .ok_or(JobError::BenchmarkSource("repository must be owner/repo"))?;
    let commit = CommitId::parse(source.str("terms.document.benchmark.source.commit")?, true)
        .ok_or(JobError::BenchmarkSource("commit must be 40 hex digits"))?;
    let path = "terms.document.benchmark.source.subdirectory";
    let subdirectory =
        RelativeDir::parse(source.str(path)?).ok_or(JobError::Subdirectory { field: path })?;
    Ok(BenchmarkSource {
        repository,
        commit,
        subdirectory,
    })
}
