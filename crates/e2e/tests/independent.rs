//! Independent execution on the real local services with a benchmark that prints timings:
//! runner and both slots run the job in the sandbox, each slot agrees through
//! `compare-candidates.sh` and signs its own run, the keeper relays, and the bounty settles
//! with two different response hashes in one transaction. Needs `scripts/services.sh` and the
//! built `worker`, `signer` and `keeper`; fails loudly when any is missing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use chain_testkit::{Testkit, status};
use e2e::E2eConfig;
use e2e::independent::run_independent;
use verifier_sdk::settle::SettlementEvent;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn independent_runs_of_a_timing_printing_benchmark_settle_with_two_response_hashes() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let cfg = E2eConfig::from_repo(
        &root,
        &target.join("debug"),
        &root.join(".work/e2e-independent-test"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let r = run_independent(&cfg)
        .await
        .unwrap_or_else(|e| panic!("independent execution: {e}"));
    assert!(matches!(r.event, SettlementEvent::Settled(_)), "{r:?}");
    assert_eq!(r.relayed.len(), 2, "{r:?}");
    assert!(r.relayed.iter().all(|(_, passed, _)| *passed), "{r:?}");
    let (a, b) = (r.relayed[0].2, r.relayed[1].2);
    assert_ne!(a, b, "the two slots' runs printed different timings: {r:?}");
    assert!(
        a != r.runner_response_hash && b != r.runner_response_hash,
        "each slot signed its own run, not the runner's: {r:?}"
    );
    let kit = Testkit::connect().await.unwrap();
    let bounty = chain_testkit::TestBounty::new(r.bounty, kit.provider().clone());
    assert_eq!(bounty.status().call().await.unwrap(), status::SETTLED);
}
