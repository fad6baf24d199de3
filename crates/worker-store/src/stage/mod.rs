//! Content-addressed staging of source and benchmark trees.
//!
//! [`stage_tree`] copies and hashes an input tree in one pass into a private, locked work
//! folder under the staging root, normalizes modes (files 0444, or 0555 when any execute bit
//! was set; directories 0555) and publishes it at `<root>/{sources|benchmarks}/sha256/<hex>` by
//! a rename that never replaces (`RENAME_NOREPLACE`; a file system without it fails the stage),
//! so a published tree another job has mounted is never swapped out, even the empty tree, which
//! a plain rename would replace. An existing target is never trusted: it is re-digested, kept
//! when it matches (our copy removed), and exchanged atomically when it does not, the
//! exchange made under a lock on the kind's directory after verifying again, so a valid tree
//! another stager put in place meanwhile (and a job may have mounted) is kept. Concurrent
//! stagers of the same tree converge on one valid target, and work folders of crashed stages
//! are removed by the next stage. A rejected input leaves no target and no work folder behind. Files are read
//! through directory descriptors of the input, never through a link, and must be the inodes
//! the listing saw (see [`crate::snapshot`]), so swapping a folder or file of the input while it
//! is staged fails the stage instead of publishing bytes from outside the tree.
//!
//! [`verify_staged`] re-digests a published tree; the run step calls it immediately before and
//! after each run.
//!
//! Test hook: [`stage_tree_pausing`] given a marker path creates that file after copying its
//! first file and waits (at most a minute) until it is deleted, so tests can change the input or
//! kill the process at a known point. It only delays; it weakens no check. This crate reads no
//! environment: the binary decides when the hook is on.

mod store;

use std::path::{Path, PathBuf};
use std::str::FromStr;

use tracing::info;
use verifier_sdk::Sha256Digest;
use verifier_sdk::digest::{Snapshot, TreeLimits};

use crate::progress::ProgressSink;
use crate::snapshot::{Pass, SnapshotError, hash_tree};

/// Under the staging root: remembered `argv[0]` resolutions, one small file per image id,
/// `argv[0]` and image `PATH` (see `worker_sandbox::exec_cache`).
pub const EXECUTABLE_CACHE_DIR: &str = "executables";

pub use store::{STALE_AFTER, WORK_PREFIX, target_path};

/// Which store a tree goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StageKind {
    /// A solver's source snapshot, mounted at `/workspace`.
    Source,
    /// A committed benchmark, mounted at `/benchmark`.
    Benchmark,
}

impl StageKind {
    /// The name used on the command line and in JSON.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Source => "source",
            Self::Benchmark => "benchmark",
        }
    }

    /// The store folder below the staging root.
    pub const fn store_dir(self) -> &'static str {
        match self {
            Self::Source => "sources",
            Self::Benchmark => "benchmarks",
        }
    }
}

impl std::fmt::Display for StageKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A kind other than `source` or `benchmark` was named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("stage kind must be `source` or `benchmark`, got {0:?}")]
pub struct ParseStageKindError(String);

impl FromStr for StageKind {
    type Err = ParseStageKindError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "source" => Ok(Self::Source),
            "benchmark" => Ok(Self::Benchmark),
            other => Err(ParseStageKindError(other.chars().take(64).collect())),
        }
    }
}

/// A published, verified tree.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StagedTree {
    /// Which store it is in.
    pub kind: StageKind,
    /// `<root>/{sources|benchmarks}/sha256/<hex>`, with the root made absolute.
    pub path: PathBuf,
    /// Its digest, file count and size.
    pub snapshot: Snapshot,
}

/// Why a tree could not be staged. Nothing is published in any of these cases.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// The staging root or its layout cannot be created or used.
    #[error("staging root {path:?} is unusable: {source}")]
    Root {
        /// The folder that failed.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A folder of the store layout exists but is not a directory.
    #[error("staging root layout entry {0:?} is not a directory")]
    RootNotDirectory(PathBuf),
    /// Published paths are printed as JSON strings, so the root must be UTF-8.
    #[error("staging root {0:?} is not valid UTF-8")]
    RootNotUtf8(PathBuf),
    /// Staging a tree into a store inside itself would copy the store into the tree.
    #[error("staging root {root:?} is inside the input tree {input:?}")]
    RootInsideInput {
        /// The staging root.
        root: PathBuf,
        /// The input tree.
        input: PathBuf,
    },
    /// The input tree was rejected, or copying it failed.
    #[error(transparent)]
    Tree(#[from] SnapshotError),
    /// Writing into the store failed.
    #[error("writing staged tree {path:?}: {source}")]
    Store {
        /// The path being written.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Why a published tree failed verification.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// Nothing is published at the path.
    #[error("staged tree {0:?} does not exist")]
    Missing(PathBuf),
    /// The path is not a real directory (a file or a link).
    #[error("staged tree {0:?} is not a directory")]
    NotADirectory(PathBuf),
    /// A directory of the tree is not sealed read-only.
    #[error("staged directory {path:?} has mode {mode:o}, expected 555")]
    DirectoryMode {
        /// The directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The tree could not be read, broke a rule, or has a file with a wrong mode.
    #[error("staged tree {path:?} is invalid: {source}")]
    Invalid {
        /// The tree.
        path: PathBuf,
        /// What was wrong.
        #[source]
        source: SnapshotError,
    },
    /// The tree's digest is not the one its path names.
    #[error("staged tree {path:?} has digest {actual}, expected {expected}")]
    DigestMismatch {
        /// The tree.
        path: PathBuf,
        /// The digest its path names.
        expected: Sha256Digest,
        /// The digest it has.
        actual: Sha256Digest,
    },
    /// Reading the tree's metadata failed.
    #[error("reading staged tree {path:?}: {source}")]
    Io {
        /// The path being read.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Copies and hashes `dir` into the store under `root` and publishes it (see the module docs).
pub fn stage_tree(
    kind: StageKind,
    dir: &Path,
    root: &Path,
    limits: TreeLimits,
    progress: &mut dyn ProgressSink,
) -> Result<StagedTree, StageError> {
    stage_tree_pausing(kind, dir, root, limits, progress, None)
}

/// [`stage_tree`] with the test hook: with `pause_marker`, the stage pauses after its first
/// file until the marker is deleted (see the module docs).
pub fn stage_tree_pausing(
    kind: StageKind,
    dir: &Path,
    root: &Path,
    limits: TreeLimits,
    progress: &mut dyn ProgressSink,
    pause_marker: Option<PathBuf>,
) -> Result<StagedTree, StageError> {
    // Checked before the store layout is created, so a refusal leaves the input untouched.
    if let Ok(input) = std::fs::canonicalize(dir) {
        let resolved_root = resolve_existing_prefix(root);
        if resolved_root.starts_with(&input) {
            return Err(StageError::RootInsideInput {
                root: resolved_root,
                input,
            });
        }
    }
    let store = store::Store::open(root)?;
    store.clean_leftovers();
    let mut work = store.new_work_dir()?;
    // The walk creates each folder of the copy as it enters it and seals it as it leaves.
    let pass = Pass {
        copy_to: Some(work.path()),
        pause_marker,
        ..Pass::read_only(dir, limits)
    };
    let snapshot = hash_tree(&pass, progress)?;
    let target = store.target(kind, &snapshot.digest);
    let published = store.publish(&mut work, &target, |path| {
        verify_tree(path, snapshot.digest, limits)
    })?;
    drop(work);
    info!(%kind, digest = %snapshot.digest, files = snapshot.file_count,
        bytes = snapshot.total_bytes, ?published, "staged tree");
    Ok(StagedTree {
        kind,
        path: target,
        snapshot,
    })
}

/// Resolves the longest existing ancestor of `path` (links included) and appends the rest.
fn resolve_existing_prefix(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut rest = Vec::new();
    let mut current = absolute.as_path();
    loop {
        if let Ok(resolved) = std::fs::canonicalize(current) {
            return rest.iter().rev().fold(resolved, |acc, part| acc.join(part));
        }
        match (current.parent(), current.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                current = parent;
            }
            _ => return absolute,
        }
    }
}

/// Finds `<root>/{sources|benchmarks}/sha256/<hex>` and re-digests it; returns its path only
/// if it is a sealed tree whose digest is `digest`.
pub fn verify_staged(
    root: &Path,
    kind: StageKind,
    digest: &Sha256Digest,
    limits: TreeLimits,
) -> Result<PathBuf, VerifyError> {
    let path = store::target_path(root, kind, digest);
    verify_tree(&path, *digest, limits)?;
    Ok(path)
}

fn verify_tree(path: &Path, expected: Sha256Digest, limits: TreeLimits) -> Result<(), VerifyError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(VerifyError::Missing(path.into()));
        }
        Err(source) => {
            return Err(VerifyError::Io {
                path: path.into(),
                source,
            });
        }
    };
    if !meta.is_dir() {
        return Err(VerifyError::NotADirectory(path.into()));
    }
    let invalid = |source: SnapshotError| VerifyError::Invalid {
        path: path.into(),
        source,
    };
    let pass = Pass {
        require_normalized_modes: true,
        ..Pass::read_only(path, limits)
    };
    let actual = match hash_tree(&pass, &mut crate::progress::NoProgress) {
        Ok(snapshot) => snapshot.digest,
        Err(SnapshotError::DirectoryMode { path, mode }) => {
            return Err(VerifyError::DirectoryMode { path, mode });
        }
        Err(error) => return Err(invalid(error)),
    };
    if actual != expected {
        return Err(VerifyError::DigestMismatch {
            path: path.into(),
            expected,
            actual,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::NoProgress;

    fn limits() -> TreeLimits {
        TreeLimits::new(1 << 20, 100).unwrap()
    }

    #[test]
    fn kind_round_trips_and_rejects_others() {
        for kind in [StageKind::Source, StageKind::Benchmark] {
            assert_eq!(kind.as_str().parse::<StageKind>().unwrap(), kind);
        }
        assert!("Source".parse::<StageKind>().is_err());
        assert_eq!(
            serde_json::to_string(&StageKind::Benchmark).unwrap(),
            "\"benchmark\""
        );
    }

    #[test]
    fn staged_tree_verifies_and_a_wrong_digest_does_not() {
        let src = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("f"), b"abc").unwrap();
        let staged = stage_tree(
            StageKind::Source,
            src.path(),
            root.path(),
            limits(),
            &mut NoProgress,
        )
        .unwrap();
        let found = verify_staged(
            root.path(),
            StageKind::Source,
            &staged.snapshot.digest,
            limits(),
        )
        .unwrap();
        assert_eq!(found, staged.path);
        let other = Sha256Digest::from_bytes([0u8; 32]);
        assert!(matches!(
            verify_staged(root.path(), StageKind::Source, &other, limits()),
            Err(VerifyError::Missing(_))
        ));
        assert!(matches!(
            verify_staged(
                root.path(),
                StageKind::Benchmark,
                &staged.snapshot.digest,
                limits()
            ),
            Err(VerifyError::Missing(_))
        ));
    }

    #[test]
    fn root_inside_input_is_refused() {
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("f"), b"abc").unwrap();
        let err = stage_tree(
            StageKind::Source,
            src.path(),
            &src.path().join("store"),
            limits(),
            &mut NoProgress,
        )
        .unwrap_err();
        assert!(matches!(err, StageError::RootInsideInput { .. }), "{err}");
        assert!(!src.path().join("store").exists());
    }
}
