//! The batch report for people (one row per task, then what stands in each unfit task's way)
//! and as JUnit XML, in the shape nextest writes: `<testsuites>` holding one `<testsuite>`, one
//! `<testcase>` per task, `<failure>` for an unfit task and `<error>` for one with no answer or
//! not rehearsed.

use std::fmt::Write as _;

use super::batch::{BatchReport, TaskAnswer, TaskEntry, TaskResult};

fn answer_word(answer: TaskAnswer) -> &'static str {
    match answer {
        TaskAnswer::Fit => "fit",
        TaskAnswer::PaysNonSolution => "PAYS A NON-SOLUTION",
        TaskAnswer::NoSolutionYet => "no solution yet",
        TaskAnswer::Unfit => "UNFIT",
        TaskAnswer::NoAnswer => "NO ANSWER",
        TaskAnswer::NotRehearsed => "NOT REHEARSED",
    }
}

/// `sha256:` and the first 12 hex digits: enough to tell trees apart in a row; `--json` has all.
fn short(digest: &impl std::fmt::Display) -> String {
    let text = digest.to_string();
    text.get(..19).map_or(text.clone(), |s| format!("{s}…"))
}

/// The source tree's commit (12 digits), or `worktree` when staged as it was on disk.
fn commit_used(entry: &TaskEntry) -> String {
    let TaskResult::Rehearsed(r) = &entry.result else {
        return String::new();
    };
    let source = r.report.commit.trees.iter().find(|t| t.tree == "source");
    match source.and_then(|t| t.revision.as_deref()) {
        Some(rev) => format!("git {}", rev.get(..12).unwrap_or(rev)),
        None => "worktree".into(),
    }
}

impl BatchReport {
    /// The human report.
    pub fn human(&self) -> String {
        let width = self
            .tasks
            .iter()
            .map(|t| t.name.chars().count())
            .max()
            .unwrap_or(0);
        let mut out =
            String::from("batch (each task rehearsed as `worker rehearse` alone would)\n");
        for task in &self.tasks {
            let answer = answer_word(task.answer());
            let took = worker_sandbox::explain::seconds(
                u64::try_from(task.elapsed.as_millis()).unwrap_or(u64::MAX),
            );
            let _ = write!(out, "  {:<width$}  {answer:<19}  {took:>8}  ", task.name);
            match &task.result {
                TaskResult::NotRehearsed(error) => {
                    let _ = writeln!(out);
                    let _ = writeln!(out, "  {:<width$}    {error}", "");
                }
                TaskResult::Rehearsed(r) => {
                    let report = &r.report;
                    let bypassable = match task.bypassable() {
                        Some(true) => "BYPASSABLE",
                        Some(false) => "no",
                        None if r.adversarial.is_some() => "not judged",
                        None => "not checked",
                    };
                    // As the single report says it (render.rs): a digest checked against the
                    // manifest, or one filled in for a placeholder that the author must commit.
                    let checked = if report.commit.benchmark_digest_filled_in {
                        "filled in: commit it"
                    } else {
                        "matches the manifest"
                    };
                    let _ = writeln!(
                        out,
                        "verdict {}, stability {}, discrimination {}, bypassable {bypassable}; \
                         source {}, benchmark {} ({checked}), {}",
                        report.verdict.as_str(),
                        report.stability.as_str(),
                        report.discrimination.map_or("not checked", |d| d.as_str()),
                        short(&report.commit.source_snapshot_digest),
                        short(&report.commit.benchmark_digest),
                        commit_used(task),
                    );
                    for problem in &report.problems {
                        let _ = writeln!(out, "  {:<width$}    problem: {problem}", "");
                    }
                }
            }
        }
        out.push_str(&self.summary_line());
        out.push('\n');
        // Names, errors and problems quote author-controlled text.
        worker_sandbox::explain::terminal_safe(&out)
    }

    /// JUnit XML of the batch.
    pub fn junit(&self) -> String {
        let failed = |a: TaskAnswer| {
            matches!(
                a,
                TaskAnswer::Unfit | TaskAnswer::PaysNonSolution | TaskAnswer::NoSolutionYet
            )
        };
        let failures = self.tasks.iter().filter(|t| failed(t.answer())).count();
        let errors = self
            .tasks
            .iter()
            .filter(|t| matches!(t.answer(), TaskAnswer::NoAnswer | TaskAnswer::NotRehearsed))
            .count();
        let seconds: f64 = self.tasks.iter().map(TaskEntry::seconds).sum();
        let tests = self.tasks.len();
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            out,
            "<testsuites name=\"worker-rehearse\" tests=\"{tests}\" failures=\"{failures}\" \
             errors=\"{errors}\" time=\"{seconds:.3}\">"
        );
        let _ = writeln!(
            out,
            "    <testsuite name=\"rehearse\" tests=\"{tests}\" disabled=\"0\" errors=\"{errors}\" \
             failures=\"{failures}\">"
        );
        for task in &self.tasks {
            let _ = write!(
                out,
                "        <testcase name=\"{}\" classname=\"rehearse\" time=\"{:.3}\"",
                xml(&task.name),
                task.seconds()
            );
            let body = match (&task.result, task.answer()) {
                (_, TaskAnswer::Fit) => None,
                (TaskResult::NotRehearsed(error), _) => {
                    Some(("error", "not rehearsed", error.clone()))
                }
                (TaskResult::Rehearsed(r), answer) => Some((
                    if failed(answer) { "failure" } else { "error" },
                    match answer {
                        TaskAnswer::PaysNonSolution => "pays a non-solution",
                        TaskAnswer::NoSolutionYet => "no solution yet",
                        TaskAnswer::Unfit => "unfit",
                        _ => "no answer",
                    },
                    r.report.problems.join("\n"),
                )),
            };
            match body {
                None => out.push_str("/>\n"),
                Some((tag, kind, text)) => {
                    let first = text.lines().next().unwrap_or(kind);
                    let _ = writeln!(
                        out,
                        ">\n            <{tag} type=\"{kind}\" message=\"{}\">{}</{tag}>\n        </testcase>",
                        xml(first),
                        xml(&text)
                    );
                }
            }
        }
        out.push_str("    </testsuite>\n</testsuites>\n");
        out
    }
}

/// Text as XML character data or an attribute value: the five special characters escaped and
/// every character XML 1.0 does not allow (control characters but tab, newline and return)
/// dropped, so solver- or author-controlled text cannot break the document.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if c.is_control() || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::xml;

    #[test]
    fn xml_escapes_markup_and_drops_characters_xml_forbids() {
        assert_eq!(
            xml("a<b>&\"c'\u{1b}[31m\u{0}\tok"),
            "a&lt;b&gt;&amp;&quot;c&apos;[31m\tok"
        );
    }
}
