//! Where the content-addressed store lives: one policy for every mode.
//!
//! 1. An explicit root (`--staging-root`, or the positional root of
//!    `--stage-regression-input`) wins, made absolute against the working directory once, so
//!    a later change of directory cannot move it.
//! 2. Otherwise `$REGRESSION_SANDBOX_STAGING_ROOT`, which must be absolute: a relative value
//!    would resolve wherever the process happens to start, not where the operator meant.
//! 3. Otherwise the mode decides ([`Fallback`]): runs that must find trees staged by someone
//!    else refuse; a rehearsal, which stages its own, uses a directory private to this user
//!    under the system temp dir.
//!
//! Every failure here is a configuration problem (exit 78), never the input's fault.

use std::path::{Path, PathBuf};

/// Environment variable naming the staging root.
pub const STAGING_ROOT_ENV: &str = "REGRESSION_SANDBOX_STAGING_ROOT";

/// What a mode does when neither a flag nor the environment names the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// Refuse: the trees to run must already be staged where the operator said.
    Required,
    /// A private per-user directory under the system temp dir, reused across runs (the store
    /// is content-addressed, so reuse only saves copying).
    PrivateTemp,
}

/// Why no usable staging root could be settled on.
#[derive(Debug, thiserror::Error)]
pub enum StagingRootError {
    /// Neither a flag nor an absolute `$REGRESSION_SANDBOX_STAGING_ROOT` names the root.
    #[error("{STAGING_ROOT_ENV} must name the staging root (an absolute path)")]
    NotConfigured,
    /// The root is named but cannot be used.
    #[error("staging root {path:?} is unusable: {detail}")]
    Unusable {
        /// The root.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
}

fn unusable(path: &Path, detail: impl std::fmt::Display) -> StagingRootError {
    StagingRootError::Unusable {
        path: path.to_owned(),
        detail: detail.to_string(),
    }
}

/// The staging root for a mode given `explicit` (its flag, if any).
pub fn resolve(explicit: Option<&Path>, fallback: Fallback) -> Result<PathBuf, StagingRootError> {
    resolve_with(
        explicit,
        std::env::var_os(STAGING_ROOT_ENV).map(PathBuf::from),
        fallback,
    )
}

fn resolve_with(
    explicit: Option<&Path>,
    env: Option<PathBuf>,
    fallback: Fallback,
) -> Result<PathBuf, StagingRootError> {
    if let Some(root) = explicit {
        return std::path::absolute(root).map_err(|e| unusable(root, e));
    }
    match (env, fallback) {
        (Some(root), _) if root.is_absolute() => Ok(root),
        (Some(_), _) | (None, Fallback::Required) => Err(StagingRootError::NotConfigured),
        (None, Fallback::PrivateTemp) => private_temp_root(),
    }
}

/// Creates `root` if needed and proves a file can be made in it. For a batch: each job would
/// otherwise fail on its own and the batch end in "retry later" (3), which a scheduled run
/// treats as fine, so a broken store must stop the run before anything is fetched.
pub fn ensure_writable(root: &Path) -> Result<(), StagingRootError> {
    std::fs::create_dir_all(root)
        .and_then(|()| tempfile::tempfile_in(root))
        .map(drop)
        .map_err(|e| unusable(root, e))
}

fn private_temp_root() -> Result<PathBuf, StagingRootError> {
    let uid = effective_uid().map_err(|e| {
        unusable(
            &std::env::temp_dir(),
            format_args!("cannot tell our user id from /proc/self: {e}"),
        )
    })?;
    let root = std::env::temp_dir().join(format!("worker-rehearse-{uid}"));
    private_dir(&root, uid)?;
    Ok(root)
}

/// The effective uid: `/proc/self` is owned by it, and this keeps `unsafe` (libc) out.
fn effective_uid() -> std::io::Result<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map(|m| m.uid())
}

/// Creates `dir` mode 0700, or accepts an existing one only if it is ours and closed to others:
/// a shared temp dir must not let another user plant trees or evidence we would then trust.
fn private_dir(dir: &Path, uid: u32) -> Result<(), StagingRootError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(unusable(dir, e)),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| unusable(dir, e))?;
    if !meta.is_dir() {
        return Err(unusable(dir, "not a directory"));
    }
    if meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(unusable(
            dir,
            format_args!(
                "must be owned by uid {uid} with mode 0700 (is uid {}, mode {:o})",
                meta.uid(),
                meta.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_root_wins_and_is_made_absolute() {
        let cwd = std::env::current_dir().unwrap();
        for fallback in [Fallback::Required, Fallback::PrivateTemp] {
            assert_eq!(
                resolve_with(Some(Path::new("store")), Some("/env".into()), fallback).unwrap(),
                cwd.join("store")
            );
        }
    }

    #[test]
    fn the_environment_must_be_absolute() {
        for fallback in [Fallback::Required, Fallback::PrivateTemp] {
            assert_eq!(
                resolve_with(None, Some("/srv/store".into()), fallback).unwrap(),
                PathBuf::from("/srv/store")
            );
            assert!(matches!(
                resolve_with(None, Some("store".into()), fallback),
                Err(StagingRootError::NotConfigured)
            ));
        }
    }

    #[test]
    fn without_flag_or_environment_only_a_rehearsal_falls_back() {
        assert!(matches!(
            resolve_with(None, None, Fallback::Required),
            Err(StagingRootError::NotConfigured)
        ));
        let root = resolve_with(None, None, Fallback::PrivateTemp).unwrap();
        assert!(root.starts_with(std::env::temp_dir()), "{root:?}");
        assert!(root.is_dir());
    }

    #[test]
    fn an_open_or_foreign_private_dir_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("r");
        let uid = effective_uid().unwrap();
        private_dir(&root, uid).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(private_dir(&root, uid).is_err());
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(private_dir(&root, uid + 1).is_err());
    }

    #[test]
    fn a_file_where_the_root_should_be_is_unusable() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"").unwrap();
        assert!(matches!(
            ensure_writable(&file),
            Err(StagingRootError::Unusable { .. })
        ));
        ensure_writable(&dir.path().join("new")).unwrap();
    }
}
