//! What a rehearsal says about its runs' tests: SWE-bench's lists against the base run, the
//! tests whose status changed across repeats, and the warnings both call for. Warnings only:
//! rows come from solver-controlled output, so nothing here may change a verdict or an exit code.

use serde::{Deserialize, Serialize};

use crate::compare::{Comparison, compare};
use crate::flaky::{FlakyTest, flaky};
use crate::report::{Runner, TestReport};

/// The per-test part of a rehearsal.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Analysis {
    /// Base run against the first solution run, with `--base` and when both formats are known
    /// and the same.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Comparison>,
    /// Why there is no comparison although a base run was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comparison_unavailable: Option<String>,
    /// Tests whose status differs across the solution runs (with `--repeat`).
    pub flaky: Vec<FlakyTest>,
    /// What a person should look at; never a problem that changes the exit code.
    pub warnings: Vec<String>,
}

/// Most flaky test names spelled out in one warning (all are in [`Analysis::flaky`]).
const NAMED_IN_WARNING: usize = 10;

/// Analyses the solution runs (in order) and, with `--base`, the base run.
pub fn analyse(solution: &[TestReport], base: Option<&TestReport>) -> Analysis {
    let mut out = Analysis::default();
    if let (Some(base), Some(first)) = (base, solution.first()) {
        match compare(base, first) {
            Ok(comparison) => {
                if comparison.tests_nothing_new() {
                    out.warnings.push(
                        "FAIL_TO_PASS is empty: no test fails on the base tree and passes on the \
                         solution, so the benchmark's tests do not test the change"
                            .to_owned(),
                    );
                }
                if let Some(warning) = not_run_on_base(&comparison, base) {
                    out.warnings.push(warning);
                }
                if !comparison.pass_to_fail.is_empty() {
                    out.warnings.push(format!(
                        "PASS_TO_FAIL is not empty: {} test(s) pass on the base tree and fail on \
                         the solution (regressions)",
                        comparison.pass_to_fail.len()
                    ));
                }
                if comparison.incomplete {
                    out.warnings.push(
                        "a run's test list was capped: FAIL_TO_PASS / PASS_TO_PASS / PASS_TO_FAIL \
                         may be incomplete"
                            .to_owned(),
                    );
                }
                out.comparison = Some(comparison);
            }
            Err(e) => out.comparison_unavailable = Some(e.to_string()),
        }
    }
    if solution.len() > 1 {
        out.flaky = flaky(solution);
        if !out.flaky.is_empty() {
            let mut names: Vec<&str> = out
                .flaky
                .iter()
                .take(NAMED_IN_WARNING)
                .map(|f| f.name.as_str())
                .collect();
            if out.flaky.len() > NAMED_IN_WARNING {
                names.push("…");
            }
            out.warnings.push(format!(
                "{} test(s) changed status across the {} runs (flaky): {}",
                out.flaky.len(),
                solution.len(),
                names.join(", ")
            ));
        }
    }
    out
}

/// Tests named in the `NOT_RUN_ON_BASE` warning (all are in the list).
const NOT_RUN_NAMED: usize = 3;

/// The warning for tests the solution passed that the base run never reported, with why they
/// were not counted as `FAIL_TO_PASS` and the likeliest reason they did not run (#42 item 7).
fn not_run_on_base(comparison: &Comparison, base: &TestReport) -> Option<String> {
    let names = &comparison.not_run_on_base;
    if names.is_empty() {
        return None;
    }
    let mut shown: Vec<&str> = names
        .iter()
        .take(NOT_RUN_NAMED)
        .map(String::as_str)
        .collect();
    if names.len() > NOT_RUN_NAMED {
        shown.push("…");
    }
    let base_failed = base.failing().next().is_some();
    let why = match (base.runner, base_failed) {
        (Runner::Libtest, true) => {
            "`cargo test` stops after the first test binary that fails, so the base run never \
             reached them; run `cargo test --no-fail-fast` in the benchmark to have every binary \
             run on the base tree"
        }
        (_, true) => {
            "the base run stopped before them (a runner that stops at the first failure, or a \
             crash) or the solution adds them"
        }
        (_, false) => "the solution adds them, or the base run did not collect them",
    };
    Some(format!(
        "NOT_RUN_ON_BASE: {} test(s) passed on the solution but did not run on the base tree \
         ({}), so they are not counted as FAIL_TO_PASS: nothing showed them failing there; {why}",
        names.len(),
        shown.join(", ")
    ))
}

/// The in-toto test-result predicate's `passedTests` and `failedTests` (failed and error)
/// from a report, or `None` when its format was unknown (the caller keeps its own default).
pub fn predicate_lists(report: &TestReport) -> Option<(Vec<String>, Vec<String>)> {
    if report.runner == Runner::Unknown {
        return None;
    }
    let passed = report.passing().map(|t| t.name.clone()).collect();
    let failed = report.failing().map(|t| t.name.clone()).collect();
    Some((passed, failed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    fn libtest(lines: &str) -> TestReport {
        parse(format!("running 1 test\n{lines}").as_bytes(), b"")
    }

    #[test]
    fn base_and_solution_give_the_lists_and_no_warning_when_the_change_is_tested() {
        let base = libtest("test a ... FAILED\ntest b ... ok\n");
        let solution = libtest("test a ... ok\ntest b ... ok\n");
        let analysis = analyse(&[solution], Some(&base));
        let c = analysis.comparison.unwrap();
        assert_eq!(c.fail_to_pass, ["a"]);
        assert_eq!(c.pass_to_pass, ["b"]);
        assert!(analysis.warnings.is_empty(), "{:?}", analysis.warnings);
    }

    #[test]
    fn empty_fail_to_pass_and_regressions_are_warned() {
        let base = libtest("test a ... ok\ntest b ... ok\n");
        let solution = libtest("test a ... ok\ntest b ... FAILED\n");
        let analysis = analyse(&[solution], Some(&base));
        assert_eq!(analysis.warnings.len(), 2);
        assert!(analysis.warnings[0].starts_with("FAIL_TO_PASS is empty"));
        assert!(analysis.warnings[1].starts_with("PASS_TO_FAIL is not empty: 1 test"));
    }

    /// #42 item 7: the base run of a Rust crate stopped after its first failing test binary;
    /// the other binaries' tests are listed apart and the warning says why.
    #[test]
    fn tests_that_did_not_run_on_the_base_are_warned_about_with_why() {
        let base = parse(
            b"running 2 tests\ntest lib::a ... FAILED\ntest lib::b ... ok\n\
              error: test failed, to rerun pass `--lib`\n",
            b"",
        );
        let solution = libtest(
            "test lib::a ... ok\ntest lib::b ... ok\ntest it::c ... ok\ntest it::d ... ok\n",
        );
        let analysis = analyse(&[solution], Some(&base));
        let c = analysis.comparison.unwrap();
        assert_eq!(c.fail_to_pass, ["lib::a"]);
        assert_eq!(c.not_run_on_base, ["it::c", "it::d"]);
        assert_eq!(analysis.warnings.len(), 1, "{:?}", analysis.warnings);
        let warning = &analysis.warnings[0];
        assert!(
            warning.starts_with(
                "NOT_RUN_ON_BASE: 2 test(s) passed on the solution but did not run on the base \
                 tree (it::c, it::d), so they are not counted as FAIL_TO_PASS"
            ),
            "{warning}"
        );
        assert!(warning.contains("cargo test --no-fail-fast"), "{warning}");
    }

    #[test]
    fn unknown_output_gives_no_comparison_and_says_why() {
        let analysis = analyse(&[libtest("test a ... ok\n")], Some(&parse(b"hello\n", b"")));
        assert!(analysis.comparison.is_none());
        assert_eq!(
            analysis.comparison_unavailable.as_deref(),
            Some("the base run's output has no recognised test format")
        );
    }

    #[test]
    fn repeats_name_the_flaky_test() {
        let runs = [
            libtest("test steady ... ok\ntest wobbly ... ok\n"),
            libtest("test steady ... ok\ntest wobbly ... FAILED\n"),
        ];
        let analysis = analyse(&runs, None);
        assert_eq!(analysis.flaky.len(), 1);
        assert_eq!(analysis.flaky[0].name, "wobbly");
        assert_eq!(
            analysis.warnings,
            ["1 test(s) changed status across the 2 runs (flaky): wobbly"]
        );
        assert!(analyse(&runs[..1], None).warnings.is_empty());
    }

    /// What a solution printing `lines` fake libtest results prints, `failing` of them failed.
    fn fake_libtest(lines: usize, failing: usize) -> TestReport {
        let mut out = format!("running {lines} tests\n");
        for i in 0..lines {
            let word = if i < failing { "FAILED" } else { "ok" };
            out.push_str(&format!("test fake::t{i:05} ... {word}\n"));
        }
        parse(out.as_bytes(), b"")
    }

    /// The rehearsal of #41 item 5: a solution printing 12,000 fake test lines, rehearsed with
    /// `--repeat 10` and `--base`. The work is counted in name comparisons (a count, never a
    /// time): a few dozen per row of each run, where comparing each name with every row cost
    /// 32.7 s of host CPU.
    #[test]
    fn rehearsing_12000_fake_test_lines_with_repeat_10_and_a_base_costs_linear_comparisons() {
        use crate::report::work;
        const PER_ROW: u64 = 64;
        let base = fake_libtest(12_000, 12_000);
        let solution = vec![fake_libtest(12_000, 0); 10];
        // The base and every solution run, and the first solution run again for the lists.
        let rows = 12_000 * 12;
        let (analysis, comparisons) =
            work::counted(PER_ROW * rows, || analyse(&solution, Some(&base)));
        assert_eq!(analysis.comparison.unwrap().fail_to_pass.len(), 12_000);
        assert!(analysis.flaky.is_empty());
        assert!(comparisons <= PER_ROW * rows, "{comparisons}");
    }

    /// Linear by structure as well as under the budget: twice the rows cost at most a little
    /// more per row (a B-tree's extra level), never twice as much per row as a scan does.
    #[test]
    fn twice_the_fake_test_lines_cost_about_the_same_comparisons_per_row() {
        use crate::report::work;
        let per_row = |lines: usize| {
            let base = fake_libtest(lines, lines / 2);
            let solution = vec![fake_libtest(lines, 0); 3];
            let (_, comparisons) = work::counted(u64::MAX, || analyse(&solution, Some(&base)));
            comparisons as f64 / (lines * 5) as f64
        };
        let (small, large) = (per_row(1_000), per_row(2_000));
        assert!(
            large <= small * 1.3,
            "{small:.1} comparisons per row at 1,000 lines, {large:.1} at 2,000"
        );
    }

    #[test]
    fn predicate_lists_name_real_tests_or_nothing() {
        let report = libtest("test a ... ok\ntest b ... FAILED\n");
        assert_eq!(
            predicate_lists(&report),
            Some((vec!["a".to_owned()], vec!["b".to_owned()]))
        );
        assert_eq!(predicate_lists(&TestReport::unknown()), None);
    }
}
