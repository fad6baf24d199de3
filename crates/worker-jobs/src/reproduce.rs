//! `worker reproduce`: re-run a verdict from public data and say whether it holds.
//!
//! The job is run exactly as `worker feed` runs it (the same [`JobRunner`]: the exact-commit
//! archives downloaded and checked against the job's digests, staged, run in the sandbox with
//! the job's profile and seed, the candidate and its evidence written), except that a settled
//! or expired job is still run: reproducing a settlement is looking back. The reproduction is
//! then compared with the reference (a candidate file's outcome, or a settlement's
//! attestations) by [`verifier_sdk::agreement`]: `reproduced bit for bit`, `verdict
//! reproduced; output differs`, or `DISAGREES`. A reproduction that ended without a verdict
//! (timeout, engine down) is never a disagreement. This module names no exit code.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use verifier_sdk::agreement::lines::{LineDifference, Stream, first_difference};
use verifier_sdk::settlement::VerifiedSettlement;
use verifier_sdk::{
    Address, Agreement, Bytes32, Candidate, Commitment, CompareError, EvidenceRecord,
    OutputDifference, ParsedCandidate, ValidatedJob, ValidatedOutcome, Verdict, compare_outcomes,
    validate_reference,
};

use crate::feed::{FeedConfig, JobExecutor, JobRunner, JobStatus};

/// `schema_version` of the `--json` report.
pub const REPRODUCE_SCHEMA_VERSION: &str = "agent-bounties/regression-reproduction-v1";
/// Largest candidate or evidence file read.
pub const MAX_CANDIDATE_BYTES: u64 = 16 << 20;
/// The reason code of a run whose staged trees are not the job's.
const INPUT_MISMATCH: &str = "input_mismatch";

/// What the reproduction is compared with.
#[derive(Debug, Clone)]
pub enum Reference {
    /// A candidate file: its claimed outcome and, when it has one, its evidence record.
    Candidate {
        /// The claimed outcome, as in the file.
        outcome: Value,
        /// Its evidence, for the differing lines.
        evidence: Option<Box<EvidenceRecord>>,
    },
    /// A settlement read back from the chain, every signer recovered and committed.
    Settlement(VerifiedSettlement),
    /// Only the job: nothing to compare with; the reproduction's verdict is reported.
    JobOnly,
}

/// Why the inputs cannot be reproduced (nothing was judged).
#[derive(Debug, thiserror::Error)]
pub enum ReproduceError {
    /// A file could not be read.
    #[error("{what} {path}: {detail}")]
    File {
        /// What the file is.
        what: &'static str,
        /// Where.
        path: PathBuf,
        /// Why.
        detail: String,
    },
    /// The candidate file is not a candidate, or its job breaks a structural rule.
    #[error("the candidate is invalid: {0}")]
    Candidate(String),
    /// The job breaks a structural rule.
    #[error("the job is invalid: {0}")]
    Job(#[source] verifier_sdk::JobError),
    /// The job is of the platform's other verification mode: valid, not ours, nothing of
    /// ours to reproduce ([`verifier_sdk::other_verification_mode`]).
    #[error("job {job_id}: {mode}; there is no run of ours to reproduce")]
    OtherVerificationMode {
        /// The job asked for.
        job_id: String,
        /// Its mode.
        mode: verifier_sdk::OtherVerificationMode,
    },
    /// The feed does not have the job.
    #[error(
        "the platform's feed for {verifier} has no job {job_id} (a settled job the platform no longer lists cannot be fetched; pass its candidate file)"
    )]
    JobNotFound {
        /// The job asked for.
        job_id: String,
        /// Whose feed was read.
        verifier: Address,
    },
    /// The job is not the one the settlement settled.
    #[error("the job is not the one transaction settled: {0}")]
    NotTheSettledJob(String),
    /// The job's terms are not the ones the bounty committed on chain (`termsHash()`,
    /// `benchmarkHash()` or another value the signer checks, read at the block before the
    /// settlement): the job served is not the bounty's, and a reproduction of it would say
    /// nothing about the settlement. Refused before anything runs, as the signer refuses it.
    #[error(
        "the job's terms are not the bounty's ({0}): the job served (by --api, or in --candidate) is not the one the bounty committed to on chain, and the signer would have refused it; nothing was run"
    )]
    TermsDiffer(String),
    /// A signer is not among the job's committed verifiers.
    #[error("{0} signed the settlement but is not a committed verifier of the job")]
    NotACommittedVerifier(Address),
    /// The reference outcome is no run of its job.
    #[error("the reference outcome is no run of its job: {0}")]
    Reference(#[source] CompareError),
    /// The job's inputs were refused (an archive whose digest is not the job's, a tree over
    /// the manifest's caps): public data does not reproduce the job's commitments.
    #[error("the job's inputs were refused ({code}): {reason}")]
    Refused {
        /// The feed's reason code.
        code: String,
        /// Its detail.
        reason: String,
    },
    /// The run could not be made (engine unreachable, network, disk).
    #[error("the reproduction could not run ({code}): {reason}")]
    Unavailable {
        /// The feed's reason code.
        code: String,
        /// Its detail.
        reason: String,
    },
    /// The run's own candidate could not be read back.
    #[error("the reproduction's candidate: {0}")]
    Output(String),
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "finding", rename_all = "snake_case")]
pub enum Finding {
    /// The reproduction's response hash is the reference's (a settlement: one of its
    /// attestations', named).
    BitForBit {
        /// The shared response hash.
        response_hash: Bytes32,
        /// With a settlement: the verifiers whose attestation carries it.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        verifiers: Vec<Address>,
    },
    /// Same verdict, every commitment equal; the output differs.
    VerdictReproduced {
        /// The verdict.
        verdict: Verdict,
        /// Which parts of the output differ (with a candidate reference).
        #[serde(skip_serializing_if = "Vec::is_empty")]
        differences: Vec<OutputDifference>,
        /// The first differing line of each stream, when the reference's output is known.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        lines: Vec<LineDifference>,
        /// Why no line is shown, when none is.
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<&'static str>,
    },
    /// The verdict or a commitment differs.
    Disagrees {
        /// What differs.
        differing: Vec<Commitment>,
        /// The reference's verdict.
        reference: Verdict,
        /// The reproduction's.
        reproduced: Verdict,
    },
    /// No reference: the reproduction's verdict.
    Reproduced {
        /// The verdict.
        verdict: Verdict,
    },
    /// The reproduction ended without a verdict: nothing is judged, and it is never a
    /// disagreement.
    NoVerdict {
        /// The stable reason code.
        reason: String,
        /// Its detail.
        detail: String,
    },
}

impl ReproduceReport {
    /// Whose verdict the reference is, as a reader says it.
    pub fn whose(&self) -> &'static str {
        match self.reference {
            "settlement" => "the chain's",
            "candidate" => "the candidate's",
            _ => "the job's",
        }
    }

    /// The answer in one line, as printed: it names what was reproduced (`the chain's verdict
    /// `failed` was reproduced`), never a bare verdict after "reproduced", which reads as a
    /// reproduction that failed.
    pub fn headline(&self) -> String {
        let whose = self.whose();
        match &self.finding {
            Finding::BitForBit { .. } => format!(
                "reproduced bit for bit: {whose} verdict `{}` was reproduced, with the same \
                 response hash",
                self.reproduced_verdict.map_or("?", Verdict::as_str)
            ),
            Finding::VerdictReproduced { verdict, .. } => format!(
                "verdict reproduced; output differs: {whose} verdict `{}` was reproduced with \
                 every commitment, the output was not (another response hash)",
                verdict.as_str()
            ),
            Finding::Disagrees {
                differing,
                reference,
                reproduced,
            } => {
                let what: Vec<&str> = differing.iter().map(|c| c.name()).collect();
                format!(
                    "DISAGREES on {}: {whose} verdict is `{}`, the reproduction's `{}`",
                    what.join(", "),
                    reference.as_str(),
                    reproduced.as_str()
                )
            }
            Finding::Reproduced { verdict } => format!(
                "the job's verdict is `{}` (run from the job alone: nothing to compare with)",
                verdict.as_str()
            ),
            Finding::NoVerdict { reason, .. } => {
                format!("no verdict ({reason}): nothing judged, not a disagreement")
            }
        }
    }
}

/// What the reproduction produced and what it found.
#[derive(Debug, Clone, Serialize)]
pub struct ReproduceReport {
    /// [`REPRODUCE_SCHEMA_VERSION`].
    pub schema_version: &'static str,
    /// The job reproduced.
    pub job_id: String,
    /// What it was compared with: `candidate`, `settlement` or `job`.
    pub reference: &'static str,
    /// The reference's verdict and response hash(es).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference_verdict: Option<Verdict>,
    /// Every response hash of the reference (a settlement has one per attestation).
    pub reference_response_hashes: Vec<Bytes32>,
    /// The reproduction's verdict, when it has one.
    pub reproduced_verdict: Option<Verdict>,
    /// Its response hash.
    pub reproduced_response_hash: Option<Bytes32>,
    /// The reproduction's own candidate (with its evidence record), kept.
    pub candidate_file: Option<PathBuf>,
    /// The answer.
    pub finding: Finding,
}

/// A reproduction's own run, as the runner handed it over: typed, its outcome checked
/// against the job.
struct OwnRun {
    outcome: ValidatedOutcome,
    evidence: Option<EvidenceRecord>,
    path: PathBuf,
}

/// The reference with a candidate's outcome checked against the job once, before anything
/// runs: the comparison after the run is typed.
enum Checked<'a> {
    Candidate {
        outcome: Box<ValidatedOutcome>,
        evidence: Option<&'a EvidenceRecord>,
    },
    Settlement(&'a VerifiedSettlement),
    JobOnly,
}

impl<'a> Checked<'a> {
    /// A forged candidate whose outcome is no run of its job is refused here, not
    /// "disagreed with".
    fn of(job: &ValidatedJob, reference: &'a Reference) -> Result<Self, ReproduceError> {
        Ok(match reference {
            Reference::Candidate { outcome, evidence } => Self::Candidate {
                outcome: Box::new(
                    validate_reference(job, outcome)
                        .map_err(|e| ReproduceError::Reference(CompareError::FirstOutcome(e)))?,
                ),
                evidence: evidence.as_deref(),
            },
            Reference::Settlement(s) => Self::Settlement(s),
            Reference::JobOnly => Self::JobOnly,
        })
    }
}

/// Reads a candidate file: strict, bounded, its job structurally valid (not necessarily live:
/// a settled job is looked back at).
pub fn read_candidate(path: &Path) -> Result<ParsedCandidate, ReproduceError> {
    let bytes =
        artifact_fs::read_bounded(path, MAX_CANDIDATE_BYTES).map_err(|e| ReproduceError::File {
            what: "candidate",
            path: path.to_owned(),
            detail: e.to_string(),
        })?;
    let value: Value = serde_json::from_slice(&bytes)
        .map_err(|e| ReproduceError::Candidate(format!("not json: {e}")))?;
    let candidate =
        Candidate::from_value(&value).map_err(|e| ReproduceError::Candidate(e.to_string()))?;
    if let Some(mode) = verifier_sdk::other_verification_mode(&candidate.job) {
        return Err(ReproduceError::OtherVerificationMode {
            job_id: job_id_of(&candidate.job),
            mode,
        });
    }
    ParsedCandidate::parse(candidate).map_err(|e| ReproduceError::Candidate(e.to_string()))
}

/// A raw job's `job_id` for a message (bounded), or `?`.
fn job_id_of(raw: &Value) -> String {
    raw.get("job_id")
        .and_then(Value::as_str)
        .map_or_else(|| "?".to_owned(), |id| id.chars().take(200).collect())
}

/// The reference of a candidate file.
pub fn candidate_reference(candidate: &ParsedCandidate) -> Reference {
    let c = candidate.candidate();
    Reference::Candidate {
        outcome: c.outcome.clone(),
        evidence: c
            .evidence
            .as_ref()
            .and_then(|e| serde_json::from_value(e.clone()).ok())
            .map(Box::new),
    }
}

/// Checks that `job` is the job `settlement` settled: the same bounty, round and bounty id,
/// the submission, evidence and policy hashes the signatures bind, and every signer among the
/// job's committed verifiers.
pub fn check_settled_job(
    job: &ValidatedJob,
    settlement: &VerifiedSettlement,
) -> Result<(), ReproduceError> {
    let mismatch = |what: &str| Err(ReproduceError::NotTheSettledJob(format!("{what} differs")));
    if job.bounty_contract() != settlement.bounty {
        return mismatch("the bounty contract");
    }
    if job.chain_id() != settlement.chain_id {
        return mismatch("the chain");
    }
    if job.round() != settlement.round {
        return mismatch("the round");
    }
    if job.bounty_id() != settlement.bounty_id {
        return mismatch("the bounty id");
    }
    if job.submission_hash() != settlement.submission_hash {
        return mismatch("the submission hash");
    }
    if job.evidence_hash() != settlement.evidence_hash {
        return mismatch("the evidence hash");
    }
    if job.policy_hash() != settlement.policy_hash {
        return mismatch("the policy hash");
    }
    for a in &settlement.attestations {
        if !job.eligible_verifiers().contains(&a.verifier) {
            return Err(ReproduceError::NotACommittedVerifier(a.verifier));
        }
    }
    Ok(())
}

/// Runs `job` once as `worker feed` would, into `config.out_dir` (its candidate and evidence
/// are kept there), and compares the result with `reference`.
pub async fn reproduce(
    config: &FeedConfig,
    client: &platform_client::PlatformClient,
    executor: &dyn JobExecutor,
    job: &ValidatedJob,
    reference: &Reference,
) -> Result<ReproduceReport, ReproduceError> {
    let reference = Checked::of(job, reference)?;
    let job_dir = config.work_dir.join(format!(
        "reproduce-{}-{}",
        std::process::id(),
        config.now_unix()
    ));
    let runner = JobRunner::new(config, client, executor);
    let run = runner.run(job, &job_dir).await;
    let row = run.row();
    let own = match row.status {
        JobStatus::CompletedPassed | JobStatus::CompletedFailed => {
            let file = row
                .candidate_file
                .as_ref()
                .ok_or_else(|| ReproduceError::Output("no candidate file".into()))?;
            let verdict = run
                .verdict
                .ok_or_else(|| ReproduceError::Output("a candidate without its verdict".into()))?;
            Some(OwnRun {
                outcome: verdict.outcome,
                evidence: verdict.evidence,
                path: config.out_dir.join(file),
            })
        }
        // The trees the public archives give are not the ones the job commits to (a
        // tampered, deleted or force-pushed repository): the same public data gives the same
        // trees again, so this is a refusal, never "no verdict, try again".
        JobStatus::NoVerdict if row.reason_code.as_deref() == Some(INPUT_MISMATCH) => {
            return Err(ReproduceError::Refused {
                code: INPUT_MISMATCH.to_owned(),
                reason: row.reason.unwrap_or_default(),
            });
        }
        JobStatus::NoVerdict => None,
        JobStatus::Rejected | JobStatus::Skipped => {
            return Err(ReproduceError::Refused {
                code: row.reason_code.unwrap_or_default(),
                reason: row.reason.unwrap_or_default(),
            });
        }
        JobStatus::Error => {
            return Err(ReproduceError::Unavailable {
                code: row.reason_code.unwrap_or_default(),
                reason: row.reason.unwrap_or_default(),
            });
        }
    };
    let (reference_name, reference_verdict, reference_hashes) = describe_reference(&reference);
    let Some(own) = own else {
        return Ok(ReproduceReport {
            schema_version: REPRODUCE_SCHEMA_VERSION,
            job_id: job.job_id().to_owned(),
            reference: reference_name,
            reference_verdict,
            reference_response_hashes: reference_hashes,
            reproduced_verdict: None,
            reproduced_response_hash: None,
            candidate_file: None,
            finding: Finding::NoVerdict {
                reason: row.reason_code.unwrap_or_else(|| "no_verdict".into()),
                detail: row.reason.unwrap_or_default(),
            },
        });
    };
    let finding = judge(&reference, &own);
    Ok(ReproduceReport {
        schema_version: REPRODUCE_SCHEMA_VERSION,
        job_id: job.job_id().to_owned(),
        reference: reference_name,
        reference_verdict,
        reference_response_hashes: reference_hashes,
        reproduced_verdict: Some(own.outcome.verdict()),
        reproduced_response_hash: Some(own.outcome.response_hash()),
        candidate_file: Some(own.path),
        finding,
    })
}

fn describe_reference(reference: &Checked<'_>) -> (&'static str, Option<Verdict>, Vec<Bytes32>) {
    match reference {
        Checked::Candidate { outcome, .. } => (
            "candidate",
            Some(outcome.verdict()),
            vec![outcome.response_hash()],
        ),
        Checked::Settlement(s) => (
            "settlement",
            Some(if s.passed {
                Verdict::Passed
            } else {
                Verdict::Failed
            }),
            s.attestations.iter().map(|a| a.response_hash).collect(),
        ),
        Checked::JobOnly => ("job", None, Vec::new()),
    }
}

fn verdict_of(passed: bool) -> Verdict {
    if passed {
        Verdict::Passed
    } else {
        Verdict::Failed
    }
}

/// Both outcomes are the job's (the reference by [`Checked::of`], the reproduction by the
/// runner), so they are compared as they are: nothing here can fail.
fn judge(reference: &Checked<'_>, own: &OwnRun) -> Finding {
    let (own_verdict, own_hash) = (own.outcome.verdict(), own.outcome.response_hash());
    match reference {
        Checked::JobOnly => Finding::Reproduced {
            verdict: own_verdict,
        },
        Checked::Candidate { outcome, evidence } => {
            match compare_outcomes(outcome.outcome(), own.outcome.outcome()) {
                Agreement::BitForBit { response_hash } => Finding::BitForBit {
                    response_hash,
                    verifiers: Vec::new(),
                },
                Agreement::VerdictReproduced {
                    verdict,
                    differences,
                    ..
                } => {
                    let lines: Vec<LineDifference> = match (*evidence, &own.evidence) {
                        (Some(a), Some(b)) => [
                            first_difference(Stream::Stdout, &a.stdout, &b.stdout),
                            first_difference(Stream::Stderr, &a.stderr, &b.stderr),
                        ]
                        .into_iter()
                        .flatten()
                        .collect(),
                        _ => Vec::new(),
                    };
                    let note = lines.is_empty().then_some(
                        "the reference's output is not known (its candidate has no evidence \
                         record); only its stream hashes are compared",
                    );
                    Finding::VerdictReproduced {
                        verdict,
                        differences,
                        lines,
                        note,
                    }
                }
                Agreement::Disagrees { differing } => Finding::Disagrees {
                    differing,
                    reference: outcome.verdict(),
                    reproduced: own_verdict,
                },
            }
        }
        Checked::Settlement(s) => {
            let settled = verdict_of(s.passed);
            if own_verdict != settled {
                return Finding::Disagrees {
                    differing: vec![Commitment::Verdict],
                    reference: settled,
                    reproduced: own_verdict,
                };
            }
            let matching: Vec<Address> = s
                .attestations
                .iter()
                .filter(|a| a.response_hash == own_hash)
                .map(|a| a.verifier)
                .collect();
            if matching.is_empty() {
                // Every commitment of the reproduction is the job's (the worker validated
                // its own outcome against the job) and the job is the settled one
                // (`check_settled_job`); only the output is left to differ.
                Finding::VerdictReproduced {
                    verdict: own_verdict,
                    differences: Vec::new(),
                    lines: Vec::new(),
                    note: Some(
                        "a settlement publishes response hashes, not the output: the settled \
                         runs' lines are not known; the reproduction's own output is in its \
                         evidence record",
                    ),
                }
            } else {
                Finding::BitForBit {
                    response_hash: own_hash,
                    verifiers: matching,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use verifier_sdk::fixtures::{NOW, valid_job};
    use verifier_sdk::{ExecutionFacts, Outcome, OutcomeError, validate_job};

    fn run(job: &ValidatedJob, exit_code: i64, stdout: u8) -> Outcome {
        Outcome::for_job(
            job,
            ExecutionFacts {
                exit_code,
                stdout_sha256: verifier_sdk::Sha256Digest::from_bytes([stdout; 32]),
                stderr_sha256: verifier_sdk::Sha256Digest::from_bytes([0xee; 32]),
                stdout_bytes: u64::from(stdout),
                stderr_bytes: 0,
            },
        )
    }

    fn own(job: &ValidatedJob, outcome: Outcome) -> OwnRun {
        OwnRun {
            outcome: outcome.check_for(job).unwrap(),
            evidence: None,
            path: PathBuf::from("candidate.json"),
        }
    }

    fn candidate(outcome: &Outcome) -> Reference {
        Reference::Candidate {
            outcome: serde_json::to_value(outcome).unwrap(),
            evidence: None,
        }
    }

    /// The reproduction is compared typed, the candidate's outcome first: what differs names
    /// the reference as `first` and the reproduction as `second`, as the report always has.
    #[test]
    fn a_candidate_reference_differing_in_output_is_named_first_and_the_reproduction_second() {
        let job = validate_job(&valid_job(), NOW).unwrap();
        let (claimed, reproduced) = (run(&job, 0, 0xd1), run(&job, 0, 0xd2));
        let reference = candidate(&claimed);
        let checked = Checked::of(&job, &reference).unwrap();
        let Finding::VerdictReproduced { differences, .. } =
            judge(&checked, &own(&job, reproduced.clone()))
        else {
            panic!("not verdict reproduced");
        };
        assert_eq!(
            differences,
            vec![OutputDifference::Stdout {
                first: claimed.receipt.execution.stdout_sha256,
                second: reproduced.receipt.execution.stdout_sha256,
                first_bytes: 0xd1,
                second_bytes: 0xd2,
            }]
        );
        let failed = run(&job, 1, 0xd1);
        assert_eq!(
            judge(&checked, &own(&job, failed)),
            Finding::Disagrees {
                differing: vec![Commitment::Verdict],
                reference: Verdict::Passed,
                reproduced: Verdict::Failed,
            }
        );
        assert_eq!(
            describe_reference(&checked),
            (
                "candidate",
                Some(Verdict::Passed),
                vec![claimed.response_hash]
            )
        );
    }

    /// A candidate whose outcome is not its job's is refused before anything runs, with the
    /// error the reference check always gave.
    #[test]
    fn a_forged_candidate_reference_is_refused_as_no_run_of_its_job() {
        let job = validate_job(&valid_job(), NOW).unwrap();
        let mut forged = run(&job, 1, 0xd1);
        forged.verdict = Verdict::Passed;
        let Err(error) = Checked::of(&job, &candidate(&forged)) else {
            panic!("a forged reference was taken");
        };
        assert!(
            matches!(
                error,
                ReproduceError::Reference(CompareError::FirstOutcome(
                    OutcomeError::VerdictMismatch { .. }
                ))
            ),
            "{error}"
        );
    }
}
