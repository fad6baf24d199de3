//! What `worker reproduce` and `worker preflight` share ([`LocalRunArgs`]): one job, resolved
//! by the command, run through the feed's own path on this host, its report printed or its
//! failure mapped to an exit code. Each command keeps what is its own: how the job and the
//! reference are resolved, and what the report says.

use std::path::PathBuf;

use platform_client::{ClientLimits, PlatformClient};
use serde_json::Value;
use verifier_sdk::{Address, ValidatedJob};
use worker_jobs::feed::{FeedConfig, SandboxJobExecutor};
use worker_store::staging_root::{self, Fallback};

use super::{block_on_interruptible, connect_swept, fail, staging_root_failed};
use crate::cli::LocalRunArgs;
use crate::exit::ExitCode;

/// A refusal or failure with its exit code and message.
pub(crate) type Failure = (ExitCode, String);

/// Runs a command's `work` and hands its report to `print`, which returns the exit code; a
/// failure is printed with its own. The staging root is made sure of before anything is
/// fetched, and given to `work` with the platform client (the feed's own limits: the caps are
/// the feed's, not the command's); SIGINT/SIGTERM interrupt the work as in every mode that
/// runs containers.
pub(crate) fn run<T>(
    run: &LocalRunArgs,
    what: &str,
    work: impl AsyncFnOnce(&PlatformClient, PathBuf) -> Result<T, Failure>,
    print: impl FnOnce(T) -> ExitCode,
) -> ExitCode {
    let root = match staging_root(run) {
        Ok(root) => root,
        Err(code) => return code,
    };
    let work = async move {
        let client = PlatformClient::new(ClientLimits::default())
            .map_err(|e| (ExitCode::Internal, e.to_string()))?;
        work(&client, root).await
    };
    match block_on_interruptible(work, what) {
        Err(code) => code,
        Ok(Ok(Ok(report))) => print(report),
        Ok(Ok(Err((code, error)))) => fail(code, &error),
        Ok(Err(error)) => fail(ExitCode::Internal, &error),
    }
}

/// As `rehearse`: $REGRESSION_SANDBOX_STAGING_ROOT when set, else a private store in the
/// system temp dir, so README's commands run as written.
fn staging_root(run: &LocalRunArgs) -> Result<PathBuf, ExitCode> {
    staging_root::resolve(run.staging_root.as_deref(), Fallback::PrivateTemp)
        .and_then(|r| staging_root::ensure_writable(&r).map(|()| r))
        .map_err(|e| staging_root_failed(&e))
}

/// Job `job_id` as `verifier`'s feed at `api` lists it on --network (`None`: not listed). A
/// failure the platform may recover from is the platform unavailable, any other the input.
pub(crate) async fn fetch_job(
    client: &PlatformClient,
    run: &LocalRunArgs,
    api: &str,
    verifier: Address,
    job_id: &str,
) -> Result<Option<Value>, Failure> {
    client
        .fetch_job(api, run.network, verifier, job_id)
        .await
        .map_err(|e| {
            let code = if e.is_transient() {
                ExitCode::Unavailable
            } else {
                ExitCode::InvalidInput
            };
            (code, format!("fetching job {job_id}: {e}"))
        })
}

/// The feed's configuration for `job` alone. Liveness is not checked: the job may be settled
/// or expired (a reproduction), or an earlier round's standing in for one not yet posted (a
/// preflight).
pub(crate) fn feed_config(
    run: &LocalRunArgs,
    api: Option<&str>,
    job: &ValidatedJob,
    quiet: bool,
) -> FeedConfig {
    let mut config = FeedConfig::new(
        // The runner never reads the feed (the job is already resolved).
        api.unwrap_or_default(),
        job.network(),
        job.eligible_verifiers().to_vec(),
        &run.out,
    );
    config.check_liveness = false;
    config.progress = super::progress_lines(quiet);
    if let Some(base) = &run.archive_base {
        config.archive_base = base.clone();
    }
    if let Some(work) = &run.work_dir {
        config.work_dir = work.clone();
    }
    config
}

/// The executor of the run: --out created, the engine connected under --oci-runtime (stale
/// containers of dead workers swept), images pulled only with --pull.
pub(crate) async fn job_executor(
    run: &LocalRunArgs,
    root: PathBuf,
) -> Result<SandboxJobExecutor, Failure> {
    std::fs::create_dir_all(&run.out).map_err(|e| {
        (
            ExitCode::Config,
            format!("--out {}: {e}", run.out.display()),
        )
    })?;
    let executor = connect_swept(run.oci_runtime.name())
        .await
        .map_err(|error| (ExitCode::Unavailable, error.to_string()))?;
    Ok(SandboxJobExecutor::new(executor, root, run.pull))
}
