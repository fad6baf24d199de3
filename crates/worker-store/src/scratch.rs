//! The per-run scratch directory for downloads and extractions, and the removal of those left
//! behind by a worker that was killed.
//!
//! A run's directory is `<work_dir>/regression-feed-<pid>-<random>`, held under an exclusive
//! `flock` on the directory itself for the whole run. The kernel drops the lock when its
//! holder dies, even by SIGKILL, so the lock, not the pid alone, decides whether a leftover is
//! still in use (pids are reused). At start a run removes every such directory it can lock
//! whose owner pid is gone, or, when that pid runs again or the name has none (an older
//! worker's), that is older than [`STALE_AFTER`], so a directory created a moment ago and not
//! yet locked is never taken from its creator. This is the staging store's rule for its work
//! folders.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use crate::clock::Clock;

/// Name prefix of every scratch directory in the work directory.
pub const SCRATCH_PREFIX: &str = "regression-feed-";
/// An unlocked leftover whose owner pid still exists (or is not in its name) is removed only
/// once at least this old.
pub const STALE_AFTER: Duration = Duration::from_secs(10 * 60);

/// A run's scratch directory, removed (then unlocked) when dropped.
#[derive(Debug)]
pub struct Scratch {
    // Fields drop in order: the directory goes before its lock is released.
    dir: tempfile::TempDir,
    _lock: File,
}

impl Scratch {
    /// Creates and locks a fresh scratch directory under `work_dir`.
    pub fn create(work_dir: &Path) -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("{SCRATCH_PREFIX}{}-", std::process::id()))
            .tempdir_in(work_dir)?;
        let lock = open_dir(dir.path())?;
        lock.try_lock().map_err(io::Error::other)?;
        Ok(Self { dir, _lock: lock })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Removes the scratch directories of dead runs in `work_dir`, their age counted on `clock`'s
/// wall time from their mtime. Best effort: a failure is logged, not fatal, and nothing but
/// our own prefix's real directories is ever touched.
pub fn remove_stale(work_dir: &Path, clock: &dyn Clock) {
    let Ok(entries) = fs::read_dir(work_dir) else {
        return;
    };
    let proc_available = Path::new("/proc/self").exists();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with(SCRATCH_PREFIX) {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_dir() {
            continue;
        }
        // Held while removing, so a concurrent run's sweep keeps off the same directory.
        let Some(lock) = open_dir(&path).ok().filter(|f| f.try_lock().is_ok()) else {
            continue;
        };
        let now =
            UNIX_EPOCH + Duration::from_millis(u64::try_from(clock.wall_ms()).unwrap_or_default());
        let age = meta
            .modified()
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .unwrap_or_default();
        let pid_alive =
            |pid: u32| !proc_available || Path::new("/proc").join(pid.to_string()).exists();
        if is_stale(name, age, pid_alive) {
            match fs::remove_dir_all(&path) {
                Ok(()) => tracing::info!(?path, "removed the scratch directory of a dead run"),
                Err(e) => {
                    tracing::warn!(?path, error = %e, "cannot remove a stale scratch directory")
                }
            }
        }
        drop(lock);
    }
}

/// Whether an unlocked scratch directory named `name` belongs to a dead run.
fn is_stale(name: &str, age: Duration, pid_alive: impl Fn(u32) -> bool) -> bool {
    let Some(rest) = name.strip_prefix(SCRATCH_PREFIX) else {
        return false;
    };
    let pid = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
    match pid {
        Some(pid) if !pid_alive(pid) => true,
        _ => age >= STALE_AFTER,
    }
}

fn open_dir(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_DIRECTORY)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_owner_is_stale_at_once_a_live_one_only_when_old() {
        let young = Duration::from_secs(5);
        assert!(is_stale("regression-feed-123-abc", young, |_| false));
        assert!(!is_stale("regression-feed-123-abc", young, |_| true));
        // Same pid alive, unlocked and old: the pid was reused.
        assert!(is_stale("regression-feed-123-abc", STALE_AFTER, |_| true));
        // An older worker's name has no pid: only age decides.
        assert!(!is_stale("regression-feed-AbCdEf", young, |_| false));
        assert!(is_stale("regression-feed-AbCdEf", STALE_AFTER, |_| false));
        assert!(!is_stale("other-123-abc", STALE_AFTER, |_| false));
    }

    #[test]
    fn a_locked_scratch_dir_survives_a_sweep_and_goes_when_dropped() {
        let work = tempfile::tempdir().unwrap();
        let scratch = Scratch::create(work.path()).unwrap();
        // Even when old, a directory whose owner holds the lock is kept.
        let old = std::time::SystemTime::now() - 2 * STALE_AFTER;
        File::open(scratch.path())
            .unwrap()
            .set_modified(old)
            .unwrap();
        remove_stale(work.path(), &crate::clock::SystemClock::new());
        assert!(scratch.path().is_dir());
        let path = scratch.path().to_owned();
        drop(scratch);
        assert!(!path.exists());
    }

    #[test]
    fn a_scratch_dir_s_age_is_counted_on_the_injected_clock() {
        let work = tempfile::tempdir().unwrap();
        // Unlocked, named for this (live) process: only its age can make it stale.
        let dir = work
            .path()
            .join(format!("{SCRATCH_PREFIX}{}-left", std::process::id()));
        fs::create_dir(&dir).unwrap();
        let now = crate::clock::SystemClock::new().wall_ms();
        remove_stale(work.path(), &crate::clock::ManualClock::new(now));
        assert!(dir.is_dir(), "young by the clock: kept");
        let later = i64::try_from((2 * STALE_AFTER).as_millis()).unwrap();
        remove_stale(work.path(), &crate::clock::ManualClock::new(now + later));
        assert!(!dir.exists(), "old by the clock: removed");
    }
}
