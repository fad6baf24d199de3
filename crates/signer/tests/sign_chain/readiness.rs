//! #43 item 3 (gap 7 of the review): readiness against the signer's gate beyond `terms_hash`.
//! For every chain state the signer refuses that the readiness record's chain check can see,
//! on a Hardhat node of the test's own, the record as `worker feed --rpc` writes it (worker-jobs'
//! `assess` over a verdict's host checks and the chain check `worker`'s `RpcReadiness` makes,
//! written to disk and parsed back as a reader does) says not ready with the code and the
//! mismatched fields the real signer refuses with, through the same endpoint; on the healthy
//! state both say yes. Where the two can disagree (the window's clock), the last test pins what
//! happens.

use alloy::primitives::Address as ChainAddress;
use chain_testkit::PrivateNode;
use chain_testkit::proxy::{self, Misbehaviour};
use verifier_sdk::readiness::{CheckKind, ReadinessRecord, readiness_file_name};
use worker_jobs::feed::outcome::JobOutcome;
use worker_jobs::feed::readiness::{ChainReadiness, assess, write_readiness};

use super::*;

/// `worker`'s `RpcReadiness` (crates/worker/src/chain_readiness.rs) as it is built from
/// `--rpc`: the signer's chain check over an `RpcChainReader` with the default failover. The
/// signer's tests do not depend on the worker binary's crate (the shells never depend on each
/// other), so its four lines are repeated here, not mocked.
struct RpcReadiness(RpcChainReader);

impl std::fmt::Debug for RpcReadiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RpcReadiness(..)")
    }
}

#[async_trait::async_trait]
impl ChainReadiness for RpcReadiness {
    async fn check(
        &self,
        job: &verifier_sdk::ValidatedJob,
    ) -> verifier_sdk::readiness::CheckResult {
        bounty_chain::read_chain_readiness(job, &self.0).await
    }
}

/// The record `worker feed --rpc <rpc>` writes for `w`'s job after a verdict on this host,
/// checked at `now`, read back from its file.
async fn record_as_the_worker_writes_it(w: &World, rpc: &str, now: u64) -> ReadinessRecord {
    let job = validate_job(&w.job, now).unwrap();
    let chain = RpcReadiness(
        RpcChainReader::with_failover(
            &[rpc.to_owned()],
            Duration::from_secs(20),
            bounty_chain::FailoverPolicy::default(),
        )
        .unwrap(),
    );
    let verdict = JobOutcome::Verdict {
        passed: true,
        candidate_file: candidate_file_name(job.job_id()),
        evidence: None,
        cached: false,
    };
    let record = assess(&job, &verdict, Some(&chain), now).await;
    let dir = tempfile::tempdir().unwrap();
    write_readiness(dir.path(), &record).unwrap();
    let bytes = std::fs::read(dir.path().join(readiness_file_name(job.job_id()))).unwrap();
    ReadinessRecord::parse(&bytes).unwrap()
}

/// The real signer's run over `w`'s candidate through `rpc` at `now`.
async fn signer_through(w: &World, rpc: &str, now: u64) -> RunReport {
    let reader = RpcChainReader::new(rpc, Duration::from_secs(10)).unwrap();
    w.sign_with(&reader, now).await
}

/// One chain state the signer refuses: how the bounty is changed after it was deployed to
/// match the job exactly.
#[derive(Debug, Clone, Copy)]
enum Change {
    /// Another group's settlement landed: `status()` is Settled.
    Settled,
    /// Cancelled by its owner.
    Cancelled,
    /// The bounty is verified by an on-chain module, not a signed quorum.
    ModuleMode,
    BountyId,
    Round,
    Solver,
    SubmissionHash,
    EvidenceHash,
    PolicyHash,
    TermsHash,
    AcceptanceCriteriaHash,
    BenchmarkHash,
    EvidenceSchemaHash,
    /// The window on chain is not the job's.
    WindowMoved,
    /// This signer is no longer in the committed set (another verifier replaced it).
    SignerRemoved,
    /// The stored set hash alone disagrees with the list.
    SetHashAlone,
    Threshold,
}

impl Change {
    /// The signer's refusal code and mismatch codes for this state.
    fn expected(self) -> (&'static str, Vec<&'static str>) {
        let fields = match self {
            Self::Settled | Self::Cancelled => vec!["status_not_submitted"],
            Self::ModuleMode => vec!["verification_mode"],
            Self::BountyId => vec!["bounty_id"],
            Self::Round => vec!["round"],
            Self::Solver => vec!["solver"],
            Self::SubmissionHash => vec!["submission_hash"],
            Self::EvidenceHash => vec!["evidence_hash"],
            Self::PolicyHash => vec!["policy_hash"],
            Self::TermsHash => vec!["terms_hash"],
            Self::AcceptanceCriteriaHash => vec!["acceptance_criteria_hash"],
            Self::BenchmarkHash => vec!["benchmark_hash"],
            Self::EvidenceSchemaHash => vec!["evidence_schema_hash"],
            Self::WindowMoved => vec!["verification_expires_at"],
            Self::SignerRemoved => vec!["verifier_set_hash", "verifier_list"],
            Self::SetHashAlone => vec!["verifier_set_hash"],
            Self::Threshold => vec!["threshold"],
        };
        ("onchain_mismatch", fields)
    }

    async fn apply(self, w: &World) {
        let b = &w.bounty;
        let p = &w.params;
        let x = B256::repeat_byte(0x5a);
        let receipt = match self {
            Self::Settled => b.set_status(status::SETTLED).await,
            Self::Cancelled => b.set_status(status::CANCELLED).await,
            Self::ModuleMode => b.set_verification_mode(0).await,
            Self::BountyId => b.set_bounty_id(x).await,
            Self::Round => b.set_round(p.round + 1).await,
            Self::Solver => b.set_solver(dev_signer(4).unwrap().address()).await,
            Self::SubmissionHash => {
                b.set_hashes(x, p.evidence_hash, p.policy_hash, p.terms_hash)
                    .await
            }
            Self::EvidenceHash => {
                b.set_hashes(p.submission_hash, x, p.policy_hash, p.terms_hash)
                    .await
            }
            Self::PolicyHash => {
                b.set_hashes(p.submission_hash, p.evidence_hash, x, p.terms_hash)
                    .await
            }
            Self::TermsHash
            | Self::AcceptanceCriteriaHash
            | Self::BenchmarkHash
            | Self::EvidenceSchemaHash => {
                let i = match self {
                    Self::TermsHash => 0,
                    Self::AcceptanceCriteriaHash => 1,
                    Self::BenchmarkHash => 2,
                    _ => 3,
                };
                let [t, a, bh, e] = w.terms_but(i, x);
                b.set_terms_hashes(t, a, bh, e).await
            }
            Self::WindowMoved => {
                b.set_verification_expires_at(p.verification_expires_at + 60)
                    .await
            }
            Self::SignerRemoved => {
                let other: ChainAddress = dev_signer(2).unwrap().address();
                b.set_verifiers(vec![other], 1).await
            }
            Self::SetHashAlone => b.set_verifier_set_hash(x).await,
            Self::Threshold => b.set_threshold(2).await,
        };
        receipt.unwrap();
    }
}

const CHANGES: [Change; 17] = [
    Change::Settled,
    Change::Cancelled,
    Change::ModuleMode,
    Change::BountyId,
    Change::Round,
    Change::Solver,
    Change::SubmissionHash,
    Change::EvidenceHash,
    Change::PolicyHash,
    Change::TermsHash,
    Change::AcceptanceCriteriaHash,
    Change::BenchmarkHash,
    Change::EvidenceSchemaHash,
    Change::WindowMoved,
    Change::SignerRemoved,
    Change::SetHashAlone,
    Change::Threshold,
];

/// The record is not ready because of its chain check alone (every host check of the verdict
/// passed), with `code` and `fields`; the signer refused the candidate with the same.
fn assert_same_refusal(
    what: &str,
    record: &ReadinessRecord,
    report: &RunReport,
    code: &str,
    fields: &[&str],
) {
    assert!(!record.ready, "{what}: {record:?}");
    let failed = record.first_failure().unwrap();
    assert_eq!(failed.check, CheckKind::Chain, "{what}: {record:?}");
    assert_eq!(failed.code.as_deref(), Some(code), "{what}: {record:?}");
    assert_eq!(failed.details, fields, "{what}: {record:?}");
    assert_eq!(report.candidates.len(), 1, "{what}: {report:?}");
    let refused = &report.candidates[0];
    assert_eq!(
        refused.status,
        CandidateStatus::Refused,
        "{what}: {}",
        report.summary()
    );
    assert_eq!(refused.code, Some(code), "{what}: {}", report.summary());
    assert_eq!(refused.mismatches, fields, "{what}: {}", report.summary());
    assert_eq!(report.signed, 0, "{what}");
}

/// The table: each chain state the signer's gate refuses and the chain check can see. Each row
/// is a bounty of its own deployed to match the job, checked healthy first (both say yes), then
/// changed on chain: the record and the signer say no, for the same code and fields.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_chain_state_the_signer_refuses_is_a_record_not_ready_for_the_same_code() {
    let node = PrivateNode::start().await.unwrap_or_else(|e| panic!("{e}"));
    for change in CHANGES {
        let what = format!("{change:?}");
        let kit = Testkit::connect_to(node.url())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let w = world_on(kit, &[signer_address()], 3600, 0).await;
        let record = record_as_the_worker_writes_it(&w, node.url(), w.now).await;
        assert!(record.ready, "{what}, before the change: {record:?}");
        let report = signer_through(&w, node.url(), w.now).await;
        assert_eq!(report.signed, 1, "{what}: {}", report.summary());

        change.apply(&w).await;
        let (code, fields) = change.expected();
        let record = record_as_the_worker_writes_it(&w, node.url(), w.now).await;
        let report = signer_through(&w, node.url(), w.now).await;
        assert_same_refusal(&what, &record, &report, code, &fields);
    }
}

/// The bounty unchanged but the endpoint serving another chain (one `--rpc`, so no start-up
/// check: the chain id is compared with the job's network in the gate): the record and the
/// signer both say `chain_id_mismatch`; the same bounty through the node itself, both say yes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_of_another_chain_is_a_record_not_ready_for_the_signers_chain_id_mismatch() {
    let node = PrivateNode::start().await.unwrap_or_else(|e| panic!("{e}"));
    let kit = Testkit::connect_to(node.url())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let w = world_on(kit, &[signer_address()], 3600, 0).await;
    let other = proxy::start(node.url(), Misbehaviour::OtherChain)
        .await
        .unwrap();
    let record = record_as_the_worker_writes_it(&w, &other.url, w.now).await;
    let report = signer_through(&w, &other.url, w.now).await;
    assert_same_refusal("other chain", &record, &report, "chain_id_mismatch", &[]);

    let record = record_as_the_worker_writes_it(&w, node.url(), w.now).await;
    assert!(record.ready, "{record:?}");
    assert_eq!(signer_through(&w, node.url(), w.now).await.signed, 1);
}

/// Where the two disagree: the record is a snapshot and the chain check has no clock. A record
/// written ready (here with an hour of window left) still says ready when the signer runs 100 s
/// before the window's end and refuses `deadline_too_close`, and at the window's end, where it
/// refuses the expired job (`candidate_job_invalid`). Its `checked_at` is all a reader has to
/// tell how stale it is (docs/operations.md "Readiness"). If readiness learns the window, this
/// test fails and the docs must say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_record_goes_stale_as_the_window_closes_and_the_signer_refuses_by_the_clock() {
    let node = PrivateNode::start().await.unwrap_or_else(|e| panic!("{e}"));
    let kit = Testkit::connect_to(node.url())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let w = world_on(kit, &[signer_address()], 3600, 0).await;
    let record = record_as_the_worker_writes_it(&w, node.url(), w.now).await;
    assert!(record.ready, "{record:?}");
    assert_eq!(record.checked_at, w.now);

    let end = w.params.verification_expires_at;
    let late = signer_through(&w, node.url(), end - 100).await;
    assert_refused(&late, "deadline_too_close");
    let expired = signer_through(&w, node.url(), end).await;
    assert_refused(&expired, "candidate_job_invalid");
    // The same check at the same later times still passes: it never looks at the clock.
    let job = validate_job(&w.job, w.now).unwrap();
    let reader = RpcChainReader::new(node.url(), Duration::from_secs(10)).unwrap();
    assert!(bounty_chain::read_chain_readiness(&job, &reader).await.ok);
}
