//! Finding the local node and Hardhat's public dev accounts.

use alloy::providers::{Provider, ProviderBuilder};
use alloy::signers::local::PrivateKeySigner;

/// Where the node listens unless [`RPC_URL_ENV`] says otherwise.
pub const DEFAULT_RPC_URL: &str = "http://127.0.0.1:8545";
/// Environment variable that overrides [`DEFAULT_RPC_URL`].
pub const RPC_URL_ENV: &str = "CHAIN_RPC_URL";
/// Chain id the local node is configured with (Base mainnet's, see tools/chain).
pub const CHAIN_ID: u64 = 8453;

/// Private keys of Hardhat's default mnemonic ("test test ... junk"), accounts #0..#9.
/// They are published in Hardhat's documentation and printed by every `hardhat node`; they
/// hold value on no real chain and exist only for tests.
pub const DEV_KEYS: [&str; 10] = [
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
    "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
    "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
    "0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba",
    "0x92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e",
    "0x4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356",
    "0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97",
    "0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6",
];

/// Why the kit could not do what a test asked.
#[derive(Debug, thiserror::Error)]
pub enum TestkitError {
    /// No node answers at the URL.
    #[error(
        "no local chain answers at {url} ({detail}); run scripts/services.sh (or tools/chain/up.sh) first"
    )]
    NodeDown {
        /// The URL that was tried.
        url: String,
        /// What went wrong.
        detail: String,
    },
    /// A node answers but is not the local 8453 chain.
    #[error(
        "the node at {url} has chain id {actual}, expected {CHAIN_ID}; run scripts/services.sh against a fresh port"
    )]
    WrongChain {
        /// The URL that was tried.
        url: String,
        /// What it answered.
        actual: u64,
    },
    /// [`DEV_KEYS`] has no such index.
    #[error("no hardhat dev key #{0}")]
    UnknownDevKey(usize),
    /// A JSON-RPC request failed.
    #[error("rpc {what} failed: {detail}")]
    Rpc {
        /// The request.
        what: &'static str,
        /// The error text.
        detail: String,
    },
    /// A transaction was mined but reverted.
    #[error("transaction {what} reverted (tx {tx_hash})")]
    Reverted {
        /// The call.
        what: &'static str,
        /// The mined transaction.
        tx_hash: String,
    },
}

impl TestkitError {
    pub(crate) fn rpc(what: &'static str, err: impl std::fmt::Display) -> Self {
        Self::Rpc {
            what,
            detail: err.to_string(),
        }
    }
}

/// The node URL tests use: `$CHAIN_RPC_URL` or [`DEFAULT_RPC_URL`].
pub fn rpc_url() -> String {
    std::env::var(RPC_URL_ENV).unwrap_or_else(|_| DEFAULT_RPC_URL.to_owned())
}

/// Hardhat dev account `index` (0..=9) as a signer.
pub fn dev_signer(index: usize) -> Result<PrivateKeySigner, TestkitError> {
    DEV_KEYS
        .get(index)
        .and_then(|k| k.parse().ok())
        .ok_or(TestkitError::UnknownDevKey(index))
}

/// Checks that the local node answers with chain id 8453; returns its URL.
pub async fn require_node() -> Result<String, TestkitError> {
    let url = rpc_url();
    let parsed = url.parse().map_err(|e| TestkitError::NodeDown {
        url: url.clone(),
        detail: format!("invalid url: {e}"),
    })?;
    let provider = ProviderBuilder::new().connect_http(parsed);
    let chain_id = provider
        .get_chain_id()
        .await
        .map_err(|e| TestkitError::NodeDown {
            url: url.clone(),
            detail: e.to_string(),
        })?;
    if chain_id != CHAIN_ID {
        return Err(TestkitError::WrongChain {
            url,
            actual: chain_id,
        });
    }
    Ok(url)
}
