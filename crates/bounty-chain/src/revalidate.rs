//! The full re-check of a candidate that the signer runs before signing and the keeper runs
//! again before relaying: the sdk's job-equality, outcome and evidence checks against the
//! platform's current job, then the bounty's on-chain state at one pinned block against that
//! job.
//!
//! The result is a [`CheckedCandidate`], the only input the signer's signing step accepts;
//! every refusal is a typed [`Refusal`] with a stable [`Refusal::code`] for reports.

use serde_json::Value;
use verifier_sdk::readiness::{CheckKind, CheckResult};
use verifier_sdk::{
    ParsedCandidate, RevalidationError, ValidatedJob, ValidatedOutcome, revalidate_parsed,
};

use crate::expect::{Expected, Mismatch, check_state};
use crate::feed::{JobSource, JobSourceError};
use crate::reader::{ChainReadError, ChainReader};
use crate::state::BountyState;

/// A candidate whose job, outcome, evidence and on-chain state all agree.
#[derive(Debug, Clone)]
pub struct CheckedCandidate {
    /// The platform's current job, validated (equal to the candidate's on every paid field).
    pub job: ValidatedJob,
    /// The outcome, re-derived from that job.
    pub outcome: ValidatedOutcome,
    /// The bounty as read at one block; its `block_number` pins any further reads.
    pub state: BountyState,
}

/// Why a candidate may not be signed or relayed.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The platform no longer lists the job.
    #[error("job {0} is not in the platform feed any more")]
    JobGone(String),
    /// The current job could not be fetched.
    #[error(transparent)]
    JobFeed(#[from] JobSourceError),
    /// The sdk's candidate checks failed (job changed, outcome or evidence wrong, expired…).
    #[error(transparent)]
    Revalidation(#[from] RevalidationError),
    /// The RPC serves a different chain than the job's network.
    #[error("rpc chain id is {actual}, the job's network has chain id {expected}")]
    ChainId {
        /// The job's chain id.
        expected: u64,
        /// `eth_chainId`.
        actual: u64,
    },
    /// The bounty could not be read.
    #[error("reading the bounty failed: {0}")]
    ChainRead(#[from] ChainReadError),
    /// The bounty's on-chain state disagrees with the job.
    #[error("on-chain state disagrees with the job: {}", join(.0))]
    OnChain(Vec<Mismatch>),
}

fn join(mismatches: &[Mismatch]) -> String {
    mismatches
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl Refusal {
    /// A stable snake_case code for machine-readable reports; never renamed.
    pub fn code(&self) -> &'static str {
        match self {
            Self::JobGone(_) => "job_gone",
            Self::JobFeed(_) => "job_feed_unavailable",
            Self::Revalidation(e) => match e {
                RevalidationError::CandidateJob(_) => "candidate_job_invalid",
                RevalidationError::CurrentJob(_) => "current_job_invalid",
                RevalidationError::JobChanged(_) => "job_changed",
                RevalidationError::Outcome(_) => "outcome_invalid",
                RevalidationError::Evidence(_) => "evidence_rejected",
            },
            Self::ChainId { .. } => "chain_id_mismatch",
            Self::ChainRead(_) => "chain_read_failed",
            Self::OnChain(_) => "onchain_mismatch",
        }
    }

    /// Whether the refusal comes from an unavailable service (RPC or platform) rather than
    /// from the candidate or the chain state; a later retry may succeed.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::JobFeed(e) => e.is_transient(),
            Self::ChainRead(e) => e.is_transient(),
            _ => false,
        }
    }

    /// The on-chain mismatches' codes (empty unless [`Refusal::OnChain`]).
    pub fn mismatch_codes(&self) -> Vec<&'static str> {
        match self {
            Self::OnChain(m) => m.iter().map(Mismatch::code).collect(),
            _ => Vec::new(),
        }
    }
}

/// What the job commits the bounty to hold on chain.
pub fn expected_for(job: &ValidatedJob) -> Expected {
    Expected {
        chain_id: job.chain_id(),
        bounty_id: job.bounty_id(),
        round: job.round(),
        solver: job.solver(),
        submission_hash: job.submission_hash(),
        evidence_hash: job.evidence_hash(),
        commitment: *job.commitment(),
        verification_expires_at: job.expires_at(),
        verifiers: job.eligible_verifiers().to_vec(),
        threshold: job.threshold(),
    }
}

/// The chain half of the signer's check: `state` (the bounty read at one block) against
/// what `job` commits to: the chain id first, then every committed value at once (status,
/// mode, bounty id, round, solver, submission, evidence and policy hashes, the terms document's
/// `termsHash()` and its acceptance criteria, benchmark and evidence schema hashes, the window,
/// the verifier set and threshold). [`revalidate`] runs it before signing and relaying;
/// `worker reproduce --tx` runs it on the state the settlement's signatures were made over,
/// so a job served with another runner manifest than the bounty funded is never reproduced
/// as if it were the bounty's.
pub fn check_job_against_state(job: &ValidatedJob, state: &BountyState) -> Result<(), Refusal> {
    let expected = expected_for(job);
    if state.chain_id != expected.chain_id {
        return Err(Refusal::ChainId {
            expected: expected.chain_id,
            actual: state.chain_id,
        });
    }
    let mismatches = check_state(state, &expected);
    if !mismatches.is_empty() {
        return Err(Refusal::OnChain(mismatches));
    }
    Ok(())
}

/// The readiness record's chain check (issue #43 item 3): [`check_job_against_state`], the
/// very check the signer's gate runs before signing, mapped to the record's
/// [`CheckResult`] with the signer's refusal code and mismatch codes. Readiness and the signer
/// therefore cannot disagree on the chain: there is one function, not two copies of it.
pub fn chain_readiness(job: &ValidatedJob, state: &BountyState) -> CheckResult {
    match check_job_against_state(job, state) {
        Ok(()) => CheckResult::pass(CheckKind::Chain),
        Err(refusal) => refusal_check(&refusal),
    }
}

/// [`chain_readiness`] on the bounty read through `reader` now; a failed read is a failed
/// check (`chain_read_failed`), never a pass.
pub async fn read_chain_readiness(job: &ValidatedJob, reader: &impl ChainReader) -> CheckResult {
    match reader.read_bounty(job.bounty_contract()).await {
        Ok(state) => chain_readiness(job, &state),
        Err(e) => refusal_check(&Refusal::ChainRead(e)),
    }
}

fn refusal_check(refusal: &Refusal) -> CheckResult {
    CheckResult::fail(
        CheckKind::Chain,
        refusal.code(),
        refusal
            .mismatch_codes()
            .into_iter()
            .map(String::from)
            .collect(),
        refusal.to_string(),
    )
}

/// Re-checks `candidate` against the platform's `current_job` (already fetched) and the
/// bounty's on-chain state read through `reader`, at unix time `now`.
pub async fn revalidate(
    candidate: &ParsedCandidate,
    current_job: &Value,
    reader: &impl ChainReader,
    now: u64,
) -> Result<CheckedCandidate, Refusal> {
    let checked = revalidate_parsed(candidate, current_job, now)?;
    let state = reader.read_bounty(checked.job.bounty_contract()).await?;
    check_job_against_state(&checked.job, &state)?;
    Ok(CheckedCandidate {
        job: checked.job,
        outcome: checked.outcome,
        state,
    })
}

/// Fetches the current job with `candidate`'s job id from `source` (refusing when it is gone)
/// and runs [`revalidate`].
pub async fn refetch_and_revalidate(
    candidate: &ParsedCandidate,
    source: &impl JobSource,
    reader: &impl ChainReader,
    now: u64,
) -> Result<CheckedCandidate, Refusal> {
    // Parsed (and live) first so only a well-formed job id is ever sent to the platform.
    let candidate_job = candidate.job();
    candidate_job
        .check_live(now)
        .map_err(RevalidationError::CandidateJob)?;
    let job_id = candidate_job.job_id();
    let current = source
        .current_job(job_id)
        .await?
        .ok_or_else(|| Refusal::JobGone(job_id.chars().take(200).collect()))?;
    revalidate(candidate, &current, reader, now).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::reader::AttestationQuery;
    use serde_json::json;
    use verifier_sdk::{
        Address, BountyStatus, Bytes32, Candidate, VerificationMode, fixtures, validate_job,
        verifier_set_hash,
    };

    /// A chain reader that answers with a fixed state, or fails like a dead RPC.
    struct FixedChain(Result<BountyState, ChainReadError>);

    impl ChainReader for FixedChain {
        async fn read_bounty(&self, _: Address) -> Result<BountyState, ChainReadError> {
            self.0.clone()
        }
        async fn attestation_digest(
            &self,
            _: Address,
            _: u64,
            _: AttestationQuery,
        ) -> Result<Bytes32, ChainReadError> {
            unreachable!("revalidate never asks for a digest")
        }
        async fn is_verifier(
            &self,
            _: Address,
            _: u64,
            _: Address,
        ) -> Result<bool, ChainReadError> {
            unreachable!("revalidate never asks for membership")
        }
    }

    struct FixedFeed(Option<Value>);

    impl JobSource for FixedFeed {
        async fn current_job(&self, job_id: &str) -> Result<Option<Value>, JobSourceError> {
            Ok(self
                .0
                .clone()
                .filter(|j| j.get("job_id").and_then(Value::as_str) == Some(job_id)))
        }
    }

    fn candidate() -> Candidate {
        let job = fixtures::valid_job();
        let validated = validate_job(&job, fixtures::NOW).unwrap();
        let (outcome, evidence) = fixtures::completed_run(&validated, fixtures::run_facts(0));
        Candidate::new(
            job,
            serde_json::to_value(&outcome).unwrap(),
            "rev".into(),
            Some(evidence),
        )
    }

    fn state_for(job: &Value) -> BountyState {
        let job = validate_job(job, fixtures::NOW).unwrap();
        BountyState {
            block_number: 10,
            block_timestamp: fixtures::NOW,
            chain_id: job.chain_id(),
            bounty: job.bounty_contract(),
            status: BountyStatus::Submitted,
            bounty_id: job.bounty_id(),
            round: job.round(),
            solver: job.solver(),
            submission_hash: job.submission_hash(),
            evidence_hash: job.evidence_hash(),
            commitment: *job.commitment(),
            verification_expires_at: job.expires_at(),
            verification_mode: VerificationMode::SignedQuorum,
            threshold: job.threshold(),
            verifier_set_hash: verifier_set_hash(job.eligible_verifiers()),
            verifiers: job.eligible_verifiers().to_vec(),
        }
    }

    fn parsed(c: &Candidate) -> ParsedCandidate {
        ParsedCandidate::parse(c.clone()).unwrap()
    }

    async fn run(
        c: &Candidate,
        state: Result<BountyState, ChainReadError>,
    ) -> Result<CheckedCandidate, Refusal> {
        revalidate(&parsed(c), &c.job, &FixedChain(state), fixtures::NOW).await
    }

    #[tokio::test]
    async fn agreeing_candidate_passes_with_the_pinned_state() {
        let c = candidate();
        let checked = run(&c, Ok(state_for(&c.job))).await.unwrap();
        assert_eq!(checked.state.block_number, 10);
        assert_eq!(checked.job.job_id(), c.job["job_id"].as_str().unwrap());
    }

    #[tokio::test]
    async fn other_chain_id_is_refused_before_the_state_check() {
        let c = candidate();
        let mut state = state_for(&c.job);
        state.chain_id = 84532;
        state.round = 99;
        let err = run(&c, Ok(state)).await.unwrap_err();
        assert_eq!(err.code(), "chain_id_mismatch");
        assert!(matches!(
            err,
            Refusal::ChainId {
                expected: 8453,
                actual: 84532
            }
        ));
    }

    #[tokio::test]
    async fn on_chain_mismatches_are_listed_by_code() {
        let c = candidate();
        let mut state = state_for(&c.job);
        state.round += 1;
        state.threshold = 2;
        let err = run(&c, Ok(state)).await.unwrap_err();
        assert_eq!(err.code(), "onchain_mismatch");
        assert_eq!(err.mismatch_codes(), vec!["round", "threshold"]);
        assert!(!err.is_unavailable());
    }

    #[tokio::test]
    async fn terms_the_bounty_did_not_fund_are_refused() {
        let c = candidate();
        let mut state = state_for(&c.job);
        state.commitment.acceptance_criteria_hash = Bytes32::from_bytes([0x01; 32]);
        state.commitment.evidence_schema_hash = Bytes32::from_bytes([0x02; 32]);
        let err = run(&c, Ok(state)).await.unwrap_err();
        assert_eq!(err.code(), "onchain_mismatch");
        assert_eq!(
            err.mismatch_codes(),
            vec!["acceptance_criteria_hash", "evidence_schema_hash"]
        );
    }

    #[test]
    fn a_job_served_with_another_runner_manifest_is_refused_on_its_terms_and_benchmark() {
        // The attack on `worker reproduce --tx` (#41 item 2): same policy, submission and
        // evidence (what the signatures bind), another benchmark command.
        let job = fixtures::valid_job();
        let state = state_for(&job);
        let mut swapped = job.clone();
        swapped["terms"]["document"]["benchmark"]["runner_manifest"]["command"] =
            json!(["python3", "-c", "pass"]);
        fixtures::rehash(&mut swapped);
        let swapped = validate_job(&swapped, fixtures::NOW).unwrap();
        assert_eq!(swapped.policy_hash(), state.commitment.policy_hash);
        let err = check_job_against_state(&swapped, &state).unwrap_err();
        assert_eq!(err.code(), "onchain_mismatch");
        assert_eq!(err.mismatch_codes(), vec!["terms_hash", "benchmark_hash"]);
        let job = validate_job(&job, fixtures::NOW).unwrap();
        assert!(check_job_against_state(&job, &state).is_ok());
    }

    #[tokio::test]
    async fn rpc_failure_is_unavailable_not_a_verdict_on_the_candidate() {
        let c = candidate();
        let err = run(
            &c,
            Err(ChainReadError::Rpc {
                what: "status()",
                detail: "connection refused".into(),
            }),
        )
        .await
        .unwrap_err();
        assert_eq!(err.code(), "chain_read_failed");
        assert!(err.is_unavailable());
        let err = run(&c, Err(ChainReadError::UnknownStatus(9)))
            .await
            .unwrap_err();
        assert!(!err.is_unavailable());
    }

    #[tokio::test]
    async fn sdk_refusals_keep_their_codes() {
        let mut c = candidate();
        c.evidence.as_mut().unwrap()["executor"] = json!("test-double");
        let state = state_for(&c.job);
        assert_eq!(
            run(&c, Ok(state.clone())).await.unwrap_err().code(),
            "evidence_rejected"
        );

        let c = candidate();
        let mut current = c.job.clone();
        current["verification_expires_at"] = json!(fixtures::EXPIRES_AT + 60);
        let err = revalidate(&parsed(&c), &current, &FixedChain(Ok(state)), fixtures::NOW)
            .await
            .unwrap_err();
        assert_eq!(err.code(), "job_changed", "{err}");
    }

    #[tokio::test]
    async fn job_missing_from_the_feed_is_refused() {
        let c = candidate();
        let state = state_for(&c.job);
        let err = refetch_and_revalidate(
            &parsed(&c),
            &FixedFeed(None),
            &FixedChain(Ok(state.clone())),
            fixtures::NOW,
        )
        .await
        .unwrap_err();
        assert_eq!(err.code(), "job_gone");
        let ok = refetch_and_revalidate(
            &parsed(&c),
            &FixedFeed(Some(c.job.clone())),
            &FixedChain(Ok(state)),
            fixtures::NOW,
        )
        .await;
        assert!(ok.is_ok());
    }

    #[test]
    fn mismatch_codes_are_distinct() {
        let b = Bytes32::from_bytes([0; 32]);
        let a = Address::from_bytes([0; 20]);
        let all = [
            Mismatch::NotSubmitted {
                actual: BountyStatus::Open,
            },
            Mismatch::ChainId {
                expected: 1,
                actual: 2,
            },
            Mismatch::VerificationMode {
                actual: VerificationMode::Module,
            },
            Mismatch::BountyId {
                expected: b,
                actual: b,
            },
            Mismatch::Round {
                expected: 1,
                actual: 2,
            },
            Mismatch::Solver {
                expected: a,
                actual: a,
            },
            Mismatch::SubmissionHash {
                expected: b,
                actual: b,
            },
            Mismatch::EvidenceHash {
                expected: b,
                actual: b,
            },
            Mismatch::PolicyHash {
                expected: b,
                actual: b,
            },
            Mismatch::TermsHash {
                expected: b,
                actual: b,
            },
            Mismatch::AcceptanceCriteriaHash {
                expected: b,
                actual: b,
            },
            Mismatch::BenchmarkHash {
                expected: b,
                actual: b,
            },
            Mismatch::EvidenceSchemaHash {
                expected: b,
                actual: b,
            },
            Mismatch::VerificationExpiresAt {
                expected: 1,
                actual: 2,
            },
            Mismatch::VerifierSetHash {
                expected: b,
                actual: b,
            },
            Mismatch::VerifierList {
                expected: vec![],
                actual: vec![],
            },
            Mismatch::Threshold {
                expected: 1,
                actual: 2,
            },
        ];
        let mut codes: Vec<_> = all.iter().map(Mismatch::code).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), all.len());
    }
}
