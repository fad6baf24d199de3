//! The bounty contract interface of PROTOCOL.md section 6, as alloy bindings.
//!
//! Defined here because the sdk had no `sol!` interface when this crate was written; if the
//! sdk grows one, this module should re-export it instead of keeping a second copy.

// The generated event constructors take one argument per event field (11 for BountySettled).
#![allow(clippy::too_many_arguments)]

alloy::sol! {
    /// Bounty contract interface (one contract per bounty).
    #[sol(rpc)]
    interface IBounty {
        /// One verifier's signed verdict as passed to `settleWithAttestations`.
        struct Attestation {
            address verifier;
            bool passed;
            bytes32 responseHash;
            uint256 deadline;
            bytes signature;
        }

        function status() external view returns (uint8);
        function bountyId() external view returns (bytes32);
        function round() external view returns (uint64);
        function solver() external view returns (address);
        function submissionHash() external view returns (bytes32);
        function evidenceHash() external view returns (bytes32);
        function policyHash() external view returns (bytes32);
        function termsHash() external view returns (bytes32);
        function verificationExpiresAt() external view returns (uint64);
        function verificationMode() external view returns (uint8);
        function threshold() external view returns (uint8);
        function verifierSetHash() external view returns (bytes32);
        function verifiers() external view returns (address[]);
        function isVerifier(address account) external view returns (bool);
        function attestationDigest(address verifier, bool passed, bytes32 responseHash, uint256 deadline)
            external view returns (bytes32);
        function settleWithAttestations(Attestation[] attestations) external;

        event BountySettled(
            bytes32 indexed bountyId,
            uint64 indexed round,
            address indexed solver,
            uint256 solverReward,
            uint256 claimBondReturned,
            uint256 timeoutBondBonus,
            uint256 verifierReward,
            bytes32 submissionHash,
            bytes32 evidenceHash,
            bytes32 policyHash,
            bytes32 verificationHash
        );
        event SubmissionRejected(
            bytes32 indexed bountyId,
            uint64 indexed round,
            address indexed solver,
            uint256 verifierReward,
            uint256 claimBondForfeited,
            bytes32 verificationHash
        );
        event SubmissionAdded(
            bytes32 indexed bountyId,
            uint64 indexed round,
            address indexed solver,
            bytes32 submissionHash,
            bytes32 evidenceHash,
            uint64 verificationExpiresAt
        );
    }
}

#[cfg(test)]
mod tests {
    use super::IBounty;
    use alloy::primitives::{Bytes, U256, address, b256, hex};
    use alloy::sol_types::{SolCall, SolEvent};

    #[test]
    fn selectors_match_protocol() {
        assert_eq!(IBounty::attestationDigestCall::SELECTOR, hex!("fbb69591"));
        assert_eq!(
            IBounty::settleWithAttestationsCall::SELECTOR,
            hex!("e3457186")
        );
    }

    #[test]
    fn event_topics_match_protocol() {
        assert_eq!(
            IBounty::BountySettled::SIGNATURE_HASH,
            b256!("2ee7b1323824324868017119c9922527f2e2c8eb20a8044c3dd574bdbfb2dd71")
        );
        assert_eq!(
            IBounty::SubmissionRejected::SIGNATURE_HASH,
            b256!("3c487d053ed1814c5e903e6a86b6f2b9cbebc156d957d9143fa9e89a6e1416b8")
        );
        assert_eq!(
            IBounty::SubmissionAdded::SIGNATURE_HASH,
            b256!("ce1e9f036b1eb9f63ccd7a0efada9a83e5f7aa253927a81f1570578486afe46a")
        );
    }

    #[test]
    fn settle_calldata_matches_protocol_vector() {
        let call = IBounty::settleWithAttestationsCall {
            attestations: vec![IBounty::Attestation {
                verifier: address!("1111111111111111111111111111111111111111"),
                passed: true,
                responseHash: b256!(
                    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                ),
                deadline: U256::from(123u64),
                signature: Bytes::from_static(&[1, 2, 3]),
            }],
        };
        let word = |tail: &str| format!("{tail:0>64}");
        let expected = [
            "e3457186".to_owned(),
            word("20"),
            word("1"),
            word("20"),
            word("1111111111111111111111111111111111111111"),
            word("1"),
            "aa".repeat(32),
            word("7b"),
            word("a0"),
            word("3"),
            format!("{:0<64}", "010203"),
        ]
        .concat();
        assert_eq!(hex::encode(call.abi_encode()), expected);
    }
}
