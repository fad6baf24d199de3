//! The real [`JobExecutor`]: stages the extracted trees into the content-addressed store and
//! runs the job in the Docker sandbox. The digests it reports are the staged ones, so the
//! runner's comparison with the job is a comparison with what actually ran. The image is
//! held to the manifest's pinned digest by the sandbox's image check before create.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use verifier_sdk::{
    NoVerdictOutcome, NoVerdictReason, RunOutput, Sha256Digest, TreeLimits, ValidatedJob,
};

use super::runner::{ExecutedJob, JobExecutor, JobFailure};
use crate::run::{RunOptions, SealedEvidence, run_job_with};
use worker_sandbox::{Executor, ImageMemo, SandboxError};
use worker_store::progress::NoProgress;
use worker_store::stage::{StageKind, stage_tree};

/// Stages and runs jobs with one connected engine.
pub struct SandboxJobExecutor {
    executor: Executor,
    options: RunOptions,
    /// The current batch's image inspects ([`JobExecutor::batch_begins`] clears them).
    images: ImageMemo,
}

impl SandboxJobExecutor {
    /// Uses `executor` and publishes staged trees and evidence under `staging_root`.
    pub fn new(executor: Executor, staging_root: PathBuf, pull: bool) -> Self {
        Self {
            executor,
            options: RunOptions { staging_root, pull },
            images: ImageMemo::default(),
        }
    }
}

async fn stage(
    kind: StageKind,
    dir: &Path,
    root: &Path,
    limits: TreeLimits,
) -> Result<Sha256Digest, JobFailure> {
    let (dir, root) = (dir.to_owned(), root.to_owned());
    // Staging hashes and copies on blocking threads of its own; keep it off the runtime.
    let staged =
        tokio::task::spawn_blocking(move || stage_tree(kind, &dir, &root, limits, &mut NoProgress))
            .await
            .map_err(|e| JobFailure::Internal(format!("staging task failed: {e}")))?;
    match staged {
        Ok(tree) => Ok(tree.snapshot.digest),
        Err(worker_store::stage::StageError::Tree(e)) if e.is_input_error() => Err(
            JobFailure::InvalidInput(format!("{kind} tree rejected: {e}")),
        ),
        Err(e) => Err(JobFailure::Staging(format!("staging {kind}: {e}"))),
    }
}

#[async_trait::async_trait]
impl JobExecutor for SandboxJobExecutor {
    async fn execute(
        &self,
        job: &ValidatedJob,
        source_dir: &Path,
        benchmark_dir: &Path,
    ) -> Result<ExecutedJob, JobFailure> {
        let manifest = job.manifest();
        let root = &self.options.staging_root;
        // The split of the executor's time, for the breakdown of serve's per-job work
        // (BENCHMARKS.md): staging both trees, the sandbox run, the evidence write.
        let t = Instant::now();
        let source = stage(
            StageKind::Source,
            source_dir,
            root,
            manifest.source_limits(),
        )
        .await?;
        let benchmark = stage(
            StageKind::Benchmark,
            benchmark_dir,
            root,
            manifest.benchmark_limits(),
        )
        .await?;
        let executed = |output, evidence| ExecutedJob {
            output,
            evidence,
            source_digest: source,
            benchmark_digest: benchmark,
        };
        let mismatch = |what: &str, got: Sha256Digest, want: Sha256Digest| {
            let detail = format!("staged {what} digest {got} differs from the committed {want}");
            RunOutput::NoVerdict(NoVerdictOutcome::new(
                NoVerdictReason::InputMismatch,
                &detail,
            ))
        };
        if source != job.source_snapshot_digest() {
            return Ok(executed(
                mismatch("source", source, job.source_snapshot_digest()),
                None,
            ));
        }
        if benchmark != manifest.benchmark_digest() {
            return Ok(executed(
                mismatch("benchmark", benchmark, manifest.benchmark_digest()),
                None,
            ));
        }
        let stage_ms = millis(t);
        let t = Instant::now();
        let ran = run_job_with(
            &self.executor,
            job,
            &self.options,
            Some(self.images.clone()),
        )
        .await;
        let sandbox_ms = millis(t);
        match ran {
            Ok(Ok(run)) => {
                let t = Instant::now();
                let evidence = SealedEvidence::seal(run.evidence)
                    .map_err(|e| JobFailure::Internal(format!("serializing evidence: {e}")))?;
                if let Err(error) = evidence.write(root) {
                    tracing::warn!(%error, "could not write the evidence record to the store");
                }
                tracing::debug!(stage_ms, sandbox_ms, evidence_ms = millis(t), "executed");
                Ok(executed(run.output, Some(evidence)))
            }
            Ok(Err(no_verdict)) => Ok(executed(RunOutput::NoVerdict(no_verdict), None)),
            Err(SandboxError::RuntimeUnavailable(e)) => {
                Err(JobFailure::RuntimeUnavailable(e.to_string()))
            }
            Err(e) => Err(JobFailure::Internal(e.to_string())),
        }
    }

    fn batch_begins(&self) {
        self.images.clear();
    }

    async fn pulls(&self, images: &BTreeSet<String>) -> BTreeSet<String> {
        if !self.options.pull {
            // A missing image is then `image_missing` at once: no time is spent on it.
            return BTreeSet::new();
        }
        let store = self.executor.images();
        let mut missing = BTreeSet::new();
        for image in images {
            match store.holds(image).await {
                Ok(true) => {}
                Ok(false) => {
                    missing.insert(image.clone());
                }
                // An engine that does not answer fails the run itself; a job is not set apart
                // on a guess.
                Err(error) => {
                    tracing::debug!(%error, %image, "could not tell whether the image is here");
                }
            }
        }
        missing
    }
}

fn millis(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}
