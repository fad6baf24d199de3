//! Reading the manifest, staging the trees (as their git revision's archive holds them when
//! they live in a repository) and running the solution and base tree in fresh containers.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;
use verifier_sdk::{RunnerManifest, Sha256Digest, TreeLimits, runner_manifest_hash};

use super::adversarial::run_stubs;
use super::report::{Commitments, Rehearsed, Report, RunResult, assemble, zero_tests_ran};
use super::{MAX_MANIFEST_BYTES, MAX_REPEAT, PLACEHOLDER_DIGEST, RehearseError, RehearseOptions};
use crate::explain::{Explanation, explain};
use crate::feed::archive::ArchiveLimits;
use crate::progress::NoProgress;
use crate::run::{RunOptions, STAGING_ROOT_ENV, execute_manifest, spec_for, write_evidence};
use crate::sandbox::DockerExecutor;
use crate::sandbox::profile::Isolation;
use crate::stage::{StageKind, stage_tree};

fn read_manifest(path: &Path) -> Result<Value, RehearseError> {
    let io = |source| RehearseError::ManifestIo {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(MAX_MANIFEST_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(RehearseError::ManifestTooLarge);
    }
    serde_json::from_slice(&bytes).map_err(RehearseError::ManifestJson)
}

/// The staging root when none is given: `$REGRESSION_SANDBOX_STAGING_ROOT`, else a directory
/// private to this user under the system temp dir, reused across rehearsals (the store is
/// content-addressed, so reuse only saves copying).
pub fn default_staging_root() -> Result<PathBuf, RehearseError> {
    if let Some(root) = std::env::var_os(STAGING_ROOT_ENV).map(PathBuf::from) {
        if !root.is_absolute() {
            return Err(RehearseError::StagingRoot {
                path: root,
                detail: format!("{STAGING_ROOT_ENV} must be an absolute path"),
            });
        }
        return Ok(root);
    }
    let uid = effective_uid().map_err(|e| RehearseError::StagingRoot {
        path: std::env::temp_dir(),
        detail: format!("cannot tell our user id from /proc/self: {e}"),
    })?;
    let root = std::env::temp_dir().join(format!("worker-rehearse-{uid}"));
    private_dir(&root, uid)?;
    Ok(root)
}

/// The effective uid: `/proc/self` is owned by it, and this keeps `unsafe` (libc) out.
fn effective_uid() -> std::io::Result<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map(|m| m.uid())
}

/// Creates `dir` mode 0700, or accepts an existing one only if it is ours and closed to others:
/// a shared temp dir must not let another user plant trees or evidence we would then trust.
fn private_dir(dir: &Path, uid: u32) -> Result<(), RehearseError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let bad = |detail: String| RehearseError::StagingRoot {
        path: dir.to_owned(),
        detail,
    };
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(bad(e.to_string())),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| bad(e.to_string()))?;
    if !meta.is_dir() {
        return Err(bad("not a directory".into()));
    }
    if meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(bad(format!(
            "must be owned by uid {uid} with mode 0700 (is uid {}, mode {:o})",
            meta.uid(),
            meta.mode() & 0o7777
        )));
    }
    Ok(())
}

fn source_limits(m: &RunnerManifest) -> Result<TreeLimits, RehearseError> {
    TreeLimits::new(m.max_source_bytes, m.max_source_files)
        .map_err(|e| RehearseError::Plan(e.to_string()))
}

/// Stages the trees and validates the manifest; everything up to running a container.
#[derive(Clone)]
pub struct Prepared {
    pub(crate) manifest: RunnerManifest,
    pub(crate) commit: Commitments,
    pub(crate) sandbox: Isolation,
}

/// Reads and checks the manifest, stages every tree, and plans the sandbox.
pub fn prepare(options: &RehearseOptions) -> Result<Prepared, RehearseError> {
    if options.repeat == 0 || options.repeat > MAX_REPEAT {
        return Err(RehearseError::Repeat(options.repeat));
    }
    let value = read_manifest(&options.manifest)?;
    let mut manifest = RunnerManifest::from_value(&value)?;
    if manifest.image.ends_with(&PLACEHOLDER_DIGEST[6..]) {
        return Err(RehearseError::PlaceholderImage(manifest.image));
    }
    let root = &options.staging_root;
    let benchmark_limits =
        TreeLimits::new(manifest.max_benchmark_bytes, manifest.max_benchmark_files)
            .map_err(|e| RehearseError::Plan(e.to_string()))?;
    // Trees inside a git repository are staged as the revision's archive holds them; the
    // extractions live here until they are staged.
    let scratch = tempfile::tempdir()
        .map_err(|e| RehearseError::Plan(format!("creating a temporary directory: {e}")))?;
    let trees = std::cell::RefCell::new(Vec::new());
    let (benchmark_archive, source_archive) = (
        ArchiveLimits::benchmark(&manifest),
        ArchiveLimits::source(&manifest),
    );
    let stage = |what, kind, dir: &Path, limits| {
        let archive_limits = match kind {
            StageKind::Benchmark => &benchmark_archive,
            StageKind::Source => &source_archive,
        };
        let (dir, origin) = super::git::resolve(
            what,
            dir,
            &options.rev,
            options.worktree,
            scratch.path(),
            archive_limits,
        )
        .map_err(|source| RehearseError::Git { what, source })?;
        trees.borrow_mut().push(origin);
        stage_tree(kind, &dir, root, limits, &mut NoProgress)
            .map_err(|source| RehearseError::Stage { what, source })
    };
    let benchmark = stage(
        "benchmark",
        StageKind::Benchmark,
        &options.benchmark,
        benchmark_limits,
    )?;
    let staged_digest = benchmark.snapshot.digest;
    let filled_in = manifest.benchmark_digest.to_string() == PLACEHOLDER_DIGEST;
    if filled_in {
        manifest.benchmark_digest = staged_digest;
    } else if manifest.benchmark_digest != staged_digest {
        return Err(RehearseError::BenchmarkMismatch {
            manifest: manifest.benchmark_digest,
            staged: staged_digest,
        });
    }
    let limits = source_limits(&manifest)?;
    let source = stage("source", StageKind::Source, &options.source, limits)?;
    let base = match &options.base {
        Some(dir) => Some(stage("base", StageKind::Source, dir, limits)?),
        None => None,
    };
    let spec = spec_for(
        &manifest,
        source.path.clone(),
        benchmark.path.clone(),
        "rehearse".into(),
        options.pull,
    );
    let sandbox = crate::sandbox::plan(&spec).map_err(RehearseError::Plan)?;
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

pub(crate) async fn one_run(
    executor: &DockerExecutor,
    prepared: &Prepared,
    source: Sha256Digest,
    options: &RunOptions,
    run: u32,
    label: &str,
) -> Result<RunResult, RehearseError> {
    let execution = execute_manifest(executor, &prepared.manifest, source, options, label).await?;
    match execution {
        Ok(execution) => {
            let path = write_evidence(&options.staging_root, &execution.evidence)
                .map_err(RehearseError::Evidence)?;
            let tails = format!(
                "{}\n{}",
                execution.evidence.stdout.tail, execution.evidence.stderr.tail
            );
            Ok(RunResult {
                run,
                explanation: explain(&execution.evidence),
                evidence_path: Some(path),
                zero_tests: zero_tests_ran(&tails),
            })
        }
        // Decided before any container existed, so there is no evidence to explain.
        Err(no) => Ok(RunResult {
            run,
            explanation: Explanation {
                status: "no_verdict",
                reason: Some(no.no_verdict.reason.as_str()),
                exit_code: None,
                duration_ms: None,
                headline: format!(
                    "no verdict ({}): {}",
                    no.no_verdict.reason.as_str(),
                    no.no_verdict.detail
                ),
                details: vec![],
                stdout_tail: None,
                stderr_tail: None,
            },
            evidence_path: None,
            zero_tests: None,
        }),
    }
}

/// Runs the solution (`--repeat` times) and the base tree on a prepared manifest and trees.
pub async fn solution_runs(
    executor: &DockerExecutor,
    prepared: Prepared,
    options: &RehearseOptions,
) -> Result<Report, RehearseError> {
    let run_options = RunOptions {
        staging_root: options.staging_root.clone(),
        pull: options.pull,
    };
    let mut runs = Vec::new();
    for run in 1..=options.repeat {
        let label = format!("rehearse-{run}");
        runs.push(
            one_run(
                executor,
                &prepared,
                prepared.commit.source_snapshot_digest,
                &run_options,
                run,
                &label,
            )
            .await?,
        );
    }
    let base = match prepared.commit.base_snapshot_digest {
        Some(digest) => Some(
            one_run(
                executor,
                &prepared,
                digest,
                &run_options,
                1,
                "rehearse-base",
            )
            .await?,
        ),
        None => None,
    };
    Ok(assemble(prepared, runs, base))
}

/// Runs the rehearsal, then, with `adversarial`, every stub.
pub async fn rehearse(
    executor: &DockerExecutor,
    prepared: Prepared,
    options: &RehearseOptions,
    adversarial: bool,
) -> Result<Rehearsed, RehearseError> {
    if !adversarial {
        let report = solution_runs(executor, prepared, options).await?;
        return Ok(Rehearsed::new(report, None));
    }
    let report = solution_runs(executor, prepared.clone(), options).await?;
    let stubs = run_stubs(executor, &prepared, options).await?;
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
                worktree: false,
            };
            assert!(matches!(prepare(&options), Err(RehearseError::Repeat(_))));
        }
    }

    #[test]
    fn an_open_or_foreign_private_dir_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("r");
        let uid = effective_uid().unwrap();
        private_dir(&root, uid).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(private_dir(&root, uid).is_err());
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(private_dir(&root, uid + 1).is_err());
    }
}
