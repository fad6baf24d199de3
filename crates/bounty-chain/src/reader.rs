//! Reading a bounty at one pinned block: the [`ChainReader`] trait and its JSON-RPC
//! implementation.

use std::future::Future;
use std::time::Duration;

use alloy::contract::{CallBuilder, CallDecoder};
use alloy::eips::BlockId;
use alloy::primitives::{Address as ChainAddress, B256, U256};
use alloy::providers::{Provider, RootProvider};
use alloy::rpc::client::RpcClient;
use verifier_sdk::{Address, Bytes32};

use crate::bindings::IBounty;
use crate::state::{BountyState, BountyStatus, VerificationMode};

/// Longest verifier list accepted from a contract. `threshold` is a `uint8` and must equal the
/// verifier count for this engine, so a longer list can never be served and only costs work.
pub const MAX_VERIFIERS: usize = 255;

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

/// Why reading a bounty failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainReadError {
    /// The RPC URL did not parse. The URL itself is withheld: it may carry an API key.
    #[error("rpc url is not a valid url")]
    InvalidUrl,
    /// The HTTP client could not be built.
    #[error("could not build the http client: {0}")]
    Client(String),
    /// A JSON-RPC request or a contract view failed. `detail` has the RPC URL redacted.
    #[error("reading {what} failed: {detail}")]
    Rpc {
        /// Which request failed (`eth_chainId`, `status()`, ...).
        what: &'static str,
        /// The underlying error, with the RPC URL replaced by `<rpc-url>`.
        detail: String,
    },
    /// No contract code at the bounty address at the pinned block.
    #[error("no contract code at {bounty} at block {block_number}")]
    NoContract {
        /// The address that was read.
        bounty: Address,
        /// The pinned block.
        block_number: u64,
    },
    /// `status()` returned a value the protocol does not define.
    #[error("status() returned unknown value {0}")]
    UnknownStatus(u8),
    /// `verificationMode()` returned a value the protocol does not define.
    #[error("verificationMode() returned unknown value {0}")]
    UnknownMode(u8),
    /// `verifiers()` returned more than [`MAX_VERIFIERS`] addresses.
    #[error("verifiers() returned {count} addresses, more than the limit of {MAX_VERIFIERS}")]
    TooManyVerifiers {
        /// How many addresses the contract returned.
        count: usize,
    },
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
    // Spellings of the RPC URL to scrub from error text: it may embed an API key.
    redact: Vec<String>,
}

impl std::fmt::Debug for RpcChainReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL is left out on purpose (it may embed an API key).
        f.debug_struct("RpcChainReader").finish_non_exhaustive()
    }
}

impl RpcChainReader {
    /// Connects lazily to `rpc_url`; every request is bounded by `timeout`.
    pub fn new(rpc_url: &str, timeout: Duration) -> Result<Self, ChainReadError> {
        let url: reqwest::Url = rpc_url.parse().map_err(|_| ChainReadError::InvalidUrl)?;
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| ChainReadError::Client(e.without_url().to_string()))?;
        let redact = vec![url.as_str().to_owned(), rpc_url.to_owned()];
        let provider = RootProvider::new(RpcClient::new_http_with_client(client, url));
        Ok(Self { provider, redact })
    }

    fn rpc_error(&self, what: &'static str, err: &dyn std::fmt::Display) -> ChainReadError {
        let mut detail = err.to_string();
        for secret in &self.redact {
            if !secret.is_empty() {
                detail = detail.replace(secret.as_str(), "<rpc-url>");
            }
        }
        ChainReadError::Rpc { what, detail }
    }

    /// Runs one contract view at `at`, with the error named after the view and redacted.
    async fn view<D>(
        &self,
        what: &'static str,
        at: BlockId,
        call: CallBuilder<&RootProvider, D>,
    ) -> Result<D::CallOutput, ChainReadError>
    where
        D: CallDecoder,
    {
        call.block(at)
            .call()
            .await
            .map_err(|e| self.rpc_error(what, &e))
    }
}

fn chain_address(a: &Address) -> ChainAddress {
    ChainAddress::from(*a.as_bytes())
}

fn sdk_address(a: ChainAddress) -> Address {
    Address::from_bytes(a.into_array())
}

fn sdk_bytes32(b: B256) -> Bytes32 {
    Bytes32::from_bytes(b.0)
}

impl ChainReader for RpcChainReader {
    async fn read_bounty(&self, bounty: Address) -> Result<BountyState, ChainReadError> {
        let block_number = self
            .provider
            .get_block_number()
            .await
            .map_err(|e| self.rpc_error("eth_blockNumber", &e))?;
        let at = BlockId::number(block_number);
        let address = chain_address(&bounty);

        let code = self
            .provider
            .get_code_at(address)
            .block_id(at)
            .await
            .map_err(|e| self.rpc_error("eth_getCode", &e))?;
        if code.is_empty() {
            return Err(ChainReadError::NoContract {
                bounty,
                block_number,
            });
        }

        let chain_id = async {
            self.provider
                .get_chain_id()
                .await
                .map_err(|e| self.rpc_error("eth_chainId", &e))
        };
        let c = IBounty::new(address, self.provider.clone());
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
            verification_expires_at,
            verification_mode,
            threshold,
            verifier_set_hash,
            verifiers,
        ) = tokio::try_join!(
            chain_id,
            self.view("status()", at, c.status()),
            self.view("bountyId()", at, c.bountyId()),
            self.view("round()", at, c.round()),
            self.view("solver()", at, c.solver()),
            self.view("submissionHash()", at, c.submissionHash()),
            self.view("evidenceHash()", at, c.evidenceHash()),
            self.view("policyHash()", at, c.policyHash()),
            self.view("termsHash()", at, c.termsHash()),
            self.view("verificationExpiresAt()", at, c.verificationExpiresAt()),
            self.view("verificationMode()", at, c.verificationMode()),
            self.view("threshold()", at, c.threshold()),
            self.view("verifierSetHash()", at, c.verifierSetHash()),
            self.view("verifiers()", at, c.verifiers()),
        )?;

        if verifiers.len() > MAX_VERIFIERS {
            return Err(ChainReadError::TooManyVerifiers {
                count: verifiers.len(),
            });
        }
        Ok(BountyState {
            block_number,
            chain_id,
            bounty,
            status: BountyStatus::from_u8(status).ok_or(ChainReadError::UnknownStatus(status))?,
            bounty_id: sdk_bytes32(bounty_id),
            round,
            solver: sdk_address(solver),
            submission_hash: sdk_bytes32(submission_hash),
            evidence_hash: sdk_bytes32(evidence_hash),
            policy_hash: sdk_bytes32(policy_hash),
            terms_hash: sdk_bytes32(terms_hash),
            verification_expires_at,
            verification_mode: VerificationMode::from_u8(verification_mode)
                .ok_or(ChainReadError::UnknownMode(verification_mode))?,
            threshold,
            verifier_set_hash: sdk_bytes32(verifier_set_hash),
            verifiers: verifiers.into_iter().map(sdk_address).collect(),
        })
    }

    async fn attestation_digest(
        &self,
        bounty: Address,
        block_number: u64,
        query: AttestationQuery,
    ) -> Result<Bytes32, ChainReadError> {
        let c = IBounty::new(chain_address(&bounty), self.provider.clone());
        let call = c.attestationDigest(
            chain_address(&query.verifier),
            query.passed,
            B256::from(*query.response_hash.as_bytes()),
            U256::from(query.deadline),
        );
        let digest = self
            .view("attestationDigest()", BlockId::number(block_number), call)
            .await?;
        Ok(sdk_bytes32(digest))
    }

    async fn is_verifier(
        &self,
        bounty: Address,
        block_number: u64,
        account: Address,
    ) -> Result<bool, ChainReadError> {
        let c = IBounty::new(chain_address(&bounty), self.provider.clone());
        let call = c.isVerifier(chain_address(&account));
        self.view("isVerifier()", BlockId::number(block_number), call)
            .await
    }
}
