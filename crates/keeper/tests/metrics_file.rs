//! `keeper relay|resume --metrics-file`: the real binary writes a Prometheus textfile at the
//! end of every run (a failed one too), counters carried over between runs, the balance read
//! from the real local Hardhat node after a settlement; and the file passes the Prometheus
//! project's own `promtool check metrics` (Debian's `prometheus` package, which
//! scripts/services.sh installs; a missing promtool fails this test).
//!
//! Needs the node from `tools/chain/up.sh` (or scripts/services.sh); fails loudly without it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

mod common;

use std::path::Path;
use std::process::{Command, Output};

use alloy::providers::Provider;
use common::Scenario;

/// Hardhat's well-known development key 0 (public test key, no value anywhere).
const DEV_KEY_0: &str = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";

fn resume_on_a_closed_port(state: &Path, metrics: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keeper"))
        .arg("resume")
        .arg("--state-dir")
        .arg(state)
        .args(["--rpc", "http://127.0.0.1:9"])
        .args(["--key-env", "H46_KEEPER_TEST_KEY"])
        .args(["--max-gas", "1000000", "--max-fee-per-gas", "1000000000"])
        .arg("--metrics-file")
        .arg(metrics)
        .env("H46_KEEPER_TEST_KEY", DEV_KEY_0)
        .output()
        .unwrap()
}

#[test]
fn a_failed_keeper_run_still_writes_its_metrics_file_and_counts_on() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let metrics = dir.path().join("keeper.prom");
    for run in 1..=2 {
        let out = resume_on_a_closed_port(&state, &metrics);
        assert_eq!(out.status.code(), Some(5), "{out:?}");
        let text = std::fs::read_to_string(&metrics).unwrap();
        assert!(
            text.contains(&format!(
                "keeper_settlements_total{{result=\"failed\"}} {run}\n"
            )),
            "{text}"
        );
        assert!(text.contains("keeper_settlements_total{result=\"confirmed\"} 0\n"));
        // No chain answered: no balance is claimed.
        assert!(!text.contains("keeper_balance_wei"), "{text}");
        assert!(
            text.contains("keeper_pending_settlement_age_seconds 0\n"),
            "{text}"
        );
        assert!(
            text.contains("keeper_last_run_timestamp_seconds "),
            "{text}"
        );
        test_promtool::check_metrics("the keeper's metrics file", &text);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_confirmed_settlement_is_counted_with_the_balance_left() {
    let sc = Scenario::new(&[1], 0).await;
    sc.attest_all();
    let metrics = sc.path("keeper.prom");
    let out = Command::new(env!("CARGO_BIN_EXE_keeper"))
        .arg("relay")
        .args(sc.relay_inputs())
        .args(["--rpc", sc.kit.url()])
        .arg("--key-file")
        .arg(&sc.key_file)
        .arg("--state-dir")
        .arg(sc.path("state"))
        .args(["--max-gas", "2000000", "--max-fee-per-gas", "100000000000"])
        .args(["--confirmations", "1", "--receipt-timeout", "60"])
        .arg("--metrics-file")
        .arg(&metrics)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = std::fs::read_to_string(&metrics).unwrap();
    assert!(
        text.contains("keeper_settlements_total{result=\"confirmed\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("keeper_settlements_total{result=\"failed\"} 0\n"),
        "{text}"
    );
    assert!(
        text.contains("keeper_pending_settlement_age_seconds 0\n"),
        "{text}"
    );
    let balance = sc
        .kit
        .provider()
        .get_balance(sc.keeper.address())
        .await
        .unwrap();
    assert!(
        text.contains(&format!("keeper_balance_wei {balance}\n")),
        "balance {balance}: {text}"
    );
    test_promtool::check_metrics("the keeper's metrics file", &text);
}
