//! The JSON-RPC connection to a remote signer (Web3Signer, clef, Ganache, a node's own
//! accounts) that the signer's attestation key and the keeper's gas key both use (issue #44
//! items 3 and 4): the URL checked, the account checked before anything else is read, and
//! every answer bounded in time and size.
//!
//! It holds no key and knows nothing of what is signed: the signer asks
//! `eth_signTypedData_v4`, the keeper `eth_signTransaction`, and each checks the answer
//! against what it asked for in its own `key` module.

use std::time::Duration;

use serde_json::{Value, json};
use verifier_sdk::Address;

/// The bound on every request to a remote signer.
pub const REMOTE_TIMEOUT: Duration = Duration::from_secs(30);

/// A remote signer's failure.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The URL is unusable (https, or http to a loopback host).
    #[error("--remote-signer: {0}")]
    Url(String),
    /// The request failed or timed out.
    #[error("request failed: {0}")]
    Request(String),
    /// The answer is not a JSON-RPC result of the expected shape.
    #[error("unusable answer: {0}")]
    Answer(String),
    /// The signer answered with a JSON-RPC error.
    #[error("refused: {0}")]
    Refused(String),
    /// The signer does not hold the key of the configured address (`--signer`, `--from`).
    #[error("the remote signer does not list {address} among its accounts (it lists {listed})")]
    NotItsAccount {
        /// The configured address.
        address: Address,
        /// What `eth_accounts` returned (truncated).
        listed: String,
    },
}

/// A JSON-RPC endpoint that lists the key of one address among its accounts.
#[derive(Debug)]
pub struct RemoteSignerRpc {
    url: reqwest::Url,
    address: Address,
    client: reqwest::Client,
    max_answer_bytes: usize,
}

impl RemoteSignerRpc {
    /// Checks the URL, then asks `eth_accounts` and requires `address` among them: a signer
    /// that answers for another address fails here, before any candidate is read. No answer
    /// longer than `max_answer_bytes` is parsed.
    pub async fn connect(
        url: &str,
        address: Address,
        max_answer_bytes: usize,
    ) -> Result<Self, RemoteError> {
        let url = platform_client::check_url(url).map_err(|e| RemoteError::Url(e.to_string()))?;
        let client = reqwest::Client::builder()
            .timeout(REMOTE_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| RemoteError::Request(e.to_string()))?;
        let rpc = Self {
            url,
            address,
            client,
            max_answer_bytes,
        };
        let accounts = rpc.call("eth_accounts", json!([])).await?;
        let listed: Vec<Address> = accounts
            .as_array()
            .ok_or_else(|| RemoteError::Answer("eth_accounts is not a list".into()))?
            .iter()
            .filter_map(|a| a.as_str().and_then(|s| s.parse().ok()))
            .collect();
        if !listed.contains(&address) {
            return Err(RemoteError::NotItsAccount {
                address,
                listed: accounts.to_string().chars().take(200).collect(),
            });
        }
        Ok(rpc)
    }

    /// The address the signer was checked to hold the key of.
    pub fn address(&self) -> Address {
        self.address
    }

    /// One JSON-RPC call: its `result`, or the signer's `error` as [`RemoteError::Refused`].
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, RemoteError> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let response = self
            .client
            .post(self.url.clone())
            .json(&body)
            .send()
            .await
            // The URL may carry a token in its path or user part: never in an error.
            .map_err(|e| RemoteError::Request(e.without_url().to_string()))?;
        let bytes = response
            .bytes()
            .await
            .map_err(|e| RemoteError::Request(e.without_url().to_string()))?;
        if bytes.len() > self.max_answer_bytes {
            return Err(RemoteError::Answer(format!(
                "{method}: more than {} bytes",
                self.max_answer_bytes
            )));
        }
        let answer: Value = serde_json::from_slice(&bytes)
            .map_err(|e| RemoteError::Answer(format!("{method}: {e}")))?;
        if let Some(err) = answer.get("error") {
            return Err(RemoteError::Refused(
                err.to_string().chars().take(256).collect(),
            ));
        }
        answer
            .get("result")
            .cloned()
            .ok_or_else(|| RemoteError::Answer(format!("{method}: no result")))
    }
}
