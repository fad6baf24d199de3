//! `node --test` in this repository's `verifier-node` image (Debian's nodejs,
//! `scripts/services.sh`), rehearsed with `manifests/node-test.json` on
//! `fixtures/node-bounty`: the good solution passes in fresh containers and the bad one fails,
//! and `--adversarial` shows what the bare command lets through. Fails loudly when the image or
//! the worker binary is missing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use serde_json::Value;

fn repo_root() -> PathBuf {
    e2e::checkout_root().canonicalize().unwrap()
}

fn worker() -> PathBuf {
    let worker = e2e::checkout_bin_dir().join("worker");
    assert!(
        worker.is_file(),
        "{} is missing; cargo build -p worker",
        worker.display()
    );
    worker
}

/// `manifests/node-test.json` with the image from `.work/images.json` pinned.
fn manifest(dir: &Path) -> PathBuf {
    let root = repo_root();
    let images: Value =
        serde_json::from_slice(&std::fs::read(root.join(".work/images.json")).unwrap()).unwrap();
    let image = images["node"]
        .as_str()
        .expect("no \"node\" in .work/images.json: run scripts/services.sh without --no-node");
    let mut m: Value =
        serde_json::from_slice(&std::fs::read(root.join("manifests/node-test.json")).unwrap())
            .unwrap();
    m["image"] = Value::String(image.to_owned());
    let path = dir.join("node.json");
    std::fs::write(&path, serde_json::to_vec(&m).unwrap()).unwrap();
    path
}

fn rehearse(dir: &Path, solution: &str, extra: &[&str]) -> (i32, Value) {
    let fixtures = repo_root().join("fixtures/node-bounty");
    let output = e2e::rehearse_command(&worker(), &fixtures, solution, &manifest(dir), dir)
        .args(extra)
        .output()
        .unwrap();
    let code = output.status.code().unwrap_or(-1);
    e2e::logscan::assert_json_logs("worker rehearse", &output.stderr);
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
fn node_bounty_discriminates_and_an_exit_stub_keeping_the_export_passes_its_bare_command() {
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

    // exit_on_load's slug.mjs drops the named export, so the ES module fails to link before
    // its `process.exit(0)` could run; exit_on_load_keep_text keeps the export below the exit
    // and is paid (#42 item 1): the bare command is bypassable, exit 9.
    let (code, report) = rehearse(dir.path(), "solution-good", &["--adversarial"]);
    assert_eq!(code, 9, "{report:#}");
    assert_eq!(report["adversarial"]["bypassable"], true, "{report:#}");
    let stubs = report["adversarial"]["stubs"].as_array().unwrap();
    let outcome = |name: &str| {
        stubs
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| s["outcome"].clone())
    };
    assert_eq!(outcome("exit_on_load"), Some("held".into()), "{report:#}");
    assert_eq!(
        outcome("exit_on_load_keep_text"),
        Some("bypassed".into()),
        "{report:#}"
    );
    // The same cheat written by hand, as fixtures/node-bounty/README.md shows it: a slug.mjs
    // that keeps the export and exits 0 when evaluated is paid by the bare `node --test`
    // command (the test file's process exited 0: one passing "test").
    let stub = dir.path().join("exporting-exit-stub");
    std::fs::create_dir(&stub).unwrap();
    std::fs::write(
        stub.join("slug.mjs"),
        "export function slugify() { return \"\"; }\nprocess.exit(0);\n",
    )
    .unwrap();
    let (code, report) = rehearse(dir.path(), stub.to_str().unwrap(), &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["verdict"], "passed", "{report:#}");
}
