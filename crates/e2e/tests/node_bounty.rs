//! `node --test` in this repository's `verifier-node` image (Debian's nodejs,
//! `scripts/services.sh`), rehearsed with `manifests/node.example.json` on
//! `fixtures/node-bounty`: the good solution passes in fresh containers and the bad one fails,
//! and `--adversarial` shows what the bare command lets through. Fails loudly when the image or
//! the worker binary is missing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn worker() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"));
    let worker = target.join("debug/worker");
    assert!(
        worker.is_file(),
        "{} is missing; cargo build -p worker",
        worker.display()
    );
    worker
}

/// `manifests/node.example.json` with the image from `.work/images.json` pinned.
fn manifest(dir: &Path) -> PathBuf {
    let root = repo_root();
    let images: Value =
        serde_json::from_slice(&std::fs::read(root.join(".work/images.json")).unwrap()).unwrap();
    let image = images["node"]
        .as_str()
        .expect("no \"node\" in .work/images.json: run scripts/services.sh without --no-node");
    let mut m: Value =
        serde_json::from_slice(&std::fs::read(root.join("manifests/node.example.json")).unwrap())
            .unwrap();
    m["image"] = Value::String(image.to_owned());
    let path = dir.join("node.json");
    std::fs::write(&path, serde_json::to_vec(&m).unwrap()).unwrap();
    path
}

fn rehearse(dir: &Path, solution: &str, extra: &[&str]) -> (i32, Value) {
    let fixtures = repo_root().join("fixtures/node-bounty");
    let output = Command::new(worker())
        .arg("rehearse")
        .arg("--source")
        .arg(fixtures.join(solution))
        .arg("--benchmark")
        .arg(fixtures.join("benchmark"))
        .arg("--manifest")
        .arg(manifest(dir))
        .arg("--staging-root")
        .arg(dir.join("staging"))
        .arg("--json")
        .args(extra)
        .env_remove("REGRESSION_SANDBOX_STAGING_ROOT")
        .output()
        .unwrap();
    let code = output.status.code().unwrap_or(-1);
    let report = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "exit {code}, not json ({e}): {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (code, report)
}

#[test]
fn node_bounty_rehearses_passed_stable_discriminating_and_its_bare_command_is_bypassable() {
    let dir = tempfile::tempdir().unwrap();
    let base = repo_root().join("fixtures/node-bounty/solution-bad");
    let (code, report) = rehearse(
        dir.path(),
        "solution-good",
        &["--repeat", "2", "--base", base.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["stability"], "stable", "{report:#}");
    assert_eq!(report["discrimination"], "discriminates", "{report:#}");
    let base_tail = report["base"]["stdout_tail"].as_str().unwrap_or_default();
    assert!(base_tail.contains("# fail 2"), "{report:#}");

    // `node --test` counts a test file whose process exits 0 as passing: a slug.mjs that exits
    // on import is paid. The rehearsal says so.
    let (code, report) = rehearse(dir.path(), "solution-good", &["--adversarial"]);
    assert_eq!(code, 4, "{report:#}");
    let stubs = report["adversarial"]["stubs"].as_array().unwrap();
    let exit = stubs.iter().find(|s| s["name"] == "exit_on_load").unwrap();
    assert_eq!(exit["outcome"], "bypassed", "{report:#}");
    assert_eq!(exit["replaced"], serde_json::json!(["slug.mjs"]));
}
