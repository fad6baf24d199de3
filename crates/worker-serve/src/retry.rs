//! Whose fault a run without a verdict was, and when to try again.
//!
//! A run that failed because of the *host* (the engine unreachable, the archive host
//! unreachable, the staging, scratch or output directory full or unwritable) says nothing
//! about the job: it is never counted as one of the job's
//! attempts. The host is marked unhealthy instead and backs off as a whole: no job starts until
//! the back-off ends, then one job at a time probes it until a run ends for any other reason.
//! A failure that is the job's own (a timeout, an input mismatch, a start failure, a pinned
//! image that is not on the host, …) is
//! retried after a growing interval, for as long as the job's verification window is open:
//! a job is given up when its window ends, never by a count of polls or attempts.
//!
//! Both back-offs double from the poll interval: `base × 2^(n−1)` before the n-th retry, at
//! most 16 poll intervals for the host (so a fixed host is noticed soon) and at most an hour
//! (or one poll interval, if that is longer) for a job, whose retry is moreover never set
//! after the last moment it can still start and settle ([`job_retry_at`]).

use std::time::Duration;

use worker_jobs::feed::JobOutcome;

/// Runs in a row failing for host causes after which `/healthz` answers 503 (degraded).
pub const HOST_UNHEALTHY_AFTER: u32 = 3;

/// Longest wait before retrying a job's own failure (unless the poll interval is longer).
pub const JOB_BACKOFF_MAX: Duration = Duration::from_secs(3600);

/// Host back-off ceiling, in poll intervals.
pub const HOST_BACKOFF_MAX_POLLS: u32 = 16;

/// Whose fault a run without a verdict was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The host's: not an attempt of the job; the host backs off.
    Host,
    /// The job's own: an attempt; the job backs off until its window ends.
    Job,
}

impl Cause {
    /// The name stored in the ledger and logged.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Host => "host",
            Self::Job => "job",
        }
    }
}

/// Whose fault the run was, for a run without a verdict; `None` for a verdict or a refusal
/// by rule. The run step decided it ([`worker_jobs::feed::RunCode`]): a missing image is
/// always the job's, with or without `--pull`: it concerns one image digest, not the host.
/// Were it the host's, one author who pins a digest that is not on a host of pre-pulled
/// images would make the host back off and probe with that same job again and again, while
/// every other bounty's job waited until its window ended (chaos seed 4).
pub fn cause_of(outcome: &JobOutcome) -> Option<Cause> {
    match outcome {
        JobOutcome::Verdict { .. } | JobOutcome::Refused { .. } => None,
        JobOutcome::JobFailure { .. } => Some(Cause::Job),
        JobOutcome::HostFailure { .. } => Some(Cause::Host),
    }
}

/// `base × 2^(n−1)` for the n-th retry (n ≥ 1), at most `max`.
pub fn backoff(base: Duration, n: u32, max: Duration) -> Duration {
    let factor = 1u32 << n.saturating_sub(1).min(20);
    base.saturating_mul(factor).min(max.max(base))
}

/// The wait before the next run of a job whose own failures number `attempts`.
pub fn job_backoff(poll_interval: Duration, attempts: i64) -> Duration {
    let n = u32::try_from(attempts.max(1)).unwrap_or(u32::MAX);
    backoff(poll_interval, n, JOB_BACKOFF_MAX)
}

/// When a job whose own failures number `attempts`, the last at `at_ms`, may run again
/// (wall clock, unix ms): after its back-off, but never later than one poll interval before
/// `last_start_ms`, the last moment it can still start and settle (issue #43: a doubled
/// back-off of 256 s set the retry past it, and a job whose image came in time was given
/// up). The poll interval is the margin because a due job waits for the next poll; once
/// even that is past, the job is due at once, and the deadline check before its start decides
/// whether it is still worth running (`window_too_short` if not).
pub fn job_retry_at(
    at_ms: i64,
    poll_interval: Duration,
    attempts: i64,
    last_start_ms: Option<i64>,
) -> i64 {
    let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let backed_off = at_ms.saturating_add(ms(job_backoff(poll_interval, attempts)));
    match last_start_ms {
        Some(last) => backed_off.min(last.saturating_sub(ms(poll_interval)).max(at_ms)),
        None => backed_off,
    }
}

/// The host's state, decided from the runs' causes; times are the service clock's monotonic
/// readings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostHealth {
    failures_in_row: u32,
    retry_at: Option<Duration>,
    last: Option<String>,
}

impl HostHealth {
    /// A run failed for a host cause (`reason`: its code and detail) at `now`.
    pub fn failed(&mut self, now: Duration, poll_interval: Duration, reason: String) {
        self.failures_in_row = self.failures_in_row.saturating_add(1);
        let wait = backoff(
            poll_interval,
            self.failures_in_row,
            poll_interval.saturating_mul(HOST_BACKOFF_MAX_POLLS),
        );
        self.retry_at = Some(now + wait);
        self.last = Some(reason);
    }

    /// A run ended for another reason (a verdict, a refusal, the job's own failure): the host
    /// works.
    pub fn worked(&mut self) {
        *self = Self::default();
    }

    /// Whether a job may start at `now`.
    pub fn may_start(&self, now: Duration) -> bool {
        self.retry_at.is_none_or(|at| now >= at)
    }

    /// How many jobs may run at once: one while the host is being probed.
    pub fn limit(&self, parallel: usize) -> usize {
        if self.failures_in_row > 0 {
            1
        } else {
            parallel
        }
    }

    /// Runs in a row that failed for host causes.
    pub fn failures_in_row(&self) -> u32 {
        self.failures_in_row
    }

    /// Time left before a job may start, at `now`.
    pub fn wait_left(&self, now: Duration) -> Duration {
        self.retry_at
            .map_or(Duration::ZERO, |at| at.saturating_sub(now))
    }

    /// The last host failure's code and detail.
    pub fn last(&self) -> Option<&str> {
        self.last.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_host_causes_are_not_the_jobs_attempts() {
        use worker_jobs::feed::RunCode;
        let detail = || "detail".to_owned();
        let host = JobOutcome::HostFailure {
            code: RunCode::StagingFailed,
            detail: detail(),
        };
        assert_eq!(cause_of(&host), Some(Cause::Host));
        let own = JobOutcome::JobFailure {
            code: RunCode::NoVerdict(verifier_sdk::NoVerdictReason::ImageMissing),
            detail: detail(),
        };
        assert_eq!(cause_of(&own), Some(Cause::Job));
        let refused = JobOutcome::Refused {
            code: RunCode::Download("http_status"),
            detail: detail(),
        };
        assert_eq!(cause_of(&refused), None);
        let verdict = JobOutcome::Verdict {
            passed: true,
            candidate_file: "c.json".into(),
            evidence: None,
            cached: false,
        };
        assert_eq!(cause_of(&verdict), None);
    }

    #[test]
    fn serve_job_backoff_doubles_from_the_poll_interval_up_to_an_hour() {
        let s = Duration::from_secs;
        let waits: Vec<_> = (1..=8).map(|a| job_backoff(s(60), a)).collect();
        assert_eq!(
            waits,
            [60, 120, 240, 480, 960, 1920, 3600, 3600].map(s).to_vec()
        );
        assert_eq!(job_backoff(s(60), 0), s(60));
        assert_eq!(job_backoff(s(60), i64::MAX), s(3600));
        // A poll interval past the ceiling: one poll interval.
        assert_eq!(job_backoff(s(7200), 5), s(7200));
    }

    #[test]
    fn serve_job_retry_is_capped_one_poll_before_the_last_start() {
        let s = Duration::from_secs;
        // Far from the last start: the back-off alone.
        assert_eq!(job_retry_at(0, s(1), 9, Some(10_000_000)), 256_000);
        assert_eq!(job_retry_at(0, s(1), 9, None), 256_000);
        // The back-off would pass the last start: one poll interval before it.
        assert_eq!(job_retry_at(0, s(1), 9, Some(100_000)), 99_000);
        // Within a poll interval of the last start, or past it: due at once.
        assert_eq!(job_retry_at(99_500, s(1), 9, Some(100_000)), 99_500);
        assert_eq!(job_retry_at(200_000, s(1), 9, Some(100_000)), 200_000);
    }

    #[test]
    fn serve_host_backs_off_probes_one_job_and_recovers_on_any_other_outcome() {
        let s = Duration::from_secs;
        let mut h = HostHealth::default();
        assert!(h.may_start(s(0)));
        assert_eq!(h.limit(4), 4);
        h.failed(s(100), s(10), "image_missing: x".into());
        assert!(!h.may_start(s(109)));
        assert!(h.may_start(s(110)));
        assert_eq!(h.limit(4), 1);
        h.failed(s(110), s(10), "image_missing: x".into());
        assert!(!h.may_start(s(129)) && h.may_start(s(130)));
        for _ in 0..10 {
            h.failed(s(1000), s(10), "image_missing: x".into());
        }
        assert_eq!(h.wait_left(s(1000)), s(160), "at most 16 poll intervals");
        assert_eq!(h.failures_in_row(), 12);
        assert_eq!(h.last(), Some("image_missing: x"));
        h.worked();
        assert!(h.may_start(s(1000)));
        assert_eq!(h.limit(4), 4);
        assert_eq!(h.failures_in_row(), 0);
    }
}
