//! The world `worker feed` and `worker serve` tests share: a local feed serving the bundled
//! example's benchmark archive, jobs for solver archives served beside it, and a temporary
//! folder for the runs' directories.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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
        self.job_in_image(round, archive, source_digest, command, &self.image)
    }

    /// As [`Self::job_running`], in the digest-pinned `image` instead of busybox.
    pub fn job_in_image(
        &self,
        round: u64,
        archive: Vec<u8>,
        source_digest: Sha256Digest,
        command: &[&str],
        image: &str,
    ) -> Value {
        let repo = format!("sol-{round}");
        self.server.route(
            &format!("/solver-org/{repo}/tar.gz/{}", commit(round)),
            Reply::ok(archive),
        );
        let mut manifest = sample_manifest();
        manifest["image"] = json!(image);
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

impl ExampleFeed {
    /// `worker serve` on this feed and its directories, with `extra` flags; stdout is
    /// discarded and stderr piped.
    pub fn serve_command(&self, extra: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_worker"));
        cmd.arg("serve")
            .arg("--api")
            .arg(&self.server.base)
            .args(["--verifier", VERIFIER])
            .arg("--state")
            .arg(self.path("state"))
            .arg("--archive-base")
            .arg(&self.server.base)
            .args(["--poll-interval", "1"])
            .args(extra);
        with_folders(
            &mut cmd,
            &self.path("out"),
            &self.path("work"),
            &self.path("staging"),
        )
        .env("WORKER_LOG", "info")
        .env_remove("GITHUB_SHA")
        .env_remove("REGRESSION_SANDBOX_STAGING_ROOT")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        cmd
    }
}

/// A fresh `staging` folder in `dir`, private to this user as a staging root must be.
pub fn private_staging(dir: &Path) -> PathBuf {
    let staging = dir.join("staging");
    std::fs::create_dir(&staging).unwrap();
    std::fs::set_permissions(
        &staging,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    staging
}

/// Adds `--out`, `--work-dir` and `--staging-root`: the folders of every mode that runs jobs.
pub fn with_folders<'c>(
    cmd: &'c mut Command,
    out: &Path,
    work: &Path,
    staging: &Path,
) -> &'c mut Command {
    cmd.arg("--out")
        .arg(out)
        .arg("--work-dir")
        .arg(work)
        .arg("--staging-root")
        .arg(staging)
}

/// Adds `feed --quiet` for [`VERIFIER`] on base-mainnet, with the feed at `api` also the
/// archive host, into these folders; the staging root is only `staging`, never one the
/// environment names.
pub fn feed_args<'c>(
    cmd: &'c mut Command,
    api: &str,
    out: &Path,
    work: &Path,
    staging: &Path,
) -> &'c mut Command {
    cmd.args(["feed", "--quiet", "--api", api])
        .args(["--network", "base-mainnet", "--verifier", VERIFIER])
        .args(["--archive-base", api]);
    with_folders(cmd, out, work, staging).env_remove("REGRESSION_SANDBOX_STAGING_ROOT")
}

/// `worker ledger --json` of the service state in `state`.
pub fn ledger_of(state: &Path) -> Value {
    let out = support::stdout_of(
        Command::new(env!("CARGO_BIN_EXE_worker"))
            .args(["ledger", "--json", "--state"])
            .arg(state),
    );
    serde_json::from_str(&out).unwrap()
}

/// The containers (every state with `all`, else the running ones) whose owner label names the
/// worker process `pid`.
pub fn containers_of(pid: u32, all: bool) -> Vec<String> {
    let mut ps = Command::new("docker");
    ps.arg("ps");
    if all {
        ps.arg("-a");
    }
    let out = ps
        .args(["--no-trunc", "--filter"])
        .arg(format!("label={}=1", worker_sandbox::LABEL_VERIFIER))
        .args([
            "--format",
            "{{.ID}} {{.Label \"dev.agent-bounties.owner\"}}",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "docker ps failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let (id, owner) = line.split_once(' ')?;
            (owner.split('/').nth(2) == Some(&pid.to_string())).then(|| id.to_owned())
        })
        .collect()
}
