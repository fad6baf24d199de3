//! `worker serve`: the worker as a long-running service on a dedicated host. It polls the
//! feed on an interval (with jitter, so several hosts do not poll in step), runs each new job
//! through the same path as `worker feed` ([`worker_jobs::feed::JobRunner`]: selection, archives,
//! staging, sandbox, judgement, candidate file), and keeps a durable [`ledger`] so that a
//! restart neither repeats completed work nor invents a result for a run it did not see end.
//!
//! Shutdown (SIGTERM/SIGINT) stops polling, drops the running job, kills and removes its
//! container, records the run as `interrupted` and returns; a crash leaves the run open in
//! the ledger, and the next start closes it as `interrupted`, removes the dead process's
//! container (the start-up sweep, [`worker_sandbox::Executor::cleanup_stale`]) and
//! runs the job again. An exit on an error (exit 1 or 78) removes the containers of this
//! process first too.
//!
//! One service per state directory ([`lock`]). Runs without a verdict are sorted by whose
//! fault they were ([`retry`]): the host's back off as a whole and never count against a job;
//! the job's own back off per job until its verification window ends, when it is given up.
//!
//! A library: it holds a `worker_sandbox::Executor` and never picks the engine, parses no
//! command line and names no exit code; `worker serve` in the binary does those.

pub mod capacity;
pub mod fleet;
pub mod fleet_conn;
pub mod http;
pub mod images;
pub mod jobstate;
pub mod ledger;
pub mod lock;
pub mod retry;
pub mod rollback;
pub mod shutdown;
pub mod store;
pub mod telemetry;
pub mod timefmt;

pub use worker_jobs::feed::shard;
pub use worker_store::clock;

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use platform_client::PlatformClient;
use sha2::{Digest, Sha256};
use verifier_sdk::{CandidateManifest, canonical_json};

use fleet::{Binding, Recorded};
use ledger::{JobKey, LedgerError, Polls, RunKind, RunResult};
use lock::{LockError, StateLock};
use retry::{Cause, HostHealth, cause_of};
use shutdown::Shutdown;
use store::{AnyLedger, FleetOptions, JobLedger, LedgerLocation, StoreError};
use telemetry::Telemetry;
use worker_jobs::feed::deadline::{TooShort, WINDOW_TOO_SHORT, fits_now, last_start, plan, risk};
use worker_jobs::feed::output::write_manifest;
use worker_jobs::feed::report::FetchFailure;
use worker_jobs::feed::scratch::{Scratch, remove_stale};
use worker_jobs::feed::select::select_jobs;
use worker_jobs::feed::{
    FeedConfig, JobExecutor, JobOutcome, JobRow, JobRun, JobRunner, SandboxJobExecutor, fetch_feeds,
};
use worker_sandbox::Executor;

/// Longest a shutdown may take once signalled: killing and removing the container is
/// bounded by the teardown's own timeouts; this caps everything else.
pub const SHUTDOWN_BOUND: Duration = Duration::from_secs(30);

/// How often the heartbeat row is written while the service is up.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(30);

/// How `worker serve` is configured.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The feed, output, scratch and cache settings shared with `worker feed`.
    pub feed: FeedConfig,
    /// Directory of the ledger.
    pub state_dir: PathBuf,
    /// Seconds between polls (before jitter).
    pub poll_interval: Duration,
    /// Most jobs run at once; `None`: what the engine holds ([`capacity::auto_parallel`]).
    pub parallel: Option<NonZeroUsize>,
    /// Where `/healthz` and `/metrics` are served (loopback unless allowed otherwise);
    /// `None`: nowhere.
    pub metrics_listen: Option<http::Listen>,
    /// Pulls ahead of jobs and the image budget ([`images`]).
    pub images: images::ImagePolicy,
    /// Where the ledger is: SQLite in a directory (one host) or a fleet database.
    pub ledger: LedgerLocation,
    /// This host's name and lease on a fleet database.
    pub fleet: FleetOptions,
}

/// Why the service stopped other than by a signal.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A configuration a restart cannot fix (exit 78).
    #[error("{0}")]
    Config(String),
    /// Anything a restart may fix (exit 1).
    #[error("{0}")]
    Transient(String),
}

impl From<LedgerError> for ServeError {
    fn from(error: LedgerError) -> Self {
        if error.is_permanent() {
            Self::Config(error.to_string())
        } else {
            Self::Transient(error.to_string())
        }
    }
}

impl From<StoreError> for ServeError {
    fn from(error: StoreError) -> Self {
        if error.is_permanent() {
            Self::Config(error.to_string())
        } else {
            Self::Transient(error.to_string())
        }
    }
}

impl From<LockError> for ServeError {
    fn from(error: LockError) -> Self {
        match &error {
            // Another service holds the state directory. Exit 1, not 78: under systemd the
            // holder is most often this unit's own predecessor still stopping (it has up to
            // SHUTDOWN_BOUND), and a restart then succeeds; a second unit on the same
            // --state keeps failing visibly in its restart loop instead of stopping for good.
            LockError::Held { .. } => Self::Transient(error.to_string()),
            LockError::Io { source, .. } if transient_io(source) => {
                Self::Transient(error.to_string())
            }
            LockError::Io { .. } => Self::Config(error.to_string()),
        }
    }
}

/// An I/O error that may pass by itself (a full disk, an interrupted call, no memory).
fn transient_io(error: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    matches!(
        error.kind(),
        K::StorageFull | K::QuotaExceeded | K::Interrupted | K::OutOfMemory | K::WouldBlock
    )
}

/// What [`prepare`] hands to [`serve`]: the ledger, and the state directory's lock, held
/// for as long as this value lives.
pub struct Prepared {
    /// The open ledger.
    pub ledger: AnyLedger,
    /// The exclusive lock on the state directory.
    pub lock: StateLock,
}

/// Checks what can be checked before the engine is contacted, takes the state directory's
/// lock (before the ledger is touched: a second service must not close the first's live
/// runs) and opens the ledger, closing the runs a dead predecessor left open. What a restart
/// cannot fix is a configuration error (78: a bad flag, a corrupt or newer ledger, a
/// directory that cannot be made); what may pass is not (1: the state held by another
/// service, the ledger busy past its timeout, a full disk).
pub fn prepare(config: &ServeConfig) -> Result<Prepared, ServeError> {
    config
        .feed
        .validate()
        .map_err(|e| ServeError::Config(e.to_string()))?;
    if let Some(addr) = config.metrics_listen {
        http::check_listen(addr).map_err(|e| ServeError::Config(e.to_string()))?;
    }
    if config.poll_interval.is_zero() {
        return Err(ServeError::Config(
            "--poll-interval must be positive".into(),
        ));
    }
    for (what, dir) in [
        ("state directory", &config.state_dir),
        ("output directory", &config.feed.out_dir),
        ("work directory", &config.feed.work_dir),
    ] {
        std::fs::create_dir_all(dir).map_err(|e| {
            let message = format!("{what} {dir:?}: {e}");
            if transient_io(&e) {
                ServeError::Transient(message)
            } else {
                ServeError::Config(message)
            }
        })?;
    }
    let lock = lock::lock_state(&config.state_dir)?;
    let binding = Binding {
        feed: config.feed.api_base.clone(),
        verifiers: config
            .feed
            .verifiers
            .iter()
            .map(ToString::to_string)
            .collect(),
    };
    let ledger = AnyLedger::open(
        &config.ledger,
        &binding,
        &config.fleet,
        config.poll_interval,
    )?;
    Ok(Prepared { ledger, lock })
}

/// Serves until `shutdown` fires (`Ok`) or something fails (`Err`). On every exit, the
/// containers of this process are gone: a shutdown removes them and records the runs as
/// interrupted; an error removes them and leaves the runs open, for the next start to close.
/// A transient error once `shutdown` fired (a fleet database that does not answer, whose
/// reconnecting the stop ends) is the stop's: `Ok`, the runs left open.
pub async fn serve(
    config: &ServeConfig,
    ledger: AnyLedger,
    sandbox: Executor,
    staging_root: PathBuf,
    pull: bool,
    shutdown: &Shutdown,
    telemetry: &Telemetry,
) -> Result<(), ServeError> {
    let executor = SandboxJobExecutor::new(sandbox.clone(), staging_root, pull);
    serve_with(config, ledger, &sandbox, &executor, shutdown, telemetry).await
}

/// [`serve`] with the jobs run by `executor` (the sandbox's in `worker serve`; a test's
/// stand-in that decides when each run ends, so the service's order is tested without
/// timing). `sandbox`, the container engine's adapter, still serves the images, the
/// capacity and the containers' removal.
pub async fn serve_with(
    config: &ServeConfig,
    ledger: impl Into<AnyLedger>,
    sandbox: &Executor,
    executor: &dyn JobExecutor,
    shutdown: &Shutdown,
    telemetry: &Telemetry,
) -> Result<(), ServeError> {
    let served = match ledger.into() {
        AnyLedger::Sqlite(ledger) => {
            serve_loop(config, *ledger, sandbox, executor, shutdown, telemetry).await
        }
        AnyLedger::Fleet(ledger) => {
            serve_loop(config, *ledger, sandbox, executor, shutdown, telemetry).await
        }
    };
    // Read before the containers' removal: an error after a stop request is the stop's.
    let stopping = shutdown.requested();
    if served.is_err() {
        // The runs' futures were dropped with the loop; their containers were not.
        match tokio::time::timeout(SHUTDOWN_BOUND, sandbox.remove_own_containers()).await {
            Ok(Ok(removed)) if !removed.is_empty() => {
                tracing::warn!(containers = ?removed, "stopping on an error: removed the running containers");
            }
            Ok(Ok(_)) => {}
            Ok(Err(error)) => tracing::error!(%error, "could not remove the running containers"),
            Err(_) => tracing::error!("removing the running containers timed out"),
        }
    }
    match served {
        // A stop that was asked for ends as one (exit 0, so systemd's stop does not leave the
        // unit failed) even when the ledger failed on the way out, e.g. a fleet database that
        // does not answer (the fleet's reconnecting ends at a stop): the runs left open are
        // closed by the next start, or taken over by another host when their leases end.
        Err(ServeError::Transient(error)) if stopping => {
            tracing::warn!(%error, "stopped as asked; the ledger could not be brought up to date on the way out");
            Ok(())
        }
        served => served,
    }
}

/// Counts one poll's answer for the heartbeat and the metrics, and names each failed query.
fn count_poll(polls: &mut Polls, failures: &[FetchFailure], now_ms: i64, telemetry: &Telemetry) {
    if failures.is_empty() {
        polls.ok += 1;
        polls.last_ok_ms = Some(now_ms);
    } else {
        polls.failed += 1;
        for f in failures {
            tracing::warn!(verifier = %f.verifier, kind = %f.kind, "feed query failed: {}", f.message);
        }
    }
    telemetry.poll(failures.is_empty());
}

/// One service loop's state between its steps.
struct Loop<'a, L> {
    feed: &'a FeedConfig,
    ledger: L,
    images: images::Images,
    polls: Polls,
    listed: BTreeMap<i64, String>,
    /// Whether the last poll got any answer (none leaves the previous manifest in place).
    answered: bool,
    /// Jobs already reported as `window_too_short` (each is said and counted once).
    too_short: BTreeSet<i64>,
    /// Jobs waiting for their image's pull, by image (they join the queue when it ends).
    awaiting: BTreeMap<String, Vec<(i64, verifier_sdk::ValidatedJob)>>,
    /// Pulls asked for and not started yet, the oldest job's image first (one runs at a
    /// time, beside the loop: [`images::Images::fetch`]).
    pull_queue: std::collections::VecDeque<String>,
    /// Jobs whose missing image gets its room under `--image-budget` once the pull under
    /// way ended (admitted again then).
    deferred: Vec<(i64, verifier_sdk::ValidatedJob)>,
    telemetry: &'a Telemetry,
}

impl<L: JobLedger> Loop<'_, L> {
    /// Takes one poll's answer: counts it, records the listed jobs, sets apart those that
    /// cannot settle in time, makes room for the images of the others, and returns those
    /// that may start now, deadline-first, leaving out `skip` (already waiting or running)
    /// and the jobs waiting for a pull. Pulls nothing: a job whose image is missing waits in
    /// `awaiting` for the pull this queues, which runs beside the loop.
    async fn take_poll(
        &mut self,
        sandbox: &Executor,
        (fetched, failures): (Vec<Vec<serde_json::Value>>, Vec<FetchFailure>),
        skip: &BTreeSet<i64>,
        busy: &BTreeSet<String>,
    ) -> Result<Vec<(i64, verifier_sdk::ValidatedJob)>, ServeError> {
        let clock = self.telemetry.clock();
        count_poll(&mut self.polls, &failures, clock.wall_ms(), self.telemetry);
        let any_answer = !fetched.is_empty();
        self.answered = any_answer;
        self.images.polled(
            self.feed,
            any_answer.then(|| fetched.clone()),
            clock.wall_ms(),
        );
        let mut due = due_jobs(
            &mut self.ledger,
            self.feed,
            fetched,
            any_answer,
            &mut self.listed,
            self.telemetry,
        )?;
        due.retain(|(key, _)| !skip.contains(key) && !self.is_awaiting(*key));
        // Counted with its image here: a job that cannot settle even so is set apart before
        // any pull is made for it. A job whose image is pulled is checked again on the clock
        // read when the pull ended (Self::pull_ended), and each before its start (next_job).
        let planned = self.plan_now(due)?;
        Ok(self.admit(sandbox, planned, busy).await)
    }

    /// Admits `jobs` (planned, deadline-first) by their images: returns those that may start
    /// now; the others wait for a pull (`awaiting`), for the pull under way to end
    /// (`deferred`), or are held back until the next poll (their readiness record says so).
    async fn admit(
        &mut self,
        sandbox: &Executor,
        jobs: Vec<(i64, verifier_sdk::ValidatedJob)>,
        busy: &BTreeSet<String>,
    ) -> Vec<(i64, verifier_sdk::ValidatedJob)> {
        let batch = self
            .images
            .before_batch(sandbox.images(), jobs, busy, self.telemetry)
            .await;
        for (job_id, why) in &batch.held {
            // Held back, not run: an earlier "ready" must not stand for it (it is written
            // again at each poll that holds it, and replaced by its run's own record).
            self.write_not_run(
                job_id,
                IMAGE_HELD_BACK,
                &format!("{why}: held back, tried again at the next poll"),
            );
        }
        for (image, jobs) in batch.pulling {
            self.awaiting.entry(image).or_default().extend(jobs);
        }
        self.pull_queue.extend(batch.pull);
        self.deferred.extend(batch.later);
        batch.ready
    }

    /// Whether the job of ledger key `key` waits for a pull (its image's, or the one under
    /// way).
    fn is_awaiting(&self, key: i64) -> bool {
        self.awaiting
            .values()
            .flatten()
            .chain(&self.deferred)
            .any(|(k, _)| *k == key)
    }

    /// Takes the end of a pull: its jobs that can still settle, planned on the clock read
    /// now (the pull's time is gone from each window), none when the image is not ready for
    /// a host reason (held back until the next poll); and the deferred jobs admitted again
    /// (their images' room decided now, with the pulled image's size known). Returns those
    /// that may start.
    async fn pull_ended(
        &mut self,
        sandbox: &Executor,
        fetched: images::Fetched,
        busy: &BTreeSet<String>,
    ) -> Result<Vec<(i64, verifier_sdk::ValidatedJob)>, ServeError> {
        let jobs = self.awaiting.remove(&fetched.reference).unwrap_or_default();
        let mut busy = busy.clone();
        busy.extend(
            jobs.iter()
                .map(|(_, job)| job.manifest().image().to_owned()),
        );
        let ready = self.images.pulled(
            fetched,
            self.telemetry.clock().wall_ms(),
            self.telemetry.images(),
        );
        let mut run = Vec::new();
        match ready {
            Ok(()) => run = self.plan_now(jobs)?,
            Err(error) => {
                self.telemetry.images().held_back.inc_by(jobs.len() as u64);
                for (_, job) in &jobs {
                    self.write_not_run(
                        job.job_id(),
                        IMAGE_HELD_BACK,
                        &format!(
                            "its image could not be pulled for a host reason: {error}: held \
                             back, tried again at the next poll"
                        ),
                    );
                }
            }
        }
        if self.pull_queue.is_empty() && !self.deferred.is_empty() {
            let deferred = std::mem::take(&mut self.deferred);
            let planned = self.plan_now(deferred)?;
            run.extend(self.admit(sandbox, planned, &busy).await);
        }
        Ok(run)
    }

    /// The jobs of `jobs` that can still settle on the clock read now, deadline-first; the
    /// others are set apart as `window_too_short`.
    fn plan_now(
        &mut self,
        jobs: Vec<(i64, verifier_sdk::ValidatedJob)>,
    ) -> Result<Vec<(i64, verifier_sdk::ValidatedJob)>, ServeError> {
        let planned = plan(
            jobs,
            |(_, job)| job,
            self.feed.now_unix(),
            &self.feed.settle,
            |_| true,
        );
        for ((key, job), why) in &planned.too_short {
            self.report_too_short(*key, job, why)?;
        }
        Ok(planned.run)
    }

    /// Logs, counts and records in the ledger a job set apart as `window_too_short`, once per
    /// job (in this process), and writes its readiness record as not ready. Its ledger row is a run that never started (`skipped`, with the
    /// figures), as `worker feed` reports it, closed as the job's own miss: it is not started
    /// again (a window only shrinks, and its image is already here), and the ledger gives it
    /// up when its window ends, as any job that got no verdict in time.
    fn report_too_short(
        &mut self,
        key: i64,
        job: &verifier_sdk::ValidatedJob,
        why: &TooShort,
    ) -> Result<(), ServeError> {
        if self.too_short.insert(key) {
            // On a fleet another host may hold it: that host reports it.
            let Some(run_id) = self
                .ledger
                .start_run(key, self.telemetry.clock().wall_ms())?
            else {
                return Ok(());
            };
            self.ledger.finish_run_at(
                run_id,
                key,
                &RunResult {
                    kind: RunKind::NoVerdict,
                    outcome: worker_jobs::feed::JobStatus::Skipped.as_str().into(),
                    reason_code: Some(WINDOW_TOO_SHORT.into()),
                    reason: Some(format!(
                        "{why}: not started in place of a job that can settle"
                    )),
                    evidence: None,
                    candidate_file: None,
                    last_start_ms: None,
                },
                self.telemetry.clock().wall_ms(),
            )?;
            // As `worker feed` does: a record an earlier run left at the job's path (perhaps
            // "ready") must not stand for a job nothing checked now.
            self.write_not_run(job.job_id(), WINDOW_TOO_SHORT, &why.to_string());
            self.telemetry.window_too_short();
            tracing::warn!(
                job = %job.job_id().escape_debug(),
                round = job.round(),
                reason_code = WINDOW_TOO_SHORT,
                left_seconds = why.left_secs,
                needs_seconds = why.need.total_secs(),
                "not started: {why}"
            );
        }
        Ok(())
    }

    /// Writes the not-ready record of a job set apart without a run
    /// ([`worker_jobs::feed::readiness::not_run`]); a failed write is logged, as for a run's.
    fn write_not_run(&self, job_id: &str, code: &str, why: &str) {
        let record = worker_jobs::feed::readiness::not_run(job_id, code, why, self.feed.now_unix());
        if let Err(e) = worker_jobs::feed::readiness::write_readiness(&self.feed.out_dir, &record) {
            tracing::warn!(error = %e, "could not write a readiness record");
        }
    }

    /// The next job of `pending` that can still settle in time (re-checked on the clock now:
    /// the runs before it took their time).
    fn next_job(
        &mut self,
        pending: &mut Vec<(i64, verifier_sdk::ValidatedJob)>,
    ) -> Result<Option<(i64, verifier_sdk::ValidatedJob)>, ServeError> {
        while !pending.is_empty() {
            let (key, job) = pending.remove(0);
            match fits_now(&job, self.feed.now_unix(), &self.feed.settle) {
                Ok(()) => return Ok(Some((key, job))),
                Err(why) => self.report_too_short(key, &job, &why)?,
            }
        }
        Ok(None)
    }
}

/// The readiness code of a job held back because its image has no room yet.
pub const IMAGE_HELD_BACK: &str = "image_held_back";

/// A pull under way beside the loop ([`images::Images::fetch`]).
type Pulling<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = images::Fetched> + Send + 'a>>;

/// A poll of the feed under way while a batch runs.
type Fetching<'a> = std::pin::Pin<
    Box<
        dyn std::future::Future<Output = (Vec<Vec<serde_json::Value>>, Vec<FetchFailure>)>
            + Send
            + 'a,
    >,
>;

/// The images of the jobs queued to start and of the runs under way.
fn busy_images(
    pending: &[(i64, verifier_sdk::ValidatedJob)],
    open_images: &BTreeMap<i64, String>,
) -> BTreeSet<String> {
    pending
        .iter()
        .map(|(_, job)| job.manifest().image().to_owned())
        .chain(open_images.values().cloned())
        .collect()
}

/// Adds `more` to `pending` and puts them all back in deadline order.
fn merge_pending(
    pending: &mut Vec<(i64, verifier_sdk::ValidatedJob)>,
    more: Vec<(i64, verifier_sdk::ValidatedJob)>,
) {
    pending.extend(more);
    worker_jobs::feed::deadline::sort(pending, |(_, job)| job);
}

#[allow(clippy::too_many_lines)]
async fn serve_loop<L: JobLedger>(
    config: &ServeConfig,
    ledger: L,
    sandbox: &Executor,
    executor: &dyn JobExecutor,
    shutdown: &Shutdown,
    telemetry: &Telemetry,
) -> Result<(), ServeError> {
    // One clock for the service: selection and the liveness re-check read the one the
    // service decides by.
    let feed = &FeedConfig {
        clock: telemetry.clock().clone(),
        ..config.feed.clone()
    };
    let clock = telemetry.clock().clone();
    let mut ledger = ledger;
    ledger.set_clock(clock.clone());
    ledger.report_outage_to(telemetry.ledger_outage());
    ledger.stop_retrying_on(shutdown.clone());
    let client = PlatformClient::new(feed.client_limits)
        .map_err(|e| ServeError::Config(format!("http client: {e}")))?;
    remove_stale(&feed.work_dir, clock.as_ref());
    let scratch = Scratch::create(&feed.work_dir)
        .map_err(|e| ServeError::Transient(format!("work directory: {e}")))?;
    let images = images::Images::open(&config.state_dir, config.images.clone())
        .map_err(|e| ServeError::Config(e.to_string()))?;
    let runner = JobRunner::new(feed, &client, executor);
    let mut state = Loop {
        feed,
        ledger,
        images,
        polls: Polls::default(),
        listed: BTreeMap::new(),
        answered: false,
        too_short: BTreeSet::new(),
        awaiting: BTreeMap::new(),
        pull_queue: std::collections::VecDeque::new(),
        deferred: Vec::new(),
        telemetry,
    };
    let mut host_health = HostHealth::default();
    let host = match config.parallel {
        Some(n) => {
            tracing::info!(
                parallel = n.get(),
                "running at most --parallel jobs at once"
            );
            None
        }
        None => Some(engine_capacity(sandbox).await),
    };
    let mut chosen = None;
    // The recent executions' durations: short ones overlap the engine's latency
    // (capacity::auto_parallel_after).
    let mut recent = capacity::RecentRuns::default();
    heartbeat(&state.ledger, &state.polls, telemetry)?;
    while !shutdown.requested() {
        let fetched = tokio::select! {
            r = fetch_feeds(feed, &client) => r,
            () = shutdown.wait() => break,
        };
        // Nothing runs or waits between batches: no image is busy.
        let mut pending = state
            .take_poll(sandbox, fetched, &BTreeSet::new(), &BTreeSet::new())
            .await?;
        // The batch's runs share its image inspects (issue #50 item 2), taken afresh each batch.
        executor.batch_begins();
        let mut largest = largest_of(&pending);
        let mut parallel = match host {
            Some(host) => batch_parallel(host, largest, &recent, &mut chosen),
            None => config.parallel.unwrap_or(NonZeroUsize::MIN),
        };
        warn_waiting(&host_health, pending.len(), clock.monotonic());
        let mut running = FuturesUnordered::new();
        let mut open: BTreeMap<i64, (i64, String, PathBuf)> = BTreeMap::new();
        // The images of the runs under way (by run id): never removed to make room.
        let mut open_images: BTreeMap<i64, String> = BTreeMap::new();
        let mut beat = tokio::time::interval(HEARTBEAT_EVERY);
        beat.tick().await;
        // A fleet's leases are renewed while the batch runs; a single host holds none.
        let renews = state.ledger.renew_every().is_some();
        let mut renew = tokio::time::interval(
            state
                .ledger
                .renew_every()
                .unwrap_or(HEARTBEAT_EVERY)
                .max(Duration::from_millis(100)),
        );
        renew.tick().await;
        // The feed is polled while a batch runs too: a job whose window ends sooner than the
        // waiting ones' must not wait behind the whole batch. The fetch runs beside the runs
        // (never blocking them); its answer is taken between two of their steps.
        let next_poll = tokio::time::sleep(jittered(config.poll_interval));
        tokio::pin!(next_poll);
        let mut fetching: Option<Fetching<'_>> = None;
        // The pull under way, if any: the loop goes on beside it (polls, runs, lease renewals,
        // the heartbeat); its jobs join `pending` when it ends.
        let mut pulling: Option<Pulling<'_>> = None;
        loop {
            if pulling.is_none()
                && let Some(reference) = state.pull_queue.pop_front()
            {
                pulling = Some(Box::pin(images::Images::fetch(
                    sandbox.images(),
                    reference,
                    state.images.min_free(),
                )));
            }
            while running.len() < host_health.limit(parallel.get())
                && !shutdown.requested()
                && host_health.may_start(clock.monotonic())
            {
                let Some((key, job)) = state.next_job(&mut pending)? else {
                    break;
                };
                let id = job.job_id().to_owned();
                let Some(run_id) = state.ledger.start_run(key, clock.wall_ms())? else {
                    tracing::info!(job = %id.escape_debug(), round = job.round(), "claimed by another host of the fleet");
                    continue;
                };
                let job_dir = scratch.path().join(format!("run-{run_id}"));
                tracing::info!(job = %id.escape_debug(), round = job.round(), run_id, "running");
                open.insert(run_id, (key, id, job_dir.clone()));
                open_images.insert(run_id, job.manifest().image().to_owned());
                let runner = &runner;
                let clock = &clock;
                telemetry.run_started();
                let last_start_ms = i64::try_from(last_start(&job, &feed.settle))
                    .ok()
                    .map(|secs| secs.saturating_mul(1000));
                running.push(async move {
                    let started = clock.monotonic();
                    let run = runner.run(&job, &job_dir).await;
                    // Beside the candidate, inside the run's future: the chain read overlaps
                    // the other runs instead of holding the loop.
                    worker_jobs::feed::write_readiness(feed, &job, &run.outcome).await;
                    (
                        run_id,
                        run,
                        clock.monotonic().saturating_sub(started),
                        last_start_ms,
                    )
                });
            }
            if running.is_empty() && pulling.is_none() {
                break;
            }
            tokio::select! {
                Some((run_id, run, took, last_start_ms)) = running.next() => {
                    let row = run.row();
                    telemetry.run_ended(row.status.as_str(), row.reason_code.as_deref(), took);
                    let executed = run.executed.then_some(run.durations.execute_ms);
                    if let Some(n) = after_run(executed, host, largest, &mut recent, &mut chosen) {
                        parallel = n;
                    }
                    let cause = cause_of(&run.outcome);
                    judge_host(&mut host_health, cause, &row, clock.monotonic(), config.poll_interval, telemetry);
                    open_images.remove(&run_id);
                    if let Some((key, id, _)) = open.remove(&run_id) {
                        record(&mut state.ledger, feed, run_id, (key, &id), &run, (cause, last_start_ms), clock.wall_ms())?;
                    }
                    telemetry.set_oldest_pending(state.ledger.oldest_unfinished(&state.listed)?);
                }
                () = shutdown.wait() => {
                    drop(running);
                    interrupt(&mut state.ledger, sandbox, &open, telemetry).await;
                    return Ok(());
                }
                _ = beat.tick() => heartbeat(&state.ledger, &state.polls, telemetry)?,
                _ = renew.tick(), if renews => {
                    for run_id in state.ledger.renew()? {
                        tracing::warn!(run_id, "the lease of a run under way was lost (another host holds the job): its result will not be recorded");
                    }
                }
                fetched = async {
                    match pulling.as_mut() {
                        Some(p) => p.await,
                        None => std::future::pending().await,
                    }
                }, if pulling.is_some() => {
                    pulling = None;
                    let busy = busy_images(&pending, &open_images);
                    let more = state.pull_ended(sandbox, fetched, &busy).await?;
                    if !more.is_empty() {
                        merge_pending(&mut pending, more);
                        largest = match (largest, largest_of(&pending)) {
                            (Some(a), Some(b)) => Some(a.max(b)),
                            (a, b) => a.or(b),
                        };
                        // Sized for them as if they had been due when the batch began (they
                        // were, but for their pull).
                        if let Some(host) = host {
                            parallel = batch_parallel(host, largest, &recent, &mut chosen);
                        }
                    }
                }
                () = &mut next_poll, if fetching.is_none() => {
                    fetching = Some(Box::pin(fetch_feeds(feed, &client)));
                }
                fetched = async {
                    match fetching.as_mut() {
                        Some(f) => f.await,
                        None => std::future::pending().await,
                    }
                }, if fetching.is_some() => {
                    fetching = None;
                    let skip: BTreeSet<i64> = pending
                        .iter()
                        .map(|(key, _)| *key)
                        .chain(open.values().map(|(key, _, _)| *key))
                        .collect();
                    let busy = busy_images(&pending, &open_images);
                    let more = state.take_poll(sandbox, fetched, &skip, &busy).await?;
                    if !more.is_empty() {
                        tracing::info!(jobs = more.len(), "due jobs seen while a batch runs: queued by their window's end");
                        merge_pending(&mut pending, more);
                        largest = match (largest, largest_of(&pending)) {
                            (Some(a), Some(b)) => Some(a.max(b)),
                            (a, b) => a.or(b),
                        };
                    }
                    next_poll.as_mut().reset(tokio::time::Instant::now() + jittered(config.poll_interval));
                }
            }
        }
        // A poll that got no answer at all leaves the previous manifest in place.
        if state.answered {
            write_listed_manifest(&state.ledger, feed, &state.listed)?;
        }
        pause(
            config.poll_interval,
            &state.ledger,
            &state.polls,
            shutdown,
            telemetry,
        )
        .await?;
    }
    heartbeat(&state.ledger, &state.polls, telemetry)?;
    Ok(())
}

/// The pause until the next poll (or a shutdown). The heartbeat goes on between polls too,
/// so a long --poll-interval is not mistaken for a dead service.
async fn pause(
    poll_interval: Duration,
    ledger: &impl JobLedger,
    polls: &Polls,
    shutdown: &Shutdown,
    telemetry: &Telemetry,
) -> Result<(), ServeError> {
    heartbeat(ledger, polls, telemetry)?;
    let next_poll = tokio::time::sleep(jittered(poll_interval));
    tokio::pin!(next_poll);
    let mut beat = tokio::time::interval(HEARTBEAT_EVERY);
    beat.tick().await;
    loop {
        tokio::select! {
            () = &mut next_poll => return Ok(()),
            () = shutdown.wait() => return Ok(()),
            _ = beat.tick() => heartbeat(ledger, polls, telemetry)?,
        }
    }
}

/// Says once per poll that `due` jobs wait for the host's back-off.
fn warn_waiting(host: &HostHealth, due: usize, now: Duration) {
    if due > 0 && !host.may_start(now) {
        tracing::warn!(
            due,
            retry_in_seconds = host.wait_left(now).as_secs(),
            last = host.last().unwrap_or_default(),
            "the host is unhealthy: the due jobs wait for its back-off (not counted as their attempts)"
        );
    }
}

/// Updates the host's health from the cause of the run that ended with `row`.
fn judge_host(
    host: &mut HostHealth,
    cause: Option<Cause>,
    row: &JobRow,
    now: Duration,
    poll_interval: Duration,
    telemetry: &Telemetry,
) {
    if cause == Some(Cause::Host) {
        let code = row.reason_code.as_deref().unwrap_or("none");
        let detail = row.reason.as_deref().unwrap_or_default();
        host.failed(now, poll_interval, format!("{code}: {detail}"));
        telemetry.host_failure(code, detail);
        tracing::warn!(
            reason_code = code,
            failures_in_row = host.failures_in_row(),
            retry_in_seconds = host.wait_left(now).as_secs(),
            "the host failed the run (not the job's attempt): {}",
            detail.escape_debug()
        );
    } else {
        host.worked();
        telemetry.host_worked();
    }
}

/// Records in the ledger the jobs of this shard a poll listed; returns those due to run,
/// with their ledger keys. `listed` becomes the poll's jobs, unless the poll got no answer
/// at all (the jobs did not disappear because the feed was down).
fn due_jobs(
    ledger: &mut impl JobLedger,
    feed: &FeedConfig,
    fetched: Vec<Vec<serde_json::Value>>,
    any_answer: bool,
    listed: &mut BTreeMap<i64, String>,
    telemetry: &Telemetry,
) -> Result<Vec<(i64, verifier_sdk::ValidatedJob)>, ServeError> {
    let now = telemetry.clock().wall_ms();
    let selection = select_jobs(
        fetched,
        feed.network,
        &feed.verifiers,
        u64::try_from(now / 1000).unwrap_or(0),
        None,
    );
    let mut polled = BTreeMap::new();
    let mut due = Vec::new();
    let mut given_up = 0usize;
    // The listed jobs still without a candidate: what `/metrics` says of their windows.
    let mut uncovered = Vec::new();
    ledger.in_one_commit(|ledger| -> Result<(), ServeError> {
        for job in selection.selected {
            let id = job.job_id().to_owned();
            if !feed.shard.owns(&id) {
                continue;
            }
            let content_hash = content_hash(&job);
            let expires_ms = i64::try_from(job.expires_at())
                .ok()
                .and_then(|s| s.checked_mul(1000));
            let seen = ledger.seen_until(
                JobKey {
                    job_id: &id,
                    round: job.round(),
                    content_hash: &content_hash,
                },
                expires_ms,
                now,
            )?;
            given_up += usize::from(seen.given_up);
            if seen.new {
                telemetry.job_seen();
                if !seen.due {
                    telemetry.job_conflicting();
                    tracing::warn!(
                        job = %id.escape_debug(),
                        round = job.round(),
                        %content_hash,
                        "the feed lists a job id and round already seen with other content: recorded as conflicting, not run"
                    );
                }
            }
            polled.insert(seen.job, id);
            if !seen.given_up && ledger.candidate_of(seen.job)?.is_none() {
                uncovered.push(job.clone());
            }
            if seen.due {
                due.push((seen.job, job));
            }
        }
        Ok(())
    })?;
    // Said once per poll, so an operator reading the log after a restart sees why nothing
    // runs.
    if given_up > 0 {
        let what = if given_up == polled.len() {
            "every listed job is given up".to_owned()
        } else {
            format!("{given_up} of {} listed jobs are given up", polled.len())
        };
        tracing::warn!(
            given_up,
            listed = polled.len(),
            "{what} (its verification window ended without a verdict, or an older worker gave it up): nothing runs for it; `worker ledger --retry JOB` or `--retry-exhausted` re-queues"
        );
    }
    if any_answer {
        *listed = polled;
    }
    for g in ledger.give_up_expired(now)? {
        telemetry.jobs_given_up(1);
        tracing::warn!(
            job = %g.job_id.escape_debug(),
            round = g.round,
            attempts = g.attempts,
            last = g.last_reason.as_deref().unwrap_or("never ran").escape_debug().to_string(),
            "job given up: its verification window ended without a verdict"
        );
    }
    telemetry.set_oldest_pending(ledger.oldest_unfinished(listed)?);
    // Images are not looked at here: none is counted as missing, so the figure is a floor.
    telemetry.set_risk(risk(
        uncovered.iter().map(|job| (job, true)),
        u64::try_from(now / 1000).unwrap_or(0),
        &feed.settle,
    ));
    Ok(due)
}

/// What the ledger keys a job's content by: `sha256:` of the canonical JSON of its receipt
/// scope, which commits to the terms (runner manifest, benchmark), the submission, the
/// evidence (source snapshot digest) and the verification window.
fn content_hash(job: &verifier_sdk::ValidatedJob) -> String {
    // The scope is plain data and always serializes; were it not to, the raw job (a
    // stricter key) stands in rather than one hash shared by every job.
    let scope = serde_json::to_value(job.scope()).unwrap_or_else(|_| job.raw().clone());
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(canonical_json(&scope).as_bytes()))
    )
}

/// What the engine can hold, from its `/info` and this host's cores; an engine that does
/// not answer gets the one-job default of [`capacity::auto_parallel`].
async fn engine_capacity(sandbox: &Executor) -> capacity::Host {
    let local = std::thread::available_parallelism()
        .ok()
        .map(NonZeroUsize::get);
    match sandbox.host_resources().await {
        Ok(info) => {
            let host = capacity::Host::from_info(info.cpus, info.memory_bytes, local);
            tracing::info!(
                engine_cpus = ?info.cpus,
                engine_memory_bytes = ?info.memory_bytes,
                local_cpus = ?local,
                "--parallel not given: sizing each batch from the engine ({} cpu(s), {} bytes)",
                host.cpus,
                host.memory_bytes
            );
            host
        }
        Err(error) => {
            tracing::warn!(%error, "engine /info failed: running one job at a time");
            capacity::Host::from_info(None, None, local)
        }
    }
}

/// The largest limits among the jobs due now (`None`: none due).
fn largest_of(due: &[(i64, verifier_sdk::ValidatedJob)]) -> Option<capacity::JobSize> {
    due.iter()
        .map(|(_, job)| capacity::JobSize {
            cpu_millis: job.manifest().cpu_millis(),
            memory_bytes: job.manifest().memory_bytes(),
        })
        .reduce(capacity::JobSize::max)
}

/// The default `--parallel` for the jobs due now, after the `recent` runs; logged when it
/// changes.
fn batch_parallel(
    host: capacity::Host,
    largest: Option<capacity::JobSize>,
    recent: &capacity::RecentRuns,
    chosen: &mut Option<NonZeroUsize>,
) -> NonZeroUsize {
    let Some(largest) = largest else {
        return chosen.unwrap_or(NonZeroUsize::MIN);
    };
    let choice = capacity::auto_parallel_after(host, largest, recent);
    if *chosen != Some(choice.parallel) {
        tracing::info!(parallel = choice.parallel.get(), why = %choice.why, "jobs at once");
        *chosen = Some(choice.parallel);
    }
    choice.parallel
}

/// After a run ends: an execution joins the recent runs and the default is sized again
/// (`None` with `--parallel` given), so a batch's first short runs lift it for the rest of it.
/// `executed_ms`: how long the run's execution took, `None` for a job that did not reach the
/// engine (cached, refused), which says nothing of its latency.
fn after_run(
    executed_ms: Option<u64>,
    host: Option<capacity::Host>,
    largest: Option<capacity::JobSize>,
    recent: &mut capacity::RecentRuns,
    chosen: &mut Option<NonZeroUsize>,
) -> Option<NonZeroUsize> {
    if let Some(ms) = executed_ms {
        recent.push(Duration::from_millis(ms));
    }
    Some(batch_parallel(host?, largest, recent, chosen))
}

/// Writes the heartbeat row, and tells `/healthz` it was written.
fn heartbeat(
    ledger: &impl JobLedger,
    polls: &Polls,
    telemetry: &Telemetry,
) -> Result<(), ServeError> {
    ledger.heartbeat(polls)?;
    if let Some(view) = ledger.fleet_view()? {
        telemetry.set_fleet(view);
    }
    telemetry.heartbeat();
    Ok(())
}

/// Closes the runs cut short by a shutdown: their containers are killed and removed first (the
/// dropped futures did not), then each run is recorded as interrupted. Bounded by
/// [`SHUTDOWN_BOUND`]; a failure is logged, and the next start's sweep and recovery finish
/// the job (the run stays open in the ledger, so it is closed as interrupted then).
async fn interrupt(
    ledger: &mut impl JobLedger,
    sandbox: &Executor,
    open: &BTreeMap<i64, (i64, String, PathBuf)>,
    telemetry: &Telemetry,
) {
    match tokio::time::timeout(SHUTDOWN_BOUND, sandbox.remove_own_containers()).await {
        Ok(Ok(removed)) => tracing::info!(containers = ?removed, "removed the running containers"),
        Ok(Err(error)) => tracing::error!(%error, "could not remove the running containers"),
        Err(_) => tracing::error!("removing the running containers timed out"),
    }
    for (run_id, (key, _, job_dir)) in open {
        let _ = std::fs::remove_dir_all(job_dir);
        telemetry.run_interrupted();
        let result = RunResult::interrupted("the worker was asked to stop (SIGTERM/SIGINT)");
        if let Err(error) =
            ledger.finish_run_at(*run_id, *key, &result, telemetry.clock().wall_ms())
        {
            tracing::error!(%error, "could not record the interrupted run");
        }
    }
}

/// Records the end of a run from its typed outcome (the one mapping of a [`JobOutcome`] to the
/// ledger); a run without a verdict is logged at WARN with its reason and detail. With the
/// run's cause goes the job's last start, which caps the retry of its own failure.
fn record(
    ledger: &mut impl JobLedger,
    feed: &FeedConfig,
    run_id: i64,
    (key, job_id): (i64, &str),
    run: &JobRun,
    (cause, last_start_ms): (Option<Cause>, Option<i64>),
    at_ms: i64,
) -> Result<(), ServeError> {
    let (kind, evidence) = match &run.outcome {
        JobOutcome::Verdict { evidence, .. } => {
            (RunKind::Completed, evidence.map(|e| e.to_string()))
        }
        JobOutcome::Refused { .. } => (RunKind::Rejected, None),
        // An expiry while it waited is the job's too, not a refusal of its content; the
        // ledger gives it up (with the metric and the warning) at the next poll.
        JobOutcome::JobFailure { .. } => (RunKind::NoVerdict, None),
        JobOutcome::HostFailure { .. } => (RunKind::Host, None),
    };
    // Recorded from the typed run; the reason is cut as the run's report row cuts it.
    let status = run.status.as_str();
    let reason_code = run.outcome.code().map(worker_jobs::feed::RunCode::as_str);
    let reason = run
        .outcome
        .detail()
        .map(worker_jobs::feed::report::row_reason);
    let candidate_file = run.outcome.candidate_file();
    let code = reason_code.unwrap_or("none");
    let detail = reason.as_deref().unwrap_or_default().escape_debug();
    match kind {
        RunKind::Completed => {
            let d = &run.durations;
            tracing::info!(
                job = %job_id.escape_debug(), run_id, status,
                download_ms = d.download_ms, extract_ms = d.extract_ms,
                execute_ms = d.execute_ms, total_ms = d.total_ms, "run ended"
            );
        }
        RunKind::Rejected => tracing::warn!(
            job = %job_id.escape_debug(), run_id, status, reason_code = code,
            "run ended: refused by rule, not run again: {detail}"
        ),
        _ => tracing::warn!(
            job = %job_id.escape_debug(), run_id, status, reason_code = code,
            cause = cause.map_or("job", Cause::as_str),
            "run ended without a verdict: {detail}"
        ),
    }
    let recorded = ledger.finish_run_at(
        run_id,
        key,
        &RunResult {
            kind,
            outcome: status.into(),
            reason_code: reason_code.map(str::to_owned),
            reason,
            evidence,
            candidate_file: candidate_file.map(str::to_owned),
            last_start_ms,
        },
        at_ms,
    )?;
    if let Recorded::Fenced { held, current } = recorded {
        // Another host of the fleet claimed the job after this run's lease ended: its
        // candidate is that host's to offer. Ours leaves the output directory and is never
        // named in the manifest (which lists only what the ledger recorded for this host).
        // Its statement and readiness record go with it: the other host writes its own.
        if let Some(file) = candidate_file {
            let _ = std::fs::remove_file(feed.out_dir.join(file));
            let statement = worker_jobs::intoto::statement_file_name(file);
            let _ = std::fs::remove_file(feed.out_dir.join(statement));
        }
        let readiness = verifier_sdk::readiness::readiness_file_name(job_id);
        let _ = std::fs::remove_file(feed.out_dir.join(readiness));
        tracing::warn!(
            job = %job_id.escape_debug(), run_id, held, current,
            "the run's result is refused: another host claimed the job after this run's lease ended (fencing token {held}, now {current}); its candidate is removed"
        );
    }
    Ok(())
}

/// Rewrites the candidates manifest with the candidates of the jobs the feed still lists,
/// each for the round and content it lists (the signer has nothing to do with the others; a
/// verdict on other content of the same id is never offered for it).
fn write_listed_manifest(
    ledger: &impl JobLedger,
    feed: &FeedConfig,
    listed: &BTreeMap<i64, String>,
) -> Result<(), ServeError> {
    let mut manifest = CandidateManifest::new(feed.network.name());
    let mut named = BTreeSet::new();
    for (key, job_id) in listed {
        if ledger.candidate_of(*key)?.is_some() && named.insert(job_id.clone()) {
            manifest.push(job_id);
        }
    }
    write_manifest(&feed.out_dir, &manifest)
        .map_err(|e| ServeError::Transient(format!("writing the candidates manifest: {e}")))
}

/// `interval` ± 10 %, from a per-call nonce and the pid (no need for a strong source: it only
/// keeps several hosts from polling in step). The nonce is std's `RandomState` (keyed from
/// the OS's randomness), not a clock reading: the service's one clock is injected.
fn jittered(interval: Duration) -> Duration {
    let nonce = std::hash::BuildHasher::hash_one(&std::hash::RandomState::new(), interval);
    let seed = Sha256::digest(format!("{nonce}/{}", std::process::id()).as_bytes());
    let unit = f64::from(u16::from_be_bytes([seed[0], seed[1]])) / f64::from(u16::MAX);
    interval.mul_f64(0.9 + 0.2 * unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_default_parallel_rises_within_a_batch_after_short_runs() {
        let host = capacity::Host {
            cpus: 2,
            memory_bytes: 8 << 30,
        };
        let largest = Some(capacity::JobSize {
            cpu_millis: 1000,
            memory_bytes: 512 << 20,
        });
        let (mut recent, mut chosen) = (capacity::RecentRuns::default(), None);
        let mut after = |ms| after_run(ms, Some(host), largest, &mut recent, &mut chosen);
        // The first short run is not yet a pattern; a job that never reached the engine
        // (cached, refused) is not a run at all.
        assert_eq!(after(Some(300)).map(NonZeroUsize::get), Some(2));
        assert_eq!(after(None).map(NonZeroUsize::get), Some(2));
        // The second short run lifts the default for the rest of the batch.
        assert_eq!(after(Some(250)).map(NonZeroUsize::get), Some(4));
        assert_eq!(chosen.map(NonZeroUsize::get), Some(4));
        // --parallel given: nothing to size.
        let (mut recent, mut chosen) = (capacity::RecentRuns::default(), None);
        assert_eq!(
            after_run(Some(300), None, largest, &mut recent, &mut chosen),
            None
        );
        assert_eq!(
            after_run(Some(300), None, largest, &mut recent, &mut chosen),
            None
        );
    }

    #[test]
    fn serve_poll_jitter_stays_within_ten_percent() {
        for _ in 0..100 {
            let d = jittered(Duration::from_secs(100));
            assert!(
                d >= Duration::from_secs(90) && d <= Duration::from_secs(110),
                "{d:?}"
            );
        }
    }
}
