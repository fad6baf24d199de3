//! Rust's libtest as `cargo test` prints it, after a `running N tests` line:
//!
//! ```text
//! test tests::adds ... ok
//! test tests::panics - should panic ... ok
//! test tests::ignored ... ignored, needs a network
//! test src/lib.rs - add (line 7) ... FAILED
//! test tests::timed ... ok <0.002s>           (--report-time)
//! ```
//!
//! With `--nocapture` a test's own output can come between `... ` and the status; the status
//! alone on a later line completes it. Benchmarks (`... bench:`) are not tests' outcomes.

use super::{LineFormat, Sink};
use crate::name::decimal_to_micros;
use crate::report::{Runner, Status};

/// libtest's state.
#[derive(Debug, Default)]
pub(crate) struct Libtest {
    started: bool,
    pending: Option<String>,
}

impl LineFormat for Libtest {
    fn runner(&self) -> Runner {
        Runner::Libtest
    }

    fn line(&mut self, line: &str, sink: &mut Sink<'_>) {
        if is_running_line(line) {
            self.started = true;
            self.pending = None;
            return;
        }
        if !self.started {
            return;
        }
        if let Some(rest) = line.strip_prefix("test ")
            && let Some((name, status_text)) = rest.split_once(" ...")
        {
            let name = name.strip_suffix(" - should panic").unwrap_or(name);
            let status_text = status_text.strip_prefix(' ').unwrap_or(status_text);
            match status(status_text) {
                Some((status, micros)) => {
                    self.pending = None;
                    sink.record(Runner::Libtest, name, status, micros);
                }
                None if status_text.starts_with("bench:") => self.pending = None,
                None => self.pending = Some(name.to_owned()),
            }
            return;
        }
        if let Some(name) = &self.pending
            && let Some((status, micros)) = status(line)
        {
            sink.record(Runner::Libtest, name, status, micros);
            self.pending = None;
        }
    }
}

fn is_running_line(line: &str) -> bool {
    let Some(rest) = line.strip_prefix("running ") else {
        return false;
    };
    let Some((count, word)) = rest.split_once(' ') else {
        return false;
    };
    !count.is_empty()
        && count.bytes().all(|b| b.is_ascii_digit())
        && matches!(word, "test" | "tests")
}

/// `ok`, `FAILED`, `ignored[, reason]`, each optionally followed by ` <1.234s>`.
fn status(text: &str) -> Option<(Status, Option<u64>)> {
    let text = text.trim_end();
    let (word, micros) = match text.rsplit_once(" <") {
        Some((word, time)) if time.ends_with("s>") => {
            (word, decimal_to_micros(&time[..time.len() - 2], 6))
        }
        _ => (text, None),
    };
    let status = match word {
        "ok" => Status::Passed,
        "FAILED" => Status::Failed,
        _ if word == "ignored" || word.starts_with("ignored, ") => Status::Skipped,
        _ => return None,
    };
    Some((status, micros))
}
