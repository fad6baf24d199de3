//! Crash recovery and the binary's contract, against the real local node and job feed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::ffi::OsStr;
use std::path::Path;

use alloy::primitives::U256;
use alloy::providers::Provider;
use chain_testkit::status;
use common::{Scenario, filed, only_job};
use keeper::chain::{SettlementRpc, SignedTx};
use keeper::record::{Confirmation, RecordState, SettlementRecord, StateDir};
use keeper::report::{JobReport, JobStatus};
use verifier_sdk::Bytes32;

/// Broadcasts `signed` to the node as a keeper does, without waiting for it.
async fn broadcast(sc: &Scenario, signed: &SignedTx) {
    SettlementRpc::new(sc.kit.url(), keeper::REQUEST_TIMEOUT)
        .unwrap()
        .send_raw(signed)
        .await
        .unwrap();
}

/// A one-verifier scenario the keeper has paid, and the job of that run.
async fn paid() -> (Scenario, JobReport) {
    let sc = Scenario::new(&[1], 0).await;
    sc.attest_all();
    let paid = only_job(&sc.run().await).clone();
    assert_eq!(paid.status, JobStatus::Paid, "{paid:#?}");
    (sc, paid)
}

/// Asserts that `job` was paid by `signed`, the one transaction sent from `nonce` on, and that
/// its `record` is confirmed; returns the record as stored.
async fn assert_paid_once(
    sc: &Scenario,
    job: &JobReport,
    nonce: u64,
    signed: &SignedTx,
    record: &SettlementRecord,
) -> SettlementRecord {
    assert_eq!(job.status, JobStatus::Paid, "{job:#?}");
    assert_eq!(job.tx_hash, Some(signed.hash));
    assert_eq!(
        sc.keeper_nonce().await,
        nonce + 1,
        "exactly one transaction"
    );
    let stored = sc.load(record);
    assert_eq!(stored.state, RecordState::Confirmed);
    stored
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_sending_resumes_and_confirms_without_a_second_tx() {
    let (sc, nonce, signed, record) = filed(RecordState::Sent).await;
    // Broadcast as the killed keeper did, and never wait for it.
    broadcast(&sc, &signed).await;
    let report = sc.run().await;
    let stored = assert_paid_once(&sc, only_job(&report), nonce, &signed, &record).await;
    assert_eq!(stored.confirmation.unwrap().event, "BountySettled");
    assert_eq!(sc.status().await, status::SETTLED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planned_but_never_broadcast_is_rebroadcast_byte_for_byte() {
    let (sc, nonce, signed, record) = filed(RecordState::Planned).await;
    let report = sc.run().await;
    let job = only_job(&report);
    assert_eq!(job.status, JobStatus::Paid, "{job:#?}");
    assert_eq!(
        job.tx_hash,
        Some(signed.hash),
        "the recorded tx, not a new one"
    );
    assert_eq!(sc.keeper_nonce().await, nonce + 1);
    assert_eq!(sc.load(&record).state, RecordState::Confirmed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provably_dropped_tx_is_replaced_only_while_still_submitted() {
    let (sc, nonce, signed, record) = filed(RecordState::Sent).await;
    // Another transaction of the keeper takes that nonce: the recorded one can never be mined.
    sc.take_nonce(nonce, sc.kit.deployer(), U256::from(1u64))
        .await;
    let report = sc.run().await;
    let job = only_job(&report);
    assert_eq!(job.status, JobStatus::Paid, "{job:#?}");
    assert_ne!(job.tx_hash, Some(signed.hash));
    let stored = sc.load(&record);
    assert_eq!(stored.previous_attempts, vec![signed.hash]);
    assert_eq!(stored.tx.nonce, nonce + 1);
    assert_eq!(sc.keeper_nonce().await, nonce + 2);
}

/// A `confirmed` record the chain does not back: a file planted in the state directory (or
/// left by a run that believed a lying RPC's fabricated receipt), for a transaction that was
/// never sent, while the bounty is still Submitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_confirmed_record_for_a_submitted_bounty_is_not_trusted() {
    let (sc, _, signed, mut record) = filed(RecordState::Confirmed).await;
    record.confirmation = Some(Confirmation {
        event: "BountySettled".into(),
        block_number: 1,
        block_hash: Bytes32::from_bytes([0x42; 32]),
        tx_hash: signed.hash,
    });
    sc.save(&record);
    assert_eq!(sc.status().await, status::SUBMITTED);

    let report = sc.run().await;
    let job = only_job(&report);
    assert_ne!(
        job.code.as_deref(),
        Some("already_confirmed"),
        "a record the chain contradicts must not be reported: {job:#?}"
    );
    // Stale record replaced: revalidated and relayed for real, and only now paid.
    assert_eq!(job.status, JobStatus::Paid, "{job:#?}");
    assert_eq!(sc.status().await, status::SETTLED);
    let stored = sc.load(&record);
    assert_eq!(stored.state, RecordState::Confirmed);
    assert_eq!(stored.previous_attempts, vec![signed.hash]);
    assert_eq!(Some(stored.tx.hash), job.tx_hash);
}

/// A `confirmed` record whose transaction is a real, mined settlement of ANOTHER bounty: the
/// receipt exists and carries a genuine `BountySettled`, just not from this bounty's address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirmed_record_pointing_at_another_bountys_settlement_is_not_trusted() {
    let (_other, paid) = paid().await;
    let other_tx = paid.tx_hash.unwrap();

    let (sc, _, _, mut record) = filed(RecordState::Confirmed).await;
    record.tx.hash = other_tx;
    record.confirmation = Some(Confirmation {
        event: "BountySettled".into(),
        block_number: paid.block_number.unwrap(),
        block_hash: Bytes32::from_bytes([0x42; 32]),
        tx_hash: other_tx,
    });
    sc.save(&record);
    let report = sc.run().await;
    let job = only_job(&report);
    assert_ne!(job.code.as_deref(), Some("already_confirmed"), "{job:#?}");
    assert_eq!(job.status, JobStatus::Paid, "{job:#?}");
    assert_ne!(job.tx_hash, Some(other_tx));
    assert_eq!(sc.status().await, status::SETTLED);
}

/// A genuinely confirmed settlement is still reported as done on a rerun, from the chain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirmed_record_the_chain_backs_is_done_without_a_second_tx() {
    let sc = Scenario::new(&[1], 0).await;
    sc.attest_all();
    assert_eq!(only_job(&sc.run().await).status, JobStatus::Paid);
    let nonce = sc.keeper_nonce().await;
    let job = only_job(&sc.run().await).clone();
    assert_eq!(job.status, JobStatus::Done, "{job:#?}");
    assert_eq!(job.code.as_deref(), Some("already_confirmed"));
    assert_eq!(sc.keeper_nonce().await, nonce);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_settles_with_key_from_env_and_never_prints_it() {
    let sc = Scenario::new(&[1], 0).await;
    sc.attest_all();
    let key_hex = std::fs::read_to_string(&sc.key_file).unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_keeper"))
        .arg("relay")
        .args(sc.relay_inputs())
        .args(["--rpc", sc.kit.url()])
        .args(["--key-env", "KEEPER_TEST_KEY", "--state-dir"])
        .arg(sc.path("state"))
        .args(["--max-gas", "2000000", "--max-fee-per-gas", "100000000000"])
        .args(["--confirmations", "1", "--json"])
        .env("KEEPER_TEST_KEY", key_hex.trim())
        .env("KEEPER_LOG", "debug")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        report["schema_version"],
        "agent-bounties/regression-keeper-report-v1"
    );
    assert_eq!(report["jobs"][0]["status"], "paid");
    assert!(stderr.contains("paid"), "{stderr}");
    let secret = key_hex.trim().trim_start_matches("0x");
    for text in [&stdout, &stderr] {
        assert!(!text.contains(secret) && !text.contains(&secret[..16]));
    }
    for entry in std::fs::read_dir(sc.path("state")).unwrap() {
        let body = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        assert!(!body.contains(secret));
    }
}

/// Writes a (Hardhat dev) gas key at `path` with permissions `mode`.
fn write_key(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(
        path,
        "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    )
    .unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `keeper relay` with `key` (its key options), `dir` for candidates, attestations and state,
/// no platform or node to reach (port 9) and gas caps of 1: for refusals before any request.
fn relay_nowhere(dir: &Path, key: &[impl AsRef<OsStr>]) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_keeper"));
    c.args(["relay", "--candidates"])
        .arg(dir)
        .arg("--attestations")
        .arg(dir)
        .args(["--api", "http://127.0.0.1:9", "--rpc", "http://127.0.0.1:9"])
        .args(key)
        .arg("--state-dir")
        .arg(dir.join("state"))
        .args(["--max-gas", "1", "--max-fee-per-gas", "1"]);
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_exit_codes_for_usage_and_credentials() {
    let bin = env!("CARGO_BIN_EXE_keeper");
    let out = tokio::process::Command::new(bin)
        .args(["relay"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    write_key(&key, 0o640);
    let base = |k: &[&str]| relay_nowhere(dir.path(), k);
    let key_arg = key.to_str().unwrap();
    let out = base(&["--key-file", key_arg]).output().await.unwrap();
    assert_eq!(
        out.status.code(),
        Some(78),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = base(&["--key-env", "KEEPER_TEST_UNSET_VARIABLE"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    // Both key options at once is a usage error.
    let out = base(&["--key-env", "X", "--key-file", key_arg])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // A good key but no node: unavailable.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = base(&["--key-file", key_arg]).output().await.unwrap();
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_refuses_plain_http_rpc_or_api_to_a_remote_host_with_exit_78() {
    let sc = Scenario::new(&[1], 0).await;
    sc.attest_all();
    let run = |api: String, rpc: String| {
        let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_keeper"));
        c.args(["relay", "--candidates"])
            .arg(sc.path("candidates"))
            .arg("--attestations")
            .arg(sc.path("att0"))
            .args(["--api", &api, "--rpc", &rpc, "--key-file"])
            .arg(&sc.key_file)
            .arg("--state-dir")
            .arg(sc.path("state"))
            .args(["--max-gas", "2000000", "--max-fee-per-gas", "100000000000"])
            .args(["--confirmations", "1"]);
        c
    };
    // Exit 78 naming `flag` and https; the refusal's stderr.
    let refused = |mut c: tokio::process::Command, flag: &'static str| async move {
        let out = c.output().await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(78), "{flag}: {stderr}");
        assert!(
            stderr.contains(flag) && stderr.contains("https"),
            "{stderr}"
        );
        stderr
    };
    // `.invalid` never resolves (RFC 6761): the refusal must come from the URL policy, before
    // any request, and must not echo the URL's secret path.
    for rpc in [
        "http://rpc.example.invalid:8545/v2/SECRETRPCKEY",
        "ws://127.0.0.1:8545/v2/SECRETRPCKEY",
    ] {
        let stderr = refused(run(sc.server.url.clone(), rpc.into()), "--rpc").await;
        assert!(!stderr.contains("SECRETRPCKEY"), "{stderr}");
    }
    refused(
        run("http://api.example.invalid".into(), sc.kit.url().into()),
        "--api",
    )
    .await;
    assert_eq!(sc.status().await, status::SUBMITTED);
    assert!(
        std::fs::read_dir(sc.path("state"))
            .unwrap()
            .next()
            .is_none()
    );
    // A loopback spelling is accepted and the relay goes through.
    let port = sc.kit.url().rsplit(':').next().unwrap().to_owned();
    let out = run(sc.server.url.clone(), format!("http://localhost:{port}"))
        .output()
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(sc.status().await, status::SETTLED);
}

/// A JSON-RPC proxy to `upstream` that swallows `eth_sendRawTransaction` and answers the
/// receipt of the swallowed transaction with a fabricated, successful one carrying exactly the
/// `BountySettled` the keeper expects, from the bounty's own address: what a lying RPC
/// provider can do. Everything else is forwarded, so the bounty really stays Submitted.
async fn receipt_forging_rpc(upstream: String, sc: &Scenario) -> String {
    use alloy::consensus::{Transaction, TxEnvelope};
    use alloy::eips::eip2718::Decodable2718;
    use alloy::primitives::{B256, keccak256};
    use alloy::sol_types::SolEvent;
    use serde_json::json;
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    let b = |x: Bytes32| B256::from(*x.as_bytes());
    let event = verifier_sdk::settle::BountySettled {
        bountyId: b(sc.validated.bounty_id()),
        round: sc.validated.round(),
        solver: sc.validated.solver().into(),
        solverReward: U256::from(1u64),
        claimBondReturned: U256::ZERO,
        timeoutBondBonus: U256::ZERO,
        verifierReward: U256::ZERO,
        submissionHash: b(sc.validated.submission_hash()),
        evidenceHash: b(sc.validated.evidence_hash()),
        policyHash: b(sc.validated.policy_hash()),
        verificationHash: B256::ZERO,
    };
    let bounty = sc.bounty.address();
    let swallowed: Arc<Mutex<HashMap<String, Vec<u8>>>> = Arc::default();
    chain_testkit::proxy::intercept(&upstream, move |request, node| {
        let (swallowed, event) = (swallowed.clone(), event.clone());
        async move {
            let id = request["id"].clone();
            let answer = match request["method"].as_str().unwrap_or("") {
                "eth_sendRawTransaction" => {
                    let hex = request["params"][0].as_str().unwrap();
                    let raw = alloy::hex::decode(hex.trim_start_matches("0x")).unwrap();
                    let tx = TxEnvelope::decode_2718(&mut raw.as_slice()).unwrap();
                    let hash = format!("{}", keccak256(&raw));
                    swallowed
                        .lock()
                        .unwrap()
                        .insert(hash.clone(), tx.input().to_vec());
                    json!({"jsonrpc": "2.0", "id": id, "result": hash})
                }
                "eth_getTransactionReceipt" => {
                    let hash = request["params"][0].as_str().unwrap().to_lowercase();
                    let calldata = swallowed.lock().unwrap().get(&hash).cloned();
                    match calldata {
                        None => node.call(&request).await?,
                        Some(calldata) => {
                            let head = node
                                .call(&json!({"jsonrpc": "2.0", "id": 1,
                                        "method": "eth_getBlockByNumber",
                                        "params": ["latest", false]}))
                                .await?["result"]
                                .clone();
                            let mut ev = event.clone();
                            ev.verificationHash = keccak256(&calldata[4..]);
                            let data = ev.encode_log_data();
                            let log = json!({
                                "address": bounty,
                                "topics": data.topics(),
                                "data": format!("0x{}", alloy::hex::encode(&data.data)),
                                "blockNumber": head["number"],
                                "blockHash": head["hash"],
                                "transactionHash": hash,
                                "transactionIndex": "0x0",
                                "logIndex": "0x0",
                                "removed": false,
                            });
                            json!({"jsonrpc": "2.0", "id": id, "result": {
                                "transactionHash": hash,
                                "transactionIndex": "0x0",
                                "blockHash": head["hash"],
                                "blockNumber": head["number"],
                                "from": format!("0x{}", "00".repeat(20)),
                                "to": bounty,
                                "cumulativeGasUsed": "0x5208",
                                "gasUsed": "0x5208",
                                "effectiveGasPrice": "0x1",
                                "contractAddress": null,
                                "logs": [log],
                                "logsBloom": format!("0x{}", "00".repeat(256)),
                                "type": "0x2",
                                "status": "0x1",
                            }})
                        }
                    }
                }
                _ => node.call(&request).await?,
            };
            Some(answer)
        }
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fabricated_receipt_from_a_lying_rpc_is_not_reported_paid() {
    let sc = Scenario::new(&[1], 0).await;
    sc.attest_all();
    let mut cfg = sc.config();
    cfg.rpc = receipt_forging_rpc(sc.kit.url().to_owned(), &sc)
        .await
        .into();
    let report = sc.run_with(&cfg).await;
    let job = only_job(&report);
    assert_eq!(
        sc.status().await,
        status::SUBMITTED,
        "nothing really settled"
    );
    assert_ne!(job.status, JobStatus::Paid, "{job:#?}");
    assert_eq!(job.status, JobStatus::Refused, "{job:#?}");
    assert_eq!(job.code.as_deref(), Some("status_mismatch"), "{job:#?}");
    // The record stays `sent`: a rerun neither sends again nor reports the forged payment.
    let record = StateDir::open(&sc.path("state"))
        .unwrap()
        .load(&keeper::record::RecordKey {
            chain_id: 8453,
            bounty_contract: sc.validated.bounty_contract(),
            round: sc.validated.round(),
        })
        .unwrap()
        .unwrap();
    assert_eq!(record.state, RecordState::Sent);
    let again = sc.run_with(&cfg).await;
    assert_eq!(only_job(&again).code.as_deref(), Some("status_mismatch"));
    assert_eq!(sc.status().await, status::SUBMITTED);
}

#[tokio::test]
async fn binary_refuses_a_key_file_of_another_user_or_under_a_symlinked_directory_with_exit_78() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let key = real.join("key");
    write_key(&key, 0o600);
    std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
    let run = |key: std::path::PathBuf| {
        relay_nowhere(dir.path(), &[OsStr::new("--key-file"), key.as_os_str()])
    };
    let out = run(dir.path().join("link/key")).output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains("symbolic link in a parent directory"),
        "{stderr}"
    );
    // chown as root, or `sudo -n` for GitHub's runner user.
    assert!(
        test_root::give_to_another_user(&key).unwrap(),
        "chown needs root or password-less sudo"
    );
    let out = run(key.clone()).output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("owned by uid 12345"), "{stderr}");
}

/// A JSON-RPC proxy to `upstream` behind which two nodes disagree: every read of state,
/// blocks, receipts and transactions comes from a node stuck at block `*lag` (while it is
/// `Some`), and the nonce (`eth_getTransactionCount`) and broadcasts from the current one.
/// What an RPC provider's load balancer does when one of its nodes is a block behind. With
/// `lag` at `None` everything is forwarded.
async fn lagging_rpc(
    upstream: String,
    lag: std::sync::Arc<std::sync::Mutex<Option<u64>>>,
) -> String {
    use serde_json::{Value, json};

    // The position of the block parameter of the state reads the lagging node answers.
    fn block_param(method: &str) -> Option<usize> {
        match method {
            "eth_call" | "eth_estimateGas" | "eth_getBalance" | "eth_getCode" => Some(1),
            "eth_getStorageAt" => Some(2),
            "eth_getBlockByNumber" => Some(0),
            _ => None,
        }
    }
    fn number(v: &Value) -> Option<u64> {
        u64::from_str_radix(v.as_str()?.trim_start_matches("0x"), 16).ok()
    }
    chain_testkit::proxy::intercept(&upstream, move |mut request, node| {
        let lag = lag.clone();
        async move {
            let id = request["id"].clone();
            let method = request["method"].as_str().unwrap_or("").to_owned();
            let at = *lag.lock().unwrap();
            let answer = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
            let mut beyond = false;
            if let Some(at) = at {
                if method == "eth_blockNumber" {
                    return Some(answer(json!(format!("{at:#x}"))));
                }
                if let Some(i) = block_param(&method) {
                    let params = request["params"].as_array_mut().unwrap();
                    while params.len() <= i {
                        params.push(json!("latest"));
                    }
                    match number(&params[i]) {
                        Some(n) if n > at => beyond = true,
                        Some(_) => {}
                        // A tag: the lagging node's latest is its own head.
                        None => params[i] = json!(format!("{at:#x}")),
                    }
                }
            }
            if beyond {
                // The lagging node has not seen that block yet.
                return Some(answer(Value::Null));
            }
            let mut response = node.call(&request).await?;
            if let Some(at) = at
                && matches!(
                    method.as_str(),
                    "eth_getTransactionReceipt" | "eth_getTransactionByHash"
                )
            {
                // Mined above the lagging node's head, or only in the current node's pool:
                // unknown to the lagging node.
                let seen = number(&response["result"]["blockNumber"]).is_some_and(|n| n <= at);
                if !seen {
                    response["result"] = Value::Null;
                }
            }
            Some(response)
        }
    })
    .await
    .unwrap()
}

/// Runs the keeper once behind [`lagging_rpc`] with its lagging node stuck at block `at`, and
/// again once that node has caught up (when the keeper must find its own transaction): both
/// runs' job, and the keeper's nonce between them.
async fn run_lagging_then_caught_up(sc: &common::Scenario, at: u64) -> (JobReport, u64, JobReport) {
    let lag = std::sync::Arc::new(std::sync::Mutex::new(Some(at)));
    let mut cfg = sc.config();
    cfg.rpc = lagging_rpc(sc.kit.url().to_owned(), lag.clone())
        .await
        .into();
    cfg.wait.timeout = std::time::Duration::from_secs(3);
    let first = only_job(&sc.run_with(&cfg).await).clone();
    let nonce = sc.keeper_nonce().await;
    *lag.lock().unwrap() = None;
    let again = only_job(&sc.run_with(&cfg).await).clone();
    (first, nonce, again)
}

/// Behind an RPC whose nodes disagree by one block (receipts and state from a node one block
/// behind, the nonce from the current one), the keeper's mined settlement looks unmined while
/// its nonce looks taken. That is no proof of a drop: the keeper must neither send a second
/// settlement (which reverts) nor report anything but `pending` until the chain reads
/// consistently, and then `paid` for the transaction it sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lagging_rpc_never_makes_a_mined_settlement_look_dropped() {
    let (sc, nonce, signed, record) = filed(RecordState::Sent).await;
    let before = sc.kit.provider().get_block_number().await.unwrap();
    // The killed keeper's transaction, mined on the real chain.
    broadcast(&sc, &signed).await;
    let mined = sc
        .kit
        .provider()
        .get_transaction_receipt(alloy::primitives::B256::from(*signed.hash.as_bytes()))
        .await
        .unwrap()
        .expect("automine included the transaction");
    assert!(mined.block_number.unwrap() > before);
    assert_eq!(sc.status().await, status::SETTLED);
    assert_eq!(sc.keeper_nonce().await, nonce + 1);

    let (first, nonce_after_first, again) = run_lagging_then_caught_up(&sc, before).await;
    let second_send = nonce_after_first != nonce + 1;
    assert!(
        !second_send,
        "a second settlement was sent while the first was mined: first run {first:#?}, \
         rerun {again:#?}"
    );
    assert_eq!(first.status, JobStatus::Pending, "{first:#?}");
    assert_ne!(first.code.as_deref(), Some("reverted"), "{first:#?}");
    let stored = assert_paid_once(&sc, &again, nonce, &signed, &record).await;
    assert_eq!(stored.tx.hash, signed.hash);
    assert!(stored.previous_attempts.is_empty(), "{stored:#?}");
}

/// The same lag on a rerun after a confirmed payment: the `confirmed` record's receipt is
/// missing from the lagging node. That is no proof the record is stale; the keeper must not
/// settle again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lagging_rpc_never_makes_a_confirmed_record_look_stale() {
    let (sc, paid) = paid().await;
    let nonce = sc.keeper_nonce().await;
    let (first, nonce_after_first, again) =
        run_lagging_then_caught_up(&sc, paid.block_number.unwrap() - 1).await;
    let second_send = nonce_after_first != nonce;
    assert!(
        !second_send,
        "a second settlement was sent after a confirmed one: first run {first:#?}, \
         rerun {again:#?}"
    );
    assert_eq!(first.status, JobStatus::Pending, "{first:#?}");
    assert_eq!(again.status, JobStatus::Done, "{again:#?}");
    assert_eq!(again.code.as_deref(), Some("already_confirmed"));
    assert_eq!(again.tx_hash, paid.tx_hash);
    assert_eq!(sc.keeper_nonce().await, nonce);
}
