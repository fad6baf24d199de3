//! Independent execution and `worker reproduce` on the real local services: Docker with the
//! digest-pinned Python image, the Hardhat node, and the built `worker`, `signer` and
//! `keeper`. Needs `scripts/services.sh` and `cargo build -p worker -p signer -p keeper`;
//! fails loudly when any is missing.
//!
//! Every test keeps what each binary it starts wrote (`e2e::capture_logs`, each its own
//! process under nextest) and ends with the shared log scan (issue #46 item 5): every stderr
//! line a JSON log object, at least one per process, no key handed out, no bearer token.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use chain_testkit::{Testkit, status};
use e2e::E2eConfig;
use e2e::independent::{
    run_forged_settlement, run_independent, run_newcomer, run_swapped_benchmark,
    run_tampered_archive,
};
use verifier_sdk::settle::SettlementEvent;

fn config(name: &str) -> (E2eConfig, Logs) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let cfg = E2eConfig::from_repo(&root, &target.join("debug"), &root.join(".work").join(name))
        .unwrap_or_else(|e| panic!("{e}"));
    let logs = tempfile::tempdir().unwrap();
    assert!(e2e::capture_logs(logs.path()));
    (cfg, Logs(logs))
}

/// The test's kept logs, scanned when it has played its route.
struct Logs(tempfile::TempDir);

impl Logs {
    /// No problem in any kept file, each process at least one log line, and at least one
    /// `worker` process among them (every route here runs the job in the sandbox).
    fn scan(self) {
        let scan = e2e::scan_captured().unwrap().unwrap();
        assert_eq!(scan.dir, self.0.path());
        let problems = scan.problems(1);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        let per = scan.per_binary();
        println!("log lines and processes per binary: {per:?}");
        assert!(per.get("worker").is_some_and(|(_, n)| *n > 0), "{per:?}");
    }
}

/// Runner and both slots run the job in the sandbox, each slot agrees through
/// `compare-candidates.sh` and signs its own run, the keeper relays, and the bounty settles
/// with two different response hashes in one transaction; `worker reproduce --tx` then says
/// `verdict reproduced; output differs` (exit 6).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn independent_runs_of_a_timing_printing_benchmark_settle_with_two_response_hashes() {
    let (cfg, logs) = config("e2e-independent-test");
    let r = run_independent(&cfg, true)
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
    logs.scan();
}

/// The shipped harness prints the same bytes every run: the runner's and both slots'
/// response hashes are equal, and `worker reproduce --tx` says `reproduced bit for bit`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settled_bounty_with_deterministic_output_reproduces_bit_for_bit() {
    let (cfg, logs) = config("e2e-independent-bit-test");
    let r = run_independent(&cfg, false)
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
    logs.scan();
}

/// A settlement made with the verifiers' test keys over a flipped verdict (`failed` for a
/// solution that passes) is reported DISAGREES (exit 7); a transaction that is not a
/// settlement is refused with a clear message (exit 4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settlement_over_a_flipped_verdict_disagrees_and_a_non_settlement_is_refused() {
    let (cfg, logs) = config("e2e-forged-test");
    let r = run_forged_settlement(&cfg)
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
    logs.scan();
}

/// #41 item 2: the platform (or a `--candidate` file) serves a settled job with another runner
/// manifest than the bounty committed. Reproduced as if it were the bounty's, a fraudulent
/// settlement would read `verdict reproduced` and an honest one `DISAGREES`; both are refused
/// before anything runs, as the signer refuses them, with their own exit code (8).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reproduce_refuses_a_job_whose_benchmark_differs_from_the_chains() {
    let (cfg, logs) = config("e2e-swapped-test");
    let r = run_swapped_benchmark(&cfg)
        .await
        .unwrap_or_else(|e| panic!("swapped benchmark: {e}"));
    for (which, (code, report)) in [("honest", &r.honest), ("fraudulent", &r.fraudulent)] {
        assert_eq!(*code, Some(8), "{which}: {report}");
        assert_eq!(report["error"]["code"], "terms_differ", "{which}: {report}");
        let message = report["error"]["message"].as_str().unwrap_or_default();
        for said in ["terms hash", "benchmark hash", "nothing was run"] {
            assert!(message.contains(said), "{which}: {said:?} not in {report}");
        }
    }
    // The same job in a `--candidate` file (a real run of it, so the file is well formed).
    let ((code, report), (with_code, with_report)) = &r.from_candidate;
    assert_eq!(*code, Some(0), "{report}");
    assert_eq!(report["reproduced_verdict"], "failed", "{report}");
    assert_eq!(*with_code, Some(8), "{with_report}");
    assert_eq!(
        with_report["error"]["code"], "terms_differ",
        "{with_report}"
    );
    logs.scan();
}

/// #41 item 3: README's own command (`worker reproduce --tx … --rpc … --api … --out …`), run
/// with no staging root in the environment, gives its result on stdout (exit 0, not 78 for a
/// missing staging root): it says which verdict was reproduced (`failed`, the chain's: not
/// "reproduced failed", which reads as a failed reproduction), prints the response hash once and
/// labels it as one, and keeps "settlement" for the transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readmes_reproduce_command_needs_no_staging_root_and_says_on_stdout_what_was_reproduced() {
    let (cfg, logs) = config("e2e-newcomer-test");
    let r = run_newcomer(&cfg)
        .await
        .unwrap_or_else(|e| panic!("newcomer: {e}"));
    let (code, report) = &r.job_only;
    assert_eq!(*code, Some(0), "{report}");
    assert_eq!(
        report["schema_version"], "agent-bounties/regression-reproduction-v1",
        "{report}"
    );
    assert_eq!(report["reproduced_verdict"], "failed", "{report}");

    let (code, stdout, stderr) = &r.readme;
    assert_eq!(*code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.contains("reproduced bit for bit"),
        "the result is on stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stdout.contains("the chain's verdict `failed` was reproduced"),
        "{stdout}"
    );
    assert!(!stdout.contains("reproduced failed"), "{stdout}");
    let hash = r.response_hash.to_string();
    assert_eq!(stdout.matches(&hash).count(), 1, "printed once:\n{stdout}");
    for line in stdout.lines().filter(|l| l.contains(&hash)) {
        assert!(line.contains("response hash"), "labelled: {line}");
        assert!(!line.contains("settlement"), "not the settlement: {line}");
    }
    let tx = r.tx.to_string();
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("settlement") && l.contains(&tx)),
        "{stdout}"
    );
    assert!(
        !stderr.contains("reproduced bit for bit"),
        "the result is not on stderr as well:\n{stderr}"
    );
    logs.scan();
}

/// #41 item 3: an archive whose tree is not the job's (a tampered or force-pushed repository)
/// is a permanent refusal, exit 4 as README says, not 3 ("no verdict, try again later").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reproduce_refuses_a_tampered_archive_for_good() {
    let (cfg, logs) = config("e2e-tampered-test");
    let (code, report) = run_tampered_archive(&cfg)
        .await
        .unwrap_or_else(|e| panic!("tampered archive: {e}"));
    assert_eq!(code, Some(4), "{report}");
    assert_eq!(report["error"]["code"], "invalid_input", "{report}");
    let message = report["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("input_mismatch"), "{report}");
    assert!(message.contains("source"), "{report}");
    logs.scan();
}
