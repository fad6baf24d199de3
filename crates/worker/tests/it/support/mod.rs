//! Shared helpers for the sandbox integration tests: the digest-pinned test images, the real
//! Docker executor, staged trees and input-checking hooks.
#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use bollard::query_parameters::ListContainersOptionsBuilder;
use verifier_sdk::digest::{TreeLimits, digest_directory};
use worker_docker::DockerExecutor;
use worker_sandbox::{
    Decision, InputCheck, InputPhase, LABEL_RUN_ID, NoVerdictReason, RunHooks, RunReport,
    SandboxSpec,
};

/// Workspace root, two levels above this crate.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The digest-pinned image reference named `key` in `.work/images.json`.
pub fn image(key: &str) -> String {
    let path = workspace_root().join(".work/images.json");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "test images are not built ({}: {e}); run scripts/services.sh",
            path.display()
        )
    });
    let json: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "{} is not JSON ({e}); run scripts/services.sh",
            path.display()
        )
    });
    json.get(key)
        .and_then(|v| v.as_str())
        .unwrap_or_else(|| {
            panic!(
                "{} has no {key:?} image; run scripts/services.sh",
                path.display()
            )
        })
        .to_string()
}

/// The busybox test image.
pub fn busybox() -> String {
    image("busybox")
}

/// The OCI runtime the sandbox tests run their containers under: `WORKER_TEST_OCI_RUNTIME`
/// (`.ci/run` runs the sandbox suite once with `runsc`), `runc` when unset.
pub fn oci_runtime() -> String {
    match std::env::var("WORKER_TEST_OCI_RUNTIME") {
        Ok(name) if !name.is_empty() => name,
        _ => "runc".to_string(),
    }
}

/// Whether the tests run under gVisor.
pub fn under_runsc() -> bool {
    oci_runtime() == "runsc"
}

/// Connects to the real daemon, containers under [`oci_runtime`]; fails loudly when the
/// daemon is absent or does not offer that runtime (never a silent run under runc).
pub async fn executor() -> DockerExecutor {
    executor_under(&oci_runtime()).await
}

/// [`executor`] under the OCI runtime `name`, offered by the daemon or not.
pub async fn executor_under(name: &str) -> DockerExecutor {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let executor = DockerExecutor::connect_under(name)
        .await
        .unwrap_or_else(|e| {
            panic!("these tests need the Docker daemon on DOCKER_HOST or /var/run/docker.sock: {e}")
        });
    let chosen = std::env::var("WORKER_TEST_OCI_RUNTIME").is_ok_and(|n| n == name);
    if let Some(why) = executor.oci_runtime().unavailable().filter(|_| chosen) {
        panic!("WORKER_TEST_OCI_RUNTIME={name}: {why}");
    }
    executor
}

/// A run id unique to this test and moment.
pub fn run_id(name: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("test-{name}-{}-{nanos}", std::process::id())
}

/// Source and benchmark trees, world-readable so the sandbox user can read them.
pub struct Trees {
    _root: tempfile::TempDir,
    pub source: PathBuf,
    pub benchmark: PathBuf,
}

impl Trees {
    pub fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        fs::set_permissions(root.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let source = root.path().join("source");
        let benchmark = root.path().join("benchmark");
        for dir in [&source, &benchmark] {
            fs::create_dir(dir).unwrap();
            fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).unwrap();
        }
        fs::write(source.join("README"), "solver source\n").unwrap();
        Self {
            _root: root,
            source,
            benchmark,
        }
    }

    /// Writes an executable `#!/bin/sh` script into the benchmark tree; returns its path
    /// inside the container.
    pub fn script(&self, name: &str, body: &str) -> String {
        let path = self.benchmark.join(name);
        fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        format!("/benchmark/{name}")
    }
}

/// A spec with small, fast limits.
pub fn spec(name: &str, argv: &[&str], trees: &Trees) -> SandboxSpec {
    SandboxSpec {
        run_id: run_id(name),
        image: busybox(),
        request: worker_sandbox::evidence::RequestFacts {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            platform: "linux/amd64".into(),
            timeout_ms: 20_000,
            cpu_millis: 1000,
            memory_bytes: 128 << 20,
            pids_limit: 64,
            max_output_bytes: 1 << 20,
            tmpfs_bytes: 16 << 20,
            test_seed: 42,
        },
        source_dir: trees.source.clone(),
        benchmark_dir: trees.benchmark.clone(),
        pull: false,
    }
}

/// Re-digests both trees with the sdk's reference walk and compares with the digests taken
/// when the hooks were built; records which phases ran.
pub struct DigestHooks {
    source: PathBuf,
    benchmark: PathBuf,
    expected: (String, String),
    pub phases: Mutex<Vec<InputPhase>>,
}

fn tree_digest(dir: &Path) -> Result<String, String> {
    let limits = TreeLimits::new(1 << 30, 100_000).map_err(|e| e.to_string())?;
    digest_directory(dir, limits)
        .map(|s| s.digest.to_string())
        .map_err(|e| e.to_string())
}

impl DigestHooks {
    pub fn new(trees: &Trees) -> Self {
        Self {
            source: trees.source.clone(),
            benchmark: trees.benchmark.clone(),
            expected: (
                tree_digest(&trees.source).unwrap(),
                tree_digest(&trees.benchmark).unwrap(),
            ),
            phases: Mutex::new(Vec::new()),
        }
    }
}

impl RunHooks for DigestHooks {
    fn check_inputs(&self, phase: InputPhase) -> InputCheck {
        self.phases.lock().unwrap().push(phase);
        let now = (tree_digest(&self.source), tree_digest(&self.benchmark));
        match now {
            (Ok(s), Ok(b)) if (s.clone(), b.clone()) == self.expected => InputCheck::Matched,
            (s, b) => InputCheck::Mismatch {
                detail: format!("inputs changed: source {s:?}, benchmark {b:?}"),
            },
        }
    }
}

/// Ids of containers (any state) labelled with `run_id`.
pub async fn containers_for(executor: &DockerExecutor, run_id: &str) -> Vec<String> {
    let filters =
        std::collections::HashMap::from([("label", vec![format!("{LABEL_RUN_ID}={run_id}")])]);
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    executor
        .client()
        .list_containers(Some(options))
        .await
        .unwrap()
        .into_iter()
        .filter_map(|c| c.id)
        .collect()
}

/// The file system type of `path` as `stat -f` names it (`tmpfs`, `ext2/ext3`, …): a fact read
/// without the worker, to hold its own reading against.
pub fn stat_fs(path: &str) -> String {
    let out = std::process::Command::new("stat")
        .args(["-f", "-c", "%T", path])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The check `name` of a `worker doctor --json` report; a panic if the report lacks it.
pub fn doctor_check<'r>(report: &'r serde_json::Value, name: &str) -> &'r serde_json::Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} line: {report:#}"))
}

/// Runs `cmd` and returns its stdout; a panic naming the command and its stderr if it fails.
pub fn stdout_of(cmd: &mut std::process::Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The stdout of the docker CLI run with `args` (test code only); a panic if it fails.
pub fn docker_cli(args: &[&str]) -> String {
    stdout_of(std::process::Command::new("docker").args(args))
}

/// The reason of a `NoVerdict` decision (printed with its detail), or a panic naming what was
/// decided instead.
pub fn no_verdict_reason(decision: &Decision) -> NoVerdictReason {
    match decision {
        Decision::NoVerdict { reason, detail } => {
            eprintln!("no verdict: {} ({detail})", reason.as_str());
            *reason
        }
        other => panic!("expected no verdict, got {other:?}"),
    }
}

/// Runs `spec` with digest hooks and asserts the container is gone afterwards.
pub async fn run(spec: &SandboxSpec, trees: &Trees) -> RunReport {
    let executor = executor().await;
    let hooks = DigestHooks::new(trees);
    let report = executor.run(spec, &hooks).await.unwrap();
    assert!(
        containers_for(&executor, &spec.run_id).await.is_empty(),
        "container of {} left behind",
        spec.run_id
    );
    if report.evidence.container.is_some() {
        assert!(report.evidence.exit.removed, "removal not confirmed");
        assert!(report.evidence.timestamps.remove_ms.is_some());
    }
    report
}

/// The stdout tail of a report.
pub fn stdout(report: &RunReport) -> &str {
    &report.evidence.stdout.tail
}

/// A digest-pinned image derived from busybox with `extra` Dockerfile lines, built with the
/// CLI (test code only) and pushed to the local registry for a real repo digest.
pub fn derived_image(name: &str, extra: &str) -> String {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let tag = format!("127.0.0.1:5000/verifier-sandbox-{name}:test");
    let dockerfile = format!("FROM {}\n{extra}\n", busybox());
    let mut build = Command::new("docker")
        .args(["build", "-q", "-t", &tag, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("docker CLI needed to build a derived test image");
    build
        .stdin
        .take()
        .unwrap()
        .write_all(dockerfile.as_bytes())
        .unwrap();
    assert!(
        build.wait().unwrap().success(),
        "docker build of {tag} failed"
    );
    let push = Command::new("docker")
        .args(["push", &tag])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(
        push.success(),
        "docker push to 127.0.0.1:5000 failed; run scripts/services.sh"
    );
    let out = Command::new("docker")
        .args([
            "image",
            "inspect",
            "--format",
            "{{json .RepoDigests}}",
            &tag,
        ])
        .output()
        .unwrap();
    let digests: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
    let prefix = format!("127.0.0.1:5000/verifier-sandbox-{name}@sha256:");
    digests
        .into_iter()
        .find(|d| d.starts_with(&prefix))
        .expect("pushed image has no repo digest")
}

/// Busybox whose own ENTRYPOINT and CMD print markers, so a test can prove they never run.
pub fn entrypoint_image() -> String {
    derived_image(
        "entrypoint",
        "ENTRYPOINT [\"/bin/echo\", \"IMAGE-ENTRYPOINT-RAN\"]\nCMD [\"IMAGE-CMD-RAN\"]",
    )
}

/// Runs this test binary again as a child in `mode`, entering at the `child_process` entry
/// point of the calling test module (`module` is its `module_path!()`), with extra environment.
pub fn spawn_child(module: &str, mode: &str, envs: &[(&str, &str)]) -> std::process::Child {
    // Test names leave out the crate: `it::sandbox_stale` runs as `sandbox_stale::…`.
    let module = module.split_once("::").map_or(module, |(_, path)| path);
    let entry = format!("{module}::child_process");
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "--exact",
            &entry,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SANDBOX_TEST_CHILD", mode)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (key, value) in envs {
        command.env(key, value);
    }
    command.spawn().unwrap()
}

/// The mode a child spawned by [`spawn_child`] runs in; the entry point is not a test by itself.
pub fn child_mode() -> String {
    std::env::var("SANDBOX_TEST_CHILD")
        .unwrap_or_else(|_| panic!("child_process only runs when spawned by another test"))
}

/// The `PATH` the busybox image declares (the only image variable the sandbox passes on).
pub async fn image_path(image: &str) -> String {
    let inspected = executor()
        .await
        .client()
        .inspect_image(image)
        .await
        .unwrap();
    inspected
        .config
        .and_then(|c| c.env)
        .unwrap_or_default()
        .into_iter()
        .find(|e| e.starts_with("PATH="))
        .expect("test image declares no PATH")
}

/// Stages `dir` as `kind` (`source` or `benchmark`) under `root` through the real
/// `worker --stage-regression-input`, with the given limits; returns the printed JSON.
pub fn stage_with_cli(
    root: &Path,
    kind: &str,
    dir: &Path,
    max_bytes: &str,
    max_files: &str,
) -> serde_json::Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_worker"))
        .args(["--quiet", "--stage-regression-input", kind])
        .arg(dir)
        .arg(root)
        .args([max_bytes, max_files])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "staging {kind} {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// [`stage_with_cli`] with roomy limits; returns the staged tree's digest.
pub fn stage_digest(root: &Path, kind: &str, dir: &Path) -> String {
    stage_with_cli(root, kind, dir, "536870912", "50000")["snapshot"]["digest"]
        .as_str()
        .unwrap()
        .to_owned()
}
