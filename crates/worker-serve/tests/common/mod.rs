//! What the serve tests over test doubles share (`serve_deadline.rs`, `serve_pull.rs`): the
//! job feed's jobs and benchmark archive on `test-feed`'s server, and the service's
//! configuration, so the two files differ only in what they test.

use std::num::NonZeroUsize;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use verifier_sdk::Network;
use verifier_sdk::fixtures::BENCHMARK_COMMIT;
use worker_jobs::feed::FeedConfig;
use worker_serve::ServeConfig;
use worker_serve::images::ImagePolicy;

use test_feed::*;

pub fn commit(round: u64) -> String {
    format!("{round:040x}")
}

/// A job of `round` whose window ends at `expires_at`, its source archive served; `edit`
/// changes the job before it is hashed again (a manifest's timeout, its image).
pub fn job_at(
    server: &TestServer,
    bench: verifier_sdk::Sha256Digest,
    round: u64,
    expires_at: u64,
    edit: impl FnOnce(&mut Value),
) -> Value {
    let repo = format!("sol-{round}");
    let files: &[(&str, &[u8])] = &[("a", b"1")];
    server.route(
        &format!("/solver-org/{repo}/tar.gz/{}", commit(round)),
        Reply::ok(codeload(&format!("{repo}-{}", commit(round)), files)),
    );
    let mut j = job(round, &repo, &commit(round), tree_digest(files), bench);
    j["verification_expires_at"] = json!(expires_at);
    edit(&mut j);
    verifier_sdk::fixtures::rehash(&mut j);
    j
}

/// Serves the benchmark archive every job here names and returns its tree digest.
pub fn serve_benchmark(server: &TestServer) -> verifier_sdk::Sha256Digest {
    let bench_files: &[(&str, &[u8])] = &[("t", b"t")];
    let nested: Vec<(String, &[u8])> = bench_files
        .iter()
        .map(|(p, d)| (format!("suites/parser/{p}"), *d))
        .collect();
    let nested: Vec<(&str, &[u8])> = nested.iter().map(|(p, d)| (p.as_str(), *d)).collect();
    server.route(
        &format!("/bounty-org/benchmarks/tar.gz/{BENCHMARK_COMMIT}"),
        Reply::ok(codeload(&format!("benchmarks-{BENCHMARK_COMMIT}"), &nested)),
    );
    tree_digest(bench_files)
}

/// The service's configuration under `dir`: `parallel` jobs at once, a 50 ms poll, `images`,
/// the SQLite ledger (`fleet: None`) or the fleet database at `fleet` with leases of `lease`.
pub fn serve_config(
    server: &TestServer,
    dir: &Path,
    fleet: Option<&test_postgres::TestDb>,
    parallel: usize,
    lease: Duration,
    images: ImagePolicy,
) -> ServeConfig {
    let mut feed_config = FeedConfig::new(
        &server.base,
        Network::BaseMainnet,
        vec![VERIFIER.parse().unwrap()],
        &dir.join("out"),
    );
    feed_config.archive_base = server.base.clone();
    feed_config.work_dir = dir.join("work");
    feed_config.progress = false;
    ServeConfig {
        feed: feed_config,
        state_dir: dir.join("state"),
        poll_interval: Duration::from_millis(50),
        parallel: NonZeroUsize::new(parallel),
        metrics_listen: None,
        images,
        ledger: fleet.map_or_else(
            || worker_serve::store::LedgerLocation::Sqlite(dir.join("state")),
            |db| worker_serve::store::LedgerLocation::parse(&db.url).unwrap(),
        ),
        fleet: worker_serve::store::FleetOptions {
            host: "test-host".into(),
            lease,
            password_file: fleet.map(test_postgres::TestDb::password_file),
        },
    }
}
