//! Tests whose status differs between repeated runs of the same thing: the one test an author
//! should fix, named instead of guessed.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::report::{Runner, Status, TestReport};

/// A test that did not report the same status in every run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlakyTest {
    /// The test's name.
    pub name: String,
    /// Its status in each run, in run order; `None` where that run did not report it.
    pub statuses: Vec<Option<Status>>,
}

/// Every test whose status differs across `runs`, by name. A test missing from a run counts as
/// a different outcome (it did not run, or the run ended before it), except in a run that was
/// truncated (the cap may have dropped it) or whose format was unknown (nothing is known);
/// such a run is left out of that test's comparison but keeps its place (`None`) in `statuses`.
pub fn flaky(runs: &[TestReport]) -> Vec<FlakyTest> {
    let names: BTreeSet<&str> = runs
        .iter()
        .flat_map(|r| r.tests.iter().map(|t| t.name.as_str()))
        .collect();
    let mut out = Vec::new();
    for name in names {
        let statuses: Vec<Option<Status>> = runs.iter().map(|r| r.status_of(name)).collect();
        let compared: BTreeSet<Option<Status>> = runs
            .iter()
            .zip(&statuses)
            .filter(|(run, status)| {
                status.is_some() || (!run.truncated && run.runner != Runner::Unknown)
            })
            .map(|(_, status)| *status)
            .collect();
        if compared.len() > 1 {
            out.push(FlakyTest {
                name: name.to_owned(),
                statuses,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rows: &[(&str, Status)]) -> TestReport {
        TestReport::of_rows(Runner::Unittest, rows)
    }

    #[test]
    fn a_test_that_passes_only_sometimes_is_named() {
        use Status::*;
        let runs = [
            run(&[("steady", Passed), ("flaky", Passed), ("gone", Passed)]),
            run(&[("steady", Passed), ("flaky", Failed)]),
            run(&[("steady", Passed), ("flaky", Passed), ("gone", Passed)]),
        ];
        let found = flaky(&runs);
        assert_eq!(
            found,
            [
                FlakyTest {
                    name: "flaky".into(),
                    statuses: vec![Some(Passed), Some(Failed), Some(Passed)],
                },
                FlakyTest {
                    name: "gone".into(),
                    statuses: vec![Some(Passed), None, Some(Passed)],
                },
            ]
        );
    }

    #[test]
    fn steady_runs_have_no_flaky_tests() {
        let runs = [run(&[("a", Status::Failed)]), run(&[("a", Status::Failed)])];
        assert!(flaky(&runs).is_empty());
        assert!(flaky(&[]).is_empty());
    }

    #[test]
    fn a_truncated_or_unknown_run_does_not_make_absent_tests_flaky() {
        let mut cut = run(&[]);
        cut.truncated = true;
        let runs = [run(&[("a", Status::Passed)]), cut, TestReport::unknown()];
        assert!(flaky(&runs).is_empty());
    }
}
