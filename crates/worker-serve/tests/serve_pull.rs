//! #43/#45: an image pull does not hold `worker serve`. Before, serve pulled the due jobs'
//! missing images inside its poll step (`--pull`), awaited in the loop itself: for as long
//! as a pull lasted the loop neither polled the feed, nor started or ended a run, nor renewed
//! the leases of its runs on a fleet, nor wrote its heartbeat. A slow registry could let a
//! running job's lease end (another host takes it over and this host's result is refused),
//! and a job with a sooner window that appeared meanwhile waited for the pull to end.
//!
//! The feed is a real HTTP server on loopback, the fleet a real Postgres; the engine is a
//! TEST DOUBLE holding one image, whose pull of the other waits until the test releases it
//! (worker-sandbox's scripted engine pulls at once); the job executor is a TEST DOUBLE that
//! records the order of its calls and holds every run until released. Nothing depends on
//! timing: each step waits for what the service did (a run started, a pull asked for, a
//! lease moved in the database), with a bound far beyond what it needs.

// Test scaffolding outside #[test] fns (fakes, builders): failures should fail loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use verifier_sdk::evidence::EngineFacts;
use verifier_sdk::fixtures::EXPIRES_AT;
use worker_sandbox::engine::{CallError, FreeSpace, ImageSummary};
use worker_sandbox::images::ImageStore;
use worker_sandbox::{Executor, HostResources, RunHooks, RunLifecycle, RunReport, SandboxError};
use worker_serve::shutdown::Shutdown;
use worker_serve::telemetry::Telemetry;
use worker_serve::{ServeConfig, prepare, serve_with};

mod common;
mod serve_doubles;
use common::serve_benchmark;
use serve_doubles::{Recorder, clock_at, metric, wait_for};
use test_feed::*;

fn reference(n: u8) -> String {
    format!(
        "127.0.0.1:5000/img{n}@sha256:{}",
        format!("{n:x}").repeat(64)
    )
}

/// What the engine double holds and was asked.
#[derive(Debug)]
struct Images {
    present: Mutex<Vec<ImageSummary>>,
    pulls: Mutex<Vec<String>>,
    /// The pull of this reference waits for a permit.
    gated: String,
    release: tokio::sync::Semaphore,
}

impl Images {
    /// An engine holding the image `here` only, whose pull of `gated` waits for a permit.
    fn holding(here: &str, gated: &str) -> Arc<Self> {
        Arc::new(Self {
            present: Mutex::new(vec![summary(here)]),
            pulls: Mutex::new(Vec::new()),
            gated: gated.to_owned(),
            release: tokio::sync::Semaphore::new(0),
        })
    }

    fn pulls(&self) -> Vec<String> {
        self.pulls.lock().unwrap().clone()
    }
}

/// TEST DOUBLE of the engine: the images of [`Images`], no containers, nothing to run.
#[derive(Debug)]
struct Engine(EngineFacts, Arc<Images>);

fn summary(reference: &str) -> ImageSummary {
    ImageSummary {
        id: format!("sha256:{}", reference.len()),
        repo_digests: vec![reference.to_owned()],
        repo_tags: Vec::new(),
        size_bytes: 1 << 20,
    }
}

#[async_trait::async_trait]
impl ImageStore for Engine {
    async fn images(&self) -> Result<Vec<ImageSummary>, CallError> {
        Ok(self.1.present.lock().unwrap().clone())
    }
    async fn pull(&self, reference: &str) -> Result<(), CallError> {
        self.1.pulls.lock().unwrap().push(reference.to_owned());
        if reference == self.1.gated {
            self.1.release.acquire().await.unwrap().forget();
        }
        self.1.present.lock().unwrap().push(summary(reference));
        Ok(())
    }
    async fn remove(&self, _: &str) -> Result<(), CallError> {
        Ok(())
    }
    async fn free_space(&self) -> Result<FreeSpace, CallError> {
        Ok(FreeSpace::Known(u64::MAX))
    }
}

#[async_trait::async_trait]
impl RunLifecycle for Engine {
    fn facts(&self) -> &EngineFacts {
        &self.0
    }
    async fn run(
        &self,
        _: &worker_sandbox::SandboxSpec,
        _: &dyn RunHooks,
    ) -> Result<RunReport, SandboxError> {
        unreachable!("the job executor double never reaches the engine")
    }
    async fn cleanup_stale(&self) -> Result<Vec<String>, SandboxError> {
        Ok(Vec::new())
    }
    async fn remove_own_containers(&self) -> Result<Vec<String>, SandboxError> {
        Ok(Vec::new())
    }
    async fn host_resources(&self) -> Result<HostResources, SandboxError> {
        Ok(HostResources {
            cpus: Some(2),
            memory_bytes: Some(4 << 30),
        })
    }
    async fn mounted_paths(&self) -> Result<BTreeSet<PathBuf>, SandboxError> {
        Ok(BTreeSet::new())
    }
    fn images(&self) -> &dyn ImageStore {
        self
    }
}

fn engine(images: Arc<Images>) -> Executor {
    Executor::new(Engine(
        EngineFacts {
            version: "test".into(),
            api_version: "1.43".into(),
            kernel_version: "test".into(),
            cgroup_version: "2".into(),
            cgroup_driver: "systemd".into(),
            platform: "linux/amd64".into(),
            host: None,
        },
        images,
    ))
}

/// A job of `round` on `image` whose window ends at `expires_at`, its source archive served.
fn job_at(
    server: &TestServer,
    bench: verifier_sdk::Sha256Digest,
    round: u64,
    expires_at: u64,
    image: &str,
) -> Value {
    common::job_at(server, bench, round, expires_at, |j| {
        j["terms"]["document"]["benchmark"]["runner_manifest"]["image"] = json!(image);
    })
}

/// The service's configuration under `dir`: two jobs at once, missing images pulled ahead of
/// their jobs, a 50 ms poll, a 3 s lease (renewed every second), the SQLite ledger
/// (`fleet: None`) or the fleet database at `fleet`.
fn serve_config(
    server: &TestServer,
    dir: &Path,
    fleet: Option<&test_postgres::TestDb>,
) -> ServeConfig {
    let images = worker_serve::images::ImagePolicy {
        pull: true,
        ..worker_serve::images::ImagePolicy::default()
    };
    common::serve_config(server, dir, fleet, 2, Duration::from_secs(3), images)
}

/// The lease end (unix seconds, the database's clock) of the fleet job of `round`.
fn lease_until(db: &test_postgres::TestDb, round: i64) -> Option<f64> {
    let mut config = postgres::Config::from_str(&db.url).unwrap();
    config.password(db.password());
    // The blocking client starts a runtime of its own: not on one of the test's threads.
    std::thread::spawn(move || {
        let mut client = config.connect(postgres::NoTls).unwrap();
        client
            .query_one(
                "SELECT extract(epoch FROM lease_until)::float8 FROM fleet_jobs WHERE round = $1",
                &[&round],
            )
            .unwrap()
            .get(0)
    })
    .join()
    .unwrap()
}

/// Waits until the lease of the fleet job of `round` ends later than `after`.
async fn lease_moves_past(db: &test_postgres::TestDb, round: i64, after: f64) -> bool {
    for _ in 0..300 {
        if lease_until(db, round).is_some_and(|until| until > after) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

/// While one image is being pulled, the service goes on: the leases of its runs are renewed
/// (fleet), a job that appears meanwhile with its image here starts, and the job whose image
/// is pulled starts once the pull ends, pulled once however many polls list it meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_keeps_polling_and_starting_jobs_while_an_image_pulls() {
    keeps_serving_while_an_image_pulls(None).await;
}

/// The same on a fleet ledger (Postgres, issue #45), where a run's lease must be renewed
/// while the pull lasts, or another host takes the job over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_on_a_fleet_keeps_renewing_leases_and_polling_while_an_image_pulls() {
    let Some(db) = test_postgres::TestDb::new("serve", "pull_holds") else {
        return;
    };
    keeps_serving_while_an_image_pulls(Some(&db)).await;
}

async fn keeps_serving_while_an_image_pulls(fleet: Option<&test_postgres::TestDb>) {
    let server = TestServer::start().await;
    let bench = serve_benchmark(&server);
    let (here, pulled) = (reference(1), reference(2));
    let running = job_at(&server, bench, 2, EXPIRES_AT + 3_000, &here);
    let needs_pull = job_at(&server, bench, 1, EXPIRES_AT + 10_000, &pulled);
    let sooner = job_at(&server, bench, 3, EXPIRES_AT + 2_000, &here);
    let feed = feed_path(VERIFIER);
    server.route(&feed, Reply::json(&json!([running])));

    let tmp = tempfile::tempdir().unwrap();
    let config = serve_config(&server, tmp.path(), fleet);
    let telemetry = Telemetry::new(config.poll_interval, clock_at(EXPIRES_AT - 3_600));
    let prepared = prepare(&config).unwrap();
    let images = Images::holding(&here, &pulled);
    let sandbox = engine(images.clone());
    let recorder = Recorder::holding(|_| true);
    let shutdown = Shutdown::never();
    let drive = async {
        assert!(
            wait_for(|| recorder.order() == [2]).await,
            "{:?}",
            recorder.order()
        );
        // A job whose image is missing appears while that run goes on: its pull starts, and
        // does not end until released.
        server.route(&feed, Reply::json(&json!([running, needs_pull])));
        assert!(
            wait_for(|| images.pulls().contains(&pulled)).await,
            "the missing image was never pulled: {:?}",
            images.pulls()
        );
        if let Some(db) = fleet {
            let before = lease_until(db, 2).expect("the running job holds a lease");
            assert!(
                lease_moves_past(db, 2, before).await,
                "the running job's lease was not renewed while an image was pulled"
            );
        }
        server.route(&feed, Reply::json(&json!([running, needs_pull, sooner])));
        assert!(
            wait_for(|| recorder.order().contains(&3)).await,
            "a job that appeared while an image was pulled did not start until the pull ended: {:?}",
            recorder.order()
        );
        assert_eq!(images.pulls(), std::slice::from_ref(&pulled), "pulled once");
        // The pull ends; the runs end; the job on the pulled image runs.
        images.release.add_permits(1);
        recorder.release.add_permits(2);
        assert!(
            wait_for(|| recorder.order().contains(&1)).await,
            "{:?}",
            recorder.order()
        );
    };
    tokio::select! {
        r = serve_with(&config, prepared.ledger, &sandbox, &recorder, &shutdown, &telemetry) => panic!("serve stopped: {r:?}"),
        () = drive => {}
    }
    recorder.release.add_permits(10);
    assert_eq!(recorder.order()[..3], [2, 3, 1]);
    assert_eq!(images.pulls(), [pulled], "pulled once");
}

/// A job that cannot settle even with its image here (150 s left, a 600 s timeout) is set
/// apart as `window_too_short` before anything is pulled for it: a pull would only hold the
/// engine and the disk for a job that is never started. Before, serve pulled the images of
/// every due job and planned after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_pulls_nothing_for_a_job_whose_window_is_too_short() {
    let server = TestServer::start().await;
    let bench = serve_benchmark(&server);
    let (here, missing) = (reference(1), reference(3));
    let fine = job_at(&server, bench, 1, EXPIRES_AT + 3_000, &here);
    let mut too_short = job_at(&server, bench, 2, EXPIRES_AT, &missing);
    too_short["terms"]["document"]["benchmark"]["runner_manifest"]["timeout_seconds"] = json!(600);
    verifier_sdk::fixtures::rehash(&mut too_short);
    server.route(&feed_path(VERIFIER), Reply::json(&json!([fine, too_short])));
    let tmp = tempfile::tempdir().unwrap();
    let config = serve_config(&server, tmp.path(), None);
    let telemetry = Telemetry::new(config.poll_interval, clock_at(EXPIRES_AT - 150));
    let prepared = prepare(&config).unwrap();
    let images = Images::holding(&here, "");
    let sandbox = engine(images.clone());
    let recorder = Recorder::holding(|_| true);
    let shutdown = Shutdown::never();
    // The poll that sets the short job apart is the one that admits the other job: once that
    // one runs, whatever was pulled for the short one has been.
    let seen = tokio::select! {
        r = serve_with(&config, prepared.ledger, &sandbox, &recorder, &shutdown, &telemetry) => panic!("serve stopped: {r:?}"),
        seen = wait_for(|| recorder.order() == [1]
            && metric(&telemetry, "worker_serve_window_too_short_jobs_total") == Some(1.0)) => seen,
    };
    assert!(seen, "{:?}", recorder.order());
    assert!(images.pulls().is_empty(), "pulled {:?}", images.pulls());
}
