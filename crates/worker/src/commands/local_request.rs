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
    // Judged on the open descriptor and read to at most the cap, as every named input is: a
    // FIFO is not waited on and /dev/zero is not read until memory runs out (#41 item 6).
    let bytes = artifact_fs::read_named(&args.manifest, super::request::MAX_REQUEST_BYTES)
        .map_err(|e| match e {
            artifact_fs::ReadError::TooLarge { .. } => read("larger than a manifest can be".into()),
            artifact_fs::ReadError::NotRegular(_) => {
                read("not a regular file (a FIFO, a device or a directory)".into())
            }
            artifact_fs::ReadError::Io { source, .. } => read(source.to_string()),
        })?;
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

#[cfg(test)]
mod tests {
    use super::{RequestBuildError, request_command};
    use crate::cli::RequestArgs;
    use std::path::Path;
    use std::process::Command;

    fn args(manifest: &Path) -> RequestArgs {
        RequestArgs {
            source_digest: format!("sha256:{}", "ab".repeat(32)),
            manifest: manifest.to_owned(),
            benchmark_digest: None,
            source_commit: None,
            expires_in: std::time::Duration::from_secs(3600),
            out: None,
        }
    }

    /// The request built from `manifest`, and whether it was refused as no regular file.
    fn refused_as_not_a_file(manifest: &Path) -> (bool, String) {
        let result = request_command(&args(manifest), 1_700_000_000);
        let refused = matches!(
            &result,
            Err(RequestBuildError::Read { detail, .. }) if detail.contains("not a regular file")
        );
        (refused, format!("{result:?}"))
    }

    /// The manifest `worker request` reads is judged on its open descriptor and read to at most
    /// the cap (#41 item 6's pattern: its size was checked on the path, then the read had no
    /// bound). The read happens in a child under a 1 GiB address-space limit, so an unbounded
    /// read of `/dev/zero` ends there in a failed allocation, not in this machine's memory.
    #[test]
    fn worker_request_refuses_a_manifest_linked_to_dev_zero() {
        test_child::read_dev_zero_link_in_child(
            "commands::local_request::tests::worker_request_refuses_a_manifest_linked_to_dev_zero",
            "manifest.json",
            |link| {
                let (refused, result) = refused_as_not_a_file(link);
                assert!(refused, "{result}");
            },
        );
    }

    /// A FIFO named as the manifest is refused, not waited on (a writer is provided so that a
    /// read that waits returns instead of hanging the test).
    #[test]
    fn a_fifo_manifest_is_refused_without_hanging() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("manifest.json");
        assert!(
            Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let writer_path = fifo.clone();
        std::thread::spawn(move || {
            let _ = std::fs::OpenOptions::new().write(true).open(writer_path);
        });
        let (refused, result) = refused_as_not_a_file(&fifo);
        assert!(refused, "the FIFO was opened and read: {result}");
    }
}
