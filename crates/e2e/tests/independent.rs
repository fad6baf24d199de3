//! Independent execution and `worker reproduce` on the real local services: Docker with the
//! digest-pinned Python image, the Hardhat node, and the built `worker`, `signer` and
//! `keeper`. Needs `scripts/services.sh` and `cargo build -p worker -p signer -p keeper`;
//! fails loudly when any is missing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use chain_testkit::{Testkit, status};
use e2e::E2eConfig;
use e2e::independent::{run_forged_settlement, run_independent};
use verifier_sdk::settle::SettlementEvent;

fn config(name: &str) -> E2eConfig {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    E2eConfig::from_repo(&root, &target.join("debug"), &root.join(".work").join(name))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Runner and both slots run the job in the sandbox, each slot agrees through
/// `compare-candidates.sh` and signs its own run, the keeper relays, and the bounty settles
/// with two different response hashes in one transaction; `worker reproduce --tx` then says
/// `verdict reproduced; output differs` (exit 6).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn independent_runs_of_a_timing_printing_benchmark_settle_with_two_response_hashes() {
    let r = run_independent(&config("e2e-independent-test"), true)
        .await
        .unwrap_or_else(|e| panic!("independent execution: {e}"));
    assert!(matches!(r.event, SettlementEvent::Settled(_)), "{r:?}");
    assert_eq!(r.relayed.len(), 2, "{r:?}");
    assert!(r.relayed.iter().all(|(_, passed, _)| *passed), "{r:?}");
    let (a, b) = (r.relayed[0].2, r.relayed[1].2);
    assert_ne!(a, b, "the two slots' runs printed different timings: {r:?}");
    assert!(
        a != r.runner_response_hash && b != r.runner_response_hash,
        "each slot signed its own run, not the runner's: {r:?}"
    );
    let kit = Testkit::connect().await.unwrap();
    let bounty = chain_testkit::TestBounty::new(r.bounty, kit.provider().clone());
    assert_eq!(bounty.status().call().await.unwrap(), status::SETTLED);

    let (code, report) = &r.reproduced;
    assert_eq!(*code, Some(6), "{report}");
    assert_eq!(
        report["finding"]["finding"], "verdict_reproduced",
        "{report}"
    );
    assert_eq!(report["reference"], "settlement", "{report}");
    assert_eq!(report["reproduced_verdict"], "passed", "{report}");
    let hashes = report["reference_response_hashes"].as_array().unwrap();
    assert_eq!(hashes.len(), 2, "{report}");
    assert!(
        !hashes.contains(&report["reproduced_response_hash"]),
        "{report}"
    );
    assert!(
        PathBuf::from(report["candidate_file"].as_str().unwrap()).is_file(),
        "the reproduction's candidate and evidence are kept: {report}"
    );

    // From the runner's candidate, whose evidence keeps its output: the differing line shown.
    let (code, report) = &r.reproduced_candidate;
    assert_eq!(*code, Some(6), "{report}");
    let line = &report["finding"]["lines"][0];
    assert_eq!(line["stream"], "stdout", "{report}");
    assert!(
        line["first"].as_str().unwrap().starts_with("started at "),
        "{report}"
    );
    assert!(
        line["second"].as_str().unwrap().starts_with("started at "),
        "{report}"
    );
    assert_ne!(line["first"], line["second"], "{report}");
}

/// The shipped harness prints the same bytes every run: the runner's and both slots'
/// response hashes are equal, and `worker reproduce --tx` says `reproduced bit for bit`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settled_bounty_with_deterministic_output_reproduces_bit_for_bit() {
    let r = run_independent(&config("e2e-independent-bit-test"), false)
        .await
        .unwrap_or_else(|e| panic!("independent execution: {e}"));
    assert!(matches!(r.event, SettlementEvent::Settled(_)), "{r:?}");
    assert!(
        r.relayed
            .iter()
            .all(|(_, _, h)| *h == r.runner_response_hash),
        "{r:?}"
    );
    let (code, report) = &r.reproduced;
    assert_eq!(*code, Some(0), "{report}");
    assert_eq!(report["finding"]["finding"], "bit_for_bit", "{report}");
    assert_eq!(
        report["reproduced_response_hash"],
        serde_json::json!(r.runner_response_hash.to_string()),
        "{report}"
    );
    assert_eq!(
        report["finding"]["verifiers"].as_array().map(Vec::len),
        Some(2),
        "{report}"
    );
}

/// A settlement made with the verifiers' test keys over a flipped verdict (`failed` for a
/// solution that passes) is reported DISAGREES (exit 7); a transaction that is not a
/// settlement is refused with a clear message (exit 4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settlement_over_a_flipped_verdict_disagrees_and_a_non_settlement_is_refused() {
    let r = run_forged_settlement(&config("e2e-forged-test"))
        .await
        .unwrap_or_else(|e| panic!("forged settlement: {e}"));
    let (code, report) = &r.reproduced;
    assert_eq!(*code, Some(7), "{report}");
    assert_eq!(report["finding"]["finding"], "disagrees", "{report}");
    assert_eq!(report["finding"]["reference"], "failed", "{report}");
    assert_eq!(report["finding"]["reproduced"], "passed", "{report}");
    assert_eq!(
        report["finding"]["differing"],
        serde_json::json!(["verdict"]),
        "{report}"
    );

    // No verdict is never a disagreement: the engine unreachable (5), the run timed out (3).
    let (code, report) = &r.engine_down;
    assert_eq!(*code, Some(5), "{report}");
    let (code, report) = &r.no_verdict;
    assert_eq!(*code, Some(3), "{report}");
    assert_eq!(report["finding"]["finding"], "no_verdict", "{report}");
    assert_eq!(report["finding"]["reason"], "timeout", "{report}");

    let (code, report) = &r.not_a_settlement;
    assert_eq!(*code, Some(4), "{report}");
    let message = report["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("is not a settlement of a bounty"),
        "{report}"
    );
}
