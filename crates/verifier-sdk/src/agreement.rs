//! Do two runs of one job agree on what matters? One definition for the signer's independent
//! execution, the keeper, `worker reproduce` and the workflow scripts.
//!
//! Two outcomes of one job **agree** when the verdict and every commitment of the receipt are
//! equal: `schema_version`, `scope`, `runner_manifest_hash`, `command_hash`, `source_digest`,
//! `benchmark_digest`, `image` and `execution.isolation`. What the run printed (the stream
//! hashes and byte counts) and, for a failed verdict, the exact non-zero exit code may differ:
//! a test runner that prints its durations gives a new response hash on every run, and the
//! contract needs one verdict across the attestations, not one response hash (PROTOCOL §6).
//! Equal response hashes are the stronger result, [`Agreement::BitForBit`].
//!
//! Everything here is pure: parsed values in, a typed answer out.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::artifacts::Candidate;
use crate::job::ValidatedJob;
use crate::receipt::{
    Outcome, OutcomeError, ValidatedOutcome, Verdict, response_hash, validate_outcome,
};
use crate::types::{Bytes32, Sha256Digest};

/// A commitment of the receipt that two runs of one job must share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Commitment {
    /// The job itself (the candidates' `job` objects differ).
    Job,
    /// The verdict.
    Verdict,
    /// `receipt.schema_version`.
    SchemaVersion,
    /// `receipt.scope`.
    Scope,
    /// `receipt.runner_manifest_hash`.
    RunnerManifestHash,
    /// `receipt.command_hash`.
    CommandHash,
    /// `receipt.source_digest`.
    SourceDigest,
    /// `receipt.benchmark_digest`.
    BenchmarkDigest,
    /// `receipt.image`.
    Image,
    /// `receipt.execution.isolation`.
    Isolation,
}

impl Commitment {
    /// Stable name for reports.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Job => "job",
            Self::Verdict => "verdict",
            Self::SchemaVersion => "schema_version",
            Self::Scope => "scope",
            Self::RunnerManifestHash => "runner_manifest_hash",
            Self::CommandHash => "command_hash",
            Self::SourceDigest => "source_digest",
            Self::BenchmarkDigest => "benchmark_digest",
            Self::Image => "image",
            Self::Isolation => "isolation",
        }
    }
}

/// A part of the output that may differ between two agreeing runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "field", rename_all = "snake_case")]
pub enum OutputDifference {
    /// `execution.exit_code` (both non-zero: the verdict is the same `failed`).
    ExitCode {
        /// The first run's.
        first: i64,
        /// The second run's.
        second: i64,
    },
    /// `execution.stdout_sha256` / `stdout_bytes`.
    Stdout {
        /// The first run's hash.
        first: Sha256Digest,
        /// The second run's hash.
        second: Sha256Digest,
        /// The first run's length.
        first_bytes: u64,
        /// The second run's length.
        second_bytes: u64,
    },
    /// `execution.stderr_sha256` / `stderr_bytes`.
    Stderr {
        /// The first run's hash.
        first: Sha256Digest,
        /// The second run's hash.
        second: Sha256Digest,
        /// The first run's length.
        first_bytes: u64,
        /// The second run's length.
        second_bytes: u64,
    },
}

/// The answer for two runs of one job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "agreement", rename_all = "snake_case")]
pub enum Agreement {
    /// Equal response hashes: the same verdict over the same receipt, output included.
    BitForBit {
        /// The shared response hash.
        response_hash: Bytes32,
    },
    /// Same verdict and every commitment equal; the output differs (listed).
    VerdictReproduced {
        /// The shared verdict.
        verdict: Verdict,
        /// The first run's response hash.
        first: Bytes32,
        /// The second run's response hash.
        second: Bytes32,
        /// What differs.
        differences: Vec<OutputDifference>,
    },
    /// The verdict or a commitment differs (every differing one listed, never empty).
    Disagrees {
        /// What differs.
        differing: Vec<Commitment>,
    },
}

impl Agreement {
    /// Whether a signer may sign the second run on the strength of the first (and back).
    pub const fn agrees(&self) -> bool {
        !matches!(self, Self::Disagrees { .. })
    }

    /// One line for people.
    pub fn describe(&self) -> String {
        match self {
            Self::BitForBit { .. } => "reproduced bit for bit".into(),
            Self::VerdictReproduced { differences, .. } => {
                let parts: Vec<&str> = differences
                    .iter()
                    .map(|d| match d {
                        OutputDifference::ExitCode { .. } => "exit code",
                        OutputDifference::Stdout { .. } => "stdout",
                        OutputDifference::Stderr { .. } => "stderr",
                    })
                    .collect();
                format!("verdict reproduced; output differs ({})", parts.join(", "))
            }
            Self::Disagrees { differing } => {
                let parts: Vec<&str> = differing.iter().map(|c| c.name()).collect();
                format!("DISAGREES on {}", parts.join(", "))
            }
        }
    }
}

/// Compares two outcomes of one job, field by field. Neither is re-validated here: use
/// [`compare_candidates`] or [`compare_for_job`] for outcomes read from outside.
pub fn compare_outcomes(first: &Outcome, second: &Outcome) -> Agreement {
    let (a, b) = (&first.receipt, &second.receipt);
    let mut differing = Vec::new();
    let checks = [
        (first.verdict != second.verdict, Commitment::Verdict),
        (
            a.schema_version != b.schema_version,
            Commitment::SchemaVersion,
        ),
        (a.scope != b.scope, Commitment::Scope),
        (
            a.runner_manifest_hash != b.runner_manifest_hash,
            Commitment::RunnerManifestHash,
        ),
        (a.command_hash != b.command_hash, Commitment::CommandHash),
        (a.source_digest != b.source_digest, Commitment::SourceDigest),
        (
            a.benchmark_digest != b.benchmark_digest,
            Commitment::BenchmarkDigest,
        ),
        (a.image != b.image, Commitment::Image),
        (
            a.execution.isolation != b.execution.isolation,
            Commitment::Isolation,
        ),
    ];
    for (differs, what) in checks {
        if differs {
            differing.push(what);
        }
    }
    if !differing.is_empty() {
        return Agreement::Disagrees { differing };
    }
    if first.response_hash == second.response_hash {
        return Agreement::BitForBit {
            response_hash: first.response_hash,
        };
    }
    let (x, y) = (&a.execution, &b.execution);
    let mut differences = Vec::new();
    if x.exit_code != y.exit_code {
        differences.push(OutputDifference::ExitCode {
            first: x.exit_code,
            second: y.exit_code,
        });
    }
    if x.stdout_sha256 != y.stdout_sha256 || x.stdout_bytes != y.stdout_bytes {
        differences.push(OutputDifference::Stdout {
            first: x.stdout_sha256,
            second: y.stdout_sha256,
            first_bytes: x.stdout_bytes,
            second_bytes: y.stdout_bytes,
        });
    }
    if x.stderr_sha256 != y.stderr_sha256 || x.stderr_bytes != y.stderr_bytes {
        differences.push(OutputDifference::Stderr {
            first: x.stderr_sha256,
            second: y.stderr_sha256,
            first_bytes: x.stderr_bytes,
            second_bytes: y.stderr_bytes,
        });
    }
    Agreement::VerdictReproduced {
        verdict: first.verdict,
        first: first.response_hash,
        second: second.response_hash,
        differences,
    }
}

/// Why two outcomes could not even be compared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompareError {
    /// The first candidate's job does not parse (structural rules, liveness not checked).
    #[error("the first candidate's job is invalid: {0}")]
    Job(#[source] crate::job::JobError),
    /// The first outcome does not validate against the job.
    #[error("the first outcome does not match its job: {0}")]
    FirstOutcome(#[source] OutcomeError),
    /// The second outcome does not validate against the job.
    #[error("the second outcome does not match the job: {0}")]
    SecondOutcome(#[source] OutcomeError),
}

/// Parses an outcome strictly and checks what it says about itself: the verdict is the exit
/// code's, the response hash recomputes. Nothing about the job.
fn self_consistent(raw: &Value) -> Result<Outcome, OutcomeError> {
    let o = Outcome::deserialize(raw)
        .map_err(|e| OutcomeError::Malformed(e.to_string().chars().take(512).collect()))?;
    if o.verdict != o.receipt.verdict() {
        return Err(OutcomeError::VerdictMismatch {
            verdict: o.verdict.as_str(),
            exit_code: o.receipt.execution.exit_code,
        });
    }
    let computed = response_hash(o.verdict, &o.receipt);
    if o.response_hash != computed {
        return Err(OutcomeError::ResponseHash { computed });
    }
    Ok(o)
}

/// Compares two raw outcomes of `job`: each must parse strictly and be self-consistent (its
/// verdict is its exit code's, its response hash recomputes), else it is no outcome at all
/// and this is an error; then the verdict and every commitment are compared (a difference is
/// [`Agreement::Disagrees`], naming each); and when they agree, the shared commitments must
/// be the job's ([`validate_outcome`]), else this is an error too.
///
/// An error is never an agreement: nothing may be signed on its strength.
pub fn compare_for_job(
    job: &ValidatedJob,
    first: &Value,
    second: &Value,
) -> Result<Agreement, CompareError> {
    let a = self_consistent(first).map_err(CompareError::FirstOutcome)?;
    let b = self_consistent(second).map_err(CompareError::SecondOutcome)?;
    let agreement = compare_outcomes(&a, &b);
    if agreement.agrees() {
        validate_outcome(first, job).map_err(CompareError::FirstOutcome)?;
        validate_outcome(second, job).map_err(CompareError::SecondOutcome)?;
    }
    Ok(agreement)
}

/// Checks an outcome read from outside (a candidate file's) once, as the reference runs of
/// `job` are to be compared with: strict parse and self-consistency first, then every
/// commitment the job's, so it fails exactly when `compare_for_job(job, raw, raw)` does, with
/// the same error. The runs are then compared typed ([`compare_outcomes`]), nothing parsed again.
pub fn validate_reference(
    job: &ValidatedJob,
    raw: &Value,
) -> Result<ValidatedOutcome, OutcomeError> {
    self_consistent(raw)?.check_for(job)
}

/// Compares an outcome already validated against `job` (the reference, e.g. the runner's
/// candidate the keeper revalidated) with a raw one read from outside (a verifier's own run):
/// the same rules as [`compare_for_job`].
pub fn compare_with_validated(
    job: &ValidatedJob,
    first: &ValidatedOutcome,
    second: &Value,
) -> Result<Agreement, CompareError> {
    let b = self_consistent(second).map_err(CompareError::SecondOutcome)?;
    let agreement = compare_outcomes(first.outcome(), &b);
    if agreement.agrees() {
        validate_outcome(second, job).map_err(CompareError::SecondOutcome)?;
    }
    Ok(agreement)
}

/// Compares two candidates for one job: their `job` objects must be identical (else
/// [`Commitment::Job`] disagrees), the first's job must parse (liveness is not checked, so a
/// settled job can be compared too), and both outcomes must validate against it.
pub fn compare_candidates(
    first: &Candidate,
    second: &Candidate,
) -> Result<Agreement, CompareError> {
    let job = ValidatedJob::parse(&first.job).map_err(CompareError::Job)?;
    if first.job != second.job {
        self_consistent(&first.outcome).map_err(CompareError::FirstOutcome)?;
        self_consistent(&second.outcome).map_err(CompareError::SecondOutcome)?;
        return Ok(Agreement::Disagrees {
            differing: vec![Commitment::Job],
        });
    }
    compare_for_job(&job, &first.outcome, &second.outcome)
}

pub mod lines;

#[cfg(test)]
mod tests;
