//! Progress indication for long tree operations.
//!
//! Hashing and staging report through [`ProgressSink`] so library callers (the feed runner, the
//! run step) choose how or whether to show it; the CLI draws one self-overwriting line on stderr
//! only when stderr is a terminal, and only once an operation has lasted long enough to be worth
//! watching, so short runs and logs stay clean.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Receives progress of a tree operation. Calls come from the thread that hashes, in order.
pub trait ProgressSink {
    /// The operation knows its size: `files` regular files holding `bytes` bytes.
    fn start(&mut self, files: u64, bytes: u64);
    /// `files` more files were begun and `bytes` more bytes were hashed.
    fn advance(&mut self, files: u64, bytes: u64);
    /// A streamed walk has now found `files` files holding `bytes` bytes in all: the totals
    /// grow while the tree is read, because it is listed one folder at a time.
    fn listed(&mut self, _files: u64, _bytes: u64) {}
    /// The operation ended (successfully or not).
    fn finish(&mut self);
}

/// A sink that shows nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProgress;

impl ProgressSink for NoProgress {
    fn start(&mut self, _files: u64, _bytes: u64) {}
    fn advance(&mut self, _files: u64, _bytes: u64) {}
    fn finish(&mut self) {}
}

/// How long an operation must run before a progress line appears.
pub const SHOW_AFTER: Duration = Duration::from_millis(700);
/// Least time between two redraws.
pub const REDRAW_EVERY: Duration = Duration::from_millis(100);

/// Draws `label: 12.0/512.0 MiB (2%), 300/20000 files` on stderr, overwriting itself.
#[derive(Debug)]
pub struct TerminalProgress {
    // Owned when a caller builds it (a batch names its task in it), borrowed otherwise.
    label: std::borrow::Cow<'static, str>,
    started: Instant,
    last_draw: Option<Instant>,
    total_files: u64,
    total_bytes: u64,
    done_files: u64,
    done_bytes: u64,
}

impl TerminalProgress {
    /// A progress line prefixed with `label`.
    pub fn new(label: impl Into<std::borrow::Cow<'static, str>>) -> Self {
        Self {
            label: label.into(),
            started: Instant::now(),
            last_draw: None,
            total_files: 0,
            total_bytes: 0,
            done_files: 0,
            done_bytes: 0,
        }
    }

    fn draw(&mut self, now: Instant) {
        let line = render_line(
            &self.label,
            self.done_files,
            self.total_files,
            self.done_bytes,
            self.total_bytes,
        );
        // A failed write to stderr must not fail the operation it describes.
        let _ = write!(std::io::stderr().lock(), "\r{line}\x1b[K");
        self.last_draw = Some(now);
    }
}

impl ProgressSink for TerminalProgress {
    fn start(&mut self, files: u64, bytes: u64) {
        self.started = Instant::now();
        self.total_files = files;
        self.total_bytes = bytes;
    }

    fn advance(&mut self, files: u64, bytes: u64) {
        self.done_files = self.done_files.saturating_add(files);
        self.done_bytes = self.done_bytes.saturating_add(bytes);
        let now = Instant::now();
        if should_draw(self.started, self.last_draw, now) {
            self.draw(now);
        }
    }

    fn listed(&mut self, files: u64, bytes: u64) {
        self.total_files = self.total_files.max(files);
        self.total_bytes = self.total_bytes.max(bytes);
    }

    fn finish(&mut self) {
        if self.last_draw.is_some() {
            let now = Instant::now();
            self.draw(now);
            let _ = writeln!(std::io::stderr().lock());
        }
    }
}

/// The CLI's choice: a terminal line unless `quiet` or stderr is not a terminal.
pub fn stderr_progress(
    label: impl Into<std::borrow::Cow<'static, str>>,
    quiet: bool,
) -> Box<dyn ProgressSink> {
    if quiet || !std::io::stderr().is_terminal() {
        Box::new(NoProgress)
    } else {
        Box::new(TerminalProgress::new(label))
    }
}

/// Announces the steps of a longer operation (the runs of a rehearsal) as whole lines: one when
/// a step starts, one when it ends with its result.
pub trait StepSink {
    /// `step` began.
    fn started(&mut self, step: &str);
    /// `step` ended with `result` (a short phrase: `passed in 0.3 s`).
    fn finished(&mut self, step: &str, result: &str);
}

/// A step sink that shows nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoSteps;

impl StepSink for NoSteps {
    fn started(&mut self, _step: &str) {}
    fn finished(&mut self, _step: &str, _result: &str) {}
}

/// Writes `label: step …` and `label: step: result` lines to `out`; step names and results may
/// come from a run's author, so they pass through [`terminal_safe`].
#[derive(Debug)]
pub struct LineSteps<W: Write> {
    label: &'static str,
    out: W,
}

impl<W: Write> LineSteps<W> {
    /// Lines prefixed with `label`, written to `out`.
    pub fn new(label: &'static str, out: W) -> Self {
        Self { label, out }
    }

    /// The writer, for tests.
    pub fn into_inner(self) -> W {
        self.out
    }
}

impl<W: Write> StepSink for LineSteps<W> {
    fn started(&mut self, step: &str) {
        let line = terminal_safe(&format!("{}: {step} …", self.label));
        // Progress must never fail the operation it describes.
        let _ = writeln!(self.out, "{line}");
    }

    fn finished(&mut self, step: &str, result: &str) {
        let line = terminal_safe(&format!("{}: {step}: {result}", self.label));
        let _ = writeln!(self.out, "{line}");
    }
}

/// The CLI's choice of step lines: on stderr unless `quiet` or stderr is not a terminal.
pub fn stderr_steps(label: &'static str, quiet: bool) -> Box<dyn StepSink + Send> {
    if quiet || !std::io::stderr().is_terminal() {
        Box::new(NoSteps)
    } else {
        Box::new(LineSteps::new(label, std::io::stderr()))
    }
}

/// Whether to redraw at `now`: never before [`SHOW_AFTER`], then at most every
/// [`REDRAW_EVERY`].
pub fn should_draw(started: Instant, last_draw: Option<Instant>, now: Instant) -> bool {
    if now.saturating_duration_since(started) < SHOW_AFTER {
        return false;
    }
    match last_draw {
        None => true,
        Some(last) => now.saturating_duration_since(last) >= REDRAW_EVERY,
    }
}

/// One progress line, without control characters.
pub fn render_line(
    label: &str,
    done_files: u64,
    total_files: u64,
    done_bytes: u64,
    total_bytes: u64,
) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    let percent = if total_bytes == 0 {
        100
    } else {
        // u128 keeps `done * 100` exact for any u64 sizes.
        (u128::from(done_bytes.min(total_bytes)) * 100 / u128::from(total_bytes)) as u64
    };
    format!(
        "{label}: {:.1}/{:.1} MiB ({percent}%), {done_files}/{total_files} files",
        done_bytes as f64 / MIB,
        total_bytes as f64 / MIB,
    )
}

/// `text` with every character a terminal would act on instead of print shown visibly: C0
/// controls other than newline and tab (ESC as `\e`, CR as `\r`, others as `\xNN`), DEL, C1
/// controls (U+0080–U+009F, which some terminals take as CSI and OSC) and the bidirectional
/// overrides and isolates (which reorder what is shown) as `\u{NNNN}`. Solver output, and
/// anything else a run's author controls, goes through this before it reaches a terminal, so
/// no output can move the cursor, erase or overprint a line, or retitle the window — a failed
/// run cannot be made to look passed. JSON output needs none of this (serde escapes it).
pub fn terminal_safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\t' => out.push(c),
            '\u{1b}' => out.push_str("\\e"),
            '\r' => out.push_str("\\r"),
            '\0'..='\u{1f}' | '\u{7f}' => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            '\u{80}'..='\u{9f}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}' => out.push_str(&format!("\\u{{{:04x}}}", u32::from(c))),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_safe_shows_every_control_character_visibly() {
        assert_eq!(
            terminal_safe("FAILED\n\u{1b}[1A\u{1b}[2K\rPASSED\tok\n"),
            "FAILED\n\\e[1A\\e[2K\\rPASSED\tok\n"
        );
        assert_eq!(
            terminal_safe("\u{1b}]0;t\u{7}\u{0}\u{7f}\u{9b}2J\u{202e}x"),
            "\\e]0;t\\x07\\x00\\x7f\\u{009b}2J\\u{202e}x"
        );
        assert_eq!(terminal_safe("plain ünïcode ✓"), "plain ünïcode ✓");
        let once = terminal_safe("a\u{1b}b\rc\u{85}");
        assert_eq!(terminal_safe(&once), once);
        for c in once.chars() {
            assert!(!c.is_control(), "{once:?}");
        }
    }

    #[test]
    fn line_shows_mib_percent_and_files() {
        let line = render_line("staging", 3, 10, 256 * 1024 * 1024, 512 * 1024 * 1024);
        assert_eq!(line, "staging: 256.0/512.0 MiB (50%), 3/10 files");
    }

    #[test]
    fn empty_tree_is_complete_and_overshoot_caps_at_hundred() {
        assert_eq!(
            render_line("x", 0, 0, 0, 0),
            "x: 0.0/0.0 MiB (100%), 0/0 files"
        );
        assert!(render_line("x", 1, 1, u64::MAX, 10).contains("(100%)"));
    }

    #[test]
    fn step_lines_announce_start_and_result_and_cannot_repaint_the_terminal() {
        let mut steps = LineSteps::new("rehearse", Vec::new());
        steps.started("run 1/2 (solution)");
        steps.finished("run 1/2 (solution)", "failed: exited 1\x1b[1A\rpassed");
        let text = String::from_utf8(steps.into_inner()).unwrap();
        assert_eq!(
            text,
            "rehearse: run 1/2 (solution) …\nrehearse: run 1/2 (solution): failed: exited \
             1\\e[1A\\rpassed\n"
        );
    }

    #[test]
    fn stays_hidden_for_a_moment_then_throttles() {
        let t0 = Instant::now();
        assert!(!should_draw(t0, None, t0 + SHOW_AFTER / 2));
        assert!(should_draw(t0, None, t0 + SHOW_AFTER));
        let drawn = t0 + SHOW_AFTER;
        assert!(!should_draw(t0, Some(drawn), drawn + REDRAW_EVERY / 2));
        assert!(should_draw(t0, Some(drawn), drawn + REDRAW_EVERY));
    }
}
