//! Conventions people expect of a command-line tool, checked on the real binary (no Docker).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use std::process::{Command, Stdio};

#[test]
fn version_names_the_git_revision() {
    let out = Command::new(env!("CARGO_BIN_EXE_worker"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("worker 0."), "{text}");
    assert!(text.trim_end().ends_with(')'), "no revision in {text:?}");
}

/// Issue #49: `worker --version --verbose` printed only `worker 0.1.0 (<short rev>)` (clap's
/// version flag ignored `--verbose`), so nobody could tell which build of the commit ran or
/// compare a rebuild with it.
#[test]
fn version_verbose_names_commit_tree_lock_toolchain_and_binary() {
    use sha2::{Digest, Sha256};
    let worker = env!("CARGO_BIN_EXE_worker");
    let out = Command::new(worker)
        .args(["--version", "--verbose"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}: ")))
            .unwrap_or_else(|| panic!("no {key}: line in {text:?}"))
            .to_owned()
    };
    let commit = field("commit");
    assert!(
        commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()),
        "{commit}"
    );
    assert!(
        ["clean", "dirty"].contains(&field("tree").as_str()),
        "{text}"
    );
    let lock = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.lock")).unwrap();
    assert_eq!(
        field("cargo-lock-sha256"),
        hex::encode(Sha256::digest(&lock))
    );
    assert!(field("toolchain").starts_with("rustc "), "{text}");
    let binary = hex::encode(Sha256::digest(std::fs::read(worker).unwrap()));
    assert_eq!(field("binary-sha256"), binary);
}

/// `worker … | head -1` used to end in a "failed printing to stdout" panic (exit 101) when the
/// reader had gone. The reader is closed before the worker starts, so every write fails.
#[test]
fn a_closed_stdout_ends_quietly_not_in_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a").unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_worker"))
        .arg("--snapshot-directory")
        .arg(dir.path())
        .args(["1000", "10"])
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(101), "panicked: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
}

/// #42 item 8: `--junit FILE` writes the batch's JUnit XML; without `--batch` it was silently
/// ignored and the rehearsal went on (no file written). It is a usage error, exit 2, before
/// anything is read or run.
#[test]
fn junit_without_batch_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("junit.xml");
    let out = Command::new(env!("CARGO_BIN_EXE_worker"))
        .args([
            "rehearse",
            "--source",
            "s",
            "--benchmark",
            "b",
            "--manifest",
            "m",
        ])
        .arg("--junit")
        .arg(&junit)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--junit"), "{stderr}");
    assert!(stderr.contains("--batch"), "{stderr}");
    assert!(!junit.exists());
}

/// `worker serve` on `dir` against a feed that refuses connections (it logs a warning per
/// poll), logging at info to a piped stderr, stdout discarded; `extra` goes right after `serve`.
fn serve_against_a_closed_feed(dir: &std::path::Path, extra: &[&str]) -> Command {
    let staging = crate::example_feed::private_staging(dir);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_worker"));
    cmd.arg("serve")
        .args(extra)
        .args([
            "--api",
            "http://127.0.0.1:1",
            "--network",
            "base-sepolia",
            "--verifier",
            "0x2222222222222222222222222222222222222222",
            "--archive-base",
            "http://127.0.0.1:1",
            "--poll-interval",
            "1",
        ])
        .arg("--state")
        .arg(dir.join("state"));
    crate::example_feed::with_folders(&mut cmd, &dir.join("out"), &dir.join("work"), &staging)
        .env("WORKER_LOG", "info")
        .env_remove("VERIFIER_LOG_FORMAT")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// #46 item 5: `--log-format json` (and `VERIFIER_LOG_FORMAT=json` for a unit's environment
/// file) makes every stderr log line one JSON object with timestamp, level, target, message
/// and the event's fields. `worker serve` against a feed that refuses connections logs a
/// warning per poll; the lines are read until the first one, whatever the timing.
#[test]
fn log_format_json_writes_one_object_per_line_with_its_fields() {
    use std::io::BufRead as _;
    for (flag, env) in [(true, None), (false, Some("json"))] {
        let dir = tempfile::tempdir().unwrap();
        let extra: &[&str] = if flag { &["--log-format", "json"] } else { &[] };
        let mut cmd = serve_against_a_closed_feed(dir.path(), extra);
        if let Some(env) = env {
            cmd.env("VERIFIER_LOG_FORMAT", env);
        }
        let mut child = cmd.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let mut seen = Vec::new();
        for line in std::io::BufReader::new(stderr).lines() {
            let line = line.unwrap();
            let value: serde_json::Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not one JSON object ({e}): {line}"));
            for key in ["timestamp", "level", "target", "message"] {
                assert!(value[key].is_string(), "no {key}: {line}");
            }
            let done = value["message"]
                .as_str()
                .unwrap()
                .contains("feed query failed");
            seen.push(value);
            if done {
                break;
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let warn = seen.last().expect("no log line before stderr closed");
        assert_eq!(warn["level"], "WARN", "{seen:?}");
        assert_eq!(
            warn["fields"]["verifier"], "0x2222222222222222222222222222222222222222",
            "{seen:?}"
        );
    }
}

/// A running `worker serve` must not die of SIGPIPE: its requests to Docker's Unix socket are
/// written with writev(2), which a closed peer answers with SIGPIPE, and the default action
/// (restored for `| head -1` until the fleet lane lost a paused host to it) kills the service.
/// Read from the kernel once the service has logged its first poll.
#[test]
fn a_running_serve_ignores_sigpipe_so_a_closed_daemon_socket_cannot_kill_it() {
    use std::io::BufRead as _;
    let dir = tempfile::tempdir().unwrap();
    let mut child = serve_against_a_closed_feed(dir.path(), &[])
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let polled = std::io::BufReader::new(stderr)
        .lines()
        .map_while(Result::ok)
        .any(|line| line.contains("feed query failed"));
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(polled, "serve never logged its first poll");
    let ignored = status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .map(|mask| u64::from_str_radix(mask.trim(), 16).unwrap())
        .unwrap();
    let sigpipe = 13;
    assert_ne!(
        ignored & (1 << (sigpipe - 1)),
        0,
        "SIGPIPE is not ignored (SigIgn {ignored:#x})"
    );
}
