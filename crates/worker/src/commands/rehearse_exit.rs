//! The exit code of an error that left a rehearsal, or a batch of them, without a report:
//! shared by `worker rehearse` and `worker rehearse --batch`.

use crate::exit::ExitCode;
use worker_rehearse::RehearseError;
use worker_sandbox::SandboxError;

/// Input at fault 4, engine unreachable 5, staging root or log directory 78, else 1.
pub(super) fn rehearse_error_exit_code(error: &RehearseError) -> ExitCode {
    match error {
        e if e.is_input_error() => ExitCode::InvalidInput,
        RehearseError::Sandbox(SandboxError::RuntimeUnavailable(_)) => ExitCode::Unavailable,
        RehearseError::StagingRoot { .. } | RehearseError::LogDir { .. } => ExitCode::Config,
        RehearseError::Stage { source, .. } => super::stage::stage_exit_code(source),
        _ => ExitCode::Internal,
    }
}
