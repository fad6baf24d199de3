//! The re-check every stage after the worker performs on a candidate: the job it claims still
//! equals the platform's current job, both validate, the outcome re-derives from the job, and
//! the evidence record says the real Docker executor produced exactly that outcome in a
//! container whose requested and observed isolation are exactly the profile the manifest
//! demands (DESIGN §4).
//!
//! `worker --validate-regression-candidate`, the signer and the keeper all call
//! [`revalidate_candidate`] on the raw bytes they received, so none of them trusts an earlier
//! stage's opinion.

use serde_json::Value;

use crate::artifacts::ParsedCandidate;
use crate::canonical::canonical_json;
pub use crate::evidence::EvidenceError;
use crate::evidence::{EvidenceRecord, RequestFacts};
use crate::job::{JobError, ValidatedJob, validate_job};
use crate::manifest::RunnerManifest;
use crate::oci_runtime;
use crate::profile::check_recorded_profile;
use crate::receipt::{OutcomeError, ValidatedOutcome, Verdict, validate_outcome};

/// Job fields the platform may change without changing what is paid for (PROTOCOL §2).
pub const INFORMATIONAL_JOB_FIELDS: [&str; 4] = [
    "verifier_reward",
    "current_solver_payout",
    "required_action",
    "payout_boundary",
];

/// Why a candidate was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RevalidationError {
    /// The job inside the candidate does not validate.
    #[error("candidate job is invalid: {0}")]
    CandidateJob(#[source] JobError),
    /// The platform's current job does not validate (expired, changed rules, …).
    #[error("current job is invalid: {0}")]
    CurrentJob(#[source] JobError),
    /// The job changed since the run on a payment-relevant field.
    #[error("job changed since the run: {}", .0.join(", "))]
    JobChanged(Vec<String>),
    /// The outcome does not re-derive from the job.
    #[error("outcome does not re-derive: {0}")]
    Outcome(#[source] OutcomeError),
    /// The evidence does not back the outcome.
    #[error("evidence rejected: {0}")]
    Evidence(#[source] EvidenceError),
}

/// A candidate that passed every check.
#[derive(Debug, Clone)]
pub struct Revalidated {
    /// The current job, validated.
    pub job: ValidatedJob,
    /// The outcome, re-derived from it.
    pub outcome: ValidatedOutcome,
}

/// Top-level job fields whose values differ between the two jobs, ignoring the informational
/// ones. Values are compared as canonical JSON, so key order and hex spelling inside the raw
/// JSON are compared exactly as received.
pub fn job_changes(candidate_job: &Value, current_job: &Value) -> Vec<String> {
    let empty = serde_json::Map::new();
    let a = candidate_job.as_object().unwrap_or(&empty);
    let b = current_job.as_object().unwrap_or(&empty);
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter()
        .filter(|k| !INFORMATIONAL_JOB_FIELDS.contains(&k.as_str()))
        .filter(|k| {
            let x = a.get(k.as_str()).map(canonical_json);
            let y = b.get(k.as_str()).map(canonical_json);
            x != y
        })
        .map(|k| k.chars().take(64).collect())
        .collect()
}

/// Checks that `evidence` is a record of the real Docker executor for exactly this outcome of
/// `job`: same response hash, a completed run with the receipt's exit code, the receipt's stream
/// hashes and sizes, the receipt's image, and isolation as [`check_isolation`] requires.
pub fn check_evidence(
    evidence: Option<&Value>,
    job: &ValidatedJob,
    outcome: &ValidatedOutcome,
) -> Result<(), EvidenceError> {
    let record = EvidenceRecord::from_docker_value(evidence.ok_or(EvidenceError::Missing)?)?;
    check_record(&record, job, outcome)
}

/// [`check_evidence`] on a record already parsed.
pub fn check_record(
    ev: &EvidenceRecord,
    job: &ValidatedJob,
    outcome: &ValidatedOutcome,
) -> Result<(), EvidenceError> {
    let receipt = outcome.receipt();
    let response = ev
        .response_hash
        .as_deref()
        .ok_or(EvidenceError::Malformed("response_hash"))?;
    if !response.eq_ignore_ascii_case(&outcome.response_hash().to_string()) {
        return Err(EvidenceError::Mismatch("response_hash"));
    }
    let crate::evidence::Decision::Completed { exit_code: exit } = ev.outcome else {
        return Err(EvidenceError::NotCompleted);
    };
    if exit != receipt.execution.exit_code {
        return Err(EvidenceError::Mismatch("outcome.exit_code"));
    }
    let expected_verdict = if exit == 0 {
        Verdict::Passed
    } else {
        Verdict::Failed
    };
    if expected_verdict != outcome.verdict() {
        return Err(EvidenceError::Mismatch("outcome.exit_code"));
    }
    let streams = [
        (
            "stdout",
            &ev.stdout,
            receipt.execution.stdout_sha256,
            receipt.execution.stdout_bytes,
        ),
        (
            "stderr",
            &ev.stderr,
            receipt.execution.stderr_sha256,
            receipt.execution.stderr_bytes,
        ),
    ];
    for (name, recorded, sha, bytes) in streams {
        if recorded.sha256 != sha || recorded.bytes != bytes {
            return Err(EvidenceError::Mismatch(name));
        }
    }
    let image = ev
        .image
        .as_ref()
        .ok_or(EvidenceError::Malformed("image.reference"))?;
    if image.reference != receipt.image {
        return Err(EvidenceError::Mismatch("image.reference"));
    }
    check_isolation(ev, job)?;
    oci_runtime::check_consistent(ev).map_err(EvidenceError::OciRuntime)
}

/// The operator's own requirement on top of every check above (`--require-oci-runtime` of the
/// signer and keeper): `evidence` is a record of a run under the OCI runtime `required`, named
/// so by the requested and observed profile and the engine's facts alike
/// ([`oci_runtime::check_required`]).
pub fn check_required_runtime(
    evidence: Option<&Value>,
    required: &str,
) -> Result<(), EvidenceError> {
    let record = EvidenceRecord::from_docker_value(evidence.ok_or(EvidenceError::Missing)?)?;
    oci_runtime::check_required(&record, required).map_err(EvidenceError::OciRuntime)
}

/// Checks the record's isolation: the worker found no difference, and both the profile it
/// requested and the one the engine reported are, field by field, what the job's manifest
/// demands. The signer cannot re-run the container; it can at least refuse a run whose own
/// record says it had a network, a writable root, root, capabilities or larger limits.
pub fn check_isolation(evidence: &EvidenceRecord, job: &ValidatedJob) -> Result<(), EvidenceError> {
    let isolation = evidence
        .isolation
        .as_ref()
        .ok_or(EvidenceError::Malformed("isolation"))?;
    if !isolation.mismatches.is_empty() {
        return Err(EvidenceError::Isolation {
            record: "mismatches",
            fields: isolation
                .mismatches
                .iter()
                .take(32)
                .map(|f| f.chars().take(64).collect())
                .collect(),
        });
    }
    let fields = expected_request(job.manifest()).differing_fields(&evidence.request);
    if !fields.is_empty() {
        return Err(EvidenceError::Isolation {
            record: "request",
            fields,
        });
    }
    for (record, profile) in [
        ("requested", &isolation.requested),
        ("observed", &isolation.observed),
    ] {
        let fields = check_recorded_profile(job.manifest(), profile);
        if !fields.is_empty() {
            return Err(EvidenceError::Isolation { record, fields });
        }
    }
    Ok(())
}

/// The `request` facts an evidence record of a run of `manifest` carries (see
/// [`RequestFacts::for_manifest`]).
pub fn expected_request(manifest: &RunnerManifest) -> RequestFacts {
    RequestFacts::for_manifest(manifest)
}

/// The full re-check of a candidate against the platform's current job at time `now_unix`.
pub fn revalidate_candidate(
    candidate_job: &Value,
    current_job: &Value,
    outcome: &Value,
    evidence: Option<&Value>,
    now_unix: u64,
) -> Result<Revalidated, RevalidationError> {
    let candidate_job =
        ValidatedJob::parse(candidate_job).map_err(RevalidationError::CandidateJob)?;
    let checked = outcome_against(&candidate_job, current_job, outcome, now_unix)?;
    check_evidence(evidence, &checked.job, &checked.outcome)
        .map_err(RevalidationError::Evidence)?;
    Ok(checked)
}

/// [`revalidate_candidate`] on a candidate whose job was parsed already.
pub fn revalidate_parsed(
    candidate: &ParsedCandidate,
    current_job: &Value,
    now_unix: u64,
) -> Result<Revalidated, RevalidationError> {
    let raw = candidate.candidate();
    let checked = outcome_against(candidate.job(), current_job, &raw.outcome, now_unix)?;
    check_evidence(raw.evidence.as_ref(), &checked.job, &checked.outcome)
        .map_err(RevalidationError::Evidence)?;
    Ok(checked)
}

/// Every check of [`revalidate_candidate`] except the evidence record: for operators who
/// hold only the protocol's fields. Never enough to sign on.
pub fn revalidate_outcome(
    candidate_job: &Value,
    current_job: &Value,
    outcome: &Value,
    now_unix: u64,
) -> Result<Revalidated, RevalidationError> {
    let candidate_job =
        ValidatedJob::parse(candidate_job).map_err(RevalidationError::CandidateJob)?;
    outcome_against(&candidate_job, current_job, outcome, now_unix)
}

fn outcome_against(
    candidate_job: &ValidatedJob,
    current_job: &Value,
    outcome: &Value,
    now_unix: u64,
) -> Result<Revalidated, RevalidationError> {
    candidate_job
        .check_live(now_unix)
        .map_err(RevalidationError::CandidateJob)?;
    let job = validate_job(current_job, now_unix).map_err(RevalidationError::CurrentJob)?;
    let changed = job_changes(candidate_job.raw(), current_job);
    if !changed.is_empty() {
        return Err(RevalidationError::JobChanged(changed));
    }
    let outcome = validate_outcome(outcome, &job).map_err(RevalidationError::Outcome)?;
    Ok(Revalidated { job, outcome })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;
    use crate::receipt::ExecutionFacts;
    use crate::types::Sha256Digest;
    use serde_json::json;

    fn run(exit_code: i64) -> (Value, Value, Value) {
        let job = fixtures::valid_job();
        let validated = validate_job(&job, fixtures::NOW).unwrap();
        let facts = ExecutionFacts {
            exit_code,
            stdout_sha256: Sha256Digest::from_bytes([0xdd; 32]),
            stderr_sha256: Sha256Digest::from_bytes([0xee; 32]),
            stdout_bytes: 12,
            stderr_bytes: 0,
        };
        let (outcome, evidence) = fixtures::completed_run(&validated, facts);
        (job, serde_json::to_value(&outcome).unwrap(), evidence)
    }

    #[test]
    fn a_genuine_candidate_passes() {
        let (job, outcome, evidence) = run(0);
        let r = revalidate_candidate(&job, &job, &outcome, Some(&evidence), fixtures::NOW).unwrap();
        assert_eq!(r.outcome.verdict(), Verdict::Passed);
        let (job, outcome, evidence) = run(1);
        let r = revalidate_candidate(&job, &job, &outcome, Some(&evidence), fixtures::NOW).unwrap();
        assert_eq!(r.outcome.verdict(), Verdict::Failed);
    }

    #[test]
    fn informational_fields_may_change_but_nothing_else() {
        let (job, outcome, evidence) = run(0);
        let mut current = job.clone();
        current["verifier_reward"] = json!("999");
        assert!(
            revalidate_candidate(&job, &current, &outcome, Some(&evidence), fixtures::NOW).is_ok()
        );
        let mut current = job.clone();
        current["job_id"] = json!("base-mainnet:0xother:1");
        let err = revalidate_candidate(&job, &current, &outcome, Some(&evidence), fixtures::NOW);
        assert!(matches!(err, Err(RevalidationError::JobChanged(f)) if f == ["job_id"]));
    }

    /// The per-test section is solver-controlled: a run that failed can print that every test
    /// passed. It must change neither the response hash nor what the signer accepts.
    #[test]
    fn a_tests_section_changes_neither_the_response_hash_nor_the_signers_check() {
        let (job, outcome, evidence) = run(1);
        assert!(
            evidence.get("tests").is_none(),
            "records without tests keep their bytes"
        );
        let forged = test_outcomes::parse(
            b"test_a (m.C.test_a) ... ok\ntest_b (m.C.test_b) ... ok\n",
            b"",
        );
        let mut with_tests = evidence.clone();
        with_tests["tests"] = serde_json::to_value(&forged).unwrap();
        let plain =
            revalidate_candidate(&job, &job, &outcome, Some(&evidence), fixtures::NOW).unwrap();
        let tested =
            revalidate_candidate(&job, &job, &outcome, Some(&with_tests), fixtures::NOW).unwrap();
        assert_eq!(
            tested.outcome.response_hash(),
            plain.outcome.response_hash()
        );
        assert_eq!(tested.outcome.verdict(), Verdict::Failed);
        let record = EvidenceRecord::from_docker_value(&with_tests).unwrap();
        assert_eq!(record.tests, Some(forged));
        // A malformed section is refused by name, like any other field.
        with_tests["tests"] = json!(5);
        let err = revalidate_candidate(&job, &job, &outcome, Some(&with_tests), fixtures::NOW);
        assert!(matches!(
            err,
            Err(RevalidationError::Evidence(EvidenceError::Malformed(
                "tests"
            )))
        ));
    }

    /// The engine section's host facts (`worker doctor`'s, issue #28) are the worker's own word
    /// about its host: a worker could claim runsc, seccomp and an `ok` doctor on any host. They
    /// must change neither the response hash nor what the signer accepts, and must survive a
    /// parse and re-serialization, so `worker explain` shows what the worker wrote.
    #[test]
    fn a_host_facts_section_changes_neither_the_response_hash_nor_the_signers_check() {
        let (job, outcome, evidence) = run(1);
        assert!(
            evidence["engine"].get("host").is_none(),
            "records without host facts keep their bytes"
        );
        let mut with_host = evidence.clone();
        with_host["engine"]["host"] = json!({
            "doctor": "ok",
            "checks": {"cgroups": "ok", "engine": "ok", "oci_runtime": "ok", "seccomp": "ok"},
            "cgroup_layout": "v2",
            "runtimes": {"runsc": {"path": "/usr/bin/runsc", "args": ["--network=none"]}},
            "default_runtime": "runsc",
            "security_options": ["name=seccomp,profile=default", "name=apparmor"],
            "userns_remap": false,
            "seccomp": true,
            "apparmor": true,
            "host_apparmor": true,
            "swap_total_bytes": 0,
            "swap_limit": true,
        });
        let plain =
            revalidate_candidate(&job, &job, &outcome, Some(&evidence), fixtures::NOW).unwrap();
        let hosted =
            revalidate_candidate(&job, &job, &outcome, Some(&with_host), fixtures::NOW).unwrap();
        assert_eq!(
            hosted.outcome.response_hash(),
            plain.outcome.response_hash()
        );
        assert_eq!(hosted.outcome.verdict(), Verdict::Failed);
        // Kept as written, field for field.
        let record = EvidenceRecord::from_docker_value(&with_host).unwrap();
        assert_eq!(serde_json::to_value(&record).unwrap(), with_host);
        // A list of runtimes naming only runsc is no evidence of a run under runsc: the
        // requirement reads the run's own runtime facts and profiles.
        assert!(check_required_runtime(Some(&with_host), "runsc").is_err());
        assert!(check_required_runtime(Some(&with_host), "runc").is_ok());
        // A malformed section is refused by name, like any other field.
        with_host["engine"]["host"] = json!({"doctor": "fine"});
        let err = revalidate_candidate(&job, &job, &outcome, Some(&with_host), fixtures::NOW);
        assert!(
            matches!(
                err,
                Err(RevalidationError::Evidence(EvidenceError::Malformed(
                    "engine"
                )))
            ),
            "{err:?}"
        );
    }

    /// A record a worker wrote before the engine section had host facts (`src/testdata`: the
    /// worker pre-built from main at dca40df, `worker 0.1.0 (aded521d9f38-modified)`,
    /// `--run-regression` of fixtures/example/source-fail on this project's Debian host, with
    /// its request and outcome): it still parses and re-serializes byte for byte. It ran as
    /// uid 65532, which every sandbox on its host shared (issue #41: a neighbour could fill
    /// that uid's kernel budgets and fail the run), so the re-check refuses it by its user;
    /// given a uid of its own it passes, so nothing else about it is refused.
    #[test]
    fn an_evidence_record_from_before_host_facts_round_trips_and_its_shared_uid_is_refused() {
        let raw = include_str!("testdata/pre-host-facts.evidence.json");
        let evidence: Value = serde_json::from_str(raw).unwrap();
        assert!(evidence["engine"].get("host").is_none());
        let record = EvidenceRecord::from_docker_value(&evidence).unwrap();
        assert_eq!(canonical_json(&serde_json::to_value(&record).unwrap()), raw);
        let request: Value =
            serde_json::from_str(include_str!("testdata/pre-host-facts.request.json")).unwrap();
        let outcome: Value =
            serde_json::from_str(include_str!("testdata/pre-host-facts.outcome.json")).unwrap();
        let job = &request["job"];
        let refused = revalidate_candidate(job, job, &outcome, Some(&evidence), fixtures::NOW);
        let Err(RevalidationError::Evidence(EvidenceError::Isolation { fields, .. })) = refused
        else {
            panic!("a run under the shared uid was not refused: {refused:?}");
        };
        assert_eq!(fields, ["user", "tmpfs"]);
        let mut own_uid = evidence.clone();
        let uid = crate::profile::SANDBOX_UID_FIRST + 5;
        for record in ["requested", "observed"] {
            let profile = &mut own_uid["isolation"][record];
            profile["user"] = json!(crate::profile::sandbox_user(uid));
            let home = profile["tmpfs"]["/tmp/home"].as_str().unwrap().to_owned();
            profile["tmpfs"]["/tmp/home"] =
                json!(home.replace("uid=65532,gid=65532", &format!("uid={uid},gid={uid}")));
        }
        let checked =
            revalidate_candidate(job, job, &outcome, Some(&own_uid), fixtures::NOW).unwrap();
        assert_eq!(checked.outcome.verdict(), Verdict::Failed);
    }

    #[test]
    fn expired_current_job_is_refused() {
        let (job, outcome, evidence) = run(0);
        let err = revalidate_candidate(&job, &job, &outcome, Some(&evidence), fixtures::EXPIRES_AT);
        assert!(matches!(err, Err(RevalidationError::CandidateJob(_))));
    }

    #[test]
    fn evidence_must_come_from_the_real_executor_and_match() {
        let (job, outcome, evidence) = run(0);
        let check = |ev: Option<&Value>| {
            revalidate_candidate(&job, &job, &outcome, ev, fixtures::NOW).map(|_| ())
        };
        assert!(matches!(
            check(None),
            Err(RevalidationError::Evidence(EvidenceError::Missing))
        ));
        let mutations: [(&str, Value); 7] = [
            ("/executor", json!("test-double")),
            (
                "/schema_version",
                json!("agent-bounties/regression-evidence-v0"),
            ),
            ("/response_hash", json!(format!("0x{}", "0".repeat(64)))),
            ("/outcome/exit_code", json!(1)),
            ("/outcome/status", json!("no_verdict")),
            ("/stdout/bytes", json!(13)),
            (
                "/image/reference",
                json!("other@sha256:".to_owned() + &"b".repeat(64)),
            ),
        ];
        for (pointer, value) in mutations {
            let mut ev = evidence.clone();
            *ev.pointer_mut(pointer).unwrap() = value;
            assert!(
                matches!(check(Some(&ev)), Err(RevalidationError::Evidence(_))),
                "{pointer} mutation accepted"
            );
        }
        assert!(check(Some(&evidence)).is_ok());
    }

    /// Sets `pointer` in both the requested and observed profile of the evidence, or in the
    /// observed one only, and expects a refusal naming `field`.
    fn refused_isolation(pointer: &str, value: &Value, field: &str) {
        let (job, outcome, evidence) = run(0);
        for records in [&["observed"][..], &["requested", "observed"][..]] {
            let mut ev = evidence.clone();
            for record in records {
                let slot = ev
                    .pointer_mut(&format!("/isolation/{record}{pointer}"))
                    .unwrap_or_else(|| panic!("{pointer} not in the fixture"));
                *slot = value.clone();
            }
            let err = revalidate_candidate(&job, &job, &outcome, Some(&ev), fixtures::NOW)
                .map(|_| ())
                .unwrap_err();
            let RevalidationError::Evidence(EvidenceError::Isolation { fields, .. }) = &err else {
                panic!("{pointer}: {err:?}");
            };
            assert_eq!(fields, &[field.to_string()], "{pointer}");
            assert!(err.to_string().contains(field), "{err}");
        }
    }

    #[test]
    fn evidence_with_a_bridge_network_is_refused() {
        refused_isolation("/network_mode", &json!("bridge"), "network_mode");
        refused_isolation("/network_mode", &json!("host"), "network_mode");
    }

    #[test]
    fn evidence_with_a_writable_root_filesystem_is_refused() {
        refused_isolation("/readonly_rootfs", &json!(false), "readonly_rootfs");
    }

    #[test]
    fn evidence_with_the_root_user_is_refused() {
        refused_isolation("/user", &json!("0:0"), "user");
        refused_isolation("/user", &json!(""), "user");
    }

    #[test]
    fn evidence_with_capabilities_not_dropped_is_refused() {
        refused_isolation("/cap_drop", &json!([]), "cap_drop");
        refused_isolation("/cap_add", &json!(["SYS_ADMIN"]), "cap_add");
    }

    #[test]
    fn evidence_of_a_privileged_container_is_refused() {
        refused_isolation("/privileged", &json!(true), "privileged");
    }

    #[test]
    fn evidence_with_larger_limits_is_refused() {
        let m = fixtures::sample_manifest();
        let memory = m["memory_bytes"].as_i64().unwrap();
        let pids = m["pids_limit"].as_i64().unwrap();
        let nano = m["cpu_millis"].as_i64().unwrap() * 1_000_000;
        refused_isolation("/memory", &json!(memory * 2), "memory");
        refused_isolation("/memory_swap", &json!(-1), "memory_swap");
        refused_isolation("/pids_limit", &json!(pids + 1), "pids_limit");
        refused_isolation("/pids_limit", &json!(0), "pids_limit");
        refused_isolation("/nano_cpus", &json!(nano * 2), "nano_cpus");
        refused_isolation("/shm_size", &json!(1i64 << 40), "shm_size");
        refused_isolation(
            "/ulimits",
            &json!([{"name": "nofile", "soft": 4096, "hard": 4096}]),
            "ulimits",
        );
    }

    #[test]
    fn evidence_of_a_run_with_a_longer_timeout_or_larger_output_cap_is_refused() {
        let (job, outcome, evidence) = run(0);
        let m = fixtures::sample_manifest();
        for (key, value) in [
            (
                "timeout_ms",
                json!(m["timeout_seconds"].as_u64().unwrap() * 1000 + 1),
            ),
            (
                "max_output_bytes",
                json!(m["max_output_bytes"].as_u64().unwrap() * 2),
            ),
            (
                "memory_bytes",
                json!(m["memory_bytes"].as_u64().unwrap() * 2),
            ),
            ("argv", json!(["true"])),
            ("test_seed", json!(2)),
        ] {
            let mut ev = evidence.clone();
            ev["request"][key] = value;
            let err = revalidate_candidate(&job, &job, &outcome, Some(&ev), fixtures::NOW);
            assert_eq!(
                err.map(|_| ()).unwrap_err(),
                RevalidationError::Evidence(EvidenceError::Isolation {
                    record: "request",
                    fields: vec![key.to_string()],
                }),
                "{key}"
            );
        }
    }

    #[test]
    fn evidence_with_a_tmpfs_without_size_is_refused() {
        refused_isolation(
            "/tmpfs/~1tmp",
            &json!("rw,exec,nosuid,nodev,mode=1777"),
            "tmpfs",
        );
    }

    #[test]
    fn evidence_without_no_new_privileges_is_refused() {
        refused_isolation("/security_opt", &json!([]), "security_opt");
        refused_isolation(
            "/security_opt",
            &json!(["no-new-privileges", "seccomp=unconfined"]),
            "security_opt",
        );
    }

    #[test]
    fn evidence_with_an_extra_environment_variable_is_refused() {
        let (_, _, evidence) = run(0);
        let mut env = evidence["isolation"]["observed"]["env"].clone();
        env.as_array_mut()
            .unwrap()
            .push(json!("GITHUB_TOKEN=ghp_x"));
        refused_isolation("/env", &env, "env");
        let mut two_paths = evidence["isolation"]["observed"]["env"].clone();
        two_paths.as_array_mut().unwrap().push(json!("PATH=/tmp"));
        refused_isolation("/env", &two_paths, "env");
    }

    #[test]
    fn evidence_with_other_namespace_mount_or_command_fields_is_refused() {
        let cases: [(&str, Value, &str); 12] = [
            ("/ipc_mode", json!("host"), "ipc_mode"),
            ("/pid_mode", json!("host"), "pid_mode"),
            ("/userns_mode", json!("host"), "userns_mode"),
            ("/init", json!(false), "init"),
            ("/mounts/0/read_only", json!(false), "mounts"),
            ("/mount_points/1/read_only", json!(false), "mount_points"),
            ("/binds", json!(["/:/host"]), "binds"),
            ("/devices", json!(1), "devices"),
            ("/log_driver", json!("json-file"), "log_driver"),
            ("/entrypoint", json!(["sh", "-c", "exit 0"]), "entrypoint"),
            ("/cmd", json!(["--extra"]), "cmd"),
            ("/hostname", json!("host"), "hostname"),
        ];
        for (pointer, value, field) in cases {
            refused_isolation(pointer, &value, field);
        }
    }

    #[test]
    fn evidence_without_isolation_or_with_reported_mismatches_is_refused() {
        let (job, outcome, evidence) = run(0);
        let check = |ev: &Value| {
            revalidate_candidate(&job, &job, &outcome, Some(ev), fixtures::NOW).map(|_| ())
        };
        let mut missing = evidence.clone();
        missing.as_object_mut().unwrap().remove("isolation");
        assert_eq!(
            check(&missing).unwrap_err(),
            RevalidationError::Evidence(EvidenceError::Malformed("isolation"))
        );
        let mut partial = evidence.clone();
        partial["isolation"]["observed"]
            .as_object_mut()
            .unwrap()
            .remove("network_mode");
        assert_eq!(
            check(&partial).unwrap_err(),
            RevalidationError::Evidence(EvidenceError::Malformed("isolation.observed"))
        );
        let mut unknown = evidence.clone();
        unknown["isolation"]["observed"]["network_disabled"] = json!(false);
        assert!(check(&unknown).is_err());
        let mut reported = evidence.clone();
        reported["isolation"]["mismatches"] = json!(["readonly_rootfs"]);
        assert!(matches!(
            check(&reported).unwrap_err(),
            RevalidationError::Evidence(EvidenceError::Isolation {
                record: "mismatches",
                ..
            })
        ));
        assert!(check(&evidence).is_ok());
    }

    #[test]
    fn tampered_outcome_is_refused() {
        let (job, mut outcome, evidence) = run(0);
        outcome["verdict"] = json!("failed");
        let err = revalidate_candidate(&job, &job, &outcome, Some(&evidence), fixtures::NOW);
        assert!(matches!(err, Err(RevalidationError::Outcome(_))));
    }
}
