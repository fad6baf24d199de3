//! `signer agree`: do the runner's candidate and this slot's own re-run of the same job agree?
//!
//! The shell side of independent execution (`.github/scripts/compare-candidates.sh`) asks this
//! for each job, so the rule ("the verdict and every receipt commitment equal; the output may
//! differ") has one definition, [`verifier_sdk::agreement`], shared with the keeper and
//! `worker reproduce`. Nothing is fetched and no key is read: it compares two files.

use std::path::Path;

use serde::Serialize;
use verifier_sdk::{Agreement, Bytes32, Candidate, CompareError, compare_candidates};

use crate::files::{FileError, MAX_CANDIDATE_BYTES, read_json};

/// `schema` of the `--json` answer.
pub const AGREEMENT_SCHEMA: &str = "agent-bounties/regression-agreement-v1";

/// Why the two files could not be compared (exit 4: nothing may be signed on their strength).
#[derive(Debug, thiserror::Error)]
pub enum AgreeError {
    /// A file is unreadable.
    #[error("{which} candidate: {source}")]
    File {
        /// `runner` or `own`.
        which: &'static str,
        /// Why.
        #[source]
        source: FileError,
    },
    /// A file is not a candidate.
    #[error("{which} candidate: {source}")]
    Malformed {
        /// `runner` or `own`.
        which: &'static str,
        /// Why.
        #[source]
        source: verifier_sdk::ArtifactError,
    },
    /// An outcome is no outcome of the job.
    #[error(transparent)]
    Compare(#[from] CompareError),
}

/// The answer, as `--json` prints it.
#[derive(Debug, Serialize)]
pub struct AgreeReport {
    /// [`AGREEMENT_SCHEMA`].
    pub schema: &'static str,
    /// The runner candidate's job id (when it has one).
    pub job_id: Option<String>,
    /// The runner candidate's claimed response hash.
    pub runner_response_hash: Option<Bytes32>,
    /// The own candidate's.
    pub own_response_hash: Option<Bytes32>,
    /// Whether a signer may sign the own run.
    pub agrees: bool,
    /// One line for people.
    pub summary: String,
    /// The typed comparison.
    pub result: Agreement,
}

fn read(which: &'static str, path: &Path) -> Result<Candidate, AgreeError> {
    let v = read_json(path, MAX_CANDIDATE_BYTES)
        .map_err(|source| AgreeError::File { which, source })?;
    Candidate::from_value(&v).map_err(|source| AgreeError::Malformed { which, source })
}

fn claimed_hash(c: &Candidate) -> Option<Bytes32> {
    c.outcome
        .get("response_hash")
        .and_then(serde_json::Value::as_str)
        .and_then(|s| s.parse().ok())
}

/// Compares the runner's candidate with the slot's own (the runner's job is the reference).
pub fn agree(runner: &Path, own: &Path) -> Result<AgreeReport, AgreeError> {
    let r = read("runner", runner)?;
    let o = read("own", own)?;
    let result = compare_candidates(&r, &o)?;
    Ok(AgreeReport {
        schema: AGREEMENT_SCHEMA,
        job_id: r
            .job
            .get("job_id")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned),
        runner_response_hash: claimed_hash(&r),
        own_response_hash: claimed_hash(&o),
        agrees: result.agrees(),
        summary: result.describe(),
        result,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::path::PathBuf;

    use verifier_sdk::fixtures::{JobParams, NOW, job_value};
    use verifier_sdk::{ExecutionFacts, Outcome, Sha256Digest, validate_job};

    use super::*;

    fn write(dir: &Path, name: &str, exit_code: i64, stdout: u8) -> PathBuf {
        let raw = job_value(&JobParams::default());
        let job = validate_job(&raw, NOW).unwrap();
        let outcome = Outcome::for_job(
            &job,
            ExecutionFacts {
                exit_code,
                stdout_sha256: Sha256Digest::from_bytes([stdout; 32]),
                stderr_sha256: Sha256Digest::from_bytes([0; 32]),
                stdout_bytes: 9,
                stderr_bytes: 0,
            },
        );
        let c = Candidate::new(
            raw,
            serde_json::to_value(&outcome).unwrap(),
            "t".into(),
            None,
        );
        let path = dir.join(name);
        std::fs::write(&path, serde_json::to_vec(&c).unwrap()).unwrap();
        path
    }

    #[test]
    fn other_timings_agree_and_a_flipped_verdict_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let runner = write(dir.path(), "runner.json", 0, 1);
        let timings = write(dir.path(), "own.json", 0, 2);
        let failed = write(dir.path(), "failed.json", 1, 1);
        let r = agree(&runner, &timings).unwrap();
        assert!(r.agrees, "{}", r.summary);
        assert_ne!(r.runner_response_hash, r.own_response_hash);
        assert_eq!(r.summary, "verdict reproduced; output differs (stdout)");
        let r = agree(&runner, &failed).unwrap();
        assert!(!r.agrees);
        assert_eq!(r.summary, "DISAGREES on verdict");
    }

    #[test]
    fn an_unreadable_or_foreign_file_is_an_error_not_an_answer() {
        let dir = tempfile::tempdir().unwrap();
        let runner = write(dir.path(), "runner.json", 0, 1);
        std::fs::write(dir.path().join("junk.json"), b"{\"schema\": \"x\"}").unwrap();
        assert!(matches!(
            agree(&runner, &dir.path().join("junk.json")),
            Err(AgreeError::Malformed { which: "own", .. })
        ));
        assert!(matches!(
            agree(&dir.path().join("missing.json"), &runner),
            Err(AgreeError::File {
                which: "runner",
                ..
            })
        ));
    }
}
