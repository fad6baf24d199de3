//! Identity of the worker process that owns a container, so stale-container cleanup removes
//! only containers whose owner is gone and never a concurrent worker's live run.
//!
//! The identity is `<boot id>/<pid>/<process start time>`: the start time guards against pid
//! reuse, the boot id against a previous boot. This assumes every worker sharing a daemon runs
//! in one pid namespace on the daemon's host, which is how the worker is deployed.

use std::fs;

/// This process's owner identity.
pub fn current() -> String {
    let pid = std::process::id();
    format!(
        "{}/{}/{}",
        boot_id().unwrap_or_default(),
        pid,
        start_time(pid).unwrap_or_default()
    )
}

/// True when the process named by `owner` is still running on this boot.
pub fn is_alive(owner: &str) -> bool {
    let mut parts = owner.split('/');
    let (Some(boot), Some(pid), Some(start), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    if boot_id().as_deref() != Some(boot) {
        return false;
    }
    start_time(pid).as_deref() == Some(start)
}

fn boot_id() -> Option<String> {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
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

    #[test]
    fn own_identity_is_alive() {
        let me = current();
        assert!(is_alive(&me), "{me}");
    }

    #[test]
    fn wrong_start_time_or_garbage_is_dead() {
        let me = current();
        let (prefix, _) = me.rsplit_once('/').unwrap();
        assert!(!is_alive(&format!("{prefix}/1")));
        assert!(!is_alive("garbage"));
        assert!(!is_alive(""));
        assert!(!is_alive(&format!("{me}/extra")));
    }
}
