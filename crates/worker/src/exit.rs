//! The `worker` binary's exit codes: the numbering the three binaries share
//! ([`cli_support::exit`], documented in docs/reference.md and ARCHITECTURE.md, never
//! renumbered), and the one mapping of the libraries' typed results to it.

pub use cli_support::exit::{Binary, ExitCode};

/// The exit code of a typed result from a library: the libraries report how something ended,
/// and only the binary turns that into a process exit code.
pub trait ExitStatus {
    /// The process exit code.
    fn exit_code(&self) -> ExitCode;
}

impl ExitStatus for worker_jobs::feed::BatchStatus {
    fn exit_code(&self) -> ExitCode {
        match self {
            Self::Complete => ExitCode::Success,
            Self::Retry => ExitCode::NotDone,
            Self::FeedBroken => ExitCode::InvalidInput,
            Self::RuntimeUnavailable => ExitCode::Unavailable,
        }
    }
}

impl ExitStatus for worker_jobs::feed::FeedReport {
    fn exit_code(&self) -> ExitCode {
        self.status().exit_code()
    }
}

impl ExitStatus for worker_jobs::feed::FeedError {
    /// A configuration that cannot work is 78; a failure to write the final manifest (disk
    /// trouble) is internal.
    fn exit_code(&self) -> ExitCode {
        match self {
            Self::Manifest(_) => ExitCode::Internal,
            _ => ExitCode::Config,
        }
    }
}

impl ExitStatus for worker_rehearse::Answer {
    fn exit_code(&self) -> ExitCode {
        match self {
            Self::Fit => ExitCode::Success,
            Self::NoAnswer => ExitCode::NotDone,
            Self::Unfit => ExitCode::InvalidInput,
            Self::PaysNonSolution => ExitCode::PaysNonSolution,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ExitCode, ExitStatus};
    use worker_jobs::feed::output::OutputError;
    use worker_jobs::feed::{BatchStatus, FeedError};

    /// The feed runner's tests (worker-jobs' tests/feed_run.rs) assert how a batch ended as a
    /// `BatchStatus`; `worker run` exits with what this mapping makes of it, so a remapped
    /// status (a retryable batch exiting 0, a broken feed read as retryable) fails here.
    #[test]
    fn feed_batch_statuses_and_errors_exit_with_their_documented_codes() {
        for (status, code) in [
            (BatchStatus::Complete, ExitCode::Success),
            (BatchStatus::Retry, ExitCode::NotDone),
            (BatchStatus::FeedBroken, ExitCode::InvalidInput),
            (BatchStatus::RuntimeUnavailable, ExitCode::Unavailable),
        ] {
            assert_eq!(status.exit_code(), code, "{status:?}");
        }
        for config in [
            FeedError::NoVerifiers,
            FeedError::TooManyVerifiers(3),
            FeedError::DuplicateVerifier,
        ] {
            assert_eq!(config.exit_code(), ExitCode::Config, "{config}");
        }
        let manifest = FeedError::Manifest(OutputError::Io {
            path: "manifest.json".into(),
            source: std::io::Error::other("disk full"),
        });
        assert_eq!(manifest.exit_code(), ExitCode::Internal);
    }
}
