//! Builders of complete, hash-consistent jobs for tests (this crate's and other crates').
//!
//! Compiled only for this crate's tests or with the `fixtures` feature. Every hash in a
//! built job is computed with this crate's own primitives, and [`rehash`] recomputes them
//! after a test mutates a field, so a test can break exactly one rule at a time.

use serde_json::{Value, json};

use crate::canonical::{keccak_json, sha256_json, sha256_utf8};
use crate::types::Bytes32;

/// A clock value before [`EXPIRES_AT`].
pub const NOW: u64 = 1_900_000_000;
/// The fixture job's `verification_expires_at`.
pub const EXPIRES_AT: u64 = 2_000_000_000;
/// The fixture source commit.
pub const SOURCE_COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
/// The fixture benchmark commit.
pub const BENCHMARK_COMMIT: &str = "89abcdef0123456789abcdef0123456789abcdef";

/// Knobs of a fixture job. `Default` gives a valid single-verifier job on base-mainnet.
#[derive(Debug, Clone)]
pub struct JobParams {
    /// Network name used in the job, the evidence and the contract terms.
    pub network: String,
    /// Bounty contract address.
    pub bounty_contract: String,
    /// Bounty id.
    pub bounty_id: String,
    /// Round.
    pub round: u64,
    /// Solver wallet.
    pub solver: String,
    /// Eligible verifiers (and policy verifiers); threshold is their count.
    pub verifiers: Vec<String>,
    /// `verification_expires_at`.
    pub expires_at: u64,
    /// `artifact_reference`.
    pub artifact_reference: String,
    /// `evidence.source_snapshot_digest`.
    pub source_snapshot_digest: String,
    /// `evidence.source_subdirectory`, omitted when `None`.
    pub source_subdirectory: Option<String>,
    /// `benchmark.runner_manifest`.
    pub manifest: Value,
}

impl Default for JobParams {
    fn default() -> Self {
        Self {
            network: "base-mainnet".into(),
            bounty_contract: format!("0x{}", "22".repeat(20)),
            bounty_id: format!("0x{}", "ab".repeat(32)),
            round: 3,
            solver: format!("0x{}", "33".repeat(20)),
            verifiers: vec!["0xbe6292b9e465f549e2363b918d6dd9187038431e".into()],
            expires_at: EXPIRES_AT,
            artifact_reference: format!(
                "https://github.com/solver-org/solution/commit/{SOURCE_COMMIT}"
            ),
            source_snapshot_digest: format!("sha256:{}", "c".repeat(64)),
            source_subdirectory: None,
            manifest: sample_manifest(),
        }
    }
}

/// A valid runner manifest (the PROTOCOL §5 vector's).
pub fn sample_manifest() -> Value {
    json!({
        "schema_version": "agent-bounties/regression-sandbox-v1",
        "image": format!("ghcr.io/agent-bounties/rust-verifier@sha256:{}", "b".repeat(64)),
        "command": ["cargo", "test", "--locked", "--target-dir", "/tmp/target"],
        "workdir": "/workspace",
        "benchmark_digest": format!("sha256:{}", "a".repeat(64)),
        "timeout_seconds": 120,
        "cpu_millis": 1000,
        "memory_bytes": 512u64 << 20,
        "pids_limit": 128,
        "max_output_bytes": 1u64 << 20,
        "tmpfs_bytes": 256u64 << 20,
        "max_source_bytes": 512u64 << 20,
        "max_source_files": 50000,
        "max_benchmark_bytes": 64u64 << 20,
        "max_benchmark_files": 10000,
        "platform": "linux/amd64",
        "test_seed": 1
    })
}

/// Builds a complete job with every hash computed.
pub fn job_value(p: &JobParams) -> Value {
    let mut evidence = json!({
        "source_snapshot_digest": p.source_snapshot_digest,
        "notes": "fixture evidence \u{2014} raw UTF-8 and \"quotes\"",
    });
    if let (Some(sub), Some(obj)) = (&p.source_subdirectory, evidence.as_object_mut()) {
        obj.insert("source_subdirectory".into(), Value::String(sub.clone()));
    }
    let mut job = json!({
        "job_id": format!("{}:{}:{}", p.network, p.bounty_contract.to_ascii_lowercase(), p.round),
        "network": p.network,
        "bounty_id": p.bounty_id,
        "bounty_contract": p.bounty_contract,
        "round": p.round,
        "solver_wallet": p.solver,
        "verification_mode": "signed_quorum",
        "verifier_module": null,
        "eligible_verifiers": p.verifiers,
        "threshold": p.verifiers.len(),
        "verification_expires_at": p.expires_at,
        "terms": {
            "terms_hash": "",
            "policy_hash": "",
            "acceptance_criteria_hash": "",
            "benchmark_hash": "",
            "evidence_schema_hash": "",
            "creator_wallet": format!("0x{}", "44".repeat(20)),
            "created_at": "2030-01-01T00:00:00Z",
            "document": {
                "schema_version": "agent-bounties/terms-v1",
                "contract_terms": {"network": p.network, "reward": "1000000"},
                "title": "Fix the parser",
                "goal": "All benchmark tests pass",
                "acceptance_criteria": ["cargo test passes", "no new warnings"],
                "benchmark": {
                    "engine": "sandboxed_regression_v1",
                    "source": {
                        "kind": "github_commit",
                        "repository": "bounty-org/benchmarks",
                        "commit": BENCHMARK_COMMIT,
                        "subdirectory": "suites/parser"
                    },
                    "runner_manifest": p.manifest
                },
                "evidence_schema": {"type": "object", "required": ["source_snapshot_digest"]},
                "verification_policy": {
                    "mechanism": "signed_quorum",
                    "engine": "sandboxed_regression_v1",
                    "verifiers": p.verifiers,
                    "threshold": p.verifiers.len()
                }
            }
        },
        "submission_evidence": {
            "network": p.network,
            "bounty_contract": p.bounty_contract,
            "bounty_id": p.bounty_id,
            "round": p.round,
            "solver_wallet": p.solver,
            "artifact_reference": p.artifact_reference,
            "artifact_hash": "",
            "evidence": evidence,
            "evidence_hash": "",
            "created_at": "2030-01-02T00:00:00Z"
        },
        "verifier_reward": "1000",
        "current_solver_payout": "5000",
        "required_action": "verify",
        "payout_boundary": null
    });
    rehash(&mut job);
    job
}

/// Recomputes the five terms hashes, `artifact_hash` and `evidence_hash` from the job's
/// current contents. Hash fields that are absent stay absent.
pub fn rehash(job: &mut Value) {
    fn set(job: &mut Value, pointer: &str, hash: Bytes32) {
        if let Some(slot) = job.pointer_mut(pointer) {
            *slot = Value::String(hash.to_string());
        }
    }
    if let Some(document) = job.pointer("/terms/document").cloned() {
        set(job, "/terms/terms_hash", keccak_json(&document));
        for (key, hash_field) in [
            ("verification_policy", "/terms/policy_hash"),
            ("acceptance_criteria", "/terms/acceptance_criteria_hash"),
            ("benchmark", "/terms/benchmark_hash"),
            ("evidence_schema", "/terms/evidence_schema_hash"),
        ] {
            if let Some(part) = document.get(key) {
                set(job, hash_field, keccak_json(part));
            }
        }
    }
    if let Some(reference) = job
        .pointer("/submission_evidence/artifact_reference")
        .and_then(Value::as_str)
    {
        let hash = sha256_utf8(reference);
        set(job, "/submission_evidence/artifact_hash", hash);
    }
    if let Some(evidence) = job.pointer("/submission_evidence/evidence").cloned() {
        set(
            job,
            "/submission_evidence/evidence_hash",
            sha256_json(&evidence),
        );
    }
}

/// A valid default job.
pub fn valid_job() -> Value {
    job_value(&JobParams::default())
}

/// The facts of a fixture run that exited `exit_code`: some output on both streams, whose
/// digests stand for output no test reads.
pub fn run_facts(exit_code: i64) -> crate::ExecutionFacts {
    crate::ExecutionFacts {
        exit_code,
        stdout_sha256: crate::types::Sha256Digest::from_bytes([0x5a; 32]),
        stderr_sha256: crate::types::Sha256Digest::from_bytes([0x5b; 32]),
        stdout_bytes: 321,
        stderr_bytes: 7,
    }
}

/// A completed run of `job` with `facts`: its outcome and an evidence record shaped as the
/// worker's Docker executor writes it (every field, typed as [`crate::evidence::EvidenceRecord`]). For tests of
/// the stages after the worker, which need a candidate without running a container.
pub fn completed_run(
    job: &crate::ValidatedJob,
    facts: crate::ExecutionFacts,
) -> (crate::Outcome, Value) {
    completed_run_under(job, facts, crate::oci_runtime::RUNC)
}

/// [`completed_run`] under the OCI runtime `oci_runtime` (`runc` or `runsc`): the profile as
/// the worker requests it for that runtime and the engine facts a Debian host reports.
pub fn completed_run_under(
    job: &crate::ValidatedJob,
    facts: crate::ExecutionFacts,
    oci_runtime: &str,
) -> (crate::Outcome, Value) {
    let outcome = crate::Outcome::for_job(job, facts);
    let profile: crate::ContainerProfile =
        match serde_json::from_value(profile_under(job, oci_runtime)) {
            Ok(profile) => profile,
            Err(error) => panic!("fixture profile must parse: {error}"),
        };
    let stream = |sha256, bytes| crate::evidence::StreamEvidence {
        sha256,
        bytes,
        tail: String::new(),
        tail_truncated: bytes > 0,
    };
    let record = crate::evidence::EvidenceRecord {
        schema_version: crate::evidence::EVIDENCE_SCHEMA_VERSION.into(),
        executor: crate::evidence::DOCKER_EXECUTOR.into(),
        run_id: "fixture-run".into(),
        response_hash: Some(outcome.response_hash.to_string()),
        worker_version: "fixture".into(),
        worker_binary_sha256: None,
        engine: crate::evidence::EngineFacts::default(),
        oci_runtime: Some(runtime_facts(oci_runtime)),
        image: Some(crate::evidence::ImageFacts {
            reference: job.manifest().image().to_owned(),
            id: format!("sha256:{}", "0".repeat(64)),
            repo_digest: job.manifest().image().to_owned(),
            platform: job.manifest().platform().to_owned(),
        }),
        request: crate::revalidate::expected_request(job.manifest()),
        isolation: Some(crate::evidence::IsolationEvidence {
            requested: profile.clone(),
            observed: profile,
            mismatches: Vec::new(),
        }),
        container: None,
        timestamps: crate::evidence::Timestamps::default(),
        exit: crate::evidence::ExitFacts {
            started: true,
            exit_code: Some(facts.exit_code),
            removed: true,
            ..crate::evidence::ExitFacts::default()
        },
        resources: crate::evidence::ResourceFacts::default(),
        stdout: stream(facts.stdout_sha256, facts.stdout_bytes),
        stderr: stream(facts.stderr_sha256, facts.stderr_bytes),
        outcome: crate::evidence::Decision::Completed {
            exit_code: facts.exit_code,
        },
        tests: None,
    };
    let evidence = match serde_json::to_value(record) {
        Ok(value) => value,
        Err(error) => panic!("fixture evidence must serialize: {error}"),
    };
    (outcome, evidence)
}

/// What a Debian 12 host's engine reports for `name` (runc's commit, runsc's `--version`).
pub fn runtime_facts(name: &str) -> crate::oci_runtime::OciRuntimeFacts {
    let (path, args, version) = if name == crate::oci_runtime::RUNSC {
        (
            "/usr/bin/runsc",
            vec![
                "--platform=ptrace".to_string(),
                "--network=none".to_string(),
            ],
            "runsc version 0.0~20221219.0",
        )
    } else {
        ("runc", Vec::new(), "runc version 1.1.5+ds1-1+deb12u1")
    };
    crate::oci_runtime::OciRuntimeFacts {
        name: name.to_string(),
        path: path.to_string(),
        args,
        version: version.to_string(),
    }
}

/// The profile the worker would request and observe for `job` (image `PATH` and staged host
/// paths as a worker would have them), under runc.
pub fn profile_for(job: &crate::ValidatedJob) -> Value {
    profile_under(job, crate::oci_runtime::RUNC)
}

/// [`profile_for`] under the OCI runtime `oci_runtime`.
pub fn profile_under(job: &crate::ValidatedJob, oci_runtime: &str) -> Value {
    let m = job.manifest();
    let limits = match crate::profile::Limits::new(m.cpu_millis(), m.memory_bytes(), m.pids_limit())
    {
        Ok(limits) => limits,
        Err(error) => panic!("fixture limits must fit: {error}"),
    };
    let profile = crate::profile::expected_profile(&crate::profile::ProfileInputs {
        argv: m.command(),
        test_seed: m.test_seed(),
        tmpfs_bytes: m.tmpfs_bytes(),
        limits,
        image_path: Some("/usr/local/cargo/bin:/usr/local/bin:/usr/bin:/bin"),
        source: "/var/lib/agent-bounties/stage/source/c0ffee",
        benchmark: "/var/lib/agent-bounties/stage/benchmark/beef",
        oci_runtime,
        sandbox_uid: crate::profile::SANDBOX_UID_FIRST + 7,
    });
    match serde_json::to_value(profile) {
        Ok(value) => value,
        Err(error) => panic!("fixture profile must serialize: {error}"),
    }
}
