//! `--version --verbose`: which build a binary is, in enough detail for someone who rebuilds
//! the commit to compare (docs/rebuild.md): the full source commit, whether the tree was
//! clean, the sha256 of Cargo.lock, the compiler, and the sha256 of the running executable.
//!
//! The first four are fixed at compile time (build.rs) and carry nothing of the machine that
//! built them; the last one is read from `/proc/self/exe` when asked, since it cannot be
//! known before the binary exists.

use std::ffi::OsString;
use std::io::Read;

/// The full commit the binary was built from (`unknown` outside git).
pub const COMMIT: &str = env!("VERIFIER_GIT_COMMIT");
/// `clean`, or `dirty` when tracked files differed from the commit.
pub const TREE: &str = env!("VERIFIER_GIT_TREE");
/// SHA-256 of the workspace's Cargo.lock as built (lowercase hex, or `unknown`).
pub const CARGO_LOCK_SHA256: &str = env!("VERIFIER_CARGO_LOCK_SHA256");
/// The compiler's `rustc -vV` release line.
pub const RUSTC: &str = env!("VERIFIER_RUSTC");

/// Reading the running executable failed.
#[derive(Debug, thiserror::Error)]
pub enum SelfDigestError {
    /// `/proc/self/exe` could not be opened or read.
    #[error("reading the running executable (/proc/self/exe): {0}")]
    Read(#[from] std::io::Error),
}

/// SHA-256 of the running executable, lowercase hex. Read through `/proc/self/exe`, which names
/// the file this process was started from even when its path has since been replaced.
pub fn self_sha256() -> Result<String, SelfDigestError> {
    use sha2::{Digest, Sha256};
    let mut file = std::fs::File::open("/proc/self/exe")?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(buf.get(..n).unwrap_or_default());
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// True when the arguments (without the program name) are exactly `--version --verbose`, in
/// either order (`-V` for `--version`). Anything else is left to clap, so no subcommand's own
/// `--verbose` is ever taken for this.
pub fn verbose_requested<I: IntoIterator<Item = OsString>>(args: I) -> bool {
    let args: Vec<OsString> = args.into_iter().take(3).collect();
    let is = |a: &OsString, names: &[&str]| names.iter().any(|n| a == n);
    match args.as_slice() {
        [a, b] => {
            (is(a, &["--version", "-V"]) && is(b, &["--verbose"]))
                || (is(a, &["--verbose"]) && is(b, &["--version", "-V"]))
        }
        _ => false,
    }
}

/// The `--version --verbose` text of `binary`: one `key: value` line each.
pub fn verbose_text(binary: &str, self_sha256: &Result<String, SelfDigestError>) -> String {
    let exe = match self_sha256 {
        Ok(hex) => hex.clone(),
        Err(e) => format!("unknown ({e})"),
    };
    format!(
        "{binary} {version}\ncommit: {COMMIT}\ntree: {TREE}\ncargo-lock-sha256: {CARGO_LOCK_SHA256}\n\
         toolchain: {RUSTC}\nbinary-sha256: {exe}\n",
        version = crate::VERSION
    )
}

/// Prints [`verbose_text`] of the running binary on stdout.
pub fn print_verbose(binary: &str) {
    print!("{}", verbose_text(binary, &self_sha256()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn only_exactly_version_and_verbose_ask_for_the_long_version() {
        assert!(verbose_requested(args(&["--version", "--verbose"])));
        assert!(verbose_requested(args(&["--verbose", "-V"])));
        assert!(!verbose_requested(args(&["--version"])));
        assert!(!verbose_requested(args(&[
            "feed",
            "--verbose",
            "--version"
        ])));
        assert!(!verbose_requested(args(&["--version", "--verbose", "x"])));
        assert!(!verbose_requested(args(&["--verbose"])));
    }

    #[test]
    fn the_long_version_names_commit_tree_lock_toolchain_and_binary() {
        let text = verbose_text("worker", &Ok("ab".repeat(32)));
        assert!(
            text.starts_with(&format!("worker {}\n", crate::VERSION)),
            "{text}"
        );
        assert!(
            COMMIT == "unknown"
                || (COMMIT.len() == 40 && COMMIT.bytes().all(|b| b.is_ascii_hexdigit())),
            "{COMMIT}"
        );
        assert!(TREE == "clean" || TREE == "dirty", "{TREE}");
        assert_eq!(CARGO_LOCK_SHA256.len(), 64, "{CARGO_LOCK_SHA256}");
        assert!(RUSTC.starts_with("rustc "), "{RUSTC}");
        assert!(
            text.contains(&format!("binary-sha256: {}\n", "ab".repeat(32))),
            "{text}"
        );
    }

    #[test]
    fn the_running_test_binary_hashes_to_its_file_on_disk() {
        use sha2::{Digest, Sha256};
        let Ok(path) = std::env::current_exe() else {
            panic!("no current_exe")
        };
        let on_disk: String = std::fs::read(path)
            .map(|b| {
                Sha256::digest(&b)
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(self_sha256().ok(), Some(on_disk));
    }
}
