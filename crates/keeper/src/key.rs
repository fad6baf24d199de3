//! Where the keeper's transaction signatures come from: the one place a gas key backend is
//! picked (issue #44 item 4), with the signer's backends and flags.
//!
//! [`GasKey`] is the key of today, loaded into zeroizing memory from an environment variable
//! or a 0600 file; a remote signer holding the key, asked over JSON-RPC `eth_signTransaction`
//! (clef, Web3Signer, Ganache); or a secp256k1 key inside a PKCS#11 token that signs the
//! transaction's signing hash there (`pkcs11-key`: low `s` and the recovery id computed here,
//! the private key never read). Whatever the backend, the keeper builds the transaction itself
//! and keeps only a signature that recovers to the configured address over that transaction's
//! own signing hash: a remote signer that changed a field, or signed with another key,
//! produces nothing that is sent.
//!
//! Every backend is opened and compared with `--from` before anything is read, planned or
//! sent: a token without the named key, or a signer that does not list `--from` among its
//! accounts, fails closed (exit 78).

use std::time::Duration;

use alloy::consensus::{SignableTransaction, TxEip1559, TxEnvelope};
use alloy::eips::eip2718::Decodable2718;
use alloy::network::TxSignerSync;
use alloy::primitives::Signature;
use keyfile::{KeySource, LoadedKey};
pub use pkcs11_key::{Pkcs11Config, Pkcs11Error, pin_source};
use serde_json::{Value, json};
use verifier_sdk::Address;

/// The bound on every request to a remote signer.
pub const REMOTE_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest answer read from a remote signer.
const MAX_ANSWER_BYTES: usize = 256 * 1024;

/// Which backend holds the gas key, as the command line named it.
#[derive(Debug, Clone)]
pub enum GasKeySource {
    /// `--key-env` / `--key-file`.
    Local(KeySource),
    /// `--remote-signer URL`.
    Remote(String),
    /// `--pkcs11-module` and its token, label and PIN.
    Pkcs11(Pkcs11Config),
}

/// The gas key's backend and the address it must be (`--from`).
#[derive(Debug, Clone)]
pub struct GasKeyConfig {
    /// Where the key is.
    pub source: GasKeySource,
    /// `--from`: required for a remote signer and a token, a check on a local key.
    pub from: Option<Address>,
}

impl From<KeySource> for GasKeyConfig {
    fn from(source: KeySource) -> Self {
        Self {
            source: GasKeySource::Local(source),
            from: None,
        }
    }
}

/// Why the gas key could not be opened or could not sign. No variant carries key material.
#[derive(Debug, thiserror::Error)]
pub enum GasKeyError {
    /// The local key could not be loaded.
    #[error(transparent)]
    Local(#[from] keyfile::KeyError),
    /// The remote signer failed or answered something unusable.
    #[error("remote signer: {0}")]
    Remote(#[from] RemoteError),
    /// The PKCS#11 module, token, PIN or key is unusable, or the token failed to sign.
    #[error(transparent)]
    Pkcs11(#[from] Pkcs11Error),
    /// A remote signer or a token without `--from`.
    #[error("--remote-signer and --pkcs11-module need --from ADDRESS")]
    NoFrom,
    /// The key is for another address than `--from`.
    #[error("the gas key's address {key} is not --from {from}")]
    Mismatch {
        /// The key's address.
        key: Address,
        /// `--from`.
        from: Address,
    },
    /// Signing with the local key failed.
    #[error("signing the transaction failed")]
    Sign,
}

impl GasKeyError {
    /// Whether the backend did not answer (a later run may sign), rather than a configuration
    /// or key to fix.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Remote(RemoteError::Request(_)))
    }
}

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
    /// The signer does not hold the key of `--from`.
    #[error("the remote signer does not list {from} among its accounts (it lists {listed})")]
    NotItsAccount {
        /// `--from`.
        from: Address,
        /// What `eth_accounts` returned (truncated).
        listed: String,
    },
    /// The signed transaction is not the one asked for, or not signed by `--from`.
    #[error("the signed transaction {0}")]
    Altered(&'static str),
}

/// A JSON-RPC signer holding the gas key of one address.
#[derive(Debug)]
pub struct RemoteTxSigner {
    url: reqwest::Url,
    address: Address,
    client: reqwest::Client,
}

impl RemoteTxSigner {
    /// Checks the URL, then asks `eth_accounts` and requires `address` among them.
    pub async fn connect(url: &str, address: Address) -> Result<Self, RemoteError> {
        let url = platform_client::check_url(url).map_err(|e| RemoteError::Url(e.to_string()))?;
        let client = reqwest::Client::builder()
            .timeout(REMOTE_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| RemoteError::Request(e.to_string()))?;
        let signer = Self {
            url,
            address,
            client,
        };
        let accounts = signer.call("eth_accounts", json!([])).await?;
        let listed: Vec<Address> = accounts
            .as_array()
            .ok_or_else(|| RemoteError::Answer("eth_accounts is not a list".into()))?
            .iter()
            .filter_map(|a| a.as_str().and_then(|s| s.parse().ok()))
            .collect();
        if !listed.contains(&address) {
            return Err(RemoteError::NotItsAccount {
                from: address,
                listed: accounts.to_string().chars().take(200).collect(),
            });
        }
        Ok(signer)
    }

    async fn call(&self, method: &str, params: Value) -> Result<Value, RemoteError> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let response = self
            .client
            .post(self.url.clone())
            .json(&body)
            .send()
            .await
            .map_err(|e| RemoteError::Request(e.without_url().to_string()))?;
        let bytes = response
            .bytes()
            .await
            .map_err(|e| RemoteError::Request(e.without_url().to_string()))?;
        if bytes.len() > MAX_ANSWER_BYTES {
            return Err(RemoteError::Answer(format!(
                "{method}: more than {MAX_ANSWER_BYTES} bytes"
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

    /// `eth_signTransaction` of `tx` from this signer's address; the signature of the raw
    /// transaction it returns, kept only when that transaction is `tx` field for field and
    /// its signature recovers to the address over `tx`'s signing hash.
    pub async fn sign(&self, tx: &TxEip1559) -> Result<Signature, RemoteError> {
        let answer = self
            .call("eth_signTransaction", json!([request(self.address, tx)]))
            .await?;
        // clef answers {raw, tx}; most others the raw bytes alone.
        let text = answer
            .as_str()
            .or_else(|| answer.get("raw").and_then(Value::as_str))
            .ok_or_else(|| RemoteError::Answer("no raw signed transaction".into()))?;
        let raw = text
            .strip_prefix("0x")
            .and_then(|digits| hex::decode(digits).ok())
            .ok_or_else(|| RemoteError::Answer("the raw transaction is not 0x hex".into()))?;
        let envelope = TxEnvelope::decode_2718(&mut raw.as_slice())
            .map_err(|_| RemoteError::Answer("not a signed typed transaction".into()))?;
        let TxEnvelope::Eip1559(signed) = envelope else {
            return Err(RemoteError::Altered("is not EIP-1559"));
        };
        if signed.tx() != tx {
            return Err(RemoteError::Altered("differs from the one asked for"));
        }
        let signature = *signed.signature();
        // The same signature with s folded into the low half, as nodes require.
        let signature = signature.normalize_s().unwrap_or(signature);
        let recovered = signature
            .recover_address_from_prehash(&tx.signature_hash())
            .map_err(|_| RemoteError::Altered("has no recoverable signature"))?;
        if Address::from(recovered) != self.address {
            return Err(RemoteError::Altered("is signed by another key"));
        }
        Ok(signature)
    }
}

/// The `eth_signTransaction` request for `tx`: every field given, so the signer fills in
/// nothing of its own (nonce, fees, gas, chain id).
fn request(from: Address, tx: &TxEip1559) -> Value {
    let to = match tx.to {
        alloy::primitives::TxKind::Call(to) => Some(to.to_string()),
        alloy::primitives::TxKind::Create => None,
    };
    json!({
        "from": from.to_string(),
        "to": to,
        "type": "0x2",
        "chainId": format!("{:#x}", tx.chain_id),
        "nonce": format!("{:#x}", tx.nonce),
        "gas": format!("{:#x}", tx.gas_limit),
        "maxFeePerGas": format!("{:#x}", tx.max_fee_per_gas),
        "maxPriorityFeePerGas": format!("{:#x}", tx.max_priority_fee_per_gas),
        "value": format!("{:#x}", tx.value),
        "data": format!("0x{}", hex::encode(&tx.input)),
        "input": format!("0x{}", hex::encode(&tx.input)),
        "accessList": [],
    })
}

/// Generates a gas key in the token `cfg` names (refused when the label is taken); its
/// address, to fund and to give `--from`.
pub fn generate(cfg: &Pkcs11Config) -> Result<Address, Pkcs11Error> {
    pkcs11_key::generate(cfg).map(Address::from_bytes)
}

/// The keeper's transaction key; picked once, by [`GasKey::open`].
#[derive(Debug)]
pub enum GasKey {
    /// A key in this process's zeroizing memory (`--key-env`, `--key-file`).
    Local(LoadedKey),
    /// A JSON-RPC signer holding the key (`--remote-signer`).
    Remote(RemoteTxSigner),
    /// A PKCS#11 token holding the key (`--pkcs11-module`).
    Pkcs11(pkcs11_key::Pkcs11Key),
}

impl GasKey {
    /// Opens the backend `cfg` names and requires its address to be `--from` (when given; a
    /// remote signer and a token need it).
    pub async fn open(cfg: &GasKeyConfig) -> Result<Self, GasKeyError> {
        let key = match &cfg.source {
            GasKeySource::Local(source) => Self::Local(LoadedKey::load(source)?),
            GasKeySource::Remote(url) => {
                let from = cfg.from.ok_or(GasKeyError::NoFrom)?;
                Self::Remote(RemoteTxSigner::connect(url, from).await?)
            }
            GasKeySource::Pkcs11(p) => {
                cfg.from.ok_or(GasKeyError::NoFrom)?;
                Self::Pkcs11(pkcs11_key::Pkcs11Key::open(p)?)
            }
        };
        if let Some(from) = cfg.from
            && key.address() != from
        {
            return Err(GasKeyError::Mismatch {
                key: key.address(),
                from,
            });
        }
        Ok(key)
    }

    /// The address the key signs as: the sender of every transaction.
    pub fn address(&self) -> Address {
        match self {
            Self::Local(k) => Address::from(k.address()),
            Self::Remote(r) => r.address,
            Self::Pkcs11(p) => Address::from_bytes(p.address()),
        }
    }

    /// Signs `tx`; the signature recovers to [`GasKey::address`] over `tx`'s signing hash.
    pub async fn sign(&self, tx: &TxEip1559) -> Result<Signature, GasKeyError> {
        match self {
            Self::Local(k) => k
                .signer()
                .sign_transaction_sync(&mut tx.clone())
                .map_err(|_| GasKeyError::Sign),
            Self::Remote(r) => Ok(r.sign(tx).await?),
            Self::Pkcs11(p) => {
                let raw = p.sign_prehash(&tx.signature_hash().0)?;
                let (rs, id) = raw.split_at(64);
                Ok(Signature::from_bytes_and_parity(rs, id == [1]))
            }
        }
    }
}
