//! `worker serve` on a fleet ledger (issue #45) stopped while its database does not answer:
//! the service ends promptly and as a stop that was asked for. The database is a real Postgres
//! cluster of the test's own (`test_postgres::OwnCluster`), stopped under the service. The
//! engine is worker-sandbox's scripted one (`fake-engine`) and the job executor a TEST DOUBLE;
//! neither is asked to run anything (the feed is a port nothing listens on, so no job is ever
//! due); what is tested is the loop's way out of the ledger's reconnecting.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use test_postgres::OwnCluster;
use verifier_sdk::oci_runtime::RUNC;
use verifier_sdk::{Network, ValidatedJob};
use worker_jobs::feed::{ExecutedJob, FeedConfig, JobExecutor, JobFailure};
use worker_sandbox::Executor;
use worker_sandbox::lifecycle::Lifecycle;
use worker_sandbox::lifecycle::fake::{Fake, Script};
use worker_serve::clock::SystemClock;
use worker_serve::fleet::{Binding, FleetLedger};
use worker_serve::fleet_conn::FleetUrl;
use worker_serve::shutdown::Shutdown;
use worker_serve::store::{AnyLedger, FleetOptions, FleetStore, LedgerLocation, OUTAGE_BOUND};
use worker_serve::telemetry::Telemetry;
use worker_serve::{ServeConfig, serve_with};

/// TEST DOUBLE of the job executor, never called.
struct NoRuns;

#[async_trait::async_trait]
impl JobExecutor for NoRuns {
    async fn execute(
        &self,
        _: &ValidatedJob,
        _: &Path,
        _: &Path,
    ) -> Result<ExecutedJob, JobFailure> {
        unreachable!("no job is ever due: the feed does not answer")
    }
}

/// worker-sandbox's scripted engine, behind the one executor the service is given; the
/// handle is kept to show afterwards that nothing was ever run on it.
async fn engine() -> (Executor, Fake) {
    let fake = Fake::new(Script::default());
    let lifecycle = Lifecycle::connect(fake.clone(), RUNC).await.unwrap();
    (Executor::new(lifecycle), fake)
}

/// The service under `dir` on the fleet at `url`, polling a feed that does not answer every
/// 50 ms, so the loop reaches the ledger (the heartbeat between polls) at once.
fn config(dir: &Path, url: &str) -> ServeConfig {
    // A port nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut feed = FeedConfig::new(
        &format!("http://127.0.0.1:{port}"),
        Network::BaseMainnet,
        vec![
            "0x00000000000000000000000000000000000000a1"
                .parse()
                .unwrap(),
        ],
        &dir.join("out"),
    );
    feed.work_dir = dir.join("work");
    feed.progress = false;
    ServeConfig {
        feed,
        state_dir: dir.join("state"),
        poll_interval: Duration::from_millis(50),
        parallel: NonZeroUsize::new(1),
        metrics_listen: None,
        images: worker_serve::images::ImagePolicy::default(),
        ledger: LedgerLocation::parse(url).unwrap(),
        fleet: FleetOptions {
            host: "host-a".into(),
            lease: Duration::from_secs(120),
            password_file: None,
        },
    }
}

/// Issue #45: SIGTERM while the fleet's database does not answer. Before, the loop's ledger
/// call went on reconnecting for the whole outage bound (120 s) and the service then exited 1
/// (an error): under systemd, past `TimeoutStopSec` (45 s), SIGKILL. Now the reconnecting ends
/// at its next back-off step and the service returns `Ok` (exit 0, a stop that was asked
/// for), the runs it held left to their leases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_serve_stopped_while_its_database_does_not_answer_ends_promptly_as_a_clean_stop() {
    let Some(cluster) = OwnCluster::new() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    for sub in ["out", "work", "state"] {
        std::fs::create_dir_all(tmp.path().join(sub)).unwrap();
    }
    let config = config(tmp.path(), &cluster.url());
    let binding = Binding {
        feed: config.feed.api_base.clone(),
        verifiers: vec!["0x00000000000000000000000000000000000000a1".into()],
    };
    let url = FleetUrl::parse(&cluster.url()).unwrap();
    let ledger =
        tokio::task::spawn_blocking(move || FleetLedger::open(&url, &binding, "host-a").unwrap())
            .await
            .unwrap();
    let ledger = AnyLedger::Fleet(Box::new(FleetStore::new(ledger, config.fleet.lease)));
    let telemetry = Telemetry::new(config.poll_interval, Arc::new(SystemClock::new()));
    let outage = telemetry.ledger_outage();
    let (stop, shutdown) = Shutdown::by_hand();
    // The stop comes from a thread of its own: the loop's ledger calls block their task.
    let stopper = std::thread::spawn(move || {
        // The database goes away under the running service; the stop comes once the loop is
        // inside the ledger's reconnecting (the outage is said only from there).
        cluster.pg_ctl("stop");
        let give_up = Instant::now() + Duration::from_secs(60);
        while outage.lock().unwrap().is_none() {
            assert!(
                Instant::now() < give_up,
                "the service never reconnected to its database"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.fire();
        (Instant::now(), cluster)
    });
    let (engine, fake) = engine().await;
    let served = serve_with(&config, ledger, &engine, &NoRuns, &shutdown, &telemetry).await;
    let ended = Instant::now();
    let (fired, _cluster) = stopper.join().unwrap();
    let took = ended.saturating_duration_since(fired);
    assert!(
        took < Duration::from_secs(30),
        "the service ended {took:?} after the stop request (the outage bound is {OUTAGE_BOUND:?})"
    );
    assert!(
        served.is_ok(),
        "a stop that was asked for is a clean stop (exit 0): {served:?}"
    );
    assert!(!fake.started(), "no job was due, so nothing ran");
}
