//! What the benchmark names under `/workspace`: the files of the solver's tree a benchmark
//! reads or runs by path.
//!
//! A benchmark that runs `/workspace/tools/check.py` and trusts its exit status trusts the
//! solver, who ships that file (two live, funded bounties did exactly this). Stubs built from
//! the source cannot show it on an unsolved tree, where the file does not exist yet, so the
//! `referenced_programs` stub is built from the benchmark alone: every program it names under
//! `/workspace`, each replaced by an immediate successful exit. The same names put the files a
//! bypass actually hinges on at the front of the `BYPASSABLE` line.
//!
//! Found by reading the benchmark's files for the literal text `/workspace/<path>`: a path put
//! together at run time is not seen. A name counts as *run* when its line also starts a process
//! (`subprocess`, `exec`, `python`, `sh `, …); a module the tests import, or a path in a
//! comment, is only *named*. It only orders and adds stubs; it never decides a verdict.

use std::collections::BTreeSet;
use std::fs;
use std::io::Read;
use std::path::Path;

use verifier_sdk::TreeLimits;

/// Bytes read of each benchmark file; references past them are not seen.
const MAX_READ_BYTES: u64 = 1 << 20;
/// Most references kept.
const MAX_REFERENCES: usize = 100;
/// Longest path kept.
const MAX_PATH_BYTES: usize = 512;
const PREFIX: &str = "/workspace/";

/// Words on a line that make a path on it a program the benchmark starts.
const STARTS_A_PROCESS: [&str; 14] = [
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
    "ruby",
    "/bin/",
    "sys.executable",
];

/// The paths (relative to `/workspace`) the benchmark names, and those of them it runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct References {
    /// Every path named, sorted, without duplicates.
    pub named: BTreeSet<String>,
    /// The named paths on a line that starts a process.
    pub run: BTreeSet<String>,
}

/// What the benchmark at `benchmark` names under `/workspace`. A file that cannot be listed or
/// read contributes nothing.
pub fn workspace_references(benchmark: &Path, limits: TreeLimits) -> References {
    let mut found = References::default();
    let Ok((files, _)) = verifier_sdk::digest::list_tree(benchmark, limits) else {
        return found;
    };
    for file in files {
        let mut text = Vec::new();
        let read = fs::File::open(benchmark.join(&file.rel_path))
            .and_then(|f| f.take(MAX_READ_BYTES).read_to_end(&mut text));
        if read.is_err() {
            continue;
        }
        for line in String::from_utf8_lossy(&text).lines() {
            let runs = {
                let lower = line.to_ascii_lowercase();
                STARTS_A_PROCESS.iter().any(|w| lower.contains(w))
            };
            for path in references_in(line) {
                if found.named.len() >= MAX_REFERENCES {
                    return found;
                }
                if runs {
                    found.run.insert(path.clone());
                }
                found.named.insert(path);
            }
        }
    }
    found
}

/// Every `/workspace/<path>` in `text`, as `<path>`, when it is a plain relative path.
fn references_in(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(PREFIX) {
        let after = &rest[at + PREFIX.len()..];
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || "._-/+@".contains(c)))
            .unwrap_or(after.len());
        let path = after[..end].trim_end_matches(['.', '/']);
        if plain(path) {
            out.push(path.to_owned());
        }
        rest = &after[end..];
    }
    out
}

fn plain(path: &str) -> bool {
    !path.is_empty()
        && path.len() <= MAX_PATH_BYTES
        && path
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// `files` with the ones the benchmark runs first, then the ones it names, each group in its
/// original order.
pub fn referenced_first(files: Vec<String>, references: &References) -> Vec<String> {
    let (mut run, rest): (Vec<String>, Vec<String>) =
        files.into_iter().partition(|f| references.run.contains(f));
    let (named, rest): (Vec<String>, Vec<String>) =
        rest.into_iter().partition(|f| references.named.contains(f));
    run.extend(named);
    run.extend(rest);
    run
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn references_are_plain_paths_after_workspace() {
        let text = "subprocess.run(['python', '/workspace/tools/check.py'])\n\
                    open(\"/workspace/card.json\"). cd /workspace/ && /workspace/../etc/x \
                    /workspace/a//b /workspace/run.sh; /workspace/dir/";
        assert_eq!(
            references_in(text),
            ["tools/check.py", "card.json", "run.sh", "dir"]
        );
    }

    #[test]
    fn benchmark_files_are_read_and_named_files_come_first() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("check.py"),
            "import subprocess\nsubprocess.run(['/workspace/tools/check_card.py'])\n",
        )
        .unwrap();
        fs::create_dir(dir.path().join("sub")).unwrap();
        fs::write(
            dir.path().join("sub/test_x.py"),
            "# the solver's /workspace/lib.py is imported\nopen('/workspace/card.json')",
        )
        .unwrap();
        let refs = workspace_references(dir.path(), TreeLimits::new(1 << 20, 100).unwrap());
        let names = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>();
        assert_eq!(
            names(&refs.named),
            ["card.json", "lib.py", "tools/check_card.py"]
        );
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
    }
}
