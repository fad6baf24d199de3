//! Process exit codes of the `worker` binary. Defined once here, documented in README.md
//! and ARCHITECTURE.md, covered by tests, and never renumbered.

/// An exit status of the worker, mapped to a process exit code only in `main`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ExitCode {
    /// The command did what was asked: a tree was snapshotted or staged, or a run produced a
    /// verdict (`passed` or `failed` — a failed verdict is a successful verification).
    Success = 0,
    /// Unexpected internal failure (a bug); nothing was published.
    Internal = 1,
    /// The command line could not be parsed.
    Usage = 2,
    /// The run ended without a verdict (timeout, output cap, OOM, inputs changed, image
    /// missing, …); the stdout JSON names the reason. Safe to retry later.
    NoVerdict = 3,
    /// The input was rejected: a job, manifest, request or tree broke a rule. Retrying the
    /// same input cannot succeed.
    InvalidInput = 4,
    /// The Docker Engine could not be reached. Retry when it is back.
    RuntimeUnavailable = 5,
    /// `reproduce`: the verdict and every commitment reproduced, the output did not (the
    /// response hash differs).
    OutputDiffers = 6,
    /// `reproduce`: the reproduction DISAGREES with the reference on the verdict or a
    /// commitment.
    Disagrees = 7,
    /// `reproduce --tx`: the job's terms (its runner manifest and benchmark, criteria,
    /// evidence schema, or another value the bounty committed: solver, window, verifiers)
    /// differ from the bounty's on chain, as the signer checks them; the job served is not the
    /// bounty's. Nothing was run; the same job is refused again.
    TermsDiffer = 8,
    /// `rehearse --adversarial`: the benchmark lets a non-solution pass (a stub solution passed);
    /// `rehearse --batch`: a task does. A bounty on that benchmark would pay a non-solution.
    PaysNonSolution = 9,
    /// A configuration or credential problem that a restart will not fix.
    Config = 78,
    /// Ended by SIGINT: the run was stopped, its container removed, nothing written as a verdict.
    Interrupted = 130,
    /// Ended by SIGTERM: as for SIGINT.
    Terminated = 143,
}

impl ExitCode {
    /// The numeric process exit code.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The stable name of the exit code, the `code` of the `--json` error object.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Internal => "internal",
            Self::Usage => "usage",
            Self::NoVerdict => "no_verdict",
            Self::InvalidInput => "invalid_input",
            Self::RuntimeUnavailable => "runtime_unavailable",
            Self::OutputDiffers => "output_differs",
            Self::Disagrees => "disagrees",
            Self::TermsDiffer => "terms_differ",
            Self::PaysNonSolution => "pays_non_solution",
            Self::Config => "config",
            Self::Interrupted => "interrupted",
            Self::Terminated => "terminated",
        }
    }
}

/// The exit code of a typed result from a library: the libraries report how something ended,
/// and only the binary turns that into a process exit code.
pub trait ExitStatus {
    /// The process exit code.
    fn exit_code(&self) -> ExitCode;
}

impl ExitStatus for crate::feed::BatchStatus {
    fn exit_code(&self) -> ExitCode {
        match self {
            Self::Complete => ExitCode::Success,
            Self::Retry => ExitCode::NoVerdict,
            Self::FeedBroken => ExitCode::InvalidInput,
            Self::RuntimeUnavailable => ExitCode::RuntimeUnavailable,
        }
    }
}

impl ExitStatus for crate::feed::FeedReport {
    fn exit_code(&self) -> ExitCode {
        self.status().exit_code()
    }
}

impl ExitStatus for crate::feed::FeedError {
    /// A configuration that cannot work is 78; a failure to write the final manifest (disk
    /// trouble) is internal.
    fn exit_code(&self) -> ExitCode {
        match self {
            Self::Manifest(_) => ExitCode::Internal,
            _ => ExitCode::Config,
        }
    }
}

impl ExitStatus for crate::rehearse::Answer {
    fn exit_code(&self) -> ExitCode {
        match self {
            Self::Fit => ExitCode::Success,
            Self::NoAnswer => ExitCode::NoVerdict,
            Self::Unfit => ExitCode::InvalidInput,
            Self::PaysNonSolution => ExitCode::PaysNonSolution,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ExitCode;

    #[test]
    fn exit_codes_are_never_renumbered() {
        assert_eq!(ExitCode::Success.code(), 0);
        assert_eq!(ExitCode::Internal.code(), 1);
        assert_eq!(ExitCode::Usage.code(), 2);
        assert_eq!(ExitCode::NoVerdict.code(), 3);
        assert_eq!(ExitCode::OutputDiffers.code(), 6);
        assert_eq!(ExitCode::Disagrees.code(), 7);
        assert_eq!(ExitCode::TermsDiffer.code(), 8);
        assert_eq!(ExitCode::PaysNonSolution.code(), 9);
        assert_eq!(ExitCode::InvalidInput.code(), 4);
        assert_eq!(ExitCode::RuntimeUnavailable.code(), 5);
        assert_eq!(ExitCode::Config.code(), 78);
        assert_eq!(ExitCode::Interrupted.code(), 130);
        assert_eq!(ExitCode::Terminated.code(), 143);
    }
}
