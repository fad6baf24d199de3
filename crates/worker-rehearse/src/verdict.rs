//! The verdict words every part of a rehearsal shares: the verdict on the solution and one
//! stub's result. The lowest rung of the rehearsal's modules (it imports none of them), so the
//! report, the stub runs and their judgement all read these without importing each other.

use std::path::PathBuf;

use serde::Serialize;
use verifier_sdk::Sha256Digest;

/// Name of the stub whose code files all exit 0 when loaded.
pub const EXIT_ON_LOAD: &str = "exit_on_load";
/// Name of the stub with no files.
pub const EMPTY_TREE: &str = "empty_tree";
/// Name of the stub holding only the programs the benchmark names under `/workspace`.
pub const REFERENCED_PROGRAMS: &str = "referenced_programs";
/// Name of the stub whose code files exit 0 first and keep their text below.
pub const EXIT_ON_LOAD_KEEP_TEXT: &str = "exit_on_load_keep_text";
/// Name of the stub whose code files fail on load and keep their text: the shadows' base.
pub const FAIL_ON_LOAD_KEEP_TEXT: &str = "fail_on_load_keep_text";

/// The rehearsal's verdict on the solution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every run passed.
    Passed,
    /// Every run failed.
    Failed,
    /// Every run ended without a verdict for the same reason.
    NoVerdict,
    /// The runs disagree.
    Unstable,
}

impl Verdict {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed => "failed",
            Self::NoVerdict => "no_verdict",
            Self::Unstable => "unstable",
        }
    }

    /// One run's status (`passed`, `failed`, `no_verdict`) as a verdict; anything but a pass
    /// or a failure counts as no verdict.
    pub fn of_status(status: &str) -> Self {
        match status {
            "passed" => Self::Passed,
            "failed" => Self::Failed,
            _ => Self::NoVerdict,
        }
    }
}

/// One stub's result in the report.
#[derive(Debug, Clone, Serialize)]
pub struct StubResult {
    /// `exit_on_load`, `exit_on_load_keep_text`, `fail_on_load_keep_text`, `referenced_programs`,
    /// `shadow <what>` or `empty_tree`.
    pub name: String,
    /// Files of the solution replaced by an exit stub.
    pub replaced: Vec<String>,
    /// Files the stub adds (shadow files, referenced programs).
    pub added: Vec<String>,
    /// For a runner shadow, what it stands in for (`Python's unittest (…)`); else `None`.
    pub shadows: Option<&'static str>,
    /// The files of `replaced` and `added` that are candidate programs of the benchmark (named
    /// in a benchmark file that starts processes, [`super::references`]): a pass hinging on one
    /// may be a benchmark trusting a program the solver ships. Candidates, not confirmed runs.
    pub run_by_benchmark: Vec<String>,
    /// Files of the solution kept unchanged in the stub.
    pub kept_files: usize,
    /// The stub tree's digest, when it was staged.
    pub source_snapshot_digest: Option<Sha256Digest>,
    /// `passed`, `failed`, `no_verdict`, or `not_run` for a stub that does not apply.
    pub status: &'static str,
    /// The no-verdict reason, for a no-verdict run.
    pub reason: Option<&'static str>,
    /// The command's exit code, for a completed run.
    pub exit_code: Option<i64>,
    /// What happened, in one sentence (why it was not run, for `not_run`).
    pub headline: String,
    /// The run's evidence record, for `worker explain`.
    pub evidence_path: Option<PathBuf>,
    /// `bypassed` (the stub passed), `held` (failed or no verdict), `not_judged` (failed or no
    /// verdict while the source did not pass either), or `skipped`.
    pub outcome: &'static str,
}
