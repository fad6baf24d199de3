//! `worker --validate-regression-candidate` answers the way the reference worker does: the
//! reference pipeline (`scripts/regression_verifier_pipeline.py`, `validate_candidate`) runs
//! it and accepts a candidate only when stdout is exactly `ok`. Our JSON check is behind
//! `--json`. No container is started: the outcome comes from the sdk's fixture of a completed
//! run, which is what a candidate without evidence (the reference's shape) carries.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use std::process::{Command, Output};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use verifier_sdk::fixtures::{JobParams, job_value};
use verifier_sdk::{ExecutionFacts, Sha256Digest, validate_job};

const WORKER: &str = env!("CARGO_BIN_EXE_worker");

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `{job, current_job, outcome}` exactly as the reference pipeline writes `validate.json`.
fn reference_request() -> Value {
    let job = job_value(&JobParams {
        expires_at: now() + 3600,
        ..JobParams::default()
    });
    let validated = validate_job(&job, now()).unwrap();
    let facts = ExecutionFacts {
        exit_code: 0,
        stdout_sha256: Sha256Digest::from_bytes([0x5a; 32]),
        stderr_sha256: Sha256Digest::from_bytes([0x5b; 32]),
        stdout_bytes: 3,
        stderr_bytes: 0,
    };
    let (outcome, _evidence) = verifier_sdk::fixtures::completed_run(&validated, facts);
    json!({"job": job, "current_job": job, "outcome": outcome})
}

fn validate(request: &Value, extra: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("validate.json");
    std::fs::write(&path, serde_json::to_vec(request).unwrap()).unwrap();
    Command::new(WORKER)
        .arg("--validate-regression-candidate")
        .arg(&path)
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn a_valid_reference_candidate_prints_exactly_ok_like_the_reference_worker() {
    let out = validate(&reference_request(), &[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // The reference compares `completed.stdout.strip()` with "ok".
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "ok\n");
}

#[test]
fn json_flag_prints_the_check_object() {
    let request = reference_request();
    let out = validate(&request, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v,
        json!({
            "schema_version": "agent-bounties/worker-candidate-check-v1",
            "valid": true,
            "verdict": "passed",
            "response_hash": request["outcome"]["response_hash"],
            "evidence_checked": false,
        })
    );
}

#[test]
fn a_refused_candidate_prints_no_ok_and_exits_4() {
    let mut flipped = reference_request();
    flipped["outcome"]["verdict"] = json!("failed");
    let out = validate(&flipped, &[]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("error"),
        "{out:?}"
    );
    let out = validate(&flipped, &["--json"]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["valid"], false, "{v}");
}

/// #46 item 5: under `--log-format json` the refusal's stderr line is a log object too (it was
/// the one plain `worker: error:` line left), and stdout still holds only the refusal object.
#[test]
fn a_refused_candidate_under_json_logs_writes_its_error_as_one_log_object() {
    let mut flipped = reference_request();
    flipped["outcome"]["verdict"] = json!("failed");
    let out = validate(&flipped, &["--json", "--log-format", "json"]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["valid"], false, "{v}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(!lines.is_empty(), "no error on stderr");
    for line in lines {
        let object: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON log object ({e}): {line}"));
        assert_eq!(object["level"], "ERROR", "{line}");
        assert!(
            object["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("worker: error: ")),
            "{line}"
        );
    }
}

#[test]
fn json_without_validate_is_a_usage_error() {
    let out = Command::new(WORKER).args(["--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}
