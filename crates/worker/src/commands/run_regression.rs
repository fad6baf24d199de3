//! `worker --run-regression REQUEST`: the whole run for one request file, on trees staged
//! under the staging root, printing the protocol outcome.

use std::path::{Path, PathBuf};

use serde_json::Value;
use verifier_sdk::{NoVerdictOutcome, NoVerdictReason, RunOutput};

use super::now_unix;
use super::request::{RequestError, read_request};
use super::{block_on_interruptible, fail, print_json, staging_root_failed};
use crate::exit::ExitCode;
use worker_jobs::run::{RunOptions, SealedEvidence, run_job};
use worker_sandbox::SandboxError;
use worker_store::staging_root::{self, Fallback};

/// Why `--run-regression` could not even produce a no-verdict outcome.
#[derive(Debug, thiserror::Error)]
pub enum RunCommandError {
    /// The request file is unusable.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The evidence record could not be written.
    #[error("writing the evidence record: {0}")]
    Evidence(#[source] std::io::Error),
}

impl RunCommandError {
    fn exit_code(&self) -> ExitCode {
        match self {
            Self::Request(_) => ExitCode::InvalidInput,
            Self::Evidence(_) => ExitCode::Internal,
        }
    }
}

/// Runs the request and prints its outcome; the exit code is the outcome's. With `in_toto`,
/// the in-toto statement of a verdict is written there first.
pub fn run_regression(
    request: &Path,
    pull: bool,
    oci_runtime: &str,
    evidence: Option<&Path>,
    in_toto: Option<&Path>,
) -> ExitCode {
    let root = match staging_root::resolve(None, Fallback::Required) {
        Ok(root) => root,
        Err(error) => return staging_root_failed(&error),
    };
    let result = match block_on_interruptible(
        run_regression_command(request, root, pull, oci_runtime, evidence),
        "the run",
    ) {
        Ok(result) => result,
        Err(code) => return code,
    };
    match result {
        Ok(Ok(done)) => {
            if let Some(path) = in_toto
                && let Err(error) = write_for_run(path, &done)
            {
                return fail(ExitCode::Internal, &error);
            }
            let code = outcome_exit_code(&done.output);
            match print_json(&done.output) {
                ExitCode::Success => code,
                failed => failed,
            }
        }
        Ok(Err(error)) => fail(error.exit_code(), &error),
        Err(error) => fail(ExitCode::Internal, &error),
    }
}

/// The exit code of a run, from its outcome alone: a verdict (either one) is success.
fn outcome_exit_code(output: &RunOutput) -> ExitCode {
    match output {
        RunOutput::Verdict(_) => ExitCode::Success,
        RunOutput::NoVerdict(no) => match no.no_verdict.reason {
            NoVerdictReason::InvalidJob | NoVerdictReason::Expired => ExitCode::InvalidInput,
            NoVerdictReason::RuntimeUnavailable => ExitCode::Unavailable,
            _ => ExitCode::NotDone,
        },
    }
}

/// What `--run-regression` prints, and where the evidence went.
#[derive(Debug, Clone)]
pub struct RunCommandOutput {
    /// The protocol output.
    pub output: RunOutput,
    /// The content-addressed evidence record, when the run got far enough to have one.
    pub evidence: Option<WrittenEvidence>,
    /// The job's id, once the job validated.
    pub job_id: Option<String>,
}

/// A run's evidence record as written to the store: where, and the record it holds.
#[derive(Debug, Clone)]
pub struct WrittenEvidence {
    /// Its content-addressed file.
    pub path: PathBuf,
    /// The record, with the bytes and digest that file holds.
    pub sealed: SealedEvidence,
}

/// `--run-regression --in-toto FILE`: writes the statement of a verdict. A run without a
/// verdict has nothing to attest, so nothing is written (and a statement left at `path` by an
/// earlier run is not touched: it names its own evidence).
fn write_for_run(path: &Path, run: &RunCommandOutput) -> Result<(), StatementError> {
    let verifier_sdk::RunOutput::Verdict(outcome) = &run.output else {
        tracing::warn!("no verdict, so no in-toto statement was written");
        return Ok(());
    };
    let (Some(job_id), Some(evidence)) = (&run.job_id, &run.evidence) else {
        return Err(StatementError::Incomplete);
    };
    let address = worker_jobs::intoto::EvidenceAddress::of_file(&evidence.path)
        .ok_or_else(|| StatementError::NotContentAddressed(evidence.path.clone()))?;
    // The per-test lists come from the record in memory, not from the file just written.
    let tests = evidence.sealed.record().tests.as_ref();
    let statement = worker_jobs::intoto::test_result_statement(job_id, outcome, &address, tests);
    worker_jobs::intoto::write_statement(path, &statement)
        .map(|_| ())
        .map_err(|source| StatementError::Write {
            path: path.to_owned(),
            source,
        })
}

/// Why the in-toto statement of a verdict could not be written.
#[derive(Debug, thiserror::Error)]
enum StatementError {
    /// The run reported a verdict without the job id or evidence record it must carry.
    #[error("a verdict without its job id or evidence record")]
    Incomplete,
    /// The evidence record is not at a content address.
    #[error("evidence path {0:?} is not content-addressed")]
    NotContentAddressed(PathBuf),
    /// Writing the statement failed.
    #[error("writing the in-toto statement {path:?}: {source}")]
    Write {
        /// The statement file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

fn no_verdict(reason: NoVerdictReason, detail: &str) -> RunCommandOutput {
    RunCommandOutput {
        output: RunOutput::NoVerdict(NoVerdictOutcome::new(reason, detail)),
        evidence: None,
        job_id: None,
    }
}

/// The reason a job that does not validate gets.
pub fn job_error_reason(error: &verifier_sdk::JobError) -> NoVerdictReason {
    match error {
        verifier_sdk::JobError::Expired { .. } => NoVerdictReason::Expired,
        _ => NoVerdictReason::InvalidJob,
    }
}

/// `worker --run-regression`: the whole run for one request file. Every way a run can end is
/// an outcome (verdict or reasoned no-verdict); `Err` only for an unusable request or a
/// failure to record evidence.
pub async fn run_regression_command(
    request: &Path,
    staging_root: PathBuf,
    pull: bool,
    oci_runtime: &str,
    evidence_copy: Option<&Path>,
) -> Result<RunCommandOutput, RunCommandError> {
    let request = read_request(request, &["job"])?;
    let raw_job = request.get("job").unwrap_or(&Value::Null);
    let job = match verifier_sdk::validate_job(raw_job, now_unix()) {
        Ok(job) => job,
        Err(error) => return Ok(no_verdict(job_error_reason(&error), &error.to_string())),
    };
    let executor = match crate::engine::connect_under(oci_runtime).await {
        Ok(executor) => executor,
        Err(error) => {
            return Ok(no_verdict(
                NoVerdictReason::RuntimeUnavailable,
                &error.to_string(),
            ));
        }
    };
    match executor.cleanup_stale().await {
        Ok(removed) if !removed.is_empty() => {
            tracing::warn!(count = removed.len(), "removed stale sandbox containers");
        }
        Ok(_) => {}
        Err(error) => tracing::warn!(%error, "could not clean up stale sandbox containers"),
    }
    let options = RunOptions {
        staging_root: staging_root.clone(),
        pull,
    };
    let run = match run_job(&executor, &job, &options).await {
        Ok(Ok(run)) => run,
        Ok(Err(no)) => {
            return Ok(RunCommandOutput {
                output: RunOutput::NoVerdict(no),
                evidence: None,
                job_id: Some(job.job_id().to_owned()),
            });
        }
        Err(SandboxError::RuntimeUnavailable(error)) => {
            return Ok(no_verdict(
                NoVerdictReason::RuntimeUnavailable,
                &error.to_string(),
            ));
        }
        Err(error) => {
            return Ok(no_verdict(
                NoVerdictReason::InternalError,
                &error.to_string(),
            ));
        }
    };
    let sealed = SealedEvidence::seal(run.evidence)
        .map_err(|e| RunCommandError::Evidence(std::io::Error::other(e)))?;
    let path = sealed
        .write(&staging_root)
        .map_err(RunCommandError::Evidence)?;
    if let Some(copy) = evidence_copy {
        // The store file's bytes, from memory: the store file may already be replaced or
        // collected, and this process has no reason to trust what is at its path now.
        artifact_fs::write_atomic(copy, sealed.bytes()).map_err(RunCommandError::Evidence)?;
    }
    Ok(RunCommandOutput {
        output: run.output,
        evidence: Some(WrittenEvidence { path, sealed }),
        job_id: Some(job.job_id().to_owned()),
    })
}
