//! A worker killed mid-run leaves its container running; the next worker's `cleanup_stale`
//! removes it, and leaves a live worker's container alone.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use crate::support;

use std::time::Duration;

use crate::support::{Trees, containers_for, executor, spawn_child, spec};
use worker_sandbox::{Decision, LABEL_OWNER, LABEL_RUN_ID, LABEL_VERIFIER};

#[tokio::test]
async fn sigkilled_worker_leaves_a_container_that_cleanup_stale_removes() {
    let run_id = support::run_id("stale");
    let mut child = spawn_child(module_path!(), "sleep", &[("SANDBOX_TEST_RUN_ID", &run_id)]);
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

/// Field 22 of `/proc/<pid>/stat` (start time), counted after the command name.
fn start_time(pid: u32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_comm = stat.rsplit_once(')').unwrap().1;
    after_comm.split_whitespace().nth(19).unwrap().to_string()
}

/// A labelled sandbox container made with the CLI, as another worker would have left it;
/// `start` runs it (`sleep 120`), otherwise it stays created.
fn labelled_container(run_id: &str, owner: &str, start: bool) -> String {
    let output = support::stdout_of(
        std::process::Command::new("docker")
            .args([if start { "run" } else { "create" }])
            .args(start.then_some("--detach"))
            .args([
                "--label",
                &format!("{LABEL_VERIFIER}=1"),
                "--label",
                &format!("{LABEL_RUN_ID}={run_id}"),
                "--label",
                &format!("{LABEL_OWNER}={owner}"),
                &support::busybox(),
                "sleep",
                "120",
            ]),
    );
    output.trim().to_string()
}

#[tokio::test]
async fn sweep_spares_a_live_owner_in_another_pid_namespace_and_removes_a_provably_dead_one() {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap()
        .trim()
        .to_string();
    let ns = std::fs::read_link("/proc/self/ns/pid")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let other_ns = if ns == "pid:[4026531836]" {
        "pid:[4026532999]".to_string()
    } else {
        "pid:[4026531836]".to_string()
    };
    let pid = std::process::id();
    let start = start_time(pid);
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = gone.id();
    gone.wait().unwrap();

    // (owner label, run the container, whether the sweep may remove it)
    let cases = [
        // A live pid of ours, but the label is another namespace's: that pid names some other
        // worker's process there, which may be running right now.
        (format!("{boot}/{other_ns}/{pid}/{start}"), true, false),
        // A pid that is gone here says nothing about another namespace either.
        (format!("{boot}/{other_ns}/{dead_pid}/1"), true, false),
        // A running container of another boot id belongs to another host sharing the daemon.
        (format!("another-boot/{ns}/{pid}/{start}"), true, false),
        // An unreadable label is never proof of a dead owner.
        ("not-an-owner".to_string(), true, false),
        // Our own, live identity.
        (format!("{boot}/{ns}/{pid}/{start}"), true, false),
        // Same boot and namespace, pid gone: provably dead.
        (format!("{boot}/{ns}/{dead_pid}/1"), true, true),
        // Same boot and namespace, pid reused by another process: provably dead.
        (format!("{boot}/{ns}/{pid}/{start}0"), true, true),
        // Another boot and not running: left over from before a reboot.
        (format!("another-boot/{ns}/{pid}/{start}"), false, true),
    ];
    let run_id = support::run_id("sweep");
    let ids: Vec<String> = cases
        .iter()
        .map(|(owner, start, _)| labelled_container(&run_id, owner, *start))
        .collect();
    let executor = executor().await;
    let swept = executor.cleanup_stale().await;
    let left = containers_for(&executor, &run_id).await;
    let _ = std::process::Command::new("docker")
        .args(["rm", "--force"])
        .args(&left)
        .output();
    let removed = swept.unwrap();
    let mut wrong = Vec::new();
    for ((owner, running, removable), id) in cases.iter().zip(&ids) {
        if removed.contains(id) != *removable || left.contains(id) == *removable {
            wrong.push(format!(
                "owner {owner:?} (running {running}): removed {}, expected {removable}",
                removed.contains(id)
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[tokio::test]
#[ignore = "entry point for child processes spawned by other tests"]
async fn child_process() {
    assert_eq!(support::child_mode(), "sleep");
    let trees = Trees::new();
    let mut spec = spec("stale-child", &["/bin/sleep", "120"], &trees);
    spec.run_id = std::env::var("SANDBOX_TEST_RUN_ID").unwrap();
    spec.request.timeout_ms = 120_000;
    let hooks = support::DigestHooks::new(&trees);
    let report = executor().await.run(&spec, &hooks).await.unwrap();
    // Reached only if the parent failed to kill us in time.
    assert_ne!(report.decision, Decision::Completed { exit_code: 0 });
}
