//! The keeper's gas key behind the signer's backends (issue #44 item 4): a secp256k1 key in a
//! PKCS#11 token (Debian's SoftHSM2, a fresh token per test) and a remote signer answering
//! `eth_signTransaction` (Ganache, from `tools/remote-signer`: the local Hardhat node does not
//! implement that method, it answers "Method eth_signTransaction is not supported"). Each
//! settlement must land on the local Hardhat chain from the configured address, with one
//! `BountySettled` and the nonce used once; a token without the named key, or a signer
//! answering for another address, fails closed (exit 78) before anything is planned or sent.
//!
//! SoftHSM2 reads its configuration from the environment only, which a test cannot set on
//! itself (edition 2024's `set_var` is unsafe), so every PKCS#11 call runs in a `keeper` child.
//! Without SoftHSM2 or Ganache the tests skip, except under CI=true, where they fail.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use alloy::primitives::{Address as ChainAddress, B256, U256};
use alloy::providers::Provider;
use alloy::signers::local::PrivateKeySigner;
use chain_testkit::{Misbehaviour, SoftHsmToken, status};
use common::Scenario;
use serde_json::Value;
use verifier_sdk::settle::decode_bounty_settled;

const TOKEN: &str = "keeper-token";
const LABEL: &str = "keeper-gas-key";
const PIN: &str = "4712-test-pin";

fn skip_unless_ci(what: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{what} is not installed (tools/chain/up.sh and scripts/services.sh install it)"
    );
    eprintln!("skipped: {what} is not installed");
}

/// A freshly initialised SoftHSM2 token of its own; `None` (skip) without SoftHSM2, unless
/// CI=true.
fn fresh_token() -> Option<SoftHsmToken> {
    SoftHsmToken::init(TOKEN, PIN).unwrap()
}

/// `keeper pkcs11-keygen`: a key generated in the token, its address.
fn generate(token: &SoftHsmToken, label: &str) -> ChainAddress {
    let out = token.keygen(env!("CARGO_BIN_EXE_keeper"), label).unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// A token with the gas key, a scenario with its attestations and the key's address funded,
/// and the key flags with `--from`.
async fn funded_token_scenario() -> Option<(SoftHsmToken, ChainAddress, Scenario, Vec<String>)> {
    let token = fresh_token()?;
    let from = generate(&token, LABEL);
    let sc = Scenario::new(&[1], 0).await;
    sc.kit
        .set_balance(from, U256::from(10u128.pow(19)))
        .await
        .unwrap();
    sc.attest_all();
    let mut key = token.flags(LABEL);
    key.extend(["--from".into(), from.to_string()]);
    Some((token, from, sc, key))
}

/// Ganache holding one key, answering JSON-RPC on loopback; ended when dropped.
struct RemoteSigner {
    child: Child,
    url: String,
    address: ChainAddress,
}

impl RemoteSigner {
    fn ganache() -> Option<PathBuf> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let bin = root.join("tools/remote-signer/node_modules/.bin/ganache");
        if bin.exists() {
            Some(bin)
        } else {
            skip_unless_ci("Ganache (tools/remote-signer)");
            None
        }
    }

    /// Starts Ganache with a fresh key on chain id 8453 and waits until it lists the key.
    async fn start() -> Option<Self> {
        let bin = Self::ganache()?;
        let key = PrivateKeySigner::random();
        let address = key.address();
        // A port the kernel just handed out; should another process take it first, Ganache
        // exits and the wait below says so instead of talking to a stranger: the listed
        // account must be this fresh key's.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(bin)
            .args(["--chain.chainId", "8453", "--server.host", "127.0.0.1"])
            .args(["--server.port", &port.to_string(), "--logging.quiet"])
            .arg("--wallet.accounts")
            .arg(format!("0x{},0", alloy::hex::encode(key.to_bytes())))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut signer = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            address,
        };
        signer.wait_listed().await;
        Some(signer)
    }

    async fn wait_listed(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        let client = reqwest::Client::new();
        let body =
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "eth_accounts", "params": []});
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("ganache exited before answering: {status}");
            }
            if let Ok(answer) = client.post(&self.url).json(&body).send().await
                && let Ok(v) = answer.json::<Value>().await
            {
                let listed = v["result"][0].as_str().unwrap_or_default().to_lowercase();
                assert_eq!(listed, self.address.to_string().to_lowercase(), "{v}");
                return;
            }
            assert!(Instant::now() < deadline, "ganache never answered");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for RemoteSigner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `keeper relay` over the scenario's inputs with the key flags `key`.
fn relay(sc: &Scenario, key: &[String], env: &[(&str, &Path)]) -> Output {
    relay_through(sc, sc.kit.url(), key, env, &[])
}

/// `keeper relay` over the scenario's inputs, its chain at `rpc`, with `extra` flags.
fn relay_through(
    sc: &Scenario,
    rpc: &str,
    key: &[String],
    env: &[(&str, &Path)],
    extra: &[&str],
) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_keeper"));
    cmd.arg("relay").args(sc.relay_inputs());
    settle_flags(&mut cmd, sc, rpc, key, env);
    cmd.args(extra).output().unwrap()
}

/// `keeper resume` of the scenario's state directory on the local chain.
fn resume(sc: &Scenario, key: &[String], env: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_keeper"));
    cmd.arg("resume");
    settle_flags(&mut cmd, sc, sc.kit.url(), key, env);
    cmd.output().unwrap()
}

/// What `relay` and `resume` share: state, chain, caps, key.
fn settle_flags(
    cmd: &mut Command,
    sc: &Scenario,
    rpc: &str,
    key: &[String],
    env: &[(&str, &Path)],
) {
    cmd.arg("--state-dir")
        .arg(sc.path("state"))
        .args(["--rpc", rpc])
        .args(["--max-gas", "2000000", "--max-fee-per-gas", "100000000000"])
        .args(["--confirmations", "1", "--json"])
        .args(key);
    for (k, v) in env {
        cmd.env(k, v);
    }
}

/// The relay paid the bounty with one transaction from `from`, nonce 0 used once, and the
/// bounty emitted exactly one `BountySettled`.
async fn assert_landed_once_from(sc: &Scenario, out: &Output, from: ChainAddress) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains(PIN), "{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["jobs"][0]["status"], "paid", "{report}");
    assert_eq!(
        report["keeper"].as_str().unwrap().to_lowercase(),
        from.to_string().to_lowercase()
    );
    assert_eq!(sc.status().await, status::SETTLED);
    let tx: B256 = report["jobs"][0]["tx_hash"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let provider = sc.kit.provider();
    let receipt = provider
        .get_transaction_receipt(tx)
        .await
        .unwrap()
        .expect("receipt of the reported transaction");
    assert!(receipt.status());
    assert_eq!(receipt.from, from, "the transaction's sender");
    let settled: Vec<_> = receipt
        .inner
        .logs()
        .iter()
        .filter(|l| l.address() == sc.bounty.address())
        .filter_map(|l| decode_bounty_settled(l.topics(), &l.data().data).ok())
        .collect();
    assert_eq!(settled.len(), 1, "one BountySettled");
    let sent = provider.get_transaction_by_hash(tx).await.unwrap().unwrap();
    assert_eq!(alloy::consensus::Transaction::nonce(&sent), 0);
    assert_eq!(provider.get_transaction_count(from).await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settlement_relayed_with_the_gas_key_in_softhsm2_lands_once_from_the_token_address() {
    let Some((token, from, sc, key)) = funded_token_scenario().await else {
        return;
    };
    let out = relay(&sc, &key, &[("SOFTHSM2_CONF", &token.conf())]);
    assert_landed_once_from(&sc, &out, from).await;
    // A rerun finds the record paid and signs nothing more.
    let again = relay(&sc, &key, &[("SOFTHSM2_CONF", &token.conf())]);
    assert_eq!(again.status.code(), Some(0), "{again:?}");
    assert_eq!(
        sc.kit.provider().get_transaction_count(from).await.unwrap(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settlement_relayed_through_a_remote_signer_lands_once_from_its_address() {
    let Some(remote) = RemoteSigner::start().await else {
        return;
    };
    let sc = Scenario::new(&[1], 0).await;
    sc.kit
        .set_balance(remote.address, U256::from(10u128.pow(19)))
        .await
        .unwrap();
    sc.attest_all();
    let key = [
        "--remote-signer".to_owned(),
        remote.url.clone(),
        "--from".to_owned(),
        remote.address.to_string(),
    ];
    let out = relay(&sc, &key, &[]);
    assert_landed_once_from(&sc, &out, remote.address).await;
}

/// What the keeper says about a key before anything else: a candidates directory that does
/// not exist and URLs nothing answers, so exit 78 (not 4 or 5) shows nothing was read,
/// planned or sent.
fn relay_without_inputs(key: &[String], env: &[(&str, &Path)]) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_keeper"));
    cmd.args(["relay", "--candidates", "/nonexistent/candidates"])
        .args(["--attestations", "/nonexistent/attestations"])
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .args(["--api", "http://127.0.0.1:9", "--rpc", "http://127.0.0.1:9"])
        .args(["--max-gas", "1000000", "--max-fee-per-gas", "1000000000"])
        .args(key);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!stderr.contains(PIN), "{stderr}");
    assert!(
        !dir.path().join("state").exists()
            || std::fs::read_dir(dir.path().join("state"))
                .unwrap()
                .filter_map(Result::ok)
                .all(|e| !e.file_name().to_string_lossy().ends_with(".json")),
        "no record was planned"
    );
    (out.status.code().unwrap(), stderr)
}

/// A relay whose transaction never reached the chain (an RPC that swallowed it) leaves a sent
/// record; `keeper resume` with the gas key in SoftHSM2 finishes it: one settlement from the
/// token's address, its nonce used once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keeper_resume_with_the_gas_key_in_softhsm2_settles_a_swallowed_relay_once() {
    let Some((token, from, sc, key)) = funded_token_scenario().await else {
        return;
    };
    let env = [("SOFTHSM2_CONF", token.conf())];
    let env: Vec<(&str, &Path)> = env.iter().map(|(k, v)| (*k, v.as_path())).collect();
    let swallowing = chain_testkit::proxy::start(sc.kit.url(), Misbehaviour::Swallowing)
        .await
        .unwrap();
    // Nothing is mined while the transaction is swallowed (automine), so the relay can only
    // end with its record open, however long it waits.
    let first = relay_through(
        &sc,
        &swallowing.url,
        &key,
        &env,
        &["--receipt-timeout", "1"],
    );
    assert_ne!(first.status.code(), Some(0), "{first:?}");
    assert_eq!(sc.status().await, status::SUBMITTED);
    assert_eq!(
        sc.kit.provider().get_transaction_count(from).await.unwrap(),
        0
    );
    let out = resume(&sc, &key, &env);
    assert_landed_once_from(&sc, &out, from).await;
}

#[test]
fn a_pkcs11_token_without_the_named_gas_key_fails_closed_before_anything_is_planned() {
    let Some(token) = fresh_token() else { return };
    let other = generate(&token, "another-key");
    let mut key = token.flags(LABEL);
    key.extend(["--from".into(), other.to_string()]);
    let (code, stderr) = relay_without_inputs(&key, &[("SOFTHSM2_CONF", &token.conf())]);
    assert_eq!(code, 78, "{stderr}");
    assert!(
        stderr.contains("holds no EC private key labelled \"keeper-gas-key\""),
        "{stderr}"
    );
}

#[test]
fn a_pkcs11_gas_key_for_another_address_than_from_fails_closed_before_anything_is_planned() {
    let Some(token) = fresh_token() else { return };
    let address = generate(&token, LABEL);
    let someone = PrivateKeySigner::random().address();
    let mut key = token.flags(LABEL);
    key.extend(["--from".into(), someone.to_string()]);
    let (code, stderr) = relay_without_inputs(&key, &[("SOFTHSM2_CONF", &token.conf())]);
    assert_eq!(code, 78, "{stderr}");
    let address = verifier_sdk::Address::from(address);
    assert!(
        stderr.contains(&format!("{address} is not --from")),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_signer_answering_for_another_address_fails_closed_before_anything_is_planned() {
    let Some(remote) = RemoteSigner::start().await else {
        return;
    };
    let someone = PrivateKeySigner::random().address();
    let key = [
        "--remote-signer".to_owned(),
        remote.url.clone(),
        "--from".to_owned(),
        someone.to_string(),
    ];
    let (code, stderr) = relay_without_inputs(&key, &[]);
    assert_eq!(code, 78, "{stderr}");
    assert!(stderr.contains("does not list"), "{stderr}");
}

/// Without --from the keeper would not know which of the remote signer's accounts to send
/// from: a usage error, as is a PIN flag without the module.
#[test]
fn a_remote_signer_without_from_is_a_usage_error() {
    let (code, stderr) = relay_without_inputs(
        &[
            "--remote-signer".to_owned(),
            "http://127.0.0.1:9".to_owned(),
        ],
        &[],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--from"), "{stderr}");
}

/// How a lying remote signer answers `eth_signTransaction`.
#[derive(Clone, Copy)]
enum Lie {
    /// The transaction asked for, signed by another key than the one it lists.
    OtherKey,
    /// Signed by the listed key, with a higher fee cap than asked for.
    HigherFee,
}

/// A remote signer on a real loopback HTTP server that lists `listed`'s address and answers
/// `eth_signTransaction` with `lie`.
async fn lying_signer(listed: PrivateKeySigner, lie: Lie) -> String {
    use alloy::consensus::{SignableTransaction, TxEip1559, TxEnvelope};
    use alloy::eips::eip2718::Encodable2718;
    use alloy::network::TxSignerSync;
    let other = PrivateKeySigner::random();
    test_http::serve(move |req| {
        let listed = listed.clone();
        let other = other.clone();
        async move {
            let call: Value = serde_json::from_slice(&req.body).ok()?;
            let result = match call["method"].as_str()? {
                "eth_accounts" => serde_json::json!([listed.address().to_string()]),
                "eth_signTransaction" => {
                    let p = &call["params"][0];
                    let num = |k: &str| {
                        u128::from_str_radix(p[k].as_str().unwrap().trim_start_matches("0x"), 16)
                            .unwrap()
                    };
                    let mut tx = TxEip1559 {
                        chain_id: num("chainId") as u64,
                        nonce: num("nonce") as u64,
                        gas_limit: num("gas") as u64,
                        max_fee_per_gas: num("maxFeePerGas"),
                        max_priority_fee_per_gas: num("maxPriorityFeePerGas"),
                        to: alloy::primitives::TxKind::Call(p["to"].as_str()?.parse().ok()?),
                        value: U256::ZERO,
                        access_list: Default::default(),
                        input: alloy::hex::decode(p["data"].as_str()?).ok()?.into(),
                    };
                    let key = match lie {
                        Lie::OtherKey => &other,
                        Lie::HigherFee => {
                            tx.max_fee_per_gas += 1;
                            &listed
                        }
                    };
                    let sig = key.sign_transaction_sync(&mut tx).unwrap();
                    let raw = TxEnvelope::from(tx.into_signed(sig)).encoded_2718();
                    serde_json::json!(format!("0x{}", alloy::hex::encode(raw)))
                }
                _ => return None,
            };
            let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": result});
            Some(test_http::Response::ok(serde_json::to_vec(&body).unwrap()))
        }
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_signer_that_signs_with_another_key_or_alters_the_transaction_sends_nothing() {
    for lie in [Lie::OtherKey, Lie::HigherFee] {
        let sc = Scenario::new(&[1], 0).await;
        let listed = PrivateKeySigner::random();
        sc.kit
            .set_balance(listed.address(), U256::from(10u128.pow(19)))
            .await
            .unwrap();
        sc.attest_all();
        let url = lying_signer(listed.clone(), lie).await;
        let mut cfg = sc.config();
        cfg.key = keeper::key::GasKeyConfig {
            source: keeper::key::GasKeySource::Remote(url),
            from: Some(verifier_sdk::Address::from(listed.address())),
        };
        let report = sc.run_with(&cfg).await;
        let job = common::only_job(&report);
        assert_eq!(job.status, keeper::report::JobStatus::Internal, "{job:#?}");
        assert_eq!(job.code.as_deref(), Some("sign"), "{job:#?}");
        let expected = match lie {
            Lie::OtherKey => "is signed by another key",
            Lie::HigherFee => "differs from the one asked for",
        };
        assert!(
            job.detail.as_deref().unwrap_or_default().contains(expected),
            "{job:#?}"
        );
        let provider = sc.kit.provider();
        assert_eq!(
            provider
                .get_transaction_count(listed.address())
                .await
                .unwrap(),
            0
        );
        assert_eq!(sc.status().await, status::SUBMITTED);
    }
}
