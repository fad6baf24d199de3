//! The chaos work directory: one `seed-S/` per schedule, holding the tmpfs mounts of the
//! disk faults. A run killed before it unmounted them (SIGKILL, a CI timeout, a cancelled
//! soak) leaves them mounted; the next run must not trip over them.

use std::path::{Path, PathBuf};

use crate::{E2eError, fresh_dir};

/// A prepared `seed-S/` directory, and the lock on its root that keeps a second run out
/// while this one plays (released on drop).
pub struct WorkDir {
    /// `root/seed-S`, empty.
    pub path: PathBuf,
    _lock: std::fs::File,
}

/// Takes the lock on `root` (a second run on the same root fails at once: it would unmount
/// the first one's filesystems), unmounts every stale mount under `root` (any seed's, the
/// deepest first), then makes `root/seed-<seed>/` empty and ready.
pub fn prepare(root: &Path, seed: u64) -> Result<WorkDir, E2eError> {
    std::fs::create_dir_all(root).map_err(crate::io("create the work directory", root))?;
    let lock_path = root.join(".chaos.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(crate::io("open the work directory's lock", &lock_path))?;
    lock.try_lock().map_err(|e| E2eError::Setup {
        what: "lock the chaos work directory",
        detail: format!(
            "{}: {e} (another chaos run uses it; give this one its own --work-dir)",
            lock_path.display()
        ),
    })?;
    kill_orphans(root);
    unmount_stale(root)?;
    let work = root.join(format!("seed-{seed}"));
    fresh_dir(&work)?;
    Ok(WorkDir {
        path: work,
        _lock: lock,
    })
}

/// SIGKILLs the `worker`, `signer` and `keeper` processes a killed earlier run left behind:
/// those whose arguments name a path under `root` (a `worker serve` outlives its driver and
/// would keep its state lock and its mounts busy). Only called with the lock held, so no
/// live run owns them.
pub fn kill_orphans(root: &Path) -> Vec<u32> {
    let root = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
    let me = std::process::id();
    let mut killed = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return killed;
    };
    for e in procs.filter_map(Result::ok) {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let ours = std::fs::read_link(e.path().join("exe")).is_ok_and(|exe| {
            exe.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| matches!(n, "worker" | "signer" | "keeper"))
        });
        if !ours {
            continue;
        }
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let names_root = cmdline
            .split(|b| *b == 0)
            .any(|arg| Path::new(&*String::from_utf8_lossy(arg)).starts_with(&root));
        if names_root
            && std::process::Command::new("kill")
                .args(["-s", "KILL", &pid.to_string()])
                .output()
                .is_ok_and(|o| o.status.success())
        {
            killed.push(pid);
        }
    }
    killed
}

/// Unmounts every mount point under `root`, deepest first; a busy one is detached (`-l`).
/// Errors when one is still mounted after that. Through `sudo -n` when not root
/// ([`test_root`]).
pub fn unmount_stale(root: &Path) -> Result<(), E2eError> {
    let mut stale = mounts_under(root);
    // Deepest first: a mount inside another must go before its parent.
    stale.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for m in &stale {
        if !test_root::umount(m, false) {
            test_root::umount(m, true);
        }
    }
    let left = mounts_under(root);
    if left.is_empty() {
        Ok(())
    } else {
        Err(E2eError::Setup {
            what: "unmount a killed chaos run's filesystems (run as root or with password-less sudo)",
            detail: left
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
    }
}

/// The mount points under `root` (itself included), from `/proc/self/mountinfo`.
pub fn mounts_under(root: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let root = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
    text.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(unescape_mountinfo(p)))
        .filter(|p| p.starts_with(&root))
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo` (octal).
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b, octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn mountinfo_paths_are_unescaped() {
        assert_eq!(unescape_mountinfo("/a\\040b/c\\134d"), "/a b/c\\d");
        assert_eq!(unescape_mountinfo("/plain\\04"), "/plain\\04");
    }

    fn mount_tmpfs(path: &Path) {
        std::fs::create_dir_all(path).unwrap();
        let out = test_root::mount_tmpfs(path, 1, 0o755).unwrap();
        assert!(
            out.status.success(),
            "mount a tmpfs at {} (the test needs root or password-less sudo): {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        std::fs::write(path.join("left-behind"), "x").unwrap();
    }

    /// A run killed with its tmpfs mounts in place (this seed's and an earlier seed's): the
    /// next run must start anyway and leave no stale mount under the work directory.
    #[test]
    fn a_killed_runs_tmpfs_mounts_do_not_stop_the_next_run() {
        let root = std::env::temp_dir().join(format!("chaos-stale-mounts-{}", std::process::id()));
        mount_tmpfs(&root.join("seed-7/stage-fs"));
        mount_tmpfs(&root.join("seed-3/state-fs"));
        let prepared = prepare(&root, 7);
        let left = mounts_under(&root);
        // Clean up whatever the code under test left, before asserting.
        for m in left.iter().rev() {
            test_root::umount(m, true);
        }
        let _ = std::fs::remove_dir_all(&root);
        let work = prepared.expect("the next run starts despite the stale mounts");
        assert_eq!(work.path, root.join("seed-7"));
        assert_eq!(
            left,
            Vec::<PathBuf>::new(),
            "stale mounts left under the work dir"
        );
    }

    /// A `worker serve` left running by a killed run (its driver got SIGTERM): the next run
    /// ends it, and only processes naming the work dir.
    #[test]
    fn a_killed_runs_orphaned_service_is_ended_by_the_next_run() {
        let root = std::env::temp_dir().join(format!("chaos-orphans-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        // A stand-in binary named `worker` (a copy of `sh`, blocked reading a pipe, so it
        // forks nothing), as the driver's children are.
        let spawn = |dir: &Path, arg: PathBuf| {
            let bin = dir.join("worker");
            std::fs::copy("/bin/sh", &bin).unwrap();
            std::process::Command::new(&bin)
                .args(["-c", "read x; true", "worker"])
                .arg(arg)
                .stdin(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let elsewhere = std::env::temp_dir().join(format!("chaos-other-{}", std::process::id()));
        std::fs::create_dir_all(&elsewhere).unwrap();
        let mut orphan = spawn(&root, root.join("seed-1/state-fs/serve-pair"));
        let mut bystander = spawn(&elsewhere, elsewhere.join("state"));
        let killed = kill_orphans(&root);
        let _ = orphan.kill();
        let _ = bystander.kill();
        let _ = orphan.wait();
        let _ = bystander.wait();
        let _ = std::fs::remove_dir_all(&root);
        let _ = std::fs::remove_dir_all(&elsewhere);
        assert!(!killed.contains(&bystander.id()), "{killed:?}");
        assert!(killed.contains(&orphan.id()), "{killed:?}");
    }

    #[test]
    fn a_second_run_on_the_same_work_dir_is_refused() {
        let root = std::env::temp_dir().join(format!("chaos-lock-{}", std::process::id()));
        let first = prepare(&root, 1).unwrap();
        let second = prepare(&root, 2);
        drop(first);
        let third = prepare(&root, 3);
        let _ = std::fs::remove_dir_all(&root);
        let err = second
            .err()
            .expect("a second run at once is refused")
            .to_string();
        assert!(err.contains("another chaos run"), "{err}");
        assert!(third.is_ok(), "the lock is released with the first run");
    }
}
