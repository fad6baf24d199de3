//! The protocol's own example bounty, a Rust crate run with `cargo test --locked --target-dir
//! /tmp/target` under the example manifest's limits (120 s, one CPU, 512 MiB, a 256 MiB
//! tmpfs), on the real local services: `fixtures/rust-bounty` in the digest-pinned
//! `verifier-rust` image (Debian's cargo and rustc, `scripts/services.sh`), rehearsed with
//! `worker rehearse` and then played end to end (feed, worker, two signers, keeper, chain).
//! Fails loudly when the image, the chain or the binaries are missing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Output;

use e2e::{E2eConfig, Stack};
use serde_json::Value;

mod common;

fn config() -> E2eConfig {
    E2eConfig::for_checkout("e2e-rust-test").unwrap_or_else(|e| panic!("{e}"))
}

/// `manifests/rust-cargo.json` with the locally built image pinned, written to `dir`.
fn rust_manifest(cfg: &E2eConfig, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(cfg.repo_root.join("manifests/rust-cargo.json")).unwrap();
    let mut manifest: Value = serde_json::from_str(&text).unwrap();
    manifest["image"] = Value::String(Stack::Rust.image(cfg).unwrap().to_owned());
    let path = dir.join("rust.json");
    std::fs::write(&path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    path
}

fn rehearse(cfg: &E2eConfig, dir: &Path, solution: &str, extra: &[&str]) -> (i32, String, Value) {
    let fixtures = Stack::Rust.fixtures(&cfg.repo_root);
    let worker = cfg.bin_dir.join("worker");
    let manifest = rust_manifest(cfg, dir);
    let output: Output = e2e::rehearse_command(&worker, &fixtures, solution, &manifest, dir)
        .arg("--log-dir")
        .arg(dir.join("logs"))
        .args(extra)
        .output()
        .unwrap();
    let code = output.status.code().unwrap_or(-1);
    e2e::logscan::assert_json_logs("worker rehearse", &output.stderr);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let report = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "exit {code}, stdout is not json ({e}): {}\n{stderr}",
            String::from_utf8_lossy(&output.stdout)
        )
    });
    (code, stderr, report)
}

/// Every file under `dir` (the `--log-dir` of a rehearsal), concatenated.
fn read_all(dir: &Path) -> String {
    let mut out = String::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.push_str(&read_all(&path));
        } else {
            out.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
        }
    }
    out
}

/// What `worker rehearse --json` says about every run: the verdicts in order.
fn verdicts(report: &Value) -> Vec<String> {
    report["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap_or("none").to_owned())
        .collect()
}

/// The good solution passes twice in fresh containers under the seed's limits, the bad one
/// (the unsolved base) fails: passed, stable, discriminating, exit 0. The bad solution alone
/// fails with the test that catches it named in the output.
#[test]
fn rust_bounty_rehearses_passed_stable_discriminating_under_the_seed_limits() {
    let cfg = config();
    let dir = tempfile::tempdir().unwrap();
    let base = Stack::Rust
        .fixtures(&cfg.repo_root)
        .join("solution-bad")
        .to_str()
        .unwrap()
        .to_owned();
    let (code, stderr, report) = rehearse(
        &cfg,
        dir.path(),
        "solution-good",
        &["--repeat", "2", "--base", &base],
    );
    assert_eq!(code, 0, "{report:#}\n{stderr}");
    assert_eq!(report["stability"], "stable", "{report:#}");
    assert_eq!(report["discrimination"], "discriminates", "{report:#}");
    assert_eq!(verdicts(&report), ["passed", "passed"], "{report:#}");
    assert_eq!(report["base"]["status"], "failed", "{report:#}");
    let logs = read_all(&dir.path().join("logs"));
    // cargo compiled the vendored dependency offline and ran the benchmark's six tests.
    assert!(logs.contains("Compiling hex v0.4.3"), "{logs}");
    assert!(
        logs.contains("test result: ok. 6 passed; 0 failed"),
        "{logs}"
    );

    let (code, _, report) = rehearse(&cfg, dir.path(), "solution-bad", &[]);
    assert_eq!(code, 4, "{report:#}");
    assert_eq!(verdicts(&report), ["failed"], "{report:#}");
    let tail = report["runs"][0]["stdout_tail"]
        .as_str()
        .unwrap_or_default();
    assert!(tail.contains("shorthand_doubles_each_digit"), "{report:#}");
}

/// The whole bounty with the Rust fixture: the good solution settles and pays the solver, the
/// bad one is rejected. One test for both: they share the keeper's dev account (and nonce).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_bounty_settles_with_the_good_solution_and_rejects_the_bad_one() {
    let cfg = config();
    let logs = tempfile::tempdir().unwrap();
    assert!(e2e::capture_logs(logs.path()));
    common::settle_then_reject(&cfg, Stack::Rust).await;
    let scan = e2e::scan_captured().unwrap().unwrap();
    let problems = scan.problems(1);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let per = scan.per_binary();
    for binary in ["worker", "signer", "keeper"] {
        assert!(
            per.contains_key(binary),
            "no {binary} process kept: {per:?}"
        );
    }
}
