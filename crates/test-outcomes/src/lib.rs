//! Per-test outcomes read from a run's own output, as SWE-bench grades them.
//!
//! [`OutcomeParser`] is a push parser: the worker's stream reader feeds it every chunk of
//! stdout and stderr as it arrives (so it sees the whole stream up to the output cap, not only
//! the kept tail), and [`OutcomeParser::finish`] gives a [`TestReport`]: the detected
//! [`Runner`], one row per test (name, [`Status`], duration where printed), counts, and
//! `truncated` when a cap cut it. Formats: Python unittest (verbose), pytest (`-v` and `-rA`),
//! libtest (`cargo test`), `go test -v`, `go test -json`, TAP (`node --test`) and JUnit XML
//! printed in the stream. Output in no known format gives [`Runner::Unknown`] and no rows,
//! never a guess.
//!
//! Bounds, whatever the input: at most [`MAX_TESTS`] rows of at most [`MAX_NAME_BYTES`],
//! lines over [`MAX_LINE_BYTES`] skipped, so the parser's heap stays under
//! [`MEMORY_BOUND_BYTES`] (measured by `tests/flood.rs`). Names are made terminal-safe.
//!
//! [`compare`] gives SWE-bench's `FAIL_TO_PASS` / `PASS_TO_PASS` / `PASS_TO_FAIL` of a base and
//! a solution run; [`flaky`] names tests whose status differs across repeats; [`analyse`] puts
//! both together for a rehearsal, with its warnings; [`render`] turns them into lines for people.
//!
//! What it deliberately is not: a verdict. Everything here comes from output the solver's code
//! controls (a test can print `test x ... ok` or `--- PASS: TestX`); a report is labelled
//! [`SOURCE`] and must never feed a verdict, a receipt or a response hash. No I/O, no async, no
//! clock: the caller owns the streams.

mod analysis;
mod compare;
mod flaky;
mod formats;
pub mod name;
mod parser;
pub mod render;
mod report;

pub use analysis::{Analysis, analyse, predicate_lists};
pub use compare::{CompareError, Comparison, compare};
pub use flaky::{FlakyTest, flaky};
pub use parser::{OutcomeParser, Stream};
pub use report::{
    Counts, MAX_LINE_BYTES, MAX_NAME_BYTES, MAX_TESTS, MEMORY_BOUND_BYTES, RECORD_BYTES, Runner,
    SOURCE, Status, TestOutcome, TestReport,
};

/// Parses one whole run at once: convenience for tests and for output already in memory.
pub fn parse(stdout: &[u8], stderr: &[u8]) -> TestReport {
    let mut parser = OutcomeParser::new();
    parser.push(Stream::Stdout, stdout);
    parser.push(Stream::Stderr, stderr);
    parser.finish()
}
