//! The dedicated-host route end to end on the real local services (Docker, the Hardhat node,
//! the built binaries, rsync's rrsync): `worker serve` → candidates in `--out` →
//! `deploy/pull-candidates.sh` on the signer side, read-only → `signer sign` ×2 →
//! `keeper relay` → `BountySettled`. Fails loudly when any of them is missing.
//!
//! Every process it starts logs JSON, and what each wrote is scanned afterwards (issue #46
//! item 5, `e2e::logscan`): the long-running `worker serve` too, not only the one-shot steps.

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
    let logs = tempfile::tempdir().unwrap();
    assert!(e2e::capture_logs(logs.path()));
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

    every_process_logged_json_without_a_secret();
}

/// Each process of the route (`worker serve`, `signer history init` and `signer sign` per key,
/// `keeper relay`) left its stderr, every line of it a JSON log object, at least
/// [`MIN_LINES`] of them; no kept file holds a key handed out or a bearer token.
fn every_process_logged_json_without_a_secret() {
    let scan = e2e::scan_captured().unwrap().unwrap();
    let problems = scan.problems(MIN_LINES);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let per = scan.per_binary();
    println!("log lines and processes per binary: {per:?}");
    let processes = |b: &str| per.get(b).map_or(0, |(_, n)| *n);
    assert_eq!(
        (
            processes("worker"),
            processes("signer"),
            processes("keeper")
        ),
        (1, 4, 1),
        "{per:?}"
    );
}

/// The fewest log lines a process of the route writes at debug level: each one announces
/// what it is doing before it ends.
const MIN_LINES: usize = 1;
