//! A settlement transaction that no block includes (the base fee rose above what it offers),
//! on a Hardhat node of the test's own with automine off: the test mines the blocks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chain_testkit::{PrivateNode, Testkit, status};
use common::{Scenario, only_job};
use keeper::chain::{SettlementRpc, SignedTx, sign_settlement};
use keeper::fees::FeePlan;
use keeper::record::{RECORD_SCHEMA, RecordState, SettlementRecord, StateDir, TxRecord};
use keeper::report::JobStatus;
use keeper::select::{NamedAttestation, select};
use verifier_sdk::settle::settle_calldata;
use verifier_sdk::{Address, AttestationFile};

const GWEI: u128 = 1_000_000_000;

/// Signs the settlement the keeper would send at `nonce` with `fees` and files it as `state`.
fn recorded(
    sc: &Scenario,
    nonce: u64,
    fees: FeePlan,
    state: RecordState,
) -> (SignedTx, SettlementRecord) {
    let files: Vec<_> = sc
        .verifier_keys
        .iter()
        .map(|i| NamedAttestation {
            source: format!("test/{i}"),
            file: AttestationFile::from_value(&sc.attestation(*i)).unwrap(),
        })
        .collect();
    let committed = sc.validated.eligible_verifiers().to_vec();
    let sel = select(
        &sc.validated,
        &sc.outcome,
        &committed,
        sc.validated.threshold(),
        &files,
        sc.now,
    )
    .result
    .unwrap();
    let calldata = settle_calldata(&sel.attestations);
    let signed = sign_settlement(
        &sc.keeper,
        8453,
        nonce,
        sc.validated.bounty_contract(),
        &calldata,
        &fees,
    )
    .unwrap();
    let record = SettlementRecord {
        schema_version: RECORD_SCHEMA.into(),
        chain_id: 8453,
        bounty_contract: sc.validated.bounty_contract(),
        round: sc.validated.round(),
        job_id: sc.validated.job_id().into(),
        state,
        keeper: Address::from(sc.keeper.address()),
        passed: true,
        bounty_id: sc.validated.bounty_id(),
        solver: sc.validated.solver(),
        submission_hash: sc.validated.submission_hash(),
        evidence_hash: sc.validated.evidence_hash(),
        policy_hash: sc.validated.policy_hash(),
        verification_hash: sel.verification_hash,
        verifiers: sel.verifiers,
        tx: tx_record(&signed, nonce, fees),
        confirmation: None,
        previous_attempts: vec![],
        replaced: vec![],
        updated_at: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    };
    StateDir::open(&sc.path("state"))
        .unwrap()
        .save(&record)
        .unwrap();
    (signed, record)
}

fn tx_record(signed: &SignedTx, nonce: u64, fees: FeePlan) -> TxRecord {
    TxRecord {
        hash: signed.hash,
        raw: format!("0x{}", alloy::hex::encode(&signed.raw)),
        nonce,
        gas_limit: fees.gas_limit,
        max_fee_per_gas: fees.max_fee_per_gas.to_string(),
        max_priority_fee_per_gas: fees.max_priority_fee_per_gas.to_string(),
        sent_block: None,
    }
}

fn load(sc: &Scenario, record: &SettlementRecord) -> SettlementRecord {
    StateDir::open(&sc.path("state"))
        .unwrap()
        .load(&record.key())
        .unwrap()
        .unwrap()
}

/// A chain producing a block every 200 ms whose base fee is pinned at `base_fee`.
fn keep_mining(node: Arc<PrivateNode>, base_fee: u128) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        // Ends when the node does (the test is over).
        while node.set_next_base_fee(base_fee).await.is_ok() && node.mine().await.is_ok() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// A transaction stuck in the pool (the previous run sent it at 2 gwei, the base fee is now
/// 10 gwei): before the fix the keeper waited on it until its receipt timeout and reported
/// `pending`, run after run, with the bounty unsettled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stuck_transaction_is_replaced_with_bumped_fees_and_settles() {
    let node = Arc::new(PrivateNode::start().await.unwrap());
    let kit = Testkit::connect_to(node.url()).await.unwrap();
    let sc = Scenario::on(kit, &[1], 0).await;
    sc.attest_all();
    let nonce = sc.keeper_nonce().await;
    let low = FeePlan {
        gas_limit: 1_000_000,
        max_fee_per_gas: 2 * GWEI,
        max_priority_fee_per_gas: GWEI,
    };
    let (stuck, record) = recorded(&sc, nonce, low, RecordState::Sent);
    node.set_automine(false).await.unwrap();
    let rpc = SettlementRpc::new(node.url(), keeper::REQUEST_TIMEOUT).unwrap();
    rpc.send_raw(&stuck).await.unwrap();
    let miner = keep_mining(node.clone(), 10 * GWEI);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        rpc.receipt(stuck.hash).await.unwrap().is_none(),
        "the transaction must be stuck before the keeper runs"
    );

    let mut cfg = sc.config();
    cfg.wait.replace_after_blocks = 3;
    cfg.wait.timeout = Duration::from_secs(20);
    let report = sc.run_with(&cfg).await;
    miner.abort();
    let job = only_job(&report);
    assert_eq!(job.status, JobStatus::Paid, "{job:#?}");
    assert_ne!(job.tx_hash, Some(stuck.hash), "a replacement was mined");
    assert_eq!(sc.status().await, status::SETTLED);
    assert!(rpc.receipt(stuck.hash).await.unwrap().is_none());
    assert_eq!(sc.keeper_nonce().await, nonce + 1, "the same nonce, once");

    let stored = load(&sc, &record);
    assert_eq!(stored.state, RecordState::Confirmed);
    assert_eq!(stored.tx.nonce, nonce);
    assert_eq!(Some(stored.tx.hash), job.tx_hash);
    assert_eq!(stored.replaced.len(), 1);
    assert_eq!(stored.replaced[0].hash, stuck.hash);
    let fee: u128 = stored.tx.max_fee_per_gas.parse().unwrap();
    let tip: u128 = stored.tx.max_priority_fee_per_gas.parse().unwrap();
    assert!(
        fee * 10 >= low.max_fee_per_gas * 11,
        "fee bumped by 10 %: {fee}"
    );
    assert!(
        tip * 10 >= low.max_priority_fee_per_gas * 11,
        "tip bumped by 10 %: {tip}"
    );
    assert!(fee >= 10 * GWEI, "pays the current base fee: {fee}");
    assert!(fee <= cfg.caps.max_fee_per_gas, "within the cap: {fee}");
}

/// The same stuck transaction when the base fee is above the operator's cap: nothing more is
/// offered than the cap allows; the keeper reports it pending and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stuck_transaction_is_not_replaced_above_the_fee_cap() {
    let node = Arc::new(PrivateNode::start().await.unwrap());
    let kit = Testkit::connect_to(node.url()).await.unwrap();
    let sc = Scenario::on(kit, &[1], 0).await;
    sc.attest_all();
    let nonce = sc.keeper_nonce().await;
    let low = FeePlan {
        gas_limit: 1_000_000,
        max_fee_per_gas: 50 * GWEI,
        max_priority_fee_per_gas: GWEI,
    };
    let (stuck, record) = recorded(&sc, nonce, low, RecordState::Sent);
    node.set_automine(false).await.unwrap();
    let rpc = SettlementRpc::new(node.url(), keeper::REQUEST_TIMEOUT).unwrap();
    rpc.send_raw(&stuck).await.unwrap();
    let miner = keep_mining(node.clone(), 60 * GWEI);

    let mut cfg = sc.config();
    cfg.caps.max_fee_per_gas = 54 * GWEI;
    cfg.wait.replace_after_blocks = 3;
    cfg.wait.timeout = Duration::from_secs(4);
    let report = sc.run_with(&cfg).await;
    miner.abort();
    let job = only_job(&report);
    assert_eq!(job.status, JobStatus::Pending, "{job:#?}");
    assert_eq!(
        job.code.as_deref(),
        Some("replacement_above_cap"),
        "{job:#?}"
    );
    assert_eq!(job.tx_hash, Some(stuck.hash));
    assert_eq!(sc.status().await, status::SUBMITTED);
    assert_eq!(sc.keeper_nonce().await, nonce, "nothing mined");
    let stored = load(&sc, &record);
    assert_eq!(stored.tx.hash, stuck.hash, "no replacement recorded");
    assert!(stored.replaced.is_empty());
}

/// The replaced transaction is the one a block included after all (it was already on its
/// way when the replacement went out): the next run finds its receipt, checks its event and
/// reports the payment, instead of calling the recorded transaction dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replaced_transaction_mined_instead_is_confirmed() {
    let sc = Scenario::new(&[1], 0).await;
    sc.attest_all();
    let nonce = sc.keeper_nonce().await;
    let first_fees = FeePlan {
        gas_limit: 1_000_000,
        max_fee_per_gas: 50 * GWEI,
        max_priority_fee_per_gas: GWEI,
    };
    let (first, mut record) = recorded(&sc, nonce, first_fees, RecordState::Sent);
    SettlementRpc::new(sc.kit.url(), keeper::REQUEST_TIMEOUT)
        .unwrap()
        .send_raw(&first)
        .await
        .unwrap();
    // The record names a replacement that never reached the chain.
    let bumped = FeePlan {
        max_fee_per_gas: 60 * GWEI,
        max_priority_fee_per_gas: 2 * GWEI,
        ..first_fees
    };
    let (second, _) = recorded(&sc, nonce, bumped, RecordState::Sent);
    record.replaced = vec![record.tx.clone()];
    record.tx = tx_record(&second, nonce, bumped);
    StateDir::open(&sc.path("state"))
        .unwrap()
        .save(&record)
        .unwrap();

    let report = sc.run().await;
    let job = only_job(&report);
    assert_eq!(job.status, JobStatus::Paid, "{job:#?}");
    assert_eq!(job.tx_hash, Some(first.hash));
    let stored = load(&sc, &record);
    assert_eq!(stored.state, RecordState::Confirmed);
    assert_eq!(stored.tx.hash, first.hash);
    assert_eq!(stored.confirmation.unwrap().tx_hash, first.hash);
    assert_eq!(sc.keeper_nonce().await, nonce + 1);
}
