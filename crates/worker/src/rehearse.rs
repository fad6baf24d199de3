//! `worker rehearse`: runs a runner manifest on local trees exactly as a job would run it, with
//! no job and no chain, so bounty authors and solvers can see before committing anything which
//! digests a bounty would commit, the exact sandbox, and the verdict with its reasons.
//!
//! Beyond one run it answers the two questions that make a benchmark usable for a bounty: is
//! the verdict stable across fresh containers (`--repeat`), and does the benchmark tell the
//! unsolved tree from the solution (`--base`)?

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use verifier_sdk::{RunnerManifest, Sha256Digest, runner_manifest_hash};

use crate::explain::{Explanation, explain};
use crate::feed::archive::ArchiveLimits;
use crate::progress::NoProgress;
use crate::run::{RunOptions, execute_manifest, spec_for, write_evidence};
use crate::sandbox::profile::Isolation;
use crate::sandbox::{DockerExecutor, SandboxError};
use crate::stage::{StageError, StageKind, stage_tree};

/// Schema of the `--json` report; bump on any change of shape or meaning.
pub const REHEARSAL_SCHEMA_VERSION: &str = "agent-bounties/regression-rehearsal-v1";
/// The `benchmark_digest` an author writes before knowing the digest: "fill it in from the
/// benchmark directory".
pub const PLACEHOLDER_DIGEST: &str =
    "sha256:0000000000000000000000000000000000000000000000000000000000000000";
/// Largest manifest file read; a manifest is well under a KiB.
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;
/// Most runs `--repeat` accepts: enough to expose flakiness, few enough to stay a rehearsal.
pub const MAX_REPEAT: u32 = 20;

/// What to rehearse.
#[derive(Debug, Clone)]
pub struct RehearseOptions {
    /// The solution (or any) source tree.
    pub source: PathBuf,
    /// The benchmark tree.
    pub benchmark: PathBuf,
    /// The runner manifest file.
    pub manifest: PathBuf,
    /// Fresh containers to run the solution in (1..=[`MAX_REPEAT`]).
    pub repeat: u32,
    /// An unsolved tree the benchmark should fail on.
    pub base: Option<PathBuf>,
    /// Where trees are staged and evidence written.
    pub staging_root: PathBuf,
    /// Pull the image by its digest when missing.
    pub pull: bool,
    /// The git revision staged for trees inside a repository.
    pub rev: String,
    /// Stage the directories as they are on disk, even inside a git repository.
    pub worktree: bool,
}

/// Why a rehearsal could not produce a report.
#[derive(Debug, thiserror::Error)]
pub enum RehearseError {
    /// `--repeat` out of range.
    #[error("--repeat must be 1 to {MAX_REPEAT}, got {0}")]
    Repeat(u32),
    /// The manifest file could not be read.
    #[error("reading manifest {path:?}: {source}")]
    ManifestIo {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The manifest file is larger than [`MAX_MANIFEST_BYTES`].
    #[error("manifest is larger than {MAX_MANIFEST_BYTES} bytes")]
    ManifestTooLarge,
    /// The manifest file is not JSON.
    #[error("manifest is not valid json: {0}")]
    ManifestJson(#[source] serde_json::Error),
    /// The manifest breaks a protocol rule (the same rules a job's manifest must meet).
    #[error("{0}")]
    Manifest(#[from] verifier_sdk::ManifestError),
    /// The manifest names a benchmark digest other than the benchmark tree's.
    #[error(
        "manifest benchmark_digest {manifest} does not match the benchmark directory ({staged}); \
         fix the manifest, or write {PLACEHOLDER_DIGEST} to have it filled in"
    )]
    BenchmarkMismatch {
        /// What the manifest says.
        manifest: Sha256Digest,
        /// What the tree hashes to.
        staged: Sha256Digest,
    },
    /// A tree's git revision could not be staged as an archive holds it.
    #[error("staging the {what} tree from git: {source}")]
    Git {
        /// `source`, `benchmark` or `base`.
        what: &'static str,
        /// The underlying error.
        #[source]
        source: crate::rehearse_git::GitTreeError,
    },
    /// A tree could not be staged.
    #[error("staging the {what} tree: {source}")]
    Stage {
        /// `source`, `benchmark` or `base`.
        what: &'static str,
        /// The underlying error.
        #[source]
        source: StageError,
    },
    /// The image still has the placeholder digest of the example manifests.
    #[error(
        "manifest image {0:?} has the placeholder digest: pin the image you built or pulled \
         (its repo digest, e.g. from `docker image inspect` or .work/images.json)"
    )]
    PlaceholderImage(String),
    /// The manifest's numbers do not fit the engine.
    #[error("manifest does not fit the engine: {0}")]
    Plan(String),
    /// The staging root is unusable.
    #[error("staging root {path:?} is unusable: {detail}")]
    StagingRoot {
        /// The root.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The engine failed outside a run (unreachable, or a request failed).
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// An evidence record could not be written.
    #[error("writing the evidence record: {0}")]
    Evidence(#[source] std::io::Error),
}

impl RehearseError {
    /// Whether the input (manifest, trees, arguments) is at fault rather than the machine.
    pub fn is_input_error(&self) -> bool {
        match self {
            Self::Stage { source, .. } => {
                matches!(source, StageError::Tree(e) if e.is_input_error())
            }
            Self::Git { .. }
            | Self::Repeat(_)
            | Self::ManifestIo { .. }
            | Self::ManifestTooLarge
            | Self::ManifestJson(_)
            | Self::Manifest(_)
            | Self::BenchmarkMismatch { .. }
            | Self::PlaceholderImage(_)
            | Self::Plan(_) => true,
            Self::StagingRoot { .. } | Self::Sandbox(_) | Self::Evidence(_) => false,
        }
    }
}

/// One run's result in the report.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    /// 1-based run number.
    pub run: u32,
    /// The readable explanation (status, reason, exit code, headline, tails).
    #[serde(flatten)]
    pub explanation: Explanation,
    /// The content-addressed evidence record, for `worker explain`.
    pub evidence_path: Option<PathBuf>,
    /// The test runner's own words when its output says no test ran (e.g. `Ran 0 tests`): a
    /// pass that judged nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zero_tests: Option<&'static str>,
}

/// The summary line of a common test runner that ran no test, if the output has one. A pass
/// with zero tests judged nothing: a benchmark whose discovery finds no test (a wrong pattern
/// or directory) passes every solution.
pub fn zero_tests_ran(output: &str) -> Option<&'static str> {
    output.lines().map(str::trim).find_map(|line| {
        if line == "Ran 0 tests" || line.starts_with("Ran 0 tests in ") {
            Some("Ran 0 tests (unittest)")
        } else if line.contains("no tests ran") {
            Some("no tests ran (pytest)")
        } else if line == "# tests 0" || line == "ℹ tests 0" {
            Some("tests 0 (node --test)")
        } else {
            None
        }
    })
}

impl RunResult {
    /// What two runs must share to count as the same answer.
    fn answer(&self) -> (&'static str, Option<&'static str>) {
        (self.explanation.status, self.explanation.reason)
    }
}

/// The digests a bounty built from this rehearsal would commit.
#[derive(Debug, Clone, Serialize)]
pub struct Commitments {
    /// Digest of the source tree (the solver's `source_snapshot_digest`).
    pub source_snapshot_digest: Sha256Digest,
    /// Digest of the benchmark tree.
    pub benchmark_digest: Sha256Digest,
    /// True when the manifest had the placeholder and the digest was filled in.
    pub benchmark_digest_filled_in: bool,
    /// Hash of the manifest with the real benchmark digest.
    pub runner_manifest_hash: Sha256Digest,
    /// Digest of the base tree, when one was given.
    pub base_snapshot_digest: Option<Sha256Digest>,
    /// Where each tree came from: a git revision (what the feed's archive will hold) or the
    /// directory as it is.
    pub trees: Vec<crate::rehearse_git::TreeOrigin>,
}

/// The whole rehearsal.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Always [`REHEARSAL_SCHEMA_VERSION`].
    pub schema_version: &'static str,
    /// What to commit.
    pub commit: Commitments,
    /// The manifest as it would be committed (placeholder replaced).
    pub manifest: Value,
    /// The exact container configuration (the image's `PATH` is added at run time).
    pub sandbox: Isolation,
    /// The solution runs.
    pub runs: Vec<RunResult>,
    /// `stable` or `unstable` (only meaningful with more than one run).
    pub stability: &'static str,
    /// The base-tree run, when `--base` was given.
    pub base: Option<RunResult>,
    /// `discriminates`, `does_not_discriminate` or `unknown` (base gave no verdict).
    pub discrimination: Option<&'static str>,
    /// `passed`, `failed`, `no_verdict` or `unstable`.
    pub verdict: &'static str,
    /// What stands between this rehearsal and a usable bounty; empty when nothing does.
    pub problems: Vec<String>,
}

/// How a finished report maps to the process exit code:
///
/// - `0` (success): the answer is what a bounty needs — every solution run `passed`, the runs
///   agree, and with `--base` the base tree `failed`.
/// - `3` (no verdict): the solution, or the base tree, ran without a verdict in every run
///   (timeout, output cap, OOM, image missing, …) so the question could not be answered;
///   fixing limits or the environment and re-running may.
/// - `4` (invalid input): the rehearsal answered, and the answer is not what a bounty needs:
///   the solution `failed`, the runs disagree (unstable), or the benchmark does not
///   discriminate (it passes on the base tree).
///
/// Errors before a report exists keep their usual codes (2 usage, 4 bad manifest or tree,
/// 5 engine unreachable, 78 staging root, 1 internal).
pub fn report_exit_code(report: &Report) -> crate::exit::ExitCode {
    use crate::exit::ExitCode;
    if report.problems.is_empty() {
        return ExitCode::Success;
    }
    let base_no_verdict = report.discrimination == Some("unknown");
    if report.verdict == "no_verdict" || (report.verdict == "passed" && base_no_verdict) {
        ExitCode::NoVerdict
    } else {
        ExitCode::InvalidInput
    }
}

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

/// Stages the trees and validates the manifest; everything up to running a container.
#[derive(Clone)]
pub struct Prepared {
    pub(crate) manifest: RunnerManifest,
    pub(crate) commit: Commitments,
    sandbox: Isolation,
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
    let (benchmark_archive, source_archive) = (
        ArchiveLimits::benchmark(&manifest),
        ArchiveLimits::source(&manifest),
    );
    let stage = |what, kind, dir: &Path, limits| {
        let archive_limits = match kind {
            StageKind::Benchmark => &benchmark_archive,
            StageKind::Source => &source_archive,
        };
        let (dir, origin) = crate::rehearse_git::resolve(
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
    let sandbox = crate::sandbox::plan(&spec).map_err(|e| RehearseError::Plan(e.to_string()))?;
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

/// Runs the rehearsal on a prepared manifest and trees.
pub async fn rehearse(
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

fn assemble(prepared: Prepared, runs: Vec<RunResult>, base: Option<RunResult>) -> Report {
    let stable = runs.windows(2).all(|w| match w {
        [a, b] => a.answer() == b.answer(),
        _ => true,
    });
    let verdict = match runs.first() {
        Some(_) if !stable => "unstable",
        Some(first) => first.explanation.status,
        None => "no_verdict",
    };
    let mut problems = Vec::new();
    match verdict {
        "failed" => problems.push(
            "the solution fails the benchmark: a bounty with this manifest would not pay it".into(),
        ),
        "no_verdict" => problems.push(format!(
            "the solution run ended without a verdict ({}): nothing was judged; fix the cause \
             shown above and rehearse again",
            runs.first()
                .and_then(|r| r.explanation.reason)
                .unwrap_or("unknown")
        )),
        "unstable" => {
            let answers: Vec<String> = runs
                .iter()
                .map(|r| format!("run {}: {}", r.run, r.explanation.label()))
                .collect();
            problems.push(format!(
                "the verdict is unstable across fresh containers ({}): the benchmark depends on \
                 something other than the source",
                answers.join(", ")
            ));
        }
        _ => {}
    }
    if verdict == "passed"
        && let Some(words) = runs.first().and_then(|r| r.zero_tests)
    {
        problems.push(format!(
            "the benchmark passed but its test runner says no test ran ({words}): a benchmark \
             that judges nothing passes every solution; check the test pattern and directory"
        ));
    }
    let discrimination = base.as_ref().map(|b| match b.explanation.status {
        "failed" if verdict == "passed" => "discriminates",
        "passed" => {
            problems
                .push("the benchmark passes on the base tree: it does not test the change".into());
            "does_not_discriminate"
        }
        "failed" => {
            problems.push(
                "the benchmark fails on the base tree, but the solution does not pass it either"
                    .into(),
            );
            "does_not_discriminate"
        }
        _ => {
            problems.push(format!(
                "the base tree run ended without a verdict ({}): cannot tell whether the \
                 benchmark discriminates",
                b.explanation.reason.unwrap_or("unknown")
            ));
            "unknown"
        }
    });
    Report {
        schema_version: REHEARSAL_SCHEMA_VERSION,
        manifest: prepared.manifest.to_ordered_value(),
        commit: prepared.commit,
        sandbox: prepared.sandbox,
        stability: if stable { "stable" } else { "unstable" },
        runs,
        base,
        discrimination,
        verdict,
        problems,
    }
}

fn row(out: &mut String, key: &str, value: impl std::fmt::Display) {
    out.push_str(&format!("  {key:<24}{value}\n"));
}

impl Report {
    /// The human report: concise and aligned.
    // TODO(h-auth): split when rehearse/ becomes run, report and render.
    #[allow(clippy::too_many_lines)]
    pub fn human(&self) -> String {
        let mut out = String::from("commit\n");
        let c = &self.commit;
        row(&mut out, "source_snapshot_digest", c.source_snapshot_digest);
        let filled = if c.benchmark_digest_filled_in {
            "  (filled in: the manifest had the placeholder; commit this value)"
        } else {
            ""
        };
        row(
            &mut out,
            "benchmark_digest",
            format!("{}{filled}", c.benchmark_digest),
        );
        row(&mut out, "runner_manifest_hash", c.runner_manifest_hash);
        if let Some(base) = &c.base_snapshot_digest {
            row(&mut out, "base (not committed)", base);
        }
        for origin in &c.trees {
            row(
                &mut out,
                &format!("{} staged from", origin.tree),
                origin.line(),
            );
        }
        let s = &self.sandbox;
        let m = &self.manifest;
        let num = |k: &str| m.get(k).and_then(Value::as_u64).unwrap_or(0);
        out.push_str("sandbox\n");
        row(
            &mut out,
            "image",
            m.get("image").and_then(Value::as_str).unwrap_or(""),
        );
        row(
            &mut out,
            "platform",
            m.get("platform").and_then(Value::as_str).unwrap_or(""),
        );
        row(
            &mut out,
            "command",
            serde_json::to_string(&s.entrypoint).unwrap_or_default(),
        );
        row(
            &mut out,
            "workdir / user",
            format!("{} as {}", s.working_dir, s.user),
        );
        row(&mut out, "timeout", format!("{} s", num("timeout_seconds")));
        row(
            &mut out,
            "cpu / memory / pids",
            format!(
                "{} millicores / {} MiB, no swap / {}",
                num("cpu_millis"),
                num("memory_bytes") >> 20,
                s.pids_limit
            ),
        );
        row(
            &mut out,
            "output cap",
            format!("{} bytes (stdout+stderr)", num("max_output_bytes")),
        );
        row(&mut out, "network", &s.network_mode);
        let mounts: Vec<String> = s
            .mounts
            .iter()
            .map(|b| format!("{} {}", b.target, if b.read_only { "ro" } else { "rw" }))
            .collect();
        row(&mut out, "mounts", mounts.join(", "));
        let tmpfs: Vec<&str> = s.tmpfs.keys().map(String::as_str).collect();
        row(
            &mut out,
            "filesystem",
            format!(
                "root {}; tmpfs {} ({} MiB each)",
                if s.readonly_rootfs {
                    "read-only"
                } else {
                    "writable"
                },
                tmpfs.join(", "),
                num("tmpfs_bytes") >> 20
            ),
        );
        row(
            &mut out,
            "privileges",
            format!(
                "cap_drop {}; {}; init {}",
                s.cap_drop.join(","),
                s.security_opt.join(", "),
                s.init
            ),
        );
        row(&mut out, "env", s.env.join(" "));
        out.push_str(&format!("solution runs ({})\n", self.runs.len()));
        for run in &self.runs {
            out.push_str(&run_block(run));
        }
        if self.runs.len() > 1 {
            row(&mut out, "stability", self.stability);
        }
        if let Some(base) = &self.base {
            out.push_str("base tree run\n");
            out.push_str(&run_block(base));
            row(
                &mut out,
                "discrimination",
                self.discrimination.unwrap_or("unknown"),
            );
        }
        out.push_str(&format!("verdict  {}\n", self.verdict));
        if self.problems.is_empty() {
            let mut answer = String::from("ok: passed");
            if self.runs.len() > 1 {
                answer.push_str(", stable");
            }
            if self.base.is_some() {
                answer.push_str(", discriminating");
            }
            out.push_str(&format!("{answer}\n"));
        }
        for problem in &self.problems {
            out.push_str(&format!("problem: {problem}\n"));
        }
        // Runs' output is already escaped by `render`; the manifest's argv, env and image and
        // the problems are author-controlled text too.
        crate::explain::terminal_safe(&out)
    }

    /// The `--json` report.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

fn run_block(run: &RunResult) -> String {
    // Details and tails line up under the headline, after the `  run N  ` column.
    let prefix = format!("  run {:<3}", run.run);
    let indent = " ".repeat(prefix.len());
    let body = run.explanation.render(&indent);
    let mut out = format!("{prefix}{}", body.get(indent.len()..).unwrap_or(&body));
    if let Some(path) = &run.evidence_path {
        out.push_str(&format!("{indent}  evidence {}\n", path.display()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(run: u32, status: &'static str, reason: Option<&'static str>) -> RunResult {
        RunResult {
            run,
            explanation: Explanation {
                status,
                reason,
                exit_code: None,
                duration_ms: None,
                headline: String::new(),
                details: vec![],
                stdout_tail: None,
                stderr_tail: None,
            },
            evidence_path: None,
            zero_tests: None,
        }
    }

    fn prepared() -> Prepared {
        let manifest =
            RunnerManifest::from_value(&verifier_sdk::fixtures::sample_manifest()).unwrap();
        let spec = spec_for(&manifest, "/s".into(), "/b".into(), "t".into(), false);
        Prepared {
            commit: Commitments {
                source_snapshot_digest: manifest.benchmark_digest(),
                benchmark_digest: manifest.benchmark_digest(),
                benchmark_digest_filled_in: false,
                trees: Vec::new(),
                runner_manifest_hash: runner_manifest_hash(&manifest),
                base_snapshot_digest: None,
            },
            sandbox: crate::sandbox::plan(&spec).unwrap(),
            manifest,
        }
    }

    fn code(runs: Vec<RunResult>, base: Option<RunResult>) -> (Report, u8) {
        let report = assemble(prepared(), runs, base);
        let code = report_exit_code(&report).code();
        (report, code)
    }

    #[test]
    fn passed_stable_discriminating_is_the_only_success() {
        let (r, c) = code(
            vec![result(1, "passed", None), result(2, "passed", None)],
            Some(result(1, "failed", None)),
        );
        assert_eq!((r.verdict, r.stability, c), ("passed", "stable", 0));
        assert_eq!(r.discrimination, Some("discriminates"));
        let (r, c) = code(vec![result(1, "failed", None)], None);
        assert_eq!((r.verdict, c), ("failed", 4));
    }

    #[test]
    fn different_reasons_are_unstable_and_exit_4() {
        let (r, c) = code(
            vec![
                result(1, "no_verdict", Some("timeout")),
                result(2, "no_verdict", Some("oom")),
            ],
            None,
        );
        assert_eq!((r.verdict, r.stability, c), ("unstable", "unstable", 4));
        assert!(
            r.problems[0].contains("run 2: no verdict (oom)"),
            "{:?}",
            r.problems
        );
    }

    #[test]
    fn no_verdict_exits_3_and_a_passing_base_is_named() {
        let (_, c) = code(vec![result(1, "no_verdict", Some("timeout"))], None);
        assert_eq!(c, 3);
        let (r, c) = code(
            vec![result(1, "passed", None)],
            Some(result(1, "passed", None)),
        );
        assert_eq!((r.discrimination, c), (Some("does_not_discriminate"), 4));
        assert!(r.problems[0].contains("passes on the base tree"));
        let (r, c) = code(
            vec![result(1, "passed", None)],
            Some(result(1, "no_verdict", Some("timeout"))),
        );
        assert_eq!((r.discrimination, c), (Some("unknown"), 3));
    }

    #[test]
    fn zero_test_summaries_of_common_runners_are_recognised() {
        let unittest = "----------------------------------------------------------------------\n\
                        Ran 0 tests in 0.000s\n\nOK\n";
        assert_eq!(zero_tests_ran(unittest), Some("Ran 0 tests (unittest)"));
        let pytest =
            "============================ no tests ran in 0.01s =============================";
        assert_eq!(zero_tests_ran(pytest), Some("no tests ran (pytest)"));
        assert_eq!(
            zero_tests_ran("# tests 0\n# pass 0\n"),
            Some("tests 0 (node --test)")
        );
        for ran in [
            "Ran 10 tests in 0.1s\n\nOK",
            "# tests 3",
            "3 passed in 0.02s",
            "",
        ] {
            assert_eq!(zero_tests_ran(ran), None, "{ran}");
        }
    }

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
}
