//! Issue #50 item 2: what `worker serve` asks the engine per job, against what it may ask once
//! per batch. The feed is a real HTTP server on loopback (the stand-in platform, archives
//! included); the jobs run through the real `SandboxJobExecutor` (staging, the lifecycle,
//! judging, the candidate) over worker-sandbox's scripted engine (`fake-engine`), a fresh
//! scripted container per run, every call of every run recorded. Counts, not times: nothing
//! here depends on how fast the machine is.

// Test scaffolding outside #[test] fns (fakes, builders): failures should fail loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use verifier_sdk::fixtures::EXPIRES_AT;
use verifier_sdk::oci_runtime::RUNC;
use worker_jobs::feed::SandboxJobExecutor;
use worker_sandbox::lifecycle::Lifecycle;
use worker_sandbox::lifecycle::fake::{EachRun, Fake, FreshEachRun, Script};
use worker_sandbox::{Executor, RunHooks, RunReport, SandboxError, SandboxSpec};
use worker_serve::clock::ManualClock;
use worker_serve::images::ImagePolicy;
use worker_serve::shutdown::Shutdown;
use worker_serve::telemetry::Telemetry;
use worker_serve::{prepare, serve_with};

mod common;
use common::{job_at, serve_benchmark, serve_config};
use test_feed::*;

/// A fresh scripted container per run (the fake holds one), each run's engine calls kept;
/// the batch's own calls (images, capacity) go to [`FreshEachRun`]'s default fake.
#[derive(Debug)]
struct FreshEach {
    runs: Arc<Mutex<Vec<Vec<&'static str>>>>,
}

#[async_trait::async_trait]
impl EachRun for FreshEach {
    async fn run(
        &self,
        spec: &SandboxSpec,
        hooks: &dyn RunHooks,
    ) -> Result<RunReport, SandboxError> {
        let fake = Fake::new(Script::default());
        let fresh = Lifecycle::connect(fake.clone(), RUNC).await?;
        let report = fresh.run(spec, hooks).await;
        self.runs.lock().unwrap().push(fake.calls());
        report
    }
}

/// What the batches of one image's jobs asked the engine: each run's calls and the outcome
/// every job's run recorded in the ledger.
struct Served {
    runs: Vec<Vec<&'static str>>,
    outcomes: Vec<Option<String>>,
}

/// Serves batches of the sample manifest's image, `waves[i]` jobs in the i-th, with
/// `parallel` at once. A wave is listed only once the batch before it has ended (its
/// `manifest.json`, written after a batch's last run, is there), so each wave is a batch of
/// its own; each wave is served until every job of it has its readiness record (written
/// after its run).
async fn serve_batches(waves: &[u64], parallel: usize) -> Served {
    let server = TestServer::start().await;
    let bench = serve_benchmark(&server);
    let tmp = tempfile::tempdir().unwrap();
    let images = ImagePolicy {
        min_free: 0,
        ..ImagePolicy::default()
    };
    let config = serve_config(
        &server,
        tmp.path(),
        None,
        parallel,
        Duration::from_secs(60),
        images,
    );
    let now_ms = i64::try_from(EXPIRES_AT - 3_600).unwrap() * 1000;
    let telemetry = Telemetry::new(config.poll_interval, Arc::new(ManualClock::new(now_ms)));
    let prepared = prepare(&config).unwrap();
    let runs = Arc::new(Mutex::new(Vec::new()));
    let sandbox = Executor::new(
        FreshEachRun::new(FreshEach {
            runs: Arc::clone(&runs),
        })
        .await
        .unwrap(),
    );
    let executor = SandboxJobExecutor::new(sandbox.clone(), tmp.path().join("staging"), false);
    let shutdown = Shutdown::never();
    let out = config.feed.out_dir.clone();
    let recorded = |ids: &[String]| {
        ids.iter().all(|id| {
            out.join(verifier_sdk::readiness::readiness_file_name(id))
                .exists()
        })
    };
    let mut listed = Vec::new();
    let drive = async {
        let mut round = 0;
        for (i, wave) in waves.iter().enumerate() {
            if i > 0 {
                let manifest = out.join(worker_jobs::feed::output::MANIFEST_FILE);
                assert!(
                    wait_for(|| manifest.exists()).await,
                    "batch {i} never ended"
                );
                std::fs::remove_file(&manifest).unwrap();
            }
            for _ in 0..*wave {
                round += 1;
                listed.push(job_at(&server, bench, round, EXPIRES_AT + 10_000, |_| {}));
            }
            server.route(&feed_path(VERIFIER), Reply::json(&json!(listed)));
            let ids: Vec<String> = listed
                .iter()
                .map(|j| j["job_id"].as_str().unwrap().to_owned())
                .collect();
            assert!(
                wait_for(|| recorded(&ids)).await,
                "not every job of wave {i} was run"
            );
        }
    };
    tokio::select! {
        r = serve_with(&config, prepared.ledger, &sandbox, &executor, &shutdown, &telemetry) => panic!("serve stopped: {r:?}"),
        () = drive => {}
    }
    let ledger = worker_serve::ledger::Ledger::open(&config.state_dir).unwrap();
    let outcomes = listed
        .iter()
        .map(|job| {
            let id = job["job_id"].as_str().unwrap();
            let runs = ledger.runs(Some(id)).unwrap();
            assert_eq!(runs.len(), 1, "{id}: {runs:?}");
            runs[0].outcome.clone()
        })
        .collect();
    let runs = runs.lock().unwrap().clone();
    Served { runs, outcomes }
}

/// Waits until `done` holds; `false` after a bound far beyond what the service needs (a
/// missing behaviour, not a slow machine: the result does not depend on where it stops).
async fn wait_for(done: impl Fn() -> bool) -> bool {
    for _ in 0..3000 {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

fn tally<'a>(calls: impl IntoIterator<Item = &'a &'static str>) -> BTreeMap<&'static str, usize> {
    let mut tally = BTreeMap::new();
    for call in calls {
        *tally.entry(*call).or_default() += 1;
    }
    tally
}

/// Every run created, started and removed its container and completed, each job with the
/// same outcome: where the image inspect came from changes no verdict.
fn assert_same_verdicts(served: &Served) {
    for run in &served.runs {
        let t = tally(run);
        for call in ["create", "start", "remove"] {
            assert!(t.get(call).is_some_and(|n| *n >= 1), "{call}: {run:?}");
        }
    }
    assert!(
        served.outcomes.iter().all(
            |o| o.as_deref().is_some_and(|o| o.starts_with("completed_"))
                && *o == served.outcomes[0]
        ),
        "{:?}",
        served.outcomes
    );
}

/// Four jobs of one pinned image in one batch, one at a time: the image is inspected once
/// for the batch, not once per job, and every run still gets its verdict, each job the same
/// one. Before: each run inspected the image again before its create (four inspects, one
/// engine round trip a job inside its slot).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_inspects_an_image_once_per_batch_not_once_per_job() {
    let served = serve_batches(&[4], 1).await;
    eprintln!(
        "engine calls per run over 4 jobs: {:?}",
        served.runs.iter().map(tally).collect::<Vec<_>>()
    );
    assert_eq!(served.runs.len(), 4, "{:?}", served.runs);
    let all = tally(served.runs.iter().flatten());
    assert_eq!(all.get("inspect_image"), Some(&1), "{all:?}");
    assert_same_verdicts(&served);
}

/// The inspect is the batch's, not the service's: a later batch on the same image asks the
/// engine again (an image removed or replaced between batches is seen by the next one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_inspects_an_image_again_in_each_new_batch() {
    let served = serve_batches(&[2, 2], 1).await;
    assert_eq!(served.runs.len(), 4, "{:?}", served.runs);
    let inspected: Vec<usize> = served
        .runs
        .iter()
        .map(|run| run.iter().filter(|c| **c == "inspect_image").count())
        .collect();
    assert_eq!(inspected, [1, 0, 1, 0], "{:?}", served.runs);
    assert_same_verdicts(&served);
}
