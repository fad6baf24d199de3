//! What a run's output said about its tests: the runner, one row per test, counts, and whether
//! the caps cut it short. Filled by the parser through [`Table`], which enforces the caps.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::name::safe_name;

/// Most distinct test names kept per stream and per report. A flood of fake result lines past
/// this only sets [`TestReport::truncated`]; 20 000 covers the largest suites bounties run
/// (Django's is ~17 000).
pub const MAX_TESTS: usize = 20_000;
/// Most bytes of one test name after it is made terminal-safe; longer names are cut (at a
/// character boundary) and the report marked truncated.
pub const MAX_NAME_BYTES: usize = 512;
/// Most bytes of one output line the line-based formats look at; a longer line is skipped
/// whole (JUnit XML, which runners print on one long line, is scanned byte by byte instead).
pub const MAX_LINE_BYTES: usize = 4096;
/// Upper bound on the heap one [`crate::OutcomeParser`] holds at any time, whatever it is fed.
/// Each of the two streams keeps up to [`MAX_TESTS`] rows (the streams are decided apart, see
/// [`crate::OutcomeParser::finish`]) of at most [`MAX_NAME_BYTES`] plus per-row overhead (name
/// header, status, duration, tree node share: under 128 bytes), a line buffer, a pending name,
/// a JUnit tag and the TAP nesting stack (16 names), each bounded by [`MAX_LINE_BYTES`] or
/// [`MAX_NAME_BYTES`]. 2 × 20 000 × 640 B = 24.4 MiB, plus under 1 MiB of per-stream state;
/// measured by the flood tests in `tests/flood.rs`.
pub const MEMORY_BOUND_BYTES: usize = 32 << 20;

/// Most bytes a report takes as JSON inside an evidence record ([`TestReport::fit`]): the
/// record's other fields are ~70 KiB, `worker explain` reads records of up to 4 MiB and the
/// signer candidates of up to 16 MiB, so a flood of long names must not grow the record past
/// them.
pub const RECORD_BYTES: usize = 1 << 20;

/// What this report is: the run's own printout, which the solver's code controls. It is never
/// part of a verdict, a receipt or a response hash; it is shown to help people, not to decide.
pub const SOURCE: &str = "solver-controlled-output";

/// The test runner whose output format was recognised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Runner {
    /// No known format was seen: nothing is claimed about the tests.
    Unknown,
    /// Python `unittest` with verbosity 2 (`test_x (mod.Class.test_x) ... ok`).
    Unittest,
    /// pytest `-v` result lines and/or the `-rA` short summary.
    Pytest,
    /// Rust's libtest, as `cargo test` prints it (`test name ... ok`).
    Libtest,
    /// `go test -v` (`--- PASS: TestX (0.00s)`).
    GoTest,
    /// `go test -json` events.
    GoTestJson,
    /// TAP version 13, as `node --test` prints it when its output is not a terminal.
    Tap,
    /// JUnit XML (`<testsuite>` / `<testcase>`) printed in the stream.
    JunitXml,
}

/// One test's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Passed (including an expected failure, as SWE-bench counts `XFAIL`).
    Passed,
    /// An assertion failed (including an unexpected success under unittest).
    Failed,
    /// Skipped, ignored or marked to-do.
    Skipped,
    /// The test could not run to an assertion (setup, import or collection error).
    Error,
}

impl Status {
    /// How much a repeated sighting of one name weighs: the worst report wins, so a test
    /// printed as passed and then as failed (a rerun plugin, a forged line) stays failed.
    fn severity(self) -> u8 {
        match self {
            Self::Skipped => 0,
            Self::Passed => 1,
            Self::Failed => 2,
            Self::Error => 3,
        }
    }

    /// Failed or error.
    pub fn is_failing(self) -> bool {
        matches!(self, Self::Failed | Self::Error)
    }
}

/// One test row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestOutcome {
    /// The name as the runner printed it, terminal-safe (see [`crate::name::safe_name`]).
    pub name: String,
    /// Its outcome.
    pub status: Status,
    /// Duration in microseconds, where the runner printed one (integers: no floats in records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_micros: Option<u64>,
}

/// Rows per status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Passed.
    pub passed: u64,
    /// Failed.
    pub failed: u64,
    /// Skipped.
    pub skipped: u64,
    /// Error.
    pub error: u64,
}

/// The per-test report of one run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestReport {
    /// Always [`SOURCE`]: a reader of the JSON sees where these rows came from.
    pub source: String,
    /// The format recognised; [`Runner::Unknown`] with no rows when none was.
    pub runner: Runner,
    /// Rows per status, over every row the parser kept (at most [`MAX_TESTS`]); when
    /// [`TestReport::fit`] dropped rows, `tests` holds fewer.
    pub counts: Counts,
    /// Whether a cap ([`MAX_TESTS`], [`MAX_NAME_BYTES`], [`RECORD_BYTES`]) dropped or cut
    /// anything.
    pub truncated: bool,
    /// Failing rows first (error, then failed), then passed, then skipped; by name within each.
    pub tests: Vec<TestOutcome>,
}

impl TestReport {
    /// The report of a run whose output had no recognised format.
    pub fn unknown() -> Self {
        Self {
            source: SOURCE.to_owned(),
            runner: Runner::Unknown,
            counts: Counts::default(),
            truncated: false,
            tests: Vec::new(),
        }
    }

    /// The report with rows dropped from the end (passing and skipped ones go first, since
    /// failing rows lead) until its JSON is at most `max_bytes`, counted conservatively (every
    /// name byte as if JSON escaped it, plus the row's keys at their longest). Marks the report
    /// truncated when it drops a row.
    #[must_use]
    pub fn fit(mut self, max_bytes: usize) -> Self {
        // `{"source":…,"runner":…,"counts":{…},"truncated":false,"tests":[]}` with every count
        // at 20 digits stays under 256 bytes.
        let mut used = 256usize;
        let mut keep = 0;
        for test in &self.tests {
            let row = test.name.len().saturating_mul(2).saturating_add(80);
            if used.saturating_add(row) > max_bytes {
                break;
            }
            used = used.saturating_add(row);
            keep += 1;
        }
        if keep < self.tests.len() {
            self.tests.truncate(keep);
            self.truncated = true;
        }
        self
    }

    /// The status of `name` (as stored: terminal-safe), if the run reported it. A scan of the
    /// rows: for one lookup. Comparing runs name by name goes through [`by_name`] instead, so
    /// its work stays linear in rows × runs (#41 item 5).
    pub fn status_of(&self, name: &str) -> Option<Status> {
        self.tests.iter().find(|t| t.name == name).map(|t| t.status)
    }

    /// Rows that failed or errored, in report order.
    pub fn failing(&self) -> impl Iterator<Item = &TestOutcome> {
        self.tests.iter().filter(|t| t.status.is_failing())
    }

    /// Rows that passed, in report order.
    pub fn passing(&self) -> impl Iterator<Item = &TestOutcome> {
        self.tests.iter().filter(|t| t.status == Status::Passed)
    }
}

/// A test name as the comparisons of runs order and match it: by its bytes, as `str` does.
/// In this crate's own tests every comparison is counted ([`work`]), so the work of comparing
/// runs is measured by a count rather than timed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Name<'a>(pub(crate) &'a str);

impl Ord for Name<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        #[cfg(test)]
        work::tick();
        self.0.cmp(other.0)
    }
}

impl PartialOrd for Name<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Name<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Name<'_> {}

/// Every name `runs` reported, in name order, with the status of each run that reported it:
/// (index in `runs`, status), in run order, one per run (a run's first row of a name, as
/// [`TestReport::status_of`] finds it). One B-tree search per row, so comparing runs costs
/// O(rows × log names), whether the runs print the same names or each its own.
pub(crate) fn by_name<'a>(runs: &[&'a TestReport]) -> BTreeMap<Name<'a>, Vec<(usize, Status)>> {
    let mut names: BTreeMap<Name<'a>, Vec<(usize, Status)>> = BTreeMap::new();
    for (run, report) in runs.iter().enumerate() {
        for test in &report.tests {
            let seen = names.entry(Name(&test.name)).or_default();
            if seen.last().is_none_or(|(last, _)| *last != run) {
                seen.push((run, test.status));
            }
        }
    }
    names
}

/// The name comparisons made on this thread, for the tests that bound the work of comparing
/// runs (#41 item 5): a count, so the bound holds on a busy machine and a quadratic comparison
/// fails as soon as it passes the budget instead of running for minutes.
#[cfg(test)]
pub(crate) mod work {
    use std::cell::Cell;

    thread_local! {
        static COMPARISONS: Cell<u64> = const { Cell::new(0) };
        static BUDGET: Cell<u64> = const { Cell::new(u64::MAX) };
    }

    pub(crate) fn tick() {
        let n = COMPARISONS.get() + 1;
        COMPARISONS.set(n);
        let budget = BUDGET.get();
        assert!(
            n <= budget,
            "more than {budget} name comparisons: the work is not linear in rows x runs"
        );
    }

    /// Runs `f` with at most `budget` comparisons; returns its result and the comparisons made.
    pub(crate) fn counted<T>(budget: u64, f: impl FnOnce() -> T) -> (T, u64) {
        COMPARISONS.set(0);
        BUDGET.set(budget);
        let out = f();
        BUDGET.set(u64::MAX);
        (out, COMPARISONS.get())
    }
}

#[derive(Clone, Copy, Debug)]
struct Row {
    status: Status,
    duration_micros: Option<u64>,
}

/// The rows found so far, under the caps.
#[derive(Debug, Default)]
pub(crate) struct Table {
    rows: BTreeMap<String, Row>,
    truncated: bool,
}

impl Table {
    /// Records one result line. A name seen again keeps the worse status and the first
    /// duration printed.
    pub(crate) fn record(&mut self, raw_name: &str, status: Status, duration_micros: Option<u64>) {
        self.record_under(raw_name, status, duration_micros, MAX_TESTS);
    }

    /// [`Table::record`] with at most `cap` distinct names: a table that holds rows another
    /// table will take later (go -v's rows of a package not yet named) shares that table's
    /// [`MAX_TESTS`], so the two together stay under the memory bound.
    pub(crate) fn record_under(
        &mut self,
        raw_name: &str,
        status: Status,
        duration_micros: Option<u64>,
        cap: usize,
    ) {
        let (mut name, cut) = safe_name(raw_name, MAX_NAME_BYTES);
        if cut {
            self.truncated = true;
        }
        if name.is_empty() {
            return;
        }
        // The name was built by pushing; keep only what it holds so the bound is per byte.
        name.shrink_to_fit();
        self.insert(name, status, duration_micros, cap);
    }

    /// Takes every row out, in name order, with whether a cap cut anything; the table is
    /// left empty.
    pub(crate) fn drain(&mut self) -> (bool, impl Iterator<Item = (String, Status, Option<u64>)>) {
        let truncated = std::mem::take(&mut self.truncated);
        let rows = std::mem::take(&mut self.rows);
        (
            truncated,
            rows.into_iter()
                .map(|(name, row)| (name, row.status, row.duration_micros)),
        )
    }

    /// Marks the table as cut short by a cap.
    pub(crate) fn mark_truncated(&mut self) {
        self.truncated = true;
    }

    fn insert(&mut self, name: String, status: Status, duration_micros: Option<u64>, cap: usize) {
        if let Some(row) = self.rows.get_mut(&name) {
            if status.severity() > row.status.severity() {
                row.status = status;
            }
            if row.duration_micros.is_none() {
                row.duration_micros = duration_micros;
            }
            return;
        }
        if self.rows.len() >= cap.min(MAX_TESTS) {
            self.truncated = true;
            return;
        }
        self.rows.insert(
            name,
            Row {
                status,
                duration_micros,
            },
        );
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.rows.len()
    }

    /// Adds `other`'s rows (already safe and cut) under the same rules as [`Table::record`].
    pub(crate) fn join(&mut self, other: Table) {
        self.truncated |= other.truncated;
        for (name, row) in other.rows {
            self.insert(name, row.status, row.duration_micros, MAX_TESTS);
        }
    }

    pub(crate) fn into_report(self, runner: Runner) -> TestReport {
        let mut counts = Counts::default();
        let mut tests: Vec<TestOutcome> = self
            .rows
            .into_iter()
            .map(|(name, row)| {
                let slot = match row.status {
                    Status::Passed => &mut counts.passed,
                    Status::Failed => &mut counts.failed,
                    Status::Skipped => &mut counts.skipped,
                    Status::Error => &mut counts.error,
                };
                *slot = slot.saturating_add(1);
                TestOutcome {
                    name,
                    status: row.status,
                    duration_micros: row.duration_micros,
                }
            })
            .collect();
        // Stable sort over name order: within a status the rows stay by name.
        tests.sort_by_key(|t| std::cmp::Reverse(display_rank(t.status)));
        TestReport {
            source: SOURCE.to_owned(),
            runner,
            counts,
            truncated: self.truncated,
            tests,
        }
    }
}

/// Failing first: what a person looking at a failed run wants to read.
fn display_rank(status: Status) -> u8 {
    match status {
        Status::Error => 3,
        Status::Failed => 2,
        Status::Passed => 1,
        Status::Skipped => 0,
    }
}

/// A report of `rows` as they are, for the tests of what reads reports: the counts are left at
/// zero, as no parser made them.
#[cfg(test)]
impl TestReport {
    pub(crate) fn of_rows(runner: Runner, rows: &[(&str, Status)]) -> Self {
        Self {
            source: SOURCE.to_owned(),
            runner,
            counts: Counts::default(),
            truncated: false,
            tests: rows
                .iter()
                .map(|(name, status)| TestOutcome {
                    name: (*name).to_owned(),
                    status: *status,
                    duration_micros: None,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_name_keeps_the_worse_status_and_first_duration() {
        let mut table = Table::default();
        table.record("t", Status::Passed, Some(5));
        table.record("t", Status::Failed, Some(9));
        table.record("t", Status::Passed, None);
        let report = table.into_report(Runner::Libtest);
        assert_eq!(report.tests.len(), 1);
        assert_eq!(report.tests[0].status, Status::Failed);
        assert_eq!(report.tests[0].duration_micros, Some(5));
        assert_eq!(report.counts.failed, 1);
    }

    #[test]
    fn rows_past_the_cap_are_dropped_and_marked() {
        let mut table = Table::default();
        for i in 0..MAX_TESTS + 5 {
            table.record(&format!("t{i}"), Status::Passed, None);
        }
        // An existing name is still updated after the cap.
        table.record("t0", Status::Failed, None);
        let report = table.into_report(Runner::Libtest);
        assert_eq!(report.tests.len(), MAX_TESTS);
        assert!(report.truncated);
        assert_eq!(report.tests[0].name, "t0");
        assert_eq!(report.counts.failed, 1);
    }

    #[test]
    fn failing_rows_come_first() {
        let mut table = Table::default();
        table.record("a", Status::Passed, None);
        table.record("b", Status::Skipped, None);
        table.record("c", Status::Failed, None);
        table.record("d", Status::Error, None);
        table.record("e", Status::Failed, None);
        let names: Vec<_> = table
            .into_report(Runner::Pytest)
            .tests
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert_eq!(names, ["d", "c", "e", "a", "b"]);
    }

    #[test]
    fn long_names_are_cut_and_marked() {
        let mut table = Table::default();
        table.record(&"é".repeat(MAX_NAME_BYTES), Status::Passed, None);
        let report = table.into_report(Runner::Libtest);
        assert!(report.truncated);
        assert!(report.tests[0].name.len() <= MAX_NAME_BYTES);
    }

    #[test]
    fn the_largest_report_fits_the_record_budget_keeping_failures() {
        let mut table = Table::default();
        for i in 0..MAX_TESTS {
            let status = if i % 1000 == 0 {
                Status::Failed
            } else {
                Status::Passed
            };
            // Quotes and backslashes double when JSON escapes them.
            table.record(
                &format!("{i:06}{}", "\"\\".repeat(300)),
                status,
                Some(u64::MAX),
            );
        }
        let report = table.into_report(Runner::Libtest);
        assert_eq!(report.tests.len(), MAX_TESTS);
        let fitted = report.clone().fit(RECORD_BYTES);
        let json = serde_json::to_vec(&fitted).unwrap();
        assert!(json.len() <= RECORD_BYTES, "{}", json.len());
        assert!(fitted.truncated && fitted.tests.len() < MAX_TESTS);
        assert_eq!(fitted.failing().count(), 20);
        assert_eq!(fitted.counts, report.counts);
        // A report that fits is unchanged.
        let small = parse_small();
        assert_eq!(small.clone().fit(RECORD_BYTES), small);
    }

    fn parse_small() -> TestReport {
        let mut table = Table::default();
        table.record("a", Status::Passed, None);
        table.into_report(Runner::Libtest)
    }

    #[test]
    fn report_json_is_labelled_and_lowercase() {
        let mut table = Table::default();
        table.record("t", Status::Passed, Some(1));
        let json = serde_json::to_string(&table.into_report(Runner::GoTestJson)).unwrap();
        assert_eq!(
            json,
            r#"{"source":"solver-controlled-output","runner":"go-test-json","counts":{"passed":1,"failed":0,"skipped":0,"error":0},"truncated":false,"tests":[{"name":"t","status":"passed","duration_micros":1}]}"#
        );
    }
}
