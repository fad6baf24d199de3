//! The container profile (DESIGN §4) as data: every isolation field a container that runs a
//! manifest must have, as a pure function of the manifest, the image's `PATH` and the staged
//! host paths.
//!
//! One definition serves both sides: the worker asks the engine for exactly this profile and
//! refuses to start a container whose read-back differs; the signer and keeper cannot re-run,
//! so [`check_recorded_profile`] compares the profile an evidence record says was requested and
//! observed with the one the manifest demands, and a run that says it was not sandboxed as
//! required is never signed.
//!
//! `HOME=/tmp/home` must be writable, but `/tmp` is an empty tmpfs and nothing extra may run in
//! the container to create the directory. So `/tmp/home` is its own tmpfs, mounted over `/tmp`
//! (the engine orders mounts by depth) and owned by the sandbox user through the kernel's
//! `uid=`/`gid=` tmpfs options, `mode=0700`. It has the same size cap as `/tmp`; both are
//! charged to the container's memory cgroup, so `memory_bytes` bounds them together.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::manifest::RunnerManifest;
use crate::runtimes;

/// The first host uid (and gid) of the sandbox range: each concurrent sandbox on a host runs
/// as a uid and gid of its own from [`SANDBOX_UID_FIRST`]`..`[`SANDBOX_UID_FIRST`]` +
/// `[`SANDBOX_UID_COUNT`], leased for the container's whole life (issue #41).
///
/// Why not one shared user: the kernel keeps some budgets per user, not per container (epoll
/// watches, inotify instances and watches, `RLIMIT_NPROC`, message-queue bytes, pending
/// signals, pipe buffers), so with one uid for every sandbox a job that filled one of them
/// made an honest job beside it fail. Why this range: systemd's UID allocation table leaves
/// 60578–61183 unused (above Debian's and Ubuntu's regular users at 1000–59999, below
/// systemd's dynamic service users at 61184), and it lies below 65536, so it also maps under
/// the engine's `userns-remap` with the usual 65536 subordinate ids. The worker still refuses
/// any uid of it that a host account, group or subordinate range claims.
pub const SANDBOX_UID_FIRST: u32 = 60_578;
/// How many uids the sandbox range holds: at most this many sandboxes run at once on a host.
pub const SANDBOX_UID_COUNT: u32 = 606;

/// `Config.User` of the sandbox leased `uid`: the same number as uid and gid.
pub fn sandbox_user(uid: u32) -> String {
    format!("{uid}:{uid}")
}

/// The uid of `user` when it is a sandbox user (`U:U`, `U` in the sandbox range), else
/// `None`: a record naming any other user was not run as the protocol requires.
pub fn sandbox_uid_of(user: &str) -> Option<u32> {
    let (uid, gid) = user.split_once(':')?;
    let canonical =
        |s: &str| !s.is_empty() && !s.starts_with('0') && s.bytes().all(|b| b.is_ascii_digit());
    if uid != gid || !canonical(uid) {
        return None;
    }
    let uid: u32 = uid.parse().ok()?;
    is_sandbox_uid(uid).then_some(uid)
}

/// Whether `uid` lies in the sandbox range.
pub fn is_sandbox_uid(uid: u32) -> bool {
    uid.checked_sub(SANDBOX_UID_FIRST)
        .is_some_and(|offset| offset < SANDBOX_UID_COUNT)
}
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
#[serde(deny_unknown_fields)]
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
#[serde(deny_unknown_fields)]
pub struct BindMount {
    /// Host path.
    pub source: String,
    /// Path inside the container.
    pub target: String,
    /// Whether the mount is read-only.
    pub read_only: bool,
}

/// Every isolation field the sandbox sets, in a form that can be compared and recorded.
///
/// The same type holds what was requested and what `inspect` reported; the worker refuses to
/// start the container unless they are equal, and the signer refuses evidence unless both
/// equal [`expected_profile`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContainerProfile {
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
    /// `HostConfig.Runtime`: the OCI runtime ([`crate::runtimes`]), the operator's choice,
    /// never the manifest's. Empty in records written before it was recorded (a `default`
    /// keeps them readable); the worker always names it.
    #[serde(default)]
    pub runtime: String,
}

impl ContainerProfile {
    /// Names of the fields that differ between `self` (requested) and `observed`.
    pub fn mismatches(&self, observed: &ContainerProfile) -> Vec<String> {
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

/// Numbers the engine takes as `i64`; a manifest outside that range is refused, not clamped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `cpu_millis × 10⁶`.
    pub nano_cpus: i64,
    /// Memory and memory+swap.
    pub memory: i64,
    /// Process limit.
    pub pids: i64,
}

/// A manifest limit the engine cannot hold: zero, or past `i64` (the engine's type).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// The value is zero or does not fit an `i64`.
    #[error("{name} {value} is out of range")]
    OutOfRange {
        /// The manifest field.
        name: &'static str,
        /// Its value.
        value: u64,
    },
    /// `cpu_millis` fits, but not once turned into nanoCPUs.
    #[error("cpu_millis is out of range")]
    NanoCpusOverflow,
}

impl Limits {
    /// The engine's numbers for these manifest values; each must be positive and fit.
    pub fn new(cpu_millis: u64, memory_bytes: u64, pids_limit: u64) -> Result<Self, LimitError> {
        let positive = |name: &'static str, value: u64| -> Result<i64, LimitError> {
            match i64::try_from(value) {
                Ok(v) if v > 0 => Ok(v),
                _ => Err(LimitError::OutOfRange { name, value }),
            }
        };
        Ok(Self {
            nano_cpus: positive("cpu_millis", cpu_millis)?
                .checked_mul(1_000_000)
                .ok_or(LimitError::NanoCpusOverflow)?,
            memory: positive("memory_bytes", memory_bytes)?,
            pids: positive("pids_limit", pids_limit)?,
        })
    }
}

/// What one container is run with, beyond the fixed profile.
#[derive(Clone, Copy, Debug)]
pub struct ProfileInputs<'a> {
    /// The command (the manifest's `command`).
    pub argv: &'a [String],
    /// `AGENT_BOUNTIES_TEST_SEED`.
    pub test_seed: u64,
    /// Size of `/tmp` (and of `/tmp/home`).
    pub tmpfs_bytes: u64,
    /// CPU, memory and process limits.
    pub limits: Limits,
    /// The image's own `PATH`, when it sets one.
    pub image_path: Option<&'a str>,
    /// Host path of the staged source tree.
    pub source: &'a str,
    /// Host path of the staged benchmark tree.
    pub benchmark: &'a str,
    /// The OCI runtime ([`crate::runtimes::RUNC`] or [`crate::runtimes::RUNSC`]); it
    /// decides how the process limit is enforced (see there).
    pub oci_runtime: &'a str,
    /// The host uid (and gid) leased to this sandbox, one of the sandbox range.
    pub sandbox_uid: u32,
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

/// The profile every container for `inputs` must have, field by field.
pub fn expected_profile(inputs: &ProfileInputs<'_>) -> ContainerProfile {
    let mut tmpfs = BTreeMap::new();
    tmpfs.insert(
        "/tmp".to_string(),
        tmpfs_options(inputs.tmpfs_bytes, "1777", None),
    );
    tmpfs.insert(
        HOME_DIR.to_string(),
        tmpfs_options(
            inputs.tmpfs_bytes,
            "0700",
            Some(&sandbox_user(inputs.sandbox_uid)),
        ),
    );
    let mut mounts = vec![
        BindMount {
            source: inputs.benchmark.to_string(),
            target: BENCHMARK_DIR.to_string(),
            read_only: true,
        },
        BindMount {
            source: inputs.source.to_string(),
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
    // Under runsc the guest's task count is the Sentry's RLIMIT_NPROC and the host cgroup only
    // a backstop for the whole sandbox (crate::runtimes explains the numbers).
    let pids_limit = if inputs.oci_runtime == runtimes::RUNSC {
        ulimits.push(Ulimit {
            name: "nproc".into(),
            soft: inputs.limits.pids,
            hard: inputs.limits.pids,
        });
        runtimes::runsc_host_pids_limit(inputs.limits.pids)
    } else {
        inputs.limits.pids
    };
    ulimits.sort();
    ContainerProfile {
        entrypoint: inputs.argv.to_vec(),
        cmd: Vec::new(),
        working_dir: WORKDIR.to_string(),
        user: sandbox_user(inputs.sandbox_uid),
        hostname: SANDBOX_HOSTNAME.to_string(),
        env: sorted(environment(inputs.test_seed, inputs.image_path)),
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
        nano_cpus: inputs.limits.nano_cpus,
        memory: inputs.limits.memory,
        memory_swap: inputs.limits.memory,
        pids_limit,
        ulimits,
        tmpfs,
        mounts: mounts.clone(),
        mount_points: mounts,
        binds: Vec::new(),
        devices: 0,
        log_driver: "none".to_string(),
        runtime: inputs.oci_runtime.to_string(),
    }
}

/// The profile `manifest` demands, for a recorded profile whose two run-time inputs a later
/// stage cannot know: the image's `PATH` and the host paths of the staged trees. Those are
/// taken from `recorded` itself (the single `PATH=` entry, the mounts at `/workspace` and
/// `/benchmark`, and the sandbox uid, which must lie in the sandbox range); every other field
/// is fixed by the manifest, so any difference shows up.
pub fn expected_for_recorded(
    manifest: &RunnerManifest,
    recorded: &ContainerProfile,
) -> Result<ContainerProfile, LimitError> {
    let limits = Limits::new(
        manifest.cpu_millis(),
        manifest.memory_bytes(),
        manifest.pids_limit(),
    )?;
    let image_path = recorded.env.iter().find_map(|e| e.strip_prefix("PATH="));
    let host = |target: &str| {
        recorded
            .mounts
            .iter()
            .find(|m| m.target == target)
            .map(|m| m.source.as_str())
            // A host path must be absolute; anything else can never match.
            .filter(|s| s.starts_with('/'))
            .unwrap_or("")
    };
    Ok(expected_profile(&ProfileInputs {
        argv: manifest.command(),
        test_seed: manifest.test_seed(),
        tmpfs_bytes: manifest.tmpfs_bytes(),
        limits,
        image_path,
        source: host(WORKDIR),
        benchmark: host(BENCHMARK_DIR),
        // The operator's choice, so taken from the record like the paths; it only picks
        // which of the two enforcements of pids_limit the record must show.
        oci_runtime: &recorded.runtime,
        // Which uid of the range a run was leased is the host's choice, named by the user and
        // by the owner of the home tmpfs. A user outside the range matches nothing
        // (check_recorded_profile names it); the home's owner then still picks the uid, so
        // the record is refused for its user alone, not for the tmpfs that follows from it.
        sandbox_uid: sandbox_uid_of(&recorded.user)
            .or_else(|| home_owner(recorded))
            .unwrap_or(SANDBOX_UID_FIRST),
    }))
}

/// The `uid=` of the recorded home tmpfs, when it is one of the sandbox range.
fn home_owner(recorded: &ContainerProfile) -> Option<u32> {
    recorded
        .tmpfs
        .get(HOME_DIR)?
        .split(',')
        .find_map(|option| option.strip_prefix("uid="))
        .and_then(|uid| sandbox_uid_of(&sandbox_user(uid.parse().ok()?)))
}

/// Names the fields of `recorded` that differ from what `manifest` demands (see
/// [`expected_for_recorded`]); empty when it is exactly the profile.
pub fn check_recorded_profile(
    manifest: &RunnerManifest,
    recorded: &ContainerProfile,
) -> Vec<String> {
    // A runtime the sandbox does not know how to run under backs nothing, whatever else the
    // record says (empty: a record from before the runtime was recorded, run under runc).
    if !recorded.runtime.is_empty() && !runtimes::is_supported(&recorded.runtime) {
        return vec!["runtime".to_string()];
    }
    let mut mismatches = match expected_for_recorded(manifest, recorded) {
        Ok(expected) => expected.mismatches(recorded),
        Err(detail) => vec![format!("limits ({detail})")],
    };
    // A run as any other user (the one uid every sandbox shared before issue #41, root, a host
    // account) may have shared its per-user kernel budgets with another job.
    if sandbox_uid_of(&recorded.user).is_none() && !mismatches.iter().any(|m| m == "user") {
        mismatches.push("user".to_string());
    }
    mismatches
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(user: &str) -> (RunnerManifest, ContainerProfile) {
        let job =
            crate::job::validate_job(&crate::fixtures::valid_job(), crate::fixtures::NOW).unwrap();
        let mut profile: ContainerProfile =
            serde_json::from_value(crate::fixtures::profile_for(&job)).unwrap();
        let uid = user.split(':').next().unwrap();
        profile.user = user.to_string();
        let home = profile.tmpfs.get_mut(HOME_DIR).unwrap();
        *home = home
            .split(',')
            .map(|o| match o.split_once('=') {
                Some(("uid" | "gid", _)) => format!("{}={uid}", o.split('=').next().unwrap()),
                _ => o.to_string(),
            })
            .collect::<Vec<_>>()
            .join(",");
        (job.manifest().clone(), profile)
    }

    #[test]
    fn every_uid_of_the_sandbox_range_is_accepted_in_a_record() {
        for uid in [
            SANDBOX_UID_FIRST,
            SANDBOX_UID_FIRST + 300,
            SANDBOX_UID_FIRST + SANDBOX_UID_COUNT - 1,
        ] {
            let (manifest, profile) = recorded(&sandbox_user(uid));
            assert_eq!(
                check_recorded_profile(&manifest, &profile),
                Vec::<String>::new()
            );
        }
    }

    /// Before issue #41 every sandbox on a host ran as 65532, so a run recorded under it may
    /// have shared its per-user kernel budgets with an attacker's job: never signed.
    #[test]
    fn a_run_under_the_old_shared_uid_or_any_user_outside_the_range_is_refused() {
        for user in [
            "65532:65532",
            "0:0",
            "1000:1000",
            "4294967295:4294967295",
            &sandbox_user(SANDBOX_UID_FIRST - 1),
            &sandbox_user(SANDBOX_UID_FIRST + SANDBOX_UID_COUNT),
            &format!("{}:{}", SANDBOX_UID_FIRST, SANDBOX_UID_FIRST + 1),
            &format!("0{SANDBOX_UID_FIRST}:0{SANDBOX_UID_FIRST}"),
            &SANDBOX_UID_FIRST.to_string(),
        ] {
            let (manifest, profile) = recorded(user);
            assert!(
                check_recorded_profile(&manifest, &profile).contains(&"user".to_string()),
                "{user} was accepted"
            );
        }
    }

    #[test]
    fn the_home_tmpfs_must_belong_to_the_recorded_uid() {
        let (manifest, mut profile) = recorded(&sandbox_user(SANDBOX_UID_FIRST + 1));
        profile.user = sandbox_user(SANDBOX_UID_FIRST + 2);
        assert_eq!(
            check_recorded_profile(&manifest, &profile),
            vec!["tmpfs".to_string()]
        );
    }
}
