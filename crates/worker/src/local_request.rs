//! `worker request`: writes a request file (`{"job": …}`) for `plan` and `--run-regression`
//! from a source snapshot digest and a runner manifest, so both can be used on local trees
//! without a job from the platform.
//!
//! The job is a complete, valid one (every hash recomputed, checked by `verifier-sdk` before
//! it is written), but its bounty is made up: the contract, bounty id, solver and verifier are
//! fixed placeholders on base-sepolia, so a candidate made from it matches no bounty on any
//! chain and a signer re-reading the chain refuses it. It is for planning and rehearsing, never
//! for settlement.

use std::path::PathBuf;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use verifier_sdk::{RunnerManifest, Sha256Digest, keccak_json, sha256_json, sha256_utf8};

/// The placeholder bounty contract of a local request.
pub const LOCAL_BOUNTY_CONTRACT: &str = "0x000000000000000000000000000000000000dEaD";
/// The placeholder solver and verifier.
pub const LOCAL_PARTY: &str = "0x0000000000000000000000000000000000000001";
/// The source commit of a local request when none is named.
pub const LOCAL_ARTIFACT_REFERENCE: &str =
    "https://github.com/local/source/commit/0000000000000000000000000000000000000000";

/// Why no request was written.
#[derive(Debug, thiserror::Error)]
pub enum RequestBuildError {
    /// The manifest file could not be read.
    #[error("reading the manifest {path:?}: {detail}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        detail: String,
    },
    /// A value is unusable.
    #[error("{0}")]
    Invalid(String),
    /// The job built from them does not validate (a manifest rule, say).
    #[error("the request would not be a valid job: {0}")]
    Job(#[from] verifier_sdk::JobError),
}

/// Reads the manifest and builds the request; checked with `verifier-sdk` before returning.
pub fn request_command(
    args: &crate::cli::RequestArgs,
    now_unix: u64,
) -> Result<Value, RequestBuildError> {
    let read = |detail: String| RequestBuildError::Read {
        path: args.manifest.clone(),
        detail,
    };
    let metadata = std::fs::metadata(&args.manifest).map_err(|e| read(e.to_string()))?;
    if metadata.len() > crate::commands::request::MAX_REQUEST_BYTES {
        return Err(read("larger than a manifest can be".into()));
    }
    let bytes = std::fs::read(&args.manifest).map_err(|e| read(e.to_string()))?;
    let mut manifest: Value =
        serde_json::from_slice(&bytes).map_err(|e| read(format!("not JSON: {e}")))?;
    let source: Sha256Digest = args
        .source_digest
        .parse()
        .map_err(|e| RequestBuildError::Invalid(format!("--source-digest: {e}")))?;
    if let Some(benchmark) = &args.benchmark_digest {
        let digest: Sha256Digest = benchmark
            .parse()
            .map_err(|e| RequestBuildError::Invalid(format!("--benchmark-digest: {e}")))?;
        if let Some(slot) = manifest.get_mut("benchmark_digest") {
            *slot = Value::String(digest.to_string());
        }
    }
    let checked = RunnerManifest::from_value(&manifest)
        .map_err(|e| RequestBuildError::Invalid(format!("manifest: {e}")))?;
    if checked.benchmark_digest().as_bytes() == &[0; 32] {
        return Err(RequestBuildError::Invalid(
            "the manifest's benchmark_digest is the sha256:000…0 placeholder: give \
             --benchmark-digest (the digest --stage-regression-input printed)"
                .into(),
        ));
    }
    let expires_at = now_unix.saturating_add(args.expires_in.as_secs());
    let reference = args
        .source_commit
        .clone()
        .unwrap_or_else(|| LOCAL_ARTIFACT_REFERENCE.to_owned());
    let job = local_job(&source, &manifest, &reference, expires_at);
    verifier_sdk::validate_job(&job, now_unix)?;
    Ok(json!({ "job": job }))
}

/// The job of a local request: fixed placeholder parties, every hash computed.
pub fn local_job(
    source: &Sha256Digest,
    manifest: &Value,
    reference: &str,
    expires_at: u64,
) -> Value {
    let network = "base-sepolia";
    // The id names what is run, so two different local requests never share a job id (the
    // feed cache and candidate file names key on it).
    let mut id = Sha256::new();
    id.update(source.to_string());
    id.update(serde_json::to_vec(manifest).unwrap_or_default());
    id.update(reference);
    let id = hex::encode(id.finalize());
    let round = 1;
    let bounty_id = format!("0x{id}");
    let evidence = json!({ "source_snapshot_digest": source.to_string() });
    let document = json!({
        "schema_version": "agent-bounties/terms-v1",
        "contract_terms": {"network": network, "reward": "0"},
        "title": "local request (worker request)",
        "goal": "rehearse a runner manifest on local trees",
        "acceptance_criteria": ["the runner manifest's command exits 0"],
        "benchmark": {
            "engine": "sandboxed_regression_v1",
            "source": {
                "kind": "github_commit",
                "repository": "local/benchmark",
                "commit": "0000000000000000000000000000000000000000",
                "subdirectory": "."
            },
            "runner_manifest": manifest
        },
        "evidence_schema": {"type": "object", "required": ["source_snapshot_digest"]},
        "verification_policy": {
            "mechanism": "signed_quorum",
            "engine": "sandboxed_regression_v1",
            "verifiers": [LOCAL_PARTY],
            "threshold": 1
        }
    });
    let hash = |pointer: &str| {
        document
            .pointer(pointer)
            .map(|v| keccak_json(v).to_string())
            .unwrap_or_default()
    };
    json!({
        "job_id": format!("local:{}", &id[..32]),
        "network": network,
        "bounty_id": bounty_id,
        "bounty_contract": LOCAL_BOUNTY_CONTRACT,
        "round": round,
        "solver_wallet": LOCAL_PARTY,
        "verification_mode": "signed_quorum",
        "verifier_module": null,
        "eligible_verifiers": [LOCAL_PARTY],
        "threshold": 1,
        "verification_expires_at": expires_at,
        "terms": {
            "terms_hash": keccak_json(&document).to_string(),
            "policy_hash": hash("/verification_policy"),
            "acceptance_criteria_hash": hash("/acceptance_criteria"),
            "benchmark_hash": hash("/benchmark"),
            "evidence_schema_hash": hash("/evidence_schema"),
            "creator_wallet": LOCAL_PARTY,
            "created_at": "1970-01-01T00:00:00Z",
            "document": document
        },
        "submission_evidence": {
            "network": network,
            "bounty_contract": LOCAL_BOUNTY_CONTRACT,
            "bounty_id": bounty_id,
            "round": round,
            "solver_wallet": LOCAL_PARTY,
            "artifact_reference": reference,
            "artifact_hash": sha256_utf8(reference).to_string(),
            "evidence": evidence,
            "evidence_hash": sha256_json(&evidence).to_string(),
            "created_at": "1970-01-01T00:00:00Z"
        },
        "verifier_reward": "0",
        "current_solver_payout": "0",
        "required_action": "verify",
        "payout_boundary": null
    })
}
