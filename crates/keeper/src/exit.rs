//! The keeper's exit codes, defined once. They are part of the CLI contract: never renumber.
//!
//! | code | name            | meaning |
//! |------|-----------------|---------|
//! | 0    | `SUCCESS`       | every candidate ended `paid`, `rejected` or `done` |
//! | 1    | `INTERNAL`      | a bug or an unexpected local failure (e.g. the state dir cannot be written) |
//! | 2    | `USAGE`         | the command line does not parse (clap prints the usage) |
//! | 3    | `NOT_SETTLED`   | some candidate was refused, reverted, or is sent but not yet confirmed; rerun later |
//! | 4    | `INVALID_INPUT` | a candidate or the candidates directory is malformed |
//! | 5    | `UNAVAILABLE`   | the RPC node or the job API did not answer; a retry may succeed |
//! | 78   | `CONFIG`        | configuration or credential problem a restart will not fix (key missing, key file too open, bad URL) |
//!
//! When jobs end differently, the run exits with the most severe code in the order
//! 1 > 78 > 5 > 4 > 3 > 0, so a transient outage is never hidden behind a refusal.

/// Every candidate ended `paid`, `rejected` or `done`.
pub const SUCCESS: u8 = 0;
/// A bug or an unexpected local failure.
pub const INTERNAL: u8 = 1;
/// The command line does not parse.
pub const USAGE: u8 = 2;
/// Some candidate was refused, reverted or is still pending confirmation.
pub const NOT_SETTLED: u8 = 3;
/// A candidate or the candidates directory is malformed.
pub const INVALID_INPUT: u8 = 4;
/// The RPC node or the job API is unavailable.
pub const UNAVAILABLE: u8 = 5;
/// Configuration or credential problem (EX_CONFIG).
pub const CONFIG: u8 = 78;

/// Severity rank used to combine per-job codes into the run's code (higher wins).
pub const fn severity(code: u8) -> u8 {
    match code {
        SUCCESS => 0,
        NOT_SETTLED => 1,
        INVALID_INPUT => 2,
        UNAVAILABLE => 3,
        CONFIG => 4,
        _ => 5,
    }
}

/// The most severe of two exit codes.
pub const fn worst(a: u8, b: u8) -> u8 {
    if severity(b) > severity(a) { b } else { a }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable() {
        assert_eq!(
            [
                SUCCESS,
                INTERNAL,
                USAGE,
                NOT_SETTLED,
                INVALID_INPUT,
                UNAVAILABLE,
                CONFIG
            ],
            [0, 1, 2, 3, 4, 5, 78]
        );
    }

    #[test]
    fn worst_follows_the_documented_order() {
        let order = [
            SUCCESS,
            NOT_SETTLED,
            INVALID_INPUT,
            UNAVAILABLE,
            CONFIG,
            INTERNAL,
        ];
        for (i, a) in order.iter().enumerate() {
            for (j, b) in order.iter().enumerate() {
                let expected = if i >= j { *a } else { *b };
                assert_eq!(worst(*a, *b), expected, "{a} vs {b}");
            }
        }
    }
}
