//! The human report of a rehearsal: concise and aligned, and safe to print on a terminal
//! whatever the runs wrote.

use super::rehearsed::Rehearsed;
use super::report::{Discrimination, Report, RunResult};

/// Names listed per SWE-bench list and for flaky tests (`--json` carries all).
const TESTS_LISTED: usize = 50;

use super::sandbox_block::row;

impl Report {
    /// The human report: concise and aligned.
    pub fn human(&self) -> String {
        let mut out = self.human_body();
        out.push_str(&self.human_problems());
        let missing = super::checks::not_checked(self, false);
        if let Some(answer) = super::checks::answer_line(self, &missing) {
            out.push_str(&format!("{answer}\n"));
        }
        out
    }

    /// The `problem:` lines, one per problem.
    fn human_problems(&self) -> String {
        let mut out = String::new();
        for problem in &self.problems {
            out.push_str(&format!("problem: {problem}\n"));
        }
        for warning in self.warnings.iter().chain(&self.tests.warnings) {
            out.push_str(&format!("warning: {warning}\n"));
        }
        // Problems quote author- and solver-controlled text (file names, reasons).
        worker_sandbox::explain::terminal_safe(&out)
    }

    /// Everything up to the verdict and answer lines.
    fn human_body(&self) -> String {
        let mut out = String::from("commit\n");
        let c = &self.commit;
        row(&mut out, "source_snapshot_digest", c.source_snapshot_digest);
        let filled = if c.benchmark_digest_filled_in {
            "  (filled in: the manifest had the placeholder; commit this value)"
        } else {
            "  (matches the manifest)"
        };
        row(
            &mut out,
            "benchmark_digest",
            format!("{}{filled}", c.benchmark_digest),
        );
        row(&mut out, "runner_manifest_hash", c.runner_manifest_hash);
        if let Some(base) = &c.base_snapshot_digest {
            row(&mut out, "base (not committed)", base);
        }
        for origin in &c.trees {
            row(
                &mut out,
                &format!("{} staged from", origin.tree),
                origin.line(),
            );
        }
        super::sandbox_block::rows(&mut out, &self.manifest, &self.sandbox);
        out.push_str(&format!("solution runs ({})\n", self.runs.len()));
        for run in &self.runs {
            out.push_str(&run_block(run));
        }
        if self.runs.len() > 1 {
            row(&mut out, "stability", self.stability.as_str());
        }
        if let Some(text) = self.output.human() {
            out.push_str(&text);
        }
        if let Some(base) = &self.base {
            out.push_str("base tree run\n");
            out.push_str(&run_block(base));
            row(
                &mut out,
                "discrimination",
                self.discrimination
                    .map_or("unknown", Discrimination::as_str),
            );
        }
        for line in test_outcomes::render::analysis_lines(&self.tests, TESTS_LISTED) {
            out.push_str(&format!("{line}\n"));
        }
        if let Some(count) = &self.test_count {
            out.push_str(&format!("{}\n", count.line()));
        }
        out.push_str(&format!("verdict  {}\n", self.verdict.as_str()));
        // Runs' output is already escaped by `render`; the manifest's argv, env and image and
        // the problems are author-controlled text too.
        worker_sandbox::explain::terminal_safe(&out)
    }
}

impl Rehearsed {
    /// The human report: the rehearsal, the stub lines, then the problems (a bypass problem
    /// refers to the stub lines above it).
    pub fn human(&self) -> String {
        let mut out = self.report.human_body();
        if let Some(adversarial) = &self.adversarial {
            out.push_str(&adversarial.human());
        }
        if let Some(mutants) = &self.mutants {
            out.push_str(&mutants.human());
        }
        out.push_str(&self.report.human_problems());
        let missing = super::checks::not_checked(&self.report, self.adversarial.is_some());
        if let Some(answer) = super::checks::answer_line(&self.report, &missing) {
            out.push_str(&format!("{answer}\n"));
        }
        for warning in super::warnings::worktree_warnings(&self.report.commit.trees) {
            out.push_str(&worker_sandbox::explain::terminal_safe(&format!(
                "{warning}\n"
            )));
        }
        if let Some(line) = self.bypass_line() {
            out.push_str(&worker_sandbox::explain::terminal_safe(&format!(
                "{line}\n"
            )));
        }
        out
    }
}

fn run_block(run: &RunResult) -> String {
    // Details and tails line up under the headline, after the `  run N  ` column.
    let prefix = format!("  run {:<3}", run.run);
    let indent = " ".repeat(prefix.len());
    let body = run.explanation.render(&indent);
    let mut out = format!("{prefix}{}", body.get(indent.len()..).unwrap_or(&body));
    if let Some(path) = &run.evidence_path {
        out.push_str(&format!("{indent}  evidence {}\n", path.display()));
    }
    if let Some(prefix) = &run.logs {
        out.push_str(&format!(
            "{indent}  logs     {}.stdout, .stderr, .evidence.json\n",
            prefix.display()
        ));
    }
    out
}
