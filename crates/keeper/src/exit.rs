//! The `keeper` binary's exit codes, of the numbering the three binaries share
//! ([`cli_support::exit`]: 3 is `NotDone`), mapped to the process status only in `main`, part
//! of the CLI contract: never renumber.
//!
//! | code | variant        | meaning |
//! |------|----------------|---------|
//! | 0    | `Success`      | every candidate ended `paid`, `rejected` or `done` |
//! | 1    | `Internal`     | a bug or an unexpected local failure (e.g. the state dir cannot be written, or another keeper holds its lock) |
//! | 2    | `Usage`        | the command line does not parse (clap prints the usage) |
//! | 3    | `NotDone`      | some candidate was refused, reverted, or is sent but not yet confirmed; rerun later |
//! | 4    | `InvalidInput` | a candidate or the candidates directory is malformed |
//! | 5    | `Unavailable`  | the RPC node or the job API did not answer; a retry may succeed |
//! | 78   | `Config`       | configuration or credential problem a restart will not fix (key missing, key file too open, bad URL) |
//!
//! When jobs end differently, the run exits with the most severe code in the order
//! 1 > 78 > 5 > 4 > 3 > 0, so a transient outage is never hidden behind a refusal.

pub use cli_support::exit::ExitCode;

/// Severity rank used to combine per-job codes into the run's code (higher wins).
const fn severity(code: ExitCode) -> u8 {
    match code {
        ExitCode::Success => 0,
        ExitCode::NotDone => 1,
        ExitCode::InvalidInput => 2,
        ExitCode::Unavailable => 3,
        ExitCode::Config => 4,
        // Internal, usage, and any code of the numbering the keeper never exits with.
        _ => 5,
    }
}

/// The more severe of two exit codes.
#[must_use]
pub const fn worst(a: ExitCode, b: ExitCode) -> ExitCode {
    if severity(b) > severity(a) { b } else { a }
}

#[cfg(test)]
mod tests {
    use super::{ExitCode, worst};

    #[test]
    fn worst_follows_the_documented_order() {
        let order = [
            ExitCode::Success,
            ExitCode::NotDone,
            ExitCode::InvalidInput,
            ExitCode::Unavailable,
            ExitCode::Config,
            ExitCode::Internal,
        ];
        for (i, a) in order.iter().enumerate() {
            for (j, b) in order.iter().enumerate() {
                let expected = if i >= j { *a } else { *b };
                assert_eq!(worst(*a, *b), expected, "{a:?} vs {b:?}");
            }
        }
    }
}
