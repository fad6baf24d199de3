//! Hostile output against the memory bound: a million fake `test … ok` lines and a flood of
//! each other format, the longest names the caps allow on both streams, a line that never
//! ends. The heap is counted by a wrapping allocator (`cap`): the parser's live heap is sampled
//! after every chunk, and an allocation that would take it past [`MEMORY_BOUND_BYTES`] fails,
//! which aborts the test — the bound is enforced here, not only reported.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::System;
use std::io::Write as _;

use cap::Cap;
use test_outcomes::{MAX_TESTS, MEMORY_BOUND_BYTES, OutcomeParser, Runner, Stream, TestReport};

#[global_allocator]
static HEAP: Cap<System> = Cap::new(System, usize::MAX);

const CHUNK: usize = 64 * 1024;

/// Feeds `lines` lines made by `line` (written into a reused buffer, so the generator holds
/// no heap of its own past its first chunk) to both streams as the `streams` say, and returns
/// the report and the parser's largest live heap in bytes.
fn flood(
    header: &[u8],
    lines: usize,
    streams: &[Stream],
    mut line: impl FnMut(&mut Vec<u8>, usize),
) -> (TestReport, usize) {
    let mut buf = Vec::with_capacity(CHUNK * 2);
    let baseline = HEAP.allocated();
    HEAP.set_limit(baseline + MEMORY_BOUND_BYTES).unwrap();
    let mut parser = OutcomeParser::new();
    let mut peak = 0usize;
    for &stream in streams {
        parser.push(stream, header);
    }
    let mut i = 0;
    while i < lines {
        buf.clear();
        while buf.len() < CHUNK && i < lines {
            line(&mut buf, i);
            i += 1;
        }
        for &stream in streams {
            parser.push(stream, &buf);
            peak = peak.max(HEAP.allocated().saturating_sub(baseline));
        }
    }
    let report = parser.finish();
    HEAP.set_limit(usize::MAX).unwrap();
    (report, peak)
}

#[test]
fn hostile_floods_stay_within_the_memory_bound() {
    let both = [Stream::Stdout, Stream::Stderr];
    let mut results = Vec::new();

    // The issue's case: a million fake libtest lines.
    let (report, peak) = flood(
        b"running 1000000 tests\n",
        1_000_000,
        &[Stream::Stdout],
        |b, i| {
            writeln!(b, "test flood::t{i} ... ok").unwrap();
        },
    );
    assert_eq!(report.runner, Runner::Libtest);
    assert_eq!(report.tests.len(), MAX_TESTS);
    assert!(report.truncated);
    results.push(("1e6 `test flood::tN ... ok` lines", peak));

    // The worst rows: names as long as the cap keeps, distinct, on both streams.
    let long = "x".repeat(600);
    let (report, peak) = flood(b"running 1 test\n", 3 * MAX_TESTS, &both, |b, i| {
        writeln!(b, "test {i:08}{long} ... FAILED").unwrap();
    });
    assert_eq!(report.tests.len(), MAX_TESTS);
    assert!(report.truncated);
    results.push(("60 000 600-byte names on both streams", peak));

    // Names that grow when made terminal-safe (each ESC becomes two bytes).
    let esc = "\u{1b}".repeat(400);
    let (_, peak) = flood(b"running 1 test\n", 3 * MAX_TESTS, &both, |b, i| {
        writeln!(b, "test {i:08}{esc} ... ok").unwrap();
    });
    results.push(("60 000 escape-heavy names on both streams", peak));

    let (report, peak) = flood(b"", 1_000_000, &both, |b, i| {
        writeln!(b, "test_{i} (m.C.test_{i}) ... ok").unwrap();
    });
    assert_eq!(report.runner, Runner::Unittest);
    results.push(("1e6 unittest lines on both streams", peak));

    let (report, peak) = flood(
        b"=== test session starts ===\n",
        1_000_000,
        &both,
        |b, i| {
            writeln!(b, "t.py::test_{i} PASSED [ 50%]").unwrap();
        },
    );
    assert_eq!(report.runner, Runner::Pytest);
    results.push(("1e6 pytest -v lines on both streams", peak));

    let (report, peak) = flood(b"=== RUN   T\n", 1_000_000, &both, |b, i| {
        writeln!(b, "--- PASS: Test{i} (0.01s)").unwrap();
    });
    assert_eq!(report.runner, Runner::GoTest);
    results.push(("1e6 go -v lines on both streams", peak));

    // Rows held for a package name, and a package line every 1 000 rows: the held rows and
    // the recorded ones share one cap.
    let (report, peak) = flood(b"=== RUN   T\n", 1_000_000, &both, |b, i| {
        writeln!(b, "--- PASS: Test{i} (0.01s)").unwrap();
        if i % 1000 == 999 {
            writeln!(b, "ok  \texample.com/p{}\t0.1s", i / 1000).unwrap();
        }
    });
    assert_eq!(report.runner, Runner::GoTest);
    assert!(report.truncated);
    assert!(report.tests[0].name.starts_with("example.com/p"));
    results.push(("1e6 go -v lines in 1 000 packages on both streams", peak));

    let (report, peak) = flood(b"", 1_000_000, &both, |b, i| {
        writeln!(b, r#"{{"Action":"pass","Test":"Test{i}","Elapsed":0.01}}"#).unwrap();
    });
    assert_eq!(report.runner, Runner::GoTestJson);
    results.push(("1e6 go -json events on both streams", peak));

    // TAP nested past the depth kept, every level's name longer than a name may be.
    let deep = "n".repeat(600);
    let (report, peak) = flood(b"TAP version 13\n", 12_000, &both, |b, i| {
        for level in 0..18 {
            let pad = " ".repeat(level * 4);
            writeln!(b, "{pad}# Subtest: {i}{deep}").unwrap();
        }
        writeln!(b, "{}ok 1 - leaf{i}", " ".repeat(17 * 4)).unwrap();
    });
    assert_eq!(report.runner, Runner::Tap);
    assert_eq!(report.tests.len(), 12_000);
    assert!(report.truncated);
    results.push(("12 000 TAP results nested 18 deep, 600-byte names", peak));

    let (report, peak) = flood(b"<testsuite>", 1_000_000, &both, |b, i| {
        write!(
            b,
            "<testcase classname=\"c\" name=\"t{i}\"><failure/></testcase>"
        )
        .unwrap();
    });
    assert_eq!(report.runner, Runner::JunitXml);
    results.push(("1e6 JUnit test cases on both streams", peak));

    // Tags and test cases that never close.
    let (_, peak) = flood(b"<testsuite>", 100_000, &both, |b, i| {
        write!(b, "<testcase name=\"{i}{}", "a".repeat(1000)).unwrap();
    });
    results.push(("100 MB of one unclosed JUnit tag", peak));

    // One line that never ends.
    let (report, peak) = flood(b"running 1 test\n", 2_000_000, &both, |b, _| {
        b.extend_from_slice(b"test no_newline ... ok ");
    });
    assert!(report.tests.is_empty());
    results.push(("46 MB without a newline on both streams", peak));

    for (case, peak) in &results {
        println!("{peak:>10} bytes peak  {case}");
        assert!(*peak <= MEMORY_BOUND_BYTES, "{case}: {peak} bytes");
    }
    println!("{MEMORY_BOUND_BYTES:>10} bytes bound");
}
