//! `worker explain`: exit 0 with the explanation, 4 for an unreadable or unknown record.

use std::path::Path;

use super::{fail, print_json, print_text};
use crate::exit::ExitCode;

/// Explains the evidence record at `path`, as text or (`json`) a normalized summary, with
/// `lines` lines of each stream (`None`: all the record holds), then what ran.
pub fn explain(path: &Path, json: bool, lines: Option<usize>) -> ExitCode {
    use worker_sandbox::explain::{Shown, explain_shown, terminal_safe, what_ran};
    let evidence = match worker_sandbox::explain::read_evidence(path) {
        Ok(evidence) => evidence,
        Err(error) => return fail(ExitCode::InvalidInput, &error),
    };
    let explanation = explain_shown(&evidence, &Default::default(), Shown::reading(lines));
    if json {
        return print_json(&worker_sandbox::explain::summary_json(
            &evidence,
            &explanation,
        ));
    }
    let mut text = explanation.render("");
    text.push_str("what ran\n");
    for line in what_ran(&evidence) {
        text.push_str(&format!("  {}\n", terminal_safe(&line)));
    }
    print_text(&text)
}
