//! #43 gap 6: `worker feed --pull` pulls a missing image inside the job's run, after the batch
//! was planned, so the deadline estimate must count that pull for a job whose image the engine
//! does not hold. The feed is a real HTTP server on loopback; the engine is the scripted one
//! of `worker-sandbox` (`fake-engine`) under the real lifecycle and the real
//! `SandboxJobExecutor`; the clock is injected, so nothing depends on timing.

// Test scaffolding outside #[test] fns: failures should fail loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::row;
use serde_json::{Value, json};
use verifier_sdk::fixtures::{JobParams, job_value, sample_manifest};
use verifier_sdk::oci_runtime::RUNC;
use verifier_sdk::{Address, Network};
use worker_jobs::feed::deadline::SettleCosts;
use worker_jobs::feed::{FeedConfig, FeedReport, SandboxJobExecutor, run_feed};
use worker_sandbox::Executor;
use worker_sandbox::lifecycle::Lifecycle;
use worker_sandbox::lifecycle::fake::{Fake, Script};
use worker_store::clock::ManualClock;

/// The verifier of `JobParams::default()`.
const VERIFIER: &str = "0xbe6292b9e465f549e2363b918d6dd9187038431e";
/// Where the batch starts, on the injected clock.
const NOW: u64 = verifier_sdk::fixtures::NOW + 1000;

fn image(hex: char) -> String {
    format!(
        "ghcr.io/agent-bounties/rust-verifier@sha256:{}",
        hex.to_string().repeat(64)
    )
}

/// A job of `round` on `image` whose window ends `left` s after [`NOW`], with a 60 s timeout.
fn job(round: u64, image: &str, left: u64) -> Value {
    let mut manifest = sample_manifest();
    manifest["image"] = json!(image);
    manifest["timeout_seconds"] = json!(60);
    job_value(&JobParams {
        round,
        expires_at: NOW + left,
        manifest,
        ..JobParams::default()
    })
}

/// pull 300 + staging 10 + timeout 60 + signing 20 + relay 30: 420 s with a pull, 120 s
/// without.
fn costs() -> SettleCosts {
    SettleCosts {
        pull: Duration::from_secs(300),
        staging: Duration::from_secs(10),
        signing: Duration::from_secs(20),
        relay: Duration::from_secs(30),
        at_risk_margin: Duration::from_secs(60),
    }
}

/// Runs one `worker feed` batch over `jobs` with an engine holding only `held`, pulling
/// missing images when `pull`; returns the report and the engine.
async fn batch(jobs: Vec<Value>, held: &[String], pull: bool) -> (FeedReport, Fake) {
    let listed = serde_json::to_vec(&jobs).unwrap();
    // The feed lists the jobs; every archive is missing (404), so a started job ends there,
    // before the engine is asked anything.
    let api = test_http::serve(move |request| {
        let body = listed.clone();
        async move {
            Some(if request.target().contains("verification-jobs") {
                test_http::Response::ok(body)
            } else {
                test_http::Response::not_found(b"{}".to_vec())
            })
        }
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut config = FeedConfig::new(
        &api,
        Network::BaseMainnet,
        vec![VERIFIER.parse::<Address>().unwrap()],
        &dir.path().join("out"),
    );
    config.archive_base = format!("{api}/archives");
    config.work_dir = dir.path().join("work");
    std::fs::create_dir_all(&config.work_dir).unwrap();
    config.progress = false;
    config.settle = costs();
    config.clock = Arc::new(ManualClock::new(i64::try_from(NOW).unwrap() * 1000));
    let fake = Fake::new(Script {
        held_images: Some(held.to_vec()),
        ..Script::default()
    });
    let lifecycle = Lifecycle::connect(fake.clone(), RUNC).await.unwrap();
    let executor =
        SandboxJobExecutor::new(Executor::new(lifecycle), dir.path().join("staging"), pull);
    let report = run_feed(&config, &executor).await.unwrap();
    drop(dir);
    (report, fake)
}

/// 400 s left fits the 120 s a job needs with its image here, not the 420 s with a pull: with
/// `--pull` and an engine that does not hold the image, the job is `window_too_short` with the
/// pull in its figures and never reaches the engine's pull; the job beside it, whose image is
/// here, starts. The engine is asked once per distinct image (two jobs share the missing one).
/// Before: the batch counted every image as present, so the job was started and its pull
/// would have eaten the window.
#[tokio::test]
async fn a_job_whose_missing_image_must_be_pulled_first_is_window_too_short_with_the_pull() {
    let (missing, here) = (image('d'), image('e'));
    let jobs = vec![
        job(1, &missing, 400),
        job(2, &here, 400),
        job(3, &missing, 400),
    ];
    let (report, fake) = batch(jobs.clone(), std::slice::from_ref(&here), true).await;
    for pulled in [&jobs[0], &jobs[2]] {
        common::assert_window_too_short(&report, pulled, &["ends in 400 s", "420 s (pull 300 +"]);
    }
    let started = row(&report, &jobs[1]);
    assert_ne!(started.reason_code.as_deref(), Some("window_too_short"));
    let calls = fake.calls();
    assert!(!calls.contains(&"pull"), "{calls:?}");
    assert_eq!(
        calls.iter().filter(|c| **c == "inspect_image").count(),
        2,
        "{calls:?}"
    );
}

/// Without `--pull` a missing image is never pulled (the run is `image_missing` at once), so
/// no pull is counted: the same job is started, not set apart.
#[tokio::test]
async fn without_pull_a_missing_image_costs_the_window_nothing_and_the_job_starts() {
    let missing = job(1, &image('d'), 400);
    let (report, fake) = batch(vec![missing.clone()], &[], false).await;
    let r = row(&report, &missing);
    assert_ne!(r.reason_code.as_deref(), Some("window_too_short"), "{r:?}");
    assert!(!fake.calls().contains(&"pull"));
}
