//! An independent EIP-712 attestation digest (alloy's `Eip712` machinery, not the sdk's) so
//! tests can cross-check the contract, the sdk and each other; signing with dev keys; decoding
//! revert reasons.

use alloy::primitives::{Address, B256, Bytes, U256};
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::{Eip712Domain, Revert, SolStruct, eip712_domain};

alloy::sol! {
    /// The EIP-712 primary type of PROTOCOL.md section 6.
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

/// Everything an attestation digest binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttestationFields {
    /// Chain id of the domain.
    pub chain_id: u64,
    /// The bounty contract (also the domain's verifying contract).
    pub bounty: Address,
    /// Stored `bountyId()`.
    pub bounty_id: B256,
    /// Stored `round()`.
    pub round: u64,
    /// The signing verifier.
    pub verifier: Address,
    /// Stored `submissionHash()`.
    pub submission_hash: B256,
    /// Stored `evidenceHash()`.
    pub evidence_hash: B256,
    /// Stored `policyHash()`.
    pub policy_hash: B256,
    /// The verdict.
    pub passed: bool,
    /// The receipt's response hash.
    pub response_hash: B256,
    /// Unix seconds after which the attestation is void.
    pub deadline: U256,
}

impl AttestationFields {
    fn domain(&self) -> Eip712Domain {
        eip712_domain! {
            name: "Agent Bounties",
            version: "1",
            chain_id: self.chain_id,
            verifying_contract: self.bounty,
        }
    }

    fn message(&self) -> VerificationAttestation {
        VerificationAttestation {
            bounty: self.bounty,
            bountyId: self.bounty_id,
            round: self.round,
            verifier: self.verifier,
            submissionHash: self.submission_hash,
            evidenceHash: self.evidence_hash,
            policyHash: self.policy_hash,
            passed: self.passed,
            responseHash: self.response_hash,
            deadline: self.deadline,
        }
    }

    /// The EIP-712 domain separator.
    pub fn domain_separator(&self) -> B256 {
        self.domain().separator()
    }

    /// The EIP-712 struct hash of the attestation.
    pub fn struct_hash(&self) -> B256 {
        self.message().eip712_hash_struct()
    }
}

/// `keccak256(0x1901 ‖ domainSeparator ‖ structHash)` for `fields`.
pub fn local_attestation_digest(fields: &AttestationFields) -> B256 {
    fields.message().eip712_signing_hash(&fields.domain())
}

/// The EIP-712 type hash of `VerificationAttestation`.
pub fn attestation_typehash() -> B256 {
    alloy::primitives::keccak256(VerificationAttestation::eip712_encode_type().as_bytes())
}

/// Signs the raw digest (no prefix) and returns the 65-byte `r ‖ s ‖ v` with v in {27, 28};
/// k256 always produces low-s signatures.
pub fn sign_digest(
    signer: &PrivateKeySigner,
    digest: B256,
) -> Result<Bytes, alloy::signers::Error> {
    let signature = signer.sign_hash_sync(&digest)?;
    Ok(Bytes::from(signature.as_bytes().to_vec()))
}

/// The `Error(string)` reason of a reverted call, if the node returned one.
pub fn revert_reason(err: &alloy::contract::Error) -> Option<String> {
    err.as_decoded_error::<Revert>().map(|r| r.reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::primitives::{address, b256};

    fn golden() -> AttestationFields {
        AttestationFields {
            chain_id: 8453,
            bounty: address!("4444444444444444444444444444444444444444"),
            bounty_id: B256::repeat_byte(0xbb),
            round: 7,
            verifier: address!("1111111111111111111111111111111111111111"),
            submission_hash: B256::repeat_byte(0xcc),
            evidence_hash: B256::repeat_byte(0xdd),
            policy_hash: B256::repeat_byte(0xee),
            passed: true,
            response_hash: B256::repeat_byte(0xaa),
            deadline: U256::from(2_000_000_000u64),
        }
    }

    #[test]
    fn typehash_golden_vector() {
        assert_eq!(
            attestation_typehash(),
            b256!("7b0e401618a18680275ae4cded522bcb746f90a19beedaa4af5aea7647dd3ffa")
        );
    }

    #[test]
    fn digest_golden_vector() {
        let f = golden();
        assert_eq!(
            f.domain_separator(),
            b256!("40f1818a960fffd46e6aa6f7e90760571f982ccb03f1e74a5e1488bf4864251a")
        );
        assert_eq!(
            f.struct_hash(),
            b256!("bd1c3db75b3d0ad4f1f2f60d4950fb5585b1b01b2241c7236641f3d49322df8b")
        );
        assert_eq!(
            local_attestation_digest(&f),
            b256!("29dbd769539e791efdd40da2c58f1bd03fa3d6f05ab58cf0ee71d39a66ae5ae5")
        );
    }

    #[test]
    fn flipping_the_verdict_changes_the_digest() {
        let mut f = golden();
        f.passed = false;
        assert_ne!(
            local_attestation_digest(&f),
            b256!("29dbd769539e791efdd40da2c58f1bd03fa3d6f05ab58cf0ee71d39a66ae5ae5")
        );
    }

    #[test]
    fn signature_is_low_s_with_legacy_v_and_recovers() {
        let signer: PrivateKeySigner = crate::node::DEV_KEYS[1].parse().unwrap();
        let digest = local_attestation_digest(&golden());
        let sig = sign_digest(&signer, digest).unwrap();
        assert_eq!(sig.len(), 65);
        assert!(sig[64] == 27 || sig[64] == 28);
        let half_n = U256::from_be_bytes(alloy::primitives::hex!(
            "7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0"
        ));
        assert!(U256::from_be_slice(&sig[32..64]) <= half_n);
        let parsed = alloy::primitives::Signature::try_from(sig.as_ref()).unwrap();
        assert_eq!(
            parsed.recover_address_from_prehash(&digest).unwrap(),
            signer.address()
        );
    }
}
