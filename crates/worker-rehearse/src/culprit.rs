//! Which of the files a passing `exit_on_load` stub replaced the pass hinges on, found by
//! experiment: delta debugging over real container runs.
//!
//! Ordering the replaced files by what the benchmark's text names ([`super::references`]) misses
//! a path put together at run time, and with 238 files replaced the line that names three of
//! them hides the one that matters. So each trial is a tree built from the source in which only
//! a subset of those files is replaced by its exit stub and the other replaced files are left
//! out (every file the stub kept is kept), run once in a fresh container like any stub. A
//! subset whose tree still passes holds what the bypass needs.
//!
//! The search is a fixed sequence that depends only on the trials' verdicts, never on timing:
//! first no file at all (when the kept files alone pass, no replaced file is needed and the
//! search stops), then the files the benchmark runs by name, then halves, first half before
//! second, keeping whichever passes, until one file is left, neither half passes alone (the pass
//! needs files of both: the set is the smallest found, not proven minimal) or the run budget is
//! spent. A trial without a verdict counts as not passing.

use serde::Serialize;

/// Most trial runs one search makes.
pub const CULPRIT_BUDGET: u32 = 8;

/// One trial: the files replaced (the other replaced files left out) and the run's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Trial {
    /// The subset replaced by exit stubs.
    pub replaced: Vec<String>,
    /// `passed`, `failed` or `no_verdict`.
    pub status: &'static str,
}

/// What the search found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Culprit {
    /// The stub whose replaced files were searched (`exit_on_load`).
    pub stub: String,
    /// The smallest subset found whose replacement alone passes, in the stub's order; empty
    /// when the kept files alone pass.
    pub files: Vec<String>,
    /// How many files the stub replaced.
    pub of: usize,
    /// True when `files` is one file and the tree with none replaced failed: nothing smaller
    /// passes.
    pub minimal: bool,
    /// The tree with none of the replaced files (only the kept ones) passed.
    pub kept_files_alone_pass: bool,
    /// Trial runs made.
    pub runs: u32,
    /// [`CULPRIT_BUDGET`].
    pub budget: u32,
    /// Every trial, in the order run.
    pub trials: Vec<Trial>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Empty,
    Named,
    First,
    Second,
    Done,
}

/// The search as a state machine: [`Search::next`] names the subset to try, [`Search::record`]
/// takes its run's status. Kept free of the engine so its order is tested without containers.
#[derive(Debug, Clone)]
pub struct Search {
    current: Vec<String>,
    named: Vec<String>,
    of: usize,
    phase: Phase,
    kept_alone: bool,
    budget: u32,
    trials: Vec<Trial>,
}

impl Search {
    /// A search over `replaced` (the stub's order); `run_by_benchmark` are those of them the
    /// benchmark runs by name, tried together first.
    pub fn new(replaced: Vec<String>, run_by_benchmark: &[String], budget: u32) -> Self {
        let named = replaced
            .iter()
            .filter(|f| run_by_benchmark.contains(f))
            .cloned()
            .collect();
        Self {
            of: replaced.len(),
            current: replaced,
            named,
            phase: Phase::Empty,
            kept_alone: false,
            budget,
            trials: Vec::new(),
        }
    }

    fn halves(&self) -> (&[String], &[String]) {
        self.current.split_at(self.current.len().div_ceil(2))
    }

    fn halving(&self) -> Phase {
        if self.current.len() <= 1 {
            Phase::Done
        } else {
            Phase::First
        }
    }

    /// The subset to try next, or `None` when the search is over.
    pub fn next(&self) -> Option<Vec<String>> {
        if self.trials.len() as u32 >= self.budget {
            return None;
        }
        match self.phase {
            Phase::Empty => Some(Vec::new()),
            Phase::Named => Some(self.named.clone()),
            Phase::First => Some(self.halves().0.to_vec()),
            Phase::Second => Some(self.halves().1.to_vec()),
            Phase::Done => None,
        }
    }

    /// Takes the status of the run of `tried` (what [`Search::next`] gave).
    pub fn record(&mut self, tried: Vec<String>, status: &'static str) {
        let passed = status == "passed";
        self.trials.push(Trial {
            replaced: tried.clone(),
            status,
        });
        self.phase = match self.phase {
            Phase::Empty if passed => {
                self.kept_alone = true;
                self.current.clear();
                Phase::Done
            }
            Phase::Empty => {
                let proper = !self.named.is_empty() && self.named.len() < self.current.len();
                if proper { Phase::Named } else { self.halving() }
            }
            Phase::Named => {
                if passed {
                    self.current = tried;
                }
                self.halving()
            }
            Phase::First | Phase::Second if passed => {
                self.current = tried;
                self.halving()
            }
            Phase::First => Phase::Second,
            Phase::Second | Phase::Done => Phase::Done,
        };
    }

    /// What was found.
    pub fn finish(self, stub: &str) -> Culprit {
        let empty_failed = self
            .trials
            .first()
            .is_some_and(|t| t.replaced.is_empty() && t.status != "passed");
        Culprit {
            stub: stub.to_owned(),
            minimal: empty_failed && self.current.len() == 1,
            files: self.current,
            of: self.of,
            kept_files_alone_pass: self.kept_alone,
            runs: self.trials.len() as u32,
            budget: self.budget,
            trials: self.trials,
        }
    }
}

impl Culprit {
    /// The report's line under the stub lines.
    pub fn line(&self, printable: impl Fn(&str) -> String) -> String {
        let runs = match self.runs {
            1 => "1 run".to_owned(),
            n => format!("{n} runs"),
        };
        if self.kept_files_alone_pass {
            return format!(
                "  culprit: none of the {} replaced files: the files the stub kept pass alone \
                 (found in {runs})\n",
                self.of
            );
        }
        let others = self.of - self.files.len();
        if others == 0 && !self.minimal {
            return format!(
                "  culprit: not narrowed: no half of the {} replaced files passes alone, so the \
                 pass needs files of both (tried in {runs})\n",
                self.of
            );
        }
        let others = match others {
            1 => "the other replaced file".to_owned(),
            n => format!("the other {n} replaced files"),
        };
        let shown: Vec<String> = self.files.iter().map(|f| printable(f)).collect();
        if self.minimal {
            format!(
                "  culprit: {}: replacing it alone ({others} left out) makes the benchmark pass \
                 (found in {runs})\n",
                shown.join(", ")
            )
        } else {
            let stop = if self.runs >= self.budget {
                "the run budget was spent"
            } else {
                "neither half of them passes alone"
            };
            let listed: Vec<String> = shown.iter().take(5).cloned().collect();
            let more = match self.files.len().saturating_sub(5) {
                0 => String::new(),
                n => format!(" and {n} more"),
            };
            format!(
                "  culprit: replacing only these {} ({others} left out) makes the benchmark pass: \
                 {}{more} (smallest found in {runs}: {stop})\n",
                self.files.len(),
                listed.join(", ")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("f{i:02}.py")).collect()
    }

    /// Drives a search against a verdict that passes exactly when `needs` are all replaced.
    fn drive(replaced: Vec<String>, named: &[String], needs: &[&str], budget: u32) -> Culprit {
        let mut search = Search::new(replaced, named, budget);
        while let Some(tried) = search.next() {
            let passed = needs.iter().all(|n| tried.iter().any(|t| t == n));
            let status = if passed { "passed" } else { "failed" };
            search.record(tried, status);
        }
        search.finish("exit_on_load")
    }

    #[test]
    fn one_culprit_among_eleven_is_found_within_the_budget() {
        for at in 0..11 {
            let name = format!("f{at:02}.py");
            let found = drive(files(11), &[], &[&name], CULPRIT_BUDGET);
            assert_eq!(found.files, [name], "{found:?}");
            assert!(found.minimal, "{found:?}");
            assert!(found.runs <= CULPRIT_BUDGET, "{found:?}");
            assert_eq!(found.trials[0].replaced, Vec::<String>::new());
        }
    }

    #[test]
    fn the_files_the_benchmark_runs_are_tried_first_and_can_settle_it_at_once() {
        let named = vec!["tools/check.py".to_owned()];
        let mut replaced = files(238);
        replaced.insert(0, "tools/check.py".into());
        let found = drive(replaced, &named, &["tools/check.py"], CULPRIT_BUDGET);
        assert_eq!(found.files, ["tools/check.py"]);
        assert!(found.minimal);
        assert_eq!(found.runs, 2, "{found:?}");
    }

    #[test]
    fn kept_files_that_pass_alone_stop_the_search_and_blame_no_file() {
        let found = drive(files(5), &[], &[], CULPRIT_BUDGET);
        assert!(found.kept_files_alone_pass);
        assert!(found.files.is_empty());
        assert!(!found.minimal);
        assert_eq!(found.runs, 1);
        assert!(
            found
                .line(str::to_owned)
                .contains("none of the 5 replaced files")
        );
    }

    #[test]
    fn a_pass_needing_files_of_both_halves_stops_at_the_smallest_set_found() {
        let found = drive(files(8), &[], &["f00.py", "f07.py"], CULPRIT_BUDGET);
        assert_eq!(found.files.len(), 8, "{found:?}");
        assert!(!found.minimal);
        assert_eq!(found.runs, 3);
        let line = found.line(str::to_owned);
        assert_eq!(
            line,
            "  culprit: not narrowed: no half of the 8 replaced files passes alone, so the pass \
             needs files of both (tried in 3 runs)\n"
        );
        // Narrowed once, then stuck: the subset found is named, with why the search stopped.
        let found = drive(files(16), &[], &["f00.py", "f07.py"], CULPRIT_BUDGET);
        assert_eq!(found.files.len(), 8, "{found:?}");
        let line = found.line(str::to_owned);
        assert!(
            line.starts_with(
                "  culprit: replacing only these 8 (the other 8 replaced files left out)"
            ),
            "{line}"
        );
        assert!(line.contains("neither half of them passes alone"), "{line}");
    }

    #[test]
    fn the_budget_bounds_the_runs_and_is_named_when_spent() {
        let found = drive(files(238), &[], &["f237.py"], CULPRIT_BUDGET);
        assert_eq!(found.runs, CULPRIT_BUDGET);
        assert!(!found.minimal);
        assert!(found.files.contains(&"f237.py".to_owned()));
        assert!(found.files.len() < 238);
        assert!(found.line(str::to_owned).contains("run budget was spent"));
    }

    #[test]
    fn a_trial_without_a_verdict_counts_as_not_passing() {
        let mut search = Search::new(files(2), &[], CULPRIT_BUDGET);
        let empty = search.next().unwrap();
        search.record(empty, "failed");
        let first = search.next().unwrap();
        assert_eq!(first, ["f00.py"]);
        search.record(first, "no_verdict");
        let second = search.next().unwrap();
        assert_eq!(second, ["f01.py"]);
        search.record(second, "passed");
        assert_eq!(search.next(), None);
        let found = search.finish("exit_on_load");
        assert_eq!(found.files, ["f01.py"]);
        assert!(found.minimal);
    }
}
