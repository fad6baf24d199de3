//! The feed run's report: one row per job, a human table for stderr, stable `--json`, and the
//! batch's exit status.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

/// `schema_version` of the `--json` report.
pub const REPORT_SCHEMA_VERSION: &str = "agent-bounties/regression-feed-report-v1";

/// Excluded jobs (rejected or skipped before running) listed one row each per reason code;
/// beyond that they are only counted, so a feed of junk entries cannot turn into a report of
/// thousands of rows.
pub const LISTED_PER_REASON: usize = 5;

/// What happened to one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// A `passed` verdict; a candidate was written.
    CompletedPassed,
    /// A `failed` verdict; a candidate was written (a failed verdict is a verification too).
    CompletedFailed,
    /// The run ended without a verdict (timeout, input mismatch, …); retried next run.
    NoVerdict,
    /// The job or one of its archives broke a rule; retrying the same input cannot succeed.
    Rejected,
    /// Not ours to run now (another verifier set, beyond `--max-jobs`).
    Skipped,
    /// An infrastructure failure (network, disk, runtime); retried next run.
    Error,
}

impl JobStatus {
    /// The snake_case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::CompletedPassed => "completed_passed",
            Self::CompletedFailed => "completed_failed",
            Self::NoVerdict => "no_verdict",
            Self::Rejected => "rejected",
            Self::Skipped => "skipped",
            Self::Error => "error",
        }
    }
}

/// Wall-clock time spent per phase, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Durations {
    /// Downloading both archives.
    pub download_ms: u64,
    /// Extracting both archives.
    pub extract_ms: u64,
    /// The executor (stage, verify, run).
    pub execute_ms: u64,
    /// Everything for this job.
    pub total_ms: u64,
}

/// One job's row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobRow {
    /// The job id as the feed gave it (or a placeholder for an entry without one).
    pub job_id: String,
    /// What happened.
    pub status: JobStatus,
    /// Stable machine-readable cause (e.g. `expired`, `archive_rejected`, `timeout`).
    pub reason_code: Option<String>,
    /// Human-readable detail.
    pub reason: Option<String>,
    /// The candidate file written, for completed jobs.
    pub candidate_file: Option<String>,
    /// Whether the verdict came from the local result cache.
    pub reused_from_cache: bool,
    /// Time spent.
    pub durations: Durations,
}

/// Longest reason a row (and the ledger, which records a run as its row says) keeps, in
/// characters.
pub const MAX_ROW_REASON_CHARS: usize = 1024;

/// `reason` as a row keeps it: its first [`MAX_ROW_REASON_CHARS`] characters.
pub fn row_reason(reason: &str) -> String {
    reason.chars().take(MAX_ROW_REASON_CHARS).collect()
}

impl JobRow {
    /// A row with a reason and no candidate.
    pub fn new(job_id: String, status: JobStatus, reason_code: &str, reason: &str) -> Self {
        Self {
            job_id,
            status,
            reason_code: Some(reason_code.to_owned()),
            reason: Some(row_reason(reason)),
            candidate_file: None,
            reused_from_cache: false,
            durations: Durations::default(),
        }
    }
}

/// Excluded jobs not listed as rows: how many had this status and reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OmittedJobs {
    /// `rejected` or `skipped`.
    pub status: JobStatus,
    /// The reason code they share.
    pub reason_code: String,
    /// How many.
    pub count: u64,
}

/// The rows of jobs excluded before running, listed up to [`LISTED_PER_REASON`] per
/// (status, reason code) and counted beyond.
#[derive(Debug, Default)]
pub struct ExcludedRows {
    listed: Vec<JobRow>,
    per_reason: BTreeMap<(JobStatus, &'static str), u64>,
}

impl ExcludedRows {
    /// Records one excluded job; `row` is built only when the row is listed.
    pub fn push(&mut self, status: JobStatus, code: &'static str, row: impl FnOnce() -> JobRow) {
        let seen = self.per_reason.entry((status, code)).or_default();
        *seen += 1;
        if *seen <= LISTED_PER_REASON as u64 {
            self.listed.push(row());
        }
    }

    /// The listed rows.
    pub fn rows(&self) -> &[JobRow] {
        &self.listed
    }

    /// How many jobs were recorded in all.
    pub fn total(&self) -> u64 {
        self.per_reason.values().sum()
    }

    /// The listed rows and the counts of the rest.
    pub fn into_parts(self) -> (Vec<JobRow>, Vec<OmittedJobs>) {
        let omitted = self
            .per_reason
            .into_iter()
            .filter(|(_, n)| *n > LISTED_PER_REASON as u64)
            .map(|((status, code), n)| OmittedJobs {
                status,
                reason_code: code.to_owned(),
                count: n - LISTED_PER_REASON as u64,
            })
            .collect();
        (self.listed, omitted)
    }
}

/// A feed query that failed (one per configured verifier at most).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FetchFailure {
    /// The verifier whose feed was queried.
    pub verifier: String,
    /// The client error kind (`timeout`, `too_large`, …).
    pub kind: String,
    /// Detail (never a URL's userinfo or query).
    pub message: String,
    /// Whether a later run may succeed.
    pub transient: bool,
}

/// The whole run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FeedReport {
    /// [`REPORT_SCHEMA_VERSION`].
    pub schema_version: &'static str,
    /// Canonical network name.
    pub network: String,
    /// The configured verifiers, lowercase.
    pub verifiers: Vec<String>,
    /// Feed queries that failed.
    pub fetch_failures: Vec<FetchFailure>,
    /// One row per job run, in run order, then the excluded jobs that are listed.
    pub jobs: Vec<JobRow>,
    /// Excluded jobs beyond [`LISTED_PER_REASON`] per reason, counted instead of listed.
    pub omitted_jobs: Vec<OmittedJobs>,
    /// The candidates manifest written (relative to the output dir), if any.
    pub manifest_file: Option<String>,
    /// Candidates written but left out of the manifest: past
    /// [`verifier_sdk::MAX_MANIFEST_CANDIDATES`] it lists the earliest-expiring only.
    pub candidates_left_out: u64,
    /// Count of executor calls that failed because the container runtime was unreachable.
    pub runtime_unavailable: u64,
    /// Count of executor calls made.
    pub executed: u64,
}

/// How a batch ended (see [`FeedReport::status`]); the binary maps it to an exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchStatus {
    /// Every job was done, skipped as not ours, or rejected for breaking a rule.
    Complete,
    /// Some job ended without a verdict or with an infrastructure error, or a feed query
    /// failed transiently: the next run retries.
    Retry,
    /// A feed query was answered with something that breaks the feed contract.
    FeedBroken,
    /// The container runtime was unreachable for every job that reached the executor.
    RuntimeUnavailable,
}

impl FeedReport {
    /// An empty report.
    pub fn new(network: &str, verifiers: Vec<String>) -> Self {
        Self {
            schema_version: REPORT_SCHEMA_VERSION,
            network: network.to_owned(),
            verifiers,
            fetch_failures: Vec::new(),
            jobs: Vec::new(),
            omitted_jobs: Vec::new(),
            manifest_file: None,
            candidates_left_out: 0,
            runtime_unavailable: 0,
            executed: 0,
        }
    }

    /// Jobs with `status`, listed or omitted.
    pub fn count(&self, status: JobStatus) -> usize {
        let omitted: u64 = self
            .omitted_jobs
            .iter()
            .filter(|o| o.status == status)
            .map(|o| o.count)
            .sum();
        self.jobs.iter().filter(|r| r.status == status).count()
            + usize::try_from(omitted).unwrap_or(usize::MAX)
    }

    /// Every job seen, listed or omitted.
    pub fn total(&self) -> usize {
        let omitted: u64 = self.omitted_jobs.iter().map(|o| o.count).sum();
        self.jobs.len() + usize::try_from(omitted).unwrap_or(usize::MAX)
    }

    /// How the batch ended, for the binary to map to its exit status:
    ///
    /// - [`BatchStatus::Complete`] (exit 0): every feed query answered, and every job either produced
    ///   a candidate (fresh or reused from the cache), was skipped as not ours to run now
    ///   (another verifier set, beyond `--max-jobs`), or was rejected for breaking a rule
    ///   (invalid, expired, conflicting duplicate, bad archive) — a rejected job is the
    ///   feed's defect, it is reported, and retrying cannot help, so it does not fail the
    ///   scheduled run.
    /// - [`BatchStatus::Retry`] (exit 3): some job ended without a verdict or with an
    ///   infrastructure error (download, disk, executor), or a feed query failed transiently
    ///   (timeout, network, 5xx/429). Candidates that were produced are still written; the
    ///   next run retries the rest.
    /// - [`BatchStatus::FeedBroken`] (exit 4): a feed query was answered with something that breaks
    ///   the feed contract (not a JSON array, over the size or depth cap, a redirect, a 4xx).
    /// - [`BatchStatus::RuntimeUnavailable`] (exit 5): at least one job reached the executor and the
    ///   container runtime was unreachable for every one of them.
    /// - exit 78 (configuration) happens before any report exists, for a configuration that
    ///   can never work (see `FeedConfigError`).
    ///
    /// When several apply the most specific wins: 5, then 4, then 3.
    pub fn status(&self) -> BatchStatus {
        if self.executed > 0 && self.runtime_unavailable == self.executed {
            return BatchStatus::RuntimeUnavailable;
        }
        if self.fetch_failures.iter().any(|f| !f.transient) {
            return BatchStatus::FeedBroken;
        }
        let retryable = self
            .jobs
            .iter()
            .any(|r| matches!(r.status, JobStatus::NoVerdict | JobStatus::Error));
        if retryable || !self.fetch_failures.is_empty() {
            return BatchStatus::Retry;
        }
        BatchStatus::Complete
    }

    /// The `--json` form.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// A concise table for stderr. Feed-controlled text is escaped so it cannot inject
    /// terminal control sequences.
    pub fn human_summary(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "feed run on {}: {} job(s); {} passed, {} failed, {} no verdict, {} rejected, {} skipped, {} error",
            self.network,
            self.total(),
            self.count(JobStatus::CompletedPassed),
            self.count(JobStatus::CompletedFailed),
            self.count(JobStatus::NoVerdict),
            self.count(JobStatus::Rejected),
            self.count(JobStatus::Skipped),
            self.count(JobStatus::Error),
        );
        if self.candidates_left_out > 0 {
            let _ = writeln!(
                out,
                "  warning: {} candidate(s) left out of the manifest, which lists at most {} \
                 (the earliest-expiring); the next run lists them again",
                self.candidates_left_out,
                verifier_sdk::MAX_MANIFEST_CANDIDATES
            );
        }
        for f in &self.fetch_failures {
            let _ = writeln!(
                out,
                "  feed query for {} failed ({}): {}",
                f.verifier,
                f.kind,
                escape(&f.message)
            );
        }
        if !self.jobs.is_empty() {
            let _ = writeln!(
                out,
                "  status           cache   total_ms  job_id                   reason"
            );
        }
        for r in &self.jobs {
            let _ = writeln!(
                out,
                "  {:<16} {:<6} {:>9}  {:<24} {}",
                r.status.as_str(),
                if r.reused_from_cache { "reused" } else { "-" },
                r.durations.total_ms,
                escape(&r.job_id),
                escape(r.reason.as_deref().unwrap_or("")),
            );
        }
        for o in &self.omitted_jobs {
            let _ = writeln!(
                out,
                "  … {} more {}: {}",
                o.count,
                o.status.as_str(),
                escape(&o.reason_code)
            );
        }
        out
    }
}

fn escape(s: &str) -> String {
    s.chars().take(200).flat_map(char::escape_debug).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(statuses: &[JobStatus]) -> FeedReport {
        let mut r = FeedReport::new("base-mainnet", vec![]);
        for (i, s) in statuses.iter().enumerate() {
            r.jobs.push(JobRow::new(format!("job-{i}"), *s, "x", "y"));
        }
        r
    }

    fn failure(transient: bool) -> FetchFailure {
        FetchFailure {
            verifier: "0x00".into(),
            kind: "k".into(),
            message: "m".into(),
            transient,
        }
    }

    #[test]
    fn exit_status_mapping() {
        use JobStatus::*;
        assert_eq!(report(&[]).status(), BatchStatus::Complete);
        assert_eq!(
            report(&[CompletedPassed, CompletedFailed, Skipped, Rejected]).status(),
            BatchStatus::Complete
        );
        assert_eq!(
            report(&[CompletedPassed, NoVerdict]).status(),
            BatchStatus::Retry
        );
        assert_eq!(report(&[Error, Skipped]).status(), BatchStatus::Retry);

        let mut r = report(&[CompletedPassed]);
        r.fetch_failures.push(failure(true));
        assert_eq!(r.status(), BatchStatus::Retry);
        r.fetch_failures.push(failure(false));
        assert_eq!(r.status(), BatchStatus::FeedBroken);

        let mut r = report(&[Error, Error]);
        r.executed = 2;
        r.runtime_unavailable = 2;
        assert_eq!(r.status(), BatchStatus::RuntimeUnavailable);
        r.runtime_unavailable = 1;
        assert_eq!(r.status(), BatchStatus::Retry);
    }

    #[test]
    fn json_has_schema_and_snake_case_statuses() {
        let r = report(&[JobStatus::CompletedPassed, JobStatus::NoVerdict]);
        let v = r.to_json();
        assert_eq!(v["schema_version"], REPORT_SCHEMA_VERSION);
        assert_eq!(v["jobs"][0]["status"], "completed_passed");
        assert_eq!(v["jobs"][1]["status"], "no_verdict");
        assert_eq!(v["jobs"][0]["reused_from_cache"], false);
        assert!(v["jobs"][0]["durations"]["total_ms"].is_u64());
    }

    #[test]
    fn excluded_rows_are_listed_up_to_the_cap_per_reason_then_counted() {
        let mut ex = ExcludedRows::default();
        let mut built = 0;
        for i in 0..12 {
            ex.push(JobStatus::Rejected, "missing_job_id", || {
                built += 1;
                JobRow::new(format!("n{i}"), JobStatus::Rejected, "missing_job_id", "x")
            });
        }
        ex.push(JobStatus::Skipped, "max_jobs", || {
            JobRow::new("m".into(), JobStatus::Skipped, "max_jobs", "x")
        });
        assert_eq!(built, LISTED_PER_REASON);
        assert_eq!(ex.total(), 13);
        let (rows, omitted) = ex.into_parts();
        assert_eq!(rows.len(), LISTED_PER_REASON + 1);
        assert_eq!(
            omitted,
            vec![OmittedJobs {
                status: JobStatus::Rejected,
                reason_code: "missing_job_id".into(),
                count: 7,
            }]
        );
        let mut r = FeedReport::new("base-mainnet", vec![]);
        r.jobs = rows;
        r.omitted_jobs = omitted;
        assert_eq!(r.total(), 13);
        assert_eq!(r.count(JobStatus::Rejected), 12);
        let text = r.human_summary();
        assert!(text.contains("13 job(s)"), "{text}");
        assert!(text.contains("… 7 more rejected: missing_job_id"), "{text}");
        assert_eq!(
            r.to_json()["omitted_jobs"],
            serde_json::json!([{"status": "rejected", "reason_code": "missing_job_id", "count": 7}])
        );
    }

    #[test]
    fn human_summary_escapes_feed_text() {
        let mut r = report(&[]);
        r.jobs.push(JobRow::new(
            "evil\u{1b}[2J".into(),
            JobStatus::Rejected,
            "x",
            "line\nbreak",
        ));
        let text = r.human_summary();
        assert!(!text.contains('\u{1b}'));
        assert!(text.contains("evil\\u{1b}[2J"));
        assert!(text.contains("line\\nbreak"));
        assert!(text.contains("1 rejected"));
    }
}
