//! `worker --run-regression`, `plan` and `--validate-regression-candidate` driven through the
//! real binary against the real Docker daemon: stdout shape, exit codes, evidence on disk,
//! input tampering, crash recovery. The sandbox's own adversarial cases live in `sandbox_*.rs`;
//! these check what the command line adds on top (request parsing, staging root, exit mapping,
//! evidence files, stale-container cleanup at start).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use crate::support;
use crate::support::docker_cli as docker;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::RwLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use verifier_sdk::fixtures::{JobParams, job_value, sample_manifest};

const WORKER: &str = env!("CARGO_BIN_EXE_worker");
const LABEL_FILTER: &str = "label=dev.agent-bounties.verifier=1";

/// Every run removes stale containers it finds at start. The crash test needs its orphan to
/// survive until its own second run, so it takes this lock for writing; other runs read.
static ENGINE: RwLock<()> = RwLock::new(());

fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    ENGINE.read().unwrap_or_else(|e| e.into_inner())
}

/// The shared hold on the engine, a fresh [`Env`], and the example tree `tree` staged in it
/// as a source (its digest).
fn with_source(tree: &str) -> (std::sync::RwLockReadGuard<'static, ()>, Env, String) {
    let engine = shared();
    let env = Env::new();
    let source = env.stage_source(tree);
    (engine, env, source)
}

fn exclusive() -> std::sync::RwLockWriteGuard<'static, ()> {
    ENGINE.write().unwrap_or_else(|e| e.into_inner())
}

fn example(dir: &str) -> PathBuf {
    support::workspace_root().join("fixtures/example").join(dir)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A private staging root with the example benchmark staged, world-traversable so the
/// sandbox user can read its bind mounts.
struct Env {
    dir: tempfile::TempDir,
    root: PathBuf,
    benchmark: String,
}

impl Env {
    fn new() -> Self {
        // Fails loudly (not skipped) when the daemon is not there.
        docker(&["info", "--format", "{{.ServerVersion}}"]);
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let root = dir.path().join("staging");
        fs::create_dir(&root).unwrap();
        let benchmark = support::stage_digest(&root, "benchmark", &example("benchmark"));
        Self {
            dir,
            root,
            benchmark,
        }
    }

    fn stage_source(&self, name: &str) -> String {
        support::stage_digest(&self.root, "source", &example(name))
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A request `{job}` for the busybox image; `tweak` edits the manifest first.
    fn job(&self, source: &str, argv: &[&str], tweak: impl FnOnce(&mut Value)) -> Value {
        let mut manifest = sample_manifest();
        manifest["image"] = json!(support::busybox());
        manifest["command"] = json!(argv);
        manifest["benchmark_digest"] = json!(self.benchmark);
        manifest["timeout_seconds"] = json!(60);
        tweak(&mut manifest);
        job_value(&JobParams {
            source_snapshot_digest: source.to_string(),
            manifest,
            ..JobParams::default()
        })
    }

    fn cmp_job(&self, source: &str) -> Value {
        self.job(
            source,
            &[
                "/bin/cmp",
                "/benchmark/expected.txt",
                "/workspace/result.txt",
            ],
            |_| {},
        )
    }

    fn write_request(&self, name: &str, request: &Value) -> PathBuf {
        let path = self.path(name);
        fs::write(&path, serde_json::to_vec(request).unwrap()).unwrap();
        path
    }

    /// `worker --run-regression` with this staging root and `extra` arguments.
    fn command(&self, request: &Path, extra: &[&str]) -> Command {
        let mut command = Command::new(WORKER);
        command
            .arg("--run-regression")
            .arg(request)
            .args(extra)
            .env("REGRESSION_SANDBOX_STAGING_ROOT", &self.root)
            .env_remove("DOCKER_HOST")
            .env_remove("WORKER_LOG");
        command
    }

    fn run(&self, request: &Value, extra: &[&str]) -> Run {
        let path = self.write_request("request.json", request);
        Run::from(self.command(&path, extra).output().unwrap())
    }
}

#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl From<Output> for Run {
    fn from(out: Output) -> Self {
        Self {
            code: out.status.code().expect("worker was killed by a signal"),
            stdout: String::from_utf8(out.stdout).unwrap(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e}): {self:?}"))
    }

    fn keys(&self) -> Vec<String> {
        self.json().as_object().unwrap().keys().cloned().collect()
    }

    /// Asserts a no-verdict output with `reason` and exit `code`.
    fn assert_no_verdict(&self, reason: &str, code: i32) -> Value {
        assert_eq!(self.code, code, "{self:?}");
        assert_eq!(self.keys(), ["verdict", "no_verdict"], "{self:?}");
        let out = self.json();
        assert_eq!(out["verdict"], Value::Null, "{self:?}");
        assert_eq!(out["no_verdict"]["reason"], reason, "{self:?}");
        assert!(
            out["no_verdict"]["detail"].is_string(),
            "no detail: {self:?}"
        );
        out
    }

    /// Asserts a usage-level refusal: nothing on stdout, one error line, exit `code`.
    fn assert_refused(&self, code: i32) {
        assert_eq!(self.code, code, "{self:?}");
        assert!(self.stdout.is_empty(), "{self:?}");
        assert!(self.stderr.contains("worker: error:"), "{self:?}");
    }
}

/// Asserts a verdict output, re-validates it with the sdk and returns it.
fn assert_verdict(run: &Run, job: &Value, verdict: &str) -> Value {
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.keys(),
        ["verdict", "receipt", "response_hash"],
        "{run:?}"
    );
    let outcome = run.json();
    assert_eq!(outcome["verdict"], verdict, "{run:?}");
    let validated_job = verifier_sdk::validate_job(job, now()).unwrap();
    let checked = verifier_sdk::validate_outcome(&outcome, &validated_job)
        .unwrap_or_else(|e| panic!("the worker's outcome does not re-validate: {e}: {run:?}"));
    assert_eq!(
        checked.response_hash().to_string(),
        outcome["response_hash"].as_str().unwrap()
    );
    outcome
}

/// Ids of labelled containers (any state) whose owner label names process `pid`.
fn containers_of_pid(pid: u32) -> Vec<String> {
    docker(&[
        "ps",
        "-a",
        "--no-trunc",
        "--filter",
        LABEL_FILTER,
        "--format",
        "{{.ID}} {{.Label \"dev.agent-bounties.owner\"}}",
    ])
    .lines()
    .filter_map(|line| {
        let (id, owner) = line.split_once(' ')?;
        // `<boot id>/<pid namespace>/<pid>/<start time>`
        let owner_pid = owner.split('/').nth(2)?;
        (owner_pid == pid.to_string()).then(|| id.to_string())
    })
    .collect()
}

fn container_exists(id: &str) -> bool {
    !docker(&[
        "ps",
        "-a",
        "-q",
        "--no-trunc",
        "--filter",
        &format!("id={id}"),
    ])
    .trim()
    .is_empty()
}

#[test]
fn passing_source_prints_exactly_the_verdict_and_revalidates() {
    let (_engine, env, source) = with_source("source-pass");
    let job = env.cmp_job(&source);
    let run = env.run(&json!({ "job": job }), &[]);
    let outcome = assert_verdict(&run, &job, "passed");
    assert_eq!(outcome["receipt"]["execution"]["exit_code"], 0);
    assert_eq!(run.stdout.lines().count(), 1, "{run:?}");
}

#[test]
fn failing_source_is_a_failed_verdict_with_exit_zero() {
    let (_engine, env, source) = with_source("source-fail");
    let job = env.cmp_job(&source);
    let run = env.run(&json!({ "job": job }), &[]);
    let outcome = assert_verdict(&run, &job, "failed");
    assert_eq!(outcome["receipt"]["execution"]["exit_code"], 1);
}

#[test]
fn command_past_its_timeout_is_no_verdict_exit_3() {
    let (_engine, env, source) = with_source("source-pass");
    let job = env.job(&source, &["/bin/sleep", "30"], |m| {
        m["timeout_seconds"] = json!(1)
    });
    let started = Instant::now();
    let run = env.run(&json!({ "job": job }), &[]);
    run.assert_no_verdict("timeout", 3);
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "the sleep was not cut at the timeout: {:?}",
        started.elapsed()
    );
}

#[test]
fn job_with_a_broken_hash_is_invalid_job_exit_4() {
    let (_engine, env, source) = with_source("source-pass");
    let mut job = env.cmp_job(&source);
    job["terms"]["benchmark_hash"] = json!(format!("0x{}", "0".repeat(64)));
    env.run(&json!({ "job": job }), &[])
        .assert_no_verdict("invalid_job", 4);
}

#[test]
fn expired_job_is_expired_exit_4() {
    let (_engine, env, source) = with_source("source-pass");
    let mut manifest = sample_manifest();
    manifest["image"] = json!(support::busybox());
    manifest["benchmark_digest"] = json!(env.benchmark);
    let job = job_value(&JobParams {
        source_snapshot_digest: source,
        manifest,
        expires_at: now() - 1,
        ..JobParams::default()
    });
    env.run(&json!({ "job": job }), &[])
        .assert_no_verdict("expired", 4);
}

#[test]
fn unreachable_engine_is_runtime_unavailable_exit_5() {
    let (_engine, env, source) = with_source("source-pass");
    let job = env.cmp_job(&source);
    let path = env.write_request("request.json", &json!({ "job": job }));
    let run = Run::from(
        env.command(&path, &[])
            .env("DOCKER_HOST", "unix:///nonexistent.sock")
            .output()
            .unwrap(),
    );
    run.assert_no_verdict("runtime_unavailable", 5);
}

#[test]
fn missing_or_relative_staging_root_is_a_config_error_78() {
    let env = Env::new();
    let source = env.stage_source("source-pass");
    let path = env.write_request("request.json", &json!({ "job": env.cmp_job(&source) }));
    let missing = Run::from(
        env.command(&path, &[])
            .env_remove("REGRESSION_SANDBOX_STAGING_ROOT")
            .output()
            .unwrap(),
    );
    missing.assert_refused(78);
    let relative = Run::from(
        env.command(&path, &[])
            .env("REGRESSION_SANDBOX_STAGING_ROOT", "staging")
            .current_dir(env.dir.path())
            .output()
            .unwrap(),
    );
    relative.assert_refused(78);
}

#[test]
fn unusable_requests_are_refused_with_exit_4() {
    let env = Env::new();
    let source = env.stage_source("source-pass");
    let job = env.cmp_job(&source);
    env.run(&json!({ "job": job, "staging_root": "/" }), &[])
        .assert_refused(4);
    env.run(&json!({}), &[]).assert_refused(4);
    env.run(&json!([job]), &[]).assert_refused(4);

    let not_json = env.path("not-json");
    fs::write(&not_json, b"{\"job\": ").unwrap();
    Run::from(env.command(&not_json, &[]).output().unwrap()).assert_refused(4);

    // One byte over the 4 MiB cap, padded with whitespace so it would otherwise parse.
    let big = env.path("too-large");
    let mut bytes = serde_json::to_vec(&json!({ "job": job })).unwrap();
    bytes.resize((4 << 20) + 1, b' ');
    fs::write(&big, bytes).unwrap();
    let run = Run::from(env.command(&big, &[]).output().unwrap());
    run.assert_refused(4);
    assert!(run.stderr.contains("larger than"), "{run:?}");
}

#[test]
fn staged_source_tampered_after_staging_is_input_mismatch() {
    let (_engine, env, source) = with_source("source-pass");
    let staged = env
        .root
        .join("sources/sha256")
        .join(source.trim_start_matches("sha256:"));
    fs::set_permissions(&staged, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(staged.join("result.txt"), "expected-output\n\n").unwrap();
    let job = env.cmp_job(&source);
    let out = env
        .run(&json!({ "job": job }), &[])
        .assert_no_verdict("input_mismatch", 3);
    assert!(
        out["no_verdict"]["detail"]
            .as_str()
            .unwrap()
            .contains("source"),
        "{out}"
    );
}

#[test]
fn source_never_staged_is_input_mismatch() {
    let _engine = shared();
    let env = Env::new();
    // A real snapshot digest, staged only under another root.
    let elsewhere = tempfile::tempdir().unwrap();
    let source = support::stage_digest(elsewhere.path(), "source", &example("source-pass"));
    let job = env.cmp_job(&source);
    env.run(&json!({ "job": job }), &[])
        .assert_no_verdict("input_mismatch", 3);
}

/// A passing run with `--evidence`; returns (job, outcome, evidence).
fn passing_run_with_evidence(env: &Env) -> (Value, Value, Value) {
    let source = env.stage_source("source-pass");
    let job = env.cmp_job(&source);
    let copy = env.path("out.json");
    let run = env.run(
        &json!({ "job": job }),
        &["--evidence", copy.to_str().unwrap()],
    );
    let outcome = assert_verdict(&run, &job, "passed");
    let bytes = fs::read(&copy).unwrap();
    let evidence: Value = serde_json::from_slice(&bytes).unwrap();
    (job, outcome, evidence)
}

#[test]
fn evidence_is_written_and_content_addressed() {
    let _engine = shared();
    let env = Env::new();
    let (_, outcome, evidence) = passing_run_with_evidence(&env);
    assert_eq!(evidence["response_hash"], outcome["response_hash"]);
    assert_eq!(evidence["executor"], "docker-engine");
    assert_eq!(evidence["outcome"]["status"], "completed");
    let canonical = verifier_sdk::canonical_json(&evidence);
    let hex = hex::encode(Sha256::digest(canonical.as_bytes()));
    let stored = env.root.join(format!("evidence/sha256/{hex}.json"));
    let stored_bytes = fs::read(&stored).unwrap_or_else(|e| {
        panic!(
            "no content-addressed copy at {}: {e}; present: {:?}",
            stored.display(),
            fs::read_dir(env.root.join("evidence/sha256")).map(|d| d
                .filter_map(Result::ok)
                .map(|e| e.path())
                .collect::<Vec<_>>())
        )
    });
    assert_eq!(stored_bytes, fs::read(env.path("out.json")).unwrap());
    // The record the worker wrote is exactly the sdk's evidence type: parsing it as the signer
    // does and serializing it again gives the same bytes.
    let typed = verifier_sdk::EvidenceRecord::from_docker_value(&evidence).unwrap();
    let again = verifier_sdk::canonical_json(&serde_json::to_value(&typed).unwrap());
    assert_eq!(again.as_bytes(), stored_bytes.as_slice());
}

#[test]
fn killed_worker_leaves_a_container_the_next_run_removes() {
    let _engine = exclusive();
    let env = Env::new();
    let source = env.stage_source("source-pass");
    let job = env.job(&source, &["/bin/sleep", "60"], |m| {
        m["timeout_seconds"] = json!(120)
    });
    let path = env.write_request("sleep.json", &json!({ "job": job }));
    let mut child = env
        .command(&path, &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(60);
    let orphan = loop {
        let running = docker(&[
            "ps",
            "-q",
            "--no-trunc",
            "--filter",
            LABEL_FILTER,
            "--filter",
            "status=running",
        ]);
        let mine = containers_of_pid(pid);
        if let Some(id) = mine.iter().find(|id| running.contains(id.as_str())) {
            break id.clone();
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "worker ended before its container ran"
        );
        assert!(Instant::now() < deadline, "no running container appeared");
        std::thread::sleep(Duration::from_millis(100));
    };
    child.kill().unwrap(); // SIGKILL: no cleanup code in the worker runs.
    child.wait().unwrap();
    assert!(
        container_exists(&orphan),
        "the container vanished with the worker; the test proves nothing"
    );

    let pass = env.cmp_job(&source);
    let run = env.run(&json!({ "job": pass }), &[]);
    assert_verdict(&run, &pass, "passed");
    assert!(
        !container_exists(&orphan),
        "stale container {orphan} survived the next run"
    );
}

#[test]
fn plan_prints_the_profile_without_creating_a_container() {
    let (_engine, env, source) = with_source("source-pass");
    let job = env.cmp_job(&source);
    let path = env.write_request("request.json", &json!({ "job": job }));
    let since = now().to_string();
    let child = plan_json(&env, &path)
        .env_remove("REGRESSION_SANDBOX_STAGING_ROOT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let run = Run::from(child.wait_with_output().unwrap());
    assert_eq!(run.code, 0, "{run:?}");
    let plan = run.json();
    let c = &plan["container"];
    assert_eq!(c["network_mode"], "none", "{plan}");
    assert_eq!(c["readonly_rootfs"], true, "{plan}");
    // A plan shows the range's first uid; a run leases one of its own.
    assert_eq!(
        c["user"],
        verifier_sdk::profile::sandbox_user(verifier_sdk::profile::SANDBOX_UID_FIRST),
        "{plan}"
    );
    assert_eq!(c["cap_drop"], json!(["ALL"]), "{plan}");
    assert_eq!(c["privileged"], false, "{plan}");
    assert_eq!(c["init"], true, "{plan}");
    assert_eq!(c["security_opt"], json!(["no-new-privileges"]), "{plan}");
    let tmp = c["tmpfs"]["/tmp"].as_str().unwrap();
    let options: Vec<&str> = tmp.split(',').collect();
    assert!(options.contains(&"exec"), "{tmp}");
    assert!(!options.contains(&"noexec"), "{tmp}");
    assert!(options.contains(&"mode=1777"), "{tmp}");
    assert_eq!(
        c["entrypoint"],
        json!([
            "/bin/cmp",
            "/benchmark/expected.txt",
            "/workspace/result.txt"
        ])
    );
    assert_eq!(plan["source"]["staged"], true, "{plan}");
    assert_eq!(plan["benchmark"]["staged"], true, "{plan}");

    // The engine saw no labelled container created by the plan process in its window.
    let until = (now() + 1).to_string();
    let events = docker(&[
        "events",
        "--since",
        &since,
        "--until",
        &until,
        "--filter",
        "type=container",
        "--filter",
        "event=create",
        "--filter",
        LABEL_FILTER,
        "--format",
        "{{index .Actor.Attributes \"dev.agent-bounties.owner\"}}",
    ]);
    let mine: Vec<&str> = events
        .lines()
        .filter(|owner| owner.split('/').nth(1) == Some(pid.to_string().as_str()))
        .collect();
    assert!(mine.is_empty(), "plan created containers: {mine:?}");
}

/// Issue #26 item 9: `worker plan --json` (v1) listed the mounts twice, as `mounts` and again
/// as `mount_points` (the same list in a plan: nothing has been inspected). v2 lists each once.
#[test]
fn plan_json_lists_each_mount_once() {
    let (_engine, env, source) = with_source("source-pass");
    let path = env.write_request("request.json", &json!({ "job": env.cmp_job(&source) }));
    let run = Run::from(plan_json(&env, &path).output().unwrap());
    assert_eq!(run.code, 0, "{run:?}");
    let plan = run.json();
    assert_eq!(
        plan["schema_version"], "agent-bounties/worker-plan-v2",
        "{plan}"
    );
    let text = plan.to_string();
    for target in ["\"/workspace\"", "\"/benchmark\""] {
        assert_eq!(
            text.matches(&format!("\"target\":{target}")).count(),
            1,
            "{target} not listed exactly once: {plan}"
        );
    }
    let mounts = plan["container"]["mounts"].as_array().unwrap();
    assert_eq!(mounts.len(), 2, "{plan}");
    assert!(plan["container"].get("mount_points").is_none(), "{plan}");
}

/// `worker plan REQUEST --staging-root <env's> --json`.
fn plan_json(env: &Env, request: &Path) -> Command {
    let mut command = Command::new(WORKER);
    command
        .arg("plan")
        .arg(request)
        .arg("--staging-root")
        .arg(&env.root)
        .arg("--json");
    command
}

fn validate(env: &Env, request: &Value) -> Run {
    let path = env.write_request("candidate.json", request);
    Run::from(
        Command::new(WORKER)
            .arg("--validate-regression-candidate")
            .arg(path)
            .arg("--json")
            .output()
            .unwrap(),
    )
}

#[test]
fn candidate_from_a_real_run_validates_and_tampering_is_refused() {
    let _engine = shared();
    let env = Env::new();
    let (job, outcome, evidence) = passing_run_with_evidence(&env);
    let candidate = json!({
        "job": job, "current_job": job, "outcome": outcome, "evidence": evidence,
    });
    let ok = validate(&env, &candidate);
    assert_eq!(ok.code, 0, "{ok:?}");
    assert_eq!(
        ok.json(),
        json!({
            "schema_version": "agent-bounties/worker-candidate-check-v1",
            "valid": true,
            "verdict": "passed",
            "response_hash": outcome["response_hash"],
            "evidence_checked": true,
        })
    );

    let mut flipped = candidate.clone();
    flipped["outcome"]["verdict"] = json!("failed");
    let refused = validate(&env, &flipped);
    assert_eq!(refused.code, 4, "{refused:?}");
    assert_eq!(refused.json()["valid"], false, "{refused:?}");

    let mut double = candidate.clone();
    double["evidence"]["executor"] = json!("test-double");
    let refused = validate(&env, &double);
    assert_eq!(refused.code, 4, "{refused:?}");
    let out = refused.json();
    assert_eq!(out["valid"], false, "{refused:?}");
    assert!(
        out["error"].as_str().unwrap().contains("test-double"),
        "{refused:?}"
    );
    // The real run's own record, edited to say the container had a network: refused, naming
    // the field, although nothing else about the candidate changed.
    let mut bridged = candidate.clone();
    bridged["evidence"]["isolation"]["observed"]["network_mode"] = json!("bridge");
    let refused = validate(&env, &bridged);
    assert_eq!(refused.code, 4, "{refused:?}");
    let out = refused.json();
    assert!(
        out["error"].as_str().unwrap().contains("network_mode"),
        "{refused:?}"
    );
}

/// Like [`Env::run`], with the sandbox's debug events on stderr (one per archive call, one
/// when the executable resolution comes from the cache).
fn run_logged(env: &Env, request: &Value) -> Run {
    let path = env.write_request("request.json", request);
    let mut command = env.command(&path, &[]);
    command.env("WORKER_LOG", "worker_sandbox::lifecycle::executable=debug");
    Run::from(command.output().unwrap())
}

/// The busybox image's content id and the `PATH` of its config, the two image facts an
/// executable-cache key holds.
fn busybox_id_and_path() -> (String, Option<String>) {
    let image = support::busybox();
    let id = docker(&["image", "inspect", "--format", "{{.Id}}", &image]);
    let image_env: Vec<String> = serde_json::from_str(&docker(&[
        "image",
        "inspect",
        "--format",
        "{{json .Config.Env}}",
        &image,
    ]))
    .unwrap();
    let path_env = image_env
        .iter()
        .find_map(|e| e.strip_prefix("PATH="))
        .map(str::to_string);
    (id.trim().to_string(), path_env)
}

/// Where the executable cache keeps the entry for `argv0` in the busybox image, by the
/// documented recipe: `<root>/executables/<sha256 of [image id, argv0, image PATH]>.json`.
fn cache_entry_path(env: &Env, argv0: &str) -> PathBuf {
    let (id, path_env) = busybox_id_and_path();
    let key = json!([id, argv0, path_env]).to_string();
    env.root
        .join("executables")
        .join(format!("{}.json", hex::encode(Sha256::digest(key))))
}

/// A well-formed entry for `argv0` claiming `executable`, against `image_id` (the real one
/// when `None`).
fn forged_entry(argv0: &str, executable: &str, image_id: Option<&str>) -> Value {
    let (real_id, path_env) = busybox_id_and_path();
    json!({
        "schema": "agent-bounties/executable-resolution-v1",
        "image_id": image_id.unwrap_or(&real_id),
        "argv0": argv0,
        "path_env": path_env,
        "executable": executable,
        "interpreter": null,
    })
}

#[test]
fn second_run_takes_the_executable_from_the_cache_and_hashes_the_same() {
    let (_engine, env, source) = with_source("source-pass");
    let job = env.cmp_job(&source);
    let request = json!({ "job": job });

    let first = run_logged(&env, &request);
    let first_outcome = assert_verdict(&first, &job, "passed");
    assert!(first.stderr.contains("archive stat"), "{first:?}");
    assert!(!first.stderr.contains("from the cache"), "{first:?}");
    let entry = cache_entry_path(&env, "/bin/cmp");
    let stored: Value = serde_json::from_slice(
        &fs::read(&entry)
            .unwrap_or_else(|e| panic!("no cache entry at {}: {e}: {first:?}", entry.display())),
    )
    .unwrap();
    assert_eq!(stored["executable"], "/bin/busybox", "{stored}");

    let second = run_logged(&env, &request);
    let second_outcome = assert_verdict(&second, &job, "passed");
    assert!(second.stderr.contains("from the cache"), "{second:?}");
    // No archive call at all: neither a stat nor a read of the file's head.
    assert!(!second.stderr.contains("archive"), "{second:?}");
    assert_eq!(second_outcome["receipt"], first_outcome["receipt"]);
    assert_eq!(
        second_outcome["response_hash"],
        first_outcome["response_hash"]
    );
    assert_eq!(second.stdout, first.stdout);
}

#[test]
fn poisoned_cache_entry_for_the_command_changes_neither_the_command_nor_the_hash() {
    let (_engine, env, source) = with_source("source-pass");
    let job = env.cmp_job(&source);
    let request = json!({ "job": job });
    let clean = env.run(&request, &[]);
    let clean_outcome = assert_verdict(&clean, &job, "passed");
    // A lie with the right key: /bin/cmp "is" /bin/false. The entry only skips the pre-check;
    // the argv run is the job's, so the verdict and its hash are the clean run's.
    let entry = cache_entry_path(&env, "/bin/cmp");
    fs::write(
        &entry,
        forged_entry("/bin/cmp", "/bin/false", None).to_string(),
    )
    .unwrap();
    let poisoned = run_logged(&env, &request);
    assert!(poisoned.stderr.contains("from the cache"), "{poisoned:?}");
    let outcome = assert_verdict(&poisoned, &job, "passed");
    assert_eq!(outcome["response_hash"], clean_outcome["response_hash"]);
    assert_eq!(poisoned.stdout, clean.stdout);
}

/// Puts something at a cache entry's path.
type Plant<'a> = Box<dyn Fn(&Path) + 'a>;

#[test]
fn planted_cache_entries_cannot_turn_a_missing_executable_into_a_verdict() {
    let (_engine, env, source) = with_source("source-pass");
    for argv0 in ["/bin/no-such-tool", "/workspace/no-such-script.sh"] {
        let job = env.job(&source, &[argv0, "x"], |_| {});
        let request = json!({ "job": job });
        let clean = env.run(&request, &[]);
        let clean_out = clean.assert_no_verdict("start_failed", clean.code);
        let entry = cache_entry_path(&env, argv0);
        assert!(!entry.exists(), "a failed resolution was cached: {clean:?}");

        // A real entry for another argv[0], produced by a real run, then renamed to this key.
        let cmp = env.run(&json!({ "job": env.cmp_job(&source) }), &[]);
        assert_verdict(&cmp, &env.cmp_job(&source), "passed");
        let other = fs::read(cache_entry_path(&env, "/bin/cmp")).unwrap();

        let decoy = env.path("decoy.json");
        fs::write(&decoy, forged_entry(argv0, argv0, None).to_string()).unwrap();
        let plants: Vec<(&str, Plant)> = vec![
            (
                "a well-formed entry with the right key",
                Box::new(|p| {
                    fs::write(p, forged_entry(argv0, argv0, None).to_string()).unwrap();
                }),
            ),
            (
                "an entry resolved against another image",
                Box::new(|p| {
                    let other_image = format!("sha256:{}", "ab".repeat(32));
                    let forged = forged_entry(argv0, "/bin/busybox", Some(&other_image));
                    fs::write(p, forged.to_string()).unwrap();
                }),
            ),
            (
                "an entry naming a path inside /workspace",
                Box::new(|p| {
                    let forged = forged_entry(argv0, "/workspace/result.txt", None);
                    fs::write(p, forged.to_string()).unwrap();
                }),
            ),
            (
                "garbage",
                Box::new(|p| fs::write(p, b"\x00\xffnot json{").unwrap()),
            ),
            (
                "a symlink to a well-formed entry",
                Box::new(|p| std::os::unix::fs::symlink(&decoy, p).unwrap()),
            ),
            (
                "the entry of another argv[0]",
                Box::new(|p| fs::write(p, &other).unwrap()),
            ),
        ];
        for (what, plant) in plants {
            let _ = fs::remove_file(&entry);
            plant(&entry);
            let planted = env.run(&request, &[]);
            assert_eq!(planted.code, clean.code, "{argv0}, {what}: {planted:?}");
            assert_eq!(
                planted.assert_no_verdict("start_failed", clean.code),
                clean_out,
                "{argv0}, {what}: {planted:?}"
            );
        }
        // The lie that was believed is forgotten once the run disproved it.
        let _ = fs::remove_file(&entry);
        fs::write(&entry, forged_entry(argv0, argv0, None).to_string()).unwrap();
        env.run(&request, &[])
            .assert_no_verdict("start_failed", clean.code);
        if !argv0.starts_with("/workspace") {
            assert!(!entry.exists(), "{argv0}: a disproved entry was kept");
        }
    }
}
