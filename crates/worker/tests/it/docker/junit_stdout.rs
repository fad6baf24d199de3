//! JUnit XML a runner writes to `/dev/stdout` (pytest `--junitxml=/dev/stdout`) is read from the
//! stream in a real container; JUnit written to a file is not read at all. A file cannot be:
//! the container's root is read-only and its `/tmp` is a tmpfs that is gone when the container
//! is removed, so reading it after the run would need a writable mount the worker keeps, which
//! weakens the bounded profile. The repo's Python image has no pytest, so the benchmark replays
//! a real pytest 9.2 run recorded with `--junitxml=/dev/stdout` (`test-outcomes`' fixture
//! `pytest-junit-dev-stdout.stdout`) the way pytest writes it: it opens `/dev/stdout` as a file.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::per_test::{fixture, manifest, ran, rehearse};
use crate::support::workspace_root;

/// A benchmark whose `run.py` prints the recorded run's progress line, writes its JUnit
/// document to `xml_path` by opening that path (as pytest's `LogXML` does), then prints the
/// rest of the recorded output and exits 1, as that pytest run did.
fn replay_benchmark(dir: &Path, name: &str, xml_path: &str) -> (PathBuf, PathBuf) {
    let recorded = fs::read_to_string(
        workspace_root().join("crates/test-outcomes/tests/fixtures/pytest-junit-dev-stdout.stdout"),
    )
    .unwrap();
    let start = recorded.find("<?xml").unwrap();
    let end = recorded.find("</testsuites>").unwrap() + "</testsuites>".len();
    let bench = dir.join(name);
    fs::create_dir(&bench).unwrap();
    fs::write(bench.join("progress.txt"), &recorded[..start]).unwrap();
    fs::write(bench.join("junit.xml"), &recorded[start..end]).unwrap();
    fs::write(bench.join("after.txt"), &recorded[end..]).unwrap();
    fs::write(
        bench.join("run.py"),
        format!(
            "import sys\n\
             def read(name):\n    \
                 with open('/benchmark/' + name, encoding='utf-8') as f:\n        \
                     return f.read()\n\
             sys.stdout.write(read('progress.txt'))\n\
             sys.stdout.flush()\n\
             with open({xml_path:?}, 'w', encoding='utf-8') as xml:\n    \
                 xml.write(read('junit.xml'))\n\
             sys.stdout.write(read('after.txt'))\n\
             sys.exit(1)\n"
        ),
    )
    .unwrap();
    let manifest = manifest(dir, "python-unittest.json", "python", |m| {
        m["command"] = json!(["python3", "-I", "-B", "/benchmark/run.py"]);
    });
    (bench, manifest)
}

fn first_run_tests(dir: &Path, bench: &Path, manifest: &Path) -> Value {
    let ran = ran(&rehearse(
        dir,
        &fixture("python-bounty/solution-good"),
        bench,
        manifest,
        &["--json"],
    )
    .output()
    .unwrap());
    let json = ran.json();
    assert_eq!(json["verdict"], "failed", "{json}");
    let run = &json["runs"][0];
    assert_eq!(run["exit_code"], 1, "{json}");
    run["tests"].clone()
}

#[test]
fn junit_a_runner_writes_to_dev_stdout_is_read_from_the_containers_stream() {
    let dir = tempfile::tempdir().unwrap();
    let (bench, manifest) = replay_benchmark(dir.path(), "junit-stdout", "/dev/stdout");
    let tests = first_run_tests(dir.path(), &bench, &manifest);
    assert_eq!(tests["runner"], "junit-xml", "{tests}");
    assert_eq!(tests["source"], "solver-controlled-output");
    assert_eq!(
        tests["counts"],
        json!({"passed": 5, "failed": 2, "skipped": 3, "error": 1}),
        "{tests}"
    );
    // Failing first: the setup error, then the two failures.
    let names: Vec<&str> = tests["tests"]
        .as_array()
        .unwrap()
        .iter()
        .take(3)
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "test_sample.test_errors_in_setup",
            "test_sample.test_fails",
            "test_sample.test_param[2]"
        ],
        "{tests}"
    );
}

#[test]
fn junit_a_runner_writes_to_a_file_is_not_read_and_the_tests_are_unknown() {
    let dir = tempfile::tempdir().unwrap();
    // /tmp is the container's tmpfs: writable during the run, gone with the container.
    let (bench, manifest) = replay_benchmark(dir.path(), "junit-file", "/tmp/junit.xml");
    let tests = first_run_tests(dir.path(), &bench, &manifest);
    assert_eq!(tests["runner"], "unknown", "{tests}");
    assert_eq!(tests["tests"], json!([]), "{tests}");
}
