//! `--snapshot-directory` and `--stage-regression-input`, the staging modes.
//!
//! Exit codes (numbers from `exit.rs`):
//! - 0: the tree was snapshotted or staged; its JSON is on stdout.
//! - 2: the command line is unusable (unknown flag, missing value, bad kind, limit not a
//!   positive integer).
//! - 4: the input tree was rejected (missing, link, special file, non-UTF-8 or `\` name, too
//!   deep, over a limit, changed while read). Nothing was published.
//! - 78: the staging root cannot be created or used, or lies inside the input tree.
//! - 1: writing into the store failed, or an internal error. Nothing was published.

use std::path::Path;

use verifier_sdk::TreeLimits;

use super::{fail, print_json, staging_root_failed};
use crate::exit::ExitCode;
use worker_store::progress::stderr_progress;
use worker_store::snapshot::{SnapshotError, snapshot_directory_with_progress};
use worker_store::stage::{StageError, StageKind, stage_tree_pausing};
use worker_store::staging_root::{self, Fallback};

/// `--snapshot-directory DIR MAX_BYTES MAX_FILES`.
pub fn snapshot(dir: &Path, limits: TreeLimits, quiet: bool) -> ExitCode {
    let mut progress = stderr_progress("hashing", quiet);
    match snapshot_directory_with_progress(dir, limits, progress.as_mut()) {
        Ok(snapshot) => print_json(&snapshot),
        Err(error) => fail(snapshot_exit_code(&error), &error),
    }
}

/// Environment variable of staging's pause test hook: when it names a path,
/// `--stage-regression-input` pauses after its first file until that file is deleted (see
/// `worker_store::stage`). Read here, in the binary, only for this mode, and only in debug
/// builds: the CLI tests that swap or kill a stage mid-copy run a debug binary, while a
/// release binary (what operators run) never reads it, so no environment can make a
/// production stage pause.
pub const PAUSE_HOOK_ENV: &str = "WORKER_TEST_PAUSE_AFTER_FIRST_FILE";

/// `--stage-regression-input KIND DIR STAGING_ROOT MAX_BYTES MAX_FILES`.
pub fn stage(
    kind: StageKind,
    dir: &Path,
    root: &Path,
    limits: TreeLimits,
    quiet: bool,
) -> ExitCode {
    let root = match staging_root::resolve(Some(root), Fallback::Required) {
        Ok(root) => root,
        Err(error) => return staging_root_failed(&error),
    };
    let mut progress = stderr_progress("staging", quiet);
    #[cfg(debug_assertions)]
    let pause_marker = std::env::var_os(PAUSE_HOOK_ENV).map(std::path::PathBuf::from);
    #[cfg(not(debug_assertions))]
    let pause_marker = None;
    match stage_tree_pausing(kind, dir, &root, limits, progress.as_mut(), pause_marker) {
        Ok(staged) => print_json(&staged),
        Err(error) => fail(stage_exit_code(&error), &error),
    }
}

pub(crate) fn snapshot_exit_code(error: &SnapshotError) -> ExitCode {
    if error.is_input_error() {
        ExitCode::InvalidInput
    } else {
        ExitCode::Internal
    }
}

pub(crate) fn stage_exit_code(error: &StageError) -> ExitCode {
    match error {
        StageError::Root { .. }
        | StageError::RootNotDirectory(_)
        | StageError::RootNotUtf8(_)
        | StageError::RootInsideInput { .. } => ExitCode::Config,
        StageError::Tree(error) => snapshot_exit_code(error),
        StageError::Store { .. } => ExitCode::Internal,
    }
}
