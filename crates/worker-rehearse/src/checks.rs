//! What a rehearsal did not check, and the answer line that says so.
//!
//! A bounty needs a benchmark that passes the solution in every fresh container (`--repeat`),
//! fails the unsolved tree (`--base`) and pays no stub solution (`--adversarial`). A plain
//! rehearsal runs once and checks none of those; it still exits 0 for a pass (a solver checking
//! their own source needs exactly that), so its last line names every check it did not make,
//! with the flag that makes it, instead of a bare `ok: passed` that reads like all of them.

use serde::Serialize;

use super::report::Report;

/// A check this rehearsal did not make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NotChecked {
    /// `stability`, `discrimination` or `adversarial`.
    pub check: &'static str,
    /// The flag that makes it.
    pub flag: &'static str,
    /// What the human line calls it.
    #[serde(skip)]
    words: &'static str,
}

/// The checks not made: stability with fewer than two runs, discrimination without a base
/// tree, the stub solutions without `--adversarial`.
pub fn not_checked(report: &Report, adversarial: bool) -> Vec<NotChecked> {
    let mut out = Vec::new();
    if report.runs.len() < 2 {
        out.push(NotChecked {
            check: "stability",
            flag: "--repeat 2 or more",
            words: "stability",
        });
    }
    if report.base.is_none() {
        out.push(NotChecked {
            check: "discrimination",
            flag: "--base <unsolved tree>",
            words: "discrimination",
        });
    }
    if !adversarial {
        out.push(NotChecked {
            check: "adversarial",
            flag: "--adversarial",
            words: "stub solutions",
        });
    }
    out
}

/// The `ok:` line of a report without problems (`None` otherwise): what passed, then what was
/// not checked.
pub fn answer_line(report: &Report, missing: &[NotChecked]) -> Option<String> {
    if !report.problems.is_empty() {
        return None;
    }
    let mut answer = String::from("ok: passed");
    if report.runs.len() > 1 {
        answer.push_str(", stable");
    }
    if report.base.is_some() {
        answer.push_str(", discriminating");
    }
    if !missing.is_empty() {
        let named: Vec<String> = missing
            .iter()
            .map(|m| format!("{} ({})", m.words, m.flag))
            .collect();
        answer.push_str("; not checked: ");
        answer.push_str(&named.join(", "));
    }
    Some(answer)
}
