//! #43 item 1: `worker serve` runs deadline-first, including a job that appears while a batch
//! runs, and never starts a job that can no longer settle.
//!
//! The feed is a real HTTP server on loopback (the stand-in platform, archives included) and
//! the service's clock is injected. The job executor is a TEST DOUBLE that records the order
//! of its calls and holds the first one until the test releases it; the engine is
//! worker-sandbox's scripted one (`fake-engine`), holding no images and never reached. The order does not depend on timing:
//! the held run is released only once the service has taken the poll that lists the new job
//! (its `jobs_seen` counter), and a run's end is handled only after that poll's jobs are
//! queued (one task, one select step at a time).
//!
//! The same loop is held to its deadline gauge (`worker_serve_nearest_window_end_seconds`,
//! with an executor double that yields verdicts) and to `/healthz` while a batch runs (#43
//! gaps 5 and 12).

// Test scaffolding outside #[test] fns (fakes, builders): failures should fail loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};
use verifier_sdk::fixtures::EXPIRES_AT;
use verifier_sdk::oci_runtime::RUNC;
use verifier_sdk::{ExecutionFacts, Outcome, RunOutput, ValidatedJob};
use worker_jobs::feed::{ExecutedJob, JobExecutor, JobFailure};
use worker_sandbox::Executor;
use worker_sandbox::lifecycle::Lifecycle;
use worker_sandbox::lifecycle::fake::{Fake, Script};
use worker_serve::shutdown::Shutdown;
use worker_serve::telemetry::Telemetry;
use worker_serve::{ServeConfig, prepare, serve_with};

mod common;
mod serve_doubles;
use common::serve_benchmark;
use serve_doubles::{Recorder, clock_at, metric, wait_for};
use test_feed::*;

/// A job of `round` whose window ends at `expires_at` with the manifest's `timeout`, its
/// source archive served.
fn job_at(
    server: &TestServer,
    bench: verifier_sdk::Sha256Digest,
    round: u64,
    expires_at: u64,
    timeout: u64,
) -> Value {
    common::job_at(server, bench, round, expires_at, |j| {
        j["terms"]["document"]["benchmark"]["runner_manifest"]["timeout_seconds"] = json!(timeout);
    })
}

/// (a) A job whose window ends sooner runs before an older one, including one that appears
/// while a batch runs; (b) a job with 150 s left and a 600 s timeout is never started.
/// Before #43: the serve loop polled only between batches, so the order was B, A, C, and D
/// (the earliest window) ran first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_runs_a_sooner_window_first_even_one_appearing_mid_batch_and_never_a_window_too_short_job()
 {
    deadline_first(None).await;
}

/// The same service on a fleet ledger (Postgres, issue #45): the same order, the same row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_on_a_fleet_ledger_runs_a_sooner_window_first_even_one_appearing_mid_batch_and_never_a_window_too_short_job()
 {
    let Some(db) = test_postgres::TestDb::new("serve", "deadline_first") else {
        return;
    };
    deadline_first(Some(&db)).await;
}

/// The deadline-first test on the SQLite ledger (`None`) or the fleet database `fleet`.
#[allow(clippy::too_many_lines)]
async fn deadline_first(fleet: Option<&test_postgres::TestDb>) {
    let server = TestServer::start().await;
    let bench = serve_benchmark(&server);
    let end = EXPIRES_AT;
    let older = job_at(&server, bench, 1, end + 10_000, 120); // A: listed first, latest window
    let sooner = job_at(&server, bench, 2, end + 3_000, 120); // B
    let appears = job_at(&server, bench, 3, end + 2_000, 120); // C: appears mid-batch
    let too_short = job_at(&server, bench, 4, end, 600); // D: 150 s left, 600 s timeout
    let feed = feed_path(VERIFIER);
    server.route(&feed, Reply::json(&json!([older, sooner, too_short])));

    let tmp = tempfile::tempdir().unwrap();
    let config = serve_config(&server, tmp.path(), fleet);
    let telemetry = Telemetry::new(config.poll_interval, clock_at(end - 150));
    let prepared = prepare(&config).unwrap();
    let sandbox = no_engine().await;
    let recorder = Recorder::holding(|round| round == 2);
    let shutdown = Shutdown::never();
    let drive = async {
        // B (the sooner of the two that can settle) is the first run, and held.
        wait_for(|| !recorder.order().is_empty()).await;
        // C appears while B runs; B is released once the service has taken that poll.
        server.route(
            &feed,
            Reply::json(&json!([older, sooner, too_short, appears])),
        );
        let seen =
            wait_for(|| metric(&telemetry, "worker_serve_jobs_seen_total") == Some(4.0)).await;
        recorder.release.add_permits(1);
        wait_for(|| recorder.order().len() >= 3).await;
        seen
    };
    let served = tokio::select! {
        r = serve_with(&config, prepared.ledger, &sandbox, &recorder, &shutdown, &telemetry) => panic!("serve stopped: {r:?}"),
        seen = drive => seen,
    };
    let order = recorder.order();
    assert!(served, "the service never took a poll while the batch ran");
    assert_eq!(
        order,
        vec![2, 3, 1],
        "run order by round (D=4 must never run)"
    );
    assert_eq!(
        metric(&telemetry, "worker_serve_window_too_short_jobs_total"),
        Some(1.0)
    );
    assert_eq!(metric(&telemetry, "worker_serve_jobs_at_risk"), Some(1.0));
    // No job has a candidate (every run ends without a verdict): the nearest window end is
    // D's, 150 s away on the service's clock (#43 gap 5).
    assert_eq!(
        metric(&telemetry, "worker_serve_nearest_window_end_seconds"),
        Some((too_short["verification_expires_at"].as_u64().unwrap() - (end - 150)) as f64)
    );
    // Its own row in the ledger, as `worker feed` reports it: never started, with the figures.
    let too_short_id = too_short["job_id"].as_str().unwrap();
    let (outcome, reason_code, reason) = match fleet {
        None => {
            let ledger = worker_serve::ledger::Ledger::open(&config.state_dir).unwrap();
            let runs = ledger.runs(Some(too_short_id)).unwrap();
            let [run] = runs.as_slice() else {
                panic!("{runs:?}")
            };
            (
                run.outcome.clone(),
                run.reason_code.clone(),
                run.reason.clone(),
            )
        }
        Some(db) => {
            let url = worker_serve::fleet_conn::FleetUrl::parse(&db.url)
                .unwrap()
                .with_password(db.password());
            let binding = worker_serve::fleet::Binding {
                feed: server.base.clone(),
                verifiers: vec![VERIFIER.to_lowercase()],
            };
            let ledger = tokio::task::block_in_place(|| {
                worker_serve::fleet::FleetLedger::open(&url, &binding, "reader").unwrap()
            });
            let runs: Vec<_> = tokio::task::block_in_place(move || {
                let mut ledger = ledger;
                let runs = ledger.runs().unwrap();
                drop(ledger);
                runs
            })
            .into_iter()
            .filter(|r| r.job_id == too_short_id)
            .collect();
            let [run] = runs.as_slice() else {
                panic!("{runs:?}")
            };
            (
                run.outcome.clone(),
                run.reason_code.clone(),
                run.reason.clone(),
            )
        }
    };
    assert_eq!(outcome.as_deref(), Some("skipped"));
    assert_eq!(reason_code.as_deref(), Some("window_too_short"));
    let reason = reason.as_deref().unwrap();
    assert!(
        reason.contains("ends in 150 s") && reason.contains("timeout_seconds 600"),
        "{reason}"
    );
}

/// The service's configuration under `dir`: one job at a time, a 50 ms poll, the SQLite
/// ledger (`fleet: None`) or the fleet database at `fleet`.
fn serve_config(
    server: &TestServer,
    dir: &Path,
    fleet: Option<&test_postgres::TestDb>,
) -> ServeConfig {
    common::serve_config(
        server,
        dir,
        fleet,
        1,
        Duration::from_secs(120),
        worker_serve::images::ImagePolicy::default(),
    )
}

/// worker-sandbox's scripted engine, never asked to run (the executor double stands before
/// it).
async fn no_engine() -> Executor {
    Executor::new(
        Lifecycle::connect(Fake::new(Script::default()), RUNC)
            .await
            .unwrap(),
    )
}

/// #43 item 3 for `worker serve`, as `worker feed` does it: a job set apart as
/// `window_too_short` gets a readiness record that says not ready and why (every check
/// `not_checked`, naming the code and the figures), replacing the record an earlier run left
/// at its path (here one that said ready). Before: serve wrote no record for it, so the
/// earlier "ready" stayed for a job nothing checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_writes_a_job_skipped_without_a_run_not_ready_with_the_reason() {
    let server = TestServer::start().await;
    let bench = serve_benchmark(&server);
    let end = EXPIRES_AT;
    let fine = job_at(&server, bench, 1, end + 3_000, 120);
    let too_short = job_at(&server, bench, 2, end, 600); // 150 s left, 600 s timeout
    server.route(&feed_path(VERIFIER), Reply::json(&json!([fine, too_short])));
    let tmp = tempfile::tempdir().unwrap();
    let config = serve_config(&server, tmp.path(), None);
    let too_short_id = too_short["job_id"].as_str().unwrap();
    let out = stale_ready_at(tmp.path(), too_short_id);
    let telemetry = Telemetry::new(config.poll_interval, clock_at(end - 150));
    let prepared = prepare(&config).unwrap();
    let sandbox = no_engine().await;
    let recorder = Recorder::holding(|_| false);
    let shutdown = Shutdown::never();
    // The poll that sets the short job apart comes before the run of the other one: once that
    // run started, the short job's record (if any) is written.
    let ran = tokio::select! {
        r = serve_with(&config, prepared.ledger, &sandbox, &recorder, &shutdown, &telemetry) => panic!("serve stopped: {r:?}"),
        ran = wait_for(|| !recorder.order().is_empty()) => ran,
    };
    assert!(ran, "the job that can settle never ran");
    assert_eq!(recorder.order(), vec![1]);
    assert_not_run(
        &read_readiness(&out, too_short_id),
        &["window_too_short", "ends in 150 s"],
    );
}

/// The output directory under `dir`, holding a record that says `job_id` is ready, as an
/// earlier run may have left it.
fn stale_ready_at(dir: &Path, job_id: &str) -> std::path::PathBuf {
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    worker_jobs::feed::readiness::write_readiness(&out, &ready_record(job_id)).unwrap();
    out
}

/// #43 item 3 for `worker serve`'s other skip: a job whose image cannot be checked against
/// `--image-budget` (the engine refuses its image list) is held back at admission without a
/// run or a pull; its readiness record says not ready and why (the budget could not be
/// checked, in the engine's words), replacing an earlier "ready". Before: nothing was written
/// for it; then a record whose message listed every reason a job may be held for, so this
/// test passed as well when the job was held by a failed pull (no `--image-min-free 0`:
/// the scripted engine cannot tell its free space) and the refused list played no part.
/// `--image-min-free 0` leaves the list as the only thing that can hold the job: the same
/// service over an engine that lists its images runs it (the test's other half).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_writes_a_job_held_back_for_its_image_not_ready_with_the_reason() {
    let listed = held_back_for_image(false).await;
    assert_eq!(
        listed,
        HeldBack::Ran(vec![1]),
        "with its image list read, the same job must run"
    );
    let HeldBack::Held { record, engine } = held_back_for_image(true).await else {
        panic!("the job was never held back twice")
    };
    assert!(
        !engine.contains(&"pull"),
        "pulled without a budget check: {engine:?}"
    );
    assert_not_run(
        &record,
        &[
            "(image_held_back)",
            "cannot be checked against --image-budget",
            "scripted: image list refused",
        ],
    );
}

/// What [`held_back_for_image`] saw.
#[derive(Debug, PartialEq)]
enum HeldBack {
    /// The job ran (rounds, in order).
    Ran(Vec<u64>),
    /// Held back at two polls, never run: its readiness record and the engine's calls.
    Held {
        record: verifier_sdk::readiness::ReadinessRecord,
        engine: Vec<&'static str>,
    },
}

/// Serves one job under `--pull --image-budget 1GiB --image-min-free 0`, an earlier "ready"
/// record at its path, over the scripted engine (its image list refused when
/// `images_refused`), until the job ran or was held back at two polls.
async fn held_back_for_image(images_refused: bool) -> HeldBack {
    let server = TestServer::start().await;
    let bench = serve_benchmark(&server);
    let held = job_at(&server, bench, 1, EXPIRES_AT + 3_000, 120);
    server.route(&feed_path(VERIFIER), Reply::json(&json!([held])));
    let tmp = tempfile::tempdir().unwrap();
    let mut config = serve_config(&server, tmp.path(), None);
    config.images.pull = true;
    config.images.budget = Some(1 << 30);
    config.images.min_free = 0;
    let held_id = held["job_id"].as_str().unwrap();
    let out = stale_ready_at(tmp.path(), held_id);
    let telemetry = Telemetry::new(config.poll_interval, clock_at(EXPIRES_AT - 3_600));
    let prepared = prepare(&config).unwrap();
    let fake = Fake::new(Script {
        images_refused,
        ..Script::default()
    });
    let sandbox = Executor::new(Lifecycle::connect(fake.clone(), RUNC).await.unwrap());
    let recorder = Recorder::holding(|_| false);
    let shutdown = Shutdown::never();
    let held_twice =
        || metric(&telemetry, "worker_serve_image_held_back_jobs_total").is_some_and(|n| n >= 2.0);
    // A second poll's hold-back starts only after the first poll was taken whole.
    let settled = tokio::select! {
        r = serve_with(&config, prepared.ledger, &sandbox, &recorder, &shutdown, &telemetry) => panic!("serve stopped: {r:?}"),
        settled = wait_for(|| held_twice() || !recorder.order().is_empty()) => settled,
    };
    assert!(settled, "the job neither ran nor was held back twice");
    let ran = recorder.order();
    if !ran.is_empty() {
        return HeldBack::Ran(ran);
    }
    HeldBack::Held {
        record: read_readiness(&out, held_id),
        engine: fake.calls(),
    }
}

/// TEST DOUBLE of the job executor that yields a passing verdict (and so a candidate) for
/// every job, each run held until the test releases one permit; records the rounds run.
struct Verdicts {
    order: Mutex<Vec<u64>>,
    release: tokio::sync::Semaphore,
}

#[async_trait::async_trait]
impl JobExecutor for Verdicts {
    async fn execute(
        &self,
        job: &ValidatedJob,
        source_dir: &Path,
        benchmark_dir: &Path,
    ) -> Result<ExecutedJob, JobFailure> {
        self.order.lock().unwrap().push(job.round());
        self.release.acquire().await.unwrap().forget();
        let facts = ExecutionFacts {
            exit_code: 0,
            stdout_sha256: verifier_sdk::Sha256Digest::from_bytes([3; 32]),
            stderr_sha256: verifier_sdk::Sha256Digest::from_bytes([4; 32]),
            stdout_bytes: 3,
            stderr_bytes: 4,
        };
        Ok(ExecutedJob {
            output: RunOutput::Verdict(Outcome::for_job(job, facts)),
            evidence: Some(worker_jobs::run::SealedEvidence::seal(double_evidence(job)).unwrap()),
            source_digest: dir_digest(source_dir),
            benchmark_digest: dir_digest(benchmark_dir),
        })
    }
}

/// #43 gap 5: `worker_serve_nearest_window_end_seconds` is the seconds, by the service's
/// clock, to the nearest window end among the listed jobs without a candidate; once that job
/// has its candidate the gauge moves to the next one, and to -1 when none is left. The values
/// are computed here from the jobs' windows and the injected clock, so a gauge counting jobs
/// with a candidate, or reading another clock, fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_nearest_window_gauge_is_the_nearest_job_without_a_candidate_and_moves_on_once_it_has_one()
 {
    let server = TestServer::start().await;
    let bench = serve_benchmark(&server);
    let now_s = EXPIRES_AT - 150;
    let later = job_at(&server, bench, 1, EXPIRES_AT + 10_000, 120);
    let sooner = job_at(&server, bench, 2, EXPIRES_AT + 3_000, 120);
    server.route(&feed_path(VERIFIER), Reply::json(&json!([later, sooner])));
    let left = |job: &Value| {
        let end = job["verification_expires_at"].as_u64().unwrap();
        Some((end - now_s) as f64)
    };
    let tmp = tempfile::tempdir().unwrap();
    let config = serve_config(&server, tmp.path(), None);
    let telemetry = Telemetry::new(config.poll_interval, clock_at(now_s));
    let prepared = prepare(&config).unwrap();
    let sandbox = no_engine().await;
    let verdicts = Verdicts {
        order: Mutex::new(Vec::new()),
        release: tokio::sync::Semaphore::new(0),
    };
    let gauge = || metric(&telemetry, "worker_serve_nearest_window_end_seconds");
    let shutdown = Shutdown::never();
    let drive = async {
        // The sooner job runs first and is held: neither has a candidate.
        assert!(wait_for(|| *verdicts.order.lock().unwrap() == [2]).await);
        assert!(
            wait_for(|| gauge() == left(&sooner)).await,
            "gauge {:?}, want {:?}",
            gauge(),
            left(&sooner)
        );
        // The sooner job gets its candidate; the later one runs, held, without one.
        verdicts.release.add_permits(1);
        assert!(wait_for(|| *verdicts.order.lock().unwrap() == [2, 1]).await);
        assert!(
            wait_for(|| gauge() == left(&later)).await,
            "gauge {:?}, want {:?}",
            gauge(),
            left(&later)
        );
        verdicts.release.add_permits(1);
        assert!(
            wait_for(|| gauge() == Some(-1.0)).await,
            "gauge {:?}",
            gauge()
        );
    };
    tokio::select! {
        r = serve_with(&config, prepared.ledger, &sandbox, &verdicts, &shutdown, &telemetry) => panic!("serve stopped: {r:?}"),
        () = drive => {}
    }
    let ledger = worker_serve::ledger::Ledger::open(&config.state_dir).unwrap();
    for job in [&sooner, &later] {
        let runs = ledger.runs(job["job_id"].as_str()).unwrap();
        assert!(
            runs.iter()
                .any(|r| r.outcome.as_deref() == Some("completed_passed")),
            "{runs:?}"
        );
    }
}

/// #43 gap 12: serve polls while a batch runs, so a feed that stops answering during a long
/// batch turns `/healthz` red once the last successful poll is older than its bound (3.3 poll
/// intervals, on the injected clock), and green again once a poll during the same batch
/// answers. Before: the batch's time was taken off the poll's age (a rule from when serve
/// polled only between batches), so a feed down during a long batch never turned it red.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_healthz_turns_red_when_the_feed_fails_during_a_long_batch() {
    let server = TestServer::start().await;
    let bench = serve_benchmark(&server);
    let running = job_at(&server, bench, 1, EXPIRES_AT + 3_000, 120);
    let feed = feed_path(VERIFIER);
    server.route(&feed, Reply::json(&json!([running])));
    let tmp = tempfile::tempdir().unwrap();
    let config = serve_config(&server, tmp.path(), None);
    let clock = clock_at(EXPIRES_AT - 3_600);
    let telemetry = Telemetry::new(config.poll_interval, clock.clone());
    let prepared = prepare(&config).unwrap();
    let sandbox = no_engine().await;
    let recorder = Recorder::holding(|round| round == 1);
    let failed = || metric(&telemetry, "worker_serve_polls_total{result=\"failed\"}");
    let shutdown = Shutdown::never();
    let drive = async {
        // The batch runs (its one job held) and the service is healthy.
        assert!(wait_for(|| !recorder.order().is_empty()).await);
        assert!(telemetry.health().is_ok(), "{:?}", telemetry.health());
        // The feed fails; once a poll made after that has failed, every later one fails too
        // (one poll at a time), so the last success stays where it is.
        server.route(&feed, Reply::status(500));
        assert!(wait_for(|| failed().is_some_and(|n| n >= 1.0)).await);
        // 1 s on the service's clock: far past the bound of 3.3 × 50 ms, far within the
        // heartbeat's (60 s more).
        clock.advance(Duration::from_secs(1));
        let red = telemetry.health().unwrap_err();
        assert_eq!(red.status, "unhealthy", "{red:?}");
        assert!(red.reason.contains("last successful poll"), "{red:?}");
        // The feed answers again during the same batch: green without the batch ending.
        server.route(&feed, Reply::json(&json!([running])));
        assert!(
            wait_for(|| telemetry.health().is_ok()).await,
            "{:?}",
            telemetry.health()
        );
        assert_eq!(recorder.order(), [1]);
    };
    tokio::select! {
        r = serve_with(&config, prepared.ledger, &sandbox, &recorder, &shutdown, &telemetry) => panic!("serve stopped: {r:?}"),
        () = drive => {}
    }
    recorder.release.add_permits(1);
}
