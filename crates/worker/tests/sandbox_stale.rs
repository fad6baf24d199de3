//! A worker killed mid-run leaves its container running; the next worker's `cleanup_stale`
//! removes it, and leaves a live worker's container alone.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (COMMON.md)

mod support;

use std::time::Duration;

use support::{Trees, containers_for, executor, spawn_child, spec};
use worker::sandbox::Decision;

#[tokio::test]
async fn sigkilled_worker_leaves_a_container_that_cleanup_stale_removes() {
    let run_id = support::run_id("stale");
    let mut child = spawn_child("sleep", &[("SANDBOX_TEST_RUN_ID", &run_id)]);
    let executor = executor().await;

    let mut found = Vec::new();
    for _ in 0..200 {
        found = containers_for(&executor, &run_id).await;
        if !found.is_empty() {
            // The listing and the inspect race with the child's own create/start; a container
            // that is not inspectable yet is simply not running yet.
            let running = executor
                .client()
                .inspect_container(&found[0], None)
                .await
                .ok()
                .and_then(|c| c.state)
                .and_then(|s| s.running);
            if running == Some(true) {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(found.len(), 1, "child never started its container");

    // A live owner's container is not stale.
    let removed = executor.cleanup_stale().await.unwrap();
    assert!(!removed.contains(&found[0]));
    assert_eq!(containers_for(&executor, &run_id).await, found);

    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // The container outlives its worker...
    assert_eq!(containers_for(&executor, &run_id).await, found);
    // ...until the next start cleans up.
    let removed = executor.cleanup_stale().await.unwrap();
    assert!(removed.contains(&found[0]), "{removed:?}");
    assert!(containers_for(&executor, &run_id).await.is_empty());
}

#[tokio::test]
#[ignore = "entry point for child processes spawned by other tests"]
async fn child_process() {
    assert_eq!(support::child_mode(), "sleep");
    let trees = Trees::new();
    let mut spec = spec("stale-child", &["/bin/sleep", "120"], &trees);
    spec.run_id = std::env::var("SANDBOX_TEST_RUN_ID").unwrap();
    spec.timeout = Duration::from_secs(120);
    let hooks = support::DigestHooks::new(&trees);
    let report = executor().await.run(&spec, &hooks).await.unwrap();
    // Reached only if the parent failed to kill us in time.
    assert_ne!(report.decision, Decision::Completed { exit_code: 0 });
}
