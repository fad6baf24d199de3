//! `worker request`: a request file made from a source digest and a manifest is accepted by
//! `plan` and by `--run-regression` (real Docker), and bad input writes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use crate::support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use super::example_run::stage_example;

const WORKER: &str = env!("CARGO_BIN_EXE_worker");

struct Env {
    dir: tempfile::TempDir,
    root: PathBuf,
    source: String,
    benchmark: String,
    manifest: PathBuf,
}

/// The example trees staged, and a manifest for them with the placeholder benchmark digest
/// (`worker request` fills it in from `--benchmark-digest`).
fn env(source: &str) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let staged = stage_example(dir.path(), source);
    let mut manifest = staged.manifest;
    manifest["benchmark_digest"] = json!(format!("sha256:{}", "0".repeat(64)));
    let path = dir.path().join("m.json");
    fs::write(&path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    Env {
        dir,
        root: staged.root,
        source: staged.source,
        benchmark: staged.benchmark,
        manifest: path,
    }
}

fn request(env: &Env, extra: &[&str]) -> (Output, PathBuf) {
    let out_path = env.dir.path().join("request.json");
    let out = Command::new(WORKER)
        .args(["request", "--source-digest", &env.source, "--manifest"])
        .arg(&env.manifest)
        .arg("--out")
        .arg(&out_path)
        .args(extra)
        .output()
        .unwrap();
    (out, out_path)
}

/// `worker --run-regression <request> EXTRA…` against the env's store and the default engine
/// socket.
fn run_regression(env: &Env, request: &Path, extra: &[&str]) -> Output {
    Command::new(WORKER)
        .arg("--run-regression")
        .arg(request)
        .args(extra)
        .env("REGRESSION_SANDBOX_STAGING_ROOT", &env.root)
        .env_remove("DOCKER_HOST")
        .output()
        .unwrap()
}

/// `worker plan <request> --staging-root <store> --json EXTRA…`, which must exit 0; its JSON.
fn plan_json(env: &Env, request: &Path, extra: &[&str]) -> Value {
    let plan = Command::new(WORKER)
        .arg("plan")
        .arg(request)
        .arg("--staging-root")
        .arg(&env.root)
        .arg("--json")
        .args(extra)
        .output()
        .unwrap();
    assert_eq!(plan.status.code(), Some(0), "{plan:?}");
    serde_json::from_slice(&plan.stdout).unwrap()
}

#[test]
fn request_file_is_accepted_by_plan_and_run_regression() {
    let env = env("source-pass");
    let (out, path) = request(&env, &["--benchmark-digest", &env.benchmark]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    let plan = plan_json(&env, &path, &[]);
    assert_eq!(plan["source"]["digest"], env.source.as_str());
    assert_eq!(plan["source"]["staged"], true);
    assert_eq!(plan["benchmark"]["digest"], env.benchmark.as_str());
    assert_eq!(plan["benchmark"]["staged"], true);

    let run = run_regression(&env, &path, &[]);
    assert_eq!(run.status.code(), Some(0), "{run:?}");
    let outcome: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(outcome["verdict"], "passed", "{run:?}");
    assert_eq!(outcome["receipt"]["source_digest"], env.source.as_str());
    // The bounty is a placeholder no chain knows: the made-up contract and testnet.
    let job: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    assert_eq!(job["job"]["network"], "base-sepolia");
    assert_eq!(
        job["job"]["bounty_contract"],
        worker::commands::local_request::LOCAL_BOUNTY_CONTRACT
    );
}

#[test]
fn request_of_a_failing_source_runs_to_a_failed_verdict() {
    let env = env("source-fail");
    let (out, path) = request(&env, &["--benchmark-digest", &env.benchmark]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let run = run_regression(&env, &path, &[]);
    let outcome: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(outcome["verdict"], "failed", "{run:?}");
}

#[test]
fn request_refuses_bad_input_and_writes_nothing() {
    let env = env("source-pass");
    // The manifest still has the placeholder digest and none is given.
    let (out, path) = request(&env, &[]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--benchmark-digest"));
    assert!(!path.exists());
    for bad in [
        &["--benchmark-digest", "sha256:xyz"][..],
        &[
            "--benchmark-digest",
            &env.benchmark,
            "--source-commit",
            "https://example.com/x",
        ],
    ] {
        let (out, path) = request(&env, bad);
        assert_eq!(out.status.code(), Some(4), "{bad:?}: {out:?}");
        assert!(!path.exists());
    }
    let mut broken: Value = serde_json::from_slice(&fs::read(&env.manifest).unwrap()).unwrap();
    broken["image"] = json!("busybox:latest");
    fs::write(&env.manifest, serde_json::to_vec(&broken).unwrap()).unwrap();
    let (out, path) = request(&env, &["--benchmark-digest", &env.benchmark]);
    assert_eq!(out.status.code(), Some(4), "unpinned image: {out:?}");
    assert!(!path.exists());
}

/// `worker plan --oci-runtime runsc` shows the profile a run under gVisor is created with: the
/// runtime named, the pids limit moved into `--ulimit nproc` with the host backstop (the
/// default plan stays runc's). Then a real `--run-regression` under runsc on the same request
/// passes, so the plan is of a profile the engine accepts.
#[test]
fn worker_plan_under_runsc_shows_the_runsc_profile() {
    let env = env("source-pass");
    let (out, path) = request(&env, &["--benchmark-digest", &env.benchmark]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let manifest: Value = serde_json::from_slice(&fs::read(&env.manifest).unwrap()).unwrap();
    let pids = manifest["pids_limit"].as_i64().unwrap();

    let runc = plan_json(&env, &path, &[]);
    assert_eq!(runc["container"]["runtime"], "runc", "{runc:#}");
    assert_eq!(runc["container"]["pids_limit"], pids, "{runc:#}");
    assert_eq!(runc["oci_runtime"], "runc", "{runc:#}");

    let runsc = plan_json(&env, &path, &["--oci-runtime", "runsc"]);
    assert_eq!(runsc["container"]["runtime"], "runsc", "{runsc:#}");
    assert_eq!(runsc["oci_runtime"], "runsc", "{runsc:#}");
    assert_eq!(
        runsc["container"]["pids_limit"],
        verifier_sdk::oci_runtime::runsc_host_pids_limit(pids),
        "{runsc:#}"
    );
    let nproc = runsc["container"]["ulimits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == "nproc")
        .unwrap_or_else(|| panic!("no nproc ulimit under runsc: {runsc:#}"))
        .clone();
    assert_eq!(nproc["soft"], pids, "{nproc}");
    assert_eq!(nproc["hard"], pids, "{nproc}");

    let run = run_regression(&env, &path, &["--oci-runtime", "runsc"]);
    assert_eq!(run.status.code(), Some(0), "{run:?}");
    let outcome: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(outcome["verdict"], "passed", "{run:?}");
}

/// `worker rehearse --oci-runtime runsc` shows (and runs) the runsc sandbox, not runc's: its
/// `sandbox` is the profile the run was created with.
#[test]
fn rehearse_under_runsc_shows_the_runsc_sandbox_it_runs() {
    let env = env("source-pass");
    let example = support::workspace_root().join("fixtures/example");
    let rehearse = |extra: &[&str]| -> Value {
        let out = Command::new(WORKER)
            .arg("rehearse")
            .arg("--source")
            .arg(example.join("source-pass"))
            .arg("--benchmark")
            .arg(example.join("benchmark"))
            .arg("--manifest")
            .arg(&env.manifest)
            .arg("--staging-root")
            .arg(&env.root)
            .args(["--json", "--quiet"])
            .args(extra)
            .env_remove("REGRESSION_SANDBOX_STAGING_ROOT")
            .output()
            .unwrap();
        let json: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(json["verdict"], "passed", "{json:#}");
        json
    };
    let manifest: Value = serde_json::from_slice(&fs::read(&env.manifest).unwrap()).unwrap();
    let pids = manifest["pids_limit"].as_i64().unwrap();
    let runc = rehearse(&[]);
    assert_eq!(runc["sandbox"]["runtime"], "runc", "{:#}", runc["sandbox"]);
    let runsc = rehearse(&["--oci-runtime", "runsc"]);
    assert_eq!(
        runsc["sandbox"]["runtime"], "runsc",
        "{:#}",
        runsc["sandbox"]
    );
    assert_eq!(
        runsc["sandbox"]["pids_limit"],
        verifier_sdk::oci_runtime::runsc_host_pids_limit(pids),
        "{:#}",
        runsc["sandbox"]
    );
}
