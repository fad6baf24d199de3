//! TestBounty against the real local Hardhat node: EIP-712 digest parity, settlement, rejection
//! and every settlement check's revert reason, in PROTOCOL.md section 6 order.
//!
//! Needs the node from `tools/chain/up.sh` (or scripts/services.sh); fails loudly without it.

// Tests may unwrap: a failure here is a test failure with the error printed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use alloy::primitives::{Address, B256, Bytes, U256, b256, keccak256};
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::{SolCall, SolEvent};
use chain_testkit::{
    AttestationFields, BountyParams, DeployedBounty, TestBounty, Testkit, dev_signer,
    local_attestation_digest, revert_reason, status,
};

const TYPEHASH: B256 = b256!("7b0e401618a18680275ae4cded522bcb746f90a19beedaa4af5aea7647dd3ffa");
const BOUNTY_SETTLED_TOPIC: B256 =
    b256!("2ee7b1323824324868017119c9922527f2e2c8eb20a8044c3dd574bdbfb2dd71");
const SUBMISSION_REJECTED_TOPIC: B256 =
    b256!("3c487d053ed1814c5e903e6a86b6f2b9cbebc156d957d9143fa9e89a6e1416b8");

async fn kit() -> Testkit {
    Testkit::connect().await.unwrap_or_else(|e| panic!("{e}"))
}

fn key(i: usize) -> PrivateKeySigner {
    dev_signer(i).unwrap()
}

fn response() -> B256 {
    B256::repeat_byte(0xaa)
}

async fn deadline_in(kit: &Testkit, secs: u64) -> U256 {
    U256::from(kit.latest_timestamp().await.unwrap() + secs)
}

/// A `passed` attestation signed by dev account `signer` for the verifier dev account `claimed`,
/// valid for 900 s more.
async fn passing_attestation(
    kit: &Testkit,
    bounty: &DeployedBounty,
    signer: usize,
    claimed: usize,
) -> TestBounty::Attestation {
    bounty
        .sign_attestation(
            &key(signer),
            key(claimed).address(),
            true,
            response(),
            deadline_in(kit, 900).await,
        )
        .await
        .unwrap()
}

/// A bounty whose verifiers are dev accounts `keys`, expiring in an hour.
async fn bounty_with(kit: &Testkit, keys: &[usize]) -> (DeployedBounty, BountyParams) {
    let verifiers = keys.iter().map(|i| key(*i).address()).collect();
    let now = kit.latest_timestamp().await.unwrap();
    let params = BountyParams::new(verifiers, now + 3600);
    (kit.deploy_bounty(&params).await.unwrap(), params)
}

async fn expect_revert(bounty: &DeployedBounty, atts: Vec<TestBounty::Attestation>, reason: &str) {
    let err = bounty
        .simulate_settle(atts)
        .await
        .expect_err("settlement should revert");
    assert_eq!(
        revert_reason(&err).as_deref(),
        Some(reason),
        "full error: {err}"
    );
}

/// `keccak256(abi.encode(attestations))`, taken from the calldata (selector stripped) so it
/// follows the PROTOCOL calldata vector rather than a second encoder.
fn verification_hash(atts: &[TestBounty::Attestation]) -> B256 {
    let calldata = TestBounty::settleWithAttestationsCall {
        attestations: atts.to_vec(),
    }
    .abi_encode();
    keccak256(&calldata[4..])
}

#[tokio::test]
async fn contract_digest_equals_local_eip712_digest_for_the_golden_values() {
    let kit = kit().await;
    // The golden vector's values, deployed at an address of the node's choosing.
    let mut params = BountyParams::new(vec![key(1).address()], 2_000_000_000);
    params.bounty_id = B256::repeat_byte(0xbb);
    params.round = 7;
    params.submission_hash = B256::repeat_byte(0xcc);
    params.evidence_hash = B256::repeat_byte(0xdd);
    params.policy_hash = B256::repeat_byte(0xee);
    let bounty = kit.deploy_bounty(&params).await.unwrap();
    let c = bounty.contract();
    assert_eq!(c.ATTESTATION_TYPEHASH().call().await.unwrap(), TYPEHASH);

    let verifier = Address::repeat_byte(0x11);
    for passed in [true, false] {
        let fields = AttestationFields {
            chain_id: 8453,
            bounty: bounty.address(),
            bounty_id: params.bounty_id,
            round: 7,
            verifier,
            submission_hash: params.submission_hash,
            evidence_hash: params.evidence_hash,
            policy_hash: params.policy_hash,
            passed,
            response_hash: response(),
            deadline: U256::from(2_000_000_000u64),
        };
        let on_chain = c
            .attestationDigest(verifier, passed, response(), U256::from(2_000_000_000u64))
            .call()
            .await
            .unwrap();
        assert_eq!(
            on_chain,
            local_attestation_digest(&fields),
            "passed={passed}"
        );
        assert_eq!(
            c.domainSeparator().call().await.unwrap(),
            fields.domain_separator()
        );
    }
}

#[tokio::test]
async fn five_terms_hashes_are_committed_at_creation_and_settable() {
    let kit = kit().await;
    let (bounty, params) = bounty_with(&kit, &[1]).await;
    let c = bounty.contract();
    let read = || async {
        [
            c.policyHash().call().await.unwrap(),
            c.termsHash().call().await.unwrap(),
            c.acceptanceCriteriaHash().call().await.unwrap(),
            c.benchmarkHash().call().await.unwrap(),
            c.evidenceSchemaHash().call().await.unwrap(),
        ]
    };
    assert_eq!(
        read().await,
        [
            params.policy_hash,
            params.terms_hash,
            params.acceptance_criteria_hash,
            params.benchmark_hash,
            params.evidence_schema_hash,
        ]
    );
    let [t, a, b, e] = [0x31, 0x32, 0x33, 0x34].map(B256::repeat_byte);
    bounty.set_terms_hashes(t, a, b, e).await.unwrap();
    assert_eq!(read().await, [params.policy_hash, t, a, b, e]);
}

#[tokio::test]
async fn valid_single_attestation_settles_and_pays_the_solver() {
    let kit = kit().await;
    let (bounty, params) = bounty_with(&kit, &[1]).await;
    let att = passing_attestation(&kit, &bounty, 1, 1).await;
    let atts = vec![att];
    assert_eq!(kit.balance(params.solver).await.unwrap(), U256::ZERO);

    let receipt = bounty.settle(atts.clone()).await.unwrap();

    let log = receipt
        .inner
        .logs()
        .iter()
        .find(|l| {
            l.address() == bounty.address() && l.topics().first() == Some(&BOUNTY_SETTLED_TOPIC)
        })
        .expect("BountySettled from the bounty's own address");
    let event = TestBounty::BountySettled::decode_log_data(log.data()).unwrap();
    assert_eq!(event.bountyId, params.bounty_id);
    assert_eq!(event.round, params.round);
    assert_eq!(event.solver, params.solver);
    assert_eq!(event.solverReward, params.reward);
    assert_eq!(event.submissionHash, params.submission_hash);
    assert_eq!(event.evidenceHash, params.evidence_hash);
    assert_eq!(event.policyHash, params.policy_hash);
    assert_eq!(event.verificationHash, verification_hash(&atts));
    assert_eq!(bounty.status().await.unwrap(), status::SETTLED);
    assert_eq!(kit.balance(params.solver).await.unwrap(), params.reward);

    // The same attestations cannot settle twice: the status left Submitted.
    expect_revert(&bounty, atts, "bounty: not submitted").await;
}

#[tokio::test]
async fn failed_verdict_rejects_and_keeps_the_reward() {
    let kit = kit().await;
    let (bounty, params) = bounty_with(&kit, &[1, 2]).await;
    let deadline = deadline_in(&kit, 900).await;
    let mut atts = Vec::new();
    for i in [2, 1] {
        atts.push(
            bounty
                .sign_attestation(&key(i), key(i).address(), false, response(), deadline)
                .await
                .unwrap(),
        );
    }
    let receipt = bounty.settle(atts.clone()).await.unwrap();
    let log = receipt
        .inner
        .logs()
        .iter()
        .find(|l| {
            l.address() == bounty.address()
                && l.topics().first() == Some(&SUBMISSION_REJECTED_TOPIC)
        })
        .expect("SubmissionRejected from the bounty's own address");
    let event = TestBounty::SubmissionRejected::decode_log_data(log.data()).unwrap();
    assert_eq!(event.bountyId, params.bounty_id);
    assert_eq!(event.round, params.round);
    assert_eq!(event.solver, params.solver);
    assert_eq!(event.verificationHash, verification_hash(&atts));
    assert_eq!(bounty.status().await.unwrap(), status::CLAIMABLE);
    assert_eq!(kit.balance(params.solver).await.unwrap(), U256::ZERO);
    assert_eq!(kit.balance(bounty.address()).await.unwrap(), params.reward);
}

#[tokio::test]
async fn wrong_signer_reverts_with_invalid_signature() {
    let kit = kit().await;
    let (bounty, _) = bounty_with(&kit, &[1]).await;
    // Signed by dev #2 but claims to be verifier dev #1.
    let att = passing_attestation(&kit, &bounty, 2, 1).await;
    expect_revert(&bounty, vec![att.clone()], "bounty: invalid signature").await;
    assert!(bounty.settle(vec![att]).await.is_err());
    assert_eq!(bounty.status().await.unwrap(), status::SUBMITTED);
}

#[tokio::test]
async fn signature_tampering_is_refused_for_the_right_reason() {
    let kit = kit().await;
    let (bounty, _) = bounty_with(&kit, &[1]).await;
    let good = passing_attestation(&kit, &bounty, 1, 1).await;
    let with_sig = |sig: Vec<u8>| {
        let mut a = good.clone();
        a.signature = Bytes::from(sig);
        a
    };
    let sig = good.signature.to_vec();

    // The malleable twin (n - s, flipped v) recovers the same key but must be refused.
    let n = U256::from_be_bytes(alloy::primitives::hex!(
        "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141"
    ));
    let high_s = n - U256::from_be_slice(&sig[32..64]);
    let mut twin = sig.clone();
    twin[32..64].copy_from_slice(&high_s.to_be_bytes::<32>());
    twin[64] = if sig[64] == 27 { 28 } else { 27 };
    expect_revert(&bounty, vec![with_sig(twin)], "bounty: signature s not low").await;

    for v in [0u8, 1, 29] {
        let mut bad_v = sig.clone();
        bad_v[64] = v;
        expect_revert(
            &bounty,
            vec![with_sig(bad_v)],
            "bounty: signature v invalid",
        )
        .await;
    }
    expect_revert(
        &bounty,
        vec![with_sig(sig[..64].to_vec())],
        "bounty: signature length",
    )
    .await;
    let mut long = sig.clone();
    long.push(0);
    expect_revert(&bounty, vec![with_sig(long)], "bounty: signature length").await;

    // A flipped verdict under the same signature is a different digest.
    let mut flipped = good.clone();
    flipped.passed = false;
    expect_revert(&bounty, vec![flipped], "bounty: invalid signature").await;

    bounty.simulate_settle(vec![good]).await.unwrap();
}

#[tokio::test]
async fn bounty_state_checks_revert_in_protocol_order() {
    let kit = kit().await;
    let (bounty, params) = bounty_with(&kit, &[1]).await;
    let att = passing_attestation(&kit, &bounty, 1, 1).await;
    let good = vec![att.clone()];

    for s in [
        status::OPEN,
        status::CLAIMABLE,
        status::CLAIMED,
        status::SETTLED,
        status::CANCELLED,
    ] {
        bounty.set_status(s).await.unwrap();
        expect_revert(&bounty, good.clone(), "bounty: not submitted").await;
    }
    bounty.set_status(status::SUBMITTED).await.unwrap();

    bounty.set_verification_mode(0).await.unwrap();
    expect_revert(&bounty, good.clone(), "bounty: not a quorum mode").await;
    // Status is checked before mode.
    bounty.set_status(status::CLAIMED).await.unwrap();
    expect_revert(&bounty, good.clone(), "bounty: not submitted").await;
    bounty.set_status(status::SUBMITTED).await.unwrap();
    bounty.set_verification_mode(2).await.unwrap();
    bounty.simulate_settle(good.clone()).await.unwrap();
    bounty.set_verification_mode(1).await.unwrap();

    let now = kit.latest_timestamp().await.unwrap();
    bounty.set_verification_expires_at(now - 1).await.unwrap();
    expect_revert(&bounty, good.clone(), "bounty: verification expired").await;
    // Expiry is checked before the attestation count.
    expect_revert(&bounty, vec![], "bounty: verification expired").await;
    bounty
        .set_verification_expires_at(params.verification_expires_at)
        .await
        .unwrap();

    expect_revert(&bounty, vec![], "bounty: wrong attestation count").await;
    expect_revert(
        &bounty,
        vec![att.clone(), att.clone()],
        "bounty: wrong attestation count",
    )
    .await;
    bounty.simulate_settle(good).await.unwrap();
}

#[tokio::test]
async fn attestation_checks_revert_in_protocol_order() {
    let kit = kit().await;
    let (bounty, _) = bounty_with(&kit, &[1, 2]).await;
    let deadline = deadline_in(&kit, 900).await;
    let past = U256::from(kit.latest_timestamp().await.unwrap() - 1000);
    let sign = |i: usize, passed: bool, deadline: U256| {
        let bounty = bounty.clone();
        async move {
            bounty
                .sign_attestation(&key(i), key(i).address(), passed, response(), deadline)
                .await
                .unwrap()
        }
    };

    let pass1 = sign(1, true, deadline).await;
    let pass2 = sign(2, true, deadline).await;
    let fail2 = sign(2, false, deadline).await;
    let outsider = sign(3, true, deadline).await;
    let late2 = sign(2, true, past).await;
    let outsider_fail = sign(3, false, deadline).await;
    let late_outsider = sign(3, true, past).await;
    let late1 = sign(1, true, past).await;
    let mut forged = pass1.clone();
    forged.signature = pass2.signature.clone();

    // Each check, then a pair that would also fail the next check, to pin the order.
    let cases = [
        (vec![pass1.clone(), fail2], "bounty: mixed verdicts"),
        // Mixed verdicts come before membership.
        (vec![pass1.clone(), outsider_fail], "bounty: mixed verdicts"),
        (vec![pass1.clone(), outsider], "bounty: not a verifier"),
        // Membership comes before the deadline.
        (vec![late2.clone(), late_outsider], "bounty: not a verifier"),
        (
            vec![pass1.clone(), late2],
            "bounty: attestation deadline passed",
        ),
        // The deadline comes before duplicates.
        (
            vec![late1.clone(), late1],
            "bounty: attestation deadline passed",
        ),
        (
            vec![pass1.clone(), pass1.clone()],
            "bounty: duplicate verifier",
        ),
        // Duplicates come before signatures.
        (
            vec![forged.clone(), forged.clone()],
            "bounty: duplicate verifier",
        ),
        (vec![pass2.clone(), forged], "bounty: invalid signature"),
    ];
    for (atts, reason) in cases {
        expect_revert(&bounty, atts, reason).await;
    }

    // Order of attestations in the array is free.
    bounty.simulate_settle(vec![pass2, pass1]).await.unwrap();
}

#[tokio::test]
async fn erc1271_contract_verifier_settles_alongside_an_eoa() {
    let kit = kit().await;
    let wallet_owner = key(4);
    let wallet = kit
        .deploy_verifier_wallet(wallet_owner.address())
        .await
        .unwrap();
    let now = kit.latest_timestamp().await.unwrap();
    let params = BountyParams::new(vec![wallet, key(1).address()], now + 3600);
    let bounty = kit.deploy_bounty(&params).await.unwrap();
    let deadline = deadline_in(&kit, 900).await;

    let eoa = bounty
        .sign_attestation(&key(1), key(1).address(), true, response(), deadline)
        .await
        .unwrap();
    let wrong = bounty
        .sign_attestation(&key(5), wallet, true, response(), deadline)
        .await
        .unwrap();
    expect_revert(
        &bounty,
        vec![wrong, eoa.clone()],
        "bounty: invalid erc1271 signature",
    )
    .await;

    let by_wallet = bounty
        .sign_attestation(&wallet_owner, wallet, true, response(), deadline)
        .await
        .unwrap();
    let atts = vec![by_wallet, eoa];
    let receipt = bounty.settle(atts.clone()).await.unwrap();
    let log = receipt
        .inner
        .logs()
        .iter()
        .find(|l| l.topics().first() == Some(&BOUNTY_SETTLED_TOPIC))
        .expect("BountySettled");
    let event = TestBounty::BountySettled::decode_log_data(log.data()).unwrap();
    assert_eq!(event.verificationHash, verification_hash(&atts));
    assert_eq!(kit.balance(params.solver).await.unwrap(), params.reward);
}

#[tokio::test]
async fn setters_are_owner_only_and_refuse_a_zero_threshold() {
    let kit = kit().await;
    let (bounty, _) = bounty_with(&kit, &[1]).await;
    let stranger = Testkit::connect().await.unwrap();
    let foreign = TestBounty::new(bounty.address(), stranger.provider().clone());
    let err = foreign
        .setStatus(status::SETTLED)
        .call()
        .await
        .expect_err("stranger must be refused");
    assert_eq!(
        revert_reason(&err).as_deref(),
        Some("test bounty: caller is not the owner")
    );
    let err = bounty
        .contract()
        .setThreshold(0)
        .call()
        .await
        .expect_err("zero threshold");
    assert_eq!(
        revert_reason(&err).as_deref(),
        Some("test bounty: zero threshold")
    );
    let dup = vec![key(1).address(), key(1).address()];
    let err = bounty
        .contract()
        .setVerifiers(dup, 1)
        .call()
        .await
        .expect_err("duplicate verifier");
    assert_eq!(
        revert_reason(&err).as_deref(),
        Some("test bounty: duplicate verifier")
    );
}
