//! The container profile against the real daemon: what runs, as whom, with which environment,
//! filesystem and network.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use crate::support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use crate::support::{Trees, run, spec, stdout};
use worker_sandbox::Decision;

fn assert_no_floats(value: &serde_json::Value) {
    match value {
        serde_json::Value::Number(n) => assert!(n.is_u64() || n.is_i64(), "float {n}"),
        serde_json::Value::Array(items) => items.iter().for_each(assert_no_floats),
        serde_json::Value::Object(map) => map.values().for_each(assert_no_floats),
        _ => {}
    }
}

fn lines(report: &worker_sandbox::RunReport) -> Vec<String> {
    stdout(report).lines().map(str::to_string).collect()
}

#[tokio::test]
async fn echo_passes_and_evidence_records_the_profile() {
    let trees = Trees::new();
    let spec = spec("echo", &["/bin/echo", "hello"], &trees);
    let report = run(&spec, &trees).await;
    assert_eq!(report.decision, Decision::Completed { exit_code: 0 });
    assert_eq!(stdout(&report), "hello\n");
    let ev = &report.evidence;
    assert_eq!(ev.schema_version, "agent-bounties/regression-evidence-v1");
    assert_eq!(ev.executor, "docker-engine");
    assert!(ev.exit.started && ev.exit.removed);
    let isolation = ev.isolation.as_ref().unwrap();
    assert!(isolation.mismatches.is_empty());
    assert_eq!(isolation.observed, isolation.requested);
    assert!(isolation.observed.readonly_rootfs);
    assert_eq!(isolation.observed.network_mode, "none");
    // A uid of the sandbox range of its own (issue #41), never the one every sandbox shared.
    assert!(
        verifier_sdk::profile::sandbox_uid_of(&isolation.observed.user).is_some(),
        "{}",
        isolation.observed.user
    );
    let image = ev.image.as_ref().unwrap();
    assert_eq!(image.repo_digest, spec.image);
    assert_eq!(image.platform, "linux/amd64");
    assert!(image.id.starts_with("sha256:"));
    assert!(!ev.engine.version.is_empty() && !ev.engine.kernel_version.is_empty());
    assert_eq!(ev.engine.cgroup_version, "1");
    assert!(ev.timestamps.engine_started.is_some());
    // The record is plain JSON without floats and round-trips.
    let json = serde_json::to_string(ev).unwrap();
    assert_no_floats(&serde_json::from_str(&json).unwrap());
    let back: worker_sandbox::EvidenceRecord = serde_json::from_str(&json).unwrap();
    assert_eq!(&back, ev);
}

#[tokio::test]
async fn identity_limits_and_hostname_are_fixed() {
    let trees = Trees::new();
    let script = trees.script(
        "who.sh",
        "id -u; id -g; hostname; ulimit -n; ulimit -c; pwd; cat /proc/1/cmdline | tr '\\0' ' '; echo",
    );
    let report = run(&spec("identity", &[&script], &trees), &trees).await;
    assert_eq!(report.decision, Decision::Completed { exit_code: 0 });
    let out = lines(&report);
    let user = &report.evidence.isolation.as_ref().unwrap().observed.user;
    let uid = verifier_sdk::profile::sandbox_uid_of(user)
        .unwrap()
        .to_string();
    assert_eq!(
        out[..6],
        [
            uid.as_str(),
            uid.as_str(),
            "sandbox",
            "4096",
            "0",
            "/workspace"
        ]
    );
    // PID 1 is the engine's tiny init, which runs our argv.
    assert!(out[6].contains("docker-init"), "{out:?}");
    assert!(out[6].contains(&script), "{out:?}");
}

#[tokio::test]
async fn environment_is_exact_and_nothing_from_the_worker_leaks() {
    let unique = format!("LEAK_CANARY_{}", std::process::id());
    let child = support::spawn_child(
        module_path!(),
        "env",
        &[(&unique, "secret-value-must-not-leak")],
    )
    .wait_with_output()
    .unwrap();
    let out = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success(),
        "child failed: {out}\n{}",
        String::from_utf8_lossy(&child.stderr)
    );
    let env_block = out
        .split("ENV-BEGIN\n")
        .nth(1)
        .and_then(|s| s.split("ENV-END").next())
        .unwrap_or_else(|| panic!("no env block in child output: {out}"));
    let mut seen: Vec<&str> = env_block.lines().collect();
    seen.sort();
    let image_path = support::image_path(&support::busybox()).await;
    // HOSTNAME is added by the engine itself (fixed, not from the worker).
    let mut expected = vec![
        "AGENT_BOUNTIES_TEST_SEED=42",
        "HOME=/tmp/home",
        "HOSTNAME=sandbox",
        "LANG=C.UTF-8",
        "LC_ALL=C.UTF-8",
        &image_path,
        "SOURCE_DATE_EPOCH=0",
        "TZ=UTC",
    ];
    expected.sort();
    assert_eq!(seen, expected);
    assert!(!out.contains("secret-value-must-not-leak"));
}

#[tokio::test]
#[ignore = "entry point for child processes spawned by other tests"]
async fn child_process() {
    let mode = support::child_mode();
    assert_eq!(mode, "env");
    let trees = Trees::new();
    let report = run(&spec("env-child", &["/bin/env"], &trees), &trees).await;
    assert_eq!(report.decision, Decision::Completed { exit_code: 0 });
    println!("ENV-BEGIN\n{}ENV-END", stdout(&report));
}

#[tokio::test]
async fn filesystem_is_read_only_except_tmp_and_home_and_tmp_allows_exec() {
    let trees = Trees::new();
    let script = trees.script(
        "fs.sh",
        r#"touch /rootfile 2>/dev/null && echo root-writable || echo root-denied
touch /workspace/new 2>/dev/null && echo workspace-writable || echo workspace-denied
echo x >> /workspace/README 2>/dev/null && echo readme-writable || echo readme-denied
touch /benchmark/new 2>/dev/null && echo benchmark-writable || echo benchmark-denied
mkdir -p /tmp/bin && cp /bin/busybox /tmp/bin/busybox && /tmp/bin/busybox echo tmp-exec-ok
mkdir -p "$HOME/.cache" && echo home-data > "$HOME/.cache/f" && cat "$HOME/.cache/f"
head -c 20000000 /dev/zero > /tmp/big 2>/dev/null && echo tmp-unbounded || echo tmp-full
head -c 20000000 /dev/zero > "$HOME/big" 2>/dev/null && echo home-unbounded || echo home-full"#,
    );
    let report = run(&spec("fs", &[&script], &trees), &trees).await;
    assert_eq!(report.decision, Decision::Completed { exit_code: 0 });
    assert_eq!(
        lines(&report),
        [
            "root-denied",
            "workspace-denied",
            "readme-denied",
            "benchmark-denied",
            "tmp-exec-ok",
            "home-data",
            "tmp-full",
            "home-full"
        ]
    );
    assert_eq!(
        fs::read_to_string(trees.source.join("README")).unwrap(),
        "solver source\n"
    );
}

#[tokio::test]
async fn network_is_absent() {
    let trees = Trees::new();
    let script = trees.script(
        "net.sh",
        r#"wget -q -T 3 -O /dev/null http://1.1.1.1/ 2>/dev/null && echo wget-ok || echo wget-failed
nc -w 2 1.1.1.1 80 </dev/null 2>/dev/null && echo nc-ok || echo nc-failed
tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"#,
    );
    let report = run(&spec("net", &[&script], &trees), &trees).await;
    assert_eq!(report.decision, Decision::Completed { exit_code: 0 });
    assert_eq!(lines(&report), ["wget-failed", "nc-failed", "lo"]);
}

const EUID_PROGRAM: &str = r#"
#include <stdio.h>
#include <unistd.h>
int main(void) {
    int rc = setuid(0);
    printf("uid=%d euid=%d setuid0=%d\n", (int)getuid(), (int)geteuid(), rc);
    return 0;
}
"#;

#[tokio::test]
async fn setuid_root_binary_does_not_elevate() {
    let trees = Trees::new();
    let c_file = trees.benchmark.join("euid.c");
    fs::write(&c_file, EUID_PROGRAM).unwrap();
    let binary = trees.benchmark.join("euid");
    let status = Command::new("gcc")
        .args(["-static", "-O1", "-o"])
        .arg(&binary)
        .arg(&c_file)
        .status()
        .expect("gcc is needed to build the setuid probe");
    assert!(status.success());
    fs::remove_file(&c_file).unwrap();
    // Root-owned and setuid: as root, or through `sudo -n` for GitHub's runner user.
    for (program, args) in [("chown", ["0:0"]), ("chmod", ["4755"])] {
        let out = test_root::as_root(program)
            .args(args)
            .arg(&binary)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{program} {args:?} (the setuid test needs root or password-less sudo): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    assert_eq!(
        fs::metadata(&binary).unwrap().permissions().mode() & 0o7777,
        0o4755
    );

    // Control: outside the sandbox, the same file does elevate an unprivileged user.
    let control = test_root::as_root("setpriv")
        .args(["--reuid=65532", "--regid=65532", "--clear-groups", "--"])
        .arg(&binary)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&control.stdout),
        "uid=0 euid=0 setuid0=0\n",
        "control run must show the setuid bit working on the host"
    );

    let report = run(&spec("setuid", &["/benchmark/euid"], &trees), &trees).await;
    assert_eq!(report.decision, Decision::Completed { exit_code: 0 });
    let user = &report.evidence.isolation.as_ref().unwrap().observed.user;
    let uid = verifier_sdk::profile::sandbox_uid_of(user).unwrap();
    assert_eq!(
        stdout(&report),
        format!("uid={uid} euid={uid} setuid0=-1\n")
    );
}

#[tokio::test]
async fn image_entrypoint_and_cmd_never_run() {
    let trees = Trees::new();
    let mut spec = spec("entrypoint", &["/bin/echo", "argv-ran"], &trees);
    spec.image = support::entrypoint_image();
    let report = run(&spec, &trees).await;
    assert_eq!(report.decision, Decision::Completed { exit_code: 0 });
    assert_eq!(stdout(&report), "argv-ran\n");
    let isolation = report.evidence.isolation.unwrap();
    assert_eq!(isolation.observed.entrypoint, ["/bin/echo", "argv-ran"]);
    assert!(isolation.observed.cmd.is_empty());
}

#[tokio::test]
async fn seed_reaches_the_program() {
    let trees = Trees::new();
    let script = trees.script("seed.sh", "echo $AGENT_BOUNTIES_TEST_SEED");
    let mut spec = spec("seed", &[&script], &trees);
    spec.request.test_seed = 987_654_321;
    let report = run(&spec, &trees).await;
    assert_eq!(report.decision, Decision::Completed { exit_code: 0 });
    assert_eq!(stdout(&report), "987654321\n");
}
