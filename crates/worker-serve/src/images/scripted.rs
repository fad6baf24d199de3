//! Serve's image admission over a scripted host: a registry of pullable images, the engine's
//! images, and the disk's high-water mark (the largest total of the images present, taken at
//! each pull). Polls are driven one by one, with the clock given, so nothing hangs on timing.

use std::sync::Mutex;

use prometheus_client::registry::Registry;
use worker_sandbox::engine::{CallError, FreeSpace, ImageSummary};

use super::*;

fn reference(n: u8) -> String {
    format!(
        "127.0.0.1:5000/img{n}@sha256:{}",
        format!("{n:x}").repeat(64)
    )
}

#[derive(Debug, Default)]
struct Host {
    registry: Vec<ImageSummary>,
    present: Mutex<Vec<ImageSummary>>,
    pulls: Mutex<Vec<String>>,
    high_water: Mutex<u64>,
}

impl Host {
    /// A registry of `count` images of `size` bytes each; none present.
    fn new(count: u8, size: u64) -> Self {
        Self {
            registry: (1..=count)
                .map(|n| ImageSummary {
                    id: format!("sha256:id{n}"),
                    repo_digests: vec![reference(n)],
                    repo_tags: Vec::new(),
                    size_bytes: size,
                })
                .collect(),
            ..Self::default()
        }
    }
    fn pulls(&self) -> Vec<String> {
        self.pulls.lock().unwrap().clone()
    }
    fn high_water(&self) -> u64 {
        *self.high_water.lock().unwrap()
    }
    fn present(&self) -> BTreeSet<String> {
        let present = self.present.lock().unwrap();
        present
            .iter()
            .flat_map(|i| i.repo_digests.clone())
            .collect()
    }
}

#[async_trait::async_trait]
impl ImageStore for Host {
    async fn images(&self) -> Result<Vec<ImageSummary>, CallError> {
        Ok(self.present.lock().unwrap().clone())
    }
    async fn pull(&self, reference: &str) -> Result<(), CallError> {
        self.pulls.lock().unwrap().push(reference.to_owned());
        let image = self
            .registry
            .iter()
            .find(|i| i.repo_digests.iter().any(|d| d == reference))
            .ok_or_else(|| CallError::NotFound {
                message: format!("manifest unknown: {reference}"),
            })?;
        let mut present = self.present.lock().unwrap();
        present.push(image.clone());
        let total = present.iter().map(|i| i.size_bytes).sum();
        let mut high = self.high_water.lock().unwrap();
        *high = (*high).max(total);
        Ok(())
    }
    async fn remove(&self, id: &str) -> Result<(), CallError> {
        self.present.lock().unwrap().retain(|i| i.id != id);
        Ok(())
    }
    async fn free_space(&self) -> Result<FreeSpace, CallError> {
        Ok(FreeSpace::Known(u64::MAX))
    }
}

fn open(dir: &Path, budget: u64, keep_recent: Duration) -> Images {
    let policy = ImagePolicy {
        pull: true,
        budget: Some(budget),
        foreign: false,
        min_free: 0,
        keep_recent,
    };
    Images::open(dir, policy).unwrap()
}

fn metrics() -> ImageMetrics {
    ImageMetrics::register(&mut Registry::default())
}

/// One poll of a feed that lists `pending` and drops each job once it has run (as the
/// platform does once it settles), admitted as the service admits them: the pulls asked for
/// are made one at a time, each taken by [`Images::pulled`] before the jobs deferred behind it
/// are admitted again; the jobs admitted run their batch to the end; returns the ledger keys
/// that ran.
async fn poll(
    images: &mut Images,
    host: &Host,
    pending: &mut Vec<(i64, String)>,
    now_ms: i64,
) -> Vec<i64> {
    images.need(pending.iter().map(|(_, r)| r.clone()).collect());
    let mut ran = Vec::new();
    let mut todo = pending.clone();
    // The images of the jobs admitted in this poll: their batch runs to its end.
    let mut busy = BTreeSet::new();
    while !todo.is_empty() {
        let admission = images.admit(host, &todo, &busy, now_ms, &metrics()).await;
        // Every hold here is the budget's (the host always answers): its readiness record
        // must say so, naming the image ahead when it waits behind another.
        for (r, why) in &admission.held {
            let behind = admission
                .held
                .keys()
                .filter(|o| *o != r)
                .any(|o| why.contains(&format!("waits behind {o},")));
            assert!(
                why.starts_with("no room yet for its image under --image-budget")
                    || (behind && why.contains("no room under --image-budget")),
                "{r}: {why}"
            );
        }
        for reference in &admission.pull {
            let fetched = Images::fetch(host, reference.clone(), images.min_free()).await;
            let pulled = images.pulled(fetched, now_ms, &metrics());
            assert!(pulled.is_ok(), "{reference}: {pulled:?}");
        }
        for (key, r) in &todo {
            if admission.held.contains_key(r) || admission.later.contains(r) {
                continue;
            }
            // A job that starts has its image on disk.
            assert!(host.present().contains(r), "{r} not present");
            ran.push(*key);
            busy.insert(r.clone());
        }
        todo.retain(|(_, r)| admission.later.contains(r));
    }
    pending.retain(|(k, _)| !ran.contains(k));
    ran
}

/// The benchmark's shape (scripts/bench-images.sh): 20 jobs over 5 images of 9.3 MiB, job N on
/// image (N - 1) mod 5, a 24 MiB budget, --image-keep-recent 0s.
#[tokio::test]
async fn a_batch_over_five_images_keeps_the_disk_within_budget_and_pulls_each_image_once() {
    let dir = tempfile::tempdir().unwrap();
    let size = (9 << 20) + (300 << 10);
    let budget = 24 << 20;
    let host = Host::new(5, size);
    let mut images = open(dir.path(), budget, Duration::ZERO);
    let mut pending: Vec<(i64, String)> = (1..=20)
        .map(|n: u8| (i64::from(n), reference((n - 1) % 5 + 1)))
        .collect();
    let mut ran = Vec::new();
    for n in 1..=10 {
        if pending.is_empty() {
            break;
        }
        ran.extend(poll(&mut images, &host, &mut pending, n * 1000).await);
    }
    ran.sort_unstable();
    assert_eq!(ran, (1..=20).collect::<Vec<i64>>(), "every job ran");
    assert!(
        host.high_water() <= budget,
        "high-water {} over the {budget}-byte budget within a batch",
        host.high_water()
    );
    let mut pulls = host.pulls();
    pulls.sort();
    pulls.dedup();
    assert_eq!(
        (host.pulls().len(), pulls.len()),
        (5, 5),
        "one pull per image"
    );
    // The last poll lists nothing: what is left fits the budget.
    images.need(BTreeSet::new());
    let admission = images
        .admit(&host, &[], &BTreeSet::new(), 11_000, &metrics())
        .await;
    assert!(admission.held.is_empty() && admission.pull.is_empty());
    assert!(host.present().len() as u64 * size <= budget);
}

/// Two images fit; jobs for the two present ones keep arriving at every poll while the job on
/// a third waits for room, and --image-keep-recent (60 s, polls 10 s apart) protects what was
/// used: the waiting job still runs once the present images are no longer recent, because the
/// younger jobs stop being dispatched while it waits (else their images stay recent forever).
#[tokio::test]
async fn a_job_held_back_for_room_runs_although_new_jobs_keep_arriving_for_present_images() {
    let dir = tempfile::tempdir().unwrap();
    let budget = 25;
    let host = Host::new(3, 10);
    let mut images = open(dir.path(), budget, Duration::from_secs(60));
    let mut pending = vec![(1, reference(1)), (2, reference(2)), (3, reference(3))];
    let mut next_key = 4;
    let mut ran_at = None;
    for n in 0..20 {
        let ran = poll(&mut images, &host, &mut pending, n * 10_000).await;
        assert!(host.high_water() <= budget, "poll {n}: over budget");
        if ran.contains(&3) {
            ran_at = Some(n);
            break;
        }
        for image in [1, 2] {
            pending.push((next_key, reference(image)));
            next_key += 1;
        }
    }
    // Poll 0 pulls images 1 and 2; they are recent until 60 s after it; poll 6 (60 s) makes
    // room for image 3.
    assert_eq!(ran_at, Some(6), "the held-back job ran at poll {ran_at:?}");
    // Room was made by removing what the younger jobs needed: they pull again (the budget
    // forces it), the oldest first.
    assert_eq!(
        host.pulls(),
        [reference(1), reference(2), reference(3), reference(1)]
    );
}

/// An image larger than the budget still runs, alone: only when no other pulled image stays.
#[tokio::test]
async fn an_image_larger_than_the_budget_runs_alone() {
    let dir = tempfile::tempdir().unwrap();
    let host = Host::new(2, 10);
    let mut images = open(dir.path(), 5, Duration::ZERO);
    let mut pending = vec![(1, reference(1)), (2, reference(2))];
    assert_eq!(poll(&mut images, &host, &mut pending, 1_000).await, [1]);
    assert_eq!(poll(&mut images, &host, &mut pending, 2_000).await, [2]);
    assert_eq!(host.high_water(), 10, "never both present");
    assert_eq!(host.pulls(), [reference(1), reference(2)]);
}
