//! Issue #43 item 3: `worker feed --rpc` and `worker serve --rpc` read the chain half of a
//! readiness record through the same `--rpc` list the signer is given, and the signer's gate
//! and the record must read the same checks. The signer asks every endpoint of a list of more
//! than one its chain id and head before use (`RpcChainReader::check_endpoints`): a list on two
//! chains is refused with each endpoint's answer by position, an endpoint that does not answer
//! is not used, none answering is an outage. `worker::chain_readiness::connect` is held to the
//! same here, against the real local Hardhat node (scripts/services.sh) and the repo's
//! misbehaving proxies in front of it (`chain_testkit::proxy`).

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chain_testkit::proxy::{self, Misbehaviour, RpcProxy};
use chain_testkit::{BountyParams, Testkit, dev_signer};
use serde_json::Value;
use verifier_sdk::fixtures::{JobParams, job_value};
use verifier_sdk::{Address, ValidatedJob, validate_job};

/// A job and a bounty deployed to the shared node that commits to exactly that job, so the
/// signer's chain check passes on it.
async fn committed_job(kit: &Testkit) -> ValidatedJob {
    let now = kit.latest_timestamp().await.unwrap();
    let verifier = Address::from(dev_signer(1).unwrap().address());
    let mut params = BountyParams::new(vec![verifier.into()], now + 3600);
    let job_for = |bounty: &str| {
        job_value(&JobParams {
            bounty_contract: bounty.to_owned(),
            bounty_id: format!("0x{}", "bb".repeat(32)),
            round: 7,
            solver: params.solver.to_string().to_lowercase(),
            verifiers: vec![verifier.to_string()],
            expires_at: params.verification_expires_at,
            ..JobParams::default()
        })
    };
    // The hashes do not depend on the contract's address: a placeholder job gives them.
    let draft = validate_job(&job_for(&format!("0x{}", "22".repeat(20))), now).unwrap();
    params.submission_hash = draft.submission_hash().into();
    params.evidence_hash = draft.evidence_hash().into();
    params.policy_hash = draft.policy_hash().into();
    params.terms_hash = draft.terms_hash().into();
    params.acceptance_criteria_hash = draft.acceptance_criteria_hash().into();
    params.benchmark_hash = draft.benchmark_hash().into();
    params.evidence_schema_hash = draft.evidence_schema_hash().into();
    let bounty = kit.deploy_bounty(&params).await.unwrap();
    let job: Value = job_for(&bounty.address().to_string().to_lowercase());
    validate_job(&job, now).unwrap()
}

/// An endpoint that does not answer JSON-RPC (HTTP 503 to everything), counting what reaches
/// it.
async fn down_endpoint() -> (String, Arc<AtomicU64>) {
    let hits = Arc::new(AtomicU64::new(0));
    let seen = hits.clone();
    let url = test_http::serve(move |_| {
        seen.fetch_add(1, Ordering::SeqCst);
        async { Some(test_http::Response::status(503)) }
    })
    .await
    .unwrap();
    (url, hits)
}

/// Whether `text` names an endpoint by URL (every endpoint here is on loopback) rather than by
/// position.
fn leaks_a_url(text: &str) -> bool {
    text.contains("127.0.0.1")
}

#[tokio::test]
async fn no_rpc_is_readiness_without_a_chain() {
    assert!(
        worker::chain_readiness::connect(&[])
            .await
            .unwrap()
            .is_none()
    );
}

/// Two endpoints of one chain: connected, and the bounty that commits to the job reads ready,
/// as it does through the node alone.
#[tokio::test]
async fn endpoints_that_agree_on_the_chain_id_connect_and_read_the_bounty() {
    let kit = Testkit::connect().await.unwrap_or_else(|e| panic!("{e}"));
    let job = committed_job(&kit).await;
    let first = proxy::start(kit.url(), Misbehaviour::None).await.unwrap();
    let second = proxy::start(kit.url(), Misbehaviour::None).await.unwrap();
    let several = worker::chain_readiness::connect(&[first.url.clone(), second.url.clone()])
        .await
        .unwrap()
        .expect("a chain check with --rpc");
    let one = worker::chain_readiness::connect(&[kit.url().to_owned()])
        .await
        .unwrap()
        .expect("a chain check with --rpc");
    let through_several = several.check(&job).await;
    assert!(through_several.ok, "{through_several:?}");
    assert_eq!(through_several, one.check(&job).await);
    assert!(
        first.calls("eth_call") > 0,
        "the first endpoint served the reads"
    );
}

/// Two endpoints in front of the local chain, the second answering chain id 1 (a list on two
/// chains): the proxies, to keep, and their URLs.
async fn endpoints_on_two_chains() -> ([RpcProxy; 2], [String; 2]) {
    let kit = Testkit::connect().await.unwrap_or_else(|e| panic!("{e}"));
    let healthy = proxy::start(kit.url(), Misbehaviour::None).await.unwrap();
    let other = proxy::start(kit.url(), Misbehaviour::OtherChain)
        .await
        .unwrap();
    let urls = [healthy.url.clone(), other.url.clone()];
    ([healthy, other], urls)
}

/// A list on two chains (the second endpoint answers chain id 1): the signer refuses it at start
/// with each endpoint's answer; before, `connect` took it and the first endpoint's reads said
/// the record was ready while the signer, given the same list, would sign nothing.
#[tokio::test]
async fn endpoints_that_disagree_on_the_chain_id_are_refused_with_each_ones_answer() {
    let (_proxies, urls) = endpoints_on_two_chains().await;
    let err = worker::chain_readiness::connect(&urls)
        .await
        .map(|c| c.is_some())
        .expect_err("a list on two chains must be refused");
    let text = err.to_string();
    assert!(
        text.starts_with(
            "the --rpc endpoints disagree on the chain id: rpc 1: chain id 8453 at block "
        ),
        "{text}"
    );
    assert!(text.contains("; rpc 2: chain id 1 at block "), "{text}");
    assert!(!err.is_transient(), "a configuration to fix: {text}");
    assert!(!leaks_a_url(&text), "{text}");
}

/// One endpoint of several does not answer: as in the signer, it is asked once at start and
/// not used after, and the others answer. Before, every read asked it first.
#[tokio::test]
async fn an_endpoint_that_does_not_answer_is_left_out_as_the_signer_leaves_it_out() {
    let kit = Testkit::connect().await.unwrap_or_else(|e| panic!("{e}"));
    let job = committed_job(&kit).await;
    let (down, hits) = down_endpoint().await;
    let healthy = proxy::start(kit.url(), Misbehaviour::None).await.unwrap();
    let chain = worker::chain_readiness::connect(&[down, healthy.url.clone()])
        .await
        .unwrap()
        .expect("a chain check with --rpc");
    let at_start = hits.load(Ordering::SeqCst);
    let check = chain.check(&job).await;
    assert!(check.ok, "{check:?}");
    assert_eq!(
        hits.load(Ordering::SeqCst),
        at_start,
        "the endpoint that did not answer at start was asked again"
    );
}

/// No endpoint answers: an outage (the signer exits 5 and signs nothing), named by position.
#[tokio::test]
async fn no_endpoint_answering_is_an_outage_named_by_position() {
    let (first, _) = down_endpoint().await;
    let (second, _) = down_endpoint().await;
    let urls = [first, second];
    let err = worker::chain_readiness::connect(&urls)
        .await
        .map(|c| c.is_some())
        .expect_err("no endpoint answered");
    let text = err.to_string();
    assert!(
        text.starts_with("no --rpc endpoint answered: rpc 1: no answer ("),
        "{text}"
    );
    assert!(text.contains("; rpc 2: no answer ("), "{text}");
    assert!(err.is_transient(), "an outage, not a configuration: {text}");
    assert!(!leaks_a_url(&text), "{text}");
}

/// `worker <mode>` (feed or serve) over `rpc_urls`, the engine pointed at a socket that does
/// not exist (reaching it is another exit, so a refusal seen here came before any work): its
/// exit code and stderr.
async fn worker_over(mode: &str, rpc_urls: &[String]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let staging = crate::example_feed::private_staging(dir.path());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_worker"));
    cmd.args([
        mode,
        "--api",
        "http://127.0.0.1:1",
        "--verifier",
        "0x2222222222222222222222222222222222222222",
    ]);
    for url in rpc_urls {
        cmd.args(["--rpc", url]);
    }
    crate::example_feed::with_folders(&mut cmd, &dir.path().join("out"), dir.path(), &staging)
        .env("DOCKER_HOST", "unix:///nonexistent.sock");
    if mode == "serve" {
        cmd.arg("--state").arg(dir.path().join("state"));
    }
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `worker feed` and `worker serve` over a list on two chains exit 78 (a configuration to fix,
/// the signer's code) with the answers, before any work. Before, both went on to the engine.
#[tokio::test]
async fn feed_and_serve_refuse_an_rpc_list_on_two_chains_before_any_work() {
    let (_proxies, urls) = endpoints_on_two_chains().await;
    for mode in ["feed", "serve"] {
        let (code, stderr) = worker_over(mode, &urls).await;
        assert_eq!(code, Some(78), "{mode}: {stderr}");
        assert!(
            stderr.contains("rpc 1: chain id 8453 at block ")
                && stderr.contains("rpc 2: chain id 1 at block "),
            "{mode}: {stderr}"
        );
        assert!(!leaks_a_url(&stderr), "{mode}: {stderr}");
    }
}

/// No endpoint of the list answering is an outage before any work: `worker feed` exits 5 as the
/// signer does, `worker serve` 1 (a restart may help, as with an engine down at start).
#[tokio::test]
async fn feed_and_serve_stop_on_an_rpc_list_none_of_which_answers() {
    let (first, _) = down_endpoint().await;
    let (second, _) = down_endpoint().await;
    for (mode, want) in [("feed", 5), ("serve", 1)] {
        let (code, stderr) = worker_over(mode, &[first.clone(), second.clone()]).await;
        assert_eq!(code, Some(want), "{mode}: {stderr}");
        assert!(
            stderr.contains("--rpc: no --rpc endpoint answered: rpc 1: no answer ("),
            "{mode}: {stderr}"
        );
        assert!(!leaks_a_url(&stderr), "{mode}: {stderr}");
    }
}
