//! How one job's run ended, typed: the run step's reason codes ([`RunCode`], beside
//! selection's [`super::select::reason`]) and its [`JobOutcome`] — a verdict, a no-verdict with
//! the sandbox's typed reason, a refusal by rule, the job's own failure, or the host's — which
//! `worker serve` maps once to its ledger. The report row ([`super::JobRow`]) keeps the same
//! strings (`reason_code`), read from these types.

use platform_client::ClientError;
use verifier_sdk::{NoVerdictReason, Sha256Digest};

/// Stable reason codes of the run step (after selection).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunCode {
    /// The job's window closed before it could run ([`super::select::reason::EXPIRED`]).
    Expired,
    /// The sandbox ended the run without a verdict, for this reason.
    NoVerdict(NoVerdictReason),
    /// The container runtime could not be reached before the run.
    RuntimeUnavailable,
    /// A download failed; the client's error kind.
    Download(&'static str),
    /// An archive broke an extraction rule.
    ArchiveRejected,
    /// Extraction failed for another reason.
    ExtractFailed,
    /// The job's scratch directory could not be made or written.
    ScratchFailed,
    /// The candidate file could not be written.
    OutputFailed,
    /// Staging into the store failed for a reason of this host.
    StagingFailed,
    /// The executor refused the inputs.
    ExecutorRejected,
    /// The executor failed otherwise.
    ExecutorError,
    /// The executor panicked.
    ExecutorPanicked,
    /// The executor reported trees other than the job commits to.
    DigestMismatch,
    /// The verdict does not fit the job.
    InvalidOutcome,
    /// A verdict without an evidence record.
    MissingEvidence,
    /// A bug of the runner.
    Internal,
}

impl RunCode {
    /// The code written in reports, caches and the ledger.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Expired => super::select::reason::EXPIRED,
            Self::NoVerdict(reason) => reason.as_str(),
            Self::RuntimeUnavailable => NoVerdictReason::RuntimeUnavailable.as_str(),
            Self::Download(kind) => download_code(kind),
            Self::ArchiveRejected => "archive_rejected",
            Self::ExtractFailed => "extract_failed",
            Self::ScratchFailed => "scratch_failed",
            Self::OutputFailed => "output_failed",
            Self::StagingFailed => "staging_failed",
            Self::ExecutorRejected => "executor_rejected",
            Self::ExecutorError => "executor_error",
            Self::ExecutorPanicked => "executor_panicked",
            Self::DigestMismatch => "digest_mismatch",
            Self::InvalidOutcome => "invalid_outcome",
            Self::MissingEvidence => "missing_evidence",
            Self::Internal => "internal",
        }
    }

    /// The code of a download that failed with `error`.
    pub fn download(error: &ClientError) -> Self {
        Self::Download(error.kind())
    }

    /// The code of a cached rejection (one of [`super::cache::CACHEABLE_REJECTIONS`]).
    pub fn from_cached(code: &str) -> Option<Self> {
        match code {
            "archive_rejected" => Some(Self::ArchiveRejected),
            "download_too_large" => Some(Self::Download("too_large")),
            _ => None,
        }
    }

    /// Whether a run that ended with this code (and no verdict) failed for a host cause:
    /// the engine, the archive host (shared by every job) not answering or answering
    /// 5xx/429, or this host's scratch, output or staging directory. Everything else is the
    /// job's own: its inputs, its image, its command. A missing image is the job's with or
    /// without `--pull`: it concerns one image digest, not the host (chaos seed 4).
    fn is_host(self) -> bool {
        match self {
            Self::RuntimeUnavailable
            | Self::NoVerdict(NoVerdictReason::RuntimeUnavailable)
            | Self::ScratchFailed
            | Self::OutputFailed
            | Self::StagingFailed => true,
            // Only a download that may work later reaches here (a 404 or a refused redirect
            // is a refusal).
            Self::Download("transport" | "timeout" | "http_status" | "write") => true,
            _ => false,
        }
    }
}

fn download_code(kind: &str) -> &'static str {
    match kind {
        "invalid_url" => "download_invalid_url",
        "not_https" => "download_not_https",
        "redirect_refused" => "download_redirect_refused",
        "too_large" => "download_too_large",
        "too_deep" => "download_too_deep",
        "timeout" => "download_timeout",
        "http_status" => "download_http_status",
        "invalid_json" => "download_invalid_json",
        "duplicate_job" => "download_duplicate_job",
        "too_many_jobs" => "download_too_many_jobs",
        "transport" => "download_transport",
        "write" => "download_write",
        _ => "download_failed",
    }
}

/// How one job's run ended, for callers that act on it (`worker serve`'s ledger).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobOutcome {
    /// A verdict candidate was written.
    Verdict {
        /// Whether the verdict is `passed`.
        passed: bool,
        /// The candidate file, relative to the output directory.
        candidate_file: String,
        /// `sha256:` of the canonical JSON of the candidate's evidence record (the store's
        /// name for it), computed from the record in memory; `None` for a cached verdict
        /// stored without one.
        evidence: Option<Sha256Digest>,
        /// Replayed from the result cache.
        cached: bool,
    },
    /// Refused by rule: the same inputs are refused again; never run again.
    Refused {
        /// Why.
        code: RunCode,
        /// Detail.
        detail: String,
    },
    /// No verdict, the job's own fault (a sandbox no-verdict, an expiry while it waited, a
    /// broken executor answer): an attempt of the job.
    JobFailure {
        /// Why.
        code: RunCode,
        /// Detail.
        detail: String,
    },
    /// No verdict for a host cause: says nothing about the job, not an attempt.
    HostFailure {
        /// Why.
        code: RunCode,
        /// Detail.
        detail: String,
    },
}

impl JobOutcome {
    /// The outcome of a run stopped with `code`: a refusal when `refused` (except an expiry,
    /// which is not a refusal of the content), else the host's or the job's failure.
    pub(super) fn stopped(code: RunCode, detail: String, refused: bool) -> Self {
        if refused && code != RunCode::Expired {
            Self::Refused { code, detail }
        } else if !refused && code.is_host() {
            Self::HostFailure { code, detail }
        } else {
            Self::JobFailure { code, detail }
        }
    }

    /// The detail, for an outcome without a verdict.
    pub fn detail(&self) -> Option<&str> {
        match self {
            Self::Verdict { .. } => None,
            Self::Refused { detail, .. }
            | Self::JobFailure { detail, .. }
            | Self::HostFailure { detail, .. } => Some(detail),
        }
    }

    /// The candidate file of a verdict, relative to the output directory.
    pub fn candidate_file(&self) -> Option<&str> {
        match self {
            Self::Verdict { candidate_file, .. } => Some(candidate_file),
            _ => None,
        }
    }

    /// The reason code, for an outcome without a verdict.
    pub fn code(&self) -> Option<RunCode> {
        match self {
            Self::Verdict { .. } => None,
            Self::Refused { code, .. }
            | Self::JobFailure { code, .. }
            | Self::HostFailure { code, .. } => Some(*code),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stopped(code: RunCode, refused: bool) -> JobOutcome {
        JobOutcome::stopped(code, "d".into(), refused)
    }

    #[test]
    fn outcome_host_causes_are_the_engine_the_archive_host_and_this_hosts_directories() {
        for code in [
            RunCode::RuntimeUnavailable,
            RunCode::NoVerdict(NoVerdictReason::RuntimeUnavailable),
            RunCode::ScratchFailed,
            RunCode::OutputFailed,
            RunCode::StagingFailed,
            RunCode::Download("transport"),
            RunCode::Download("timeout"),
            RunCode::Download("http_status"),
            RunCode::Download("write"),
        ] {
            assert!(
                matches!(stopped(code, false), JobOutcome::HostFailure { .. }),
                "{code:?}"
            );
        }
        // A download that failed by rule (404, refused redirect, too large) is a refusal.
        assert!(matches!(
            stopped(RunCode::Download("http_status"), true),
            JobOutcome::Refused { .. }
        ));
    }

    #[test]
    fn outcome_a_missing_image_is_the_jobs_own_failure_not_the_hosts() {
        for reason in [
            NoVerdictReason::ImageMissing,
            NoVerdictReason::Timeout,
            NoVerdictReason::InputMismatch,
        ] {
            assert!(matches!(
                stopped(RunCode::NoVerdict(reason), false),
                JobOutcome::JobFailure { .. }
            ));
        }
        for code in [
            RunCode::DigestMismatch,
            RunCode::ExecutorError,
            RunCode::ExecutorPanicked,
            RunCode::ExtractFailed,
        ] {
            assert!(matches!(
                stopped(code, false),
                JobOutcome::JobFailure { .. }
            ));
        }
    }

    #[test]
    fn outcome_an_expiry_is_not_a_refusal_of_the_content() {
        assert!(matches!(
            stopped(RunCode::Expired, true),
            JobOutcome::JobFailure { .. }
        ));
        assert!(matches!(
            stopped(RunCode::ArchiveRejected, true),
            JobOutcome::Refused { .. }
        ));
    }

    #[test]
    fn outcome_codes_keep_their_report_strings() {
        assert_eq!(RunCode::Expired.as_str(), "expired");
        assert_eq!(RunCode::RuntimeUnavailable.as_str(), "runtime_unavailable");
        assert_eq!(
            RunCode::Download("too_large").as_str(),
            "download_too_large"
        );
        for code in super::super::cache::CACHEABLE_REJECTIONS {
            assert_eq!(RunCode::from_cached(code).map(RunCode::as_str), Some(*code));
        }
        assert_eq!(RunCode::from_cached("timeout"), None);
    }
}
