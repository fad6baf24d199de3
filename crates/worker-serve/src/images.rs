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
//! Nothing of this worker runs while a batch is chosen (a batch runs to its end before the
//! next poll), so no image a running job uses is ever removed.
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
    /// Its jobs may start (present, pulled, or a pull the registry refused: the job's).
    Run,
    /// No room under the budget: its jobs, and those of younger images, wait.
    NoRoom,
    /// Not ready for a host reason: its jobs wait for the next poll.
    Wait,
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

    /// Before a batch: removes what is over budget, then pulls the images of `due` that fit
    /// (by digest, after the free-space check; see the module's docs). Returns the jobs that
    /// may start; a job whose image has no room or could not be pulled for a host reason is
    /// held back (not started, retried next poll).
    pub async fn before_batch(
        &mut self,
        store: &dyn ImageStore,
        due: Vec<(i64, ValidatedJob)>,
        telemetry: &crate::telemetry::Telemetry,
    ) -> Vec<(i64, ValidatedJob)> {
        let wanted: Vec<(i64, String)> = due
            .iter()
            .map(|(key, j)| (*key, j.manifest().image().to_owned()))
            .collect();
        let now_ms = telemetry.clock().wall_ms();
        let held = self.admit(store, &wanted, now_ms, telemetry.images()).await;
        let (ready, waiting): (Vec<_>, Vec<_>) = due
            .into_iter()
            .partition(|(_, j)| !held.contains(j.manifest().image()));
        telemetry.images().held_back.inc_by(waiting.len() as u64);
        ready
    }

    /// [`Self::before_batch`] on the due jobs' (ledger key, image): makes ready the images it
    /// may, oldest first (see the module's docs); returns the images whose jobs are held back.
    pub async fn admit(
        &mut self,
        store: &dyn ImageStore,
        wanted: &[(i64, String)],
        now_ms: i64,
        metrics: &ImageMetrics,
    ) -> BTreeSet<String> {
        if wanted.is_empty() {
            // Still collected: the poll may have stopped listing the jobs of an image.
            self.collect(store, now_ms, metrics).await;
            return BTreeSet::new();
        }
        let order = by_age(wanted);
        // Due jobs' images are needed now, whatever the last poll said.
        self.ledger.needed.extend(order.iter().cloned());
        self.collect(store, now_ms, metrics).await;
        let mut admitted = BTreeSet::new();
        let mut held = BTreeSet::new();
        let mut waiting: Option<&str> = None;
        for reference in &order {
            let ready = match waiting {
                // Younger images wait behind the oldest one without room (no starvation).
                Some(_) => Ready::Wait,
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
                Ready::NoRoom => {
                    waiting = Some(reference);
                    held.insert(reference.clone());
                }
                Ready::Wait => {
                    held.insert(reference.clone());
                }
            }
        }
        if let Some(reference) = waiting {
            tracing::info!(
                image = %reference,
                held_images = held.len(),
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
        held
    }

    /// Makes `reference` ready next to the `admitted` images: room under the budget first
    /// (removing unneeded images), then the pull.
    async fn make_ready(
        &mut self,
        store: &dyn ImageStore,
        admitted: &BTreeSet<String>,
        reference: &str,
        now_ms: i64,
        metrics: &ImageMetrics,
    ) -> Ready {
        if let Some(budget) = self.policy.budget {
            match self
                .make_room(store, admitted, reference, budget, now_ms, metrics)
                .await
            {
                Ok(true) => {}
                Ok(false) => return Ready::NoRoom,
                Err(error) => {
                    tracing::warn!(%error, "image not ready: its jobs wait for the next poll (not counted as attempts)");
                    return Ready::Wait;
                }
            }
        }
        let started = std::time::Instant::now();
        let failed = || {
            metrics
                .pulls
                .get_or_create(&vec![("result", "failed".to_owned())])
                .inc();
        };
        match prepare(store, reference, self.policy.min_free).await {
            Ok(Prepared::Present { .. }) => Ready::Run,
            Ok(Prepared::Pulled { id, size_bytes }) => {
                let took = started.elapsed();
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
                self.sizes.insert(reference.to_owned(), size_bytes);
                self.ledger.pulled.insert(
                    reference.to_owned(),
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
                Ready::Run
            }
            Err(error @ ImageError::Pull { .. }) => {
                failed();
                tracing::warn!(%error, "pull failed; its jobs run and record why");
                Ready::Run
            }
            Err(error) => {
                failed();
                tracing::warn!(%error, "image not ready: its jobs wait for the next poll (not counted as attempts)");
                Ready::Wait
            }
        }
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
        let incoming = if worker_sandbox::images::find(&images, reference).is_some() {
            0
        } else {
            self.estimate(reference)
        };
        let mut protected = admitted.clone();
        protected.insert(reference.to_owned());
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
