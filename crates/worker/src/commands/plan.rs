//! `worker plan REQUEST`: the exact container configuration a request would get, without
//! running anything.

use std::path::Path;

use serde_json::Value;

use super::request::{RequestError, read_request};
use super::{fail, print_json, staging_root_failed};
use crate::exit::ExitCode;
use crate::run::{now_unix, spec_for};
use crate::stage::StageKind;
use crate::staging_root::{self, Fallback};

/// Schema id of `worker plan`'s output.
pub const PLAN_SCHEMA_VERSION: &str = "agent-bounties/worker-plan-v1";

/// Prints the plan for `request` against the staging root (`--staging-root`, else the
/// environment's), under the OCI runtime `oci_runtime`.
pub fn plan(request: &Path, staging_root: Option<&Path>, oci_runtime: &str) -> ExitCode {
    let root = match staging_root::resolve(staging_root, Fallback::Required) {
        Ok(root) => root,
        Err(error) => return staging_root_failed(&error),
    };
    match plan_command(request, &root, oci_runtime) {
        Ok(plan) => print_json(&plan),
        Err(error) => fail(ExitCode::InvalidInput, &error),
    }
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
    Limits(#[from] crate::sandbox::SpecError),
}

/// `worker plan`: the exact container configuration a request would get, without running.
/// The image's own `PATH` is added at run time from the image config; everything else is here.
pub fn plan_command(
    request: &Path,
    staging_root: &Path,
    oci_runtime: &str,
) -> Result<Value, PlanError> {
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
    let isolation = worker_sandbox::plan_under(&spec, oci_runtime)?;
    Ok(serde_json::json!({
        "schema_version": PLAN_SCHEMA_VERSION,
        "job_id": job.job_id(),
        "image": manifest.image(),
        "platform": manifest.platform(),
        "oci_runtime": oci_runtime,
        "timeout_seconds": manifest.timeout_seconds(),
        "max_output_bytes": manifest.max_output_bytes(),
        "source": {"digest": job.source_snapshot_digest(), "path": source, "staged": source.is_dir()},
        "benchmark": {"digest": manifest.benchmark_digest(), "path": benchmark, "staged": benchmark.is_dir()},
        "container": isolation,
        "env_note": "plus PATH from the image's own config",
    }))
}
