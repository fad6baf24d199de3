//! This host's own facts, read from `/proc`, `/sys` and the staging root: what the engine
//! cannot tell. Parsing is separate from reading so the parsers are tested on the texts of the
//! hosts the worker is meant for.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// How the cgroup hierarchies are mounted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CgroupLayout {
    /// cgroup2 at `/sys/fs/cgroup`.
    V2,
    /// Only v1 controllers.
    V1,
    /// v1 controllers plus a cgroup2 mount (systemd's "hybrid" layout).
    Hybrid,
    /// No cgroup mount found.
    Unknown,
}

/// The staging root's file system.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StagingFs {
    /// File-system type by name (`ext4`, `xfs`, `tmpfs`, …, or `0x…` when unknown).
    pub fs_type: String,
    /// Bytes an unprivileged writer may still use.
    pub free_bytes: u64,
}

/// The staging root and what was found there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StagingFacts {
    /// The path asked about.
    pub path: PathBuf,
    /// Its file system, or why it could not be examined.
    pub facts: Result<StagingFs, String>,
}

/// Everything [`gather`] reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HostFacts {
    /// The cgroup layout.
    pub cgroup: CgroupLayout,
    /// `SwapTotal` in bytes; `None` when unreadable.
    pub swap_total_bytes: Option<u64>,
    /// AppArmor's module parameter; `None` when the module is absent.
    pub apparmor_enabled: Option<bool>,
    /// The staging root, when one was given.
    pub staging: Option<StagingFacts>,
    /// The sandbox uid range on this host, when the caller looked (`worker doctor` does).
    pub sandbox_uids: Option<SandboxUidFacts>,
}

/// Each sandbox's own host uid (issue #41): the range, how many of its uids the host's account
/// files claim, and whether a lease could be taken (and given back) right now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SandboxUidFacts {
    /// The range's first uid.
    pub first: u32,
    /// How many uids it holds.
    pub count: u32,
    /// How many of them a host account, group or subordinate range claims.
    pub claimed: usize,
    /// Where the leases are taken.
    pub lock_dir: PathBuf,
    /// The uid a trial lease got, or why none could be taken.
    pub lease: Result<u32, String>,
}

/// The layout the mount table `mounts` (the text of `/proc/mounts`) shows.
pub fn cgroup_layout(mounts: &str) -> CgroupLayout {
    let mut v1 = false;
    let mut v2_root = false;
    let mut v2_elsewhere = false;
    for line in mounts.lines() {
        let mut fields = line.split_whitespace();
        let (Some(_), Some(target), Some(fstype)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        match fstype {
            "cgroup2" if target == "/sys/fs/cgroup" => v2_root = true,
            "cgroup2" => v2_elsewhere = true,
            "cgroup" => v1 = true,
            _ => {}
        }
    }
    match (v2_root, v1, v2_elsewhere) {
        (true, _, _) => CgroupLayout::V2,
        (false, true, true) => CgroupLayout::Hybrid,
        (false, true, false) => CgroupLayout::V1,
        (false, false, _) => CgroupLayout::Unknown,
    }
}

/// `SwapTotal` of the text of `/proc/meminfo`, in bytes.
pub fn swap_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("SwapTotal:"))?;
    let mut parts = line.split_whitespace().skip(1);
    let value: u64 = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") => value.checked_mul(1024),
        None => Some(value),
        Some(_) => None,
    }
}

/// The name of a `statfs` magic number.
pub fn fs_name(magic: u64) -> String {
    match magic {
        0xEF53 => "ext4".into(),
        0x5846_5342 => "xfs".into(),
        0x9123_683E => "btrfs".into(),
        0x2FC1_2FC1 => "zfs".into(),
        0x0102_1994 => "tmpfs".into(),
        0x8584_58F6 => "ramfs".into(),
        0x794C_7630 => "overlay".into(),
        0x6969 => "nfs".into(),
        0xFF53_4D42 => "cifs".into(),
        0x6573_5546 => "fuse".into(),
        other => format!("{other:#x}"),
    }
}

/// The staging root's file system and free space.
pub fn staging_facts(path: &Path) -> StagingFacts {
    let facts = (|| {
        let meta = std::fs::metadata(path).map_err(|e| format!("cannot be read: {e}"))?;
        if !meta.is_dir() {
            return Err("is not a directory".to_string());
        }
        let fs = rustix::fs::statfs(path).map_err(|e| format!("statfs failed: {e}"))?;
        let vfs = rustix::fs::statvfs(path).map_err(|e| format!("statvfs failed: {e}"))?;
        // f_type is a signed word whose magic numbers fit in 32 bits; read it as such.
        #[allow(clippy::cast_sign_loss, clippy::unnecessary_cast)]
        let magic = (fs.f_type as i64 as u64) & 0xFFFF_FFFF;
        Ok(StagingFs {
            fs_type: fs_name(magic),
            free_bytes: vfs.f_bavail.saturating_mul(vfs.f_frsize),
        })
    })();
    StagingFacts {
        path: path.to_path_buf(),
        facts,
    }
}

/// Reads this host's facts: `/proc/mounts`, `/proc/meminfo`, AppArmor's module parameter and,
/// when given, the staging root.
pub fn gather(staging: Option<&Path>) -> HostFacts {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let apparmor = std::fs::read_to_string("/sys/module/apparmor/parameters/enabled")
        .ok()
        .map(|t| t.trim() == "Y");
    HostFacts {
        cgroup: cgroup_layout(&mounts),
        swap_total_bytes: swap_total(&meminfo),
        apparmor_enabled: apparmor,
        staging: staging.map(staging_facts),
        sandbox_uids: None,
    }
}
