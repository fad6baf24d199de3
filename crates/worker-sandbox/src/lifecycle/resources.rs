//! The run's resources (peak memory, CPU time) read from the container's own cgroup files
//! while it runs, and its main process found there, so neither costs the engine anything.
//!
//! The engine's stats stream reads the same counters (`memory.max_usage_in_bytes` and
//! `cpuacct.usage` on cgroup v1, `memory.peak`/`memory.current` and `cpu.stat` on v2) once a
//! second, and keeps a collector busy in the daemon for each container; the main process is
//! otherwise an inspect. Read here every [`hits::POLL_EVERY`], beside the limit watch, from
//! the cgroup `/proc/<pid>/cgroup` names while the process is still in this container's cgroup.
//! Where they cannot be read (the engine on another host or in another pid namespace, no
//! rights), the main process is asked of the engine and the resources come from the stats
//! stream, as before.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::engine::{CgroupLayout, ContainerEngine};
use crate::evidence::ResourceFacts;
use crate::hits;

/// Where this host's cgroup hierarchies are mounted.
pub(super) const CGROUP_ROOT: &str = "/sys/fs/cgroup";
/// This process's view of the processes.
pub(super) const PROC_ROOT: &str = "/proc";

/// The container's main process (pid 1 in its pid namespace) as this process sees it: from
/// the container's `cgroup.procs` under `cgroup_root`, where the engine's `layout` puts it,
/// when that holds it, none when the cgroup shows the container already stopped, else
/// `inspect`'s.
pub(super) async fn main_pid(
    engine: impl ContainerEngine,
    cgroup_root: PathBuf,
    proc_root: PathBuf,
    id: String,
    layout: CgroupLayout,
) -> Option<i64> {
    match init_in_cgroup(&cgroup_root, &proc_root, &id, &layout) {
        InCgroup::Init(pid) => Some(pid),
        InCgroup::Stopped => None,
        InCgroup::Unknown => engine.inspect_container(&id).await.ok()?.state.pid,
    }
}

/// What this host's cgroup files say of a container's main process.
#[derive(Debug, PartialEq, Eq)]
enum InCgroup {
    /// Its pid.
    Init(i64),
    /// The container has no process left: it stopped before it was looked for (a command of
    /// a few milliseconds). The engine would answer with a pid of a process already gone, or
    /// none, and no counter is left to read.
    Stopped,
    /// Nothing here to go by (another host's engine, another driver or runtime, no rights).
    Unknown,
}

/// The process of the container `id`'s cgroup that is pid 1 in its own pid namespace.
fn init_in_cgroup(
    cgroup_root: &Path,
    proc_root: &Path,
    id: &str,
    layout: &CgroupLayout,
) -> InCgroup {
    // A container id is hex; anything else would make a path of its own.
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return InCgroup::Unknown;
    }
    for dir in &layout.procs_dirs {
        let procs = cgroup_root
            .join(dir.replace("{id}", id))
            .join("cgroup.procs");
        let Ok(text) = std::fs::read_to_string(procs) else {
            continue;
        };
        let pids: Vec<i64> = text
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect();
        if pids.is_empty() {
            return InCgroup::Stopped;
        }
        // Under a runtime whose processes are not the container's own (gVisor's sandbox), no
        // member is a namespace's init: the engine says which process is the main one. Nor is
        // a choice made between two (a namespace made inside the container has its own pid 1).
        let mut inits = pids.into_iter().filter(|pid| {
            std::fs::read_to_string(proc_root.join(pid.to_string()).join("status"))
                .is_ok_and(|status| is_namespace_init(&status))
        });
        return match (inits.next(), inits.next()) {
            (Some(pid), None) => InCgroup::Init(pid),
            _ => InCgroup::Unknown,
        };
    }
    // Where the engine puts every container's cgroup (the Docker Engine's `docker/` under its
    // cgroupfs driver): a created and started container without one there has stopped and
    // been cleaned up.
    let engine_parent = layout
        .parents
        .iter()
        .any(|parent| cgroup_root.join(parent).is_dir());
    if engine_parent {
        InCgroup::Stopped
    } else {
        InCgroup::Unknown
    }
}

/// Whether a `/proc/<pid>/status` text is of the first process of its innermost pid namespace
/// (its `NSpid` line ends in 1) other than this host's own init.
fn is_namespace_init(status: &str) -> bool {
    status
        .lines()
        .find_map(|line| line.strip_prefix("NSpid:"))
        .is_some_and(|pids| {
            let pids: Vec<&str> = pids.split_whitespace().collect();
            pids.len() > 1 && pids.last() == Some(&"1")
        })
}

/// The files one container's resources are read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Files {
    /// The highest usage so far (`memory.max_usage_in_bytes`, `memory.peak`), or else the
    /// current usage (`memory.current`, its highest reading kept).
    memory: Option<(PathBuf, Memory)>,
    /// The CPU time used.
    cpu: Option<(PathBuf, Cpu)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Memory {
    Peak,
    Current,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cpu {
    /// v1 `cpuacct.usage`: nanoseconds.
    Usage,
    /// v2 `cpu.stat`: its `usage_usec` line.
    Stat,
}

/// The resource files of a process whose `/proc/<pid>/cgroup` is `text`, under the cgroup
/// mount `root`; `exists` says whether a file is there. A v1 controller wins over the unified
/// hierarchy (on a hybrid host the controllers are v1's).
pub(super) fn files(text: &str, root: &Path, exists: impl Fn(&Path) -> bool) -> Files {
    let mut v1_memory = None;
    let mut v1_cpu = None;
    let mut unified = None;
    for (controllers, path) in crate::hits::cgroup_entries(text) {
        let dir = |mount: &str| root.join(mount).join(path.trim_start_matches('/'));
        if controllers.is_empty() {
            unified = Some(dir(""));
        } else if controllers.split(',').any(|c| c == "memory") {
            v1_memory = Some(dir(controllers));
        }
        if controllers.split(',').any(|c| c == "cpuacct") {
            v1_cpu = Some(dir(controllers));
        }
    }
    let first =
        |candidates: Vec<Option<PathBuf>>| candidates.into_iter().flatten().find(|p| exists(p));
    let memory = first(vec![
        v1_memory
            .as_ref()
            .map(|d| d.join("memory.max_usage_in_bytes")),
        unified.as_ref().map(|d| d.join("memory.peak")),
    ])
    .map(|p| (p, Memory::Peak))
    .or_else(|| {
        first(vec![unified.as_ref().map(|d| d.join("memory.current"))])
            .map(|p| (p, Memory::Current))
    });
    let cpu = first(vec![v1_cpu.map(|d| d.join("cpuacct.usage"))])
        .map(|p| (p, Cpu::Usage))
        .or_else(|| first(vec![unified.map(|d| d.join("cpu.stat"))]).map(|p| (p, Cpu::Stat)));
    Files { memory, cpu }
}

impl Files {
    fn any(&self) -> bool {
        self.memory.is_some() || self.cpu.is_some()
    }

    /// One reading, folded into `facts`; whether anything could be read.
    fn read_into(&self, facts: &mut ResourceFacts) -> bool {
        let mut read = false;
        if let Some((path, _)) = &self.memory
            && let Some(bytes) = read_u64(path)
        {
            read = true;
            if bytes > 0 {
                facts.peak_memory_bytes = Some(facts.peak_memory_bytes.unwrap_or(0).max(bytes));
            }
        }
        if let Some((path, kind)) = &self.cpu {
            let ns = match kind {
                Cpu::Usage => read_u64(path),
                Cpu::Stat => std::fs::read_to_string(path)
                    .ok()
                    .and_then(|text| usage_usec(&text))
                    .map(|us| us.saturating_mul(1000)),
            };
            if let Some(ns) = ns {
                read = true;
                if ns > 0 {
                    facts.cpu_time_ns = Some(facts.cpu_time_ns.unwrap_or(0).max(ns));
                }
            }
        }
        read
    }
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The `usage_usec` of a v2 `cpu.stat`.
fn usage_usec(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("usage_usec "))
        .and_then(|n| n.trim().parse().ok())
}

/// Reads container `id`'s resources into `into` until it stops: from its cgroup files while
/// its main process `pid` is in its cgroup, or from the engine's stats stream when those
/// cannot be read.
pub(super) async fn watch<F>(
    engine: impl ContainerEngine,
    pid: F,
    cgroup_root: PathBuf,
    proc_root: PathBuf,
    id: String,
    into: Arc<Mutex<ResourceFacts>>,
) where
    F: std::future::Future<Output = Option<i64>>,
{
    // No main process: the container stopped before it was looked for, and a stopped
    // container's stats are zeros, so there is nothing to read from the engine either.
    let Some(pid) = pid.await.filter(|p| *p > 0) else {
        return;
    };
    let proc = proc_root.join(pid.to_string());
    let ours = |proc: &Path| {
        std::fs::read_to_string(proc.join("cgroup")).is_ok_and(|text| text.contains(&id))
    };
    // Only a process in this container's cgroup names the container's files (a pid from
    // another host's engine may be any process here).
    let located = ours(&proc)
        .then(|| std::fs::read_to_string(proc.join("cgroup")).ok())
        .flatten()
        .map(|text| files(&text, &cgroup_root, Path::exists))
        .filter(Files::any);
    let Some(files) = located else {
        super::calls::sample_stats(engine, id, into).await;
        return;
    };
    let mut interval = tokio::time::interval(hits::POLL_EVERY);
    loop {
        interval.tick().await;
        // The pid may be reused once the container is gone: read only while the process is
        // still in this container's cgroup, then keep what was read last.
        if !ours(&proc) {
            break;
        }
        let Ok(mut facts) = into.lock() else { break };
        files.read_into(&mut facts);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const ID: &str = "0123abcd";

    /// An engine's layout as an adapter supplies it: here one that names its containers'
    /// cgroups `pids/engine/<id>`, and proves a stop by an absence there only when `parents`.
    fn layout(parents: bool) -> CgroupLayout {
        CgroupLayout {
            procs_dirs: vec![
                "pids/engine/{id}".into(),
                "engine.slice/e-{id}.scope".into(),
            ],
            parents: if parents {
                vec!["pids/engine".into()]
            } else {
                Vec::new()
            },
        }
    }

    #[test]
    fn v1_controllers_win_over_the_unified_hierarchy_on_a_hybrid_host() {
        let text = "9:name=systemd:/docker/0123abcd\n4:memory:/docker/0123abcd\n\
                    2:cpuacct:/docker/0123abcd\n1:cpu:/docker/0123abcd\n0::/docker/0123abcd\n";
        let root = Path::new("/sys/fs/cgroup");
        let found = files(text, root, |_| true);
        assert_eq!(
            found.memory,
            Some((
                root.join("memory/docker/0123abcd/memory.max_usage_in_bytes"),
                Memory::Peak
            ))
        );
        assert_eq!(
            found.cpu,
            Some((
                root.join("cpuacct/docker/0123abcd/cpuacct.usage"),
                Cpu::Usage
            ))
        );
        // A combined `cpu,cpuacct` hierarchy is mounted under its own name.
        let combined = files("3:cpu,cpuacct:/docker/x\n", root, |_| true);
        assert_eq!(
            combined.cpu,
            Some((root.join("cpu,cpuacct/docker/x/cpuacct.usage"), Cpu::Usage))
        );
    }

    #[test]
    fn v2_reads_the_peak_where_the_kernel_keeps_one_else_the_current_usage() {
        let root = Path::new("/sys/fs/cgroup");
        let text = "0::/system.slice/docker-0123abcd.scope\n";
        let dir = root.join("system.slice/docker-0123abcd.scope");
        let all = files(text, root, |_| true);
        assert_eq!(all.memory, Some((dir.join("memory.peak"), Memory::Peak)));
        assert_eq!(all.cpu, Some((dir.join("cpu.stat"), Cpu::Stat)));
        let old_kernel = files(text, root, |p| !p.ends_with("memory.peak"));
        assert_eq!(
            old_kernel.memory,
            Some((dir.join("memory.current"), Memory::Current))
        );
        assert!(
            !files(text, root, |_| false).any(),
            "nothing readable: the stats stream"
        );
    }

    #[test]
    fn readings_keep_the_highest_memory_and_the_latest_cpu_time() {
        let dir = tempfile::tempdir().unwrap();
        let memory = dir.path().join("memory.max_usage_in_bytes");
        let cpu = dir.path().join("cpu.stat");
        let files = Files {
            memory: Some((memory.clone(), Memory::Current)),
            cpu: Some((cpu.clone(), Cpu::Stat)),
        };
        let mut facts = ResourceFacts::default();
        assert!(!files.read_into(&mut facts), "no file yet");
        assert_eq!(facts, ResourceFacts::default());
        std::fs::write(&memory, "4096\n").unwrap();
        std::fs::write(&cpu, "usage_usec 250\nuser_usec 200\nsystem_usec 50\n").unwrap();
        assert!(files.read_into(&mut facts));
        std::fs::write(&memory, "1024\n").unwrap();
        std::fs::write(&cpu, "usage_usec 900\n").unwrap();
        assert!(files.read_into(&mut facts));
        assert_eq!(
            facts,
            ResourceFacts {
                peak_memory_bytes: Some(4096),
                cpu_time_ns: Some(900_000),
            }
        );
    }

    #[test]
    fn a_nested_namespace_init_listed_first_is_never_taken_for_the_main_process() {
        // A test that could make a pid namespace of its own would have a second member that is
        // pid 1 of its namespace; listed first, it must not stand in for the container's init
        // (the watches would read its /proc): two candidates hand the choice to the engine.
        let cgroups = tempfile::tempdir().unwrap();
        let proc = tempfile::tempdir().unwrap();
        let dir = cgroups.path().join(format!("pids/engine/{ID}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cgroup.procs"), "4250\n4241\n").unwrap();
        for (pid, nspid) in [(4250, "4250\t9\t1"), (4241, "4241\t1")] {
            let p = proc.path().join(pid.to_string());
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("status"), format!("Name:\tx\nNSpid:\t{nspid}\n")).unwrap();
        }
        assert_eq!(
            init_in_cgroup(cgroups.path(), proc.path(), ID, &layout(true)),
            InCgroup::Unknown
        );
    }

    #[test]
    fn the_main_process_is_the_cgroup_member_that_is_pid_1_of_its_namespace() {
        let cgroups = tempfile::tempdir().unwrap();
        let proc = tempfile::tempdir().unwrap();
        let dir = cgroups.path().join(format!("pids/engine/{ID}"));
        std::fs::create_dir_all(&dir).unwrap();
        // A child (pid 2 inside) listed before the init, as cgroup.procs is not sorted.
        std::fs::write(dir.join("cgroup.procs"), "4242\n4241\n").unwrap();
        for (pid, nspid) in [(4242, "4242\t2"), (4241, "4241\t1")] {
            let p = proc.path().join(pid.to_string());
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("status"), format!("Name:\tx\nNSpid:\t{nspid}\n")).unwrap();
        }
        let lookup =
            |id: &str, parents| init_in_cgroup(cgroups.path(), proc.path(), id, &layout(parents));
        assert_eq!(lookup(ID, true), InCgroup::Init(4241));
        // The host's own init (one namespace level) and an id that is not hex are never taken.
        assert!(!is_namespace_init("NSpid:\t1\n"));
        assert_eq!(lookup("../../x", true), InCgroup::Unknown);
        // No member is a namespace's init (gVisor's sandbox processes): the engine is asked.
        std::fs::write(dir.join("cgroup.procs"), "4242\n").unwrap();
        assert_eq!(lookup(ID, true), InCgroup::Unknown);
        // No process left, or no cgroup at all under the engine's parent: it stopped.
        std::fs::write(dir.join("cgroup.procs"), "").unwrap();
        assert_eq!(lookup(ID, true), InCgroup::Stopped);
        assert_eq!(lookup("ffff", true), InCgroup::Stopped);
        // Where the engine's layout names no parent (another driver) an absent cgroup says
        // nothing: the engine is asked.
        assert_eq!(lookup("ffff", false), InCgroup::Unknown);
        std::fs::remove_dir_all(cgroups.path().join("pids")).unwrap();
        assert_eq!(lookup("ffff", true), InCgroup::Unknown);
    }

    #[test]
    fn the_main_process_is_found_where_the_engine_s_own_layout_puts_its_cgroup() {
        // Another engine's scope (the layout's second place), not a Docker path: the
        // lifecycle looks where the engine says, and an empty layout never finds anything.
        let cgroups = tempfile::tempdir().unwrap();
        let proc = tempfile::tempdir().unwrap();
        let dir = cgroups.path().join(format!("engine.slice/e-{ID}.scope"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cgroup.procs"), "4241\n").unwrap();
        let p = proc.path().join("4241");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("status"), "Name:\tx\nNSpid:\t4241\t1\n").unwrap();
        assert_eq!(
            init_in_cgroup(cgroups.path(), proc.path(), ID, &layout(false)),
            InCgroup::Init(4241)
        );
        assert_eq!(
            init_in_cgroup(cgroups.path(), proc.path(), ID, &CgroupLayout::default()),
            InCgroup::Unknown
        );
    }
}
