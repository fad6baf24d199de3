//! Which fetched jobs to run: a pure decision over the raw feed values.
//!
//! Jobs fetched for each configured verifier are merged and deduplicated by `job_id`; a job
//! id that came back with different content is rejected (both copies) because we cannot know
//! which one the platform means. A job of the platform's other verification mode
//! (`deterministic_module`) is skipped next, before any rule reads it: valid, but not ours.
//! Only jobs whose committed verifiers are all configured here
//! are kept (one or both of ours; see [`other_verifier_set`] for why); the rest are skipped,
//! not rejected, since they are another quorum's work. Kept jobs are validated with the sdk and
//! sorted by earliest expiry, then job id, before `--max-jobs` applies. A job for another
//! network than the one queried is rejected: the feed answered outside the question.
//!
//! Excluded jobs are listed up to [`super::report::LISTED_PER_REASON`] per reason and counted
//! beyond, and each fetched value is moved, never copied, so the feed's size bounds the work.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde_json::Value;
use verifier_sdk::{Address, Network, ValidatedJob, validate_job};

use super::report::{ExcludedRows, JobRow, JobStatus};

/// The outcome of selection.
#[derive(Debug)]
pub struct Selection {
    /// Jobs to run, in run order.
    pub selected: Vec<ValidatedJob>,
    /// Jobs not run (status `rejected` or `skipped`), listed or counted.
    pub excluded: ExcludedRows,
    /// The ids of the valid jobs left out by `max_jobs` (each also has its row in `excluded`,
    /// which may only count it): the caller writes each a record that says it was not run.
    pub beyond_max: Vec<String>,
}

/// Stable reason codes of selection.
pub mod reason {
    /// The same job id came back with different content.
    pub const CONFLICTING_DUPLICATE: &str = "conflicting_duplicate";
    /// The feed entry has no usable `job_id`.
    pub const MISSING_JOB_ID: &str = "missing_job_id";
    /// The job commits to a verifier that is not configured here.
    pub const OTHER_VERIFIER_SET: &str = "other_verifier_set";
    /// The job is of the platform's other verification mode (`deterministic_module`): valid,
    /// not ours ([`verifier_sdk::other_verification_mode`]).
    pub const OTHER_VERIFICATION_MODE: &str = verifier_sdk::OtherVerificationMode::CODE;
    /// The job is for another network than the one queried.
    pub const WRONG_NETWORK: &str = "wrong_network";
    /// The job's verification window has closed.
    pub const EXPIRED: &str = "expired";
    /// The job broke a validation rule.
    pub const INVALID_JOB: &str = "invalid_job";
    /// Beyond `--max-jobs`.
    pub const MAX_JOBS: &str = "max_jobs";
    /// Not one of the `--job-id` jobs.
    pub const NOT_REQUESTED: &str = "not_requested";
    /// Another `--shard`'s job.
    pub const OTHER_SHARD: &str = "other_shard";
}

/// Selects the jobs to run on `network` from everything fetched (one list per configured
/// verifier).
pub fn select_jobs(
    fetched: Vec<Vec<Value>>,
    network: Network,
    verifiers: &[Address],
    now_unix: u64,
    max_jobs: Option<usize>,
) -> Selection {
    let mut excluded = ExcludedRows::default();
    let mut unique: Vec<(String, Value)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut conflicting: HashSet<String> = HashSet::new();
    let mut unnamed = 0usize;
    for job in fetched.into_iter().flatten() {
        let Some(job_id) = job.get("job_id").and_then(Value::as_str).map(str::to_owned) else {
            unnamed = unnamed.saturating_add(1);
            excluded.push(JobStatus::Rejected, reason::MISSING_JOB_ID, || {
                JobRow::new(
                    format!("<feed entry without job_id #{unnamed}>"),
                    JobStatus::Rejected,
                    reason::MISSING_JOB_ID,
                    "feed entry has no string job_id",
                )
            });
            continue;
        };
        match index.get(&job_id) {
            Some(&i) => {
                if unique.get(i).map(|(_, v)| v) != Some(&job) {
                    conflicting.insert(job_id);
                }
            }
            None => {
                index.insert(job_id.clone(), unique.len());
                unique.push((job_id, job));
            }
        }
    }
    let wanted: BTreeSet<Address> = verifiers.iter().copied().collect();
    let mut selected = Vec::new();
    for (job_id, job) in unique {
        if conflicting.contains(&job_id) {
            excluded.push(JobStatus::Rejected, reason::CONFLICTING_DUPLICATE, || {
                JobRow::new(
                    job_id,
                    JobStatus::Rejected,
                    reason::CONFLICTING_DUPLICATE,
                    "the feed returned this job id with different contents; none is run",
                )
            });
            continue;
        }
        // Before any rule reads it: another mode's job is not ours, whatever its verifier
        // fields say (they may name nobody, or every verifier), and its rules are not ours.
        // A job id served with two contents is still rejected above: we cannot know which
        // one the platform means.
        if let Some(other) = verifier_sdk::other_verification_mode(&job) {
            excluded.push(JobStatus::Skipped, reason::OTHER_VERIFICATION_MODE, || {
                JobRow::new(
                    job_id,
                    JobStatus::Skipped,
                    reason::OTHER_VERIFICATION_MODE,
                    &other.to_string(),
                )
            });
            continue;
        }
        if let Some(detail) = other_verifier_set(&job, &wanted) {
            excluded.push(JobStatus::Skipped, reason::OTHER_VERIFIER_SET, || {
                JobRow::new(
                    job_id,
                    JobStatus::Skipped,
                    reason::OTHER_VERIFIER_SET,
                    &detail,
                )
            });
            continue;
        }
        match validate_job(&job, now_unix) {
            Ok(validated) if validated.network() != network => {
                excluded.push(JobStatus::Rejected, reason::WRONG_NETWORK, || {
                    JobRow::new(
                        job_id,
                        JobStatus::Rejected,
                        reason::WRONG_NETWORK,
                        &format!(
                            "the job is for {}, the feed was queried for {}",
                            validated.network().name(),
                            network.name()
                        ),
                    )
                });
            }
            Ok(validated) => selected.push(validated),
            Err(e) => {
                let code = match e {
                    verifier_sdk::JobError::Expired { .. } => reason::EXPIRED,
                    _ => reason::INVALID_JOB,
                };
                excluded.push(JobStatus::Rejected, code, || {
                    JobRow::new(job_id, JobStatus::Rejected, code, &e.to_string())
                });
            }
        }
    }
    super::deadline::sort(&mut selected, |j| j);
    let mut beyond_max = Vec::new();
    if let Some(max) = max_jobs
        && selected.len() > max
    {
        for job in selected.split_off(max) {
            beyond_max.push(job.job_id().to_owned());
            excluded.push(JobStatus::Skipped, reason::MAX_JOBS, || {
                JobRow::new(
                    job.job_id().to_owned(),
                    JobStatus::Skipped,
                    reason::MAX_JOBS,
                    &format!("beyond --max-jobs {max}; left for a later run"),
                )
            });
        }
    }
    Selection {
        selected,
        excluded,
        beyond_max,
    }
}

/// `Some(why)` when the job's raw policy commits to a verifier that is not configured here.
///
/// A job is ours when every verifier it commits to is one of ours. The sdk requires
/// `threshold` = the number of committed verifiers, so that is exactly "at least `threshold`
/// of its verifiers are ours": this operator's slots alone can produce the quorum and the
/// keeper can settle it. That covers key rotation ({old}, {new} and {old, new} bounties while
/// both keys are configured) and two unrelated single-verifier identities. A job that also
/// needs someone else's signature is skipped: no slot here can complete it, and running it
/// would execute a solver's code for an attestation nobody here can use. Each signer slot
/// then signs only the jobs that commit to its own address (the signer's `not ours`).
///
/// A job whose verifier fields do not parse, or whose threshold differs from its set's size,
/// is left to validation, which rejects it with the exact rule.
fn other_verifier_set(job: &Value, wanted: &BTreeSet<Address>) -> Option<String> {
    let listed = job.get("eligible_verifiers")?.as_array()?;
    let mut foreign = 0usize;
    for v in listed {
        if !wanted.contains(&v.as_str()?.parse::<Address>().ok()?) {
            foreign = foreign.saturating_add(1);
        }
    }
    (foreign > 0).then(|| {
        format!(
            "job commits to {foreign} of {} verifier(s) that are not configured here; its quorum cannot be completed by this operator",
            listed.len()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use verifier_sdk::fixtures::{JobParams, NOW, job_value};

    const A: &str = "0xbe6292b9e465f549e2363b918d6dd9187038431e";
    const B: &str = "0x1111111111111111111111111111111111111111";
    const C: &str = "0x2222222222222222222222222222222222222222";

    fn addr(s: &str) -> Address {
        s.parse().unwrap()
    }

    fn job(round: u64, verifiers: &[&str], expires_at: u64) -> Value {
        job_value(&JobParams {
            round,
            verifiers: verifiers.iter().map(|s| s.to_string()).collect(),
            expires_at,
            ..JobParams::default()
        })
    }

    fn sel(
        fetched: &[Vec<Value>],
        verifiers: &[Address],
        now: u64,
        max_jobs: Option<usize>,
    ) -> Selection {
        select_jobs(
            fetched.to_vec(),
            Network::BaseMainnet,
            verifiers,
            now,
            max_jobs,
        )
    }

    fn ids(s: &Selection) -> Vec<String> {
        s.selected.iter().map(|j| j.job_id().to_owned()).collect()
    }

    fn row<'a>(s: &'a Selection, id: &str) -> &'a JobRow {
        s.excluded.rows().iter().find(|r| r.job_id == id).unwrap()
    }

    #[test]
    fn merges_two_verifier_feeds_dedupes_and_sorts_by_expiry_then_id() {
        let late = job(1, &[A, B], NOW + 500);
        let early = job(2, &[B, A], NOW + 100);
        let same_expiry = job(3, &[A, B], NOW + 100);
        let fetched = vec![
            vec![late.clone(), early.clone()],
            vec![early.clone(), same_expiry.clone(), late.clone()],
        ];
        let s = sel(&fetched, &[addr(A), addr(B)], NOW, None);
        assert!(s.excluded.rows().is_empty(), "{:?}", s.excluded.rows());
        let expected: Vec<String> = [&early, &same_expiry, &late]
            .iter()
            .map(|j| j["job_id"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(ids(&s), expected);
    }

    /// #41 item 4, the selection `worker feed` and `worker serve` share: a job of the
    /// platform's other mode, served in both verifiers' feeds, whatever its verifier fields
    /// name, is skipped as `other_verification_mode`, never `invalid_job` or
    /// `other_verifier_set`; the signed-quorum job beside it is selected.
    #[test]
    fn deterministic_module_jobs_are_skipped_as_another_mode_before_any_rule() {
        let ours = job(1, &[A], NOW + 100);
        let module = |round: u64, listed: &[&str]| {
            let mut j = job(round, &[A], NOW + 100);
            j["verification_mode"] = json!("deterministic_module");
            j["verifier_module"] = json!(C);
            j["eligible_verifiers"] = json!(listed);
            j["threshold"] = json!(listed.len());
            j
        };
        let (nobody, us, them) = (module(2, &[]), module(3, &[A]), module(4, &[C]));
        let feed = vec![ours.clone(), nobody.clone(), us.clone(), them.clone()];
        let s = sel(&[feed.clone(), feed], &[addr(A), addr(B)], NOW, None);
        assert_eq!(ids(&s), vec![ours["job_id"].as_str().unwrap()]);
        for j in [&nobody, &us, &them] {
            let r = row(&s, j["job_id"].as_str().unwrap());
            assert_eq!(r.status, JobStatus::Skipped, "{r:?}");
            assert_eq!(
                r.reason_code.as_deref(),
                Some(reason::OTHER_VERIFICATION_MODE),
                "{r:?}"
            );
        }
        assert_eq!(s.excluded.total(), 3);
    }

    #[test]
    fn conflicting_duplicates_reject_every_copy() {
        let a = job(1, &[A], NOW + 100);
        let mut b = a.clone();
        b["verifier_reward"] = json!("999");
        let other = job(2, &[A], NOW + 100);
        let s = sel(
            &[vec![a.clone(), other.clone()], vec![b]],
            &[addr(A)],
            NOW,
            None,
        );
        assert_eq!(ids(&s), vec![other["job_id"].as_str().unwrap()]);
        let r = row(&s, a["job_id"].as_str().unwrap());
        assert_eq!(r.status, JobStatus::Rejected);
        assert_eq!(
            r.reason_code.as_deref(),
            Some(reason::CONFLICTING_DUPLICATE)
        );
    }

    #[test]
    fn jobs_for_another_verifier_set_are_skipped_not_rejected() {
        let ours = job(1, &[A], NOW + 100);
        let superset = job(2, &[A, C], NOW + 100);
        let other = job(3, &[C], NOW + 100);
        let s = sel(
            &[vec![ours.clone(), superset.clone(), other.clone()]],
            &[addr(A)],
            NOW,
            None,
        );
        assert_eq!(ids(&s), vec![ours["job_id"].as_str().unwrap()]);
        for j in [&superset, &other] {
            let r = row(&s, j["job_id"].as_str().unwrap());
            assert_eq!(r.status, JobStatus::Skipped);
            assert_eq!(r.reason_code.as_deref(), Some(reason::OTHER_VERIFIER_SET));
        }
    }

    /// Key rotation as the runbook describes it: slot 1 holds the old key, slot 2 the new one
    /// while old bounties are open. Every bounty whose whole committed set is configured here
    /// can be settled by this operator's slots alone, so each is run: threshold-1 bounties of
    /// either key and threshold-2 bounties of both.
    #[test]
    fn rotation_old_then_both_then_new_selects_every_job_our_slots_can_settle() {
        let (old, new) = (A, B);
        let old_only = job(1, &[old], NOW + 100);
        let new_only = job(2, &[new], NOW + 200);
        let both = job(3, &[old, new], NOW + 300);
        let foreign_pair = job(4, &[old, C], NOW + 400);
        let id = |j: &Value| j["job_id"].as_str().unwrap().to_owned();
        // The platform answers each verifier's query with the jobs that name it.
        let feed_for = |v: &str| -> Vec<Value> {
            [&old_only, &new_only, &both, &foreign_pair]
                .into_iter()
                .filter(|j| {
                    j["eligible_verifiers"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|x| x.as_str() == Some(v))
                })
                .cloned()
                .collect()
        };

        // Before: the old key only.
        let s = sel(&[feed_for(old)], &[addr(old)], NOW, None);
        assert_eq!(ids(&s), vec![id(&old_only)]);
        // During: both keys; every job of the old, the new, or both is run.
        let s = sel(
            &[feed_for(old), feed_for(new)],
            &[addr(old), addr(new)],
            NOW,
            None,
        );
        assert_eq!(ids(&s), vec![id(&old_only), id(&new_only), id(&both)]);
        // A quorum with a verifier that is not ours is never ours to settle.
        let r = row(&s, &id(&foreign_pair));
        assert_eq!(r.reason_code.as_deref(), Some(reason::OTHER_VERIFIER_SET));
        // After: the new key only; the pair needs the old key, which is gone.
        let s = sel(&[feed_for(new)], &[addr(new)], NOW, None);
        assert_eq!(ids(&s), vec![id(&new_only)]);
        assert_eq!(
            row(&s, &id(&both)).reason_code.as_deref(),
            Some(reason::OTHER_VERIFIER_SET)
        );
    }

    /// An operator with two unrelated single-verifier identities: both identities' bounties
    /// are run in one batch, and the order is still by expiry across them.
    #[test]
    fn two_independent_single_verifier_identities_run_both_feeds() {
        let first = job(1, &[A], NOW + 300);
        let second = job(2, &[B], NOW + 100);
        let s = sel(
            &[vec![first.clone()], vec![second.clone()]],
            &[addr(A), addr(B)],
            NOW,
            None,
        );
        assert_eq!(
            ids(&s),
            vec![
                second["job_id"].as_str().unwrap(),
                first["job_id"].as_str().unwrap()
            ]
        );
    }

    #[test]
    fn threshold_other_than_the_set_size_is_rejected_by_the_rule() {
        let mut j = job(1, &[A, B], NOW + 100);
        j["threshold"] = json!(1);
        let s = sel(&[vec![j]], &[addr(A), addr(B)], NOW, None);
        assert!(s.selected.is_empty());
        assert_eq!(s.excluded.rows()[0].status, JobStatus::Rejected);
        assert_eq!(
            s.excluded.rows()[0].reason_code.as_deref(),
            Some(reason::INVALID_JOB)
        );
    }

    #[test]
    fn invalid_and_expired_jobs_are_rejected_with_the_rule() {
        let expired = job(1, &[A], NOW - 1);
        let mut tampered = job(2, &[A], NOW + 100);
        tampered["terms"]["document"]["title"] = json!("changed after hashing");
        let nameless = json!({"round": 1});
        let s = sel(
            &[vec![expired.clone(), tampered.clone(), nameless]],
            &[addr(A)],
            NOW,
            None,
        );
        assert!(s.selected.is_empty());
        let r = row(&s, expired["job_id"].as_str().unwrap());
        assert_eq!(r.status, JobStatus::Rejected);
        assert_eq!(r.reason_code.as_deref(), Some(reason::EXPIRED));
        let r = row(&s, tampered["job_id"].as_str().unwrap());
        assert_eq!(r.reason_code.as_deref(), Some(reason::INVALID_JOB));
        assert!(r.reason.as_deref().unwrap().contains("terms_hash"));
        assert!(
            s.excluded
                .rows()
                .iter()
                .any(|r| r.reason_code.as_deref() == Some(reason::MISSING_JOB_ID))
        );
    }

    #[test]
    fn max_jobs_keeps_the_earliest_expiring_and_skips_the_rest() {
        let jobs: Vec<Value> = (1..=4).map(|r| job(r, &[A], NOW + 1000 - r)).collect();
        let s = sel(std::slice::from_ref(&jobs), &[addr(A)], NOW, Some(2));
        let want: Vec<String> = [&jobs[3], &jobs[2]]
            .iter()
            .map(|j| j["job_id"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(ids(&s), want);
        assert_eq!(s.excluded.rows().len(), 2);
        assert!(
            s.excluded
                .rows()
                .iter()
                .all(|r| r.status == JobStatus::Skipped
                    && r.reason_code.as_deref() == Some(reason::MAX_JOBS))
        );
        let s = sel(&[jobs], &[addr(A)], NOW, Some(0));
        assert!(s.selected.is_empty());
        assert_eq!(s.excluded.rows().len(), 4);
    }

    #[test]
    fn jobs_for_another_network_are_rejected() {
        let mainnet = job(1, &[A], NOW + 100);
        let sepolia = job_value(&JobParams {
            network: "base-sepolia".into(),
            round: 2,
            verifiers: vec![A.to_owned()],
            expires_at: NOW + 100,
            ..JobParams::default()
        });
        let s = sel(
            &[vec![mainnet.clone(), sepolia.clone()]],
            &[addr(A)],
            NOW,
            None,
        );
        assert_eq!(ids(&s), vec![mainnet["job_id"].as_str().unwrap()]);
        let r = row(&s, sepolia["job_id"].as_str().unwrap());
        assert_eq!(r.status, JobStatus::Rejected);
        assert_eq!(r.reason_code.as_deref(), Some(reason::WRONG_NETWORK));
        let s = select_jobs(
            vec![vec![mainnet, sepolia.clone()]],
            Network::BaseSepolia,
            &[addr(A)],
            NOW,
            None,
        );
        assert_eq!(ids(&s), vec![sepolia["job_id"].as_str().unwrap()]);
    }

    #[test]
    fn thousands_of_nameless_entries_list_five_rows_and_count_the_rest() {
        let junk = vec![json!({}); 10_000];
        let s = sel(&[junk], &[addr(A)], NOW, None);
        assert!(s.selected.is_empty());
        assert_eq!(s.excluded.total(), 10_000);
        assert_eq!(
            s.excluded.rows().len(),
            crate::feed::report::LISTED_PER_REASON
        );
    }
}
