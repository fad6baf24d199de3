//! What `worker serve` reports about itself on `--metrics-listen`: Prometheus metrics (the
//! Prometheus project's `prometheus-client`, text exposition) and the `/healthz` verdict.
//!
//! The service loop writes; the HTTP tasks only read. Everything is atomics inside
//! `prometheus-client`'s metric types, so a scrape never waits for the loop (which may be
//! inside a long SQLite write or a run) and never touches the ledger.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};

use super::HEARTBEAT_EVERY;
use super::ledger::now_ms;

/// Run durations: from a cached verdict (well under a second) to the longest timeouts.
const DURATION_BUCKETS: [f64; 12] = [
    0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
];

/// Outcomes of a run that ended with a job row (the row's status), exposed from the start
/// so a rate over them is defined before the first run.
const OUTCOMES: [&str; 6] = [
    "completed_passed",
    "completed_failed",
    "rejected",
    "no_verdict",
    "error",
    "skipped",
];

type Labels = Vec<(&'static str, String)>;

/// The service's counters and gauges, and what `/healthz` decides from.
#[derive(Debug)]
pub struct Telemetry {
    registry: Registry,
    jobs_seen: Counter,
    conflicting: Counter,
    runs: Family<Labels, Counter>,
    no_verdict: Family<Labels, Counter>,
    interrupted: Counter,
    duration: Histogram,
    polls: Family<Labels, Counter>,
    last_poll_ok: Gauge,
    oldest_pending_age: Gauge,
    in_flight: Gauge,
    /// First-seen time (unix ms) of the oldest job still to run, or 0 when none.
    oldest_pending_ms: AtomicI64,
    /// Unix ms of the last successful poll, 0 before one.
    last_poll_ok_ms: AtomicI64,
    /// Unix ms of the last poll attempt's end, 0 before one.
    last_poll_ms: AtomicI64,
    /// Unix ms at which the current batch of runs started, 0 while idle.
    busy_since_ms: AtomicI64,
    /// Time spent in finished batches since the last successful poll, in ms: the loop polls
    /// between batches, so that time does not make the poll stale.
    busy_ms_since_ok: AtomicI64,
    /// Unix ms of the last heartbeat row written.
    last_heartbeat_ms: AtomicI64,
    /// The poll interval, in ms.
    poll_interval_ms: AtomicU64,
}

impl Telemetry {
    /// Fresh metrics for a service polling every `poll_interval`.
    pub fn new(poll_interval: Duration) -> Self {
        let mut registry = Registry::default();
        let jobs_seen = Counter::default();
        registry.register(
            "worker_serve_jobs_seen",
            "Jobs this process recorded in the ledger for the first time",
            jobs_seen.clone(),
        );
        let conflicting = Counter::default();
        registry.register(
            "worker_serve_conflicting_jobs",
            "Jobs listed with the id and round of a job already seen but other content (recorded, never run)",
            conflicting.clone(),
        );
        let runs = Family::<Labels, Counter>::default();
        for outcome in OUTCOMES {
            let _ = runs.get_or_create(&vec![("outcome", outcome.to_owned())]);
        }
        registry.register(
            "worker_serve_runs",
            "Runs that ended with a job row, by its status (completed_passed and completed_failed carry a verdict candidate)",
            runs.clone(),
        );
        let no_verdict = Family::<Labels, Counter>::default();
        registry.register(
            "worker_serve_no_verdict_runs",
            "Runs that ended without a verdict (no_verdict or error), by reason code",
            no_verdict.clone(),
        );
        let interrupted = Counter::default();
        registry.register(
            "worker_serve_interrupted_runs",
            "Runs cut short by a shutdown of this process (never a verdict)",
            interrupted.clone(),
        );
        let duration = Histogram::new(DURATION_BUCKETS);
        registry.register_with_unit(
            "worker_serve_run_duration",
            "Wall time of runs that ended with a job row",
            Unit::Seconds,
            duration.clone(),
        );
        let polls = Family::<Labels, Counter>::default();
        for result in ["ok", "failed"] {
            let _ = polls.get_or_create(&vec![("result", result.to_owned())]);
        }
        registry.register(
            "worker_serve_polls",
            "Feed polls: ok when every verifier's query answered, failed otherwise",
            polls.clone(),
        );
        let last_poll_ok = Gauge::default();
        registry.register(
            "worker_serve_last_successful_poll_timestamp_seconds",
            "Unix time of the last successful poll (0 before one)",
            last_poll_ok.clone(),
        );
        let oldest_pending_age = Gauge::default();
        registry.register(
            "worker_serve_oldest_pending_job_age_seconds",
            "Age since first seen of the oldest listed job still to run (0 when none)",
            oldest_pending_age.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "worker_serve_runs_in_flight",
            "Runs in progress",
            in_flight.clone(),
        );
        registry.register(
            "worker_build",
            "The worker's version",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION").to_owned())]),
        );
        Self {
            registry,
            jobs_seen,
            conflicting,
            runs,
            no_verdict,
            interrupted,
            duration,
            polls,
            last_poll_ok,
            oldest_pending_age,
            in_flight,
            oldest_pending_ms: AtomicI64::new(0),
            last_poll_ok_ms: AtomicI64::new(0),
            last_poll_ms: AtomicI64::new(0),
            busy_since_ms: AtomicI64::new(0),
            busy_ms_since_ok: AtomicI64::new(0),
            last_heartbeat_ms: AtomicI64::new(0),
            poll_interval_ms: AtomicU64::new(
                u64::try_from(poll_interval.as_millis()).unwrap_or(u64::MAX),
            ),
        }
    }

    /// A poll ended; `ok` when every query answered.
    pub fn poll(&self, ok: bool) {
        let now = now_ms();
        if ok {
            self.last_poll_ok_ms.store(now, Ordering::Relaxed);
            self.busy_ms_since_ok.store(0, Ordering::Relaxed);
            self.last_poll_ok.set(now / 1000);
        }
        self.last_poll_ms.store(now, Ordering::Relaxed);
        let result = if ok { "ok" } else { "failed" };
        self.polls
            .get_or_create(&vec![("result", result.to_owned())])
            .inc();
    }

    /// A job was recorded in the ledger for the first time.
    pub fn job_seen(&self) {
        self.jobs_seen.inc();
    }

    /// A job was recorded as conflicting (its id and round seen before with other content).
    pub fn job_conflicting(&self) {
        self.conflicting.inc();
    }

    /// First-seen time (unix ms) of the oldest job still to run, `None` when none is.
    pub fn set_oldest_pending(&self, first_seen_ms: Option<i64>) {
        self.oldest_pending_ms
            .store(first_seen_ms.unwrap_or(0), Ordering::Relaxed);
    }

    /// A run started.
    pub fn run_started(&self) {
        self.run_started_at(now_ms());
    }

    fn run_started_at(&self, now: i64) {
        if self.in_flight.inc() == 0 {
            self.busy_since_ms.store(now, Ordering::Relaxed);
        }
    }

    /// A run ended with a job row of `status` (and `reason_code`), after `took`.
    pub fn run_ended(&self, status: &str, reason_code: Option<&str>, took: Duration) {
        self.leave(now_ms());
        self.runs
            .get_or_create(&vec![("outcome", label_value(status))])
            .inc();
        if matches!(status, "no_verdict" | "error") {
            self.no_verdict
                .get_or_create(&vec![(
                    "reason",
                    label_value(reason_code.unwrap_or("none")),
                )])
                .inc();
        }
        self.duration.observe(took.as_secs_f64());
    }

    /// A run was cut short by a shutdown.
    pub fn run_interrupted(&self) {
        self.leave(now_ms());
        self.interrupted.inc();
    }

    fn leave(&self, now: i64) {
        if self.in_flight.dec() <= 1 {
            let since = self.busy_since_ms.swap(0, Ordering::Relaxed);
            if since > 0 {
                self.busy_ms_since_ok
                    .fetch_add(now.saturating_sub(since).max(0), Ordering::Relaxed);
            }
        }
    }

    /// The heartbeat row was written.
    pub fn heartbeat(&self) {
        self.last_heartbeat_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// The text exposition (OpenMetrics text, which Prometheus scrapes).
    pub fn render(&self) -> String {
        let oldest = self.oldest_pending_ms.load(Ordering::Relaxed);
        let age = if oldest > 0 {
            (now_ms() - oldest).max(0) / 1000
        } else {
            0
        };
        self.oldest_pending_age.set(age);
        let mut text = String::new();
        // Writing into a String cannot fail; an error here would be a bug in the encoder.
        if encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        text
    }

    /// `/healthz`: `Ok(detail)` when healthy, `Err(reason)` otherwise.
    pub fn health(&self) -> Result<serde_json::Value, String> {
        self.health_at(now_ms())
    }

    fn health_at(&self, now: i64) -> Result<serde_json::Value, String> {
        let interval =
            i64::try_from(self.poll_interval_ms.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
        // Three polls missed, with the pauses' ±10 % jitter.
        let poll_bound = interval.saturating_mul(33) / 10;
        let heartbeat_bound = i64::try_from(HEARTBEAT_EVERY.as_millis() * 2)
            .unwrap_or(i64::MAX)
            .saturating_add(poll_bound);
        let last_ok = self.last_poll_ok_ms.load(Ordering::Relaxed);
        let busy_since = self.busy_since_ms.load(Ordering::Relaxed);
        let heartbeat = self.last_heartbeat_ms.load(Ordering::Relaxed);
        if last_ok == 0 {
            return Err("no successful poll of the feed yet".into());
        }
        // Runs hold up the next poll (the loop polls between batches), so time spent
        // running, in this batch or in those since, does not make the last poll stale.
        let busy = self.busy_ms_since_ok.load(Ordering::Relaxed)
            + if busy_since > 0 {
                now.saturating_sub(busy_since)
            } else {
                0
            };
        let poll_age = now.saturating_sub(last_ok).saturating_sub(busy);
        if poll_age > poll_bound {
            return Err(format!(
                "the last successful poll of the feed was {} s ago (bound {} s)",
                poll_age / 1000,
                poll_bound / 1000
            ));
        }
        let beat_age = now.saturating_sub(heartbeat);
        if heartbeat == 0 || beat_age > heartbeat_bound {
            return Err(format!(
                "the ledger heartbeat is stale ({} s; bound {} s)",
                beat_age / 1000,
                heartbeat_bound / 1000
            ));
        }
        Ok(serde_json::json!({
            "status": "ok",
            "last_successful_poll_ms": last_ok,
            "last_heartbeat_ms": heartbeat,
            "runs_in_flight": self.in_flight.get(),
            "version": env!("CARGO_PKG_VERSION"),
        }))
    }
}

/// A label value from a status or reason code: the codes are the worker's own, but a label
/// set must stay bounded whatever a code ever holds, so anything else is `other`.
fn label_value(code: &str) -> String {
    let plain = !code.is_empty()
        && code.len() <= 48
        && code
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if plain {
        code.to_owned()
    } else {
        "other".into()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn serve_health_needs_a_recent_successful_poll_and_a_fresh_heartbeat() {
        let t = Telemetry::new(Duration::from_secs(10));
        let now = now_ms();
        assert!(t.health_at(now).unwrap_err().contains("no successful poll"));
        t.poll(true);
        t.heartbeat();
        assert!(t.health_at(now_ms()).is_ok());
        // 34 s later without a poll: three 10 s polls missed.
        assert!(
            t.health_at(now_ms() + 34_000)
                .unwrap_err()
                .contains("last successful poll")
        );
        // While a run holds up the next poll, the poll age stops at the batch's start...
        t.run_started();
        assert!(t.health_at(now_ms() + 34_000).is_ok());
        // ...but the heartbeat must go on.
        assert!(
            t.health_at(now_ms() + 100_000)
                .unwrap_err()
                .contains("heartbeat")
        );
        t.run_ended("completed_passed", None, Duration::from_secs(1));
        assert!(t.health_at(now_ms() + 34_000).is_err());
    }

    /// A batch of ten minutes on a 10 s poll interval: right after it, the service is about
    /// to poll again, not stale; once it has idled past the bound without polling, it is.
    #[test]
    fn serve_health_a_long_batch_does_not_make_the_poll_stale_afterwards() {
        let t = Telemetry::new(Duration::from_secs(10));
        let start = now_ms();
        t.poll(true);
        t.heartbeat();
        t.run_started_at(start + 1_000);
        t.leave(start + 601_000);
        t.last_heartbeat_ms
            .store(start + 601_000, Ordering::Relaxed);
        assert!(t.health_at(start + 602_000).is_ok());
        assert!(t.health_at(start + 636_000).is_err());
        // The next successful poll starts the count afresh.
        t.poll(true);
        assert_eq!(t.busy_ms_since_ok.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn serve_metrics_label_values_stay_bounded() {
        assert_eq!(label_value("timeout"), "timeout");
        assert_eq!(label_value("x\"}\nfake_metric 1"), "other");
        assert_eq!(label_value(&"a".repeat(49)), "other");
        assert_eq!(label_value(""), "other");
        let t = Telemetry::new(Duration::from_secs(1));
        t.run_ended("error", Some("Evil\"label"), Duration::from_millis(5));
        let text = t.render();
        assert!(
            text.contains("worker_serve_no_verdict_runs_total{reason=\"other\"} 1"),
            "{text}"
        );
        t.job_conflicting();
        let text = t.render();
        assert!(
            text.contains("worker_serve_conflicting_jobs_total 1"),
            "{text}"
        );
    }
}
