//! Rehearsal of a tree that lives in a git repository: stage exactly what the feed will
//! download, not the working copy.
//!
//! A bounty commits the digest of an exact-commit archive (PROTOCOL §7): no `.git/`, no
//! untracked files, no `__pycache__/`, nothing marked `export-ignore`. Hashing the working copy
//! told authors to commit a digest the feed could never reproduce, so the bounty could never
//! verify. Here `git archive` (which honours `export-ignore` as GitHub's archives do) writes the
//! revision as a `tar.gz`, and the feed's own extraction selects the subdirectory, so the
//! digest is the one the feed will compute.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Serialize;
use verifier_sdk::RelativeDir;

use crate::feed::archive::{ArchiveError, ArchiveLimits, extract_tar_gz};

/// Where a rehearsed tree came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TreeOrigin {
    /// `source`, `benchmark` or `base`.
    pub tree: &'static str,
    /// `git` (an exact revision, as an archive holds it) or `worktree` (the directory as is).
    pub origin: &'static str,
    /// The repository's top-level directory, for `git`.
    pub repository: Option<String>,
    /// The full commit id staged, for `git`.
    pub revision: Option<String>,
    /// The tree's directory inside the repository (`.` for its root), for `git`.
    pub subdirectory: Option<String>,
    /// True when the working tree differs from the staged revision (uncommitted or untracked
    /// files, or another commit checked out): what runs is not what is on disk.
    pub worktree_differs: bool,
}

/// Why a git revision could not be staged.
#[derive(Debug, thiserror::Error)]
pub enum GitTreeError {
    /// `git` failed or could not be started.
    #[error("git {what} in {dir}: {detail}")]
    Git {
        /// The git operation.
        what: &'static str,
        /// The directory it ran in.
        dir: String,
        /// What git said.
        detail: String,
    },
    /// The archive broke one of the feed's extraction rules (the feed would refuse it too).
    #[error("the archive of {revision} is not one the feed accepts: {source}")]
    Archive {
        /// The revision.
        revision: String,
        /// The rule it broke.
        #[source]
        source: ArchiveError,
    },
}

fn git(dir: &Path, what: &'static str, args: &[&str]) -> Result<String, GitTreeError> {
    let fail = |detail: String| GitTreeError::Git {
        what,
        dir: dir.display().to_string(),
        detail,
    };
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| fail(e.to_string()))?;
    if !out.status.success() {
        return Err(fail(String::from_utf8_lossy(&out.stderr).trim().to_owned()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_owned())
}

/// The repository holding `dir`, if any (`git` missing counts as none).
fn repository_of(dir: &Path) -> Option<(PathBuf, String)> {
    let top = git(dir, "rev-parse", &["rev-parse", "--show-toplevel"]).ok()?;
    let prefix = git(dir, "rev-parse", &["rev-parse", "--show-prefix"]).ok()?;
    Some((PathBuf::from(top), prefix))
}

/// A tree to stage: `dir` itself, or the extraction of `rev` when `dir` is inside a git
/// repository and `worktree` is false. Extractions go under `scratch`, which must exist and
/// outlive the staging.
pub fn resolve(
    tree: &'static str,
    dir: &Path,
    rev: &str,
    worktree: bool,
    scratch: &Path,
    limits: &ArchiveLimits,
) -> Result<(PathBuf, TreeOrigin), GitTreeError> {
    let as_is = TreeOrigin {
        tree,
        origin: "worktree",
        repository: None,
        revision: None,
        subdirectory: None,
        worktree_differs: false,
    };
    if worktree {
        return Ok((dir.to_path_buf(), as_is));
    }
    let Some((top, prefix)) = repository_of(dir) else {
        return Ok((dir.to_path_buf(), as_is));
    };
    let spec = format!("{rev}^{{commit}}");
    let commit = git(
        &top,
        "rev-parse",
        &["rev-parse", "--verify", "--quiet", &spec],
    )?;
    let head = git(
        &top,
        "rev-parse",
        &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
    )
    .ok();
    let status = git(
        dir,
        "status",
        &["status", "--porcelain", "--untracked-files=all", "--", "."],
    )?;
    let subdirectory = prefix.trim_end_matches('/');
    let subdirectory = if subdirectory.is_empty() {
        "."
    } else {
        subdirectory
    };
    let selected = RelativeDir::parse(subdirectory).ok_or_else(|| GitTreeError::Git {
        what: "rev-parse",
        dir: dir.display().to_string(),
        detail: format!("the directory {subdirectory:?} is not a plain relative path"),
    })?;

    // One top-level folder, as GitHub's exact-commit archives have; the feed strips it. Only
    // the selected directory is archived: the rest of the repository cannot change its digest.
    let mut archive = vec![
        "archive",
        "--format=tar.gz",
        "--prefix=archive/",
        commit.as_str(),
    ];
    if subdirectory != "." {
        archive.extend(["--", subdirectory]);
    }
    let mut child = Command::new("git")
        .arg("-C")
        .arg(&top)
        .args(&archive)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| GitTreeError::Git {
            what: "archive",
            dir: top.display().to_string(),
            detail: e.to_string(),
        })?;
    let dest = scratch.join(tree);
    let stdout = child.stdout.take().ok_or_else(|| GitTreeError::Git {
        what: "archive",
        dir: top.display().to_string(),
        detail: "no output pipe".into(),
    })?;
    let extracted = extract_tar_gz(stdout, &dest, &selected, limits);
    let out = child.wait_with_output().map_err(|e| GitTreeError::Git {
        what: "archive",
        dir: top.display().to_string(),
        detail: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(GitTreeError::Git {
            what: "archive",
            dir: top.display().to_string(),
            detail: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    extracted.map_err(|source| GitTreeError::Archive {
        revision: commit.clone(),
        source,
    })?;
    let differs = !status.is_empty() || head.as_deref() != Some(commit.as_str());
    Ok((
        dest,
        TreeOrigin {
            tree,
            origin: "git",
            repository: Some(top.display().to_string()),
            revision: Some(commit),
            subdirectory: Some(subdirectory.to_owned()),
            worktree_differs: differs,
        },
    ))
}

impl TreeOrigin {
    /// One line for the human report.
    pub fn line(&self) -> String {
        match (&self.repository, &self.revision, &self.subdirectory) {
            (Some(repo), Some(rev), Some(sub)) => {
                let warn = if self.worktree_differs {
                    "  (warning: the working tree differs from this revision; what is on disk \
                     is not what was staged: commit it, or pass --worktree)"
                } else {
                    ""
                };
                format!("git {repo} at {rev}, directory {sub}{warn}")
            }
            _ => "the directory as it is on disk (--worktree, or not in a git repository)".into(),
        }
    }
}
