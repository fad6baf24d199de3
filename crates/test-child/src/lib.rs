//! Test-only: a unit test run again, alone, in a child process of its own test binary under a
//! 1 GiB address-space limit (`ulimit -v`). A test of a read that must be bounded (a file that
//! is a link to `/dev/zero`) does its reading there: an unbounded read ends in the child's
//! failed allocation, not in the machine running out of memory.

use std::path::Path;
use std::process::Command;

/// What the parent hands the child: the directory it prepared.
const CHILD_DIR: &str = "VERIFIER_TEST_CHILD_DIR";

/// The test `test` (its full path in this test binary, as `--exact` takes it) with a file
/// `name` that is a link to `/dev/zero`: in the parent, the link is made in a fresh directory
/// and the test run again in a child under the limit, which must pass; in that child, `read`
/// is given the link, and asserts what the test asserts of it.
pub fn read_dev_zero_link_in_child(test: &str, name: &str, read: impl FnOnce(&Path)) {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        read(&Path::new(&dir).join(name));
        return;
    }
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("a directory for the link: {e}"));
    std::os::unix::fs::symlink("/dev/zero", dir.path().join(name))
        .unwrap_or_else(|e| panic!("linking {name} to /dev/zero: {e}"));
    assert_passes_in_child(
        test,
        dir.path(),
        &format!("reading {name} linked to /dev/zero"),
    );
}

/// Runs the test `test` again in a child under a 1 GiB address-space limit, with `dir` as the
/// prepared directory, and asserts it passed; `what` says what the child reads, in the failure
/// message.
fn assert_passes_in_child(test: &str, dir: &Path, what: &str) {
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
