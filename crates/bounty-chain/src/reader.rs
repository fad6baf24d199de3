//! Reading a bounty at one pinned block: the [`ChainReader`] trait and its JSON-RPC
//! implementation.

use std::future::Future;
use std::time::Duration;

use alloy::eips::BlockId;
use alloy::primitives::{Address as ChainAddress, U256};
use alloy::providers::{Provider, RootProvider};
use alloy::rpc::types::TransactionRequest;
use alloy::sol_types::SolCall;
use verifier_sdk::settle::IBounty;
use verifier_sdk::{Address, BountyStatus, Bytes32, VerificationMode};

pub use crate::error::{ChainReadError, MAX_VERIFIERS};
pub use crate::rpc::check_rpc_url;
use crate::rpc::{Redactor, connect_rpc};
use crate::state::BountyState;

/// Inputs of the contract's `attestationDigest(address,bool,bytes32,uint256)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttestationQuery {
    /// The verifier that signs.
    pub verifier: Address,
    /// The verdict.
    pub passed: bool,
    /// The receipt's response hash.
    pub response_hash: Bytes32,
    /// Unix seconds after which the attestation is void.
    pub deadline: u64,
}

/// Reads bounty contracts. Implemented over JSON-RPC by [`RpcChainReader`]; deciding code takes
/// this trait so it can be tested with a fixed [`BountyState`].
pub trait ChainReader {
    /// Reads the chain id and every bounty view at one block (the latest when called).
    fn read_bounty(
        &self,
        bounty: Address,
    ) -> impl Future<Output = Result<BountyState, ChainReadError>> + Send;

    /// Calls `attestationDigest` on `bounty` at `block_number` (pass the
    /// [`BountyState::block_number`] the other checks used).
    fn attestation_digest(
        &self,
        bounty: Address,
        block_number: u64,
        query: AttestationQuery,
    ) -> impl Future<Output = Result<Bytes32, ChainReadError>> + Send;

    /// Calls `isVerifier(account)` on `bounty` at `block_number`.
    fn is_verifier(
        &self,
        bounty: Address,
        block_number: u64,
        account: Address,
    ) -> impl Future<Output = Result<bool, ChainReadError>> + Send;
}

/// [`ChainReader`] over an HTTP JSON-RPC endpoint.
#[derive(Clone)]
pub struct RpcChainReader {
    provider: RootProvider,
    // The RPC URL may embed an API key: scrubbed from every error.
    redactor: Redactor,
    // Several endpoints: the transport they share, checked before use.
    failover: Option<crate::failover::Failover>,
}

impl std::fmt::Debug for RpcChainReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL is left out on purpose (it may embed an API key).
        f.debug_struct("RpcChainReader").finish_non_exhaustive()
    }
}

impl RpcChainReader {
    /// Connects lazily to `rpc_url` (see [`check_rpc_url`]); every request is bounded by
    /// `timeout`.
    pub fn new(rpc_url: &str, timeout: Duration) -> Result<Self, ChainReadError> {
        let (provider, redactor) = connect_rpc(rpc_url, timeout)?;
        Ok(Self {
            provider,
            redactor,
            failover: None,
        })
    }

    /// Connects lazily to `rpc_urls` in order ([`crate::rpc::connect_rpcs`]: one URL is
    /// exactly [`Self::new`], several fail over by `policy`).
    pub fn with_failover(
        rpc_urls: &[String],
        timeout: Duration,
        policy: crate::failover::FailoverPolicy,
    ) -> Result<Self, ChainReadError> {
        let (provider, redactor, failover) = crate::rpc::connect_rpcs(rpc_urls, timeout, policy)?;
        Ok(Self {
            provider,
            redactor,
            failover,
        })
    }

    /// With several endpoints, asks each its chain id and head before use
    /// ([`crate::failover::Failover::check`]); `Ok(None)` with one (nothing asked, as before).
    pub async fn check_endpoints(&self) -> Result<Option<u64>, crate::failover::FailoverError> {
        match &self.failover {
            Some(f) => f.check().await.map(Some),
            None => Ok(None),
        }
    }

    pub(crate) fn provider(&self) -> &RootProvider {
        &self.provider
    }

    pub(crate) fn rpc_error(
        &self,
        what: &'static str,
        err: &dyn std::fmt::Display,
    ) -> ChainReadError {
        ChainReadError::Rpc {
            what,
            detail: self.redactor.scrub(&err.to_string()),
        }
    }

    /// Runs one contract view as a raw `eth_call` at `at` and decodes its return value, with
    /// the error named after the view and redacted.
    async fn view<C: SolCall>(
        &self,
        what: &'static str,
        bounty: Address,
        at: BlockId,
        call: C,
    ) -> Result<C::Return, ChainReadError> {
        let request = TransactionRequest::default()
            .to(ChainAddress::from(bounty))
            .input(call.abi_encode().into());
        let output = self
            .provider
            .call(request)
            .block(at)
            .await
            .map_err(|e| self.rpc_error(what, &e))?;
        C::abi_decode_returns(&output).map_err(|e| self.rpc_error(what, &e))
    }
}

impl RpcChainReader {
    /// The block every read of one bounty is pinned to, and its timestamp.
    async fn pinned_block(&self) -> Result<(u64, u64), ChainReadError> {
        let block_number = self
            .provider
            .get_block_number()
            .await
            .map_err(|e| self.rpc_error("eth_blockNumber", &e))?;
        let block_timestamp = self
            .block_timestamp(block_number, "the pinned block is unknown to the node")
            .await?;
        Ok((block_number, block_timestamp))
    }

    /// The timestamp of block `block_number`; `unknown` is the error's detail when the node
    /// does not know the block.
    async fn block_timestamp(
        &self,
        block_number: u64,
        unknown: &'static str,
    ) -> Result<u64, ChainReadError> {
        Ok(self
            .provider
            .get_block_by_number(block_number.into())
            .await
            .map_err(|e| self.rpc_error("eth_getBlockByNumber", &e))?
            .ok_or_else(|| self.rpc_error("eth_getBlockByNumber", &unknown))?
            .header
            .timestamp)
    }

    /// Refuses an address with no code at the pinned block (every view would read zeros).
    async fn check_code(&self, bounty: Address, block_number: u64) -> Result<(), ChainReadError> {
        let code = self
            .provider
            .get_code_at(ChainAddress::from(bounty))
            .block_id(BlockId::number(block_number))
            .await
            .map_err(|e| self.rpc_error("eth_getCode", &e))?;
        if code.is_empty() {
            return Err(ChainReadError::NoContract {
                bounty,
                block_number,
            });
        }
        Ok(())
    }
}

impl RpcChainReader {
    /// Every bounty view at `block_number` (an earlier block too: a settled bounty's state
    /// before its settlement).
    pub async fn read_bounty_at(
        &self,
        bounty: Address,
        block_number: u64,
    ) -> Result<BountyState, ChainReadError> {
        let block_timestamp = self
            .block_timestamp(block_number, "the block is unknown to the node")
            .await?;
        self.read_bounty_pinned(bounty, block_number, block_timestamp)
            .await
    }

    async fn read_bounty_pinned(
        &self,
        bounty: Address,
        block_number: u64,
        block_timestamp: u64,
    ) -> Result<BountyState, ChainReadError> {
        let at = BlockId::number(block_number);
        self.check_code(bounty, block_number).await?;

        let chain_id = async {
            self.provider
                .get_chain_id()
                .await
                .map_err(|e| self.rpc_error("eth_chainId", &e))
        };
        let (
            chain_id,
            status,
            bounty_id,
            round,
            solver,
            submission_hash,
            evidence_hash,
            policy_hash,
            terms_hash,
            acceptance_criteria_hash,
            benchmark_hash,
            evidence_schema_hash,
            verification_expires_at,
            verification_mode,
            threshold,
            verifier_set_hash,
            verifiers,
        ) = tokio::try_join!(
            chain_id,
            self.view("status()", bounty, at, IBounty::statusCall {}),
            self.view("bountyId()", bounty, at, IBounty::bountyIdCall {}),
            self.view("round()", bounty, at, IBounty::roundCall {}),
            self.view("solver()", bounty, at, IBounty::solverCall {}),
            self.view(
                "submissionHash()",
                bounty,
                at,
                IBounty::submissionHashCall {}
            ),
            self.view("evidenceHash()", bounty, at, IBounty::evidenceHashCall {}),
            self.view("policyHash()", bounty, at, IBounty::policyHashCall {}),
            self.view("termsHash()", bounty, at, IBounty::termsHashCall {}),
            self.view(
                "acceptanceCriteriaHash()",
                bounty,
                at,
                IBounty::acceptanceCriteriaHashCall {}
            ),
            self.view("benchmarkHash()", bounty, at, IBounty::benchmarkHashCall {}),
            self.view(
                "evidenceSchemaHash()",
                bounty,
                at,
                IBounty::evidenceSchemaHashCall {}
            ),
            self.view(
                "verificationExpiresAt()",
                bounty,
                at,
                IBounty::verificationExpiresAtCall {}
            ),
            self.view(
                "verificationMode()",
                bounty,
                at,
                IBounty::verificationModeCall {}
            ),
            self.view("threshold()", bounty, at, IBounty::thresholdCall {}),
            self.view(
                "verifierSetHash()",
                bounty,
                at,
                IBounty::verifierSetHashCall {}
            ),
            self.view("verifiers()", bounty, at, IBounty::verifiersCall {}),
        )?;

        if verifiers.len() > MAX_VERIFIERS {
            return Err(ChainReadError::TooManyVerifiers {
                count: verifiers.len(),
            });
        }
        Ok(BountyState {
            block_number,
            block_timestamp,
            chain_id,
            bounty,
            status: BountyStatus::try_from(status)
                .map_err(|_| ChainReadError::UnknownStatus(status))?,
            bounty_id: Bytes32::from(bounty_id),
            round,
            solver: Address::from(solver),
            submission_hash: Bytes32::from(submission_hash),
            evidence_hash: Bytes32::from(evidence_hash),
            commitment: verifier_sdk::TermsCommitment {
                terms_hash: Bytes32::from(terms_hash),
                policy_hash: Bytes32::from(policy_hash),
                acceptance_criteria_hash: Bytes32::from(acceptance_criteria_hash),
                benchmark_hash: Bytes32::from(benchmark_hash),
                evidence_schema_hash: Bytes32::from(evidence_schema_hash),
            },
            verification_expires_at,
            verification_mode: VerificationMode::try_from(verification_mode)
                .map_err(|_| ChainReadError::UnknownMode(verification_mode))?,
            threshold,
            verifier_set_hash: Bytes32::from(verifier_set_hash),
            verifiers: verifiers.into_iter().map(Address::from).collect(),
        })
    }
}

impl ChainReader for RpcChainReader {
    async fn read_bounty(&self, bounty: Address) -> Result<BountyState, ChainReadError> {
        let (block_number, block_timestamp) = self.pinned_block().await?;
        self.read_bounty_pinned(bounty, block_number, block_timestamp)
            .await
    }

    async fn attestation_digest(
        &self,
        bounty: Address,
        block_number: u64,
        query: AttestationQuery,
    ) -> Result<Bytes32, ChainReadError> {
        let call = IBounty::attestationDigestCall {
            verifier: query.verifier.into(),
            passed: query.passed,
            responseHash: query.response_hash.into(),
            deadline: U256::from(query.deadline),
        };
        let digest = self
            .view(
                "attestationDigest()",
                bounty,
                BlockId::number(block_number),
                call,
            )
            .await?;
        Ok(Bytes32::from(digest))
    }

    async fn is_verifier(
        &self,
        bounty: Address,
        block_number: u64,
        account: Address,
    ) -> Result<bool, ChainReadError> {
        let call = IBounty::isVerifierCall {
            account: account.into(),
        };
        self.view("isVerifier()", bounty, BlockId::number(block_number), call)
            .await
    }
}
