//! One keeper per state directory (issue #44 item 4): the runbook allows the same gas key in
//! two deployments, and two keepers on one state directory could otherwise both plan and send
//! a settlement for the same record. The first holds the directory's lock for its whole run;
//! a second fails closed before it reads a record or asks the chain anything.
//!
//! No timing: the test holds the lock itself (as a running keeper does) while the second
//! keeper starts, so the outcome does not depend on which process wins a race.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use std::process::{Command, Output};

use keeper::record::StateDir;

/// Hardhat's well-known development key 0 (public test key, no value anywhere).
const DEV_KEY_0: &str = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";

fn resume(state: &std::path::Path) -> Output {
    // The RPC is a closed port: a keeper that got past the lock would end unavailable (5)
    // when it asks the chain id, after having listed the records it would plan and send.
    Command::new(env!("CARGO_BIN_EXE_keeper"))
        .arg("resume")
        .arg("--state-dir")
        .arg(state)
        .args(["--rpc", "http://127.0.0.1:9"])
        .args(["--key-env", "H44_KEEPER_TEST_KEY"])
        .args(["--max-gas", "1000000", "--max-fee-per-gas", "1000000000"])
        .env("H44_KEEPER_TEST_KEY", DEV_KEY_0)
        .output()
        .unwrap()
}

#[test]
fn two_keepers_on_one_state_dir_cannot_both_plan_and_send() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let first = StateDir::open(&state).unwrap();

    let out = resume(&state);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        stderr.contains("in use by another keeper"),
        "the refusal names the cause: {stderr}"
    );

    // Once the first keeper is gone (however it ended) the lock is free again.
    drop(first);
    let out = resume(&state);
    assert_eq!(out.status.code(), Some(5), "{out:?}");
}

#[test]
fn keeper_status_reads_a_state_dir_a_running_keeper_holds() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let _running = StateDir::open(&state).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_keeper"))
        .arg("status")
        .arg("--state-dir")
        .arg(&state)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}
