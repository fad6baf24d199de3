//! The feed runner end to end against a real HTTP server on loopback serving a job feed built
//! with the sdk fixtures and real tar.gz archives.
//!
//! The executor here is a TEST DOUBLE: it digests the extracted trees (as the real staging
//! does) and fabricates a verdict without running anything. Its evidence record is labelled
//! with its own executor (`test-double`), not the Docker executor's, so a signer refuses every
//! candidate it yields.
//!
//! How a batch ended is asserted as its [`BatchStatus`]; the worker binary's mapping of that
//! status to an exit code is the binary's own and is tested there (`crates/worker/src/exit.rs`).

// Test scaffolding outside #[test] fns (fakes, builders): failures should fail loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test reads as one scenario from setup to assertions; splitting it to a line count hides
// the story.
#![allow(clippy::too_many_lines)]

mod common;

use std::collections::{HashMap, HashSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use common::{id, row, row_ended};
use serde_json::{Value, json};
use test_feed::*;
use verifier_sdk::fixtures::{BENCHMARK_COMMIT, JobParams};
use verifier_sdk::{
    Address, Candidate, CandidateManifest, ExecutionFacts, Network, NoVerdictOutcome,
    NoVerdictReason, Outcome, RunOutput, Sha256Digest, ValidatedJob, candidate_file_name,
    validate_job, validate_outcome,
};
use worker_jobs::feed::{
    BatchStatus, ExecutedJob, FeedConfig, FeedError, FeedReport, JobExecutor, JobFailure,
    JobStatus, run_feed,
};

/// TEST DOUBLE of the staging + sandbox executor (see the module doc).
#[derive(Default)]
struct FakeExecutor {
    calls: Mutex<HashMap<String, usize>>,
    /// Jobs whose first run ends without a verdict (timeout).
    no_verdict_once: HashSet<String>,
    /// Exit code per job (default 0 = passed).
    exit_codes: HashMap<String, i64>,
    /// Every call fails as if the Docker Engine were down.
    runtime_down: bool,
    /// Jobs whose run panics inside the executor.
    panic_on: HashSet<String>,
    /// Report a benchmark digest other than the staged one (a buggy executor).
    wrong_benchmark: bool,
}

impl FakeExecutor {
    fn calls(&self, job_id: &str) -> usize {
        self.calls.lock().unwrap().get(job_id).copied().unwrap_or(0)
    }
}

fn digest(c: char) -> Sha256Digest {
    format!("sha256:{}", c.to_string().repeat(64))
        .parse()
        .unwrap()
}

#[async_trait::async_trait]
impl JobExecutor for FakeExecutor {
    async fn execute(
        &self,
        job: &ValidatedJob,
        source_dir: &Path,
        benchmark_dir: &Path,
    ) -> Result<ExecutedJob, JobFailure> {
        let call = {
            let mut calls = self.calls.lock().unwrap();
            let n = calls.entry(job.job_id().to_owned()).or_default();
            *n += 1;
            *n
        };
        if self.panic_on.contains(job.job_id()) {
            panic!("test double panics on purpose");
        }
        if self.runtime_down {
            return Err(JobFailure::RuntimeUnavailable(
                "engine socket refused".into(),
            ));
        }
        let source_digest = dir_digest(source_dir);
        let benchmark_digest = dir_digest(benchmark_dir);
        let reported_benchmark = if self.wrong_benchmark {
            digest('f')
        } else {
            benchmark_digest
        };
        let done = |output| ExecutedJob {
            output,
            evidence: Some(worker_jobs::run::SealedEvidence::seal(double_evidence(job)).unwrap()),
            source_digest,
            benchmark_digest: reported_benchmark,
        };
        if source_digest != job.source_snapshot_digest()
            || benchmark_digest != job.manifest().benchmark_digest()
        {
            return Ok(done(RunOutput::NoVerdict(NoVerdictOutcome::new(
                NoVerdictReason::InputMismatch,
                "staged digest differs from the job's",
            ))));
        }
        if call == 1 && self.no_verdict_once.contains(job.job_id()) {
            return Ok(done(RunOutput::NoVerdict(NoVerdictOutcome::new(
                NoVerdictReason::Timeout,
                "command timed out",
            ))));
        }
        let facts = ExecutionFacts {
            exit_code: self.exit_codes.get(job.job_id()).copied().unwrap_or(0),
            stdout_sha256: digest('1'),
            stderr_sha256: digest('2'),
            stdout_bytes: 3,
            stderr_bytes: 4,
        };
        let outcome = Outcome::for_job(job, facts);
        Ok(done(RunOutput::Verdict(outcome)))
    }
}

const BENCH_FILES: &[(&str, &[u8])] = &[("tests.rs", b"#[test] fn t() {}"), ("data/x", b"1")];

struct World {
    server: TestServer,
    _tmp: tempfile::TempDir,
    root: PathBuf,
    bench_digest: Sha256Digest,
}

impl World {
    async fn new() -> Self {
        let server = TestServer::start().await;
        let mut files = vec![("README.md", b"bench" as &[u8])];
        let nested: Vec<(String, &[u8])> = BENCH_FILES
            .iter()
            .map(|(p, d)| (format!("suites/parser/{p}"), *d))
            .collect();
        files.extend(nested.iter().map(|(p, d)| (p.as_str(), *d)));
        server.route(
            &format!("/bounty-org/benchmarks/tar.gz/{BENCHMARK_COMMIT}"),
            Reply::ok(codeload(&format!("benchmarks-{BENCHMARK_COMMIT}"), &files)),
        );
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        std::fs::create_dir(root.join("work")).unwrap();
        Self {
            server,
            _tmp: tmp,
            root,
            bench_digest: tree_digest(BENCH_FILES),
        }
    }

    fn commit(round: u64) -> String {
        format!("{round:040x}")
    }

    fn archive_path(repo: &str, round: u64) -> String {
        format!("/solver-org/{repo}/tar.gz/{}", Self::commit(round))
    }

    /// A job whose source archive (served at its codeload URL) holds `files` and whose
    /// committed source digest is theirs.
    fn job_with_source(&self, round: u64, files: &[(&str, &[u8])]) -> Value {
        let repo = format!("sol-{round}");
        let top = format!("{repo}-{}", Self::commit(round));
        self.server.route(
            &Self::archive_path(&repo, round),
            Reply::ok(codeload(&top, files)),
        );
        job(
            round,
            &repo,
            &Self::commit(round),
            tree_digest(files),
            self.bench_digest,
        )
    }

    /// A job whose source archive is `archive` (committed digest arbitrary).
    fn job_with_archive(&self, round: u64, archive: Vec<u8>) -> Value {
        let repo = format!("sol-{round}");
        self.server
            .route(&Self::archive_path(&repo, round), Reply::ok(archive));
        job(
            round,
            &repo,
            &Self::commit(round),
            digest('c'),
            self.bench_digest,
        )
    }

    /// A job of `round` (source `a` = `1`) whose window ends at `expires_at`; `edit` changes it
    /// before it is hashed again.
    fn job_expiring(&self, round: u64, expires_at: u64, edit: impl FnOnce(&mut Value)) -> Value {
        let mut j = self.job_with_source(round, &[("a", b"1")]);
        j["verification_expires_at"] = json!(expires_at);
        edit(&mut j);
        verifier_sdk::fixtures::rehash(&mut j);
        j
    }

    /// [`Self::job_expiring`] with a runner manifest timeout of `timeout` s, checked valid as
    /// the feed's selection will check it.
    fn job_with_timeout(&self, round: u64, timeout: u64, expires_at: u64) -> Value {
        let j = self.job_expiring(round, expires_at, |j| {
            j["terms"]["document"]["benchmark"]["runner_manifest"]["timeout_seconds"] =
                json!(timeout);
        });
        validate_job(&j, verifier_sdk::fixtures::NOW).unwrap();
        j
    }

    fn serve_feed(&self, verifier: &str, jobs: &[&Value]) {
        self.server
            .route(&feed_path(verifier), Reply::json(&json!(jobs)));
    }

    fn config(&self, out: &str) -> FeedConfig {
        let mut c = FeedConfig::new(
            &self.server.base,
            Network::BaseMainnet,
            vec![VERIFIER.parse().unwrap()],
            &self.root.join(out),
        );
        c.archive_base = self.server.base.clone();
        c.work_dir = self.root.join("work");
        c.cache_dir = Some(self.root.join("cache"));
        c.runner_revision = "local".into();
        c
    }

    /// Runs one batch of `exec` into `out`, on [`Self::config`] as `edit` changes it.
    async fn run(
        &self,
        out: &str,
        exec: &impl JobExecutor,
        edit: impl FnOnce(&mut FeedConfig),
    ) -> FeedReport {
        let mut config = self.config(out);
        edit(&mut config);
        run_feed(&config, exec).await.unwrap()
    }
}

/// A clock standing at `now` (unix seconds), for [`FeedConfig::clock`].
fn clock_at(now: u64) -> std::sync::Arc<worker_store::clock::ManualClock> {
    std::sync::Arc::new(worker_store::clock::ManualClock::new(
        i64::try_from(now).unwrap() * 1000,
    ))
}

/// Reads the manifest and every candidate with the sdk's strict readers and re-validates
/// them; returns the job ids listed.
fn read_candidates(out: &Path) -> Vec<String> {
    let raw: Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    let manifest = CandidateManifest::from_value(&raw).unwrap();
    assert_eq!(manifest.network, "base-mainnet");
    for entry in &manifest.candidates {
        let raw: Value =
            serde_json::from_slice(&std::fs::read(out.join(&entry.file)).unwrap()).unwrap();
        let c = Candidate::from_value(&raw).unwrap();
        let job = validate_job(&c.job, verifier_sdk::fixtures::NOW).unwrap();
        assert_eq!(job.job_id(), entry.job_id);
        validate_outcome(&c.outcome, &job).unwrap();
        assert_eq!(c.runner_revision, "local");
        assert_eq!(c.evidence.unwrap()["executor"], TEST_DOUBLE);
    }
    manifest.candidates.into_iter().map(|c| c.job_id).collect()
}

/// A gzip stream of a tar holding `top/src/a` and a `size`-byte file outside `src`, built in
/// chunks so the test never holds the bomb uncompressed.
fn bomb(top: &str, size: u64) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(
        &tar_bytes(&[dir(&format!("{top}/")), file(&format!("{top}/src/a"), b"a")])[..1536],
    )
    .unwrap();
    let mut h = tar::Header::new_gnu();
    h.set_path(format!("{top}/junk/zeros")).unwrap();
    h.set_entry_type(tar::EntryType::Regular);
    write_zeros_entry(&mut gz, h, size);
    gz.write_all(&[0u8; 1024]).unwrap();
    gz.finish().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_runs_the_valid_jobs_and_isolates_every_bad_one() {
    let w = World::new().await;
    let pass = w.job_with_source(
        1,
        &[("src/lib.rs", b"pub fn f() {}"), ("Cargo.toml", b"[p]")],
    );
    let fail = w.job_with_source(2, &[("lib.rs", b"broken")]);
    let t = |r: u64| format!("sol-{r}-{}", World::commit(r));
    let traversal = w.job_with_archive(
        3,
        tar_gz(&[
            dir(&format!("{}/", t(3))),
            file(&format!("{}/../x", t(3)), b"evil"),
        ]),
    );
    let absolute = w.job_with_archive(4, tar_gz(&[file("/tmp/feed-test-absolute", b"evil")]));
    let symlink = w.job_with_archive(
        5,
        tar_gz(&[
            dir(&format!("{}/", t(5))),
            Entry::Symlink {
                path: format!("{}/l", t(5)),
                target: "/etc".into(),
            },
        ]),
    );
    let hardlink = w.job_with_archive(
        6,
        tar_gz(&[
            dir(&format!("{}/", t(6))),
            file(&format!("{}/a", t(6)), b"a"),
            Entry::HardLink {
                path: format!("{}/h", t(6)),
                target: format!("{}/a", t(6)),
            },
        ]),
    );
    // Over the 512 MiB source cap, in files outside the selected subdirectory so only the
    // uncompressed cap (not the manifest's tree cap) can stop it.
    let bomb_job = {
        let repo = "sol-7";
        w.server.route(
            &World::archive_path(repo, 7),
            Reply::ok(bomb(&t(7), (512 << 20) + 1)),
        );
        let mut p = JobParams {
            round: 7,
            artifact_reference: format!(
                "https://github.com/solver-org/{repo}/commit/{}",
                World::commit(7)
            ),
            source_subdirectory: Some("src".into()),
            ..JobParams::default()
        };
        p.manifest["benchmark_digest"] = json!(w.bench_digest.to_string());
        verifier_sdk::fixtures::job_value(&p)
    };
    let duplicate = w.job_with_archive(
        8,
        tar_gz(&[
            dir(&format!("{}/", t(8))),
            file(&format!("{}/a", t(8)), b"1"),
            file(&format!("{}/a", t(8)), b"2"),
        ]),
    );
    let two_tops = w.job_with_archive(
        9,
        tar_gz(&[
            dir("one/"),
            file("one/a", b"1"),
            dir("two/"),
            file("two/b", b"2"),
        ]),
    );
    let mismatch = {
        let mut j = w.job_with_source(10, &[("lib.rs", b"real")]);
        j["submission_evidence"]["evidence"]["source_snapshot_digest"] =
            json!(digest('d').to_string());
        verifier_sdk::fixtures::rehash(&mut j);
        j
    };
    let expired = {
        let mut j = w.job_with_source(11, &[("lib.rs", b"late")]);
        j["verification_expires_at"] = json!(1_000_000_000u64);
        verifier_sdk::fixtures::rehash(&mut j);
        j
    };
    let other_set = verifier_sdk::fixtures::job_value(&JobParams {
        round: 12,
        verifiers: vec![VERIFIER.into(), OTHER_VERIFIER.into()],
        ..JobParams::default()
    });
    let all = [
        &pass, &fail, &traversal, &absolute, &symlink, &hardlink, &bomb_job, &duplicate, &two_tops,
        &mismatch, &expired, &other_set,
    ];
    w.serve_feed(VERIFIER, &all);
    let exec = FakeExecutor {
        exit_codes: [(id(&fail), 1)].into(),
        ..FakeExecutor::default()
    };
    let report = run_feed(&w.config("out"), &exec).await.unwrap();
    eprintln!("{}", report.human_summary());

    assert_eq!(row(&report, &pass).status, JobStatus::CompletedPassed);
    assert_eq!(row(&report, &fail).status, JobStatus::CompletedFailed);
    for bad in [
        &traversal, &absolute, &symlink, &hardlink, &bomb_job, &duplicate, &two_tops,
    ] {
        let r = row(&report, bad);
        assert_eq!(r.status, JobStatus::Rejected, "{r:?}");
        assert_eq!(r.reason_code.as_deref(), Some("archive_rejected"), "{r:?}");
        assert!(r.candidate_file.is_none());
        assert_eq!(exec.calls(&id(bad)), 0);
    }
    let reason = |j: &Value| row(&report, j).reason.clone().unwrap();
    assert!(reason(&traversal).contains("not a normalized relative path"));
    assert!(reason(&absolute).contains("absolute"));
    assert!(reason(&symlink).contains("link"));
    assert!(reason(&hardlink).contains("link"));
    assert!(
        reason(&bomb_job).contains("uncompressed"),
        "{}",
        reason(&bomb_job)
    );
    assert!(reason(&duplicate).contains("more than once"));
    assert!(reason(&two_tops).contains("more than one top-level"));
    assert!(!Path::new("/tmp/feed-test-absolute").exists());

    let r = row(&report, &mismatch);
    assert_eq!(r.status, JobStatus::NoVerdict);
    assert_eq!(r.reason_code.as_deref(), Some("input_mismatch"));
    row_ended(&report, &expired, JobStatus::Rejected, Some("expired"));
    assert_eq!(exec.calls(&id(&expired)), 0);
    row_ended(
        &report,
        &other_set,
        JobStatus::Skipped,
        Some("other_verifier_set"),
    );
    assert_eq!(report.jobs.len(), all.len());

    let out = w.root.join("out");
    let mut listed = read_candidates(&out);
    listed.sort();
    let mut want = vec![id(&pass), id(&fail)];
    want.sort();
    assert_eq!(listed, want);
    assert_eq!(
        row(&report, &pass).candidate_file.as_deref(),
        Some(candidate_file_name(&id(&pass)).as_str())
    );
    // Output holds exactly the manifest, the two candidates and their in-toto statements,
    // besides one readiness record per job that ran (issue #43 item 3).
    let (readiness, rest): (Vec<_>, Vec<_>) = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .partition(|n| n.starts_with("readiness-"));
    assert_eq!(rest.len(), 5, "{rest:?}");
    assert!(readiness.contains(&verifier_sdk::readiness::readiness_file_name(&id(&pass))));
    for job in [&pass, &fail] {
        let name = worker_jobs::intoto::statement_file_name(&candidate_file_name(&id(job)));
        assert!(
            out.join(name).is_file(),
            "no in-toto statement for {}",
            id(job)
        );
    }
    // Every download and extraction was cleaned up.
    assert_eq!(std::fs::read_dir(w.root.join("work")).unwrap().count(), 0);
    // The no-verdict job makes the batch retryable.
    assert_eq!(report.status(), BatchStatus::Retry);
    let json = report.to_json();
    assert_eq!(
        json["schema_version"],
        "agent-bounties/regression-feed-report-v1"
    );
}

#[tokio::test]
async fn a_second_run_reuses_completed_verdicts_and_retries_no_verdict() {
    let w = World::new().await;
    let done = w.job_with_source(1, &[("lib.rs", b"ok")]);
    let flaky = w.job_with_source(2, &[("lib.rs", b"slow")]);
    w.serve_feed(VERIFIER, &[&done, &flaky]);
    let exec = FakeExecutor {
        no_verdict_once: [id(&flaky)].into(),
        ..FakeExecutor::default()
    };
    let first = w.run("run1", &exec, |c| c.progress = false).await;
    assert_eq!(row(&first, &done).status, JobStatus::CompletedPassed);
    assert!(!row(&first, &done).reused_from_cache);
    assert_eq!(row(&first, &flaky).status, JobStatus::NoVerdict);
    assert_eq!(row(&first, &flaky).reason_code.as_deref(), Some("timeout"));
    assert_eq!(first.status(), BatchStatus::Retry);
    assert_eq!(read_candidates(&w.root.join("run1")), vec![id(&done)]);
    let done_archive = World::archive_path("sol-1", 1);
    assert_eq!(w.server.hits(&done_archive), 1);

    let second = run_feed(&w.config("run2"), &exec).await.unwrap();
    let r = row(&second, &done);
    assert_eq!(r.status, JobStatus::CompletedPassed);
    assert!(r.reused_from_cache);
    assert_eq!(exec.calls(&id(&done)), 1, "cached job was executed again");
    assert_eq!(
        w.server.hits(&done_archive),
        1,
        "cached job was downloaded again"
    );
    let r = row(&second, &flaky);
    assert_eq!(r.status, JobStatus::CompletedPassed);
    assert!(!r.reused_from_cache);
    assert_eq!(exec.calls(&id(&flaky)), 2);
    assert_eq!(second.status(), BatchStatus::Complete);
    let mut listed = read_candidates(&w.root.join("run2"));
    listed.sort();
    let mut want = vec![id(&done), id(&flaky)];
    want.sort();
    assert_eq!(listed, want);
    // The reused candidate is byte-identical to the fresh one.
    let file = candidate_file_name(&id(&done));
    assert_eq!(
        std::fs::read(w.root.join("run1").join(&file)).unwrap(),
        std::fs::read(w.root.join("run2").join(&file)).unwrap()
    );

    // A different worker version is a different run identity: nothing is reused.
    let third = w
        .run("run3", &exec, |c| c.worker_version = "999.0.0".into())
        .await;
    assert!(!row(&third, &done).reused_from_cache);
    assert_eq!(exec.calls(&id(&done)), 2);
}

#[tokio::test]
async fn two_verifier_feeds_are_merged_and_each_job_runs_once() {
    let w = World::new().await;
    let params = |round: u64, files: &[(&str, &[u8])]| {
        let mut j = w.job_with_source(round, files);
        j["eligible_verifiers"] = json!([OTHER_VERIFIER, VERIFIER]);
        j["threshold"] = json!(2);
        j["terms"]["document"]["verification_policy"]["verifiers"] =
            json!([OTHER_VERIFIER, VERIFIER]);
        j["terms"]["document"]["verification_policy"]["threshold"] = json!(2);
        verifier_sdk::fixtures::rehash(&mut j);
        j
    };
    let a = params(1, &[("a", b"1")]);
    let b = params(2, &[("b", b"2")]);
    w.serve_feed(VERIFIER, &[&a, &b]);
    w.serve_feed(OTHER_VERIFIER, &[&b, &a]);
    let exec = FakeExecutor::default();
    let report = w
        .run("out", &exec, |c| {
            c.verifiers = vec![VERIFIER.parse().unwrap(), OTHER_VERIFIER.parse().unwrap()]
        })
        .await;
    assert_eq!(report.jobs.len(), 2, "{:#?}", report.jobs);
    assert_eq!(report.count(JobStatus::CompletedPassed), 2);
    assert_eq!((exec.calls(&id(&a)), exec.calls(&id(&b))), (1, 1));
    assert_eq!(read_candidates(&w.root.join("out")).len(), 2);
    assert_eq!(report.status(), BatchStatus::Complete);
}

/// One injected clock: selection reads the configured clock, not the system's. A job that is
/// live by the system clock but whose window has closed on the configured clock is refused as
/// expired and never reaches the executor; the same job on a clock before its window ends runs.
#[tokio::test]
async fn a_job_past_its_window_on_the_configured_clock_is_not_run() {
    let w = World::new().await;
    let job = w.job_with_source(1, &[("a", b"1")]);
    w.serve_feed(VERIFIER, &[&job]);
    let exec = FakeExecutor::default();
    let end = verifier_sdk::fixtures::EXPIRES_AT;
    let report = w.run("late", &exec, |c| c.clock = clock_at(end + 1)).await;
    row_ended(&report, &job, JobStatus::Rejected, Some("expired"));
    assert_eq!(exec.calls(&id(&job)), 0);
    // An hour before the end: time enough to settle (#43: less is `window_too_short`).
    let report = w
        .run("early", &exec, |c| c.clock = clock_at(end - 3600))
        .await;
    assert_eq!(row(&report, &job).status, JobStatus::CompletedPassed);
    assert_eq!(exec.calls(&id(&job)), 1);
}

/// #43 item 1 (b): a job with 150 s left and a 600 s timeout cannot settle before its window
/// ends, so it is not started: its row is `window_too_short` with the figures, and the job
/// beside it with time enough runs. Before: the executor ran it (completed_passed).
#[tokio::test]
async fn a_job_that_cannot_settle_before_its_window_ends_is_window_too_short() {
    let w = World::new().await;
    let end = verifier_sdk::fixtures::EXPIRES_AT;
    let short = w.job_with_timeout(1, 600, end);
    let fine = w.job_with_timeout(2, 600, end + 3600);
    w.serve_feed(VERIFIER, &[&short, &fine]);
    let exec = FakeExecutor::default();
    let report = w.run("out", &exec, |c| c.clock = clock_at(end - 150)).await;
    common::assert_window_too_short(&report, &short, &["ends in 150 s", "timeout_seconds 600"]);
    assert_eq!(exec.calls(&id(&short)), 0);
    assert_eq!(row(&report, &fine).status, JobStatus::CompletedPassed);
    assert_eq!(exec.calls(&id(&fine)), 1);
}

/// TEST DOUBLE around [`FakeExecutor`]: records the order of the jobs it runs and, during
/// the first run, lets the test change what the feed lists.
struct Appearing {
    inner: FakeExecutor,
    order: Mutex<Vec<String>>,
    during_first: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl Appearing {
    /// #43's scenario: the feed lists A (whose window ends last) and B; C, whose window ends
    /// first, is listed once the first run started. Returns A, B, C and the executor.
    fn c_during_the_first_of_a_and_b(w: &World) -> ([Value; 3], Self) {
        let end = verifier_sdk::fixtures::EXPIRES_AT;
        let at = |round: u64, expires_at: u64| w.job_expiring(round, expires_at, |_| {});
        let (a, b, c) = (at(1, end + 5000), at(2, end + 3000), at(3, end + 2000));
        w.serve_feed(VERIFIER, &[&a, &b]);
        let exec = Self::relisting(w, vec![a.clone(), b.clone(), c.clone()]);
        ([a, b, c], exec)
    }

    /// Runs as [`FakeExecutor::default`]; during the first run, `w`'s feed starts listing
    /// `listed`.
    fn relisting(w: &World, listed: Vec<Value>) -> Self {
        let server = w.server.clone();
        Self {
            inner: FakeExecutor::default(),
            order: Mutex::new(Vec::new()),
            during_first: Mutex::new(Some(Box::new(move || {
                server.route(&feed_path(VERIFIER), Reply::json(&json!(listed)));
            }))),
        }
    }
}

#[async_trait::async_trait]
impl JobExecutor for Appearing {
    async fn execute(
        &self,
        job: &ValidatedJob,
        source_dir: &Path,
        benchmark_dir: &Path,
    ) -> Result<ExecutedJob, JobFailure> {
        self.order.lock().unwrap().push(job.job_id().to_owned());
        let first = self.during_first.lock().unwrap().take();
        if let Some(change) = first {
            change();
        }
        self.inner.execute(job, source_dir, benchmark_dir).await
    }
}

/// #43 item 1 (a) in `worker feed`: a job listed while the batch runs, whose window ends
/// before the waiting one's, runs next (the feed is polled again after each job). Before: the
/// batch ran only its first answer's jobs, so the order was B, A and C was not run.
#[tokio::test]
async fn a_job_listed_during_the_batch_runs_before_a_later_window() {
    let w = World::new().await;
    let end = verifier_sdk::fixtures::EXPIRES_AT;
    let ([a, b, c], exec) = Appearing::c_during_the_first_of_a_and_b(&w);
    let report = w
        .run("out", &exec, |c| c.clock = clock_at(end - 3600))
        .await;
    assert_eq!(
        *exec.order.lock().unwrap(),
        vec![id(&b), id(&c), id(&a)],
        "{:#?}",
        report.jobs
    );
    for j in [&a, &b, &c] {
        assert_eq!(row(&report, j).status, JobStatus::CompletedPassed);
    }
    assert_eq!(read_candidates(&w.root.join("out")).len(), 3);
}

/// #43 item 3 for jobs that never run: a job set apart as `window_too_short` or beyond
/// `--max-jobs` gets a readiness record that says not ready and why, replacing whatever an
/// earlier run left at its path (here a record that said ready). Before: no record was written
/// for them, so the earlier "ready" stayed for a job nobody checked in this run.
#[tokio::test]
async fn a_job_skipped_without_a_run_is_written_not_ready_with_the_reason() {
    let w = World::new().await;
    let end = verifier_sdk::fixtures::EXPIRES_AT;
    let short = w.job_with_timeout(1, 600, end);
    let fine = w.job_with_timeout(2, 60, end + 3600);
    let beyond = w.job_with_timeout(3, 60, end + 7200);
    w.serve_feed(VERIFIER, &[&short, &fine, &beyond]);
    let out = w.root.join("out");
    std::fs::create_dir_all(&out).unwrap();
    for job in [&short, &beyond] {
        worker_jobs::feed::readiness::write_readiness(&out, &ready_record(&id(job))).unwrap();
    }
    let exec = FakeExecutor::default();
    let report = w
        .run("out", &exec, |c| {
            c.clock = clock_at(end - 150);
            c.max_jobs = Some(2);
        })
        .await;
    for (job, code) in [(&short, "window_too_short"), (&beyond, "max_jobs")] {
        assert_eq!(
            row(&report, job).reason_code.as_deref(),
            Some(code),
            "{:#?}",
            report.jobs
        );
        assert_eq!(exec.calls(&id(job)), 0);
        assert_not_run(&readiness(&out, job), &[code]);
    }
    assert_eq!(exec.calls(&id(&fine)), 1);
}

/// #43 item 5 (the "Done when" order): a batch full under `--max-jobs` still takes a
/// job listed while it runs whose window ends sooner, in place of the queued job whose window
/// ends last (reported `max_jobs`, displaced, with a record that says not ready). Before: the
/// batch polled only while it had room, so the order was B, A and C waited for the next run.
#[tokio::test]
async fn a_full_max_jobs_batch_takes_a_job_listed_later_with_a_sooner_window_in_place_of_the_latest()
 {
    let w = World::new().await;
    let end = verifier_sdk::fixtures::EXPIRES_AT;
    let ([a, b, c], exec) = Appearing::c_during_the_first_of_a_and_b(&w);
    let report = w
        .run("out", &exec, |c| {
            c.clock = clock_at(end - 3600);
            c.max_jobs = Some(2);
        })
        .await;
    assert_eq!(
        *exec.order.lock().unwrap(),
        vec![id(&b), id(&c)],
        "{:#?}",
        report.jobs
    );
    let r = row_ended(&report, &a, JobStatus::Skipped, Some("max_jobs"));
    assert!(
        r.reason
            .as_deref()
            .unwrap_or_default()
            .contains("displaced"),
        "{r:?}"
    );
    assert!(!readiness(&w.root.join("out"), &a).ready);
}

#[tokio::test]
async fn max_jobs_runs_the_earliest_expiring_only() {
    let w = World::new().await;
    let mut late = w.job_with_source(1, &[("a", b"1")]);
    late["verification_expires_at"] = json!(verifier_sdk::fixtures::EXPIRES_AT + 10);
    verifier_sdk::fixtures::rehash(&mut late);
    let early = w.job_with_source(2, &[("b", b"2")]);
    w.serve_feed(VERIFIER, &[&late, &early]);
    let exec = FakeExecutor::default();
    let report = w.run("out", &exec, |c| c.max_jobs = Some(1)).await;
    assert_eq!(row(&report, &early).status, JobStatus::CompletedPassed);
    assert_eq!(row(&report, &late).status, JobStatus::Skipped);
    assert_eq!(exec.calls(&id(&late)), 0);
    assert_eq!(report.status(), BatchStatus::Complete);
}

/// An independent re-run names the runner's jobs; nothing else in the feed runs.
#[tokio::test]
async fn job_ids_run_only_the_named_jobs() {
    let w = World::new().await;
    let named = w.job_with_source(1, &[("a", b"1")]);
    let other = w.job_with_source(2, &[("b", b"2")]);
    w.serve_feed(VERIFIER, &[&named, &other]);
    let exec = FakeExecutor::default();
    let requested = [id(&named), "not-in-the-feed".to_owned()];
    let report = w
        .run("out", &exec, |c| c.only_jobs = Some(requested.into()))
        .await;
    assert_eq!(row(&report, &named).status, JobStatus::CompletedPassed);
    row_ended(&report, &other, JobStatus::Skipped, Some("not_requested"));
    assert_eq!((exec.calls(&id(&named)), exec.calls(&id(&other))), (1, 0));
    assert_eq!(read_candidates(&w.root.join("out")).len(), 1);
    assert_eq!(report.status(), BatchStatus::Complete);
}

/// `--shard 0/2` and `1/2` on one feed: each job runs in exactly one of them, and the other
/// reports it skipped (`other_shard`).
#[tokio::test]
async fn feed_shards_run_every_job_exactly_once_across_two_runners() {
    let w = World::new().await;
    let jobs: Vec<Value> = (1..=6)
        .map(|round| w.job_with_source(round, &[("a", format!("{round}").as_bytes())]))
        .collect();
    w.serve_feed(VERIFIER, &jobs.iter().collect::<Vec<_>>());
    let exec = FakeExecutor::default();
    let mut listed = Vec::new();
    for i in 0..2u64 {
        let report = w
            .run(&format!("out{i}"), &exec, |c| {
                c.cache_dir = None;
                c.shard = format!("{i}/2").parse().unwrap();
            })
            .await;
        for job in &jobs {
            let mine = worker_jobs::feed::shard::shard_of(&id(job), 2) == i;
            let r = row(&report, job);
            if mine {
                assert_eq!(r.status, JobStatus::CompletedPassed);
            } else {
                assert_eq!(r.status, JobStatus::Skipped);
                assert_eq!(r.reason_code.as_deref(), Some("other_shard"));
            }
        }
        assert_eq!(report.status(), BatchStatus::Complete);
        listed.extend(read_candidates(&w.root.join(format!("out{i}"))));
    }
    for job in &jobs {
        assert_eq!(
            exec.calls(&id(job)),
            1,
            "{} ran more or less than once",
            id(job)
        );
    }
    listed.sort();
    let mut want: Vec<String> = jobs.iter().map(id).collect();
    want.sort();
    assert_eq!(listed, want);
}

#[tokio::test]
async fn exit_status_reflects_feed_and_runtime_failures() {
    let w = World::new().await;
    let j = w.job_with_source(1, &[("a", b"1")]);
    w.serve_feed(VERIFIER, &[&j]);
    let down = FakeExecutor {
        runtime_down: true,
        ..FakeExecutor::default()
    };
    let report = run_feed(&w.config("down"), &down).await.unwrap();
    assert_eq!(row(&report, &j).status, JobStatus::Error);
    assert_eq!(
        row(&report, &j).reason_code.as_deref(),
        Some("runtime_unavailable")
    );
    assert_eq!(report.status(), BatchStatus::RuntimeUnavailable);
    // An empty manifest is still written, so the signer sees "nothing to sign".
    assert!(read_candidates(&w.root.join("down")).is_empty());

    w.server.route(&feed_path(VERIFIER), Reply::status(502));
    let report = run_feed(&w.config("flaky"), &FakeExecutor::default())
        .await
        .unwrap();
    assert_eq!(report.fetch_failures.len(), 1);
    assert!(report.fetch_failures[0].transient);
    assert_eq!(report.status(), BatchStatus::Retry);

    let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
    w.server
        .route(&feed_path(VERIFIER), Reply::ok(deep.into_bytes()));
    let report = run_feed(&w.config("deep"), &FakeExecutor::default())
        .await
        .unwrap();
    assert_eq!(report.fetch_failures[0].kind, "too_deep");
    assert_eq!(report.status(), BatchStatus::FeedBroken);
}

#[tokio::test]
async fn unusable_configuration_fails_before_any_request() {
    let w = World::new().await;
    let exec = FakeExecutor::default();
    let v: Address = VERIFIER.parse().unwrap();
    let o: Address = OTHER_VERIFIER.parse().unwrap();
    type Expect = fn(&FeedError) -> bool;
    let cases: Vec<(FeedConfig, Expect)> = vec![
        (
            FeedConfig {
                api_base: "http://platform.invalid".into(),
                ..w.config("x")
            },
            |e| matches!(e, FeedError::ApiUrl(_)),
        ),
        (
            FeedConfig {
                archive_base: "http://codeload.invalid".into(),
                ..w.config("x")
            },
            |e| matches!(e, FeedError::ArchiveBase(_)),
        ),
        (
            FeedConfig {
                verifiers: vec![],
                ..w.config("x")
            },
            |e| matches!(e, FeedError::NoVerifiers),
        ),
        (
            FeedConfig {
                verifiers: vec![v, v],
                ..w.config("x")
            },
            |e| matches!(e, FeedError::DuplicateVerifier),
        ),
        (
            FeedConfig {
                verifiers: vec![v, o, Address::from_bytes([9; 20])],
                ..w.config("x")
            },
            |e| matches!(e, FeedError::TooManyVerifiers(3)),
        ),
    ];
    for (config, expected) in cases {
        let err = run_feed(&config, &exec).await.unwrap_err();
        assert!(expected(&err), "{err}");
    }
    assert_eq!(w.server.hits(&feed_path(VERIFIER)), 0);
    assert!(!w.root.join("x").exists());
}

#[tokio::test]
async fn a_panicking_executor_fails_only_its_own_job() {
    let w = World::new().await;
    let boom = w.job_with_source(1, &[("a", b"1")]);
    let fine = w.job_with_source(2, &[("b", b"2")]);
    w.serve_feed(VERIFIER, &[&boom, &fine]);
    let exec = FakeExecutor {
        panic_on: [id(&boom)].into(),
        ..FakeExecutor::default()
    };
    let report = run_feed(&w.config("out"), &exec).await.unwrap();
    row_ended(&report, &boom, JobStatus::Error, Some("executor_panicked"));
    assert_eq!(row(&report, &fine).status, JobStatus::CompletedPassed);
    assert_eq!(read_candidates(&w.root.join("out")), vec![id(&fine)]);
    assert_eq!(report.status(), BatchStatus::Retry);
}

#[tokio::test]
async fn a_verdict_on_other_inputs_than_committed_is_neither_written_nor_cached() {
    let w = World::new().await;
    let j = w.job_with_source(1, &[("a", b"1")]);
    w.serve_feed(VERIFIER, &[&j]);
    let liar = FakeExecutor {
        wrong_benchmark: true,
        ..FakeExecutor::default()
    };
    let report = run_feed(&w.config("out"), &liar).await.unwrap();
    row_ended(&report, &j, JobStatus::Error, Some("digest_mismatch"));
    assert!(read_candidates(&w.root.join("out")).is_empty());
    // Nothing was cached: an honest executor runs the job again.
    let honest = FakeExecutor::default();
    let report = run_feed(&w.config("again"), &honest).await.unwrap();
    assert!(!row(&report, &j).reused_from_cache);
    assert_eq!(honest.calls(&id(&j)), 1);
    assert_eq!(row(&report, &j).status, JobStatus::CompletedPassed);
}

#[tokio::test]
async fn a_rejected_archive_is_cached_as_rejected_and_not_downloaded_again() {
    let w = World::new().await;
    let t = format!("sol-1-{}", World::commit(1));
    let evil = w.job_with_archive(
        1,
        tar_gz(&[dir(&format!("{t}/")), file(&format!("{t}/../x"), b"evil")]),
    );
    let good = w.job_with_source(2, &[("a", b"1")]);
    w.serve_feed(VERIFIER, &[&evil, &good]);
    let exec = FakeExecutor::default();
    let evil_archive = World::archive_path("sol-1", 1);

    let first = run_feed(&w.config("run1"), &exec).await.unwrap();
    let r = row(&first, &evil);
    assert_eq!(
        (r.status, r.reason_code.as_deref(), r.reused_from_cache),
        (JobStatus::Rejected, Some("archive_rejected"), false)
    );
    assert_eq!(w.server.hits(&evil_archive), 1);

    let second = run_feed(&w.config("run2"), &exec).await.unwrap();
    eprintln!("{}", second.human_summary());
    let r = row_ended(
        &second,
        &evil,
        JobStatus::Rejected,
        Some("archive_rejected"),
    );
    assert!(r.reused_from_cache, "{r:?}");
    assert!(
        r.reason
            .as_deref()
            .unwrap()
            .contains("not a normalized relative path"),
        "{r:?}"
    );
    assert!(r.candidate_file.is_none());
    assert_eq!(
        w.server.hits(&evil_archive),
        1,
        "a refused archive was downloaded again for the same run identity"
    );
    assert_eq!(exec.calls(&id(&evil)), 0);
    assert_eq!(read_candidates(&w.root.join("run2")), vec![id(&good)]);
    assert_eq!(second.status(), BatchStatus::Complete);

    // A new worker version may judge differently: the rejection is not reused.
    let third = w
        .run("run3", &exec, |c| c.worker_version = "999.0.0".into())
        .await;
    assert!(!row(&third, &evil).reused_from_cache);
    assert_eq!(w.server.hits(&evil_archive), 2);
}

/// Issue 21 item 11: a 300-byte entry name (over NAME_MAX) ended `error: extract_failed`,
/// downloaded and retried every cycle; it is a rule refusal, remembered like the others.
#[tokio::test]
async fn a_name_over_name_max_is_rejected_by_rule_and_not_downloaded_again() {
    let w = World::new().await;
    let t = format!("sol-1-{}", World::commit(1));
    let long = w.job_with_archive(
        1,
        tar_gz(&[
            dir(&format!("{t}/")),
            Entry::PaxFile {
                name: format!("{t}/short"),
                pax_path: format!("{t}/{}", "n".repeat(300)),
                data: b"x".to_vec(),
            },
        ]),
    );
    w.serve_feed(VERIFIER, &[&long]);
    let exec = FakeExecutor::default();
    let archive = World::archive_path("sol-1", 1);
    for (out, cached) in [("run1", false), ("run2", true)] {
        let report = run_feed(&w.config(out), &exec).await.unwrap();
        let r = row(&report, &long);
        assert_eq!(
            (r.status, r.reason_code.as_deref(), r.reused_from_cache),
            (JobStatus::Rejected, Some("archive_rejected"), cached),
            "{out}: {r:?}"
        );
        assert!(
            r.reason.as_deref().unwrap().contains("cannot be written"),
            "{r:?}"
        );
    }
    assert_eq!(
        w.server.hits(&archive),
        1,
        "the refused archive was fetched again"
    );
    assert_eq!(exec.calls(&id(&long)), 0);
}

#[tokio::test]
async fn an_unreadable_archive_is_not_cached_as_rejected() {
    // A truncated transfer looks like a corrupt gzip; it must be fetched again next run.
    let w = World::new().await;
    let t = format!("sol-1-{}", World::commit(1));
    let mut gz = tar_gz(&[dir(&format!("{t}/")), file(&format!("{t}/a"), &[7u8; 4096])]);
    gz.truncate(gz.len() / 2);
    let cut = w.job_with_archive(1, gz);
    w.serve_feed(VERIFIER, &[&cut]);
    let exec = FakeExecutor::default();
    for out in ["run1", "run2"] {
        let report = run_feed(&w.config(out), &exec).await.unwrap();
        assert!(!row(&report, &cut).reused_from_cache);
    }
    assert_eq!(w.server.hits(&World::archive_path("sol-1", 1)), 2);
}

#[tokio::test]
async fn a_job_for_another_network_is_rejected_and_never_run() {
    let w = World::new().await;
    let files: &[(&str, &[u8])] = &[("a", b"1")];
    let mainnet = w.job_with_source(1, files);
    // Same source and benchmark, but the job (and its terms) are for base-sepolia, served in
    // the answer to a base-mainnet query.
    let mut manifest = verifier_sdk::fixtures::sample_manifest();
    manifest["benchmark_digest"] = json!(w.bench_digest.to_string());
    let sepolia = verifier_sdk::fixtures::job_value(&JobParams {
        network: "base-sepolia".into(),
        round: 1,
        artifact_reference: format!(
            "https://github.com/solver-org/sol-1/commit/{}",
            World::commit(1)
        ),
        source_snapshot_digest: tree_digest(files).to_string(),
        manifest,
        ..JobParams::default()
    });
    assert_ne!(id(&sepolia), id(&mainnet));
    w.serve_feed(VERIFIER, &[&sepolia, &mainnet]);
    let exec = FakeExecutor::default();
    let report = run_feed(&w.config("out"), &exec).await.unwrap();
    eprintln!("{}", report.human_summary());
    row_ended(
        &report,
        &sepolia,
        JobStatus::Rejected,
        Some("wrong_network"),
    );
    assert_eq!(exec.calls(&id(&sepolia)), 0, "a base-sepolia job ran");
    assert_eq!(row(&report, &mainnet).status, JobStatus::CompletedPassed);
    assert_eq!(read_candidates(&w.root.join("out")), vec![id(&mainnet)]);
}

#[tokio::test]
async fn a_killed_workers_scratch_dir_is_removed_on_the_next_start_and_a_live_ones_is_kept() {
    let w = World::new().await;
    w.serve_feed(VERIFIER, &[]);
    let work = w.root.join("work");
    // A pid that no longer runs.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let dead_pid = gone.id();
    // As a worker SIGKILLed mid-download leaves it: a half-written archive in its job dir.
    let stale = work.join(format!("regression-feed-{dead_pid}-Ab3xYz"));
    std::fs::create_dir_all(stale.join("job-0")).unwrap();
    std::fs::write(stale.join("job-0/source.tar.gz"), vec![0u8; 4096]).unwrap();
    // A worker that is still running holds the lock on its scratch dir.
    let live = work.join(format!("regression-feed-{}-Live01", std::process::id()));
    std::fs::create_dir_all(live.join("job-0")).unwrap();
    let lock = std::fs::File::open(&live).unwrap();
    lock.try_lock().unwrap();
    // Not ours to judge.
    let foreign = work.join("something-else");
    std::fs::create_dir(&foreign).unwrap();

    let report = run_feed(&w.config("out"), &FakeExecutor::default())
        .await
        .unwrap();
    assert_eq!(report.status(), BatchStatus::Complete);
    assert!(
        !stale.exists(),
        "a dead worker's scratch dir was left behind"
    );
    assert!(
        live.join("job-0").is_dir(),
        "a live worker's scratch dir was removed"
    );
    assert!(foreign.is_dir());
    drop(lock);
}

/// The chain as the signer reads it, for the readiness records: the real check
/// (`bounty_chain::chain_readiness`, the signer gate's `check_job_against_state`) over a state
/// that commits to each job as funded, except `other_terms`, whose on-chain terms hash is not
/// the job's.
#[derive(Debug)]
struct FundedChain {
    other_terms: String,
}

#[async_trait::async_trait]
impl worker_jobs::feed::readiness::ChainReadiness for FundedChain {
    async fn check(&self, job: &ValidatedJob) -> verifier_sdk::readiness::CheckResult {
        let mut state = bounty_chain::BountyState {
            block_number: 10,
            block_timestamp: verifier_sdk::fixtures::NOW,
            chain_id: job.chain_id(),
            bounty: job.bounty_contract(),
            status: bounty_chain::BountyStatus::Submitted,
            bounty_id: job.bounty_id(),
            round: job.round(),
            solver: job.solver(),
            submission_hash: job.submission_hash(),
            evidence_hash: job.evidence_hash(),
            commitment: *job.commitment(),
            verification_expires_at: job.expires_at(),
            verification_mode: bounty_chain::VerificationMode::SignedQuorum,
            threshold: job.threshold(),
            verifier_set_hash: bounty_chain::verifier_set_hash(job.eligible_verifiers()),
            verifiers: job.eligible_verifiers().to_vec(),
        };
        if job.job_id() == self.other_terms {
            state.commitment.terms_hash = verifier_sdk::Bytes32::from_bytes([0x5a; 32]);
        }
        bounty_chain::chain_readiness(job, &state)
    }
}

fn readiness(out: &Path, job: &Value) -> verifier_sdk::readiness::ReadinessRecord {
    read_readiness(out, &id(job))
}

/// PR #1288's bug (issue #43 item 3), through `run_feed`: a job whose run gave a candidate but
/// whose bounty funds other terms is written not ready with the signer's code
/// (`onchain_mismatch`, `terms_hash`: what `sign_chain`'s test sees the signer refuse it with);
/// the funded one is ready; a run on other inputs is not ready at the archive check.
#[tokio::test]
async fn a_feed_item_whose_terms_hash_differs_from_the_chain_is_written_not_ready() {
    let w = World::new().await;
    let funded = w.job_with_source(1, &[("a", b"1")]);
    let other = w.job_with_source(2, &[("b", b"2")]);
    w.serve_feed(VERIFIER, &[&funded, &other]);
    let mut config = w.config("out");
    config.chain_readiness = Some(std::sync::Arc::new(FundedChain {
        other_terms: id(&other),
    }));
    let report = run_feed(&config, &FakeExecutor::default()).await.unwrap();
    assert_eq!(row(&report, &other).status, JobStatus::CompletedPassed);
    let out = w.root.join("out");
    assert!(readiness(&out, &funded).ready);
    let r = readiness(&out, &other);
    assert!(!r.ready, "{r:?}");
    let failed = r.first_failure().unwrap();
    assert_eq!(failed.check, verifier_sdk::readiness::CheckKind::Chain);
    assert_eq!(failed.code.as_deref(), Some("onchain_mismatch"));
    assert_eq!(failed.details, vec!["terms_hash"]);

    let liar = FakeExecutor {
        wrong_benchmark: true,
        ..FakeExecutor::default()
    };
    let mut config = w.config("liar");
    config.cache_dir = None;
    config.chain_readiness = Some(std::sync::Arc::new(FundedChain {
        other_terms: String::new(),
    }));
    run_feed(&config, &liar).await.unwrap();
    let r = readiness(&w.root.join("liar"), &funded);
    assert!(!r.ready);
    let failed = r.first_failure().unwrap();
    assert_eq!(failed.check, verifier_sdk::readiness::CheckKind::Archive);
    assert_eq!(failed.code.as_deref(), Some("digest_mismatch"));
}
