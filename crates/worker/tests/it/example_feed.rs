//! The world `worker feed` and `worker serve` tests share: a local feed serving the bundled
//! example's benchmark archive, jobs for solver archives served beside it, and a temporary
//! folder for the runs' directories.

use std::path::PathBuf;

use serde_json::{Value, json};
use verifier_sdk::Sha256Digest;
use verifier_sdk::fixtures::{BENCHMARK_COMMIT, JobParams, job_value, sample_manifest};

use crate::feed_support::{Reply, TestServer, VERIFIER, codeload_dir, dir_digest, feed_path};
use crate::support;

/// The bundled example's tree `name` (`fixtures/example/<name>`).
pub fn example(name: &str) -> PathBuf {
    support::workspace_root()
        .join("fixtures/example")
        .join(name)
}

/// The commit of round `round`'s solver repository.
pub fn commit(round: u64) -> String {
    format!("{round:040x}")
}

/// A feed server with the example benchmark, and the directories one test's runs share.
pub struct ExampleFeed {
    pub server: TestServer,
    pub tmp: tempfile::TempDir,
    pub image: String,
    pub bench_digest: Sha256Digest,
}

impl ExampleFeed {
    /// Starts the feed, with `dirs` made in a fresh temporary folder.
    pub async fn new(dirs: &[&str]) -> Self {
        // Fail here, with the reason, rather than as an opaque exit code from the binary.
        support::executor().await;
        let server = TestServer::start().await;
        server.route(
            &format!("/bounty-org/benchmarks/tar.gz/{BENCHMARK_COMMIT}"),
            Reply::ok(codeload_dir(
                &format!("benchmarks-{BENCHMARK_COMMIT}"),
                "suites/parser/",
                &example("benchmark"),
            )),
        );
        let tmp = tempfile::tempdir().unwrap();
        for d in dirs {
            std::fs::create_dir(tmp.path().join(d)).unwrap();
        }
        Self {
            server,
            tmp,
            image: support::busybox(),
            bench_digest: dir_digest(&example("benchmark")),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// Serves `archive` as `solver-org/sol-<round>@<commit(round)>` and returns a job for it
    /// committed to `source_digest`, running `command` in busybox.
    pub fn job_running(
        &self,
        round: u64,
        archive: Vec<u8>,
        source_digest: Sha256Digest,
        command: &[&str],
    ) -> Value {
        let repo = format!("sol-{round}");
        self.server.route(
            &format!("/solver-org/{repo}/tar.gz/{}", commit(round)),
            Reply::ok(archive),
        );
        let mut manifest = sample_manifest();
        manifest["image"] = json!(self.image);
        manifest["command"] = json!(command);
        manifest["benchmark_digest"] = json!(self.bench_digest.to_string());
        job_value(&JobParams {
            round,
            artifact_reference: format!(
                "https://github.com/solver-org/{repo}/commit/{}",
                commit(round)
            ),
            source_snapshot_digest: source_digest.to_string(),
            manifest,
            ..JobParams::default()
        })
    }

    /// Lists `jobs` in the feed of [`VERIFIER`].
    pub fn serve_jobs(&self, jobs: &[&Value]) {
        self.server
            .route(&feed_path(VERIFIER), Reply::json(&json!(jobs)));
    }
}
