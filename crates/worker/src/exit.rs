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
