//! The OCI runtime a sandbox container runs under (issue #28): the engine's `runc`, or gVisor's
//! `runsc`, which puts a second kernel (the Sentry) between the untrusted code and the host.
//!
//! The operator chooses it, never the runner manifest: the manifest's hash is committed by the
//! bounty, and the stronger sandbox is the operator's defence in depth. So the receipt's
//! `isolation.runtime` stays `"docker"` (PROTOCOL §5) and response hashes do not change; the
//! runtime lives in the evidence record, in the container profile (`HostConfig.Runtime`,
//! requested and read back like every other field) and in [`OciRuntimeFacts`].
//!
//! The names, the runsc limits, [`OciRuntimeFacts`] and [`OciRuntimeError`] live in
//! [`crate::runtimes`] (re-exported here), below the profile and the evidence record; this
//! module checks a record against them.

use crate::evidence::EvidenceRecord;
pub use crate::runtimes::{
    OciRuntimeError, OciRuntimeFacts, RUNC, RUNSC, is_supported, runsc_host_pids_limit,
};

fn clip(text: &str) -> String {
    text.chars().take(96).collect()
}

/// Checks that the parts of `record` that name the runtime agree: the requested and observed
/// profile, and the engine's facts when present (whose version must be that runtime's own, so
/// a `runsc` that is really runc does not pass). Records that name no runtime (written before
/// it was recorded) pass; [`check_required`] refuses them where a runtime is required.
pub fn check_consistent(record: &EvidenceRecord) -> Result<(), OciRuntimeError> {
    let Some(isolation) = record.isolation.as_ref() else {
        return Ok(());
    };
    let requested = isolation.requested.runtime.as_str();
    let observed = isolation.observed.runtime.as_str();
    if requested != observed {
        return Err(OciRuntimeError::Inconsistent(format!(
            "requested {:?}, the engine reported {:?}",
            clip(requested),
            clip(observed)
        )));
    }
    let Some(facts) = record.oci_runtime.as_ref() else {
        return Ok(());
    };
    if facts.name != observed {
        return Err(OciRuntimeError::Inconsistent(format!(
            "the profile names {:?}, the engine facts {:?}",
            clip(observed),
            clip(&facts.name)
        )));
    }
    // The binary's own version line: `runsc version …` / `runc version …` (empty when the
    // worker could not run the binary; a requirement then refuses it, check_required).
    if is_supported(&facts.name)
        && !facts.version.is_empty()
        && !facts
            .version
            .starts_with(&format!("{} version ", facts.name))
    {
        return Err(OciRuntimeError::Inconsistent(format!(
            "runtime {:?} reports version {:?}, which is not {}'s",
            clip(&facts.name),
            clip(&facts.version),
            facts.name
        )));
    }
    Ok(())
}

/// Checks that `record` shows a run under `required` everywhere it names the runtime: the
/// requested and observed profile and the engine's facts, all present and agreeing
/// ([`check_consistent`]).
pub fn check_required(record: &EvidenceRecord, required: &str) -> Result<(), OciRuntimeError> {
    check_consistent(record)?;
    let observed = record
        .isolation
        .as_ref()
        .map(|i| i.observed.runtime.as_str())
        .unwrap_or_default();
    let Some(facts) = record.oci_runtime.as_ref().filter(|_| !observed.is_empty()) else {
        return Err(OciRuntimeError::NotRecorded {
            required: required.to_string(),
        });
    };
    if observed != required {
        return Err(OciRuntimeError::Other {
            required: required.to_string(),
            found: clip(observed),
        });
    }
    if facts.version.is_empty() {
        return Err(OciRuntimeError::Inconsistent(format!(
            "the engine's {required} has no recorded version (the worker could not run {:?})",
            clip(&facts.path)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::EvidenceError;
    use crate::fixtures;
    use crate::receipt::ExecutionFacts;
    use crate::revalidate::{RevalidationError, check_required_runtime, revalidate_candidate};
    use crate::types::Sha256Digest;
    use crate::validate_job;
    use serde_json::{Value, json};

    /// A completed, passing run under `runtime`: the job, its outcome and evidence.
    fn run_under(runtime: &str) -> (Value, Value, Value) {
        let job = fixtures::valid_job();
        let validated = validate_job(&job, fixtures::NOW).unwrap();
        let facts = ExecutionFacts {
            exit_code: 0,
            stdout_sha256: Sha256Digest::from_bytes([0xdd; 32]),
            stderr_sha256: Sha256Digest::from_bytes([0xee; 32]),
            stdout_bytes: 12,
            stderr_bytes: 0,
        };
        let (outcome, evidence) = fixtures::completed_run_under(&validated, facts, runtime);
        (job, serde_json::to_value(&outcome).unwrap(), evidence)
    }

    fn revalidate(job: &Value, outcome: &Value, evidence: &Value) -> Result<(), RevalidationError> {
        revalidate_candidate(job, job, outcome, Some(evidence), fixtures::NOW).map(|_| ())
    }

    fn runtime_error(result: Result<(), EvidenceError>) -> OciRuntimeError {
        match result {
            Err(EvidenceError::OciRuntime(e)) => e,
            other => panic!("expected an OCI runtime refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_runsc_run_passes_revalidation_and_the_runsc_requirement() {
        let (job, outcome, evidence) = run_under(RUNSC);
        revalidate(&job, &outcome, &evidence).unwrap();
        check_required_runtime(Some(&evidence), RUNSC).unwrap();
        let observed = &evidence["isolation"]["observed"];
        assert_eq!(observed["runtime"], "runsc");
        assert_eq!(observed["pids_limit"], json!(runsc_host_pids_limit(128)));
        assert!(
            observed["ulimits"]
                .as_array()
                .unwrap()
                .contains(&json!({"name": "nproc", "soft": 128, "hard": 128}))
        );
    }

    #[test]
    fn evidence_of_a_runc_run_is_refused_when_runsc_is_required() {
        let (job, outcome, evidence) = run_under(RUNC);
        revalidate(&job, &outcome, &evidence).unwrap();
        let err = runtime_error(check_required_runtime(Some(&evidence), RUNSC));
        assert_eq!(
            err,
            OciRuntimeError::Other {
                required: "runsc".into(),
                found: "runc".into()
            }
        );
        assert_eq!(
            err.to_string(),
            "the run's OCI runtime is \"runc\", not the required \"runsc\""
        );
    }

    #[test]
    fn a_planted_record_claiming_runsc_for_a_runc_run_is_refused() {
        let (job, outcome, genuine) = run_under(RUNC);
        // 1. Only the read-back rewritten: requested and observed disagree.
        let mut planted = genuine.clone();
        planted["isolation"]["observed"]["runtime"] = json!("runsc");
        assert!(matches!(
            runtime_error(check_required_runtime(Some(&planted), RUNSC)),
            OciRuntimeError::Inconsistent(_)
        ));
        assert!(revalidate(&job, &outcome, &planted).is_err());
        // 2. Both profiles rewritten: the engine facts still name runc.
        planted["isolation"]["requested"]["runtime"] = json!("runsc");
        let err = runtime_error(check_required_runtime(Some(&planted), RUNSC));
        assert!(err.to_string().contains("engine facts"), "{err}");
        // 3. The facts' name too: their version line is runc's.
        planted["oci_runtime"]["name"] = json!("runsc");
        let err = runtime_error(check_required_runtime(Some(&planted), RUNSC));
        assert!(err.to_string().contains("which is not runsc's"), "{err}");
        // 4. Every runtime field rewritten, version included: the limits are still the ones a
        //    runc run has (pids in the host cgroup, no nproc), which is not how a runsc run
        //    is sandboxed, so the profile check refuses it.
        planted["oci_runtime"] = serde_json::to_value(fixtures::runtime_facts(RUNSC)).unwrap();
        check_required_runtime(Some(&planted), RUNSC).unwrap();
        let err = revalidate(&job, &outcome, &planted).unwrap_err();
        let RevalidationError::Evidence(EvidenceError::Isolation { fields, .. }) = &err else {
            panic!("{err:?}");
        };
        assert_eq!(fields, &["pids_limit".to_string(), "ulimits".to_string()]);
    }

    #[test]
    fn a_record_from_before_runtimes_were_recorded_still_revalidates_but_meets_no_requirement() {
        let (job, outcome, mut evidence) = run_under(RUNC);
        evidence.as_object_mut().unwrap().remove("oci_runtime");
        for record in ["requested", "observed"] {
            evidence["isolation"][record]
                .as_object_mut()
                .unwrap()
                .remove("runtime");
        }
        revalidate(&job, &outcome, &evidence).unwrap();
        let err = runtime_error(check_required_runtime(Some(&evidence), RUNSC));
        assert_eq!(
            err,
            OciRuntimeError::NotRecorded {
                required: "runsc".into()
            }
        );
    }

    #[test]
    fn a_run_under_an_unknown_runtime_is_refused() {
        let (job, outcome, mut evidence) = run_under(RUNC);
        for record in ["requested", "observed"] {
            evidence["isolation"][record]["runtime"] = json!("kata");
        }
        evidence["oci_runtime"]["name"] = json!("kata");
        let err = revalidate(&job, &outcome, &evidence).unwrap_err();
        let RevalidationError::Evidence(EvidenceError::Isolation { fields, .. }) = &err else {
            panic!("{err:?}");
        };
        assert_eq!(fields, &["runtime".to_string()]);
    }

    #[test]
    fn a_runsc_run_without_engine_facts_meets_no_requirement() {
        let (_, _, mut evidence) = run_under(RUNSC);
        evidence.as_object_mut().unwrap().remove("oci_runtime");
        assert!(matches!(
            runtime_error(check_required_runtime(Some(&evidence), RUNSC)),
            OciRuntimeError::NotRecorded { .. }
        ));
    }

    #[test]
    fn the_host_backstop_leaves_room_for_the_sentry() {
        assert_eq!(runsc_host_pids_limit(32), 1536);
        assert_eq!(runsc_host_pids_limit(128), 4608);
        assert_eq!(runsc_host_pids_limit(i64::MAX), i64::MAX);
    }

    #[test]
    fn only_runc_and_runsc_are_supported() {
        assert!(is_supported("runc") && is_supported("runsc"));
        assert!(!is_supported("kata") && !is_supported("") && !is_supported("RUNSC"));
    }
}
