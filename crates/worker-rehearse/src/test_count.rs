//! The number of tests a rehearsal saw, for an author to commit.
//!
//! A harness that passes only when exactly the expected number of tests ran (the bounty
//! harness's `run_tests.py <count>`) needs that number, and the only way to learn it used to be
//! a run outside the sandbox. The solution runs already print it: the per-test report of each
//! run counts every row its runner printed. It is solver-controlled output, like the rest of
//! the `tests` section: shown to help the author, never part of the verdict.

use serde::Serialize;

use super::exec::RunResult;
use test_outcomes::{Runner, TestReport};

/// The tests the solution runs printed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TestCount {
    /// Rows of the first solution run whose runner was recognised (passed, failed, error and
    /// skipped alike: a harness counts every test that ran).
    pub count: u64,
    /// Its runner.
    pub runner: Runner,
    /// Whether every solution run with a recognised runner printed the same count.
    pub runs_agree: bool,
    /// Always `solver-controlled-output` (see [`test_outcomes::SOURCE`]).
    pub source: &'static str,
    /// The first run's counts, for the human line.
    #[serde(skip)]
    counts: test_outcomes::Counts,
    /// Whether a cap cut the first run's rows (the count is then a lower bound).
    #[serde(skip)]
    capped: bool,
}

fn total(report: &TestReport) -> u64 {
    let c = &report.counts;
    c.passed + c.failed + c.error + c.skipped
}

/// The count the solution runs printed; `None` when no run's output was recognised.
pub fn seen(runs: &[RunResult]) -> Option<TestCount> {
    let known: Vec<&TestReport> = runs
        .iter()
        .filter_map(|r| r.explanation.tests.as_ref())
        .filter(|t| t.runner != Runner::Unknown)
        .collect();
    let first = known.first()?;
    Some(TestCount {
        count: total(first),
        runner: first.runner,
        runs_agree: known.iter().all(|t| total(t) == total(first)),
        source: test_outcomes::SOURCE,
        counts: first.counts,
        capped: first.truncated,
    })
}

impl TestCount {
    /// The human line: `test count  7 (unittest, …): the number a harness that expects a count
    /// takes`.
    pub fn line(&self) -> String {
        let c = &self.counts;
        let mut line = format!(
            "test count  {} ({}, as the solution run printed it: {} passed, {} failed, {} error, \
             {} skipped): the number a harness that expects a count takes (run_tests.py's \
             argument)",
            self.count,
            test_outcomes::render::runner_name(self.runner),
            c.passed,
            c.failed,
            c.error,
            c.skipped,
        );
        if self.capped {
            line.push_str("; capped, more were printed");
        }
        if !self.runs_agree {
            line.push_str("; the runs printed different counts");
        }
        line
    }
}
