//! `worker --run-regression --in-toto FILE`: the in-toto statement of a real run (real
//! Docker), validated by the in-toto project's own Python bindings (`in-toto-attestation`
//! from PyPI, installed by scripts/python-deps.sh), not by our own types. A missing validator
//! fails these tests: they never skip.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use super::example_run::example_request;
use crate::support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use verifier_sdk::fixtures::{JobParams, job_value};

const WORKER: &str = env!("CARGO_BIN_EXE_worker");

/// The interpreter of the venv scripts/python-deps.sh makes, or `$IN_TOTO_PYTHON`.
fn python() -> PathBuf {
    let path = std::env::var_os("IN_TOTO_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| support::workspace_root().join(".work/py-venv/bin/python"));
    assert!(
        path.exists(),
        "the in-toto validator's Python ({}) is missing: run scripts/python-deps.sh",
        path.display()
    );
    path
}

/// Runs the independent validator; `Ok(summary)` or `Err(stderr)`.
fn check_with_in_toto_bindings(statement: &Path) -> Result<Value, String> {
    let out = Command::new(python())
        .arg(support::workspace_root().join("scripts/check-intoto.py"))
        .arg(statement)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !stderr.contains("ModuleNotFoundError"),
        "in-toto-attestation is not installed: run scripts/python-deps.sh: {stderr}"
    );
    if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).unwrap())
    } else {
        Err(stderr)
    }
}

struct Ran {
    job: Value,
    code: i32,
    outcome: Value,
    stderr: String,
    statement: PathBuf,
    _dir: tempfile::TempDir,
}

/// Runs the example benchmark on `source` (`source-pass` or `source-fail`) with `--in-toto`.
fn run_example(source: &str) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    let example = example_request(dir.path(), source);
    let statement = dir.path().join("statement.intoto.json");
    let out = example
        .run_regression()
        .arg("--in-toto")
        .arg(&statement)
        .output()
        .unwrap();
    Ran {
        job: example.job,
        code: out.status.code().unwrap(),
        outcome: serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        statement,
        _dir: dir,
    }
}

fn assert_statement_matches(ran: &Ran, result: &str) {
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let summary = check_with_in_toto_bindings(&ran.statement)
        .unwrap_or_else(|e| panic!("in-toto-attestation refused our statement: {e}"));
    let receipt = &ran.outcome["receipt"];
    let hex = |v: &Value| {
        v.as_str()
            .unwrap()
            .strip_prefix("sha256:")
            .unwrap()
            .to_owned()
    };
    assert_eq!(summary["result"], result);
    assert_eq!(
        summary["subjects"]["source"]["sha256"],
        hex(&receipt["source_digest"])
    );
    assert_eq!(
        summary["subjects"]["benchmark"]["sha256"],
        hex(&receipt["benchmark_digest"])
    );
    assert_eq!(
        summary["configuration"]["runner-manifest"]["digest"]["sha256"],
        hex(&receipt["runner_manifest_hash"])
    );
    let image = receipt["image"].as_str().unwrap();
    assert_eq!(summary["configuration"]["image"]["uri"], image);
    assert_eq!(
        summary["configuration"]["image"]["digest"]["sha256"],
        image.split_once("@sha256:").unwrap().1
    );
    assert_eq!(summary["responseHash"], ran.outcome["response_hash"]);
    // The evidence address is the content-addressed record the run wrote.
    let url = summary["url"].as_str().unwrap();
    let evidence = Path::new(url.strip_prefix("file://").unwrap());
    assert!(evidence.is_file(), "{url}");
    assert_eq!(
        summary["configuration"]["evidence"]["digest"]["sha256"],
        evidence.file_stem().unwrap().to_str().unwrap()
    );
    let record: Value = serde_json::from_slice(&fs::read(evidence).unwrap()).unwrap();
    assert_eq!(record["response_hash"], ran.outcome["response_hash"]);
}

#[test]
fn in_toto_statement_of_a_passing_run_validates_with_the_in_toto_bindings() {
    let ran = run_example("source-pass");
    assert_eq!(ran.outcome["verdict"], "passed", "{}", ran.stderr);
    assert_statement_matches(&ran, "PASSED");
}

#[test]
fn in_toto_statement_of_a_failing_run_says_failed() {
    let ran = run_example("source-fail");
    assert_eq!(ran.outcome["verdict"], "failed", "{}", ran.stderr);
    assert_statement_matches(&ran, "FAILED");
}

/// `feed` writes the statement beside each candidate through `write_candidate`; the candidate
/// of a real run and its statement, checked by the bindings and against the candidate.
#[test]
fn feed_statement_beside_the_candidate_validates_with_the_in_toto_bindings() {
    let ran = run_example("source-pass");
    let summary = check_with_in_toto_bindings(&ran.statement).unwrap();
    let evidence_path = summary["url"]
        .as_str()
        .unwrap()
        .strip_prefix("file://")
        .unwrap();
    let evidence: Value = serde_json::from_slice(&fs::read(evidence_path).unwrap()).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let job = verifier_sdk::validate_job(&ran.job, now).unwrap();
    let checked = verifier_sdk::validate_outcome(&ran.outcome, &job).unwrap();
    let out = ran.statement.with_file_name("candidates");
    let name = worker_jobs::feed::output::write_candidate(
        &out,
        &job,
        checked.outcome(),
        Some(worker_jobs::feed::output::CandidateEvidence::read_back(
            &evidence,
        )),
        "local",
    )
    .unwrap();
    let statement = out.join(worker_jobs::intoto::statement_file_name(&name));
    let summary = check_with_in_toto_bindings(&statement)
        .unwrap_or_else(|e| panic!("in-toto-attestation refused the feed's statement: {e}"));
    assert_eq!(summary["result"], "PASSED");
    assert_eq!(summary["url"], format!("{name}#/evidence"));
    assert_eq!(summary["responseHash"], ran.outcome["response_hash"]);
    // The evidence digest names the record the candidate carries.
    let candidate: Value = serde_json::from_slice(&fs::read(out.join(&name)).unwrap()).unwrap();
    let carried = verifier_sdk::canonical_json(&candidate["evidence"]);
    use sha2::Digest as _;
    assert_eq!(
        summary["configuration"]["evidence"]["digest"]["sha256"],
        hex::encode(sha2::Sha256::digest(carried.as_bytes()))
    );
    // A candidate written without evidence gets no statement.
    let bare = ran.statement.with_file_name("bare");
    let name =
        worker_jobs::feed::output::write_candidate(&bare, &job, checked.outcome(), None, "local")
            .unwrap();
    assert!(
        !bare
            .join(worker_jobs::intoto::statement_file_name(&name))
            .exists()
    );
}

/// The validator is not a rubber stamp: a statement with a field the predicate does not
/// define, or one claiming PASSED under another predicate type, is refused by it.
#[test]
fn in_toto_bindings_refuse_a_tampered_statement() {
    let ran = run_example("source-pass");
    let original: Value = serde_json::from_slice(&fs::read(&ran.statement).unwrap()).unwrap();
    let tampered = ran.statement.with_file_name("tampered.json");
    for edit in [
        (|v: &mut Value| v["predicate"]["verdictOverride"] = json!("PASSED")) as fn(&mut Value),
        |v| v["predicateType"] = json!("https://in-toto.io/attestation/vsa/v1"),
        |v| v["_type"] = json!("https://in-toto.io/Statement/v0.1"),
        |v| v["subject"] = json!([]),
        |v| v["predicate"]["result"] = json!("MAYBE"),
    ] {
        let mut value = original.clone();
        edit(&mut value);
        fs::write(&tampered, serde_json::to_vec(&value).unwrap()).unwrap();
        let refused = check_with_in_toto_bindings(&tampered);
        assert!(refused.is_err(), "accepted {value}");
    }
}

/// `worker --run-regression <dir>/request.json --in-toto <dir>/statement.json` for `job`
/// (the request written here), staging under `root`, on the default Docker socket; returns
/// the command and the statement's path.
pub(super) fn run_regression_with_in_toto(
    dir: &Path,
    root: &Path,
    job: &Value,
) -> (Command, PathBuf) {
    let request = dir.join("request.json");
    fs::write(&request, serde_json::to_vec(&json!({"job": job})).unwrap()).unwrap();
    let statement = dir.join("statement.json");
    let mut command = Command::new(WORKER);
    command
        .arg("--run-regression")
        .arg(&request)
        .arg("--in-toto")
        .arg(&statement)
        .env("REGRESSION_SANDBOX_STAGING_ROOT", root)
        .env_remove("DOCKER_HOST");
    (command, statement)
}

#[test]
fn no_verdict_writes_no_in_toto_statement() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("staging");
    fs::create_dir(&root).unwrap();
    // A job whose trees were never staged: a no-verdict input_mismatch.
    let job = job_value(&JobParams::default());
    let (mut command, statement) = run_regression_with_in_toto(dir.path(), &root, &job);
    let out = command.output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(!statement.exists());
}

#[test]
fn in_toto_needs_run_regression() {
    let out = Command::new(WORKER)
        .args(["--in-toto", "x.json", "plan", "r.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--in-toto"));
}
