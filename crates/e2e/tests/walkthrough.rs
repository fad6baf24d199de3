//! The walk-throughs of the documentation are run as written: manifests/README.md ("Walk-through:
//! a real project") and docs/authors.md ("Rehearse a bounty, end to end"). Every ```sh block of
//! such a section, in order, runs as one `bash -xeuo pipefail` script from the repository root,
//! with the built `worker` first on `PATH`, on the real Docker Engine and the digest-pinned
//! python image. A block that stops working as documented fails this test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

const SECTION: &str =
    "## Walk-through: a real project (src layout, vendored dependency, test count)";
const AUTHORS_SECTION: &str = "## Rehearse a bounty, end to end";

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The ```sh blocks between `heading` and the next `## ` heading.
fn sh_blocks(markdown: &str, heading: &str) -> Vec<String> {
    let start = markdown
        .find(heading)
        .unwrap_or_else(|| panic!("the document has no heading {heading:?}"));
    let section = &markdown[start + heading.len()..];
    let section = section.find("\n## ").map_or(section, |end| &section[..end]);
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in section.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```sh") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), text) => {
                block.push_str(text);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(current.is_none(), "an unclosed ```sh block in {heading:?}");
    blocks
}

/// Every `.txt` and `.json` file under `dir`, with its name, for a failure message.
fn reports(dir: &std::path::Path) -> String {
    let mut out = String::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if !path.ends_with("store") {
                out.push_str(&reports(&path));
            }
        } else if path.extension().is_some_and(|e| e == "txt" || e == "json") {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            out.push_str(&format!("--- {}\n{text}\n", path.display()));
        }
    }
    out
}

/// Runs `script` as the documentation's reader would: `bash -xeuo pipefail` from the repository
/// root, the built `worker` first on `PATH`, a private `TMPDIR`. Returns stdout; panics with
/// the output and the reports the blocks wrote when the script fails.
fn run_as_written(root: &std::path::Path, script: &str) -> String {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let bin = target.join("debug");
    assert!(
        bin.join("worker").is_file(),
        "{} is missing; cargo build -p worker",
        bin.join("worker").display()
    );
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let tmp = tempfile::tempdir().unwrap();
    let output = Command::new("bash")
        .args(["-xeuo", "pipefail", "-c", script])
        .current_dir(root)
        .env("PATH", path)
        .env("TMPDIR", tmp.path())
        .env_remove("REGRESSION_SANDBOX_STAGING_ROOT")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        // The blocks send the rehearsals' reports to files in their $work: show them.
        panic!(
            "the walk-through failed ({}):\n{stdout}\n{stderr}\n{}",
            output.status,
            reports(tmp.path())
        );
    }
    stdout.into_owned()
}

#[test]
fn the_manifests_readme_walkthrough_runs_as_written() {
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("manifests/README.md")).unwrap();
    let blocks = sh_blocks(&readme, SECTION);
    // The manifest, the test count, the full rehearsal, the committed digests.
    assert_eq!(blocks.len(), 4, "{blocks:#?}");
    let stdout = run_as_written(&root, &blocks.concat());
    // The last block prints the runner_manifest_hash the bounty commits.
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("sha256:") && last.len() == 71,
        "last line is not a runner_manifest_hash: {last:?}\n{stdout}"
    );
}

#[test]
fn the_authors_guide_walkthrough_runs_as_written() {
    let root = repo_root();
    let guide = std::fs::read_to_string(root.join("docs/authors.md")).unwrap();
    let blocks = sh_blocks(&guide, AUTHORS_SECTION);
    // One block: the manifest, two rehearsals, a run read back, the committed digests.
    assert_eq!(blocks.len(), 1, "{blocks:#?}");
    // The block writes under /tmp/walk, as the guide shows; start from an empty one.
    let _ = std::fs::remove_dir_all("/tmp/walk");
    let stdout = run_as_written(&root, &blocks.concat());
    // Step 3, as the guide says it ends.
    assert!(
        stdout.contains("adversarial  held: no stub passed"),
        "step 3 did not hold against the stubs:\n{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l == "ok: passed, stable, discriminating"),
        "step 3 is not a usable bounty:\n{stdout}"
    );
}
