//! Defects of `rehearse --batch` found by the real-bounty re-run (issue 26): the batch row did
//! not say `(matches the manifest)` for a checked `benchmark_digest` as the single report does,
//! and JUnit's per-task `time` counted only the solution and base containers (0.15–0.70 s for
//! tasks that took about 5 s each), not the task's whole wall time.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::support::{image, workspace_root};
use serde_json::{Value, json};

const EXAMPLE_BENCHMARK_DIGEST: &str =
    "sha256:f6630a1c99d3a6f27f0505b6e04890a9bbe973a78b2e9c0ff89580dae2967849";

fn busybox_manifest(dir: &Path, name: &str, digest: Option<&str>) -> String {
    let text = fs::read_to_string(workspace_root().join("manifests/busybox-cmp.json")).unwrap();
    let mut value: Value = serde_json::from_str(&text).unwrap();
    value["image"] = json!(image("busybox"));
    if let Some(digest) = digest {
        value["benchmark_digest"] = json!(digest);
    }
    fs::write(dir.join(name), serde_json::to_vec(&value).unwrap()).unwrap();
    name.to_owned()
}

/// Milliseconds since the epoch of one evidence record's start and finish.
fn span(evidence: &Value) -> (u64, u64) {
    let path = evidence
        .as_str()
        .unwrap_or_else(|| panic!("no evidence path: {evidence}"));
    let record: Value = serde_json::from_slice(&fs::read(path).unwrap()).unwrap();
    let times = &record["timestamps"];
    (
        times["start_ms"].as_u64().unwrap(),
        times["finish_ms"].as_u64().unwrap(),
    )
}

#[test]
fn batch_rows_mark_a_checked_digest_and_junit_time_is_each_tasks_whole_wall_time() {
    let dir = tempfile::tempdir().unwrap();
    let example = workspace_root().join("fixtures/example");
    let placeholder = busybox_manifest(dir.path(), "placeholder.json", None);
    let committed = busybox_manifest(dir.path(), "committed.json", Some(EXAMPLE_BENCHMARK_DIGEST));
    let tasks = dir.path().join("tasks.json");
    fs::write(
        &tasks,
        serde_json::to_vec_pretty(&json!({"tasks": [
            {"name": "committed", "source": example.join("source-pass"),
             "benchmark": example.join("benchmark"), "manifest": committed,
             "base": example.join("source-fail"), "adversarial": true},
            {"name": "placeholder", "source": example.join("source-pass"),
             "benchmark": example.join("benchmark"), "manifest": placeholder},
        ]}))
        .unwrap(),
    )
    .unwrap();
    let junit = dir.path().join("junit.xml");
    let batch = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_worker"))
            .arg("rehearse")
            .arg("--batch")
            .arg(&tasks)
            .arg("--staging-root")
            .arg(dir.path().join("store"))
            .args(extra)
            .env_remove("REGRESSION_SANDBOX_STAGING_ROOT")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_ne!(
            out.status.code(),
            Some(5),
            "needs the Docker daemon: {stderr}"
        );
        (stdout, stderr)
    };

    // (a) The row says what the single report says about the benchmark digest.
    let (human, stderr) = batch(&[]);
    let row = |name: &str| {
        human
            .lines()
            .find(|l| l.starts_with(&format!("  {name} ")))
            .unwrap_or_else(|| panic!("no row for {name}: {human}{stderr}"))
            .to_owned()
    };
    assert!(
        row("committed").contains("benchmark sha256:f6630a1c99d3… (matches the manifest)"),
        "{human}"
    );
    assert!(
        row("placeholder").contains("benchmark sha256:f6630a1c99d3… (filled in"),
        "{human}"
    );

    // (b) JUnit's time of a task covers every container the task ran: at least the span from
    // the first container's start to the last one's finish (here the stubs'), which lies
    // wholly inside the task. Read from the same run's JSON and evidence, so no clock race.
    let (json, stderr) = batch(&["--json", "--junit", junit.to_str().unwrap()]);
    let report: Value =
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("not json ({e}): {json}{stderr}"));
    let task = &report["tasks"][0];
    // The batch JSON has no per-run list; the stubs' evidence records are enough.
    let mut spans: Vec<(u64, u64)> = Vec::new();
    for stub in task["adversarial"]["stubs"].as_array().unwrap() {
        if stub["status"] != "not_run" {
            spans.push(span(&stub["evidence_path"]));
        }
    }
    assert!(spans.len() >= 2, "{task}");
    let first = spans.iter().map(|s| s.0).min().unwrap();
    let last = spans.iter().map(|s| s.1).max().unwrap();
    let xml = fs::read_to_string(&junit).unwrap();
    let time = xml
        .lines()
        .find(|l| l.contains("<testcase name=\"committed\""))
        .and_then(|l| l.split("time=\"").nth(1))
        .and_then(|t| t.split('"').next())
        .and_then(|t| t.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no time for the committed task: {xml}"));
    let covered = (last - first) as f64 / 1000.0;
    assert!(
        time + 0.001 >= covered,
        "JUnit time {time} s is less than the {covered} s from the task's first container start \
         to its last finish: {xml}"
    );
}
