//! #43 item 2: the keeper settles through several `--rpc` endpoints when some of them refuse
//! (HTTP 403), rate-limit (-32005), lag or swallow the transaction, and refuses at start a
//! list whose endpoints disagree on the chain id. Every endpoint is a misbehaving proxy
//! (`chain_testkit::proxy`) in front of the real local Hardhat node.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use alloy::providers::Provider;
use alloy::rpc::types::Filter;
use bounty_chain::{FailoverPolicy, RpcEndpoints};
use chain_testkit::proxy::{self, Misbehaviour};
use chain_testkit::status;
use common::{Scenario, only_job};
use keeper::report::JobStatus;
use verifier_sdk::settle::decode_bounty_settled;

fn endpoints(urls: &[&proxy::RpcProxy]) -> RpcEndpoints {
    RpcEndpoints {
        urls: urls.iter().map(|p| p.url.clone()).collect(),
        policy: FailoverPolicy {
            max_lag_blocks: 2,
            backoff: Duration::from_millis(50),
            passes: 2,
        },
    }
}

/// Every `BountySettled` the bounty ever emitted.
async fn settled_events(sc: &Scenario) -> usize {
    let logs = sc
        .kit
        .provider()
        .get_logs(&Filter::new().address(sc.bounty.address()).from_block(0))
        .await
        .unwrap();
    logs.iter()
        .filter(|l| decode_bounty_settled(l.topics(), &l.data().data).is_ok())
        .count()
}

/// (c) of #43: the endpoints in order are one refusing with 403, one rate-limiting with
/// -32005, one swallowing the transaction, one 3 blocks behind (max lag 2) and one healthy.
/// With the first alone (one `--rpc`, as before #43) nothing is settled; with the list, the
/// bounty is paid with exactly one `BountySettled` and one nonce used, the same signed
/// transaction having gone to the swallowing and the healthy endpoint and never to the lagging
/// one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keeper_settles_once_through_refusing_rate_limiting_swallowing_and_lagging_endpoints() {
    let sc = Scenario::new(&[1], 0).await;
    sc.attest_all();
    let node = sc.kit.url().to_owned();
    let forbidden = proxy::start(&node, Misbehaviour::Forbidden).await.unwrap();
    let limited = proxy::start(&node, Misbehaviour::RateLimited)
        .await
        .unwrap();
    let swallowing = proxy::start(&node, Misbehaviour::Swallowing).await.unwrap();
    let lagging = proxy::start(&node, Misbehaviour::Lagging(3)).await.unwrap();
    let healthy = proxy::start(&node, Misbehaviour::None).await.unwrap();
    let nonce_before = sc.keeper_nonce().await;

    let mut cfg = sc.config();
    cfg.rpc = forbidden.url.clone().into();
    let report = sc.run_with(&cfg).await;
    assert_ne!(only_job(&report).status, JobStatus::Paid, "{report:#?}");
    assert_eq!(sc.status().await, status::SUBMITTED);
    assert_eq!(sc.keeper_nonce().await, nonce_before);

    cfg.rpc = endpoints(&[&forbidden, &limited, &swallowing, &lagging, &healthy]);
    let report = sc.run_with(&cfg).await;
    let job = only_job(&report);
    assert_eq!(job.status, JobStatus::Paid, "{job:#?}");
    assert_eq!(report.exit_code, 0);
    assert_eq!(sc.status().await, status::SETTLED);
    assert_eq!(settled_events(&sc).await, 1);
    assert_eq!(sc.keeper_nonce().await, nonce_before + 1);
    assert!(swallowing.raw_transactions() >= 1);
    assert!(healthy.raw_transactions() >= 1);
    assert_eq!(lagging.raw_transactions(), 0);
}

/// Bad input of #43: endpoints that disagree on the chain id are refused at start (exit 78)
/// with each endpoint's answer; nothing is read or sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_disagreeing_on_the_chain_id_are_refused_with_each_answer() {
    let sc = Scenario::new(&[1], 0).await;
    sc.attest_all();
    let node = sc.kit.url().to_owned();
    let healthy = proxy::start(&node, Misbehaviour::None).await.unwrap();
    let other = proxy::start(&node, Misbehaviour::OtherChain).await.unwrap();
    let nonce_before = sc.keeper_nonce().await;
    let mut cfg = sc.config();
    cfg.rpc = endpoints(&[&healthy, &other]);
    let err = keeper::run(&cfg).await.unwrap_err();
    assert_eq!(err.exit_code(), keeper::exit::ExitCode::Config, "{err}");
    let text = err.to_string();
    assert!(
        text.contains("disagree on the chain id")
            && text.contains("rpc 1: chain id 8453")
            && text.contains("rpc 2: chain id 1 "),
        "{text}"
    );
    assert!(!text.contains("127.0.0.1"), "a URL in the error: {text}");
    assert_eq!(healthy.raw_transactions() + other.raw_transactions(), 0);
    assert_eq!(sc.keeper_nonce().await, nonce_before);
    assert_eq!(sc.status().await, status::SUBMITTED);
}
