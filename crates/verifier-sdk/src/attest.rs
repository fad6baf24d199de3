//! EIP-712 attestation digest, verifier-set hash and signature checks (PROTOCOL §6).
//!
//! The digest is computed locally so the signer can compare it with the contract's
//! `attestationDigest` before signing, and the keeper can recover every signer before
//! relaying. No key material ever enters this module.

use std::borrow::Cow;

use alloy_primitives::{B256, U256, keccak256};
use alloy_sol_types::{Eip712Domain, SolStruct, SolValue, sol};

use crate::job::ValidatedJob;
use crate::receipt::ValidatedOutcome;
use crate::types::{Address, Bytes32};

/// EIP-712 domain name.
pub const DOMAIN_NAME: &str = "Agent Bounties";
/// EIP-712 domain version.
pub const DOMAIN_VERSION: &str = "1";

sol! {
    /// The EIP-712 primary type, field for field as the contract hashes it.
    #[derive(Debug, PartialEq, Eq)]
    struct VerificationAttestation {
        address bounty;
        bytes32 bountyId;
        uint64 round;
        address verifier;
        bytes32 submissionHash;
        bytes32 evidenceHash;
        bytes32 policyHash;
        bool passed;
        bytes32 responseHash;
        uint256 deadline;
    }
}

/// Everything one attestation signs, in sdk types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttestationFields {
    /// The bounty contract (also the EIP-712 verifying contract).
    pub bounty: Address,
    /// Stored bounty id.
    pub bounty_id: Bytes32,
    /// Stored round.
    pub round: u64,
    /// The signing verifier.
    pub verifier: Address,
    /// Stored submission hash (= `artifact_hash`).
    pub submission_hash: Bytes32,
    /// Stored evidence hash.
    pub evidence_hash: Bytes32,
    /// Stored policy hash (= `terms.policy_hash`).
    pub policy_hash: Bytes32,
    /// The verdict.
    pub passed: bool,
    /// The outcome's response hash.
    pub response_hash: Bytes32,
    /// Unix seconds after which the contract refuses the signature.
    pub deadline: u64,
}

impl AttestationFields {
    /// The fields for `verifier` attesting a validated outcome of a validated job.
    pub fn for_outcome(
        job: &ValidatedJob,
        outcome: &ValidatedOutcome,
        verifier: Address,
        deadline: u64,
    ) -> Self {
        Self {
            bounty: job.bounty_contract(),
            bounty_id: job.bounty_id(),
            round: job.round(),
            verifier,
            submission_hash: job.submission_hash(),
            evidence_hash: job.evidence_hash(),
            policy_hash: job.policy_hash(),
            passed: outcome.verdict().passed(),
            response_hash: outcome.response_hash(),
            deadline,
        }
    }

    fn to_sol(self) -> VerificationAttestation {
        VerificationAttestation {
            bounty: self.bounty.into(),
            bountyId: self.bounty_id.into(),
            round: self.round,
            verifier: self.verifier.into(),
            submissionHash: self.submission_hash.into(),
            evidenceHash: self.evidence_hash.into(),
            policyHash: self.policy_hash.into(),
            passed: self.passed,
            responseHash: self.response_hash.into(),
            deadline: U256::from(self.deadline),
        }
    }
}

/// The EIP-712 domain of one bounty contract on one chain.
pub fn domain(chain_id: u64, bounty: Address) -> Eip712Domain {
    Eip712Domain::new(
        Some(Cow::Borrowed(DOMAIN_NAME)),
        Some(Cow::Borrowed(DOMAIN_VERSION)),
        Some(U256::from(chain_id)),
        Some(bounty.into()),
        None,
    )
}

/// The domain separator.
pub fn domain_separator(chain_id: u64, bounty: Address) -> Bytes32 {
    domain(chain_id, bounty).separator().into()
}

/// keccak256 of the `VerificationAttestation(...)` type string.
pub fn attestation_typehash() -> Bytes32 {
    keccak256(VerificationAttestation::eip712_encode_type().as_bytes()).into()
}

/// The EIP-712 struct hash of the fields.
pub fn struct_hash(fields: &AttestationFields) -> Bytes32 {
    fields.to_sol().eip712_hash_struct().into()
}

/// keccak256(0x1901 ‖ domainSeparator ‖ structHash): what the verifier signs.
pub fn attestation_digest(chain_id: u64, fields: &AttestationFields) -> Bytes32 {
    fields
        .to_sol()
        .eip712_signing_hash(&domain(chain_id, fields.bounty))
        .into()
}

/// keccak256(abi.encode(address[])) of the verifiers in policy order.
pub fn verifier_set_hash(verifiers: &[Address]) -> Bytes32 {
    let list: Vec<alloy_primitives::Address> = verifiers.iter().map(|a| (*a).into()).collect();
    keccak256((list,).abi_encode_params()).into()
}

/// secp256k1 group order n divided by two: a signature with s above it is malleable.
const HALF_ORDER: U256 = alloy_primitives::uint!(
    0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0_U256
);

/// Why a signature is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// Not `0x`-prefixed hex.
    #[error("signature is not 0x-prefixed hex")]
    NotHex,
    /// Not exactly 65 bytes.
    #[error("signature must be 65 bytes, got {0}")]
    Length(usize),
    /// `v` is not 27 or 28.
    #[error("signature v must be 27 or 28, got {0}")]
    V(u8),
    /// `s` is zero or above n/2 (malleable), or `r` is zero.
    #[error("signature r or s is zero, or s is not in the lower half of the curve order")]
    HighS,
    /// Recovery failed (r not on the curve or out of range).
    #[error("signature does not recover to a public key")]
    Recovery,
}

/// A 65-byte `r ‖ s ‖ v` signature that passed the shape checks (low-s, v 27/28).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct AttestationSignature([u8; 65]);

impl AttestationSignature {
    /// Checks the shape of raw bytes.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, SignatureError> {
        let raw: [u8; 65] = bytes
            .try_into()
            .map_err(|_| SignatureError::Length(bytes.len()))?;
        let v = raw[64];
        if v != 27 && v != 28 {
            return Err(SignatureError::V(v));
        }
        let r = U256::from_be_slice(&raw[..32]);
        let s = U256::from_be_slice(&raw[32..64]);
        if r.is_zero() || s.is_zero() || s > HALF_ORDER {
            return Err(SignatureError::HighS);
        }
        Ok(Self(raw))
    }

    /// Parses `0x`-prefixed hex (either case) and checks the shape.
    pub fn from_hex(s: &str) -> Result<Self, SignatureError> {
        let digits = s.strip_prefix("0x").ok_or(SignatureError::NotHex)?;
        // Bounds the work on hostile input before decoding.
        if digits.len() != 130 {
            return Err(SignatureError::Length(digits.len() / 2));
        }
        let bytes = hex::decode(digits).map_err(|_| SignatureError::NotHex)?;
        Self::from_slice(&bytes)
    }

    /// The 65 bytes.
    pub fn as_bytes(&self) -> &[u8; 65] {
        &self.0
    }

    /// `0x` + lowercase hex.
    pub fn to_hex(&self) -> String {
        format!("0x{}", hex::encode(self.0))
    }
}

impl std::fmt::Debug for AttestationSignature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// Recovers the address that signed `digest` (no prefix added), as `ecrecover` would.
pub fn recover_signer(
    digest: &Bytes32,
    signature: &AttestationSignature,
) -> Result<Address, SignatureError> {
    let raw = signature.as_bytes();
    let sig =
        alloy_primitives::Signature::from_raw_array(raw).map_err(|_| SignatureError::Recovery)?;
    sig.recover_address_from_prehash(&B256::from(*digest))
        .map(Address::from)
        .map_err(|_| SignatureError::Recovery)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b32(c: char) -> Bytes32 {
        format!("0x{}", c.to_string().repeat(64)).parse().unwrap()
    }
    fn addr(c: char) -> Address {
        format!("0x{}", c.to_string().repeat(40)).parse().unwrap()
    }

    fn vector_fields() -> AttestationFields {
        AttestationFields {
            bounty: addr('4'),
            bounty_id: b32('b'),
            round: 7,
            verifier: addr('1'),
            submission_hash: b32('c'),
            evidence_hash: b32('d'),
            policy_hash: b32('e'),
            passed: true,
            response_hash: b32('a'),
            deadline: 2_000_000_000,
        }
    }

    #[test]
    fn golden_typehash() {
        assert_eq!(
            attestation_typehash().to_string(),
            "0x7b0e401618a18680275ae4cded522bcb746f90a19beedaa4af5aea7647dd3ffa"
        );
        assert_eq!(
            VerificationAttestation::eip712_encode_type(),
            "VerificationAttestation(address bounty,bytes32 bountyId,uint64 round,address verifier,bytes32 submissionHash,bytes32 evidenceHash,bytes32 policyHash,bool passed,bytes32 responseHash,uint256 deadline)"
        );
    }

    #[test]
    fn golden_domain_struct_and_digest() {
        let f = vector_fields();
        assert_eq!(
            domain_separator(8453, f.bounty).to_string(),
            "0x40f1818a960fffd46e6aa6f7e90760571f982ccb03f1e74a5e1488bf4864251a"
        );
        assert_eq!(
            struct_hash(&f).to_string(),
            "0xbd1c3db75b3d0ad4f1f2f60d4950fb5585b1b01b2241c7236641f3d49322df8b"
        );
        assert_eq!(
            attestation_digest(8453, &f).to_string(),
            "0x29dbd769539e791efdd40da2c58f1bd03fa3d6f05ab58cf0ee71d39a66ae5ae5"
        );
        // The digest is keccak256(0x1901 ‖ separator ‖ structHash), spelled out.
        let mut pre = vec![0x19, 0x01];
        pre.extend_from_slice(domain_separator(8453, f.bounty).as_bytes());
        pre.extend_from_slice(struct_hash(&f).as_bytes());
        assert_eq!(Bytes32::from(keccak256(&pre)), attestation_digest(8453, &f));
    }

    #[test]
    fn digest_binds_every_field_and_the_chain() {
        let base = attestation_digest(8453, &vector_fields());
        assert_ne!(attestation_digest(84532, &vector_fields()), base);
        let mutations: [fn(&mut AttestationFields); 10] = [
            |f| f.bounty = addr('5'),
            |f| f.bounty_id = b32('c'),
            |f| f.round = 8,
            |f| f.verifier = addr('2'),
            |f| f.submission_hash = b32('d'),
            |f| f.evidence_hash = b32('e'),
            |f| f.policy_hash = b32('f'),
            |f| f.passed = false,
            |f| f.response_hash = b32('b'),
            |f| f.deadline = 2_000_000_001,
        ];
        for (i, m) in mutations.iter().enumerate() {
            let mut f = vector_fields();
            m(&mut f);
            assert_ne!(attestation_digest(8453, &f), base, "field {i}");
        }
    }

    #[test]
    fn golden_verifier_set_hashes() {
        let a: Address = "0xbe6292b9e465f549e2363b918d6dd9187038431e"
            .parse()
            .unwrap();
        let b: Address = "0xb7c2ce6430b66fb986e27b6140b29309550d487a"
            .parse()
            .unwrap();
        assert_eq!(
            verifier_set_hash(&[a]).to_string(),
            "0x0838846e439ed67544d8a06da2a0f344fb25cd44723ad65839da3f242a72b1f2"
        );
        assert_eq!(
            verifier_set_hash(&[a, b]).to_string(),
            "0x2c5a10915ca1fb99d4a11e2222b4f32b986b4e0f5599f55d70e9c8f9725a28cd"
        );
        assert_ne!(verifier_set_hash(&[b, a]), verifier_set_hash(&[a, b]));
    }

    // A fixed, well-known secp256k1 test vector: the key 0x...01 signs nothing here; instead we
    // use a signature produced by k256 in the test itself so recovery is checked end to end.
    fn sign(digest: &Bytes32, key: &[u8; 32]) -> (AttestationSignature, Address) {
        use k256::ecdsa::SigningKey;
        let sk = SigningKey::from_bytes(key.into()).unwrap();
        let (sig, recid) = sk.sign_prehash_recoverable(digest.as_bytes()).unwrap();
        let sig = sig
            .normalize_s()
            .map_or((sig, recid.is_y_odd()), |n| (n, !recid.is_y_odd()));
        let mut raw = [0u8; 65];
        raw[..64].copy_from_slice(&sig.0.to_bytes());
        raw[64] = 27 + u8::from(sig.1);
        let pubkey = sk.verifying_key().to_encoded_point(false);
        let hash = keccak256(&pubkey.as_bytes()[1..]);
        let address = Address::from_bytes(hash[12..].try_into().unwrap());
        (AttestationSignature::from_slice(&raw).unwrap(), address)
    }

    #[test]
    fn recovers_the_signer_and_not_someone_else() {
        let digest = attestation_digest(8453, &vector_fields());
        let (sig, address) = sign(&digest, &[7u8; 32]);
        assert_eq!(recover_signer(&digest, &sig).unwrap(), address);
        let other = attestation_digest(84532, &vector_fields());
        assert_ne!(recover_signer(&other, &sig).unwrap(), address);
        assert_eq!(AttestationSignature::from_hex(&sig.to_hex()).unwrap(), sig);
        assert_eq!(
            AttestationSignature::from_hex(&sig.to_hex().to_uppercase().replacen("0X", "0x", 1))
                .unwrap(),
            sig
        );
    }

    #[test]
    fn shape_checks() {
        let digest = attestation_digest(8453, &vector_fields());
        let (sig, _) = sign(&digest, &[9u8; 32]);
        let raw = *sig.as_bytes();
        assert_eq!(
            AttestationSignature::from_slice(&raw[..64]),
            Err(SignatureError::Length(64))
        );
        let mut long = raw.to_vec();
        long.push(0);
        assert_eq!(
            AttestationSignature::from_slice(&long),
            Err(SignatureError::Length(66))
        );
        for v in [0u8, 1, 26, 29, 255] {
            let mut bad = raw;
            bad[64] = v;
            assert_eq!(
                AttestationSignature::from_slice(&bad),
                Err(SignatureError::V(v))
            );
        }
        // The malleable twin (n - s, flipped v) is refused even though it recovers the same key.
        let n = U256::from_str_radix(
            "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141",
            16,
        )
        .unwrap();
        let s = U256::from_be_slice(&raw[32..64]);
        let mut high = raw;
        high[32..64].copy_from_slice(&(n - s).to_be_bytes::<32>());
        high[64] = if raw[64] == 27 { 28 } else { 27 };
        assert_eq!(
            AttestationSignature::from_slice(&high),
            Err(SignatureError::HighS)
        );
        // Exactly n/2 is still low; n/2 + 1 is not.
        let mut edge = raw;
        edge[32..64].copy_from_slice(&HALF_ORDER.to_be_bytes::<32>());
        assert!(AttestationSignature::from_slice(&edge).is_ok());
        edge[32..64].copy_from_slice(&(HALF_ORDER + U256::from(1)).to_be_bytes::<32>());
        assert_eq!(
            AttestationSignature::from_slice(&edge),
            Err(SignatureError::HighS)
        );
        let mut zero_r = raw;
        zero_r[..32].fill(0);
        assert_eq!(
            AttestationSignature::from_slice(&zero_r),
            Err(SignatureError::HighS)
        );
        assert_eq!(
            AttestationSignature::from_hex(&hex::encode(raw)),
            Err(SignatureError::NotHex)
        );
        assert_eq!(
            AttestationSignature::from_hex("0x0102"),
            Err(SignatureError::Length(2))
        );
        assert_eq!(
            AttestationSignature::from_hex(&format!("0x{}", "zz".repeat(65))),
            Err(SignatureError::NotHex)
        );
    }
}
