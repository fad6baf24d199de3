//! Real outputs of each runner, recorded on this machine (sources in
//! `crates/test-outcomes/tests/fixtures/sources/`, commands in
//! `crates/test-outcomes/tests/fixtures/README.md`), read back whole and in small chunks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use test_outcomes::{OutcomeParser, Runner, Status, Stream, TestReport, compare, parse};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The report when stdout and stderr arrive in `size`-byte chunks, alternating.
fn chunked(stdout: &[u8], stderr: &[u8], size: usize) -> TestReport {
    let mut parser = OutcomeParser::new();
    let mut out = stdout.chunks(size);
    let mut err = stderr.chunks(size);
    loop {
        let a = out.next();
        let b = err.next();
        if let Some(a) = a {
            parser.push(Stream::Stdout, a);
        }
        if let Some(b) = b {
            parser.push(Stream::Stderr, b);
        }
        if a.is_none() && b.is_none() {
            break;
        }
    }
    parser.finish()
}

/// Parses whole, checks every chunking gives the same report, returns it.
fn read(stdout: &str, stderr: Option<&str>) -> TestReport {
    let out = fixture(stdout);
    let err = stderr.map(fixture).unwrap_or_default();
    let whole = parse(&out, &err);
    for size in [1, 3, 17, 4096] {
        assert_eq!(chunked(&out, &err, size), whole, "chunks of {size}");
    }
    whole
}

fn rows(report: &TestReport) -> Vec<(&str, Status)> {
    let mut rows: Vec<_> = report
        .tests
        .iter()
        .map(|t| (t.name.as_str(), t.status))
        .collect();
    rows.sort();
    rows
}

fn duration(report: &TestReport, name: &str) -> Option<u64> {
    report
        .tests
        .iter()
        .find(|t| t.name == name)
        .and_then(|t| t.duration_micros)
}

use Status::{Error, Failed, Passed, Skipped};

#[test]
fn cargo_test_output_lists_unit_integration_and_doc_tests() {
    let report = read("cargo-test.stdout", Some("cargo-test.stderr"));
    assert_eq!(report.runner, Runner::Libtest);
    assert_eq!(
        rows(&report),
        [
            ("integration_passes", Passed),
            ("src/lib.rs - add (line 3)", Passed),
            ("src/lib.rs - add (line 7)", Failed),
            ("tests::adds", Passed),
            ("tests::fails_on_purpose", Failed),
            ("tests::ignored_plain", Skipped),
            ("tests::ignored_with_reason", Skipped),
            ("tests::panics_as_expected", Passed),
            ("tests::prints_a_line", Passed),
        ]
    );
    assert_eq!(
        (
            report.counts.passed,
            report.counts.failed,
            report.counts.skipped
        ),
        (5, 2, 2)
    );
    // Failing first.
    assert!(report.tests[0].status.is_failing() && report.tests[1].status.is_failing());
    assert!(!report.truncated);
}

fn go_rows() -> Vec<(&'static str, Status)> {
    vec![
        ("example.com/fixture.TestAdd", Passed),
        ("example.com/fixture.TestFailsOnPurpose", Failed),
        // TestSlow printed this line itself; go's own test2json believes it too. Rows are what
        // the output says, which is why they never feed a verdict.
        ("example.com/fixture.TestForgedInOutput", Passed),
        ("example.com/fixture.TestSkipped", Skipped),
        ("example.com/fixture.TestSlow", Passed),
        ("example.com/fixture.TestTable", Failed),
        ("example.com/fixture.TestTable/one_plus_one", Passed),
        ("example.com/fixture.TestTable/one_plus_one/nested", Passed),
        ("example.com/fixture.TestTable/wrong", Failed),
        ("example.com/fixture.TestTable/wrong/nested", Failed),
    ]
}

#[test]
fn go_test_verbose_output_lists_tests_and_subtests_with_durations() {
    let report = read("go-test-v.stdout", None);
    assert_eq!(report.runner, Runner::GoTest);
    assert_eq!(rows(&report), go_rows());
    assert_eq!(
        duration(&report, "example.com/fixture.TestSlow"),
        Some(20_000)
    );
    assert_eq!(duration(&report, "example.com/fixture.TestAdd"), Some(0));
}

#[test]
fn go_test_json_output_lists_the_same_tests() {
    let report = read("go-test-json.stdout", None);
    assert_eq!(report.runner, Runner::GoTestJson);
    assert_eq!(rows(&report), go_rows());
    assert_eq!(
        duration(&report, "example.com/fixture.TestSlow"),
        Some(20_000)
    );
}

fn go_two_package_rows() -> Vec<(&'static str, Status)> {
    vec![
        ("example.com/twopkg/alpha.TestOnlyAlpha", Passed),
        ("example.com/twopkg/alpha.TestShared", Passed),
        ("example.com/twopkg/beta.TestShared", Failed),
        ("example.com/twopkg/beta.TestSub", Passed),
        ("example.com/twopkg/beta.TestSub/case", Passed),
    ]
}

#[test]
fn go_test_verbose_same_named_tests_of_two_packages_are_two_rows() {
    let report = read("go-test-v-two-packages.stdout", None);
    assert_eq!(report.runner, Runner::GoTest);
    assert_eq!(rows(&report), go_two_package_rows());
    assert_eq!((report.counts.passed, report.counts.failed), (4, 1));
}

#[test]
fn go_test_json_same_named_tests_of_two_packages_are_two_rows() {
    let report = read("go-test-json-two-packages.stdout", None);
    assert_eq!(report.runner, Runner::GoTestJson);
    assert_eq!(rows(&report), go_two_package_rows());
    assert_eq!((report.counts.passed, report.counts.failed), (4, 1));
}

#[test]
fn node_test_tap_output_names_nested_tests_and_leaves_out_suites() {
    let report = read("node-test.stdout", None);
    assert_eq!(report.runner, Runner::Tap);
    assert_eq!(
        rows(&report),
        [
            ("a suite > case in suite", Passed),
            ("adds", Passed),
            ("fails on purpose", Failed),
            ("has # hash in name", Passed),
            ("outer", Failed),
            ("outer > inner fails", Failed),
            ("outer > inner passes", Passed),
            ("skipped one", Skipped),
            ("todo one", Skipped),
        ]
    );
    // node's own closing lines: `# tests 9`, `# pass 4`, `# fail 3`, skipped 1 + todo 1.
    assert_eq!(
        (
            report.counts.passed,
            report.counts.failed,
            report.counts.skipped
        ),
        (4, 3, 2)
    );
    assert_eq!(duration(&report, "adds"), Some(1_170));
}

fn pytest_rows(with_skips: bool) -> Vec<(&'static str, Status)> {
    let mut rows = vec![
        ("test_sample.py::Legacy::test_legacy", Passed),
        ("test_sample.py::TestGroup::test_method", Passed),
        ("test_sample.py::test_errors_in_setup", Error),
        ("test_sample.py::test_fails", Failed),
        ("test_sample.py::test_param[1]", Passed),
        ("test_sample.py::test_param[2]", Failed),
        ("test_sample.py::test_param[a b]", Passed),
        ("test_sample.py::test_passes", Passed),
        ("test_sample.py::test_xfail", Passed),
    ];
    if with_skips {
        rows.push(("test_sample.py::Legacy::test_legacy_skip", Skipped));
        rows.push(("test_sample.py::test_skipped", Skipped));
    }
    rows.sort();
    rows
}

#[test]
fn pytest_verbose_and_short_summary_agree() {
    let report = read("pytest-rA-v.stdout", None);
    assert_eq!(report.runner, Runner::Pytest);
    assert_eq!(rows(&report), pytest_rows(true));
    // pytest's closing line: 2 failed, 5 passed, 2 skipped, 1 xfailed, 1 error.
    assert_eq!(
        (
            report.counts.passed,
            report.counts.failed,
            report.counts.skipped,
            report.counts.error
        ),
        (6, 2, 2, 1)
    );
}

#[test]
fn pytest_short_summary_alone_names_all_but_skips() {
    let report = read("pytest-rA.stdout", None);
    assert_eq!(report.runner, Runner::Pytest);
    assert_eq!(rows(&report), pytest_rows(false));
}

/// The same suite in pytest's JUnit XML: classname.name, an xfail a skip.
fn junit_rows() -> Vec<(&'static str, Status)> {
    vec![
        ("test_sample.Legacy.test_legacy", Passed),
        ("test_sample.Legacy.test_legacy_skip", Skipped),
        ("test_sample.TestGroup.test_method", Passed),
        ("test_sample.test_errors_in_setup", Error),
        ("test_sample.test_fails", Failed),
        ("test_sample.test_param[1]", Passed),
        ("test_sample.test_param[2]", Failed),
        ("test_sample.test_param[a b]", Passed),
        ("test_sample.test_passes", Passed),
        ("test_sample.test_skipped", Skipped),
        ("test_sample.test_xfail", Skipped),
    ]
}

#[test]
fn junit_xml_printed_on_one_long_line_is_read() {
    let report = read("pytest-junit-printed.stdout", None);
    assert_eq!(report.runner, Runner::JunitXml);
    assert_eq!(rows(&report), junit_rows());
    assert_eq!(duration(&report, "test_sample.test_passes"), Some(0));
}

#[test]
fn junit_xml_pytest_writes_to_dev_stdout_is_read_from_the_stream() {
    // `--junitxml=/dev/stdout`: the document follows the progress line on the same line and
    // precedes the failure sections and short summary (which, without `-rA`, are not rows).
    let report = read("pytest-junit-dev-stdout.stdout", None);
    assert_eq!(report.runner, Runner::JunitXml);
    assert_eq!(rows(&report), junit_rows());
    assert_eq!(duration(&report, "test_sample.test_passes"), Some(8_000));
}

#[test]
fn unittest_verbose_output_with_docstrings_noise_and_subtests() {
    let report = read("unittest-mixed.stdout-empty", Some("unittest-mixed.stderr"));
    assert_eq!(report.runner, Runner::Unittest);
    assert_eq!(
        rows(&report),
        [
            ("test_mixed.Mixed.test_documented", Passed),
            ("test_mixed.Mixed.test_errors", Error),
            ("test_mixed.Mixed.test_expected_failure", Passed),
            ("test_mixed.Mixed.test_fails", Failed),
            ("test_mixed.Mixed.test_passes", Passed),
            ("test_mixed.Mixed.test_prints", Passed),
            ("test_mixed.Mixed.test_skipped", Skipped),
            ("test_mixed.Mixed.test_subtests", Failed),
            ("test_mixed.Mixed.test_unexpected_success", Failed),
        ]
    );
}

fn bounty(which: &str) -> TestReport {
    read(&format!("unittest-python-bounty-{which}.stdout"), None)
}

#[test]
fn python_bounty_harness_output_is_read_as_unittest() {
    let report = bounty("bad");
    assert_eq!(report.runner, Runner::Unittest);
    assert_eq!(
        rows(&report),
        [
            (
                "harness_canary.HarnessCanary.test_assertions_are_live",
                Failed
            ),
            ("test_solution.FromRoman.test_malformed_is_refused", Passed),
            ("test_solution.FromRoman.test_round_trip", Passed),
            ("test_solution.ToRoman.test_composites", Passed),
            ("test_solution.ToRoman.test_out_of_range_is_refused", Failed),
            ("test_solution.ToRoman.test_simple_symbols", Passed),
            ("test_solution.ToRoman.test_subtractive_forms", Passed),
        ]
    );
}

#[test]
fn python_bounty_bad_to_good_is_the_range_check_fail_to_pass() {
    let c = compare(&bounty("bad"), &bounty("good")).unwrap();
    assert_eq!(
        c.fail_to_pass,
        ["test_solution.ToRoman.test_out_of_range_is_refused"]
    );
    assert!(c.pass_to_fail.is_empty());
    assert_eq!(c.pass_to_pass.len(), 5);
    // The harness's canary fails on both: neither list.
    assert!(!c.pass_to_pass.iter().any(|n| n.contains("canary")));
}
