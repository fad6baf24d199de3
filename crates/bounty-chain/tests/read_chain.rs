//! `RpcChainReader` against the real local Hardhat node (tools/chain/up.sh or
//! scripts/services.sh; fails loudly without it).

// Tests may unwrap: a failure here is a test failure with the error printed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use alloy::primitives::{Address as ChainAddress, B256, U256};
use bounty_chain::{
    AttestationQuery, BountyState, BountyStatus, ChainReadError, ChainReader, Expected,
    MAX_VERIFIERS, Mismatch, RpcChainReader, VerificationMode, check_state, verifier_set_hash,
};
use chain_testkit::{
    AttestationFields, BountyParams, Testkit, dev_signer, local_attestation_digest, status,
};
use common::{deployed, sdk_addr};
use verifier_sdk::{Address, Bytes32};

fn sdk_b32(b: B256) -> Bytes32 {
    Bytes32::from_bytes(b.0)
}

fn expected_from(params: &BountyParams) -> Expected {
    Expected {
        chain_id: 8453,
        bounty_id: sdk_b32(params.bounty_id),
        round: params.round,
        solver: sdk_addr(params.solver),
        submission_hash: sdk_b32(params.submission_hash),
        evidence_hash: sdk_b32(params.evidence_hash),
        commitment: verifier_sdk::TermsCommitment {
            policy_hash: sdk_b32(params.policy_hash),
            terms_hash: sdk_b32(params.terms_hash),
            acceptance_criteria_hash: sdk_b32(params.acceptance_criteria_hash),
            benchmark_hash: sdk_b32(params.benchmark_hash),
            evidence_schema_hash: sdk_b32(params.evidence_schema_hash),
        },
        verification_expires_at: params.verification_expires_at,
        verifiers: params.verifiers.iter().copied().map(sdk_addr).collect(),
        threshold: params.threshold,
    }
}

fn query(verifier: ChainAddress, deadline: u64) -> AttestationQuery {
    AttestationQuery {
        verifier: sdk_addr(verifier),
        passed: true,
        response_hash: Bytes32::from_bytes([0xaa; 32]),
        deadline,
    }
}

fn local_digest(state: &BountyState, q: &AttestationQuery) -> B256 {
    local_attestation_digest(&AttestationFields {
        chain_id: state.chain_id,
        bounty: ChainAddress::from(*state.bounty.as_bytes()),
        bounty_id: B256::from(*state.bounty_id.as_bytes()),
        round: state.round,
        verifier: ChainAddress::from(*q.verifier.as_bytes()),
        submission_hash: B256::from(*state.submission_hash.as_bytes()),
        evidence_hash: B256::from(*state.evidence_hash.as_bytes()),
        policy_hash: B256::from(*state.commitment.policy_hash.as_bytes()),
        passed: q.passed,
        response_hash: B256::from(*q.response_hash.as_bytes()),
        deadline: U256::from(q.deadline),
    })
}

#[tokio::test]
async fn reads_every_view_of_a_deployed_bounty() {
    let (_kit, reader, bounty, params) = deployed().await;
    let state = reader
        .read_bounty(sdk_addr(bounty.address()))
        .await
        .unwrap();

    let verifiers: Vec<Address> = params.verifiers.iter().copied().map(sdk_addr).collect();
    assert_eq!(state.chain_id, 8453);
    assert_eq!(state.bounty, sdk_addr(bounty.address()));
    assert_eq!(state.status, BountyStatus::Submitted);
    assert_eq!(state.bounty_id, sdk_b32(params.bounty_id));
    assert_eq!(state.round, params.round);
    assert_eq!(state.solver, sdk_addr(params.solver));
    assert_eq!(state.submission_hash, sdk_b32(params.submission_hash));
    assert_eq!(state.evidence_hash, sdk_b32(params.evidence_hash));
    assert_eq!(state.commitment.policy_hash, sdk_b32(params.policy_hash));
    assert_eq!(state.commitment.terms_hash, sdk_b32(params.terms_hash));
    assert_eq!(
        state.commitment.acceptance_criteria_hash,
        sdk_b32(params.acceptance_criteria_hash)
    );
    assert_eq!(
        state.commitment.benchmark_hash,
        sdk_b32(params.benchmark_hash)
    );
    assert_eq!(
        state.commitment.evidence_schema_hash,
        sdk_b32(params.evidence_schema_hash)
    );
    assert_eq!(
        state.verification_expires_at,
        params.verification_expires_at
    );
    assert_eq!(state.verification_mode, VerificationMode::SignedQuorum);
    assert_eq!(state.threshold, 2);
    assert_eq!(state.verifier_set_hash, verifier_set_hash(&verifiers));
    assert_eq!(state.verifiers, verifiers);
    assert!(state.block_number > 0);
    assert_eq!(check_state(&state, &expected_from(&params)), vec![]);

    let member = sdk_addr(params.verifiers[0]);
    let outsider = sdk_addr(dev_signer(3).unwrap().address());
    let at = state.block_number;
    assert!(reader.is_verifier(state.bounty, at, member).await.unwrap());
    assert!(
        !reader
            .is_verifier(state.bounty, at, outsider)
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn contract_digest_matches_local_digest_at_the_pinned_block() {
    let (kit, reader, bounty, params) = deployed().await;
    let before = reader
        .read_bounty(sdk_addr(bounty.address()))
        .await
        .unwrap();
    let deadline = kit.latest_timestamp().await.unwrap() + 900;
    let q = query(params.verifiers[0], deadline);
    let digest_before = reader
        .attestation_digest(before.bounty, before.block_number, q)
        .await
        .unwrap();
    assert_eq!(digest_before, sdk_b32(local_digest(&before, &q)));

    // The contract changes after the read: the pinned block still answers with the old values.
    bounty
        .set_hashes(
            B256::repeat_byte(1),
            B256::repeat_byte(2),
            B256::repeat_byte(3),
            B256::repeat_byte(4),
        )
        .await
        .unwrap();
    let pinned_again = reader
        .attestation_digest(before.bounty, before.block_number, q)
        .await
        .unwrap();
    assert_eq!(pinned_again, digest_before);

    let after = reader.read_bounty(before.bounty).await.unwrap();
    assert!(after.block_number > before.block_number);
    let digest_after = reader
        .attestation_digest(after.bounty, after.block_number, q)
        .await
        .unwrap();
    assert_ne!(digest_after, digest_before);
    assert_eq!(digest_after, sdk_b32(local_digest(&after, &q)));
    assert_eq!(
        check_state(&after, &expected_from(&params)),
        vec![
            Mismatch::SubmissionHash {
                expected: sdk_b32(params.submission_hash),
                actual: Bytes32::from_bytes([1; 32]),
            },
            Mismatch::EvidenceHash {
                expected: sdk_b32(params.evidence_hash),
                actual: Bytes32::from_bytes([2; 32]),
            },
            Mismatch::PolicyHash {
                expected: sdk_b32(params.policy_hash),
                actual: Bytes32::from_bytes([3; 32]),
            },
            Mismatch::TermsHash {
                expected: sdk_b32(params.terms_hash),
                actual: Bytes32::from_bytes([4; 32]),
            },
        ]
    );
}

#[tokio::test]
async fn each_terms_hash_the_contract_commits_is_compared() {
    let (_kit, reader, bounty, params) = deployed().await;
    let address = sdk_addr(bounty.address());
    let expected = expected_from(&params);
    let x = B256::repeat_byte(0x5a);
    let p = &params;
    let cases = [
        (
            [
                x,
                p.acceptance_criteria_hash,
                p.benchmark_hash,
                p.evidence_schema_hash,
            ],
            "terms_hash",
        ),
        (
            [p.terms_hash, x, p.benchmark_hash, p.evidence_schema_hash],
            "acceptance_criteria_hash",
        ),
        (
            [
                p.terms_hash,
                p.acceptance_criteria_hash,
                x,
                p.evidence_schema_hash,
            ],
            "benchmark_hash",
        ),
        (
            [
                p.terms_hash,
                p.acceptance_criteria_hash,
                p.benchmark_hash,
                x,
            ],
            "evidence_schema_hash",
        ),
    ];
    for ([t, a, b, e], code) in cases {
        bounty.set_terms_hashes(t, a, b, e).await.unwrap();
        let state = reader.read_bounty(address).await.unwrap();
        let got = check_state(&state, &expected);
        assert_eq!(
            got.iter().map(Mismatch::code).collect::<Vec<_>>(),
            vec![code]
        );
    }
}

#[tokio::test]
async fn on_chain_changes_show_up_as_typed_mismatches() {
    let (_kit, reader, bounty, params) = deployed().await;
    let address = sdk_addr(bounty.address());
    let expected = expected_from(&params);

    bounty.set_status(status::SETTLED).await.unwrap();
    let state = reader.read_bounty(address).await.unwrap();
    assert_eq!(
        check_state(&state, &expected),
        vec![Mismatch::NotSubmitted {
            actual: BountyStatus::Settled
        }]
    );
    bounty.set_status(status::SUBMITTED).await.unwrap();

    bounty.set_threshold(1).await.unwrap();
    let state = reader.read_bounty(address).await.unwrap();
    assert_eq!(
        check_state(&state, &expected),
        vec![Mismatch::Threshold {
            expected: 2,
            actual: 1
        }]
    );

    let swapped = vec![params.verifiers[1], params.verifiers[0]];
    bounty.set_verifiers(swapped, 2).await.unwrap();
    let state = reader.read_bounty(address).await.unwrap();
    let got = check_state(&state, &expected);
    assert!(
        matches!(
            got.as_slice(),
            [
                Mismatch::VerifierSetHash { .. },
                Mismatch::VerifierList { .. }
            ]
        ),
        "{got:?}"
    );

    bounty
        .set_verifiers(params.verifiers.clone(), 2)
        .await
        .unwrap();
    bounty
        .set_verifier_set_hash(B256::repeat_byte(9))
        .await
        .unwrap();
    bounty.set_round(params.round + 1).await.unwrap();
    bounty.set_verification_mode(2).await.unwrap();
    let state = reader.read_bounty(address).await.unwrap();
    assert_eq!(
        check_state(&state, &expected),
        vec![
            Mismatch::VerificationMode {
                actual: VerificationMode::AiQuorum
            },
            Mismatch::Round {
                expected: params.round,
                actual: params.round + 1
            },
            Mismatch::VerifierSetHash {
                expected: verifier_set_hash(&expected.verifiers),
                actual: Bytes32::from_bytes([9; 32]),
            },
        ]
    );
}

#[tokio::test]
async fn address_without_code_is_refused() {
    let kit = Testkit::connect().await.unwrap_or_else(|e| panic!("{e}"));
    let reader = RpcChainReader::new(kit.url(), Duration::from_secs(10)).unwrap();
    let empty = sdk_addr(alloy::signers::local::PrivateKeySigner::random().address());
    let err = reader.read_bounty(empty).await.unwrap_err();
    assert!(
        matches!(err, ChainReadError::NoContract { bounty, .. } if bounty == empty),
        "{err}"
    );
}

#[tokio::test]
async fn verifier_list_longer_than_the_limit_is_refused() {
    let (_kit, reader, bounty, _) = deployed().await;
    let address = sdk_addr(bounty.address());
    let many = |n: usize| -> Vec<ChainAddress> {
        (1..=n)
            .map(|i| {
                let mut bytes = [0u8; 20];
                bytes[12..].copy_from_slice(&(i as u64).to_be_bytes());
                ChainAddress::from(bytes)
            })
            .collect()
    };
    // Built in chunks: one transaction writing 255 new slots exceeds the node's per-tx gas cap.
    let list = many(MAX_VERIFIERS + 1);
    let mut chunks = list[..MAX_VERIFIERS].chunks(64);
    bounty
        .set_verifiers(chunks.next().unwrap().to_vec(), 1)
        .await
        .unwrap();
    for chunk in chunks {
        bounty.add_verifiers(chunk.to_vec()).await.unwrap();
    }
    let state = reader.read_bounty(address).await.unwrap();
    assert_eq!(state.verifiers.len(), MAX_VERIFIERS);
    let sdk_list: Vec<Address> = list[..MAX_VERIFIERS]
        .iter()
        .copied()
        .map(sdk_addr)
        .collect();
    assert_eq!(state.verifier_set_hash, verifier_set_hash(&sdk_list));

    bounty
        .add_verifiers(list[MAX_VERIFIERS..].to_vec())
        .await
        .unwrap();
    let err = reader.read_bounty(address).await.unwrap_err();
    assert_eq!(
        err,
        ChainReadError::TooManyVerifiers {
            count: MAX_VERIFIERS + 1
        }
    );
}

#[tokio::test]
async fn unreachable_node_error_names_the_call_and_hides_the_url() {
    // Port 9 (discard) refuses connections; the path stands in for an API key.
    let reader = RpcChainReader::new(
        "http://127.0.0.1:9/v2/secret-api-key",
        Duration::from_secs(5),
    )
    .unwrap();
    let err = reader
        .read_bounty(Address::from_bytes([0x22; 20]))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(
            err,
            ChainReadError::Rpc {
                what: "eth_blockNumber",
                ..
            }
        ),
        "{text}"
    );
    assert!(!text.contains("secret-api-key"), "{text}");
    assert!(!format!("{reader:?}").contains("secret-api-key"));
}

#[test]
fn invalid_url_is_refused_without_echoing_it() {
    let err = RpcChainReader::new("not a url secret", Duration::from_secs(1)).unwrap_err();
    assert_eq!(err, ChainReadError::InvalidUrl);
    assert!(!err.to_string().contains("secret"));
}

#[test]
fn rpc_url_must_be_https_or_loopback_http() {
    for bad in [
        "http://rpc.example.com/v2/secret",
        "http://10.0.0.1:8545/secret",
        "http://localhost.example.com/secret",
        "ws://127.0.0.1:8545/secret",
        "ftp://127.0.0.1/secret",
    ] {
        let err = RpcChainReader::new(bad, Duration::from_secs(1)).unwrap_err();
        assert_eq!(err, ChainReadError::InsecureUrl, "{bad}");
        assert!(!err.to_string().contains("secret"));
    }
    for ok in [
        "https://rpc.example.com/v2/key",
        "http://127.0.0.1:8545",
        "http://[::1]:8545",
        "http://localhost:8545",
    ] {
        assert!(
            RpcChainReader::new(ok, Duration::from_secs(1)).is_ok(),
            "{ok}"
        );
    }
}
