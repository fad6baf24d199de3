//! Records the git revision the binaries are built from, for `--version`.
//!
//! Outside a git checkout (a source tarball) the revision is `unknown`; a build never fails
//! for want of git.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8(out.stdout).ok()?.trim().to_owned())
}

fn main() {
    let revision = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    let revision = if dirty {
        format!("{revision}-modified")
    } else {
        revision
    };
    println!("cargo:rustc-env=VERIFIER_GIT_REVISION={revision}");
    // Rebuild when HEAD moves (commit, checkout) or the index changes (the dirty marker).
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        for file in ["HEAD", "logs/HEAD", "index"] {
            println!("cargo:rerun-if-changed={git_dir}/{file}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
