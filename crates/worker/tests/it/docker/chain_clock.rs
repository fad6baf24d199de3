//! Windows are chain time (issue #43): the signer refuses `deadline_too_close` by the latest
//! block's timestamp and the contract settles by its block's. A `worker feed` given `--rpc`
//! judges windows by that clock when it is ahead of this host's, so a chain that runs ahead of
//! the wall clock (a late host clock, a development chain someone warped) does not make the
//! worker start a job the signer will refuse.
//!
//! The chain is a real Hardhat node of the test's own (`chain_testkit::PrivateNode`: the
//! shared one at :8545 is warped by nobody here), from `tools/chain` as `scripts/services.sh`
//! installs it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use chain_testkit::PrivateNode;
use serde_json::{Value, json};
use verifier_sdk::fixtures::EXPIRES_AT;

use crate::example_feed::{ExampleFeed, commit, example, feed_args};
use crate::feed_support::*;

/// The job's window ends years after this host's clock but 200 s after the chain's: by the
/// host clock it has all the time it needs, by the chain's (the signer's) it cannot settle.
/// Before: `worker feed --rpc` ran it (`completed_passed`), a candidate the signer refuses
/// `deadline_too_close`. Now: `window_too_short`, with the chain's figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_running_ahead_of_the_host_clock_decides_window_too_short() {
    let w = ExampleFeed::new(&["work", "staging", "out"]).await;
    let tree = example("source-pass");
    let top = format!("sol-1-{}", commit(1));
    let job = w.job_running(
        1,
        codeload_dir(&top, "", &tree),
        dir_digest(&tree),
        &[
            "/bin/cmp",
            "/benchmark/expected.txt",
            "/workspace/result.txt",
        ],
    );
    assert_eq!(job["verification_expires_at"], json!(EXPIRES_AT));
    w.serve_jobs(&[&job]);

    let node = PrivateNode::start().await.unwrap();
    node.set_next_block_timestamp(EXPIRES_AT - 200)
        .await
        .unwrap();
    node.mine().await.unwrap();

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_worker"));
    feed_args(
        &mut cmd,
        &w.server.base,
        &w.path("out"),
        &w.path("work"),
        &w.path("staging"),
    )
    .arg("--json")
    .args(["--rpc", node.url()])
    .env_remove("GITHUB_SHA");
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no report ({e}); stderr:\n{stderr}"));
    let row = report["jobs"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["job_id"] == job["job_id"]))
        .unwrap_or_else(|| panic!("no row for the job: {report}\nstderr:\n{stderr}"));
    assert_eq!(
        (row["status"].as_str(), row["reason_code"].as_str()),
        (Some("skipped"), Some("window_too_short")),
        "the job was judged on the host clock: {row}"
    );
    // The chain's figure (at most the 200 s it had when read), not the host's years.
    let reason = row["reason"].as_str().unwrap_or_default();
    let left: u64 = reason
        .split("ends in ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no figure in {reason:?}"));
    assert!(left <= 200, "{reason}");
}
