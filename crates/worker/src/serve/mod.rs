//! `worker serve`: the worker as a long-running service on a dedicated host. It polls the
//! feed on an interval (with jitter, so several hosts do not poll in step), runs each new job
//! through the same path as `worker feed` ([`crate::feed::JobRunner`]: selection, archives,
//! staging, sandbox, judgement, candidate file), and keeps a durable [`ledger`] so that a
//! restart neither repeats completed work nor invents a result for a run it did not see end.
//!
//! Shutdown (SIGTERM/SIGINT) stops polling, drops the running job, kills and removes its
//! container, records the run as `interrupted` and returns; a crash leaves the run open in
//! the ledger, and the next start closes it as `interrupted`, removes the dead process's
//! container (the start-up sweep, [`crate::sandbox::DockerExecutor::cleanup_stale`]) and
//! runs the job again.

pub mod capacity;
pub mod http;
pub mod ledger;
pub mod shutdown;
pub mod telemetry;

pub use crate::feed::shard;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use platform_client::PlatformClient;
use sha2::{Digest, Sha256};
use verifier_sdk::{CandidateManifest, canonical_json};

use crate::feed::output::write_manifest;
use crate::feed::scratch::{Scratch, remove_stale};
use crate::feed::select::select_jobs;
use crate::feed::{FeedConfig, JobRow, JobRunner, JobStatus, SandboxJobExecutor, fetch_feeds};
use crate::sandbox::DockerExecutor;
use ledger::{JobKey, Ledger, LedgerError, Polls, RunKind, RunResult};
use shutdown::Shutdown;
use telemetry::Telemetry;

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
    /// Where `/healthz` and `/metrics` are served (loopback only); `None`: nowhere.
    pub metrics_listen: Option<SocketAddr>,
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
        match error {
            LedgerError::TooNew { .. } => Self::Config(error.to_string()),
            LedgerError::Sqlite { .. } => Self::Transient(error.to_string()),
        }
    }
}

/// Checks what can be checked before the engine is contacted, and opens the ledger
/// (closing the runs a dead predecessor left open). Every failure here is a configuration
/// error: an unopenable state directory stays unopenable across restarts.
pub fn prepare(config: &ServeConfig) -> Result<Ledger, ServeError> {
    config
        .feed
        .validate()
        .map_err(|e| ServeError::Config(e.to_string()))?;
    if let Some(addr) = config.metrics_listen {
        http::check_loopback(addr).map_err(|e| ServeError::Config(e.to_string()))?;
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
        std::fs::create_dir_all(dir)
            .map_err(|e| ServeError::Config(format!("{what} {dir:?}: {e}")))?;
    }
    let mut ledger =
        Ledger::open(&config.state_dir).map_err(|e| ServeError::Config(e.to_string()))?;
    let closed = ledger.recover_interrupted()?;
    if !closed.is_empty() {
        tracing::warn!(runs = ?closed, "runs left open by a stopped worker recorded as interrupted");
    }
    Ok(ledger)
}

/// Serves until `shutdown` fires (`Ok`) or something a restart may fix fails (`Err`).
pub async fn serve(
    config: &ServeConfig,
    mut ledger: Ledger,
    docker: DockerExecutor,
    staging_root: PathBuf,
    pull: bool,
    shutdown: &Shutdown,
    telemetry: &Telemetry,
) -> Result<(), ServeError> {
    let feed = &config.feed;
    let client = PlatformClient::new(feed.client_limits)
        .map_err(|e| ServeError::Config(format!("http client: {e}")))?;
    remove_stale(&feed.work_dir);
    let scratch = Scratch::create(&feed.work_dir)
        .map_err(|e| ServeError::Transient(format!("work directory: {e}")))?;
    let executor = SandboxJobExecutor::new(docker.clone(), staging_root, pull);
    let runner = JobRunner::new(feed, &client, &executor);
    let mut polls = Polls::default();
    let host = match config.parallel {
        Some(n) => {
            tracing::info!(
                parallel = n.get(),
                "running at most --parallel jobs at once"
            );
            None
        }
        None => Some(engine_capacity(&docker).await),
    };
    let mut chosen = None;
    heartbeat(&ledger, &polls, telemetry)?;
    // The jobs (ledger key, job id) the last answered poll listed.
    let mut listed = BTreeMap::new();
    while !shutdown.requested() {
        let (fetched, failures) = tokio::select! {
            r = fetch_feeds(feed, &client) => r,
            () = shutdown.wait() => break,
        };
        if failures.is_empty() {
            polls.ok += 1;
            polls.last_ok_ms = Some(ledger::now_ms());
        } else {
            polls.failed += 1;
            for f in &failures {
                tracing::warn!(verifier = %f.verifier, kind = %f.kind, "feed query failed: {}", f.message);
            }
        }
        telemetry.poll(failures.is_empty());
        let any_answer = !fetched.is_empty();
        let due = due_jobs(&ledger, feed, fetched, any_answer, &mut listed, telemetry)?;
        let parallel = match host {
            Some(host) => batch_parallel(host, &due, &mut chosen),
            None => config.parallel.unwrap_or(NonZeroUsize::MIN),
        };
        let mut due = due.into_iter();
        let mut running = FuturesUnordered::new();
        let mut open: BTreeMap<i64, (i64, String, PathBuf)> = BTreeMap::new();
        let mut beat = tokio::time::interval(HEARTBEAT_EVERY);
        beat.tick().await;
        loop {
            while running.len() < parallel.get() && !shutdown.requested() {
                let Some((key, job)) = due.next() else { break };
                let id = job.job_id().to_owned();
                let run_id = ledger.start_run(key)?;
                let job_dir = scratch.path().join(format!("run-{run_id}"));
                tracing::info!(job = %id.escape_debug(), round = job.round(), run_id, "running");
                open.insert(run_id, (key, id, job_dir.clone()));
                let runner = &runner;
                telemetry.run_started();
                running.push(async move {
                    let started = Instant::now();
                    let (row, _) = runner.run(&job, &job_dir).await;
                    (run_id, row, started.elapsed())
                });
            }
            if running.is_empty() {
                break;
            }
            tokio::select! {
                Some((run_id, row, took)) = running.next() => {
                    telemetry.run_ended(row.status.as_str(), row.reason_code.as_deref(), took);
                    if let Some((key, id, _)) = open.remove(&run_id) {
                        record(&mut ledger, feed, run_id, (key, &id), &row)?;
                    }
                    telemetry.set_oldest_pending(ledger.oldest_unfinished(&listed)?);
                }
                () = shutdown.wait() => {
                    drop(running);
                    interrupt(&mut ledger, &docker, &open, telemetry).await;
                    return Ok(());
                }
                _ = beat.tick() => heartbeat(&ledger, &polls, telemetry)?,
            }
        }
        // A poll that got no answer at all leaves the previous manifest in place.
        if any_answer {
            write_listed_manifest(&ledger, feed, &listed)?;
        }
        heartbeat(&ledger, &polls, telemetry)?;
        // The heartbeat goes on between polls too, so a long --poll-interval is not mistaken
        // for a dead service.
        let next_poll = tokio::time::sleep(jittered(config.poll_interval));
        tokio::pin!(next_poll);
        let mut beat = tokio::time::interval(HEARTBEAT_EVERY);
        beat.tick().await;
        loop {
            tokio::select! {
                () = &mut next_poll => break,
                () = shutdown.wait() => break,
                _ = beat.tick() => heartbeat(&ledger, &polls, telemetry)?,
            }
        }
    }
    heartbeat(&ledger, &polls, telemetry)?;
    Ok(())
}

/// Records in the ledger the jobs of this shard a poll listed; returns those due to run,
/// with their ledger keys. `listed` becomes the poll's jobs, unless the poll got no answer
/// at all (the jobs did not disappear because the feed was down).
fn due_jobs(
    ledger: &Ledger,
    feed: &FeedConfig,
    fetched: Vec<Vec<serde_json::Value>>,
    any_answer: bool,
    listed: &mut BTreeMap<i64, String>,
    telemetry: &Telemetry,
) -> Result<Vec<(i64, verifier_sdk::ValidatedJob)>, ServeError> {
    let now = ledger::now_ms();
    let selection = select_jobs(
        fetched,
        feed.network,
        &feed.verifiers,
        u64::try_from(now / 1000).unwrap_or(0),
        None,
    );
    let mut polled = BTreeMap::new();
    let mut due = Vec::new();
    for job in selection.selected {
        let id = job.job_id().to_owned();
        if !feed.shard.owns(&id) {
            continue;
        }
        let content_hash = content_hash(&job);
        let seen = ledger.seen(
            JobKey {
                job_id: &id,
                round: job.round(),
                content_hash: &content_hash,
            },
            now,
        )?;
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
        if seen.due {
            due.push((seen.job, job));
        }
    }
    if any_answer {
        *listed = polled;
    }
    telemetry.set_oldest_pending(ledger.oldest_unfinished(listed)?);
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
async fn engine_capacity(docker: &DockerExecutor) -> capacity::Host {
    let local = std::thread::available_parallelism()
        .ok()
        .map(NonZeroUsize::get);
    match docker.client().info().await {
        Ok(info) => {
            let host = capacity::Host::from_info(info.ncpu, info.mem_total, local);
            tracing::info!(
                engine_cpus = ?info.ncpu,
                engine_memory_bytes = ?info.mem_total,
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

/// The default `--parallel` for the jobs due now; logged when it changes.
fn batch_parallel(
    host: capacity::Host,
    due: &[(i64, verifier_sdk::ValidatedJob)],
    chosen: &mut Option<NonZeroUsize>,
) -> NonZeroUsize {
    let Some(largest) = due
        .iter()
        .map(|(_, job)| capacity::JobSize {
            cpu_millis: job.manifest().cpu_millis(),
            memory_bytes: job.manifest().memory_bytes(),
        })
        .reduce(capacity::JobSize::max)
    else {
        return chosen.unwrap_or(NonZeroUsize::MIN);
    };
    let choice = capacity::auto_parallel(host, largest);
    if *chosen != Some(choice.parallel) {
        tracing::info!(parallel = choice.parallel.get(), why = %choice.why, "jobs at once");
        *chosen = Some(choice.parallel);
    }
    choice.parallel
}

/// Writes the heartbeat row, and tells `/healthz` it was written.
fn heartbeat(ledger: &Ledger, polls: &Polls, telemetry: &Telemetry) -> Result<(), ServeError> {
    ledger.heartbeat(polls)?;
    telemetry.heartbeat();
    Ok(())
}

/// Closes the runs cut short by a shutdown: their containers are killed and removed first (the
/// dropped futures did not), then each run is recorded as interrupted. Bounded by
/// [`SHUTDOWN_BOUND`]; a failure is logged, and the next start's sweep and recovery finish
/// the job (the run stays open in the ledger, so it is closed as interrupted then).
async fn interrupt(
    ledger: &mut Ledger,
    docker: &DockerExecutor,
    open: &BTreeMap<i64, (i64, String, PathBuf)>,
    telemetry: &Telemetry,
) {
    match tokio::time::timeout(SHUTDOWN_BOUND, docker.remove_own_containers()).await {
        Ok(Ok(removed)) => tracing::info!(containers = ?removed, "removed the running containers"),
        Ok(Err(error)) => tracing::error!(%error, "could not remove the running containers"),
        Err(_) => tracing::error!("removing the running containers timed out"),
    }
    for (run_id, (key, _, job_dir)) in open {
        let _ = std::fs::remove_dir_all(job_dir);
        telemetry.run_interrupted();
        let result = RunResult::interrupted("the worker was asked to stop (SIGTERM/SIGINT)");
        if let Err(error) = ledger.finish_run(*run_id, *key, &result) {
            tracing::error!(%error, "could not record the interrupted run");
        }
    }
}

/// Records the end of a run from its report row.
fn record(
    ledger: &mut Ledger,
    feed: &FeedConfig,
    run_id: i64,
    (key, job_id): (i64, &str),
    row: &JobRow,
) -> Result<(), ServeError> {
    let kind = match row.status {
        JobStatus::CompletedPassed | JobStatus::CompletedFailed => RunKind::Completed,
        JobStatus::Rejected => RunKind::Rejected,
        JobStatus::NoVerdict | JobStatus::Error | JobStatus::Skipped => RunKind::NoVerdict,
    };
    let evidence = row
        .candidate_file
        .as_deref()
        .and_then(|file| evidence_address(&feed.out_dir.join(file)));
    tracing::info!(job = %job_id.escape_debug(), run_id, status = row.status.as_str(), "run ended");
    ledger.finish_run(
        run_id,
        key,
        &RunResult {
            kind,
            outcome: row.status.as_str().into(),
            reason_code: row.reason_code.clone(),
            reason: row.reason.clone(),
            evidence,
            candidate_file: row.candidate_file.clone(),
        },
    )?;
    Ok(())
}

/// The store address (`sha256:` of the canonical JSON) of the evidence record embedded in
/// a candidate file, the name under which the executor wrote it in the staging root.
fn evidence_address(candidate: &Path) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(&std::fs::read(candidate).ok()?).ok()?;
    let evidence = value.get("evidence")?;
    Some(format!(
        "sha256:{}",
        hex::encode(Sha256::digest(canonical_json(evidence).as_bytes()))
    ))
}

/// Rewrites the candidates manifest with the candidates of the jobs the feed still lists,
/// each for the round and content it lists (the signer has nothing to do with the others; a
/// verdict on other content of the same id is never offered for it).
fn write_listed_manifest(
    ledger: &Ledger,
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

/// `interval` ± 10 %, from the clock's nanoseconds and the pid (no need for a strong
/// source: it only keeps several hosts from polling in step).
fn jittered(interval: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let seed = Sha256::digest(format!("{nanos}/{}", std::process::id()).as_bytes());
    let unit = f64::from(u16::from_be_bytes([seed[0], seed[1]])) / f64::from(u16::MAX);
    interval.mul_f64(0.9 + 0.2 * unit)
}

#[cfg(test)]
mod tests {
    use super::*;

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
