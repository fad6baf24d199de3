//! `worker preflight`: before a solver bonds, run their commit through the feed's own path.
//!
//! The job (the bounty's terms, its benchmark and runner manifest) is rewritten to be the
//! submission the solver is about to make: their artifact reference and the digest of the tree
//! the feed would extract from it, with the submission's hashes recomputed and the result
//! parsed by the same [`ValidatedJob::parse`] every stage uses. The digest comes from the
//! feed's own download and extraction ([`JobRunner::fetch_source`]: the same archive URL,
//! compressed cap, client limits and safe extraction); the run is the feed's own
//! [`JobRunner::run`] (both archives downloaded again, checked, staged, run in the sandbox,
//! the candidate written). So what preflight accepts, refuses or judges is what the feed
//! would, by construction, not by a second copy of the path. The window is not checked: the
//! solver's own job will have a window of its own. This module names no exit code.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use verifier_sdk::{
    Bytes32, Sha256Digest, TreeLimits, ValidatedJob, Verdict, digest_directory, sha256_json,
    sha256_utf8,
};

use crate::feed::{FeedConfig, JobExecutor, JobRow, JobRunner, JobStatus};

/// `schema_version` of the `--json` report.
pub const PREFLIGHT_SCHEMA_VERSION: &str = "agent-bounties/regression-preflight-v1";

/// Why the preflight could not say anything about the submission.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    /// The job with the solver's reference in it breaks a structural rule (a reference that
    /// is not `https://github.com/<owner>/<repo>/commit/<40 hex>` among them).
    #[error("the submission is invalid: {0}")]
    Job(#[source] verifier_sdk::JobError),
    /// The job is not a JSON object with a `submission_evidence.evidence` object.
    #[error("the job has no submission_evidence.evidence object to put the submission in")]
    NoEvidence,
    /// The extracted tree could not be digested.
    #[error("digesting the extracted source: {0}")]
    Digest(#[source] verifier_sdk::DigestError),
    /// The run could not be made (engine unreachable, network, disk): nothing is known about
    /// the submission.
    #[error("the preflight could not run ({code}): {reason}")]
    Unavailable {
        /// The feed's reason code.
        code: String,
        /// Its detail.
        reason: String,
    },
    /// The feed's candidate could not be read back.
    #[error("the preflight's candidate: {0}")]
    Output(String),
}

/// What the feed would do with the submission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum Answer {
    /// The archive was accepted and the run gave a verdict.
    Verdict {
        /// `passed` or `failed`.
        verdict: Verdict,
        /// The outcome's response hash, the one a verifier would sign.
        response_hash: Bytes32,
    },
    /// The feed refuses the submission: the same inputs are refused on every attempt.
    Refused {
        /// The feed's reason code (`download_too_large`, `archive_rejected`, …).
        reason_code: String,
        /// Its detail.
        reason: String,
    },
    /// The archive was accepted; the run ended without a verdict (timeout, output cap, …).
    NoVerdict {
        /// The feed's reason code.
        reason_code: String,
        /// Its detail.
        reason: String,
    },
}

/// The preflight's report.
#[derive(Debug, Clone, Serialize)]
pub struct PreflightReport {
    /// [`PREFLIGHT_SCHEMA_VERSION`].
    pub schema_version: &'static str,
    /// The bounty's job the submission was put in.
    pub job_id: String,
    /// The solver's artifact reference.
    pub artifact_reference: String,
    /// The digest the feed computes of the extracted tree, once the archive was accepted.
    pub source_snapshot_digest: Option<Sha256Digest>,
    /// The run's candidate (with its evidence record), kept.
    pub candidate_file: Option<PathBuf>,
    /// The answer.
    #[serde(flatten)]
    pub answer: Answer,
}

impl PreflightReport {
    /// Whether the feed would accept the submission's archive.
    pub fn accepted(&self) -> bool {
        !matches!(self.answer, Answer::Refused { .. })
    }

    /// The report for a reader, in `rehearse`'s words (`verdict  passed`).
    pub fn human(&self) -> String {
        let mut out = format!(
            "job      {}\nsubmits  {}\n",
            self.job_id, self.artifact_reference
        );
        match &self.answer {
            Answer::Refused {
                reason_code,
                reason,
            } => {
                out.push_str(&format!(
                    "archive  REFUSED ({reason_code}): {reason}\n\
                     the feed would refuse this submission: no verdict, nothing to sign\n"
                ));
                return out;
            }
            Answer::Verdict { .. } | Answer::NoVerdict { .. } => {
                out.push_str("archive  accepted\n");
            }
        }
        if let Some(d) = &self.source_snapshot_digest {
            out.push_str(&format!("source_snapshot_digest  {d}\n"));
        }
        if let Some(f) = &self.candidate_file {
            out.push_str(&format!("evidence {}\n", f.display()));
        }
        match &self.answer {
            Answer::Verdict {
                verdict,
                response_hash,
            } => {
                out.push_str(&format!("response_hash  {response_hash}\n"));
                out.push_str(&format!("verdict  {}\n", verdict.as_str()));
            }
            Answer::NoVerdict {
                reason_code,
                reason,
            } => out.push_str(&format!("verdict  none ({reason_code}): {reason}\n")),
            Answer::Refused { .. } => {}
        }
        out
    }
}

/// `raw_job` with `artifact_reference` as its submission and `digest` as the evidence's
/// `source_snapshot_digest`, the submission's hashes recomputed as PROTOCOL §2 rule 4 checks
/// them, parsed by the structural rules.
pub fn submission_job(
    raw_job: &Value,
    artifact_reference: &str,
    digest: Sha256Digest,
) -> Result<(Value, ValidatedJob), PreflightError> {
    let mut job = raw_job.clone();
    let submission = job
        .get_mut("submission_evidence")
        .and_then(Value::as_object_mut)
        .ok_or(PreflightError::NoEvidence)?;
    let evidence = submission
        .get_mut("evidence")
        .and_then(Value::as_object_mut)
        .ok_or(PreflightError::NoEvidence)?;
    evidence.insert(
        "source_snapshot_digest".into(),
        Value::String(digest.to_string()),
    );
    let evidence_hash = sha256_json(&Value::Object(evidence.clone()));
    submission.insert(
        "artifact_reference".into(),
        Value::String(artifact_reference.to_owned()),
    );
    submission.insert(
        "artifact_hash".into(),
        Value::String(sha256_utf8(artifact_reference).to_string()),
    );
    submission.insert(
        "evidence_hash".into(),
        Value::String(evidence_hash.to_string()),
    );
    let parsed = ValidatedJob::parse(&job).map_err(PreflightError::Job)?;
    Ok((job, parsed))
}

/// Runs the submission `artifact_reference` to the bounty of `raw_job` through the feed's
/// path, its candidate kept in `config.out_dir`.
pub async fn preflight(
    config: &FeedConfig,
    client: &platform_client::PlatformClient,
    executor: &dyn JobExecutor,
    raw_job: &Value,
    artifact_reference: &str,
) -> Result<PreflightReport, PreflightError> {
    // The job's own digest stands in until the tree is digested: fetching reads only the
    // reference and the manifest's caps.
    let placeholder = ValidatedJob::parse(raw_job)
        .map_err(PreflightError::Job)?
        .source_snapshot_digest();
    let (_, fetching) = submission_job(raw_job, artifact_reference, placeholder)?;
    let runner = JobRunner::new(config, client, executor);
    let scratch = |what: &str| {
        config.work_dir.join(format!(
            "preflight-{what}-{}-{}",
            std::process::id(),
            config.now_unix()
        ))
    };
    let report = |answer, digest, candidate_file| PreflightReport {
        schema_version: PREFLIGHT_SCHEMA_VERSION,
        job_id: fetching.job_id().to_owned(),
        artifact_reference: artifact_reference.to_owned(),
        source_snapshot_digest: digest,
        candidate_file,
        answer,
    };
    let fetch_dir = scratch("fetch");
    let fetched = runner.fetch_source(&fetching, &fetch_dir).await;
    let digested = fetched.as_ref().ok().map(|tree| {
        let manifest = fetching.manifest();
        TreeLimits::new(manifest.max_source_bytes(), manifest.max_source_files())
            .and_then(|limits| digest_directory(tree, limits))
    });
    remove(&fetch_dir);
    let digest = match (fetched, digested) {
        (Err(row), _) => return stopped(row).map(|answer| report(answer, None, None)),
        (Ok(_), Some(Ok(snapshot))) => snapshot.digest,
        (Ok(_), Some(Err(e))) => return Err(PreflightError::Digest(e)),
        (Ok(_), None) => {
            return Err(PreflightError::Output("no tree was extracted".into()));
        }
    };
    let (_, job) = submission_job(raw_job, artifact_reference, digest)?;
    let run = runner.run(&job, &scratch("run")).await;
    let row = run.row();
    match row.status {
        JobStatus::CompletedPassed | JobStatus::CompletedFailed => {
            let file = row
                .candidate_file
                .map(|f| config.out_dir.join(f))
                .ok_or_else(|| PreflightError::Output("no candidate file".into()))?;
            // The run's own verdict, as its candidate holds it: not read back from the file.
            let outcome = run
                .verdict
                .ok_or_else(|| PreflightError::Output("a candidate without its verdict".into()))?
                .outcome;
            Ok(report(
                Answer::Verdict {
                    verdict: outcome.verdict(),
                    response_hash: outcome.response_hash(),
                },
                Some(digest),
                Some(file),
            ))
        }
        _ => stopped(row).map(|answer| report(answer, Some(digest), None)),
    }
}

/// A row without a candidate as the preflight's answer, or the error of a run that could not
/// be made.
fn stopped(row: JobRow) -> Result<Answer, PreflightError> {
    let reason_code = row.reason_code.unwrap_or_default();
    let reason = row.reason.unwrap_or_default();
    match row.status {
        JobStatus::Rejected | JobStatus::Skipped => Ok(Answer::Refused {
            reason_code,
            reason,
        }),
        JobStatus::NoVerdict => Ok(Answer::NoVerdict {
            reason_code,
            reason,
        }),
        JobStatus::Error | JobStatus::CompletedPassed | JobStatus::CompletedFailed => {
            Err(PreflightError::Unavailable {
                code: reason_code,
                reason,
            })
        }
    }
}

fn remove(dir: &Path) {
    if let Err(e) = std::fs::remove_dir_all(dir)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(error = %e, "could not remove a preflight scratch directory");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use verifier_sdk::fixtures::{JobParams, job_value};

    #[test]
    fn a_submission_put_in_another_rounds_job_is_the_job_the_platform_would_serve_for_it() {
        let reference = format!("https://github.com/alice/fix/commit/{}", "e".repeat(40));
        let digest: Sha256Digest = format!("sha256:{}", "d".repeat(64)).parse().unwrap();
        let served = job_value(&JobParams {
            artifact_reference: reference.clone(),
            source_snapshot_digest: digest.to_string(),
            ..JobParams::default()
        });
        let (rewritten, parsed) =
            submission_job(&job_value(&JobParams::default()), &reference, digest).unwrap();
        assert_eq!(rewritten, served);
        assert_eq!(parsed.source_snapshot_digest(), digest);
    }

    #[test]
    fn a_reference_that_is_not_an_exact_commit_is_refused_before_any_download() {
        let digest: Sha256Digest = format!("sha256:{}", "d".repeat(64)).parse().unwrap();
        let err = submission_job(
            &job_value(&JobParams::default()),
            "https://github.com/alice/fix/tree/main",
            digest,
        )
        .unwrap_err();
        assert!(matches!(err, PreflightError::Job(_)), "{err}");
    }
}

#[cfg(test)]
mod words {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn report(answer: Answer) -> PreflightReport {
        PreflightReport {
            schema_version: PREFLIGHT_SCHEMA_VERSION,
            job_id: "base-mainnet:0x22:3".into(),
            artifact_reference: "https://github.com/alice/fix/commit/e".into(),
            source_snapshot_digest: None,
            candidate_file: None,
            answer,
        }
    }

    #[test]
    fn a_refused_archive_is_said_with_the_feeds_reason_and_no_verdict_line() {
        let text = report(Answer::Refused {
            reason_code: "download_too_large".into(),
            reason: "source archive: over 268435456 bytes".into(),
        })
        .human();
        assert!(
            text.contains("archive  REFUSED (download_too_large)"),
            "{text}"
        );
        assert!(!text.lines().any(|l| l.starts_with("verdict")), "{text}");
    }

    #[test]
    fn an_accepted_archive_ends_with_the_verdict_in_rehearses_words() {
        let h = Bytes32::from_bytes([7; 32]);
        let mut r = report(Answer::Verdict {
            verdict: Verdict::Passed,
            response_hash: h,
        });
        r.source_snapshot_digest = Some(format!("sha256:{}", "d".repeat(64)).parse().unwrap());
        let text = r.human();
        assert!(text.contains("archive  accepted"), "{text}");
        assert!(text.contains(&format!("response_hash  {h}")), "{text}");
        assert_eq!(text.lines().last(), Some("verdict  passed"), "{text}");
        assert!(r.accepted());
    }
}
