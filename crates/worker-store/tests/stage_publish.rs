//! Publishing into the shared staging store must never touch a tree another job already uses.
//!
//! Every empty tree has the same digest, so two jobs on one host staging an empty source (or
//! `rehearse --batch`'s `empty_tree` stubs side by side) publish to the same path. rename(2)
//! replaces an existing empty directory, so a second plain-rename publish swapped out the
//! directory the first job's container had mounted as `/workspace`, and that job's runner died
//! on `ENOENT` from `getcwd` (node-bounty's `empty_tree` stub exited 7 instead of 1).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::process::{Command, Stdio};

use verifier_sdk::digest::TreeLimits;
use worker_store::progress::NoProgress;
use worker_store::{StageKind, stage_tree};

fn limits() -> TreeLimits {
    TreeLimits::new(1 << 20, 100).unwrap()
}

#[test]
fn a_second_publish_of_the_empty_tree_does_not_replace_the_one_a_running_job_has_mounted() {
    let root = tempfile::tempdir().unwrap();
    let first_input = tempfile::tempdir().unwrap();
    let second_input = tempfile::tempdir().unwrap();

    let first = stage_tree(
        StageKind::Source,
        first_input.path(),
        root.path(),
        limits(),
        &mut NoProgress,
    )
    .unwrap();
    let held = File::open(&first.path).unwrap();
    let before = held.metadata().unwrap();
    // The running job: a process whose working directory is the published tree, as a
    // container's is its `/workspace` bind mount. It blocks on stdin until the second publish
    // is done, then asks the kernel where it is, as node's `uv_cwd` does at start.
    let mut job = Command::new("/bin/sh")
        .args(["-c", "read _ && exec /bin/pwd -P"])
        .current_dir(&first.path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    let second = stage_tree(
        StageKind::Source,
        second_input.path(),
        root.path(),
        limits(),
        &mut NoProgress,
    )
    .unwrap();

    job.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut cwd = String::new();
    job.stdout.take().unwrap().read_to_string(&mut cwd).unwrap();
    let mut stderr = String::new();
    job.stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = job.wait().unwrap();

    assert!(
        status.success(),
        "the running job lost its working directory: {status}, {stderr}"
    );
    assert_eq!(second.snapshot.digest, first.snapshot.digest);
    assert_eq!(second.path, first.path);
    let after = std::fs::symlink_metadata(&second.path).unwrap();
    assert_eq!(
        (after.dev(), after.ino()),
        (before.dev(), before.ino()),
        "the second publish replaced the published empty tree"
    );
    let still = held.metadata().unwrap();
    assert!(
        still.nlink() >= 2,
        "the tree the first job holds was unlinked (nlink {})",
        still.nlink()
    );
    assert_eq!(
        cwd.trim_end(),
        std::fs::canonicalize(&first.path)
            .unwrap()
            .to_str()
            .unwrap()
    );
}
