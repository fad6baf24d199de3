//! Records name the build that wrote them, not only the version every commit shares (#51
//! item 3): the evidence of a real run carries the same version and commit as `--version`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use std::fs;
use std::process::Command;

use serde_json::Value;

use super::example_run::ExampleRequest;

const WORKER: &str = env!("CARGO_BIN_EXE_worker");

/// `0.1.0 (306eba9abc12)` from `worker 0.1.0 (306eba9abc12)`.
pub(super) fn worker_build() -> String {
    let out = Command::new(WORKER).arg("--version").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    text.trim().strip_prefix("worker ").unwrap().to_owned()
}

/// Every commit is version 0.1.0, so evidence that named only the version could not say which
/// build decided a verdict: an operator chasing a bad verdict, or a signer asked to refuse a
/// known-bad build, had nothing to go on.
#[test]
fn evidence_of_two_builds_of_one_version_cannot_be_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let (_, evidence) = ExampleRequest::failing_run_evidence(dir.path(), &[]);
    let record: Value = serde_json::from_slice(&fs::read(evidence).unwrap()).unwrap();
    let build = worker_build();
    assert_eq!(record["worker_version"], build.as_str(), "{record}");
    // The commit is in it (the version alone was the old, ambiguous record).
    assert!(
        build.starts_with(concat!(env!("CARGO_PKG_VERSION"), " ("))
            && build.len() > env!("CARGO_PKG_VERSION").len() + 3,
        "{build}"
    );
}

/// Issue #49: the evidence named the commit but not the executable, so a rebuild of that commit
/// could not be compared with the build that decided the verdict.
#[test]
fn evidence_names_the_worker_binary_that_ran() {
    use sha2::{Digest, Sha256};
    let dir = tempfile::tempdir().unwrap();
    let (_, evidence) = ExampleRequest::failing_run_evidence(dir.path(), &[]);
    let record: Value = serde_json::from_slice(&fs::read(evidence).unwrap()).unwrap();
    let binary = hex::encode(Sha256::digest(fs::read(WORKER).unwrap()));
    assert_eq!(
        record["worker_binary_sha256"],
        format!("sha256:{binary}").as_str(),
        "{record}"
    );
}
