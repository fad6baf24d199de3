//! Deadline-first scheduling, as a pure decision: which jobs to start, in which order, and
//! which can no longer be settled before their verification window ends.
//!
//! A verdict is worth nothing once the window has closed: the signer refuses to sign and the
//! contract to settle. So a job's window is not "when it must start" but "when its settlement
//! must be confirmed", and what must still happen after a start is estimated from its parts
//! ([`Need`]): the image pull when the image is not on this host, staging, the manifest's own
//! `timeout_seconds` (the longest the run may take), signing and the relay to its confirmation
//! depth. Only the run's part is the job's; the others are this deployment's figures
//! ([`SettleCosts`], defaults below), not measured here.
//!
//! Jobs whose windows end first run first (earliest window end, then job id). A job whose
//! window ends before what it still needs is `window_too_short`: it is not started in place of
//! one that can still settle, and the figures say why.
//!
//! This is the one home of job selection's order and cut-offs (issue #48 item 4): `worker
//! feed`'s runner and selection and `worker serve`'s loop both call [`order`]/[`sort`],
//! [`plan`], [`fits_now`] before each start, and the feed's `--max-jobs` cut ([`displace`]);
//! neither re-states them.
//!
//! No clock is read here: the caller passes its injected clock's reading.

use std::fmt;
use std::time::Duration;

use verifier_sdk::ValidatedJob;

/// The reason code of a job that cannot settle before its window ends.
pub const WINDOW_TOO_SHORT: &str = "window_too_short";

/// Default time to pull an image that is not on this host (a few GiB over a slow link).
pub const DEFAULT_PULL: Duration = Duration::from_secs(300);
/// Default time to download, extract and stage both trees.
pub const DEFAULT_STAGING: Duration = Duration::from_secs(120);
/// Default time from a candidate to the threshold's signatures (the signer's schedule).
pub const DEFAULT_SIGNING: Duration = Duration::from_secs(120);
/// Default time to relay a settlement and wait for its confirmation depth on Base.
pub const DEFAULT_RELAY: Duration = Duration::from_secs(180);
/// Default margin under which a job without a candidate is counted as at risk.
pub const DEFAULT_AT_RISK_MARGIN: Duration = Duration::from_secs(900);

/// What the parts of a settlement other than the run take on this deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettleCosts {
    /// Pulling the image, counted only when it is not on this host.
    pub pull: Duration,
    /// Downloading, extracting and staging the trees.
    pub staging: Duration,
    /// From the candidate to the signatures.
    pub signing: Duration,
    /// Relaying the settlement to its confirmation depth.
    pub relay: Duration,
    /// A job without a candidate whose slack is below this is at risk ([`risk`]).
    pub at_risk_margin: Duration,
}

impl Default for SettleCosts {
    fn default() -> Self {
        Self {
            pull: DEFAULT_PULL,
            staging: DEFAULT_STAGING,
            signing: DEFAULT_SIGNING,
            relay: DEFAULT_RELAY,
            at_risk_margin: DEFAULT_AT_RISK_MARGIN,
        }
    }
}

/// Why a `--settle-costs` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettleCostsError {
    /// A part that is not `pull`, `staging`, `signing`, `relay` or `at_risk`.
    #[error("unknown part {0:?} (pull, staging, signing, relay, at_risk)")]
    UnknownPart(String),
    /// Not `PART=SECONDS`.
    #[error("{0:?} is not PART=SECONDS")]
    Malformed(String),
}

impl std::str::FromStr for SettleCosts {
    type Err = SettleCostsError;

    /// `pull=300,staging=120,signing=120,relay=180,at_risk=900`, in whole seconds; a part
    /// left out keeps its default.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut costs = Self::default();
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (part, secs) = item
                .split_once('=')
                .and_then(|(p, v)| Some((p.trim(), v.trim().parse::<u64>().ok()?)))
                .ok_or_else(|| SettleCostsError::Malformed(item.chars().take(64).collect()))?;
            let secs = Duration::from_secs(secs);
            match part {
                "pull" => costs.pull = secs,
                "staging" => costs.staging = secs,
                "signing" => costs.signing = secs,
                "relay" => costs.relay = secs,
                "at_risk" => costs.at_risk_margin = secs,
                other => {
                    return Err(SettleCostsError::UnknownPart(
                        other.chars().take(64).collect(),
                    ));
                }
            }
        }
        Ok(costs)
    }
}

/// What one job still needs before its window ends, in whole seconds, by part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    /// The image pull (0 when the image is here).
    pub pull_secs: u64,
    /// Staging.
    pub staging_secs: u64,
    /// The manifest's `timeout_seconds`.
    pub run_secs: u64,
    /// Signing.
    pub signing_secs: u64,
    /// The relay to confirmation depth.
    pub relay_secs: u64,
}

impl Need {
    /// What `job` needs when its image is (`image_present`) or is not on this host.
    pub fn of(job: &ValidatedJob, image_present: bool, costs: &SettleCosts) -> Self {
        Self {
            pull_secs: if image_present {
                0
            } else {
                costs.pull.as_secs()
            },
            staging_secs: costs.staging.as_secs(),
            run_secs: job.manifest().timeout_seconds(),
            signing_secs: costs.signing.as_secs(),
            relay_secs: costs.relay.as_secs(),
        }
    }

    /// The sum of the parts.
    pub fn total_secs(&self) -> u64 {
        [
            self.pull_secs,
            self.staging_secs,
            self.run_secs,
            self.signing_secs,
            self.relay_secs,
        ]
        .into_iter()
        .fold(0, u64::saturating_add)
    }
}

impl fmt::Display for Need {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} s (pull {} + staging {} + timeout_seconds {} + signing {} + relay {})",
            self.total_secs(),
            self.pull_secs,
            self.staging_secs,
            self.run_secs,
            self.signing_secs,
            self.relay_secs
        )
    }
}

/// Why a job is not started: the seconds its window has left and what it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooShort {
    /// Seconds until the window ends (0 once it has).
    pub left_secs: u64,
    /// What settling still needs.
    pub need: Need,
}

impl fmt::Display for TooShort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the verification window ends in {} s; settling needs {}",
            self.left_secs, self.need
        )
    }
}

/// Seconds left in `job`'s window at `now_unix`.
pub fn left_secs(job: &ValidatedJob, now_unix: u64) -> u64 {
    job.expires_at().saturating_sub(now_unix)
}

/// `Err` when `job`, started at `now_unix`, cannot be settled before its window ends.
pub fn fits(job: &ValidatedJob, now_unix: u64, need: Need) -> Result<(), TooShort> {
    let left_secs = left_secs(job, now_unix);
    if need.total_secs() > left_secs {
        Err(TooShort { left_secs, need })
    } else {
        Ok(())
    }
}

/// Whether `job`, about to start at `now_unix`, can still settle: `worker serve`'s check before
/// each start, after the jobs before it took their time. Its image is counted as present: serve
/// pulls a batch's images before planning it. `worker feed`, whose runs pull, checks with
/// [`fits`] and [`Need::of`] on whether the image is still to be pulled.
pub fn fits_now(job: &ValidatedJob, now_unix: u64, costs: &SettleCosts) -> Result<(), TooShort> {
    fits(job, now_unix, Need::of(job, true, costs))
}

/// The last moment (unix seconds) at which `job` can still start and settle: its window end
/// less what it needs with its image here, as [`fits_now`] counts it (a start after it is
/// `window_too_short`). `worker serve` never sets a failed job's retry after it (issue #43).
pub fn last_start(job: &ValidatedJob, costs: &SettleCosts) -> u64 {
    job.expires_at()
        .saturating_sub(Need::of(job, true, costs).total_secs())
}

/// The order jobs are taken in: the window that ends first, then the job id.
pub fn order(a: &ValidatedJob, b: &ValidatedJob) -> std::cmp::Ordering {
    (a.expires_at(), a.job_id()).cmp(&(b.expires_at(), b.job_id()))
}

/// Puts `items` in [`order`]; `job_of` reads a job from an item.
pub fn sort<T>(items: &mut [T], job_of: impl Fn(&T) -> &ValidatedJob) {
    items.sort_by(|a, b| order(job_of(a), job_of(b)));
}

/// Cuts `queue` (in [`order`]) down to what a batch of at most `cap` jobs, `started` of them
/// already started, still has room for; returns the jobs cut off, the latest window end first
/// (under `--max-jobs`, a job listed during the batch whose window ends sooner displaces the
/// queued job whose window ends last).
pub fn displace<T>(
    queue: &mut std::collections::VecDeque<T>,
    started: usize,
    cap: usize,
) -> Vec<T> {
    let mut out = Vec::new();
    while started + queue.len() > cap {
        let Some(last) = queue.pop_back() else { break };
        out.push(last);
    }
    out
}

/// The decision over a set of jobs.
#[derive(Debug)]
pub struct Plan<T> {
    /// The jobs to start, the earliest window end first.
    pub run: Vec<T>,
    /// The jobs that cannot settle in time, with the figures, in the same order.
    pub too_short: Vec<(T, TooShort)>,
}

/// Orders `jobs` by window end (then job id) and sets apart those that cannot settle in time.
/// `job_of` reads a job from an item; `image_present` says whether its image is on this host,
/// or rather whether no pull stands between the start and the run (`worker feed` asks the
/// engine, [`super::JobExecutor::pulls`]; `worker serve` pulled before it plans; a caller that
/// cannot tell passes `true`: a job is refused only when it surely cannot fit).
pub fn plan<T>(
    jobs: Vec<T>,
    job_of: impl Fn(&T) -> &ValidatedJob,
    now_unix: u64,
    costs: &SettleCosts,
    image_present: impl Fn(&ValidatedJob) -> bool,
) -> Plan<T> {
    let mut jobs = jobs;
    sort(&mut jobs, &job_of);
    let mut run = Vec::with_capacity(jobs.len());
    let mut too_short = Vec::new();
    for item in jobs {
        let job = job_of(&item);
        let need = Need::of(job, image_present(job), costs);
        match fits(job, now_unix, need) {
            Ok(()) => run.push(item),
            Err(why) => too_short.push((item, why)),
        }
    }
    Plan { run, too_short }
}

/// What `/metrics` shows of the jobs still without a candidate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Risk {
    /// Seconds left to the nearest window end among them (`None`: no such job).
    pub nearest_left_secs: Option<u64>,
    /// How many have less slack than the margin (including those that cannot fit at all).
    pub at_risk: u64,
}

/// The [`Risk`] of `jobs` (each with whether its image is here), all without a candidate.
pub fn risk<'a>(
    jobs: impl IntoIterator<Item = (&'a ValidatedJob, bool)>,
    now_unix: u64,
    costs: &SettleCosts,
) -> Risk {
    let mut out = Risk::default();
    for (job, image_present) in jobs {
        let left = left_secs(job, now_unix);
        out.nearest_left_secs = Some(out.nearest_left_secs.map_or(left, |n| n.min(left)));
        let need = Need::of(job, image_present, costs).total_secs();
        if left < need.saturating_add(costs.at_risk_margin.as_secs()) {
            out.at_risk += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use verifier_sdk::fixtures::{JobParams, NOW, job_value};
    use verifier_sdk::validate_job;

    fn job(round: u64, expires_at: u64, timeout: u64) -> ValidatedJob {
        let mut params = JobParams {
            round,
            expires_at,
            ..JobParams::default()
        };
        params.manifest["timeout_seconds"] = json!(timeout);
        validate_job(&job_value(&params), NOW).unwrap()
    }

    fn costs() -> SettleCosts {
        SettleCosts {
            pull: Duration::from_secs(100),
            staging: Duration::from_secs(10),
            signing: Duration::from_secs(20),
            relay: Duration::from_secs(30),
            at_risk_margin: Duration::from_secs(50),
        }
    }

    fn rounds(jobs: &[ValidatedJob]) -> Vec<u64> {
        jobs.iter().map(ValidatedJob::round).collect()
    }

    #[test]
    fn one_order_for_every_caller_window_end_then_job_id() {
        let late = job(1, NOW + 5000, 60);
        let soon_b = job(3, NOW + 1000, 60);
        let soon_a = job(2, NOW + 1000, 60);
        let mut items = vec![(7, late), (8, soon_b), (9, soon_a)];
        sort(&mut items, |(_, j)| j);
        assert_eq!(items.iter().map(|(k, _)| *k).collect::<Vec<_>>(), [9, 8, 7]);
        assert_eq!(order(&items[0].1, &items[1].1), std::cmp::Ordering::Less);
    }

    #[test]
    fn displace_cuts_the_latest_windows_down_to_the_room_left() {
        let mut queue: std::collections::VecDeque<u32> = (1..=5).collect();
        // Two started, a cap of four: room for two of the five queued.
        assert_eq!(displace(&mut queue, 2, 4), [5, 4, 3]);
        assert_eq!(queue, [1, 2]);
        assert!(displace(&mut queue, 2, 4).is_empty());
        assert!(displace(&mut queue, 0, usize::MAX).is_empty());
        // Already over the cap: the whole queue goes.
        assert_eq!(displace(&mut queue, 5, 4), [2, 1]);
    }

    #[test]
    fn fits_now_counts_the_image_as_present_and_the_run_as_the_manifests_timeout() {
        // needs staging 10 + timeout 60 + signing 20 + relay 30 = 120 s, no pull.
        let j = job(1, NOW + 120, 60);
        assert_eq!(fits_now(&j, NOW, &costs()), Ok(()));
        let why = fits_now(&j, NOW + 1, &costs()).unwrap_err();
        assert_eq!((why.left_secs, why.need.total_secs()), (119, 120));
        assert_eq!(why.need.pull_secs, 0);
    }

    #[test]
    fn last_start_is_the_last_second_fits_now_lets_the_job_start() {
        // needs 120 s (as above): the window end less them, and not a second later.
        let j = job(1, NOW + 500, 60);
        let last = last_start(&j, &costs());
        assert_eq!(last, NOW + 380);
        assert_eq!(fits_now(&j, last, &costs()), Ok(()));
        assert!(fits_now(&j, last + 1, &costs()).is_err());
    }

    #[test]
    fn the_job_whose_window_ends_first_runs_first_whatever_the_feed_order() {
        let older = job(1, NOW + 5000, 60);
        let sooner = job(2, NOW + 1000, 60);
        let p = plan(vec![older, sooner], |j| j, NOW, &costs(), |_| true);
        assert_eq!(rounds(&p.run), vec![2, 1]);
        assert!(p.too_short.is_empty());
    }

    /// The figures: 150 s left and a 600 s timeout is never started.
    #[test]
    fn a_job_with_150_s_left_and_a_600_s_timeout_is_window_too_short_with_the_figures() {
        let short = job(1, NOW + 150, 600);
        let fine = job(2, NOW + 5000, 600);
        let p = plan(vec![short, fine], |j| j, NOW, &costs(), |_| true);
        assert_eq!(rounds(&p.run), vec![2]);
        let [(j, why)] = p.too_short.as_slice() else {
            panic!("{:?}", p.too_short)
        };
        assert_eq!(j.round(), 1);
        assert_eq!(why.left_secs, 150);
        assert_eq!(why.need.total_secs(), 660);
        assert_eq!(
            why.to_string(),
            "the verification window ends in 150 s; settling needs 660 s (pull 0 + staging 10 + timeout_seconds 600 + signing 20 + relay 30)"
        );
    }

    #[test]
    fn a_missing_image_counts_its_pull_and_the_clock_decides_the_rest() {
        let j = job(1, NOW + 200, 100);
        // 10 + 100 + 20 + 30 = 160 s fit in 200 s with the image here, not with a pull.
        assert!(fits(&j, NOW, Need::of(&j, true, &costs())).is_ok());
        let why = fits(&j, NOW, Need::of(&j, false, &costs())).unwrap_err();
        assert_eq!(why.need.pull_secs, 100);
        // The same job, 41 s later, no longer fits even with the image here.
        assert!(fits(&j, NOW + 41, Need::of(&j, true, &costs())).is_err());
        assert!(fits(&j, NOW + 40, Need::of(&j, true, &costs())).is_ok());
        // Past the window: 0 s left.
        assert_eq!(
            fits(&j, NOW + 999, Need::of(&j, true, &costs()))
                .unwrap_err()
                .left_secs,
            0
        );
    }

    #[test]
    fn settle_costs_parse_by_part_and_keep_the_defaults_of_the_others() {
        let c: SettleCosts = "relay=30, pull=0".parse().unwrap();
        assert_eq!(c.relay, Duration::from_secs(30));
        assert_eq!(c.pull, Duration::ZERO);
        assert_eq!(c.staging, DEFAULT_STAGING);
        assert_eq!("".parse::<SettleCosts>().unwrap(), SettleCosts::default());
        assert!(matches!(
            "gas=1".parse::<SettleCosts>(),
            Err(SettleCostsError::UnknownPart(_))
        ));
        assert!(matches!(
            "relay=-1".parse::<SettleCosts>(),
            Err(SettleCostsError::Malformed(_))
        ));
    }

    #[test]
    fn risk_counts_jobs_under_the_margin_and_names_the_nearest_window() {
        let (a, b, c) = (
            job(1, NOW + 1000, 100),
            job(2, NOW + 200, 100),
            job(3, NOW + 170, 100),
        );
        // Needs 160 s each; margin 50: b (200 < 210) and c (170 < 210) are at risk.
        let r = risk([(&a, true), (&b, true), (&c, true)], NOW, &costs());
        assert_eq!(
            r,
            Risk {
                nearest_left_secs: Some(170),
                at_risk: 2
            }
        );
        assert_eq!(risk([], NOW, &costs()), Risk::default());
    }
}
