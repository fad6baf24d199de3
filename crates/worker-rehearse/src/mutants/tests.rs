use super::*;
use std::fs;

const BASE: &str = "def to_roman(value):\n    out = ''\n    return out\n";
const SOLVED: &str = "def to_roman(value):\n    if not 1 <= value <= 3999:\n        raise ValueError(value)\n    out = ''\n    return out\n";

#[test]
fn only_the_lines_the_solution_changes_are_mutated() {
    let all = candidates_of_file("roman.py", Some(BASE), SOLVED);
    let lines: std::collections::BTreeSet<usize> = all.iter().map(|c| c.line).collect();
    assert_eq!(lines, [2, 3].into_iter().collect());
    let raise = all
        .iter()
        .find(|c| c.line == 3 && c.mutator == Mutator::DeleteLine)
        .unwrap();
    assert_eq!(raise.mutated.as_deref(), Some("        pass"));
    // Not a language a mutator knows, and a test the solution carries: no mutant.
    assert!(candidates_of_file("notes.txt", None, SOLVED).is_empty());
    assert!(candidates_of_file("tests/test_roman.py", None, SOLVED).is_empty());
    assert!(candidates_of_file("test_roman.py", None, SOLVED).is_empty());
}

#[test]
fn the_same_seed_picks_the_same_mutants_and_another_seed_may_not() {
    let all = candidates_of_file("roman.py", None, SOLVED);
    assert!(all.len() > 4, "{all:?}");
    let a = select(all.clone(), 3, 7);
    assert_eq!(a, select(all.clone(), 3, 7));
    assert_eq!(a.len(), 3);
    let differs = (0..20).any(|seed| select(all.clone(), 3, seed) != a);
    assert!(differs, "every seed picked the same three");
    // Asking for more than there are runs them all, in file and line order.
    let every = select(all.clone(), 1000, 7);
    assert_eq!(every.len(), all.len());
    assert!(every.windows(2).all(|w| w[0].line <= w[1].line));
}

#[test]
fn a_mutant_shows_as_a_unified_diff_of_its_line() {
    let c = Candidate {
        file: "src/lib.rs".into(),
        line: 39,
        mutator: Mutator::NegateComparison,
        original: "    if n != 6 {".into(),
        mutated: Some("    if n == 6 {".into()),
    };
    assert_eq!(
        c.unified_diff(),
        "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -39 +39 @@\n-    if n != 6 {\n+    if n == 6 {\n"
    );
    let deleted = Candidate {
        mutated: None,
        original: "    total += x;".into(),
        mutator: Mutator::DeleteLine,
        ..c
    };
    assert_eq!(
        deleted.unified_diff(),
        "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -39 +38,0 @@\n-    total += x;\n"
    );
}

fn run(status: &'static str, reason: Option<&'static str>, stderr: &str) -> RunResult {
    let mut run = RunResult::of_status(1, status, reason);
    run.explanation.stderr_tail = Some(stderr.into());
    run
}

#[test]
fn a_mutants_fate_is_its_runs_verdict() {
    assert_eq!(fate_of(&run("passed", None, "")), Fate::Survived);
    assert_eq!(
        fate_of(&run("failed", None, "FAILED (failures=1)")),
        Fate::Killed
    );
    assert_eq!(
        fate_of(&run("failed", None, "error: could not compile `color`")),
        Fate::DidNotBuild
    );
    assert_eq!(
        fate_of(&run("failed", None, "    SyntaxError: invalid syntax")),
        Fate::DidNotBuild
    );
    assert_eq!(
        fate_of(&run("no_verdict", Some("timeout"), "")),
        Fate::Killed
    );
    assert_eq!(
        fate_of(&run("no_verdict", Some("image_missing"), "")),
        Fate::NoVerdict
    );
}

fn result(fate: Fate) -> MutantResult {
    MutantResult {
        id: 1,
        file: "a.py".into(),
        line: 1,
        mutator: Mutator::DeleteLine,
        diff: String::new(),
        fate,
        status: "passed",
        reason: None,
        source_snapshot_digest: Sha256Digest::from_bytes([0; 32]),
        evidence_path: None,
    }
}

fn scored(fates: &[Fate]) -> Mutation {
    let options = MutantOptions {
        count: 10,
        seed: DEFAULT_SEED,
        parallel: NonZeroUsize::MIN,
    };
    let mut m = Mutation::not_judged(DEFAULT_SEED, &options, String::new(), fates.len());
    m.not_judged = None;
    m.mutants = fates.iter().map(|f| result(*f)).collect();
    m.scored()
}

#[test]
fn did_not_build_counts_as_killed_and_no_verdict_is_left_out() {
    use Fate::*;
    let m = scored(&[Killed, DidNotBuild, Survived, NoVerdict]);
    assert_eq!(
        (m.killed, m.did_not_build, m.survived, m.no_verdict),
        (1, 1, 1, 1)
    );
    assert_eq!(m.score_percent, Some(66));
    assert_eq!(m.weak, Some(false));
    assert!(m.human().contains("did not build: a.py:1 delete_line"));
}

#[test]
fn a_benchmark_most_mutants_survive_is_weak_and_shows_the_survivors() {
    use Fate::*;
    let m = scored(&[Killed, Survived, Survived]);
    assert_eq!((m.score_percent, m.weak), (Some(33), Some(true)));
    let text = m.human();
    assert!(
        text.contains("mutants  WEAK: the benchmark kills 1 of 3 mutants (33 %"),
        "{text}"
    );
    assert_eq!(text.matches("SURVIVED: a.py:1 delete_line").count(), 2);
    let none = scored(&[NoVerdict]);
    assert_eq!((none.score_percent, none.weak), (None, None));
}

fn limits() -> TreeLimits {
    TreeLimits::new(1 << 20, 100).unwrap()
}

#[test]
fn a_mutant_tree_changes_one_line_and_keeps_every_other_byte() {
    let src = tempfile::tempdir().unwrap();
    fs::create_dir(src.path().join("pkg")).unwrap();
    fs::write(
        src.path().join("pkg/a.py"),
        "x = 1\r\nif x == 1:\r\n    y = 2\r\n",
    )
    .unwrap();
    fs::write(src.path().join("data.txt"), "keep").unwrap();
    let out = tempfile::tempdir().unwrap();
    let flipped = Candidate {
        file: "pkg/a.py".into(),
        line: 2,
        mutator: Mutator::NegateComparison,
        original: "if x == 1:".into(),
        mutated: Some("if x != 1:".into()),
    };
    build_tree(src.path(), &out.path().join("m"), limits(), &flipped).unwrap();
    assert_eq!(
        fs::read_to_string(out.path().join("m/pkg/a.py")).unwrap(),
        "x = 1\r\nif x != 1:\r\n    y = 2\r\n"
    );
    assert_eq!(
        fs::read_to_string(out.path().join("m/data.txt")).unwrap(),
        "keep"
    );
    let deleted = Candidate {
        line: 1,
        mutated: None,
        ..flipped
    };
    build_tree(src.path(), &out.path().join("d"), limits(), &deleted).unwrap();
    assert_eq!(
        fs::read_to_string(out.path().join("d/pkg/a.py")).unwrap(),
        "if x == 1:\r\n    y = 2\r\n"
    );
}

#[test]
fn only_files_that_differ_from_the_base_give_candidates() {
    let base = tempfile::tempdir().unwrap();
    let source = tempfile::tempdir().unwrap();
    fs::write(base.path().join("same.py"), "if a == b:\n    pass\n").unwrap();
    fs::write(source.path().join("same.py"), "if a == b:\n    pass\n").unwrap();
    fs::write(base.path().join("changed.py"), "x = 1\n").unwrap();
    fs::write(source.path().join("changed.py"), "x = 1\nok = a and b\n").unwrap();
    fs::write(source.path().join("new.py"), "flag = True\n").unwrap();
    fs::write(source.path().join("notes.md"), "a == b\n").unwrap();
    let (all, changed) = all_candidates(base.path(), source.path(), limits()).unwrap();
    let got: Vec<(&str, usize, Mutator)> = all
        .iter()
        .map(|c| (c.file.as_str(), c.line, c.mutator))
        .collect();
    assert_eq!(
        got,
        [
            ("changed.py", 2, Mutator::SwapLogical),
            ("changed.py", 2, Mutator::DeleteLine),
            ("new.py", 1, Mutator::SwapBoolean),
            ("new.py", 1, Mutator::DeleteLine),
        ]
    );
    assert_eq!(changed, 2);
}
