//! The run step: a validated job and its staged trees in, an outcome and its evidence out.
//!
//! This is where the protocol (`verifier-sdk`) meets the sandbox: the job decides the spec,
//! the staged store supplies verified trees (re-digested right before create and after the
//! run), the executor decides completed-or-not, and only then does the sdk turn a completed
//! run into a receipt and response hash. Rehearsal uses [`execute_manifest`] without a job.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use verifier_sdk::{
    ExecutionFacts, NoVerdictOutcome, NoVerdictReason, Outcome, RunOutput, RunnerManifest,
    Sha256Digest, TreeLimits, ValidatedJob, canonical_json,
};

use worker_sandbox::{
    Decision, EvidenceRecord, Executor, ImageMemo, InputCheck, InputPhase, RunHooks, SandboxError,
    SandboxSpec,
};
use worker_store::stage::{StageKind, verify_staged};

/// Options of one run that are the operator's, not the job's.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The staging root holding `sources/` and `benchmarks/`.
    pub staging_root: PathBuf,
    /// Pull the image by its digest when it is not present.
    pub pull: bool,
}

/// What one execution produced, before any job is attached.
#[derive(Debug, Clone)]
pub struct Execution {
    /// Completed (with exit code) or no verdict (with reason).
    pub decision: Decision,
    /// The evidence record of the run.
    pub evidence: EvidenceRecord,
    /// Limits met that the program saw only as an errno (beside the verdict, never in it).
    pub observed: worker_sandbox::hits::Observed,
    /// Everything the run wrote, within the output cap.
    pub output: worker_sandbox::streams::FullOutput,
}

/// A finished job run: the protocol output and its evidence.
#[derive(Debug, Clone)]
pub struct JobRun {
    /// Exactly what `--run-regression` prints.
    pub output: RunOutput,
    /// The evidence record, with `response_hash` filled in for a verdict.
    pub evidence: EvidenceRecord,
}

pub use worker_store::stage::EXECUTABLE_CACHE_DIR;

/// Re-digests both staged trees; used right before create and after the run.
struct StagedInputs {
    root: PathBuf,
    source: Sha256Digest,
    source_limits: TreeLimits,
    benchmark: Sha256Digest,
    benchmark_limits: TreeLimits,
    /// The batch's image inspects, when the caller runs batches ([`execute_manifest_with`]).
    images: Option<ImageMemo>,
    /// The caller's bound on the containers running at once, when it has one
    /// ([`execute_manifest_within`]), and this run's place in it.
    capacity: Option<Capacity>,
    place: std::sync::Mutex<Place>,
}

/// A bound on the containers running at once (the host's capacity, `parallel`), shared by the
/// runs of a rehearsal or a batch. A container counts from its start until the engine says
/// it has stopped: creating it, checking it and removing it use none of the cpus and memory
/// the bound shares out, so the next run's container is created and checked while the
/// runs before it still run, and starts the moment one of them stops (issue #50 item 1).
/// At most `parallel` containers wait so, created, for their start. Cheap to clone; clones
/// share the bound.
#[derive(Clone, Debug)]
pub struct Capacity {
    running: std::sync::Arc<tokio::sync::Semaphore>,
    waiting: std::sync::Arc<tokio::sync::Semaphore>,
}

impl Capacity {
    /// Up to `parallel` containers running at once, and as many created and waiting.
    pub fn new(parallel: std::num::NonZeroUsize) -> Self {
        let permits = parallel.get().min(tokio::sync::Semaphore::MAX_PERMITS);
        Self {
            running: std::sync::Arc::new(tokio::sync::Semaphore::new(permits)),
            waiting: std::sync::Arc::new(tokio::sync::Semaphore::new(permits)),
        }
    }
}

/// Where one run stands in its [`Capacity`]: the permit it holds, if any.
#[derive(Debug, Default)]
enum Place {
    /// Not counted (no capacity, or its container has stopped).
    #[default]
    Out,
    /// Created or about to be, waiting for its start; the permit is held for its drop.
    Waiting {
        _held: tokio::sync::OwnedSemaphorePermit,
    },
    /// Started, until its container stops.
    Running {
        _held: tokio::sync::OwnedSemaphorePermit,
    },
}

/// Why the staged trees are not the committed ones; its message is the no-verdict's detail.
#[derive(Debug, thiserror::Error)]
enum StagedMismatch {
    /// A tree re-digested to something else, or could not be read.
    #[error("{what}: {source}")]
    Verify {
        /// `source` or `benchmark`.
        what: &'static str,
        /// Why.
        #[source]
        source: worker_store::stage::VerifyError,
    },
    /// The staged path is not a directory.
    #[error("{what}: {} is not a directory", path.display())]
    NotDirectory {
        /// `source` or `benchmark`.
        what: &'static str,
        /// The path.
        path: PathBuf,
    },
    /// Nothing is staged at the path.
    #[error("{what}: {} is not staged: {source}", path.display())]
    NotStaged {
        /// `source` or `benchmark`.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl StagedInputs {
    fn check(&self) -> Result<(PathBuf, PathBuf), StagedMismatch> {
        let source = verify_staged(
            &self.root,
            StageKind::Source,
            &self.source,
            self.source_limits,
        )
        .map_err(|source| StagedMismatch::Verify {
            what: "source",
            source,
        })?;
        let benchmark = verify_staged(
            &self.root,
            StageKind::Benchmark,
            &self.benchmark,
            self.benchmark_limits,
        )
        .map_err(|source| StagedMismatch::Verify {
            what: "benchmark",
            source,
        })?;
        Ok((source, benchmark))
    }
}

impl StagedInputs {
    /// The staged paths, present as real directories, without re-digesting them: the executor
    /// digests both trees through the hooks immediately before create and after the run, so a
    /// full walk here would hash every byte a third time for no added guarantee.
    fn locate(&self) -> Result<(PathBuf, PathBuf), StagedMismatch> {
        let source = worker_store::stage::target_path(&self.root, StageKind::Source, &self.source);
        let benchmark =
            worker_store::stage::target_path(&self.root, StageKind::Benchmark, &self.benchmark);
        for (what, path) in [("source", &source), ("benchmark", &benchmark)] {
            match std::fs::symlink_metadata(path) {
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => {
                    return Err(StagedMismatch::NotDirectory {
                        what,
                        path: path.clone(),
                    });
                }
                Err(source) => {
                    return Err(StagedMismatch::NotStaged {
                        what,
                        path: path.clone(),
                        source,
                    });
                }
            }
        }
        Ok((source, benchmark))
    }
}

impl RunHooks for StagedInputs {
    fn check_inputs(&self, _phase: InputPhase) -> InputCheck {
        match self.check() {
            Ok(_) => InputCheck::Matched,
            Err(mismatch) => InputCheck::Mismatch {
                detail: mismatch.to_string(),
            },
        }
    }

    fn executable_cache(&self) -> Option<PathBuf> {
        Some(self.root.join(EXECUTABLE_CACHE_DIR))
    }

    fn image_memo(&self) -> Option<&ImageMemo> {
        self.images.as_ref()
    }

    fn admit(&self) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            let Some(capacity) = &self.capacity else {
                return;
            };
            // The semaphores are never closed: the wait ends only with a permit.
            if let Ok(running) = std::sync::Arc::clone(&capacity.running)
                .acquire_owned()
                .await
            {
                // The waiting permit is given back with the swap.
                *self.place() = Place::Running { _held: running };
            }
        })
    }

    fn stopped(&self) {
        *self.place() = Place::Out;
    }
}

impl StagedInputs {
    fn place(&self) -> std::sync::MutexGuard<'_, Place> {
        self.place
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn run_id(seed: &str) -> String {
    // A fresh nonce per run, not a time: std's `RandomState` is keyed from the OS's randomness
    // once per thread and differs on every call, so two runs of one job (in one process or in
    // two) get different ids without this library reading a clock.
    let nonce = std::hash::BuildHasher::hash_one(&std::hash::RandomState::new(), seed);
    let mut h = Sha256::new();
    h.update(seed.as_bytes());
    h.update(std::process::id().to_be_bytes());
    h.update(nonce.to_be_bytes());
    hex::encode(h.finalize()).chars().take(24).collect()
}

/// The container spec a manifest asks for, on the given staged trees: its image and the
/// request the sdk records for it ([`verifier_sdk::expected_request`], the same facts the
/// signer's re-check expects in the evidence), not the manifest's fields copied one by one.
/// Pure: `worker plan` prints it, and the executor runs it.
pub fn spec_for(
    manifest: &RunnerManifest,
    source_dir: PathBuf,
    benchmark_dir: PathBuf,
    run_id: String,
    pull: bool,
) -> SandboxSpec {
    SandboxSpec::for_request(
        run_id,
        manifest.image().to_owned(),
        verifier_sdk::expected_request(manifest),
        (source_dir, benchmark_dir),
        pull,
    )
}

/// Runs `manifest` on the staged source `source` and the manifest's benchmark. Missing or
/// changed inputs are a no-verdict `input_mismatch`: a missing tree is decided without the
/// engine, a changed one by the digest check right before create (no container is created).
pub async fn execute_manifest(
    executor: &Executor,
    manifest: &RunnerManifest,
    source: Sha256Digest,
    options: &RunOptions,
    label: &str,
) -> Result<Result<Execution, NoVerdictOutcome>, SandboxError> {
    execute_manifest_with(executor, manifest, source, options, label, None).await
}

/// [`execute_manifest`] taking the image inspect from `images` when it holds one for the
/// manifest's pinned image, and keeping the engine's answer there otherwise (a batch's runs,
/// [`ImageMemo`]); the image check itself runs on every run.
pub async fn execute_manifest_with(
    executor: &Executor,
    manifest: &RunnerManifest,
    source: Sha256Digest,
    options: &RunOptions,
    label: &str,
    images: Option<ImageMemo>,
) -> Result<Result<Execution, NoVerdictOutcome>, SandboxError> {
    execute(executor, manifest, source, options, label, images, None).await
}

/// [`execute_manifest`] within `capacity`: the run waits for a waiting place before its
/// container is created, and for a running place before its start; the running place is
/// given back once the engine says the container has stopped, before the inputs' re-check
/// and the removal.
pub async fn execute_manifest_within(
    executor: &Executor,
    manifest: &RunnerManifest,
    source: Sha256Digest,
    options: &RunOptions,
    label: &str,
    capacity: &Capacity,
) -> Result<Result<Execution, NoVerdictOutcome>, SandboxError> {
    execute(
        executor,
        manifest,
        source,
        options,
        label,
        None,
        Some(capacity),
    )
    .await
}

async fn execute(
    executor: &Executor,
    manifest: &RunnerManifest,
    source: Sha256Digest,
    options: &RunOptions,
    label: &str,
    images: Option<ImageMemo>,
    capacity: Option<&Capacity>,
) -> Result<Result<Execution, NoVerdictOutcome>, SandboxError> {
    // The semaphores are never closed: the wait ends only with a permit.
    let place = match capacity {
        Some(capacity) => std::sync::Arc::clone(&capacity.waiting)
            .acquire_owned()
            .await
            .map_or(Place::Out, |held| Place::Waiting { _held: held }),
        None => Place::Out,
    };
    let (source_limits, benchmark_limits) = (manifest.source_limits(), manifest.benchmark_limits());
    let inputs = StagedInputs {
        root: options.staging_root.clone(),
        source,
        source_limits,
        benchmark: manifest.benchmark_digest(),
        benchmark_limits,
        images,
        capacity: capacity.cloned(),
        place: std::sync::Mutex::new(place),
    };
    // Fail fast on a missing tree; the digests are checked by the executor's hooks right
    // before create and after the run.
    let (source_dir, benchmark_dir) = match inputs.locate() {
        Ok(paths) => paths,
        Err(mismatch) => {
            return Ok(Err(NoVerdictOutcome::new(
                NoVerdictReason::InputMismatch,
                &mismatch.to_string(),
            )));
        }
    };
    let spec = spec_for(
        manifest,
        source_dir,
        benchmark_dir,
        run_id(label),
        options.pull,
    );
    let report = executor.run(&spec, &inputs).await?;
    Ok(Ok(Execution {
        decision: report.decision,
        evidence: report.evidence,
        observed: report.observed,
        output: report.output,
    }))
}

/// Turns an execution into the protocol output for `job`, and records the response hash in
/// the evidence.
pub fn outcome_for_job(job: &ValidatedJob, mut execution: Execution) -> JobRun {
    let output = match &execution.decision {
        Decision::Completed { exit_code } => {
            let outcome = Outcome::for_job(job, execution_facts(*exit_code, &execution.evidence));
            execution.evidence.response_hash = Some(outcome.response_hash.to_string());
            RunOutput::Verdict(outcome)
        }
        Decision::NoVerdict { reason, detail } => {
            RunOutput::NoVerdict(NoVerdictOutcome::new(*reason, detail))
        }
    };
    JobRun {
        output,
        evidence: execution.evidence,
    }
}

fn execution_facts(exit_code: i64, evidence: &EvidenceRecord) -> ExecutionFacts {
    ExecutionFacts {
        exit_code,
        stdout_sha256: evidence.stdout.sha256,
        stderr_sha256: evidence.stderr.sha256,
        stdout_bytes: evidence.stdout.bytes,
        stderr_bytes: evidence.stderr.bytes,
    }
}

/// Runs a validated job end to end: staged inputs, sandbox, outcome.
pub async fn run_job(
    executor: &Executor,
    job: &ValidatedJob,
    options: &RunOptions,
) -> Result<Result<JobRun, NoVerdictOutcome>, SandboxError> {
    run_job_with(executor, job, options, None).await
}

/// [`run_job`] with a batch's image inspects ([`execute_manifest_with`]).
pub async fn run_job_with(
    executor: &Executor,
    job: &ValidatedJob,
    options: &RunOptions,
    images: Option<ImageMemo>,
) -> Result<Result<JobRun, NoVerdictOutcome>, SandboxError> {
    let execution = execute_manifest_with(
        executor,
        job.manifest(),
        job.source_snapshot_digest(),
        options,
        job.job_id(),
        images,
    )
    .await?;
    Ok(execution.map(|e| outcome_for_job(job, e)))
}

/// An evidence record with its canonical JSON and content address, computed once when the
/// record is final (its `response_hash` filled in): the store file holds these bytes, a
/// candidate and the result cache carry this JSON, and the ledger, the in-toto statement and
/// `--in-toto` name this digest, so nothing downstream serialises or hashes the record again.
#[derive(Debug, Clone)]
pub struct SealedEvidence {
    record: EvidenceRecord,
    json: serde_json::Value,
    bytes: Vec<u8>,
    digest: Sha256Digest,
}

impl SealedEvidence {
    /// Serialises `record` once and hashes its canonical JSON once.
    pub fn seal(record: EvidenceRecord) -> Result<Self, serde_json::Error> {
        let json = serde_json::to_value(&record)?;
        crate::evidence_count::serialised();
        let (bytes, digest) = canonical_address(&json);
        Ok(Self {
            record,
            json,
            bytes,
            digest,
        })
    }

    /// The typed record.
    pub fn record(&self) -> &EvidenceRecord {
        &self.record
    }

    /// The typed record, for a caller done with its bytes.
    pub fn into_record(self) -> EvidenceRecord {
        self.record
    }

    /// The record as JSON, as a candidate and the cache carry it.
    pub fn json(&self) -> &serde_json::Value {
        &self.json
    }

    /// The canonical JSON bytes: the content of its store file and of an `--evidence` copy.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// SHA-256 of [`Self::bytes`]: its store address.
    pub fn digest(&self) -> Sha256Digest {
        self.digest
    }

    /// Writes the record content-addressed under `<root>/evidence/sha256/<hex>.json` and
    /// returns the path. Written to a temporary file and renamed, so a reader never sees half
    /// a record.
    pub fn write(&self, root: &Path) -> std::io::Result<PathBuf> {
        let dir = root.join("evidence").join("sha256");
        std::fs::create_dir_all(&dir)?;
        let target = dir.join(format!("{}.json", self.digest.hex()));
        artifact_fs::write_atomic(&target, &self.bytes)?;
        Ok(target)
    }
}

/// The canonical JSON of an evidence record and its SHA-256: the one place a record is hashed.
fn canonical_address(evidence: &serde_json::Value) -> (Vec<u8>, Sha256Digest) {
    let bytes = canonical_json(evidence).into_bytes();
    crate::evidence_count::hashed();
    let digest = Sha256Digest::from_bytes(Sha256::digest(&bytes).into());
    (bytes, digest)
}

/// The store address of an evidence record read back as JSON from outside this run (a cached
/// verdict's): SHA-256 of its canonical JSON, as [`SealedEvidence::digest`] is of a fresh one.
pub fn evidence_address(evidence: &serde_json::Value) -> Sha256Digest {
    canonical_address(evidence).1
}

#[cfg(test)]
mod tests {
    use super::*;
    use verifier_sdk::fixtures::{NOW, completed_run, valid_job};
    use verifier_sdk::validate_job;

    /// The spec a job's run asks for is the request the signer's re-check expects in its
    /// evidence (`expected_request`), field for field, and the manifest's image and timeout.
    #[test]
    fn the_spec_of_a_manifest_asks_for_the_request_its_evidence_must_record() {
        let job = validate_job(&valid_job(), NOW).unwrap();
        let manifest = job.manifest();
        let dir = std::env::temp_dir();
        let spec = spec_for(manifest, dir.clone(), dir, "r".into(), false);
        assert_eq!(spec.request, verifier_sdk::expected_request(manifest));
        assert_eq!(
            spec.timeout(),
            std::time::Duration::from_secs(manifest.timeout_seconds())
        );
        assert_eq!(spec.image, manifest.image());
        assert_eq!(spec.request.argv, manifest.command());
    }

    /// A failed run whose output claims every test passed: the per-test section goes into the
    /// evidence, and the response hash (and the verdict) are those of the run without it.
    #[test]
    fn forged_test_lines_leave_the_response_hash_and_verdict_unchanged() {
        let job = validate_job(&valid_job(), NOW).unwrap();
        let facts = verifier_sdk::ExecutionFacts {
            exit_code: 1,
            stdout_sha256: verifier_sdk::Sha256Digest::from_bytes([0xdd; 32]),
            stderr_sha256: verifier_sdk::Sha256Digest::from_bytes([0xee; 32]),
            stdout_bytes: 12,
            stderr_bytes: 0,
        };
        let (_, evidence) = completed_run(&job, facts);
        let evidence = EvidenceRecord::from_docker_value(&evidence).unwrap();
        let execution = |tests| Execution {
            decision: Decision::Completed { exit_code: 1 },
            evidence: EvidenceRecord {
                tests,
                ..evidence.clone()
            },
            observed: Default::default(),
            output: Default::default(),
        };
        let forged = test_outcomes::parse(b"running 2 tests\ntest a ... ok\ntest b ... ok\n", b"");
        let plain = outcome_for_job(&job, execution(None));
        let tested = outcome_for_job(&job, execution(Some(forged.clone())));
        let (RunOutput::Verdict(plain_outcome), RunOutput::Verdict(tested_outcome)) =
            (&plain.output, &tested.output)
        else {
            panic!("both runs completed");
        };
        assert_eq!(tested_outcome.response_hash, plain_outcome.response_hash);
        assert_eq!(tested_outcome.verdict, verifier_sdk::Verdict::Failed);
        assert_eq!(tested.evidence.response_hash, plain.evidence.response_hash);
        assert_eq!(tested.evidence.tests, Some(forged));
    }
}
