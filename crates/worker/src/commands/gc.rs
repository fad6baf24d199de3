//! `worker gc`: removes old, unused staged trees and evidence records from a staging store
//! (the collection itself is [`crate::gc`]).
//!
//! Exit codes: 0 when everything old and unused was removed (or, with `--dry-run`, listed);
//! 1 when some entry could not be removed; 5 without an engine to ask which trees containers
//! mount (nothing is removed then); 78 for an unusable staging root; 2 for a bad `--older-than`.

use super::{block_on, fail, print_json, print_text};
use crate::exit::ExitCode;
use crate::gc::{GcArgs, GcCommandError, gc_command};

/// Collects the store and prints what was freed.
pub fn gc(args: &GcArgs) -> ExitCode {
    let report = match block_on(gc_command(args)) {
        Ok(Ok(report)) => report,
        Ok(Err(error @ GcCommandError::Engine(_))) => {
            return fail(ExitCode::RuntimeUnavailable, &error);
        }
        Ok(Err(error)) => return fail(ExitCode::Config, &error),
        Err(error) => return fail(ExitCode::Internal, &error),
    };
    let written = if args.json {
        print_json(&report)
    } else {
        print_text(&report.human())
    };
    match written {
        ExitCode::Success if !report.failed.is_empty() => ExitCode::Internal,
        other => other,
    }
}
