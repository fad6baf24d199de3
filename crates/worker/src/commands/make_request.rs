//! `worker request`: writes a request file for `plan` and `--run-regression` (built by
//! [`super::local_request`]).
//!
//! Exit codes: 0 with the request written (stdout, or `--out`, which then says on stderr what it
//! wrote); 4 when the manifest or a digest
//! is unusable or the result would not be a valid job (nothing is written); 1 when `--out`
//! cannot be written.

use super::local_request::request_command;
use super::now_unix;
use super::{fail, print_json};
use crate::cli::RequestArgs;
use crate::exit::ExitCode;

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
        Ok(()) => {
            cli_support::eprint_human("worker", &written_line(path, &args.source_digest, &request));
            ExitCode::Success
        }
        Err(error) => fail(
            ExitCode::Internal,
            &format_args!("writing {}: {error}", path.display()),
        ),
    }
}

/// What `--out` wrote, and what to do with it: the file, the job, its source, and the `plan`
/// command that shows its container.
fn written_line(path: &std::path::Path, source: &str, request: &serde_json::Value) -> String {
    let job = request.get("job");
    let field = |key: &str| {
        job.and_then(|j| j.get(key)).map_or_else(
            || "?".to_owned(),
            |v| v.as_str().map_or_else(|| v.to_string(), str::to_owned),
        )
    };
    format!(
        "wrote {path}: job {id} for source {source}, valid until unix time {expires}; its \
         container: `worker plan {path}`",
        path = path.display(),
        id = field("job_id"),
        expires = field("verification_expires_at"),
    )
}
