//! Every parser against arbitrary bytes: no panic, rows within the caps, names terminal-safe,
//! and the same report however the stream is cut into chunks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use test_outcomes::{MAX_NAME_BYTES, MAX_TESTS, OutcomeParser, Stream, TestReport, parse};

/// Pieces of every format, so generated streams reach deep into each parser's states.
const PIECES: &[&str] = &[
    "running 3 tests\n",
    "test a::b ... ok\n",
    "test a::c ... FAILED\n",
    "test x ... ",
    "ok\n",
    "ignored, why\n",
    "test t ... ok <0.5s>\n",
    "=== RUN   TestA\n",
    "--- PASS: TestA (0.01s)\n",
    "    --- FAIL: TestA/b (1.5s)\n",
    "{\"Action\":\"pass\",\"Test\":\"TestJ\",\"Elapsed\":0.5}\n",
    "{\"Action\":\"fail\",\"Test\":\"TestK\",\"Elapsed\":1e-7}\n",
    "TAP version 13\n",
    "# Subtest: outer\n",
    "    # Subtest: inner\n",
    "    ok 1 - inner\n",
    "      ---\n",
    "      duration_ms: 0.5\n",
    "  type: 'suite'\n",
    "not ok 2 - outer \\# x # SKIP\n",
    "=== test session starts ===\n",
    "a.py::t PASSED [ 50%]\n",
    "FAILED a.py::u - boom\n",
    "ERROR a.py - collect\n",
    "test_x (m.C.test_x) ... ok\n",
    "test_y (m.C.test_y)\n",
    "doc ... FAIL\n",
    "  test_z (m.C.test_z) (i=1) ... ERROR\n",
    "<testsuite>",
    "<testcase classname=\"c\" name=\"n\" time=\"0.1\">",
    "<testcase name='m' />",
    "<failure message=\"a > b\"/>",
    "<skipped/>",
    "</testcase>",
    "<![CDATA[ <testcase name=\"fake\"/> ]]>",
    "<!-- <testcase name=\"c\"/> -->",
    "&#x1b;&amp;&#99999999;",
    "\u{1b}[31m",
    "\u{202e}",
    "\r\n",
    "\n",
];

fn stream() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            prop::sample::select(PIECES).prop_map(|p| p.as_bytes().to_vec()),
            prop::collection::vec(any::<u8>(), 0..40),
        ],
        0..60,
    )
    .prop_map(|parts| parts.concat())
}

fn check_bounds(report: &TestReport) {
    assert!(report.tests.len() <= MAX_TESTS);
    let total =
        report.counts.passed + report.counts.failed + report.counts.skipped + report.counts.error;
    assert_eq!(total, report.tests.len() as u64);
    for test in &report.tests {
        assert!(!test.name.is_empty());
        assert!(test.name.len() <= MAX_NAME_BYTES);
        assert!(
            !test.name.chars().any(|c| c.is_control()
                || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')),
            "unsafe name {:?}",
            test.name
        );
    }
    if report.runner == test_outcomes::Runner::Unknown {
        assert!(report.tests.is_empty());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic_and_stay_within_the_caps(bytes in prop::collection::vec(any::<u8>(), 0..8192)) {
        check_bounds(&parse(&bytes, &bytes));
    }

    #[test]
    fn format_like_streams_stay_within_the_caps_and_ignore_chunking(
        out in stream(),
        err in stream(),
        cut in 1usize..64,
    ) {
        let whole = parse(&out, &err);
        check_bounds(&whole);
        let mut parser = OutcomeParser::new();
        for (a, b) in out.chunks(cut).zip(err.chunks(cut)) {
            parser.push(Stream::Stdout, a);
            parser.push(Stream::Stderr, b);
        }
        // zip stops at the shorter stream; feed the rest of the longer one.
        let fed = out.len().min(err.len()).div_ceil(cut) * cut;
        parser.push(Stream::Stdout, out.get(fed.min(out.len())..).unwrap_or_default());
        parser.push(Stream::Stderr, err.get(fed.min(err.len())..).unwrap_or_default());
        prop_assert_eq!(parser.finish(), whole);
    }
}

/// A libtest report of up to 16 names, each row's status picked by its second byte.
fn report_of(rows: &[(u8, u8)]) -> TestReport {
    let mut text = String::from("running 1 test\n");
    for (name, status) in rows {
        let word = match status % 3 {
            0 => "ok",
            1 => "FAILED",
            _ => "ignored",
        };
        text.push_str(&format!("test t{} ... {word}\n", name % 16));
    }
    parse(text.as_bytes(), b"")
}

proptest! {
    #[test]
    fn swe_bench_lists_are_disjoint_and_agree_with_both_runs(
        base in prop::collection::vec((any::<u8>(), any::<u8>()), 0..24),
        solution in prop::collection::vec((any::<u8>(), any::<u8>()), 1..24),
    ) {
        use test_outcomes::Status;
        let (base, solution) = (report_of(&base), report_of(&solution));
        if base.runner == test_outcomes::Runner::Unknown {
            prop_assert!(test_outcomes::compare(&base, &solution).is_err());
            return Ok(());
        }
        let c = test_outcomes::compare(&base, &solution).unwrap();
        for name in &c.fail_to_pass {
            prop_assert_eq!(solution.status_of(name), Some(Status::Passed));
            prop_assert!(base.status_of(name).is_some_and(Status::is_failing));
        }
        for name in &c.not_run_on_base {
            prop_assert_eq!(solution.status_of(name), Some(Status::Passed));
            prop_assert_eq!(base.status_of(name), None);
        }
        for name in &c.pass_to_pass {
            prop_assert_eq!(solution.status_of(name), Some(Status::Passed));
            prop_assert_eq!(base.status_of(name), Some(Status::Passed));
        }
        for name in &c.pass_to_fail {
            prop_assert_eq!(base.status_of(name), Some(Status::Passed));
            prop_assert!(solution.status_of(name).is_none_or(Status::is_failing));
        }
        let mut all: Vec<&String> =
            c.fail_to_pass.iter().chain(&c.not_run_on_base).chain(&c.pass_to_pass)
                .chain(&c.pass_to_fail).collect();
        let before = all.len();
        all.sort();
        all.dedup();
        prop_assert_eq!(all.len(), before, "a name in two lists");
        // Every test that passed on the solution is in FAIL_TO_PASS, NOT_RUN_ON_BASE or
        // PASS_TO_PASS unless it was skipped on the base.
        for t in solution.passing() {
            let listed = c.fail_to_pass.contains(&t.name)
                || c.not_run_on_base.contains(&t.name)
                || c.pass_to_pass.contains(&t.name);
            prop_assert_eq!(listed, base.status_of(&t.name) != Some(Status::Skipped));
        }
    }

    #[test]
    fn a_run_compared_with_itself_repeated_is_never_flaky(
        rows in prop::collection::vec((any::<u8>(), any::<u8>()), 0..24),
        times in 1usize..5,
    ) {
        let run = report_of(&rows);
        let runs = vec![run; times];
        prop_assert!(test_outcomes::flaky(&runs).is_empty());
    }
}

/// Flaky tests as they were found before #41 item 5, by scanning every run's rows for each
/// name: the reference the indexed comparison must agree with.
fn flaky_by_scan(runs: &[TestReport]) -> Vec<test_outcomes::FlakyTest> {
    use std::collections::BTreeSet;
    let names: BTreeSet<&str> = runs
        .iter()
        .flat_map(|r| r.tests.iter().map(|t| t.name.as_str()))
        .collect();
    let mut out = Vec::new();
    for name in names {
        let statuses: Vec<_> = runs.iter().map(|r| r.status_of(name)).collect();
        let compared: BTreeSet<_> = runs
            .iter()
            .zip(&statuses)
            .filter(|(run, status)| {
                status.is_some() || (!run.truncated && run.runner != test_outcomes::Runner::Unknown)
            })
            .map(|(_, status)| *status)
            .collect();
        if compared.len() > 1 {
            out.push(test_outcomes::FlakyTest {
                name: name.to_owned(),
                statuses,
            });
        }
    }
    out
}

proptest! {
    #[test]
    fn flaky_tests_found_by_name_index_are_those_a_scan_of_every_run_finds(
        runs in prop::collection::vec(
            (prop::collection::vec((any::<u8>(), any::<u8>()), 0..24), any::<u8>()),
            0..6,
        ),
    ) {
        let runs: Vec<TestReport> = runs
            .iter()
            .map(|(rows, kind)| {
                let mut run = if kind % 5 == 0 { TestReport::unknown() } else { report_of(rows) };
                run.truncated |= kind % 3 == 0;
                run
            })
            .collect();
        prop_assert_eq!(test_outcomes::flaky(&runs), flaky_by_scan(&runs));
    }
}
