//! `worker --validate-regression-candidate REQUEST`: the signer's re-check of a candidate,
//! without any chain or key.

use std::io::Write as _;
use std::path::Path;

use serde_json::Value;

use super::now_unix;
use super::request::{RequestError, read_request};
use super::{fail, print_json};
use crate::exit::ExitCode;

/// What a valid candidate prints without `--json`: the reference worker's answer, which the
/// reference pipeline (`scripts/regression_verifier_pipeline.py`, `validate_candidate`)
/// compares with its stripped stdout, so this binary is a drop-in there.
pub const VALID_PLAIN: &str = "ok";

/// Re-checks the candidate. Without `json`, prints [`VALID_PLAIN`] when it holds and nothing on
/// stdout when it is refused (the reason goes to stderr, exit 4), as the reference worker does.
/// With `json`, prints the check; a refusal is printed as `{"valid": false, "error": …}` and
/// exits 4.
pub fn validate_candidate(request: &Path, json: bool) -> ExitCode {
    match validate_candidate_command(request) {
        Ok(check) if json => print_json(&check),
        Ok(_) => match writeln!(std::io::stdout().lock(), "{VALID_PLAIN}") {
            Ok(()) => ExitCode::Success,
            Err(error) => {
                cli_support::end_if_stdout_gone(&error);
                fail(
                    ExitCode::Internal,
                    &format_args!("writing the result: {error}"),
                )
            }
        },
        Err(error) if !json => fail(ExitCode::InvalidInput, &error),
        Err(error) => {
            let refusal = serde_json::json!({
                "schema_version": CANDIDATE_CHECK_SCHEMA_VERSION,
                "valid": false,
                "error": error.to_string(),
            });
            // The refusal object is this mode's one JSON value on stdout; `fail` would add the
            // generic error object under --json, so only the stderr line is written here.
            cli_support::eprint_error("worker", &format!("worker: error: {error}"));
            let _ = print_json(&refusal);
            ExitCode::InvalidInput
        }
    }
}

/// Schema id of `--validate-regression-candidate`'s output.
pub const CANDIDATE_CHECK_SCHEMA_VERSION: &str = "agent-bounties/worker-candidate-check-v1";

/// The result of `--validate-regression-candidate`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CandidateCheck {
    /// [`CANDIDATE_CHECK_SCHEMA_VERSION`].
    pub schema_version: &'static str,
    /// Always true here; a refusal is an error.
    pub valid: bool,
    /// `passed` or `failed`.
    pub verdict: verifier_sdk::Verdict,
    /// The re-derived response hash.
    pub response_hash: verifier_sdk::Bytes32,
    /// Whether an evidence record was supplied and checked.
    pub evidence_checked: bool,
}

/// Why `--validate-regression-candidate` refused.
#[derive(Debug, thiserror::Error)]
pub enum ValidateCommandError {
    /// The request file is unusable.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The candidate does not hold up.
    #[error(transparent)]
    Refused(#[from] verifier_sdk::RevalidationError),
}

/// `worker --validate-regression-candidate`: the signer's re-check without chain or key.
pub fn validate_candidate_command(request: &Path) -> Result<CandidateCheck, ValidateCommandError> {
    let with_evidence = read_request(request, &["job", "current_job", "outcome", "evidence"]);
    let (map, evidence_checked) = match with_evidence {
        Ok(map) => (map, true),
        Err(RequestError::Shape { .. }) => (
            read_request(request, &["job", "current_job", "outcome"])?,
            false,
        ),
        Err(other) => return Err(other.into()),
    };
    let get = |k: &str| map.get(k).unwrap_or(&Value::Null);
    let now = now_unix();
    let checked = if evidence_checked {
        verifier_sdk::revalidate_candidate(
            get("job"),
            get("current_job"),
            get("outcome"),
            Some(get("evidence")),
            now,
        )?
    } else {
        verifier_sdk::revalidate_outcome(get("job"), get("current_job"), get("outcome"), now)?
    };
    Ok(CandidateCheck {
        schema_version: CANDIDATE_CHECK_SCHEMA_VERSION,
        valid: true,
        verdict: checked.outcome.verdict(),
        response_hash: checked.outcome.response_hash(),
        evidence_checked,
    })
}
