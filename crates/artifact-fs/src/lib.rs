//! The one way the signer, the keeper and the worker read and write their artifact files
//! (candidates, evidence, attestations, settlement records, cache entries).
//!
//! - [`read_bounded`] opens with `O_NOFOLLOW`, then judges the descriptor it opened (`fstat`):
//!   a regular file of at most the cap, never a symlink, FIFO or device, and never reads past
//!   the cap. There is no check-then-open window in which the path could be swapped.
//! - [`read_named`] is the same for a path an operator named on the command line, whose final
//!   symlink (the operator's choice) is followed; the descriptor is judged all the same.
//! - [`write_atomic`] writes to a fresh, randomly named file in the target's directory created
//!   with `O_CREAT | O_EXCL | O_NOFOLLOW` (so nothing planted there, link or file, is ever
//!   opened), fsyncs it, renames it over the target and fsyncs the directory. A reader sees the
//!   old or the complete new file; after a crash, the rename is durable or never happened.
//!
//! - [`lock_pid_file`] takes the exclusive `flock` a state directory's single writer holds,
//!   and names the holder's pid in the refusal of a second one.
//!
//! Synchronous on purpose: these are small files, and every caller already runs them outside
//! any async hot path.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Permission bits of written files (before the umask): nothing written here is secret.
pub const FILE_MODE: u32 = 0o644;

/// How many fresh temporary names a write tries before giving up; a collision of 128 random
/// bits only happens when someone plants names, and then failing loudly is right.
const TEMP_ATTEMPTS: usize = 8;

/// Why a bounded read failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The path is a symbolic link, a directory or anything else but a regular file.
    #[error("{0} is not a regular file (symlinks are refused)")]
    NotRegular(PathBuf),
    /// Larger than the cap.
    #[error("{path} is larger than {limit} bytes")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The cap.
        limit: u64,
    },
    /// Opening or reading failed (including "not found").
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl ReadError {
    /// Whether the file simply does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }

    /// The error as an `std::io::Error`, for callers that report reads as I/O failures.
    pub fn into_io(self) -> std::io::Error {
        match self {
            Self::Io { source, .. } => source,
            Self::NotRegular(_) => {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file")
            }
            Self::TooLarge { limit, .. } => std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("larger than {limit} bytes"),
            ),
        }
    }
}

/// Reads `path` whole: a regular file reached without following a final symlink, at most
/// `limit` bytes.
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let io = |source| ReadError::Io {
        path: path.to_owned(),
        source,
    };
    // O_NONBLOCK: opening a FIFO planted at the path must not hang before the fstat refuses it.
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                ReadError::NotRegular(path.to_owned())
            } else {
                io(e)
            }
        })?;
    read_open(path, file, limit)
}

/// Reads a file an operator named on the command line (a request, a manifest, an evidence
/// record): like [`read_bounded`], except that a symlink the operator chose is followed. The
/// opened descriptor is still judged: a regular file of at most `limit` bytes, so a FIFO,
/// device or directory is refused rather than read or waited on.
pub fn read_named(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let io = |source| ReadError::Io {
        path: path.to_owned(),
        source,
    };
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    read_open(path, file, limit)
}

fn read_open(path: &Path, file: File, limit: u64) -> Result<Vec<u8>, ReadError> {
    let io = |source| ReadError::Io {
        path: path.to_owned(),
        source,
    };
    let meta = file.metadata().map_err(io)?;
    if !meta.file_type().is_file() {
        return Err(ReadError::NotRegular(path.to_owned()));
    }
    let too_large = || ReadError::TooLarge {
        path: path.to_owned(),
        limit,
    };
    if meta.len() > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    // The file may grow after the fstat; the take bounds what is read regardless.
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

fn temp_name(target: &std::ffi::OsStr) -> std::io::Result<OsString> {
    let mut random = [0u8; 16];
    let filled = rustix::rand::getrandom(&mut random, rustix::rand::GetRandomFlags::empty())?;
    if filled != random.len() {
        return Err(std::io::Error::other("short read from getrandom"));
    }
    let mut name = OsString::from(".");
    name.push(target);
    name.push(".");
    for b in random {
        name.push(format!("{b:02x}"));
    }
    name.push(".tmp");
    Ok(name)
}

/// Replaces `path` with `bytes`, atomically and durably (see the module docs). The directory
/// must exist; a symlink at `path` itself is replaced, never followed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let target = path.file_name().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        )
    })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut attempt = 0;
    let (tmp, mut file) = loop {
        let tmp = dir.join(temp_name(target)?);
        match File::options()
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
        {
            Ok(file) => break (tmp, file),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < TEMP_ATTEMPTS => {
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    };
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    File::open(dir)?.sync_all()
}

/// Why [`lock_pid_file`] did not take its lock.
#[derive(Debug)]
pub enum LockError {
    /// Another open of the file holds the lock; `pid` is what its holder wrote in it, when that
    /// reads as a pid.
    Held {
        /// The holder's pid (informational).
        pid: Option<u32>,
    },
    /// Opening or locking the file failed.
    Io(std::io::Error),
}

/// Takes the exclusive `flock` on `path` (created when absent, never truncated before the lock
/// is ours) and writes this process's id in it. The lock lasts as long as the returned file is
/// open; the kernel drops it when the process ends, however it ends, so a killed holder never
/// blocks the next one.
pub fn lock_pid_file(path: &Path) -> Result<File, LockError> {
    use std::io::Seek as _;
    let mut file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(LockError::Io)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut text = String::new();
            let pid = (&file)
                .take(32)
                .read_to_string(&mut text)
                .ok()
                .and_then(|_| text.trim().parse().ok());
            return Err(LockError::Held { pid });
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(LockError::Io(e)),
    }
    // The pid only makes the refusal message more useful; failing to write it does not matter.
    let _ = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| write!(file, "{}", std::process::id()));
    Ok(file)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn make_fifo(path: &Path) {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
    }

    #[test]
    fn read_enforces_the_cap_and_refuses_links_dirs_and_fifos() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("ok.json");
        std::fs::write(&ok, b"1234567").unwrap();
        assert_eq!(read_bounded(&ok, 7).unwrap(), b"1234567");
        assert!(matches!(
            read_bounded(&ok, 6),
            Err(ReadError::TooLarge { limit: 6, .. })
        ));
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&ok, &link).unwrap();
        assert!(matches!(
            read_bounded(&link, 100),
            Err(ReadError::NotRegular(_))
        ));
        assert!(matches!(
            read_bounded(dir.path(), 100),
            Err(ReadError::NotRegular(_))
        ));
        let fifo = dir.path().join("fifo");
        make_fifo(&fifo);
        assert!(matches!(
            read_bounded(&fifo, 100),
            Err(ReadError::NotRegular(_))
        ));
        let missing = read_bounded(&dir.path().join("missing"), 100).unwrap_err();
        assert!(missing.is_not_found(), "{missing}");
    }

    #[test]
    fn a_named_input_follows_its_link_but_is_still_judged_on_the_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("ok.json");
        std::fs::write(&ok, b"1234567").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&ok, &link).unwrap();
        assert_eq!(read_named(&link, 7).unwrap(), b"1234567");
        assert!(matches!(
            read_named(&link, 6),
            Err(ReadError::TooLarge { limit: 6, .. })
        ));
        assert!(matches!(
            read_named(dir.path(), 100),
            Err(ReadError::NotRegular(_))
        ));
        let fifo = dir.path().join("fifo");
        make_fifo(&fifo);
        // Without O_NONBLOCK this open would wait for a writer forever.
        assert!(matches!(
            read_named(&fifo, 100),
            Err(ReadError::NotRegular(_))
        ));
        assert!(
            read_named(&dir.path().join("missing"), 100)
                .unwrap_err()
                .is_not_found()
        );
    }

    #[test]
    fn write_replaces_atomically_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        write_atomic(&path, b"1").unwrap();
        write_atomic(&path, b"22").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"22");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        assert!(write_atomic(&dir.path().join("missing/a.json"), b"1").is_err());
    }

    #[test]
    fn links_planted_at_the_target_or_a_temporary_name_are_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let victim = elsewhere.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let path = dir.path().join("a.json");
        // Every name a write used to use, plus the target itself.
        std::fs::hard_link(&victim, dir.path().join(".a.json.tmp")).unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join(".a.json.tmp-1")).unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        write_atomic(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(read_bounded(&path, 100).unwrap(), b"new");
        let hard = dir.path().join("b.json");
        std::fs::hard_link(&victim, &hard).unwrap();
        write_atomic(&hard, b"new").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    }

    #[test]
    fn a_second_lock_is_refused_with_the_holders_pid_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let first = lock_pid_file(&path).unwrap();
        match lock_pid_file(&path) {
            Err(LockError::Held { pid }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("{other:?}"),
        }
        drop(first);
        lock_pid_file(&path).unwrap();
        assert!(matches!(
            lock_pid_file(&dir.path().join("no/such/dir.lock")),
            Err(LockError::Io(_))
        ));
    }
}
