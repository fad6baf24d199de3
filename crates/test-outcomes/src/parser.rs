//! The push parser: fed each chunk of stdout and stderr as it arrives, splits lines under the
//! line cap, hands each line to every format still in the running, and keeps, per stream, the
//! rows of the first format that reports a test there (that stream's runner). The two streams
//! are decided apart and joined only at the end, because the order in which a reader receives
//! stdout and stderr chunks is timing, and the report must not depend on it. Nothing here
//! blocks or allocates past the caps in [`crate::report`].

use std::borrow::Cow;

use crate::formats::{GoJson, GoVerbose, Junit, Libtest, LineFormat, Pytest, Sink, Tap, Unittest};
use crate::report::{MAX_LINE_BYTES, Runner, Table, TestReport};

/// Which of the run's two streams a chunk came from. Each stream has its own line buffer and
/// format state, so interleaved chunks never splice one stream's line into the other's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// Reads per-test outcomes from a run's output as it arrives. Feed every chunk with
/// [`OutcomeParser::push`], then take the report with [`OutcomeParser::finish`]. Memory stays
/// under [`crate::MEMORY_BOUND_BYTES`] whatever the input.
#[derive(Debug, Default)]
pub struct OutcomeParser {
    stdout: StreamState,
    stderr: StreamState,
}

impl OutcomeParser {
    /// A parser that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next chunk of `stream`.
    pub fn push(&mut self, stream: Stream, chunk: &[u8]) {
        let state = match stream {
            Stream::Stdout => &mut self.stdout,
            Stream::Stderr => &mut self.stderr,
        };
        state.push(chunk);
    }

    /// The report, or [`Runner::Unknown`] and no rows. A last line without a newline still
    /// counts. When both streams show the same runner their rows are joined (a name in both
    /// keeps the worse status); when they show different runners, the stream with more rows
    /// is taken (stdout on a tie), so the report never mixes two formats' names.
    pub fn finish(self) -> TestReport {
        let (out_runner, mut out_table) = self.stdout.finish();
        let (err_runner, err_table) = self.stderr.finish();
        match (out_runner, err_runner) {
            (Some(a), Some(b)) if a == b => {
                out_table.join(err_table);
                out_table.into_report(a)
            }
            (Some(a), Some(b)) => {
                if err_table.len() > out_table.len() {
                    err_table.into_report(b)
                } else {
                    out_table.into_report(a)
                }
            }
            (Some(a), None) => out_table.into_report(a),
            (None, Some(b)) => err_table.into_report(b),
            (None, None) => TestReport::unknown(),
        }
    }
}

/// One stream: its partial line, each format's state, and its rows.
#[derive(Debug, Default)]
struct StreamState {
    table: Table,
    runner: Option<Runner>,
    line: Vec<u8>,
    /// The current line passed [`MAX_LINE_BYTES`]; it is skipped up to its newline.
    overlong: bool,
    unittest: Unittest,
    pytest: Pytest,
    libtest: Libtest,
    go_verbose: GoVerbose,
    go_json: GoJson,
    tap: Tap,
    junit: Junit,
}

impl StreamState {
    fn push(&mut self, mut chunk: &[u8]) {
        while !chunk.is_empty() {
            let (piece, rest, ends_line) = match chunk.iter().position(|&b| b == b'\n') {
                Some(at) => (&chunk[..at], &chunk[at + 1..], true),
                None => (chunk, &[][..], false),
            };
            // The XML scanner sees each byte in step with the lines, so which format reports
            // first depends only on the bytes, never on where a chunk happened to end.
            let mut sink = Sink::new(&mut self.table, &mut self.runner);
            if sink.accepts(Junit::RUNNER) {
                let upto = chunk.len() - rest.len();
                self.junit.bytes(&chunk[..upto], &mut sink);
            }
            chunk = rest;
            if !self.overlong {
                if self.line.len().saturating_add(piece.len()) > MAX_LINE_BYTES {
                    self.overlong = true;
                    self.line.clear();
                } else {
                    self.line.extend_from_slice(piece);
                }
            }
            if ends_line {
                self.end_line();
            }
        }
    }

    fn end_line(&mut self) {
        let sink = &mut Sink::new(&mut self.table, &mut self.runner);
        if !self.overlong {
            let mut bytes = self.line.as_slice();
            if let Some(stripped) = bytes.strip_suffix(b"\r") {
                bytes = stripped;
            }
            let text = String::from_utf8_lossy(bytes);
            let text = strip_csi(&text);
            dispatch(
                &text,
                sink,
                &mut [
                    &mut self.unittest,
                    &mut self.pytest,
                    &mut self.libtest,
                    &mut self.go_verbose,
                    &mut self.go_json,
                    &mut self.tap,
                ],
            );
        }
        self.line.clear();
        self.overlong = false;
    }

    fn finish(mut self) -> (Option<Runner>, Table) {
        if !self.line.is_empty() || self.overlong {
            self.end_line();
        }
        let sink = &mut Sink::new(&mut self.table, &mut self.runner);
        let formats: [&mut dyn LineFormat; 6] = [
            &mut self.unittest,
            &mut self.pytest,
            &mut self.libtest,
            &mut self.go_verbose,
            &mut self.go_json,
            &mut self.tap,
        ];
        for format in formats {
            if sink.accepts(format.runner()) {
                format.finish(sink);
            }
        }
        if sink.accepts(Junit::RUNNER) {
            self.junit.finish(sink);
        }
        match self.runner {
            Some(runner) if !self.table.is_empty() => (Some(runner), self.table),
            _ => (None, Table::default()),
        }
    }
}

fn dispatch(line: &str, sink: &mut Sink<'_>, formats: &mut [&mut dyn LineFormat]) {
    for format in formats.iter_mut() {
        if sink.accepts(format.runner()) {
            format.line(line, sink);
        }
    }
}

/// `line` without ANSI CSI sequences (`ESC [ … final`), which runners print around statuses
/// when colour is forced (`CARGO_TERM_COLOR=always`, `pytest --color=yes`).
fn strip_csi(line: &str) -> Cow<'_, str> {
    if !line.contains('\u{1b}') {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            // Parameter and intermediate bytes, then one final byte in @..~.
            for d in chars.by_ref() {
                if ('@'..='~').contains(&d) {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Status;

    /// Feeds `chunks` to one parser on stdout, as a worker would as they arrive.
    fn parse_stdout(chunks: &[&[u8]]) -> TestReport {
        let mut parser = OutcomeParser::new();
        for chunk in chunks {
            parser.push(Stream::Stdout, chunk);
        }
        parser.finish()
    }

    #[test]
    fn a_line_split_across_chunks_is_read_whole() {
        let report = parse_stdout(&[b"running 1 test\ntest a::b .", b"", b".. o", b"k\n"]);
        assert_eq!(report.runner, Runner::Libtest);
        assert_eq!(report.status_of("a::b"), Some(Status::Passed));
    }

    #[test]
    fn streams_keep_their_own_partial_lines() {
        let mut parser = OutcomeParser::new();
        parser.push(Stream::Stdout, b"running 2 tests\ntest x ... ");
        parser.push(Stream::Stderr, b"noise on stderr\n");
        parser.push(Stream::Stdout, b"ok\ntest y ... FAILED\n");
        let report = parser.finish();
        assert_eq!(report.status_of("x"), Some(Status::Passed));
        assert_eq!(report.status_of("y"), Some(Status::Failed));
    }

    #[test]
    fn an_overlong_line_is_skipped_whole_and_the_next_is_read() {
        let mut long = b"running 1 test\ntest ".to_vec();
        long.extend(std::iter::repeat_n(b'x', MAX_LINE_BYTES * 2));
        long.extend_from_slice(b" ... ok\ntest short ... ok\n");
        let report = parse_stdout(&[&long]);
        assert_eq!(report.tests.len(), 1);
        assert_eq!(report.status_of("short"), Some(Status::Passed));
    }

    #[test]
    fn last_line_without_newline_counts() {
        let report = parse_stdout(&[b"running 1 test\ntest z ... ok"]);
        assert_eq!(report.status_of("z"), Some(Status::Passed));
    }

    #[test]
    fn no_known_format_is_unknown_not_a_guess() {
        let report = parse_stdout(&[b"all good\nok\nPASS\n3 passed, 0 failed\ntest a ... ok\n"]);
        assert_eq!(report.runner, Runner::Unknown);
        assert!(report.tests.is_empty());
    }

    #[test]
    fn the_report_does_not_depend_on_how_the_streams_interleave() {
        let out: &[u8] = b"running 1 test\ntest a ... ok\n";
        let err: &[u8] = b"=== RUN   TestB\n--- FAIL: TestB (0.00s)\n--- PASS: TestC (0.00s)\n";
        let mut first = OutcomeParser::new();
        first.push(Stream::Stdout, out);
        first.push(Stream::Stderr, err);
        let mut second = OutcomeParser::new();
        second.push(Stream::Stderr, err);
        second.push(Stream::Stdout, out);
        let (first, second) = (first.finish(), second.finish());
        assert_eq!(first, second);
        // Different runners: the stream with more rows.
        assert_eq!(first.runner, Runner::GoTest);
    }

    #[test]
    fn one_runner_on_both_streams_is_joined() {
        let mut parser = OutcomeParser::new();
        parser.push(
            Stream::Stdout,
            b"running 2 tests\ntest a ... ok\ntest b ... ok\n",
        );
        parser.push(Stream::Stderr, b"running 1 test\ntest b ... FAILED\n");
        let report = parser.finish();
        assert_eq!(report.tests.len(), 2);
        assert_eq!(report.status_of("b"), Some(Status::Failed));
    }

    #[test]
    fn coloured_statuses_are_read() {
        let report = parse_stdout(&[b"running 1 test\ntest c ... \x1b[32mok\x1b[0m\n"]);
        assert_eq!(report.status_of("c"), Some(Status::Passed));
    }

    #[test]
    fn the_first_runner_to_report_is_kept_and_others_ignored() {
        let report = parse_stdout(&[
            b"running 1 test\ntest a ... ok\n=== RUN   TestB\n--- FAIL: TestB (0.00s)\n",
        ]);
        assert_eq!(report.runner, Runner::Libtest);
        assert_eq!(report.tests.len(), 1);
    }
}
