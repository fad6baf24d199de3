//! Text for people: a report's failing tests first, SWE-bench's lists, flaky tests. Names are
//! already terminal-safe; every block says where its rows came from.

use std::fmt::Write as _;

use crate::analysis::Analysis;
use crate::flaky::FlakyTest;
use crate::report::{Runner, Status, TestOutcome, TestReport};

/// How a status is shown.
pub fn status_word(status: Status) -> &'static str {
    match status {
        Status::Passed => "passed",
        Status::Failed => "FAILED",
        Status::Skipped => "skipped",
        Status::Error => "ERROR",
    }
}

/// The runner as shown.
pub fn runner_name(runner: Runner) -> &'static str {
    match runner {
        Runner::Unknown => "unknown",
        Runner::Unittest => "unittest",
        Runner::Pytest => "pytest",
        Runner::Libtest => "libtest",
        Runner::GoTest => "go test -v",
        Runner::GoTestJson => "go test -json",
        Runner::Tap => "TAP",
        Runner::JunitXml => "JUnit XML",
    }
}

fn duration(micros: u64) -> String {
    if micros >= 1_000_000 {
        format!(
            "{}.{:02} s",
            micros / 1_000_000,
            (micros % 1_000_000) / 10_000
        )
    } else {
        format!("{}.{} ms", micros / 1000, (micros % 1000) / 100)
    }
}

fn row(test: &TestOutcome) -> String {
    let mut line = format!("{:<8} {}", status_word(test.status), test.name);
    if let Some(micros) = test.duration_micros {
        let _ = write!(line, " ({})", duration(micros));
    }
    line
}

/// The report as lines: a heading with the runner and counts, then up to `max_rows` rows,
/// failing first (the report's order), and a line saying how many were left out. A report of
/// unknown format is one line, `tests: unknown …`.
pub fn report_lines(report: &TestReport, max_rows: usize) -> Vec<String> {
    if report.runner == Runner::Unknown {
        return vec!["tests: unknown (no known test runner's output was recognised)".to_owned()];
    }
    let c = &report.counts;
    let mut heading = format!(
        "tests ({}, as printed by the run's own output; not part of the verdict): {} passed, {} \
         failed, {} error, {} skipped",
        runner_name(report.runner),
        c.passed,
        c.failed,
        c.error,
        c.skipped
    );
    if report.truncated {
        heading.push_str(" (capped: more were printed)");
    }
    let mut lines = vec![heading];
    lines.extend(
        report
            .tests
            .iter()
            .take(max_rows)
            .map(|t| format!("  {}", row(t))),
    );
    if report.tests.len() > max_rows {
        lines.push(format!("  … {} more", report.tests.len() - max_rows));
    }
    lines
}

fn list(lines: &mut Vec<String>, key: &str, names: &[String], max_rows: usize) {
    lines.push(format!("  {key} ({})", names.len()));
    lines.extend(names.iter().take(max_rows).map(|n| format!("    {n}")));
    if names.len() > max_rows {
        lines.push(format!("    … {} more", names.len() - max_rows));
    }
}

/// The per-test part of a rehearsal: SWE-bench's lists, then flaky tests, up to `max_rows`
/// names each. Warnings are not included (the caller prints them with its own).
pub fn analysis_lines(analysis: &Analysis, max_rows: usize) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(c) = &analysis.comparison {
        lines.push(
            "tests, base tree against the solution (as the runs printed them; SWE-bench's lists)"
                .to_owned(),
        );
        list(&mut lines, "FAIL_TO_PASS", &c.fail_to_pass, max_rows);
        if !c.not_run_on_base.is_empty() {
            list(&mut lines, "NOT_RUN_ON_BASE", &c.not_run_on_base, max_rows);
        }
        list(&mut lines, "PASS_TO_FAIL", &c.pass_to_fail, max_rows);
        list(&mut lines, "PASS_TO_PASS", &c.pass_to_pass, max_rows);
    } else if let Some(why) = &analysis.comparison_unavailable {
        lines.push(format!(
            "tests, base tree against the solution: not compared ({why})"
        ));
    }
    if !analysis.flaky.is_empty() {
        lines.push(format!("flaky tests ({})", analysis.flaky.len()));
        for test in analysis.flaky.iter().take(max_rows) {
            lines.push(format!("  {}  {}", test.name, statuses(test)));
        }
        if analysis.flaky.len() > max_rows {
            lines.push(format!("  … {} more", analysis.flaky.len() - max_rows));
        }
    }
    lines
}

fn statuses(test: &FlakyTest) -> String {
    let each: Vec<&str> = test
        .statuses
        .iter()
        .map(|s| s.map_or("absent", status_word))
        .collect();
    format!("[{}]", each.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{analyse, parse};

    #[test]
    fn failing_tests_are_listed_first_with_durations() {
        let report = parse(
            b"=== RUN   TestA\n--- PASS: TestA (1.50s)\n--- FAIL: TestB (0.02s)\n--- SKIP: TestC (0.00s)\n",
            b"",
        );
        assert_eq!(
            report_lines(&report, 10),
            [
                "tests (go test -v, as printed by the run's own output; not part of the verdict): \
                 1 passed, 1 failed, 0 error, 1 skipped",
                "  FAILED   TestB (20.0 ms)",
                "  passed   TestA (1.50 s)",
                "  skipped  TestC (0.0 ms)",
            ]
        );
        assert_eq!(report_lines(&report, 1).last().unwrap(), "  … 2 more");
    }

    #[test]
    fn unknown_is_one_line() {
        assert_eq!(
            report_lines(&parse(b"hi\n", b""), 10),
            ["tests: unknown (no known test runner's output was recognised)"]
        );
    }

    #[test]
    fn lists_and_flaky_tests_are_shown() {
        let base = parse(b"running 1 test\ntest a ... FAILED\ntest b ... ok\n", b"");
        let good = parse(b"running 1 test\ntest a ... ok\ntest b ... ok\n", b"");
        let flaky_run = parse(b"running 1 test\ntest a ... ok\ntest b ... FAILED\n", b"");
        let analysis = analyse(&[good, flaky_run], Some(&base));
        assert_eq!(
            analysis_lines(&analysis, 10),
            [
                "tests, base tree against the solution (as the runs printed them; SWE-bench's lists)",
                "  FAIL_TO_PASS (1)",
                "    a",
                "  PASS_TO_FAIL (0)",
                "  PASS_TO_PASS (1)",
                "    b",
                "flaky tests (1)",
                "  b  [passed, FAILED]",
            ]
        );
    }
}
