use serde_json::Value;

use super::*;
use crate::fixtures::{JobParams, NOW, job_value};
use crate::receipt::{ExecutionFacts, Outcome};
use crate::validate_job;

fn job() -> (Value, ValidatedJob) {
    let raw = job_value(&JobParams::default());
    let job = validate_job(&raw, NOW).expect("fixture job is valid");
    (raw, job)
}

fn facts(exit_code: i64, stdout: u8, stdout_bytes: u64) -> ExecutionFacts {
    ExecutionFacts {
        exit_code,
        stdout_sha256: Sha256Digest::from_bytes([stdout; 32]),
        stderr_sha256: Sha256Digest::from_bytes([0xee; 32]),
        stdout_bytes,
        stderr_bytes: 0,
    }
}

fn outcome(job: &ValidatedJob, f: ExecutionFacts) -> Outcome {
    Outcome::for_job(job, f)
}

fn value(o: &Outcome) -> Value {
    serde_json::to_value(o).expect("outcome serializes")
}

fn candidate(raw_job: &Value, o: &Outcome) -> Candidate {
    Candidate::new(raw_job.clone(), value(o), "test".into(), None)
}

/// Re-derives the verdict and response hash after a test edited the receipt, as a forger
/// who knows the protocol would.
fn reseal(mut o: Outcome) -> Outcome {
    o.response_hash = response_hash(o.verdict, &o.receipt);
    o
}

#[test]
fn identical_runs_agree_bit_for_bit() {
    let (raw, job) = job();
    let a = outcome(&job, facts(0, 0xd1, 12));
    let got = compare_candidates(&candidate(&raw, &a), &candidate(&raw, &a)).unwrap();
    assert_eq!(
        got,
        Agreement::BitForBit {
            response_hash: a.response_hash
        }
    );
    assert_eq!(got.describe(), "reproduced bit for bit");
}

#[test]
fn a_run_that_printed_other_timings_agrees_on_the_verdict_with_the_stream_named() {
    let (raw, job) = job();
    let a = outcome(&job, facts(0, 0xd1, 1037));
    let b = outcome(&job, facts(0, 0xd2, 1037));
    assert_ne!(a.response_hash, b.response_hash);
    let got = compare_candidates(&candidate(&raw, &a), &candidate(&raw, &b)).unwrap();
    assert!(got.agrees());
    let Agreement::VerdictReproduced {
        verdict,
        differences,
        ..
    } = &got
    else {
        panic!("{got:?}")
    };
    assert_eq!(*verdict, Verdict::Passed);
    assert_eq!(differences.len(), 1);
    assert!(matches!(differences[0], OutputDifference::Stdout { .. }));
    assert_eq!(
        got.describe(),
        "verdict reproduced; output differs (stdout)"
    );
}

#[test]
fn two_failed_runs_with_other_exit_codes_agree_on_failed() {
    let (raw, job) = job();
    let a = outcome(&job, facts(1, 0xd1, 5));
    let b = outcome(&job, facts(2, 0xd1, 5));
    let got = compare_candidates(&candidate(&raw, &a), &candidate(&raw, &b)).unwrap();
    assert!(
        matches!(&got, Agreement::VerdictReproduced { differences, .. }
            if differences == &[OutputDifference::ExitCode { first: 1, second: 2 }]),
        "{got:?}"
    );
}

#[test]
fn forged_flipped_verdict_disagrees() {
    let (raw, job) = job();
    let own = outcome(&job, facts(1, 0xd1, 5));
    // The runner claims a pass for the same job, hashes recomputed so it is self-consistent.
    let forged = outcome(&job, facts(0, 0xd1, 5));
    let got = compare_candidates(&candidate(&raw, &forged), &candidate(&raw, &own)).unwrap();
    assert_eq!(
        got,
        Agreement::Disagrees {
            differing: vec![Commitment::Verdict]
        }
    );
    assert!(!got.agrees());
}

#[test]
fn a_flipped_verdict_that_was_not_resealed_is_no_outcome() {
    let (raw, job) = job();
    let own = outcome(&job, facts(1, 0xd1, 5));
    let mut forged = own.clone();
    forged.verdict = Verdict::Passed;
    let err = compare_candidates(&candidate(&raw, &forged), &candidate(&raw, &own)).unwrap_err();
    assert!(
        matches!(
            err,
            CompareError::FirstOutcome(OutcomeError::VerdictMismatch { .. })
        ),
        "{err}"
    );
    let mut forged = own.clone();
    forged.receipt.execution.exit_code = 0;
    forged.verdict = Verdict::Passed;
    let err = compare_candidates(&candidate(&raw, &forged), &candidate(&raw, &own)).unwrap_err();
    assert!(
        matches!(
            err,
            CompareError::FirstOutcome(OutcomeError::ResponseHash { .. })
        ),
        "{err}"
    );
}

type Edit = fn(&mut Outcome);

#[test]
fn every_commitment_difference_is_named() {
    let (raw, job) = job();
    let own = outcome(&job, facts(0, 0xd1, 5));
    let edits: [(Commitment, Edit); 8] = [
        (Commitment::SchemaVersion, |o| {
            o.receipt.schema_version.push('x')
        }),
        (Commitment::Scope, |o| o.receipt.scope.round += 1),
        (Commitment::RunnerManifestHash, |o| {
            o.receipt.runner_manifest_hash = Sha256Digest::from_bytes([1; 32]);
        }),
        (Commitment::CommandHash, |o| {
            o.receipt.command_hash = Sha256Digest::from_bytes([2; 32]);
        }),
        (Commitment::SourceDigest, |o| {
            o.receipt.source_digest = Sha256Digest::from_bytes([3; 32]);
        }),
        (Commitment::BenchmarkDigest, |o| {
            o.receipt.benchmark_digest = Sha256Digest::from_bytes([4; 32]);
        }),
        (Commitment::Image, |o| o.receipt.image.push('x')),
        (Commitment::Isolation, |o| {
            o.receipt.execution.isolation.network = "bridge".into();
        }),
    ];
    for (what, edit) in edits {
        let mut other = own.clone();
        edit(&mut other);
        let other = reseal(other);
        let got = compare_candidates(&candidate(&raw, &own), &candidate(&raw, &other)).unwrap();
        assert_eq!(
            got,
            Agreement::Disagrees {
                differing: vec![what]
            },
            "{}",
            what.name()
        );
    }
}

#[test]
fn candidates_of_different_jobs_disagree_on_the_job() {
    let (raw, job) = job();
    let a = outcome(&job, facts(0, 0xd1, 5));
    let mut other_raw = raw.clone();
    other_raw["job_id"] = Value::from("another-job");
    let got = compare_candidates(&candidate(&raw, &a), &candidate(&other_raw, &a)).unwrap();
    assert_eq!(
        got,
        Agreement::Disagrees {
            differing: vec![Commitment::Job]
        }
    );
}

#[test]
fn agreeing_outcomes_that_are_not_the_jobs_are_refused() {
    let (raw, job) = job();
    let mut a = outcome(&job, facts(0, 0xd1, 5));
    a.receipt.image.push('x');
    let a = reseal(a);
    // Both runs agree with each other, but not with the job they claim to be runs of.
    let err = compare_candidates(&candidate(&raw, &a), &candidate(&raw, &a)).unwrap_err();
    assert!(
        matches!(err, CompareError::FirstOutcome(OutcomeError::Image)),
        "{err}"
    );
}

/// `worker reproduce` checks its reference once with [`validate_reference`] and compares the
/// runs typed: for every outcome, forged or not, that check fails as `compare_for_job` of the
/// outcome with itself does, and the typed comparison answers as `compare_for_job` does.
#[test]
fn a_reference_checked_once_then_compared_typed_answers_as_compare_for_job() {
    let (_, job) = job();
    let own = outcome(&job, facts(0, 0xd1, 5));
    let mut unsealed = own.clone();
    unsealed.verdict = Verdict::Failed;
    let mut other_image = own.clone();
    other_image.receipt.image.push('x');
    let mut other_scope_unsealed = own.clone();
    other_scope_unsealed.receipt.scope.round += 1;
    other_scope_unsealed.receipt.execution.exit_code = 1;
    let references = [
        own.clone(),
        outcome(&job, facts(0, 0xd2, 7)),
        outcome(&job, facts(1, 0xd1, 5)),
        unsealed,
        reseal(other_image),
        other_scope_unsealed,
    ];
    for reference in &references {
        let raw = value(reference);
        let checked = validate_reference(&job, &raw);
        let both = compare_for_job(&job, &raw, &raw);
        match (&checked, &both) {
            (Ok(_), Ok(agreement)) => assert!(agreement.agrees()),
            (Err(e), Err(CompareError::FirstOutcome(f))) => assert_eq!(e, f),
            _ => panic!("validate_reference {checked:?}, compare_for_job {both:?}"),
        }
        let Ok(checked) = checked else { continue };
        let mine = own.clone().check_for(&job).unwrap();
        assert_eq!(
            compare_outcomes(checked.outcome(), mine.outcome()),
            compare_for_job(&job, &raw, &value(&own)).unwrap()
        );
    }
}
