//! Python `unittest` at verbosity 2 (`python -m unittest -v`, `TextTestRunner(verbosity=2)`,
//! Django's runner):
//!
//! ```text
//! test_ok (mod.Class.test_ok) ... ok
//! test_doc (mod.Class.test_doc)
//! First line of the docstring. ... FAIL
//! test_noisy (mod.Class.test_noisy) ... output the test printed
//! ok
//! test_sub (mod.Class.test_sub) ...
//!   test_sub (mod.Class.test_sub) (i=1) ... FAIL
//! ```
//!
//! Names are the test id (`mod.Class.test_ok`); Python before 3.11 prints only `(mod.Class)`,
//! and the method name is appended. A failing subtest fails its test.

use super::{LineFormat, Sink};
use crate::report::{Runner, Status};

/// unittest's state: the test whose status has not been printed yet.
#[derive(Debug, Default)]
pub(crate) struct Unittest {
    pending: Option<Pending>,
}

#[derive(Debug)]
struct Pending {
    name: String,
    /// `true` after `name (id)` alone on a line: the next line is the docstring and its status.
    awaiting_docstring: bool,
}

impl LineFormat for Unittest {
    fn runner(&self) -> Runner {
        Runner::Unittest
    }

    fn line(&mut self, line: &str, sink: &mut Sink<'_>) {
        if let Some(pending) = self.pending.take() {
            if pending.awaiting_docstring {
                if let Some(at) = line.rfind(" ... ")
                    && let Some(status) = status_word(&line[at + 5..])
                {
                    sink.record(Runner::Unittest, &pending.name, status, None);
                    return;
                }
            } else if let Some(status) = status_word(line) {
                sink.record(Runner::Unittest, &pending.name, status, None);
                return;
            }
            // Not the status yet (more output from the test): keep waiting, unless this line
            // starts another test.
            if header(line.trim_start()).is_none() {
                self.pending = Some(Pending {
                    awaiting_docstring: false,
                    ..pending
                });
                return;
            }
        }
        let indented = line.starts_with(' ');
        let Some((name, rest)) = header(line.trim_start()) else {
            return;
        };
        if indented {
            // A subtest line: `  name (id) (params) ... FAIL`; only failures are printed.
            if let Some(at) = rest.rfind(" ... ")
                && let Some(status) = status_word(&rest[at + 5..])
                && status.is_failing()
            {
                sink.record(Runner::Unittest, &name, status, None);
            }
            return;
        }
        if rest.is_empty() {
            self.pending = Some(Pending {
                name,
                awaiting_docstring: true,
            });
            return;
        }
        let Some(after) = rest.strip_prefix(" ...") else {
            return;
        };
        match status_word(after.strip_prefix(' ').unwrap_or(after)) {
            Some(status) => sink.record(Runner::Unittest, &name, status, None),
            None => {
                self.pending = Some(Pending {
                    name,
                    awaiting_docstring: false,
                });
            }
        }
    }
}

/// `method (dotted.id)` at the start of `line`: the test's name and what follows the `)`.
fn header(line: &str) -> Option<(String, &str)> {
    let (method, rest) = line.split_once(" (")?;
    let (id, rest) = rest.split_once(')')?;
    let word = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
    };
    if !word(method) || !word(id) || !id.contains('.') || method.contains('.') {
        return None;
    }
    let name = if id.rsplit('.').next() == Some(method) {
        id.to_owned()
    } else {
        format!("{id}.{method}")
    };
    Some((name, rest))
}

fn status_word(text: &str) -> Option<Status> {
    let text = text.trim_end();
    match text {
        "ok" | "expected failure" => Some(Status::Passed),
        "FAIL" | "unexpected success" => Some(Status::Failed),
        "ERROR" => Some(Status::Error),
        _ if text == "skipped"
            || text.starts_with("skipped '")
            || text.starts_with("skipped \"") =>
        {
            Some(Status::Skipped)
        }
        _ => None,
    }
}
