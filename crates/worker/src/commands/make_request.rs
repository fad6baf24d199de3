//! `worker request`: writes a request file for `plan` and `--run-regression` (built by
//! [`crate::local_request`]).
//!
//! Exit codes: 0 with the request written (stdout, or `--out`); 4 when the manifest or a digest
//! is unusable or the result would not be a valid job (nothing is written); 1 when `--out`
//! cannot be written.

use super::{fail, print_json};
use crate::cli::RequestArgs;
use crate::exit::ExitCode;
use crate::local_request::request_command;
use crate::run::now_unix;

/// Builds the request and writes it.
pub fn request(args: &RequestArgs) -> ExitCode {
    let request = match request_command(args, now_unix()) {
        Ok(request) => request,
        Err(error) => return fail(ExitCode::InvalidInput, &error),
    };
    let Some(path) = &args.out else {
        return print_json(&request);
    };
    let written = serde_json::to_vec_pretty(&request)
        .map_err(std::io::Error::other)
        .and_then(|bytes| artifact_fs::write_atomic(path, &bytes));
    match written {
        Ok(()) => ExitCode::Success,
        Err(error) => fail(
            ExitCode::Internal,
            &format_args!("writing {}: {error}", path.display()),
        ),
    }
}
