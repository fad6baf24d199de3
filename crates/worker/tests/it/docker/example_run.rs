//! The set-up several Docker tests share: the bundled example's trees staged in a fresh store
//! with a busybox `cmp` manifest over them, a job from it in a request file, and the
//! `worker --run-regression` command for it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use verifier_sdk::fixtures::{JobParams, job_value, sample_manifest};

use crate::support;

const WORKER: &str = env!("CARGO_BIN_EXE_worker");

/// The example staged under `<dir>/staging` and a request for it at `<dir>/request.json`.
pub(super) struct ExampleRequest {
    /// The staging root.
    pub(super) root: PathBuf,
    /// The request file `{"job": …}`.
    pub(super) request: PathBuf,
    /// The job in it.
    pub(super) job: Value,
}

/// The example's benchmark and one of its sources staged, and the busybox `cmp` manifest over
/// them: what [`example_request`] makes a job of and `request.rs` hands to `worker request`.
pub(super) struct StagedExample {
    /// The staging root, `<dir>/staging`.
    pub(super) root: PathBuf,
    /// The staged source's digest.
    pub(super) source: String,
    /// The staged benchmark's digest.
    pub(super) benchmark: String,
    /// The manifest, `benchmark_digest` filled in with [`Self::benchmark`].
    pub(super) manifest: Value,
}

/// Stages the example's benchmark and `source` (`source-pass` or `source-fail`) under
/// `dir/staging` (`dir` made traversable for the container user) and builds the busybox `cmp`
/// manifest over them.
pub(super) fn stage_example(dir: &Path, source: &str) -> StagedExample {
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).unwrap();
    let root = dir.join("staging");
    fs::create_dir(&root).unwrap();
    let example = support::workspace_root().join("fixtures/example");
    let benchmark = support::stage_digest(&root, "benchmark", &example.join("benchmark"));
    let source = support::stage_digest(&root, "source", &example.join(source));
    let mut manifest = sample_manifest();
    manifest["image"] = json!(support::busybox());
    manifest["command"] = json!([
        "/bin/cmp",
        "/benchmark/expected.txt",
        "/workspace/result.txt"
    ]);
    manifest["benchmark_digest"] = json!(benchmark);
    manifest["timeout_seconds"] = json!(60);
    StagedExample {
        root,
        source,
        benchmark,
        manifest,
    }
}

/// [`stage_example`], then a request for the busybox `cmp` job over the staged trees written
/// to `dir/request.json`.
pub(super) fn example_request(dir: &Path, source: &str) -> ExampleRequest {
    let staged = stage_example(dir, source);
    let job = job_value(&JobParams {
        source_snapshot_digest: staged.source,
        manifest: staged.manifest,
        ..JobParams::default()
    });
    let request = dir.join("request.json");
    fs::write(
        &request,
        serde_json::to_vec(&json!({ "job": &job })).unwrap(),
    )
    .unwrap();
    ExampleRequest {
        root: staged.root,
        request,
        job,
    }
}

impl ExampleRequest {
    /// `worker --run-regression <request>` against this store and the default engine socket;
    /// the caller adds its flags.
    pub(super) fn run_regression(&self) -> Command {
        let mut command = Command::new(WORKER);
        command
            .arg("--run-regression")
            .arg(&self.request)
            .env("REGRESSION_SANDBOX_STAGING_ROOT", &self.root)
            .env_remove("DOCKER_HOST");
        command
    }

    /// Runs the failing example's request with `--evidence <dir>/evidence.json` and `extra`;
    /// asserts it exited 0 and returns the outcome on stdout and the evidence file.
    pub(super) fn failing_run_evidence(dir: &Path, extra: &[&str]) -> (Value, PathBuf) {
        let example = example_request(dir, "source-fail");
        let evidence = dir.join("evidence.json");
        let out = example
            .run_regression()
            .arg("--evidence")
            .arg(&evidence)
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        (serde_json::from_slice(&out.stdout).unwrap(), evidence)
    }
}
