//! `go test -v`, after its first `=== RUN` line:
//!
//! ```text
//! === RUN   TestTable/wrong
//! --- FAIL: TestTable (0.00s)
//!     --- FAIL: TestTable/wrong (0.00s)
//! --- SKIP: TestSkipped (0.00s)
//! ```
//!
//! Subtests are indented and already carry their parent's name.

use super::{LineFormat, Sink};
use crate::name::decimal_to_micros;
use crate::report::{Runner, Status};

/// go -v's state.
#[derive(Debug, Default)]
pub(crate) struct GoVerbose {
    started: bool,
}

impl LineFormat for GoVerbose {
    fn runner(&self) -> Runner {
        Runner::GoTest
    }

    fn line(&mut self, line: &str, sink: &mut Sink<'_>) {
        let trimmed = line.trim_start_matches(' ');
        if !self.started {
            self.started = trimmed.starts_with("=== RUN   ");
            return;
        }
        let Some(rest) = trimmed.strip_prefix("--- ") else {
            return;
        };
        let Some((word, rest)) = rest.split_once(": ") else {
            return;
        };
        let status = match word {
            "PASS" => Status::Passed,
            "FAIL" => Status::Failed,
            "SKIP" => Status::Skipped,
            _ => return,
        };
        let (name, micros) = match rest.trim_end().rsplit_once(" (") {
            Some((name, time)) if time.ends_with("s)") => {
                (name, decimal_to_micros(&time[..time.len() - 2], 6))
            }
            _ => (rest.trim_end(), None),
        };
        if !name.is_empty() && !name.contains(' ') {
            sink.record(Runner::GoTest, name, status, micros);
        }
    }
}
