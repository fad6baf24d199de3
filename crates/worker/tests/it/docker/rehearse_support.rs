//! Assertions the rehearse, rehearse-stubs, rehearse-mutants and authoring tests share: each
//! shows the whole output it searched when it fails, so a failing Docker run explains itself.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use super::ran::Ran;
use serde_json::Value;

/// Asserts that `text` contains `needle`, showing `text` on failure.
#[track_caller]
pub(super) fn assert_contains(text: &str, needle: &str) {
    assert!(text.contains(needle), "{needle:?} not in:\n{text}");
}

/// Asserts that `ran` exited `code`, showing both streams on failure.
#[track_caller]
pub(super) fn assert_exit(ran: &Ran, code: i32) {
    assert_eq!(ran.code, code, "{}{}", ran.stdout, ran.stderr);
}

/// Asserts that an `--adversarial` report `out` lists each of `stubs` as held (its run failed).
#[track_caller]
pub(super) fn assert_held(out: &str, stubs: &[&str]) {
    for stub in stubs {
        assert_contains(out, &format!("  held: {stub} (failed)"));
    }
}

/// Asserts that `text` does not contain `needle`, showing `text` on failure.
#[track_caller]
pub(super) fn assert_lacks(text: &str, needle: &str) {
    assert!(!text.contains(needle), "{needle:?} in:\n{text}");
}

/// The `--adversarial` stubs that shadow a Python test runner or start-up hook in the solver's
/// tree: a benchmark with its own tests, run by an isolated harness, holds against each.
pub(super) const PYTHON_SHADOWS: [&str; 6] = [
    "shadow unittest.py",
    "shadow pytest.py",
    "shadow conftest.py",
    "shadow sitecustomize.py",
    "shadow usercustomize.py",
    "shadow rehearse-shadow.pth",
];

/// Asserts that the value at the JSON pointer `at` in `report` is `expected` (a missing one is
/// null, as indexing reads it), showing all of `report` on failure.
#[track_caller]
pub(super) fn assert_at(report: &Value, at: &str, expected: &Value) {
    let found = report.pointer(at).unwrap_or(&Value::Null);
    assert_eq!(found, expected, "{at} in {report}");
}

/// Asserts that the last line of a human report `out`, the answer, says the benchmark pays a
/// non-solution (exit 9).
#[track_caller]
pub(super) fn assert_answer_pays_non_solution(out: &str) {
    let last = out.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("BYPASSABLE: the benchmark lets a non-solution pass"),
        "{out}"
    );
}
