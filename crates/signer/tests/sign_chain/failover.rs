//! #43 (gap 9 of the review): the built `signer sign` binary with several `--rpc` endpoints,
//! each a proxy (`chain_testkit::proxy`) in front of a Hardhat node of the test's own. The
//! library's failover is tested in bounty-chain; these prove the binary wires it: the flag
//! taken more than once, the start-up check and its exit codes, and URLs kept out of output.

use chain_testkit::PrivateNode;
use chain_testkit::proxy::{self, Misbehaviour};

use super::*;

/// A world on `node` whose chain clock runs an hour ahead of the wall clock. The signer counts
/// the deadline from the later of its clock and the pinned block's timestamp, so two runs at
/// different wall times over the same head sign the same deadline, and (RFC 6979) the same
/// signature: what lets two runs' attestations be compared byte for byte. Signing mines
/// nothing, so the head stays put between the runs.
async fn world_ahead(node: &PrivateNode) -> World {
    use alloy::providers::Provider;
    let kit = Testkit::connect_to(node.url())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    kit.provider()
        .raw_request::<_, Value>("evm_increaseTime".into(), (3600u64,))
        .await
        .unwrap();
    node.mine().await.unwrap();
    world_on(kit, &[signer_address()], 3600, 0).await
}

/// `signer sign --json` over `w`'s candidates and feed with one `--rpc` per entry of `rpcs`,
/// writing to `out` and signing through the history in `history`.
async fn sign_through(
    w: &World,
    rpcs: &[impl AsRef<str>],
    out: &Path,
    history: &Path,
) -> (i32, String, String) {
    let signer = w.signer.to_string();
    signer_cli(sign_args(
        w.candidates.path(),
        &w.api,
        &signer,
        rpcs,
        out,
        history,
    ))
    .await
}

/// The arguments of `signer sign --json --key-env SIGNER_TEST_KEY` (the key [`signer_cli`]
/// puts in the environment) with one `--rpc` per entry of `rpcs`.
fn sign_args(
    candidates: &Path,
    api: &str,
    signer: &str,
    rpcs: &[impl AsRef<str>],
    out: &Path,
    history: &Path,
) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = vec![
        "sign".into(),
        "--candidates".into(),
        candidates.into(),
        "--api".into(),
        api.into(),
        "--signer".into(),
        signer.into(),
    ];
    for rpc in rpcs {
        args.extend(["--rpc".into(), rpc.as_ref().into()]);
    }
    args.extend([
        "--out".into(),
        out.into(),
        "--history".into(),
        history.into(),
    ]);
    args.extend(["--json", "--key-env", "SIGNER_TEST_KEY"].map(Into::into));
    args
}

/// Every file `signer sign` wrote to `dir` (attestations and their manifest), by name.
fn written(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    files.sort();
    files
}

/// An attestation file's name (not one of the manifests).
fn is_attestation(name: &str) -> bool {
    name.starts_with("attestation-") && name != ATTESTATION_MANIFEST_FILE
}

/// A proxy URL with a secret path, as a provider's URL with an API key in it: it must never
/// reach the output. The proxies answer on any path.
fn secret_url(proxy: &proxy::RpcProxy, n: usize) -> String {
    format!("{}/v2/SECRETRPCKEY{n}", proxy.url)
}

fn assert_no_url(texts: &[impl AsRef<str>], urls: &[impl AsRef<str>]) {
    for text in texts.iter().map(AsRef::as_ref) {
        assert!(!text.contains("SECRETRPCKEY"), "a URL's secret: {text}");
        for url in urls.iter().map(AsRef::as_ref) {
            assert!(!text.contains(url), "the URL {url} in: {text}");
        }
    }
}

/// The endpoints in order refuse with 403 and rate-limit with -32005 every request but
/// `eth_chainId`/`eth_blockNumber`, then one is healthy. The first alone (one `--rpc`, as
/// before #43) signs nothing and is an outage (exit 5); the list signs, and writes exactly the
/// bytes (attestation and manifest) the healthy endpoint alone makes the binary write, each run
/// with a history of its own so neither reuses the other's signature.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_signer_binary_through_refusing_and_rate_limiting_endpoints_signs_what_one_healthy_endpoint_signs()
 {
    let node = PrivateNode::start().await.unwrap_or_else(|e| panic!("{e}"));
    let w = world_ahead(&node).await;
    let forbidden = proxy::start(node.url(), Misbehaviour::Forbidden)
        .await
        .unwrap();
    let limited = proxy::start(node.url(), Misbehaviour::RateLimited)
        .await
        .unwrap();
    let healthy = proxy::start(node.url(), Misbehaviour::None).await.unwrap();
    let (f, l, h) = (
        secret_url(&forbidden, 1),
        secret_url(&limited, 2),
        secret_url(&healthy, 3),
    );

    let out = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = sign_through(&w, &[&f], out.path(), new_history().path()).await;
    assert_eq!(code, 5, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["signed"], 0, "{report}");
    assert_eq!(
        report["candidates"][0]["code"], "chain_read_failed",
        "{report}"
    );
    assert!(
        !written(out.path())
            .iter()
            .any(|(name, _)| is_attestation(name)),
        "an attestation written"
    );

    let alone = tempfile::tempdir().unwrap();
    let (code, _, stderr) = sign_through(&w, &[&h], alone.path(), new_history().path()).await;
    assert_eq!(code, 0, "{stderr}");
    let calls_before = (forbidden.calls("eth_call"), limited.calls("eth_call"));

    let listed = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) =
        sign_through(&w, &[&f, &l, &h], listed.path(), new_history().path()).await;
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["signed"], 1, "{report}");
    assert_eq!(report["candidates"][0]["status"], "signed");
    // Each read went to the refusing endpoints first and moved on.
    assert!(forbidden.calls("eth_call") > calls_before.0);
    assert!(limited.calls("eth_call") > calls_before.1);

    let want = written(alone.path());
    assert_eq!(
        want.iter().filter(|(name, _)| is_attestation(name)).count(),
        1,
        "{:?}",
        want.iter().map(|(name, _)| name).collect::<Vec<_>>()
    );
    assert_eq!(written(listed.path()), want);
    assert_no_url(
        &[&stdout, &stderr],
        &[&forbidden.url, &limited.url, &healthy.url],
    );
}

/// Bad input of #43: a healthy endpoint and one answering another chain id. The binary exits 78
/// at start, naming each endpoint's chain id by its position, never a URL, with nothing read or
/// written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_signer_binary_refuses_endpoints_on_two_chains_with_78_naming_each_by_position() {
    let node = PrivateNode::start().await.unwrap_or_else(|e| panic!("{e}"));
    let kit = Testkit::connect_to(node.url())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let w = world_on(kit, &[signer_address()], 3600, 0).await;
    let healthy = proxy::start(node.url(), Misbehaviour::None).await.unwrap();
    let other = proxy::start(node.url(), Misbehaviour::OtherChain)
        .await
        .unwrap();
    let (code, stdout, stderr) = sign_through(
        &w,
        &[&secret_url(&healthy, 1), &secret_url(&other, 2)],
        w.out.path(),
        w.history.path(),
    )
    .await;
    assert_eq!(code, 78, "{stderr}");
    for text in [&stdout, &stderr] {
        assert!(
            text.contains("disagree on the chain id")
                && text.contains("rpc 1: chain id 8453 ")
                && text.contains("rpc 2: chain id 1 "),
            "{text}"
        );
    }
    let error: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(error["error"]["exit_code"], 78, "{error}");
    assert_no_url(&[&stdout, &stderr], &[&healthy.url, &other.url]);
    assert_eq!(healthy.calls("eth_call") + other.calls("eth_call"), 0);
    assert!(std::fs::read_dir(w.out.path()).unwrap().next().is_none());
}

/// Every endpoint down (two closed loopback ports): an outage, exit 5, each endpoint named by
/// position with why it did not answer, never its URL; nothing written.
#[tokio::test]
async fn the_signer_binary_with_every_endpoint_down_is_an_outage_exit_5_naming_no_url() {
    let closed = |n: usize| {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // The listener is dropped here: nothing answers on the port.
        format!("http://127.0.0.1:{port}/v2/SECRETRPCKEY{n}")
    };
    let (first, second) = (closed(1), closed(2));
    let candidates = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let history = new_history();
    let (code, stdout, stderr) = signer_cli(sign_args(
        candidates.path(),
        "http://127.0.0.1:9",
        &signer_address().to_string(),
        &[&first, &second],
        out.path(),
        history.path(),
    ))
    .await;
    assert_eq!(code, 5, "{stderr}");
    assert!(
        stderr.contains("no --rpc endpoint answered")
            && stderr.contains("rpc 1: no answer")
            && stderr.contains("rpc 2: no answer"),
        "{stderr}"
    );
    let error: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(error["error"]["exit_code"], 5, "{error}");
    let port = |url: &str| url.split('/').nth(2).unwrap().to_owned();
    assert_no_url(&[&stdout, &stderr], &[&port(&first), &port(&second)]);
    assert!(std::fs::read_dir(out.path()).unwrap().next().is_none());
}
