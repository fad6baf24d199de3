//! The container profile (DESIGN §4): what we ask the engine for, and the same fields read back
//! from `inspect` so a difference fails closed.
//!
//! `HOME=/tmp/home` must be writable, but `/tmp` is an empty tmpfs and nothing extra may run in
//! the container to create the directory. So `/tmp/home` is its own tmpfs, mounted over `/tmp`
//! (the engine orders mounts by depth) and owned by the sandbox user through the kernel's
//! `uid=`/`gid=` tmpfs options, `mode=0700`. It has the same size cap as `/tmp`; both are
//! charged to the container's memory cgroup, so `memory_bytes` bounds them together.

use std::collections::BTreeMap;

use bollard::models::{
    ContainerCreateBody, ContainerInspectResponse, HostConfig, HostConfigLogConfig, Mount,
    MountType, ResourcesUlimits,
};
use serde::{Deserialize, Serialize};

use super::SandboxSpec;

/// The unprivileged user and group every command runs as.
pub const SANDBOX_USER: &str = "65532:65532";
/// Fixed hostname so output cannot depend on the container id.
pub const SANDBOX_HOSTNAME: &str = "sandbox";
/// Working directory: the read-only source tree.
pub const WORKDIR: &str = "/workspace";
/// Mount point of the read-only benchmark tree.
pub const BENCHMARK_DIR: &str = "/benchmark";
/// `HOME` inside the container.
pub const HOME_DIR: &str = "/tmp/home";
/// Size of the private `/dev/shm`.
pub const SHM_BYTES: i64 = 64 * 1024 * 1024;
/// Open-file limit (soft = hard).
pub const NOFILE_LIMIT: i64 = 4096;

/// One `ulimit` entry.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Ulimit {
    /// Resource name (`nofile`, `core`).
    pub name: String,
    /// Soft limit.
    pub soft: i64,
    /// Hard limit.
    pub hard: i64,
}

/// A bind mount as the engine reports it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BindMount {
    /// Host path.
    pub source: String,
    /// Path inside the container.
    pub target: String,
    /// Whether the mount is read-only.
    pub read_only: bool,
}

/// Every isolation field we set, in a form that can be compared and recorded.
///
/// The same type holds what was requested and what `inspect` reported; the executor refuses to
/// start the container unless they are equal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Isolation {
    /// `Config.Entrypoint`: the argv.
    pub entrypoint: Vec<String>,
    /// `Config.Cmd`: always empty so the image's CMD cannot run.
    pub cmd: Vec<String>,
    /// `Config.WorkingDir`.
    pub working_dir: String,
    /// `Config.User`.
    pub user: String,
    /// `Config.Hostname`.
    pub hostname: String,
    /// `Config.Env`, sorted.
    pub env: Vec<String>,
    /// `HostConfig.Init`.
    pub init: bool,
    /// `HostConfig.Privileged`.
    pub privileged: bool,
    /// `HostConfig.NetworkMode`.
    pub network_mode: String,
    /// `HostConfig.IpcMode`.
    pub ipc_mode: String,
    /// `HostConfig.PidMode` (empty = private).
    pub pid_mode: String,
    /// `HostConfig.UsernsMode` (empty = daemon default).
    pub userns_mode: String,
    /// `HostConfig.ShmSize`.
    pub shm_size: i64,
    /// `HostConfig.ReadonlyRootfs`.
    pub readonly_rootfs: bool,
    /// `HostConfig.CapAdd`, sorted.
    pub cap_add: Vec<String>,
    /// `HostConfig.CapDrop`, sorted.
    pub cap_drop: Vec<String>,
    /// `HostConfig.SecurityOpt`, sorted.
    pub security_opt: Vec<String>,
    /// `HostConfig.NanoCpus`.
    pub nano_cpus: i64,
    /// `HostConfig.Memory`.
    pub memory: i64,
    /// `HostConfig.MemorySwap`.
    pub memory_swap: i64,
    /// `HostConfig.PidsLimit`.
    pub pids_limit: i64,
    /// `HostConfig.Ulimits`, sorted.
    pub ulimits: Vec<Ulimit>,
    /// `HostConfig.Tmpfs`.
    pub tmpfs: BTreeMap<String, String>,
    /// `HostConfig.Mounts`, sorted.
    pub mounts: Vec<BindMount>,
    /// The container's effective `Mounts`, sorted (what the runtime will actually mount).
    pub mount_points: Vec<BindMount>,
    /// `HostConfig.Binds`: always empty (mounts go through `Mounts`).
    pub binds: Vec<String>,
    /// Number of `HostConfig.Devices`: always zero.
    pub devices: usize,
    /// `HostConfig.LogConfig.Type`: `none`, so output never lands on the host's disk.
    pub log_driver: String,
}

impl Isolation {
    /// Names of the fields that differ between `self` (requested) and `observed`.
    pub fn mismatches(&self, observed: &Isolation) -> Vec<String> {
        let (Ok(serde_json::Value::Object(want)), Ok(serde_json::Value::Object(got))) =
            (serde_json::to_value(self), serde_json::to_value(observed))
        else {
            return vec!["<unserializable>".to_string()];
        };
        want.iter()
            .filter(|(key, value)| got.get(*key) != Some(*value))
            .map(|(key, _)| key.clone())
            .collect()
    }
}

fn tmpfs_options(bytes: u64, mode: &str, owner: Option<&str>) -> String {
    let mut options = format!("rw,exec,nosuid,nodev,size={bytes},mode={mode}");
    if let Some((uid, gid)) = owner.and_then(|o| o.split_once(':')) {
        options.push_str(&format!(",uid={uid},gid={gid}"));
    }
    options
}

fn sorted(mut items: Vec<String>) -> Vec<String> {
    items.sort();
    items
}

/// The exact environment: fixed variables plus the image's own `PATH`, nothing from the worker.
pub fn environment(test_seed: u64, image_path: Option<&str>) -> Vec<String> {
    let mut env = vec![
        format!("HOME={HOME_DIR}"),
        "LANG=C.UTF-8".to_string(),
        "LC_ALL=C.UTF-8".to_string(),
        "TZ=UTC".to_string(),
        "SOURCE_DATE_EPOCH=0".to_string(),
        format!("AGENT_BOUNTIES_TEST_SEED={test_seed}"),
    ];
    if let Some(path) = image_path {
        env.push(format!("PATH={path}"));
    }
    env
}

/// Numbers the engine takes as `i64`; a spec outside that range is refused, not clamped.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// `cpu_millis × 10⁶`.
    pub nano_cpus: i64,
    /// Memory and memory+swap.
    pub memory: i64,
    /// Process limit.
    pub pids: i64,
}

/// The requested profile for `spec`, with `source`/`benchmark` the canonical host paths.
pub fn requested(
    spec: &SandboxSpec,
    limits: Limits,
    image_path: Option<&str>,
    source: &str,
    benchmark: &str,
) -> Isolation {
    let mut tmpfs = BTreeMap::new();
    tmpfs.insert(
        "/tmp".to_string(),
        tmpfs_options(spec.tmpfs_bytes, "1777", None),
    );
    tmpfs.insert(
        HOME_DIR.to_string(),
        tmpfs_options(spec.tmpfs_bytes, "0700", Some(SANDBOX_USER)),
    );
    let mut mounts = vec![
        BindMount {
            source: benchmark.to_string(),
            target: BENCHMARK_DIR.to_string(),
            read_only: true,
        },
        BindMount {
            source: source.to_string(),
            target: WORKDIR.to_string(),
            read_only: true,
        },
    ];
    mounts.sort();
    let mut ulimits = vec![
        Ulimit {
            name: "core".into(),
            soft: 0,
            hard: 0,
        },
        Ulimit {
            name: "nofile".into(),
            soft: NOFILE_LIMIT,
            hard: NOFILE_LIMIT,
        },
    ];
    ulimits.sort();
    Isolation {
        entrypoint: spec.argv.clone(),
        cmd: Vec::new(),
        working_dir: WORKDIR.to_string(),
        user: SANDBOX_USER.to_string(),
        hostname: SANDBOX_HOSTNAME.to_string(),
        env: sorted(environment(spec.test_seed, image_path)),
        init: true,
        privileged: false,
        network_mode: "none".to_string(),
        ipc_mode: "private".to_string(),
        pid_mode: String::new(),
        userns_mode: String::new(),
        shm_size: SHM_BYTES,
        readonly_rootfs: true,
        cap_add: Vec::new(),
        cap_drop: vec!["ALL".to_string()],
        security_opt: vec!["no-new-privileges".to_string()],
        nano_cpus: limits.nano_cpus,
        memory: limits.memory,
        memory_swap: limits.memory,
        pids_limit: limits.pids,
        ulimits,
        tmpfs,
        mounts: mounts.clone(),
        mount_points: mounts,
        binds: Vec::new(),
        devices: 0,
        log_driver: "none".to_string(),
    }
}

/// The create request for a requested profile.
pub fn create_body(
    image: &str,
    want: &Isolation,
    env: Vec<String>,
    labels: std::collections::HashMap<String, String>,
) -> ContainerCreateBody {
    let host_config = HostConfig {
        init: Some(want.init),
        privileged: Some(false),
        network_mode: Some(want.network_mode.clone()),
        ipc_mode: Some(want.ipc_mode.clone()),
        shm_size: Some(want.shm_size),
        readonly_rootfs: Some(want.readonly_rootfs),
        cap_drop: Some(want.cap_drop.clone()),
        security_opt: Some(want.security_opt.clone()),
        nano_cpus: Some(want.nano_cpus),
        memory: Some(want.memory),
        memory_swap: Some(want.memory_swap),
        pids_limit: Some(want.pids_limit),
        ulimits: Some(
            want.ulimits
                .iter()
                .map(|u| ResourcesUlimits {
                    name: Some(u.name.clone()),
                    soft: Some(u.soft),
                    hard: Some(u.hard),
                })
                .collect(),
        ),
        tmpfs: Some(want.tmpfs.clone().into_iter().collect()),
        mounts: Some(
            want.mounts
                .iter()
                .map(|m| Mount {
                    source: Some(m.source.clone()),
                    target: Some(m.target.clone()),
                    typ: Some(MountType::BIND),
                    read_only: Some(m.read_only),
                    ..Default::default()
                })
                .collect(),
        ),
        log_config: Some(HostConfigLogConfig {
            typ: Some(want.log_driver.clone()),
            config: None,
        }),
        ..Default::default()
    };
    ContainerCreateBody {
        image: Some(image.to_string()),
        entrypoint: Some(want.entrypoint.clone()),
        // An explicit empty Cmd, so the image's CMD is not appended to our entrypoint.
        cmd: Some(Vec::new()),
        working_dir: Some(want.working_dir.clone()),
        user: Some(want.user.clone()),
        hostname: Some(want.hostname.clone()),
        env: Some(env),
        labels: Some(labels),
        attach_stdin: Some(false),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        open_stdin: Some(false),
        tty: Some(false),
        network_disabled: Some(true),
        host_config: Some(host_config),
        ..Default::default()
    }
}

/// The same fields read back from `inspect`; absent values read as empty/zero so they differ.
pub fn observed(inspect: &ContainerInspectResponse) -> Isolation {
    let config = inspect.config.clone().unwrap_or_default();
    let host = inspect.host_config.clone().unwrap_or_default();
    let mut ulimits: Vec<Ulimit> = host
        .ulimits
        .unwrap_or_default()
        .into_iter()
        .map(|u| Ulimit {
            name: u.name.unwrap_or_default(),
            soft: u.soft.unwrap_or(-1),
            hard: u.hard.unwrap_or(-1),
        })
        .collect();
    ulimits.sort();
    let mut mounts: Vec<BindMount> = host
        .mounts
        .unwrap_or_default()
        .into_iter()
        .map(|m| BindMount {
            source: m.source.unwrap_or_default(),
            target: m.target.unwrap_or_default(),
            read_only: m.read_only.unwrap_or(false) && m.typ == Some(MountType::BIND),
        })
        .collect();
    mounts.sort();
    let mut mount_points: Vec<BindMount> = inspect
        .mounts
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|m| BindMount {
            source: m.source.unwrap_or_default(),
            target: m.destination.unwrap_or_default(),
            read_only: m.rw == Some(false),
        })
        .collect();
    mount_points.sort();
    Isolation {
        entrypoint: config.entrypoint.unwrap_or_default(),
        cmd: config.cmd.unwrap_or_default(),
        working_dir: config.working_dir.unwrap_or_default(),
        user: config.user.unwrap_or_default(),
        hostname: config.hostname.unwrap_or_default(),
        env: sorted(config.env.unwrap_or_default()),
        init: host.init.unwrap_or(false),
        privileged: host.privileged.unwrap_or(true),
        network_mode: host.network_mode.unwrap_or_default(),
        ipc_mode: host.ipc_mode.unwrap_or_default(),
        pid_mode: host.pid_mode.unwrap_or_default(),
        userns_mode: host.userns_mode.unwrap_or_default(),
        shm_size: host.shm_size.unwrap_or(0),
        readonly_rootfs: host.readonly_rootfs.unwrap_or(false),
        cap_add: sorted(host.cap_add.unwrap_or_default()),
        cap_drop: sorted(host.cap_drop.unwrap_or_default()),
        security_opt: sorted(host.security_opt.unwrap_or_default()),
        nano_cpus: host.nano_cpus.unwrap_or(0),
        memory: host.memory.unwrap_or(0),
        memory_swap: host.memory_swap.unwrap_or(0),
        pids_limit: host.pids_limit.unwrap_or(0),
        ulimits,
        tmpfs: host.tmpfs.unwrap_or_default().into_iter().collect(),
        mounts,
        mount_points,
        binds: host.binds.unwrap_or_default(),
        devices: host.devices.map(|d| d.len()).unwrap_or(0),
        log_driver: host.log_config.and_then(|l| l.typ).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::time::Duration;

    fn spec() -> SandboxSpec {
        SandboxSpec {
            run_id: "r1".into(),
            image: "127.0.0.1:5000/x@sha256:00".into(),
            platform: "linux/amd64".into(),
            argv: vec!["/bin/true".into()],
            source_dir: PathBuf::from("/s"),
            benchmark_dir: PathBuf::from("/b"),
            timeout: Duration::from_secs(5),
            cpu_millis: 500,
            memory_bytes: 64 << 20,
            pids_limit: 32,
            max_output_bytes: 1 << 20,
            tmpfs_bytes: 16 << 20,
            test_seed: 7,
            pull: false,
        }
    }

    fn limits() -> Limits {
        Limits {
            nano_cpus: 500_000_000,
            memory: 64 << 20,
            pids: 32,
        }
    }

    #[test]
    fn environment_is_exactly_the_fixed_set_plus_image_path() {
        let env = environment(7, Some("/bin"));
        assert_eq!(
            env,
            [
                "HOME=/tmp/home",
                "LANG=C.UTF-8",
                "LC_ALL=C.UTF-8",
                "TZ=UTC",
                "SOURCE_DATE_EPOCH=0",
                "AGENT_BOUNTIES_TEST_SEED=7",
                "PATH=/bin"
            ]
        );
    }

    #[test]
    fn tmpfs_allows_exec_and_home_is_owned_by_the_sandbox_user() {
        let want = requested(&spec(), limits(), Some("/bin"), "/s", "/b");
        assert_eq!(
            want.tmpfs.get("/tmp").map(String::as_str),
            Some("rw,exec,nosuid,nodev,size=16777216,mode=1777")
        );
        assert_eq!(
            want.tmpfs.get("/tmp/home").map(String::as_str),
            Some("rw,exec,nosuid,nodev,size=16777216,mode=0700,uid=65532,gid=65532")
        );
    }

    #[test]
    fn a_single_differing_field_is_named() {
        let want = requested(&spec(), limits(), Some("/bin"), "/s", "/b");
        assert!(want.mismatches(&want).is_empty());
        let mut got = want.clone();
        got.readonly_rootfs = false;
        got.mount_points[0].read_only = false;
        assert_eq!(want.mismatches(&got), ["readonly_rootfs", "mount_points"]);
    }

    #[test]
    fn empty_inspect_mismatches_every_security_field() {
        let want = requested(&spec(), limits(), Some("/bin"), "/s", "/b");
        let got = observed(&ContainerInspectResponse::default());
        let diff = want.mismatches(&got);
        for field in [
            "entrypoint",
            "user",
            "env",
            "init",
            "privileged",
            "network_mode",
            "readonly_rootfs",
            "cap_drop",
            "security_opt",
            "memory",
            "memory_swap",
            "pids_limit",
            "tmpfs",
            "mounts",
            "mount_points",
        ] {
            assert!(diff.iter().any(|d| d == field), "{field} not flagged");
        }
    }
}
