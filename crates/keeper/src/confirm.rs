//! Checking a mined settlement transaction: pure over the receipt's fields.
//!
//! Only logs emitted by the bounty contract itself count; a settlement event from any other
//! address (a contract the transaction happened to touch) is ignored. An event is believed
//! only together with the bounty's status read afterwards ([`check_status`]), so neither a
//! receipt alone nor a record of one is taken as payment.

use alloy::primitives::B256;
use verifier_sdk::settle::{SettlementEvent, decode_settlement_event};
use verifier_sdk::{Address, BountyStatus, Bytes32};

/// One log of a receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    /// Emitting contract.
    pub address: Address,
    /// Topics.
    pub topics: Vec<B256>,
    /// Data.
    pub data: Vec<u8>,
}

/// The fields of a receipt the keeper looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptFacts {
    /// `status == 1`.
    pub success: bool,
    /// Block of inclusion.
    pub block_number: u64,
    /// Its hash.
    pub block_hash: Bytes32,
    /// Logs in order.
    pub logs: Vec<LogEntry>,
}

/// What the settlement must show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedSettlement {
    /// Bounty contract (the only accepted log address).
    pub bounty: Address,
    /// Bounty id.
    pub bounty_id: Bytes32,
    /// Round.
    pub round: u64,
    /// Solver.
    pub solver: Address,
    /// Submission hash (BountySettled only).
    pub submission_hash: Bytes32,
    /// Evidence hash (BountySettled only).
    pub evidence_hash: Bytes32,
    /// Policy hash (BountySettled only).
    pub policy_hash: Bytes32,
    /// `keccak256(abi.encode(attestations))`.
    pub verification_hash: Bytes32,
    /// The relayed verdict: passed expects `BountySettled`, failed `SubmissionRejected`.
    pub passed: bool,
}

/// The checked result of a mined transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// `BountySettled` with every field as expected.
    Paid,
    /// `SubmissionRejected` with every field as expected.
    Rejected,
}

impl Settled {
    /// The event name recorded.
    pub const fn event_name(self) -> &'static str {
        match self {
            Self::Paid => "BountySettled",
            Self::Rejected => "SubmissionRejected",
        }
    }
}

/// Why a mined transaction does not prove the expected settlement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfirmError {
    /// The transaction reverted.
    #[error("transaction reverted")]
    Reverted,
    /// No settlement event from the bounty contract.
    #[error("no settlement event from the bounty contract")]
    NoEvent,
    /// More than one settlement event from the bounty contract.
    #[error("{0} settlement events from the bounty contract")]
    ManyEvents(usize),
    /// The event could not be decoded.
    #[error("settlement event does not decode: {0}")]
    Decode(String),
    /// The event kind contradicts the relayed verdict.
    #[error("event {found} contradicts the relayed verdict")]
    WrongKind {
        /// Event seen.
        found: &'static str,
    },
    /// A field of the event differs from what was relayed.
    #[error("event field {0} differs from the relayed settlement")]
    Field(&'static str),
    /// The bounty's status now is not what the event leaves behind.
    #[error("bounty status is {status:?} in round {round} after a {event} of round {event_round}")]
    Status {
        /// The event that was checked.
        event: &'static str,
        /// The round the event settled.
        event_round: u64,
        /// Status read from the chain.
        status: BountyStatus,
        /// Round read from the chain.
        round: u64,
    },
}

impl ConfirmError {
    /// Stable code for reports.
    pub const fn code(&self) -> &'static str {
        match self {
            Self::Reverted => "reverted",
            Self::Status { .. } => "status_mismatch",
            _ => "event_mismatch",
        }
    }
}

/// Checks a receipt against the settlement that was sent.
pub fn check_receipt(
    receipt: &ReceiptFacts,
    expected: &ExpectedSettlement,
) -> Result<Settled, ConfirmError> {
    if !receipt.success {
        return Err(ConfirmError::Reverted);
    }
    let mut events = Vec::new();
    for log in receipt.logs.iter().filter(|l| l.address == expected.bounty) {
        match decode_settlement_event(&log.topics, &log.data) {
            None => {}
            Some(Ok(ev)) => events.push(ev),
            Some(Err(e)) => return Err(ConfirmError::Decode(e.to_string())),
        }
    }
    let event = match events.len() {
        0 => return Err(ConfirmError::NoEvent),
        1 => events.remove(0),
        n => return Err(ConfirmError::ManyEvents(n)),
    };
    let b32 = |b: B256| Bytes32::from_bytes(b.0);
    let check = |ok: bool, field: &'static str| {
        if ok {
            Ok(())
        } else {
            Err(ConfirmError::Field(field))
        }
    };
    // Both events open with the kind the verdict settles with and the settlement's bounty
    // id, round and solver.
    let opening = |found: &'static str, passed: bool, bounty_id: B256, round, solver| {
        if passed != expected.passed {
            return Err(ConfirmError::WrongKind { found });
        }
        check(b32(bounty_id) == expected.bounty_id, "bountyId")?;
        check(round == expected.round, "round")?;
        check(Address::from(solver) == expected.solver, "solver")
    };
    match event {
        SettlementEvent::Settled(e) => {
            opening("BountySettled", true, e.bountyId, e.round, e.solver)?;
            check(
                b32(e.submissionHash) == expected.submission_hash,
                "submissionHash",
            )?;
            check(
                b32(e.evidenceHash) == expected.evidence_hash,
                "evidenceHash",
            )?;
            check(b32(e.policyHash) == expected.policy_hash, "policyHash")?;
            check(
                b32(e.verificationHash) == expected.verification_hash,
                "verificationHash",
            )?;
            Ok(Settled::Paid)
        }
        SettlementEvent::Rejected(e) => {
            opening("SubmissionRejected", false, e.bountyId, e.round, e.solver)?;
            check(
                b32(e.verificationHash) == expected.verification_hash,
                "verificationHash",
            )?;
            Ok(Settled::Rejected)
        }
    }
}

/// Checks that the bounty's `status` and `round`, read after the event's block, are what the
/// checked event leaves behind: a payment is final (Settled, same round); a rejection leaves
/// Submitted (the contract reopens the bounty), though a later round may be Submitted again.
pub fn check_status(
    settled: Settled,
    event_round: u64,
    status: BountyStatus,
    round: u64,
) -> Result<(), ConfirmError> {
    let agrees = match settled {
        Settled::Paid => status == BountyStatus::Settled && round == event_round,
        Settled::Rejected => status != BountyStatus::Submitted || round != event_round,
    };
    if agrees {
        Ok(())
    } else {
        Err(ConfirmError::Status {
            event: settled.event_name(),
            event_round,
            status,
            round,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::primitives::U256;
    use alloy::sol_types::SolEvent;
    use verifier_sdk::settle::{BountySettled, SubmissionRejected};

    fn b(c: u8) -> Bytes32 {
        Bytes32::from_bytes([c; 32])
    }
    fn a(c: u8) -> Address {
        Address::from_bytes([c; 20])
    }

    fn expected(passed: bool) -> ExpectedSettlement {
        ExpectedSettlement {
            bounty: a(0x44),
            bounty_id: b(0xbb),
            round: 7,
            solver: a(0x33),
            submission_hash: b(0xcc),
            evidence_hash: b(0xdd),
            policy_hash: b(0xee),
            verification_hash: b(0x99),
            passed,
        }
    }

    fn settled_log(address: Address, verification: Bytes32) -> LogEntry {
        let ev = BountySettled {
            bountyId: B256::from(*b(0xbb).as_bytes()),
            round: 7,
            solver: a(0x33).into(),
            solverReward: U256::from(1),
            claimBondReturned: U256::ZERO,
            timeoutBondBonus: U256::ZERO,
            verifierReward: U256::ZERO,
            submissionHash: B256::from(*b(0xcc).as_bytes()),
            evidenceHash: B256::from(*b(0xdd).as_bytes()),
            policyHash: B256::from(*b(0xee).as_bytes()),
            verificationHash: B256::from(*verification.as_bytes()),
        };
        let data = ev.encode_log_data();
        LogEntry {
            address,
            topics: data.topics().to_vec(),
            data: data.data.to_vec(),
        }
    }

    fn rejected_log(address: Address) -> LogEntry {
        let ev = SubmissionRejected {
            bountyId: B256::from(*b(0xbb).as_bytes()),
            round: 7,
            solver: a(0x33).into(),
            verifierReward: U256::ZERO,
            claimBondForfeited: U256::ZERO,
            verificationHash: B256::from(*b(0x99).as_bytes()),
        };
        let data = ev.encode_log_data();
        LogEntry {
            address,
            topics: data.topics().to_vec(),
            data: data.data.to_vec(),
        }
    }

    fn receipt(logs: Vec<LogEntry>) -> ReceiptFacts {
        ReceiptFacts {
            success: true,
            block_number: 5,
            block_hash: b(1),
            logs,
        }
    }

    #[test]
    fn settled_and_rejected_are_recognised() {
        let r = receipt(vec![settled_log(a(0x44), b(0x99))]);
        assert_eq!(check_receipt(&r, &expected(true)), Ok(Settled::Paid));
        let r = receipt(vec![rejected_log(a(0x44))]);
        assert_eq!(check_receipt(&r, &expected(false)), Ok(Settled::Rejected));
    }

    #[test]
    fn events_from_other_addresses_are_ignored() {
        // A look-alike event from another contract must neither count nor confuse.
        let r = receipt(vec![settled_log(a(0x45), b(0x99))]);
        assert_eq!(
            check_receipt(&r, &expected(true)),
            Err(ConfirmError::NoEvent)
        );
        let r = receipt(vec![
            settled_log(a(0x45), b(0x01)),
            settled_log(a(0x44), b(0x99)),
        ]);
        assert_eq!(check_receipt(&r, &expected(true)), Ok(Settled::Paid));
    }

    #[test]
    fn a_payment_needs_the_bounty_settled_in_that_round() {
        assert_eq!(
            check_status(Settled::Paid, 7, BountyStatus::Settled, 7),
            Ok(())
        );
        for (status, round) in [
            (BountyStatus::Submitted, 7),
            (BountyStatus::Claimable, 7),
            (BountyStatus::Cancelled, 7),
            (BountyStatus::Settled, 8),
        ] {
            let err = check_status(Settled::Paid, 7, status, round).unwrap_err();
            assert_eq!(err.code(), "status_mismatch", "{status:?} {round}");
        }
    }

    #[test]
    fn a_rejection_needs_the_round_to_have_left_submitted() {
        for (status, round) in [
            (BountyStatus::Claimable, 7),
            (BountyStatus::Claimed, 7),
            (BountyStatus::Submitted, 8),
            (BountyStatus::Settled, 8),
        ] {
            assert_eq!(
                check_status(Settled::Rejected, 7, status, round),
                Ok(()),
                "{status:?} {round}"
            );
        }
        assert_eq!(
            check_status(Settled::Rejected, 7, BountyStatus::Submitted, 7)
                .unwrap_err()
                .to_string(),
            "bounty status is Submitted in round 7 after a SubmissionRejected of round 7"
        );
    }

    #[test]
    fn mismatches_are_refused() {
        let r = receipt(vec![settled_log(a(0x44), b(0x98))]);
        assert_eq!(
            check_receipt(&r, &expected(true)),
            Err(ConfirmError::Field("verificationHash"))
        );
        let r = receipt(vec![rejected_log(a(0x44))]);
        assert_eq!(
            check_receipt(&r, &expected(true)),
            Err(ConfirmError::WrongKind {
                found: "SubmissionRejected"
            })
        );
        let mut e = expected(true);
        e.round = 8;
        let r = receipt(vec![settled_log(a(0x44), b(0x99))]);
        assert_eq!(check_receipt(&r, &e), Err(ConfirmError::Field("round")));
        let r = receipt(vec![
            settled_log(a(0x44), b(0x99)),
            settled_log(a(0x44), b(0x99)),
        ]);
        assert_eq!(
            check_receipt(&r, &expected(true)),
            Err(ConfirmError::ManyEvents(2))
        );
        let mut bad = settled_log(a(0x44), b(0x99));
        bad.data.truncate(10);
        assert!(matches!(
            check_receipt(&receipt(vec![bad]), &expected(true)),
            Err(ConfirmError::Decode(_))
        ));
        let mut reverted = receipt(vec![settled_log(a(0x44), b(0x99))]);
        reverted.success = false;
        assert_eq!(
            check_receipt(&reverted, &expected(true)),
            Err(ConfirmError::Reverted)
        );
    }
}
