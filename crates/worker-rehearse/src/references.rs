//! What the benchmark names under `/workspace`: the files of the solver's tree a benchmark
//! reads or runs by path.
//!
//! A benchmark that runs `/workspace/tools/check.py` and trusts its exit status trusts the
//! solver, who ships that file (two live, funded bounties did exactly this). Stubs built from
//! the source cannot show it on an unsolved tree, where the file does not exist yet, so the
//! `referenced_programs` stub is built from the benchmark alone: every program it may run from
//! `/workspace`, each replaced by an immediate successful exit. The same names put the files a
//! bypass may hinge on at the front of the `BYPASSABLE` line.
//!
//! The live bounties never write `/workspace/<path>` on the line that starts the process: they
//! write `ROOT = Path(os.environ.get("WORKSPACE_ROOT", "/workspace"))`, join
//! `ROOT / "scripts/check-x.py"` on one line and call `subprocess.run([sys.executable,
//! str(checker)])` on another. Following that data flow for every language and spelling is a
//! compiler's job, so this module over-approximates instead: every path-like word of a
//! benchmark file (a string literal, a shell word, `/workspace/<path>`, literals joined by `/`,
//! `+` or `,` on one line, `$ROOT/<path>`, `{ROOT}/<path>`) is *named*, and when that file
//! starts processes anywhere (`subprocess`, `exec`, `spawn`, `system(`, `sh `,
//! `sys.executable`, …) its program-like names (a file in a language with an exit stub, or an
//! extensionless `/workspace/<path>` on a process line) are *candidates*. Over-inclusion is
//! safe: a candidate only joins a stub tree, and a stub makes the benchmark bypassable only when
//! the benchmark actually passes with it. So the candidates never decide a verdict, and the
//! words stay honest: "runs X" is said only when the stub holding the candidates passed,
//! otherwise "references X and starts processes".
//!
//! Everything here is read from the benchmark (the author's tree), never from the source (the
//! solver's): the source's file names are only matched against these names afterwards, so a
//! solver cannot remove a candidate, or add one to the stub, by naming files.

use std::collections::BTreeSet;
use std::fs;
use std::io::Read;
use std::path::Path;

use verifier_sdk::TreeLimits;

use super::stub_files::{SHADOW_FILES, exit_stub};

/// Bytes read of each benchmark file; references past them are not seen.
const MAX_READ_BYTES: u64 = 1 << 20;
/// Bytes read over all the benchmark's files.
const MAX_TOTAL_BYTES: u64 = 8 << 20;
/// Most names kept.
const MAX_REFERENCES: usize = 1000;
/// Most candidate programs kept: each is one file in the `referenced_programs` stub.
pub const MAX_PROGRAMS: usize = 32;
/// Longest path kept.
const MAX_PATH_BYTES: usize = 512;
/// Most string literals joined into one path (`"a" / "b" / "c.py"`).
const MAX_JOINED: usize = 8;
const PREFIX: &str = "/workspace/";

/// Words that make a file one that starts processes (looked for in lower case, outside the
/// `#!` line, which names an interpreter for the file itself).
const STARTS_A_PROCESS: [&str; 16] = [
    "subprocess",
    "popen",
    "exec",
    "system(",
    "spawn",
    ".run(",
    "call(",
    "python",
    "node ",
    "bash",
    "sh ",
    "sh\"",
    "ruby",
    "/bin/",
    "sys.executable",
    "child_process",
];

/// The paths (relative to `/workspace`) the benchmark names, and those of them it may run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct References {
    /// Every path-like name, sorted, without duplicates: a file path, or the end of one
    /// (`check.py` when the benchmark joins `"tools", "check.py"` in a way not seen).
    pub named: BTreeSet<String>,
    /// The candidate programs: program-like names in a benchmark file that starts processes,
    /// at most [`MAX_PROGRAMS`], none a directory of another.
    pub run: BTreeSet<String>,
}

impl References {
    /// Whether the source file `file` is named by the benchmark: exactly, or as the end of
    /// its path (`tools/check.py` by `check.py`).
    pub fn names(&self, file: &str) -> bool {
        matches(&self.named, file)
    }

    /// Whether the source file `file` is one of the candidate programs, in the same sense.
    pub fn may_run(&self, file: &str) -> bool {
        matches(&self.run, file)
    }
}

fn matches(set: &BTreeSet<String>, file: &str) -> bool {
    set.contains(file)
        || set.iter().any(|name| {
            file.len() > name.len()
                && file.ends_with(name.as_str())
                && file.as_bytes()[file.len() - name.len() - 1] == b'/'
        })
}

/// One name found, with how strongly it looks like a program the benchmark starts.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Found {
    path: String,
    /// `/workspace/<path>` written out on a line that starts a process.
    literal_on_process_line: bool,
    /// On a line that starts a process.
    on_process_line: bool,
}

/// What the benchmark at `benchmark` names under `/workspace`. A file that cannot be listed or
/// read contributes nothing.
pub fn workspace_references(benchmark: &Path, limits: TreeLimits) -> References {
    let mut named = BTreeSet::new();
    // Three tiers, filled in order, so that when there are more than MAX_PROGRAMS candidates
    // the strongest are kept.
    let mut tiers: [Vec<String>; 3] = Default::default();
    let Ok((files, _)) = verifier_sdk::digest::list_tree(benchmark, limits) else {
        return References::default();
    };
    let mut budget = MAX_TOTAL_BYTES;
    for file in files {
        if budget == 0 {
            break;
        }
        let mut text = Vec::new();
        let read = fs::File::open(benchmark.join(&file.rel_path))
            .and_then(|f| f.take(MAX_READ_BYTES.min(budget)).read_to_end(&mut text));
        if read.is_err() {
            continue;
        }
        budget = budget.saturating_sub(text.len() as u64);
        let text = String::from_utf8_lossy(&text);
        let starts = starts_processes(&text);
        for found in names_in(&text) {
            if named.len() < MAX_REFERENCES {
                named.insert(found.path.clone());
            }
            if !starts {
                continue;
            }
            let tier = if found.literal_on_process_line {
                0
            } else if found.on_process_line {
                1
            } else {
                2
            };
            let extensionless_literal =
                found.literal_on_process_line && Path::new(&found.path).extension().is_none();
            if program_like(&found.path) || extensionless_literal {
                tiers[tier].push(found.path);
            }
        }
    }
    let mut run = BTreeSet::new();
    for path in tiers.into_iter().flatten() {
        if run.len() >= MAX_PROGRAMS {
            break;
        }
        run.insert(path);
    }
    // A candidate that is a directory of another (`a.py` and `a.py/b.py`) cannot be a file
    // in the same stub tree: the deeper one is kept. A bare name that ends another
    // (`check.py` of `"tools", "check.py"`, joined) is the same file, seen twice.
    let parents: Vec<String> = run
        .iter()
        .filter(|p| {
            run.iter().any(|q| {
                q.starts_with(&format!("{p}/"))
                    || (q.len() > p.len() && q.ends_with(&format!("/{p}")))
            })
        })
        .cloned()
        .collect();
    for p in parents {
        run.remove(&p);
    }
    References { named, run }
}

/// A file in a language with an exit stub, other than a test runner's own module (the
/// `shadow` stubs try those, and a pass from one is not a program the benchmark runs).
fn program_like(path: &str) -> bool {
    let file_name = path.rsplit('/').next().unwrap_or(path);
    exit_stub(path).is_some() && !SHADOW_FILES.contains(&file_name)
}

fn process_line(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    STARTS_A_PROCESS.iter().any(|w| lower.contains(w))
}

/// Whether any line but a leading `#!` one starts a process.
fn starts_processes(text: &str) -> bool {
    text.lines()
        .enumerate()
        .any(|(i, line)| !(i == 0 && line.starts_with("#!")) && process_line(line))
}

fn path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "._-/+@".contains(c)
}

/// Every path-like name in `text`, line by line, in order.
fn names_in(text: &str) -> Vec<Found> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let on_process_line = !(i == 0 && line.starts_with("#!")) && process_line(line);
        let mut words = words_in(line);
        words.extend(joined_literals(line));
        for (word, after_variable) in words {
            let literal = word.starts_with(PREFIX);
            if let Some(path) = normalize(&word, after_variable) {
                out.push(Found {
                    path,
                    literal_on_process_line: literal && on_process_line,
                    on_process_line,
                });
            }
        }
    }
    out
}

/// The maximal runs of path characters of `line`, each with whether it follows a variable
/// (`$ROOT/x`, `${ROOT}/x`, `{root}/x` in a format string).
fn words_in(line: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut start = None;
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    for (k, &(at, c)) in chars.iter().enumerate() {
        match (path_char(c), start) {
            (true, None) => start = Some(k),
            (false, Some(s)) => {
                out.push(word(line, &chars, s, at));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push(word(line, &chars, s, line.len()));
    }
    out
}

fn word(line: &str, chars: &[(usize, char)], start: usize, end: usize) -> (String, bool) {
    let before = start.checked_sub(1).map(|k| chars[k].1);
    let text = &line[chars[start].0..end];
    match before {
        // `$ROOT/scripts/x.sh`: the first component is the variable's name.
        Some('$') => match text.split_once('/') {
            Some((_, rest)) => (rest.to_owned(), true),
            None => (String::new(), true),
        },
        // `${ROOT}/x`, `{root}/x`, `$(pwd)/x`: the rest of the path after the variable.
        Some('}' | ')') => (text.to_owned(), true),
        _ => (text.to_owned(), false),
    }
}

/// The quoted literals of `line` joined when only `/`, `+`, `,` and spaces separate them
/// (`ROOT / "tools" / "check.py"`, `os.path.join(ROOT, "tools", "check.py")`).
fn joined_literals(line: &str) -> Vec<(String, bool)> {
    let mut literals: Vec<(usize, usize, &str)> = Vec::new();
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let q = bytes[i];
        if !matches!(q, b'"' | b'\'' | b'`') {
            i += 1;
            continue;
        }
        let Some(len) = line[i + 1..].find(q as char) else {
            break;
        };
        let end = i + 1 + len;
        literals.push((i, end, &line[i + 1..end]));
        i = end + 1;
    }
    let mut out = Vec::new();
    let mut k = 0;
    while k < literals.len() {
        let mut parts = vec![literals[k].2];
        let mut last = k;
        while last + 1 < literals.len() && parts.len() < MAX_JOINED {
            let between = &line[literals[last].1 + 1..literals[last + 1].0];
            let next = literals[last + 1].2;
            // Only path-like parts, and no absolute one after the first (a join restarts
            // there): `get("WORKSPACE_ROOT", "/workspace")` is not a path.
            if between.is_empty()
                || !between.chars().all(|c| " \t/+,".contains(c))
                || next.is_empty()
                || next.starts_with('/')
                || !next.chars().all(path_char)
                || !parts[0].chars().all(path_char)
            {
                break;
            }
            last += 1;
            parts.push(literals[last].2);
        }
        if parts.len() > 1 {
            let joined: Vec<&str> = parts.iter().map(|p| p.trim_matches('/')).collect();
            out.push((joined.join("/"), true));
        }
        k = last + 1;
    }
    out
}

/// `word` as a path relative to `/workspace`, when it is one: `/workspace/<path>`, or a
/// relative path (`./` stripped) that has a `/` or an extension. A word after a variable may
/// start with `/` (`${ROOT}/x`). Other absolute paths (`/benchmark/…`, `/usr/bin/…`) are not
/// the solver's.
fn normalize(word: &str, after_variable: bool) -> Option<String> {
    if word.len() > MAX_PATH_BYTES {
        return None;
    }
    let mut path = if let Some(rest) = word.strip_prefix(PREFIX) {
        rest
    } else if word.starts_with('/') {
        if !after_variable {
            return None;
        }
        word.trim_start_matches('/')
    } else {
        word
    };
    while let Some(rest) = path.strip_prefix("./") {
        path = rest;
    }
    let path = path.trim_end_matches(['.', '/']);
    let looks_like_a_file =
        word.starts_with(PREFIX) || path.contains('/') || Path::new(path).extension().is_some();
    (looks_like_a_file && plain(path)).then(|| path.to_owned())
}

fn plain(path: &str) -> bool {
    !path.is_empty()
        && path.len() <= MAX_PATH_BYTES
        && path
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// `files` with the ones the benchmark may run first, then the ones it names, each group in
/// its original order.
pub fn referenced_first(files: Vec<String>, references: &References) -> Vec<String> {
    let (mut run, rest): (Vec<String>, Vec<String>) =
        files.into_iter().partition(|f| references.may_run(f));
    let (named, rest): (Vec<String>, Vec<String>) =
        rest.into_iter().partition(|f| references.names(f));
    run.extend(named);
    run.extend(rest);
    run
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn limits() -> TreeLimits {
        TreeLimits::new(1 << 20, 100).unwrap()
    }

    fn refs_of(files: &[(&str, &str)]) -> References {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = dir.path().join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        workspace_references(dir.path(), limits())
    }

    fn names(set: &BTreeSet<String>) -> Vec<String> {
        set.iter().cloned().collect()
    }

    fn paths(text: &str) -> Vec<String> {
        names_in(text).into_iter().map(|f| f.path).collect()
    }

    #[test]
    fn references_are_plain_paths_after_workspace() {
        let text = "subprocess.run(['python', '/workspace/tools/check.py'])\n\
                    open(\"/workspace/card.json\"). cd /workspace/ && /workspace/../etc/x \
                    /workspace/a//b /workspace/run.sh; /workspace/dir/";
        assert_eq!(
            paths(text),
            [
                "subprocess.run",
                "tools/check.py",
                "card.json",
                "run.sh",
                "dir"
            ]
        );
    }

    /// The live bounties' shape (hermes-integration's check.py, cut down): the root from the
    /// environment, the path joined on one line, the process started on another.
    #[test]
    fn a_path_joined_to_a_workspace_root_and_run_on_another_line_is_a_candidate() {
        let check = "#!/usr/bin/env python3\n\
            import os, subprocess, sys\n\
            from pathlib import Path\n\
            ROOT = Path(os.environ.get(\"WORKSPACE_ROOT\", \"/workspace\"))\n\
            def require(path):\n    return ROOT / path\n\
            checker = require(\"scripts/check-hermes-integration.py\")\n\
            skill = (ROOT / 'skills/agent-bounties/SKILL.md').read_text()\n\
            completed = subprocess.run(\n    [sys.executable, str(checker)],\n    cwd=ROOT)\n";
        let refs = refs_of(&[("check.py", check)]);
        assert_eq!(names(&refs.run), ["scripts/check-hermes-integration.py"]);
        assert!(refs.names("skills/agent-bounties/SKILL.md"));
        assert!(refs.may_run("scripts/check-hermes-integration.py"));
        assert!(!refs.may_run("skills/agent-bounties/SKILL.md"));
    }

    #[test]
    fn joined_literals_variables_and_shell_words_are_seen() {
        let refs = refs_of(&[
            (
                "check.py",
                "import subprocess\n\
                 a = os.path.join(ROOT, \"tools\", \"check_a.py\")\n\
                 b = ROOT / \"tools\" / 'check_b.py'\n\
                 c = f\"{ROOT}/tools/check_c.py\"\n\
                 subprocess.check_call([a, b, c])\n",
            ),
            (
                "run.sh",
                "#!/bin/sh\nset -e\ncd \"$WORKSPACE\"\nbash $WORKSPACE/bin/d.sh\n\
                 node ./web/e.js && ${ROOT}/f.rb\npython3 -m unittest discover\n",
            ),
        ]);
        assert_eq!(
            names(&refs.run),
            [
                "bin/d.sh",
                "f.rb",
                "tools/check_a.py",
                "tools/check_b.py",
                "tools/check_c.py",
                "web/e.js"
            ]
        );
    }

    #[test]
    fn a_file_that_starts_no_process_names_but_runs_nothing() {
        let refs = refs_of(&[(
            "test_x.py",
            "#!/usr/bin/env python3\n# the solver's /workspace/lib.py is imported\n\
             import lib\nopen('/workspace/card.json')\nDATA = 'fixtures/a.py'\n",
        )]);
        assert!(refs.run.is_empty(), "{refs:?}");
        for name in ["card.json", "fixtures/a.py", "lib.py"] {
            assert!(refs.names(name), "{name}: {refs:?}");
        }
    }

    #[test]
    fn other_absolute_paths_shadow_files_and_bare_words_are_not_candidates() {
        let refs = refs_of(&[(
            "check.py",
            "import subprocess, sys\n\
             subprocess.run([sys.executable, '/benchmark/harness.py', 'unittest.py', \
             'pkg/conftest.py', 'https://example.com/x.js', 'check', '/usr/bin/env'])\n",
        )]);
        assert!(refs.run.is_empty(), "{refs:?}");
    }

    #[test]
    fn candidates_are_bounded_and_the_strongest_are_kept() {
        let mut text = String::from("import subprocess\n");
        for i in 0..200 {
            text.push_str(&format!("X{i} = 'gen/f{i}.py'\n"));
        }
        text.push_str("subprocess.run(['/workspace/tools/real'])\n");
        text.push_str(&format!("Y = '{}.py'\n", "a".repeat(MAX_PATH_BYTES)));
        let refs = refs_of(&[("check.py", &text)]);
        assert_eq!(refs.run.len(), MAX_PROGRAMS);
        // The literal `/workspace/<path>` on a process line comes first, though it is last.
        assert!(refs.run.contains("tools/real"), "{refs:?}");
        assert!(refs.run.iter().all(|p| p.len() <= MAX_PATH_BYTES));
    }

    #[test]
    fn a_candidate_that_is_a_directory_of_another_is_left_out() {
        let refs = refs_of(&[(
            "check.sh",
            "sh /workspace/x.sh/y.sh; sh /workspace/x.sh; exec /workspace/bin /workspace/bin/z\n",
        )]);
        assert_eq!(names(&refs.run), ["bin/z", "x.sh/y.sh"]);
    }

    #[test]
    fn benchmark_files_are_read_and_named_files_come_first() {
        let refs = refs_of(&[
            (
                "check.py",
                "import subprocess\nsubprocess.run(['/workspace/tools/check_card.py'])\n",
            ),
            (
                "sub/test_x.py",
                "# the solver's /workspace/lib.py is imported\nopen('/workspace/card.json')",
            ),
        ]);
        // Named is over-inclusive (`subprocess.run` looks like a file name): it only orders.
        for name in ["card.json", "lib.py", "tools/check_card.py"] {
            assert!(refs.names(name), "{name}: {refs:?}");
        }
        assert_eq!(names(&refs.run), ["tools/check_card.py"]);
        assert_eq!(
            referenced_first(
                vec![
                    "a.py".into(),
                    "lib.py".into(),
                    "tools/check_card.py".into(),
                    "b.py".into()
                ],
                &refs
            ),
            ["tools/check_card.py", "lib.py", "a.py", "b.py"]
        );
        // The end of a path names the file; a name that only ends the same way does not.
        assert!(refs.names("vendored/lib.py"));
        assert!(!refs.names("mylib.py"));
    }
}
