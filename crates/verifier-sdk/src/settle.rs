//! The bounty contract interface (PROTOCOL §6): call and event types, settlement calldata,
//! the verification hash and event decoding. Encoding only; sending is the shells' job.

use alloy_primitives::{B256, Bytes, U256, keccak256};
use alloy_sol_types::{SolCall, SolEvent, SolValue};

use crate::attest::AttestationSignature;
use crate::types::{Address, Bytes32};

// The generated event constructors take one argument per event field.
#[allow(clippy::too_many_arguments)]
mod abi {
    use alloy_sol_types::sol;

    sol! {
        /// The bounty contract as the signer and keeper see it.
        interface IBounty {
            /// One verifier's signed verdict, as passed to `settleWithAttestations`.
            #[derive(Debug, PartialEq, Eq)]
            struct Attestation {
                address verifier;
                bool passed;
                bytes32 responseHash;
                uint256 deadline;
                bytes signature;
            }

            /// A settlement paid the solver.
            #[derive(Debug, PartialEq, Eq)]
            event BountySettled(bytes32 indexed bountyId, uint64 indexed round, address indexed solver, uint256 solverReward, uint256 claimBondReturned, uint256 timeoutBondBonus, uint256 verifierReward, bytes32 submissionHash, bytes32 evidenceHash, bytes32 policyHash, bytes32 verificationHash);
            /// A failed quorum rejected the submission.
            #[derive(Debug, PartialEq, Eq)]
            event SubmissionRejected(bytes32 indexed bountyId, uint64 indexed round, address indexed solver, uint256 verifierReward, uint256 claimBondForfeited, bytes32 verificationHash);
            /// A solver submitted.
            #[derive(Debug, PartialEq, Eq)]
            event SubmissionAdded(bytes32 indexed bountyId, uint64 indexed round, address indexed solver, bytes32 submissionHash, bytes32 evidenceHash, uint64 verificationExpiresAt);

            /// Lifecycle status (see [`BountyStatus`](crate::settle::BountyStatus)).
            function status() external view returns (uint8);
            /// The bounty id.
            function bountyId() external view returns (bytes32);
            /// The current round.
            function round() external view returns (uint64);
            /// The current solver.
            function solver() external view returns (address);
            /// The stored submission hash.
            function submissionHash() external view returns (bytes32);
            /// The stored evidence hash.
            function evidenceHash() external view returns (bytes32);
            /// The committed policy hash.
            function policyHash() external view returns (bytes32);
            /// The committed terms hash.
            function termsHash() external view returns (bytes32);
            /// The committed acceptance criteria hash.
            function acceptanceCriteriaHash() external view returns (bytes32);
            /// The committed benchmark hash.
            function benchmarkHash() external view returns (bytes32);
            /// The committed evidence schema hash.
            function evidenceSchemaHash() external view returns (bytes32);
            /// End of the verification window.
            function verificationExpiresAt() external view returns (uint64);
            /// 0 module, 1 signed quorum, 2 AI quorum.
            function verificationMode() external view returns (uint8);
            /// Attestations required.
            function threshold() external view returns (uint8);
            /// keccak256(abi.encode(verifiers)).
            function verifierSetHash() external view returns (bytes32);
            /// The verifier set in policy order.
            function verifiers() external view returns (address[]);
            /// Membership in the verifier set.
            function isVerifier(address account) external view returns (bool);
            /// The EIP-712 digest the contract will check for this verifier and verdict.
            function attestationDigest(address verifier, bool passed, bytes32 responseHash, uint256 deadline) external view returns (bytes32);
            /// Permissionless settlement with a full quorum of signatures.
            function settleWithAttestations(Attestation[] attestations) external;
        }
    }
}

pub use abi::IBounty;

pub use IBounty::{Attestation, BountySettled, SubmissionAdded, SubmissionRejected};

/// `status()` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BountyStatus {
    /// 0.
    Open,
    /// 1.
    Claimable,
    /// 2.
    Claimed,
    /// 3: the only status in which attestations settle.
    Submitted,
    /// 4.
    Settled,
    /// 5.
    Cancelled,
}

/// `verificationMode()` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VerificationMode {
    /// 0: an on-chain verifier module.
    Module,
    /// 1: signed quorum (ours).
    SignedQuorum,
    /// 2: AI quorum.
    AiQuorum,
}

/// An on-chain enum value outside the known range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} value {value}")]
pub struct UnknownEnumValue {
    /// Which enum.
    pub kind: &'static str,
    /// The value read.
    pub value: u8,
}

impl TryFrom<u8> for BountyStatus {
    type Error = UnknownEnumValue;
    fn try_from(value: u8) -> Result<Self, Self::Error> {
        Ok(match value {
            0 => Self::Open,
            1 => Self::Claimable,
            2 => Self::Claimed,
            3 => Self::Submitted,
            4 => Self::Settled,
            5 => Self::Cancelled,
            _ => {
                return Err(UnknownEnumValue {
                    kind: "bounty status",
                    value,
                });
            }
        })
    }
}

impl TryFrom<u8> for VerificationMode {
    type Error = UnknownEnumValue;
    fn try_from(value: u8) -> Result<Self, Self::Error> {
        Ok(match value {
            0 => Self::Module,
            1 => Self::SignedQuorum,
            2 => Self::AiQuorum,
            _ => {
                return Err(UnknownEnumValue {
                    kind: "verification mode",
                    value,
                });
            }
        })
    }
}

/// Builds one settlement attestation from sdk types.
pub fn attestation(
    verifier: Address,
    passed: bool,
    response_hash: Bytes32,
    deadline: u64,
    signature: &AttestationSignature,
) -> Attestation {
    Attestation {
        verifier: verifier.into(),
        passed,
        responseHash: response_hash.into(),
        deadline: U256::from(deadline),
        signature: Bytes::copy_from_slice(signature.as_bytes()),
    }
}

/// Calldata of `settleWithAttestations(attestations)`.
pub fn settle_calldata(attestations: &[Attestation]) -> Vec<u8> {
    IBounty::settleWithAttestationsCall {
        attestations: attestations.to_vec(),
    }
    .abi_encode()
}

/// Why a transaction input is not a `settleWithAttestations` call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalldataError {
    /// The first four bytes are not `settleWithAttestations`' selector.
    #[error("the transaction input is not a settleWithAttestations call (selector {0})")]
    NotASettlement(String),
    /// The selector matches but the arguments do not decode.
    #[error("settleWithAttestations arguments do not decode: {0}")]
    Decode(String),
}

/// Decodes the attestations of a `settleWithAttestations(attestations)` input, strictly (the
/// selector, then the ABI encoding with every value in range).
pub fn decode_settle_calldata(input: &[u8]) -> Result<Vec<Attestation>, CalldataError> {
    let selector = input.get(..4).unwrap_or(input);
    if selector != IBounty::settleWithAttestationsCall::SELECTOR {
        return Err(CalldataError::NotASettlement(format!(
            "0x{}",
            hex::encode(selector)
        )));
    }
    IBounty::settleWithAttestationsCall::abi_decode_validate(input)
        .map(|call| call.attestations)
        .map_err(|e| CalldataError::Decode(e.to_string().chars().take(256).collect()))
}

/// Calldata of `attestationDigest(verifier, passed, responseHash, deadline)`.
pub fn attestation_digest_calldata(
    verifier: Address,
    passed: bool,
    response_hash: Bytes32,
    deadline: u64,
) -> Vec<u8> {
    IBounty::attestationDigestCall {
        verifier: verifier.into(),
        passed,
        responseHash: response_hash.into(),
        deadline: U256::from(deadline),
    }
    .abi_encode()
}

/// `verificationHash = keccak256(abi.encode(attestations))`, as the contract emits it.
pub fn verification_hash(attestations: &[Attestation]) -> Bytes32 {
    keccak256((attestations.to_vec(),).abi_encode_params()).into()
}

/// Why a log could not be decoded as the expected event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// topic0 is not the event's signature hash.
    #[error("log topic0 is not the {0} event")]
    WrongEvent(&'static str),
    /// Topics or data do not decode.
    #[error("log does not decode as {event}: {reason}")]
    Decode {
        /// The event expected.
        event: &'static str,
        /// The decoder's message.
        reason: String,
    },
}

fn decode<E: SolEvent>(topics: &[B256], data: &[u8]) -> Result<E, EventError> {
    if topics.first() != Some(&E::SIGNATURE_HASH) {
        return Err(EventError::WrongEvent(E::SIGNATURE));
    }
    E::decode_raw_log_validate(topics.iter().copied(), data).map_err(|e| EventError::Decode {
        event: E::SIGNATURE,
        reason: e.to_string(),
    })
}

/// Decodes a `BountySettled` log (the caller checks it came from the bounty's own address).
pub fn decode_bounty_settled(topics: &[B256], data: &[u8]) -> Result<BountySettled, EventError> {
    decode(topics, data)
}

/// Decodes a `SubmissionRejected` log.
pub fn decode_submission_rejected(
    topics: &[B256],
    data: &[u8],
) -> Result<SubmissionRejected, EventError> {
    decode(topics, data)
}

/// Decodes a `SubmissionAdded` log.
pub fn decode_submission_added(
    topics: &[B256],
    data: &[u8],
) -> Result<SubmissionAdded, EventError> {
    decode(topics, data)
}

/// The settlement result a receipt's logs prove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettlementEvent {
    /// The solver was paid.
    Settled(BountySettled),
    /// The submission was rejected.
    Rejected(SubmissionRejected),
}

/// Decodes a log as either settlement event, or `None` if topic0 is neither.
pub fn decode_settlement_event(
    topics: &[B256],
    data: &[u8],
) -> Option<Result<SettlementEvent, EventError>> {
    let topic0 = topics.first()?;
    if *topic0 == BountySettled::SIGNATURE_HASH {
        Some(decode_bounty_settled(topics, data).map(SettlementEvent::Settled))
    } else if *topic0 == SubmissionRejected::SIGNATURE_HASH {
        Some(decode_submission_rejected(topics, data).map(SettlementEvent::Rejected))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::{FixedBytes, address};

    fn words(data: &[u8]) -> Vec<String> {
        data.chunks(32).map(hex::encode).collect()
    }

    #[test]
    fn settle_calldata_round_trips_and_other_inputs_are_refused() {
        let one = vector_attestation();
        let input = settle_calldata(std::slice::from_ref(&one));
        assert_eq!(decode_settle_calldata(&input).unwrap(), vec![one]);
        let other = attestation_digest_calldata(
            Address::from_bytes([1; 20]),
            true,
            Bytes32::from_bytes([2; 32]),
            3,
        );
        assert!(matches!(
            decode_settle_calldata(&other),
            Err(CalldataError::NotASettlement(s)) if s == "0xfbb69591"
        ));
        assert!(matches!(
            decode_settle_calldata(&[]),
            Err(CalldataError::NotASettlement(_))
        ));
        assert!(matches!(
            decode_settle_calldata(&input[..input.len() - 32]),
            Err(CalldataError::Decode(_))
        ));
    }

    #[test]
    fn golden_selectors_and_topics() {
        assert_eq!(
            hex::encode(IBounty::attestationDigestCall::SELECTOR),
            "fbb69591"
        );
        assert_eq!(
            hex::encode(IBounty::settleWithAttestationsCall::SELECTOR),
            "e3457186"
        );
        assert_eq!(
            BountySettled::SIGNATURE_HASH.to_string(),
            "0x2ee7b1323824324868017119c9922527f2e2c8eb20a8044c3dd574bdbfb2dd71"
        );
        assert_eq!(
            SubmissionRejected::SIGNATURE_HASH.to_string(),
            "0x3c487d053ed1814c5e903e6a86b6f2b9cbebc156d957d9143fa9e89a6e1416b8"
        );
        assert_eq!(
            SubmissionAdded::SIGNATURE_HASH.to_string(),
            "0xce1e9f036b1eb9f63ccd7a0efada9a83e5f7aa253927a81f1570578486afe46a"
        );
    }

    fn vector_attestation() -> Attestation {
        Attestation {
            verifier: address!("1111111111111111111111111111111111111111"),
            passed: true,
            responseHash: FixedBytes([0xaa; 32]),
            deadline: U256::from(123),
            signature: Bytes::from_static(&[1, 2, 3]),
        }
    }

    #[test]
    fn golden_settle_calldata() {
        let data = settle_calldata(&[vector_attestation()]);
        assert_eq!(hex::encode(&data[..4]), "e3457186");
        let w = |s: &str| format!("{s:0>64}");
        let expected = vec![
            w("20"),
            w("1"),
            w("20"),
            w(&"11".repeat(20)),
            w("1"),
            "aa".repeat(32),
            w("7b"),
            w("a0"),
            w("3"),
            format!("010203{}", "0".repeat(58)),
        ];
        assert_eq!(words(&data[4..]), expected);
        // verificationHash is keccak256 of the same encoding without the selector.
        assert_eq!(
            verification_hash(&[vector_attestation()]),
            Bytes32::from(keccak256(&data[4..]))
        );
    }

    #[test]
    fn attestation_digest_calldata_encodes_four_words() {
        let data = attestation_digest_calldata(
            "0x1111111111111111111111111111111111111111"
                .parse()
                .unwrap(),
            false,
            Bytes32::from_bytes([0xaa; 32]),
            123,
        );
        assert_eq!(hex::encode(&data[..4]), "fbb69591");
        assert_eq!(
            words(&data[4..]),
            vec![
                format!("{:0>64}", "11".repeat(20)),
                "0".repeat(64),
                "aa".repeat(32),
                format!("{:0>64}", "7b")
            ]
        );
    }

    #[test]
    fn status_and_mode_enums() {
        assert_eq!(BountyStatus::try_from(3), Ok(BountyStatus::Submitted));
        assert_eq!(BountyStatus::try_from(5), Ok(BountyStatus::Cancelled));
        assert!(BountyStatus::try_from(6).is_err());
        assert_eq!(
            VerificationMode::try_from(1),
            Ok(VerificationMode::SignedQuorum)
        );
        assert!(VerificationMode::try_from(3).is_err());
    }

    #[test]
    fn events_round_trip_and_wrong_topic_is_refused() {
        let ev = BountySettled {
            bountyId: FixedBytes([0xbb; 32]),
            round: 7,
            solver: address!("3333333333333333333333333333333333333333"),
            solverReward: U256::from(10),
            claimBondReturned: U256::from(1),
            timeoutBondBonus: U256::from(0),
            verifierReward: U256::from(2),
            submissionHash: FixedBytes([0xcc; 32]),
            evidenceHash: FixedBytes([0xdd; 32]),
            policyHash: FixedBytes([0xee; 32]),
            verificationHash: FixedBytes([0x99; 32]),
        };
        let log = ev.encode_log_data();
        assert_eq!(decode_bounty_settled(log.topics(), &log.data).unwrap(), ev);
        assert!(matches!(
            decode_settlement_event(log.topics(), &log.data),
            Some(Ok(SettlementEvent::Settled(_)))
        ));
        assert_eq!(
            decode_submission_rejected(log.topics(), &log.data),
            Err(EventError::WrongEvent(SubmissionRejected::SIGNATURE))
        );
        assert!(matches!(
            decode_bounty_settled(log.topics(), &log.data[..64]),
            Err(EventError::Decode { .. })
        ));
        assert!(decode_settlement_event(&[SubmissionAdded::SIGNATURE_HASH], &[]).is_none());
        assert!(decode_settlement_event(&[], &[]).is_none());

        let rej = SubmissionRejected {
            bountyId: FixedBytes([1; 32]),
            round: 2,
            solver: address!("3333333333333333333333333333333333333333"),
            verifierReward: U256::from(5),
            claimBondForfeited: U256::from(6),
            verificationHash: FixedBytes([7; 32]),
        };
        let log = rej.encode_log_data();
        assert_eq!(
            decode_settlement_event(log.topics(), &log.data),
            Some(Ok(SettlementEvent::Rejected(rej)))
        );
    }
}
