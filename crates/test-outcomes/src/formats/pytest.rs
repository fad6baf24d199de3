//! pytest, after its `===== test session starts =====` header: the `-v` result lines
//!
//! ```text
//! tests/test_a.py::test_ok PASSED                                   [ 50%]
//! tests/test_a.py::test_skip SKIPPED (reason)                       [100%]
//! ```
//!
//! and the `-rA` short summary (`PASSED id`, `FAILED id - message`, `ERROR id - message`,
//! `XFAIL id - reason`, `XPASS id - reason`; `SKIPPED [n] file:line: reason` names no test and is
//! not read). Statuses as SWE-bench's grading counts them: `XFAIL` and (non-strict) `XPASS`
//! passed, `ERROR` error; an `ERROR file.py - …` collection error is a row for the file.

use super::{LineFormat, Sink};
use crate::report::{Runner, Status};

/// pytest's state: whether its header has been seen.
#[derive(Debug, Default)]
pub(crate) struct Pytest {
    started: bool,
}

const WORDS: [(&str, Status); 6] = [
    ("PASSED", Status::Passed),
    ("FAILED", Status::Failed),
    ("ERROR", Status::Error),
    ("SKIPPED", Status::Skipped),
    ("XFAIL", Status::Passed),
    ("XPASS", Status::Passed),
];

impl LineFormat for Pytest {
    fn runner(&self) -> Runner {
        Runner::Pytest
    }

    fn line(&mut self, line: &str, sink: &mut Sink<'_>) {
        if !self.started {
            self.started = line.starts_with('=') && line.contains(" test session starts ");
            return;
        }
        if let Some((name, status)) = summary_line(line).or_else(|| verbose_line(line)) {
            sink.record(Runner::Pytest, name, status, None);
        }
    }
}

/// `WORD nodeid[ - message]` from the `-rA` summary.
fn summary_line(line: &str) -> Option<(&str, Status)> {
    let (word, rest) = line.split_once(' ')?;
    let (_, status) = WORDS.iter().find(|(w, _)| *w == word)?;
    if word == "SKIPPED" {
        return None;
    }
    let id = rest.split_once(" - ").map_or(rest, |(id, _)| id).trim_end();
    let looks_like_id = id.contains("::") || (word == "ERROR" && id.ends_with(".py"));
    (looks_like_id && !id.starts_with(' ') && !id.is_empty()).then_some((id, *status))
}

/// `nodeid WORD[ (reason)][   [ NN%]]` from `-v`.
fn verbose_line(line: &str) -> Option<(&str, Status)> {
    let mut text = line.trim_end();
    // The progress column: `[ 50%]`.
    if let Some(open) = text.rfind('[')
        && text.ends_with("%]")
        && text[open + 1..text.len() - 2]
            .trim()
            .bytes()
            .all(|b| b.is_ascii_digit())
    {
        text = text[..open].trim_end();
    }
    for (word, status) in WORDS {
        let Some(at) = text.rfind(word) else {
            continue;
        };
        let Some(id) = text[..at].strip_suffix(' ') else {
            continue;
        };
        let after = &text[at + word.len()..];
        if !(after.is_empty() || (after.starts_with(" (") && after.ends_with(')'))) {
            continue;
        }
        if id.contains("::") && !id.starts_with(' ') {
            return Some((id, status));
        }
    }
    None
}
