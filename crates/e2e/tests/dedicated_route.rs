//! The dedicated-host route end to end on the real local services (Docker, the Hardhat node,
//! the built binaries, rsync's rrsync): `worker serve` → candidates in `--out` →
//! `deploy/pull-candidates.sh` on the signer side, read-only → `signer sign` ×2 →
//! `keeper relay` → `BountySettled`. Fails loudly when any of them is missing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use chain_testkit::{Testkit, status};
use e2e::E2eConfig;
use e2e::dedicated::run_dedicated_route;
use verifier_sdk::settle::SettlementEvent;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_candidates_pulled_read_only_by_the_signer_host_settle_the_bounty() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let cfg = E2eConfig::from_repo(
        &root,
        &target.join("debug"),
        &root.join(".work/e2e-dedicated-test"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let kit = Testkit::connect().await.unwrap_or_else(|e| panic!("{e}"));

    let settled = run_dedicated_route(&cfg)
        .await
        .unwrap_or_else(|e| panic!("dedicated route: {e}"));
    assert!(
        matches!(settled.event, SettlementEvent::Settled(_)),
        "{settled:?}"
    );
    // Read the status again through a connection of our own, not the run's.
    let bounty = chain_testkit::TestBounty::new(settled.bounty, kit.provider().clone());
    assert_eq!(bounty.status().call().await.unwrap(), status::SETTLED);
}
