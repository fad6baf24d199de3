//! What a passing solution run's own record warns about, beside the verdict and never changing
//! it: a run that printed no test results (#42 item 5), and a run that used most of the
//! manifest's memory or time (#42 item 6).
//!
//! Both read recorded figures (the run's per-test rows, the output tails and the evidence
//! record's request, peak memory and timestamps), never a live clock, so the rules are tested on
//! numbers.

use test_outcomes::{Runner, TestReport};
use verifier_sdk::EvidenceRecord;
use verifier_sdk::evidence::Decision;

/// The warning of item 5, as the report prints it.
pub const NO_TEST_RESULTS: &str = "the benchmark passed but printed no test results; a harness \
     that hides its runner's output cannot be checked for tests that never ran";

/// What one passing run printed about its tests: its per-test rows and the ends of its streams.
pub struct Printed<'a> {
    /// The rows the run's output was parsed into, if any.
    pub tests: Option<&'a TestReport>,
    /// The recorded tails of stdout and stderr.
    pub output: &'a str,
}

/// Whether `output` holds a test runner's summary line (`Ran 5 tests`, `3 passed in 0.02s`,
/// `test result: ok. 4 passed`, `ok  pkg 0.1s`, `# tests 3`, `Tests: 3 passed`, `5 passing`,
/// `1..5`, `12 tests run`, …): evidence that tests ran even where rows were not recognised.
pub fn printed_a_runner_summary(output: &str) -> bool {
    output.lines().map(str::trim).any(summary_line)
}

/// Words that follow a count in a runner's summary (`3 passed`, `12 tests`, `5 passing`).
const COUNTED: [&str; 9] = [
    "passed",
    "passed,",
    "passed;",
    "passing",
    "tests",
    "test",
    "tests,",
    "examples,",
    "specs,",
];

fn summary_line(line: &str) -> bool {
    let words: Vec<&str> = line.split_whitespace().collect();
    let number = |w: &str| !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit());
    // unittest `Ran 2 tests in …`, libtest `test result: ok. …`, go `ok  \tpkg` / `FAIL\tpkg`,
    // jest `Tests: …`, TAP's plan `1..5`, node --test `# tests 3` / `ℹ tests 3`.
    let known = line.starts_with("Ran ") && words.get(1).is_some_and(|w| number(w))
        || line.starts_with("test result: ")
        || (line.starts_with("ok ") || line.starts_with("ok\t")) && words.len() >= 2
        || line.starts_with("FAIL\t")
        || line.starts_with("Tests:") && words.len() >= 3
        || line
            .strip_prefix("1..")
            .is_some_and(|n| number(n.split_whitespace().next().unwrap_or("")))
        || matches!(words.as_slice(), ["#" | "ℹ", "tests", n] if number(n));
    // A count followed by a word that counts tests: pytest `2 passed in 0.01s`, mocha
    // `5 passing (12ms)`, nextest `12 tests run: …`, rspec `3 examples, 0 failures`.
    known
        || words
            .windows(2)
            .any(|w| number(w[0]) && COUNTED.contains(&w[1]))
}

/// [`NO_TEST_RESULTS`] (with what to do) when no run shows any evidence that a test ran: no
/// per-test row and no runner summary. A runner that says no test ran (`Ran 0 tests`) is a
/// problem of its own, not this warning.
pub fn no_test_results(runs: &[Printed<'_>]) -> Option<String> {
    let evidence = |p: &Printed<'_>| {
        p.tests
            .is_some_and(|t| t.runner != Runner::Unknown && !t.tests.is_empty())
            || printed_a_runner_summary(p.output)
    };
    if runs.iter().any(evidence) {
        return None;
    }
    Some(format!(
        "{NO_TEST_RESULTS}: have the harness print its runner's own result lines (unittest -v, \
         pytest -rA, cargo test, go test -v, node --test) as well as its verdict"
    ))
}

/// The warnings of a passing rehearsal's solution runs (none for any other verdict), from each
/// run's rows and its evidence record (run number, record; `None` when it could not be read).
pub(crate) fn warnings(
    report: &super::report::Report,
    evidence: &[(u32, Option<EvidenceRecord>)],
) -> Vec<String> {
    if report.verdict != super::verdict::Verdict::Passed {
        return Vec::new();
    }
    let outputs: Vec<String> = evidence
        .iter()
        .map(|(_, record)| {
            record
                .as_ref()
                .map(|r| format!("{}\n{}", r.stdout.tail, r.stderr.tail))
                .unwrap_or_default()
        })
        .collect();
    let printed: Vec<Printed<'_>> = report
        .runs
        .iter()
        .zip(&outputs)
        .map(|(run, output)| Printed {
            tests: run.explanation.tests.as_ref(),
            output,
        })
        .collect();
    // A runner that says no test ran is a problem of its own (`zero_tests`).
    let zero = report.runs.iter().any(|r| r.zero_tests.is_some());
    let figures: Vec<RunFigures> = evidence
        .iter()
        .filter_map(|(run, record)| RunFigures::of_passing(*run, record.as_ref()?))
        .collect();
    let mut out: Vec<String> = no_test_results(&printed)
        .filter(|_| !zero && !printed.is_empty())
        .into_iter()
        .collect();
    out.extend(headroom(&figures));
    out
}

/// Share of a limit above which a passing run gets a warning.
pub const HEADROOM_PERCENT: u64 = 70;

/// The figures of one passing run that headroom is judged on, as its evidence record holds
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunFigures {
    /// The run's number.
    pub run: u32,
    /// Wall time from the start call to the observed stop.
    pub duration_ms: Option<u64>,
    /// The manifest's `timeout_seconds`, in milliseconds.
    pub timeout_ms: u64,
    /// The highest memory use seen.
    pub peak_memory_bytes: Option<u64>,
    /// The manifest's `memory_bytes`.
    pub memory_bytes: u64,
}

impl RunFigures {
    /// The figures of a run whose record says it passed (exited 0); `None` otherwise.
    pub fn of_passing(run: u32, record: &EvidenceRecord) -> Option<Self> {
        if record.outcome != (Decision::Completed { exit_code: 0 }) {
            return None;
        }
        let t = &record.timestamps;
        Some(Self {
            run,
            duration_ms: match (t.start_ms, t.finish_ms) {
                (Some(start), Some(finish)) => Some(finish.saturating_sub(start)),
                _ => None,
            },
            timeout_ms: record.request.timeout_ms,
            peak_memory_bytes: record.resources.peak_memory_bytes,
            memory_bytes: record.request.memory_bytes,
        })
    }
}

/// One warning per limit (memory, time) that a passing run used more than
/// [`HEADROOM_PERCENT`] of, naming the run that used the most and its figures.
pub fn headroom(runs: &[RunFigures]) -> Vec<String> {
    let over = |used: u64, limit: u64| {
        (limit > 0 && u128::from(used) * 100 > u128::from(limit) * u128::from(HEADROOM_PERCENT))
            .then(|| (u128::from(used) * 100 / u128::from(limit)) as u64)
    };
    let mut out = Vec::new();
    let slowest = runs
        .iter()
        .filter_map(|r| Some((r, r.duration_ms?)))
        .max_by_key(|(_, ms)| *ms);
    if let Some((r, ms)) = slowest
        && let Some(percent) = over(ms, r.timeout_ms)
    {
        out.push(format!(
            "run {} of the solution took {} of the manifest's {} s timeout_seconds ({percent} %): \
             a busy verifier host (other jobs beside it, a slower CPU) turns it into a timeout, \
             no verdict; raise timeout_seconds or make the benchmark faster",
            r.run,
            worker_sandbox::explain::seconds(ms),
            r.timeout_ms / 1000,
        ));
    }
    // A reading above the limit the container ran under is not its own use (on some hosts the
    // counter read is a parent cgroup's): no figure, no warning.
    let largest = runs
        .iter()
        .filter_map(|r| Some((r, r.peak_memory_bytes.filter(|b| *b <= r.memory_bytes)?)))
        .max_by_key(|(_, bytes)| *bytes);
    if let Some((r, bytes)) = largest
        && let Some(percent) = over(bytes, r.memory_bytes)
    {
        out.push(format!(
            "run {} of the solution used {} of the manifest's {} memory_bytes ({percent} %) at \
             its peak: another verifier's host (another kernel, page cache counted differently) \
             can end it out of memory, no verdict; raise memory_bytes or make the benchmark \
             lighter",
            r.run,
            mib(bytes),
            mib(r.memory_bytes),
        ));
    }
    out
}

fn mib(bytes: u64) -> String {
    let tenths = u128::from(bytes) * 10 / (1 << 20);
    format!("{}.{} MiB", tenths / 10, tenths % 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(text: &str) -> TestReport {
        test_outcomes::parse(text.as_bytes(), b"")
    }

    /// #42 item 5: the platform's `check.py` harnesses print their own words and hide the
    /// runner's (`tests: unknown`); the pass is warned about. A run whose rows or summary show
    /// that tests ran is not.
    #[test]
    fn a_passing_run_that_printed_no_test_results_is_warned_about() {
        let hidden = "checking rpc failover...\nall checks passed\n";
        let unknown = rows(hidden);
        let warning = no_test_results(&[Printed {
            tests: Some(&unknown),
            output: hidden,
        }])
        .expect("a pass that printed no test results is warned about");
        assert!(warning.starts_with(NO_TEST_RESULTS), "{warning}");
        assert!(
            no_test_results(&[Printed {
                tests: None,
                output: ""
            }])
            .is_some()
        );
        // Per-test rows are evidence.
        let verbose = "test_a (t.T.test_a) ... ok\n\nRan 1 test in 0.001s\n\nOK\n";
        let parsed = rows(verbose);
        assert_ne!(parsed.runner, Runner::Unknown);
        assert_eq!(
            no_test_results(&[Printed {
                tests: Some(&parsed),
                output: verbose
            }]),
            None
        );
        // So is a runner's summary without rows (unittest without -v, pytest -q, cargo test
        // with the rows cut from the tail, go test, jest, mocha, TAP, nextest).
        for summary in [
            "..\n----------------------------------------------------------------------\nRan 2 tests in 0.001s\n\nOK\n",
            "..                                      [100%]\n2 passed in 0.01s\n",
            "test result: ok. 4 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out",
            "ok  \texample.com/strsim\t0.004s",
            "# tests 3\n# pass 3\n",
            "Tests:       3 passed, 3 total",
            "  5 passing (12ms)",
            "1..5",
            "     Summary [   0.010s] 12 tests run: 12 passed, 0 skipped",
        ] {
            assert!(printed_a_runner_summary(summary), "{summary}");
            let none = rows("");
            assert_eq!(
                no_test_results(&[Printed {
                    tests: Some(&none),
                    output: summary
                }]),
                None,
                "{summary}"
            );
        }
        for words in ["all checks passed", "OK", "passed", "done in 3 s", ""] {
            assert!(!printed_a_runner_summary(words), "{words}");
        }
    }

    fn figures(duration_ms: u64, peak: u64) -> RunFigures {
        RunFigures {
            run: 1,
            duration_ms: Some(duration_ms),
            timeout_ms: 60_000,
            peak_memory_bytes: Some(peak),
            memory_bytes: 1 << 30,
        }
    }

    /// #42 item 6, on recorded figures: a pass that used more than 70 % of the manifest's time
    /// or memory is warned about with the figures; 70 % or less is not.
    #[test]
    fn a_pass_using_most_of_a_limit_is_warned_about_with_the_figures() {
        assert!(headroom(&[figures(42_000, 700 << 20)]).is_empty());
        let mut slow = figures(52_300, 100 << 20);
        slow.run = 2;
        let warnings = headroom(&[figures(10_000, 100 << 20), slow]);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with(
                "run 2 of the solution took 52.3 s of the manifest's 60 s timeout_seconds (87 %)"
            ),
            "{warnings:?}"
        );
        assert!(warnings[0].contains("timeout"), "{warnings:?}");
        let warnings = headroom(&[figures(10_000, 900 << 20)]);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with(
                "run 1 of the solution used 900.0 MiB of the manifest's 1024.0 MiB memory_bytes \
                 (87 %) at its peak"
            ),
            "{warnings:?}"
        );
        // Both, and no figure measured is no warning.
        assert_eq!(headroom(&[figures(59_000, 1 << 30)]).len(), 2);
        let unmeasured = RunFigures {
            duration_ms: None,
            peak_memory_bytes: None,
            ..figures(0, 0)
        };
        assert!(headroom(&[unmeasured]).is_empty());
        // A peak over the limit is not the container's own use (a parent cgroup's counter).
        assert!(headroom(&[figures(10_000, 17 << 30)]).is_empty());
    }
}
