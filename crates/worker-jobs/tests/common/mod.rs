//! What the worker-jobs feed tests (`feed_run.rs`, `feed_pull_deadline.rs`) share: finding a
//! job's row in a batch report and asserting how it ended.

use serde_json::Value;
use worker_jobs::feed::{FeedReport, JobRow, JobStatus};

pub fn id(job: &Value) -> String {
    job["job_id"].as_str().unwrap().to_owned()
}

/// `job`'s row in `report`; panics listing every row when there is none.
pub fn row<'a>(report: &'a FeedReport, job: &Value) -> &'a JobRow {
    let id = id(job);
    report
        .jobs
        .iter()
        .find(|r| r.job_id == id)
        .unwrap_or_else(|| panic!("no row for {id}: {:?}", report.jobs))
}

/// Asserts that `job`'s row ended `status` with reason code `code`; returns the row.
pub fn row_ended<'a>(
    report: &'a FeedReport,
    job: &Value,
    status: JobStatus,
    code: Option<&str>,
) -> &'a JobRow {
    let r = row(report, job);
    assert_eq!(
        (r.status, r.reason_code.as_deref()),
        (status, code),
        "{r:?}"
    );
    r
}

/// Asserts that `job` was set apart as `window_too_short` and that its reason gives every one
/// of `figures` (the window left, the costs counted).
pub fn assert_window_too_short(report: &FeedReport, job: &Value, figures: &[&str]) {
    let r = row_ended(report, job, JobStatus::Skipped, Some("window_too_short"));
    let reason = r.reason.as_deref().unwrap();
    for figure in figures {
        assert!(reason.contains(figure), "no {figure:?} in {reason}");
    }
}
