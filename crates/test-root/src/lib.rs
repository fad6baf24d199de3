//! Test-only: root for the few commands the test suites need it for (`mount`, `umount`,
//! `chown`, `setpriv`), whoever runs the tests: the command itself when this process is root
//! (this project's CI), else `sudo -n` (GitHub's runner user, which has password-less sudo
//! and runs the suite unprivileged). The Rust side of `scripts/lib/host.sh`'s `as_root`;
//! `scripts/tests/runner-user.sh` runs the tests that use it as such a user.
//!
//! `sudo` resets the environment: a command that needs a variable gets it through
//! `as_root("env")` with `NAME=value` (or `-u NAME`) arguments, which works the same as root.

use std::path::Path;
use std::process::{Command, Output};

/// The effective uid and gid of this process (`/proc/self/status`), or `None` when unreadable.
pub fn effective_ids() -> Option<(u32, u32)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    // "Uid:\treal\teffective\tsaved\tfs"
    let effective = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().nth(1))
            .and_then(|n| n.parse::<u32>().ok())
    };
    Some((effective("Uid:")?, effective("Gid:")?))
}

/// Whether this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    effective_ids().is_some_and(|(uid, _)| uid == 0)
}

/// A command that runs `program` as root: `program` itself when this process is root, else
/// `sudo -n -- program` (never a password prompt, which would hang a test).
pub fn as_root(program: &str) -> Command {
    if is_root() {
        Command::new(program)
    } else {
        let mut c = Command::new("sudo");
        c.args(["-n", "--", program]);
        c
    }
}

/// Hands `path` to uid and gid 12345, standing for any other user, through `chown` as root, so
/// an ownership check has a foreign file to refuse. `Ok(false)` when `chown` failed (no root,
/// no password-less sudo). A caller that is not root first makes the file readable by all:
/// it could not even open another user's 0600 file (refused too, but as `Permission denied`),
/// so the ownership check, made before the mode's, is the one that refuses it.
pub fn give_to_another_user(path: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::PermissionsExt;
    if !is_root() {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644))?;
    }
    Ok(as_root("chown")
        .arg("12345:12345")
        .arg(path)
        .status()?
        .success())
}

/// Mounts a `size_mib` tmpfs at `path` (which must exist) with `mode`, owned by this
/// process's user and group, so a non-root caller that mounted it through sudo can write
/// there as root could. The output of `mount` is returned as it is.
pub fn mount_tmpfs(path: &Path, size_mib: u64, mode: u32) -> std::io::Result<Output> {
    let (uid, gid) = effective_ids().unwrap_or((0, 0));
    as_root("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            &format!("size={size_mib}m,mode={mode:04o},uid={uid},gid={gid}"),
            "tmpfs",
        ])
        .arg(path)
        .output()
}

/// Unmounts `path` (`umount`, or `umount -l` when `lazy`: detached now, freed once no
/// process holds a file there). True when `umount` succeeded.
pub fn umount(path: &Path, lazy: bool) -> bool {
    let mut c = as_root("umount");
    if lazy {
        c.arg("-l");
    }
    c.arg(path).output().is_ok_and(|o| o.status.success())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn effective_ids_are_this_processs() {
        let out = Command::new("id").arg("-u").output().unwrap();
        let uid: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        let out = Command::new("id").arg("-g").output().unwrap();
        let gid: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        assert_eq!(effective_ids(), Some((uid, gid)));
        assert_eq!(is_root(), uid == 0);
    }

    #[test]
    fn as_root_goes_through_sudo_only_when_not_root() {
        let c = as_root("mount");
        if is_root() {
            assert_eq!(c.get_program(), "mount");
            assert_eq!(c.get_args().count(), 0);
        } else {
            assert_eq!(c.get_program(), "sudo");
            let args: Vec<_> = c.get_args().collect();
            assert_eq!(args, ["-n", "--", "mount"]);
        }
    }
}
