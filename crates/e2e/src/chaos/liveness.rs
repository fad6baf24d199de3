//! The liveness lanes of issue #43 item 5 that are about *when* work is taken, not about a
//! failing endpoint (that is `--failing-rpc`). Each adds one good bounty, listed last in the
//! feed from the first cycle, to the drawn schedule:
//!
//! - [`Liveness::ShortWindow`]: its window is [`SHORT_WINDOW_SECS`] long and the first cycle is
//!   a run with room for all but one of its lane's listed jobs (`--max-jobs`). Taken in the order
//!   first seen, the short one is the one left out; the next run comes after its window has
//!   closed (the driver waits for that when it is still unsettled), so it is missed. Taken
//!   deadline-first (the worker's own order), it runs in the first cycle and settles in time.
//!   `--first-seen-order` plays the other order (the driver names the first-listed jobs with
//!   `--job-id`, nothing in the worker changes), so the lane shows `good_settled_in_window`
//!   breaking when the order is wrong.
//! - [`Liveness::LateImage`]: its image, pinned by digest in a repository of the local registry
//!   that does not exist yet, is pushed only when half of its [`LATE_WINDOW_SECS`] window has
//!   gone. Runs before that fail on the missing image; the runs after it (the next scheduled run
//!   of a feed lane, the service's retry of a serve lane) must still take it and settle in time:
//!   nothing may give the job up, cache the missing image as its outcome, or back off past the
//!   window.
//!
//! Both pass `--settle-costs` [`LANE_SETTLE_COSTS`] to the workers: the defaults are Base's
//! figures (a 300 s pull, a 180 s relay), under which these windows are `window_too_short`.
//! The first cycle of the short-window lane carries no fault: its window is sized for one run,
//! and a fault in that run is a reason the window did not allow a settlement.

use std::time::Duration;

use alloy::providers::{DynProvider, Provider};

use crate::{E2eError, io};

/// The short window: the signer signs only while more than 120 s are left
/// (`verifier_sdk::MIN_DEADLINE_MARGIN_SECS`), so this leaves one run about two minutes.
pub const SHORT_WINDOW_SECS: u64 = 240;

/// The late image's window; the image is pushed when half of it has gone, leaving 210 s, of
/// which the signer needs 120.
pub const LATE_WINDOW_SECS: u64 = 420;

/// What settling takes besides the run on the local registry and chain (`--settle-costs`).
pub const LANE_SETTLE_COSTS: &str = "pull=20,staging=10,signing=30,relay=30,at_risk=60";

/// Which lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// A good bounty with a short window, listed last.
    ShortWindow,
    /// A good bounty whose image is pushed half-way through its window.
    LateImage,
}

impl Liveness {
    /// The flag's value.
    pub fn name(self) -> &'static str {
        match self {
            Self::ShortWindow => "short-window",
            Self::LateImage => "late-image",
        }
    }

    /// The value named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::ShortWindow, Self::LateImage]
            .into_iter()
            .find(|l| l.name() == name)
    }

    /// The added bounty's window.
    pub fn window_secs(self) -> u64 {
        match self {
            Self::ShortWindow => SHORT_WINDOW_SECS,
            Self::LateImage => LATE_WINDOW_SECS,
        }
    }
}

/// The arguments that give the short-window lane's first run room for all its listed jobs but
/// one: `--max-jobs` (the worker picks, deadline-first), or with `first_seen` the first listed
/// jobs by `--job-id` (the order a first-seen runner would take them in). `listed` is the
/// lane's listed job ids in feed order; with fewer than two there is nothing to leave out.
pub fn first_run_args(listed: &[&str], first_seen: bool) -> Vec<String> {
    let room = listed.len().saturating_sub(1);
    if room == 0 {
        return Vec::new();
    }
    if first_seen {
        listed
            .iter()
            .take(room)
            .flat_map(|id| ["--job-id".to_owned(), (*id).to_owned()])
            .collect()
    } else {
        vec!["--max-jobs".to_owned(), room.to_string()]
    }
}

/// The late image: the Python image's content under a repository of the local registry that
/// does not exist until [`LateImage::push`].
#[derive(Debug, Clone)]
pub struct LateImage {
    /// The image the content comes from (pinned by digest).
    source: String,
    /// `REGISTRY/chaos-late-…` (no tag, no digest).
    repo: String,
    /// The pinned reference the job names: `repo@sha256:…`.
    pub reference: String,
}

impl LateImage {
    /// Learns the digest this engine gives the Python image's content when it pushes it (the
    /// registry's copy of `python_image` may carry another manifest), by one push to a probe
    /// repository, and names a repository unique to `tag` that nobody has pushed to.
    pub async fn prepare(python_image: &str, tag: &str) -> Result<Self, E2eError> {
        let base = python_image.split('@').next().unwrap_or(python_image);
        let registry = base.split('/').next().unwrap_or(base);
        // Tagged per run: two runs at once must not remove each other's probe tag.
        let probe = format!("{registry}/chaos-late-probe:{tag}");
        docker(&["tag", python_image, &probe]).await?;
        let digest = push(&probe).await?;
        let _ = docker(&["rmi", &probe]).await;
        let repo = format!("{registry}/chaos-late-{tag}");
        Ok(Self {
            source: python_image.to_owned(),
            reference: format!("{repo}@{digest}"),
            repo,
        })
    }

    /// Pushes the content to the job's repository; fails unless the registry names the pinned
    /// digest.
    pub async fn push(&self) -> Result<(), E2eError> {
        let tagged = format!("{}:late", self.repo);
        docker(&["tag", &self.source, &tagged]).await?;
        let digest = push(&tagged).await?;
        if !self.reference.ends_with(&digest) {
            return Err(E2eError::Setup {
                what: "push the late image under its pinned digest",
                detail: format!(
                    "the registry named {digest}, the job pins {}",
                    self.reference
                ),
            });
        }
        Ok(())
    }

    /// Removes the local tag (the registry keeps its copy; the repository name is unique).
    pub async fn forget(&self) {
        let _ = docker(&["rmi", &format!("{}:late", self.repo)]).await;
    }
}

/// The node's clock, by which the signer and the contract judge a window: the latest block's
/// time, or the wall clock plus `offset` (the node's lead seen when the lane's bounty was
/// deployed; blocks are mined only on demand, so the latest one can be old), whichever is later.
/// On a shared node the lead can be minutes (any test's `evm_increaseTime`).
pub async fn chain_now(provider: &DynProvider, offset: i64) -> u64 {
    let by_wall = crate::wall_clock().saturating_add_signed(offset);
    let latest = provider
        .get_block_by_number(alloy::eips::BlockNumberOrTag::Latest)
        .await
        .ok()
        .flatten()
        .map_or(0, |b| b.header.timestamp);
    latest.max(by_wall)
}

/// Sleeps until the node's clock ([`chain_now`]) has reached `at`.
pub async fn sleep_until_chain(provider: &DynProvider, offset: i64, at: u64) {
    loop {
        let now = chain_now(provider, offset).await;
        if now >= at {
            return;
        }
        tokio::time::sleep(Duration::from_secs((at - now).min(2))).await;
    }
}

/// Runs `docker ARGS` to its end; its stdout on success.
async fn docker(args: &[&str]) -> Result<String, E2eError> {
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new("docker").args(args).output(),
    )
    .await
    .map_err(|_| E2eError::Setup {
        what: "run docker for the late image",
        detail: format!("`docker {}` did not end within 120 s", args.join(" ")),
    })?
    .map_err(io("run docker", std::path::Path::new("docker")))?;
    if !out.status.success() {
        return Err(E2eError::Setup {
            what: "run docker for the late image",
            detail: format!(
                "`docker {}`: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `docker push REF`, and the digest its last line names (`…: digest: sha256:… size: N`).
async fn push(reference: &str) -> Result<String, E2eError> {
    let out = docker(&["push", reference]).await?;
    digest_of_push(&out).ok_or_else(|| E2eError::Setup {
        what: "read the digest of a docker push",
        detail: out.lines().last().unwrap_or("").to_owned(),
    })
}

fn digest_of_push(out: &str) -> Option<String> {
    let line = out.lines().rev().find(|l| l.contains("digest: "))?;
    line.split_whitespace()
        .find(|w| {
            w.len() == 71
                && w.strip_prefix("sha256:")
                    .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
        })
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deadline-first gets `--max-jobs` and chooses itself; first-seen order names the first
    /// listed jobs, so the last-listed one (the short window) is the one left out.
    #[test]
    fn the_first_run_leaves_out_one_job_by_the_workers_order_or_by_feed_order() {
        assert_eq!(first_run_args(&["a", "b", "c"], false), ["--max-jobs", "2"]);
        assert_eq!(
            first_run_args(&["a", "b", "c"], true),
            ["--job-id", "a", "--job-id", "b"]
        );
        assert!(first_run_args(&["a"], true).is_empty());
        assert_eq!(Liveness::parse("late-image"), Some(Liveness::LateImage));
        assert_eq!(Liveness::parse("late"), None);
    }

    #[test]
    fn the_pushed_digest_is_read_from_dockers_last_line() {
        let d = format!("sha256:{}", "ab".repeat(32));
        let out = format!("The push refers to repository [x]\nlate: digest: {d} size: 528\n");
        assert_eq!(digest_of_push(&out), Some(d.clone()));
        let tagged = format!("digest: digest: {d} size: 528\n");
        assert_eq!(digest_of_push(&tagged), Some(d));
        assert_eq!(digest_of_push("late: digest: sha256:zz size: 1"), None);
    }
}
