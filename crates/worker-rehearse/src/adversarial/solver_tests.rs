//! "The benchmark runs tests the solver writes" (issue 42 item 3): a benchmark that starts a
//! test runner on `/workspace` (no `/benchmark` path where it starts it) runs whatever tests the
//! solver's tree holds, and a solver can make those pass without solving anything. Said as a
//! finding of its own, with the file names, whether or not a stub got through.
//!
//! Read from the manifest's command and the benchmark's files (the author's), matched against
//! the source's file names by each runner's own naming rules; like [`super::super::references`]
//! it reads words, not data flow, so it names the line it saw.

use std::fs;
use std::io::Read;
use std::path::Path;

use serde::Serialize;
use verifier_sdk::TreeLimits;
use verifier_sdk::digest::TreeEntry;

/// Bytes read of each benchmark file, and of each source file checked for `#[test]`.
const MAX_READ_BYTES: u64 = 1 << 20;
/// Bytes read over all the benchmark's files.
const MAX_TOTAL_BYTES: u64 = 8 << 20;
/// Test files named in the finding's line; `files` lists them all.
const LISTED: usize = 5;

/// A test runner family, as far as where it finds its tests is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runner {
    Unittest,
    Pytest,
    Cargo,
    Go,
    Node,
}

impl Runner {
    /// The words that start this runner on a (normalised) line.
    fn starts(self, line: &str) -> Option<&'static str> {
        let words: &[&'static str] = match self {
            Self::Unittest => &["-m unittest"],
            Self::Pytest => &["-m pytest", "py.test"],
            Self::Cargo => &["cargo test", "cargo nextest"],
            Self::Go => &["go test"],
            Self::Node => &[
                "node --test",
                "npm test",
                "npm run test",
                "yarn test",
                "scripts.test",
                "jest",
                "mocha",
                "vitest",
            ],
        };
        let first = line.split_whitespace().next().unwrap_or("");
        words
            .iter()
            .copied()
            .find(|w| line.contains(w))
            .or_else(|| (self == Self::Pytest && first == "pytest").then_some("pytest"))
    }

    /// Whether `rel_path` (with `text`, read only for Rust) is a test file this runner finds.
    fn finds(self, rel_path: &str, text: impl FnOnce() -> Option<String>) -> bool {
        let name = rel_path.rsplit('/').next().unwrap_or(rel_path);
        let in_dir = |d: &str| rel_path.split('/').rev().skip(1).any(|c| c == d);
        match self {
            Self::Unittest | Self::Pytest => {
                name.ends_with(".py") && (name.starts_with("test") || name.ends_with("_test.py"))
            }
            Self::Go => name.ends_with("_test.go"),
            Self::Cargo => {
                name.ends_with(".rs")
                    && (in_dir("tests") || text().is_some_and(|t| t.contains("#[test]")))
            }
            Self::Node => {
                let script = [".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".jsx", ".tsx"]
                    .iter()
                    .any(|e| name.ends_with(e));
                script
                    && (name.contains(".test.")
                        || name.contains(".spec.")
                        || in_dir("test")
                        || in_dir("tests")
                        || in_dir("__tests__"))
            }
        }
    }
}

const RUNNERS: [Runner; 5] = [
    Runner::Unittest,
    Runner::Pytest,
    Runner::Cargo,
    Runner::Go,
    Runner::Node,
];

/// The benchmark's runs of a test runner on `/workspace`, and the source's test files they run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SolverTests {
    /// Where the runner is started: `the manifest's command` or `<benchmark file> line N`.
    pub started_in: String,
    /// The words that start it (`-m unittest`, `cargo test`, …).
    pub runner: String,
    /// The source's test files that runner finds, sorted.
    pub files: Vec<String>,
    /// With `--base`, those of `files` the solution adds or changes (absent from the base tree
    /// or with other bytes there); `None` without a base.
    pub changed_by_solution: Option<Vec<String>>,
}

impl SolverTests {
    /// Notes which of the test files the solution adds or changes against the staged `base`.
    pub fn compare_with_base(&mut self, source: &Path, base: &Path) {
        let changed = self
            .files
            .iter()
            .filter(|f| {
                let ours = fs::read(source.join(f));
                let theirs = fs::read(base.join(f));
                !matches!((ours, theirs), (Ok(a), Ok(b)) if a == b)
            })
            .cloned()
            .collect();
        self.changed_by_solution = Some(changed);
    }

    /// The problem line.
    pub fn problem(&self) -> String {
        let mut shown = self
            .files
            .iter()
            .take(LISTED)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if self.files.len() > LISTED {
            shown.push_str(&format!(" and {} more", self.files.len() - LISTED));
        }
        let changed = match self.changed_by_solution.as_deref() {
            None => String::new(),
            Some([]) => " (the solution leaves them as the base tree has them)".to_owned(),
            Some(files) => format!(
                " (the solution adds or changes {})",
                files
                    .iter()
                    .take(LISTED)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        format!(
            "the benchmark runs tests the solver writes: {} starts `{}` on /workspace, and the \
             tests it runs there are the source's own ({shown}){changed}; a solver can change or \
             replace them so that they pass without solving anything, whatever a stub did; ship \
             the tests in the benchmark and run them from /benchmark",
            self.started_in, self.runner
        )
    }
}

/// Lower case, quotes, commas and brackets as spaces, spaces collapsed: `[sys.executable, "-m",
/// "unittest"]` reads `sys.executable -m unittest`.
fn normalise(line: &str) -> String {
    let spaced: String = line
        .to_ascii_lowercase()
        .chars()
        .map(|c| if "\"'`,[](){}".contains(c) { ' ' } else { c })
        .collect();
    spaced.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The first runner started on `/workspace` on one of `lines` (each with where it is), with
/// the source's files it finds; `None` when none is, or when it finds none of them.
fn first_on_workspace<'a>(
    lines: impl Iterator<Item = (String, &'a str)>,
    source_files: &[TreeEntry],
    source: &Path,
) -> Option<SolverTests> {
    for (place, line) in lines {
        let normal = normalise(line);
        // A comment names a runner without starting it.
        if normal.starts_with('#') || normal.starts_with("//") || normal.contains("/benchmark") {
            continue;
        }
        for runner in RUNNERS {
            let Some(word) = runner.starts(&normal) else {
                continue;
            };
            let mut files: Vec<String> = source_files
                .iter()
                .filter(|f| !theirs(&f.rel_path))
                .filter(|f| runner.finds(&f.rel_path, || read(&source.join(&f.rel_path))))
                .map(|f| f.rel_path.clone())
                .collect();
            if files.is_empty() {
                continue;
            }
            files.sort();
            let runner = match word {
                "scripts.test" => "npm test (package.json scripts.test)",
                other => other,
            };
            return Some(SolverTests {
                started_in: place,
                runner: runner.to_owned(),
                files,
                changed_by_solution: None,
            });
        }
    }
    None
}

/// A file of a vendored crate or an installed package: a runner on `/workspace` does not run
/// their tests (`cargo test` runs the workspace's own).
fn theirs(rel_path: &str) -> bool {
    rel_path
        .split('/')
        .any(|part| super::NOT_THE_SOLVERS.contains(&part))
}

fn read(path: &Path) -> Option<String> {
    let mut text = Vec::new();
    fs::File::open(path)
        .and_then(|f| f.take(MAX_READ_BYTES).read_to_end(&mut text))
        .ok()?;
    Some(String::from_utf8_lossy(&text).into_owned())
}

/// Whether the manifest's `command` or a benchmark file starts a test runner on `/workspace`
/// that finds test files of the staged `source`.
pub fn solver_tests(
    command: &[String],
    benchmark: &Path,
    benchmark_limits: TreeLimits,
    source: &Path,
    source_limits: TreeLimits,
) -> Option<SolverTests> {
    let (source_files, _) = verifier_sdk::digest::list_tree(source, source_limits).ok()?;
    let argv = command.join(" ");
    if let Some(found) = first_on_workspace(
        std::iter::once(("the manifest's command".to_owned(), argv.as_str())),
        &source_files,
        source,
    ) {
        return Some(found);
    }
    let (mut files, _) = verifier_sdk::digest::list_tree(benchmark, benchmark_limits).ok()?;
    files.sort_by(|a, b| a.rel_path.cmp(&b.rel_path));
    let mut budget = MAX_TOTAL_BYTES;
    for file in files {
        if budget == 0 {
            break;
        }
        let Some(text) = read(&benchmark.join(&file.rel_path)) else {
            continue;
        };
        budget = budget.saturating_sub(text.len() as u64);
        // A docstring names a runner without starting it (the platform's check.py opens with
        // one that says what it runs).
        let mut in_docstring = false;
        let lines = text.lines().enumerate().filter_map(|(i, line)| {
            let quotes = line.matches("\"\"\"").count() + line.matches("\'\'\'").count();
            let inside = in_docstring || quotes > 0;
            if quotes % 2 == 1 {
                in_docstring = !in_docstring;
            }
            (!inside).then(|| (format!("{} line {}", file.rel_path, i + 1), line))
        });
        if let Some(found) = first_on_workspace(lines, &source_files, source) {
            return Some(found);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn limits() -> TreeLimits {
        TreeLimits::new(1 << 20, 100).unwrap()
    }

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = dir.path().join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        dir
    }

    fn found(
        command: &[&str],
        benchmark: &[(&str, &str)],
        source: &[(&str, &str)],
    ) -> Option<SolverTests> {
        let command: Vec<String> = command.iter().map(|s| s.to_string()).collect();
        let (b, s) = (tree(benchmark), tree(source));
        solver_tests(&command, b.path(), limits(), s.path(), limits())
    }

    #[test]
    fn a_runner_started_on_the_workspace_runs_the_sources_tests() {
        let check = "import subprocess, sys\nsubprocess.run(\n    [sys.executable, \"-m\", \"unittest\", \"discover\", \"-s\", \"tests\"],\n    cwd=ROOT)\n";
        let source = [
            ("failover.py", "x = 1"),
            ("tests/test_failover.py", "import unittest"),
            ("tests/__init__.py", ""),
        ];
        let t = found(
            &["python3", "/benchmark/check.py"],
            &[("check.py", check)],
            &source,
        )
        .unwrap();
        assert_eq!(t.files, ["tests/test_failover.py"]);
        assert_eq!(t.runner, "-m unittest");
        assert_eq!(t.started_in, "check.py line 3");
        assert!(t.problem().starts_with("the benchmark runs tests the solver writes: check.py line 3 starts `-m unittest` on /workspace, and the tests it runs there are the source's own (tests/test_failover.py)"), "{}", t.problem());
        let rust = [
            ("src/lib.rs", "#[test]\nfn t() {}"),
            ("src/util.rs", "fn f() {}"),
            ("tests/it.rs", ""),
        ];
        let t = found(&["cargo", "test", "--locked"], &[], &rust).unwrap();
        assert_eq!(t.files, ["src/lib.rs", "tests/it.rs"]);
        assert_eq!(t.started_in, "the manifest's command");
        // Against a base tree: which of them the solution adds or changes.
        let (src, base) = (
            tree(&[("tests/test_a.py", "new"), ("tests/test_b.py", "same")]),
            tree(&[("tests/test_b.py", "same")]),
        );
        let mut t = solver_tests(
            &["python3".into(), "-m".into(), "unittest".into()],
            tree(&[]).path(),
            limits(),
            src.path(),
            limits(),
        )
        .unwrap();
        t.compare_with_base(src.path(), base.path());
        assert_eq!(
            t.changed_by_solution,
            Some(vec!["tests/test_a.py".to_owned()])
        );
        assert!(
            t.problem()
                .contains("(the solution adds or changes tests/test_a.py)"),
            "{}",
            t.problem()
        );
        let node = [("slug.mjs", ""), ("test/slug.test.mjs", "")];
        assert_eq!(
            found(&["npm", "test"], &[], &node).unwrap().files,
            ["test/slug.test.mjs"]
        );
    }

    #[test]
    fn tests_from_the_benchmark_or_no_test_in_the_source_is_no_finding() {
        // The runner is pointed at /benchmark: the author's tests.
        let source = [("roman.py", ""), ("tests/test_roman.py", "")];
        assert!(
            found(
                &["python3", "-m", "unittest", "discover", "-s", "/benchmark"],
                &[],
                &source
            )
            .is_none()
        );
        assert!(
            found(
                &["node", "--test", "/benchmark/test.mjs"],
                &[],
                &[("test/a.test.mjs", "")]
            )
            .is_none()
        );
        // A runner on /workspace, but the source has no tests for it.
        assert!(found(&["cargo", "test"], &[], &[("src/lib.rs", "pub fn f() {}")]).is_none());
        // Vendored crates' tests are not run by `cargo test` on the workspace.
        assert!(
            found(
                &["cargo", "test"],
                &[],
                &[("src/lib.rs", ""), ("vendor/hex/tests/serde.rs", "#[test]")]
            )
            .is_none()
        );
        // A docstring that says what runs is not what runs.
        let doc = "\"\"\"Runs the tests with\n`python -m unittest` from the solver's tree.\"\"\"\nimport json\n";
        assert!(
            found(
                &["python3", "/benchmark/check.py"],
                &[("check.py", doc)],
                &source
            )
            .is_none()
        );
        // A benchmark test file that imports unittest does not start a runner.
        assert!(
            found(
                &["python3", "/benchmark/run.py"],
                &[("test_x.py", "import unittest\nunittest.main()\n")],
                &source
            )
            .is_none()
        );
    }
}
