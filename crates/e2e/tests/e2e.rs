//! The whole bounty on the real local services: Docker with the digest-pinned Python image,
//! the Hardhat node, and the built `worker`, `signer` and `keeper` binaries. Needs
//! `scripts/services.sh` and `cargo build -p worker -p signer -p keeper` (nextest builds every
//! workspace binary first); fails loudly when any of them is missing.
//!
//! The binaries run with JSON logs at debug level (`e2e::capture_logs`), and their output is
//! scanned afterwards (issue #46 item 5): every stderr line is one JSON log object, and no key
//! of the run (the two verifiers', the keeper's gas key) appears anywhere in it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use chain_testkit::{Testkit, status};
use e2e::{E2eConfig, KEEPER_KEY, Scenario, VERIFIER_KEYS, run_scenario};
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
    let logs = tempfile::tempdir().unwrap();
    assert!(e2e::capture_logs(logs.path()));
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
        use std::io::Write as _;
        let mut child = std::process::Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("promtool could not be started ({e}): scripts/services.sh installs it")
            });
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
            "{name}: {out:?}\n{text}"
        );
    }
}

/// The keys the run handed the binaries, as they could show up in text: hex, either case, with
/// or without `0x`.
fn run_keys() -> Vec<(String, String)> {
    VERIFIER_KEYS
        .iter()
        .map(|i| (format!("verifier dev key {i}"), chain_testkit::DEV_KEYS[*i]))
        .chain([(
            format!("keeper dev key {KEEPER_KEY}"),
            chain_testkit::DEV_KEYS[KEEPER_KEY],
        )])
        .map(|(who, key)| (who, key.trim_start_matches("0x").to_lowercase()))
        .collect()
}

/// Every step's stderr parses line by line as a JSON log object, each binary logged at debug
/// level, and no key appears in any step's stdout or stderr.
fn json_logs_without_keys(dir: &Path) {
    let keys = run_keys();
    assert_eq!(keys.len(), 3);
    let mut debug_from = std::collections::BTreeSet::new();
    let mut steps = Vec::new();
    let mut not_json = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = String::from_utf8(std::fs::read(&path).unwrap()).unwrap();
        let lower = text.to_lowercase();
        for (who, key) in &keys {
            assert!(!lower.contains(key.as_str()), "{name} holds the {who}");
        }
        if !name.ends_with(".stderr") {
            continue;
        }
        steps.push(name.clone());
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                not_json.push(format!("{name}: {line}"));
                continue;
            };
            for field in ["timestamp", "level", "target", "message"] {
                assert!(v.get(field).is_some(), "{name}: no {field}: {line}");
            }
            if v["level"] == "DEBUG" {
                debug_from.insert(
                    name.split_once('-')
                        .map(|(_, s)| s)
                        .unwrap_or(&name)
                        .split('-')
                        .next()
                        .unwrap_or_default()
                        .to_owned(),
                );
            }
        }
    }
    assert!(
        not_json.is_empty(),
        "stderr lines that are not JSON:\n{}",
        not_json.join("\n")
    );
    steps.sort();
    for binary in ["worker", "signer", "keeper"] {
        assert!(
            steps.iter().any(|s| s.contains(&format!("-{binary}-"))),
            "no {binary} step kept: {steps:?}"
        );
        assert!(
            debug_from.contains(binary),
            "no debug line from {binary}: {steps:?}"
        );
    }
}
