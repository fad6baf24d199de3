//! Reproducer from the real-bounty re-run (issue 26): the live platform's own checker-running
//! benchmarks (direct-growth-v2 a2a-agent-card, hermes-integration, openhands-integration;
//! direct-inventory-v1 inventory-breakdown) never write the literal text
//! `/workspace/<path>`: they build the path at run time from
//! `ROOT = Path(os.environ.get("WORKSPACE_ROOT", "/workspace"))` and start the process on
//! another line (`subprocess.run([sys.executable, str(checker)], …)`). This `check.py` has
//! exactly that shape, so the `referenced_programs` stub and `run_by_benchmark` (built for these
//! very bounties) should find `tools/check_card.py`. Today they find nothing: the unsolved tree
//! is "not judged" instead of BYPASSABLE, and the solution's BYPASSABLE line gives the generic
//! advice instead of "ship the checker in the benchmark".
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use std::fs;
use std::path::{Path, PathBuf};

use super::ran::{manifest, ran, rehearse_command, write_card_checker};
use serde_json::Value;

/// The shape of the live bounties' `check.py` (hermes-integration's, cut down).
const LIVE_SHAPE_CHECK_PY: &str = r#"#!/usr/bin/env python3
import os
import subprocess
import sys
from pathlib import Path


ROOT = Path(os.environ.get("WORKSPACE_ROOT", "/workspace"))


def require(path: str) -> Path:
    candidate = ROOT / path
    if not candidate.is_file():
        raise SystemExit(f"missing required file: {path}")
    return candidate


checker = require("tools/check_card.py")
completed = subprocess.run(
    [sys.executable, str(checker)],
    cwd=ROOT,
    text=True,
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    timeout=30,
    check=False,
)
if completed.returncode != 0:
    raise SystemExit(f"smoke failed:\n{completed.stdout[-4000:]}")
print("acceptance checks passed")
"#;

struct Bounty {
    dir: tempfile::TempDir,
    benchmark: PathBuf,
    unsolved: PathBuf,
    solved: PathBuf,
    manifest: PathBuf,
}

fn bounty() -> Bounty {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let benchmark = root.join("benchmark");
    fs::create_dir_all(&benchmark).unwrap();
    fs::write(benchmark.join("check.py"), LIVE_SHAPE_CHECK_PY).unwrap();
    let unsolved = root.join("unsolved");
    fs::create_dir_all(&unsolved).unwrap();
    fs::write(unsolved.join("card.json"), "{}\n").unwrap();
    let solved = root.join("solved");
    write_card_checker(&solved);
    let manifest = manifest(root, "python-unittest.json", "python", |m| {
        m["command"] = serde_json::json!(["python3", "/benchmark/check.py"]);
    });
    Bounty {
        dir,
        benchmark,
        unsolved,
        solved,
        manifest,
    }
}

fn rehearse_json(b: &Bounty, source: &Path, extra: &[&str]) -> Value {
    let args: Vec<&str> = ["--adversarial", "--json"]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    let store = b.dir.path().join("staging");
    let output = rehearse_command(&store, source, &b.benchmark, &b.manifest, &args).output();
    ran(&output.unwrap()).json()
}

#[test]
fn a_live_shaped_checker_benchmark_is_bypassable_on_the_unsolved_tree() {
    let b = bounty();
    let v = rehearse_json(&b, &b.unsolved, &[]);
    let adversarial = &v["adversarial"];
    let referenced = adversarial["stubs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "referenced_programs");
    assert!(
        referenced.is_some_and(|s| s["outcome"] == "bypassed"),
        "the benchmark runs tools/check_card.py from /workspace (ROOT / path), so the \
         referenced_programs stub should be built and pass: {adversarial}"
    );
    assert_eq!(
        adversarial["bypassable"],
        Value::Bool(true),
        "{adversarial}"
    );
}

#[test]
fn a_live_shaped_checker_benchmark_names_the_checker_it_runs_and_the_real_defect() {
    let b = bounty();
    let v = rehearse_json(&b, &b.solved, &["--base", b.unsolved.to_str().unwrap()]);
    assert_eq!(v["verdict"], "passed", "{v}");
    assert_eq!(v["adversarial"]["bypassable"], Value::Bool(true), "{v}");
    let exit_stub = v["adversarial"]["stubs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "exit_on_load")
        .cloned()
        .unwrap();
    assert_eq!(
        exit_stub["run_by_benchmark"],
        serde_json::json!(["tools/check_card.py"]),
        "{exit_stub}"
    );
    let problems = v["problems"].to_string();
    assert!(
        problems.contains("ship the checker in the benchmark"),
        "{problems}"
    );
}

/// The candidates come from the benchmark (the author's), never from the source (the
/// solver's): a source holding files named like the benchmark's strings, and a directory where
/// the checker would be, cannot remove the referenced_programs stub or make it pass less.
#[test]
fn a_source_with_files_named_like_the_benchmarks_strings_does_not_disable_the_detection() {
    let b = bounty();
    let decoy = b.dir.path().join("decoy");
    fs::create_dir_all(decoy.join("tools/check_card.py")).unwrap();
    fs::write(decoy.join("tools/check_card.py/keep"), "x\n").unwrap();
    fs::write(decoy.join("WORKSPACE_ROOT"), "/elsewhere\n").unwrap();
    fs::write(decoy.join("card.json"), "{}\n").unwrap();
    let v = rehearse_json(&b, &decoy, &[]);
    let adversarial = &v["adversarial"];
    let referenced = adversarial["stubs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "referenced_programs")
        .cloned();
    assert!(
        referenced
            .as_ref()
            .is_some_and(|s| s["outcome"] == "bypassed"
                && s["added"] == serde_json::json!(["tools/check_card.py"])),
        "{adversarial}"
    );
    assert_eq!(
        adversarial["bypassable"],
        Value::Bool(true),
        "{adversarial}"
    );
}
