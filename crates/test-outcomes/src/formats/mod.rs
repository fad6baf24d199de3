//! One module per output format. A line format sees each complete line (without its newline,
//! CR and colour codes) and records rows through a [`Sink`]; JUnit XML is scanned byte by byte.
//! Each format only starts reading results after a marker its runner always prints first
//! (`running N tests`, `=== RUN`, `TAP version`, pytest's session header, `<testsuite`), or on
//! lines specific enough to stand alone (unittest's `name (dotted.id) ... ok`, go's JSON events),
//! so ordinary output is not taken for tests.

mod go_json;
mod go_verbose;
mod junit;
mod libtest;
mod pytest;
mod tap;
mod unittest;

pub(crate) use go_json::GoJson;
pub(crate) use go_verbose::GoVerbose;
pub(crate) use junit::Junit;
pub(crate) use libtest::Libtest;
pub(crate) use pytest::Pytest;
pub(crate) use tap::Tap;
pub(crate) use unittest::Unittest;

use crate::report::{Runner, Status, Table};

/// Where formats put rows. The first runner to record a row becomes the run's runner; rows of
/// any other runner are ignored from then on, so one report never mixes two formats' names.
pub(crate) struct Sink<'a> {
    table: &'a mut Table,
    runner: &'a mut Option<Runner>,
}

impl<'a> Sink<'a> {
    pub(crate) fn new(table: &'a mut Table, runner: &'a mut Option<Runner>) -> Self {
        Self { table, runner }
    }

    /// Whether rows of `runner` are still taken.
    pub(crate) fn accepts(&self, runner: Runner) -> bool {
        self.runner.is_none_or(|r| r == runner)
    }

    /// Makes `runner` this stream's runner before it records a row (go -v holds a package's
    /// rows until the package's result line names it); false when another runner has it.
    pub(crate) fn claim(&mut self, runner: Runner) -> bool {
        if !self.accepts(runner) {
            return false;
        }
        *self.runner = Some(runner);
        true
    }

    /// Rows recorded so far.
    pub(crate) fn rows(&self) -> usize {
        self.table.len()
    }

    /// Marks the report as cut short by a cap.
    pub(crate) fn mark_truncated(&mut self) {
        self.table.mark_truncated();
    }

    pub(crate) fn record(
        &mut self,
        runner: Runner,
        name: &str,
        status: Status,
        duration_micros: Option<u64>,
    ) {
        if !self.accepts(runner) {
            return;
        }
        *self.runner = Some(runner);
        self.table.record(name, status, duration_micros);
    }
}

/// A format read line by line.
pub(crate) trait LineFormat {
    /// The runner this format's rows are labelled with.
    fn runner(&self) -> Runner;
    /// One complete line.
    fn line(&mut self, line: &str, sink: &mut Sink<'_>);
    /// The stream ended: record anything still pending.
    fn finish(&mut self, _sink: &mut Sink<'_>) {}
}
