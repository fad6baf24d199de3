//! Where a signature comes from: the one place a key backend is picked (issue #44 item 3).
//!
//! [`AttestationKey`] is either the key of today, loaded into zeroizing memory from an
//! environment variable or a 0600 file ([`LoadedKey`]), or a remote signer this process
//! never sees the key of: a JSON-RPC endpoint answering `eth_signTypedData_v4` (Web3Signer,
//! clef, a node's own accounts). Whatever the backend, the signature comes back as 65 bytes
//! with low `s` and `v` ∈ {27, 28}, and the sign step still recovers it over the locally
//! computed digest and refuses any that does not recover to `--signer`: a remote signer that
//! signed other typed data, or with another key, produces nothing usable.
//!
//! A remote signer is checked before any candidate is read: it must list `--signer` among its
//! `eth_accounts`, or the run fails closed (exit 78).
//!
//! The third backend is a PKCS#11 token ([`pkcs11`]): the key is generated in the token and
//! signs there; this process computes only the low-`s` form and the recovery id. A token
//! without the named key, or whose key is for another address, fails closed the same way.

pub mod pkcs11;

use keyfile::LoadedKey;
use serde_json::{Value, json};
use verifier_sdk::attest::{DOMAIN_NAME, DOMAIN_VERSION};
use verifier_sdk::{Address, AttestationFields};

/// The largest answer read from a remote signer.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// secp256k1's group order n, big-endian: a high `s` is replaced by `n - s`.
const ORDER: [u8; 32] = [
    0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE,
    0xBA, 0xAE, 0xDC, 0xE6, 0xAF, 0x48, 0xA0, 0x3B, 0xBF, 0xD2, 0x5E, 0x8C, 0xD0, 0x36, 0x41, 0x41,
];
/// n / 2, big-endian.
const HALF_ORDER: [u8; 32] = [
    0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
    0x5D, 0x57, 0x6E, 0x73, 0x57, 0xA4, 0x50, 0x1D, 0xDF, 0xE9, 0x2F, 0x46, 0x68, 0x1B, 0x20, 0xA0,
];

/// Why a signature could not be made.
#[derive(Debug, thiserror::Error)]
pub enum KeySignError {
    /// The local key failed to sign.
    #[error("{0}")]
    Local(#[source] keyfile::KeyError),
    /// The remote signer failed or answered something unusable.
    #[error("remote signer: {0}")]
    Remote(#[from] RemoteError),
    /// The PKCS#11 token failed to sign or returned an unusable signature.
    #[error("{0}")]
    Pkcs11(#[from] pkcs11::Pkcs11Error),
}

use bounty_chain::remote_signer::RemoteSignerRpc;
pub use bounty_chain::remote_signer::{REMOTE_TIMEOUT, RemoteError};

/// A JSON-RPC signer holding the key of one address.
#[derive(Debug)]
pub struct RemoteSigner {
    rpc: RemoteSignerRpc,
}

impl RemoteSigner {
    /// Checks the URL, then asks `eth_accounts` and requires `address` among them: a signer
    /// that answers for another address fails here, before any candidate is read.
    pub async fn connect(url: &str, address: Address) -> Result<Self, RemoteError> {
        let rpc = RemoteSignerRpc::connect(url, address, MAX_ANSWER_BYTES).await?;
        Ok(Self { rpc })
    }

    /// `eth_signTypedData_v4` of the attestation: 65 bytes with low `s` and `v` ∈ {27, 28}.
    pub async fn sign_attestation(
        &self,
        chain_id: u64,
        fields: &AttestationFields,
    ) -> Result<[u8; 65], RemoteError> {
        let typed = typed_data(chain_id, fields);
        let answer = self
            .rpc
            .call(
                "eth_signTypedData_v4",
                json!([self.rpc.address().to_string(), typed]),
            )
            .await?;
        let text = answer
            .as_str()
            .ok_or_else(|| RemoteError::Answer("the signature is not a string".into()))?;
        let digits = text
            .strip_prefix("0x")
            .filter(|d| d.len() == 130)
            .ok_or_else(|| RemoteError::Answer("the signature is not 65 bytes of 0x hex".into()))?;
        let mut raw = [0u8; 65];
        hex::decode_to_slice(digits, &mut raw)
            .map_err(|_| RemoteError::Answer("the signature is not hex".into()))?;
        normalize(&mut raw)
            .ok_or_else(|| RemoteError::Answer("the signature's v is not 0, 1, 27 or 28".into()))?;
        Ok(raw)
    }
}

/// Brings a signature to the form the contract takes: `v` ∈ {27, 28}, and a high `s` replaced
/// by `n - s` with `v` flipped (the same signature, as ecrecover reads it). `None` for a `v`
/// that is no recovery id.
fn normalize(raw: &mut [u8; 65]) -> Option<()> {
    let mut v = match raw[64] {
        0 | 1 => raw[64] + 27,
        27 | 28 => raw[64],
        _ => return None,
    };
    let mut s = [0u8; 32];
    s.copy_from_slice(&raw[32..64]);
    if s > HALF_ORDER {
        // n - s, big-endian, with borrow.
        let mut out = [0u8; 32];
        let mut borrow = 0i16;
        for i in (0..32).rev() {
            let mut d = i16::from(ORDER[i]) - i16::from(s[i]) - borrow;
            borrow = i16::from(d < 0);
            if d < 0 {
                d += 256;
            }
            out[i] = u8::try_from(d).ok()?;
        }
        raw[32..64].copy_from_slice(&out);
        v = if v == 27 { 28 } else { 27 };
    }
    raw[64] = v;
    Some(())
}

/// The EIP-712 typed data of an attestation, as `eth_signTypedData_v4` takes it: the same
/// domain and type the digest is computed over (`verifier_sdk::attest`).
pub fn typed_data(chain_id: u64, f: &AttestationFields) -> Value {
    let field = |name: &str, ty: &str| json!({"name": name, "type": ty});
    json!({
        "types": {
            "EIP712Domain": [
                field("name", "string"),
                field("version", "string"),
                field("chainId", "uint256"),
                field("verifyingContract", "address"),
            ],
            "VerificationAttestation": [
                field("bounty", "address"),
                field("bountyId", "bytes32"),
                field("round", "uint64"),
                field("verifier", "address"),
                field("submissionHash", "bytes32"),
                field("evidenceHash", "bytes32"),
                field("policyHash", "bytes32"),
                field("passed", "bool"),
                field("responseHash", "bytes32"),
                field("deadline", "uint256"),
            ],
        },
        "primaryType": "VerificationAttestation",
        "domain": {
            "name": DOMAIN_NAME,
            "version": DOMAIN_VERSION,
            "chainId": chain_id,
            "verifyingContract": f.bounty.to_string(),
        },
        "message": {
            "bounty": f.bounty.to_string(),
            "bountyId": f.bounty_id.to_string(),
            // Decimal strings: a u64 round or deadline past 2^53 survives every JSON reader.
            "round": f.round.to_string(),
            "verifier": f.verifier.to_string(),
            "submissionHash": f.submission_hash.to_string(),
            "evidenceHash": f.evidence_hash.to_string(),
            "policyHash": f.policy_hash.to_string(),
            "passed": f.passed,
            "responseHash": f.response_hash.to_string(),
            "deadline": f.deadline.to_string(),
        },
    })
}

/// The key an attestation is signed with; picked once, in `signer sign`'s setup.
#[derive(Debug)]
pub enum AttestationKey {
    /// A key in this process's zeroizing memory (`--key-env`, `--key-file`).
    Local(LoadedKey),
    /// A JSON-RPC signer holding the key (`--remote-signer`).
    Remote(RemoteSigner),
    /// A PKCS#11 token holding the key (`--pkcs11-module`).
    Pkcs11(pkcs11::Pkcs11Signer),
}

impl From<LoadedKey> for AttestationKey {
    fn from(key: LoadedKey) -> Self {
        Self::Local(key)
    }
}

impl AttestationKey {
    /// The address the key signs as.
    pub fn address(&self) -> Address {
        match self {
            Self::Local(k) => Address::from(k.address()),
            Self::Remote(r) => r.rpc.address(),
            Self::Pkcs11(p) => p.address(),
        }
    }

    /// Signs the attestation `fields` on `chain_id`, whose EIP-712 digest is `digest`: the
    /// local key and the token sign the digest, the remote signer the typed data it is the
    /// digest of.
    pub async fn sign(
        &self,
        chain_id: u64,
        fields: &AttestationFields,
        digest: &verifier_sdk::Bytes32,
    ) -> Result<[u8; 65], KeySignError> {
        match self {
            Self::Local(k) => k
                .sign_prehash(digest.as_bytes())
                .map_err(KeySignError::Local),
            Self::Remote(r) => Ok(r.sign_attestation(chain_id, fields).await?),
            Self::Pkcs11(p) => Ok(p.sign_digest(digest)?),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_high_s_is_folded_to_the_low_half_with_v_flipped() {
        let mut raw = [0u8; 65];
        raw[0] = 1;
        // s = n - 1 (high) becomes 1, v 27 becomes 28.
        raw[32..64].copy_from_slice(&ORDER);
        raw[63] -= 1;
        raw[64] = 27;
        normalize(&mut raw).unwrap();
        let mut one = [0u8; 32];
        one[31] = 1;
        assert_eq!(&raw[32..64], &one);
        assert_eq!(raw[64], 28);
        // A low s is kept; v 0/1 become 27/28; anything else is refused.
        let mut low = [0u8; 65];
        low[63] = 5;
        low[64] = 1;
        normalize(&mut low).unwrap();
        assert_eq!((low[63], low[64]), (5, 28));
        low[64] = 2;
        assert!(normalize(&mut low).is_none());
    }
}
