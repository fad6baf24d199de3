//! `go test -v`, after its first `=== RUN` line:
//!
//! ```text
//! === RUN   TestTable/wrong
//! --- FAIL: TestTable (0.00s)
//!     --- FAIL: TestTable/wrong (0.00s)
//! --- SKIP: TestSkipped (0.00s)
//! FAIL
//! FAIL<TAB>example.com/m/pkg<TAB>0.023s
//! ```
//!
//! Subtests are indented and already carry their parent's name. The package is named only
//! after its tests, on its result line (`ok  \tPKG\t…`, `FAIL\tPKG\t…`), so a package's rows
//! are held until that line and then recorded as `PKG.TestName`: two packages' `TestX` are two
//! rows. Rows the output never named a package for (a run cut off before the line) are
//! recorded as printed.

use super::{LineFormat, Sink};
use crate::name::decimal_to_micros;
use crate::report::{MAX_TESTS, Runner, Status, Table};

/// go -v's state.
#[derive(Debug, Default)]
pub(crate) struct GoVerbose {
    started: bool,
    /// Rows since the last package result line. Counted with the stream's recorded rows
    /// against [`MAX_TESTS`], so holding them never lifts the memory bound.
    pending: Table,
}

impl GoVerbose {
    /// Records the held rows under `package`, or as printed when it is `None`.
    fn flush(&mut self, package: Option<&str>, sink: &mut Sink<'_>) {
        let (truncated, rows) = self.pending.drain();
        if truncated {
            sink.mark_truncated();
        }
        let mut qualified = String::new();
        for (name, status, micros) in rows {
            let name = match package {
                Some(package) => {
                    qualified.clear();
                    qualified.push_str(package);
                    qualified.push('.');
                    qualified.push_str(&name);
                    qualified.as_str()
                }
                None => name.as_str(),
            };
            sink.record(Runner::GoTest, name, status, micros);
        }
    }
}

/// The package a go result line names: `ok  \tPKG\t0.01s`, `ok  \tPKG\t(cached)`,
/// `FAIL\tPKG\t0.02s`, `FAIL\tPKG [build failed]`, `?   \tPKG\t[no test files]`.
fn package_line(line: &str) -> Option<&str> {
    let rest = line
        .strip_prefix("ok  \t")
        .or_else(|| line.strip_prefix("FAIL\t"))
        .or_else(|| line.strip_prefix("?   \t"))?;
    let package = rest.split(['\t', ' ']).next()?;
    (!package.is_empty()).then_some(package)
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
        if let Some(package) = package_line(line) {
            self.flush(Some(package), sink);
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
        if !name.is_empty() && !name.contains(' ') && sink.claim(Runner::GoTest) {
            let room = MAX_TESTS.saturating_sub(sink.rows());
            self.pending.record_under(name, status, micros, room);
        }
    }

    fn finish(&mut self, sink: &mut Sink<'_>) {
        self.flush(None, sink);
    }
}
