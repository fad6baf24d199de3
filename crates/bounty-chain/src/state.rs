//! A bounty's on-chain state as read at one block, in checked domain types.

use alloy::primitives::keccak256;
use alloy::sol_types::SolValue;
use verifier_sdk::{Address, Bytes32};

/// `status()` of a bounty contract (PROTOCOL.md section 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BountyStatus {
    /// 0: open for claims.
    Open,
    /// 1: claimable.
    Claimable,
    /// 2: claimed by a solver, nothing submitted yet.
    Claimed,
    /// 3: a submission awaits verification; the only state in which settlement is possible.
    Submitted,
    /// 4: settled; the solver was paid.
    Settled,
    /// 5: cancelled.
    Cancelled,
}

impl BountyStatus {
    /// Maps the contract's `uint8`; `None` for a value the protocol does not define.
    pub const fn from_u8(value: u8) -> Option<Self> {
        Some(match value {
            0 => Self::Open,
            1 => Self::Claimable,
            2 => Self::Claimed,
            3 => Self::Submitted,
            4 => Self::Settled,
            5 => Self::Cancelled,
            _ => return None,
        })
    }

    /// The contract's `uint8` for this status.
    pub const fn as_u8(self) -> u8 {
        match self {
            Self::Open => 0,
            Self::Claimable => 1,
            Self::Claimed => 2,
            Self::Submitted => 3,
            Self::Settled => 4,
            Self::Cancelled => 5,
        }
    }
}

/// `verificationMode()` of a bounty contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VerificationMode {
    /// 0: an on-chain verifier module decides.
    Module,
    /// 1: a quorum of signed attestations decides (the mode this engine serves).
    SignedQuorum,
    /// 2: a quorum of AI verifiers decides.
    AiQuorum,
}

impl VerificationMode {
    /// Maps the contract's `uint8`; `None` for a value the protocol does not define.
    pub const fn from_u8(value: u8) -> Option<Self> {
        Some(match value {
            0 => Self::Module,
            1 => Self::SignedQuorum,
            2 => Self::AiQuorum,
            _ => return None,
        })
    }

    /// The contract's `uint8` for this mode.
    pub const fn as_u8(self) -> u8 {
        match self {
            Self::Module => 0,
            Self::SignedQuorum => 1,
            Self::AiQuorum => 2,
        }
    }
}

/// Everything signer and keeper need to know about one bounty, all read at `block_number`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BountyState {
    /// The block every view below was read at.
    pub block_number: u64,
    /// `eth_chainId` of the node that answered.
    pub chain_id: u64,
    /// The bounty contract that was read.
    pub bounty: Address,
    /// `status()`.
    pub status: BountyStatus,
    /// `bountyId()`.
    pub bounty_id: Bytes32,
    /// `round()`.
    pub round: u64,
    /// `solver()`.
    pub solver: Address,
    /// `submissionHash()`.
    pub submission_hash: Bytes32,
    /// `evidenceHash()`.
    pub evidence_hash: Bytes32,
    /// `policyHash()`.
    pub policy_hash: Bytes32,
    /// `termsHash()`.
    pub terms_hash: Bytes32,
    /// `verificationExpiresAt()`, unix seconds.
    pub verification_expires_at: u64,
    /// `verificationMode()`.
    pub verification_mode: VerificationMode,
    /// `threshold()`.
    pub threshold: u8,
    /// `verifierSetHash()` as stored by the contract.
    pub verifier_set_hash: Bytes32,
    /// `verifiers()`, in the contract's (policy) order.
    pub verifiers: Vec<Address>,
}

impl BountyState {
    /// Whether `account` is in the verifier list read at the pinned block.
    pub fn has_verifier(&self, account: &Address) -> bool {
        self.verifiers.iter().any(|v| v == account)
    }
}

/// Verifier set hash of PROTOCOL.md section 6: `keccak256(abi.encode(address[] verifiers))`,
/// in policy order.
pub fn verifier_set_hash(verifiers: &[Address]) -> Bytes32 {
    let list: Vec<alloy::primitives::Address> = verifiers
        .iter()
        .map(|a| alloy::primitives::Address::from(*a.as_bytes()))
        .collect();
    Bytes32::from_bytes(keccak256(list.abi_encode()).0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> Address {
        s.parse().unwrap()
    }

    #[test]
    fn verifier_set_hash_golden_vectors() {
        let one = [addr("0xbe6292b9e465f549e2363b918d6dd9187038431e")];
        assert_eq!(
            verifier_set_hash(&one).to_string(),
            "0x0838846e439ed67544d8a06da2a0f344fb25cd44723ad65839da3f242a72b1f2"
        );
        let two = [
            addr("0xbe6292b9e465f549e2363b918d6dd9187038431e"),
            addr("0xb7c2ce6430b66fb986e27b6140b29309550d487a"),
        ];
        assert_eq!(
            verifier_set_hash(&two).to_string(),
            "0x2c5a10915ca1fb99d4a11e2222b4f32b986b4e0f5599f55d70e9c8f9725a28cd"
        );
    }

    #[test]
    fn verifier_set_hash_depends_on_order() {
        let a = addr("0xbe6292b9e465f549e2363b918d6dd9187038431e");
        let b = addr("0xb7c2ce6430b66fb986e27b6140b29309550d487a");
        assert_ne!(verifier_set_hash(&[a, b]), verifier_set_hash(&[b, a]));
    }

    #[test]
    fn status_and_mode_round_trip_and_reject_unknown() {
        for v in 0..=5u8 {
            assert_eq!(BountyStatus::from_u8(v).map(BountyStatus::as_u8), Some(v));
        }
        assert_eq!(BountyStatus::from_u8(6), None);
        assert_eq!(BountyStatus::from_u8(255), None);
        for v in 0..=2u8 {
            assert_eq!(
                VerificationMode::from_u8(v).map(VerificationMode::as_u8),
                Some(v)
            );
        }
        assert_eq!(VerificationMode::from_u8(3), None);
    }
}
