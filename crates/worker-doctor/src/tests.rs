use super::*;
use std::path::PathBuf;

/// `/proc/mounts` of this project's Debian 12 VM (cgroup v1 with a cgroup2 at .../unified).
const HYBRID_MOUNTS: &str = "\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup /sys/fs/cgroup/pids cgroup rw,relatime,pids 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
";
/// GitHub's ubuntu-24.04 runner.
const V2_MOUNTS: &str = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n";

fn runtime(path: &str, args: &[&str], version: Option<&str>) -> RuntimeEntry {
    RuntimeEntry {
        path: path.into(),
        args: args.iter().map(|a| (*a).to_string()).collect(),
        version: version.map(str::to_string),
    }
}

/// This project's VM: Debian's docker.io 20.10 (no seccomp), runsc registered.
fn debian_vm() -> Facts {
    let mut runtimes = BTreeMap::new();
    runtimes.insert(
        "runc".to_string(),
        runtime("runc", &[], Some("runc version 1.1.5+ds1")),
    );
    runtimes.insert(
        "runsc".to_string(),
        runtime(
            "/usr/bin/runsc",
            &["--platform=ptrace", "--network=none"],
            Some("runsc version 0.0~20221219.0"),
        ),
    );
    Facts {
        engine: Ok(EngineFacts {
            version: "20.10.24+dfsg1".into(),
            api_version: "1.41".into(),
            cgroup_version: "1".into(),
            cgroup_driver: "cgroupfs".into(),
            runtimes,
            default_runtime: "runc".into(),
            security_options: Vec::new(),
            swap_limit: true,
        }),
        host: HostFacts {
            cgroup: host::cgroup_layout(HYBRID_MOUNTS),
            swap_total_bytes: Some(0),
            apparmor_enabled: None,
            staging: Some(StagingFacts {
                path: PathBuf::from("/var/lib/agent-bounties/stage"),
                facts: Ok(host::StagingFs {
                    fs_type: "ext4".into(),
                    free_bytes: 40 << 30,
                }),
            }),
            sandbox_uids: Some(host::SandboxUidFacts {
                first: 60_578,
                count: 606,
                claimed: 0,
                lock_dir: PathBuf::from("/run/lock/agent-bounties-sandbox-uids"),
                lease: Ok(60_578),
            }),
        },
        oci_runtime: None,
        image: None,
        clock: None,
    }
}

fn line<'a>(report: &'a Report, name: &str) -> &'a Check {
    report
        .checks
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no {name} line in {report:#?}"))
}

#[test]
fn the_debian_vm_reports_hybrid_cgroups_and_both_runtimes_and_passes_with_warnings() {
    let report = examine(&debian_vm());
    assert_eq!(report.status, Status::Warn, "{}", report.human());
    assert!(!report.failed());
    let cg = line(&report, "cgroups");
    assert_eq!(cg.status, Status::Warn);
    assert!(cg.detail.contains("hybrid cgroups"), "{}", cg.detail);
    assert!(cg.detail.contains("cgroup v1 with the cgroupfs driver"));
    let rt = line(&report, "oci_runtime");
    assert_eq!(rt.status, Status::Ok);
    assert!(
        rt.detail.contains(
            "runsc (/usr/bin/runsc --platform=ptrace --network=none; runsc version 0.0~20221219.0)"
        ),
        "{}",
        rt.detail
    );
    assert!(rt.detail.contains("runc (runc; runc version"));
    assert_eq!(line(&report, "seccomp").status, Status::Warn);
    assert_eq!(line(&report, "swap").status, Status::Ok);
    assert_eq!(line(&report, "staging").status, Status::Ok);
    assert_eq!(
        line(&report, "staging").detail,
        "/var/lib/agent-bounties/stage on ext4 with 40.0 GiB free"
    );
}

#[test]
fn an_unreachable_engine_fails_with_what_to_do() {
    let mut facts = debian_vm();
    facts.engine = Err("connection refused".into());
    let report = examine(&facts);
    assert!(report.failed());
    let e = line(&report, "engine");
    assert_eq!(e.status, Status::Fail);
    assert!(e.fix.as_deref().unwrap().contains("start dockerd"));
    assert!(report.checks.iter().all(|c| c.name != "oci_runtime"));
}

#[test]
fn asking_for_a_runtime_the_engine_lacks_fails() {
    let mut facts = debian_vm();
    if let Ok(e) = &mut facts.engine {
        e.runtimes.remove("runsc");
    }
    facts.oci_runtime = Some("runsc".into());
    let report = examine(&facts);
    let rt = line(&report, "oci_runtime");
    assert_eq!(rt.status, Status::Fail, "{}", report.human());
    assert!(
        rt.detail
            .contains("runsc (--oci-runtime) is not registered")
    );
    assert!(
        rt.fix
            .as_deref()
            .unwrap()
            .contains("scripts/services.sh --runsc")
    );
}

#[test]
fn runsc_without_network_none_fails() {
    let mut facts = debian_vm();
    if let Ok(e) = &mut facts.engine {
        e.runtimes.insert(
            "runsc".into(),
            runtime(
                "/usr/bin/runsc",
                &["--platform=ptrace"],
                Some("runsc version x"),
            ),
        );
    }
    facts.oci_runtime = Some("runsc".into());
    let rt = examine(&facts);
    assert_eq!(line(&rt, "oci_runtime").status, Status::Fail);
}

#[test]
fn seccomp_apparmor_and_userns_are_read_from_the_engines_security_options() {
    let mut facts = debian_vm();
    facts.host.apparmor_enabled = Some(true);
    if let Ok(e) = &mut facts.engine {
        e.security_options = vec![
            "name=apparmor".into(),
            "name=seccomp,profile=default".into(),
            "name=userns".into(),
        ];
    }
    let report = examine(&facts);
    assert_eq!(line(&report, "seccomp").status, Status::Ok);
    assert_eq!(line(&report, "apparmor").status, Status::Ok);
    assert_eq!(line(&report, "userns").status, Status::Warn);
}

#[test]
fn swap_without_swap_accounting_fails() {
    let mut facts = debian_vm();
    facts.host.swap_total_bytes = Some(2 << 30);
    if let Ok(e) = &mut facts.engine {
        e.swap_limit = false;
    }
    let s = examine(&facts);
    assert_eq!(line(&s, "swap").status, Status::Fail);
    assert!(s.failed());
    if let Ok(e) = &mut facts.engine {
        e.swap_limit = true;
    }
    assert_eq!(line(&examine(&facts), "swap").status, Status::Ok);
}

#[test]
fn a_full_or_missing_or_memory_backed_staging_root_is_reported() {
    let mut facts = debian_vm();
    let set = |facts: &mut Facts, fs: Result<host::StagingFs, String>| {
        facts.host.staging = Some(StagingFacts {
            path: PathBuf::from("/stage"),
            facts: fs,
        });
    };
    let fs = |fs_type: &str, free_bytes: u64| host::StagingFs {
        fs_type: fs_type.into(),
        free_bytes,
    };
    set(&mut facts, Ok(fs("ext4", 512 << 20)));
    assert_eq!(line(&examine(&facts), "staging").status, Status::Fail);
    set(&mut facts, Ok(fs("ext4", 5 << 30)));
    assert_eq!(line(&examine(&facts), "staging").status, Status::Warn);
    set(&mut facts, Ok(fs("tmpfs", 40 << 30)));
    assert_eq!(line(&examine(&facts), "staging").status, Status::Warn);
    set(
        &mut facts,
        Err("cannot be read: No such file or directory".into()),
    );
    let report = examine(&facts);
    assert_eq!(line(&report, "staging").status, Status::Fail);
    assert_eq!(
        line(&report, "staging").detail,
        "/stage: cannot be read: No such file or directory"
    );
}

#[test]
fn an_image_missing_by_digest_fails() {
    let mut facts = debian_vm();
    facts.image = Some(ImageFacts {
        reference: "127.0.0.1:5000/x@sha256:ab".into(),
        present: Ok(false),
    });
    let report = examine(&facts);
    let i = line(&report, "image");
    assert_eq!(i.status, Status::Fail);
    assert!(
        i.fix
            .as_deref()
            .unwrap()
            .starts_with("docker pull 127.0.0.1:5000/x@sha256:ab")
    );
}

#[test]
fn the_clock_is_compared_with_the_latest_block() {
    let mut facts = debian_vm();
    let at = |facts: &mut Facts, block: Result<u64, String>| {
        facts.clock = Some(ClockFacts {
            rpc: "http://127.0.0.1:8545".into(),
            block_timestamp: block,
            now: 1_000_000,
        });
        line(&examine(facts), "clock").status
    };
    assert_eq!(at(&mut facts, Ok(1_000_002)), Status::Ok);
    assert_eq!(at(&mut facts, Ok(999_990)), Status::Ok);
    assert_eq!(
        at(&mut facts, Ok(1_000_000 + CLOCK_AHEAD_FAIL_SECS + 1)),
        Status::Fail
    );
    assert_eq!(
        at(&mut facts, Ok(1_000_000 - CLOCK_BEHIND_WARN_SECS - 1)),
        Status::Warn
    );
    assert_eq!(
        at(&mut facts, Err("connection refused".into())),
        Status::Fail
    );
}

#[test]
fn the_json_form_has_a_schema_version_a_status_and_one_object_per_line() {
    let report = examine(&debian_vm());
    let v = serde_json::to_value(&report).unwrap();
    assert_eq!(v["schema_version"], REPORT_SCHEMA);
    assert_eq!(REPORT_SCHEMA, "agent-bounties/worker-doctor-v2");
    assert!(v.get("schema").is_none());
    assert_eq!(v["status"], "warn");
    assert_eq!(v["checks"][0]["name"], "engine");
    assert_eq!(v["checks"][0]["status"], "ok");
    assert!(v["checks"][0].get("fix").is_none());
    assert!(report.human().ends_with("doctor: warn\n"));
}

#[test]
fn cgroup_layouts_are_told_apart() {
    assert_eq!(host::cgroup_layout(HYBRID_MOUNTS), CgroupLayout::Hybrid);
    assert_eq!(host::cgroup_layout(V2_MOUNTS), CgroupLayout::V2);
    let v1: String = HYBRID_MOUNTS
        .lines()
        .filter(|l| !l.starts_with("cgroup2"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(host::cgroup_layout(&v1), CgroupLayout::V1);
    assert_eq!(
        host::cgroup_layout("proc /proc proc rw 0 0\n"),
        CgroupLayout::Unknown
    );
}

#[test]
fn swap_total_is_read_in_bytes() {
    let meminfo = "MemTotal:       24000000 kB\nSwapTotal:       2097148 kB\nSwapFree: 1 kB\n";
    assert_eq!(host::swap_total(meminfo), Some(2_097_148 * 1024));
    assert_eq!(host::swap_total("MemTotal: 1 kB\n"), None);
    assert_eq!(host::swap_total("SwapTotal: x kB\n"), None);
}

#[test]
fn a_real_directory_is_examined_and_a_missing_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let found = host::staging_facts(dir.path());
    let fs = found.facts.unwrap();
    assert!(fs.free_bytes > 0);
    assert!(!fs.fs_type.is_empty());
    let missing = host::staging_facts(&dir.path().join("absent"));
    assert!(missing.facts.unwrap_err().starts_with("cannot be read"));
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    assert_eq!(
        host::staging_facts(&file).facts.unwrap_err(),
        "is not a directory"
    );
}

/// The first line of the real `runc --version` on this host: what the worker reads from an
/// engine entry whose binary is runc.
fn real_runc_version_line() -> String {
    let out = std::process::Command::new("runc")
        .arg("--version")
        .output()
        .expect("runc is installed on the test host (docker.io depends on it)");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text.lines().next().unwrap().trim().to_string();
    assert!(line.starts_with("runc version "), "{line}");
    line
}

/// #41 item 7: `worker doctor --oci-runtime runsc` said ok when the engine's `runsc` entry was
/// really runc (its own detail line printed `runc version …`). The entry here is what the
/// daemon would register as `runsc` with runc's binary, its version line the real runc's on
/// this host; the check fails, naming the version it read, as the signer refuses such a run.
#[test]
fn doctor_oci_runtime_runsc_fails_when_the_runsc_entry_is_really_runc() {
    let version = real_runc_version_line();
    let mut facts = debian_vm();
    if let Ok(e) = &mut facts.engine {
        e.runtimes.insert(
            "runsc".into(),
            runtime("/usr/sbin/runc", &["--network=none"], Some(&version)),
        );
    }
    facts.oci_runtime = Some("runsc".into());
    let report = examine(&facts);
    let rt = line(&report, "oci_runtime");
    assert_eq!(rt.status, Status::Fail, "{}", report.human());
    assert!(report.failed());
    assert!(rt.detail.contains(&version), "{}", rt.detail);
    assert!(rt.detail.contains("not runsc"), "{}", rt.detail);
    assert!(
        rt.fix.as_deref().unwrap_or_default().contains("runsc"),
        "{rt:?}"
    );

    // The engine's real runc, asked for as runc, is what it says it is.
    let mut facts = debian_vm();
    if let Ok(e) = &mut facts.engine {
        e.runtimes
            .insert("runc".into(), runtime("runc", &[], Some(&version)));
    }
    facts.oci_runtime = Some("runc".into());
    assert_eq!(
        line(&examine(&facts), "oci_runtime").status,
        Status::Ok,
        "{}",
        examine(&facts).human()
    );
}

/// Issue #41: each sandbox's own uid. A host where no lease can be taken fails (every run
/// would end without a verdict); uids that host accounts claim are a warning.
#[test]
fn the_sandbox_uid_line_fails_without_a_lease_and_warns_on_claimed_uids() {
    let mut facts = debian_vm();
    assert_eq!(line(&examine(&facts), "sandbox_uids").status, Status::Ok);
    let uids = facts.host.sandbox_uids.as_mut().unwrap();
    uids.claimed = 3;
    let report = examine(&facts);
    let warned = line(&report, "sandbox_uids");
    assert_eq!(warned.status, Status::Warn);
    assert!(
        warned.detail.contains("3 of its 606 uids"),
        "{}",
        warned.detail
    );
    let uids = facts.host.sandbox_uids.as_mut().unwrap();
    uids.lease = Err("the directory is a link".into());
    let report = examine(&facts);
    assert_eq!(line(&report, "sandbox_uids").status, Status::Fail);
    assert!(report.failed());
}
