//! Limits a run ran into that the program only sees as an errno: the process limit (`EAGAIN`
//! from `fork`), a full `/tmp` (`ENOSPC`), a write to a read-only path (`EROFS`), and network
//! use under `network none` (`ENETUNREACH`). A test that fails on one of these looks like a
//! plain failure; the explanation should say which limit it met.
//!
//! What the kernel counts is read while the container runs, because the container's cgroup and
//! network namespace disappear the moment it exits: `pids.events` (forks the pids controller
//! refused), `statfs` of the two tmpfs mounts (no free block left), and the namespace's
//! `Ip: OutNoRoutes` / `Ip6OutNoRoutes` counters (a connect or send with no route: the only
//! interface is loopback). These are `observed`. A process that hits a limit and exits within
//! one poll interval can slip past the poll; the output then still shows the errno's words, and
//! the hit is reported as `likely`, with the words that suggest it. A write to a read-only
//! path leaves no counter at all, so it is only ever `likely`.
//!
//! Hits are reported beside the verdict and never change it: a run that forks until refused
//! and then exits 0 passed, and one that exits 1 failed (DESIGN §3).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

/// Who can change a limit and what a solver can do, in the words of the manifest.
pub const AUTHOR_SETS_IT: &str =
    "only the bounty author can change it (it is committed in runner_manifest_hash)";

/// How often the kernel's counters are read while the container runs.
pub const POLL_EVERY: Duration = Duration::from_millis(20);

/// What the poll saw while the container ran.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// The cgroup's `pids.events` `max` counter: forks refused at the limit.
    pub pids_refused: Option<u64>,
    /// The most processes and threads alive at once (`pids.peak`, where the kernel has it).
    pub pids_peak: Option<u64>,
    /// Tmpfs mount points seen with no free block.
    pub tmpfs_full: Vec<String>,
    /// Packets the namespace could not route (IPv4 and IPv6 together).
    pub no_route: Option<u64>,
    /// Whether the poll could read the container's counters at all (the worker may lack the
    /// rights, or the container ended before its process could be found).
    pub watched: bool,
}

/// Which limit a run met.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HitKind {
    /// The `pids_limit` refused a fork or thread.
    PidsLimit,
    /// `/tmp` or `/tmp/home` was full (`tmpfs_bytes`).
    TmpfsFull,
    /// A write went to a read-only path.
    ReadOnlyPath,
    /// The program tried to reach the network (`network none`).
    Network,
}

/// How we know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Certainty {
    /// Read from the kernel's counters for this container.
    Observed,
    /// Inferred from the run's output only.
    Likely,
}

/// One limit a run met, with how we know and what the author and solver can do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Hit {
    /// Which limit.
    pub kind: HitKind,
    /// Observed or only likely.
    pub certainty: Certainty,
    /// One sentence for the explanation.
    pub message: String,
}

impl HitKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PidsLimit => "pids_limit",
            Self::TmpfsFull => "tmpfs_full",
            Self::ReadOnlyPath => "read_only_path",
            Self::Network => "network",
        }
    }
}

/// The limits a run met, from what the poll observed and, failing that, from the output's
/// words. `pids_limit` and `tmpfs_bytes` are the manifest's values, for the message.
pub fn hits(observed: &Observed, output: &str, pids_limit: u64, tmpfs_bytes: u64) -> Vec<Hit> {
    let author = AUTHOR_SETS_IT;
    // Why a counter did not show it: the poll ran but missed it, or nothing was polled (no
    // access to the container's /proc entry, or an evidence record, which keeps no counters).
    let unseen = if observed.watched {
        "the run ended between two reads of the kernel's counters"
    } else {
        "the kernel's counters were not read for this run"
    };
    let mut hits = Vec::new();
    let words = |patterns: &[&'static str]| patterns.iter().copied().find(|p| output.contains(p));

    let pids_line = format!(
        "pids_limit = {pids_limit} in the runner manifest (processes and threads together); \
         {author}; the solver can start fewer processes or threads (a smaller worker pool)"
    );
    if let Some(refused) = observed.pids_refused.filter(|n| *n > 0) {
        hits.push(Hit {
            kind: HitKind::PidsLimit,
            certainty: Certainty::Observed,
            message: format!(
                "hit: the process limit refused {refused} fork(s) (cgroup pids.events): \
                 {pids_line}"
            ),
        });
    } else if let Some(said) = words(&[
        "can't fork",
        "Cannot fork",
        "fork: Resource temporarily unavailable",
        "fork: retry",
        "can't start new thread",
        "BlockingIOError: [Errno 11]",
        "EAGAIN",
    ]) {
        hits.push(Hit {
            kind: HitKind::PidsLimit,
            certainty: Certainty::Likely,
            message: format!(
                "likely hit: the output says {said:?}, which is what a refused fork looks like \
                 ({unseen}): {pids_line}"
            ),
        });
    }

    let tmpfs_line = format!(
        "tmpfs_bytes = {tmpfs_bytes} in the runner manifest (the size of /tmp and of \
         /tmp/home, each; what is written there also counts against memory_bytes); {author}; \
         the solver can write less to /tmp"
    );
    if !observed.tmpfs_full.is_empty() {
        hits.push(Hit {
            kind: HitKind::TmpfsFull,
            certainty: Certainty::Observed,
            message: format!(
                "hit: {} had no free space left (statfs): {tmpfs_line}",
                observed.tmpfs_full.join(" and ")
            ),
        });
    } else if let Some(said) = words(&["No space left on device", "ENOSPC", "[Errno 28]"]) {
        hits.push(Hit {
            kind: HitKind::TmpfsFull,
            certainty: Certainty::Likely,
            message: format!(
                "likely hit: the output says {said:?}; the writable places are the /tmp and \
                 /tmp/home tmpfs ({unseen}): {tmpfs_line}"
            ),
        });
    }

    if let Some(said) = words(&["Read-only file system", "EROFS", "[Errno 30]"]) {
        hits.push(Hit {
            kind: HitKind::ReadOnlyPath,
            certainty: Certainty::Likely,
            message: format!(
                "likely hit: the output says {said:?}: the root filesystem, /workspace and \
                 /benchmark are read-only in every run (not a manifest field; no counter \
                 records such a write, so this is read from the output); only /tmp and \
                 /tmp/home are writable, and HOME is /tmp/home: the solver can write there"
            ),
        });
    }

    let network_line = "the sandbox has no network (network none; not a manifest field, no \
                        bounty can change it): the benchmark and solution must not need one";
    if let Some(packets) = observed.no_route.filter(|n| *n > 0) {
        hits.push(Hit {
            kind: HitKind::Network,
            certainty: Certainty::Observed,
            message: format!(
                "hit: the program tried to reach the network: {packets} packet(s) had no route \
                 (the namespace's OutNoRoutes counter): {network_line}"
            ),
        });
    } else if let Some(said) = words(&[
        "Network is unreachable",
        "ENETUNREACH",
        "Temporary failure in name resolution",
        "Name or service not known",
        "getaddrinfo EAI_AGAIN",
        "[Errno -3]",
    ]) {
        hits.push(Hit {
            kind: HitKind::Network,
            certainty: Certainty::Likely,
            message: format!(
                "likely hit: the output says {said:?}, which is what a network attempt looks \
                 like here ({unseen}): {network_line}"
            ),
        });
    }
    hits
}

/// Polls one container's kernel counters until stopped.
#[derive(Debug)]
pub struct Watch {
    task: tokio::task::JoinHandle<()>,
    seen: Arc<Mutex<Observed>>,
}

impl Watch {
    /// Starts polling container `id`; `main_pid` looks its main process up from the engine
    /// first (inside the polling task, so starting never waits for the engine).
    pub fn start<F>(main_pid: F, id: String) -> Self
    where
        F: std::future::Future<Output = Option<i64>> + Send + 'static,
    {
        let seen = Arc::new(Mutex::new(Observed::default()));
        let into = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            let pid = main_pid.await.filter(|p| *p > 0);
            let Some(pid) = pid else { return };
            let proc = PathBuf::from(format!("/proc/{pid}"));
            let pids_dir = pids_cgroup_dir(&proc);
            let mut interval = tokio::time::interval(POLL_EVERY);
            loop {
                interval.tick().await;
                // The pid may be reused once the container is gone: read only while the
                // process is still in this container's cgroup.
                let ours = std::fs::read_to_string(proc.join("cgroup"))
                    .is_ok_and(|text| text.contains(&id));
                if !ours {
                    break;
                }
                let sample = read_once(&proc, pids_dir.as_deref());
                if let Ok(mut seen) = into.lock() {
                    merge(&mut seen, sample);
                }
            }
        });
        Self { task, seen }
    }

    /// Stops polling and returns what was seen.
    pub fn stop(self) -> Observed {
        self.task.abort();
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

fn merge(seen: &mut Observed, sample: Observed) {
    seen.watched |= sample.watched;
    let max = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    seen.pids_refused = max(seen.pids_refused, sample.pids_refused);
    seen.pids_peak = max(seen.pids_peak, sample.pids_peak);
    seen.no_route = max(seen.no_route, sample.no_route);
    for mount in sample.tmpfs_full {
        if !seen.tmpfs_full.contains(&mount) {
            seen.tmpfs_full.push(mount);
        }
    }
}

/// One reading of every counter that can be read.
fn read_once(proc: &Path, pids_dir: Option<&Path>) -> Observed {
    let mut sample = Observed::default();
    if let Some(dir) = pids_dir {
        if let Ok(events) = std::fs::read_to_string(dir.join("pids.events")) {
            sample.pids_refused = parse_pids_events(&events);
            sample.watched = true;
        }
        sample.pids_peak = std::fs::read_to_string(dir.join("pids.peak"))
            .ok()
            .and_then(|s| s.trim().parse().ok());
    }
    for mount in ["/tmp", "/tmp/home"] {
        let path = proc.join("root").join(mount.trim_start_matches('/'));
        if let Ok(fs) = rustix::fs::statfs(&path) {
            sample.watched = true;
            if fs.f_blocks > 0 && fs.f_bfree == 0 {
                sample.tmpfs_full.push(mount.to_owned());
            }
        }
    }
    let v4 = std::fs::read_to_string(proc.join("net/snmp"))
        .ok()
        .and_then(|s| snmp_counter(&s, "Ip:", "OutNoRoutes"));
    let v6 = std::fs::read_to_string(proc.join("net/snmp6"))
        .ok()
        .and_then(|s| snmp6_counter(&s, "Ip6OutNoRoutes"));
    if v4.is_some() || v6.is_some() {
        sample.watched = true;
        sample.no_route = Some(v4.unwrap_or(0).saturating_add(v6.unwrap_or(0)));
    }
    sample
}

/// The pids cgroup directory of a process, as this process sees the cgroup filesystem: the
/// `pids` line of `/proc/<pid>/cgroup` (v1) or the unified `0::` line (v2).
fn pids_cgroup_dir(proc: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(proc.join("cgroup")).ok()?;
    let (v1, v2) = cgroup_paths(&text);
    let candidates = [
        v1.map(|p| Path::new("/sys/fs/cgroup/pids").join(p.trim_start_matches('/'))),
        v2.clone()
            .map(|p| Path::new("/sys/fs/cgroup").join(p.trim_start_matches('/'))),
        v2.map(|p| Path::new("/sys/fs/cgroup/unified").join(p.trim_start_matches('/'))),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|dir| dir.join("pids.events").exists())
}

/// The v1 `pids` controller's path and the v2 unified path in a `/proc/<pid>/cgroup` text.
fn cgroup_paths(text: &str) -> (Option<String>, Option<String>) {
    let mut v1 = None;
    let mut v2 = None;
    for (controllers, path) in cgroup_entries(text) {
        if controllers.is_empty() {
            v2 = Some(path.to_owned());
        } else if controllers.split(',').any(|c| c == "pids") {
            v1 = Some(path.to_owned());
        }
    }
    (v1, v2)
}

/// The `(controllers, path)` of each line of a `/proc/<pid>/cgroup` file (`id:controllers:path`;
/// the unified hierarchy's line has no controllers). Lines of another shape are skipped.
pub(crate) fn cgroup_entries(text: &str) -> impl Iterator<Item = (&str, &str)> {
    text.lines().filter_map(|line| {
        let mut parts = line.splitn(3, ':');
        parts.next()?;
        Some((parts.next()?, parts.next()?))
    })
}

/// The `max` counter of a `pids.events` file (`max 3`).
fn parse_pids_events(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("max "))
        .and_then(|n| n.trim().parse().ok())
}

/// A counter of `/proc/net/snmp`: a header line and a value line share a prefix (`Ip:`).
fn snmp_counter(text: &str, prefix: &str, name: &str) -> Option<u64> {
    let mut lines = text.lines().filter(|l| l.starts_with(prefix));
    let header = lines.next()?;
    let values = lines.next()?;
    let index = header.split_whitespace().position(|h| h == name)?;
    values.split_whitespace().nth(index)?.parse().ok()
}

/// A counter of `/proc/net/snmp6`: one `Name value` pair per line.
fn snmp6_counter(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next() == Some(name))
            .then(|| words.next()?.parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_files_are_parsed() {
        assert_eq!(parse_pids_events("max 3\n"), Some(3));
        assert_eq!(parse_pids_events(""), None);
        let v1 = "9:name=systemd:/docker/abc\n8:pids:/docker/abc\n0::/docker/abc\n";
        assert_eq!(
            cgroup_paths(v1),
            (Some("/docker/abc".into()), Some("/docker/abc".into()))
        );
        assert_eq!(
            cgroup_paths("0::/system.slice/docker-abc.scope\n"),
            (None, Some("/system.slice/docker-abc.scope".into()))
        );
        let snmp = "Ip: Forwarding DefaultTTL InReceives OutNoRoutes\nIp: 1 64 0 4\n\
                    Icmp: InMsgs\nIcmp: 0\n";
        assert_eq!(snmp_counter(snmp, "Ip:", "OutNoRoutes"), Some(4));
        assert_eq!(
            snmp6_counter("Ip6InReceives 1\nIp6OutNoRoutes 2\n", "Ip6OutNoRoutes"),
            Some(2)
        );
    }

    #[test]
    fn observed_counters_win_and_words_alone_are_only_likely() {
        let seen = Observed {
            pids_refused: Some(2),
            tmpfs_full: vec!["/tmp".into()],
            no_route: Some(1),
            watched: true,
            ..Observed::default()
        };
        let found = hits(&seen, "", 16, 1 << 20);
        let kinds: Vec<_> = found.iter().map(|h| (h.kind, h.certainty)).collect();
        assert_eq!(
            kinds,
            [
                (HitKind::PidsLimit, Certainty::Observed),
                (HitKind::TmpfsFull, Certainty::Observed),
                (HitKind::Network, Certainty::Observed),
            ]
        );
        assert!(found[0].message.contains("pids_limit = 16"), "{found:?}");
        let words = "sh: can't fork\nOSError: [Errno 30] Read-only file system: '/workspace/x'\n";
        let found = hits(&Observed::default(), words, 16, 1 << 20);
        assert!(
            found
                .iter()
                .all(|h| h.certainty == Certainty::Likely && h.message.starts_with("likely")),
            "{found:?}"
        );
        assert_eq!(found.len(), 2);
        assert!(
            found[0]
                .message
                .contains("(the kernel's counters were not read for this run)"),
            "{found:?}"
        );
        let watched = Observed {
            watched: true,
            ..Observed::default()
        };
        assert!(
            hits(&watched, words, 16, 1)[0]
                .message
                .contains("(the run ended between two reads of the kernel's counters)")
        );
        assert!(hits(&Observed::default(), "all 3 tests passed", 16, 1).is_empty());
    }
}
