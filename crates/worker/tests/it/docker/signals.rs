//! SIGINT and SIGTERM during a run (real binary, real Docker): each mode that runs containers
//! (`--run-regression`, `feed`, `rehearse`) stops, kills and removes its container, writes no
//! verdict (no outcome, evidence, candidate, statement or cache entry), says what it
//! interrupted, and exits 130 (SIGINT) or 143 (SIGTERM). The benchmark sleeps, so the signal
//! always lands while its container runs.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use super::in_toto::run_regression_with_in_toto;
use crate::example_feed::{ExampleFeed, commit, example, feed_args};
use crate::feed_support::*;
use crate::support;
use crate::support::docker_cli as docker;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use verifier_sdk::fixtures::{JobParams, job_value, sample_manifest};

const WORKER: &str = env!("CARGO_BIN_EXE_worker");
const SLEEP: [&str; 2] = ["/bin/sleep", "120"];

/// Ids of containers (any state) whose owner label names process `pid`.
fn containers_of(pid: u32) -> Vec<String> {
    docker(&[
        "ps",
        "-a",
        "--no-trunc",
        "--filter",
        "label=dev.agent-bounties.verifier=1",
        "--format",
        "{{.ID}} {{.State}} {{.Label \"dev.agent-bounties.owner\"}}",
    ])
    .lines()
    .filter_map(|line| {
        let mut parts = line.split(' ');
        let (id, _state, owner) = (parts.next()?, parts.next()?, parts.next()?);
        (owner.split('/').nth(2)? == pid.to_string()).then(|| id.to_owned())
    })
    .collect()
}

/// Waits until the child has a running container, and returns its id.
fn running_container(child: &mut Child) -> String {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = std::mem::replace(child, Command::new("true").spawn().unwrap());
            panic!(
                "worker ended ({status}) before its container ran: {:?}",
                out.wait_with_output()
            );
        }
        let running = docker(&[
            "ps",
            "--no-trunc",
            "--filter",
            "label=dev.agent-bounties.verifier=1",
            "--filter",
            "status=running",
            "--format",
            "{{.ID}} {{.Label \"dev.agent-bounties.owner\"}}",
        ]);
        let mine = running.lines().find_map(|line| {
            let (id, owner) = line.split_once(' ')?;
            (owner.split('/').nth(2)? == child.id().to_string()).then(|| id.to_owned())
        });
        if let Some(id) = mine {
            return id;
        }
        assert!(Instant::now() < deadline, "no container appeared");
        std::thread::sleep(Duration::from_millis(200));
    }
}

struct Ended {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Sends `signal` once the child's container runs, and collects how it ended.
fn interrupt(mut child: Child, signal: &str) -> (Ended, String, u32) {
    let container = running_container(&mut child);
    let pid = child.id();
    let kill = Command::new("kill")
        .args(["-s", signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(60), "slow to stop");
    (
        Ended {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        },
        container,
        pid,
    )
}

/// Starts `command` on the default Docker socket, interrupts it with `signal` once its
/// container runs, and checks that it stopped cleanly with exit `code`.
fn interrupted_cleanly(command: &mut Command, signal: &str, code: i32) -> Ended {
    let child = command
        .env_remove("DOCKER_HOST")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (ended, container, pid) = interrupt(child, signal);
    assert_stopped_cleanly(&ended, &container, pid, signal, code);
    ended
}

fn assert_stopped_cleanly(ended: &Ended, container: &str, pid: u32, signal: &str, code: i32) {
    assert_eq!(
        ended.code,
        Some(code),
        "exit code; stderr: {}",
        ended.stderr
    );
    assert!(
        ended
            .stderr
            .contains(&format!("interrupted by SIG{signal}")),
        "no message: {}",
        ended.stderr
    );
    assert!(
        ended.stderr.contains(&container[..12]) && ended.stderr.contains("confirmed"),
        "the message names the removed container: {}",
        ended.stderr
    );
    assert!(
        containers_of(pid).is_empty(),
        "containers of {pid} left behind"
    );
    let left = docker(&[
        "ps",
        "-a",
        "-q",
        "--no-trunc",
        "--filter",
        &format!("id={container}"),
    ]);
    assert!(left.trim().is_empty(), "container {container} still exists");
}

fn run_regression_interrupted(signal: &str, code: i32) {
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let root = dir.path().join("staging");
    let benchmark = support::stage_digest(&root, "benchmark", &example("benchmark"));
    let source = support::stage_digest(&root, "source", &example("source-pass"));
    let mut manifest = sample_manifest();
    manifest["image"] = json!(support::busybox());
    manifest["command"] = json!(SLEEP);
    manifest["benchmark_digest"] = json!(benchmark);
    manifest["timeout_seconds"] = json!(300);
    let job = job_value(&JobParams {
        source_snapshot_digest: source,
        manifest,
        ..JobParams::default()
    });
    let (mut command, statement) = run_regression_with_in_toto(dir.path(), &root, &job);
    let ended = interrupted_cleanly(&mut command, signal, code);
    assert!(
        ended.stdout.is_empty(),
        "an outcome was printed: {}",
        ended.stdout
    );
    assert!(!root.join("evidence").exists(), "evidence was written");
    assert!(!statement.exists(), "an in-toto statement was written");
}

#[test]
fn sigint_during_run_regression_removes_the_container_and_exits_130() {
    run_regression_interrupted("INT", 130);
}

#[test]
fn sigterm_during_run_regression_removes_the_container_and_exits_143() {
    run_regression_interrupted("TERM", 143);
}

fn rehearse_interrupted(signal: &str, code: i32) {
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let mut manifest = sample_manifest();
    manifest["image"] = json!(support::busybox());
    manifest["command"] = json!(SLEEP);
    manifest["benchmark_digest"] = json!(format!("sha256:{}", "0".repeat(64)));
    manifest["timeout_seconds"] = json!(300);
    let path = dir.path().join("m.json");
    fs::write(&path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let root = dir.path().join("staging");
    let ended = interrupted_cleanly(
        Command::new(WORKER)
            .args(["rehearse", "--json", "--worktree", "--source"])
            .arg(example("source-pass"))
            .arg("--benchmark")
            .arg(example("benchmark"))
            .arg("--manifest")
            .arg(&path)
            .arg("--staging-root")
            .arg(&root),
        signal,
        code,
    );
    // With --json the one stdout value is the error object, not a report.
    let v: Value = serde_json::from_str(ended.stdout.trim()).unwrap();
    assert_eq!(v["error"]["exit_code"], code, "{v}");
    assert!(v.get("verdict").is_none(), "{v}");
    assert!(!root.join("evidence").exists(), "evidence was written");
}

#[test]
fn sigint_during_rehearse_removes_the_container_and_exits_130() {
    rehearse_interrupted("INT", 130);
}

#[test]
fn sigterm_during_rehearse_removes_the_container_and_exits_143() {
    rehearse_interrupted("TERM", 143);
}

fn feed_interrupted(signal: &str, code: i32) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let feed = runtime.block_on(ExampleFeed::new(&["work", "staging", "cache", "out"]));
    fs::set_permissions(feed.tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let tree = example("source-pass");
    let mut job = feed.job_running(
        1,
        codeload_dir(&format!("sol-1-{}", commit(1)), "", &tree),
        dir_digest(&tree),
        &SLEEP,
    );
    job["terms"]["document"]["benchmark"]["runner_manifest"]["timeout_seconds"] = json!(300);
    verifier_sdk::fixtures::rehash(&mut job);
    feed.serve_jobs(&[&job]);
    interrupted_cleanly(
        feed_args(
            &mut Command::new(WORKER),
            &feed.server.base,
            &feed.path("out"),
            &feed.path("work"),
            &feed.path("staging"),
        )
        .arg("--cache-dir")
        .arg(feed.path("cache"))
        .env_remove("GITHUB_SHA"),
        signal,
        code,
    );
    let out: Vec<_> = fs::read_dir(feed.path("out")).unwrap().collect();
    assert!(out.is_empty(), "the feed wrote {out:?}");
    let cache: Vec<_> = fs::read_dir(feed.path("cache")).unwrap().collect();
    assert!(cache.is_empty(), "the feed cached {cache:?}");
    drop(feed);
}

#[test]
fn sigint_during_feed_writes_no_candidate_or_cache_entry_and_exits_130() {
    feed_interrupted("INT", 130);
}

#[test]
fn sigterm_during_feed_writes_no_candidate_or_cache_entry_and_exits_143() {
    feed_interrupted("TERM", 143);
}
