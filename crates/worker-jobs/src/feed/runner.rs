//! Orchestration of one feed run.

use std::collections::BTreeSet;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use futures_util::FutureExt as _;
use platform_client::{ClientError, ClientLimits, PlatformClient, check_url};
use serde_json::Value;
use verifier_sdk::{
    Address, CandidateManifest, CommitId, GithubRepo, MAX_MANIFEST_CANDIDATES, Network,
    RelativeDir, RunOutput, Sha256Digest, ValidatedJob, ValidatedOutcome,
};

use super::archive::{
    ArchiveLimits, BENCHMARK_MAX_COMPRESSED, DEFAULT_ARCHIVE_BASE, SOURCE_MAX_COMPRESSED,
    archive_url, extract_tar_gz,
};
use super::cache::{ResultCache, RunIdentity};
use super::outcome::{JobOutcome, RunCode};
use super::output::{CandidateEvidence, MANIFEST_FILE, write_bounded_manifest, write_candidate};
use super::report::{Durations, FeedReport, FetchFailure, JobRow, JobStatus};
use super::scratch::{Scratch, remove_stale};
use super::select::{Selection, reason, select_jobs};
use crate::run::SealedEvidence;
use serde::Deserialize as _;
use verifier_sdk::evidence::EvidenceRecord;
use worker_store::clock::{Clock, SystemClock};

/// Most verifier addresses one run serves (one or two operators' quorum).
pub const MAX_VERIFIERS: usize = 2;

/// How a feed run is configured.
#[derive(Debug, Clone)]
pub struct FeedConfig {
    /// Platform API base URL (https, or http to loopback).
    pub api_base: String,
    /// The network queried and required of every job.
    pub network: Network,
    /// The verifier set we serve: one or two distinct addresses.
    pub verifiers: Vec<Address>,
    /// Where candidates and `manifest.json` are written.
    pub out_dir: PathBuf,
    /// Parent of the per-run scratch directory for downloads and extractions.
    pub work_dir: PathBuf,
    /// Result cache directory; `None` disables reuse.
    pub cache_dir: Option<PathBuf>,
    /// Base of exact-commit archive URLs.
    pub archive_base: String,
    /// Most jobs to run; the rest are reported as skipped.
    pub max_jobs: Option<usize>,
    /// When set, only these job ids are run; the rest are reported as skipped.
    pub only_jobs: Option<BTreeSet<String>>,
    /// Only this shard's jobs are run; the rest are reported as skipped.
    pub shard: super::shard::Shard,
    /// HTTP bounds.
    pub client_limits: ClientLimits,
    /// Part of the cache identity: a new worker never reuses an old worker's verdicts.
    pub worker_version: String,
    /// Recorded in each candidate.
    pub runner_revision: String,
    /// Print progress lines on stderr (for a person at a terminal); without, each step is a
    /// debug event instead (`worker_jobs::progress`).
    pub progress: bool,
    /// Refuse a job whose verification window has closed before running it (`worker
    /// reproduce` turns it off: reproducing a settlement looks back at a closed window).
    pub check_liveness: bool,
    /// Where selection and the liveness re-check read the time (`worker serve` passes its
    /// own, so one clock decides for the service).
    pub clock: Arc<dyn Clock>,
    /// What a settlement needs besides the run, for the deadline-first decision
    /// ([`super::deadline`]).
    pub settle: super::deadline::SettleCosts,
    /// The chain half of each job's readiness record (issue #43 item 3); `None` leaves the
    /// chain check `not_checked`, so no record says ready.
    pub chain_readiness: Option<Arc<dyn super::readiness::ChainReadiness>>,
}

impl FeedConfig {
    /// A configuration with defaults: codeload archives, the system temp dir for scratch,
    /// no cache, no job limit, the build identity the binary recorded (version and commit),
    /// progress on.
    pub fn new(api_base: &str, network: Network, verifiers: Vec<Address>, out_dir: &Path) -> Self {
        Self {
            api_base: api_base.to_owned(),
            network,
            verifiers,
            out_dir: out_dir.to_owned(),
            work_dir: std::env::temp_dir(),
            cache_dir: None,
            archive_base: DEFAULT_ARCHIVE_BASE.to_owned(),
            max_jobs: None,
            only_jobs: None,
            shard: super::shard::Shard::default(),
            client_limits: ClientLimits::default(),
            worker_version: verifier_sdk::build::identity().to_owned(),
            runner_revision: super::output::runner_revision(),
            progress: true,
            check_liveness: true,
            clock: Arc::new(SystemClock::new()),
            settle: super::deadline::SettleCosts::default(),
            chain_readiness: None,
        }
    }

    /// The configured clock's wall time, in unix seconds.
    pub fn now_unix(&self) -> u64 {
        worker_store::clock::unix_secs(self.clock.as_ref())
    }

    /// Checks everything that can be checked before any request.
    pub fn validate(&self) -> Result<(), FeedError> {
        if self.verifiers.is_empty() {
            return Err(FeedError::NoVerifiers);
        }
        if self.verifiers.len() > MAX_VERIFIERS {
            return Err(FeedError::TooManyVerifiers(self.verifiers.len()));
        }
        let distinct: BTreeSet<_> = self.verifiers.iter().collect();
        if distinct.len() != self.verifiers.len() {
            return Err(FeedError::DuplicateVerifier);
        }
        check_url(&self.api_base).map_err(FeedError::ApiUrl)?;
        check_url(&self.archive_base).map_err(FeedError::ArchiveBase)?;
        Ok(())
    }
}

/// Why a feed run could not start or finish as a whole (per-job trouble goes in the report).
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    /// No verifier configured.
    #[error("at least one verifier address is required")]
    NoVerifiers,
    /// Too many verifiers.
    #[error("{0} verifiers configured; at most {MAX_VERIFIERS} are supported")]
    TooManyVerifiers(usize),
    /// The same verifier twice.
    #[error("a verifier address is configured twice")]
    DuplicateVerifier,
    /// The API base URL breaks the URL policy.
    #[error("api base url: {0}")]
    ApiUrl(#[source] ClientError),
    /// The archive base URL breaks the URL policy.
    #[error("archive base url: {0}")]
    ArchiveBase(#[source] ClientError),
    /// The HTTP client could not be built.
    #[error("http client: {0}")]
    Client(#[source] ClientError),
    /// The output or scratch directory is unusable.
    #[error("{what} {path:?}: {source}")]
    Dir {
        /// Which directory.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The candidates manifest could not be written.
    #[error("writing the candidates manifest: {0}")]
    Manifest(#[source] super::output::OutputError),
}

/// What the executor reports after staging and running one job.
#[derive(Debug, Clone)]
pub struct ExecutedJob {
    /// The verdict or the reasoned absence of one.
    pub output: RunOutput,
    /// The evidence record (DESIGN §5), sealed once with its store address; the signer
    /// refuses a candidate without one.
    pub evidence: Option<SealedEvidence>,
    /// Digest of the staged source tree.
    pub source_digest: Sha256Digest,
    /// Digest of the staged benchmark tree.
    pub benchmark_digest: Sha256Digest,
}

/// Why the executor could not produce a [`RunOutput`].
#[derive(Debug, Clone, thiserror::Error)]
pub enum JobFailure {
    /// The container runtime could not be reached.
    #[error("container runtime unavailable: {0}")]
    RuntimeUnavailable(String),
    /// The executor refused the inputs (a rule broken; retrying cannot help).
    #[error("executor rejected the inputs: {0}")]
    InvalidInput(String),
    /// Staging the trees into the store failed for a reason of this host (the staging
    /// root full or unwritable), not of the trees.
    #[error("staging failed: {0}")]
    Staging(String),
    /// Anything else.
    #[error("executor failed: {0}")]
    Internal(String),
}

/// Stages the extracted trees and runs the job in the sandbox. Implemented by the worker with
/// the staging store and the Docker sandbox; it must verify the staged digests and the
/// image itself, because the runner only compares what the executor reports. The image is
/// not reported: the sandbox's image check (`check_image`, run on the engine's inspect
/// answer before create) refuses, as the no-verdict `image_missing`, an image whose repo
/// digests do not hold the manifest's pinned `name@sha256:…`, and the container is created
/// from that digest reference; a reported digest could only echo the manifest back.
#[async_trait::async_trait]
pub trait JobExecutor: Send + Sync {
    /// Runs `job` on the extracted `source_dir` and `benchmark_dir`.
    async fn execute(
        &self,
        job: &ValidatedJob,
        source_dir: &Path,
        benchmark_dir: &Path,
    ) -> Result<ExecutedJob, JobFailure>;

    /// A batch of runs begins: what the executor kept from the previous batch's runs (the
    /// sandbox's image inspects, [`worker_sandbox::ImageMemo`]) is asked afresh. The default
    /// keeps nothing.
    fn batch_begins(&self) {}

    /// Which of `images` a run of this executor pulls before it can start (under `--pull`,
    /// an image the engine does not hold): a batch's deadline estimate counts that pull
    /// ([`super::deadline::Need`]). Asked once per distinct image per poll. The default pulls
    /// none: an executor that never pulls.
    async fn pulls(&self, images: &BTreeSet<String>) -> BTreeSet<String> {
        let _ = images;
        BTreeSet::new()
    }
}

/// Runs one feed batch. Returns `Err` only when the run as a whole cannot proceed; every
/// per-job problem is a row of the report.
pub async fn run_feed(
    config: &FeedConfig,
    executor: &dyn JobExecutor,
) -> Result<FeedReport, FeedError> {
    config.validate()?;
    let client = PlatformClient::new(config.client_limits).map_err(FeedError::Client)?;
    std::fs::create_dir_all(&config.out_dir).map_err(|source| FeedError::Dir {
        what: "output directory",
        path: config.out_dir.clone(),
        source,
    })?;
    // A killed run leaves its downloads behind; nobody else would ever remove them.
    remove_stale(&config.work_dir, config.clock.as_ref());
    let scratch = Scratch::create(&config.work_dir).map_err(|source| FeedError::Dir {
        what: "work directory",
        path: config.work_dir.clone(),
        source,
    })?;

    let mut report = FeedReport::new(
        config.network.name(),
        config.verifiers.iter().map(ToString::to_string).collect(),
    );
    let (fetched, failures) = fetch_feeds(config, &client).await;
    report.fetch_failures = failures;
    // Every id the first answer named: a later poll of this batch adds only jobs that are new.
    let mut known: BTreeSet<String> = fetched
        .iter()
        .flatten()
        .filter_map(|j| j.get("job_id")?.as_str().map(str::to_owned))
        .collect();

    let Selection {
        mut selected,
        mut excluded,
        beyond_max,
    } = select_jobs(
        fetched,
        config.network,
        &config.verifiers,
        config.now_unix(),
        config.max_jobs,
    );
    narrow(config, &mut selected, &mut excluded);
    let runner = Runner {
        config,
        client: &client,
        executor,
        cache: config.cache_dir.as_ref().map(ResultCache::new),
    };
    let mut manifest = CandidateManifest::new(config.network.name());
    executor.batch_begins();
    let mut to_pull = BTreeSet::new();
    let planned = plan_counting_pulls(config, executor, selected, &mut to_pull).await;
    write_set_apart(config, &beyond_max, &planned.too_short);
    for (job, why) in planned.too_short {
        report.jobs.push(window_too_short_row(&job, &why));
    }
    let mut queue: std::collections::VecDeque<ValidatedJob> = planned.run.into();
    let mut started = 0usize;
    while let Some(job) = queue.pop_front() {
        let job = &job;
        let i = started;
        started += 1;
        let total = started + queue.len();
        progress_of(
            config,
            job.job_id(),
            format_args!("[{}/{total}] {}", i + 1, job.job_id().escape_debug()),
        );
        // The jobs before this one took their time: what fitted at the start may not now. Its
        // pull still counts unless a run before it brought the image.
        let need = super::deadline::Need::of(
            job,
            !to_pull.contains(job.manifest().image()),
            &config.settle,
        );
        if let Err(why) = super::deadline::fits(job, config.now_unix(), need) {
            progress(config, format_args!("[{}/{total}] skipped: {why}", i + 1));
            write_too_short(config, job, &why);
            report.jobs.push(window_too_short_row(job, &why));
            continue;
        }
        let job_dir = scratch.path().join(format!("job-{i}"));
        let run = runner.run_one(job, &job_dir).await;
        // Pulled by this run if it could be; a pull that failed fails the next run at once.
        to_pull.remove(job.manifest().image());
        if let Err(e) = std::fs::remove_dir_all(&job_dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(error = %e, "could not remove a job's scratch directory");
        }
        write_readiness(config, job, &run.outcome).await;
        report.executed += u64::from(run.executed);
        report.runtime_unavailable += u64::from(run.runtime_unavailable);
        if run.outcome.candidate_file().is_some() {
            manifest.push(job.job_id());
        }
        let row = run.row();
        progress(
            config,
            format_args!(
                "[{}/{total}] {}{}",
                i + 1,
                row.status.as_str(),
                row.reason
                    .as_deref()
                    .map(|r| format!(": {}", r.escape_debug()))
                    .unwrap_or_default()
            ),
        );
        report.jobs.push(row);
        take_new_jobs(
            &runner,
            &mut known,
            (&mut queue, &mut to_pull),
            started,
            &mut report,
        )
        .await;
    }
    let (listed, omitted) = excluded.into_parts();
    report.jobs.extend(listed);
    report.omitted_jobs = omitted;
    let left_out = write_bounded_manifest(&config.out_dir, &manifest, MAX_MANIFEST_CANDIDATES)
        .map_err(FeedError::Manifest)?;
    report.candidates_left_out = u64::try_from(left_out.len()).unwrap_or(u64::MAX);
    report.manifest_file = Some(MANIFEST_FILE.into());
    Ok(report)
}

/// After each job of a batch: a job whose window ends sooner may have been listed while it
/// ran. Polled even when the batch is full under `--max-jobs`: a new job can take the place of
/// a queued one whose window ends later, which is then displaced to a later run (its row
/// `max_jobs`, its record not ready).
async fn take_new_jobs(
    runner: &Runner<'_>,
    known: &mut BTreeSet<String>,
    (queue, to_pull): (
        &mut std::collections::VecDeque<ValidatedJob>,
        &mut BTreeSet<String>,
    ),
    started: usize,
    report: &mut FeedReport,
) {
    let config = runner.config;
    let cap = config.max_jobs.unwrap_or(usize::MAX);
    let room = cap.saturating_sub(started + queue.len());
    let (more, too_short) =
        poll_new_jobs(runner, known, to_pull, room.saturating_add(queue.len())).await;
    for (j, why) in &too_short {
        write_too_short(config, j, why);
        report.jobs.push(window_too_short_row(j, why));
    }
    if !more.is_empty() {
        queue.extend(more);
        super::deadline::sort(queue.make_contiguous(), |j| j);
    }
    for last in super::deadline::displace(queue, started, cap) {
        let why = format!(
            "beyond --max-jobs {cap}: displaced by a job listed during the batch whose window \
             ends sooner; left for a later run"
        );
        progress(
            config,
            format_args!("feed: {} {why}", last.job_id().escape_debug()),
        );
        write_not_run(config, last.job_id(), reason::MAX_JOBS, &why);
        report.jobs.push(JobRow::new(
            last.job_id().to_owned(),
            JobStatus::Skipped,
            reason::MAX_JOBS,
            &why,
        ));
    }
}

/// Polls the feed again during a batch and returns the jobs it lists that are new to this
/// batch (never in an earlier answer), selected and narrowed as the first answer was, at most
/// `room`, and those of them that can no longer settle (a pull counted for an image of theirs
/// the executor would pull, which joins `to_pull`). A failed poll or an excluded new job
/// changes nothing in this batch: the next run reports it.
async fn poll_new_jobs(
    runner: &Runner<'_>,
    known: &mut BTreeSet<String>,
    to_pull: &mut BTreeSet<String>,
    room: usize,
) -> (
    Vec<ValidatedJob>,
    Vec<(ValidatedJob, super::deadline::TooShort)>,
) {
    let config = runner.config;
    let (fetched, failures) = fetch_feeds(config, runner.client).await;
    for f in &failures {
        progress(
            config,
            format_args!(
                "feed: a poll during the batch failed ({}): new jobs wait for the next run",
                f.kind
            ),
        );
    }
    let fresh: Vec<Vec<Value>> = fetched
        .into_iter()
        .map(|list| {
            list.into_iter()
                .filter(|j| {
                    j.get("job_id")
                        .and_then(Value::as_str)
                        .is_some_and(|id| !known.contains(id))
                })
                .collect()
        })
        .collect();
    let Selection {
        mut selected,
        mut excluded,
        beyond_max: _,
    } = select_jobs(
        fresh,
        config.network,
        &config.verifiers,
        config.now_unix(),
        Some(room),
    );
    narrow(config, &mut selected, &mut excluded);
    known.extend(selected.iter().map(|j| j.job_id().to_owned()));
    let planned = plan_counting_pulls(config, runner.executor, selected, to_pull).await;
    for job in &planned.run {
        progress(
            config,
            format_args!(
                "feed: {} listed during the batch, queued by its window's end",
                job.job_id().escape_debug()
            ),
        );
    }
    (planned.run, planned.too_short)
}

/// [`super::deadline::plan`] on the clock now, counting the pull of each image of `jobs` the
/// executor's runs would pull (they join `to_pull`). A run pulls a missing image itself,
/// after this plan: uncounted, a job with too little time left for the pull would start and
/// miss its window. The executor is asked once per distinct image.
async fn plan_counting_pulls(
    config: &FeedConfig,
    executor: &dyn JobExecutor,
    jobs: Vec<ValidatedJob>,
    to_pull: &mut BTreeSet<String>,
) -> super::deadline::Plan<ValidatedJob> {
    if !jobs.is_empty() {
        let images = jobs
            .iter()
            .map(|j| j.manifest().image().to_owned())
            .collect();
        to_pull.extend(executor.pulls(&images).await);
    }
    super::deadline::plan(
        jobs,
        |j| j,
        config.now_unix(),
        &config.settle,
        |j| !to_pull.contains(j.manifest().image()),
    )
}

/// Keeps the `--job-id` jobs and this `--shard`'s; the others become skipped rows.
fn narrow(
    config: &FeedConfig,
    selected: &mut Vec<ValidatedJob>,
    excluded: &mut super::report::ExcludedRows,
) {
    if let Some(wanted) = &config.only_jobs {
        selected.retain(|job| {
            let keep = wanted.contains(job.job_id());
            if !keep {
                excluded.push(JobStatus::Skipped, reason::NOT_REQUESTED, || {
                    JobRow::new(
                        job.job_id().to_owned(),
                        JobStatus::Skipped,
                        reason::NOT_REQUESTED,
                        "not one of the --job-id jobs",
                    )
                });
            }
            keep
        });
    }
    if config.shard != super::shard::Shard::default() {
        selected.retain(|job| {
            let keep = config.shard.owns(job.job_id());
            if !keep {
                excluded.push(JobStatus::Skipped, reason::OTHER_SHARD, || {
                    JobRow::new(
                        job.job_id().to_owned(),
                        JobStatus::Skipped,
                        reason::OTHER_SHARD,
                        "another --shard's job",
                    )
                });
            }
            keep
        });
    }
}

/// The row of a job set apart because it cannot settle before its window ends.
pub fn window_too_short_row(job: &ValidatedJob, why: &super::deadline::TooShort) -> JobRow {
    JobRow::new(
        job.job_id().to_owned(),
        JobStatus::Skipped,
        super::deadline::WINDOW_TOO_SHORT,
        &format!("{why}: not started in place of a job that can settle"),
    )
}

/// Queries the feed once per configured verifier; a failed query is a [`FetchFailure`], never
/// a reason to stop (the other verifier's jobs still run). `worker feed` and `worker serve`
/// both start each batch here, so they select from the same answers.
pub async fn fetch_feeds(
    config: &FeedConfig,
    client: &PlatformClient,
) -> (Vec<Vec<Value>>, Vec<FetchFailure>) {
    let mut fetched = Vec::new();
    let mut failures = Vec::new();
    for verifier in &config.verifiers {
        match client
            .fetch_jobs(&config.api_base, config.network, *verifier)
            .await
        {
            Ok(jobs) => {
                progress(
                    config,
                    format_args!("feed: {} job(s) for {verifier}", jobs.len()),
                );
                fetched.push(jobs);
            }
            Err(e) => {
                progress(
                    config,
                    format_args!("feed: query for {verifier} failed: {e}"),
                );
                failures.push(FetchFailure {
                    verifier: verifier.to_string(),
                    kind: e.kind().into(),
                    message: e.to_string(),
                    transient: e.is_transient(),
                });
            }
        }
    }
    (fetched, failures)
}

/// Runs single selected jobs exactly as [`run_feed`] runs each job of its batch (liveness
/// re-check, cache, archives, executor, judgement, candidate file), for callers that drive
/// the jobs themselves (`worker serve`).
pub struct JobRunner<'a>(Runner<'a>);

impl<'a> JobRunner<'a> {
    /// A runner with `config`'s cache (if any).
    pub fn new(
        config: &'a FeedConfig,
        client: &'a PlatformClient,
        executor: &'a dyn JobExecutor,
    ) -> Self {
        Self(Runner {
            config,
            client,
            executor,
            cache: config.cache_dir.as_ref().map(ResultCache::new),
        })
    }

    /// Runs `job` with `job_dir` (which must not exist yet) as its scratch directory, removes
    /// that directory, and returns the job's report row, its typed outcome and whether the
    /// executor ran.
    pub async fn run(&self, job: &ValidatedJob, job_dir: &Path) -> JobRun {
        let run = self.0.run_one(job, job_dir).await;
        if let Err(e) = std::fs::remove_dir_all(job_dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(error = %e, "could not remove a job's scratch directory");
        }
        run
    }
}

impl JobRunner<'_> {
    /// Downloads and extracts only `job`'s source archive into `job_dir` (created here, left
    /// for the caller to remove), by the same code, URL, caps and extraction as
    /// [`JobRunner::run`], and returns the extracted tree, or the row the feed would write
    /// for the job. Nothing is cached: the job's committed digest is not checked here (`worker
    /// preflight` computes the digest a submission would commit to from this tree).
    pub async fn fetch_source(
        &self,
        job: &ValidatedJob,
        job_dir: &Path,
    ) -> Result<PathBuf, JobRow> {
        let stopped = |stop: Stop| {
            JobRow::new(
                job.job_id().to_owned(),
                stop.status,
                stop.code.as_str(),
                &stop.reason,
            )
        };
        std::fs::create_dir(job_dir)
            .map_err(|e| stopped(Stop::new(JobStatus::Error, RunCode::ScratchFailed, e)))?;
        let mut durations = Durations::default();
        self.0
            .fetch_tree(&Fetch::source(job), job_dir, &mut durations)
            .await
            .map_err(stopped)
    }
}

struct Runner<'a> {
    config: &'a FeedConfig,
    client: &'a PlatformClient,
    executor: &'a dyn JobExecutor,
    cache: Option<ResultCache>,
}

/// Writes `job`'s readiness record beside its candidate after a run that ended with
/// `outcome` (`feed` after each job, `serve` after each run). A record that cannot be written
/// is logged, never fatal: its absence says "not ready", as a failed check would.
pub async fn write_readiness(config: &FeedConfig, job: &ValidatedJob, outcome: &JobOutcome) {
    let record = super::readiness::assess(
        job,
        outcome,
        config.chain_readiness.as_deref(),
        config.now_unix(),
    )
    .await;
    if let Err(e) = super::readiness::write_readiness(&config.out_dir, &record) {
        tracing::warn!(error = %e, "could not write a readiness record");
    }
}

/// Writes the not-ready record of a job set apart without a run (see
/// [`super::readiness::not_run`]); a failed write is logged, as for a run's record.
fn write_not_run(config: &FeedConfig, job_id: &str, code: &str, why: &str) {
    let record = super::readiness::not_run(job_id, code, why, config.now_unix());
    if let Err(e) = super::readiness::write_readiness(&config.out_dir, &record) {
        tracing::warn!(error = %e, "could not write a readiness record");
    }
}

/// The records of the jobs a batch sets apart at its start: beyond `--max-jobs`, or unable to
/// settle before their windows end.
fn write_set_apart(
    config: &FeedConfig,
    beyond_max: &[String],
    too_short: &[(ValidatedJob, super::deadline::TooShort)],
) {
    for job_id in beyond_max {
        let why = "beyond --max-jobs; left for a later run";
        write_not_run(config, job_id, reason::MAX_JOBS, why);
    }
    for (job, why) in too_short {
        write_too_short(config, job, why);
    }
}

fn write_too_short(config: &FeedConfig, job: &ValidatedJob, why: &super::deadline::TooShort) {
    write_not_run(
        config,
        job.job_id(),
        super::deadline::WINDOW_TOO_SHORT,
        &why.to_string(),
    );
}

/// How one job's run went, typed; its report row is a view of it ([`JobRun::row`]).
#[derive(Debug, Clone)]
pub struct JobRun {
    /// The job's id.
    pub job_id: String,
    /// Its status, as the report and the ledger name it.
    pub status: JobStatus,
    /// How it ended: the verdict with its candidate and evidence address, or the reason.
    pub outcome: JobOutcome,
    /// A verdict's outcome and evidence as its candidate holds them; `None` without one.
    pub verdict: Option<RunVerdict>,
    /// Time spent.
    pub durations: Durations,
    /// Replayed from the result cache (a verdict or a rejection).
    pub reused_from_cache: bool,
    /// Whether the executor was called.
    pub executed: bool,
    runtime_unavailable: bool,
}

impl JobRun {
    /// Its report row: the same facts, as strings for a person or a JSON report.
    pub fn row(&self) -> JobRow {
        JobRow {
            job_id: self.job_id.clone(),
            status: self.status,
            reason_code: self.outcome.code().map(|c| c.as_str().to_owned()),
            reason: self.outcome.detail().map(super::report::row_reason),
            candidate_file: self.outcome.candidate_file().map(str::to_owned),
            reused_from_cache: self.reused_from_cache,
            durations: self.durations,
        }
    }
}

/// A verdict as this run holds it, typed: what its candidate file says, for callers in the
/// same process (`reproduce`, `preflight`), so that none reads the file back.
#[derive(Debug, Clone)]
pub struct RunVerdict {
    /// The outcome, checked against the job (the type says so: a caller compares it as it
    /// is, without serialising it to be checked again).
    pub outcome: ValidatedOutcome,
    /// The evidence record the candidate carries; `None` for a cached verdict stored without
    /// one, or whose record does not parse.
    pub evidence: Option<EvidenceRecord>,
}

/// Why one job ended without a candidate.
struct Stop {
    status: JobStatus,
    code: RunCode,
    reason: String,
    /// The same inputs are refused on every attempt: remember it (see `cache`).
    permanent: bool,
    /// Replayed from the cache.
    cached: bool,
}

impl Stop {
    fn new(status: JobStatus, code: RunCode, reason: impl fmt::Display) -> Self {
        Self {
            status,
            code,
            reason: reason.to_string(),
            permanent: false,
            cached: false,
        }
    }

    fn permanent(mut self) -> Self {
        self.permanent = true;
        self
    }
}

struct Done {
    status: JobStatus,
    file: String,
    /// The store address of the candidate's evidence record.
    evidence: Option<Sha256Digest>,
    cached: bool,
    verdict: RunVerdict,
}

#[derive(Default)]
struct Flags {
    executed: bool,
    runtime_unavailable: bool,
}

impl Runner<'_> {
    async fn run_one(&self, job: &ValidatedJob, job_dir: &Path) -> JobRun {
        let started = Instant::now();
        let mut durations = Durations::default();
        let mut flags = Flags::default();
        let result = self.attempt(job, job_dir, &mut durations, &mut flags).await;
        durations.total_ms = millis(started);
        let job_id = job.job_id().to_owned();
        let (status, outcome, verdict, reused_from_cache) = match result {
            Ok(done) => (
                done.status,
                JobOutcome::Verdict {
                    passed: done.status == JobStatus::CompletedPassed,
                    candidate_file: done.file,
                    evidence: done.evidence,
                    cached: done.cached,
                },
                Some(done.verdict),
                done.cached,
            ),
            Err(stop) => {
                let refused = stop.status == JobStatus::Rejected;
                (
                    stop.status,
                    JobOutcome::stopped(stop.code, stop.reason, refused),
                    None,
                    stop.cached,
                )
            }
        };
        JobRun {
            job_id,
            status,
            outcome,
            verdict,
            durations,
            reused_from_cache,
            executed: flags.executed,
            runtime_unavailable: flags.runtime_unavailable,
        }
    }

    async fn attempt(
        &self,
        job: &ValidatedJob,
        job_dir: &Path,
        durations: &mut Durations,
        flags: &mut Flags,
    ) -> Result<Done, Stop> {
        // Selection checked liveness, but earlier jobs in the batch may have taken a while.
        if self.config.check_liveness && !job.is_live(self.config.now_unix()) {
            return Err(Stop::new(
                JobStatus::Rejected,
                RunCode::Expired,
                "the job expired before it could run",
            ));
        }
        let manifest = job.manifest();
        let image_digest = manifest.image_digest();
        let identity = RunIdentity {
            job,
            source_digest: job.source_snapshot_digest(),
            benchmark_digest: manifest.benchmark_digest(),
            image_digest,
            worker_version: &self.config.worker_version,
        };
        if let Some(reused) = self.reuse_cached(job, &identity) {
            return reused;
        }
        let dirs = self.fetch_trees(job, job_dir, &identity, durations).await?;
        let (Some(source_dir), Some(benchmark_dir)) = (dirs.first(), dirs.get(1)) else {
            return Err(Stop::new(
                JobStatus::Error,
                RunCode::Internal,
                "archive list",
            ));
        };

        progress(self.config, format_args!("  running"));
        let t = Instant::now();
        flags.executed = true;
        let executed = AssertUnwindSafe(self.executor.execute(job, source_dir, benchmark_dir))
            .catch_unwind()
            .await;
        durations.execute_ms = millis(t);
        self.record(job, &identity, executed, flags)
    }

    /// What follows an execution: the judgement, the cache entry and the candidate.
    fn record(
        &self,
        job: &ValidatedJob,
        identity: &RunIdentity<'_>,
        executed: std::thread::Result<Result<ExecutedJob, JobFailure>>,
        flags: &mut Flags,
    ) -> Result<Done, Stop> {
        let (outcome, evidence) = judge_execution(executed, job, identity, flags)?;
        if let Some(cache) = &self.cache
            && let Err(e) = cache.store(identity, outcome.outcome(), Some(evidence.json()))
        {
            tracing::warn!(error = %e, "could not cache a verdict");
        }
        let (file, digest) = self.write(
            job,
            outcome.outcome(),
            Some(CandidateEvidence::sealed(&evidence)),
        )?;
        Ok(Done {
            status: verdict_status(outcome.verdict().passed()),
            file,
            evidence: digest,
            cached: false,
            verdict: RunVerdict {
                outcome,
                evidence: Some(evidence.record().clone()),
            },
        })
    }

    /// A verdict or a rejection cached under the run's full identity, reused as it is.
    fn reuse_cached(
        &self,
        job: &ValidatedJob,
        identity: &RunIdentity<'_>,
    ) -> Option<Result<Done, Stop>> {
        if let Some(hit) = self.cache.as_ref().and_then(|c| c.load(identity)) {
            progress(self.config, format_args!("  reusing the cached verdict"));
            let status = verdict_status(hit.outcome.verdict().passed());
            return Some(
                self.write(
                    job,
                    hit.outcome.outcome(),
                    hit.evidence.as_ref().map(CandidateEvidence::read_back),
                )
                .map(|(file, evidence)| Done {
                    status,
                    file,
                    evidence,
                    cached: true,
                    verdict: RunVerdict {
                        // Read from the cache, not a file of this run: parsed when it parses,
                        // as a candidate's record is by any reader.
                        evidence: hit
                            .evidence
                            .as_ref()
                            .and_then(|e| EvidenceRecord::deserialize(e).ok()),
                        outcome: hit.outcome,
                    },
                }),
            );
        }
        if let Some(rejected) = self.cache.as_ref().and_then(|c| c.load_rejection(identity))
            // Only the cacheable codes are ever stored; another one is not trusted, the job runs.
            && let Some(code) = RunCode::from_cached(&rejected.reason_code)
        {
            progress(self.config, format_args!("  reusing the cached rejection"));
            return Some(Err(Stop {
                cached: true,
                ..Stop::new(JobStatus::Rejected, code, rejected.reason)
            }));
        }
        None
    }

    /// Downloads and extracts the source and benchmark archives into `job_dir`; a permanent
    /// failure is cached as a rejection of this run identity.
    async fn fetch_trees(
        &self,
        job: &ValidatedJob,
        job_dir: &Path,
        identity: &RunIdentity<'_>,
        durations: &mut Durations,
    ) -> Result<Vec<PathBuf>, Stop> {
        let manifest = job.manifest();
        std::fs::create_dir(job_dir)
            .map_err(|e| Stop::new(JobStatus::Error, RunCode::ScratchFailed, e))?;
        let bench = job.benchmark_source();
        let fetches = [
            Fetch::source(job),
            Fetch {
                label: "benchmark",
                repository: &bench.repository,
                commit: &bench.commit,
                subdirectory: &bench.subdirectory,
                max_compressed: BENCHMARK_MAX_COMPRESSED,
                limits: ArchiveLimits::benchmark(manifest),
            },
        ];
        let mut dirs = Vec::with_capacity(2);
        for fetch in &fetches {
            match self.fetch_tree(fetch, job_dir, durations).await {
                Ok(dir) => dirs.push(dir),
                Err(stop) => {
                    if stop.permanent
                        && let Some(cache) = &self.cache
                        && let Err(e) =
                            cache.store_rejection(identity, stop.code.as_str(), &stop.reason)
                    {
                        tracing::warn!(error = %e, "could not cache a rejection");
                    }
                    return Err(stop);
                }
            }
        }
        Ok(dirs)
    }

    /// Writes the candidate; returns its file name and the store address of its evidence.
    fn write(
        &self,
        job: &ValidatedJob,
        outcome: &verifier_sdk::Outcome,
        evidence: Option<CandidateEvidence<'_>>,
    ) -> Result<(String, Option<Sha256Digest>), Stop> {
        let address = evidence.as_ref().map(|e| e.digest);
        let file = write_candidate(
            &self.config.out_dir,
            job,
            outcome,
            evidence,
            &self.config.runner_revision,
        )
        .map_err(|e| Stop::new(JobStatus::Error, RunCode::OutputFailed, e))?;
        Ok((file, address))
    }

    /// Downloads one archive into the job's scratch dir and extracts its selected subtree.
    async fn fetch_tree(
        &self,
        fetch: &Fetch<'_>,
        job_dir: &Path,
        durations: &mut Durations,
    ) -> Result<PathBuf, Stop> {
        let url = archive_url(&self.config.archive_base, fetch.repository, fetch.commit);
        let archive_path = job_dir.join(format!("{}.tar.gz", fetch.label));
        let t = Instant::now();
        let mut file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&archive_path)
            .await
            .map_err(|e| Stop::new(JobStatus::Error, RunCode::ScratchFailed, e))?;
        let show = self.config.progress;
        let label = fetch.label;
        let mut next_report = PROGRESS_STEP;
        let mut on_progress = move |done: u64, total: Option<u64>| {
            if done >= next_report {
                next_report = done.saturating_add(PROGRESS_STEP);
                let line = match total {
                    Some(t) => format!("{label}: {} of {} MiB", done >> 20, t >> 20),
                    None => format!("{label}: {} MiB", done >> 20),
                };
                if show {
                    eprintln!("  {line}");
                } else {
                    tracing::debug!(target: "worker_jobs::progress", "{line}");
                }
            }
        };
        let downloaded = self
            .client
            .download_to(&url, &mut file, fetch.max_compressed, &mut on_progress)
            .await;
        durations.download_ms += millis(t);
        drop(file);
        let bytes = downloaded.map_err(|e| {
            let status = if e.is_transient() {
                JobStatus::Error
            } else {
                JobStatus::Rejected
            };
            let stop = Stop::new(
                status,
                RunCode::download(&e),
                format!("{} archive: {e}", fetch.label),
            );
            // Over the size cap is a property of the archive; a 404 or a refused redirect
            // may not be, so those are tried again next run.
            match e {
                ClientError::TooLarge { .. } => stop.permanent(),
                _ => stop,
            }
        })?;
        progress(
            self.config,
            format_args!("  {}: downloaded {bytes} bytes", fetch.label),
        );

        let t = Instant::now();
        let dest = job_dir.join(fetch.label);
        let subdirectory = fetch.subdirectory.clone();
        let limits = fetch.limits;
        let target = dest.clone();
        let extracted = tokio::task::spawn_blocking(move || {
            let reader = std::fs::File::open(&archive_path).map(std::io::BufReader::new);
            let result = reader
                .map_err(|source| super::archive::ArchiveError::Io {
                    path: "archive".into(),
                    source,
                })
                .and_then(|r| extract_tar_gz(r, &target, &subdirectory, &limits));
            let _ = std::fs::remove_file(&archive_path);
            result
        })
        .await;
        durations.extract_ms += millis(t);
        match extracted {
            Ok(Ok(stats)) => {
                progress(
                    self.config,
                    format_args!(
                        "  {}: extracted {} file(s), {} bytes",
                        fetch.label, stats.files, stats.bytes
                    ),
                );
                Ok(dest)
            }
            Ok(Err(e)) if e.is_rejection() => {
                let stop = Stop::new(
                    JobStatus::Rejected,
                    RunCode::ArchiveRejected,
                    format!("{} archive: {e}", fetch.label),
                );
                Err(if e.is_permanent_rejection() {
                    stop.permanent()
                } else {
                    stop
                })
            }
            Ok(Err(e)) => Err(Stop::new(
                JobStatus::Error,
                RunCode::ExtractFailed,
                format!("{} archive: {e}", fetch.label),
            )),
            Err(_) => Err(Stop::new(
                JobStatus::Error,
                RunCode::ExtractFailed,
                format!("{} archive: extraction task failed", fetch.label),
            )),
        }
    }
}

struct Fetch<'a> {
    label: &'static str,
    repository: &'a GithubRepo,
    commit: &'a CommitId,
    subdirectory: &'a RelativeDir,
    max_compressed: u64,
    limits: ArchiveLimits,
}

impl<'a> Fetch<'a> {
    /// The solver's archive of `job`, under the source caps.
    fn source(job: &'a ValidatedJob) -> Self {
        let source = job.source();
        Fetch {
            label: "source",
            repository: &source.repository,
            commit: &source.commit,
            subdirectory: job.source_subdirectory(),
            max_compressed: SOURCE_MAX_COMPRESSED,
            limits: ArchiveLimits::source(job.manifest()),
        }
    }
}

const PROGRESS_STEP: u64 = 16 << 20;

fn verdict_status(passed: bool) -> JobStatus {
    if passed {
        JobStatus::CompletedPassed
    } else {
        JobStatus::CompletedFailed
    }
}

/// A step of the batch: a line on stderr for a person watching ([`FeedConfig::progress`]),
/// else a debug event, so that under JSON logs stderr stays one log object per line and the
/// step is still there for whoever logs at debug.
fn progress(config: &FeedConfig, line: fmt::Arguments<'_>) {
    if config.progress {
        eprintln!("{line}");
    } else {
        tracing::debug!(target: "worker_jobs::progress", "{}", line.to_string().trim_start());
    }
}

/// [`progress`] of one job: as a debug event it carries the job id as a field, so that a log
/// shipper finds the job's lines without reading messages.
fn progress_of(config: &FeedConfig, job_id: &str, line: fmt::Arguments<'_>) {
    if config.progress {
        eprintln!("{line}");
    } else {
        tracing::debug!(target: "worker_jobs::progress", job_id, "{}", line.to_string().trim_start());
    }
}

fn millis(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// The verdict and evidence of an execution, or why there is none. The executor verifies the
/// tree digests; the re-check here keeps a buggy executor from turning a run on other trees
/// into a cached, signable candidate. The image is checked by the sandbox itself (see
/// [`JobExecutor`]), not here.
fn judge_execution(
    executed: std::thread::Result<Result<ExecutedJob, JobFailure>>,
    job: &ValidatedJob,
    identity: &RunIdentity<'_>,
    flags: &mut Flags,
) -> Result<(ValidatedOutcome, SealedEvidence), Stop> {
    let executed = match executed {
        Err(_) => {
            return Err(Stop::new(
                JobStatus::Error,
                RunCode::ExecutorPanicked,
                "the executor panicked",
            ));
        }
        Ok(Err(JobFailure::RuntimeUnavailable(m))) => {
            flags.runtime_unavailable = true;
            return Err(Stop::new(JobStatus::Error, RunCode::RuntimeUnavailable, m));
        }
        Ok(Err(JobFailure::InvalidInput(m))) => {
            return Err(Stop::new(JobStatus::Rejected, RunCode::ExecutorRejected, m));
        }
        Ok(Err(JobFailure::Staging(m))) => {
            return Err(Stop::new(JobStatus::Error, RunCode::StagingFailed, m));
        }
        Ok(Err(JobFailure::Internal(m))) => {
            return Err(Stop::new(JobStatus::Error, RunCode::ExecutorError, m));
        }
        Ok(Ok(executed)) => executed,
    };
    let outcome = match executed.output {
        RunOutput::NoVerdict(nv) => {
            if nv.no_verdict.reason == verifier_sdk::NoVerdictReason::RuntimeUnavailable {
                flags.runtime_unavailable = true;
            }
            return Err(Stop::new(
                JobStatus::NoVerdict,
                RunCode::NoVerdict(nv.no_verdict.reason),
                nv.no_verdict.detail,
            ));
        }
        RunOutput::Verdict(outcome) => outcome,
    };
    for (what, reported, committed) in [
        ("source", executed.source_digest, identity.source_digest),
        (
            "benchmark",
            executed.benchmark_digest,
            identity.benchmark_digest,
        ),
    ] {
        if reported != committed {
            return Err(Stop::new(
                JobStatus::Error,
                RunCode::DigestMismatch,
                format!("executor ran {what} {reported}, the job commits to {committed}"),
            ));
        }
    }
    // The executor's outcome is typed already: checked against the job as it is, not
    // serialised to be parsed again.
    let outcome = outcome
        .check_for(job)
        .map_err(|e| Stop::new(JobStatus::Error, RunCode::InvalidOutcome, e))?;
    let Some(evidence) = executed.evidence else {
        return Err(Stop::new(
            JobStatus::Error,
            RunCode::MissingEvidence,
            "the executor returned a verdict without an evidence record",
        ));
    };
    Ok((outcome, evidence))
}

#[cfg(test)]
mod evidence_once;
#[cfg(test)]
mod row_view;
