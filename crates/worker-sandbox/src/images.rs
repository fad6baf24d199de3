//! Images on a host that serves many jobs: pulling each needed image once, by digest only,
//! after checking the engine's free space, and choosing which images to remove when the
//! images the worker pulled outgrow a budget.
//!
//! The choice ([`plan_eviction`]) is pure: it reads what the engine holds, which references
//! the worker pulled (its own record: a pulled image cannot be labelled, so the record is the
//! only proof of who brought it), which are needed (a queued job's image) or recently used,
//! and the budget. Its rules, each tested below:
//! - an image a needed reference resolves to is never removed, whatever the budget;
//! - an image the worker did not pull is never removed unless `foreign` is set;
//! - images used recently are protected like needed ones;
//! - among the rest, the least recently used go first, until the total is within budget.
//!
//! Before a pull, [`plan_room`] asks the same question with the incoming image's size taken
//! off the budget: it fits when removing unprotected images (in the same order) leaves room
//! for it, or when they leave no counted image at all (one image larger than the budget still
//! runs, alone).
//!
//! The engine calls ([`ImageStore`]) are the four it needs, and `holds` for the deadline estimate of
//! `worker feed` (whose runs pull); every [`ContainerEngine`] is one.

use std::collections::{BTreeMap, BTreeSet};

use crate::engine::{CallError, ContainerEngine, FreeSpace, ImageSummary};

/// The engine calls the image policy makes (dyn-compatible, so a service holding an
/// [`crate::Executor`] can reach them).
#[async_trait::async_trait]
pub trait ImageStore: Send + Sync + std::fmt::Debug {
    /// Every image the engine holds.
    async fn images(&self) -> Result<Vec<ImageSummary>, CallError>;
    /// Pulls `reference` (digest-pinned) to its end.
    async fn pull(&self, reference: &str) -> Result<(), CallError>;
    /// Removes image `id`, never forced.
    async fn remove(&self, id: &str) -> Result<(), CallError>;
    /// The free space of the engine's data root.
    async fn free_space(&self) -> Result<FreeSpace, CallError>;
    /// Whether the engine holds `reference` (digest-pinned). An engine answers as the run's
    /// own image check asks it (an inspect, whose "not found" is what makes the run pull), so
    /// a batch's deadline estimate counts a pull exactly when the run will make one; other
    /// stores read [`Self::images`].
    async fn holds(&self, reference: &str) -> Result<bool, CallError> {
        Ok(find(&self.images().await?, reference).is_some())
    }
}

#[async_trait::async_trait]
impl<E: ContainerEngine> ImageStore for E {
    async fn images(&self) -> Result<Vec<ImageSummary>, CallError> {
        self.list_images().await
    }
    async fn pull(&self, reference: &str) -> Result<(), CallError> {
        self.pull_image(reference).await
    }
    async fn remove(&self, id: &str) -> Result<(), CallError> {
        self.remove_image(id).await
    }
    async fn free_space(&self) -> Result<FreeSpace, CallError> {
        self.image_free_space().await
    }
    async fn holds(&self, reference: &str) -> Result<bool, CallError> {
        match self.inspect_image(reference).await {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// The `sha256:<64 lowercase hex>` a reference `name@sha256:…` pins, if it pins one.
pub fn pinned_digest(reference: &str) -> Option<&str> {
    let (name, digest) = reference.rsplit_once('@')?;
    let hex = digest.strip_prefix("sha256:")?;
    (!name.is_empty()
        && hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    .then_some(digest)
}

/// Why an image could not be made ready for its jobs. None of these is the job's fault
/// except [`ImageError::NotPinned`] (which validation already refuses).
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// Not `name@sha256:<64 hex>`: a tag can move, so it is never pulled.
    #[error("image {0:?} is not pinned by digest (name@sha256:<64 hex>): a tag is never pulled")]
    NotPinned(String),
    /// Less free space than the reserve before a pull.
    #[error(
        "not pulling {reference}: the engine's data root has {free} bytes free, below the \
         {reserve}-byte reserve (--image-min-free); its jobs wait and are retried"
    )]
    LowSpace {
        /// The image that was not pulled.
        reference: String,
        /// Bytes free.
        free: u64,
        /// Bytes that must stay free.
        reserve: u64,
    },
    /// The free space cannot be read (a remote engine): no pull, fail closed.
    #[error("not pulling {reference}: {why}; pass --image-min-free 0 to pull without checking")]
    FreeSpaceUnknown {
        /// The image that was not pulled.
        reference: String,
        /// Why the free space is unknown.
        why: String,
    },
    /// The engine answered the pull with an error, or pulled something else.
    #[error("pulling {reference} by its digest failed: {message}")]
    Pull {
        /// The image.
        reference: String,
        /// The engine's words.
        message: String,
    },
    /// The engine did not answer an image call.
    #[error("the engine's image calls failed: {0}")]
    Engine(#[source] CallError),
}

/// What [`prepare`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Prepared {
    /// The engine already held it; nothing was pulled.
    Present {
        /// The image id.
        id: String,
    },
    /// It was pulled now.
    Pulled {
        /// The image id.
        id: String,
        /// Its size on disk.
        size_bytes: u64,
    },
}

/// The image `reference` resolves to among `images`: by its exact repo digest (how a pull by
/// digest records it).
pub fn find<'a>(images: &'a [ImageSummary], reference: &str) -> Option<&'a ImageSummary> {
    images
        .iter()
        .find(|i| i.repo_digests.iter().any(|d| d == reference))
}

/// Makes `reference` present: nothing when the engine holds it; else, when at least
/// `min_free` bytes are free on the engine's data root (an unknown free space refuses unless
/// `min_free` is 0), pulls it by digest and checks the engine now holds it.
pub async fn prepare(
    store: &dyn ImageStore,
    reference: &str,
    min_free: u64,
) -> Result<Prepared, ImageError> {
    if pinned_digest(reference).is_none() {
        return Err(ImageError::NotPinned(reference.to_owned()));
    }
    let images = store.images().await.map_err(ImageError::Engine)?;
    if let Some(image) = find(&images, reference) {
        return Ok(Prepared::Present {
            id: image.id.clone(),
        });
    }
    if min_free > 0 {
        match store.free_space().await.map_err(ImageError::Engine)? {
            FreeSpace::Known(free) if free >= min_free => {}
            FreeSpace::Known(free) => {
                return Err(ImageError::LowSpace {
                    reference: reference.to_owned(),
                    free,
                    reserve: min_free,
                });
            }
            FreeSpace::Unknown(why) => {
                return Err(ImageError::FreeSpaceUnknown {
                    reference: reference.to_owned(),
                    why,
                });
            }
        }
    }
    store.pull(reference).await.map_err(|e| match e {
        CallError::Unreachable(_) => ImageError::Engine(e),
        other => ImageError::Pull {
            reference: reference.to_owned(),
            message: other.message(),
        },
    })?;
    let images = store.images().await.map_err(ImageError::Engine)?;
    let image = find(&images, reference).ok_or_else(|| ImageError::Pull {
        reference: reference.to_owned(),
        message: "the engine reported the pull done but holds no image by that digest".into(),
    })?;
    Ok(Prepared::Pulled {
        id: image.id.clone(),
        size_bytes: image.size_bytes,
    })
}

/// What the eviction choice reads besides the engine's images.
#[derive(Clone, Debug, Default)]
pub struct EvictionInput {
    /// References the worker pulled, with when each was last used (ms; larger is later).
    pub pulled: BTreeMap<String, i64>,
    /// References a queued job needs, or a recent job used: never removed.
    pub protected: BTreeSet<String>,
    /// Most bytes the counted images may take.
    pub budget: u64,
    /// Count (and remove) images the worker did not pull too.
    pub foreign: bool,
}

/// One image chosen for removal.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Eviction {
    /// The image id.
    pub id: String,
    /// Its references.
    pub references: Vec<String>,
    /// Its size.
    pub size_bytes: u64,
    /// Whether the worker pulled it.
    pub pulled_by_worker: bool,
}

/// The choice: what to remove, and the counted total before and after.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct EvictionPlan {
    /// Images to remove, in order.
    pub remove: Vec<Eviction>,
    /// Bytes the counted images take now.
    pub total_bytes: u64,
    /// Bytes they take once `remove` is gone.
    pub total_after_bytes: u64,
    /// The budget.
    pub budget_bytes: u64,
    /// Counted images kept although over budget, because they are protected.
    pub kept_protected: Vec<String>,
}

/// Whether `image` is what one of `references` resolves to: by its exact repo digest, or by
/// the same digest under another name (the same content, so the same protection).
fn resolves(image: &ImageSummary, references: &BTreeSet<String>) -> bool {
    let digests: BTreeSet<&str> = references.iter().filter_map(|r| pinned_digest(r)).collect();
    image
        .repo_digests
        .iter()
        .any(|d| references.contains(d) || pinned_digest(d).is_some_and(|x| digests.contains(x)))
        || references.contains(&image.id)
}

/// Chooses the images to remove (see the module's rules).
pub fn plan_eviction(images: &[ImageSummary], input: &EvictionInput) -> EvictionPlan {
    let last_used = |image: &ImageSummary| {
        image
            .repo_digests
            .iter()
            .filter_map(|d| input.pulled.get(d))
            .max()
            .copied()
    };
    let counted: Vec<(&ImageSummary, Option<i64>)> = images
        .iter()
        .map(|i| (i, last_used(i)))
        .filter(|(_, used)| used.is_some() || input.foreign)
        .collect();
    let total: u64 = counted.iter().map(|(i, _)| i.size_bytes).sum();
    let mut plan = EvictionPlan {
        total_bytes: total,
        total_after_bytes: total,
        budget_bytes: input.budget,
        ..EvictionPlan::default()
    };
    if total <= input.budget {
        return plan;
    }
    let (protected, mut candidates): (Vec<_>, Vec<_>) = counted
        .into_iter()
        .partition(|(i, _)| resolves(i, &input.protected));
    // Foreign images (never used by the worker) first, then least recently used; larger first
    // among equals, so fewer removals reach the budget.
    candidates.sort_by(|(a, ua), (b, ub)| {
        ua.unwrap_or(i64::MIN)
            .cmp(&ub.unwrap_or(i64::MIN))
            .then(b.size_bytes.cmp(&a.size_bytes))
            .then(a.id.cmp(&b.id))
    });
    for (image, used) in candidates {
        if plan.total_after_bytes <= input.budget {
            break;
        }
        plan.total_after_bytes = plan.total_after_bytes.saturating_sub(image.size_bytes);
        plan.remove.push(Eviction {
            id: image.id.clone(),
            references: image.repo_digests.clone(),
            size_bytes: image.size_bytes,
            pulled_by_worker: used.is_some(),
        });
    }
    if plan.total_after_bytes > input.budget {
        plan.kept_protected = protected.iter().map(|(i, _)| i.id.clone()).collect();
    }
    plan
}

/// Whether one more image of `incoming` bytes fits `input.budget` next to the images that must
/// stay (`input.protected`), and if so which others to remove first: the plan of
/// [`plan_eviction`] for a budget `incoming` smaller. `None`: no room. It also fits when the
/// plan leaves no counted image at all, so that an image larger than the budget still runs
/// alone rather than never.
pub fn plan_room(
    images: &[ImageSummary],
    input: &EvictionInput,
    incoming: u64,
) -> Option<EvictionPlan> {
    let room = EvictionInput {
        budget: input.budget.saturating_sub(incoming),
        ..input.clone()
    };
    let mut plan = plan_eviction(images, &room);
    plan.budget_bytes = input.budget;
    let after = plan.total_after_bytes;
    (after.saturating_add(incoming) <= input.budget || after == 0).then_some(plan)
}

/// What carrying out a plan did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct EvictionReport {
    /// Images removed (or, dry, that would be).
    pub removed: Vec<Eviction>,
    /// Images the engine refused to remove (in use by a container, …), with its words.
    pub failed: Vec<(String, String)>,
    /// Bytes freed.
    pub freed_bytes: u64,
}

/// Removes the plan's images (none when `dry_run`); an image that is gone already counts as
/// removed.
pub async fn evict(store: &dyn ImageStore, plan: &EvictionPlan, dry_run: bool) -> EvictionReport {
    let mut report = EvictionReport::default();
    for image in &plan.remove {
        let removed = if dry_run {
            Ok(())
        } else {
            match store.remove(&image.id).await {
                Err(e) if e.is_not_found() => Ok(()),
                other => other,
            }
        };
        match removed {
            Ok(()) => {
                report.freed_bytes += image.size_bytes;
                report.removed.push(image.clone());
            }
            Err(e) => report.failed.push((image.id.clone(), e.message())),
        }
    }
    report
}

#[cfg(test)]
mod tests;
