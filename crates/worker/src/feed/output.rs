//! Candidate files and their manifest (PROTOCOL §7), written atomically into the output dir.

use std::path::{Path, PathBuf};

use serde_json::Value;
use verifier_sdk::{Candidate, CandidateManifest, Outcome, ValidatedJob, candidate_file_name};

use super::cache::write_atomically;
use crate::intoto::{EvidenceAddress, statement_file_name, test_result_statement};

/// Name of the candidates manifest in the output dir.
pub const MANIFEST_FILE: &str = "manifest.json";

/// Why an output file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// Serializing or writing failed.
    #[error("writing {path:?}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// The runner revision recorded in candidates: `GITHUB_SHA` when it is a commit id (in CI),
/// `local` otherwise. Anything else in the variable is ignored rather than copied into a
/// signed-over artifact.
pub fn runner_revision() -> String {
    revision_from(std::env::var("GITHUB_SHA").ok().as_deref())
}

fn revision_from(github_sha: Option<&str>) -> String {
    match github_sha {
        Some(sha) if sha.len() == 40 && sha.bytes().all(|b| b.is_ascii_hexdigit()) => {
            sha.to_ascii_lowercase()
        }
        _ => "local".into(),
    }
}

/// Writes `candidate-<sha256(job_id)>.json` for a verdict, and beside it the in-toto
/// statement `candidate-<sha256(job_id)>.intoto.json` when the evidence is known, and returns
/// the candidate's file name.
pub fn write_candidate(
    out_dir: &Path,
    job: &ValidatedJob,
    outcome: &Outcome,
    evidence: Option<Value>,
    runner_revision: &str,
) -> Result<String, OutputError> {
    let name = candidate_file_name(job.job_id());
    let path = out_dir.join(&name);
    let io = |source| OutputError::Io {
        path: path.clone(),
        source,
    };
    // The in-toto statement beside it; the evidence is carried inside the candidate, so that
    // is its address. Written first so a candidate never appears without its statement.
    if let Some(evidence) = &evidence {
        let address = EvidenceAddress::of_record(evidence, &format!("{name}#/evidence"));
        let statement = test_result_statement(job.job_id(), outcome, &address);
        let statement_path = out_dir.join(statement_file_name(&name));
        let bytes = serde_json::to_vec_pretty(&statement).map_err(|e| io(e.into()))?;
        write_atomically(out_dir, &statement_path, &bytes).map_err(|source| OutputError::Io {
            path: statement_path.clone(),
            source,
        })?;
    }
    let outcome = serde_json::to_value(outcome).map_err(|e| io(e.into()))?;
    let candidate = Candidate::new(
        job.raw().clone(),
        outcome,
        runner_revision.to_owned(),
        evidence,
    );
    let bytes = serde_json::to_vec_pretty(&candidate).map_err(|e| io(e.into()))?;
    write_atomically(out_dir, &path, &bytes).map_err(io)?;
    Ok(name)
}

/// Writes `manifest.json`.
pub fn write_manifest(out_dir: &Path, manifest: &CandidateManifest) -> Result<(), OutputError> {
    let path = out_dir.join(MANIFEST_FILE);
    let io = |source| OutputError::Io {
        path: path.clone(),
        source,
    };
    let bytes = serde_json::to_vec_pretty(manifest).map_err(|e| io(e.into()))?;
    write_atomically(out_dir, &path, &bytes).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use verifier_sdk::fixtures::{NOW, valid_job};
    use verifier_sdk::{ExecutionFacts, validate_job, validate_outcome};

    #[test]
    fn revision_is_a_commit_id_or_local() {
        let sha = "ABCDEF0123456789abcdef0123456789abcdef01";
        assert_eq!(revision_from(Some(sha)), sha.to_ascii_lowercase());
        assert_eq!(revision_from(None), "local");
        assert_eq!(revision_from(Some("main")), "local");
        assert_eq!(revision_from(Some(&"g".repeat(40))), "local");
        assert_eq!(revision_from(Some(&"a".repeat(41))), "local");
    }

    #[test]
    fn candidate_and_manifest_round_trip_through_the_sdk_readers() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("candidates");
        let job = validate_job(&valid_job(), NOW).unwrap();
        let d = |c: char| {
            format!("sha256:{}", c.to_string().repeat(64))
                .parse()
                .unwrap()
        };
        let facts = ExecutionFacts {
            exit_code: 0,
            stdout_sha256: d('1'),
            stderr_sha256: d('2'),
            stdout_bytes: 0,
            stderr_bytes: 0,
        };
        let outcome = Outcome::for_job(&job, facts);
        let name = write_candidate(&out, &job, &outcome, None, "local").unwrap();
        assert_eq!(name, candidate_file_name(job.job_id()));
        let raw: Value = serde_json::from_slice(&std::fs::read(out.join(&name)).unwrap()).unwrap();
        let c = Candidate::from_value(&raw).unwrap();
        assert_eq!(&c.job, job.raw());
        assert_eq!(c.runner_revision, "local");
        let again = validate_job(&c.job, NOW).unwrap();
        assert_eq!(
            validate_outcome(&c.outcome, &again).unwrap().outcome(),
            &outcome
        );

        let mut m = CandidateManifest::new("base-mainnet");
        m.push(job.job_id());
        write_manifest(&out, &m).unwrap();
        let raw: Value =
            serde_json::from_slice(&std::fs::read(out.join(MANIFEST_FILE)).unwrap()).unwrap();
        assert_eq!(CandidateManifest::from_value(&raw).unwrap(), m);
    }
}
