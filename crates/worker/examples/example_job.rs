//! Builds a complete, hash-consistent verification job for the bundled example (or any staged
//! trees) and prints it as a `--run-regression` request, `{"job": …}`.
//!
//! Bounty authors and solvers use it to rehearse the exact request a platform would send;
//! `scripts/example.sh` uses it because the example's image digest is built on this machine,
//! so the manifest (and with it every terms hash) cannot be committed ahead of time.
//!
//! Usage: `example_job <image@sha256:…> <source-digest> <benchmark-digest> <argv0> [args…]`

use serde_json::json;
use verifier_sdk::fixtures::{JobParams, job_value, sample_manifest};

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [image, source, benchmark, command @ ..] = args.as_slice() else {
        eprintln!(
            "usage: example_job <image@sha256:…> <source-digest> <benchmark-digest> <argv0> [args…]"
        );
        return std::process::ExitCode::from(2);
    };
    if command.is_empty() {
        eprintln!("example_job: a command is required");
        return std::process::ExitCode::from(2);
    }
    let mut manifest = sample_manifest();
    manifest["image"] = json!(image);
    manifest["command"] = json!(command);
    manifest["benchmark_digest"] = json!(benchmark);
    manifest["timeout_seconds"] = json!(60);
    let params = JobParams {
        source_snapshot_digest: source.clone(),
        manifest,
        ..JobParams::default()
    };
    let job = job_value(&params);
    match verifier_sdk::validate_job(&job, worker::commands::now_unix()) {
        Ok(_) => {
            println!("{}", json!({ "job": job }));
            std::process::ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("example_job: the job would be invalid: {error}");
            std::process::ExitCode::from(4)
        }
    }
}
