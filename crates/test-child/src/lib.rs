//! Test-only: a unit test run again, alone, in a child process of its own test binary under a
//! 1 GiB address-space limit (`ulimit -v`). A test of a read that must be bounded (a file that
//! is a link to `/dev/zero`) does its reading there: an unbounded read ends in the child's
//! failed allocation, not in the machine running out of memory.
//!
//! The test checks [`child_dir`] first: set, it is the child and reads; unset, it is the parent,
//! prepares the directory and calls [`assert_passes_in_child`] with its own full name.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

/// What the parent hands the child: the directory it prepared.
const CHILD_DIR: &str = "VERIFIER_TEST_CHILD_DIR";

/// The directory the parent prepared, when this process is the child; `None` in the parent.
pub fn child_dir() -> Option<OsString> {
    std::env::var_os(CHILD_DIR)
}

/// Runs the test `test` (its full path in this test binary, as `--exact` takes it) again in a
/// child under a 1 GiB address-space limit, with [`child_dir`] answering `dir`, and asserts it
/// passed; `what` says what the child reads, in the failure message.
pub fn assert_passes_in_child(test: &str, dir: &Path, what: &str) {
    let current = std::env::current_exe().unwrap_or_else(|e| panic!("the test binary: {e}"));
    let out = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 1048576 && exec \"$0\" \"$@\"")
        .arg(current)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir)
        .output()
        .unwrap_or_else(|e| panic!("running {test} in a child: {e}"));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{what} under a 1 GiB limit: {}\n{stdout}{stderr}",
        out.status
    );
}
