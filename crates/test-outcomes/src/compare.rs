//! SWE-bench's comparison of two runs of one benchmark (`swebench/harness/grading.py`,
//! `get_eval_tests_report`): the base (the repository before the change) and the solution.
//! As there, a test passed when it reported `passed` (expected failures included), failed when
//! it reported `failed` or `error` *or was not reported at all on the solution* (a test that
//! vanished did not pass), and a skipped test is neither. Unlike there, a test the solution
//! passes that the base run never reported is not `FAIL_TO_PASS` but `NOT_RUN_ON_BASE` (#42
//! item 7): `cargo test` stops after the first test binary that fails, so the base run of a
//! Rust crate reports the first binary's tests only, and nothing showed the others failing.

use serde::{Deserialize, Serialize};

use crate::report::{Runner, Status, TestReport, by_name};

/// Why two reports cannot be compared.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CompareError {
    /// One run's output had no recognised format: nothing is known about its tests.
    #[error("the {which} run's output has no recognised test format")]
    UnknownFormat {
        /// `base` or `solution`.
        which: &'static str,
    },
    /// The runs were read as different formats, so their names do not correspond.
    #[error(
        "the base run reads as {base:?} and the solution as {solution:?}: names do not correspond"
    )]
    DifferentRunners {
        /// The base run's runner.
        base: Runner,
        /// The solution run's runner.
        solution: Runner,
    },
}

/// The three lists, each sorted by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Comparison {
    /// Failed on the base and passed on the solution: what the bounty rewards.
    #[serde(rename = "FAIL_TO_PASS")]
    pub fail_to_pass: Vec<String>,
    /// Passed on the solution and not reported at all by the base run: the base run stopped
    /// before them (`cargo test` stops at the first failing test binary) or the solution adds
    /// them. Not evidence that they fail on the base tree, so not `FAIL_TO_PASS`.
    #[serde(rename = "NOT_RUN_ON_BASE", default)]
    pub not_run_on_base: Vec<String>,
    /// Passed on both.
    #[serde(rename = "PASS_TO_PASS")]
    pub pass_to_pass: Vec<String>,
    /// Passed on the base and failed (or absent) on the solution: regressions.
    #[serde(rename = "PASS_TO_FAIL")]
    pub pass_to_fail: Vec<String>,
    /// Either report was truncated, so an absent name may only have been dropped by the cap and
    /// the lists may be incomplete.
    pub incomplete: bool,
}

impl Comparison {
    /// The benchmark does not tell the solution from the base: no test goes from failing to
    /// passing (SWE-bench would have no `FAIL_TO_PASS` to grade).
    pub fn tests_nothing_new(&self) -> bool {
        self.fail_to_pass.is_empty()
    }
}

fn passed(status: Option<Status>) -> bool {
    status == Some(Status::Passed)
}

fn failed(status: Option<Status>) -> bool {
    status.is_none_or(Status::is_failing)
}

/// Compares the base run's report with the solution run's.
pub fn compare(base: &TestReport, solution: &TestReport) -> Result<Comparison, CompareError> {
    if base.runner == Runner::Unknown {
        return Err(CompareError::UnknownFormat { which: "base" });
    }
    if solution.runner == Runner::Unknown {
        return Err(CompareError::UnknownFormat { which: "solution" });
    }
    if base.runner != solution.runner {
        return Err(CompareError::DifferentRunners {
            base: base.runner,
            solution: solution.runner,
        });
    }
    let mut out = Comparison {
        incomplete: base.truncated || solution.truncated,
        ..Comparison::default()
    };
    // Each name looked up once per row, not by scanning both runs per name (#41 item 5).
    for (name, seen) in by_name(&[base, solution]) {
        let status = |run: usize| seen.iter().find(|(r, _)| *r == run).map(|(_, s)| *s);
        let (on_base, on_solution) = (status(0), status(1));
        let name = name.0;
        if passed(on_solution) {
            if passed(on_base) {
                out.pass_to_pass.push(name.to_owned());
            } else if on_base.is_none() {
                out.not_run_on_base.push(name.to_owned());
            } else if failed(on_base) {
                out.fail_to_pass.push(name.to_owned());
            }
        } else if passed(on_base) && failed(on_solution) {
            out.pass_to_fail.push(name.to_owned());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(runner: Runner, rows: &[(&str, Status)]) -> TestReport {
        TestReport::of_rows(runner, rows)
    }

    #[test]
    fn swe_bench_lists_from_two_runs() {
        use Status::*;
        let base = report(
            Runner::Pytest,
            &[
                ("fixed", Failed),
                ("fixed_from_error", Error),
                ("kept", Passed),
                ("broken", Passed),
                ("vanished", Passed),
                ("still_failing", Failed),
                ("skipped_then_passing", Skipped),
            ],
        );
        let solution = report(
            Runner::Pytest,
            &[
                ("fixed", Passed),
                ("fixed_from_error", Passed),
                ("kept", Passed),
                ("broken", Error),
                ("still_failing", Failed),
                ("skipped_then_passing", Passed),
                ("new_and_passing", Passed),
            ],
        );
        let c = compare(&base, &solution).unwrap();
        assert_eq!(c.fail_to_pass, ["fixed", "fixed_from_error"]);
        assert_eq!(c.not_run_on_base, ["new_and_passing"]);
        assert_eq!(c.pass_to_pass, ["kept"]);
        assert_eq!(c.pass_to_fail, ["broken", "vanished"]);
        assert!(!c.incomplete);
        assert!(!c.tests_nothing_new());
    }

    /// #42 item 7: `cargo test` stops after the first test binary that fails, so the base run
    /// printed 2 failures and never ran the other binaries' tests. Those are not FAIL_TO_PASS
    /// (nothing showed them failing): they are listed apart, as not run on the base.
    #[test]
    fn tests_that_never_ran_on_the_base_are_not_fail_to_pass() {
        use Status::*;
        let base = report(
            Runner::Libtest,
            &[("lib::a", Failed), ("lib::b", Failed), ("lib::c", Passed)],
        );
        let mut rows = vec![("lib::a", Passed), ("lib::b", Passed), ("lib::c", Passed)];
        let later: Vec<String> = (0..8).map(|i| format!("it::t{i}")).collect();
        rows.extend(later.iter().map(|n| (n.as_str(), Passed)));
        let solution = report(Runner::Libtest, &rows);
        let c = compare(&base, &solution).unwrap();
        assert_eq!(c.fail_to_pass, ["lib::a", "lib::b"]);
        assert_eq!(c.not_run_on_base, later);
        assert_eq!(c.pass_to_pass, ["lib::c"]);
    }

    #[test]
    fn no_fail_to_pass_is_flagged() {
        let base = report(Runner::Libtest, &[("a", Status::Passed)]);
        let c = compare(&base, &base).unwrap();
        assert!(c.tests_nothing_new());
        assert_eq!(c.pass_to_pass, ["a"]);
    }

    #[test]
    fn unknown_or_different_formats_are_not_compared() {
        let known = report(Runner::Libtest, &[("a", Status::Passed)]);
        assert_eq!(
            compare(&TestReport::unknown(), &known),
            Err(CompareError::UnknownFormat { which: "base" })
        );
        assert_eq!(
            compare(&known, &TestReport::unknown()),
            Err(CompareError::UnknownFormat { which: "solution" })
        );
        let other = report(Runner::Pytest, &[("a", Status::Passed)]);
        assert!(matches!(
            compare(&known, &other),
            Err(CompareError::DifferentRunners { .. })
        ));
    }

    #[test]
    fn twelve_thousand_fake_tests_on_base_and_solution_cost_comparisons_linear_in_rows() {
        use crate::report::work;
        // Comparisons allowed per row (see `flaky`'s tests): a B-tree search each, not a scan.
        const PER_ROW: u64 = 64;
        let names: Vec<String> = (0..12_000).map(|i| format!("fake::t{i:05}")).collect();
        let rows = |status| -> Vec<(&str, Status)> {
            names.iter().map(|n| (n.as_str(), status)).collect()
        };
        let base = report(Runner::Libtest, &rows(Status::Failed));
        let solution = report(Runner::Libtest, &rows(Status::Passed));
        let (c, comparisons) = work::counted(PER_ROW * 24_000, || compare(&base, &solution));
        let c = c.unwrap();
        assert_eq!(c.fail_to_pass.len(), 12_000);
        assert!(c.pass_to_pass.is_empty() && c.pass_to_fail.is_empty());
        assert!(comparisons <= PER_ROW * 24_000, "{comparisons}");
    }

    #[test]
    fn a_truncated_side_marks_the_lists_incomplete() {
        let base = report(Runner::Libtest, &[("a", Status::Passed)]);
        let mut solution = base.clone();
        solution.truncated = true;
        assert!(compare(&base, &solution).unwrap().incomplete);
    }

    #[test]
    fn json_uses_swe_bench_keys() {
        let base = report(Runner::Libtest, &[("a", Status::Failed)]);
        let solution = report(Runner::Libtest, &[("a", Status::Passed)]);
        let json = serde_json::to_string(&compare(&base, &solution).unwrap()).unwrap();
        assert_eq!(
            json,
            r#"{"FAIL_TO_PASS":["a"],"NOT_RUN_ON_BASE":[],"PASS_TO_PASS":[],"PASS_TO_FAIL":[],"incomplete":false}"#
        );
    }
}
