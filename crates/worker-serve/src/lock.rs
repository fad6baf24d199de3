//! One `worker serve` per state directory: an exclusive `flock` on `serve.lock` in it, taken
//! before the ledger is opened and held for the life of the process (the kernel releases it
//! when the process ends, however it ends, so a SIGKILLed predecessor never blocks a restart).
//!
//! Without it, a second service on the same `--state` closes the first's live run as
//! interrupted and runs the job again (two containers, two candidates). `worker ledger` does
//! not take the lock: SQLite already serializes its reads and its `--retry` writes.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};

/// The lock file inside the state directory.
pub const LOCK_FILE: &str = "serve.lock";

/// The state directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds the lock.
    #[error(
        "state directory {dir:?} is in use by another worker serve{}: refusing to run a second one on the same ledger",
        pid.as_ref().map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    Held {
        /// The state directory.
        dir: PathBuf,
        /// The holder's pid, as it wrote it (informational).
        pid: Option<u32>,
    },
    /// The lock file could not be opened or locked.
    #[error("lock file {path:?}: {source}")]
    Io {
        /// The lock file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
}

/// The held lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct StateLock {
    _file: File,
}

/// Takes the lock of `state_dir` without waiting, and writes this process's pid into it.
pub fn lock_state(state_dir: &Path) -> Result<StateLock, LockError> {
    let path = state_dir.join(LOCK_FILE);
    let io = |source| LockError::Io {
        path: path.clone(),
        source,
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            let pid = file
                .take(32)
                .read_to_string(&mut text)
                .ok()
                .and_then(|_| text.trim().parse().ok());
            return Err(LockError::Held {
                dir: state_dir.to_owned(),
                pid,
            });
        }
        Err(TryLockError::Error(e)) => return Err(io(e)),
    }
    // The pid is for the refusal message only; failing to write it does not matter.
    let _ = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| writeln!(file, "{}", std::process::id()));
    Ok(StateLock { _file: file })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn serve_state_lock_is_exclusive_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let held = lock_state(dir.path()).unwrap();
        match lock_state(dir.path()) {
            Err(LockError::Held { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("a second lock was granted: {other:?}"),
        }
        drop(held);
        lock_state(dir.path()).unwrap();
    }
}
