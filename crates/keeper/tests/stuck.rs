//! A settlement transaction that no block includes (the base fee rose above what it offers),
//! on a Hardhat node of the test's own with automine off: the test mines the blocks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use chain_testkit::{PrivateNode, Testkit, status};
use common::{Scenario, only_job, recorded, tx_record};
use keeper::chain::SettlementRpc;
use keeper::fees::FeePlan;
use keeper::record::{RecordState, SettlementRecord};
use keeper::report::JobStatus;

const GWEI: u128 = 1_000_000_000;

/// A chain producing a block every 200 ms whose base fee is pinned at `base_fee`.
fn keep_mining(node: Arc<PrivateNode>, base_fee: u128) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        // Ends when the node does (the test is over).
        while node.set_next_base_fee(base_fee).await.is_ok() && node.mine().await.is_ok() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// A transaction an earlier keeper run sent with `fee_per_gas` (tip 1 gwei), waiting in the
/// pool of a private node that now mines a block every 200 ms at `base_fee` (automine off).
struct Stuck {
    node: Arc<PrivateNode>,
    sc: Scenario,
    nonce: u64,
    fees: FeePlan,
    tx: keeper::chain::SignedTx,
    record: SettlementRecord,
    rpc: SettlementRpc,
    miner: tokio::task::JoinHandle<()>,
}

impl Stuck {
    async fn new(fee_per_gas: u128, base_fee: u128) -> Self {
        let node = Arc::new(PrivateNode::start().await.unwrap());
        let kit = Testkit::connect_to(node.url()).await.unwrap();
        let sc = Scenario::on(kit, &[1], 0).await;
        sc.attest_all();
        let nonce = sc.keeper_nonce().await;
        let fees = FeePlan {
            gas_limit: 1_000_000,
            max_fee_per_gas: fee_per_gas,
            max_priority_fee_per_gas: GWEI,
        };
        let (tx, record) = recorded(&sc, nonce, fees, RecordState::Sent);
        node.set_automine(false).await.unwrap();
        let rpc = SettlementRpc::new(node.url(), keeper::REQUEST_TIMEOUT).unwrap();
        rpc.send_raw(&tx).await.unwrap();
        let miner = keep_mining(node.clone(), base_fee);
        Self {
            node,
            sc,
            nonce,
            fees,
            tx,
            record,
            rpc,
            miner,
        }
    }
}

/// A transaction stuck in the pool (the previous run sent it at 2 gwei, the base fee is now
/// 10 gwei): before the fix the keeper waited on it until its receipt timeout and reported
/// `pending`, run after run, with the bounty unsettled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stuck_transaction_is_replaced_with_bumped_fees_and_settles() {
    let Stuck {
        node: _node,
        sc,
        nonce,
        fees: low,
        tx: stuck,
        record,
        rpc,
        miner,
    } = Stuck::new(2 * GWEI, 10 * GWEI).await;
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

    let stored = sc.load(&record);
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
    let Stuck {
        node: _node,
        sc,
        nonce,
        tx: stuck,
        record,
        miner,
        ..
    } = Stuck::new(50 * GWEI, 60 * GWEI).await;

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
    let stored = sc.load(&record);
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
    sc.save(&record);

    let report = sc.run().await;
    let job = only_job(&report);
    assert_eq!(job.status, JobStatus::Paid, "{job:#?}");
    assert_eq!(job.tx_hash, Some(first.hash));
    let stored = sc.load(&record);
    assert_eq!(stored.state, RecordState::Confirmed);
    assert_eq!(stored.tx.hash, first.hash);
    assert_eq!(stored.confirmation.unwrap().tx_hash, first.hash);
    assert_eq!(sc.keeper_nonce().await, nonce + 1);
}
