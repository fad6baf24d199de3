//! One host uid and gid per concurrent sandbox (issue #41): a lease taken before the container
//! is created and given back only once its removal is confirmed.
//!
//! The kernel keeps some budgets per user, not per container (epoll watches, inotify
//! instances and watches, `RLIMIT_NPROC`, message-queue bytes, pending signals, pipe buffers).
//! With one uid shared by every sandbox on a host, a job that filled one of them made the
//! honest job beside it fail. So each sandbox runs as a uid of the range
//! [`SANDBOX_UID_FIRST`]`..+`[`SANDBOX_UID_COUNT`] that no other live sandbox on the host holds.
//!
//! "Holds" is decided host-wide, across every worker process (a `serve`, a `rehearse`, a
//! `--run-regression` and the test suite may run at once): a uid is leased by an exclusive
//! `flock` on `<LOCK_DIR>/<uid>.lock`, which the kernel drops when the holder dies, and only
//! when no process on the host runs as that uid or group (a container a killed worker left
//! running still holds its uid that way). A uid that a host account, group or subordinate-id
//! range claims is never leased. Every refusal is a run without a verdict; nothing falls back
//! to a shared uid.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use verifier_sdk::profile::{SANDBOX_UID_COUNT, SANDBOX_UID_FIRST, is_sandbox_uid};

/// Where the leases' lock files live: the host's lock directory, shared by every user's
/// processes (Debian and Ubuntu make `/run/lock` world-writable and sticky).
pub const LOCK_DIR: &str = "/run/lock/agent-bounties-sandbox-uids";

/// A uid (and gid of the same number) leased to one sandbox; dropping it gives it back.
#[derive(Debug)]
pub struct SandboxIdentity {
    uid: u32,
    // Held open for the flock; closing it releases the lease.
    _lock: File,
}

impl SandboxIdentity {
    /// The leased uid, also the gid.
    pub fn uid(&self) -> u32 {
        self.uid
    }
}

/// Why no uid could be leased.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The lock directory cannot be used.
    #[error(
        "the sandbox uid leases' directory {dir} cannot be used ({source}); every worker on a \
         host takes its sandboxes' uids there, so it must be a real directory that this user \
         can write or that root made with mode 1777"
    )]
    LockDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Every uid of the range is leased, in use or claimed by the host.
    #[error(
        "no sandbox uid is free: all {SANDBOX_UID_COUNT} of {SANDBOX_UID_FIRST}-{last} are \
         leased to running sandboxes, run processes, or belong to host accounts ({claimed} \
         claimed by /etc/passwd, /etc/group, /etc/subuid or /etc/subgid)",
        last = SANDBOX_UID_FIRST + SANDBOX_UID_COUNT - 1
    )]
    Exhausted {
        /// How many uids of the range the host's account files claim.
        claimed: usize,
    },
}

/// Leases a free uid of the sandbox range on this host.
pub fn lease() -> Result<SandboxIdentity, IdentityError> {
    let claimed = host_claimed_ids(Path::new("/etc"));
    lease_in(Path::new(LOCK_DIR), &claimed, &host_process_ids)
}

/// [`lease`] with its three inputs: the lock directory, the uids the host's account files
/// claim, and which uids (or gids) running processes hold.
pub(crate) fn lease_in(
    dir: &Path,
    claimed: &BTreeSet<u32>,
    running: &dyn Fn() -> BTreeSet<u32>,
) -> Result<SandboxIdentity, IdentityError> {
    lock_dir(dir).map_err(|source| IdentityError::LockDir {
        dir: dir.to_path_buf(),
        source,
    })?;
    let mut in_use: Option<BTreeSet<u32>> = None;
    for uid in (SANDBOX_UID_FIRST..SANDBOX_UID_FIRST + SANDBOX_UID_COUNT)
        .filter(|uid| !claimed.contains(uid))
    {
        let file = open_lock(&dir.join(format!("{uid}.lock"))).map_err(|source| {
            IdentityError::LockDir {
                dir: dir.to_path_buf(),
                source,
            }
        })?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => continue,
            Err(TryLockError::Error(source)) => {
                return Err(IdentityError::LockDir {
                    dir: dir.to_path_buf(),
                    source,
                });
            }
        }
        // Read once per lease, after the first lock is held: a process that appears later
        // under a uid this lease skipped is one that a live lease's container started.
        if in_use.get_or_insert_with(running).contains(&uid) {
            continue;
        }
        return Ok(SandboxIdentity { uid, _lock: file });
    }
    Err(IdentityError::Exhausted {
        claimed: claimed.len(),
    })
}

/// Makes sure `dir` is a real directory every user can lease in (creating it sticky and
/// world-writable when missing, as `/tmp` is).
fn lock_dir(dir: &Path) -> io::Result<()> {
    match std::fs::create_dir(dir) {
        Ok(()) => std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777))?,
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(error),
    }
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.file_type().is_dir() {
        return Err(io::Error::other(
            "it is not a directory (a link is refused)",
        ));
    }
    Ok(())
}

/// Opens (creating when missing) one uid's lock file, never through a link. Another user's
/// lock file cannot be opened for writing; a lock needs only reading.
fn open_lock(path: &Path) -> io::Result<File> {
    let open = |write: bool| {
        OpenOptions::new()
            .read(true)
            .write(write)
            .create(write)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
    };
    let file = match open(true) {
        Err(error) if error.kind() == io::ErrorKind::PermissionDenied => return open(false),
        other => other?,
    };
    // A worker under a restrictive umask (the unit's 0027) must still leave the file readable
    // for the other users' workers on the host, or they could not take part in the leases.
    let meta = file.metadata()?;
    // (The owner of /proc/self is this process's effective uid.)
    let euid = std::fs::metadata("/proc/self")?.uid();
    if meta.mode() & 0o044 != 0o044 && meta.uid() == euid {
        file.set_permissions(std::fs::Permissions::from_mode(0o644))?;
    }
    Ok(file)
}

/// The uids and gids of the sandbox range that any process on the host runs as: the owner of
/// `/proc/<pid>` is the process's effective uid and gid (a sandbox's processes cannot change
/// theirs: no capabilities, `no-new-privileges`).
fn host_process_ids() -> BTreeSet<u32> {
    let mut ids = BTreeSet::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return ids;
    };
    for entry in entries.flatten() {
        if !entry
            .file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            continue;
        }
        if let Ok(meta) = entry.metadata() {
            for id in [meta.uid(), meta.gid()] {
                if is_sandbox_uid(id) {
                    ids.insert(id);
                }
            }
        }
    }
    ids
}

/// The ids of the sandbox range that the host's account files under `etc` claim: a user's uid
/// (`passwd`), a group's gid (`group`), or a subordinate range (`subuid`, `subgid`) that
/// overlaps it. A file that is missing claims nothing.
pub fn host_claimed_ids(etc: &Path) -> BTreeSet<u32> {
    let read = |name: &str| std::fs::read_to_string(etc.join(name)).unwrap_or_default();
    let mut claimed = BTreeSet::new();
    for (file, field) in [("passwd", 2), ("group", 2)] {
        for line in read(file).lines() {
            if let Some(id) = line
                .split(':')
                .nth(field)
                .and_then(|f| f.parse::<u32>().ok())
                && is_sandbox_uid(id)
            {
                claimed.insert(id);
            }
        }
    }
    for file in ["subuid", "subgid"] {
        for line in read(file).lines() {
            let mut fields = line.split(':').skip(1);
            let (Some(Ok(start)), Some(Ok(count))) = (
                fields.next().map(str::parse::<u64>),
                fields.next().map(str::parse::<u64>),
            ) else {
                continue;
            };
            let first = u64::from(SANDBOX_UID_FIRST);
            let last = first + u64::from(SANDBOX_UID_COUNT);
            for id in start.max(first)..(start.saturating_add(count)).min(last) {
                claimed.extend(u32::try_from(id).ok());
            }
        }
    }
    claimed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none() -> BTreeSet<u32> {
        BTreeSet::new()
    }

    #[test]
    fn concurrent_leases_never_share_a_uid_and_a_released_one_is_taken_again() {
        let dir = tempfile::tempdir().unwrap();
        let a = lease_in(dir.path(), &none(), &none).unwrap();
        let b = lease_in(dir.path(), &none(), &none).unwrap();
        assert_ne!(a.uid(), b.uid());
        assert!(is_sandbox_uid(a.uid()) && is_sandbox_uid(b.uid()));
        let freed = a.uid();
        drop(a);
        let c = lease_in(dir.path(), &none(), &none).unwrap();
        assert_eq!(c.uid(), freed);
    }

    /// A lease held by another process (a separate open file description, as another worker's
    /// would be) is respected.
    #[test]
    fn a_uid_locked_by_another_worker_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        lock_dir(dir.path()).unwrap();
        let other = open_lock(&dir.path().join(format!("{SANDBOX_UID_FIRST}.lock"))).unwrap();
        other.lock().unwrap();
        let mine = lease_in(dir.path(), &none(), &none).unwrap();
        assert_eq!(mine.uid(), SANDBOX_UID_FIRST + 1);
    }

    /// A killed worker's flock is gone, but the container it left may still run as the uid.
    #[test]
    fn a_uid_that_a_leftover_process_still_runs_as_is_never_leased() {
        let dir = tempfile::tempdir().unwrap();
        let running = || BTreeSet::from([SANDBOX_UID_FIRST, SANDBOX_UID_FIRST + 1]);
        let lease = lease_in(dir.path(), &none(), &running).unwrap();
        assert_eq!(lease.uid(), SANDBOX_UID_FIRST + 2);
    }

    #[test]
    fn uids_a_host_account_group_or_subordinate_range_claims_are_never_leased() {
        let etc = tempfile::tempdir().unwrap();
        let first = SANDBOX_UID_FIRST;
        std::fs::write(
            etc.path().join("passwd"),
            format!("root:x:0:0::/root:/bin/sh\nsvc:x:{first}:100::/:/bin/false\n"),
        )
        .unwrap();
        std::fs::write(etc.path().join("group"), format!("g:x:{}:\n", first + 1)).unwrap();
        std::fs::write(
            etc.path().join("subuid"),
            format!("dockremap:100000:65536\nwide:{}:2\n", first + 2),
        )
        .unwrap();
        let claimed = host_claimed_ids(etc.path());
        assert_eq!(
            claimed,
            BTreeSet::from([first, first + 1, first + 2, first + 3])
        );
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            lease_in(dir.path(), &claimed, &none).unwrap().uid(),
            first + 4
        );
    }

    #[test]
    fn a_full_range_is_a_clear_refusal_not_a_shared_uid() {
        let dir = tempfile::tempdir().unwrap();
        let all: BTreeSet<u32> =
            (SANDBOX_UID_FIRST..SANDBOX_UID_FIRST + SANDBOX_UID_COUNT).collect();
        let error = lease_in(dir.path(), &none(), &|| all.clone()).unwrap_err();
        assert!(matches!(error, IdentityError::Exhausted { .. }), "{error}");
        assert!(
            error.to_string().contains("no sandbox uid is free"),
            "{error}"
        );
    }

    /// Another user's worker must be able to open (and so lock) a lock file this one made.
    #[test]
    fn a_lock_file_made_under_a_restrictive_umask_stays_readable_for_every_user() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.lock");
        std::fs::write(&path, b"").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        drop(open_lock(&path).unwrap());
        let mode = std::fs::metadata(&path).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o644);
    }

    #[test]
    fn a_lock_dir_that_is_a_link_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("elsewhere");
        std::fs::create_dir(&target).unwrap();
        let link = root.path().join("locks");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let error = lease_in(&link, &none(), &none).unwrap_err();
        assert!(matches!(error, IdentityError::LockDir { .. }), "{error}");
    }
}
