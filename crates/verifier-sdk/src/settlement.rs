//! Checking a settlement after the fact: given what a mined `settleWithAttestations`
//! transaction carried and what the bounty stored just before it, recover every attestation's
//! signer and check it against the bounty's committed verifiers, as anyone reproducing a
//! verdict from public data must before trusting it. Pure: the chain reads are the caller's
//! (`bounty_chain::settlement`).

use std::collections::HashSet;

use serde::Serialize;

use crate::attest::{AttestationFields, AttestationSignature, attestation_digest, recover_signer};
use crate::settle::{Attestation, SettlementEvent, verification_hash};
use crate::types::{Address, Bytes32};

/// What the bounty stored at the block before the settlement (what the signatures bind).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredBounty {
    /// `bountyId()`.
    pub bounty_id: Bytes32,
    /// `round()`.
    pub round: u64,
    /// `submissionHash()`.
    pub submission_hash: Bytes32,
    /// `evidenceHash()`.
    pub evidence_hash: Bytes32,
    /// `policyHash()`.
    pub policy_hash: Bytes32,
    /// `verifiers()`.
    pub verifiers: Vec<Address>,
    /// `threshold()`.
    pub threshold: u8,
}

/// Everything read about one settlement transaction.
#[derive(Debug, Clone)]
pub struct SettlementFacts {
    /// The chain's id.
    pub chain_id: u64,
    /// The transaction's `to`: the bounty.
    pub bounty: Address,
    /// The receipt's status.
    pub succeeded: bool,
    /// The decoded `settleWithAttestations` input.
    pub attestations: Vec<Attestation>,
    /// The settlement events of the receipt emitted by the bounty itself.
    pub events: Vec<SettlementEvent>,
    /// The bounty's stored values at the block before.
    pub before: StoredBounty,
}

/// One checked attestation of a settlement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SettledAttestation {
    /// The verifier, and the recovered signer.
    pub verifier: Address,
    /// Its verdict.
    pub passed: bool,
    /// The response hash it signed.
    pub response_hash: Bytes32,
    /// Its deadline.
    pub deadline: u64,
}

/// A settlement whose every signature recovered to a committed verifier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifiedSettlement {
    /// The bounty.
    pub bounty: Address,
    /// The chain.
    pub chain_id: u64,
    /// The bounty id.
    pub bounty_id: Bytes32,
    /// The round settled.
    pub round: u64,
    /// The stored submission hash the signatures bind (the job's `artifact_hash`).
    pub submission_hash: Bytes32,
    /// The stored evidence hash.
    pub evidence_hash: Bytes32,
    /// The stored policy hash.
    pub policy_hash: Bytes32,
    /// `BountySettled` (true) or `SubmissionRejected` (false): the common verdict.
    pub passed: bool,
    /// The event's `verificationHash`, equal to the attestations' hash.
    pub verification_hash: Bytes32,
    /// Every attestation, in the transaction's order.
    pub attestations: Vec<SettledAttestation>,
}

/// Why a transaction is not a settlement this reader can stand behind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettlementError {
    /// The transaction reverted: it settled nothing.
    #[error("the transaction reverted: it settled nothing")]
    Reverted,
    /// No `BountySettled` or `SubmissionRejected` from the bounty's own address.
    #[error("the receipt has no BountySettled or SubmissionRejected event from the bounty {0}")]
    NoSettlementEvent(Address),
    /// A log of the bounty claims to be a settlement event but does not decode.
    #[error("a settlement log of the bounty does not decode: {0}")]
    BadEvent(String),
    /// More than one settlement event.
    #[error("the receipt has {0} settlement events from the bounty, not one")]
    SeveralSettlementEvents(usize),
    /// The event names another bounty id or round than the bounty stored.
    #[error("the settlement event is for another bounty id or round than the bounty stored")]
    EventMismatch,
    /// The event's `verificationHash` is not the hash of the attestations in the input.
    #[error("the event's verificationHash {event} is not the input attestations' {computed}")]
    VerificationHash {
        /// From the event.
        event: Bytes32,
        /// Recomputed from the input.
        computed: Bytes32,
    },
    /// Not `threshold` attestations.
    #[error("{count} attestations, the bounty's threshold is {threshold}")]
    Threshold {
        /// In the input.
        count: usize,
        /// Stored.
        threshold: u8,
    },
    /// The attestations do not share one verdict, or it is not the event's.
    #[error("the attestations' verdicts are not the event's one verdict")]
    Verdict,
    /// A verifier appears twice.
    #[error("verifier {0} attests twice")]
    Duplicate(Address),
    /// A deadline does not fit 64 bits.
    #[error("attestation of {0} has a deadline beyond 64 bits")]
    Deadline(Address),
    /// A signature does not recover to its verifier (or is malformed; contract wallets that
    /// sign through ERC-1271 are not recovered by this reader).
    #[error("the signature of {verifier}'s attestation does not recover to it{detail}")]
    BadSignature {
        /// The attestation's verifier.
        verifier: Address,
        /// What was recovered instead, if anything.
        detail: String,
    },
    /// A signer is not in the bounty's verifier set (or not among the job's committed
    /// verifiers, when the job is known).
    #[error("{verifier} is not a committed verifier of the {of}")]
    NotACommittedVerifier {
        /// The signer.
        verifier: Address,
        /// `bounty` or `job`.
        of: &'static str,
    },
}

/// Checks a settlement: a successful transaction with exactly one settlement event from the
/// bounty, for the stored bounty id and round, whose `verificationHash` is the input's;
/// `threshold` attestations of one verdict (the event's), distinct verifiers, each signature
/// recovering over the digest of the stored values to its verifier, and each verifier in the
/// bounty's set and, when `job_verifiers` is given, in the job's.
pub fn check_settlement(
    facts: &SettlementFacts,
    job_verifiers: Option<&[Address]>,
) -> Result<VerifiedSettlement, SettlementError> {
    if !facts.succeeded {
        return Err(SettlementError::Reverted);
    }
    let event = match facts.events.as_slice() {
        [] => return Err(SettlementError::NoSettlementEvent(facts.bounty)),
        [one] => one,
        many => return Err(SettlementError::SeveralSettlementEvents(many.len())),
    };
    let b = &facts.before;
    let (passed, bounty_id, round, event_hash) = match event {
        SettlementEvent::Settled(e) => (true, e.bountyId, e.round, e.verificationHash),
        SettlementEvent::Rejected(e) => (false, e.bountyId, e.round, e.verificationHash),
    };
    if Bytes32::from(bounty_id) != b.bounty_id || round != b.round {
        return Err(SettlementError::EventMismatch);
    }
    let computed = verification_hash(&facts.attestations);
    if Bytes32::from(event_hash) != computed {
        return Err(SettlementError::VerificationHash {
            event: Bytes32::from(event_hash),
            computed,
        });
    }
    if facts.attestations.len() != usize::from(b.threshold) {
        return Err(SettlementError::Threshold {
            count: facts.attestations.len(),
            threshold: b.threshold,
        });
    }
    if facts.attestations.iter().any(|a| a.passed != passed) {
        return Err(SettlementError::Verdict);
    }
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(facts.attestations.len());
    for a in &facts.attestations {
        let verifier = Address::from(a.verifier);
        if !seen.insert(verifier) {
            return Err(SettlementError::Duplicate(verifier));
        }
        let deadline =
            u64::try_from(a.deadline).map_err(|_| SettlementError::Deadline(verifier))?;
        let fields = AttestationFields {
            bounty: facts.bounty,
            bounty_id: b.bounty_id,
            round: b.round,
            verifier,
            submission_hash: b.submission_hash,
            evidence_hash: b.evidence_hash,
            policy_hash: b.policy_hash,
            passed: a.passed,
            response_hash: Bytes32::from(a.responseHash),
            deadline,
        };
        let digest = attestation_digest(facts.chain_id, &fields);
        let recovered = AttestationSignature::from_slice(&a.signature)
            .map_err(|e| e.to_string())
            .and_then(|sig| recover_signer(&digest, &sig).map_err(|e| e.to_string()));
        match recovered {
            Ok(who) if who == verifier => {}
            Ok(who) => {
                return Err(SettlementError::BadSignature {
                    verifier,
                    detail: format!(" (it recovers to {who})"),
                });
            }
            Err(e) => {
                return Err(SettlementError::BadSignature {
                    verifier,
                    detail: format!(" ({e})"),
                });
            }
        }
        if !b.verifiers.contains(&verifier) {
            return Err(SettlementError::NotACommittedVerifier {
                verifier,
                of: "bounty",
            });
        }
        if let Some(job) = job_verifiers
            && !job.contains(&verifier)
        {
            return Err(SettlementError::NotACommittedVerifier {
                verifier,
                of: "job",
            });
        }
        out.push(SettledAttestation {
            verifier,
            passed: a.passed,
            response_hash: fields.response_hash,
            deadline,
        });
    }
    Ok(VerifiedSettlement {
        bounty: facts.bounty,
        chain_id: facts.chain_id,
        bounty_id: b.bounty_id,
        round: b.round,
        submission_hash: b.submission_hash,
        evidence_hash: b.evidence_hash,
        policy_hash: b.policy_hash,
        passed,
        verification_hash: computed,
        attestations: out,
    })
}

#[cfg(test)]
mod tests {
    use alloy_primitives::{B256, U256};

    use super::*;
    use crate::settle::{BountySettled, attestation};

    fn key() -> (k256::ecdsa::SigningKey, Address) {
        let key = k256::ecdsa::SigningKey::from_bytes((&[7u8; 32]).into()).unwrap();
        let point = key.verifying_key().to_encoded_point(false);
        let hash = alloy_primitives::keccak256(&point.as_bytes()[1..]);
        (key, Address::from_bytes(hash[12..].try_into().unwrap()))
    }

    /// A one-verifier settlement as an honest contract would emit it.
    fn facts() -> SettlementFacts {
        let (key, verifier) = key();
        let before = StoredBounty {
            bounty_id: Bytes32::from_bytes([1; 32]),
            round: 2,
            submission_hash: Bytes32::from_bytes([3; 32]),
            evidence_hash: Bytes32::from_bytes([4; 32]),
            policy_hash: Bytes32::from_bytes([5; 32]),
            verifiers: vec![verifier],
            threshold: 1,
        };
        let bounty = Address::from_bytes([9; 20]);
        let fields = AttestationFields {
            bounty,
            bounty_id: before.bounty_id,
            round: before.round,
            verifier,
            submission_hash: before.submission_hash,
            evidence_hash: before.evidence_hash,
            policy_hash: before.policy_hash,
            passed: true,
            response_hash: Bytes32::from_bytes([6; 32]),
            deadline: 100,
        };
        let digest = attestation_digest(8453, &fields);
        let (sig, recid) = key.sign_prehash_recoverable(digest.as_bytes()).unwrap();
        let mut raw = [0u8; 65];
        raw[..64].copy_from_slice(&sig.to_bytes());
        raw[64] = 27 + recid.to_byte();
        let sig = AttestationSignature::from_slice(&raw).unwrap();
        let atts = vec![attestation(verifier, true, fields.response_hash, 100, &sig)];
        let event = BountySettled {
            bountyId: before.bounty_id.into(),
            round: before.round,
            solver: alloy_primitives::Address::ZERO,
            solverReward: U256::ZERO,
            claimBondReturned: U256::ZERO,
            timeoutBondBonus: U256::ZERO,
            verifierReward: U256::ZERO,
            submissionHash: B256::ZERO,
            evidenceHash: B256::ZERO,
            policyHash: B256::ZERO,
            verificationHash: verification_hash(&atts).into(),
        };
        SettlementFacts {
            chain_id: 8453,
            bounty,
            succeeded: true,
            attestations: atts,
            events: vec![SettlementEvent::Settled(event)],
            before,
        }
    }

    #[test]
    fn an_honest_settlement_checks_out() {
        let s = check_settlement(&facts(), None).unwrap();
        assert!(s.passed);
        assert_eq!(s.attestations[0].verifier, key().1);
    }

    #[test]
    fn a_signer_outside_the_bountys_set_is_refused() {
        let mut f = facts();
        f.before.verifiers = vec![Address::from_bytes([8; 20])];
        assert_eq!(
            check_settlement(&f, None),
            Err(SettlementError::NotACommittedVerifier {
                verifier: key().1,
                of: "bounty"
            })
        );
    }

    #[test]
    fn each_inconsistency_is_refused() {
        let mut f = facts();
        f.succeeded = false;
        assert_eq!(check_settlement(&f, None), Err(SettlementError::Reverted));
        let mut f = facts();
        f.events.clear();
        assert!(matches!(
            check_settlement(&f, None),
            Err(SettlementError::NoSettlementEvent(_))
        ));
        let mut f = facts();
        f.before.round = 3;
        assert_eq!(
            check_settlement(&f, None),
            Err(SettlementError::EventMismatch)
        );
        let mut f = facts();
        f.before.threshold = 2;
        assert!(matches!(
            check_settlement(&f, None),
            Err(SettlementError::Threshold { .. })
        ));
        // A signature over other stored values (another chain) recovers to someone else.
        let mut f = facts();
        f.chain_id = 1;
        assert!(matches!(
            check_settlement(&f, None),
            Err(SettlementError::BadSignature { .. })
        ));
        // The event's verification hash commits to the attestations: a swapped one fails.
        let mut f = facts();
        f.attestations[0].responseHash = B256::repeat_byte(0xee);
        assert!(matches!(
            check_settlement(&f, None),
            Err(SettlementError::VerificationHash { .. })
        ));
    }
}
