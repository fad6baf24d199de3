//! The whole bounty on the real local services: Docker with the digest-pinned Python image,
//! the Hardhat node, and the built `worker`, `signer` and `keeper` binaries. Needs
//! `scripts/services.sh` and `cargo build -p worker -p signer -p keeper` (nextest builds every
//! workspace binary first); fails loudly when any of them is missing.
//!
//! The binaries run with JSON logs at debug level (`e2e::capture_logs`), and their output is
//! scanned afterwards (issue #46 item 5): every stderr line is one JSON log object, and no key
//! of the run (the two verifiers', the keeper's gas key) appears anywhere in it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use e2e::{E2eConfig, KEEPER_KEY, Stack, VERIFIER_KEYS};

mod common;

fn config() -> E2eConfig {
    E2eConfig::for_checkout("e2e-test").unwrap_or_else(|e| panic!("{e}"))
}

/// One test for both scenarios: they share the keeper's dev account, whose nonce two
/// parallel runs would race on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passing_solution_settles_and_failing_one_is_rejected() {
    let cfg = config();
    let logs = tempfile::tempdir().unwrap();
    assert!(e2e::capture_logs(logs.path()));
    let (settled, rejected) = common::settle_then_reject(&cfg, Stack::Python).await;
    assert_ne!(settled.bounty, rejected.bounty);

    json_logs_without_keys(logs.path());
    metrics_files_count_the_run(logs.path());
}

/// The signers' and the keeper's `--metrics-file` after the two bounties: each signer run
/// signed its one candidate, each keeper run confirmed its settlement (paid, then rejected),
/// and every file passes `promtool check metrics`.
fn metrics_files_count_the_run(dir: &Path) {
    let mut files: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "prom"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    files.sort();
    let signers: Vec<_> = files
        .iter()
        .filter(|(n, _)| n.contains("-signer-"))
        .collect();
    let keepers: Vec<_> = files
        .iter()
        .filter(|(n, _)| n.contains("-keeper-"))
        .collect();
    assert_eq!((signers.len(), keepers.len()), (4, 2), "{files:?}");
    for (name, text) in &signers {
        assert!(
            text.contains("signer_signatures_total{result=\"signed\"} 1\n"),
            "{name}: {text}"
        );
        assert!(
            text.contains("signer_signatures_total{result=\"failed\"} 0\n"),
            "{name}: {text}"
        );
    }
    for (name, text) in &keepers {
        assert!(
            text.contains("keeper_settlements_total{result=\"confirmed\"} 1\n"),
            "{name}: {text}"
        );
        assert!(text.contains("keeper_balance_wei "), "{name}: {text}");
        assert!(
            text.contains("keeper_pending_settlement_age_seconds 0\n"),
            "{name}: {text}"
        );
    }
    for (name, text) in &files {
        test_promtool::check_metrics(name, text);
    }
}

/// Every step's stderr parses line by line as a JSON log object (at least one per process),
/// each binary logged at debug level, and no key handed to a binary (the two verifiers', the
/// keeper's gas key) nor a bearer token appears in any step's stdout or stderr: the shared
/// scan of `e2e::logscan`, which every route's test runs.
fn json_logs_without_keys(dir: &Path) {
    let scan = e2e::scan_captured().unwrap().unwrap();
    assert_eq!(scan.dir, dir);
    let problems = scan.problems(1);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The scan knows every key handed out: the run's dev keys are among them.
    for key in VERIFIER_KEYS.iter().chain([&KEEPER_KEY]) {
        let leak = e2e::logscan::scan_bytes(
            "probe",
            chain_testkit::DEV_KEYS[*key].as_bytes(),
            false,
            &e2e::captured_secrets(),
        );
        assert_eq!(leak.problems.len(), 1, "dev key {key} is not scanned for");
    }
    let per = scan.per_binary();
    println!("log lines and processes per binary: {per:?}");
    for binary in ["worker", "signer", "keeper"] {
        assert!(per.contains_key(binary), "no {binary} step kept: {per:?}");
    }
    let mut debug_from = std::collections::BTreeSet::new();
    for f in scan.files.iter().filter(|f| f.stderr) {
        let text = std::fs::read_to_string(dir.join(&f.name)).unwrap();
        if text
            .lines()
            .any(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["level"] == "DEBUG")
        {
            debug_from.insert(
                f.name
                    .split(['-', '.'])
                    .nth(1)
                    .unwrap_or_default()
                    .to_owned(),
            );
        }
    }
    for binary in ["worker", "signer", "keeper"] {
        assert!(
            debug_from.contains(binary),
            "no debug line from {binary}: {debug_from:?}"
        );
    }
}
