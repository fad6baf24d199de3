//! The image policy over a scripted image store: a registry of pullable references, the
//! engine's images, its free space, and a count of every pull and removal.

use std::sync::Mutex;

use super::*;

fn digest(n: u8) -> String {
    format!(
        "sha256:{}",
        format!("{n:x}")
            .repeat(64)
            .chars()
            .take(64)
            .collect::<String>()
    )
}

fn reference(n: u8) -> String {
    format!("127.0.0.1:5000/img{n}@{}", digest(n))
}

fn image(n: u8, size: u64) -> ImageSummary {
    ImageSummary {
        id: format!("sha256:id{n}"),
        repo_digests: vec![reference(n)],
        repo_tags: Vec::new(),
        size_bytes: size,
    }
}

#[derive(Debug)]
struct FakeStore {
    images: Mutex<Vec<ImageSummary>>,
    registry: Vec<ImageSummary>,
    free: FreeSpace,
    pulls: Mutex<Vec<String>>,
    removals: Mutex<Vec<String>>,
}

impl FakeStore {
    fn new(held: Vec<ImageSummary>, registry: Vec<ImageSummary>, free: FreeSpace) -> Self {
        Self {
            images: Mutex::new(held),
            registry,
            free,
            pulls: Mutex::default(),
            removals: Mutex::default(),
        }
    }
    fn pulls(&self) -> Vec<String> {
        self.pulls.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl ImageStore for FakeStore {
    async fn images(&self) -> Result<Vec<ImageSummary>, CallError> {
        Ok(self.images.lock().unwrap().clone())
    }
    async fn pull(&self, reference: &str) -> Result<(), CallError> {
        self.pulls.lock().unwrap().push(reference.to_owned());
        // A registry resolves a tag too: only the policy keeps tags from being pulled.
        let found = self.registry.iter().find(|i| {
            i.repo_digests.iter().any(|d| d == reference)
                || i.repo_tags.iter().any(|t| t == reference)
        });
        match found {
            Some(i) => {
                self.images.lock().unwrap().push(i.clone());
                Ok(())
            }
            None => Err(CallError::NotFound {
                message: format!("manifest unknown: {reference}"),
            }),
        }
    }
    async fn remove(&self, id: &str) -> Result<(), CallError> {
        self.removals.lock().unwrap().push(id.to_owned());
        self.images.lock().unwrap().retain(|i| i.id != id);
        Ok(())
    }
    async fn free_space(&self) -> Result<FreeSpace, CallError> {
        Ok(self.free.clone())
    }
}

const GIB: u64 = 1 << 30;

#[test]
fn a_budget_never_evicts_an_image_a_queued_job_needs() {
    // Three pulled images of 1 GiB over a 1 GiB budget; the oldest is the one a queued job
    // needs: it stays, the two others go, and the plan says it is over budget because of it.
    let images = vec![image(1, GIB), image(2, GIB), image(3, GIB)];
    let input = EvictionInput {
        pulled: BTreeMap::from([(reference(1), 1), (reference(2), 2), (reference(3), 3)]),
        protected: BTreeSet::from([reference(1)]),
        budget: GIB / 2,
        foreign: false,
    };
    let plan = plan_eviction(&images, &input);
    let removed: Vec<&str> = plan.remove.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(removed, ["sha256:id2", "sha256:id3"]);
    assert_eq!(plan.total_after_bytes, GIB);
    assert_eq!(plan.kept_protected, ["sha256:id1"]);
}

#[test]
fn the_same_digest_under_another_name_is_protected_too() {
    let mut other = image(1, GIB);
    other.repo_digests = vec![format!("mirror.example/img1@{}", digest(1))];
    let input = EvictionInput {
        pulled: BTreeMap::from([(other.repo_digests[0].clone(), 1)]),
        protected: BTreeSet::from([reference(1)]),
        budget: 0,
        foreign: false,
    };
    assert!(plan_eviction(&[other], &input).remove.is_empty());
}

#[test]
fn an_image_the_worker_did_not_pull_is_never_evicted_unless_told() {
    // The operator's own 5 GiB image and one small pulled image, budget 0.
    let images = vec![image(7, 5 * GIB), image(2, GIB)];
    let mut input = EvictionInput {
        pulled: BTreeMap::from([(reference(2), 2)]),
        protected: BTreeSet::new(),
        budget: 0,
        foreign: false,
    };
    let plan = plan_eviction(&images, &input);
    let removed: Vec<&str> = plan.remove.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        removed,
        ["sha256:id2"],
        "only the pulled image is counted and removed"
    );
    assert_eq!(
        plan.total_bytes, GIB,
        "a foreign image is not counted against the budget"
    );
    input.foreign = true;
    let plan = plan_eviction(&images, &input);
    let removed: Vec<(&str, bool)> = plan
        .remove
        .iter()
        .map(|e| (e.id.as_str(), e.pulled_by_worker))
        .collect();
    assert_eq!(removed, [("sha256:id7", false), ("sha256:id2", true)]);
}

#[test]
fn least_recently_used_go_first_and_only_until_within_budget() {
    let images = vec![image(1, GIB), image(2, GIB), image(3, GIB)];
    let input = EvictionInput {
        pulled: BTreeMap::from([(reference(1), 30), (reference(2), 10), (reference(3), 20)]),
        protected: BTreeSet::new(),
        budget: 2 * GIB,
        foreign: false,
    };
    let plan = plan_eviction(&images, &input);
    let removed: Vec<&str> = plan.remove.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(removed, ["sha256:id2"]);
    assert!(plan.kept_protected.is_empty());
    let within = EvictionInput {
        budget: 3 * GIB,
        ..input
    };
    assert!(plan_eviction(&images, &within).remove.is_empty());
}

#[tokio::test]
async fn a_tag_is_never_pulled() {
    let mut tagged = image(1, GIB);
    tagged.repo_tags = vec!["127.0.0.1:5000/img1:latest".into()];
    let store = FakeStore::new(Vec::new(), vec![tagged], FreeSpace::Known(100 * GIB));
    for reference in [
        "127.0.0.1:5000/img1:latest",
        "127.0.0.1:5000/img1",
        "127.0.0.1:5000/img1@sha256:abc",
        &format!("127.0.0.1:5000/img1@sha256:{}", "A".repeat(64)),
        &format!("@{}", digest(1)),
    ] {
        let result = prepare(&store, reference, 0).await;
        assert!(
            matches!(result, Err(ImageError::NotPinned(_))),
            "{reference}: {result:?}"
        );
    }
    assert!(store.pulls().is_empty(), "pulled {:?}", store.pulls());
}

#[tokio::test]
async fn a_pull_with_too_little_free_space_is_refused() {
    let store = FakeStore::new(Vec::new(), vec![image(1, GIB)], FreeSpace::Known(GIB));
    let result = prepare(&store, &reference(1), 2 * GIB).await;
    assert!(
        matches!(result, Err(ImageError::LowSpace { free, reserve, .. }) if free == GIB && reserve == 2 * GIB),
        "{result:?}"
    );
    assert!(store.pulls().is_empty());
    // Unknown free space (a remote engine) fails closed too, unless the check is off.
    let remote = FakeStore::new(
        Vec::new(),
        vec![image(1, GIB)],
        FreeSpace::Unknown("remote".into()),
    );
    let result = prepare(&remote, &reference(1), 1).await;
    assert!(
        matches!(result, Err(ImageError::FreeSpaceUnknown { .. })),
        "{result:?}"
    );
    assert!(remote.pulls().is_empty());
    assert_eq!(
        prepare(&remote, &reference(1), 0).await.unwrap(),
        Prepared::Pulled {
            id: "sha256:id1".into(),
            size_bytes: GIB
        }
    );
}

#[tokio::test]
async fn a_present_image_is_not_pulled_again_and_a_missing_digest_is_a_pull_error() {
    let store = FakeStore::new(vec![image(1, GIB)], Vec::new(), FreeSpace::Known(100 * GIB));
    assert_eq!(
        prepare(&store, &reference(1), GIB).await.unwrap(),
        Prepared::Present {
            id: "sha256:id1".into()
        }
    );
    assert!(store.pulls().is_empty());
    let result = prepare(&store, &reference(2), GIB).await;
    assert!(matches!(result, Err(ImageError::Pull { .. })), "{result:?}");
    assert_eq!(store.pulls(), [reference(2)]);
}

#[tokio::test]
async fn evicting_removes_the_plan_and_a_dry_run_removes_nothing() {
    let store = FakeStore::new(
        vec![image(1, GIB), image(2, GIB)],
        Vec::new(),
        FreeSpace::Known(GIB),
    );
    let input = EvictionInput {
        pulled: BTreeMap::from([(reference(1), 1), (reference(2), 2)]),
        protected: BTreeSet::from([reference(2)]),
        budget: 0,
        foreign: false,
    };
    let plan = plan_eviction(&store.images().await.unwrap(), &input);
    let dry = evict(&store, &plan, true).await;
    assert_eq!(dry.freed_bytes, GIB);
    assert!(store.removals.lock().unwrap().is_empty());
    let done = evict(&store, &plan, false).await;
    assert_eq!(done.removed.len(), 1);
    assert_eq!(*store.removals.lock().unwrap(), ["sha256:id1"]);
    assert_eq!(store.images().await.unwrap(), vec![image(2, GIB)]);
}

#[test]
fn room_for_an_incoming_image_removes_the_least_recently_used_until_it_fits() {
    // Budget 2.5 GiB, three pulled 1 GiB images, the newest protected: over budget already,
    // so even a present image (0 incoming) or a 0.5 GiB pull needs the oldest removed; a 1 GiB
    // pull needs both unprotected ones; a 2 GiB pull has no room next to the protected one.
    let images = vec![image(1, GIB), image(2, GIB), image(3, GIB)];
    let input = EvictionInput {
        pulled: BTreeMap::from([(reference(1), 1), (reference(2), 2), (reference(3), 3)]),
        protected: BTreeSet::from([reference(3)]),
        budget: GIB * 5 / 2,
        foreign: false,
    };
    let removed = |incoming| {
        plan_room(&images, &input, incoming).map(|p| {
            p.remove
                .iter()
                .map(|e| e.id.clone())
                .collect::<Vec<String>>()
        })
    };
    let oldest = Some(vec!["sha256:id1".to_owned()]);
    let both = Some(vec!["sha256:id1".to_owned(), "sha256:id2".to_owned()]);
    assert_eq!(removed(0), oldest);
    assert_eq!(removed(GIB / 2), oldest);
    assert_eq!(removed(GIB), both);
    assert_eq!(removed(GIB * 3 / 2), both);
    assert_eq!(removed(2 * GIB), None);
}

#[test]
fn an_image_larger_than_the_budget_has_room_only_when_no_counted_image_would_stay() {
    let images = vec![image(1, GIB)];
    let mut input = EvictionInput {
        pulled: BTreeMap::from([(reference(1), 1)]),
        protected: BTreeSet::new(),
        budget: GIB,
        foreign: false,
    };
    let plan = plan_room(&images, &input, 3 * GIB).expect("alone it runs");
    assert_eq!(plan.remove.len(), 1);
    assert_eq!(plan.total_after_bytes, 0);
    input.protected.insert(reference(1));
    assert_eq!(plan_room(&images, &input, 3 * GIB), None);
    // A foreign image is not counted (without `foreign`): it does not stand in the way.
    let foreign = vec![image(9, GIB)];
    input.pulled.clear();
    assert!(plan_room(&foreign, &input, 3 * GIB).is_some_and(|p| p.remove.is_empty()));
}
