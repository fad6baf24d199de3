//! Identity of the worker process that owns a container, so stale-container cleanup removes
//! only containers whose owner is provably gone and never a concurrent worker's live run.
//!
//! The identity is `<boot id>/<pid namespace>/<pid>/<process start time>`: the start time
//! guards against pid reuse, the boot id against a previous boot, and the pid namespace against
//! reading another namespace's pid as one of ours (a worker in another container sharing the
//! daemon has pids that mean nothing here, or name an unrelated process). A container whose
//! owner cannot be judged from here is left alone until it is older than any run can last.

use std::fs;
use std::time::Duration;

/// Margin on top of the largest manifest timeout before an unjudgeable container counts as
/// abandoned: it covers image checks before start, the stop grace, the post-run input re-hash
/// of the largest trees and removal retries, with room to spare.
const RUN_AGE_MARGIN: Duration = Duration::from_secs(3600);

/// Longer than any live run keeps its container: the manifest's timeout cap plus
/// [`RUN_AGE_MARGIN`].
pub fn max_run_age() -> Duration {
    let cap = verifier_sdk::manifest::NUMERIC_BOUNDS
        .iter()
        .find(|(name, _, _)| *name == "timeout_seconds")
        .map_or(0, |(_, _, max)| *max);
    Duration::from_secs(cap) + RUN_AGE_MARGIN
}

/// This process's owner identity.
pub fn current() -> String {
    let pid = std::process::id();
    format!(
        "{}/{}/{}/{}",
        boot_id().unwrap_or_default(),
        pid_namespace().unwrap_or_default(),
        pid,
        start_time(pid).unwrap_or_default()
    )
}

/// What this process can see of its host, against which an owner label is judged.
struct Here {
    boot: Option<String>,
    pidns: Option<String>,
    start_time: fn(u32) -> Option<String>,
}

/// True when a labelled container may be removed: its owner is provably dead (same boot and
/// pid namespace, and the pid is gone or now names another process), the machine rebooted
/// since the owner labelled it and it no longer runs, or it is older than [`max_run_age`].
/// Anything else — another pid namespace, an unreadable or unknown label, a running container
/// from another boot id (another host sharing the daemon) — is left alone.
pub fn is_removable(owner: &str, running: bool, age: Duration) -> bool {
    let here = Here {
        boot: boot_id(),
        pidns: pid_namespace(),
        start_time,
    };
    removable(&here, owner, running, age)
}

fn removable(here: &Here, owner: &str, running: bool, age: Duration) -> bool {
    if age > max_run_age() {
        return true;
    }
    let mut parts = owner.split('/');
    let (Some(boot), Some(pidns), Some(pid), Some(start), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return false;
    };
    let (Some(our_boot), Some(our_pidns), Ok(pid)) = (
        here.boot.as_deref(),
        here.pidns.as_deref(),
        pid.parse::<u32>(),
    ) else {
        return false;
    };
    if boot.is_empty() || pidns.is_empty() || start.is_empty() {
        return false;
    }
    if boot != our_boot {
        // A reboot stopped every container of the old boot; a running one belongs to a worker
        // on another host sharing this daemon.
        return !running;
    }
    if pidns != our_pidns {
        return false;
    }
    (here.start_time)(pid).as_deref() != Some(start)
}

fn boot_id() -> Option<String> {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The pid namespace as the kernel names it, e.g. `pid:[4026531836]`.
fn pid_namespace() -> Option<String> {
    fs::read_link("/proc/self/ns/pid")
        .ok()
        .and_then(|p| p.to_str().map(str::to_string))
        .filter(|s| !s.is_empty() && !s.contains('/'))
}

/// Field 22 of `/proc/<pid>/stat`; the command name may contain spaces and parentheses, so
/// fields are counted after its closing parenthesis.
fn start_time(pid: u32) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = stat.rsplit_once(')')?.1;
    // after_comm starts with field 3 (state); start time is field 22.
    after_comm.split_whitespace().nth(19).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    const YOUNG: Duration = Duration::from_secs(5);

    fn here() -> Here {
        Here {
            boot: Some("boot-a".into()),
            pidns: Some("pid:[1]".into()),
            // Pid 100 is alive and started at 555; every other pid is gone.
            start_time: |pid| (pid == 100).then(|| "555".to_string()),
        }
    }

    #[test]
    fn own_identity_is_kept() {
        let me = current();
        assert_eq!(me.split('/').count(), 4, "{me}");
        assert!(!is_removable(&me, true, YOUNG), "{me}");
        assert!(!is_removable(&me, false, YOUNG), "{me}");
    }

    #[test]
    fn dead_owner_in_our_boot_and_namespace_is_removed() {
        let h = here();
        assert!(removable(&h, "boot-a/pid:[1]/101/555", true, YOUNG));
        // Pid reused by another process.
        assert!(removable(&h, "boot-a/pid:[1]/100/554", true, YOUNG));
        assert!(!removable(&h, "boot-a/pid:[1]/100/555", true, YOUNG));
    }

    #[test]
    fn owner_in_another_pid_namespace_is_kept_until_too_old() {
        let h = here();
        for owner in ["boot-a/pid:[2]/100/555", "boot-a/pid:[2]/101/1"] {
            assert!(!removable(&h, owner, true, YOUNG), "{owner}");
            assert!(!removable(&h, owner, false, YOUNG), "{owner}");
            assert!(!removable(&h, owner, true, max_run_age()), "{owner}");
            assert!(removable(
                &h,
                owner,
                true,
                max_run_age() + Duration::from_secs(1)
            ));
        }
    }

    #[test]
    fn another_boot_is_removed_once_not_running() {
        let h = here();
        assert!(removable(&h, "boot-b/pid:[1]/100/555", false, YOUNG));
        assert!(!removable(&h, "boot-b/pid:[1]/100/555", true, YOUNG));
    }

    #[test]
    fn unjudgeable_labels_are_kept_until_too_old() {
        let h = here();
        for owner in [
            "",
            "garbage",
            "boot-a/101/555",
            "boot-a/pid:[1]/x/555",
            "boot-a/pid:[1]/101/555/extra",
            "/pid:[1]/101/555",
            "boot-a//101/555",
        ] {
            assert!(!removable(&h, owner, false, YOUNG), "{owner}");
            assert!(removable(&h, owner, false, max_run_age() * 2), "{owner}");
        }
        let blind = Here {
            boot: None,
            pidns: None,
            start_time: |_| None,
        };
        assert!(!removable(&blind, "boot-a/pid:[1]/101/555", false, YOUNG));
    }

    #[test]
    fn max_run_age_covers_the_manifest_timeout_cap() {
        assert!(max_run_age() >= Duration::from_secs(900) + RUN_AGE_MARGIN);
    }
}
