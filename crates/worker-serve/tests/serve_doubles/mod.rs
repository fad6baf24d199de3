//! The test doubles and waits `serve_deadline.rs` and `serve_pull.rs` share: a job executor
//! that records the order of its runs and holds them until released, the service's clock
//! and metrics, and a bounded wait for what the service did.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use verifier_sdk::ValidatedJob;
use worker_jobs::feed::{ExecutedJob, JobExecutor, JobFailure};
use worker_serve::clock::ManualClock;
use worker_serve::telemetry::Telemetry;

/// TEST DOUBLE of the job executor: records each call's job round and holds the runs of the
/// rounds `held` picks, each until the test adds one permit to `release`; every run ends
/// without a verdict (the order is the point).
pub struct Recorder {
    order: Mutex<Vec<u64>>,
    held: Box<dyn Fn(u64) -> bool + Send + Sync>,
    pub release: tokio::sync::Semaphore,
}

impl Recorder {
    pub fn holding(held: impl Fn(u64) -> bool + Send + Sync + 'static) -> Self {
        Self {
            order: Mutex::new(Vec::new()),
            held: Box::new(held),
            release: tokio::sync::Semaphore::new(0),
        }
    }

    /// The rounds run so far, in order.
    pub fn order(&self) -> Vec<u64> {
        self.order.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl JobExecutor for Recorder {
    async fn execute(
        &self,
        job: &ValidatedJob,
        _: &Path,
        _: &Path,
    ) -> Result<ExecutedJob, JobFailure> {
        self.order.lock().unwrap().push(job.round());
        if (self.held)(job.round()) {
            self.release.acquire().await.unwrap().forget();
        }
        Err(JobFailure::Internal("test double: no verdict".into()))
    }
}

/// The service's injected clock, standing at `now` (unix seconds).
pub fn clock_at(now: u64) -> Arc<ManualClock> {
    Arc::new(ManualClock::new(i64::try_from(now).unwrap() * 1000))
}

/// The value of the metric `name` (with its labels) as the service renders it.
pub fn metric(telemetry: &Telemetry, name: &str) -> Option<f64> {
    telemetry
        .render()
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// Waits until `done` holds; `false` after a bound far beyond what the service needs (a
/// missing behaviour, not a slow machine: the result does not depend on where it stops).
pub async fn wait_for(done: impl Fn() -> bool) -> bool {
    for _ in 0..3000 {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}
