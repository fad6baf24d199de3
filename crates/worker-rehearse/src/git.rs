//! Rehearsal of a tree that lives in a git repository: stage exactly what the feed will
//! download, not the working copy.
//!
//! A bounty commits the digest of an exact-commit archive (PROTOCOL §7): no `.git/`, no
//! untracked files, no `__pycache__/`, nothing marked `export-ignore`. Hashing the working copy
//! told authors to commit a digest the feed could never reproduce, so the bounty could never
//! verify. Here `git archive` (which honours `export-ignore` as GitHub's archives do) writes the
//! revision as a `tar.gz`, and the feed's own extraction selects the subdirectory, so the
//! digest is the one the feed will compute.
//!
//! The tree is the solver's, so nothing in it may steer git (issue 21): a directory holding the
//! files of a bare repository (`HEAD`, `objects/`, `refs/`, a `config` naming
//! `core.fsmonitor`) was taken by git's discovery for a repository, and `git status` ran its
//! command with the author's privileges. So the worker finds the repository itself (only a
//! `.git` entry counts, never a bare directory), lets git check that it is the caller's own
//! (the ownership probe), and then runs every git call with that `GIT_DIR`, no system or
//! global config, and config that turns off everything able to start a program (fsmonitor,
//! hooks, filter drivers, pagers, credential helpers, transports, lazy fetches). The archive
//! whose digest is committed is written by a scratch repository holding no config at all and
//! reading the repository's objects, so no driver the repository's config names can run, and
//! the bytes are the ones GitHub's archive of that commit holds rather than what the author's
//! local filters or line-ending settings would make of them.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde::Serialize;
use verifier_sdk::RelativeDir;

use worker_store::archive::{ArchiveError, ArchiveLimits, extract_tar_gz};

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
    /// The revision as asked for on the command line (`--rev`, `--base-rev`), when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asked_revision: Option<String>,
    /// The files `git status` names as changed or untracked under the directory, as it names
    /// them (at most [`MAX_CHANGED_FILES`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changed_files: Vec<String>,
}

/// Most changed files kept in a [`TreeOrigin`].
pub const MAX_CHANGED_FILES: usize = 20;

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
    /// The directory is in a repository git will not use (another user's, one of a format
    /// this git cannot read, a broken `.git` file): staging the working copy instead would
    /// commit a digest the feed never computes.
    #[error(
        "git refuses the repository at {repository}: {detail}\n(rehearse stages the exact \
         commit the bounty's archive will hold; fix the repository, or pass --worktree to stage \
         the directory as it is on disk)"
    )]
    Refused {
        /// The repository's top-level directory.
        repository: String,
        /// Why, in git's words where git said it.
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

/// Config for every git call, read after the repository's own so it wins: each entry closes a
/// way for a repository's config (the solver's, when the `.git` came with the tree) to start a
/// program. `status` would run an fsmonitor hook, write the index (running the
/// `post-index-change` hook) and recurse into submodules; a missing object in a partial clone
/// would fetch (transports, ssh commands, credential helpers). Filter drivers are named by the
/// repository, so they are switched off by name (see `filter_overrides`).
const HARDENED: &[(&str, &str)] = &[
    ("safe.bareRepository", "explicit"),
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.attributesFile", "/dev/null"),
    ("core.untrackedCache", "false"),
    ("credential.helper", ""),
    ("protocol.allow", "never"),
    ("submodule.recurse", "false"),
    ("log.showSignature", "false"),
];

/// The largest `.git` file read (`gitdir: <path>`).
const MAX_GITFILE_BYTES: u64 = 4096;

/// A `git` command in `cwd` that inherits no `GIT_*` variable from the caller and reads no
/// system or global config unless `user_config` (only the ownership probe: the caller's own
/// `safe.directory` lives there), with `HARDENED` and then `extra` as command-line config.
fn command(cwd: &Path, extra: &[(String, String)], user_config: bool) -> Command {
    let mut cmd = Command::new("git");
    for (key, _) in std::env::vars_os() {
        if key.as_encoded_bytes().starts_with(b"GIT_") {
            cmd.env_remove(&key);
        }
    }
    if !user_config {
        cmd.env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null");
    }
    // Separate keys and values (not `-c key=value`): a driver name may hold `=`.
    let config: Vec<(&str, &str)> = HARDENED
        .iter()
        .copied()
        .chain(extra.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .collect();
    cmd.env("GIT_CONFIG_COUNT", config.len().to_string());
    for (i, (key, value)) in config.iter().enumerate() {
        cmd.env(format!("GIT_CONFIG_KEY_{i}"), key)
            .env(format!("GIT_CONFIG_VALUE_{i}"), value);
    }
    cmd.env("GIT_ATTR_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_PAGER", "cat")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_NO_LAZY_FETCH", "1")
        .env("GIT_NO_REPLACE_OBJECTS", "1")
        .args(["--no-pager", "--no-optional-locks"])
        .current_dir(cwd)
        .stdin(Stdio::null());
    cmd
}

fn output(mut cmd: Command, what: &'static str, dir: &Path) -> Result<Output, GitTreeError> {
    cmd.output().map_err(|e| GitTreeError::Git {
        what,
        dir: dir.display().to_string(),
        detail: format!("starting git: {e}"),
    })
}

fn text(out: &Output, what: &'static str, dir: &Path) -> Result<String, GitTreeError> {
    if !out.status.success() {
        return Err(GitTreeError::Git {
            what,
            dir: dir.display().to_string(),
            detail: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_owned())
}

/// A repository the worker found and git accepted.
struct Repository {
    /// The working tree's top-level directory.
    top: PathBuf,
    /// Its git directory (`.git`, or what a `.git` file names).
    git_dir: PathBuf,
    /// Config switching off the filter drivers the repository's config defines.
    filters: Vec<(String, String)>,
}

impl Repository {
    /// A git command on this repository only: `GIT_DIR` and `GIT_WORK_TREE` fixed, so git
    /// discovers nothing and no `core.worktree` moves it.
    fn git(&self, cwd: &Path, what: &'static str, args: &[&str]) -> Result<String, GitTreeError> {
        let mut cmd = command(cwd, &self.filters, false);
        cmd.env("GIT_DIR", &self.git_dir)
            .env("GIT_WORK_TREE", &self.top)
            .args(args);
        text(&output(cmd, what, cwd)?, what, cwd)
    }
}

/// Whether `dir` looks like a git directory, as git's own discovery checks before taking it.
fn is_git_directory(dir: &Path) -> bool {
    let common = dir.join("commondir").is_file();
    dir.join("HEAD").is_file()
        && (common || (dir.join("objects").is_dir() && dir.join("refs").is_dir()))
}

/// The git directory a `.git` file names (`gitdir: <path>`, relative to the file's directory).
fn read_gitfile(dot_git: &Path, top: &Path) -> Result<PathBuf, GitTreeError> {
    let refuse = |detail: String| GitTreeError::Refused {
        repository: top.display().to_string(),
        detail,
    };
    // Judged on the open descriptor (a FIFO swapped in after the caller's check is refused,
    // not waited on) and read to at most the cap, as every file rehearse reads.
    let bytes = match artifact_fs::read_named(dot_git, MAX_GITFILE_BYTES) {
        Ok(bytes) => Some(bytes),
        Err(artifact_fs::ReadError::Io { source, .. }) => {
            return Err(refuse(format!("reading {}: {source}", dot_git.display())));
        }
        Err(artifact_fs::ReadError::NotRegular(_) | artifact_fs::ReadError::TooLarge { .. }) => {
            None
        }
    };
    let line = bytes
        .as_deref()
        .and_then(|b| std::str::from_utf8(b).ok())
        .and_then(|t| t.strip_prefix("gitdir: "))
        .map(|t| t.trim_end_matches(['\n', '\r']))
        .filter(|t| !t.is_empty() && !t.contains('\n'))
        .ok_or_else(|| {
            refuse(format!(
                "{} is not a `gitdir: <path>` file",
                dot_git.display()
            ))
        })?;
    Ok(top.join(line))
}

/// The repository holding `dir`, found the way git's discovery finds a working tree's, except
/// that a directory is never taken for a bare repository: walking up from `dir` (and not past
/// a filesystem boundary, as git stops there), the first `.git` directory or file. `None` means
/// no repository; anything found that git then will not use is an error, never `None`.
fn repository_of(dir: &Path) -> Result<Option<(Repository, String)>, GitTreeError> {
    // A directory that cannot be resolved is the staging step's to report.
    let Ok(dir) = fs::canonicalize(dir) else {
        return Ok(None);
    };
    let Ok(device) = fs::metadata(&dir).map(|m| m.dev()) else {
        return Ok(None);
    };
    let mut found = None;
    for top in dir.ancestors() {
        match fs::metadata(top) {
            Ok(m) if m.dev() == device => {}
            _ => break,
        }
        let dot_git = top.join(".git");
        let refuse = |detail: String| GitTreeError::Refused {
            repository: top.display().to_string(),
            detail,
        };
        match fs::metadata(&dot_git) {
            Ok(m) if m.is_dir() && is_git_directory(&dot_git) => {
                found = Some((top.to_path_buf(), dot_git));
                break;
            }
            Ok(m) if m.is_file() => {
                found = Some((top.to_path_buf(), read_gitfile(&dot_git, top)?));
                break;
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) => {}
            Err(e) => return Err(refuse(format!("reading {}: {e}", dot_git.display()))),
        }
    }
    let Some((top, git_dir)) = found else {
        return Ok(None);
    };
    let refuse = |detail: String| GitTreeError::Refused {
        repository: top.display().to_string(),
        detail,
    };
    // The ownership probe: git's own discovery from the top, where the `.git` just found is
    // the first thing it looks at, with the caller's system and global config (their
    // `safe.directory`). An explicit `GIT_DIR`, used from here on, skips git's check that the
    // repository is the caller's own, so it is made here, once.
    let mut probe = command(&top, &[], true);
    probe.args(["rev-parse", "--absolute-git-dir"]);
    // git missing is no reason to stage the working copy either.
    let probed = probe
        .output()
        .map_err(|e| refuse(format!("starting git: {e}")))?;
    if !probed.status.success() {
        return Err(refuse(
            String::from_utf8_lossy(&probed.stderr).trim().to_owned(),
        ));
    }
    let probed = PathBuf::from(String::from_utf8_lossy(&probed.stdout).trim_end());
    let git_dir = fs::canonicalize(&git_dir)
        .map_err(|e| refuse(format!("resolving {}: {e}", git_dir.display())))?;
    if fs::canonicalize(&probed).ok().as_ref() != Some(&git_dir) {
        return Err(refuse(format!(
            "git uses the git directory {}, not {}",
            probed.display(),
            git_dir.display()
        )));
    }
    let prefix = dir
        .strip_prefix(&top)
        .ok()
        .and_then(|p| p.to_str())
        .map(str::to_owned)
        .ok_or_else(|| {
            refuse(format!(
                "the directory {} is not a UTF-8 path inside it",
                dir.display()
            ))
        })?;
    let mut repository = Repository {
        top,
        git_dir,
        filters: Vec::new(),
    };
    repository.filters = filter_overrides(&repository)?;
    Ok(Some((repository, prefix)))
}

/// Config switching off every filter driver the repository's config defines: the tree's
/// `.gitattributes` picks drivers by name, and `status` runs a driver's `clean` command on
/// files it re-reads. (A driver with an empty command and an empty `process` is no driver.)
fn filter_overrides(repository: &Repository) -> Result<Vec<(String, String)>, GitTreeError> {
    let mut cmd = command(&repository.top, &[], false);
    cmd.env("GIT_DIR", &repository.git_dir)
        .env("GIT_WORK_TREE", &repository.top)
        .args([
            "config",
            "--null",
            "--name-only",
            "--get-regexp",
            r"^filter\.",
        ]);
    let out = output(cmd, "config", &repository.top)?;
    // Exit 1 with nothing printed: no such key.
    let none = out.status.code() == Some(1) && out.stdout.is_empty();
    if !out.status.success() && !none {
        return Err(GitTreeError::Git {
            what: "config",
            dir: repository.top.display().to_string(),
            detail: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    let mut drivers: Vec<&str> = out
        .stdout
        .split(|b| *b == 0)
        .filter_map(|key| std::str::from_utf8(key).ok())
        .filter_map(|key| key.strip_prefix("filter."))
        .filter_map(|key| key.rsplit_once('.').map(|(driver, _)| driver))
        .collect();
    drivers.sort_unstable();
    drivers.dedup();
    Ok(drivers
        .into_iter()
        .flat_map(|driver| {
            [
                ("clean", ""),
                ("smudge", ""),
                ("process", ""),
                ("required", "false"),
            ]
            .map(|(key, value)| (format!("filter.{driver}.{key}"), value.to_owned()))
        })
        .collect())
}

/// A commit id as `rev-parse` prints it (40 or 64 lowercase hex digits).
fn is_object_id(id: &str) -> bool {
    matches!(id.len(), 40 | 64) && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Writes `commit` (with `-- subdirectory` unless it is `.`) as a `tar.gz` from a scratch
/// repository at `scratch_git` that reads `objects` and holds no config, refs or hooks: the
/// archive then applies the tree's own `export-ignore` and `export-subst` and nothing any
/// config names.
fn archive_command(
    scratch_git: &Path,
    objects: &Path,
    object_format: &str,
    commit: &str,
    subdirectory: &str,
) -> Result<Command, std::io::Error> {
    fs::create_dir(scratch_git)?;
    fs::create_dir(scratch_git.join("refs"))?;
    fs::create_dir(scratch_git.join("objects"))?;
    fs::write(scratch_git.join("HEAD"), format!("{commit}\n"))?;
    fs::write(
        scratch_git.join("config"),
        format!(
            "[core]\n\trepositoryformatversion = 1\n\tbare = true\n\
             [extensions]\n\tobjectformat = {object_format}\n"
        ),
    )?;
    let parent = scratch_git.parent().unwrap_or(scratch_git);
    let mut cmd = command(parent, &[], false);
    cmd.env("GIT_DIR", scratch_git)
        .env("GIT_OBJECT_DIRECTORY", objects)
        .args(["archive", "--format=tar.gz", "--prefix=archive/", commit]);
    if subdirectory != "." {
        cmd.args(["--", subdirectory]);
    }
    Ok(cmd)
}

/// A tree to stage: `dir` itself, or the extraction of `rev` when `dir` is inside a git
/// repository and `worktree` is false. Extractions go under `scratch`, which must exist and
/// outlive the staging.
pub fn resolve(
    tree: &'static str,
    dir: &Path,
    rev: &str,
    rev_asked: bool,
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
        asked_revision: None,
        changed_files: Vec::new(),
    };
    if worktree {
        return Ok((dir.to_path_buf(), as_is));
    }
    let Some((repo, prefix)) = repository_of(dir)? else {
        return Ok((dir.to_path_buf(), as_is));
    };
    let top = repo.top.clone();
    let spec = format!("{rev}^{{commit}}");
    let commit = repo.git(
        &top,
        "rev-parse",
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &spec,
        ],
    )?;
    if !is_object_id(&commit) {
        return Err(GitTreeError::Git {
            what: "rev-parse",
            dir: top.display().to_string(),
            detail: format!("{rev:?} resolved to {commit:?}, not a commit id"),
        });
    }
    let head = repo
        .git(
            &top,
            "rev-parse",
            &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
        )
        .ok();
    let status = repo.git(
        dir,
        "status",
        &[
            "status",
            "--porcelain",
            "--untracked-files=all",
            "--ignore-submodules=all",
            "--",
            ".",
        ],
    )?;
    let object_format = repo.git(&top, "rev-parse", &["rev-parse", "--show-object-format"])?;
    let objects = repo.git(&top, "rev-parse", &["rev-parse", "--git-path", "objects"])?;
    let objects = top.join(objects);
    let subdirectory = if prefix.is_empty() {
        "."
    } else {
        prefix.trim_end_matches('/')
    };
    let selected = RelativeDir::parse(subdirectory).ok_or_else(|| GitTreeError::Git {
        what: "rev-parse",
        dir: dir.display().to_string(),
        detail: format!("the directory {subdirectory:?} is not a plain relative path"),
    })?;

    // One top-level folder, as GitHub's exact-commit archives have; the feed strips it. Only
    // the selected directory is archived: the rest of the repository cannot change its digest.
    let archive_error = |detail: String| GitTreeError::Git {
        what: "archive",
        dir: top.display().to_string(),
        detail,
    };
    let scratch_git = scratch.join(format!("{tree}.git"));
    let mut child = archive_command(
        &scratch_git,
        &objects,
        &object_format,
        &commit,
        subdirectory,
    )
    .map_err(|e| archive_error(format!("preparing {}: {e}", scratch_git.display())))?
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .map_err(|e| archive_error(format!("starting git: {e}")))?;
    let dest = scratch.join(tree);
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| archive_error("no output pipe".into()))?;
    let extracted = extract_tar_gz(stdout, &dest, &selected, limits);
    let out = child
        .wait_with_output()
        .map_err(|e| archive_error(e.to_string()))?;
    if !out.status.success() {
        return Err(archive_error(
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
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
            asked_revision: rev_asked.then(|| rev.to_owned()),
            changed_files: changed_files(&status),
        },
    ))
}

/// The paths of `git status --porcelain` lines (`XY path`), at most [`MAX_CHANGED_FILES`].
fn changed_files(status: &str) -> Vec<String> {
    status
        .lines()
        .filter_map(|line| line.get(3..))
        .take(MAX_CHANGED_FILES)
        .map(str::to_owned)
        .collect()
}

impl TreeOrigin {
    /// One line for the human report.
    pub fn line(&self) -> String {
        match (&self.repository, &self.revision, &self.subdirectory) {
            (Some(repo), Some(rev), Some(sub)) => {
                let warn = match (&self.asked_revision, self.worktree_differs) {
                    // Staging the revision asked for is the point: nothing to commit.
                    (Some(asked), true) => {
                        let flag = if self.tree == "base" {
                            "--base-rev"
                        } else {
                            "--rev"
                        };
                        format!("  ({flag} {asked}, not the working tree)")
                    }
                    (None, true) => "  (warning: the working tree differs from this revision; \
                                     what is on disk is not what was staged: commit it, or pass \
                                     --worktree)"
                        .to_owned(),
                    (_, false) => String::new(),
                };
                format!("git {repo} at {rev}, directory {sub}{warn}")
            }
            _ => "the directory as it is on disk (--worktree, or not in a git repository)".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_gitfile_names_its_directory_relative_to_itself_and_anything_else_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let dot_git = dir.path().join(".git");
        fs::write(&dot_git, "gitdir: ../elsewhere.git\n").unwrap();
        assert_eq!(
            read_gitfile(&dot_git, dir.path()).unwrap(),
            dir.path().join("../elsewhere.git")
        );
        fs::write(&dot_git, "gitdir: /abs/wt\r\n").unwrap();
        assert_eq!(
            read_gitfile(&dot_git, dir.path()).unwrap(),
            PathBuf::from("/abs/wt")
        );
        for bad in [
            "gitdir:\n".to_owned(),
            "ref: HEAD\n".to_owned(),
            "gitdir: a\nb\n".to_owned(),
            format!("gitdir: {}", "a".repeat(5000)),
        ] {
            fs::write(&dot_git, &bad).unwrap();
            assert!(
                matches!(
                    read_gitfile(&dot_git, dir.path()),
                    Err(GitTreeError::Refused { .. })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn only_a_full_object_id_is_a_commit_id() {
        assert!(is_object_id(&"a".repeat(40)));
        assert!(is_object_id(&"0".repeat(64)));
        for bad in ["", "HEAD", "-a", &"a".repeat(39), &"g".repeat(40)] {
            assert!(!is_object_id(bad), "{bad:?}");
        }
    }
}
