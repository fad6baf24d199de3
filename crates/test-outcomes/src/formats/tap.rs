//! TAP version 13 as `node --test` prints it when its output is not a terminal (its default
//! reporter there), after the `TAP version` line:
//!
//! ```text
//! # Subtest: outer
//!     # Subtest: inner
//!     not ok 1 - inner
//!       ---
//!       duration_ms: 0.803476
//!       ...
//! not ok 6 - outer
//! ok 3 - skipped one # SKIP not today
//! ok 7 - a suite
//!   ---
//!   type: 'suite'
//!   ...
//! ```
//!
//! Each nesting level is indented four spaces; a nested test is named by its parents'
//! `# Subtest:` names and its own, joined by ` > `. `# SKIP` and `# TODO` are skipped; a
//! `describe` block (`type: 'suite'`) is not a test. Node escapes `#` in names as `\#`.

use super::{LineFormat, Sink};
use crate::name::decimal_to_micros;
use crate::report::{MAX_NAME_BYTES, Runner, Status};

/// Deepest nesting whose names are kept; deeper tests are named by the levels kept.
const MAX_DEPTH: usize = 16;

/// TAP's state: the names of the enclosing subtests and the result whose YAML block may still
/// add its duration (or say it was a suite).
#[derive(Debug, Default)]
pub(crate) struct Tap {
    started: bool,
    stack: Vec<String>,
    pending: Option<Pending>,
}

#[derive(Debug)]
struct Pending {
    name: String,
    status: Status,
    level: usize,
    micros: Option<u64>,
    suite: bool,
}

impl Tap {
    fn flush(&mut self, sink: &mut Sink<'_>) {
        if let Some(p) = self.pending.take()
            && !p.suite
        {
            sink.record(Runner::Tap, &p.name, p.status, p.micros);
        }
    }
}

impl LineFormat for Tap {
    fn runner(&self) -> Runner {
        Runner::Tap
    }

    fn line(&mut self, line: &str, sink: &mut Sink<'_>) {
        let body = line.trim_start_matches(' ');
        let indent = line.len() - body.len();
        if !self.started {
            self.started = body.starts_with("TAP version ");
            return;
        }
        if let Some(p) = &mut self.pending {
            let yaml_indent = p.level.saturating_mul(4).saturating_add(2);
            if body.is_empty() {
                return;
            }
            if indent >= yaml_indent {
                if indent == yaml_indent {
                    if let Some(ms) = body.strip_prefix("duration_ms: ") {
                        p.micros = decimal_to_micros(ms.trim(), 3);
                    } else if body == "type: 'suite'" {
                        p.suite = true;
                    }
                }
                return;
            }
            self.flush(sink);
        }
        let level = indent / 4;
        if let Some(name) = body.strip_prefix("# Subtest: ") {
            self.stack.truncate(level);
            if self.stack.len() == level && level < MAX_DEPTH {
                self.stack.push(cut(unescape(name).0));
            }
            return;
        }
        let Some((status, rest)) = result(body) else {
            return;
        };
        let (description, directive) = unescape(rest);
        let status = match directive {
            Some(d) if starts_with_ignore_case(d, "SKIP") || starts_with_ignore_case(d, "TODO") => {
                Status::Skipped
            }
            _ => status,
        };
        let mut name = String::new();
        for parent in self.stack.iter().take(level) {
            name.push_str(parent);
            name.push_str(" > ");
        }
        name.push_str(description.trim());
        self.pending = Some(Pending {
            name: cut(name),
            status,
            level,
            micros: None,
            suite: false,
        });
    }

    fn finish(&mut self, sink: &mut Sink<'_>) {
        self.flush(sink);
    }
}

/// `ok`/`not ok`, then an optional number and an optional `- `: the status and the rest.
fn result(body: &str) -> Option<(Status, &str)> {
    let (status, rest) = if let Some(rest) = body.strip_prefix("not ok") {
        (Status::Failed, rest)
    } else {
        (Status::Passed, body.strip_prefix("ok")?)
    };
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    let rest = rest.trim_start();
    let rest = rest
        .trim_start_matches(|c: char| c.is_ascii_digit())
        .trim_start();
    let rest = rest.strip_prefix("- ").unwrap_or(rest);
    Some((status, rest))
}

/// The description with `\#` and `\\` unescaped, and the directive after the first unescaped
/// `#`, if any.
fn unescape(text: &str) -> (String, Option<&str>) {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '\\' => match chars.peek() {
                Some(&(_, next @ ('#' | '\\'))) => {
                    out.push(next);
                    chars.next();
                }
                _ => out.push(c),
            },
            '#' => {
                let directive = text.get(at + 1..).unwrap_or("").trim_start();
                let kept = out.trim_end().len();
                out.truncate(kept);
                return (out, Some(directive));
            }
            _ => out.push(c),
        }
    }
    (out, None)
}

fn starts_with_ignore_case(text: &str, prefix: &str) -> bool {
    text.get(..prefix.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
}

/// At most a character past [`MAX_NAME_BYTES`]: bounds the stack, and a name cut here is still
/// longer than the table keeps, so the table cuts it again and marks the report truncated.
fn cut(mut text: String) -> String {
    if text.len() > MAX_NAME_BYTES + 4 {
        let mut end = MAX_NAME_BYTES + 4;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}
