//! Machine-facing conventions of the worker binary: under `--json` a failure still prints one
//! JSON value on stdout (the error object) besides the stderr line; `explain --json` has its
//! own schema id and is refused as evidence; completions come from the clap definition; an
//! unreachable engine is explained in the operator's terms; a bare `worker` lists every mode.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use super::example_run::ExampleRequest;

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};
use verifier_sdk::fixtures::{JobParams, job_value};

const WORKER: &str = env!("CARGO_BIN_EXE_worker");

fn worker(args: &[&str]) -> Output {
    Command::new(WORKER)
        .args(args)
        .env_remove("DOCKER_HOST")
        .output()
        .unwrap()
}

/// Asserts exit `code`, a `worker: error:` line on stderr, and exactly one JSON value on stdout:
/// the error object with the exit code's name. Returns its message.
fn assert_json_error(out: &Output, code: i32, name: &str) -> String {
    assert_eq!(out.status.code(), Some(code), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("error"), "{stderr}");
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["schema_version"], "agent-bounties/cli-error-v1", "{v}");
    assert_eq!(v["error"]["code"], name, "{v}");
    assert_eq!(v["error"]["exit_code"], code, "{v}");
    v["error"]["message"].as_str().unwrap().to_owned()
}

#[test]
fn json_failures_print_an_error_object_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.json");
    // explain: unreadable record (4).
    let out = worker(&["explain", "--json", missing.to_str().unwrap()]);
    let message = assert_json_error(&out, 4, "invalid_input");
    assert!(message.contains("missing.json"), "{message}");
    // gc: a staging root that is a file (78).
    let file = dir.path().join("file");
    fs::write(&file, b"x").unwrap();
    let out = worker(&[
        "gc",
        "--json",
        "--older-than",
        "1d",
        "--staging-root",
        file.to_str().unwrap(),
    ]);
    assert_json_error(&out, 78, "config");
    // clap's own refusal (2), before any value is parsed.
    let out = worker(&["gc", "--json", "--older-than", "soon"]);
    let message = assert_json_error(&out, 2, "usage");
    assert!(message.contains("soon"), "{message}");
    // rehearse: a manifest that does not exist (4).
    let out = worker(&[
        "rehearse",
        "--json",
        "--source",
        dir.path().to_str().unwrap(),
        "--benchmark",
        dir.path().to_str().unwrap(),
        "--manifest",
        missing.to_str().unwrap(),
        "--staging-root",
        dir.path().join("staging").to_str().unwrap(),
    ]);
    assert_json_error(&out, 4, "invalid_input");
    // Without --json stdout stays empty.
    let out = worker(&["explain", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(4));
    assert!(out.stdout.is_empty(), "{out:?}");
}

/// A real evidence record from a real run, for `explain`.
fn evidence_record(dir: &Path) -> std::path::PathBuf {
    ExampleRequest::failing_run_evidence(dir, &[]).1
}

#[test]
fn explain_json_has_its_own_schema_and_is_not_taken_for_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let evidence = evidence_record(dir.path());
    let record: Value = serde_json::from_slice(&fs::read(&evidence).unwrap()).unwrap();
    assert_eq!(
        record["schema_version"],
        "agent-bounties/regression-evidence-v1"
    );
    let out = worker(&["explain", "--json", evidence.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        summary["schema_version"],
        "agent-bounties/regression-explain-v1"
    );
    assert_ne!(summary["schema_version"], record["schema_version"]);
    let again = dir.path().join("summary.json");
    fs::write(&again, &out.stdout).unwrap();
    let out = worker(&["explain", "--json", again.to_str().unwrap()]);
    let message = assert_json_error(&out, 4, "invalid_input");
    assert!(message.contains("regression-explain-v1"), "{message}");
}

#[test]
fn completions_cover_every_subcommand_for_bash_zsh_and_fish() {
    for shell in ["bash", "zsh", "fish"] {
        let out = worker(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}: {out:?}");
        let script = String::from_utf8(out.stdout).unwrap();
        for word in [
            "rehearse",
            "explain",
            "feed",
            "gc",
            "request",
            // fish spells long flags `-l run-regression`; bash and zsh `--run-regression`.
            "run-regression",
            "older-than",
        ] {
            assert!(script.contains(word), "{shell} completion lacks {word}");
        }
    }
    let bash = String::from_utf8(worker(&["completions", "bash"]).stdout).unwrap();
    let syntax = Command::new("bash")
        .args(["-n", "-c", &bash])
        .output()
        .unwrap();
    assert!(syntax.status.success(), "{syntax:?}");
    assert_eq!(worker(&["completions", "tcsh"]).status.code(), Some(2));
}

#[test]
fn an_unreachable_engine_names_the_endpoint_and_docker_host() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("staging");
    fs::create_dir(&root).unwrap();
    let request = dir.path().join("request.json");
    let job = job_value(&JobParams::default());
    fs::write(&request, serde_json::to_vec(&json!({"job": job})).unwrap()).unwrap();
    let out = Command::new(WORKER)
        .arg("--run-regression")
        .arg(&request)
        .env("REGRESSION_SANDBOX_STAGING_ROOT", &root)
        .env("DOCKER_HOST", "tcp://127.0.0.1:9")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let detail = v["no_verdict"]["detail"].as_str().unwrap();
    for part in [
        "tcp://127.0.0.1:9",
        "not answering",
        "DOCKER_HOST",
        "refused",
    ] {
        assert!(detail.contains(part), "{part:?} missing from {detail:?}");
    }
    assert!(!detail.contains("hyper"), "{detail}");
}

#[test]
fn a_bare_worker_lists_every_mode() {
    let out = worker(&[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    for mode in [
        "--snapshot-directory",
        "--run-regression",
        "plan",
        "feed",
        "rehearse",
        "explain",
        "gc",
        "request",
        "completions",
    ] {
        assert!(stderr.contains(mode), "{mode} missing: {stderr}");
    }
}
