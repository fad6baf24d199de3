//! Images for `worker serve` on a host that serves many bounties: each image the due jobs
//! need is pulled once, by digest, before its jobs start (so a run's time never includes a
//! pull, and the pull's own time is reported apart: `worker_serve_image_pull_duration_seconds`
//! and the pull ledger), after the free-space check of [`worker_sandbox::images::prepare`];
//! and when the images the worker pulled outgrow `--image-budget`, the least recently used
//! that no listed job needs are removed ([`worker_sandbox::images::plan_eviction`]).
//!
//! The budget holds while a batch runs, not only once jobs leave the feed: before a batch,
//! the due jobs' images are taken one by one, the image of the oldest waiting job first (by
//! ledger key: the ledger numbers jobs as it first sees them), and an image is pulled only if
//! it fits the budget next to the images already taken for this batch and those used within
//! `--image-keep-recent` ([`worker_sandbox::images::plan_room`]); to make that room, the least
//! recently used other pulled images are removed, even one a younger listed job needs (it is
//! pulled again when its turn comes: the only case of more than one pull per image, and only
//! when the budget cannot hold both). An image larger than the budget still runs, alone: when
//! no other counted image stays. The size of an image is known only once it is present, so
//! one not pulled before is expected to be as large as the largest this worker has pulled (a
//! larger one can exceed the budget once, with the over-budget WARN; its size is then known).
//! Serve polls while its runs go on, so an image is chosen for a batch while other jobs run:
//! those images were used when their jobs were admitted, so `--image-keep-recent` protects
//! them (with `--image-keep-recent 0s` an image may be chosen for removal while its job
//! stages; the engine refuses to remove one a container uses, and a run whose image went
//! missing pulls it itself).
//!
//! A pull never holds the service: admission ([`Images::before_batch`]) only decides, with
//! the engine's quick calls (its image list, removals to make room); the pulls it asks for
//! run one at a time beside the service's loop ([`Images::fetch`]), which meanwhile polls,
//! starts and ends runs, renews its fleet leases and writes its heartbeat, and their jobs
//! start once [`Images::pulled`] took the pull's end. An image whose pull is under way or
//! queued is not pulled again by a later poll, counts against the budget at its estimated
//! size and is never chosen for removal to make room for another. Under `--image-budget` one
//! pull is asked for at a time: a missing image met while one is under way gets its room
//! decided when that pull ended, on the real size it took (as when an admission pulled one
//! image after the other), and the images younger than it wait behind it; images of jobs
//! queued or running are never removed to make room.
//!
//! Jobs whose image has no room are held back (the path below: not started, no attempt
//! counted) and come back at the next poll. No starvation: once the oldest waiting job's image
//! has no room, the images of younger jobs are not taken in that batch either, even those
//! present or small enough to fit. Otherwise new jobs for present images would keep those
//! images recently used (and protected) forever; this way they age out of
//! `--image-keep-recent`, and the waiting job runs within that time plus a poll interval
//! (after the batch that ran before it). The alternative, a bounded wait after which the
//! budget may be exceeded, was not chosen: it lets the disk outgrow the budget by design, and
//! the limit it guards (the disk) is the one that fails for good. The cost: while an image
//! waits, the host may run fewer jobs than it could; with `--image-keep-recent 0s` an image
//! waits only for the batch ahead of it. A removal the engine refuses (another container uses
//! the image) leaves no room, so the image waits (the engine's words are logged).
//!
//! Pulled images cannot be labelled, so which images this worker pulled is kept in its own
//! record, `images.json` in the state directory (the pull ledger, [`PullLedger`]); `worker gc
//! --images` reads the same file. An image the record does not name is never removed unless
//! the operator says so (`--gc-foreign-images`).
//!
//! A job whose image cannot be made ready for a host reason (too little free space, free
//! space unknown, the engine not answering, no room under the budget yet) is held back: it is
//! not started, so no attempt is counted, and the next poll tries again. A pull the registry
//! refuses (no such digest) is the job's: its run goes ahead and the sandbox's own pull
//! records the job's no-verdict.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use verifier_sdk::ValidatedJob;

use crate::telemetry::ImageMetrics;
use worker_sandbox::images::{
    EvictionInput, EvictionPlan, EvictionReport, ImageError, ImageStore, Prepared, evict,
    plan_eviction, plan_room, prepare,
};

/// The pull ledger's file name in the state directory.
pub const LEDGER_FILE: &str = "images.json";

/// What `worker serve` and `worker gc --images` do with images.
#[derive(Clone, Debug)]
pub struct ImagePolicy {
    /// Pull missing images (by digest) ahead of their jobs (`--pull`).
    pub pull: bool,
    /// Most bytes the images the worker pulled may take (`--image-budget`); `None`: no removal.
    pub budget: Option<u64>,
    /// Count and remove images the worker did not pull too (`--gc-foreign-images`).
    pub foreign: bool,
    /// Bytes that must be free on the engine's data root before a pull (`--image-min-free`;
    /// 0 turns the check off, which is the only way to pull when it cannot be read).
    pub min_free: u64,
    /// An image used this recently is kept like a needed one (`--image-keep-recent`).
    pub keep_recent: Duration,
}

impl Default for ImagePolicy {
    fn default() -> Self {
        Self {
            pull: false,
            budget: None,
            foreign: false,
            min_free: DEFAULT_MIN_FREE,
            keep_recent: Duration::from_secs(15 * 60),
        }
    }
}

/// `--image-min-free`'s default: 2 GiB, about one large toolchain image.
pub const DEFAULT_MIN_FREE: u64 = 2 << 30;

/// One image the worker pulled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PulledImage {
    /// The engine's image id when pulled.
    pub id: String,
    /// Its size then.
    pub size_bytes: u64,
    /// When it was pulled (unix ms).
    pub pulled_at_ms: i64,
    /// How long the pull took (ms).
    pub pull_ms: u64,
    /// When a job last needed it (unix ms).
    pub last_used_ms: i64,
}

/// `images.json`: the images this worker pulled, and the references the last poll's jobs need.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullLedger {
    /// The file's format.
    pub version: u32,
    /// By reference (`name@sha256:…`).
    pub pulled: BTreeMap<String, PulledImage>,
    /// The images of the jobs the last answered poll listed: never removed.
    pub needed: BTreeSet<String>,
}

/// Why the pull ledger cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LedgerFileError {
    /// Reading or writing it failed.
    #[error("pull ledger {path:?}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// It is not a pull ledger this worker can read.
    #[error("pull ledger {path:?} is not valid: {source}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The error.
        source: serde_json::Error,
    },
}

impl PullLedger {
    /// Reads `dir/images.json` (an absent file is an empty ledger).
    pub fn load(dir: &Path) -> Result<Self, LedgerFileError> {
        let path = dir.join(LEDGER_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes).map_err(|source| LedgerFileError::Invalid {
                    path: path.clone(),
                    source,
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self {
                version: 1,
                ..Self::default()
            }),
            Err(source) => Err(LedgerFileError::Io { path, source }),
        }
    }

    /// Writes it whole, through a temporary file renamed over the old one (a crash leaves
    /// the old or the new, never half of one).
    pub fn save(&self, dir: &Path) -> Result<(), LedgerFileError> {
        let path = dir.join(LEDGER_FILE);
        let tmp = dir.join(format!("{LEDGER_FILE}.tmp"));
        let io = |source| LedgerFileError::Io {
            path: path.clone(),
            source,
        };
        let bytes = serde_json::to_vec_pretty(self).map_err(|source| LedgerFileError::Invalid {
            path: path.clone(),
            source,
        })?;
        std::fs::write(&tmp, bytes).map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)
    }

    /// What the eviction choice reads: the pulled references with their last use, and as
    /// protected the needed ones and those used within `keep_recent` of `now_ms`.
    pub fn eviction_input(&self, policy: &ImagePolicy, budget: u64, now_ms: i64) -> EvictionInput {
        self.input_protecting(policy, budget, now_ms, self.needed.clone())
    }

    /// [`Self::eviction_input`] protecting `protected` and the recent ones (not the needed
    /// ones: making room for the oldest waiting job's image may remove a younger one's).
    pub fn input_protecting(
        &self,
        policy: &ImagePolicy,
        budget: u64,
        now_ms: i64,
        mut protected: BTreeSet<String>,
    ) -> EvictionInput {
        let recent_ms = i64::try_from(policy.keep_recent.as_millis()).unwrap_or(i64::MAX);
        let cutoff = now_ms.saturating_sub(recent_ms);
        protected.extend(
            self.pulled
                .iter()
                .filter(|(_, p)| p.last_used_ms > cutoff)
                .map(|(r, _)| r.clone()),
        );
        EvictionInput {
            pulled: self
                .pulled
                .iter()
                .map(|(r, p)| (r.clone(), p.last_used_ms))
                .collect(),
            protected,
            budget,
            foreign: policy.foreign,
        }
    }
}

/// Chooses and (unless `dry_run`) removes images over `budget`, then forgets the removed ones
/// in `ledger`. Shared by `worker serve` and `worker gc --images`.
pub async fn collect(
    store: &dyn ImageStore,
    ledger: &mut PullLedger,
    policy: &ImagePolicy,
    budget: u64,
    now_ms: i64,
    dry_run: bool,
) -> Result<(EvictionPlan, EvictionReport), ImageError> {
    let images = store.images().await.map_err(ImageError::Engine)?;
    // Forget pulls the engine no longer holds (removed by hand): they take no space.
    if !dry_run {
        ledger
            .pulled
            .retain(|r, _| worker_sandbox::images::find(&images, r).is_some());
    }
    let plan = plan_eviction(&images, &ledger.eviction_input(policy, budget, now_ms));
    let report = evict(store, &plan, dry_run).await;
    if !dry_run {
        forget_removed(ledger, &report);
    }
    Ok((plan, report))
}

fn forget_removed(ledger: &mut PullLedger, report: &EvictionReport) {
    for removed in &report.removed {
        for reference in &removed.references {
            ledger.pulled.remove(reference);
        }
    }
}

/// What [`Images::make_ready`] made of an image.
enum Ready {
    /// Its jobs may start (present, or no pull asked for).
    Run,
    /// Room is made; its jobs start once it is pulled.
    Pull,
    /// Missing while another pull is under way or queued, under `--image-budget`: its room
    /// is decided once that pull ended, with that image's real size on disk (as when pulls
    /// were made one after the other in one admission), so its jobs wait for it.
    Later,
    /// No room under the budget: its jobs, and those of younger images, wait.
    NoRoom,
    /// Not ready for a host reason (said for its jobs' readiness records): they wait for the
    /// next poll.
    Wait(String),
}

/// What [`Images::admit`] decided, by image.
#[derive(Debug, Default)]
pub struct Admission {
    /// Held back, with why: no room yet, or not ready for a host reason.
    pub held: BTreeMap<String, String>,
    /// Waiting for their pull (under way, queued, or in `pull`).
    pub pulling: BTreeSet<String>,
    /// Pulls to start, oldest job's image first.
    pub pull: Vec<String>,
    /// Missing, their room decided once the pull under way ended ([`Ready::Later`]).
    pub later: BTreeSet<String>,
}

/// The images of `wanted`, by their oldest job (smallest ledger key: the ledger numbers jobs
/// as it first sees them), so the longest-waiting job's image gets the next room.
fn by_age(wanted: &[(i64, String)]) -> Vec<String> {
    let mut oldest: BTreeMap<&str, i64> = BTreeMap::new();
    for (key, reference) in wanted {
        let first = oldest.entry(reference).or_insert(*key);
        *first = (*first).min(*key);
    }
    let mut order: Vec<(i64, &str)> = oldest.into_iter().map(|(r, k)| (k, r)).collect();
    order.sort_unstable();
    order.into_iter().map(|(_, r)| r.to_owned()).collect()
}

/// The service's image state: the policy, the pull ledger and where it lives.
#[derive(Debug)]
pub struct Images {
    policy: ImagePolicy,
    dir: PathBuf,
    ledger: PullLedger,
    /// The sizes of the images this worker has pulled, removed ones too (an estimate of
    /// their next pull; not written down: a restart learns them again from the ledger).
    sizes: BTreeMap<String, u64>,
    /// Images whose pull is under way or queued ([`Self::fetch`]), until [`Self::pulled`].
    in_flight: BTreeSet<String>,
}

/// What admission made of a poll's due jobs ([`Images::before_batch`]).
#[derive(Debug, Default)]
pub struct Batch {
    /// Jobs that may start now, in the order given.
    pub ready: Vec<(i64, ValidatedJob)>,
    /// Jobs whose image is being pulled (or queued to be), by image: they start once its
    /// pull ended ([`Images::pulled`]).
    pub pulling: BTreeMap<String, Vec<(i64, ValidatedJob)>>,
    /// Pulls to start, oldest job's image first ([`Images::fetch`]), one at a time.
    pub pull: Vec<String>,
    /// Jobs to admit again once the pull under way ended ([`Ready::Later`]).
    pub later: Vec<(i64, ValidatedJob)>,
    /// Jobs held back (not started, tried again at the next poll): their id and why.
    pub held: Vec<(String, String)>,
}

/// How a pull ended ([`Images::fetch`]), for [`Images::pulled`].
#[derive(Debug)]
pub struct Fetched {
    /// The image.
    pub reference: String,
    /// What [`prepare`] did (present after all, pulled, or why not).
    pub result: Result<Prepared, ImageError>,
    /// How long it took.
    pub took: Duration,
}

impl Images {
    /// Opens the pull ledger in `state_dir`.
    pub fn open(state_dir: &Path, policy: ImagePolicy) -> Result<Self, LedgerFileError> {
        let ledger = PullLedger::load(state_dir)?;
        Ok(Self {
            sizes: ledger
                .pulled
                .iter()
                .map(|(r, p)| (r.clone(), p.size_bytes))
                .collect(),
            ledger,
            dir: state_dir.to_owned(),
            policy,
            in_flight: BTreeSet::new(),
        })
    }

    /// The pull ledger.
    pub fn ledger(&self) -> &PullLedger {
        &self.ledger
    }

    fn save(&self) {
        if let Err(error) = self.ledger.save(&self.dir) {
            // The record only widens what is kept: a lost write never removes the wrong image
            // (an unrecorded pull is foreign, so kept), it only keeps one too long.
            tracing::error!(%error, "could not write the pull ledger");
        }
    }

    /// After a poll: with its answer (`None` when no feed answered: the jobs did not
    /// disappear), records the images its jobs need.
    pub fn polled(
        &mut self,
        feed: &worker_jobs::feed::FeedConfig,
        fetched: Option<Vec<Vec<serde_json::Value>>>,
        now_ms: i64,
    ) {
        if let Some(fetched) = fetched {
            let now_s = u64::try_from(now_ms / 1000).unwrap_or(0);
            self.listed(&listed_jobs(feed, fetched, now_s));
        }
    }

    /// Records the images the jobs of an answered poll need (`listed`: every listed job of
    /// this shard, due or not: a job backing off comes back for its image).
    pub fn listed<'a>(&mut self, listed: impl IntoIterator<Item = &'a ValidatedJob>) {
        self.need(
            listed
                .into_iter()
                .map(|j| j.manifest().image().to_owned())
                .collect(),
        );
    }

    /// Records `needed` as the images the last answered poll's jobs need.
    pub fn need(&mut self, needed: BTreeSet<String>) {
        self.ledger.needed = needed;
        self.save();
    }

    /// Before a batch: removes what is over budget, then makes room for the images of `due`
    /// that fit (see the module's docs). Returns the jobs that may start, those that wait for
    /// their image's pull, and the pulls to start; a job whose image has no room or is not
    /// ready for a host reason is held back (not started, retried next poll). Pulls nothing.
    pub async fn before_batch(
        &mut self,
        store: &dyn ImageStore,
        due: Vec<(i64, ValidatedJob)>,
        busy: &BTreeSet<String>,
        telemetry: &crate::telemetry::Telemetry,
    ) -> Batch {
        let wanted: Vec<(i64, String)> = due
            .iter()
            .map(|(key, j)| (*key, j.manifest().image().to_owned()))
            .collect();
        let now_ms = telemetry.clock().wall_ms();
        let admission = self
            .admit(store, &wanted, busy, now_ms, telemetry.images())
            .await;
        let mut batch = Batch {
            pull: admission.pull,
            ..Batch::default()
        };
        let mut waiting = 0u64;
        for (key, job) in due {
            let image = job.manifest().image();
            if admission.later.contains(image) {
                batch.later.push((key, job));
            } else if admission.pulling.contains(image) {
                batch
                    .pulling
                    .entry(image.to_owned())
                    .or_default()
                    .push((key, job));
            } else if let Some(why) = admission.held.get(image) {
                waiting += 1;
                batch.held.push((job.job_id().to_owned(), why.clone()));
            } else {
                batch.ready.push((key, job));
            }
        }
        telemetry.images().held_back.inc_by(waiting);
        batch
    }

    /// [`Self::before_batch`] on the due jobs' (ledger key, image): makes room for the images
    /// it may, oldest first (see the module's docs), and says which are held back, which wait
    /// for a pull (under way, queued, or queued now), which wait for the pull under way to
    /// end, and which pulls to start. `busy`: the images of the jobs admitted before and not
    /// ended (queued or running), never removed to make room.
    pub async fn admit(
        &mut self,
        store: &dyn ImageStore,
        wanted: &[(i64, String)],
        busy: &BTreeSet<String>,
        now_ms: i64,
        metrics: &ImageMetrics,
    ) -> Admission {
        if wanted.is_empty() {
            // Still collected: the poll may have stopped listing the jobs of an image.
            self.collect(store, now_ms, metrics).await;
            return Admission::default();
        }
        let order = by_age(wanted);
        // Due jobs' images are needed now, whatever the last poll said.
        self.ledger.needed.extend(order.iter().cloned());
        self.collect(store, now_ms, metrics).await;
        let mut admitted = busy.clone();
        let mut out = Admission::default();
        let mut waiting: Option<&str> = None;
        // Once an image waits for the pull under way, the younger ones wait behind it: the
        // room goes by age, as when the pulls were made one after the other.
        let mut deferring = false;
        for reference in &order {
            if self.in_flight.contains(reference) {
                // Its room was made when its pull was asked for: it only waits for the pull.
                out.pulling.insert(reference.clone());
                continue;
            }
            let ready = match waiting {
                // Younger images wait behind the oldest one without room (no starvation).
                Some(older) => Ready::Wait(format!(
                    "its image waits behind {older}, the image of an older waiting job, which \
                     has no room under --image-budget yet"
                )),
                None if deferring => Ready::Later,
                None if !self.policy.pull => Ready::Run,
                None => {
                    self.make_ready(store, &admitted, reference, now_ms, metrics)
                        .await
                }
            };
            match ready {
                Ready::Run => {
                    admitted.insert(reference.clone());
                }
                Ready::Pull => {
                    self.in_flight.insert(reference.clone());
                    out.pulling.insert(reference.clone());
                    out.pull.push(reference.clone());
                }
                Ready::Later => {
                    deferring = true;
                    out.later.insert(reference.clone());
                }
                Ready::NoRoom => {
                    waiting = Some(reference);
                    out.held.insert(
                        reference.clone(),
                        format!(
                            "no room yet for its image under --image-budget ({} bytes) next to \
                             the images in use and those used within --image-keep-recent",
                            self.policy.budget.unwrap_or_default()
                        ),
                    );
                }
                Ready::Wait(why) => {
                    out.held.insert(reference.clone(), why);
                }
            }
        }
        if let Some(reference) = waiting {
            tracing::info!(
                image = %reference,
                held_images = out.held.len(),
                budget_bytes = self.policy.budget.unwrap_or_default(),
                "no room under --image-budget for the image of the oldest waiting job: its jobs and those of younger images wait (not counted as attempts)"
            );
        }
        // Only what runs is used: a held image that counted as recent would keep its own room.
        for reference in &admitted {
            if let Some(p) = self.ledger.pulled.get_mut(reference) {
                p.last_used_ms = now_ms;
            }
        }
        self.save();
        out
    }

    /// Pulls `reference` (by digest, after the free-space check of `min_free` bytes; nothing
    /// when the engine holds it by now): the slow step, run beside the service's loop, holding
    /// nothing of the service's state. Its end goes to [`Self::pulled`].
    pub async fn fetch(store: &dyn ImageStore, reference: String, min_free: u64) -> Fetched {
        let started = std::time::Instant::now();
        let result = prepare(store, &reference, min_free).await;
        Fetched {
            reference,
            result,
            took: started.elapsed(),
        }
    }

    /// The `--image-min-free` reserve a pull checks ([`Self::fetch`]).
    pub fn min_free(&self) -> u64 {
        self.policy.min_free
    }

    /// Takes a pull's end ([`Self::fetch`]): records it (the pull ledger, the metrics) and
    /// says whether its jobs may start: yes when the image is here, or when the registry
    /// refused the pull (the job's: its run records why); the error for a host reason (free
    /// space, the engine), its jobs held back until the next poll.
    pub fn pulled(
        &mut self,
        fetched: Fetched,
        now_ms: i64,
        metrics: &ImageMetrics,
    ) -> Result<(), ImageError> {
        let Fetched {
            reference,
            result,
            took,
        } = fetched;
        self.in_flight.remove(&reference);
        let failed = || {
            metrics
                .pulls
                .get_or_create(&vec![("result", "failed".to_owned())])
                .inc();
        };
        match result {
            Ok(Prepared::Present { .. }) => Ok(()),
            Ok(Prepared::Pulled { id, size_bytes }) => {
                metrics
                    .pulls
                    .get_or_create(&vec![("result", "pulled".to_owned())])
                    .inc();
                metrics.pull_duration.observe(took.as_secs_f64());
                tracing::info!(
                    image = %reference,
                    size_bytes,
                    pull_seconds = took.as_secs_f64(),
                    "pulled by digest ahead of its jobs"
                );
                self.sizes.insert(reference.clone(), size_bytes);
                self.ledger.pulled.insert(
                    reference,
                    PulledImage {
                        id,
                        size_bytes,
                        pulled_at_ms: now_ms,
                        pull_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
                        last_used_ms: now_ms,
                    },
                );
                // Saved at once: an image on disk that the record does not name would be
                // foreign to the next start, so never collected.
                self.save();
                Ok(())
            }
            Err(error @ ImageError::Pull { .. }) => {
                failed();
                tracing::warn!(%error, "pull failed; its jobs run and record why");
                Ok(())
            }
            Err(error) => {
                failed();
                tracing::warn!(%error, "image not ready: its jobs wait for the next poll (not counted as attempts)");
                Err(error)
            }
        }
    }

    /// Makes `reference` ready next to the `admitted` images: room under the budget first
    /// (removing unneeded images); then [`Ready::Pull`] when the engine does not hold it.
    async fn make_ready(
        &mut self,
        store: &dyn ImageStore,
        admitted: &BTreeSet<String>,
        reference: &str,
        now_ms: i64,
        metrics: &ImageMetrics,
    ) -> Ready {
        let present = match store.images().await {
            Ok(images) => worker_sandbox::images::find(&images, reference).is_some(),
            Err(error) => {
                metrics
                    .pulls
                    .get_or_create(&vec![("result", "failed".to_owned())])
                    .inc();
                let error = ImageError::Engine(error);
                tracing::warn!(%error, "image not ready: its jobs wait for the next poll (not counted as attempts)");
                let checked = if self.policy.budget.is_some() {
                    "checked against --image-budget"
                } else {
                    "found present or missing"
                };
                return Ready::Wait(format!("its image cannot be {checked}: {error}"));
            }
        };
        if let Some(budget) = self.policy.budget {
            if !present && !self.in_flight.is_empty() {
                return Ready::Later;
            }
            match self
                .make_room(store, admitted, reference, budget, now_ms, metrics)
                .await
            {
                Ok(true) => {}
                Ok(false) => return Ready::NoRoom,
                Err(error) => {
                    tracing::warn!(%error, "image not ready: its jobs wait for the next poll (not counted as attempts)");
                    return Ready::Wait(format!(
                        "its image cannot be checked against --image-budget: {error}"
                    ));
                }
            }
        }
        if present { Ready::Run } else { Ready::Pull }
    }

    /// Whether `reference` fits the budget next to the `admitted` images and the recently
    /// used ones, after removing (least recently used first) what else is counted; removes
    /// them. A present image adds nothing; an absent one its estimated size.
    async fn make_room(
        &mut self,
        store: &dyn ImageStore,
        admitted: &BTreeSet<String>,
        reference: &str,
        budget: u64,
        now_ms: i64,
        metrics: &ImageMetrics,
    ) -> Result<bool, ImageError> {
        let images = store.images().await.map_err(ImageError::Engine)?;
        // The pulls under way or queued are on their way to the disk: counted at their
        // estimate, as this one.
        let incoming = std::iter::once(reference)
            .chain(self.in_flight.iter().map(String::as_str))
            .filter(|r| worker_sandbox::images::find(&images, r).is_none())
            .map(|r| self.estimate(r))
            .sum();
        let mut protected = admitted.clone();
        protected.insert(reference.to_owned());
        protected.extend(self.in_flight.iter().cloned());
        let input = self
            .ledger
            .input_protecting(&self.policy, budget, now_ms, protected);
        let Some(plan) = plan_room(&images, &input, incoming) else {
            return Ok(false);
        };
        if plan.remove.is_empty() {
            return Ok(true);
        }
        let report = evict(store, &plan, false).await;
        forget_removed(&mut self.ledger, &report);
        self.removed(
            &report,
            budget,
            metrics,
            "removed images to make room under --image-budget",
        );
        self.save();
        // A removal the engine refused leaves no room: the budget holds, the image waits.
        Ok(report.failed.is_empty())
    }

    /// The size `reference` is expected to take before it is pulled: its own when pulled
    /// before, else the largest this worker has pulled (the engine tells a size only once
    /// the image is present); 0 when nothing was ever pulled.
    fn estimate(&self, reference: &str) -> u64 {
        self.sizes
            .get(reference)
            .or_else(|| self.sizes.values().max())
            .copied()
            .unwrap_or(0)
    }

    /// Logs and counts what a collection removed or could not.
    fn removed(&self, report: &EvictionReport, budget: u64, metrics: &ImageMetrics, what: &str) {
        for (id, why) in &report.failed {
            tracing::warn!(image = %id, %why, "could not remove an image over budget");
        }
        if !report.removed.is_empty() {
            metrics.evicted.inc_by(report.removed.len() as u64);
            metrics.evicted_bytes.inc_by(report.freed_bytes);
            tracing::info!(
                removed = ?report.removed.iter().map(|e| &e.references).collect::<Vec<_>>(),
                freed_bytes = report.freed_bytes,
                budget_bytes = budget,
                "{what}"
            );
        }
    }

    /// Removes what is over budget (nothing without `--image-budget`).
    pub async fn collect(&mut self, store: &dyn ImageStore, now_ms: i64, metrics: &ImageMetrics) {
        let Some(budget) = self.policy.budget else {
            return;
        };
        match collect(store, &mut self.ledger, &self.policy, budget, now_ms, false).await {
            Ok((plan, report)) => {
                self.removed(
                    &report,
                    budget,
                    metrics,
                    "removed images over --image-budget",
                );
                if !plan.kept_protected.is_empty() {
                    tracing::warn!(
                        kept = ?plan.kept_protected,
                        total_bytes = plan.total_after_bytes,
                        budget_bytes = budget,
                        "over --image-budget, but the rest are needed by listed or recent jobs"
                    );
                }
                self.save();
            }
            Err(error) => tracing::warn!(%error, "could not collect images"),
        }
        let held: u64 = self.ledger.pulled.values().map(|p| p.size_bytes).sum();
        metrics
            .pulled_bytes
            .set(i64::try_from(held).unwrap_or(i64::MAX));
    }
}

/// The jobs of this shard an answered poll lists (`fetched` as the poll returned it), due or
/// not: their images are the needed ones.
pub fn listed_jobs(
    feed: &worker_jobs::feed::FeedConfig,
    fetched: Vec<Vec<serde_json::Value>>,
    now_unix: u64,
) -> Vec<ValidatedJob> {
    worker_jobs::feed::select::select_jobs(fetched, feed.network, &feed.verifiers, now_unix, None)
        .selected
        .into_iter()
        .filter(|j| feed.shard.owns(j.job_id()))
        .collect()
}

/// A size that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a size: a whole number and a unit B, KiB, MiB, GiB or TiB (20GiB, 512MiB)")]
pub struct SizeError(String);

/// `20GiB`, `512MiB`, `0`, `1048576B`: a whole number of bytes, KiB, MiB, GiB or TiB.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let shift = match unit.trim() {
        "" | "B" => 0,
        "KiB" => 10,
        "MiB" => 20,
        "GiB" => 30,
        "TiB" => 40,
        _ => return Err(SizeError(text.to_owned())),
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .ok_or_else(|| SizeError(text.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_iec_units_and_refuse_the_rest() {
        assert_eq!(parse_size("20GiB").unwrap(), 20 << 30);
        assert_eq!(parse_size("512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("0").unwrap(), 0);
        assert_eq!(parse_size("7B").unwrap(), 7);
        for bad in [
            "",
            "GiB",
            "20GB",
            "-1GiB",
            "1.5GiB",
            "99999999999TiB",
            "20 gib",
        ] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_ledger_protects_needed_and_recent_images_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let mut ledger = PullLedger::load(dir.path()).unwrap();
        assert_eq!(ledger.version, 1);
        let pulled = |used| PulledImage {
            id: "sha256:i".into(),
            size_bytes: 1,
            pulled_at_ms: 0,
            pull_ms: 5,
            last_used_ms: used,
        };
        ledger.pulled.insert("a@x".into(), pulled(1_000));
        ledger.pulled.insert("b@x".into(), pulled(100_000));
        ledger.needed.insert("c@x".into());
        ledger.save(dir.path()).unwrap();
        assert_eq!(PullLedger::load(dir.path()).unwrap(), ledger);
        let policy = ImagePolicy {
            keep_recent: Duration::from_secs(60),
            ..ImagePolicy::default()
        };
        let input = ledger.eviction_input(&policy, 0, 120_000);
        assert_eq!(
            input.protected,
            BTreeSet::from(["b@x".to_owned(), "c@x".to_owned()])
        );
        std::fs::write(dir.path().join(LEDGER_FILE), b"{").unwrap();
        assert!(matches!(
            PullLedger::load(dir.path()),
            Err(LedgerFileError::Invalid { .. })
        ));
    }
}

#[cfg(test)]
mod scripted;
