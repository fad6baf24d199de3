//! `worker doctor` on this host against facts read independently (the docker CLI, `stat -f`):
//! the cgroup layout (hybrid on this project's Debian VM, v2 on GitHub's runner) and every
//! runtime the engine registers, runsc with its flags and version.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (COMMON.md)

use std::process::Command;

fn stat_fs(path: &str) -> String {
    let out = Command::new("stat")
        .args(["-f", "-c", "%T", path])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn worker_doctor_reports_this_hosts_cgroup_layout_and_the_registered_runtimes() {
    let staging = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_worker"))
        .args([
            "doctor",
            "--json",
            "--oci-runtime",
            "runsc",
            "--staging-root",
        ])
        .arg(staging.path())
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let line = |name: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no {name} line: {report:#}"))
            .clone()
    };
    // The layout, told apart without the doctor's parser.
    let cgroups = line("cgroups");
    let detail = cgroups["detail"].as_str().unwrap();
    match (
        stat_fs("/sys/fs/cgroup").as_str(),
        stat_fs("/sys/fs/cgroup/unified").as_str(),
    ) {
        ("cgroup2fs", _) => assert!(detail.starts_with("cgroup v2"), "{detail}"),
        ("tmpfs", "cgroup2fs") => {
            assert!(detail.starts_with("hybrid cgroups"), "{detail}");
            assert_eq!(cgroups["status"], "warn");
        }
        ("tmpfs", _) => assert!(detail.starts_with("cgroup v1"), "{detail}"),
        other => panic!("unexpected cgroup mount {other:?}"),
    }
    // Every runtime the engine registers, as the docker CLI lists them.
    let runtimes = Command::new("docker")
        .args(["info", "--format", "{{json .Runtimes}}"])
        .output()
        .unwrap();
    let runtimes: serde_json::Value = serde_json::from_slice(&runtimes.stdout).unwrap();
    let runtime_line = line("oci_runtime");
    let detail = runtime_line["detail"].as_str().unwrap();
    for name in runtimes.as_object().unwrap().keys() {
        assert!(
            detail.contains(&format!("{name} (")),
            "{name} missing from {detail}"
        );
    }
    assert!(
        detail.contains("runsc (/usr/bin/runsc --platform=ptrace --network=none; runsc version "),
        "{detail}"
    );
    assert_eq!(runtime_line["status"], "ok", "{runtime_line:#}");
    assert_eq!(report["schema"], "agent-bounties/worker-doctor-v1");
    // No line fails on the project's own test host, so the exit is 0.
    assert_eq!(out.status.code(), Some(0), "{report:#}");
}

#[test]
fn worker_doctor_fails_with_exit_78_when_the_staging_root_is_missing() {
    let staging = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_worker"))
        .args(["doctor", "--staging-root"])
        .arg(staging.path().join("absent"))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("fail  staging"), "{text}");
    assert!(text.ends_with("doctor: fail\n"), "{text}");
    assert_eq!(out.status.code(), Some(78));
}
