//! What the stub runs of `--adversarial` allow us to say, and in which words.
//!
//! A stub that passes is a non-solution the bounty would pay, whatever else happened: the
//! benchmark is bypassable. Stubs that fail say something only when the source passes: most are
//! built from the source, so when it fails (an author rehearsing before any solution exists)
//! every stub fails with it and "held" would reassure falsely. The same benchmark that "held" on
//! the unsolved tree of a live bounty was bypassable with the real solution. So a failing, unstable
//! or verdict-less source leaves the benchmark *not judged*, with the reason and what to pass
//! instead, never "held".

use super::culprit::Culprit;
use super::verdict::{EMPTY_TREE, EXIT_ON_LOAD, StubResult, Verdict};
use super::verdict::{EXIT_ON_LOAD_KEEP_TEXT, FAIL_ON_LOAD_KEEP_TEXT, REFERENCED_PROGRAMS};

/// Files named in one problem line; the stub's `added` lists them all.
const LISTED: usize = 3;

fn listed(files: &[String]) -> String {
    let mut text = files
        .iter()
        .take(LISTED)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if files.len() > LISTED {
        text.push_str(&format!(" and {} more", files.len() - LISTED));
    }
    text
}

/// `outcome` of a stub that did not pass while the source did not pass either.
pub const NOT_JUDGED: &str = "not_judged";

/// The answer of the stub runs: bypassable (`Some(true)`), held (`Some(false)`), or not judged
/// (`None`, with why and what to pass instead).
pub fn judge(stubs: &[StubResult], source: Verdict) -> (Option<bool>, Option<String>) {
    if stubs.iter().any(|s| s.outcome == "bypassed") {
        return (Some(true), None);
    }
    let why = match source {
        Verdict::Passed => return (Some(false), None),
        Verdict::Failed => "the source failed the benchmark",
        Verdict::NoVerdict => "the source's run ended without a verdict",
        Verdict::Unstable => "the source's verdict is unstable",
    };
    (
        None,
        Some(format!(
            "{why}, so stubs built from it prove nothing; rehearse --adversarial with a --source \
             that passes (the solution)"
        )),
    )
}

/// The problem line of a bypassable benchmark: which stubs passed and the defect behind it, in
/// the order that matters most: a program the benchmark runs from `/workspace`, a file shadowing
/// the test runner, the one file a bisection found the pass hinges on, code that exits 0 on
/// load, no solution at all.
pub fn bypass_problem(stubs: &[StubResult], culprit: Option<&Culprit>) -> String {
    let passed: Vec<&StubResult> = stubs.iter().filter(|s| s.outcome == "bypassed").collect();
    let names: Vec<&str> = passed.iter().map(|s| s.name.as_str()).collect();
    let names = names.join(", ");
    // Every code file failing on load still passes: nothing else the stubs show matters more.
    if passed.iter().any(|s| s.name == FAIL_ON_LOAD_KEEP_TEXT) {
        return format!(
            "the solution with every code file made to fail as soon as it is loaded, its text \
             kept, passes ({names} passed): the benchmark reads the solver's files but never \
             runs their code, so a phrase or file check alone is paid; run the code under test \
             from tests shipped in the benchmark"
        );
    }
    // Shown as it is the stub that held only the candidates: a pass from it confirms that
    // the benchmark runs (or loads) one of them and trusts its exit status.
    if let Some(stub) = passed.iter().find(|s| s.name == REFERENCED_PROGRAMS) {
        return match stub.added.as_slice() {
            [file] => format!(
                "the benchmark runs {file} from /workspace, a file the solver controls, and \
                 trusts its exit status: a solution shipping it as an immediate exit 0 is paid \
                 ({names} passed); ship the checker in the benchmark and run it from /benchmark"
            ),
            files => format!(
                "the benchmark runs a program from /workspace that the solver controls, and \
                 trusts its exit status: a tree holding only {} (names the benchmark uses), each \
                 an immediate exit 0, is paid ({names} passed); ship the checker in the \
                 benchmark and run it from /benchmark",
                listed(files)
            ),
        };
    }
    // Confirmed by experiment: the bisection found one file whose replacement alone passes, or
    // exit_on_load itself replaced one file only (every other file kept), the same experiment.
    let alone = passed
        .iter()
        .find(|s| s.name == EXIT_ON_LOAD && s.added.is_empty())
        .and_then(|s| match s.replaced.as_slice() {
            [file] => Some(file),
            _ => None,
        });
    let found = culprit
        .filter(|c| c.minimal)
        .and_then(|c| c.files.first())
        .or(alone);
    if let Some(file) = found
        && !passed.iter().any(|s| s.name.starts_with("shadow "))
    {
        return format!(
            "the pass hinges on {file}, a file the solver ships: replaced alone by an immediate \
             exit 0, it makes the benchmark pass ({names} passed); a benchmark that runs a \
             program from /workspace and trusts its exit status trusts the solver: ship the \
             checker in the benchmark and run it from /benchmark (if {file} is the code under \
             test, make the benchmark judge which tests ran and passed, manifests/README.md)"
        );
    }
    // Not confirmed: the stub that passed replaced more than the candidates, so say only what
    // is known.
    // Keep-text stubs and shadows kept the solver's text, so "replaced it with an immediate
    // exit" would not describe them; they get their own advice below.
    let kept_text = |s: &&&StubResult| s.name != EXIT_ON_LOAD_KEEP_TEXT && s.shadows.is_none();
    if let Some(file) = passed
        .iter()
        .filter(kept_text)
        .flat_map(|s| s.run_by_benchmark.iter())
        .next()
    {
        return format!(
            "the benchmark references {file} and starts processes, and {file} is a file the \
             solver controls: a stub that replaced it (and the source's other code) with an \
             immediate exit 0 is paid ({names} passed); if the benchmark runs it, ship the \
             checker in the benchmark and run it from /benchmark; otherwise make the benchmark \
             judge which tests ran and passed, not only the exit status (manifests/README.md)"
        );
    }
    let keep_text = passed.iter().any(|s| s.name == EXIT_ON_LOAD_KEEP_TEXT)
        && !passed.iter().any(|s| s.name == EXIT_ON_LOAD);
    let mut advice = if keep_text {
        "code of the source that exits 0 as soon as it is loaded is paid, its original text \
         kept below the exit so that phrase checks still match: checking the solver's text \
         proves nothing about its code, and the command trusts the exit status of a process \
         running that code; make the benchmark judge which tests ran and passed, with tests \
         shipped in the benchmark (manifests/README.md)"
            .to_owned()
    } else {
        String::new()
    };
    let rest = if let Some(shadow) = passed.iter().find(|s| s.name.starts_with("shadow ")) {
        format!(
            "a file in the solver's tree that the runner loads before the tests ({}: {}) \
             replaces the runner: run the tests isolated, with a harness shipped in the \
             benchmark that judges which tests ran and passed (for Python: python3 -I and \
             fixtures/python-bounty's harness, manifests/README.md)",
            shadow.added.join(", "),
            shadow.shadows.unwrap_or("a test runner's own module")
        )
    } else if keep_text {
        String::new()
    } else if passed.iter().any(|s| s.name == EXIT_ON_LOAD) {
        "code of the source that exits 0 as soon as it is loaded is paid: the command trusts the \
         exit status of a process running the solver's code; make the benchmark judge which \
         tests ran and passed, not only the exit status (manifests/README.md)"
            .to_owned()
    } else if passed.iter().any(|s| s.name == EMPTY_TREE) {
        "the empty tree is paid: the command succeeds without any solution".to_owned()
    } else {
        "make the command judge which tests ran and passed, not only the exit status \
         (manifests/README.md)"
            .to_owned()
    };
    if !rest.is_empty() {
        if !advice.is_empty() {
            advice.push_str("; also, ");
        }
        advice.push_str(&rest);
    }
    format!(
        "a stub solution passes the benchmark ({names}): a bounty with this manifest would pay a \
         non-solution; {advice}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stub(name: &str, outcome: &'static str) -> StubResult {
        let status = if outcome == "bypassed" {
            "passed"
        } else {
            "failed"
        };
        StubResult::empty(name.into(), status, outcome)
    }

    #[test]
    fn a_pass_is_bypassable_whatever_the_source_and_a_failing_source_is_not_judged() {
        let held = [stub("empty_tree", "held")];
        assert_eq!(judge(&held, Verdict::Passed), (Some(false), None));
        for source in [Verdict::Failed, Verdict::NoVerdict, Verdict::Unstable] {
            let (bypassable, why) = judge(&held, source);
            assert_eq!(bypassable, None);
            assert!(why.unwrap().contains("--source that passes"));
            let passed = [stub("empty_tree", "bypassed")];
            assert_eq!(judge(&passed, source), (Some(true), None));
        }
    }

    #[test]
    fn the_problem_names_the_program_the_benchmark_runs_before_anything_else() {
        let mut exit = stub(EXIT_ON_LOAD, "bypassed");
        exit.run_by_benchmark = vec!["tools/check.py".into()];
        let empty = stub(EMPTY_TREE, "bypassed");
        // Only exit_on_load (which replaced all the source's code) passed: that the benchmark
        // runs the file is not confirmed, so it is not claimed.
        let line = bypass_problem(&[exit.clone(), empty.clone()], None);
        assert!(
            line.starts_with("the benchmark references tools/check.py and starts processes"),
            "{line}"
        );
        assert!(!line.contains("the benchmark runs tools"), "{line}");
        assert!(line.contains("ship the checker in the benchmark"), "{line}");
        assert!(line.contains("(exit_on_load, empty_tree passed)"), "{line}");
        // The stub holding only the candidates passed: confirmed.
        let mut referenced = stub(REFERENCED_PROGRAMS, "bypassed");
        referenced.added = vec!["tools/check.py".into()];
        let line = bypass_problem(&[exit.clone(), referenced.clone()], None);
        assert!(
            line.starts_with(
                "the benchmark runs tools/check.py from /workspace, a file the solver controls"
            ),
            "{line}"
        );
        referenced.added = (0..5).map(|i| format!("t/{i}.py")).collect();
        let line = bypass_problem(&[exit, referenced], None);
        assert!(
            line.starts_with(
                "the benchmark runs a program from /workspace that the solver controls, and \
                 trusts its exit status: a tree holding only t/0.py, t/1.py, t/2.py and 2 more"
            ),
            "{line}"
        );
        let line = bypass_problem(&[empty], None);
        assert!(line.contains("the empty tree is paid"), "{line}");
        assert!(!line.contains("python3"), "{line}");
    }

    /// #42 items 1 and 2: a keep-text stub and a shadow kept the solver's text; the words say
    /// so instead of "replaced it with an immediate exit 0".
    #[test]
    fn keep_text_and_shadow_passes_are_explained_as_what_they_are() {
        let mut keep = stub(EXIT_ON_LOAD_KEEP_TEXT, "bypassed");
        keep.replaced = vec!["failover.py".into()];
        keep.run_by_benchmark = vec!["failover.py".into()];
        let mut shadow = stub("shadow unittest.py", "bypassed");
        shadow.added = vec!["unittest.py".into()];
        shadow.shadows = Some("Python's unittest");
        let line = bypass_problem(&[keep.clone(), shadow], None);
        assert!(!line.contains("references failover.py"), "{line}");
        assert!(
            line.contains(
                "its original text kept below the exit so that phrase checks still match"
            ),
            "{line}"
        );
        assert!(
            line.contains("; also, a file in the solver's tree that the runner loads before the tests (unittest.py: Python's unittest) replaces the runner"),
            "{line}"
        );
        let control = stub(FAIL_ON_LOAD_KEEP_TEXT, "bypassed");
        let line = bypass_problem(&[keep, control], None);
        assert!(line.contains("never runs their code"), "{line}");
    }

    #[test]
    fn an_exit_on_load_that_replaced_one_file_and_passed_names_it_as_confirmed() {
        // The live bounties' shape: the solver's tree has one program, the checker the
        // benchmark runs; exit_on_load replaced it alone (every other file kept) and passed,
        // which is the experiment a bisection would have run.
        let mut exit = stub(EXIT_ON_LOAD, "bypassed");
        exit.replaced = vec!["scripts/check-x.py".into()];
        exit.run_by_benchmark = vec!["scripts/check-x.py".into()];
        let line = bypass_problem(&[exit], None);
        assert!(
            line.starts_with("the pass hinges on scripts/check-x.py, a file the solver ships"),
            "{line}"
        );
        assert!(!line.contains("and the source's other code"), "{line}");
        assert!(line.contains("ship the checker in the benchmark"), "{line}");
    }
}
