//! Where two runs' output first differs, line by line, from what the evidence records keep of
//! each stream (its SHA-256, its length and its last 32 KiB): what `worker rehearse --repeat`
//! and `worker reproduce` show when a verdict reproduces but the output does not.

use serde::Serialize;

use crate::evidence::StreamEvidence;

/// Longest line quoted in a difference, in characters.
pub const MAX_QUOTED_CHARS: usize = 200;

/// Which stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl Stream {
    /// `stdout` or `stderr`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
        }
    }
}

/// Where a line sits: counted from the start when both streams were kept whole, else from the
/// end of the kept tails (the start is gone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "from", content = "line", rename_all = "snake_case")]
pub enum LinePosition {
    /// 1-based line number from the start.
    Start(usize),
    /// 1-based line number from the end (1 = the last line).
    End(usize),
}

/// The first line where two runs' stream differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LineDifference {
    /// The stream.
    pub stream: Stream,
    /// The line.
    pub position: LinePosition,
    /// The first run's line (`None`: it has no such line), quoted up to
    /// [`MAX_QUOTED_CHARS`].
    pub first: Option<String>,
    /// The second run's.
    pub second: Option<String>,
}

impl LineDifference {
    /// `stdout line 9: "Ran 7 tests in 0.048s" vs "Ran 7 tests in 0.035s"`.
    pub fn describe(&self) -> String {
        let at = match self.position {
            LinePosition::Start(n) => format!("line {n}"),
            LinePosition::End(n) => format!("line {n} from the end"),
        };
        let quote = |l: &Option<String>| match l {
            Some(l) => format!("{l:?}"),
            None => "(no such line)".into(),
        };
        format!(
            "{} {at}: {} vs {}",
            self.stream.name(),
            quote(&self.first),
            quote(&self.second)
        )
    }
}

fn quoted(line: &str) -> String {
    if line.chars().count() <= MAX_QUOTED_CHARS {
        return line.to_owned();
    }
    let mut s: String = line.chars().take(MAX_QUOTED_CHARS).collect();
    s.push('…');
    s
}

/// The first differing line of two streams' evidence, or `None` when the streams are equal
/// (same hash and length), or differ only where neither tail reaches.
pub fn first_difference(
    stream: Stream,
    first: &StreamEvidence,
    second: &StreamEvidence,
) -> Option<LineDifference> {
    if first.sha256 == second.sha256 && first.bytes == second.bytes {
        return None;
    }
    let a: Vec<&str> = first.tail.lines().collect();
    let b: Vec<&str> = second.tail.lines().collect();
    let make = |position, x: Option<&&str>, y: Option<&&str>| LineDifference {
        stream,
        position,
        first: x.map(|l| quoted(l)),
        second: y.map(|l| quoted(l)),
    };
    if !first.tail_truncated && !second.tail_truncated {
        let n = a.len().max(b.len());
        return (0..n)
            .find(|i| a.get(*i) != b.get(*i))
            .map(|i| make(LinePosition::Start(i + 1), a.get(i), b.get(i)))
            // Same lines, other bytes (a trailing newline, `\r`): the last line differs.
            .or_else(|| Some(make(LinePosition::Start(n.max(1)), a.last(), b.last())));
    }
    // A tail's first line may be cut mid-line: never blame it.
    let usable = |v: &Vec<&str>, truncated: bool| v.len().saturating_sub(usize::from(truncated));
    let n = usable(&a, first.tail_truncated).min(usable(&b, second.tail_truncated));
    (1..=n)
        .find(|k| a[a.len() - k] != b[b.len() - k])
        .map(|k| make(LinePosition::End(k), a.get(a.len() - k), b.get(b.len() - k)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Sha256Digest;

    fn stream(text: &str, truncated: bool) -> StreamEvidence {
        use sha2::Digest;
        StreamEvidence {
            sha256: Sha256Digest::from_bytes(sha2::Sha256::digest(text.as_bytes()).into()),
            bytes: text.len() as u64 + u64::from(truncated) * 1000,
            tail: text.into(),
            tail_truncated: truncated,
        }
    }

    #[test]
    fn the_timing_line_is_found_and_described() {
        let a = stream("ok\nok\n\nRan 7 tests in 0.048s\n\nOK\n", false);
        let b = stream("ok\nok\n\nRan 7 tests in 0.035s\n\nOK\n", false);
        let d = first_difference(Stream::Stdout, &a, &b).unwrap();
        assert_eq!(
            d.describe(),
            r#"stdout line 4: "Ran 7 tests in 0.048s" vs "Ran 7 tests in 0.035s""#
        );
        assert_eq!(first_difference(Stream::Stdout, &a, &a), None);
    }

    #[test]
    fn a_missing_line_and_a_trailing_byte_are_differences() {
        let a = stream("one\ntwo\n", false);
        let b = stream("one\n", false);
        let d = first_difference(Stream::Stderr, &a, &b).unwrap();
        assert_eq!(d.describe(), r#"stderr line 2: "two" vs (no such line)"#);
        let c = stream("one\ntwo", false);
        let d = first_difference(Stream::Stdout, &a, &c).unwrap();
        assert_eq!(d.position, LinePosition::Start(2));
    }

    #[test]
    fn truncated_tails_are_compared_from_the_end() {
        let a = stream("cut-mid-line\nx\nlast 1\n", true);
        let b = stream("other-cut\nx\nlast 2\n", true);
        let d = first_difference(Stream::Stdout, &a, &b).unwrap();
        assert_eq!(d.position, LinePosition::End(1));
        assert_eq!(
            d.describe(),
            r#"stdout line 1 from the end: "last 1" vs "last 2""#
        );
        // Only the cut first lines differ: nothing to blame.
        let c = stream("cut-elsewhere\nx\nlast 1\n", true);
        assert_eq!(first_difference(Stream::Stdout, &a, &c), None);
    }

    #[test]
    fn long_lines_are_quoted_short() {
        let a = stream(&"a".repeat(500), false);
        let b = stream(&"b".repeat(500), false);
        let d = first_difference(Stream::Stdout, &a, &b).unwrap();
        assert_eq!(d.first.unwrap().chars().count(), MAX_QUOTED_CHARS + 1);
    }
}
