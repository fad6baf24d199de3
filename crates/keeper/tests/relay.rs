//! The keeper against the real local Hardhat node and a real loopback HTTP job feed.
//!
//! Needs the node from `tools/chain/up.sh` (or scripts/services.sh); fails loudly without it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use alloy::primitives::{B256, U256};
use alloy::providers::Provider;
use chain_testkit::status;
use common::{Scenario, dev, only_job, sdk_addr};
use keeper::report::JobStatus;
use verifier_sdk::settle::{self, decode_bounty_settled, decode_submission_rejected};
use verifier_sdk::{AttestationSignature, Bytes32, verification_hash};

/// Reads the receipt of the reported tx and returns the decoded logs of the bounty itself.
async fn bounty_logs(sc: &Scenario, tx: B256) -> Vec<alloy::rpc::types::Log> {
    let receipt = sc
        .kit
        .provider()
        .get_transaction_receipt(tx)
        .await
        .unwrap()
        .expect("receipt of the reported transaction");
    assert!(receipt.status());
    receipt
        .inner
        .logs()
        .iter()
        .filter(|l| l.address() == sc.bounty.address())
        .cloned()
        .collect()
}

/// The attestations the keeper should have relayed: every honest one, by verifier address.
fn expected_verification_hash(sc: &Scenario) -> Bytes32 {
    let mut keys = sc.verifier_keys.clone();
    keys.sort_by_key(|i| dev(*i).address());
    let atts: Vec<_> = keys
        .iter()
        .map(|i| {
            let v = sc.attestation(*i);
            let sig = AttestationSignature::from_hex(v["signature"].as_str().unwrap()).unwrap();
            settle::attestation(
                sdk_addr(dev(*i).address()),
                v["passed"].as_bool().unwrap(),
                v["response_hash"].as_str().unwrap().parse().unwrap(),
                v["deadline"].as_u64().unwrap(),
                &sig,
            )
        })
        .collect();
    verification_hash(&atts)
}

async fn assert_paid(sc: &Scenario) {
    sc.attest_all();
    let report = sc.run().await;
    let job = only_job(&report);
    assert_eq!(job.status, JobStatus::Paid, "{job:#?}");
    assert_eq!(report.exit_code, 0);
    assert_eq!(sc.status().await, status::SETTLED);
    let tx = B256::from(*job.tx_hash.unwrap().as_bytes());
    let logs = bounty_logs(sc, tx).await;
    assert_eq!(logs.len(), 1);
    let ev = decode_bounty_settled(logs[0].topics(), &logs[0].data().data).unwrap();
    assert_eq!(
        ev.bountyId,
        B256::from(*sc.validated.bounty_id().as_bytes())
    );
    assert_eq!(ev.round, sc.validated.round());
    assert_eq!(ev.solver, sc.params.solver);
    assert_eq!(
        ev.submissionHash,
        B256::from(*sc.validated.submission_hash().as_bytes())
    );
    let expected = expected_verification_hash(sc);
    assert_eq!(ev.verificationHash, B256::from(*expected.as_bytes()));
    assert_eq!(job.verification_hash, Some(expected));
    let mut verifiers: Vec<_> = sc
        .verifier_keys
        .iter()
        .map(|i| sdk_addr(dev(*i).address()))
        .collect();
    verifiers.sort();
    assert_eq!(job.verifiers, verifiers);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threshold_one_settles_and_emits_bounty_settled() {
    let sc = Scenario::new(&[1], 0).await;
    assert_paid(&sc).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threshold_two_settles_with_attestations_from_two_directories() {
    let sc = Scenario::new(&[2, 3], 0).await;
    assert_paid(&sc).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_verdict_is_relayed_as_submission_rejected() {
    let sc = Scenario::new(&[1], 1).await;
    sc.attest_all();
    let report = sc.run().await;
    let job = only_job(&report);
    assert_eq!(job.status, JobStatus::Rejected, "{job:#?}");
    assert_eq!(report.exit_code, 0);
    let logs = bounty_logs(&sc, B256::from(*job.tx_hash.unwrap().as_bytes())).await;
    assert_eq!(logs.len(), 1);
    let ev = decode_submission_rejected(logs[0].topics(), &logs[0].data().data).unwrap();
    assert_eq!(
        ev.verificationHash,
        B256::from(*expected_verification_hash(&sc).as_bytes())
    );
    assert_ne!(sc.status().await, status::SETTLED);
    assert_ne!(sc.status().await, status::SUBMITTED);
}

/// Runs and asserts a refusal with `code`, nothing sent, bounty still Submitted.
async fn assert_refused(sc: &Scenario, code: &str) -> keeper::report::JobReport {
    let nonce = sc.keeper_nonce().await;
    let report = sc.run().await;
    let job = only_job(&report).clone();
    assert_eq!(job.status, JobStatus::Refused, "{job:#?}");
    assert_eq!(job.code.as_deref(), Some(code), "{job:#?}");
    assert_eq!(report.exit_code, 3);
    assert_eq!(job.tx_hash, None);
    assert_eq!(sc.keeper_nonce().await, nonce, "nothing may be sent");
    assert_eq!(sc.status().await, status::SUBMITTED);
    job
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keeper_requiring_runsc_refuses_a_runc_run_and_sends_nothing() {
    let sc = Scenario::new(&[1], 0).await;
    sc.attest_all();
    let mut cfg = sc.config();
    cfg.require_oci_runtime = Some("runsc".into());
    let nonce = sc.keeper_nonce().await;
    let report = sc.run_with(&cfg).await;
    let job = only_job(&report).clone();
    assert_eq!(job.status, JobStatus::Refused, "{job:#?}");
    assert_eq!(job.code.as_deref(), Some("oci_runtime_refused"), "{job:#?}");
    assert_eq!(
        job.detail.as_deref(),
        Some(
            "--require-oci-runtime runsc: the run's OCI runtime is \"runc\", not the required \"runsc\""
        )
    );
    assert_eq!(report.exit_code, 3);
    assert_eq!(sc.keeper_nonce().await, nonce, "nothing may be sent");
    assert_eq!(sc.status().await, status::SUBMITTED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keeper_requiring_runsc_relays_a_runsc_run() {
    let mut sc = Scenario::new(&[1], 0).await;
    sc.run_under("runsc");
    sc.attest_all();
    let mut cfg = sc.config();
    cfg.require_oci_runtime = Some("runsc".into());
    let report = sc.run_with(&cfg).await;
    let job = only_job(&report);
    assert_eq!(job.status, JobStatus::Paid, "{job:#?}");
    assert_eq!(sc.status().await, status::SETTLED);
}

fn skipped_codes(job: &keeper::report::JobReport) -> Vec<String> {
    job.skipped_attestations
        .iter()
        .map(|s| s.code.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_attestation_is_insufficient() {
    let sc = Scenario::new(&[2, 3], 0).await;
    sc.write_attestation("att0", "a.json", &sc.attestation(2));
    assert_refused(&sc, "insufficient_attestations").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attestation_from_a_non_verifier_is_not_counted() {
    let sc = Scenario::new(&[1], 0).await;
    // Dev key 5 signs honestly for itself, but is not in the committed set.
    sc.write_attestation("att0", "a.json", &sc.attestation(5));
    let job = assert_refused(&sc, "insufficient_attestations").await;
    assert_eq!(skipped_codes(&job), vec!["not_a_verifier"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_signature_is_not_counted() {
    let sc = Scenario::new(&[1], 0).await;
    // Claims verifier 1, signed by key 4.
    let forged = sc.attestation_as(
        4,
        sdk_addr(dev(1).address()),
        true,
        sc.outcome.response_hash(),
        sc.now + 900,
    );
    sc.write_attestation("att0", "a.json", &forged);
    let job = assert_refused(&sc, "insufficient_attestations").await;
    assert_eq!(skipped_codes(&job), vec!["bad_signature"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malleated_high_s_signature_is_refused() {
    let sc = Scenario::new(&[1], 0).await;
    let mut v = sc.attestation(1);
    let sig =
        alloy::hex::decode(v["signature"].as_str().unwrap().trim_start_matches("0x")).unwrap();
    let n = U256::from_be_bytes(alloy::hex!(
        "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141"
    ));
    let s = U256::from_be_slice(&sig[32..64]);
    let mut malleated = sig.clone();
    malleated[32..64].copy_from_slice(&(n - s).to_be_bytes::<32>());
    malleated[64] = if sig[64] == 27 { 28 } else { 27 };
    // The malleated form still recovers the same signer: only the low-s rule stops it.
    let digest = alloy::primitives::Signature::from_raw(&malleated).unwrap();
    assert!(digest.normalize_s().is_some());
    v["signature"] = format!("0x{}", alloy::hex::encode(&malleated)).into();
    sc.write_attestation("att0", "a.json", &v);
    let job = assert_refused(&sc, "insufficient_attestations").await;
    let codes = skipped_codes(&job);
    assert_eq!(codes.len(), 1);
    assert!(
        codes[0].starts_with("malformed") && codes[0].contains("lower half"),
        "{codes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_verdicts_are_refused() {
    let sc = Scenario::new(&[2, 3], 0).await;
    sc.write_attestation("att0", "a.json", &sc.attestation(2));
    let dissent = sc.attestation_as(
        3,
        sdk_addr(dev(3).address()),
        false,
        Bytes32::from_bytes([0x77; 32]),
        sc.now + 900,
    );
    sc.write_attestation("att1", "b.json", &dissent);
    assert_refused(&sc, "mixed_verdicts").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_hash_other_than_the_candidates_is_refused() {
    let sc = Scenario::new(&[1], 0).await;
    let other = sc.attestation_as(
        1,
        sdk_addr(dev(1).address()),
        true,
        Bytes32::from_bytes([0x77; 32]),
        sc.now + 900,
    );
    sc.write_attestation("att0", "a.json", &other);
    assert_refused(&sc, "response_hash_mismatch").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_or_expiring_deadline_is_not_counted() {
    let sc = Scenario::new(&[2, 3], 0).await;
    sc.write_attestation("att0", "a.json", &sc.attestation(2));
    // Inside the 60 s margin: dropped even though not yet past.
    let expiring = sc.attestation_as(
        3,
        sdk_addr(dev(3).address()),
        true,
        sc.outcome.response_hash(),
        sc.now + 30,
    );
    sc.write_attestation("att1", "b.json", &expiring);
    let job = assert_refused(&sc, "insufficient_attestations").await;
    assert_eq!(skipped_codes(&job), vec!["expiring"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verifier_set_changed_on_chain_is_refused() {
    let sc = Scenario::new(&[2, 3], 0).await;
    sc.attest_all();
    sc.bounty
        .set_verifiers(vec![dev(2).address(), dev(6).address()], 2)
        .await
        .unwrap();
    let job = assert_refused(&sc, "onchain_mismatch").await;
    assert!(job.detail.unwrap().contains("verifier"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threshold_changed_on_chain_is_refused() {
    let sc = Scenario::new(&[2, 3], 0).await;
    sc.attest_all();
    sc.bounty.set_threshold(1).await.unwrap();
    let job = assert_refused(&sc, "onchain_mismatch").await;
    assert!(job.detail.unwrap().contains("threshold"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gas_estimate_above_the_cap_is_refused() {
    let sc = Scenario::new(&[1], 0).await;
    sc.attest_all();
    let nonce = sc.keeper_nonce().await;
    let mut cfg = sc.config();
    cfg.caps.max_gas = 30_000;
    let report = sc.run_with(&cfg).await;
    let job = only_job(&report);
    assert_eq!(job.code.as_deref(), Some("gas_above_cap"), "{job:#?}");
    assert_eq!(sc.keeper_nonce().await, nonce);
    assert_eq!(sc.status().await, status::SUBMITTED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base_fee_above_the_fee_cap_is_refused() {
    let sc = Scenario::new(&[1], 0).await;
    sc.attest_all();
    let mut cfg = sc.config();
    cfg.caps.max_fee_per_gas = 1;
    let report = sc.run_with(&cfg).await;
    let job = only_job(&report);
    assert_eq!(job.code.as_deref(), Some("fee_above_cap"), "{job:#?}");
    assert_eq!(sc.status().await, status::SUBMITTED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insufficient_balance_is_refused() {
    let sc = Scenario::new(&[1], 0).await;
    sc.attest_all();
    sc.kit
        .set_balance(sc.keeper.address(), U256::from(1_000u64))
        .await
        .unwrap();
    assert_refused(&sc, "insufficient_balance").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn already_settled_bounty_is_done_and_nothing_is_sent() {
    let sc = Scenario::new(&[1], 0).await;
    sc.attest_all();
    // Someone else settles first (permissionless).
    let att = sc
        .bounty
        .sign_attestation(
            &dev(1),
            dev(1).address(),
            true,
            B256::from(*sc.outcome.response_hash().as_bytes()),
            U256::from(sc.now + 900),
        )
        .await
        .unwrap();
    sc.bounty.settle(vec![att]).await.unwrap();
    let nonce = sc.keeper_nonce().await;
    let report = sc.run().await;
    let job = only_job(&report);
    assert_eq!(job.status, JobStatus::Done, "{job:#?}");
    assert_eq!(report.exit_code, 0);
    assert_eq!(sc.keeper_nonce().await, nonce);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerun_after_success_sends_nothing() {
    let sc = Scenario::new(&[1], 0).await;
    assert_paid(&sc).await;
    let nonce = sc.keeper_nonce().await;
    let report = sc.run().await;
    let job = only_job(&report);
    assert_eq!(job.status, JobStatus::Done, "{job:#?}");
    assert_eq!(job.code.as_deref(), Some("already_confirmed"));
    // Even without the record, the chain says Settled.
    std::fs::remove_dir_all(sc.path("state")).unwrap();
    let report = sc.run().await;
    assert_eq!(only_job(&report).status, JobStatus::Done);
    assert_eq!(only_job(&report).code.as_deref(), Some("not_submitted"));
    assert_eq!(sc.keeper_nonce().await, nonce);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_bad_candidate_does_not_block_another() {
    let sc = Scenario::new(&[1], 0).await;
    sc.attest_all();
    let bogus = verifier_sdk::candidate_file_name("base-mainnet:0xdead:1");
    std::fs::write(sc.path("candidates").join(&bogus), b"{not json").unwrap();
    let report = sc.run().await;
    assert_eq!(report.jobs.len(), 2);
    let statuses: Vec<_> = report.jobs.iter().map(|j| j.status).collect();
    assert!(
        statuses.contains(&JobStatus::Invalid) && statuses.contains(&JobStatus::Paid),
        "{report:#?}"
    );
    assert_eq!(report.exit_code, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_changed_on_the_platform_is_refused() {
    let sc = Scenario::new(&[1], 0).await;
    sc.attest_all();
    let mut changed = sc.job.clone();
    changed["submission_evidence"]["artifact_reference"] = format!(
        "https://github.com/solver-org/solution/commit/{}",
        "f".repeat(40)
    )
    .into();
    verifier_sdk::fixtures::rehash(&mut changed);
    *sc.server.jobs.lock().unwrap() = vec![changed];
    assert_refused(&sc, "job_changed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_no_longer_listed_is_refused() {
    let sc = Scenario::new(&[1], 0).await;
    sc.attest_all();
    sc.server.jobs.lock().unwrap().clear();
    assert_refused(&sc, "job_gone").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_bounty_is_done_and_nothing_is_sent() {
    let sc = Scenario::new(&[1], 0).await;
    sc.attest_all();
    sc.bounty.set_status(status::CANCELLED).await.unwrap();
    let nonce = sc.keeper_nonce().await;
    let report = sc.run().await;
    let job = only_job(&report);
    assert_eq!(job.status, JobStatus::Done, "{job:#?}");
    assert_eq!(job.code.as_deref(), Some("not_submitted"));
    assert_eq!(sc.keeper_nonce().await, nonce);
}

/// The real bounty's job with a more lenient benchmark (same policy, submission and evidence,
/// so the attestation digest is unchanged and honest signatures over it settle on chain).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lenient_benchmark_terms_not_on_chain_are_not_relayed() {
    let mut sc = Scenario::new(&[1], 0).await;
    let mut lenient = sc.job.clone();
    lenient["terms"]["document"]["benchmark"]["runner_manifest"]["command"] =
        serde_json::json!(["python3", "-c", "pass"]);
    verifier_sdk::fixtures::rehash(&mut lenient);
    assert_eq!(
        lenient["terms"]["policy_hash"],
        sc.job["terms"]["policy_hash"]
    );
    sc.replace_job(lenient);
    sc.attest_all();
    let job = assert_refused(&sc, "onchain_mismatch").await;
    let detail = job.detail.unwrap();
    assert!(
        detail.contains("terms hash") && detail.contains("benchmark hash"),
        "{detail}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_terms_hash_the_bounty_did_not_fund_is_refused() {
    let sc = Scenario::new(&[1], 0).await;
    sc.attest_all();
    let p = &sc.params;
    let funded = [
        p.terms_hash,
        p.acceptance_criteria_hash,
        p.benchmark_hash,
        p.evidence_schema_hash,
    ];
    let names = [
        "terms hash",
        "acceptance criteria hash",
        "benchmark hash",
        "evidence schema hash",
    ];
    for (i, name) in names.into_iter().enumerate() {
        let mut on_chain = funded;
        on_chain[i] = B256::repeat_byte(0x5a);
        let [t, a, b, e] = on_chain;
        sc.bounty.set_terms_hashes(t, a, b, e).await.unwrap();
        let job = assert_refused(&sc, "onchain_mismatch").await;
        let detail = job.detail.unwrap();
        assert!(
            detail.starts_with(&format!(
                "on-chain state disagrees with the job: {name} is "
            )),
            "{detail}"
        );
        assert!(!detail.contains(';'), "exactly one mismatch: {detail}");
    }
    let [t, a, b, e] = funded;
    sc.bounty.set_terms_hashes(t, a, b, e).await.unwrap();
    assert_eq!(only_job(&sc.run().await).status, JobStatus::Paid);
}

/// Chaos soak seed 12 (`--liveness late-image`): the keeper spent the late bounty's last
/// minutes waiting on three candidates listed before it, and its attestations were within the
/// deadline margin by the time it got there. The candidate whose attestations expire first
/// must be relayed first: its settlement takes the keeper's lower nonce.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_whose_attestations_expire_first_is_relayed_first_not_in_file_order() {
    let one = Scenario::new(&[1], 0).await;
    let kit = chain_testkit::Testkit::connect().await.unwrap();
    let two = Scenario::on(kit, &[1], 0).await;
    let name = |sc: &Scenario| verifier_sdk::candidate_file_name(sc.validated.job_id());
    let (listed_first, listed_last) = if name(&one) < name(&two) {
        (&one, &two)
    } else {
        (&two, &one)
    };
    let deadline_attestation = |sc: &Scenario, deadline: u64| {
        sc.attestation_as(
            1,
            sdk_addr(dev(1).address()),
            true,
            sc.outcome.response_hash(),
            deadline,
        )
    };
    // Both are well outside the keeper's margin, so both settle whatever the order; only the
    // order tells them apart.
    let late = deadline_attestation(listed_first, listed_first.now + 3000);
    let soon = deadline_attestation(listed_last, listed_last.now + 600);
    one.write_attestation("att0", "first.json", &late);
    one.write_attestation("att1", "last.json", &soon);
    std::fs::copy(
        two.path("candidates").join(name(&two)),
        one.path("candidates").join(name(&two)),
    )
    .unwrap();
    one.server.jobs.lock().unwrap().push(two.job.clone());

    let report = one.run().await;
    assert_eq!(report.jobs.len(), 2, "{report:#?}");
    let mut nonces = std::collections::BTreeMap::new();
    for job in &report.jobs {
        assert_eq!(job.status, JobStatus::Paid, "{job:#?}");
        let tx = one
            .kit
            .provider()
            .get_transaction_by_hash(B256::from(*job.tx_hash.unwrap().as_bytes()))
            .await
            .unwrap()
            .expect("the reported transaction");
        nonces.insert(
            job.candidate_file.clone(),
            alloy::consensus::Transaction::nonce(&tx),
        );
    }
    assert!(
        nonces[&name(listed_last)] < nonces[&name(listed_first)],
        "the sooner deadline must be relayed first: {nonces:?}"
    );
    // The report keeps file order.
    let files: Vec<_> = report
        .jobs
        .iter()
        .map(|j| j.candidate_file.clone())
        .collect();
    assert_eq!(files, vec![name(listed_first), name(listed_last)]);
}
