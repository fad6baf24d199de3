//! Each chaos run plays on a Hardhat node of its own (`e2e::chaos::node`): the late-image lane
//! of docs/chaos.md broke on seeds 7, 11, 12 and 17 while other tests moved the shared node's
//! clock (`evm_increaseTime`), which decides every window a run judges. Two runs' chains must
//! not share a clock: a warp of one run's chain leaves the other's where it was.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use alloy::providers::Provider;
use e2e::chaos::node::OwnChain;

const WARP_SECS: u64 = 3_600;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_warp_on_another_runs_chain_does_not_move_this_runs_windows() {
    let warped = OwnChain::start().await.unwrap();
    let ours = OwnChain::start().await.unwrap();
    // Each chain's clock is measured against its own start: the two nodes start a second apart
    // on a busy host, so the warped one's genesis may be a second older than ours.
    let warped_before = warped.kit().latest_timestamp().await.unwrap();
    let ours_before = ours.kit().latest_timestamp().await.unwrap();

    let p = warped.kit().provider();
    let _: String = p
        .raw_request("evm_increaseTime".into(), (WARP_SECS,))
        .await
        .unwrap();
    let _: String = p
        .raw_request("evm_mine".into(), Vec::<bool>::new())
        .await
        .unwrap();
    let warped_now = warped.kit().latest_timestamp().await.unwrap();
    // The warp took effect where it was sent, so the check below can fail.
    assert!(
        warped_now >= warped_before + WARP_SECS,
        "the warped chain is at {warped_now}, not {WARP_SECS} s past {warped_before}"
    );

    let _: String = ours
        .kit()
        .provider()
        .raw_request("evm_mine".into(), Vec::<bool>::new())
        .await
        .unwrap();
    let ours_now = ours.kit().latest_timestamp().await.unwrap();
    // Half the warp: this test would have to take half an hour of wall time to pass it alone.
    assert!(
        ours_now < ours_before + WARP_SECS / 2,
        "another run's warp moved this run's chain from {ours_before} to {ours_now}"
    );
}
