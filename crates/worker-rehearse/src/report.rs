//! The answer of a rehearsal: each run's result, whether the runs agree, whether the benchmark
//! tells the base tree from the solution, the verdict, what stands between it and a usable
//! bounty, and the exit code.

use serde::Serialize;
use serde_json::Value;

use super::REHEARSAL_SCHEMA_VERSION;
use super::exec::Prepared;
pub use super::exec::{Commitments, RunResult, zero_tests_ran};
pub use super::verdict::Verdict;
use worker_sandbox::profile::Isolation;

impl RunResult {
    /// What two runs must share to count as the same answer.
    fn answer(&self) -> (&'static str, Option<&'static str>) {
        (self.explanation.status, self.explanation.reason)
    }
}

/// Whether fresh containers gave the same answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stability {
    /// One run: nothing to compare (`--repeat` checks it).
    NotChecked,
    /// Every run had the same status and reason.
    Stable,
    /// At least two runs differ.
    Unstable,
}

/// Whether the benchmark tells the base tree from the solution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Discrimination {
    /// The solution passed and the base tree failed.
    Discriminates,
    /// The base tree passed.
    DoesNotDiscriminate,
    /// The base tree failed and the solution failed too: nothing tells whether the benchmark
    /// discriminates until the solution passes it.
    SolutionFails,
    /// The base tree run gave no verdict.
    Unknown,
    /// The base tree is the source's own tree (equal digests): nothing was compared.
    SameTree,
}

impl Stability {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotChecked => "not_checked",
            Self::Stable => "stable",
            Self::Unstable => "unstable",
        }
    }
}

impl Discrimination {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Discriminates => "discriminates",
            Self::DoesNotDiscriminate => "does_not_discriminate",
            Self::SolutionFails => "solution_fails",
            Self::Unknown => "unknown",
            Self::SameTree => "same_tree",
        }
    }
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
    /// Whether the runs agree; `not_checked` for one run.
    pub stability: Stability,
    /// Whether the runs printed the same bytes (and so would get the same response hash);
    /// `not_checked` for fewer than two runs with a verdict.
    pub output: super::determinism::OutputDeterminism,
    /// The base-tree run, when `--base` was given.
    pub base: Option<RunResult>,
    /// Whether the benchmark tells the base tree from the solution, with `--base`.
    pub discrimination: Option<Discrimination>,
    /// The verdict on the solution.
    pub verdict: Verdict,
    /// What stands between this rehearsal and a usable bounty; empty when nothing does.
    pub problems: Vec<String>,
    /// Per-test outcomes across the runs (SWE-bench's lists with `--base`, flaky tests with
    /// `--repeat`) and their warnings: read from solver-controlled output, so they never
    /// become problems and never change the exit code.
    pub tests: test_outcomes::Analysis,
    /// How many tests the solution runs printed (`null` when no known runner's output was
    /// seen): solver-controlled, for an author to commit.
    pub test_count: Option<super::test_count::TestCount>,
    /// What the passing solution runs' own records warn about, beside the verdict and never
    /// changing the exit code: no test results printed, little headroom under the manifest's
    /// memory or time ([`super::passing_run`]).
    pub warnings: Vec<String>,
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
/// - `9` (pays a non-solution): with `--adversarial`, a stub solution passed
///   ([`super::Rehearsed::answer`]); never from this function, which sees no stubs.
///
/// Errors before a report exists keep their usual codes (2 usage, 4 bad manifest or tree,
/// 5 engine unreachable, 78 staging root, 1 internal). The binary maps the [`Answer`] to
/// those exit codes; this crate names none.
pub fn answer(report: &Report) -> Answer {
    if report.problems.is_empty() {
        return Answer::Fit;
    }
    let base_no_verdict = report.discrimination == Some(Discrimination::Unknown);
    if report.verdict == Verdict::NoVerdict
        || (report.verdict == Verdict::Passed && base_no_verdict)
    {
        Answer::NoAnswer
    } else {
        Answer::Unfit
    }
}

/// What a rehearsal answered (see [`answer`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// What a bounty needs (exit 0).
    Fit,
    /// The question could not be answered: no verdict (exit 3).
    NoAnswer,
    /// Answered, and not what a bounty needs (exit 4).
    Unfit,
    /// The benchmark lets a non-solution pass: a stub solution passed (exit 9).
    PaysNonSolution,
}

impl Answer {
    /// The wire name (`--json`'s `answer`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fit => "fit",
            Self::NoAnswer => "no_answer",
            Self::Unfit => "unfit",
            Self::PaysNonSolution => "pays_non_solution",
        }
    }
}

/// Whether the solution runs gave the same answer.
fn stable(runs: &[RunResult]) -> bool {
    runs.windows(2).all(|w| match w {
        [a, b] => a.answer() == b.answer(),
        _ => true,
    })
}

/// The verdict on the solution: its runs' alone, never the base tree's.
pub(super) fn verdict_of(runs: &[RunResult]) -> Verdict {
    match runs.first() {
        Some(_) if !stable(runs) => Verdict::Unstable,
        Some(first) => Verdict::of_status(first.explanation.status),
        None => Verdict::NoVerdict,
    }
}

pub(super) fn assemble(
    prepared: Prepared,
    runs: Vec<RunResult>,
    base: Option<RunResult>,
) -> Report {
    let stable = stable(&runs);
    let verdict = verdict_of(&runs);
    let mut problems = Vec::new();
    match verdict {
        Verdict::Failed => problems.push(
            "the solution fails the benchmark: a bounty with this manifest would not pay it".into(),
        ),
        Verdict::NoVerdict => problems.push(format!(
            "the solution run ended without a verdict ({}): nothing was judged; fix the cause \
             shown above and rehearse again",
            runs.first()
                .and_then(|r| r.explanation.reason)
                .unwrap_or("unknown")
        )),
        Verdict::Unstable => {
            let answers: Vec<String> = runs
                .iter()
                .map(|r| format!("run {}: {}", r.run, r.explanation.label()))
                .collect();
            problems.push(format!(
                "the verdict is unstable across fresh containers ({}): the benchmark depends on \
                 something other than the source. Every run gets the same \
                 AGENT_BOUNTIES_TEST_SEED={seed} (the manifest's test_seed): seed every random \
                 choice of the tests from it (Python: \
                 random.seed(int(os.environ[\"AGENT_BOUNTIES_TEST_SEED\"]))), and do not depend \
                 on the clock, on ordering or on timing",
                answers.join(", "),
                seed = prepared.manifest.test_seed(),
            ));
        }
        Verdict::Passed => {}
    }
    if verdict == Verdict::Passed
        && let Some(words) = runs.first().and_then(|r| r.zero_tests)
    {
        problems.push(format!(
            "the benchmark passed but its test runner says no test ran ({words}): a benchmark \
             that judges nothing passes every solution; check the test pattern and directory"
        ));
    }
    let same_tree = prepared
        .commit
        .base_snapshot_digest
        .filter(|b| *b == prepared.commit.source_snapshot_digest);
    if let Some(digest) = same_tree {
        problems.push(format!(
            "base and source are the same tree ({digest}): nothing was compared; pass the \
             unsolved revision with --base-rev REV or --base DIR@REV"
        ));
    }
    let discrimination = base.as_ref().map(|b| {
        match (Verdict::of_status(b.explanation.status), verdict) {
            (Verdict::Failed, Verdict::Passed) => Discrimination::Discriminates,
            // A flaky solution says nothing about discrimination: the base tree's one run could
            // be the flake. The instability is the problem.
            (_, Verdict::Unstable) | (Verdict::Failed, Verdict::NoVerdict) => {
                Discrimination::Unknown
            }
            (Verdict::Passed, _) => {
                problems.push(
                    "the benchmark passes on the base tree: it does not test the change".into(),
                );
                Discrimination::DoesNotDiscriminate
            }
            (Verdict::Failed, _) => {
                problems.push(
                    "the benchmark fails on the base tree, but the solution does not pass it \
                     either"
                        .into(),
                );
                Discrimination::SolutionFails
            }
            _ => {
                problems.push(format!(
                    "the base tree run ended without a verdict ({}): cannot tell whether the \
                     benchmark discriminates",
                    b.explanation.reason.unwrap_or("unknown")
                ));
                Discrimination::Unknown
            }
        }
    });
    let tests = tests_analysis(&runs, base.as_ref());
    let test_count = super::test_count::seen(&runs);
    Report {
        schema_version: REHEARSAL_SCHEMA_VERSION,
        manifest: prepared.manifest.to_ordered_value(),
        commit: prepared.commit,
        sandbox: prepared.sandbox,
        stability: match (runs.len(), stable) {
            (0 | 1, _) => Stability::NotChecked,
            (_, true) => Stability::Stable,
            (_, false) => Stability::Unstable,
        },
        output: super::determinism::OutputDeterminism::NotChecked,
        runs,
        base,
        discrimination: same_tree.map_or(discrimination, |_| Some(Discrimination::SameTree)),
        verdict,
        problems,
        tests,
        test_count,
        warnings: Vec::new(),
    }
}

/// The runs' per-test reports put side by side; a run without one (no container) counts as
/// output of unknown format.
fn tests_analysis(runs: &[RunResult], base: Option<&RunResult>) -> test_outcomes::Analysis {
    let report = |r: &RunResult| {
        r.explanation
            .tests
            .clone()
            .unwrap_or_else(test_outcomes::TestReport::unknown)
    };
    let solution: Vec<_> = runs.iter().map(report).collect();
    test_outcomes::analyse(&solution, base.map(report).as_ref())
}

impl Report {
    /// The `--json` report.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use verifier_sdk::{RunnerManifest, runner_manifest_hash};
    use worker_jobs::run::spec_for;

    fn result(run: u32, status: &'static str, reason: Option<&'static str>) -> RunResult {
        RunResult::of_status(run, status, reason)
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
            sandbox: worker_sandbox::plan(&spec).unwrap(),
            manifest,
        }
    }

    fn code(runs: Vec<RunResult>, base: Option<RunResult>) -> (Report, u8) {
        let report = assemble(prepared(), runs, base);
        let code = match answer(&report) {
            Answer::Fit => 0,
            Answer::NoAnswer => 3,
            Answer::Unfit => 4,
            Answer::PaysNonSolution => 9,
        };
        (report, code)
    }

    #[test]
    fn passed_stable_discriminating_is_the_only_success() {
        let (r, c) = code(
            vec![result(1, "passed", None), result(2, "passed", None)],
            Some(result(1, "failed", None)),
        );
        assert_eq!(
            (r.verdict, r.stability, c),
            (Verdict::Passed, Stability::Stable, 0)
        );
        assert_eq!(r.discrimination, Some(Discrimination::Discriminates));
        let (r, c) = code(vec![result(1, "failed", None)], None);
        assert_eq!((r.verdict, c), (Verdict::Failed, 4));
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
        assert_eq!(
            (r.verdict, r.stability, c),
            (Verdict::Unstable, Stability::Unstable, 4)
        );
        assert!(
            r.problems[0].contains("run 2: no verdict (oom)"),
            "{:?}",
            r.problems
        );
    }

    #[test]
    fn one_run_is_not_checked_and_a_flaky_benchmark_is_not_also_non_discriminating() {
        let (r, c) = code(vec![result(1, "passed", None)], None);
        assert_eq!((r.stability, c), (Stability::NotChecked, 0));
        assert_eq!(
            serde_json::to_value(r.stability).unwrap(),
            serde_json::json!("not_checked")
        );
        for base in ["failed", "passed"] {
            let (r, c) = code(
                vec![result(1, "passed", None), result(2, "failed", None)],
                Some(result(1, base, None)),
            );
            assert_eq!(
                (r.verdict, r.discrimination, c),
                (Verdict::Unstable, Some(Discrimination::Unknown), 4),
                "{base}"
            );
            assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
            assert!(
                r.problems[0].contains("AGENT_BOUNTIES_TEST_SEED=1 (the manifest's test_seed)"),
                "{:?}",
                r.problems
            );
        }
    }

    #[test]
    fn no_verdict_exits_3_and_a_passing_base_is_named() {
        let (_, c) = code(vec![result(1, "no_verdict", Some("timeout"))], None);
        assert_eq!(c, 3);
        let (r, c) = code(
            vec![result(1, "passed", None)],
            Some(result(1, "passed", None)),
        );
        assert_eq!(
            (r.discrimination, c),
            (Some(Discrimination::DoesNotDiscriminate), 4)
        );
        assert!(r.problems[0].contains("passes on the base tree"));
        let (r, c) = code(
            vec![result(1, "passed", None)],
            Some(result(1, "no_verdict", Some("timeout"))),
        );
        assert_eq!((r.discrimination, c), (Some(Discrimination::Unknown), 3));
    }

    /// #42 item 8: a base that fails and a solution that fails too is not a benchmark that
    /// "does not discriminate" (it may well): the solution fails it, and the word says so.
    #[test]
    fn both_trees_failing_reads_solution_fails() {
        let (r, c) = code(
            vec![result(1, "failed", None)],
            Some(result(1, "failed", None)),
        );
        assert_eq!(
            r.discrimination.map(Discrimination::as_str),
            Some("solution_fails")
        );
        assert_eq!(
            serde_json::to_value(r.discrimination).unwrap(),
            serde_json::json!("solution_fails")
        );
        assert_eq!(c, 4);
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
}
