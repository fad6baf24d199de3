//! Rehearsals over worker-sandbox's scripted engine (its `fake-engine` feature): the whole
//! rehearse path (manifest, staging, the run step's spec, the lifecycle, the report) with no
//! daemon, so what a rehearsal reports for each way a run can end is tested in this crate
//! rather than only by the binary's serial Docker tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use verifier_sdk::fixtures::sample_manifest;
use verifier_sdk::oci_runtime::RUNC;
use worker_rehearse::verdict::Verdict;
use worker_rehearse::{RehearseOptions, prepare, rehearse};
use worker_sandbox::Executor;
use worker_sandbox::lifecycle::Lifecycle;
use worker_sandbox::lifecycle::fake::{Fake, Script};

fn options(dir: &Path) -> RehearseOptions {
    let (source, benchmark, staging) = (
        dir.join("source"),
        dir.join("benchmark"),
        dir.join("staging"),
    );
    for tree in [&source, &benchmark, &staging] {
        std::fs::create_dir_all(tree).unwrap();
    }
    std::fs::write(source.join("lib.rs"), "pub fn answer() -> u32 { 42 }\n").unwrap();
    std::fs::write(benchmark.join("test.rs"), "#[test] fn t() {}\n").unwrap();
    let manifest = dir.join("manifest.json");
    // The author's first rehearsal: the benchmark digest is the placeholder, filled in from
    // the staged tree.
    let mut value = sample_manifest();
    value["benchmark_digest"] = format!("sha256:{}", "0".repeat(64)).into();
    std::fs::write(&manifest, serde_json::to_vec(&value).unwrap()).unwrap();
    RehearseOptions {
        source,
        benchmark,
        manifest,
        repeat: 1,
        base: None,
        staging_root: staging,
        pull: false,
        rev: "HEAD".into(),
        rev_explicit: false,
        base_rev: None,
        worktree: true,
        quiet: true,
        log_dir: None,
        oci_runtime: RUNC.into(),
        task: None,
    }
}

/// The verdict a one-run rehearsal reports when its container does what `script` says.
async fn verdict_of(script: Script) -> (Verdict, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let options = options(dir.path());
    let prepared = prepare(&options).unwrap();
    let lifecycle = Lifecycle::connect(Fake::new(script), RUNC).await.unwrap();
    let executor = Executor::new(lifecycle);
    let rehearsed = rehearse(&executor, prepared, &options, false)
        .await
        .unwrap();
    (rehearsed.report.verdict, rehearsed.report.problems)
}

#[tokio::test]
async fn a_rehearsal_whose_run_exits_0_on_the_scripted_engine_is_passed() {
    let (verdict, problems) = verdict_of(Script::default()).await;
    assert_eq!(verdict, Verdict::Passed, "{problems:?}");
}

#[tokio::test]
async fn a_rehearsal_whose_run_exits_1_is_failed() {
    let (verdict, problems) = verdict_of(Script {
        exit_code: 1,
        ..Script::default()
    })
    .await;
    assert_eq!(verdict, Verdict::Failed, "{problems:?}");
}

#[tokio::test]
async fn a_rehearsal_whose_run_is_oom_killed_is_no_verdict_never_failed() {
    let (verdict, problems) = verdict_of(Script {
        oom_killed: true,
        ..Script::default()
    })
    .await;
    assert_eq!(verdict, Verdict::NoVerdict, "{problems:?}");
}

#[tokio::test]
async fn a_rehearsal_on_an_engine_without_the_image_is_no_verdict() {
    let (verdict, problems) = verdict_of(Script {
        image_missing: true,
        ..Script::default()
    })
    .await;
    assert_eq!(verdict, Verdict::NoVerdict, "{problems:?}");
}
