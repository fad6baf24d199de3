//! `worker gc` on a real staging store and the real Docker daemon: old trees and evidence go,
//! a tree a container mounts stays, young entries stay, links are never followed, a dry run
//! removes nothing, and the read-only staged trees go even without root's override of file
//! permissions (the process runs with CAP_DAC_OVERRIDE dropped, like a non-root user, for
//! whom a plain `rm -rf` of the same tree fails).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use crate::support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use serde_json::Value;

const WORKER: &str = env!("CARGO_BIN_EXE_worker");
const DAY: Duration = Duration::from_secs(86_400);

fn stage(root: &Path, kind: &str, dir: &Path) -> PathBuf {
    let staged = support::stage_with_cli(root, kind, dir, "1048576", "100");
    PathBuf::from(staged["path"].as_str().unwrap())
}

/// A small tree with a nested read-only directory once staged.
fn tree(parent: &Path, name: &str, content: &str) -> PathBuf {
    let dir = parent.join(name);
    fs::create_dir_all(dir.join("nested/deeper")).unwrap();
    fs::write(dir.join("nested/deeper/file.txt"), content).unwrap();
    fs::write(dir.join("top.txt"), content.repeat(100)).unwrap();
    dir
}

fn backdate(path: &Path, age: Duration) {
    let when = SystemTime::now() - age;
    let file = fs::File::open(path).unwrap();
    file.set_times(fs::FileTimes::new().set_modified(when).set_accessed(when))
        .unwrap();
}

/// A `{}` record `<root>/<folder>/<hex>.json`, its name `fill` 64 times.
fn json_entry(root: &Path, folder: &str, fill: char) -> PathBuf {
    let dir = root.join(folder);
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{}.json", fill.to_string().repeat(64)));
    fs::write(&path, b"{}").unwrap();
    path
}

fn evidence(root: &Path, fill: char) -> PathBuf {
    json_entry(root, "evidence/sha256", fill)
}

/// An entry of the executable-resolution cache (`<root>/executables/<hex>.json`).
fn executable_entry(root: &Path, fill: char) -> PathBuf {
    json_entry(root, "executables", fill)
}

/// `worker gc` with CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH out of the bounding set, so
/// read-only directories stop it exactly as they stop a non-root user.
fn gc(root: &Path, extra: &[&str]) -> Output {
    Command::new("setpriv")
        .arg("--bounding-set=-dac_override,-dac_read_search")
        .arg(WORKER)
        .args(["gc", "--staging-root"])
        .arg(root)
        .args(extra)
        .env_remove("DOCKER_HOST")
        .output()
        .expect("setpriv (util-linux) runs gc without root's permission override")
}

fn docker(args: &[&str]) -> String {
    support::docker_cli(args).trim().to_owned()
}

/// A created (not started) container bind-mounting `path`; removed on drop.
struct Mounting(String);

impl Mounting {
    fn new(path: &Path) -> Self {
        let id = docker(&[
            "create",
            "--label",
            "dev.agent-bounties.test=gc",
            "-v",
            &format!("{}:/mnt:ro", path.display()),
            &support::busybox(),
            "true",
        ]);
        Self(id)
    }
}

impl Drop for Mounting {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rm", "-f", &self.0]).output();
    }
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn freed_paths(report: &Value) -> Vec<String> {
    report["freed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn gc_removes_old_unreferenced_trees_and_evidence_but_keeps_a_mounted_tree() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("inputs");
    let root = dir.path().join("staging");
    let old = stage(&root, "source", &tree(&inputs, "old", "old"));
    let mounted = stage(&root, "source", &tree(&inputs, "mounted", "mounted"));
    let young = stage(&root, "source", &tree(&inputs, "young", "young"));
    let bench = stage(&root, "benchmark", &tree(&inputs, "bench", "bench"));
    let old_evidence = evidence(&root, 'a');
    let young_evidence = evidence(&root, 'b');
    let old_executable = executable_entry(&root, 'c');
    let young_executable = executable_entry(&root, 'd');
    for path in [&old, &mounted, &bench, &old_evidence, &old_executable] {
        backdate(path, 10 * DAY);
    }
    backdate(&young, 2 * DAY);

    // Without the override a plain recursive removal of a staged tree fails half-way: the
    // problem gc exists to solve.
    let rm = Command::new("setpriv")
        .arg("--bounding-set=-dac_override,-dac_read_search")
        .args(["rm", "-rf"])
        .arg(&old)
        .output()
        .unwrap();
    assert!(!rm.status.success(), "rm -rf of a 0555 tree worked: {rm:?}");
    assert!(old.exists());

    let _container = Mounting::new(&mounted);
    let out = gc(&root, &["--older-than", "7d", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let report = json(&out);
    assert_eq!(report["schema_version"], "agent-bounties/worker-gc-v1");
    assert_eq!(report["dry_run"], false);
    let mut freed = freed_paths(&report);
    freed.sort();
    let mut expected = vec![
        old.display().to_string(),
        bench.display().to_string(),
        old_evidence.display().to_string(),
        old_executable.display().to_string(),
    ];
    expected.sort();
    assert_eq!(freed, expected, "{report}");
    assert!(report["freed_bytes"].as_u64().unwrap() >= 300 + 500);
    assert_eq!(report["kept_in_use"][0], mounted.display().to_string());
    assert!(!old.exists() && !bench.exists() && !old_evidence.exists());
    assert!(mounted.join("nested/deeper/file.txt").is_file());
    assert!(young.join("top.txt").is_file());
    assert!(young_evidence.is_file());
    assert!(!old_executable.exists() && young_executable.is_file());
}

#[test]
fn gc_dry_run_removes_nothing_and_says_what_it_would_free() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("staging");
    let old = stage(&root, "source", &tree(dir.path(), "old", "old"));
    backdate(&old, 8 * DAY);
    let out = gc(&root, &["--older-than", "1w", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(&format!("would free source {}", old.display())),
        "{text}"
    );
    assert!(text.contains("would free"), "{text}");
    assert!(old.join("nested/deeper/file.txt").is_file());
}

#[test]
fn gc_never_follows_a_link_planted_in_the_store_or_in_a_tree() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("staging");
    let outside = dir.path().join("outside");
    fs::create_dir_all(outside.join("sub")).unwrap();
    fs::write(outside.join("sub/keep.txt"), "keep").unwrap();
    let old = stage(&root, "source", &tree(dir.path(), "old", "old"));
    // A link named like a tree in the store, and one inside a tree (as root, who could).
    let store = old.parent().unwrap();
    let planted = store.join("f".repeat(64));
    std::os::unix::fs::symlink(&outside, &planted).unwrap();
    let nested = old.join("nested");
    let mode = |p: &Path, m: u32| {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(p, fs::Permissions::from_mode(m)).unwrap();
    };
    mode(&nested, 0o755);
    std::os::unix::fs::symlink(&outside, nested.join("escape")).unwrap();
    mode(&nested, 0o555);
    backdate(&old, 30 * DAY);
    let out = gc(&root, &["--older-than", "1d", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(freed_paths(&json(&out)), [old.display().to_string()]);
    assert!(!old.exists());
    assert!(outside.join("sub/keep.txt").is_file(), "followed a link");
    // The planted link is not the store's: left alone, and its target untouched.
    assert!(fs::symlink_metadata(&planted).unwrap().is_symlink());
}

#[test]
fn gc_age_is_required_and_checked() {
    for args in [
        &["gc"][..],
        &["gc", "--older-than", "7"],
        &["gc", "--older-than", "x7d"],
    ] {
        let out = Command::new(WORKER).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    }
}

#[test]
fn gc_without_an_engine_removes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("staging");
    let old = stage(&root, "source", &tree(dir.path(), "old", "old"));
    backdate(&old, 8 * DAY);
    let out = Command::new(WORKER)
        .args(["gc", "--older-than", "1d", "--staging-root"])
        .arg(&root)
        .env("DOCKER_HOST", "tcp://127.0.0.1:9")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nothing was removed"),
        "{out:?}"
    );
    assert!(old.is_dir());
}
