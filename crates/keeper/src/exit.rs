//! Process exit codes of the `keeper` binary. Defined once here, mapped to the process status
//! only in `main`, part of the CLI contract: never renumber.
//!
//! | code | variant        | meaning |
//! |------|----------------|---------|
//! | 0    | `Success`      | every candidate ended `paid`, `rejected` or `done` |
//! | 1    | `Internal`     | a bug or an unexpected local failure (e.g. the state dir cannot be written, or another keeper holds its lock) |
//! | 2    | `Usage`        | the command line does not parse (clap prints the usage) |
//! | 3    | `NotSettled`   | some candidate was refused, reverted, or is sent but not yet confirmed; rerun later |
//! | 4    | `InvalidInput` | a candidate or the candidates directory is malformed |
//! | 5    | `Unavailable`  | the RPC node or the job API did not answer; a retry may succeed |
//! | 78   | `Config`       | configuration or credential problem a restart will not fix (key missing, key file too open, bad URL) |
//!
//! When jobs end differently, the run exits with the most severe code in the order
//! 1 > 78 > 5 > 4 > 3 > 0, so a transient outage is never hidden behind a refusal.

/// An exit status of the keeper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ExitCode {
    /// Every candidate ended `paid`, `rejected` or `done`.
    Success = 0,
    /// A bug or an unexpected local failure.
    Internal = 1,
    /// The command line does not parse.
    Usage = 2,
    /// Some candidate was refused, reverted or is still pending confirmation.
    NotSettled = 3,
    /// A candidate or the candidates directory is malformed.
    InvalidInput = 4,
    /// The RPC node or the job API is unavailable.
    Unavailable = 5,
    /// Configuration or credential problem (EX_CONFIG).
    Config = 78,
}

impl ExitCode {
    /// The numeric process exit code.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// Severity rank used to combine per-job codes into the run's code (higher wins).
    const fn severity(self) -> u8 {
        match self {
            Self::Success => 0,
            Self::NotSettled => 1,
            Self::InvalidInput => 2,
            Self::Unavailable => 3,
            Self::Config => 4,
            Self::Internal | Self::Usage => 5,
        }
    }

    /// The more severe of two exit codes.
    #[must_use]
    pub const fn worst(self, other: Self) -> Self {
        if other.severity() > self.severity() {
            other
        } else {
            self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ExitCode;

    #[test]
    fn codes_are_stable() {
        assert_eq!(
            [
                ExitCode::Success,
                ExitCode::Internal,
                ExitCode::Usage,
                ExitCode::NotSettled,
                ExitCode::InvalidInput,
                ExitCode::Unavailable,
                ExitCode::Config
            ]
            .map(ExitCode::code),
            [0, 1, 2, 3, 4, 5, 78]
        );
    }

    #[test]
    fn worst_follows_the_documented_order() {
        let order = [
            ExitCode::Success,
            ExitCode::NotSettled,
            ExitCode::InvalidInput,
            ExitCode::Unavailable,
            ExitCode::Config,
            ExitCode::Internal,
        ];
        for (i, a) in order.iter().enumerate() {
            for (j, b) in order.iter().enumerate() {
                let expected = if i >= j { *a } else { *b };
                assert_eq!(a.worst(*b), expected, "{a:?} vs {b:?}");
            }
        }
    }
}
