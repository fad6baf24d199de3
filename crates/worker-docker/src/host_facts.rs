//! The host facts of the evidence record's engine section (issue #28): what `worker doctor`
//! would say about this engine and host, worked out once when the executor connects, from the
//! `/version` and `/info` answers the executor asks for anyway and the host's `/proc` and
//! `/sys`. No further engine call, and no runtime binary is run beyond the one the executor
//! resolves already.

use std::collections::BTreeMap;

use verifier_sdk::engine_host::{DoctorStatus, EngineHostFacts, HostRuntime};
use worker_doctor::{CgroupLayout, EngineFacts, Facts, HostFacts, Status};
use worker_sandbox::engine::OciRuntime;

/// The doctor's checks that are about the staging root, not the engine or host: the executor
/// is not given one, so the line would only say so.
const NOT_PER_PROCESS: [&str; 1] = ["staging"];

/// The doctor's engine facts as the executor read them, with the version of the runtime the
/// runs use (the one binary already run), and this host's facts, examined.
pub(crate) fn gather(mut engine: EngineFacts, runtime: &OciRuntime) -> EngineHostFacts {
    if let (Some(entry), Some(facts)) = (engine.runtimes.get_mut(&runtime.name), &runtime.facts) {
        entry.version = Some(facts.version.clone()).filter(|v| !v.is_empty());
    }
    summarize(&engine, &worker_doctor::host::gather(None), &runtime.name)
}

fn status(status: Status) -> DoctorStatus {
    match status {
        Status::Ok => DoctorStatus::Ok,
        Status::Warn => DoctorStatus::Warn,
        Status::Fail => DoctorStatus::Fail,
    }
}

fn has_option(options: &[String], name: &str) -> bool {
    let key = format!("name={name}");
    options.iter().any(|o| o.split(',').any(|part| part == key))
}

/// [`worker_doctor::examine`] on `engine` and `host` for runs under `oci_runtime`, as the
/// record carries it.
pub(crate) fn summarize(
    engine: &EngineFacts,
    host: &HostFacts,
    oci_runtime: &str,
) -> EngineHostFacts {
    let report = worker_doctor::examine(&Facts {
        engine: Ok(engine.clone()),
        host: host.clone(),
        oci_runtime: Some(oci_runtime.to_string()),
        image: None,
        clock: None,
    });
    let checks: BTreeMap<String, DoctorStatus> = report
        .checks
        .iter()
        .filter(|c| !NOT_PER_PROCESS.contains(&c.name))
        .map(|c| (c.name.to_string(), status(c.status)))
        .collect();
    let doctor = checks.values().copied().max().unwrap_or(DoctorStatus::Ok);
    let cgroup_layout = match host.cgroup {
        CgroupLayout::V1 => Some("v1"),
        CgroupLayout::V2 => Some("v2"),
        CgroupLayout::Hybrid => Some("hybrid"),
        CgroupLayout::Unknown => None,
    };
    let options = &engine.security_options;
    EngineHostFacts {
        doctor,
        checks,
        cgroup_layout: cgroup_layout.map(str::to_string),
        runtimes: engine
            .runtimes
            .iter()
            .map(|(name, entry)| {
                (
                    name.clone(),
                    HostRuntime {
                        path: entry.path.clone(),
                        args: entry.args.clone(),
                    },
                )
            })
            .collect(),
        default_runtime: Some(engine.default_runtime.clone()).filter(|r| !r.is_empty()),
        security_options: options.clone(),
        userns_remap: has_option(options, "userns"),
        seccomp: has_option(options, "seccomp"),
        apparmor: has_option(options, "apparmor"),
        host_apparmor: host.apparmor_enabled,
        swap_total_bytes: host.swap_total_bytes,
        swap_limit: engine.swap_limit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use worker_doctor::RuntimeEntry;

    /// This project's Debian VM: engine 20.10 on hybrid cgroups without seccomp or AppArmor,
    /// runsc registered beside runc, no swap.
    fn debian() -> (EngineFacts, HostFacts) {
        let runtime = |path: &str, args: &[&str]| RuntimeEntry {
            path: path.into(),
            args: args.iter().map(|a| (*a).to_string()).collect(),
            version: None,
        };
        let engine = EngineFacts {
            version: "20.10.24+dfsg1".into(),
            api_version: "1.41".into(),
            cgroup_version: "1".into(),
            cgroup_driver: "cgroupfs".into(),
            runtimes: BTreeMap::from([
                ("io.containerd.runc.v2".into(), runtime("runc", &[])),
                ("runc".into(), runtime("runc", &[])),
                (
                    "runsc".into(),
                    runtime("/usr/bin/runsc", &["--platform=ptrace", "--network=none"]),
                ),
            ]),
            default_runtime: "runc".into(),
            security_options: Vec::new(),
            swap_limit: false,
        };
        let host = HostFacts {
            cgroup: CgroupLayout::Hybrid,
            swap_total_bytes: Some(0),
            apparmor_enabled: None,
            staging: None,
            sandbox_uids: None,
        };
        (engine, host)
    }

    #[test]
    fn the_debian_hosts_facts_are_recorded_as_the_doctor_sees_them() {
        let (engine, host) = debian();
        let facts = summarize(&engine, &host, "runc");
        assert_eq!(facts.cgroup_layout.as_deref(), Some("hybrid"));
        assert_eq!(
            facts.runtimes.keys().collect::<Vec<_>>(),
            ["io.containerd.runc.v2", "runc", "runsc"]
        );
        assert_eq!(
            facts.runtimes["runsc"].args,
            ["--platform=ptrace", "--network=none"]
        );
        assert_eq!(facts.default_runtime.as_deref(), Some("runc"));
        assert!(!facts.seccomp && !facts.apparmor && !facts.userns_remap);
        assert_eq!(facts.host_apparmor, None);
        assert_eq!(facts.swap_total_bytes, Some(0));
        // Hybrid cgroups, no seccomp, no AppArmor: three warnings, no failure; and no staging
        // line, which would only say that the executor was given no staging root.
        let warned: Vec<&str> = facts
            .checks
            .iter()
            .filter(|(_, s)| **s == DoctorStatus::Warn)
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(warned, ["apparmor", "cgroups", "seccomp"]);
        assert!(!facts.checks.contains_key("staging"));
        assert_eq!(facts.checks["oci_runtime"], DoctorStatus::Ok);
        assert_eq!(facts.doctor, DoctorStatus::Warn);
    }

    /// The runtime the runs use is checked as `worker doctor --oci-runtime` checks it: runsc
    /// without a version the executor could read is a warning, an unregistered runtime a
    /// failure, and either is the record's overall verdict.
    #[test]
    fn the_oci_runtime_line_is_the_one_of_the_runs_runtime() {
        let (engine, host) = debian();
        let facts = summarize(&engine, &host, "runsc");
        assert_eq!(facts.checks["oci_runtime"], DoctorStatus::Warn);
        let mut versioned = engine.clone();
        if let Some(entry) = versioned.runtimes.get_mut("runsc") {
            entry.version = Some("runsc version 0.0~20221219.0".into());
        }
        let facts = summarize(&versioned, &host, "runsc");
        assert_eq!(facts.checks["oci_runtime"], DoctorStatus::Ok);
        let facts = summarize(&engine, &host, "kata");
        assert_eq!(facts.checks["oci_runtime"], DoctorStatus::Fail);
        assert_eq!(facts.doctor, DoctorStatus::Fail);
    }

    /// What the host did not show is left out, not guessed: no cgroup mount, no meminfo, no
    /// AppArmor module, no default runtime.
    #[test]
    fn unknown_host_facts_are_left_out() {
        let (mut engine, _) = debian();
        engine.default_runtime.clear();
        engine.security_options = vec![
            "name=seccomp,profile=default".into(),
            "name=apparmor".into(),
            "name=userns".into(),
        ];
        let host = HostFacts {
            cgroup: CgroupLayout::Unknown,
            swap_total_bytes: None,
            apparmor_enabled: None,
            staging: None,
            sandbox_uids: None,
        };
        let facts = summarize(&engine, &host, "runc");
        assert_eq!(facts.cgroup_layout, None);
        assert_eq!(facts.default_runtime, None);
        assert_eq!(facts.swap_total_bytes, None);
        assert!(facts.seccomp && facts.apparmor && facts.userns_remap);
        let json = serde_json::to_value(&facts).unwrap();
        for absent in [
            "cgroup_layout",
            "default_runtime",
            "swap_total_bytes",
            "host_apparmor",
        ] {
            assert!(json.get(absent).is_none(), "{absent} in {json}");
        }
        assert_eq!(facts.checks["cgroups"], DoctorStatus::Fail);
    }
}
