//! Tests whose status differs between repeated runs of the same thing: the one test an author
//! should fix, named instead of guessed.

use serde::{Deserialize, Serialize};

use crate::report::{Runner, Status, TestReport, by_name};

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
///
/// Each name is looked up once per row ([`by_name`]), never by scanning every run's rows per
/// name: a solution printing thousands of fake tests under `--repeat` costs work linear in
/// rows × runs (#41 item 5). What is returned is one status per run for each flaky test.
pub fn flaky(runs: &[TestReport]) -> Vec<FlakyTest> {
    let reports: Vec<&TestReport> = runs.iter().collect();
    // Runs in which a missing name means the test did not report: neither cut by a cap nor of
    // unknown format.
    let complete: Vec<bool> = runs
        .iter()
        .map(|r| !r.truncated && r.runner != Runner::Unknown)
        .collect();
    let complete_runs = complete.iter().filter(|c| **c).count();
    let mut out = Vec::new();
    for (name, seen) in by_name(&reports) {
        let Some(&(_, first)) = seen.first() else {
            continue;
        };
        let complete_seen = seen.iter().filter(|(run, _)| complete[*run]).count();
        let absent_where_it_counts = complete_seen < complete_runs;
        if absent_where_it_counts || seen.iter().any(|(_, status)| *status != first) {
            let mut statuses = vec![None; runs.len()];
            for (run, status) in seen {
                statuses[run] = Some(status);
            }
            out.push(FlakyTest {
                name: name.0.to_owned(),
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

    /// Comparisons allowed per row of every run: a row is placed among the names once (a
    /// B-tree search: at most 16 levels of at most 11 keys at [`crate::MAX_TESTS`] names, about
    /// 30 comparisons at these sizes). Comparing each name with every row, as a scan per
    /// lookup does, costs thousands per row.
    const PER_ROW: u64 = 64;

    fn fake_run(names: &[String], status_of: impl Fn(usize) -> Status) -> TestReport {
        let rows: Vec<(&str, Status)> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), status_of(i)))
            .collect();
        run(&rows)
    }

    #[test]
    fn twelve_thousand_fake_tests_repeated_ten_times_cost_comparisons_linear_in_rows_times_runs() {
        use crate::report::work;
        let names: Vec<String> = (0..12_000).map(|i| format!("fake::t{i:05}")).collect();
        let steady = fake_run(&names, |_| Status::Passed);
        let mut runs = vec![steady; 10];
        runs[3] = fake_run(&names, |i| {
            if i == 7 {
                Status::Failed
            } else {
                Status::Passed
            }
        });
        let rows = 12_000 * 10;
        let (found, comparisons) = work::counted(PER_ROW * rows, || flaky(&runs));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].name, "fake::t00007");
        assert!(comparisons <= PER_ROW * rows, "{comparisons}");
    }

    #[test]
    fn fake_names_unique_to_each_run_cost_comparisons_linear_in_rows_times_runs() {
        use crate::report::work;
        // Every run prints names no other run prints: every name is flaky (absent elsewhere).
        let runs: Vec<TestReport> = (0..10)
            .map(|r| {
                let names: Vec<String> = (0..2_000).map(|i| format!("run{r}::t{i:05}")).collect();
                fake_run(&names, |_| Status::Passed)
            })
            .collect();
        let rows = 2_000 * 10;
        let (found, comparisons) = work::counted(PER_ROW * rows, || flaky(&runs));
        assert_eq!(found.len(), 20_000);
        assert_eq!(found[0].statuses.iter().flatten().count(), 1);
        assert!(comparisons <= PER_ROW * rows, "{comparisons}");
    }

    #[test]
    fn a_truncated_or_unknown_run_does_not_make_absent_tests_flaky() {
        let mut cut = run(&[]);
        cut.truncated = true;
        let runs = [run(&[("a", Status::Passed)]), cut, TestReport::unknown()];
        assert!(flaky(&runs).is_empty());
    }
}
