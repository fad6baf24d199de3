//! The keeper's JSON-RPC writes and the reads around them (simulation, gas, fees, balance,
//! nonce, broadcast, receipts). Reading a bounty's state is `bounty_chain`'s job, not this
//! module's.

use std::time::Duration;

use alloy::consensus::{SignableTransaction, TxEip1559, TxEnvelope};
use alloy::eips::eip2718::Encodable2718;
use alloy::eips::{BlockId, BlockNumberOrTag};
use alloy::network::TxSignerSync;
use alloy::primitives::{Address as ChainAddress, B256, Bytes, TxKind, U256};
use alloy::providers::{Provider, RootProvider};
use alloy::rpc::types::TransactionRequest;
use alloy::signers::local::PrivateKeySigner;
use alloy::transports::{RpcError, TransportErrorKind};
use bounty_chain::{ChainReadError, Redactor, connect_rpc};
use verifier_sdk::{Address, Bytes32};

use crate::confirm::{LogEntry, ReceiptFacts};
use crate::fees::FeePlan;
use crate::record::TxHash;

/// A JSON-RPC call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RpcFailure {
    /// The URL does not parse.
    #[error("rpc url is not a valid url")]
    InvalidUrl,
    /// The URL is neither `https` nor plain `http` to a loopback host.
    #[error("rpc url must be https, or http to a loopback host (127.0.0.1, [::1], localhost)")]
    InsecureUrl,
    /// Transport or node error (the URL is scrubbed from the detail).
    #[error("rpc {what} failed: {detail}")]
    Unavailable {
        /// The method.
        what: &'static str,
        /// What the node or transport said.
        detail: String,
    },
    /// The node answered with something the keeper cannot use.
    #[error("rpc {what} returned an unusable answer: {detail}")]
    BadAnswer {
        /// The method.
        what: &'static str,
        /// Why.
        detail: String,
    },
}

impl RpcFailure {
    /// Whether the node or the transport failed (a later retry may succeed), rather than the
    /// configured URL.
    pub fn is_transient(&self) -> bool {
        !matches!(self, Self::InvalidUrl | Self::InsecureUrl)
    }
}

/// A simulated call or gas estimate failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallFailure {
    /// The contract reverted; the decoded reason when there is one.
    #[error("call reverted: {0}")]
    Reverted(String),
    /// Anything else.
    #[error(transparent)]
    Rpc(#[from] RpcFailure),
}

/// The latest block's facts the keeper needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// Number.
    pub number: u64,
    /// Timestamp (unix seconds).
    pub timestamp: u64,
    /// Base fee (wei); 0 on a chain without EIP-1559.
    pub base_fee_per_gas: u128,
}

/// What a block says about one account's transaction of one nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InBlock {
    /// The node does not have the block.
    NoBlock,
    /// The block holds no transaction of that account and nonce.
    Absent,
    /// The transaction's hash.
    Found(TxHash),
}

/// A transaction signed and encoded, not yet sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedTx {
    /// Its hash.
    pub hash: TxHash,
    /// EIP-2718 bytes.
    pub raw: Vec<u8>,
}

/// JSON-RPC client for the keeper's calls.
#[derive(Clone)]
pub struct SettlementRpc {
    provider: RootProvider,
    redactor: Redactor,
    // Several --rpc: the transport they share, checked before use.
    failover: Option<bounty_chain::Failover>,
}

impl std::fmt::Debug for SettlementRpc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may embed an API key.
        f.debug_struct("SettlementRpc").finish_non_exhaustive()
    }
}

fn chain_address(a: Address) -> ChainAddress {
    a.into()
}

fn url_failure(e: ChainReadError) -> RpcFailure {
    match e {
        ChainReadError::InsecureUrl => RpcFailure::InsecureUrl,
        ChainReadError::Client(detail) => RpcFailure::Unavailable {
            what: "client",
            detail,
        },
        _ => RpcFailure::InvalidUrl,
    }
}

impl SettlementRpc {
    /// A client for `rpc_url` with a per-request timeout; the URL must pass
    /// [`bounty_chain::check_rpc_url`].
    pub fn new(rpc_url: &str, timeout: Duration) -> Result<Self, RpcFailure> {
        let (provider, redactor) = connect_rpc(rpc_url, timeout).map_err(url_failure)?;
        Ok(Self {
            provider,
            redactor,
            failover: None,
        })
    }

    /// A client for `endpoints` in order ([`bounty_chain::connect_rpcs`]): one is exactly
    /// [`Self::new`]; several fail over, and the same signed transaction is sent to each.
    pub fn with_failover(
        endpoints: &bounty_chain::RpcEndpoints,
        timeout: Duration,
    ) -> Result<Self, RpcFailure> {
        let (provider, redactor, failover) =
            bounty_chain::connect_rpcs(&endpoints.urls, timeout, endpoints.policy)
                .map_err(url_failure)?;
        Ok(Self {
            provider,
            redactor,
            failover,
        })
    }

    /// With several endpoints, asks each its chain id and head before use; `Ok(None)` with one.
    pub async fn check_endpoints(&self) -> Result<Option<u64>, bounty_chain::FailoverError> {
        match &self.failover {
            Some(f) => f.check().await.map(Some),
            None => Ok(None),
        }
    }

    fn scrub(&self, text: &str) -> String {
        self.redactor.scrub(text).chars().take(512).collect()
    }

    fn fail(&self, what: &'static str, e: &dyn std::fmt::Display) -> RpcFailure {
        RpcFailure::Unavailable {
            what,
            detail: self.scrub(&e.to_string()),
        }
    }

    fn call_failure(&self, what: &'static str, e: &RpcError<TransportErrorKind>) -> CallFailure {
        if let Some(payload) = e.as_error_resp() {
            if let Some(data) = payload.as_revert_data() {
                let reason = alloy::sol_types::decode_revert_reason(&data)
                    .unwrap_or_else(|| format!("0x{}", hex::encode(&data)));
                return CallFailure::Reverted(self.scrub(&reason));
            }
            let msg = payload.message.to_string();
            if msg.to_ascii_lowercase().contains("revert") {
                return CallFailure::Reverted(self.scrub(&msg));
            }
        }
        CallFailure::Rpc(self.fail(what, e))
    }

    fn request(from: Address, to: Address, calldata: &[u8]) -> TransactionRequest {
        TransactionRequest::default()
            .from(chain_address(from))
            .to(chain_address(to))
            .input(Bytes::copy_from_slice(calldata).into())
    }

    /// `eth_chainId`.
    pub async fn chain_id(&self) -> Result<u64, RpcFailure> {
        self.provider
            .get_chain_id()
            .await
            .map_err(|e| self.fail("eth_chainId", &e))
    }

    /// The latest block.
    pub async fn head(&self) -> Result<Head, RpcFailure> {
        let block = self
            .provider
            .get_block_by_number(BlockNumberOrTag::Latest)
            .await
            .map_err(|e| self.fail("eth_getBlockByNumber", &e))?
            .ok_or(RpcFailure::BadAnswer {
                what: "eth_getBlockByNumber",
                detail: "no latest block".into(),
            })?;
        Ok(Head {
            number: block.header.number,
            timestamp: block.header.timestamp,
            base_fee_per_gas: block.header.base_fee_per_gas.map(u128::from).unwrap_or(0),
        })
    }

    /// `eth_blockNumber`.
    pub async fn block_number(&self) -> Result<u64, RpcFailure> {
        self.provider
            .get_block_number()
            .await
            .map_err(|e| self.fail("eth_blockNumber", &e))
    }

    /// `eth_call` of `calldata` from `from` at `block` (or latest).
    pub async fn simulate(
        &self,
        from: Address,
        to: Address,
        calldata: &[u8],
        block: Option<u64>,
    ) -> Result<(), CallFailure> {
        let at = block.map_or(BlockId::latest(), BlockId::number);
        self.provider
            .call(Self::request(from, to, calldata))
            .block(at)
            .await
            .map(|_| ())
            .map_err(|e| self.call_failure("eth_call", &e))
    }

    /// `eth_estimateGas`.
    pub async fn estimate_gas(
        &self,
        from: Address,
        to: Address,
        calldata: &[u8],
    ) -> Result<u64, CallFailure> {
        self.provider
            .estimate_gas(Self::request(from, to, calldata))
            .await
            .map_err(|e| self.call_failure("eth_estimateGas", &e))
    }

    /// `eth_maxPriorityFeePerGas`.
    pub async fn suggested_priority_fee(&self) -> Result<u128, RpcFailure> {
        self.provider
            .get_max_priority_fee_per_gas()
            .await
            .map_err(|e| self.fail("eth_maxPriorityFeePerGas", &e))
    }

    /// `eth_getBalance` at latest.
    pub async fn balance(&self, account: Address) -> Result<U256, RpcFailure> {
        self.provider
            .get_balance(chain_address(account))
            .await
            .map_err(|e| self.fail("eth_getBalance", &e))
    }

    /// `eth_getTransactionCount` at `pending` (mined plus the node's pool).
    pub async fn pending_nonce(&self, account: Address) -> Result<u64, RpcFailure> {
        self.provider
            .get_transaction_count(chain_address(account))
            .pending()
            .await
            .map_err(|e| self.fail("eth_getTransactionCount", &e))
    }

    /// `eth_getTransactionCount` at `latest` (mined only).
    pub async fn mined_nonce(&self, account: Address) -> Result<u64, RpcFailure> {
        self.provider
            .get_transaction_count(chain_address(account))
            .latest()
            .await
            .map_err(|e| self.fail("eth_getTransactionCount", &e))
    }

    /// `eth_getTransactionCount` at block `number`: the transactions of `account` mined up to
    /// and including that block, whichever node answers (a block by number reads the same on
    /// every node that has it, unlike `latest`).
    pub async fn nonce_at(&self, account: Address, number: u64) -> Result<u64, RpcFailure> {
        self.provider
            .get_transaction_count(chain_address(account))
            .block_id(BlockId::number(number))
            .await
            .map_err(|e| self.fail("eth_getTransactionCount", &e))
    }

    /// The transaction of `account` with `nonce` in block `number`, its hash computed here
    /// from the bytes the node returned (not taken from its word).
    pub async fn transaction_in_block(
        &self,
        number: u64,
        account: Address,
        nonce: u64,
    ) -> Result<InBlock, RpcFailure> {
        use alloy::consensus::Transaction as _;
        let Some(block) = self
            .provider
            .get_block_by_number(BlockNumberOrTag::Number(number))
            .full()
            .await
            .map_err(|e| self.fail("eth_getBlockByNumber", &e))?
        else {
            return Ok(InBlock::NoBlock);
        };
        let Some(txs) = block.transactions.as_transactions() else {
            return Err(RpcFailure::BadAnswer {
                what: "eth_getBlockByNumber",
                detail: "asked for full transactions, got hashes".into(),
            });
        };
        for tx in txs {
            let envelope = tx.inner.inner();
            // The sender is the node's word, as the nonce counts are; the hash that decides
            // whether the transaction is the keeper's own is computed here.
            if envelope.nonce() != nonce || tx.inner.signer() != chain_address(account) {
                continue;
            }
            let hash = alloy::primitives::keccak256(envelope.encoded_2718());
            return Ok(InBlock::Found(TxHash::from_bytes(hash.0)));
        }
        Ok(InBlock::Absent)
    }

    /// `eth_sendRawTransaction`. A node that already has the transaction is success.
    pub async fn send_raw(&self, tx: &SignedTx) -> Result<(), RpcFailure> {
        match self.provider.send_raw_transaction(&tx.raw).await {
            Ok(_) => Ok(()),
            Err(e) => {
                let text = e.to_string().to_ascii_lowercase();
                if text.contains("already known") || text.contains("known transaction") {
                    return Ok(());
                }
                Err(self.fail("eth_sendRawTransaction", &e))
            }
        }
    }

    /// Whether the node knows the transaction (pool or chain).
    pub async fn transaction_known(&self, hash: TxHash) -> Result<bool, RpcFailure> {
        self.provider
            .get_transaction_by_hash(B256::from(*hash.as_bytes()))
            .await
            .map(|t| t.is_some())
            .map_err(|e| self.fail("eth_getTransactionByHash", &e))
    }

    /// The receipt, if mined.
    pub async fn receipt(&self, hash: TxHash) -> Result<Option<ReceiptFacts>, RpcFailure> {
        let Some(r) = self
            .provider
            .get_transaction_receipt(B256::from(*hash.as_bytes()))
            .await
            .map_err(|e| self.fail("eth_getTransactionReceipt", &e))?
        else {
            return Ok(None);
        };
        let (Some(block_number), Some(block_hash)) = (r.block_number, r.block_hash) else {
            // A receipt without a block is a pending one on some nodes.
            return Ok(None);
        };
        let logs = r
            .inner
            .logs()
            .iter()
            .map(|l| LogEntry {
                address: Address::from(l.address()),
                topics: l.topics().to_vec(),
                data: l.data().data.to_vec(),
            })
            .collect();
        Ok(Some(ReceiptFacts {
            success: r.status(),
            block_number,
            block_hash: Bytes32::from_bytes(block_hash.0),
            logs,
        }))
    }
}

/// The EIP-1559 call of `calldata` to `to` the keeper signs; nothing is signed or sent.
pub fn settlement_tx(
    chain_id: u64,
    nonce: u64,
    to: Address,
    calldata: &[u8],
    fees: &FeePlan,
) -> TxEip1559 {
    TxEip1559 {
        chain_id,
        nonce,
        gas_limit: fees.gas_limit,
        max_fee_per_gas: fees.max_fee_per_gas,
        max_priority_fee_per_gas: fees.max_priority_fee_per_gas,
        to: TxKind::Call(chain_address(to)),
        value: U256::ZERO,
        access_list: Default::default(),
        input: Bytes::copy_from_slice(calldata),
    }
}

/// `tx` with `signature`, as sent: its hash and EIP-2718 bytes.
pub fn seal(tx: TxEip1559, signature: alloy::primitives::Signature) -> SignedTx {
    let signed = tx.into_signed(signature);
    let hash = TxHash::from_bytes(signed.hash().0);
    SignedTx {
        hash,
        raw: TxEnvelope::from(signed).encoded_2718(),
    }
}

/// Signs an EIP-1559 call of `calldata` to `to` with a local key; nothing is sent.
pub fn sign_settlement(
    signer: &PrivateKeySigner,
    chain_id: u64,
    nonce: u64,
    to: Address,
    calldata: &[u8],
    fees: &FeePlan,
) -> Result<SignedTx, alloy::signers::Error> {
    let mut tx = settlement_tx(chain_id, nonce, to, calldata, fees);
    let signature = signer.sign_transaction_sync(&mut tx)?;
    Ok(seal(tx, signature))
}

/// Why a recorded transaction cannot be re-signed with new fees.
#[derive(Debug, thiserror::Error)]
pub enum ResignError {
    /// The recorded bytes are not a signed EIP-1559 transaction.
    #[error("recorded raw transaction is not a signed EIP-1559 transaction")]
    NotEip1559,
    /// The recorded transaction was signed by another key (the keeper key was rotated).
    #[error("recorded transaction was signed by {recorded}, not this keeper's key")]
    OtherSigner {
        /// Its signer.
        recorded: Address,
    },
    /// The recorded transaction is not a value-free call of this record's bounty contract on
    /// this chain, so it is not one the keeper would have sent for it.
    #[error("recorded transaction is not a settlement call of this bounty on this chain")]
    NotTheSettlement,
    /// Signing failed.
    #[error("signing the replacement failed")]
    Sign,
}

/// The transaction replacing `raw` (the recorded signed transaction), unsigned: the same
/// chain id, nonce, recipient, calldata and gas limit with `fees`' fee fields. `raw` must have
/// been signed by `keeper` and be a value-free call of `to` on `chain_id`: a record is only a
/// pointer, and its bytes are re-signed only when they are what the keeper would have sent.
pub fn replacement_tx(
    keeper: Address,
    chain_id: u64,
    to: Address,
    raw: &[u8],
    fees: &FeePlan,
) -> Result<TxEip1559, ResignError> {
    use alloy::eips::eip2718::Decodable2718;
    let envelope = TxEnvelope::decode_2718(&mut &raw[..]).map_err(|_| ResignError::NotEip1559)?;
    let TxEnvelope::Eip1559(old) = envelope else {
        return Err(ResignError::NotEip1559);
    };
    let recorded = old
        .signature()
        .recover_address_from_prehash(&old.tx().signature_hash())
        .map_err(|_| ResignError::NotEip1559)?;
    if Address::from(recorded) != keeper {
        return Err(ResignError::OtherSigner {
            recorded: Address::from(recorded),
        });
    }
    let mut tx = old.strip_signature();
    if tx.chain_id != chain_id || tx.to != TxKind::Call(chain_address(to)) || !tx.value.is_zero() {
        return Err(ResignError::NotTheSettlement);
    }
    tx.max_fee_per_gas = fees.max_fee_per_gas;
    tx.max_priority_fee_per_gas = fees.max_priority_fee_per_gas;
    Ok(tx)
}

/// [`replacement_tx`] signed with a local key.
pub fn resign_with_fees(
    signer: &PrivateKeySigner,
    chain_id: u64,
    to: Address,
    raw: &[u8],
    fees: &FeePlan,
) -> Result<SignedTx, ResignError> {
    let mut tx = replacement_tx(Address::from(signer.address()), chain_id, to, raw, fees)?;
    let signature = signer
        .sign_transaction_sync(&mut tx)
        .map_err(|_| ResignError::Sign)?;
    Ok(seal(tx, signature))
}

/// Decodes a recorded raw transaction hex back to bytes.
pub fn raw_from_hex(hex_text: &str) -> Option<Vec<u8>> {
    hex::decode(hex_text.strip_prefix("0x")?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::eips::eip2718::Decodable2718;

    fn plan(fee: u128, tip: u128) -> FeePlan {
        FeePlan {
            gas_limit: 200_000,
            max_fee_per_gas: fee,
            max_priority_fee_per_gas: tip,
        }
    }

    fn decoded(raw: &[u8]) -> TxEip1559 {
        let TxEnvelope::Eip1559(tx) = TxEnvelope::decode_2718(&mut &raw[..]).unwrap() else {
            panic!("not EIP-1559");
        };
        tx.strip_signature()
    }

    #[test]
    fn a_replacement_changes_only_the_fees() {
        let key = PrivateKeySigner::random();
        let bounty = Address::from_bytes([0x44; 20]);
        let old = sign_settlement(&key, 8453, 7, bounty, b"call", &plan(10, 2)).unwrap();
        let new = resign_with_fees(&key, 8453, bounty, &old.raw, &plan(20, 3)).unwrap();
        assert_ne!(new.hash, old.hash);
        let (a, b) = (decoded(&old.raw), decoded(&new.raw));
        assert_eq!((b.max_fee_per_gas, b.max_priority_fee_per_gas), (20, 3));
        assert_eq!(
            TxEip1559 {
                max_fee_per_gas: 10,
                max_priority_fee_per_gas: 2,
                ..b
            },
            a
        );
    }

    #[test]
    fn only_the_keepers_own_settlement_of_this_bounty_is_resigned() {
        let key = PrivateKeySigner::random();
        let bounty = Address::from_bytes([0x44; 20]);
        let old = sign_settlement(&key, 8453, 7, bounty, b"call", &plan(10, 2)).unwrap();
        let other_key = PrivateKeySigner::random();
        assert!(matches!(
            resign_with_fees(&other_key, 8453, bounty, &old.raw, &plan(20, 3)),
            Err(ResignError::OtherSigner { .. })
        ));
        assert!(matches!(
            resign_with_fees(
                &key,
                8453,
                Address::from_bytes([0x45; 20]),
                &old.raw,
                &plan(20, 3)
            ),
            Err(ResignError::NotTheSettlement)
        ));
        assert!(matches!(
            resign_with_fees(&key, 1, bounty, &old.raw, &plan(20, 3)),
            Err(ResignError::NotTheSettlement)
        ));
        assert!(matches!(
            resign_with_fees(&key, 8453, bounty, b"\x02junk", &plan(20, 3)),
            Err(ResignError::NotEip1559)
        ));
    }
}
