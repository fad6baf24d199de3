//! The bounded platform client against a real HTTP server on loopback.

// Test scaffolding outside #[test] fns (fakes, builders): failures should fail loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use platform_client::{ClientError, ClientLimits, PlatformClient};
use serde_json::json;
use test_feed::*;
use verifier_sdk::{Address, Network};

fn client() -> PlatformClient {
    PlatformClient::new(ClientLimits::default()).unwrap()
}

fn verifier() -> Address {
    VERIFIER.parse().unwrap()
}

#[tokio::test]
async fn fetches_the_job_array_and_exactly_one_job_by_id() {
    let server = TestServer::start().await;
    let a = verifier_sdk::fixtures::valid_job();
    let mut b = a.clone();
    b["job_id"] = json!("base-mainnet:0xother:1");
    server.route(&feed_path(VERIFIER), Reply::json(&json!([a, b])));
    let c = client();
    let jobs = c
        .fetch_jobs(&server.base, Network::BaseMainnet, verifier())
        .await
        .unwrap();
    assert_eq!(jobs, vec![a.clone(), b.clone()]);
    let id = a["job_id"].as_str().unwrap();
    let one = c
        .fetch_job(&server.base, Network::BaseMainnet, verifier(), id)
        .await
        .unwrap();
    assert_eq!(one, Some(a.clone()));
    let none = c
        .fetch_job(&server.base, Network::BaseMainnet, verifier(), "nope")
        .await
        .unwrap();
    assert_eq!(none, None);

    server.route(&feed_path(VERIFIER), Reply::json(&json!([a, b, a])));
    let err = c
        .fetch_job(&server.base, Network::BaseMainnet, verifier(), id)
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::DuplicateJob(_)), "{err}");
}

#[tokio::test]
async fn redirects_are_refused_not_followed() {
    let server = TestServer::start().await;
    server.route("/elsewhere", Reply::json(&json!([])));
    server.route(
        &feed_path(VERIFIER),
        Reply::redirect(&format!("{}/elsewhere", server.base)),
    );
    let err = client()
        .fetch_jobs(&server.base, Network::BaseMainnet, verifier())
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClientError::RedirectRefused { status: 302 }),
        "{err}"
    );
    assert!(err.to_string().contains("302"));
    assert_eq!(server.hits("/elsewhere"), 0);

    server.route(
        "/archive",
        Reply {
            status: 301,
            ..Reply::redirect(&format!("{}/elsewhere", server.base))
        },
    );
    let mut sink = Vec::new();
    let err = client()
        .download_to(
            &format!("{}/archive", server.base),
            &mut sink,
            1 << 20,
            &mut |_, _| {},
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClientError::RedirectRefused { status: 301 }),
        "{err}"
    );
    assert!(sink.is_empty());
    assert_eq!(server.hits("/elsewhere"), 0);
}

#[tokio::test]
async fn plain_http_to_a_non_loopback_host_is_refused_before_any_traffic() {
    // `.invalid` never resolves: reaching DNS would fail differently than the policy does.
    let c = client();
    for url in [
        "http://platform.invalid/v1",
        "http://user:hunter2@platform.invalid/v1?token=s3cret",
    ] {
        let err = c.get_json(url).await.unwrap_err();
        assert!(matches!(err, ClientError::NotHttps { .. }), "{err}");
        let text = err.to_string();
        assert!(
            !text.contains("hunter2") && !text.contains("s3cret"),
            "{text}"
        );
    }
    let err = c
        .fetch_jobs("http://platform.invalid", Network::BaseMainnet, verifier())
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::NotHttps { .. }), "{err}");
    let mut sink = Vec::new();
    let err = c
        .download_to(
            "http://codeload.invalid/a/b/tar.gz/c",
            &mut sink,
            10,
            &mut |_, _| {},
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::NotHttps { .. }), "{err}");
}

/// A JSON array of exactly `len` bytes.
fn json_of_len(len: usize) -> Vec<u8> {
    let mut body = b"[".to_vec();
    body.resize(len - 1, b' ');
    body.push(b']');
    body
}

#[tokio::test]
async fn json_over_the_size_cap_is_refused_with_or_without_content_length() {
    let server = TestServer::start().await;
    let limits = ClientLimits {
        max_json_bytes: 64 << 10,
        ..ClientLimits::default()
    };
    let c = PlatformClient::new(limits).unwrap();
    let cap = limits.max_json_bytes as usize;
    server.route("/at-cap", Reply::ok(json_of_len(cap)));
    assert_eq!(
        c.get_json(&format!("{}/at-cap", server.base))
            .await
            .unwrap(),
        json!([])
    );
    server.route("/over", Reply::ok(json_of_len(cap + 1)));
    server.route(
        "/over-unannounced",
        Reply {
            content_length: false,
            ..Reply::ok(json_of_len(cap + 1))
        },
    );
    for path in ["/over", "/over-unannounced"] {
        let err = c
            .get_json(&format!("{}{path}", server.base))
            .await
            .unwrap_err();
        assert!(matches!(err, ClientError::TooLarge { .. }), "{path}: {err}");
    }
    // The default cap holds too: 16 MiB + 1 byte is refused.
    let big = ClientLimits::default().max_json_bytes as usize + 1;
    server.route("/big", Reply::ok(json_of_len(big)));
    let err = client()
        .get_json(&format!("{}/big", server.base))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::TooLarge { .. }), "{err}");
}

#[tokio::test]
async fn json_deeper_than_the_cap_is_refused_before_parsing() {
    let server = TestServer::start().await;
    let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n)).into_bytes();
    server.route("/64", Reply::ok(nested(64)));
    server.route("/65", Reply::ok(nested(65)));
    // Far beyond serde_json's own recursion limit; must be refused by the scan.
    server.route("/100000", Reply::ok(nested(100_000)));
    let c = client();
    let v = c.get_json(&format!("{}/64", server.base)).await.unwrap();
    assert!(v.is_array());
    for path in ["/65", "/100000"] {
        let err = c
            .get_json(&format!("{}{path}", server.base))
            .await
            .unwrap_err();
        assert!(
            matches!(err, ClientError::TooDeep { limit: 64 }),
            "{path}: {err}"
        );
    }
}

#[tokio::test]
async fn non_array_feeds_and_error_statuses_are_reported() {
    let server = TestServer::start().await;
    server.route(&feed_path(VERIFIER), Reply::json(&json!({"jobs": []})));
    let c = client();
    let err = c
        .fetch_jobs(&server.base, Network::BaseMainnet, verifier())
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::InvalidJson(_)), "{err}");
    server.route(&feed_path(VERIFIER), Reply::ok(b"[1,".to_vec()));
    let err = c
        .fetch_jobs(&server.base, Network::BaseMainnet, verifier())
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::InvalidJson(_)), "{err}");
    server.route(&feed_path(VERIFIER), Reply::status(503));
    let err = c
        .fetch_jobs(&server.base, Network::BaseMainnet, verifier())
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClientError::HttpStatus { status: 503 }),
        "{err}"
    );
    assert!(err.is_transient());
}

#[tokio::test]
async fn a_stalled_server_hits_the_time_bound() {
    let server = TestServer::start().await;
    server.route(
        "/stall",
        Reply {
            stall: true,
            ..Reply::ok(vec![])
        },
    );
    let c = PlatformClient::new(ClientLimits {
        json_timeout: Duration::from_millis(300),
        ..ClientLimits::default()
    })
    .unwrap();
    let started = std::time::Instant::now();
    let err = c
        .get_json(&format!("{}/stall", server.base))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Timeout(_)), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn downloads_stream_up_to_the_cap_and_no_further() {
    let server = TestServer::start().await;
    let body: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
    server.route("/a.tar.gz", Reply::ok(body.clone()));
    server.route(
        "/unannounced.tar.gz",
        Reply {
            content_length: false,
            ..Reply::ok(body.clone())
        },
    );
    let c = client();
    let mut sink = Vec::new();
    let mut last = (0, None);
    let n = c
        .download_to(
            &format!("{}/a.tar.gz", server.base),
            &mut sink,
            body.len() as u64,
            &mut |done, total| last = (done, total),
        )
        .await
        .unwrap();
    assert_eq!(n, body.len() as u64);
    assert_eq!(sink, body);
    assert_eq!(last, (body.len() as u64, Some(body.len() as u64)));

    for path in ["/a.tar.gz", "/unannounced.tar.gz"] {
        let mut sink = Vec::new();
        let cap = body.len() as u64 - 1;
        let err = c
            .download_to(
                &format!("{}{path}", server.base),
                &mut sink,
                cap,
                &mut |_, _| {},
            )
            .await
            .unwrap_err();
        assert!(matches!(err, ClientError::TooLarge { .. }), "{path}: {err}");
        assert!(sink.len() as u64 <= cap, "wrote past the cap");
    }
}

#[tokio::test]
async fn a_feed_over_the_entry_cap_is_refused_whole() {
    use platform_client::MAX_FEED_JOBS;
    let server = TestServer::start().await;
    let feed = |n: usize| format!("[{}]", vec!["{}"; n].join(",")).into_bytes();
    let c = client();
    server.route(&feed_path(VERIFIER), Reply::ok(feed(MAX_FEED_JOBS)));
    let jobs = c
        .fetch_jobs(&server.base, Network::BaseMainnet, verifier())
        .await
        .unwrap();
    assert_eq!(jobs.len(), MAX_FEED_JOBS);
    server.route(&feed_path(VERIFIER), Reply::ok(feed(MAX_FEED_JOBS + 1)));
    let err = c
        .fetch_jobs(&server.base, Network::BaseMainnet, verifier())
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClientError::TooManyJobs { limit } if limit == MAX_FEED_JOBS),
        "{err}"
    );
    assert_eq!(err.kind(), "too_many_jobs");
    assert!(!err.is_transient());
    // The signer's and keeper's single-job lookup goes through the same cap.
    let err = c
        .fetch_job(&server.base, Network::BaseMainnet, verifier(), "x")
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::TooManyJobs { .. }), "{err}");
}
