//! One fresh feed job, from the executor's run over the scripted engine to its cached and
//! written candidate, counting what is done to its evidence record (issue #48 item 1).

use std::path::{Path, PathBuf};

use verifier_sdk::fixtures::{JobParams, NOW, job_value, sample_manifest};
use verifier_sdk::oci_runtime::RUNC;
use verifier_sdk::{Address, Candidate, Network, Sha256Digest, ValidatedJob, validate_job};
use worker_sandbox::Executor;
use worker_sandbox::lifecycle::Lifecycle;
use worker_sandbox::lifecycle::fake::{Fake, Script};
use worker_store::progress::NoProgress;
use worker_store::stage::{StageKind, stage_tree};

use super::*;
use crate::feed::SandboxJobExecutor;

/// The staged digest of `dir`, as the executor will stage it.
fn digest_of(kind: StageKind, dir: &Path, root: &Path) -> Sha256Digest {
    let limits = verifier_sdk::TreeLimits {
        max_bytes: 1 << 20,
        max_files: 100,
    };
    stage_tree(kind, dir, root, limits, &mut NoProgress)
        .unwrap()
        .snapshot
        .digest
}

/// Trees on disk, a job committing to them, and the sandbox executor over the scripted engine.
struct World {
    dir: tempfile::TempDir,
    source: PathBuf,
    benchmark: PathBuf,
    staging: PathBuf,
    config: FeedConfig,
    client: PlatformClient,
    executor: SandboxJobExecutor,
}

impl World {
    async fn new(script: Script) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (source, benchmark, staging) = (
            dir.path().join("source"),
            dir.path().join("benchmark"),
            dir.path().join("staging"),
        );
        for tree in [&source, &benchmark, &staging] {
            std::fs::create_dir_all(tree).unwrap();
        }
        std::fs::write(source.join("lib.rs"), "pub fn answer() -> u32 { 42 }\n").unwrap();
        std::fs::write(benchmark.join("test.rs"), "#[test] fn t() {}\n").unwrap();
        let mut config = FeedConfig::new(
            "http://127.0.0.1:9",
            Network::BaseMainnet,
            vec![Address::from_bytes([0x11; 20])],
            &dir.path().join("out"),
        );
        config.cache_dir = Some(dir.path().join("cache"));
        let client = PlatformClient::new(ClientLimits::default()).unwrap();
        let lifecycle = Lifecycle::connect(Fake::new(script), RUNC).await.unwrap();
        let executor = SandboxJobExecutor::new(Executor::new(lifecycle), staging.clone(), false);
        Self {
            dir,
            source,
            benchmark,
            staging,
            config,
            client,
            executor,
        }
    }

    /// A job of `round` committing to this world's trees.
    fn job(&self, round: u64) -> ValidatedJob {
        let probe = self.dir.path().join("probe");
        let mut manifest = sample_manifest();
        manifest["benchmark_digest"] = digest_of(StageKind::Benchmark, &self.benchmark, &probe)
            .to_string()
            .into();
        let job = job_value(&JobParams {
            round,
            source_snapshot_digest: digest_of(StageKind::Source, &self.source, &probe).to_string(),
            manifest,
            ..JobParams::default()
        });
        validate_job(&job, NOW).unwrap()
    }

    fn runner(&self) -> Runner<'_> {
        Runner {
            config: &self.config,
            client: &self.client,
            executor: &self.executor,
            cache: self.config.cache_dir.as_ref().map(ResultCache::new),
        }
    }

    fn identity<'a>(&'a self, job: &'a ValidatedJob) -> RunIdentity<'a> {
        let manifest = job.manifest();
        RunIdentity {
            job,
            source_digest: job.source_snapshot_digest(),
            benchmark_digest: manifest.benchmark_digest(),
            image_digest: manifest.image_digest(),
            worker_version: &self.config.worker_version,
        }
    }
}

/// An executor whose verdict is another job's (same trees, another round): the runner's check
/// of the typed outcome against the job refuses it as `invalid_outcome`, and nothing is
/// written or cached.
#[tokio::test]
async fn an_executors_verdict_for_another_job_is_refused_as_invalid_outcome() {
    let w = World::new(Script::default()).await;
    let (job, other) = (w.job(1), w.job(2));
    let executed = w.executor.execute(&other, &w.source, &w.benchmark).await;
    let Err(stop) = w
        .runner()
        .record(&job, &w.identity(&job), Ok(executed), &mut Flags::default())
    else {
        panic!("a verdict for another job became a candidate");
    };
    assert_eq!(stop.code, RunCode::InvalidOutcome, "{}", stop.reason);
    assert!(
        !w.config
            .out_dir
            .join(verifier_sdk::candidate_file_name(job.job_id()))
            .exists()
    );
    assert!(w.runner().cache.unwrap().load(&w.identity(&job)).is_none());
}

/// Before: the record was serialised twice (`write_evidence`'s `to_value`, then the executor's
/// `to_value` into an untyped `Value`) and hashed three times (`write_evidence`, the runner's
/// `evidence_address`, the in-toto `EvidenceAddress::of_record`) on a fresh job's way from the
/// sandbox to its candidate.
#[tokio::test]
async fn a_fresh_feed_jobs_evidence_is_serialised_once_and_hashed_once() {
    let w = World::new(Script {
        stdout: b"running 1 test\ntest t ... ok\n".to_vec(),
        ..Script::default()
    })
    .await;
    let job = w.job(1);
    let (config, staging, executor) = (&w.config, &w.staging, &w.executor);
    let (runner, identity) = (w.runner(), w.identity(&job));
    let (source, benchmark) = (&w.source, &w.benchmark);

    crate::evidence_count::take();
    let executed = executor.execute(&job, source, benchmark).await;
    let done = runner
        .record(&job, &identity, Ok(executed), &mut Flags::default())
        .unwrap_or_else(|stop| panic!("no candidate: {} {}", stop.code.as_str(), stop.reason));
    let (serialised, hashed) = crate::evidence_count::take();

    // The address the run reports is the store file's name, the candidate's record hashes to
    // it, and the statement names it.
    let digest = done
        .evidence
        .expect("a fresh verdict has its evidence address");
    let stored = staging
        .join("evidence")
        .join("sha256")
        .join(format!("{}.json", digest.hex()));
    let stored = std::fs::read(&stored).expect("the record is in the store under its digest");
    let candidate: serde_json::Value =
        serde_json::from_slice(&std::fs::read(config.out_dir.join(&done.file)).unwrap()).unwrap();
    let candidate = Candidate::from_value(&candidate).unwrap();
    let carried = verifier_sdk::canonical_json(candidate.evidence.as_ref().unwrap());
    assert_eq!(carried.as_bytes(), stored.as_slice());
    // What the run hands its caller typed is what the candidate says (`reproduce` and
    // `preflight` read it from here, not from the file).
    assert_eq!(
        serde_json::to_value(done.verdict.outcome.outcome()).unwrap(),
        candidate.outcome
    );
    assert_eq!(
        serde_json::to_value(done.verdict.evidence.as_ref().unwrap()).unwrap(),
        *candidate.evidence.as_ref().unwrap()
    );
    // The run asked for, and recorded, what the signer's re-check derives from the manifest.
    assert_eq!(
        done.verdict.evidence.as_ref().unwrap().request,
        verifier_sdk::expected_request(job.manifest())
    );
    let statement: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            config
                .out_dir
                .join(crate::intoto::statement_file_name(&done.file)),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        statement["predicate"]["passedTests"],
        serde_json::json!(["t"])
    );
    assert!(statement.to_string().contains(&digest.hex()));

    assert_eq!(
        (serialised, hashed),
        (1, 1),
        "(serialised, hashed) of one record"
    );
}
