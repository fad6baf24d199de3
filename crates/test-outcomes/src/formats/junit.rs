//! JUnit XML printed in the stream (a runner's `--junitxml` file `cat`ed by the benchmark,
//! or a runner that prints it), read byte by byte because runners print it on a few very long
//! lines. After a `<testsuite` or `<testsuites` tag, each `<testcase name=… classname=… time=…>`
//! is a row named `classname.name`: passed when it closes with no child, failed with a
//! `<failure>`, error with an `<error>`, skipped with a `<skipped>`. Comments and CDATA sections
//! are stepped over; a tag longer than [`MAX_TAG_BYTES`] is dropped; a test case still open
//! when the stream ends is a row only if a child already said it did not pass.

use super::Sink;
use crate::name::decimal_to_micros;
use crate::report::{Runner, Status};

/// Longest tag read (attributes included); longer ones are dropped.
pub(crate) const MAX_TAG_BYTES: usize = 4096;

/// The scanner's state across chunks.
#[derive(Debug, Default)]
pub(crate) struct Junit {
    state: State,
    tag: Vec<u8>,
    /// Inside an attribute value quoted with this byte.
    quote: Option<u8>,
    started: bool,
    case: Option<Case>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum State {
    #[default]
    Text,
    Tag,
    /// Inside `<![CDATA[`; how much of `]]>` was just seen.
    Cdata(u8),
    /// Inside `<!--`; how much of `-->` was just seen.
    Comment(u8),
}

#[derive(Debug)]
struct Case {
    name: String,
    status: Status,
    micros: Option<u64>,
}

impl Junit {
    pub(crate) const RUNNER: Runner = Runner::JunitXml;

    pub(crate) fn bytes(&mut self, chunk: &[u8], sink: &mut Sink<'_>) {
        for &b in chunk {
            self.state = match self.state {
                State::Text => {
                    if b == b'<' {
                        self.tag.clear();
                        self.quote = None;
                        State::Tag
                    } else {
                        State::Text
                    }
                }
                State::Tag => self.tag_byte(b, sink),
                State::Cdata(seen) => closer(seen, b, b']'),
                State::Comment(seen) => closer(seen, b, b'-'),
            }
        }
    }

    fn tag_byte(&mut self, b: u8, sink: &mut Sink<'_>) -> State {
        if self.tag.is_empty() && !(b.is_ascii_alphabetic() || matches!(b, b'/' | b'!' | b'?')) {
            // `a < b` in ordinary output: not a tag.
            return State::Text;
        }
        match self.quote {
            Some(q) if b == q => self.quote = None,
            Some(_) => {}
            None if b == b'>' => {
                self.tag_done(sink);
                return State::Text;
            }
            None if matches!(b, b'"' | b'\'') && self.tag.last() == Some(&b'=') => {
                self.quote = Some(b);
            }
            None => {}
        }
        if self.tag.len() >= MAX_TAG_BYTES {
            self.tag.clear();
            return State::Text;
        }
        self.tag.push(b);
        match self.tag.as_slice() {
            b"![CDATA[" => State::Cdata(0),
            b"!--" => State::Comment(0),
            _ => State::Tag,
        }
    }

    fn tag_done(&mut self, sink: &mut Sink<'_>) {
        let text = String::from_utf8_lossy(&self.tag).into_owned();
        let text = text.trim_end();
        if let Some(end) = text.strip_prefix('/') {
            if end.trim() == "testcase" {
                self.close_case(sink);
            }
            return;
        }
        let self_closing = text.ends_with('/');
        let text = text.strip_suffix('/').unwrap_or(text);
        let (element, attributes) = text
            .split_once(|c: char| c.is_ascii_whitespace())
            .unwrap_or((text, ""));
        match element {
            "testsuite" | "testsuites" => self.started = true,
            "testcase" if self.started => {
                // A case left open by a cut or malformed stream: count it only if it failed.
                self.finish_open_case(sink);
                let mut name = String::new();
                let mut classname = String::new();
                let mut micros = None;
                for (key, value) in Attributes(attributes) {
                    match key {
                        "name" => name = decode(value),
                        "classname" => classname = decode(value),
                        "time" => micros = decimal_to_micros(value.trim(), 6),
                        _ => {}
                    }
                }
                if !classname.is_empty() {
                    name = format!("{classname}.{name}");
                }
                self.case = Some(Case {
                    name,
                    status: Status::Passed,
                    micros,
                });
                if self_closing {
                    self.close_case(sink);
                }
            }
            "failure" | "error" | "skipped" => {
                if let Some(case) = &mut self.case {
                    let status = match element {
                        "failure" => Status::Failed,
                        "error" => Status::Error,
                        _ => Status::Skipped,
                    };
                    if within_case_rank(status) > within_case_rank(case.status) {
                        case.status = status;
                    }
                }
            }
            _ => {}
        }
    }

    fn close_case(&mut self, sink: &mut Sink<'_>) {
        if let Some(case) = self.case.take() {
            sink.record(Runner::JunitXml, &case.name, case.status, case.micros);
        }
    }

    fn finish_open_case(&mut self, sink: &mut Sink<'_>) {
        if self
            .case
            .as_ref()
            .is_some_and(|c| c.status != Status::Passed)
        {
            self.close_case(sink);
        }
        self.case = None;
    }

    pub(crate) fn finish(&mut self, sink: &mut Sink<'_>) {
        self.finish_open_case(sink);
    }
}

/// A failure or error outranks a skip; any child outranks the initial pass.
fn within_case_rank(status: Status) -> u8 {
    match status {
        Status::Passed => 0,
        Status::Skipped => 1,
        Status::Failed => 2,
        Status::Error => 3,
    }
}

/// Steps through `]]>` (mark `]`) or `-->` (mark `-`): `seen` marks so far.
fn closer(seen: u8, b: u8, mark: u8) -> State {
    let next = if b == mark {
        seen.saturating_add(1).min(2)
    } else if b == b'>' && seen == 2 {
        return State::Text;
    } else {
        0
    };
    if mark == b']' {
        State::Cdata(next)
    } else {
        State::Comment(next)
    }
}

/// `key="value"` pairs (either quote); stops at the first thing that is not one.
struct Attributes<'a>(&'a str);

impl<'a> Iterator for Attributes<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.0.trim_start();
        let (key, rest) = rest.split_once('=')?;
        let rest = rest.trim_start();
        let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
        let (value, rest) = rest.get(1..)?.split_once(quote)?;
        self.0 = rest;
        Some((key.trim(), value))
    }
}

/// XML's five named entities and numeric references; anything else is kept as written.
fn decode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let decoded = after.split_once(';').and_then(|(entity, tail)| {
            let c = match entity {
                "lt" => Some('<'),
                "gt" => Some('>'),
                "amp" => Some('&'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                _ => {
                    let number = entity.strip_prefix('#')?;
                    let code = match number
                        .strip_prefix('x')
                        .or_else(|| number.strip_prefix('X'))
                    {
                        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                        None => number.parse().ok()?,
                    };
                    char::from_u32(code)
                }
            }?;
            Some((c, tail))
        });
        match decoded {
            Some((c, tail)) => {
                out.push(c);
                rest = tail;
            }
            None => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}
