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

use alloy::consensus::{SignableTransaction, TxEip1559, TxEnvelope};
use alloy::eips::eip2718::Decodable2718;
use alloy::network::TxSignerSync;
use alloy::primitives::Signature;
use keyfile::{KeySource, LoadedKey};
pub use pkcs11_key::{Pkcs11Config, Pkcs11Error, pin_source};
use serde_json::{Value, json};
use verifier_sdk::Address;

use bounty_chain::remote_signer::RemoteSignerRpc;
pub use bounty_chain::remote_signer::{REMOTE_TIMEOUT, RemoteError as RpcError};
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
        matches!(self, Self::Remote(RemoteError::Rpc(RpcError::Request(_))))
    }
}

/// A remote signer's failure.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The URL, the request, the answer's shape, a JSON-RPC error, or an address the signer
    /// does not list (`--from`).
    #[error(transparent)]
    Rpc(#[from] RpcError),
    /// The signed transaction is not the one asked for, or not signed by `--from`.
    #[error("the signed transaction {0}")]
    Altered(&'static str),
}

/// A JSON-RPC signer holding the gas key of one address.
#[derive(Debug)]
pub struct RemoteTxSigner {
    rpc: RemoteSignerRpc,
}

impl RemoteTxSigner {
    /// Checks the URL, then asks `eth_accounts` and requires `address` among them.
    pub async fn connect(url: &str, address: Address) -> Result<Self, RemoteError> {
        let rpc = RemoteSignerRpc::connect(url, address, MAX_ANSWER_BYTES).await?;
        Ok(Self { rpc })
    }

    /// `eth_signTransaction` of `tx` from this signer's address; the signature of the raw
    /// transaction it returns, kept only when that transaction is `tx` field for field and
    /// its signature recovers to the address over `tx`'s signing hash.
    pub async fn sign(&self, tx: &TxEip1559) -> Result<Signature, RemoteError> {
        let answer = self
            .rpc
            .call(
                "eth_signTransaction",
                json!([request(self.rpc.address(), tx)]),
            )
            .await?;
        // clef answers {raw, tx}; most others the raw bytes alone.
        let text = answer
            .as_str()
            .or_else(|| answer.get("raw").and_then(Value::as_str))
            .ok_or_else(|| RpcError::Answer("no raw signed transaction".into()))?;
        let raw = text
            .strip_prefix("0x")
            .and_then(|digits| hex::decode(digits).ok())
            .ok_or_else(|| RpcError::Answer("the raw transaction is not 0x hex".into()))?;
        let envelope = TxEnvelope::decode_2718(&mut raw.as_slice())
            .map_err(|_| RpcError::Answer("not a signed typed transaction".into()))?;
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
        if Address::from(recovered) != self.rpc.address() {
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
            Self::Remote(r) => r.rpc.address(),
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
