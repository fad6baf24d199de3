//! `worker explain`: exit 0 with the explanation, 4 for an unreadable or unknown record.

use std::path::Path;

use super::{fail, print_json, print_text};
use crate::exit::ExitCode;

/// Explains the evidence record at `path`, as text or (`json`) a normalized summary.
pub fn explain(path: &Path, json: bool) -> ExitCode {
    let evidence = match crate::explain::read_evidence(path) {
        Ok(evidence) => evidence,
        Err(error) => return fail(ExitCode::InvalidInput, &error),
    };
    let explanation = crate::explain::explain(&evidence);
    if json {
        return print_json(&crate::explain::summary_json(&evidence, &explanation));
    }
    print_text(&explanation.render(""))
}
