//! The money path under generated fault schedules (issue 30), on the real services: Docker
//! with the digest-pinned Python image, the Hardhat node, the built `worker`, `signer` and
//! `keeper`. Each seed of `e2e::chaos::CI_SEEDS` plays 6 bounties (good, bad, wrong image;
//! threshold 1 and 2) through cycles of the binaries while its schedule kills processes,
//! kills sandbox containers, breaks the feed and the RPC and fills the disks, then checks
//! every invariant from the chain and the files. A failure prints the seed, the schedule and
//! the replay command. Needs root for the tmpfs mounts (CI runs .ci/run under sudo).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use e2e::E2eConfig;
use e2e::chaos::{CI_SEEDS, ChaosOptions, run, summary_table};

fn config() -> E2eConfig {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    E2eConfig::from_repo(&root, &target.join("debug"), &root.join(".work/chaos-test"))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// One test for every seed: the schedules share the Docker daemon and the chain, and one at a
/// time keeps each run's timing its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ci_seeds_keep_every_money_path_invariant() {
    let cfg = config();
    let mut results = Vec::new();
    let mut failures = Vec::new();
    for &seed in CI_SEEDS {
        let r = run(&cfg, &ChaosOptions::new(seed))
            .await
            .unwrap_or_else(|e| panic!("seed {seed}: the driver failed: {e}"));
        if !r.violations.is_empty() {
            failures.push(r.failure_report());
        }
        results.push(Ok(r));
    }
    println!("{}", summary_table(&results));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
