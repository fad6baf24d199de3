//! Test-only (feature `testing`, for dev-dependencies): the checks of these conventions that
//! each binary's own tests run on it, so the binaries are held to one definition of them.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use std::process::{Command, Output};

/// Asserts that `exe --version` succeeds and prints `name 0.…` ending in the git revision in
/// parentheses ([`crate::VERSION`]).
pub fn assert_version_names_git_revision(exe: &str, name: &str) {
    let out = Command::new(exe).arg("--version").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with(&format!("{name} 0.")), "{text}");
    assert!(text.trim_end().ends_with(')'), "no revision in {text:?}");
}

/// The error object a command that failed under `--json` printed: asserts that its stdout is
/// exactly one line, a JSON value of [`crate::ERROR_SCHEMA`], and that its stderr is not empty.
pub fn error_object(out: &Output) -> serde_json::Value {
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    assert_eq!(stdout.lines().count(), 1, "{out:?}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["schema_version"], "agent-bounties/cli-error-v1");
    assert!(!String::from_utf8_lossy(&out.stderr).is_empty());
    v
}
