//! Comparing a bounty's on-chain state with what a verification job commits to.
//!
//! Pure: the caller builds [`Expected`] from a job it already validated and passes the
//! [`BountyState`] it read; every disagreement comes back as a typed [`Mismatch`], so signer and
//! keeper refuse for the same reasons and the reasons are tested without a chain.

use verifier_sdk::{
    Address, BountyStatus, Bytes32, TermsCommitment, VerificationMode, verifier_set_hash,
};

use crate::state::BountyState;

/// What the job says the bounty must hold on chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// Chain id the job's network resolves to.
    pub chain_id: u64,
    /// The job's `bounty_id`.
    pub bounty_id: Bytes32,
    /// The job's `round`.
    pub round: u64,
    /// The job's `solver_wallet`.
    pub solver: Address,
    /// The evidence's `artifact_hash`.
    pub submission_hash: Bytes32,
    /// The evidence's `evidence_hash`.
    pub evidence_hash: Bytes32,
    /// The terms' five hashes.
    pub commitment: TermsCommitment,
    /// The job's `verification_expires_at`.
    pub verification_expires_at: u64,
    /// The job's `eligible_verifiers`, in policy order.
    pub verifiers: Vec<Address>,
    /// The job's `threshold`.
    pub threshold: u8,
}

/// One way the on-chain state disagrees with the job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    /// The bounty is not awaiting verification, so no attestation can settle it.
    #[error("bounty status is {actual:?}, not submitted")]
    NotSubmitted {
        /// The status read.
        actual: BountyStatus,
    },
    /// The node serves a different chain than the job's network.
    #[error("chain id is {actual}, job expects {expected}")]
    ChainId {
        /// From the job.
        expected: u64,
        /// From `eth_chainId`.
        actual: u64,
    },
    /// The contract is not in the signed-quorum mode this engine serves.
    #[error("verification mode is {actual:?}, not signed quorum")]
    VerificationMode {
        /// The mode read.
        actual: VerificationMode,
    },
    /// `bountyId()` differs.
    #[error("bounty id is {actual}, job expects {expected}")]
    BountyId {
        /// From the job.
        expected: Bytes32,
        /// From the contract.
        actual: Bytes32,
    },
    /// `round()` differs.
    #[error("round is {actual}, job expects {expected}")]
    Round {
        /// From the job.
        expected: u64,
        /// From the contract.
        actual: u64,
    },
    /// `solver()` differs.
    #[error("solver is {actual}, job expects {expected}")]
    Solver {
        /// From the job.
        expected: Address,
        /// From the contract.
        actual: Address,
    },
    /// `submissionHash()` differs from the evidence's artifact hash.
    #[error("submission hash is {actual}, job expects {expected}")]
    SubmissionHash {
        /// From the job.
        expected: Bytes32,
        /// From the contract.
        actual: Bytes32,
    },
    /// `evidenceHash()` differs.
    #[error("evidence hash is {actual}, job expects {expected}")]
    EvidenceHash {
        /// From the job.
        expected: Bytes32,
        /// From the contract.
        actual: Bytes32,
    },
    /// `policyHash()` differs.
    #[error("policy hash is {actual}, job expects {expected}")]
    PolicyHash {
        /// From the job.
        expected: Bytes32,
        /// From the contract.
        actual: Bytes32,
    },
    /// `termsHash()` differs: the job's terms document is not the one the bounty funded.
    #[error("terms hash is {actual}, job expects {expected}")]
    TermsHash {
        /// From the job.
        expected: Bytes32,
        /// From the contract.
        actual: Bytes32,
    },
    /// `acceptanceCriteriaHash()` differs.
    #[error("acceptance criteria hash is {actual}, job expects {expected}")]
    AcceptanceCriteriaHash {
        /// From the job.
        expected: Bytes32,
        /// From the contract.
        actual: Bytes32,
    },
    /// `benchmarkHash()` differs: the job's benchmark is not the one the bounty funded.
    #[error("benchmark hash is {actual}, job expects {expected}")]
    BenchmarkHash {
        /// From the job.
        expected: Bytes32,
        /// From the contract.
        actual: Bytes32,
    },
    /// `evidenceSchemaHash()` differs.
    #[error("evidence schema hash is {actual}, job expects {expected}")]
    EvidenceSchemaHash {
        /// From the job.
        expected: Bytes32,
        /// From the contract.
        actual: Bytes32,
    },
    /// `verificationExpiresAt()` differs.
    #[error("verification expiry is {actual}, job expects {expected}")]
    VerificationExpiresAt {
        /// From the job.
        expected: u64,
        /// From the contract.
        actual: u64,
    },
    /// The stored `verifierSetHash()` is not the hash of the job's verifiers.
    #[error("verifier set hash is {actual}, job's verifiers hash to {expected}")]
    VerifierSetHash {
        /// Hash of the job's verifiers.
        expected: Bytes32,
        /// From the contract.
        actual: Bytes32,
    },
    /// `verifiers()` is not the job's list, element by element.
    #[error("on-chain verifier list differs from the job's eligible verifiers")]
    VerifierList {
        /// From the job.
        expected: Vec<Address>,
        /// From the contract.
        actual: Vec<Address>,
    },
    /// `threshold()` differs.
    #[error("threshold is {actual}, job expects {expected}")]
    Threshold {
        /// From the job.
        expected: u8,
        /// From the contract.
        actual: u8,
    },
}

impl Mismatch {
    /// A stable snake_case code for machine-readable reports; never renamed.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotSubmitted { .. } => "status_not_submitted",
            Self::ChainId { .. } => "chain_id",
            Self::VerificationMode { .. } => "verification_mode",
            Self::BountyId { .. } => "bounty_id",
            Self::Round { .. } => "round",
            Self::Solver { .. } => "solver",
            Self::SubmissionHash { .. } => "submission_hash",
            Self::EvidenceHash { .. } => "evidence_hash",
            Self::PolicyHash { .. } => "policy_hash",
            Self::TermsHash { .. } => "terms_hash",
            Self::AcceptanceCriteriaHash { .. } => "acceptance_criteria_hash",
            Self::BenchmarkHash { .. } => "benchmark_hash",
            Self::EvidenceSchemaHash { .. } => "evidence_schema_hash",
            Self::VerificationExpiresAt { .. } => "verification_expires_at",
            Self::VerifierSetHash { .. } => "verifier_set_hash",
            Self::VerifierList { .. } => "verifier_list",
            Self::Threshold { .. } => "threshold",
        }
    }
}

/// Every way `state` disagrees with `expected`, in a fixed order; empty when they agree.
pub fn check_state(state: &BountyState, expected: &Expected) -> Vec<Mismatch> {
    let mut out = Vec::new();
    // Scalar fields the job pins one for one: each differing field is its own mismatch, in
    // the order of the calls below, so a report names every disagreement at once.
    macro_rules! compare {
        ($($($field:ident).+ => $variant:ident),* $(,)?) => {$(
            if state.$($field).+ != expected.$($field).+ {
                out.push(Mismatch::$variant {
                    expected: expected.$($field).+,
                    actual: state.$($field).+,
                });
            }
        )*};
    }
    if state.status != BountyStatus::Submitted {
        out.push(Mismatch::NotSubmitted {
            actual: state.status,
        });
    }
    compare!(chain_id => ChainId);
    if state.verification_mode != VerificationMode::SignedQuorum {
        out.push(Mismatch::VerificationMode {
            actual: state.verification_mode,
        });
    }
    // The attestation digest binds only the policy hash, so the other four terms hashes are
    // what ties the job's benchmark and criteria to the ones the bounty funded: a job with a
    // lenient benchmark and the same policy would otherwise be signed and paid.
    compare!(
        bounty_id => BountyId,
        round => Round,
        solver => Solver,
        submission_hash => SubmissionHash,
        evidence_hash => EvidenceHash,
        commitment.policy_hash => PolicyHash,
        commitment.terms_hash => TermsHash,
        commitment.acceptance_criteria_hash => AcceptanceCriteriaHash,
        commitment.benchmark_hash => BenchmarkHash,
        commitment.evidence_schema_hash => EvidenceSchemaHash,
        verification_expires_at => VerificationExpiresAt,
    );
    let expected_set_hash = verifier_set_hash(&expected.verifiers);
    if state.verifier_set_hash != expected_set_hash {
        out.push(Mismatch::VerifierSetHash {
            expected: expected_set_hash,
            actual: state.verifier_set_hash,
        });
    }
    // The stored hash and the list are separate storage on a real contract; both must agree
    // with the job, or a keeper could count signatures against a list the hash does not cover.
    if state.verifiers != expected.verifiers {
        out.push(Mismatch::VerifierList {
            expected: expected.verifiers.clone(),
            actual: state.verifiers.clone(),
        });
    }
    compare!(threshold => Threshold);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b32(byte: u8) -> Bytes32 {
        Bytes32::from_bytes([byte; 32])
    }

    fn addr(byte: u8) -> Address {
        Address::from_bytes([byte; 20])
    }

    fn matching() -> (BountyState, Expected) {
        let verifiers = vec![addr(0x11), addr(0x12)];
        let state = BountyState {
            block_number: 42,
            block_timestamp: 0,
            chain_id: 8453,
            bounty: addr(0x22),
            status: BountyStatus::Submitted,
            bounty_id: b32(0xaa),
            round: 3,
            solver: addr(0x33),
            submission_hash: b32(0x44),
            evidence_hash: b32(0x55),
            commitment: TermsCommitment {
                policy_hash: b32(0x77),
                terms_hash: b32(0x66),
                acceptance_criteria_hash: b32(0x67),
                benchmark_hash: b32(0x68),
                evidence_schema_hash: b32(0x69),
            },
            verification_expires_at: 2_000_000_000,
            verification_mode: VerificationMode::SignedQuorum,
            threshold: 2,
            verifier_set_hash: verifier_set_hash(&verifiers),
            verifiers: verifiers.clone(),
        };
        let expected = Expected {
            chain_id: 8453,
            bounty_id: b32(0xaa),
            round: 3,
            solver: addr(0x33),
            submission_hash: b32(0x44),
            evidence_hash: b32(0x55),
            commitment: TermsCommitment {
                policy_hash: b32(0x77),
                terms_hash: b32(0x66),
                acceptance_criteria_hash: b32(0x67),
                benchmark_hash: b32(0x68),
                evidence_schema_hash: b32(0x69),
            },
            verification_expires_at: 2_000_000_000,
            verifiers,
            threshold: 2,
        };
        (state, expected)
    }

    #[test]
    fn agreeing_state_has_no_mismatch() {
        let (state, expected) = matching();
        assert_eq!(check_state(&state, &expected), vec![]);
    }

    #[test]
    fn block_number_is_not_compared() {
        // Which block was pinned is the reader's choice, not something the job commits to.
        let (mut state, expected) = matching();
        state.block_number = 7;
        assert_eq!(check_state(&state, &expected), vec![]);
    }

    #[test]
    fn lenient_benchmark_with_the_funded_policy_is_refused() {
        // Same policy (so the attestation digest is unchanged), different benchmark: the
        // terms document and its benchmark hash both differ from what the bounty committed.
        let (state, mut expected) = matching();
        expected.commitment.terms_hash = b32(0x01);
        expected.commitment.benchmark_hash = b32(0x02);
        let got = check_state(&state, &expected);
        assert_eq!(
            got.iter().map(Mismatch::code).collect::<Vec<_>>(),
            vec!["terms_hash", "benchmark_hash"]
        );
        assert_eq!(
            got[1].to_string(),
            format!("benchmark hash is {}, job expects {}", b32(0x68), b32(0x02))
        );
    }

    #[test]
    fn every_status_but_submitted_is_refused() {
        for status in [
            BountyStatus::Open,
            BountyStatus::Claimable,
            BountyStatus::Claimed,
            BountyStatus::Settled,
            BountyStatus::Cancelled,
        ] {
            let (mut state, expected) = matching();
            state.status = status;
            assert_eq!(
                check_state(&state, &expected),
                vec![Mismatch::NotSubmitted { actual: status }]
            );
        }
    }

    #[test]
    fn each_scalar_field_is_reported_alone() {
        type Case = (fn(&mut BountyState), Mismatch);
        let cases: Vec<Case> = vec![
            (
                |s| s.chain_id = 84532,
                Mismatch::ChainId {
                    expected: 8453,
                    actual: 84532,
                },
            ),
            (
                |s| s.verification_mode = VerificationMode::AiQuorum,
                Mismatch::VerificationMode {
                    actual: VerificationMode::AiQuorum,
                },
            ),
            (
                |s| s.verification_mode = VerificationMode::Module,
                Mismatch::VerificationMode {
                    actual: VerificationMode::Module,
                },
            ),
            (
                |s| s.bounty_id = b32(0xab),
                Mismatch::BountyId {
                    expected: b32(0xaa),
                    actual: b32(0xab),
                },
            ),
            (
                |s| s.round = 4,
                Mismatch::Round {
                    expected: 3,
                    actual: 4,
                },
            ),
            (
                |s| s.solver = addr(0x34),
                Mismatch::Solver {
                    expected: addr(0x33),
                    actual: addr(0x34),
                },
            ),
            (
                |s| s.submission_hash = b32(0x45),
                Mismatch::SubmissionHash {
                    expected: b32(0x44),
                    actual: b32(0x45),
                },
            ),
            (
                |s| s.evidence_hash = b32(0x56),
                Mismatch::EvidenceHash {
                    expected: b32(0x55),
                    actual: b32(0x56),
                },
            ),
            (
                |s| s.commitment.policy_hash = b32(0x78),
                Mismatch::PolicyHash {
                    expected: b32(0x77),
                    actual: b32(0x78),
                },
            ),
            (
                |s| s.commitment.terms_hash = b32(0x65),
                Mismatch::TermsHash {
                    expected: b32(0x66),
                    actual: b32(0x65),
                },
            ),
            (
                |s| s.commitment.acceptance_criteria_hash = b32(0x65),
                Mismatch::AcceptanceCriteriaHash {
                    expected: b32(0x67),
                    actual: b32(0x65),
                },
            ),
            (
                |s| s.commitment.benchmark_hash = b32(0x65),
                Mismatch::BenchmarkHash {
                    expected: b32(0x68),
                    actual: b32(0x65),
                },
            ),
            (
                |s| s.commitment.evidence_schema_hash = b32(0x65),
                Mismatch::EvidenceSchemaHash {
                    expected: b32(0x69),
                    actual: b32(0x65),
                },
            ),
            (
                |s| s.verification_expires_at = 2_000_000_001,
                Mismatch::VerificationExpiresAt {
                    expected: 2_000_000_000,
                    actual: 2_000_000_001,
                },
            ),
            (
                |s| s.threshold = 1,
                Mismatch::Threshold {
                    expected: 2,
                    actual: 1,
                },
            ),
        ];
        for (mutate, want) in cases {
            let (mut state, expected) = matching();
            mutate(&mut state);
            assert_eq!(check_state(&state, &expected), vec![want]);
        }
    }

    #[test]
    fn stored_set_hash_that_disagrees_with_the_job_is_reported() {
        let (mut state, expected) = matching();
        state.verifier_set_hash = b32(0x99);
        assert_eq!(
            check_state(&state, &expected),
            vec![Mismatch::VerifierSetHash {
                expected: verifier_set_hash(&expected.verifiers),
                actual: b32(0x99),
            }]
        );
    }

    #[test]
    fn reordered_verifier_list_is_two_mismatches() {
        // Order is part of the policy: a swapped list hashes differently and is a different list.
        let (mut state, expected) = matching();
        state.verifiers = vec![addr(0x12), addr(0x11)];
        state.verifier_set_hash = verifier_set_hash(&state.verifiers);
        let got = check_state(&state, &expected);
        assert_eq!(got.len(), 2);
        assert!(matches!(got[0], Mismatch::VerifierSetHash { .. }));
        assert!(matches!(got[1], Mismatch::VerifierList { .. }));
    }

    #[test]
    fn list_changed_behind_an_unchanged_hash_is_reported() {
        let (mut state, expected) = matching();
        state.verifiers.push(addr(0x13));
        assert_eq!(
            check_state(&state, &expected),
            vec![Mismatch::VerifierList {
                expected: expected.verifiers.clone(),
                actual: state.verifiers.clone()
            }]
        );
    }

    #[test]
    fn all_mismatches_are_reported_in_order() {
        let (mut state, expected) = matching();
        state.status = BountyStatus::Settled;
        state.round = 9;
        state.threshold = 1;
        let got = check_state(&state, &expected);
        assert_eq!(
            got,
            vec![
                Mismatch::NotSubmitted {
                    actual: BountyStatus::Settled
                },
                Mismatch::Round {
                    expected: 3,
                    actual: 9
                },
                Mismatch::Threshold {
                    expected: 2,
                    actual: 1
                },
            ]
        );
        assert_eq!(
            got[0].to_string(),
            "bounty status is Settled, not submitted"
        );
    }
}
