//! End-to-end tests of `--snapshot-directory` and `--stage-regression-input`, driving the real
//! binary on real trees.

// Test helpers outside `#[test]` functions may unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use verifier_sdk::{Sha256Digest, TreeLimits, digest_directory};
use worker_store::{StageKind, VerifyError, verify_staged};

const BIG: &str = "1073741824";
const MANY: &str = "100000";

fn worker() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_worker"));
    cmd.env_remove("WORKER_LOG")
        .env_remove(worker::commands::stage::PAUSE_HOOK_ENV);
    cmd
}

fn run(args: &[&OsStr]) -> Output {
    worker().args(args).output().unwrap()
}

fn snapshot(dir: &Path, max_bytes: &str, max_files: &str) -> Output {
    run(&[
        "--snapshot-directory".as_ref(),
        dir.as_os_str(),
        max_bytes.as_ref(),
        max_files.as_ref(),
    ])
}

fn stage_cmd(kind: &str, dir: &Path, root: &Path, max_bytes: &str, max_files: &str) -> Command {
    let mut cmd = worker();
    cmd.arg("--stage-regression-input")
        .arg(kind)
        .arg(dir)
        .arg(root)
        .arg(max_bytes)
        .arg(max_files);
    cmd
}

fn stage(kind: &str, dir: &Path, root: &Path, max_bytes: &str, max_files: &str) -> Output {
    stage_cmd(kind, dir, root, max_bytes, max_files)
        .output()
        .unwrap()
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap()
}

fn json(out: &Output) -> Value {
    assert_eq!(
        code(out),
        0,
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A relative path and its content.
type File<'a> = (&'a str, &'a [u8]);

fn write_tree(root: &Path, files: &[File]) {
    for (path, content) in files {
        let p = root.join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }
}

fn tree(files: &[File]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_tree(dir.path(), files);
    dir
}

/// Deterministic pseudo-random bytes (xorshift), so generated trees are reproducible.
fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A tree with nested folders, empty files, files straddling the 1 MiB read chunk, an
/// executable, and names whose flat byte order differs from a per-folder walk.
fn generated_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [
        0usize,
        1,
        100,
        4096,
        (1 << 20) - 1,
        1 << 20,
        (1 << 20) + 1,
        3 << 20,
    ];
    for (i, size) in sizes.iter().enumerate() {
        let sub = format!("d{}/e{}", i % 3, i % 2);
        write_tree(
            dir.path(),
            &[(&format!("{sub}/f{i}.bin"), &bytes(i as u64, *size))],
        );
    }
    for i in 0..150u64 {
        write_tree(
            dir.path(),
            &[(
                &format!("many/{i:04}.txt"),
                &bytes(i + 100, (i * 37) as usize),
            )],
        );
    }
    write_tree(
        dir.path(),
        &[
            ("a/b", b"1"),
            ("a.txt", b"2"),
            ("a-b", b"3"),
            ("bin/run", b"#!/bin/sh\n"),
        ],
    );
    fs::set_permissions(
        dir.path().join("bin/run"),
        fs::Permissions::from_mode(0o750),
    )
    .unwrap();
    fs::create_dir_all(dir.path().join("empty/dir")).unwrap();
    dir
}

fn limits() -> TreeLimits {
    TreeLimits::new(1 << 30, 100_000).unwrap()
}

/// Names in a store folder, or none if it does not exist.
fn names(dir: &Path) -> Vec<String> {
    match fs::read_dir(dir) {
        Ok(entries) => entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn assert_store_empty(root: &Path) {
    for sub in ["sources/sha256", "benchmarks/sha256", "tmp"] {
        assert_eq!(
            names(&root.join(sub)),
            Vec::<String>::new(),
            "{sub} is not empty"
        );
    }
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

/// A source stage of `dir` into `root`, held at the debug-build pause hook: it has listed the
/// tree and copied the first file, and waits until [`PausedStage::resume`].
struct PausedStage {
    child: Child,
    /// Holds the marker; also a place outside both trees for a test's own files.
    marker_dir: tempfile::TempDir,
}

impl PausedStage {
    fn start(dir: &Path, root: &Path, output: fn() -> Stdio) -> Self {
        let marker_dir = tempfile::tempdir().unwrap();
        let marker = marker_dir.path().join("paused");
        let mut child = stage_cmd("source", dir, root, BIG, MANY)
            .env(worker::commands::stage::PAUSE_HOOK_ENV, &marker)
            .stdout(output())
            .stderr(output())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !marker.exists() {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("worker exited with {status} before reaching the pause point");
            }
            assert!(
                Instant::now() < deadline,
                "worker never reached the pause point"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Self { child, marker_dir }
    }

    fn resume(self) -> Output {
        fs::remove_file(self.marker_dir.path().join("paused")).unwrap();
        self.child.wait_with_output().unwrap()
    }
}

#[test]
fn golden_vectors_through_the_cli() {
    let cases: [(&[File], &str, u64); 4] = [
        (
            &[("expected.txt", b"expected-output\n")],
            "sha256:f6630a1c99d3a6f27f0505b6e04890a9bbe973a78b2e9c0ff89580dae2967849",
            16,
        ),
        (
            &[("result.txt", b"expected-output\n")],
            "sha256:a1a2e7e0e6a698d862c0820310b86655104e5866a45ef62b383ead4c5a3c5249",
            16,
        ),
        (
            &[("result.txt", b"unexpected-output\n")],
            "sha256:eaab4b0fc8ff768c2bb16621eddb93c15398a93b203743e1cbc18e9e3eac8ebe",
            18,
        ),
        (
            &[],
            "sha256:c6aa1c589e8b19b6ce405068e268ac2a954ef81be68893c39df475a5f4c82b76",
            0,
        ),
    ];
    for (files, digest, total) in cases {
        let dir = tree(files);
        let out = json(&snapshot(dir.path(), BIG, MANY));
        assert_eq!(out["digest"], digest);
        assert_eq!(out["file_count"], files.len() as u64);
        assert_eq!(out["total_bytes"], total);
        // Staging yields the same digest, and the published copy digests to it as well.
        let root = tempfile::tempdir().unwrap();
        let staged = json(&stage("source", dir.path(), root.path(), BIG, MANY));
        assert_eq!(staged["snapshot"]["digest"], digest);
    }
}

#[test]
fn snapshot_equals_the_sdk_reference_on_a_generated_tree() {
    let dir = generated_tree();
    let reference = digest_directory(dir.path(), limits()).unwrap();
    let out = json(&snapshot(dir.path(), BIG, MANY));
    assert_eq!(out["digest"], reference.digest.to_string());
    assert_eq!(out["file_count"], reference.file_count);
    assert_eq!(out["total_bytes"], reference.total_bytes);
    assert_eq!(
        worker_store::snapshot_directory(dir.path(), limits()).unwrap(),
        reference
    );
}

#[test]
fn staging_publishes_a_sealed_copy_at_its_digest() {
    let dir = generated_tree();
    let root = tempfile::tempdir().unwrap();
    let reference = digest_directory(dir.path(), limits()).unwrap();
    let out = stage("benchmark", dir.path(), root.path(), BIG, MANY);
    // stderr is a pipe here, so no progress line and no log may appear.
    assert_eq!(stderr(&out), "");
    let staged = json(&out);
    let canonical_root = fs::canonicalize(root.path()).unwrap();
    let expected_path = canonical_root
        .join("benchmarks/sha256")
        .join(reference.digest.hex());
    assert_eq!(staged["kind"], "benchmark");
    assert_eq!(staged["path"], expected_path.to_str().unwrap());
    assert_eq!(staged["snapshot"]["digest"], reference.digest.to_string());
    assert_eq!(staged["snapshot"]["file_count"], reference.file_count);
    assert_eq!(staged["snapshot"]["total_bytes"], reference.total_bytes);

    assert_eq!(
        digest_directory(&expected_path, limits()).unwrap(),
        reference
    );
    assert_eq!(mode(&expected_path), 0o555);
    assert_eq!(mode(&expected_path.join("empty/dir")), 0o555);
    assert_eq!(mode(&expected_path.join("d0/e0")), 0o555);
    assert_eq!(mode(&expected_path.join("bin/run")), 0o555);
    assert_eq!(mode(&expected_path.join("a.txt")), 0o444);
    assert_eq!(names(&canonical_root.join("tmp")), Vec::<String>::new());
    assert_eq!(
        names(&canonical_root.join("sources/sha256")),
        Vec::<String>::new()
    );

    let found = verify_staged(
        root.path(),
        StageKind::Benchmark,
        &reference.digest,
        limits(),
    )
    .unwrap();
    assert_eq!(fs::canonicalize(found).unwrap(), expected_path);

    // Staging again re-verifies the existing target and reports the same result.
    let again = json(&stage("benchmark", dir.path(), root.path(), BIG, MANY));
    assert_eq!(again, staged);
    assert_eq!(names(&canonical_root.join("tmp")), Vec::<String>::new());
}

#[test]
fn staging_under_a_umask_that_strips_the_final_modes_still_seals_them() {
    // Copies are born with their final mode when the umask keeps it; under `umask 0077` it
    // (0444 would become 0400), and the stage must set it afterwards.
    let dir = generated_tree();
    let root = tempfile::tempdir().unwrap();
    let reference = digest_directory(dir.path(), limits()).unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg("umask 0077 && exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_worker"))
        .arg("--stage-regression-input")
        .arg("source")
        .arg(dir.path())
        .arg(root.path())
        .arg(BIG)
        .arg(MANY)
        .env_remove("WORKER_LOG")
        .env_remove(worker::commands::stage::PAUSE_HOOK_ENV)
        .output()
        .unwrap();
    let staged = json(&out);
    assert_eq!(staged["snapshot"]["digest"], reference.digest.to_string());
    let target = fs::canonicalize(root.path())
        .unwrap()
        .join("sources/sha256")
        .join(reference.digest.hex());
    assert_eq!(mode(&target.join("bin/run")), 0o555);
    assert_eq!(mode(&target.join("a.txt")), 0o444);
    assert_eq!(mode(&target.join("empty/dir")), 0o555);
    verify_staged(root.path(), StageKind::Source, &reference.digest, limits()).unwrap();
}

/// Each rejected input exits 4 with one clear line, and leaves no target or work folder.
fn assert_rejected(dir: &Path, max_bytes: &str, max_files: &str, needle: &str) {
    let root = tempfile::tempdir().unwrap();
    for out in [
        snapshot(dir, max_bytes, max_files),
        stage("source", dir, root.path(), max_bytes, max_files),
    ] {
        assert_eq!(code(&out), 4, "stderr: {}", stderr(&out));
        assert!(out.stdout.is_empty());
        let err = stderr(&out);
        assert!(err.starts_with("worker: error: "), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(needle), "expected {needle:?} in {err}");
    }
    assert_store_empty(root.path());
}

#[test]
fn symlink_is_rejected() {
    let dir = tree(&[("a", b"1")]);
    std::os::unix::fs::symlink("a", dir.path().join("link")).unwrap();
    assert_rejected(dir.path(), BIG, MANY, "symbolic link");
}

#[test]
fn fifo_is_rejected() {
    let dir = tree(&[("a", b"1")]);
    let status = Command::new("mkfifo")
        .arg(dir.path().join("pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    assert_rejected(dir.path(), BIG, MANY, "special file");
}

#[test]
fn non_utf8_name_is_rejected() {
    let dir = tree(&[("a", b"1")]);
    fs::write(dir.path().join(OsStr::from_bytes(b"bad\xff")), b"x").unwrap();
    assert_rejected(dir.path(), BIG, MANY, "not valid UTF-8");
}

#[test]
fn backslash_name_is_rejected() {
    let dir = tree(&[("sub/x\\y", b"1")]);
    assert_rejected(dir.path(), BIG, MANY, "invalid path component");
}

#[test]
fn over_129_components_is_rejected() {
    let deep = vec!["d"; 129].join("/") + "/f";
    let dir = tree(&[(deep.as_str(), b"1")]);
    assert_rejected(dir.path(), BIG, MANY, "deeper than 128");
}

#[test]
fn limits_reject_one_over_and_accept_exactly_the_maximum() {
    let dir = tree(&[("a", b"12"), ("b/c", b"345"), ("d", b"")]);
    assert_rejected(dir.path(), "4", "3", "byte limit of 4");
    assert_rejected(dir.path(), "5", "2", "file limit of 2");
    let root = tempfile::tempdir().unwrap();
    let snap = json(&snapshot(dir.path(), "5", "3"));
    let staged = json(&stage("source", dir.path(), root.path(), "5", "3"));
    assert_eq!(snap["total_bytes"], 5);
    assert_eq!(snap["file_count"], 3);
    assert_eq!(staged["snapshot"], snap);
}

#[test]
fn missing_or_non_directory_input_is_invalid_input() {
    let root = tempfile::tempdir().unwrap();
    let out = stage(
        "source",
        &root.path().join("nope"),
        &root.path().join("store"),
        BIG,
        MANY,
    );
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    let file = root.path().join("file");
    fs::write(&file, b"x").unwrap();
    let out = snapshot(&file, BIG, MANY);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is not a directory"),
        "{}",
        stderr(&out)
    );
}

#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "the pause hook is compiled into debug builds only"
)]
fn a_file_changing_during_the_copy_leaves_nothing_behind() {
    let dir = tree(&[("a", b"first"), ("b", &bytes(1, 2 << 20))]);
    let root = tempfile::tempdir().unwrap();
    let paused = PausedStage::start(dir.path(), root.path(), Stdio::piped);
    // `a` is copied; `b` was listed at 2 MiB and now grows before it is opened.
    let mut grown = bytes(1, 2 << 20);
    grown.extend_from_slice(b"appended");
    fs::write(dir.path().join("b"), grown).unwrap();
    let out = paused.resume();
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("changed while being read"),
        "{}",
        stderr(&out)
    );
    assert_store_empty(root.path());
}

/// Every regular file below `dir` whose content is `needle`.
fn files_holding(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in fs::read_dir(&current).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() && fs::read(entry.path()).unwrap() == needle {
                found.push(entry.path());
            }
        }
    }
    found
}

#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "the pause hook is compiled into debug builds only"
)]
fn parent_directory_swapped_for_symlink_mid_stage_is_refused() {
    const SECRET: &[u8] = b"outside-secret-0600\n";
    const DECOY: &[u8] = b"in-tree-decoy-0644!\n";
    assert_eq!(
        SECRET.len(),
        DECOY.len(),
        "the swap must keep the listed size"
    );
    let outside = tempfile::tempdir().unwrap();
    write_tree(outside.path(), &[("secret", SECRET)]);
    unseal(&outside.path().join("secret"), 0o600);
    // `0first` sorts before `a/secret`, so the pause falls after the listing and before any
    // file of `a/` is opened.
    let dir = tree(&[("0first", b"first"), ("a/secret", DECOY)]);
    let root = tempfile::tempdir().unwrap();
    let paused = PausedStage::start(dir.path(), root.path(), Stdio::piped);
    fs::rename(
        dir.path().join("a"),
        paused.marker_dir.path().join("a-moved"),
    )
    .unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("a")).unwrap();
    let out = paused.resume();

    let leaked = files_holding(root.path(), SECRET);
    assert!(
        leaked.is_empty(),
        "the 0600 file from outside the tree was published: {leaked:?} (modes {:?}), stdout: {}",
        leaked
            .iter()
            .map(|p| format!("{:o}", mode(p)))
            .collect::<Vec<_>>(),
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    assert!(
        stderr(&out).contains("changed while being read"),
        "{}",
        stderr(&out)
    );
    assert_store_empty(root.path());
}

#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "the pause hook is compiled into debug builds only"
)]
fn a_killed_stage_leaves_no_target_and_its_leftovers_are_cleaned_next_time() {
    let dir = tree(&[
        ("a", b"first"),
        ("big1", &bytes(2, 8 << 20)),
        ("big2", &bytes(3, 8 << 20)),
    ]);
    let root = tempfile::tempdir().unwrap();
    let mut paused = PausedStage::start(dir.path(), root.path(), Stdio::null);
    let pid = paused.child.id();
    paused.child.kill().unwrap(); // SIGKILL: no destructor or cleanup runs.
    paused.child.wait().unwrap();

    let leftovers = names(&root.path().join("tmp"));
    assert_eq!(leftovers.len(), 1, "{leftovers:?}");
    assert!(
        leftovers[0].starts_with(&format!(".tmp-{pid}-")),
        "{leftovers:?}"
    );
    assert!(
        root.path()
            .join("tmp")
            .join(&leftovers[0])
            .join("a")
            .exists()
    );
    assert_eq!(
        names(&root.path().join("sources/sha256")),
        Vec::<String>::new()
    );

    // The next stage (of another tree) removes the dead stage's folder.
    let other = tree(&[("x", b"y")]);
    json(&stage("benchmark", other.path(), root.path(), BIG, MANY));
    assert_eq!(names(&root.path().join("tmp")), Vec::<String>::new());
    assert_eq!(
        names(&root.path().join("sources/sha256")),
        Vec::<String>::new()
    );
    assert_eq!(names(&root.path().join("benchmarks/sha256")).len(), 1);
}

#[test]
fn a_running_stage_keeps_its_folder_while_another_stage_cleans() {
    let dir = tree(&[("a", b"first"), ("b", b"second")]);
    let root = tempfile::tempdir().unwrap();
    let paused = PausedStage::start(dir.path(), root.path(), Stdio::piped);
    let other = tree(&[("x", b"y")]);
    json(&stage("benchmark", other.path(), root.path(), BIG, MANY));
    assert_eq!(
        names(&root.path().join("tmp")).len(),
        1,
        "the live stage's folder was taken"
    );
    let out = paused.resume();
    let staged = json(&out);
    assert_eq!(
        staged["snapshot"]["digest"],
        digest_directory(dir.path(), limits())
            .unwrap()
            .digest
            .to_string()
    );
    assert_eq!(names(&root.path().join("tmp")), Vec::<String>::new());
}

#[test]
fn concurrent_stagers_of_one_tree_converge() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..6u64 {
        write_tree(dir.path(), &[(&format!("big/{i}"), &bytes(i, 3 << 20))]);
    }
    for i in 0..300u64 {
        write_tree(dir.path(), &[(&format!("small/{i:03}"), &bytes(i, 200))]);
    }
    let reference = digest_directory(dir.path(), limits()).unwrap();
    let root = tempfile::tempdir().unwrap();
    let children: Vec<Child> = (0..4)
        .map(|_| {
            stage_cmd("source", dir.path(), root.path(), BIG, MANY)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let results: Vec<Value> = children
        .into_iter()
        .map(|c| json(&c.wait_with_output().unwrap()))
        .collect();
    for result in &results {
        assert_eq!(result, &results[0]);
    }
    assert_eq!(
        results[0]["snapshot"]["digest"],
        reference.digest.to_string()
    );
    assert_eq!(
        names(&root.path().join("sources/sha256")),
        vec![reference.digest.hex()]
    );
    assert_eq!(names(&root.path().join("tmp")), Vec::<String>::new());
    verify_staged(root.path(), StageKind::Source, &reference.digest, limits()).unwrap();
}

/// Stages `dir`, lets `tamper` damage the published copy, and checks that verification
/// notices and that staging again restores a valid tree.
fn assert_tampering_is_repaired(tamper: impl Fn(&Path)) {
    let dir = tree(&[("a", b"alpha"), ("sub/b", b"beta"), ("sub/c", b"gamma")]);
    let root = tempfile::tempdir().unwrap();
    let staged = json(&stage("source", dir.path(), root.path(), BIG, MANY));
    let target = PathBuf::from(staged["path"].as_str().unwrap());
    let digest: Sha256Digest = staged["snapshot"]["digest"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();

    tamper(&target);
    let err = verify_staged(root.path(), StageKind::Source, &digest, limits()).unwrap_err();
    assert!(!matches!(err, VerifyError::Missing(_)), "{err}");

    let again = json(&stage("source", dir.path(), root.path(), BIG, MANY));
    assert_eq!(again, staged);
    verify_staged(root.path(), StageKind::Source, &digest, limits()).unwrap();
    assert_eq!(fs::read(target.join("sub/b")).unwrap(), b"beta");
    assert_eq!(names(&root.path().join("tmp")), Vec::<String>::new());
}

fn unseal(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// Edits the sealed `path` as its owner could: opens it to `open`, runs `edit`, and seals it
/// again to `sealed`, so only the edit itself is left for verification to find.
fn edit_sealed(path: &Path, open: u32, sealed: u32, edit: impl FnOnce()) {
    unseal(path, open);
    edit();
    unseal(path, sealed);
}

#[test]
fn tampered_content_is_replaced() {
    assert_tampering_is_repaired(|target| {
        edit_sealed(&target.join("sub/b"), 0o644, 0o444, || {
            fs::write(target.join("sub/b"), b"BETA").unwrap();
        });
    });
}

#[test]
fn an_added_file_is_replaced() {
    assert_tampering_is_repaired(|target| {
        edit_sealed(&target.join("sub"), 0o755, 0o555, || {
            fs::write(target.join("sub/extra"), b"x").unwrap();
        });
    });
}

#[test]
fn a_loosened_mode_is_replaced() {
    assert_tampering_is_repaired(|target| unseal(&target.join("a"), 0o666));
    assert_tampering_is_repaired(|target| unseal(&target.join("sub"), 0o777));
}

#[test]
fn a_target_swapped_for_a_link_is_replaced() {
    assert_tampering_is_repaired(|target| {
        let elsewhere = target.with_extension("moved");
        fs::rename(target, &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, target).unwrap();
    });
}

#[test]
fn an_unusable_staging_root_is_a_config_error() {
    let dir = tree(&[("a", b"1")]);
    let holder = tempfile::tempdir().unwrap();
    let file_root = holder.path().join("file");
    fs::write(&file_root, b"not a folder").unwrap();
    let out = stage("source", dir.path(), &file_root, BIG, MANY);
    assert_eq!(code(&out), 78, "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("worker: error: staging root"),
        "{}",
        stderr(&out)
    );

    let out = stage("source", dir.path(), &dir.path().join("store"), BIG, MANY);
    assert_eq!(code(&out), 78, "{}", stderr(&out));
    assert!(!dir.path().join("store").exists());
}

#[test]
fn usage_errors_exit_2() {
    let dir = tree(&[("a", b"1")]);
    let d = dir.path().as_os_str();
    let cases: [&[&OsStr]; 6] = [
        &[],
        &["--snapshot-directory".as_ref(), d, "10".as_ref()],
        &[
            "--snapshot-directory".as_ref(),
            d,
            "0".as_ref(),
            "1".as_ref(),
        ],
        &[
            "--snapshot-directory".as_ref(),
            d,
            "1".as_ref(),
            "-1".as_ref(),
        ],
        &[
            "--stage-regression-input".as_ref(),
            "sources".as_ref(),
            d,
            d,
            "1".as_ref(),
            "1".as_ref(),
        ],
        &["--no-such-flag".as_ref()],
    ];
    for args in cases {
        let out = run(args);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty());
    }
}
