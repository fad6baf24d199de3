//! The re-check every stage after the worker performs on a candidate: the job it claims still
//! equals the platform's current job, both validate, the outcome re-derives from the job, and
//! the evidence record says the real Docker executor produced exactly that outcome.
//!
//! `worker --validate-regression-candidate`, the signer and the keeper all call
//! [`revalidate_candidate`] on the raw bytes they received, so none of them trusts an earlier
//! stage's opinion.

use serde_json::Value;

use crate::canonical::canonical_json;
use crate::job::{JobError, ValidatedJob, validate_job};
use crate::receipt::{OutcomeError, ValidatedOutcome, Verdict, validate_outcome};

/// Schema of the worker's evidence record.
pub const EVIDENCE_SCHEMA_VERSION: &str = "agent-bounties/regression-evidence-v1";
/// The only executor whose evidence may back a signature. Test doubles label themselves
/// differently, so a candidate they produced can never be signed.
pub const DOCKER_EXECUTOR: &str = "docker-engine";
/// Job fields the platform may change without changing what is paid for (PROTOCOL §2).
pub const INFORMATIONAL_JOB_FIELDS: [&str; 4] = [
    "verifier_reward",
    "current_solver_payout",
    "required_action",
    "payout_boundary",
];

/// Why a candidate's evidence record does not back its outcome.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvidenceError {
    /// The candidate carries no evidence record.
    #[error("candidate has no evidence record")]
    Missing,
    /// A field is absent or of the wrong type.
    #[error("evidence field `{0}` is missing or malformed")]
    Malformed(&'static str),
    /// The record's schema is not the one we understand.
    #[error("evidence schema {0:?} is not {EVIDENCE_SCHEMA_VERSION}")]
    Schema(String),
    /// The record was not produced by the real Docker executor.
    #[error("evidence comes from executor {0:?}, not the real docker executor")]
    NotRealExecutor(String),
    /// The record says the run did not complete.
    #[error("evidence does not record a completed run")]
    NotCompleted,
    /// A field of the record disagrees with the outcome.
    #[error("evidence field `{0}` does not match the outcome")]
    Mismatch(&'static str),
}

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

fn str_at<'a>(v: &'a Value, path: &[&str], name: &'static str) -> Result<&'a str, EvidenceError> {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_str)
        .ok_or(EvidenceError::Malformed(name))
}

fn u64_at(v: &Value, path: &[&str], name: &'static str) -> Result<u64, EvidenceError> {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_u64)
        .ok_or(EvidenceError::Malformed(name))
}

/// Checks that `evidence` is a record of the real Docker executor for exactly this outcome:
/// same response hash, a completed run with the receipt's exit code, the receipt's stream
/// hashes and sizes, and the receipt's image.
pub fn check_evidence(
    evidence: Option<&Value>,
    outcome: &ValidatedOutcome,
) -> Result<(), EvidenceError> {
    let ev = evidence.ok_or(EvidenceError::Missing)?;
    let schema = str_at(ev, &["schema_version"], "schema_version")?;
    if schema != EVIDENCE_SCHEMA_VERSION {
        return Err(EvidenceError::Schema(schema.chars().take(96).collect()));
    }
    let executor = str_at(ev, &["executor"], "executor")?;
    if executor != DOCKER_EXECUTOR {
        return Err(EvidenceError::NotRealExecutor(
            executor.chars().take(96).collect(),
        ));
    }
    let receipt = outcome.receipt();
    let response = str_at(ev, &["response_hash"], "response_hash")?;
    if !response.eq_ignore_ascii_case(&outcome.response_hash().to_string()) {
        return Err(EvidenceError::Mismatch("response_hash"));
    }
    if str_at(ev, &["outcome", "status"], "outcome.status")? != "completed" {
        return Err(EvidenceError::NotCompleted);
    }
    let exit = ev
        .get("outcome")
        .and_then(|o| o.get("exit_code"))
        .and_then(Value::as_i64)
        .ok_or(EvidenceError::Malformed("outcome.exit_code"))?;
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
            receipt.execution.stdout_sha256,
            receipt.execution.stdout_bytes,
        ),
        (
            "stderr",
            receipt.execution.stderr_sha256,
            receipt.execution.stderr_bytes,
        ),
    ];
    for (name, sha, bytes) in streams {
        if str_at(ev, &[name, "sha256"], name)? != sha.to_string() {
            return Err(EvidenceError::Mismatch(name));
        }
        if u64_at(ev, &[name, "bytes"], name)? != bytes {
            return Err(EvidenceError::Mismatch(name));
        }
    }
    if str_at(ev, &["image", "reference"], "image.reference")? != receipt.image {
        return Err(EvidenceError::Mismatch("image.reference"));
    }
    Ok(())
}

/// The full re-check of a candidate against the platform's current job at time `now_unix`.
pub fn revalidate_candidate(
    candidate_job: &Value,
    current_job: &Value,
    outcome: &Value,
    evidence: Option<&Value>,
    now_unix: u64,
) -> Result<Revalidated, RevalidationError> {
    let checked = revalidate_outcome(candidate_job, current_job, outcome, now_unix)?;
    check_evidence(evidence, &checked.outcome).map_err(RevalidationError::Evidence)?;
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
    validate_job(candidate_job, now_unix).map_err(RevalidationError::CandidateJob)?;
    let job = validate_job(current_job, now_unix).map_err(RevalidationError::CurrentJob)?;
    let changed = job_changes(candidate_job, current_job);
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

    #[test]
    fn tampered_outcome_is_refused() {
        let (job, mut outcome, evidence) = run(0);
        outcome["verdict"] = json!("failed");
        let err = revalidate_candidate(&job, &job, &outcome, Some(&evidence), fixtures::NOW);
        assert!(matches!(err, Err(RevalidationError::Outcome(_))));
    }
}
