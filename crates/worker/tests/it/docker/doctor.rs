//! `worker doctor` on this host against facts read independently (the docker CLI, `stat -f`):
//! the cgroup layout (hybrid on this project's Debian VM, v2 on GitHub's runner) and every
//! runtime the engine registers, runsc with its flags and version.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use std::process::Command;

use crate::support::{doctor_check, stat_fs};

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
    let line = |name: &str| doctor_check(&report, name).clone();
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
    assert_eq!(report["schema_version"], "agent-bounties/worker-doctor-v2");
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

/// The local chain's latest block timestamp, read without the worker: a raw JSON-RPC POST.
fn latest_block_timestamp(rpc: &str) -> u64 {
    use std::io::{Read, Write};
    let addr = rpc.strip_prefix("http://").unwrap();
    let body =
        r#"{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["latest",false]}"#;
    let mut stream = std::net::TcpStream::connect(addr)
        .unwrap_or_else(|e| panic!("these tests need the local chain at {rpc}: {e}"));
    write!(
        stream,
        "POST / HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let json = &response[response.find("\r\n\r\n").unwrap() + 4..];
    let value: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    let hex = value["result"]["timestamp"].as_str().unwrap();
    u64::from_str_radix(hex.trim_start_matches("0x"), 16).unwrap()
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn doctor_rpc(rpc: &str) -> (Option<i32>, serde_json::Value) {
    let staging = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_worker"))
        .args(["doctor", "--json", "--rpc", rpc, "--staging-root"])
        .arg(staging.path())
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: exit {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let clock = report["checks"]
        .as_array()
        .unwrap_or_else(|| panic!("not a report: {report}"))
        .iter()
        .find(|c| c["name"] == "clock")
        .unwrap_or_else(|| panic!("no clock line: {report:#}"))
        .clone();
    (out.status.code(), clock)
}

#[test]
fn worker_doctor_rpc_reports_the_clocks_distance_from_the_local_chains_latest_block() {
    let rpc = std::env::var("CHAIN_RPC_URL").unwrap_or_else(|_| "http://127.0.0.1:8545".into());
    // The chain is shared: another test may mine or warp it while the doctor reads it, so its
    // latest block is read before and after the doctor, whose block lies between the two
    // (block times only grow). The seconds between the reads are the only other slack,
    // whatever the machine's load.
    let before = unix_now();
    let first = latest_block_timestamp(&rpc);
    let (code, clock) = doctor_rpc(&rpc);
    let last = latest_block_timestamp(&rpc);
    let after = unix_now();
    let detail = clock["detail"].as_str().unwrap();
    let (n, direction) = detail
        .rsplit_once(" s ")
        .map(|(head, tail)| (head.rsplit(' ').next().unwrap(), tail))
        .unwrap_or_else(|| panic!("{detail}"));
    let n: u64 = n.parse().unwrap_or_else(|e| panic!("{e}: {detail}"));
    assert!(detail.contains("127.0.0.1:8545"), "{detail}");
    if direction.starts_with("behind") {
        assert!(
            before.saturating_sub(last) <= n && n <= after.saturating_sub(first),
            "{detail}: block {first}..{last}, clock {before}..{after}"
        );
        let expected = if n > 300 { "warn" } else { "ok" };
        assert_eq!(clock["status"], expected, "{clock:#}");
        // A warning is not a failure: the doctor exits 0 unless another line fails.
        assert_ne!(code, Some(78), "{clock:#}");
    } else {
        assert!(direction.starts_with("ahead"), "{detail}");
        assert!(
            first.saturating_sub(after) <= n && n <= last.saturating_sub(before),
            "{detail}: block {first}..{last}, clock {before}..{after}"
        );
        let expected = if n > 120 { "fail" } else { "ok" };
        assert_eq!(clock["status"], expected, "{clock:#}");
    }
}

/// A JSON-RPC node whose latest block is stamped `offset` seconds from now.
fn fake_rpc(runtime: &tokio::runtime::Runtime, offset: i64) -> String {
    runtime
        .block_on(test_http::serve(move |request| async move {
            let call: serde_json::Value = serde_json::from_slice(&request.body).ok()?;
            let id = call["id"].clone();
            let now = i64::try_from(unix_now()).unwrap();
            let stamp = format!("{:#x}", now + offset);
            let result = match call["method"].as_str()? {
                "eth_blockNumber" => serde_json::json!("0x10"),
                "eth_getBlockByNumber" => serde_json::json!({
                    "number": "0x10",
                    "hash": format!("0x{}", "11".repeat(32)),
                    "parentHash": format!("0x{}", "22".repeat(32)),
                    "sha3Uncles": format!("0x{}", "33".repeat(32)),
                    "miner": format!("0x{}", "00".repeat(20)),
                    "stateRoot": format!("0x{}", "44".repeat(32)),
                    "transactionsRoot": format!("0x{}", "55".repeat(32)),
                    "receiptsRoot": format!("0x{}", "66".repeat(32)),
                    "logsBloom": format!("0x{}", "00".repeat(256)),
                    "difficulty": "0x0",
                    "gasLimit": "0x1c9c380",
                    "gasUsed": "0x0",
                    "timestamp": stamp,
                    "extraData": "0x",
                    "mixHash": format!("0x{}", "00".repeat(32)),
                    "nonce": "0x0000000000000000",
                    "baseFeePerGas": "0x1",
                    "size": "0x200",
                    "uncles": [],
                    "transactions": [],
                }),
                _ => return None,
            };
            let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result});
            Some(test_http::Response::ok(serde_json::to_vec(&body).unwrap()))
        }))
        .unwrap()
}

#[test]
fn worker_doctor_rpc_fails_with_exit_78_when_the_latest_block_is_an_hour_ahead_of_the_clock() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let rpc = fake_rpc(&runtime, 3600);
    let (code, clock) = doctor_rpc(&rpc);
    assert_eq!(clock["status"], "fail", "{clock:#}");
    let detail = clock["detail"].as_str().unwrap();
    assert!(detail.contains("s ahead of this clock"), "{detail}");
    assert!(
        clock["fix"].as_str().unwrap_or("").contains("synchronise"),
        "{clock:#}"
    );
    assert_eq!(code, Some(78));
    // Within the documented margin: ok.
    let rpc = fake_rpc(&runtime, 30);
    let (_, clock) = doctor_rpc(&rpc);
    assert_eq!(clock["status"], "ok", "{clock:#}");
}

#[test]
fn worker_doctor_rpc_that_does_not_answer_is_a_fail_without_the_url_s_secret() {
    // A closed port on loopback, with a path like an API key.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let (code, clock) = doctor_rpc(&format!("http://{addr}/secret-key-123"));
    assert_eq!(clock["status"], "fail", "{clock:#}");
    assert!(!clock.to_string().contains("secret-key-123"), "{clock:#}");
    assert_eq!(code, Some(78));
}

/// The Docker socket the worker connects to here: `$DOCKER_HOST`'s when it names a unix
/// socket, else the default.
fn docker_socket() -> std::path::PathBuf {
    match std::env::var("DOCKER_HOST") {
        Ok(h) if !h.is_empty() => h
            .strip_prefix("unix://")
            .unwrap_or_else(|| panic!("this test needs a unix-socket DOCKER_HOST, not {h}"))
            .into(),
        _ => "/var/run/docker.sock".into(),
    }
}

/// `worker args…` as uid/gid 65534 without supplementary groups (`setpriv`, as root or
/// through `sudo -n` for GitHub's runner user: `test_root`), so the real daemon's real socket
/// refuses it; `dir` is a directory that user may write.
fn worker_as_nobody(args: &[&str]) -> std::process::Output {
    let socket = docker_socket();
    let mode = std::fs::metadata(&socket)
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7)
        .unwrap_or_else(|e| panic!("the daemon's socket {}: {e}", socket.display()));
    assert_eq!(
        mode & 0o6,
        0,
        "{} lets every user read and write it: nothing to refuse",
        socket.display()
    );
    // The environment through `env`: sudo would reset it. DOCKER_HOST as this test reads it.
    let mut command = test_root::as_root("env");
    command.args(["-u", "REGRESSION_SANDBOX_STAGING_ROOT", "NO_COLOR=1"]);
    if let Ok(host) = std::env::var("DOCKER_HOST") {
        command.arg(format!("DOCKER_HOST={host}"));
    }
    command
        .args([
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--",
        ])
        .arg(env!("CARGO_BIN_EXE_worker"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("setpriv (util-linux), as root or through sudo -n: {e}"))
}

/// A fresh directory uid 65534 may write.
fn open_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    dir
}

/// #41 item 9: a user without access to the Docker socket was told the daemon "is not
/// answering … start the daemon" while it ran. The real worker, run as an unprivileged user
/// against the real daemon's socket, says the socket refused it (permission denied), names
/// the socket's permissions and owner and the `docker` group, and that membership of that
/// group is root-equivalent; `worker feed` (exit 5) and `worker doctor` alike.
#[test]
fn a_user_without_access_to_the_docker_socket_is_told_permission_denied_not_start_the_daemon() {
    let socket = docker_socket();
    let socket = socket.to_str().unwrap();
    let dir = open_dir();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let feed = worker_as_nobody(&[
        "feed",
        "--api",
        "http://127.0.0.1:9",
        "--verifier",
        "0x1111111111111111111111111111111111111111",
        "--out",
        &path("out"),
        "--staging-root",
        &path("staging"),
        "--work-dir",
        &path("work"),
    ]);
    let said = String::from_utf8_lossy(&feed.stderr);
    assert_eq!(feed.status.code(), Some(5), "{said}");
    for needle in [
        "permission denied",
        socket,
        "srw-rw----",
        "root:docker",
        "group `docker`",
        "root-equivalent",
        "uid 65534",
    ] {
        assert!(said.contains(needle), "no {needle:?} in: {said}");
    }
    assert!(!said.contains("not answering"), "{said}");
    assert!(!said.contains("start the daemon"), "{said}");

    let doctor = worker_as_nobody(&["doctor", "--json", "--staging-root", &path("staging")]);
    let report: serde_json::Value = serde_json::from_slice(&doctor.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&doctor.stderr)));
    let engine = &report["checks"][0];
    assert_eq!(engine["name"], "engine", "{report:#}");
    assert_eq!(engine["status"], "fail", "{report:#}");
    let detail = engine["detail"].as_str().unwrap();
    let fix = engine["fix"].as_str().unwrap();
    for needle in ["permission denied", socket, "srw-rw----", "root:docker"] {
        assert!(detail.contains(needle), "no {needle:?} in: {detail}");
    }
    assert!(
        fix.contains("docker") && fix.contains("root-equivalent"),
        "{fix}"
    );
    assert!(!fix.contains("start dockerd"), "{fix}");
    assert_eq!(doctor.status.code(), Some(78));
}

/// #41 item 9: `worker doctor --json` named its schema with `schema`, every other worker output
/// with `schema_version`.
#[test]
fn worker_doctor_json_names_its_schema_with_schema_version_like_every_other_worker_output() {
    let staging = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_worker"))
        .args(["doctor", "--json", "--staging-root"])
        .arg(staging.path())
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(
        report["schema_version"], "agent-bounties/worker-doctor-v2",
        "{report:#}"
    );
    assert!(report.get("schema").is_none(), "{report:#}");
}
