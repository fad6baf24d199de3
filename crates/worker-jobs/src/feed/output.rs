//! Candidate files and their manifest (PROTOCOL §7), written atomically into the output dir.

use serde::Deserialize as _;
use std::borrow::Cow;
use std::path::{Path, PathBuf};

use serde_json::Value;
use verifier_sdk::{
    Candidate, CandidateEntry, CandidateManifest, MAX_MANIFEST_CANDIDATES, Outcome,
    ParsedCandidate, Sha256Digest, ValidatedJob, candidate_file_name,
};

use super::cache::write_atomically;
use crate::intoto::{EvidenceAddress, statement_file_name, test_result_statement};
use crate::run::{SealedEvidence, evidence_address};

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

/// The evidence record a candidate carries: its JSON, its store address and the per-test
/// report its statement names.
#[derive(Debug, Clone)]
pub struct CandidateEvidence<'a> {
    /// The record as the candidate carries it.
    pub json: &'a Value,
    /// SHA-256 of its canonical JSON.
    pub digest: Sha256Digest,
    /// Its `tests` section.
    pub tests: Option<Cow<'a, test_outcomes::TestReport>>,
}

impl<'a> CandidateEvidence<'a> {
    /// A fresh run's record: everything from the record sealed once, nothing decoded back.
    pub fn sealed(evidence: &'a SealedEvidence) -> Self {
        Self {
            json: evidence.json(),
            digest: evidence.digest(),
            tests: evidence.record().tests.as_ref().map(Cow::Borrowed),
        }
    }

    /// A record read back from outside this run (a cached verdict's), kept byte for byte as
    /// it was read: hashed here, its `tests` parsed when they parse.
    pub fn read_back(json: &'a Value) -> Self {
        Self {
            json,
            digest: evidence_address(json),
            tests: json
                .get("tests")
                .and_then(|t| test_outcomes::TestReport::deserialize(t).ok())
                .map(Cow::Owned),
        }
    }
}

/// Writes `candidate-<sha256(job_id)>.json` for a verdict, and beside it the in-toto
/// statement `candidate-<sha256(job_id)>.intoto.json` when the evidence is known, and returns
/// the candidate's file name.
pub fn write_candidate(
    out_dir: &Path,
    job: &ValidatedJob,
    outcome: &Outcome,
    evidence: Option<CandidateEvidence<'_>>,
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
        let address = EvidenceAddress::inside(evidence.digest, &format!("{name}#/evidence"));
        let statement =
            test_result_statement(job.job_id(), outcome, &address, evidence.tests.as_deref());
        let statement_path = out_dir.join(statement_file_name(&name));
        let bytes = serde_json::to_vec_pretty(&statement).map_err(|e| io(e.into()))?;
        write_atomically(out_dir, &statement_path, &bytes).map_err(|source| OutputError::Io {
            path: statement_path.clone(),
            source,
        })?;
    }
    let candidate = Candidate::of_run(
        job,
        outcome,
        runner_revision,
        evidence.map(|e| e.json.clone()),
    )
    .map_err(|e| io(e.into()))?;
    let bytes = serde_json::to_vec_pretty(&candidate).map_err(|e| io(e.into()))?;
    write_atomically(out_dir, &path, &bytes).map_err(io)?;
    Ok(name)
}

/// Largest candidate file read back to order an over-long manifest (the signer's own cap).
const MAX_CANDIDATE_READ_BACK: u64 = 16 << 20;

/// Writes `manifest.json`, at most [`MAX_MANIFEST_CANDIDATES`] entries (the bound the signer
/// agrees on); past it a warning names how many were left out (see
/// [`write_bounded_manifest`]).
pub fn write_manifest(out_dir: &Path, manifest: &CandidateManifest) -> Result<(), OutputError> {
    write_bounded_manifest(out_dir, manifest, MAX_MANIFEST_CANDIDATES).map(|_| ())
}

/// Writes `manifest.json` with at most `bound` entries: of a longer list, the `bound` whose
/// candidates (in `out_dir`, written by this process) expire first, so a crowded feed still
/// gets its most urgent candidates signed instead of a manifest the signer would cut. Returns
/// the entries left out; their candidate files stay, and the next run lists them again.
pub fn write_bounded_manifest(
    out_dir: &Path,
    manifest: &CandidateManifest,
    bound: usize,
) -> Result<Vec<CandidateEntry>, OutputError> {
    let path = out_dir.join(MANIFEST_FILE);
    let io = |source| OutputError::Io {
        path: path.clone(),
        source,
    };
    let mut manifest = manifest.clone();
    let left_out = manifest.keep_earliest(bound, |e| candidate_expiry(out_dir, e));
    if !left_out.is_empty() {
        tracing::warn!(
            listed = manifest.candidates.len(),
            left_out = left_out.len(),
            bound,
            "more candidates than a manifest may list; the earliest-expiring are listed, the \
             rest wait for the next run"
        );
    }
    let bytes = serde_json::to_vec_pretty(&manifest).map_err(|e| io(e.into()))?;
    write_atomically(out_dir, &path, &bytes).map_err(io)?;
    Ok(left_out)
}

/// The `verification_expires_at` of an entry's candidate file, `None` when it does not read.
fn candidate_expiry(out_dir: &Path, entry: &CandidateEntry) -> Option<u64> {
    let raw =
        artifact_fs::read_bounded(&out_dir.join(&entry.file), MAX_CANDIDATE_READ_BACK).ok()?;
    let value: Value = serde_json::from_slice(&raw).ok()?;
    let candidate = Candidate::from_value(&value).ok()?;
    Some(ParsedCandidate::parse(candidate).ok()?.job().expires_at())
}

#[cfg(test)]
mod tests {
    use super::*;
    use verifier_sdk::fixtures::{NOW, valid_job};
    use verifier_sdk::{ExecutionFacts, validate_job, validate_outcome};

    /// The outcome of a run of `job` that exited 0 with empty output (digests `11…` and `22…`).
    fn passing_outcome(job: &ValidatedJob) -> Outcome {
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
        Outcome::for_job(job, facts)
    }

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
        let outcome = passing_outcome(&job);
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

    /// The statement beside a candidate names the tests its evidence's `tests` section lists.
    #[test]
    fn the_statement_beside_a_candidate_names_the_tests_of_its_evidence() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("candidates");
        let job = validate_job(&valid_job(), NOW).unwrap();
        let facts = ExecutionFacts {
            exit_code: 1,
            stdout_sha256: verifier_sdk::Sha256Digest::from_bytes([1; 32]),
            stderr_sha256: verifier_sdk::Sha256Digest::from_bytes([2; 32]),
            stdout_bytes: 0,
            stderr_bytes: 0,
        };
        let (outcome, mut evidence) = verifier_sdk::fixtures::completed_run(&job, facts);
        let tests =
            test_outcomes::parse(b"running 2 tests\ntest a ... ok\ntest b ... FAILED\n", b"");
        evidence["tests"] = serde_json::to_value(&tests).unwrap();
        let name = write_candidate(
            &out,
            &job,
            &outcome,
            Some(CandidateEvidence::read_back(&evidence)),
            "local",
        )
        .unwrap();
        let statement: Value = serde_json::from_slice(
            &std::fs::read(out.join(crate::intoto::statement_file_name(&name))).unwrap(),
        )
        .unwrap();
        assert_eq!(statement["predicate"]["result"], "FAILED");
        assert_eq!(
            statement["predicate"]["passedTests"],
            serde_json::json!(["a"])
        );
        assert_eq!(
            statement["predicate"]["failedTests"],
            serde_json::json!(["b"])
        );
    }

    /// Writes a candidate for a fixture job of its own bounty contract, expiring at `expires_at`.
    fn candidate_expiring(out: &Path, n: u64, expires_at: u64) -> String {
        use verifier_sdk::fixtures::{JobParams, job_value};
        let mut contract = [0x10u8; 20];
        contract[12..].copy_from_slice(&n.to_be_bytes());
        let job = job_value(&JobParams {
            bounty_contract: verifier_sdk::Address::from_bytes(contract).to_string(),
            expires_at,
            ..JobParams::default()
        });
        let job = validate_job(&job, NOW).unwrap();
        let outcome = passing_outcome(&job);
        write_candidate(out, &job, &outcome, None, "local").unwrap();
        job.job_id().to_owned()
    }

    /// 1,001 candidates, one past the bound the signer accepts: the manifest lists the 1,000
    /// that expire first (the latest, here the first run, is left out), never all 1,001 for
    /// the signer to refuse.
    #[test]
    fn a_manifest_of_1001_candidates_lists_the_1000_that_expire_first() {
        assert_eq!(MAX_MANIFEST_CANDIDATES, 1000);
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        let mut m = CandidateManifest::new("base-mainnet");
        let latest = candidate_expiring(out, 5000, NOW + 90_000);
        m.push(&latest);
        for n in 0..1000 {
            m.push(&candidate_expiring(out, n, NOW + 80_000 - n));
        }
        write_manifest(out, &m).unwrap();
        let raw: Value =
            serde_json::from_slice(&std::fs::read(out.join(MANIFEST_FILE)).unwrap()).unwrap();
        let written = CandidateManifest::from_value(&raw).unwrap();
        assert_eq!(written.candidates.len(), 1000);
        assert!(written.candidates.iter().all(|e| e.job_id != latest));
        // Earliest expiry first: the last pushed expires first.
        assert_eq!(written.candidates[0], m.candidates[1000]);
        // The same through the bounded writer the feed uses, which hands back what it left out.
        let left_out = write_bounded_manifest(out, &m, MAX_MANIFEST_CANDIDATES).unwrap();
        assert_eq!(left_out.len(), 1);
        assert_eq!(left_out[0].job_id, latest);
    }

    #[test]
    fn a_feed_report_counts_and_warns_about_candidates_left_out() {
        let mut r = crate::feed::report::FeedReport::new("base-mainnet", vec![]);
        assert!(!r.human_summary().contains("left out"));
        assert_eq!(serde_json::to_value(&r).unwrap()["candidates_left_out"], 0);
        r.candidates_left_out = 3;
        assert!(
            r.human_summary().contains(
                "warning: 3 candidate(s) left out of the manifest, which lists at most 1000"
            ),
            "{}",
            r.human_summary()
        );
        assert_eq!(serde_json::to_value(&r).unwrap()["candidates_left_out"], 3);
    }
}
