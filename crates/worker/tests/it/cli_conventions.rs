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
