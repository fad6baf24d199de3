//! The on-disk staging store: its layout, private work folders, crash leftovers and the
//! atomic publish step.
//!
//! Layout under the root: `sources/sha256/<hex>` and `benchmarks/sha256/<hex>` hold published
//! trees; `tmp/.tmp-<pid>-<random>` are work folders, each held under an exclusive `flock` by
//! the process filling it. The lock, not the pid alone, decides whether a leftover is still in
//! use, because pids are reused; the kernel drops the lock when its holder dies, even by
//! SIGKILL.

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::ErrorKind;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rustix::fs::{CWD, RenameFlags, renameat_with};
use tracing::{debug, warn};
use verifier_sdk::Sha256Digest;

use super::{StageError, StageKind, VerifyError};
use crate::remove::remove_tree;
use crate::snapshot::DIR_MODE;

/// Name prefix of every work folder under `<root>/tmp`.
pub const WORK_PREFIX: &str = ".tmp-";
/// A leftover whose owner pid still exists (or cannot be read from its name) is removed only
/// once unlocked and at least this old, so a folder created a moment ago and not yet locked is
/// never taken from its creator.
pub const STALE_AFTER: Duration = Duration::from_secs(10 * 60);
const PUBLISH_ATTEMPTS: usize = 4;

/// An opened, usable staging root.
#[derive(Debug)]
pub(crate) struct Store {
    root: PathBuf,
    tmp: PathBuf,
}

/// How a tree reached its published path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Published {
    /// Nothing was there; our copy was renamed into place.
    Created,
    /// A valid identical tree was already there; ours was discarded.
    AlreadyValid,
    /// Something invalid was there; it was swapped out atomically for our copy.
    Replaced,
}

impl Store {
    /// Creates the layout if needed and checks that it is made of real directories.
    pub(crate) fn open(root: &Path) -> Result<Self, StageError> {
        let root_error = |path: &Path, source| StageError::Root {
            path: path.to_path_buf(),
            source,
        };
        fs::create_dir_all(root).map_err(|e| root_error(root, e))?;
        let root = fs::canonicalize(root).map_err(|e| root_error(root, e))?;
        if root.to_str().is_none() {
            return Err(StageError::RootNotUtf8(root));
        }
        for sub in ["tmp", "sources/sha256", "benchmarks/sha256"] {
            let path = root.join(sub);
            fs::create_dir_all(&path).map_err(|e| root_error(&path, e))?;
            let meta = fs::symlink_metadata(&path).map_err(|e| root_error(&path, e))?;
            if !meta.is_dir() {
                return Err(StageError::RootNotDirectory(path));
            }
        }
        let tmp = root.join("tmp");
        Ok(Self { root, tmp })
    }

    /// Where a tree of this kind and digest is published.
    pub(crate) fn target(&self, kind: StageKind, digest: &Sha256Digest) -> PathBuf {
        target_path(&self.root, kind, digest)
    }

    /// A fresh, locked, private work folder (mode 0700).
    pub(crate) fn new_work_dir(&self) -> Result<WorkDir, StageError> {
        let prefix = format!("{WORK_PREFIX}{}-", std::process::id());
        let dir = tempfile::Builder::new()
            .prefix(&prefix)
            .rand_bytes(12)
            .tempdir_in(&self.tmp)
            .map_err(|source| StageError::Root {
                path: self.tmp.clone(),
                source,
            })?;
        // From here on removal is ours to do (tempfile's cannot clear read-only folders).
        let path = dir.keep();
        let mut work = WorkDir {
            path,
            lock: None,
            keep: false,
        };
        let lock = File::open(&work.path).map_err(|source| StageError::Root {
            path: work.path.clone(),
            source,
        })?;
        lock.lock().map_err(|source| StageError::Root {
            path: work.path.clone(),
            source,
        })?;
        work.lock = Some(lock);
        Ok(work)
    }

    /// Removes work folders of crashed stages. Best effort: a failure is logged, not fatal.
    pub(crate) fn clean_leftovers(&self) {
        let entries = match fs::read_dir(&self.tmp) {
            Ok(entries) => entries,
            Err(e) => {
                warn!(path = ?self.tmp, error = %e, "cannot list staging leftovers");
                return;
            }
        };
        let proc_available = Path::new("/proc/self").exists();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if !name.starts_with(WORK_PREFIX) {
                continue;
            }
            let path = entry.path();
            // Holding the lock while removing keeps a concurrent cleaner off the same folder.
            let (lockable, _held) = try_lock(&path);
            let age = fs::symlink_metadata(&path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok())
                .unwrap_or_default();
            let pid_alive =
                |pid: u32| !proc_available || Path::new("/proc").join(pid.to_string()).exists();
            if leftover_is_stale(name, age, lockable, pid_alive) {
                match remove_tree(&path) {
                    Ok(()) => debug!(?path, "removed leftover of an interrupted stage"),
                    Err(e) => {
                        warn!(?path, error = %e, "cannot remove leftover of an interrupted stage")
                    }
                }
            }
        }
    }

    /// Publishes `work` at `target` with a rename that never replaces (`RENAME_NOREPLACE`). An
    /// existing target is checked with `verify` and kept only if it passes, our copy then
    /// removed; otherwise it is verified again under an exclusive `flock` on the target's
    /// parent directory, held by every replacement, and only then exchanged atomically with our
    /// copy, so readers see either the old or the new tree, never a missing or half-written one,
    /// and a valid tree is never swapped out.
    pub(crate) fn publish(
        &self,
        work: &mut WorkDir,
        target: &Path,
        verify: impl Fn(&Path) -> Result<(), VerifyError>,
    ) -> Result<Published, StageError> {
        let store_error = |path: &Path, source| StageError::Store {
            path: path.to_path_buf(),
            source,
        };
        set_mode(&work.path, DIR_MODE).map_err(|e| store_error(&work.path, e))?;
        for _ in 0..PUBLISH_ATTEMPTS {
            // Never a plain rename: it replaces an existing empty directory, and every empty
            // tree has one digest, so a second job's publish would swap out the tree a running
            // job has mounted (its `/workspace` gone: `ENOENT` from `getcwd`).
            match rename_dir(&work.path, target, RenameFlags::NOREPLACE) {
                Ok(()) => {
                    work.keep = true;
                    return Ok(Published::Created);
                }
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                    debug!(?target, "target exists; verifying it");
                }
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    return Err(store_error(target, no_replace_unsupported(&e)));
                }
                Err(e) => return Err(store_error(target, e)),
            }
            match verify(target) {
                Ok(()) => return Ok(Published::AlreadyValid),
                Err(reason) => debug!(?target, %reason, "existing tree failed verification"),
            }
            // The verdict above may be stale: another stager may have exchanged the invalid
            // tree for a valid one since, which a job may have verified and mounted, and
            // exchanging on a stale verdict would swap that tree out and delete it under the
            // job. Replacements are serialized and the verdict taken again under the lock.
            let parent = target.parent().unwrap_or(target);
            let _replacing = lock_dir(parent).map_err(|e| store_error(parent, e))?;
            match verify(target) {
                Ok(()) => return Ok(Published::AlreadyValid),
                Err(reason) => warn!(?target, %reason, "replacing invalid staged tree"),
            }
            match rename_dir(&work.path, target, RenameFlags::EXCHANGE) {
                // `work.path` now holds the invalid tree, removed when `work` is dropped.
                Ok(()) => return Ok(Published::Replaced),
                // The invalid target vanished meanwhile (another stager); try a plain rename.
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(store_error(target, e)),
            }
        }
        Err(store_error(
            target,
            std::io::Error::other("target kept changing while publishing"),
        ))
    }
}

/// `<root>/{sources|benchmarks}/sha256/<hex>`.
pub fn target_path(root: &Path, kind: StageKind, digest: &Sha256Digest) -> PathBuf {
    root.join(kind.store_dir())
        .join("sha256")
        .join(digest.hex())
}

/// Renames (or exchanges) a directory. Moving a directory to another parent needs write
/// permission on it (its `..` changes), which a 0555 tree lacks unless we are root; then it is
/// made writable for the move and sealed again after.
fn rename_dir(from: &Path, to: &Path, flags: RenameFlags) -> std::io::Result<()> {
    match renameat_with(CWD, from, CWD, to, flags) {
        Err(rustix::io::Errno::ACCESS) => {
            let _ = set_mode(from, 0o700);
            if flags.contains(RenameFlags::EXCHANGE) {
                let _ = set_mode(to, 0o700);
            }
            renameat_with(CWD, from, CWD, to, flags)?;
            set_mode(to, DIR_MODE)
        }
        other => Ok(other?),
    }
}

/// Fails closed where the file system has no `RENAME_NOREPLACE` (some network and FUSE file
/// systems): no check-then-rename is safe there, since another stager can publish the empty
/// tree between the check and the rename, which would then replace it.
fn no_replace_unsupported(e: &std::io::Error) -> std::io::Error {
    std::io::Error::new(
        ErrorKind::Unsupported,
        format!(
            "the staging root's file system cannot rename without replacing \
             (renameat2 RENAME_NOREPLACE: {e}); publishing needs it so that one job never \
             replaces a tree another job is using; put the staging root on a local file system \
             such as ext4, xfs, btrfs or tmpfs"
        ),
    )
}

/// A private work folder; removed on drop unless it was published.
#[derive(Debug)]
pub(crate) struct WorkDir {
    path: PathBuf,
    // Released only after the folder is gone (fields drop after `Drop::drop` runs).
    lock: Option<File>,
    keep: bool,
}

impl WorkDir {
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if !self.keep
            && let Err(e) = remove_tree(&self.path)
        {
            warn!(path = ?self.path, error = %e, "cannot remove staging work folder");
        }
        let _ = self.lock.take();
    }
}

/// Decides whether a leftover folder in `<root>/tmp` belongs to a dead stage.
pub(crate) fn leftover_is_stale(
    name: &str,
    age: Duration,
    lockable: bool,
    pid_alive: impl Fn(u32) -> bool,
) -> bool {
    let Some(rest) = name.strip_prefix(WORK_PREFIX) else {
        return false;
    };
    if !lockable {
        return false;
    }
    let pid = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
    match pid {
        Some(pid) if !pid_alive(pid) => true,
        _ => age >= STALE_AFTER,
    }
}

/// Tries to take the folder's lock; returns whether nobody else holds it, and the held lock.
fn try_lock(path: &Path) -> (bool, Option<File>) {
    match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(file) => match file.try_lock() {
            Ok(()) => (true, Some(file)),
            Err(_) => (false, None),
        },
        // A link cannot be locked by anyone; it can only be debris.
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => (true, None),
        Err(_) => (false, None),
    }
}

/// An exclusive `flock` on a directory, held until the returned file is dropped.
fn lock_dir(path: &Path) -> std::io::Result<File> {
    let dir = File::open(path)?;
    dir.lock()?;
    Ok(dir)
}

fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    fs::set_permissions(path, Permissions::from_mode(mode))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    #[test]
    fn dead_owner_is_stale_at_once() {
        assert!(leftover_is_stale(
            ".tmp-123-abc",
            Duration::ZERO,
            true,
            |_| false
        ));
    }

    #[test]
    fn live_owner_is_kept_until_old_and_unlocked() {
        assert!(!leftover_is_stale(
            ".tmp-123-abc",
            Duration::from_secs(1),
            true,
            |_| true
        ));
        // Same pid alive but the folder unlocked and old: the pid was reused.
        assert!(leftover_is_stale(".tmp-123-abc", STALE_AFTER, true, |_| {
            true
        }));
    }

    #[test]
    fn locked_folder_is_never_stale() {
        assert!(!leftover_is_stale(
            ".tmp-123-abc",
            STALE_AFTER * 100,
            false,
            |_| false
        ));
    }

    #[test]
    fn foreign_names_are_left_alone_and_unparsable_pids_wait_for_age() {
        assert!(!leftover_is_stale(
            "notes.txt",
            STALE_AFTER * 100,
            true,
            |_| false
        ));
        assert!(!leftover_is_stale(
            ".tmp-x-abc",
            Duration::ZERO,
            true,
            |_| false
        ));
        assert!(leftover_is_stale(".tmp-x-abc", STALE_AFTER, true, |_| {
            false
        }));
    }

    #[test]
    fn remove_tree_clears_read_only_trees() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("t");
        fs::create_dir_all(tree.join("a/b")).unwrap();
        fs::write(tree.join("a/b/f"), b"1").unwrap();
        for p in ["a/b/f", "a/b", "a", ""] {
            set_mode(&tree.join(p), 0o555).unwrap();
        }
        remove_tree(&tree).unwrap();
        assert!(!tree.exists());
        remove_tree(&tree).unwrap();
    }

    #[test]
    fn a_second_publish_of_a_digest_keeps_the_first_verified_and_removes_its_own_copy() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let target = store.target(StageKind::Source, &Sha256Digest::from_bytes([7; 32]));
        let mut first = store.new_work_dir().unwrap();
        let verified = std::cell::Cell::new(0);
        let verify = |_: &Path| {
            verified.set(verified.get() + 1);
            Ok::<(), VerifyError>(())
        };
        assert_eq!(
            store.publish(&mut first, &target, verify).unwrap(),
            Published::Created
        );
        drop(first);
        let published = fs::symlink_metadata(&target).unwrap();
        let mut second = store.new_work_dir().unwrap();
        let losing_copy = second.path().to_path_buf();
        assert_eq!(
            store.publish(&mut second, &target, verify).unwrap(),
            Published::AlreadyValid
        );
        assert_eq!(
            verified.get(),
            1,
            "an existing entry is verified before it is kept"
        );
        drop(second);
        assert!(!losing_copy.exists());
        assert_eq!(fs::read_dir(&store.tmp).unwrap().count(), 0);
        let kept = fs::symlink_metadata(&target).unwrap();
        assert_eq!((kept.dev(), kept.ino()), (published.dev(), published.ino()));
    }

    #[test]
    fn held_lock_blocks_a_second_locker() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let work = store.new_work_dir().unwrap();
        assert!(!try_lock(work.path()).0);
        let path = work.path().to_path_buf();
        drop(work);
        assert!(!path.exists());
    }

    /// B finds an invalid entry; before B exchanges it, C replaces it with a valid tree that a
    /// job then verifies and mounts. B must keep that tree, not swap it out on its stale
    /// verdict and delete it under the job.
    #[test]
    fn a_stale_verdict_never_swaps_out_a_valid_tree_another_stager_put_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let target = store.target(StageKind::Source, &Sha256Digest::from_bytes([9; 32]));
        fs::create_dir_all(&target).unwrap();
        fs::write(target.join("tampered"), b"x").unwrap();
        let verify = |p: &Path| {
            if p.join("tampered").exists() {
                Err(VerifyError::Missing(p.into()))
            } else {
                Ok(())
            }
        };
        let mounted = std::cell::Cell::new(None);
        let b_verify = |p: &Path| {
            let verdict = verify(p);
            if mounted.get().is_none() {
                let mut c = store.new_work_dir().unwrap();
                assert_eq!(
                    store.publish(&mut c, &target, verify).unwrap(),
                    Published::Replaced
                );
                drop(c);
                let tree = fs::symlink_metadata(&target).unwrap();
                mounted.set(Some((tree.dev(), tree.ino())));
            }
            verdict
        };
        let mut b = store.new_work_dir().unwrap();
        assert_eq!(
            store.publish(&mut b, &target, b_verify).unwrap(),
            Published::AlreadyValid
        );
        drop(b);
        let kept = fs::symlink_metadata(&target).unwrap();
        assert_eq!(Some((kept.dev(), kept.ino())), mounted.get());
        assert_eq!(fs::read_dir(&store.tmp).unwrap().count(), 0);
    }
}
