//! Records what the binaries are built from, for `--version` and `--version --verbose`: the git
//! revision (short and full), whether the tree was clean, the sha256 of the workspace's
//! Cargo.lock and the compiler's `rustc -vV` release line.
//!
//! Everything recorded is a function of the source and the toolchain, never of the machine,
//! the directory or the time of the build, so two builds of one commit stay bit-identical
//! (scripts/reproduce-build.sh). Outside a git checkout (a source tarball) the revision is
//! `unknown`; a build never fails for want of git.

use std::path::Path;
use std::process::Command;

use sha2::{Digest, Sha256};

fn run(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8(out.stdout).ok()?.trim().to_owned())
}

fn git(args: &[&str]) -> Option<String> {
    run("git", args)
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let short = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    let revision = if dirty {
        format!("{short}-modified")
    } else {
        short
    };
    println!("cargo:rustc-env=VERIFIER_GIT_REVISION={revision}");
    println!("cargo:rustc-env=VERIFIER_GIT_COMMIT={commit}");
    println!(
        "cargo:rustc-env=VERIFIER_GIT_TREE={}",
        if dirty { "dirty" } else { "clean" }
    );

    // The workspace's lock file: two crates above this one.
    let lock =
        std::env::var_os("CARGO_MANIFEST_DIR").map(|dir| Path::new(&dir).join("../../Cargo.lock"));
    let lock_sha256 = lock
        .as_deref()
        .and_then(|path| std::fs::read(path).ok())
        .map(|bytes| {
            Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        })
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=VERIFIER_CARGO_LOCK_SHA256={lock_sha256}");
    if let Some(lock) = lock {
        println!("cargo:rerun-if-changed={}", lock.display());
    }

    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let toolchain = run(&rustc, &["-vV"])
        .and_then(|v| v.lines().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=VERIFIER_RUSTC={toolchain}");

    // Rebuild when HEAD moves (commit, checkout) or the index changes (the dirty marker).
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        for file in ["HEAD", "logs/HEAD", "index"] {
            println!("cargo:rerun-if-changed={git_dir}/{file}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
