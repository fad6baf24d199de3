//! `RpcChainReader::read_settlement` against the real local Hardhat node (scripts/services.sh;
//! fails loudly without it): settlements sent to a deployed `TestBounty` read back with every
//! signer recovered and checked, and what is not a settlement refused with a clear message.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use alloy::primitives::{B256, U256};
use bounty_chain::SettlementReadError;
use chain_testkit::{DeployedBounty, Testkit, dev_signer};
use common::{deployed, sdk_addr};
use verifier_sdk::settlement::SettlementError;
use verifier_sdk::{Address, Bytes32};

/// Settles `bounty` with dev verifiers 1 and 2, each signing its own response hash.
async fn settle(kit: &Testkit, bounty: &DeployedBounty, passed: bool) -> (Bytes32, [B256; 2]) {
    let deadline = U256::from(kit.latest_timestamp().await.unwrap() + 900);
    let hashes = [B256::repeat_byte(0x51), B256::repeat_byte(0x52)];
    let mut atts = Vec::new();
    for (i, hash) in [1usize, 2].into_iter().zip(hashes) {
        let key = dev_signer(i).unwrap();
        atts.push(
            bounty
                .sign_attestation(&key, key.address(), passed, hash, deadline)
                .await
                .unwrap(),
        );
    }
    let receipt = bounty.settle(atts).await.unwrap();
    (Bytes32::from(receipt.transaction_hash), hashes)
}

#[tokio::test]
async fn a_settlement_reads_back_with_every_signer_recovered() {
    let (kit, reader, bounty, _) = deployed().await;
    let (tx, hashes) = settle(&kit, &bounty, true).await;
    let s = reader.read_settlement(tx, None).await.unwrap();
    assert_eq!(s.bounty, sdk_addr(bounty.address()));
    assert!(s.passed);
    assert_eq!(s.chain_id, 8453);
    let got: Vec<(Address, Bytes32)> = s
        .attestations
        .iter()
        .map(|a| (a.verifier, a.response_hash))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                sdk_addr(dev_signer(1).unwrap().address()),
                Bytes32::from(hashes[0])
            ),
            (
                sdk_addr(dev_signer(2).unwrap().address()),
                Bytes32::from(hashes[1])
            ),
        ]
    );
}

#[tokio::test]
async fn a_rejection_reads_back_as_failed() {
    let (kit, reader, bounty, _) = deployed().await;
    let (tx, _) = settle(&kit, &bounty, false).await;
    let s = reader.read_settlement(tx, None).await.unwrap();
    assert!(!s.passed);
    assert_eq!(s.attestations.len(), 2);
    assert!(s.attestations.iter().all(|a| !a.passed));
}

#[tokio::test]
async fn signers_that_are_not_the_jobs_committed_verifiers_are_refused() {
    let (kit, reader, bounty, _) = deployed().await;
    let (tx, _) = settle(&kit, &bounty, true).await;
    let job = [
        sdk_addr(dev_signer(1).unwrap().address()),
        sdk_addr(dev_signer(3).unwrap().address()),
    ];
    let err = reader.read_settlement(tx, Some(&job)).await.unwrap_err();
    assert!(
        matches!(
            &err,
            SettlementReadError::Refused {
                source: SettlementError::NotACommittedVerifier { of: "job", verifier },
                ..
            } if *verifier == sdk_addr(dev_signer(2).unwrap().address())
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("is not a committed verifier of the job"),
        "{err}"
    );
}

#[tokio::test]
async fn a_transaction_that_is_not_a_settlement_is_refused_clearly() {
    let (_kit, reader, bounty, _) = deployed().await;
    // An owner call to the same bounty: mined, successful, not settleWithAttestations.
    let receipt = bounty.set_round(9).await.unwrap();
    let tx = Bytes32::from(receipt.transaction_hash);
    let err = reader.read_settlement(tx, None).await.unwrap_err();
    assert!(
        matches!(err, SettlementReadError::NotASettlement { .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("is not a settlement of a bounty"),
        "{err}"
    );

    let unknown = Bytes32::from_bytes([0x77; 32]);
    let err = reader.read_settlement(unknown, None).await.unwrap_err();
    assert!(
        matches!(err, SettlementReadError::NoTransaction(_)),
        "{err}"
    );
}
