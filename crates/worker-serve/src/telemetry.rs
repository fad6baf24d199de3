//! What `worker serve` reports about itself on `--metrics-listen`: Prometheus metrics (the
//! Prometheus project's `prometheus-client`, text exposition) and the `/healthz` verdict.
//!
//! The service loop writes; the HTTP tasks only read. Everything is atomics inside
//! `prometheus-client`'s metric types, so a scrape never waits for the loop (which may be
//! inside a long SQLite write or a run) and never touches the ledger.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};

use super::HEARTBEAT_EVERY;
use super::clock::Clock;
use super::retry::HOST_UNHEALTHY_AFTER;

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

/// The statuses `/healthz` answers with, each a `worker_serve_health` series.
const HEALTH_STATUSES: [&str; 3] = ["ok", "unhealthy", "degraded"];

/// A monotonic stamp not yet taken.
const NEVER: i64 = -1;

type Labels = Vec<(&'static str, String)>;

/// Why `/healthz` answers 503.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhealthy {
    /// `unhealthy` (the service is stuck) or `degraded` (it runs, but the host fails every job).
    pub status: &'static str,
    /// For the operator.
    pub reason: String,
}

impl Unhealthy {
    fn stuck(reason: String) -> Self {
        Self {
            status: "unhealthy",
            reason,
        }
    }
}

/// A counter registered under `name`.
fn counter(registry: &mut Registry, name: &str, help: &str) -> Counter {
    let counter = Counter::default();
    registry.register(name, help, counter.clone());
    counter
}

/// A gauge registered under `name`.
fn gauge(registry: &mut Registry, name: &str, help: &str) -> Gauge {
    let gauge = Gauge::default();
    registry.register(name, help, gauge.clone());
    gauge
}

/// The deadline metrics (#43): the nearest window end, the jobs at risk, the jobs set apart.
#[derive(Debug)]
struct DeadlineMetrics {
    nearest_window_end: Gauge,
    jobs_at_risk: Gauge,
    window_too_short: Counter,
}

impl DeadlineMetrics {
    fn register(registry: &mut Registry) -> Self {
        let nearest_window_end = Gauge::default();
        nearest_window_end.set(-1);
        registry.register(
            "worker_serve_nearest_window_end_seconds",
            "Seconds left to the nearest verification window end among listed jobs without a candidate (-1 when there is none)",
            nearest_window_end.clone(),
        );
        let jobs_at_risk = Gauge::default();
        registry.register(
            "worker_serve_jobs_at_risk",
            "Listed jobs without a candidate whose window leaves less than what settling needs plus the at-risk margin",
            jobs_at_risk.clone(),
        );
        let window_too_short = Counter::default();
        registry.register(
            "worker_serve_window_too_short_jobs",
            "Jobs not started because they could no longer settle before their window ends (window_too_short), each counted once",
            window_too_short.clone(),
        );
        Self {
            nearest_window_end,
            jobs_at_risk,
            window_too_short,
        }
    }
}

/// `worker_serve_health`, one series per status `/healthz` answers with.
fn health_family(registry: &mut Registry) -> Family<Labels, Gauge> {
    let family = Family::<Labels, Gauge>::default();
    for status in HEALTH_STATUSES {
        let _ = family.get_or_create(&vec![("status", status.to_owned())]);
    }
    registry.register(
        "worker_serve_health",
        "1 for the status /healthz answers at this scrape (ok, unhealthy or degraded), 0 for the others",
        family.clone(),
    );
    family
}

/// The service's counters and gauges, and what `/healthz` decides from. Every age is measured
/// on the injected clock's monotonic reading, so a step of the wall clock (back or forward)
/// neither hides a stale service nor raises a false alert.
#[derive(Debug)]
pub struct Telemetry {
    clock: Arc<dyn Clock>,
    registry: Registry,
    jobs_seen: Counter,
    conflicting: Counter,
    given_up: Counter,
    runs: Family<Labels, Counter>,
    no_verdict: Family<Labels, Counter>,
    errors: Family<Labels, Counter>,
    host_failures: Family<Labels, Counter>,
    interrupted: Counter,
    duration: Histogram,
    polls: Family<Labels, Counter>,
    last_poll_ok: Gauge,
    oldest_pending_age: Gauge,
    in_flight: Gauge,
    /// `/healthz`'s status as a gauge per status (1 for the current one), set at each scrape:
    /// alert rules read only scrapes, and a stuck service and a degraded host call for
    /// different actions.
    health_status: Family<Labels, Gauge>,
    deadline: DeadlineMetrics,
    /// First-seen time (unix ms, from the ledger) of the oldest job still to run, or 0.
    oldest_pending_ms: AtomicI64,
    /// Monotonic ms of the last successful poll, [`NEVER`] before one.
    last_poll_ok_at: AtomicI64,
    /// Wall ms of the last successful poll (shown, never used for an age).
    last_poll_ok_wall_ms: AtomicI64,
    /// Monotonic ms of the last heartbeat row written, [`NEVER`] before one.
    last_heartbeat_at: AtomicI64,
    /// Wall ms of the last heartbeat row written.
    last_heartbeat_wall_ms: AtomicI64,
    /// The poll interval, in ms.
    poll_interval_ms: AtomicU64,
    /// Runs in a row that failed for host causes, and the last one's code and detail.
    host: Mutex<(u32, String)>,
    /// Pulls and evictions ([`crate::images`]).
    images: ImageMetrics,
    /// A fleet's leases as this host sees them (0 on a single host's SQLite ledger).
    fleet: FleetMetrics,
}

/// Set by the fleet ledger while its database does not answer, read by `/healthz`.
pub type LedgerOutage = Arc<Mutex<Option<String>>>;

/// The fleet's leases (issue #45), as this host last read them from the database.
#[derive(Debug)]
struct FleetMetrics {
    leased_here: Gauge,
    leased_elsewhere: Gauge,
    takeovers: Gauge,
    /// While the database does not answer: why (the ledger reconnects meanwhile).
    outage: LedgerOutage,
}

impl FleetMetrics {
    fn register(registry: &mut Registry) -> Self {
        Self {
            leased_here: gauge(
                registry,
                "worker_serve_fleet_jobs_leased_here",
                "Jobs under a live lease of this host (a fleet ledger; 0 on SQLite)",
            ),
            leased_elsewhere: gauge(
                registry,
                "worker_serve_fleet_jobs_leased_elsewhere",
                "Jobs under a live lease of another host of the fleet",
            ),
            takeovers: gauge(
                registry,
                "worker_serve_fleet_lease_takeovers",
                "Leases that ended before their run did and were taken over, over the fleet database's life",
            ),
            outage: Arc::new(Mutex::new(None)),
        }
    }
}

impl Telemetry {
    /// Fresh metrics for a service polling every `poll_interval`, reading `clock`.
    pub fn new(poll_interval: Duration, clock: Arc<dyn Clock>) -> Self {
        let mut registry = Registry::default();
        let jobs_seen = counter(
            &mut registry,
            "worker_serve_jobs_seen",
            "Jobs this process recorded in the ledger for the first time",
        );
        let conflicting = counter(
            &mut registry,
            "worker_serve_conflicting_jobs",
            "Jobs listed with the id and round of a job already seen but other content (recorded, never run)",
        );
        let given_up = counter(
            &mut registry,
            "worker_serve_jobs_given_up",
            "Jobs given up by this process: their verification window ended without a verdict",
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
            "Runs whose status is no_verdict, by reason code (their sum is worker_serve_runs_total{outcome=\"no_verdict\"})",
            no_verdict.clone(),
        );
        let errors = Family::<Labels, Counter>::default();
        registry.register(
            "worker_serve_error_runs",
            "Runs whose status is error, by reason code (their sum is worker_serve_runs_total{outcome=\"error\"})",
            errors.clone(),
        );
        let host_failures = Family::<Labels, Counter>::default();
        registry.register(
            "worker_serve_host_failures",
            "Runs without a verdict for a host cause (engine, missing image without --pull, archive host, directories), by reason code; never counted as a job's attempt",
            host_failures.clone(),
        );
        let interrupted = counter(
            &mut registry,
            "worker_serve_interrupted_runs",
            "Runs cut short by a shutdown of this process (never a verdict)",
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
        let last_poll_ok = gauge(
            &mut registry,
            "worker_serve_last_successful_poll_timestamp_seconds",
            "Unix time of the last successful poll (0 before one)",
        );
        let oldest_pending_age = gauge(
            &mut registry,
            "worker_serve_oldest_pending_job_age_seconds",
            "Age since first seen of the oldest listed job still to run (0 when none)",
        );
        let in_flight = gauge(
            &mut registry,
            "worker_serve_runs_in_flight",
            "Runs in progress",
        );
        let health_status = health_family(&mut registry);

        registry.register(
            "worker_build",
            "The worker's version and its build (version and source commit)",
            Info::new(vec![
                ("version", env!("CARGO_PKG_VERSION").to_owned()),
                ("build", verifier_sdk::build::identity().to_owned()),
            ]),
        );
        Self {
            images: ImageMetrics::register(&mut registry),
            deadline: DeadlineMetrics::register(&mut registry),
            fleet: FleetMetrics::register(&mut registry),
            clock,
            registry,
            jobs_seen,
            conflicting,
            given_up,
            runs,
            no_verdict,
            errors,
            host_failures,
            interrupted,
            duration,
            polls,
            last_poll_ok,
            oldest_pending_age,
            in_flight,
            health_status,
            oldest_pending_ms: AtomicI64::new(0),
            last_poll_ok_at: AtomicI64::new(NEVER),
            last_poll_ok_wall_ms: AtomicI64::new(0),
            last_heartbeat_at: AtomicI64::new(NEVER),
            last_heartbeat_wall_ms: AtomicI64::new(0),
            poll_interval_ms: AtomicU64::new(
                u64::try_from(poll_interval.as_millis()).unwrap_or(u64::MAX),
            ),
            host: Mutex::new((0, String::new())),
        }
    }

    /// The image metrics.
    pub fn images(&self) -> &ImageMetrics {
        &self.images
    }

    /// The clock the service reads (the same one `/healthz` measures ages with).
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Monotonic ms now.
    fn mono(&self) -> i64 {
        i64::try_from(self.clock.monotonic().as_millis()).unwrap_or(i64::MAX)
    }

    /// A poll ended; `ok` when every query answered.
    pub fn poll(&self, ok: bool) {
        if ok {
            let wall = self.clock.wall_ms();
            self.last_poll_ok_at.store(self.mono(), Ordering::Relaxed);
            self.last_poll_ok_wall_ms.store(wall, Ordering::Relaxed);
            self.last_poll_ok.set(wall / 1000);
        }
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

    /// `n` jobs were given up (their window ended without a verdict).
    pub fn jobs_given_up(&self, n: u64) {
        self.given_up.inc_by(n);
    }

    /// Where the ledger says that its database does not answer (and that it does again).
    pub fn ledger_outage(&self) -> LedgerOutage {
        self.fleet.outage.clone()
    }

    /// The fleet's leases as this host last read them.
    pub fn set_fleet(&self, view: crate::fleet::FleetView) {
        self.fleet.leased_here.set(view.leased_here);
        self.fleet.leased_elsewhere.set(view.leased_elsewhere);
        self.fleet.takeovers.set(view.takeovers);
    }

    /// First-seen time (unix ms) of the oldest job still to run, `None` when none is.
    pub fn set_oldest_pending(&self, first_seen_ms: Option<i64>) {
        self.oldest_pending_ms
            .store(first_seen_ms.unwrap_or(0), Ordering::Relaxed);
    }

    /// The deadline figures of the listed jobs without a candidate ([`worker_jobs::feed::deadline::risk`]).
    pub fn set_risk(&self, risk: worker_jobs::feed::deadline::Risk) {
        self.deadline.nearest_window_end.set(
            risk.nearest_left_secs
                .map_or(-1, |s| i64::try_from(s).unwrap_or(i64::MAX)),
        );
        self.deadline
            .jobs_at_risk
            .set(i64::try_from(risk.at_risk).unwrap_or(i64::MAX));
    }

    /// A job was set apart as `window_too_short`.
    pub fn window_too_short(&self) {
        self.deadline.window_too_short.inc();
    }

    /// A run started.
    pub fn run_started(&self) {
        self.in_flight.inc();
    }

    /// A run ended with a job row of `status` (and `reason_code`), after `took`.
    pub fn run_ended(&self, status: &str, reason_code: Option<&str>, took: Duration) {
        self.leave();
        self.runs
            .get_or_create(&vec![("outcome", label_value(status))])
            .inc();
        // One meaning of each word: `no_verdict` counts runs of that status only, `error`
        // runs have their own family (before, both were counted as no-verdict runs).
        let family = match status {
            "no_verdict" => Some(&self.no_verdict),
            "error" => Some(&self.errors),
            _ => None,
        };
        if let Some(family) = family {
            family
                .get_or_create(&vec![(
                    "reason",
                    label_value(reason_code.unwrap_or("none")),
                )])
                .inc();
        }
        self.duration.observe(took.as_secs_f64());
    }

    /// The run that just ended failed for a host cause (`code`, with `detail`).
    pub fn host_failure(&self, code: &str, detail: &str) {
        self.host_failures
            .get_or_create(&vec![("reason", label_value(code))])
            .inc();
        let mut host = self.host.lock().unwrap_or_else(PoisonError::into_inner);
        host.0 = host.0.saturating_add(1);
        host.1 = format!("{code}: {}", detail.chars().take(300).collect::<String>());
    }

    /// The run that just ended did not fail for a host cause: the host works.
    pub fn host_worked(&self) {
        *self.host.lock().unwrap_or_else(PoisonError::into_inner) = (0, String::new());
    }

    /// A run was cut short by a shutdown.
    pub fn run_interrupted(&self) {
        self.leave();
        self.interrupted.inc();
    }

    fn leave(&self) {
        self.in_flight.dec();
    }

    /// The heartbeat row was written.
    pub fn heartbeat(&self) {
        self.last_heartbeat_at.store(self.mono(), Ordering::Relaxed);
        self.last_heartbeat_wall_ms
            .store(self.clock.wall_ms(), Ordering::Relaxed);
    }

    /// The text exposition (OpenMetrics text, which Prometheus scrapes).
    pub fn render(&self) -> String {
        let oldest = self.oldest_pending_ms.load(Ordering::Relaxed);
        // First-seen times come from the ledger (across restarts): a wall-clock age.
        let age = if oldest > 0 {
            (self.clock.wall_ms() - oldest).max(0) / 1000
        } else {
            0
        };
        self.oldest_pending_age.set(age);
        let now = match self.health() {
            Ok(_) => "ok",
            Err(unhealthy) => unhealthy.status,
        };
        for status in HEALTH_STATUSES {
            self.health_status
                .get_or_create(&vec![("status", status.to_owned())])
                .set(i64::from(status == now));
        }
        let mut text = String::new();
        // Writing into a String cannot fail; an error here would be a bug in the encoder.
        if encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        text
    }

    /// `/healthz`: `Ok(detail)` when healthy, `Err` with the status and reason otherwise.
    pub fn health(&self) -> Result<serde_json::Value, Unhealthy> {
        let now = self.mono();
        let interval =
            i64::try_from(self.poll_interval_ms.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
        // Three polls missed, with the pauses' ±10 % jitter.
        let poll_bound = interval.saturating_mul(33) / 10;
        let heartbeat_bound = i64::try_from(HEARTBEAT_EVERY.as_millis() * 2)
            .unwrap_or(i64::MAX)
            .saturating_add(poll_bound);
        // First: while the database is away the loop waits in the ledger, so the poll and
        // heartbeat ages below would soon call it stuck; this is the reason.
        if let Some(why) = self
            .fleet
            .outage
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        {
            return Err(Unhealthy {
                status: "degraded",
                reason: format!(
                    "the ledger database does not answer; reconnecting with a back-off: {why}"
                ),
            });
        }
        let last_ok = self.last_poll_ok_at.load(Ordering::Relaxed);
        let heartbeat = self.last_heartbeat_at.load(Ordering::Relaxed);
        if last_ok == NEVER {
            return Err(Unhealthy::stuck(
                "no successful poll of the feed yet".into(),
            ));
        }
        // Runs do not hold up the polls (the loop polls while a batch runs too), so a batch
        // excuses nothing: a feed down during a long batch turns this red like an idle one.
        let poll_age = now.saturating_sub(last_ok);
        if poll_age > poll_bound {
            return Err(Unhealthy::stuck(format!(
                "the last successful poll of the feed was {} s ago (bound {} s)",
                poll_age / 1000,
                poll_bound / 1000
            )));
        }
        let beat_age = now.saturating_sub(heartbeat);
        if heartbeat == NEVER || beat_age > heartbeat_bound {
            return Err(Unhealthy::stuck(format!(
                "the ledger heartbeat is stale ({} s; bound {} s)",
                beat_age / 1000,
                heartbeat_bound / 1000
            )));
        }
        let (host_failures, last_host) = self
            .host
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if host_failures >= HOST_UNHEALTHY_AFTER {
            return Err(Unhealthy {
                status: "degraded",
                reason: format!(
                    "the last {host_failures} runs failed for host causes (not counted as the jobs' attempts; the host backs off): last {last_host}"
                ),
            });
        }
        Ok(serde_json::json!({
            "status": "ok",
            "last_successful_poll_ms": self.last_poll_ok_wall_ms.load(Ordering::Relaxed),
            "last_heartbeat_ms": self.last_heartbeat_wall_ms.load(Ordering::Relaxed),
            "runs_in_flight": self.in_flight.get(),
            "version": env!("CARGO_PKG_VERSION"),
            "build": verifier_sdk::build::identity(),
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
    use crate::clock::ManualClock;

    fn telemetry(poll: u64) -> (Telemetry, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(1_800_000_000_000));
        (
            Telemetry::new(Duration::from_secs(poll), clock.clone()),
            clock,
        )
    }

    fn reason(t: &Telemetry) -> String {
        t.health().unwrap_err().reason
    }

    #[test]
    fn serve_health_needs_a_recent_successful_poll_and_a_fresh_heartbeat() {
        let (t, clock) = telemetry(10);
        assert!(reason(&t).contains("no successful poll"));
        t.poll(true);
        t.heartbeat();
        assert!(t.health().is_ok());
        // 34 s later without a poll: three 10 s polls missed.
        clock.advance(Duration::from_secs(34));
        assert!(reason(&t).contains("last successful poll"));
        // The heartbeat must go on too: its bound is 2 × 30 s plus the poll's 33 s.
        let (t, clock) = telemetry(10);
        t.poll(true);
        t.heartbeat();
        for _ in 0..3 {
            clock.advance(Duration::from_secs(30));
            t.poll(true);
        }
        assert!(t.health().is_ok(), "{:?}", t.health());
        clock.advance(Duration::from_secs(4));
        t.poll(true);
        assert!(reason(&t).contains("heartbeat"));
    }

    /// #43 gap 12: serve polls while a batch runs, so a batch excuses no poll. Ten minutes
    /// into a batch on a 10 s poll interval whose polls all failed, the service is stale;
    /// one that polled during the batch is not. Before: the batch's time was taken off the
    /// poll's age, so a feed down during a long batch never turned `/healthz` red.
    #[test]
    fn serve_health_a_poll_failing_during_a_long_batch_is_stale_though_runs_go_on() {
        let (t, clock) = telemetry(10);
        t.poll(true);
        t.heartbeat();
        t.run_started();
        for _ in 0..60 {
            clock.advance(Duration::from_secs(10));
            t.poll(false);
            t.heartbeat();
        }
        assert!(
            reason(&t).contains("last successful poll"),
            "{:?}",
            t.health()
        );
        // Polling again while the same batch runs: fresh.
        t.poll(true);
        assert!(t.health().is_ok(), "{:?}", t.health());
        t.run_ended("completed_passed", None, Duration::from_secs(600));
        clock.advance(Duration::from_secs(34));
        assert!(t.health().is_err());
    }

    /// Issue 21.7: the wall clock steps back an hour while the feed is down for 40 s: the
    /// poll is as stale as the monotonic clock says, whatever the wall clock reads; and a
    /// forward step raises no false alert.
    #[test]
    fn serve_health_a_backward_wall_clock_step_does_not_hide_a_stale_poll() {
        let (t, clock) = telemetry(10);
        t.poll(true);
        t.heartbeat();
        clock.step_wall(-3_600_000);
        clock.advance(Duration::from_secs(40));
        assert!(
            reason(&t).contains("last successful poll"),
            "{:?}",
            t.health()
        );
        let (t, clock) = telemetry(10);
        t.poll(true);
        t.heartbeat();
        clock.step_wall(3_600_000);
        clock.advance(Duration::from_secs(5));
        assert!(t.health().is_ok(), "{:?}", t.health());
    }

    /// Issue #45: while a fleet's database does not answer (the service reconnecting with a
    /// back-off), `/healthz` is degraded with the reason; answering again restores it.
    #[test]
    fn serve_health_is_degraded_while_the_fleet_database_does_not_answer() {
        let (t, _clock) = telemetry(10);
        t.poll(true);
        t.heartbeat();
        let outage = t.ledger_outage();
        *outage.lock().unwrap() = Some("connection refused".into());
        let bad = t.health().unwrap_err();
        assert_eq!(bad.status, "degraded");
        assert!(
            bad.reason.contains("ledger database") && bad.reason.contains("connection refused"),
            "{bad:?}"
        );
        *outage.lock().unwrap() = None;
        assert!(t.health().is_ok());
    }

    /// Issue 23.1: the last runs all failing for host causes degrade `/healthz` with the
    /// reason; any other outcome restores it.
    #[test]
    fn serve_health_is_degraded_when_the_last_runs_all_failed_for_host_causes() {
        let (t, _clock) = telemetry(10);
        t.poll(true);
        t.heartbeat();
        for _ in 0..HOST_UNHEALTHY_AFTER - 1 {
            t.host_failure("image_missing", "the pinned image is not present");
        }
        assert!(t.health().is_ok());
        t.host_failure("image_missing", "the pinned image is not present");
        let bad = t.health().unwrap_err();
        assert_eq!(bad.status, "degraded");
        assert!(
            bad.reason.contains("image_missing: the pinned image"),
            "{bad:?}"
        );
        t.host_worked();
        assert!(t.health().is_ok());
        let text = t.render();
        assert!(
            text.contains("worker_serve_host_failures_total{reason=\"image_missing\"} 3"),
            "{text}"
        );
        t.jobs_given_up(2);
        assert!(t.render().contains("worker_serve_jobs_given_up_total 2"));
    }

    /// Issue 46.1: `/healthz`'s verdict is also on `/metrics`, so an alert rule (which reads
    /// only scrapes) can tell a stuck service and a degraded host apart.
    #[test]
    fn serve_metrics_expose_the_healthz_status_for_alert_rules() {
        let (t, _clock) = telemetry(10);
        let text = t.render();
        assert!(
            text.contains("worker_serve_health{status=\"unhealthy\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("worker_serve_health{status=\"ok\"} 0"),
            "{text}"
        );
        t.poll(true);
        t.heartbeat();
        let text = t.render();
        assert!(
            text.contains("worker_serve_health{status=\"ok\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("worker_serve_health{status=\"unhealthy\"} 0"),
            "{text}"
        );
        for _ in 0..HOST_UNHEALTHY_AFTER {
            t.host_failure("engine_unavailable", "the engine did not answer");
        }
        let text = t.render();
        assert!(
            text.contains("worker_serve_health{status=\"degraded\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("worker_serve_health{status=\"ok\"} 0"),
            "{text}"
        );
    }

    #[test]
    fn serve_metrics_label_values_stay_bounded() {
        assert_eq!(label_value("timeout"), "timeout");
        assert_eq!(label_value("x\"}\nfake_metric 1"), "other");
        assert_eq!(label_value(&"a".repeat(49)), "other");
        assert_eq!(label_value(""), "other");
        let (t, _clock) = telemetry(1);
        t.run_ended("no_verdict", Some("Evil\"label"), Duration::from_millis(5));
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

    /// Issue 23.4: the two counters agree on what an error is.
    #[test]
    fn serve_metrics_runs_total_and_no_verdict_runs_total_agree_on_what_an_error_is() {
        let (t, _clock) = telemetry(1);
        t.run_ended(
            "error",
            Some("download_transport"),
            Duration::from_millis(5),
        );
        t.run_ended("no_verdict", Some("timeout"), Duration::from_millis(5));
        let text = t.render();
        let sum = |prefix: &str| -> f64 {
            text.lines()
                .filter(|l| l.starts_with(prefix))
                .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
                .sum()
        };
        assert_eq!(
            sum("worker_serve_no_verdict_runs_total{"),
            sum("worker_serve_runs_total{outcome=\"no_verdict\"}"),
            "{text}"
        );
        assert_eq!(
            sum("worker_serve_error_runs_total{"),
            sum("worker_serve_runs_total{outcome=\"error\"}"),
            "{text}"
        );
        assert!(
            text.contains("worker_serve_error_runs_total{reason=\"download_transport\"} 1"),
            "{text}"
        );
    }
}

/// Pull durations: a cached layer set to a multi-GB toolchain image.
const PULL_BUCKETS: [f64; 10] = [0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0];

/// The image metrics on `/metrics`.
#[derive(Debug, Clone)]
pub struct ImageMetrics {
    pub(crate) pulls: Family<Vec<(&'static str, String)>, Counter>,
    pub(crate) pull_duration: Histogram,
    pub(crate) held_back: Counter,
    pub(crate) evicted: Counter,
    pub(crate) evicted_bytes: Counter,
    pub(crate) pulled_bytes: Gauge,
}

impl ImageMetrics {
    /// Registers them in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            pulls: Family::default(),
            pull_duration: Histogram::new(PULL_BUCKETS),
            held_back: Counter::default(),
            evicted: Counter::default(),
            evicted_bytes: Counter::default(),
            pulled_bytes: Gauge::default(),
        };
        for result in ["pulled", "failed"] {
            let _ = metrics
                .pulls
                .get_or_create(&vec![("result", result.to_owned())]);
        }
        registry.register(
            "worker_serve_image_pulls",
            "Image pulls by digest ahead of their jobs, by result",
            metrics.pulls.clone(),
        );
        registry.register_with_unit(
            "worker_serve_image_pull_duration",
            "Wall time of image pulls (never part of worker_serve_run_duration)",
            Unit::Seconds,
            metrics.pull_duration.clone(),
        );
        for (name, help, unit, counter) in [
            (
                "worker_serve_image_held_back_jobs",
                "Jobs not started because their image could not be pulled for a host reason (free space, engine) or has no room under --image-budget yet; retried at the next poll, never counted as an attempt",
                None,
                &metrics.held_back,
            ),
            (
                "worker_serve_images_evicted",
                "Images removed under --image-budget: over it, or to make room for the next pull",
                None,
                &metrics.evicted,
            ),
            (
                "worker_serve_image_evicted",
                "Bytes of images removed under --image-budget",
                Some(Unit::Bytes),
                &metrics.evicted_bytes,
            ),
        ] {
            match unit {
                Some(unit) => registry.register_with_unit(name, help, unit, counter.clone()),
                None => registry.register(name, help, counter.clone()),
            }
        }
        registry.register_with_unit(
            "worker_serve_pulled_images",
            "Bytes the images this worker pulled take (the engine's sizes, shared layers counted in each)",
            Unit::Bytes,
            metrics.pulled_bytes.clone(),
        );
        metrics
    }
}
