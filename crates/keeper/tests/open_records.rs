//! Open settlement records (planned or sent) outside a relay of their candidate: `keeper
//! status` lists them, `keeper resume` walks them without candidates, and a rotated keeper
//! key still finishes a record the old key planned. Against the real local node.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use alloy::primitives::U256;
use alloy::providers::Provider;
use chain_testkit::status;
use common::{Scenario, filed, only_job, plan, recorded};
use keeper::record::RecordState;
use keeper::report::JobStatus;
use keeper::{KeySource, ResumeConfig};

fn resume_config(sc: &Scenario) -> ResumeConfig {
    let cfg = sc.config();
    ResumeConfig {
        rpc: cfg.rpc,
        key: cfg.key,
        state_dir: cfg.state_dir,
        caps: cfg.caps,
        wait: cfg.wait,
    }
}

/// The job left the feed (no candidate any more) while its settlement was recorded `sent`
/// but never reached a block: a relay never looks at the record again, and the nonce it holds
/// blocks every later transaction of the keeper. `keeper resume` walks it without the
/// candidate and settles it with the recorded transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_record_whose_job_left_the_feed_is_resumed_without_candidates() {
    let (sc, nonce, signed, record) = filed(RecordState::Sent).await;
    sc.remove_candidates();
    let relay = sc.run().await;
    assert!(relay.jobs.is_empty(), "{relay:#?}");
    assert_eq!(sc.load(&record).state, RecordState::Sent, "never revisited");
    assert_eq!(sc.keeper_nonce().await, nonce, "the nonce stays blocked");

    let report = keeper::run_resume(&resume_config(&sc)).await.unwrap();
    let job = only_job(&report);
    assert_eq!(job.status, JobStatus::Paid, "{job:#?}");
    assert_eq!(job.tx_hash, Some(signed.hash), "the recorded transaction");
    assert_eq!(job.candidate_file, record.key().file_name());
    assert_eq!(sc.load(&record).state, RecordState::Confirmed);
    assert_eq!(sc.keeper_nonce().await, nonce + 1);
    assert_eq!(sc.status().await, status::SETTLED);
    // Nothing open any more: a second resume has nothing to walk.
    let again = keeper::run_resume(&resume_config(&sc)).await.unwrap();
    assert!(again.jobs.is_empty(), "{again:#?}");
    assert_eq!(again.exit_code, 0);
}

/// A record whose nonce another transaction took (the manual cancel of docs/operations.md):
/// without the candidate no new attempt is planned; the run says so instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_record_is_reported_dropped_by_resume_and_nothing_is_sent() {
    let (sc, nonce, _, record) = filed(RecordState::Sent).await;
    // The cancel: a 0-value transaction to itself at the record's nonce.
    sc.take_nonce(nonce, sc.keeper.address(), U256::ZERO).await;
    let report = keeper::run_resume(&resume_config(&sc)).await.unwrap();
    let job = only_job(&report);
    assert_eq!(job.status, JobStatus::Refused, "{job:#?}");
    assert_eq!(job.code.as_deref(), Some("dropped"));
    assert_eq!(sc.keeper_nonce().await, nonce + 1, "nothing sent");
    assert_eq!(sc.status().await, status::SUBMITTED);
    // A relay that has the candidate plans the new attempt.
    let relay = sc.run().await;
    assert_eq!(only_job(&relay).status, JobStatus::Paid, "{relay:#?}");
    assert_eq!(sc.load(&record).previous_attempts.len(), 1);
}

/// The keeper key was rotated while a record of the old key was `planned` (signed, maybe
/// never sent): the new key's relay finishes that exact transaction (the old key's bytes, at
/// the old key's nonce) instead of signing a second settlement, and `keeper status` showed
/// the record under the old address beforehand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_keeper_key_finishes_a_planned_record_of_the_old_key() {
    let sc = Scenario::new(&[1], 0).await;
    sc.attest_all();
    let old_nonce = sc.keeper_nonce().await;
    let (signed, record) = recorded(&sc, old_nonce, plan(), RecordState::Planned);

    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_keeper"))
        .args(["status", "--json", "--state-dir"])
        .arg(sc.path("state"))
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "an open record: not settled");
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(st["open"][0]["state"], "planned");
    assert_eq!(
        st["open"][0]["keeper"],
        format!("{:#x}", sc.keeper.address())
    );

    let new_key = sc
        .kit
        .fund_new_account(U256::from(10u128.pow(18)))
        .await
        .unwrap();
    let key_file = sc.path("new-keeper.key");
    std::fs::write(
        &key_file,
        format!("0x{}", alloy::hex::encode(new_key.to_bytes())),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut cfg = sc.config();
    cfg.key = KeySource::File(key_file).into();
    let report = sc.run_with(&cfg).await;
    let job = only_job(&report);
    assert_eq!(job.status, JobStatus::Paid, "{job:#?}");
    assert_eq!(
        job.tx_hash,
        Some(signed.hash),
        "the old key's recorded transaction"
    );
    assert_eq!(sc.keeper_nonce().await, old_nonce + 1);
    let new_nonce = sc
        .kit
        .provider()
        .get_transaction_count(new_key.address())
        .await
        .unwrap();
    assert_eq!(new_nonce, 0, "the new key sent nothing");
    assert_eq!(sc.load(&record).state, RecordState::Confirmed);
}

/// `keeper status` lists every planned and sent record with its nonce and age, counts the
/// closed ones, reports an unreadable record file (it may hide an open one), and refuses a
/// state directory that does not exist rather than report nothing open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keeper_status_lists_open_records_with_nonce_and_age() {
    let (sc, nonce, signed, _) = filed(RecordState::Sent).await;
    let status = |dir: std::path::PathBuf| async move {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_keeper"))
            .args(["status", "--json", "--state-dir"])
            .arg(dir)
            .output()
            .await
            .unwrap();
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        (
            out.status.code(),
            json,
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, st, stderr) = status(sc.path("state")).await;
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(
        st["schema_version"],
        "agent-bounties/regression-keeper-status-v1"
    );
    assert_eq!(st["open"].as_array().unwrap().len(), 1, "{st:#}");
    assert_eq!(st["open"][0]["state"], "sent");
    assert_eq!(st["open"][0]["nonce"], nonce);
    assert_eq!(st["open"][0]["tx_hash"], signed.hash.to_string());
    assert!(st["open"][0]["age_seconds"].as_u64().is_some());
    assert!(stderr.contains(&format!("nonce {nonce}")), "{stderr}");

    // Settled: nothing open, one closed, exit 0.
    assert_eq!(only_job(&sc.run().await).status, JobStatus::Paid);
    let (code, st, _) = status(sc.path("state")).await;
    assert_eq!(code, Some(0), "{st:#}");
    assert_eq!(st["open"].as_array().unwrap().len(), 0);
    assert_eq!(st["closed"], 1);

    std::fs::write(
        sc.path("state").join("settlement-8453-00-1.json"),
        b"not a record",
    )
    .unwrap();
    let (code, st, _) = status(sc.path("state")).await;
    assert_eq!(code, Some(4), "{st:#}");
    assert_eq!(st["unreadable"][0]["file"], "settlement-8453-00-1.json");

    let (code, _, stderr) = status(sc.path("no-such-state")).await;
    assert_eq!(code, Some(4), "{stderr}");
    assert!(!sc.path("no-such-state").exists(), "status creates nothing");
}
