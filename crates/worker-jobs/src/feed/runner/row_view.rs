//! A run's report row is a view of the typed run (issue #48 item 1): the strings `worker feed`
//! prints and `worker serve` records are derived from one typed value, never kept beside it.

use super::*;

fn run(status: JobStatus, outcome: JobOutcome, cached: bool) -> JobRun {
    JobRun {
        job_id: "base-mainnet:0xabc:1".into(),
        status,
        outcome,
        verdict: None,
        durations: Durations {
            execute_ms: 7,
            ..Durations::default()
        },
        reused_from_cache: cached,
        executed: true,
        runtime_unavailable: false,
    }
}

#[test]
fn a_verdicts_row_names_its_candidate_and_no_reason() {
    let row = run(
        JobStatus::CompletedFailed,
        JobOutcome::Verdict {
            passed: false,
            candidate_file: "candidate-x.json".into(),
            evidence: None,
            cached: true,
        },
        true,
    )
    .row();
    assert_eq!(row.job_id, "base-mainnet:0xabc:1");
    assert_eq!(row.status, JobStatus::CompletedFailed);
    assert_eq!(row.candidate_file.as_deref(), Some("candidate-x.json"));
    assert_eq!((row.reason_code, row.reason), (None, None));
    assert!(row.reused_from_cache);
    assert_eq!(row.durations.execute_ms, 7);
}

/// A stopped run's row carries its code and its detail cut as every row's reason is, the same
/// as the row built from the stop itself before (`JobRow::new`).
#[test]
fn a_stopped_runs_row_is_the_row_of_its_code_and_cut_detail() {
    let detail = "x".repeat(3000);
    let typed = run(
        JobStatus::NoVerdict,
        JobOutcome::stopped(
            RunCode::NoVerdict(verifier_sdk::NoVerdictReason::Timeout),
            detail.clone(),
            false,
        ),
        false,
    );
    let mut expected = JobRow::new(
        typed.job_id.clone(),
        JobStatus::NoVerdict,
        "timeout",
        &detail,
    );
    expected.durations = typed.durations;
    assert_eq!(typed.row(), expected);
    assert_eq!(typed.row().reason.unwrap().chars().count(), 1024);
}
