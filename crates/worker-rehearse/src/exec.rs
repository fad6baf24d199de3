//! One rehearsal run in a fresh container, and what every run shares: the prepared manifest
//! and trees ([`Prepared`]), the run's result ([`RunResult`]) and its logs. The lowest step
//! of a rehearsal: [`crate::run`], [`crate::adversarial`] and [`crate::report`] build on it,
//! and it imports none of them.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};

use serde::Serialize;
use verifier_sdk::{EvidenceRecord, RunnerManifest, Sha256Digest};

use crate::git::TreeOrigin;
use crate::{RehearseError, RehearseOptions};
use worker_jobs::run::{Capacity, RunOptions, SealedEvidence, execute_manifest_within};
use worker_sandbox::Executor;
use worker_sandbox::explain::{Explanation, explain_observed};
use worker_sandbox::hits::Hit;
use worker_sandbox::profile::Isolation;
use worker_store::progress::{StepSink, stderr_steps};

/// Stages the trees and validates the manifest; everything up to running a container.
#[derive(Clone)]
pub struct Prepared {
    pub(crate) manifest: RunnerManifest,
    pub(crate) commit: Commitments,
    pub(crate) sandbox: Isolation,
}

impl Prepared {
    /// The manifest as it will be committed (what a caller sizes parallel runs by).
    pub fn manifest(&self) -> &RunnerManifest {
        &self.manifest
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
    pub trees: Vec<TreeOrigin>,
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
    /// That record as this process wrote it: what the rehearsal's own findings (determinism,
    /// warnings) are read from, so nothing at the store path, replaced or collected since,
    /// can change them. Not in the report: `evidence_path` names it.
    #[serde(skip)]
    pub evidence: Option<EvidenceRecord>,
    /// The test runner's own words when its output says no test ran (e.g. `Ran 0 tests`): a
    /// pass that judged nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zero_tests: Option<&'static str>,
    /// With `--log-dir`: the common prefix of the run's `.stdout`, `.stderr` and
    /// `.evidence.json` files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logs: Option<PathBuf>,
}

#[cfg(test)]
impl RunResult {
    /// Run `run` as its explanation's status and reason alone say it ended: no output, no
    /// record; what the tests that judge a run by those give it.
    pub(crate) fn of_status(run: u32, status: &'static str, reason: Option<&'static str>) -> Self {
        Self {
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
                hits: vec![],
                tests: None,
            },
            evidence_path: None,
            zero_tests: None,
            logs: None,
            evidence: None,
        }
    }
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

/// The containers that may run at once ([`Capacity`]), shared by every run drawn from it: one
/// rehearsal's runs, or every run of every task of a batch, so tasks side by side and the runs
/// inside each never add up to more than the one limit (#50 item 1: not capacity × capacity).
#[derive(Debug, Clone)]
pub(crate) struct Slots(Capacity);

impl Slots {
    pub(crate) fn new(limit: NonZeroUsize) -> Self {
        Self(Capacity::new(limit))
    }
}

/// What every run of one rehearsal shares: where evidence and logs go, who hears about each
/// run as it starts and ends, and the slots its containers are drawn from.
pub(crate) struct Runs {
    pub(crate) options: RunOptions,
    log_dir: Option<PathBuf>,
    pub(crate) steps: Box<dyn StepSink + Send>,
    slots: Slots,
}

impl Runs {
    pub(crate) fn new(options: &RehearseOptions, slots: Slots) -> Self {
        Self {
            slots,
            options: RunOptions {
                staging_root: options.staging_root.clone(),
                pull: options.pull,
            },
            log_dir: options.log_dir.clone(),
            steps: match &options.task {
                Some(task) => Box::new(TaskSteps {
                    task: format!("[{task}] "),
                    inner: stderr_steps("rehearse", options.quiet),
                }),
                None => stderr_steps("rehearse", options.quiet),
            },
        }
    }
}

/// A batch's steps: each names its task first (#42 item 8), so a line read alone says which
/// bounty it is about.
struct TaskSteps {
    task: String,
    inner: Box<dyn StepSink + Send>,
}

impl StepSink for TaskSteps {
    fn started(&mut self, step: &str) {
        self.inner.started(&format!("{}{step}", self.task));
    }

    fn finished(&mut self, step: &str, result: &str) {
        self.inner.finished(&format!("{}{step}", self.task), result);
    }
}

/// What a run's progress line says when it ends; for a stub (`stub`) a pass is shown as what
/// it means, `BYPASSABLE`, and anything else as `held`.
pub(crate) fn progress_words(stub: bool, result: &Result<RunResult, RehearseError>) -> String {
    match result {
        Ok(done) => {
            let e = &done.explanation;
            let took = e
                .duration_ms
                .map(|ms| format!(" in {}", worker_sandbox::explain::seconds(ms)))
                .unwrap_or_default();
            let hits = match done.explanation.hits.len() {
                0 => String::new(),
                n => format!(" ({n} limit hit(s): see the report)"),
            };
            let words = match (stub, e.status) {
                (true, "passed") => format!("BYPASSABLE ({})", e.label()),
                (true, _) => format!("held ({})", e.label()),
                (false, _) => e.label(),
            };
            format!("{words}{took}{hits}")
        }
        Err(error) => format!("error: {error}"),
    }
}

/// The base tree run's container label and progress step, in a plain and an adversarial
/// rehearsal alike.
pub(crate) const BASE_LABEL: &str = "rehearse-base";
pub(crate) const BASE_STEP: &str = "the base tree run";

/// The solution's run `run` of `repeat`: its label (which names its container and evidence)
/// and its progress step, the same in a plain and an adversarial rehearsal.
pub(crate) fn solution_run_names(run: u32, repeat: u32) -> (String, String) {
    (
        format!("rehearse-{run}"),
        format!("run {run}/{repeat} of the solution"),
    )
}

/// Runs `source` once in a fresh container, telling no one (the caller reports progress):
/// `--mutants` runs many of these at once.
pub(crate) async fn run_once(
    executor: &Executor,
    prepared: &Prepared,
    runs: &Runs,
    source: Sha256Digest,
    run: u32,
    label: &str,
) -> Result<RunResult, RehearseError> {
    let manifest = &prepared.manifest;
    // Counted from its start until its container stopped (Capacity): created and checked
    // while the runs before it run, removed while the next one starts.
    let execution = execute_manifest_within(
        executor,
        manifest,
        source,
        &runs.options,
        label,
        &runs.slots.0,
    )
    .await?;
    match execution {
        Ok(execution) => {
            // Serialised and hashed once: the store file, the log copy and the findings are
            // all this one sealed record.
            let sealed = SealedEvidence::seal(execution.evidence)
                .map_err(|e| RehearseError::Evidence(std::io::Error::other(e)))?;
            let path = sealed
                .write(&runs.options.staging_root)
                .map_err(RehearseError::Evidence)?;
            let logs = match &runs.log_dir {
                Some(dir) => Some(write_logs(dir, label, sealed.bytes(), &execution.output)?),
                None => None,
            };
            let record = sealed.record();
            let tails = format!("{}\n{}", record.stdout.tail, record.stderr.tail);
            Ok(RunResult {
                run,
                explanation: explain_observed(record, &execution.observed),
                evidence_path: Some(path),
                zero_tests: zero_tests_ran(&tails),
                logs,
                evidence: Some(sealed.into_record()),
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
                hits: Vec::<Hit>::new(),
                tests: None,
            },
            evidence_path: None,
            zero_tests: None,
            logs: None,
            evidence: None,
        }),
    }
}

/// Writes a run's full output (within the manifest's cap) and a copy of its evidence record
/// (`record`: the store file's bytes, from memory, so the copy cannot be anything else that
/// is at the store path now) to `dir` as `<label>.stdout`, `<label>.stderr` and
/// `<label>.evidence.json`; returns the common prefix `dir/<label>`.
fn write_logs(
    dir: &Path,
    label: &str,
    record: &[u8],
    output: &worker_sandbox::streams::FullOutput,
) -> Result<PathBuf, RehearseError> {
    let fail = |path: &Path, e: std::io::Error| RehearseError::LogDir {
        path: path.to_owned(),
        detail: e.to_string(),
    };
    std::fs::create_dir_all(dir).map_err(|e| fail(dir, e))?;
    for (suffix, bytes) in [
        ("stdout", output.stdout.as_slice()),
        ("stderr", output.stderr.as_slice()),
        ("evidence.json", record),
    ] {
        let path = dir.join(format!("{label}.{suffix}"));
        artifact_fs::write_atomic(&path, bytes).map_err(|e| fail(&path, e))?;
    }
    Ok(dir.join(label))
}
