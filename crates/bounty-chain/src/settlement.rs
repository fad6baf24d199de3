//! Reading a settlement transaction back from the chain: its `settleWithAttestations` input,
//! its receipt's `BountySettled` / `SubmissionRejected` event from the bounty's own address,
//! and the bounty's stored values at the block before it; then every attestation's signer is
//! recovered and checked against the committed verifiers ([`verifier_sdk::settlement`]).
//! Read-only; the RPC URL never appears in an error.

use alloy::consensus::Transaction as _;
use alloy::primitives::B256;
use alloy::providers::Provider;
use verifier_sdk::settle::{CalldataError, decode_settle_calldata, decode_settlement_event};
use verifier_sdk::settlement::{
    SettlementError, SettlementFacts, StoredBounty, VerifiedSettlement, check_settlement,
};
use verifier_sdk::{Address, Bytes32};

use crate::reader::{ChainReadError, RpcChainReader};
use crate::state::BountyState;

/// Why a transaction could not be read as a verified settlement.
#[derive(Debug, thiserror::Error)]
pub enum SettlementReadError {
    /// The node could not be asked, or answered something unusable.
    #[error(transparent)]
    Chain(#[from] ChainReadError),
    /// The node knows no such transaction.
    #[error("no transaction {0} on this chain")]
    NoTransaction(Bytes32),
    /// Known but not mined yet.
    #[error("transaction {0} is not mined yet")]
    Pending(Bytes32),
    /// A contract creation, not a call to a bounty.
    #[error("transaction {0} creates a contract; it is not a settlement of a bounty")]
    ContractCreation(Bytes32),
    /// Its input is not a `settleWithAttestations` call.
    #[error("transaction {tx} is not a settlement of a bounty: {source}")]
    NotASettlement {
        /// The transaction.
        tx: Bytes32,
        /// Why.
        #[source]
        source: CalldataError,
    },
    /// It is a settlement call, but not one to stand behind.
    #[error("transaction {tx} to {bounty}: {source}")]
    Refused {
        /// The transaction.
        tx: Bytes32,
        /// Its `to`.
        bounty: Address,
        /// Why.
        #[source]
        source: SettlementError,
    },
}

impl RpcChainReader {
    /// Reads transaction `tx` and checks it as a settlement: see the module docs.
    /// `job_verifiers`, when the job is known, must also list every signer.
    pub async fn read_settlement(
        &self,
        tx: Bytes32,
        job_verifiers: Option<&[Address]>,
    ) -> Result<VerifiedSettlement, SettlementReadError> {
        self.read_settlement_and_state(tx, job_verifiers)
            .await
            .map(|(settlement, _)| settlement)
    }

    /// [`Self::read_settlement`], and the bounty's whole state at the end of the block before
    /// the transaction: what the signers were asked to sign, which a job must match as it
    /// matched when the signer signed ([`crate::revalidate::check_job_against_state`]).
    pub async fn read_settlement_and_state(
        &self,
        tx: Bytes32,
        job_verifiers: Option<&[Address]>,
    ) -> Result<(VerifiedSettlement, BountyState), SettlementReadError> {
        let hash = B256::from(tx);
        let found = self
            .provider()
            .get_transaction_by_hash(hash)
            .await
            .map_err(|e| self.rpc_error("eth_getTransactionByHash", &e))?
            .ok_or(SettlementReadError::NoTransaction(tx))?;
        let block_number = found.block_number.ok_or(SettlementReadError::Pending(tx))?;
        let to = found
            .inner
            .to()
            .ok_or(SettlementReadError::ContractCreation(tx))?;
        let bounty = Address::from(to);
        let attestations = decode_settle_calldata(found.inner.input())
            .map_err(|source| SettlementReadError::NotASettlement { tx, source })?;
        let receipt = self
            .provider()
            .get_transaction_receipt(hash)
            .await
            .map_err(|e| self.rpc_error("eth_getTransactionReceipt", &e))?
            .ok_or(SettlementReadError::Pending(tx))?;
        let refused = |source| SettlementReadError::Refused { tx, bounty, source };
        // Only the bounty's own logs are evidence; an undecodable one from it is refused.
        let events = receipt
            .inner
            .logs()
            .iter()
            .filter(|l| l.address() == to)
            .filter_map(|l| decode_settlement_event(l.topics(), &l.data().data))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| refused(SettlementError::BadEvent(e.to_string())))?;
        // What the signatures bind is what the bounty stored before this transaction ran:
        // the state at the end of the previous block.
        let before = block_number
            .checked_sub(1)
            .ok_or(SettlementReadError::Pending(tx))?;
        let state = self.read_bounty_at(bounty, before).await?;
        let facts = SettlementFacts {
            chain_id: state.chain_id,
            bounty,
            succeeded: receipt.status(),
            attestations,
            events,
            before: StoredBounty {
                bounty_id: state.bounty_id,
                round: state.round,
                submission_hash: state.submission_hash,
                evidence_hash: state.evidence_hash,
                policy_hash: state.commitment.policy_hash,
                verifiers: state.verifiers.clone(),
                threshold: state.threshold,
            },
        };
        let settlement = check_settlement(&facts, job_verifiers).map_err(refused)?;
        Ok((settlement, state))
    }
}
