//! Deploying and driving `TestBounty` on the local node.

use alloy::network::EthereumWallet;
use alloy::primitives::{Address, B256, U256};
use alloy::providers::{DynProvider, Provider, ProviderBuilder};
use alloy::rpc::types::TransactionReceipt;
use alloy::signers::local::PrivateKeySigner;

use crate::attest::{AttestationFields, local_attestation_digest, sign_digest};
use crate::node::{CHAIN_ID, TestkitError, require_node};

// The generated event constructors take one argument per event field (11 for BountySettled).
#[allow(clippy::too_many_arguments)]
mod artifacts {
    alloy::sol!(
        /// `contracts/TestBounty.sol`, bound from its committed artifact (ABI and bytecode).
        #[sol(rpc)]
        #[derive(Debug)]
        TestBounty,
        "../../contracts/out/TestBounty.json"
    );

    alloy::sol!(
        /// `contracts/TestVerifierWallet.sol`: an ERC-1271 contract verifier owned by one key.
        #[sol(rpc)]
        #[derive(Debug)]
        TestVerifierWallet,
        "../../contracts/out/TestVerifierWallet.json"
    );
}

pub use artifacts::{TestBounty, TestVerifierWallet};

/// Status values of the contract, for the setters.
pub mod status {
    /// 0
    pub const OPEN: u8 = 0;
    /// 1
    pub const CLAIMABLE: u8 = 1;
    /// 2
    pub const CLAIMED: u8 = 2;
    /// 3
    pub const SUBMITTED: u8 = 3;
    /// 4
    pub const SETTLED: u8 = 4;
    /// 5
    pub const CANCELLED: u8 = 5;
}

/// Balance given to each fresh deployer account (hardhat_setBalance, so no dev account drains).
const DEPLOYER_BALANCE_WEI: u128 = 1_000_000_000_000_000_000_000; // 1000 ETH

/// Everything chosen about a bounty deployed in the Submitted state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BountyParams {
    /// `bountyId()`.
    pub bounty_id: B256,
    /// `round()`.
    pub round: u64,
    /// `solver()`, paid the reward on a passing settlement.
    pub solver: Address,
    /// `submissionHash()`.
    pub submission_hash: B256,
    /// `evidenceHash()`.
    pub evidence_hash: B256,
    /// `policyHash()`.
    pub policy_hash: B256,
    /// `termsHash()`.
    pub terms_hash: B256,
    /// `acceptanceCriteriaHash()`.
    pub acceptance_criteria_hash: B256,
    /// `benchmarkHash()`.
    pub benchmark_hash: B256,
    /// `evidenceSchemaHash()`.
    pub evidence_schema_hash: B256,
    /// `verificationExpiresAt()`, unix seconds (compare with the node's block time).
    pub verification_expires_at: u64,
    /// `verificationMode()`: 0 module, 1 signed quorum, 2 AI quorum.
    pub verification_mode: u8,
    /// `threshold()`; the contract refuses 0.
    pub threshold: u8,
    /// `verifiers()`, in policy order.
    pub verifiers: Vec<Address>,
    /// Wei escrowed at deployment and paid to the solver on settlement.
    pub reward: U256,
}

impl BountyParams {
    /// Signed-quorum bounty with `threshold = verifiers.len()`, a fresh solver address, bounty
    /// id `0xbb…bb`, round 7, submission/evidence/policy/terms hashes `0xcc…`/`0xdd…`/`0xee…`/
    /// `0xff…`, acceptance-criteria/benchmark/evidence-schema hashes `0xa1…`/`0xa2…`/`0xa3…`
    /// and a 0.001 ETH reward. A test serving a job for it sets all five terms hashes from
    /// that job.
    pub fn new(verifiers: Vec<Address>, verification_expires_at: u64) -> Self {
        Self {
            bounty_id: B256::repeat_byte(0xbb),
            round: 7,
            solver: PrivateKeySigner::random().address(),
            submission_hash: B256::repeat_byte(0xcc),
            evidence_hash: B256::repeat_byte(0xdd),
            policy_hash: B256::repeat_byte(0xee),
            terms_hash: B256::repeat_byte(0xff),
            acceptance_criteria_hash: B256::repeat_byte(0xa1),
            benchmark_hash: B256::repeat_byte(0xa2),
            evidence_schema_hash: B256::repeat_byte(0xa3),
            verification_expires_at,
            verification_mode: 1,
            threshold: u8::try_from(verifiers.len()).unwrap_or(u8::MAX),
            verifiers,
            reward: U256::from(1_000_000_000_000_000u64),
        }
    }

    fn config(&self) -> TestBounty::Config {
        TestBounty::Config {
            bountyId: self.bounty_id,
            round: self.round,
            solver: self.solver,
            submissionHash: self.submission_hash,
            evidenceHash: self.evidence_hash,
            policyHash: self.policy_hash,
            termsHash: self.terms_hash,
            acceptanceCriteriaHash: self.acceptance_criteria_hash,
            benchmarkHash: self.benchmark_hash,
            evidenceSchemaHash: self.evidence_schema_hash,
            verificationExpiresAt: self.verification_expires_at,
            verificationMode: self.verification_mode,
            threshold: self.threshold,
            verifiers: self.verifiers.clone(),
        }
    }
}

/// A connection to the local node with its own funded deployer account.
///
/// Each kit deploys from a fresh random account funded with `hardhat_setBalance`, so tests in
/// parallel (and other test processes sharing the node) never race on one account's nonce.
#[derive(Debug, Clone)]
pub struct Testkit {
    url: String,
    provider: DynProvider,
    deployer: Address,
}

impl Testkit {
    /// Checks the node (fails with "run scripts/services.sh" when absent) and creates a fresh
    /// funded deployer.
    pub async fn connect() -> Result<Self, TestkitError> {
        let deployer = PrivateKeySigner::random();
        let kit = Self::connect_as(deployer).await?;
        kit.set_balance(kit.deployer, U256::from(DEPLOYER_BALANCE_WEI))
            .await?;
        Ok(kit)
    }

    /// Like [`Testkit::connect`], on the node at `url` (a [`crate::PrivateNode`]).
    pub async fn connect_to(url: &str) -> Result<Self, TestkitError> {
        let kit = Self::connect_at(url.to_owned(), PrivateKeySigner::random())?;
        kit.set_balance(kit.deployer, U256::from(DEPLOYER_BALANCE_WEI))
            .await?;
        Ok(kit)
    }

    /// Like [`Testkit::connect`] but sends from `signer` (e.g. `dev_signer(0)`), unfunded.
    /// Tests sharing one signer must not send concurrently.
    pub async fn connect_as(signer: PrivateKeySigner) -> Result<Self, TestkitError> {
        let url = require_node().await?;
        Self::connect_at(url, signer)
    }

    fn connect_at(url: String, signer: PrivateKeySigner) -> Result<Self, TestkitError> {
        let deployer = signer.address();
        let parsed = url.parse().map_err(|e| TestkitError::NodeDown {
            url: url.clone(),
            detail: format!("invalid url: {e}"),
        })?;
        let provider = ProviderBuilder::new()
            .wallet(EthereumWallet::from(signer))
            .connect_http(parsed)
            .erased();
        Ok(Self {
            url,
            provider,
            deployer,
        })
    }

    /// The node URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A provider that signs with the deployer account.
    pub fn provider(&self) -> &DynProvider {
        &self.provider
    }

    /// The account that deploys and owns the test contracts.
    pub fn deployer(&self) -> Address {
        self.deployer
    }

    /// Sets an account's balance directly (Hardhat's `hardhat_setBalance`).
    pub async fn set_balance(&self, account: Address, wei: U256) -> Result<(), TestkitError> {
        self.provider
            .raw_request::<_, bool>("hardhat_setBalance".into(), (account, wei))
            .await
            .map_err(|e| TestkitError::rpc("hardhat_setBalance", e))?;
        Ok(())
    }

    /// A fresh random account holding `wei`, for tests that send their own transactions.
    pub async fn fund_new_account(&self, wei: U256) -> Result<PrivateKeySigner, TestkitError> {
        let signer = PrivateKeySigner::random();
        self.set_balance(signer.address(), wei).await?;
        Ok(signer)
    }

    /// Balance of `account` at the latest block.
    pub async fn balance(&self, account: Address) -> Result<U256, TestkitError> {
        self.provider
            .get_balance(account)
            .await
            .map_err(|e| TestkitError::rpc("eth_getBalance", e))
    }

    /// Timestamp of the latest block (the node's clock, which `block.timestamp` follows).
    pub async fn latest_timestamp(&self) -> Result<u64, TestkitError> {
        let block = self
            .provider
            .get_block_by_number(alloy::eips::BlockNumberOrTag::Latest)
            .await
            .map_err(|e| TestkitError::rpc("eth_getBlockByNumber", e))?
            .ok_or(TestkitError::Rpc {
                what: "eth_getBlockByNumber",
                detail: "no latest block".into(),
            })?;
        Ok(block.header.timestamp)
    }

    /// Deploys a bounty in the Submitted state with `params` (the reward is sent along).
    pub async fn deploy_bounty(
        &self,
        params: &BountyParams,
    ) -> Result<DeployedBounty, TestkitError> {
        let address = TestBounty::deploy_builder(self.provider.clone(), params.config())
            .value(params.reward)
            .deploy()
            .await
            .map_err(|e| TestkitError::rpc("deploy TestBounty", e))?;
        Ok(DeployedBounty {
            contract: TestBounty::new(address, self.provider.clone()),
        })
    }

    /// Deploys an ERC-1271 verifier wallet that accepts signatures by `owner`.
    pub async fn deploy_verifier_wallet(&self, owner: Address) -> Result<Address, TestkitError> {
        TestVerifierWallet::deploy_builder(self.provider.clone(), owner)
            .deploy()
            .await
            .map_err(|e| TestkitError::rpc("deploy TestVerifierWallet", e))
    }
}

/// A deployed `TestBounty`, driven by its owner (the kit's deployer).
#[derive(Debug, Clone)]
pub struct DeployedBounty {
    contract: TestBounty::TestBountyInstance<DynProvider>,
}

async fn mined(
    what: &'static str,
    call: alloy::contract::CallBuilder<&DynProvider, impl alloy::contract::CallDecoder>,
) -> Result<TransactionReceipt, TestkitError> {
    let receipt = call
        .send()
        .await
        .map_err(|e| TestkitError::rpc(what, e))?
        .get_receipt()
        .await
        .map_err(|e| TestkitError::rpc(what, e))?;
    if !receipt.status() {
        return Err(TestkitError::Reverted {
            what,
            tx_hash: receipt.transaction_hash.to_string(),
        });
    }
    Ok(receipt)
}

impl DeployedBounty {
    /// The bounty contract's address.
    pub fn address(&self) -> Address {
        *self.contract.address()
    }

    /// The typed contract instance, for calls the kit does not wrap.
    pub fn contract(&self) -> &TestBounty::TestBountyInstance<DynProvider> {
        &self.contract
    }

    /// `status()` at the latest block.
    pub async fn status(&self) -> Result<u8, TestkitError> {
        self.contract
            .status()
            .call()
            .await
            .map_err(|e| TestkitError::rpc("status()", e))
    }

    /// Re-initializes every field and returns the bounty to Submitted; `params.reward` is added.
    pub async fn setup(&self, params: &BountyParams) -> Result<TransactionReceipt, TestkitError> {
        mined(
            "setup",
            self.contract.setup(params.config()).value(params.reward),
        )
        .await
    }

    /// Sets `status()` (see [`status`] for the values).
    pub async fn set_status(&self, value: u8) -> Result<TransactionReceipt, TestkitError> {
        mined("setStatus", self.contract.setStatus(value)).await
    }

    /// Replaces the verifier list and threshold; the stored set hash follows the list.
    pub async fn set_verifiers(
        &self,
        verifiers: Vec<Address>,
        threshold: u8,
    ) -> Result<TransactionReceipt, TestkitError> {
        mined(
            "setVerifiers",
            self.contract.setVerifiers(verifiers, threshold),
        )
        .await
    }

    /// Appends to the verifier list (the set hash follows); for lists too long for one
    /// transaction's gas cap.
    pub async fn add_verifiers(
        &self,
        more: Vec<Address>,
    ) -> Result<TransactionReceipt, TestkitError> {
        mined("addVerifiers", self.contract.addVerifiers(more)).await
    }

    /// Sets `threshold()` alone.
    pub async fn set_threshold(&self, threshold: u8) -> Result<TransactionReceipt, TestkitError> {
        mined("setThreshold", self.contract.setThreshold(threshold)).await
    }

    /// Overwrites the stored verifier set hash alone (the list stays).
    pub async fn set_verifier_set_hash(
        &self,
        hash: B256,
    ) -> Result<TransactionReceipt, TestkitError> {
        mined("setVerifierSetHash", self.contract.setVerifierSetHash(hash)).await
    }

    /// Sets submission, evidence, policy and terms hashes.
    pub async fn set_hashes(
        &self,
        submission: B256,
        evidence: B256,
        policy: B256,
        terms: B256,
    ) -> Result<TransactionReceipt, TestkitError> {
        mined(
            "setHashes",
            self.contract.setHashes(submission, evidence, policy, terms),
        )
        .await
    }

    /// Sets the terms, acceptance-criteria, benchmark and evidence-schema hashes.
    pub async fn set_terms_hashes(
        &self,
        terms: B256,
        acceptance_criteria: B256,
        benchmark: B256,
        evidence_schema: B256,
    ) -> Result<TransactionReceipt, TestkitError> {
        mined(
            "setTermsHashes",
            self.contract
                .setTermsHashes(terms, acceptance_criteria, benchmark, evidence_schema),
        )
        .await
    }

    /// Sets `verificationExpiresAt()`.
    pub async fn set_verification_expires_at(
        &self,
        expiry: u64,
    ) -> Result<TransactionReceipt, TestkitError> {
        mined(
            "setVerificationExpiresAt",
            self.contract.setVerificationExpiresAt(expiry),
        )
        .await
    }

    /// Sets `verificationMode()`.
    pub async fn set_verification_mode(
        &self,
        mode: u8,
    ) -> Result<TransactionReceipt, TestkitError> {
        mined(
            "setVerificationMode",
            self.contract.setVerificationMode(mode),
        )
        .await
    }

    /// Sets `round()`.
    pub async fn set_round(&self, round: u64) -> Result<TransactionReceipt, TestkitError> {
        mined("setRound", self.contract.setRound(round)).await
    }

    /// Sets `bountyId()`.
    pub async fn set_bounty_id(&self, bounty_id: B256) -> Result<TransactionReceipt, TestkitError> {
        mined("setBountyId", self.contract.setBountyId(bounty_id)).await
    }

    /// Sets `solver()`.
    pub async fn set_solver(&self, solver: Address) -> Result<TransactionReceipt, TestkitError> {
        mined("setSolver", self.contract.setSolver(solver)).await
    }

    /// The digest inputs from the contract's stored values at the latest block.
    pub async fn attestation_fields(
        &self,
        verifier: Address,
        passed: bool,
        response_hash: B256,
        deadline: U256,
    ) -> Result<AttestationFields, TestkitError> {
        let c = &self.contract;
        let rpc = |what| move |e| TestkitError::rpc(what, e);
        Ok(AttestationFields {
            chain_id: CHAIN_ID,
            bounty: self.address(),
            bounty_id: c.bountyId().call().await.map_err(rpc("bountyId()"))?,
            round: c.round().call().await.map_err(rpc("round()"))?,
            verifier,
            submission_hash: c
                .submissionHash()
                .call()
                .await
                .map_err(rpc("submissionHash()"))?,
            evidence_hash: c
                .evidenceHash()
                .call()
                .await
                .map_err(rpc("evidenceHash()"))?,
            policy_hash: c.policyHash().call().await.map_err(rpc("policyHash()"))?,
            passed,
            response_hash,
            deadline,
        })
    }

    /// An attestation for `verifier` signed by `key` over the locally computed digest of the
    /// contract's current values. `verifier` differs from `key`'s address for ERC-1271
    /// wallets and for wrong-signer tests.
    pub async fn sign_attestation(
        &self,
        key: &PrivateKeySigner,
        verifier: Address,
        passed: bool,
        response_hash: B256,
        deadline: U256,
    ) -> Result<TestBounty::Attestation, TestkitError> {
        let fields = self
            .attestation_fields(verifier, passed, response_hash, deadline)
            .await?;
        let signature = sign_digest(key, local_attestation_digest(&fields))
            .map_err(|e| TestkitError::rpc("sign attestation", e))?;
        Ok(TestBounty::Attestation {
            verifier,
            passed,
            responseHash: response_hash,
            deadline,
            signature,
        })
    }

    /// Simulates `settleWithAttestations` (eth_call); the raw error keeps the revert data for
    /// [`crate::revert_reason`].
    pub async fn simulate_settle(
        &self,
        attestations: Vec<TestBounty::Attestation>,
    ) -> Result<(), alloy::contract::Error> {
        self.contract
            .settleWithAttestations(attestations)
            .call()
            .await
            .map(|_| ())
    }

    /// Sends `settleWithAttestations` and waits for the receipt; errors on a revert.
    pub async fn settle(
        &self,
        attestations: Vec<TestBounty::Attestation>,
    ) -> Result<TransactionReceipt, TestkitError> {
        mined(
            "settleWithAttestations",
            self.contract.settleWithAttestations(attestations),
        )
        .await
    }
}
