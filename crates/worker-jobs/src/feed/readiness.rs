//! The readiness record `feed` and `serve` write beside each job's candidate (issue #43 item
//! 3; the format is `verifier_sdk::readiness`).
//!
//! The host checks come from the job's own run on this host, in the order the run reaches
//! them: the archive (download, extraction, digest equal to the committed one), the runtime,
//! the image by digest, then the limits. The stage a run stopped at fails with the run's
//! reason code, and the stages it never reached are `not_checked`, so a run without a verdict
//! can never leave a record that says ready. The chain check is the signer's own function
//! (`bounty_chain::read_chain_readiness`), reached through [`ChainReadiness`] so this crate
//! holds no RPC client; without one it is `not_checked`, and the record is not ready.

use std::path::Path;

use verifier_sdk::readiness::{CheckKind, CheckResult, ReadinessRecord, readiness_file_name};
use verifier_sdk::{NoVerdictReason, ValidatedJob};

use super::cache::write_atomically;
use super::outcome::{JobOutcome, RunCode};
use super::output::OutputError;

/// The chain half of readiness: the bounty's on-chain commitments against the job, as the
/// signer checks them. The binary implements it over `bounty_chain::read_chain_readiness`.
#[async_trait::async_trait]
pub trait ChainReadiness: Send + Sync + std::fmt::Debug {
    /// The [`CheckKind::Chain`] result for `job`, read now.
    async fn check(&self, job: &ValidatedJob) -> CheckResult;
}

/// The host stages in the order a run reaches them.
const STAGES: [CheckKind; 4] = [
    CheckKind::Archive,
    CheckKind::Runtime,
    CheckKind::Image,
    CheckKind::Limits,
];

/// The stage a run that stopped with `code` stopped at. Codes that belong to no earlier stage
/// (a broken executor answer, an isolation mismatch, an expiry) stop at the runtime: the run on
/// this host did not give a verdict the signer could take.
fn stage_of(code: RunCode) -> CheckKind {
    match code {
        RunCode::Download(_)
        | RunCode::ArchiveRejected
        | RunCode::ExtractFailed
        | RunCode::ScratchFailed
        | RunCode::StagingFailed
        | RunCode::DigestMismatch
        | RunCode::NoVerdict(NoVerdictReason::InputMismatch) => CheckKind::Archive,
        RunCode::NoVerdict(
            NoVerdictReason::ImageMissing
            | NoVerdictReason::ImagePlatformMismatch
            | NoVerdictReason::ImageDigestMismatch,
        ) => CheckKind::Image,
        RunCode::ExecutorRejected
        | RunCode::NoVerdict(
            NoVerdictReason::Timeout | NoVerdictReason::Oom | NoVerdictReason::OutputLimit,
        ) => CheckKind::Limits,
        _ => CheckKind::Runtime,
    }
}

/// The host checks of a job whose run ended with `outcome`.
pub fn host_checks(outcome: &JobOutcome) -> Vec<CheckResult> {
    let Some(code) = outcome.code() else {
        // A verdict: the archive matched, the runtime ran the image by digest within limits.
        return STAGES.iter().map(|k| CheckResult::pass(*k)).collect();
    };
    let detail = match outcome {
        JobOutcome::Refused { detail, .. }
        | JobOutcome::JobFailure { detail, .. }
        | JobOutcome::HostFailure { detail, .. } => detail.as_str(),
        JobOutcome::Verdict { .. } => "",
    };
    let failed = stage_of(code);
    let mut reached = true;
    STAGES
        .iter()
        .map(|kind| {
            if *kind == failed {
                reached = false;
                CheckResult::fail(*kind, code.as_str(), Vec::new(), detail)
            } else if reached {
                CheckResult::pass(*kind)
            } else {
                CheckResult::not_checked(*kind, format!("the run stopped earlier ({code:?})"))
            }
        })
        .collect()
}

/// The record for `job` after a run that ended with `outcome`, at `now`; the chain is asked
/// only when the host checks passed (a job this host cannot run is not ready whatever the
/// chain says, and the RPC is spared).
pub async fn assess(
    job: &ValidatedJob,
    outcome: &JobOutcome,
    chain: Option<&dyn ChainReadiness>,
    now: u64,
) -> ReadinessRecord {
    let mut checks = host_checks(outcome);
    let chain = match chain {
        _ if checks.iter().any(|c| !c.ok) => {
            CheckResult::not_checked(CheckKind::Chain, "a host check failed first")
        }
        Some(chain) => chain.check(job).await,
        None => CheckResult::not_checked(
            CheckKind::Chain,
            "no RPC configured: the bounty's on-chain terms were not compared",
        ),
    };
    checks.push(chain);
    ReadinessRecord::new(job.job_id(), now, checks)
}

/// The record of a job this run set apart without running it (`window_too_short`, beyond
/// `--max-jobs`, displaced by a sooner window): every check `not_checked`, each naming `code`
/// and `why`, so the record replaces whatever an earlier run wrote and never says ready for a
/// job nothing checked now.
pub fn not_run(job_id: &str, code: &str, why: &str, now: u64) -> ReadinessRecord {
    let checks = verifier_sdk::readiness::ALL_CHECKS
        .iter()
        .map(|kind| {
            CheckResult::not_checked(*kind, format!("not run on this host ({code}): {why}"))
        })
        .collect();
    ReadinessRecord::new(job_id, now, checks)
}

/// Writes `record` as `readiness-<sha256(job_id)>.json` in `out_dir` (atomically, replacing an
/// older record of the same job).
pub fn write_readiness(out_dir: &Path, record: &ReadinessRecord) -> Result<(), OutputError> {
    let path = out_dir.join(readiness_file_name(&record.job_id));
    let bytes = serde_json::to_vec_pretty(record).map_err(|e| OutputError::Io {
        path: path.clone(),
        source: e.into(),
    })?;
    write_atomically(out_dir, &path, &bytes).map_err(|source| OutputError::Io { path, source })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use verifier_sdk::{fixtures, validate_job};

    #[derive(Debug)]
    struct Chain(CheckResult);

    #[async_trait::async_trait]
    impl ChainReadiness for Chain {
        async fn check(&self, _: &ValidatedJob) -> CheckResult {
            self.0.clone()
        }
    }

    fn verdict() -> JobOutcome {
        JobOutcome::Verdict {
            passed: true,
            candidate_file: "c.json".into(),
            evidence: None,
            cached: false,
        }
    }

    fn job() -> ValidatedJob {
        validate_job(&fixtures::valid_job(), fixtures::NOW).unwrap()
    }

    /// PR #1288's bug from the writer's side: a verdict on this host is not enough; a bounty
    /// whose terms differ on chain is not ready, with the signer's code.
    #[tokio::test]
    async fn a_verdict_whose_bounty_terms_differ_on_chain_is_not_ready() {
        let refused = CheckResult::fail(
            CheckKind::Chain,
            "onchain_mismatch",
            vec!["terms_hash".into()],
            "terms",
        );
        let record = assess(&job(), &verdict(), Some(&Chain(refused)), 1).await;
        assert!(!record.ready);
        let failed = record.first_failure().unwrap();
        assert_eq!(failed.check, CheckKind::Chain);
        assert_eq!(failed.code.as_deref(), Some("onchain_mismatch"));
        assert_eq!(failed.details, vec!["terms_hash"]);
    }

    #[tokio::test]
    async fn without_an_rpc_the_record_is_never_ready() {
        let record = assess(&job(), &verdict(), None, 1).await;
        assert!(!record.ready);
        assert_eq!(
            record.check(CheckKind::Chain).unwrap().code.as_deref(),
            Some(verifier_sdk::readiness::NOT_CHECKED)
        );
        let ok = Chain(CheckResult::pass(CheckKind::Chain));
        assert!(assess(&job(), &verdict(), Some(&ok), 1).await.ready);
    }

    #[tokio::test]
    async fn a_missing_image_fails_the_image_check_and_the_rest_is_not_checked() {
        let outcome = JobOutcome::JobFailure {
            code: RunCode::NoVerdict(NoVerdictReason::ImageMissing),
            detail: "no such image".into(),
        };
        let ok = Chain(CheckResult::pass(CheckKind::Chain));
        let record = assess(&job(), &outcome, Some(&ok), 1).await;
        assert!(!record.ready);
        let codes: Vec<_> = record
            .checks
            .iter()
            .map(|c| (c.check, c.ok, c.code.clone().unwrap_or_default()))
            .collect();
        assert_eq!(
            codes,
            vec![
                (CheckKind::Archive, true, String::new()),
                (CheckKind::Runtime, true, String::new()),
                (CheckKind::Image, false, "image_missing".into()),
                (CheckKind::Limits, false, "not_checked".into()),
                (CheckKind::Chain, false, "not_checked".into()),
            ]
        );
    }

    #[tokio::test]
    async fn the_record_is_written_beside_the_candidate_and_parses_back() {
        let dir = tempfile::tempdir().unwrap();
        let record = assess(&job(), &verdict(), None, 5).await;
        write_readiness(dir.path(), &record).unwrap();
        let bytes = std::fs::read(dir.path().join(readiness_file_name(job().job_id()))).unwrap();
        assert_eq!(ReadinessRecord::parse(&bytes).unwrap(), record);
    }
}
