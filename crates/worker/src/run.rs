//! The run step: a validated job and its staged trees in, an outcome and its evidence out.
//!
//! This is where the protocol (`verifier-sdk`) meets the sandbox: the job decides the spec,
//! the staged store supplies verified trees (re-digested right before create and after the
//! run), the executor decides completed-or-not, and only then does the sdk turn a completed
//! run into a receipt and response hash. Rehearsal uses [`execute_manifest`] without a job.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use sha2::{Digest, Sha256};
use verifier_sdk::{
    ExecutionFacts, NoVerdictOutcome, NoVerdictReason, Outcome, RunOutput, RunnerManifest,
    Sha256Digest, TreeLimits, ValidatedJob, canonical_json,
};

use crate::sandbox::{
    Decision, DockerExecutor, EvidenceRecord, InputCheck, InputPhase, RunHooks, SandboxError,
    SandboxSpec,
};
use crate::stage::{StageKind, verify_staged};

/// Largest request file we read; a job is a few KiB, so this only stops abuse.
pub const MAX_REQUEST_BYTES: u64 = 4 << 20;
/// Environment variable naming the staging root for `--run-regression`.
pub const STAGING_ROOT_ENV: &str = "REGRESSION_SANDBOX_STAGING_ROOT";

/// Why a request file could not be turned into a job value.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The file could not be read.
    #[error("reading request {path:?}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than [`MAX_REQUEST_BYTES`].
    #[error("request is larger than {MAX_REQUEST_BYTES} bytes")]
    TooLarge,
    /// The file is not JSON.
    #[error("request is not valid JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// The JSON is not an object with exactly the expected keys.
    #[error("request must be an object with exactly the keys {expected:?}; got {got:?}")]
    Shape {
        /// The keys we require.
        expected: &'static [&'static str],
        /// The keys present (truncated).
        got: Vec<String>,
    },
}

/// Reads a request file: bounded size, JSON, an object with exactly the keys `expected`.
/// Unknown keys are refused so a request can never smuggle in a host path or a policy override.
pub fn read_request(
    path: &Path,
    expected: &'static [&'static str],
) -> Result<serde_json::Map<String, Value>, RequestError> {
    let io = |source| RequestError::Io {
        path: path.to_owned(),
        source,
    };
    let bytes = artifact_fs::read_named(path, MAX_REQUEST_BYTES).map_err(|e| match e {
        artifact_fs::ReadError::TooLarge { .. } => RequestError::TooLarge,
        e => io(e.into_io()),
    })?;
    let value: Value = serde_json::from_slice(&bytes).map_err(RequestError::Json)?;
    let Value::Object(map) = value else {
        return Err(RequestError::Shape {
            expected,
            got: vec![],
        });
    };
    let mut got: Vec<String> = map
        .keys()
        .take(16)
        .map(|k| k.chars().take(64).collect())
        .collect();
    got.sort();
    let mut want: Vec<String> = expected.iter().map(|k| (*k).to_owned()).collect();
    want.sort();
    if got != want || map.len() != expected.len() {
        return Err(RequestError::Shape { expected, got });
    }
    Ok(map)
}

/// Seconds since the unix epoch, the clock every validity check uses.
pub fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Options of one run that are the operator's, not the job's.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The staging root holding `sources/` and `benchmarks/`.
    pub staging_root: PathBuf,
    /// Pull the image by its digest when it is not present.
    pub pull: bool,
}

/// What one execution produced, before any job is attached.
#[derive(Debug, Clone)]
pub struct Execution {
    /// Completed (with exit code) or no verdict (with reason).
    pub decision: Decision,
    /// The evidence record of the run.
    pub evidence: EvidenceRecord,
}

/// A finished job run: the protocol output and its evidence.
#[derive(Debug, Clone)]
pub struct JobRun {
    /// Exactly what `--run-regression` prints.
    pub output: RunOutput,
    /// The evidence record, with `response_hash` filled in for a verdict.
    pub evidence: EvidenceRecord,
}

/// Re-digests both staged trees; used right before create and after the run.
struct StagedInputs {
    root: PathBuf,
    source: Sha256Digest,
    source_limits: TreeLimits,
    benchmark: Sha256Digest,
    benchmark_limits: TreeLimits,
}

impl StagedInputs {
    fn check(&self) -> Result<(PathBuf, PathBuf), String> {
        let source = verify_staged(
            &self.root,
            StageKind::Source,
            &self.source,
            self.source_limits,
        )
        .map_err(|e| format!("source: {e}"))?;
        let benchmark = verify_staged(
            &self.root,
            StageKind::Benchmark,
            &self.benchmark,
            self.benchmark_limits,
        )
        .map_err(|e| format!("benchmark: {e}"))?;
        Ok((source, benchmark))
    }
}

impl StagedInputs {
    /// The staged paths, present as real directories, without re-digesting them: the executor
    /// digests both trees through the hooks immediately before create and after the run, so a
    /// full walk here would hash every byte a third time for no added guarantee.
    fn locate(&self) -> Result<(PathBuf, PathBuf), String> {
        let source = crate::stage::target_path(&self.root, StageKind::Source, &self.source);
        let benchmark =
            crate::stage::target_path(&self.root, StageKind::Benchmark, &self.benchmark);
        for (what, path) in [("source", &source), ("benchmark", &benchmark)] {
            match std::fs::symlink_metadata(path) {
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => return Err(format!("{what}: {} is not a directory", path.display())),
                Err(e) => return Err(format!("{what}: {} is not staged: {e}", path.display())),
            }
        }
        Ok((source, benchmark))
    }
}

impl RunHooks for StagedInputs {
    fn check_inputs(&self, _phase: InputPhase) -> InputCheck {
        match self.check() {
            Ok(_) => InputCheck::Matched,
            Err(detail) => InputCheck::Mismatch { detail },
        }
    }
}

fn run_id(seed: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut h = Sha256::new();
    h.update(seed.as_bytes());
    h.update(std::process::id().to_be_bytes());
    h.update(nanos.to_be_bytes());
    hex::encode(h.finalize()).chars().take(24).collect()
}

/// The container spec a manifest asks for, on the given staged trees. Pure: `worker plan`
/// prints it, and the executor runs it.
pub fn spec_for(
    manifest: &RunnerManifest,
    source_dir: PathBuf,
    benchmark_dir: PathBuf,
    run_id: String,
    pull: bool,
) -> SandboxSpec {
    SandboxSpec {
        run_id,
        image: manifest.image().to_owned(),
        platform: manifest.platform().to_owned(),
        argv: manifest.command().to_vec(),
        source_dir,
        benchmark_dir,
        timeout: Duration::from_secs(manifest.timeout_seconds()),
        cpu_millis: manifest.cpu_millis(),
        memory_bytes: manifest.memory_bytes(),
        pids_limit: manifest.pids_limit(),
        max_output_bytes: manifest.max_output_bytes(),
        tmpfs_bytes: manifest.tmpfs_bytes(),
        test_seed: manifest.test_seed(),
        pull,
    }
}

/// Runs `manifest` on the staged source `source` and the manifest's benchmark. Missing or
/// changed inputs are a no-verdict `input_mismatch`: a missing tree is decided without the
/// engine, a changed one by the digest check right before create (no container is created).
pub async fn execute_manifest(
    executor: &DockerExecutor,
    manifest: &RunnerManifest,
    source: Sha256Digest,
    options: &RunOptions,
    label: &str,
) -> Result<Result<Execution, NoVerdictOutcome>, SandboxError> {
    let (source_limits, benchmark_limits) = (manifest.source_limits(), manifest.benchmark_limits());
    let inputs = StagedInputs {
        root: options.staging_root.clone(),
        source,
        source_limits,
        benchmark: manifest.benchmark_digest(),
        benchmark_limits,
    };
    // Fail fast on a missing tree; the digests are checked by the executor's hooks right
    // before create and after the run.
    let (source_dir, benchmark_dir) = match inputs.locate() {
        Ok(paths) => paths,
        Err(detail) => {
            return Ok(Err(NoVerdictOutcome::new(
                NoVerdictReason::InputMismatch,
                &detail,
            )));
        }
    };
    let spec = spec_for(
        manifest,
        source_dir,
        benchmark_dir,
        run_id(label),
        options.pull,
    );
    let report = executor.run(&spec, &inputs).await?;
    Ok(Ok(Execution {
        decision: report.decision,
        evidence: report.evidence,
    }))
}

/// Turns an execution into the protocol output for `job`, and records the response hash in
/// the evidence.
pub fn outcome_for_job(job: &ValidatedJob, mut execution: Execution) -> JobRun {
    let output = match &execution.decision {
        Decision::Completed { exit_code } => {
            let outcome = Outcome::for_job(job, execution_facts(*exit_code, &execution.evidence));
            execution.evidence.response_hash = Some(outcome.response_hash.to_string());
            RunOutput::Verdict(outcome)
        }
        Decision::NoVerdict { reason, detail } => {
            RunOutput::NoVerdict(NoVerdictOutcome::new(*reason, detail))
        }
    };
    JobRun {
        output,
        evidence: execution.evidence,
    }
}

fn execution_facts(exit_code: i64, evidence: &EvidenceRecord) -> ExecutionFacts {
    ExecutionFacts {
        exit_code,
        stdout_sha256: evidence.stdout.sha256,
        stderr_sha256: evidence.stderr.sha256,
        stdout_bytes: evidence.stdout.bytes,
        stderr_bytes: evidence.stderr.bytes,
    }
}

/// Runs a validated job end to end: staged inputs, sandbox, outcome.
pub async fn run_job(
    executor: &DockerExecutor,
    job: &ValidatedJob,
    options: &RunOptions,
) -> Result<Result<JobRun, NoVerdictOutcome>, SandboxError> {
    let execution = execute_manifest(
        executor,
        job.manifest(),
        job.source_snapshot_digest(),
        options,
        job.job_id(),
    )
    .await?;
    Ok(execution.map(|e| outcome_for_job(job, e)))
}

/// Writes `evidence` content-addressed under `<root>/evidence/sha256/<hex>.json` (the hex is
/// SHA-256 of its canonical JSON) and returns the path. Written to a temporary file and
/// renamed, so a reader never sees half a record.
pub fn write_evidence(root: &Path, evidence: &EvidenceRecord) -> std::io::Result<PathBuf> {
    let value = serde_json::to_value(evidence).map_err(std::io::Error::other)?;
    let bytes = canonical_json(&value).into_bytes();
    let hex = hex::encode(Sha256::digest(&bytes));
    let dir = root.join("evidence").join("sha256");
    std::fs::create_dir_all(&dir)?;
    let target = dir.join(format!("{hex}.json"));
    artifact_fs::write_atomic(&target, &bytes)?;
    Ok(target)
}

/// Why `--run-regression` could not even produce a no-verdict outcome.
#[derive(Debug, thiserror::Error)]
pub enum RunCommandError {
    /// The request file is unusable.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The staging root is not configured.
    #[error("{STAGING_ROOT_ENV} must name the staging root (an absolute path)")]
    StagingRoot,
    /// The evidence record could not be written.
    #[error("writing the evidence record: {0}")]
    Evidence(#[source] std::io::Error),
}

/// What `--run-regression` prints, and where the evidence went.
#[derive(Debug, Clone)]
pub struct RunCommandOutput {
    /// The protocol output.
    pub output: RunOutput,
    /// The content-addressed evidence record, when the run got far enough to have one.
    pub evidence_path: Option<PathBuf>,
}

/// The staging root from [`STAGING_ROOT_ENV`]; it must be absolute so a relative path can
/// never resolve somewhere the operator did not mean.
pub fn staging_root_from_env() -> Result<PathBuf, RunCommandError> {
    let root = std::env::var_os(STAGING_ROOT_ENV).map(PathBuf::from);
    match root {
        Some(root) if root.is_absolute() => Ok(root),
        _ => Err(RunCommandError::StagingRoot),
    }
}

fn no_verdict(reason: NoVerdictReason, detail: &str) -> RunCommandOutput {
    RunCommandOutput {
        output: RunOutput::NoVerdict(NoVerdictOutcome::new(reason, detail)),
        evidence_path: None,
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
    evidence_copy: Option<&Path>,
) -> Result<RunCommandOutput, RunCommandError> {
    let request = read_request(request, &["job"])?;
    let raw_job = request.get("job").unwrap_or(&Value::Null);
    let job = match verifier_sdk::validate_job(raw_job, now_unix()) {
        Ok(job) => job,
        Err(error) => return Ok(no_verdict(job_error_reason(&error), &error.to_string())),
    };
    let executor = match DockerExecutor::connect().await {
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
                evidence_path: None,
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
    let path = write_evidence(&staging_root, &run.evidence).map_err(RunCommandError::Evidence)?;
    if let Some(copy) = evidence_copy {
        let bytes = std::fs::read(&path).map_err(RunCommandError::Evidence)?;
        artifact_fs::write_atomic(copy, &bytes).map_err(RunCommandError::Evidence)?;
    }
    Ok(RunCommandOutput {
        output: run.output,
        evidence_path: Some(path),
    })
}

/// The result of `--validate-regression-candidate`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CandidateCheck {
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
        valid: true,
        verdict: checked.outcome.verdict(),
        response_hash: checked.outcome.response_hash(),
        evidence_checked,
    })
}

/// Why `worker plan` could not plan.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The request file is unusable.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The job does not validate.
    #[error("job is invalid: {0}")]
    Job(#[from] verifier_sdk::JobError),
    /// The manifest's numbers do not fit the engine.
    #[error("manifest does not fit the engine: {0}")]
    Limits(String),
}

/// `worker plan`: the exact container configuration a request would get, without running.
/// The image's own `PATH` is added at run time from the image config; everything else is here.
pub fn plan_command(request: &Path, staging_root: &Path) -> Result<Value, PlanError> {
    let request = read_request(request, &["job"])?;
    let job = verifier_sdk::validate_job(request.get("job").unwrap_or(&Value::Null), now_unix())?;
    let manifest = job.manifest();
    let source = crate::stage::target_path(
        staging_root,
        StageKind::Source,
        &job.source_snapshot_digest(),
    );
    let benchmark = crate::stage::target_path(
        staging_root,
        StageKind::Benchmark,
        &manifest.benchmark_digest(),
    );
    let spec = spec_for(
        manifest,
        source.clone(),
        benchmark.clone(),
        "plan".into(),
        false,
    );
    let isolation = crate::sandbox::plan(&spec).map_err(PlanError::Limits)?;
    Ok(serde_json::json!({
        "job_id": job.job_id(),
        "image": manifest.image(),
        "platform": manifest.platform(),
        "timeout_seconds": manifest.timeout_seconds(),
        "max_output_bytes": manifest.max_output_bytes(),
        "source": {"digest": job.source_snapshot_digest(), "path": source, "staged": source.is_dir()},
        "benchmark": {"digest": manifest.benchmark_digest(), "path": benchmark, "staged": benchmark.is_dir()},
        "container": isolation,
        "env_note": "plus PATH from the image's own config",
    }))
}
