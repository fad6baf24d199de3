//! Each format's corners that the recorded fixtures do not reach, and lines that look like
//! results but are not.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use test_outcomes::{Runner, Status, TestReport, parse};

fn out(text: &str) -> TestReport {
    parse(text.as_bytes(), b"")
}

fn rows(report: &TestReport) -> Vec<(String, Status)> {
    let mut rows: Vec<_> = report
        .tests
        .iter()
        .map(|t| (t.name.clone(), t.status))
        .collect();
    rows.sort();
    rows
}

fn one(name: &str, status: Status) -> Vec<(String, Status)> {
    vec![(name.to_owned(), status)]
}

#[test]
fn unittest_before_python_3_11_names_the_class_only() {
    let report = out("test_a (pkg.mod.Case) ... ok\ntest_b (pkg.mod.Case) ... skipped 'why'\n");
    assert_eq!(report.runner, Runner::Unittest);
    assert_eq!(
        rows(&report),
        [
            ("pkg.mod.Case.test_a".to_owned(), Status::Passed),
            ("pkg.mod.Case.test_b".to_owned(), Status::Skipped),
        ]
    );
}

#[test]
fn unittest_import_failure_is_an_error_row() {
    let report = out("test_solution (unittest.loader._FailedTest.test_solution) ... ERROR\n");
    assert_eq!(
        rows(&report),
        one("unittest.loader._FailedTest.test_solution", Status::Error)
    );
}

#[test]
fn unittest_failure_section_headers_and_summaries_are_not_rows() {
    let report =
        out("FAIL: test_a (m.C.test_a)\nRan 3 tests in 0.1s\nOK\nok\nsomething (else) ... ok\n");
    assert_eq!(report.runner, Runner::Unknown);
}

#[test]
fn libtest_needs_its_running_line() {
    assert_eq!(out("test a ... ok\n").runner, Runner::Unknown);
    assert_eq!(
        out("running 1 test\ntest a ... ok\n").runner,
        Runner::Libtest
    );
}

#[test]
fn libtest_nocapture_output_between_name_and_status() {
    let report = out("running 1 test\ntest noisy ... hello from the test\nmore\nok\n");
    assert_eq!(rows(&report), one("noisy", Status::Passed));
}

#[test]
fn libtest_report_time_and_benches() {
    let report = out(
        "running 2 tests\ntest timed ... ok <0.250s>\ntest bench_x ... bench:  1,234 ns/iter (+/- 5)\n",
    );
    assert_eq!(rows(&report), one("timed", Status::Passed));
    assert_eq!(report.tests[0].duration_micros, Some(250_000));
}

#[test]
fn libtest_summary_lines_are_not_rows() {
    let report = out("running 1 test\ntest result: FAILED. 3 passed; 1 failed\n");
    assert_eq!(report.runner, Runner::Unknown);
}

#[test]
fn pytest_needs_its_session_header() {
    assert_eq!(out("a.py::t PASSED\n").runner, Runner::Unknown);
}

#[test]
fn pytest_collection_error_is_a_row_for_the_file() {
    let report = out("============ test session starts ============\n\
         ERROR tests/test_x.py - ModuleNotFoundError: No module named 'roman'\n\
         !!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!\n");
    assert_eq!(rows(&report), one("tests/test_x.py", Status::Error));
}

#[test]
fn pytest_xpass_and_verbose_without_progress_column() {
    let report = out(
        "=== test session starts ===\nt.py::a XPASS (lucky)\nt.py::b FAILED\nt.py::c SKIPPED (why) [ 10%]\n",
    );
    assert_eq!(
        rows(&report),
        [
            ("t.py::a".to_owned(), Status::Passed),
            ("t.py::b".to_owned(), Status::Failed),
            ("t.py::c".to_owned(), Status::Skipped),
        ]
    );
}

#[test]
fn go_verbose_needs_a_run_line_and_names_tests_by_their_package_line() {
    assert_eq!(out("--- PASS: TestA (0.00s)\n").runner, Runner::Unknown);
    let report = out(
        "=== RUN   TestA\n--- PASS: TestA (0.00s)\nPASS\nok  \texample.com/m\t0.1s\nFAIL\texample.com/n [build failed]\n",
    );
    assert_eq!(rows(&report), one("example.com/m.TestA", Status::Passed));
    // Cut off before its package line: the row as printed, not dropped.
    let report = out("=== RUN   TestA\n--- FAIL: TestA (0.00s)\n");
    assert_eq!(rows(&report), one("TestA", Status::Failed));
}

#[test]
fn go_json_package_events_and_odd_numbers() {
    let report = out(concat!(
        r#"{"Action":"fail","Package":"example.com/m","Elapsed":0.1}"#,
        "\n",
        r#"{"Action":"pass","Package":"example.com/m","Test":"TestA","Elapsed":1e-7}"#,
        "\n",
        r#"{"Action":"output","Package":"example.com/m","Test":"TestB","Output":"--- FAIL: TestB\n"}"#,
        "\n",
        r#"{"Action":"pass","Test":"#,
        "\n",
    ));
    assert_eq!(report.runner, Runner::GoTestJson);
    assert_eq!(rows(&report), one("example.com/m.TestA", Status::Passed));
    // 1e-7 is not a decimal test2json prints: no duration rather than a wrong one.
    assert_eq!(report.tests[0].duration_micros, None);
}

#[test]
fn go_json_build_failure_alone_is_unknown() {
    let report = out(r#"{"Action":"fail","Package":"example.com/m","Elapsed":0}"#);
    assert_eq!(report.runner, Runner::Unknown);
}

#[test]
fn tap_needs_its_version_line() {
    assert_eq!(out("ok 1 - a\n").runner, Runner::Unknown);
}

#[test]
fn tap_without_numbers_or_dashes_and_directives_in_any_case() {
    let report = out(
        "TAP version 13\nok\nok 2 plain\nnot ok - broken\nnot ok 4 - later # todo not yet\nok 5 - skipped # skip\n1..5\n",
    );
    assert_eq!(
        rows(&report),
        [
            ("broken".to_owned(), Status::Failed),
            ("later".to_owned(), Status::Skipped),
            ("plain".to_owned(), Status::Passed),
            ("skipped".to_owned(), Status::Skipped),
        ]
    );
}

#[test]
fn tap_yaml_lines_deeper_than_the_block_do_not_set_the_duration() {
    let report = out(
        "TAP version 13\nok 1 - a\n  ---\n  error: |-\n    duration_ms: 999\n  duration_ms: 2.5\n  ...\n",
    );
    assert_eq!(report.tests[0].duration_micros, Some(2_500));
}

#[test]
fn junit_needs_a_testsuite_and_steps_over_cdata_and_comments() {
    assert_eq!(out("<testcase name=\"a\"/>").runner, Runner::Unknown);
    let report = out(concat!(
        "<testsuites><testsuite name=\"s\">\n",
        "<!-- <testcase name=\"in-comment\"/> -->\n",
        "<testcase name=\"a &amp; b\" classname=\"k\" time=\"1.5\">",
        "<failure><![CDATA[ x > 3 && <testcase name=\"in-cdata\"/> ]]></failure>",
        "</testcase>\n",
        "<testcase name='single &#x41;&#66;' />\n",
        "<testcase name=\"cut off\"><error/>",
    ));
    assert_eq!(report.runner, Runner::JunitXml);
    assert_eq!(
        rows(&report),
        [
            ("cut off".to_owned(), Status::Error),
            ("k.a & b".to_owned(), Status::Failed),
            ("single AB".to_owned(), Status::Passed),
        ]
    );
    let timed = report.tests.iter().find(|t| t.name == "k.a & b").unwrap();
    assert_eq!(timed.duration_micros, Some(1_500_000));
}

#[test]
fn junit_open_case_that_had_not_failed_is_not_guessed_passed() {
    let report = out("<testsuite><testcase name=\"a\"/><testcase name=\"b\">");
    assert_eq!(rows(&report), one("a", Status::Passed));
}

#[test]
fn names_with_escape_sequences_are_shown_escaped() {
    let report = out("running 1 test\ntest evil\u{1b}]0;owned\u{7}\u{202e} ... ok\n");
    assert_eq!(
        rows(&report),
        one("evil\\e]0;owned\\x07\\u{202e}", Status::Passed)
    );
}
