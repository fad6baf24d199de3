//! The whole bounty on the real local services: Docker with the digest-pinned Python image,
//! the Hardhat node, and the built `worker`, `signer` and `keeper` binaries. Needs
//! `scripts/services.sh` and `cargo build -p worker -p signer -p keeper` (nextest builds every
//! workspace binary first); fails loudly when any of them is missing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use chain_testkit::{Testkit, status};
use e2e::{E2eConfig, Scenario, run_scenario};
use verifier_sdk::settle::SettlementEvent;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn config() -> E2eConfig {
    let root = repo_root();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    E2eConfig::from_repo(&root, &target.join("debug"), &root.join(".work/e2e-test"))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// One test for both scenarios: they share the keeper's dev account, whose nonce two
/// parallel runs would race on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passing_solution_settles_and_failing_one_is_rejected() {
    let cfg = config();
    let kit = Testkit::connect().await.unwrap_or_else(|e| panic!("{e}"));

    let settled = run_scenario(&cfg, Scenario::Settled)
        .await
        .unwrap_or_else(|e| panic!("settled scenario: {e}"));
    assert!(
        matches!(settled.event, SettlementEvent::Settled(_)),
        "{settled:?}"
    );
    // Read the status again through a connection of our own, not the run's.
    let bounty = chain_testkit::TestBounty::new(settled.bounty, kit.provider().clone());
    assert_eq!(bounty.status().call().await.unwrap(), status::SETTLED);

    let rejected = run_scenario(&cfg, Scenario::Rejected)
        .await
        .unwrap_or_else(|e| panic!("rejected scenario: {e}"));
    assert!(
        matches!(rejected.event, SettlementEvent::Rejected(_)),
        "{rejected:?}"
    );
    let bounty = chain_testkit::TestBounty::new(rejected.bounty, kit.provider().clone());
    let after = bounty.status().call().await.unwrap();
    assert_ne!(after, status::SETTLED);
    assert_ne!(after, status::SUBMITTED);
    assert_ne!(settled.bounty, rejected.bounty);
}
