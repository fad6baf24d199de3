//! A bounty's on-chain state as read at one block, in checked domain types.

use verifier_sdk::{Address, BountyStatus, Bytes32, TermsCommitment, VerificationMode};

/// Everything signer and keeper need to know about one bounty, all read at `block_number`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BountyState {
    /// The block every view below was read at.
    pub block_number: u64,
    /// That block's timestamp: the chain's clock, which the contract checks deadlines and
    /// expiry against (it can run ahead of the local wall clock).
    pub block_timestamp: u64,
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
    /// `termsHash()`, `policyHash()`, `acceptanceCriteriaHash()`, `benchmarkHash()` and
    /// `evidenceSchemaHash()`.
    pub commitment: TermsCommitment,
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
