//! `worker plan REQUEST`: the exact container configuration a request would get, without
//! running anything. By default in rehearse's words (its `sandbox` block, each mount once);
//! `--json` prints `agent-bounties/worker-plan-v2` (v1 listed the mounts twice: `mounts` and
//! the identical `mount_points`).
//!
//! The staging root defaults as rehearse's does (`--staging-root`, else
//! `$REGRESSION_SANDBOX_STAGING_ROOT`, else rehearse's private store under the system temp
//! dir), so a plan right after a rehearsal finds the trees the rehearsal staged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::now_unix;
use super::request::{RequestError, read_request};
use super::{fail, print_json, print_text, staging_root_failed};
use crate::exit::ExitCode;
use worker_jobs::run::spec_for;
use worker_rehearse::sandbox_block::{row, rows};
use worker_sandbox::profile::Isolation;
use worker_store::stage::StageKind;
use worker_store::staging_root::{self, Fallback, STAGING_ROOT_ENV};

/// Schema id of `worker plan`'s output.
pub const PLAN_SCHEMA_VERSION: &str = "agent-bounties/worker-plan-v2";

/// Prints the plan for `request` against the staging root (`--staging-root`, else the
/// environment's, else rehearse's default store), under the OCI runtime `oci_runtime`, as text
/// or with `json` as JSON.
pub fn plan(
    request: &Path,
    staging_root: Option<&Path>,
    oci_runtime: &str,
    json: bool,
) -> ExitCode {
    let root = match staging_root::resolve(staging_root, Fallback::PrivateTemp) {
        Ok(root) => root,
        Err(error) => return staging_root_failed(&error),
    };
    let named_by = match staging_root {
        Some(_) => RootFrom::Flag,
        None if std::env::var_os(STAGING_ROOT_ENV).is_some() => RootFrom::Env,
        None => RootFrom::Default,
    };
    match plan_of(request, &root, oci_runtime) {
        Ok(plan) if json => print_json(&plan.to_json()),
        Ok(plan) => print_text(&plan.human(named_by)),
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
    Limits(#[from] worker_sandbox::SpecError),
}

/// Which of the three named the staging root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RootFrom {
    Flag,
    Env,
    Default,
}

/// One staged tree of the plan.
#[derive(Debug, Clone)]
struct Tree {
    digest: String,
    path: PathBuf,
    staged: bool,
}

impl Tree {
    fn new(root: &Path, kind: StageKind, digest: &verifier_sdk::Sha256Digest) -> Self {
        let path = worker_store::stage::target_path(root, kind, digest);
        Self {
            digest: digest.to_string(),
            staged: path.is_dir(),
            path,
        }
    }

    fn to_json(&self) -> Value {
        serde_json::json!({"digest": self.digest, "path": self.path, "staged": self.staged})
    }
}

/// The container profile as a plan shows it: every field of the requested profile except
/// `mount_points`. In the profile that field is what `inspect` reports the runtime mounted, and
/// before anything runs it is the requested `mounts` again, so a plan listed each mount twice
/// (`worker-plan-v1`). Borrowed, field for field, so nothing of the profile is re-derived.
#[derive(Debug, Serialize)]
struct PlannedContainer<'a> {
    entrypoint: &'a [String],
    cmd: &'a [String],
    working_dir: &'a str,
    user: &'a str,
    hostname: &'a str,
    env: &'a [String],
    init: bool,
    privileged: bool,
    network_mode: &'a str,
    ipc_mode: &'a str,
    pid_mode: &'a str,
    userns_mode: &'a str,
    shm_size: i64,
    readonly_rootfs: bool,
    cap_add: &'a [String],
    cap_drop: &'a [String],
    security_opt: &'a [String],
    nano_cpus: i64,
    memory: i64,
    memory_swap: i64,
    pids_limit: i64,
    ulimits: &'a [worker_sandbox::profile::Ulimit],
    tmpfs: &'a BTreeMap<String, String>,
    mounts: &'a [worker_sandbox::profile::BindMount],
    binds: &'a [String],
    devices: usize,
    log_driver: &'a str,
    runtime: &'a str,
}

impl<'a> From<&'a Isolation> for PlannedContainer<'a> {
    fn from(p: &'a Isolation) -> Self {
        // Destructured so a field added to the profile fails to compile here until the plan
        // decides whether to show it.
        let Isolation {
            entrypoint,
            cmd,
            working_dir,
            user,
            hostname,
            env,
            init,
            privileged,
            network_mode,
            ipc_mode,
            pid_mode,
            userns_mode,
            shm_size,
            readonly_rootfs,
            cap_add,
            cap_drop,
            security_opt,
            nano_cpus,
            memory,
            memory_swap,
            pids_limit,
            ulimits,
            tmpfs,
            mounts,
            mount_points: _,
            binds,
            devices,
            log_driver,
            runtime,
        } = p;
        Self {
            entrypoint,
            cmd,
            working_dir,
            user,
            hostname,
            env,
            init: *init,
            privileged: *privileged,
            network_mode,
            ipc_mode,
            pid_mode,
            userns_mode,
            shm_size: *shm_size,
            readonly_rootfs: *readonly_rootfs,
            cap_add,
            cap_drop,
            security_opt,
            nano_cpus: *nano_cpus,
            memory: *memory,
            memory_swap: *memory_swap,
            pids_limit: *pids_limit,
            ulimits,
            tmpfs,
            mounts,
            binds,
            devices: *devices,
            log_driver,
            runtime,
        }
    }
}

/// What a request would run: the job, its trees in the store, the container.
#[derive(Debug, Clone)]
pub struct Plan {
    job_id: String,
    root: PathBuf,
    manifest: Value,
    oci_runtime: String,
    source: Tree,
    benchmark: Tree,
    isolation: Isolation,
}

/// Plans `request` against `staging_root` (nothing is run or staged). The image's own `PATH`
/// is added at run time from the image config; everything else is here.
fn plan_of(request: &Path, staging_root: &Path, oci_runtime: &str) -> Result<Plan, PlanError> {
    let request = read_request(request, &["job"])?;
    let job = verifier_sdk::validate_job(request.get("job").unwrap_or(&Value::Null), now_unix())?;
    let manifest = job.manifest();
    let source = Tree::new(
        staging_root,
        StageKind::Source,
        &job.source_snapshot_digest(),
    );
    let benchmark = Tree::new(
        staging_root,
        StageKind::Benchmark,
        &manifest.benchmark_digest(),
    );
    let spec = spec_for(
        manifest,
        source.path.clone(),
        benchmark.path.clone(),
        "plan".into(),
        false,
    );
    let isolation = worker_sandbox::plan_under(&spec, oci_runtime)?;
    Ok(Plan {
        job_id: job.job_id().to_string(),
        root: staging_root.to_path_buf(),
        manifest: manifest.to_ordered_value(),
        oci_runtime: oci_runtime.to_owned(),
        source,
        benchmark,
        isolation,
    })
}

impl Plan {
    fn to_json(&self) -> Value {
        let m = &self.manifest;
        serde_json::json!({
            "schema_version": PLAN_SCHEMA_VERSION,
            "job_id": self.job_id,
            "image": m.get("image"),
            "platform": m.get("platform"),
            "oci_runtime": self.oci_runtime,
            "timeout_seconds": m.get("timeout_seconds"),
            "max_output_bytes": m.get("max_output_bytes"),
            "source": self.source.to_json(),
            "benchmark": self.benchmark.to_json(),
            "container": PlannedContainer::from(&self.isolation),
            "env_note": "plus PATH from the image's own config",
        })
    }

    fn human(&self, named_by: RootFrom) -> String {
        let mut out = String::from("plan (nothing run)\n");
        row(&mut out, "job_id", &self.job_id);
        row(&mut out, "oci runtime", &self.oci_runtime);
        let from = match named_by {
            RootFrom::Flag => "(--staging-root)".to_owned(),
            RootFrom::Env => format!("(${STAGING_ROOT_ENV})"),
            RootFrom::Default => format!(
                "(rehearse's default store; --staging-root DIR or ${STAGING_ROOT_ENV} names \
                 another)"
            ),
        };
        row(
            &mut out,
            "staging root",
            format!("{}  {from}", self.root.display()),
        );
        for (name, tree) in [("source", &self.source), ("benchmark", &self.benchmark)] {
            let state = if tree.staged {
                "staged"
            } else {
                "NOT STAGED in this store: `worker rehearse` stages it, or \
                 `worker --stage-regression-input`"
            };
            row(&mut out, name, format!("{}  {state}", tree.digest));
        }
        rows(&mut out, &self.manifest, &self.isolation);
        out.push_str("  (plus PATH from the image's own config)\n");
        worker_sandbox::explain::terminal_safe(&out)
    }
}
