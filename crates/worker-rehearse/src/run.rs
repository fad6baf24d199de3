//! Reading the manifest, staging the trees (as their git revision's archive holds them when
//! they live in a repository) and running the solution and base tree in fresh containers.

use std::num::NonZeroUsize;
use std::path::Path;

use serde_json::Value;
use verifier_sdk::{RunnerManifest, runner_manifest_hash};

use super::adversarial::run_with_stubs;
pub use super::exec::Prepared;
use super::exec::{
    BASE_LABEL, BASE_STEP, RunResult, Runs, Slots, progress_words, run_once, solution_run_names,
};
use super::limits::{TreeFields, over_limit};
use super::rehearsed::Rehearsed;
use super::report::{Commitments, Report, assemble};
use super::{MAX_MANIFEST_BYTES, MAX_REPEAT, PLACEHOLDER_DIGEST, RehearseError, RehearseOptions};
use futures_util::StreamExt;
use verifier_sdk::Sha256Digest;
use worker_jobs::run::spec_for;
use worker_sandbox::Executor;
use worker_store::archive::ArchiveLimits;
use worker_store::progress::NoSteps;
use worker_store::stage::{StageKind, stage_tree};

fn read_manifest(path: &Path) -> Result<Value, RehearseError> {
    let io = |source| RehearseError::ManifestIo {
        path: path.to_owned(),
        source,
    };
    let bytes = artifact_fs::read_named(path, MAX_MANIFEST_BYTES).map_err(|e| match e {
        artifact_fs::ReadError::TooLarge { .. } => RehearseError::ManifestTooLarge,
        e => io(e.into_io()),
    })?;
    serde_json::from_slice(&bytes).map_err(RehearseError::ManifestJson)
}

/// Reads and checks the manifest, stages every tree, and plans the sandbox.
pub fn prepare(options: &RehearseOptions) -> Result<Prepared, RehearseError> {
    if options.repeat == 0 || options.repeat > MAX_REPEAT {
        return Err(RehearseError::Repeat(options.repeat));
    }
    let value = read_manifest(&options.manifest)?;
    let mut manifest = RunnerManifest::from_value(&value)?;
    if manifest.image().ends_with(&PLACEHOLDER_DIGEST[6..]) {
        return Err(RehearseError::PlaceholderImage(manifest.image().to_owned()));
    }
    let root = &options.staging_root;
    let benchmark_limits = manifest.benchmark_limits();
    // Trees inside a git repository are staged as the revision's archive holds them; the
    // extractions live here until they are staged.
    let scratch = tempfile::tempdir()
        .map_err(|e| RehearseError::Plan(format!("creating a temporary directory: {e}")))?;
    let trees = std::cell::RefCell::new(Vec::new());
    let tree_fields = TreeFields::of(&manifest);
    let (benchmark_archive, source_archive) = (
        ArchiveLimits::benchmark(&manifest),
        ArchiveLimits::source(&manifest),
    );
    let stage = |what, kind, dir: &Path, limits, rev: Option<&str>| {
        let archive_limits = match kind {
            StageKind::Benchmark => &benchmark_archive,
            StageKind::Source => &source_archive,
        };
        let (dir, origin) = super::git::resolve(
            what,
            dir,
            rev.unwrap_or("HEAD"),
            rev.is_some(),
            options.worktree,
            scratch.path(),
            archive_limits,
        )
        .map_err(|source| match super::limits::archive_limit(&source) {
            Some(limit) => RehearseError::TreeLimit(over_limit(what, dir, limit, &tree_fields)),
            None => RehearseError::Git { what, source },
        })?;
        trees.borrow_mut().push(origin);
        // A batch names its task on every line.
        let label: std::borrow::Cow<'static, str> = match &options.task {
            Some(task) => format!("[{task}] {}", staging_label(what)).into(),
            None => staging_label(what).into(),
        };
        let mut progress = worker_store::progress::stderr_progress(label, options.quiet);
        stage_tree(kind, &dir, root, limits, progress.as_mut()).map_err(|source| {
            match super::limits::stage_limit(&source) {
                Some(limit) => {
                    RehearseError::TreeLimit(over_limit(what, &dir, limit, &tree_fields))
                }
                None => RehearseError::Stage { what, source },
            }
        })
    };
    let rev = options.rev_explicit.then_some(options.rev.as_str());
    let benchmark = stage(
        "benchmark",
        StageKind::Benchmark,
        &options.benchmark,
        benchmark_limits,
        rev,
    )?;
    let staged_digest = benchmark.snapshot.digest;
    let filled_in = manifest.benchmark_digest().to_string() == PLACEHOLDER_DIGEST;
    if filled_in {
        manifest = manifest.with_benchmark_digest(staged_digest);
    } else if manifest.benchmark_digest() != staged_digest {
        return Err(RehearseError::BenchmarkMismatch {
            manifest: manifest.benchmark_digest(),
            staged: staged_digest,
        });
    }
    let limits = manifest.source_limits();
    let source = stage("source", StageKind::Source, &options.source, limits, rev)?;
    let base = match &options.base {
        Some(dir) => Some(stage(
            "base",
            StageKind::Source,
            dir,
            limits,
            options.base_rev.as_deref(),
        )?),
        None => None,
    };
    let spec = spec_for(
        &manifest,
        source.path.clone(),
        benchmark.path.clone(),
        "rehearse".into(),
        options.pull,
    );
    let sandbox = worker_sandbox::plan_under(&spec, &options.oci_runtime)
        .map_err(|e| RehearseError::Plan(e.to_string()))?;
    let commit = Commitments {
        source_snapshot_digest: source.snapshot.digest,
        benchmark_digest: staged_digest,
        benchmark_digest_filled_in: filled_in,
        runner_manifest_hash: runner_manifest_hash(&manifest),
        base_snapshot_digest: base.map(|b| b.snapshot.digest),
        trees: trees.into_inner(),
    };
    Ok(Prepared {
        manifest,
        commit,
        sandbox,
    })
}

/// The staging progress line's label for a tree.
fn staging_label(what: &str) -> &'static str {
    match what {
        "benchmark" => "staging benchmark",
        "base" => "staging base",
        "source" => "staging source",
        _ => "staging",
    }
}

/// The base tree's digest when it is to be run: a base that is the source's own tree is not
/// run, and the report names it (`same_tree`).
fn base_to_run(prepared: &Prepared) -> Option<Sha256Digest> {
    prepared
        .commit
        .base_snapshot_digest
        .filter(|digest| *digest != prepared.commit.source_snapshot_digest)
}

/// Runs the solution (`--repeat` times) and the base tree on a prepared manifest and trees,
/// up to `parallel` runs at once.
pub(crate) async fn solution_runs(
    executor: &Executor,
    prepared: Prepared,
    options: &RehearseOptions,
    runs: &mut Runs,
    parallel: NonZeroUsize,
) -> Result<Report, RehearseError> {
    let base = base_to_run(&prepared);
    let (results, base) = planned_runs(executor, &prepared, options, runs, parallel, base).await?;
    Ok(report_of(prepared, results, base))
}

/// The solution's runs and, when `base` is given, the base tree's run after them; the
/// solution's results in run order, and the base's.
async fn planned_runs(
    executor: &Executor,
    prepared: &Prepared,
    options: &RehearseOptions,
    runs: &mut Runs,
    parallel: NonZeroUsize,
    base: Option<Sha256Digest>,
) -> Result<(Vec<RunResult>, Option<RunResult>), RehearseError> {
    let source = prepared.commit.source_snapshot_digest;
    // (tree, run number, label, progress step), in the order a sequential rehearsal runs them.
    let mut planned: Vec<(Sha256Digest, u32, String, String)> = (1..=options.repeat)
        .map(|run| {
            let (label, step) = solution_run_names(run, options.repeat);
            (source, run, label, step)
        })
        .collect();
    if let Some(digest) = base {
        planned.push((digest, 1, BASE_LABEL.into(), BASE_STEP.into()));
    }
    // The runs end in any order; `buffered` yields them in the plan's order, and their progress
    // lines are written here as each yields, so the lines are a sequential rehearsal's. Every
    // run is awaited, even after an error, so no container is left to a dropped future.
    let mut steps = std::mem::replace(&mut runs.steps, Box::new(NoSteps));
    let mut results = Vec::with_capacity(planned.len());
    let mut failed = None;
    {
        let shared: &Runs = runs;
        let mut done = futures_util::stream::iter(&planned)
            .map(|(digest, run, label, _)| {
                run_once(executor, prepared, shared, *digest, *run, label)
            })
            .buffered(parallel.get());
        let mut plan = planned.iter();
        while let Some(result) = done.next().await {
            let step = plan.next().map_or("", |(_, _, _, step)| step.as_str());
            if failed.is_some() {
                continue;
            }
            steps.started(step);
            steps.finished(step, &progress_words(false, &result));
            match result {
                Ok(run) => results.push(run),
                Err(error) => failed = Some(error),
            }
        }
    }
    runs.steps = steps;
    if let Some(error) = failed {
        return Err(error);
    }
    let base = if base.is_some() { results.pop() } else { None };
    Ok((results, base))
}

/// The report on the solution's runs and the base tree's.
fn report_of(prepared: Prepared, mut results: Vec<RunResult>, base: Option<RunResult>) -> Report {
    // Each run's evidence record as it wrote it (the streams' hashes, lengths and tails),
    // from memory: the report keeps only their paths.
    let evidence: Vec<_> = results
        .iter_mut()
        .map(|r| (r.run, r.evidence.take()))
        .collect();
    let mut report = assemble(prepared, results, base);
    report.output = super::determinism::assess(&evidence);
    report.warnings = super::passing_run::warnings(&report, &evidence);
    report
}

/// Runs the rehearsal, then, with `adversarial`, every stub, one run at a time.
pub async fn rehearse(
    executor: &Executor,
    prepared: Prepared,
    options: &RehearseOptions,
    adversarial: bool,
) -> Result<Rehearsed, RehearseError> {
    rehearse_at(executor, prepared, options, adversarial, NonZeroUsize::MIN).await
}

/// [`rehearse`] with up to `parallel` containers running at once (the host's capacity, chosen
/// by the caller as for `--mutants`); the report is the one `parallel = 1` gives.
pub async fn rehearse_at(
    executor: &Executor,
    prepared: Prepared,
    options: &RehearseOptions,
    adversarial: bool,
    parallel: NonZeroUsize,
) -> Result<Rehearsed, RehearseError> {
    let slots = Slots::new(parallel);
    rehearse_in(executor, prepared, options, adversarial, parallel, slots).await
}

/// [`rehearse_at`] with its containers drawn from `slots`, which a batch shares among its
/// tasks: up to `parallel` of the solution's runs are started at once (an adversarial
/// rehearsal starts all its runs as one pipeline), and each waits for a slot.
pub(crate) async fn rehearse_in(
    executor: &Executor,
    prepared: Prepared,
    options: &RehearseOptions,
    adversarial: bool,
    parallel: NonZeroUsize,
    slots: Slots,
) -> Result<Rehearsed, RehearseError> {
    let mut runs = Runs::new(options, slots);
    if !adversarial {
        let report = solution_runs(executor, prepared, options, &mut runs, parallel).await?;
        return Ok(Rehearsed::new(report, None));
    }
    // One pipeline: the base run and the stubs wait for no other run, the runner shadows
    // only for the one stub they depend on, so no slot idles between waves (#50 item 1).
    let base = base_to_run(&prepared);
    let (results, base_run, stubs) =
        run_with_stubs(executor, &prepared, options, &mut runs, base).await?;
    let report = report_of(prepared, results, base_run);
    Ok(Rehearsed::new(report, Some(stubs)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeat_is_bounded() {
        for repeat in [0, MAX_REPEAT + 1] {
            let options = RehearseOptions {
                source: "s".into(),
                benchmark: "b".into(),
                manifest: "m".into(),
                repeat,
                base: None,
                staging_root: "/nonexistent".into(),
                pull: false,
                rev: "HEAD".into(),
                rev_explicit: false,
                base_rev: None,
                worktree: false,
                quiet: true,
                log_dir: None,
                oci_runtime: verifier_sdk::oci_runtime::RUNC.into(),
                task: None,
            };
            assert!(matches!(prepare(&options), Err(RehearseError::Repeat(_))));
        }
    }
}
