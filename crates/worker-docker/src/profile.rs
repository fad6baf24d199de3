//! The container profile turned into the Engine API's create request and back
//! ([`worker_sandbox::profile`] holds the requested profile itself), so a difference between
//! what was asked for and what the engine made fails closed.

use bollard::models::{
    ContainerCreateBody, ContainerInspectResponse, HealthConfig, HostConfig, HostConfigLogConfig,
    Mount, MountType, ResourcesUlimits,
};

pub use worker_sandbox::profile::*;

fn sorted(mut items: Vec<String>) -> Vec<String> {
    items.sort();
    items
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
        runtime: Some(want.runtime.clone()),
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
        // The image's HEALTHCHECK would run as an exec inside the sandbox while the benchmark
        // runs: code nobody committed to, and an exec the external-stop watch must treat as
        // interference (no verdict). `NONE` switches it off.
        healthcheck: Some(HealthConfig {
            test: Some(vec!["NONE".to_string()]),
            ..Default::default()
        }),
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
        runtime: host.runtime.unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use worker_sandbox::SandboxSpec;
    use worker_sandbox::evidence::RequestFacts;

    fn spec() -> SandboxSpec {
        SandboxSpec {
            run_id: "r1".into(),
            image: "127.0.0.1:5000/x@sha256:00".into(),
            request: RequestFacts {
                argv: vec!["/bin/true".into()],
                platform: "linux/amd64".into(),
                timeout_ms: 5_000,
                cpu_millis: 500,
                memory_bytes: 64 << 20,
                pids_limit: 32,
                max_output_bytes: 1 << 20,
                tmpfs_bytes: 16 << 20,
                test_seed: 7,
            },
            source_dir: PathBuf::from("/s"),
            benchmark_dir: PathBuf::from("/b"),
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
    fn tmpfs_allows_exec_and_home_is_owned_by_the_sandboxs_own_uid() {
        let want = requested(&spec(), limits(), Some("/bin"), "/s", "/b", "runc", 60_600);
        assert_eq!(
            want.tmpfs.get("/tmp").map(String::as_str),
            Some("rw,exec,nosuid,nodev,size=16777216,mode=1777")
        );
        assert_eq!(
            want.tmpfs.get("/tmp/home").map(String::as_str),
            Some("rw,exec,nosuid,nodev,size=16777216,mode=0700,uid=60600,gid=60600")
        );
    }

    #[test]
    fn a_single_differing_field_is_named() {
        let want = requested(&spec(), limits(), Some("/bin"), "/s", "/b", "runc", 60_600);
        assert!(want.mismatches(&want).is_empty());
        let mut got = want.clone();
        got.readonly_rootfs = false;
        got.mount_points[0].read_only = false;
        assert_eq!(want.mismatches(&got), ["readonly_rootfs", "mount_points"]);
    }

    #[test]
    fn empty_inspect_mismatches_every_security_field() {
        let want = requested(&spec(), limits(), Some("/bin"), "/s", "/b", "runc", 60_600);
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
