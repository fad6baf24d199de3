//! Where the signer and the keeper get their secp256k1 key from.
//!
//! A key comes either from an environment variable whose NAME is given on the command line
//! (the value is the hex key), or from a file that is a regular file owned by the running user
//! with mode 0600 or stricter, reached without any symlink (neither the file nor a parent
//! directory: each component is opened from its parent's descriptor with `O_NOFOLLOW`, so no
//! link swapped in mid-walk is followed either). The text is hex, optionally `0x`-prefixed,
//! with optional surrounding whitespace. Before any key text is read, the process makes itself
//! undumpable (`PR_SET_DUMPABLE` 0, `RLIMIT_CORE` 0): a crash must not write the key's bytes to
//! a core file, and no other process of the same user may ptrace it. Every buffer that held key text or key bytes is zeroized when dropped; the
//! loaded key's `Debug` shows only its address, and no error message carries key material
//! (not even the offending character of malformed hex).
//!
//! This crate deliberately does not generate, store or rotate keys, read keys from command-line
//! arguments, or sign anything but a 32-byte prehash; it does not unset the environment
//! variable (that would need `unsafe` in edition 2024; the workflows scope it to one step).

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags, openat, statat};
use rustix::process::{DumpableBehavior, Resource, Rlimit};

use alloy::primitives::{Address, B256};
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use zeroize::Zeroizing;

/// Longest key file or variable value read. 64 hex digits plus `0x` and whitespace fit many
/// times over; anything longer is not a key and is not read into memory.
pub const MAX_KEY_TEXT_BYTES: usize = 1024;

/// Permission bits a key file may have: owner read and write, nothing else.
const ALLOWED_MODE_BITS: u32 = 0o600;

/// Where to load a key from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// The environment variable with this name holds the hex key.
    Env(String),
    /// This file holds the hex key.
    File(PathBuf),
}

/// Why no key could be loaded. No variant carries key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The variable name is empty or contains `=` or NUL.
    #[error("key environment variable name {0:?} is not a valid name")]
    InvalidEnvName(String),
    /// The variable is not set.
    #[error("key environment variable {0} is not set")]
    EnvMissing(String),
    /// The variable's value is not UTF-8.
    #[error("key environment variable {0} is not valid utf-8")]
    EnvNotUnicode(String),
    /// The path is a symbolic link (refused so the key cannot be redirected elsewhere).
    #[error("key file {0} is a symbolic link; point at the file itself")]
    Symlink(PathBuf),
    /// A directory on the way to the file is a symbolic link.
    #[error(
        "key file {0} is reached through a symbolic link in a parent directory; give its real path"
    )]
    SymlinkedParent(PathBuf),
    /// The path is not a regular file.
    #[error("key file {0} is not a regular file")]
    NotRegularFile(PathBuf),
    /// Another user owns the file, so they can replace the key or read it.
    #[error("key file {path} is owned by uid {uid}, not by the running user (uid {euid})")]
    Owner {
        /// The file.
        path: PathBuf,
        /// Its owner.
        uid: u32,
        /// The running user.
        euid: u32,
    },
    /// Core dumps could not be disabled, so no key is read into this process.
    #[error("cannot make the process undumpable before reading a key: {0}")]
    Harden(String),
    /// The file grants more than owner read/write.
    #[error("key file {path} has mode {mode:04o}; it must be 0600 or stricter (chmod 600)")]
    Permissions {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The file could not be opened or read.
    #[error("reading key file {path} failed: {detail}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error (no file contents).
        detail: String,
    },
    /// The text is longer than [`MAX_KEY_TEXT_BYTES`].
    #[error("key text is longer than {MAX_KEY_TEXT_BYTES} bytes")]
    TooLong,
    /// The text is not 64 hex digits (after trimming and an optional `0x`).
    #[error("key is not 64 hex digits with an optional 0x prefix")]
    Malformed,
    /// The 32 bytes are not a valid secp256k1 secret (zero or not below the curve order).
    #[error("key is not a valid secp256k1 private key")]
    OutOfRange,
    /// Signing failed.
    #[error("signing failed")]
    Signing,
}

/// A loaded private key. Zeroized on drop (the k256 secret inside zeroizes itself);
/// `Debug` prints only the address.
pub struct LoadedKey {
    signer: PrivateKeySigner,
}

impl std::fmt::Debug for LoadedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedKey")
            .field("address", &self.signer.address())
            .field("secret", &"<redacted>")
            .finish()
    }
}

impl LoadedKey {
    /// Loads the key from `source`, after [`disable_core_dumps`].
    pub fn load(source: &KeySource) -> Result<Self, KeyError> {
        disable_core_dumps()?;
        let text = match source {
            KeySource::Env(name) => read_env(name)?,
            KeySource::File(path) => read_file(path)?,
        };
        Self::from_hex_text(&text)
    }

    /// Parses hex key text (optional `0x`, surrounding whitespace allowed).
    pub fn from_hex_text(text: &str) -> Result<Self, KeyError> {
        if text.len() > MAX_KEY_TEXT_BYTES {
            return Err(KeyError::TooLong);
        }
        let trimmed = text.trim();
        let digits = trimmed
            .strip_prefix("0x")
            .or_else(|| trimmed.strip_prefix("0X"))
            .unwrap_or(trimmed);
        if digits.len() != 64 {
            return Err(KeyError::Malformed);
        }
        let mut bytes = Zeroizing::new([0u8; 32]);
        // The hex error names the offending character; it is dropped so no key digit leaks.
        hex::decode_to_slice(digits, bytes.as_mut()).map_err(|_| KeyError::Malformed)?;
        let signer =
            PrivateKeySigner::from_slice(bytes.as_ref()).map_err(|_| KeyError::OutOfRange)?;
        Ok(Self { signer })
    }

    /// The key's Ethereum address.
    pub fn address(&self) -> Address {
        self.signer.address()
    }

    /// The alloy signer, for callers that sign transactions.
    pub fn signer(&self) -> &PrivateKeySigner {
        &self.signer
    }

    /// Signs a 32-byte digest as is (no prefix): 65 bytes `r ‖ s ‖ v` with low `s` and
    /// `v` ∈ {27, 28}.
    pub fn sign_prehash(&self, digest: &[u8; 32]) -> Result<[u8; 65], KeyError> {
        let sig = self
            .signer
            .sign_hash_sync(&B256::from(*digest))
            .map_err(|_| KeyError::Signing)?;
        Ok(sig.as_bytes())
    }
}

/// Reads a secret that is not itself a key (a PKCS#11 token's PIN) from `source` under the same
/// rules as a key: a valid variable name, or a 0600 regular file of this user reached without
/// symlinks, at most [`MAX_KEY_TEXT_BYTES`]; surrounding whitespace trimmed. The text is
/// returned in a zeroizing buffer and never appears in an error.
pub fn load_secret_text(source: &KeySource) -> Result<Zeroizing<String>, KeyError> {
    disable_core_dumps()?;
    let text = match source {
        KeySource::Env(name) => read_env(name)?,
        KeySource::File(path) => read_file(path)?,
    };
    if text.len() > MAX_KEY_TEXT_BYTES {
        return Err(KeyError::TooLong);
    }
    Ok(Zeroizing::new(text.trim().to_owned()))
}

/// Makes this process undumpable and sets its core size limit (soft and hard) to zero, so no
/// crash writes memory holding key bytes to disk and no same-user process can attach to it.
/// [`LoadedKey::load`] calls it before reading anything; it is idempotent.
pub fn disable_core_dumps() -> Result<(), KeyError> {
    rustix::process::set_dumpable_behavior(DumpableBehavior::NotDumpable)
        .map_err(|e| KeyError::Harden(format!("prctl(PR_SET_DUMPABLE, 0): {e}")))?;
    rustix::process::setrlimit(
        Resource::Core,
        Rlimit {
            current: Some(0),
            maximum: Some(0),
        },
    )
    .map_err(|e| KeyError::Harden(format!("setrlimit(RLIMIT_CORE, 0): {e}")))
}

fn read_env(name: &str) -> Result<Zeroizing<String>, KeyError> {
    if name.is_empty() || name.contains('=') || name.contains('\0') {
        return Err(KeyError::InvalidEnvName(name.chars().take(64).collect()));
    }
    match std::env::var(name) {
        Ok(v) => Ok(Zeroizing::new(v)),
        Err(std::env::VarError::NotPresent) => Err(KeyError::EnvMissing(name.to_owned())),
        Err(std::env::VarError::NotUnicode(raw)) => {
            drop(Zeroizing::new(raw.into_encoded_bytes()));
            Err(KeyError::EnvNotUnicode(name.to_owned()))
        }
    }
}

fn io_error(path: &Path, e: &std::io::Error) -> KeyError {
    KeyError::Io {
        path: path.to_owned(),
        detail: e.to_string(),
    }
}

/// Opens `path` one component at a time from the previous directory's descriptor, never
/// following a symlink: a link anywhere on the way is refused, and one swapped in between two
/// steps is not followed either.
fn open_without_links(path: &Path) -> Result<File, KeyError> {
    let io = |e: rustix::io::Errno| io_error(path, &std::io::Error::from(e));
    let dir_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut components: Vec<Component<'_>> = path.components().collect();
    let Some(Component::Normal(name)) = components.pop() else {
        return Err(KeyError::NotRegularFile(path.to_owned()));
    };
    let mut dir = match components.first() {
        Some(Component::RootDir) => openat(CWD, "/", dir_flags, Mode::empty()).map_err(io)?,
        _ => openat(CWD, ".", dir_flags, Mode::empty()).map_err(io)?,
    };
    for component in components {
        let step = match component {
            Component::Normal(step) => step,
            Component::ParentDir => "..".as_ref(),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => continue,
        };
        dir = openat(&dir, step, dir_flags, Mode::empty()).map_err(|e| {
            // With O_PATH a symlink is not refused with ELOOP but fails O_DIRECTORY.
            let is_link = statat(&dir, step, AtFlags::SYMLINK_NOFOLLOW)
                .map(|st| FileType::from_raw_mode(st.st_mode).is_symlink())
                .unwrap_or(false);
            if is_link {
                KeyError::SymlinkedParent(path.to_owned())
            } else {
                io(e)
            }
        })?;
    }
    let fd = openat(
        &dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        if e == rustix::io::Errno::LOOP {
            KeyError::Symlink(path.to_owned())
        } else {
            io(e)
        }
    })?;
    Ok(File::from(fd))
}

fn read_file(path: &Path) -> Result<Zeroizing<String>, KeyError> {
    let file = open_without_links(path)?;
    // Checked on the open descriptor, so the file judged is the file read.
    let meta = file.metadata().map_err(|e| io_error(path, &e))?;
    if !meta.file_type().is_file() {
        return Err(KeyError::NotRegularFile(path.to_owned()));
    }
    let euid = rustix::process::geteuid().as_raw();
    if meta.uid() != euid {
        return Err(KeyError::Owner {
            path: path.to_owned(),
            uid: meta.uid(),
            euid,
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & !ALLOWED_MODE_BITS != 0 {
        return Err(KeyError::Permissions {
            path: path.to_owned(),
            mode,
        });
    }
    let mut buf = Zeroizing::new(Vec::with_capacity(MAX_KEY_TEXT_BYTES + 1));
    file.take(MAX_KEY_TEXT_BYTES as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| io_error(path, &e))?;
    if buf.len() > MAX_KEY_TEXT_BYTES {
        return Err(KeyError::TooLong);
    }
    let text = std::str::from_utf8(&buf).map_err(|_| KeyError::Malformed)?;
    Ok(Zeroizing::new(text.to_owned()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    // Hardhat's published dev key #1; holds value on no real chain.
    const KEY: &str = "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
    const ADDRESS: &str = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

    fn key_file(dir: &Path, contents: &str, mode: u32) -> PathBuf {
        let path = dir.join("key.hex");
        let mut f = File::create(&path).unwrap();
        f.write_all(contents.as_bytes()).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn file_with_mode_0600_is_accepted_with_prefix_and_whitespace() {
        let dir = tempfile::tempdir().unwrap();
        let path = key_file(dir.path(), &format!("  0x{KEY}\n"), 0o600);
        let key = LoadedKey::load(&KeySource::File(path)).unwrap();
        assert_eq!(key.address(), ADDRESS.parse::<Address>().unwrap());
        let path = key_file(dir.path(), KEY, 0o400);
        assert!(LoadedKey::load(&KeySource::File(path)).is_ok());
    }

    #[test]
    fn wider_modes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for mode in [0o644, 0o640, 0o604, 0o700, 0o660, 0o1600] {
            let path = key_file(dir.path(), KEY, mode);
            let err = LoadedKey::load(&KeySource::File(path.clone())).unwrap_err();
            assert_eq!(err, KeyError::Permissions { path, mode }, "mode {mode:o}");
            assert!(err.to_string().contains("0600 or stricter"));
        }
    }

    #[test]
    fn symlink_to_a_good_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = key_file(dir.path(), KEY, 0o600);
        let link = dir.path().join("link.hex");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(
            LoadedKey::load(&KeySource::File(link.clone())).unwrap_err(),
            KeyError::Symlink(link)
        );
    }

    #[test]
    fn key_file_owned_by_another_user_is_refused() {
        // Tests run as root; a file root can read but another uid owns is the case to refuse.
        let dir = tempfile::tempdir().unwrap();
        let path = key_file(dir.path(), KEY, 0o600);
        std::os::unix::fs::chown(&path, Some(12345), Some(12345)).unwrap();
        let err = LoadedKey::load(&KeySource::File(path.clone()));
        assert!(
            matches!(&err, Err(KeyError::Owner { uid: 12345, .. })),
            "{err:?}"
        );
        println!("{}", err.unwrap_err());
    }

    #[test]
    fn key_file_reached_through_a_symlinked_parent_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        key_file(&real, KEY, 0o600);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let through = link.join("key.hex");
        let err = LoadedKey::load(&KeySource::File(through.clone()));
        assert_eq!(err.unwrap_err(), KeyError::SymlinkedParent(through));
        // Deeper, and relative paths too.
        std::fs::create_dir(real.join("sub")).unwrap();
        key_file(&real.join("sub"), KEY, 0o600);
        let deep = link.join("sub/key.hex");
        assert_eq!(
            LoadedKey::load(&KeySource::File(deep.clone())).unwrap_err(),
            KeyError::SymlinkedParent(deep)
        );
        assert!(LoadedKey::load(&KeySource::File(real.join("sub/key.hex"))).is_ok());
        assert!(LoadedKey::load(&KeySource::File(real.join("sub/../key.hex"))).is_ok());
    }

    #[test]
    fn loading_a_key_leaves_the_process_undumpable_with_no_core_limit() {
        // Checked in a child run of this test binary, so the test process's own state (and
        // other tests) cannot make it pass.
        let dir = tempfile::tempdir().unwrap();
        let path = key_file(dir.path(), KEY, 0o600);
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new(exe)
            .args(["--exact", "tests::dumpable_child", "--nocapture"])
            .env("KEYFILE_TEST_DUMPABLE_CHILD", &path)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}");
        println!(
            "{}",
            stdout
                .lines()
                .find(|l| l.starts_with("before"))
                .unwrap_or("")
        );
        println!(
            "{}",
            stdout
                .lines()
                .find(|l| l.starts_with("after"))
                .unwrap_or("")
        );
        assert!(stdout.contains("before: dumpable=Dumpable"), "{stdout}");
        assert!(
            stdout.contains("after: dumpable=NotDumpable core=Some(0)/Some(0)"),
            "{stdout}"
        );
    }

    /// Runs only as the child of the test above: the process state before and after a load.
    #[test]
    fn dumpable_child() {
        let Some(path) = std::env::var_os("KEYFILE_TEST_DUMPABLE_CHILD") else {
            return;
        };
        let show = |when: &str| {
            let core = rustix::process::getrlimit(rustix::process::Resource::Core);
            println!(
                "{when}: dumpable={:?} core={:?}/{:?}",
                rustix::process::dumpable_behavior().unwrap(),
                core.current,
                core.maximum
            );
        };
        show("before");
        LoadedKey::load(&KeySource::File(PathBuf::from(path))).unwrap();
        show("after");
    }

    #[test]
    fn directory_and_missing_file_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(matches!(
            LoadedKey::load(&KeySource::File(dir.path().to_owned())),
            Err(KeyError::NotRegularFile(_) | KeyError::Io { .. })
        ));
        assert!(matches!(
            LoadedKey::load(&KeySource::File(dir.path().join("absent"))),
            Err(KeyError::Io { .. })
        ));
    }

    #[test]
    fn oversized_file_is_refused_without_reading_it_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = key_file(dir.path(), &" ".repeat(MAX_KEY_TEXT_BYTES + 1), 0o600);
        assert_eq!(
            LoadedKey::load(&KeySource::File(path)).unwrap_err(),
            KeyError::TooLong
        );
        let path = key_file(
            dir.path(),
            &format!("{KEY}{}", " ".repeat(MAX_KEY_TEXT_BYTES - KEY.len())),
            0o600,
        );
        assert!(LoadedKey::load(&KeySource::File(path)).is_ok());
    }

    #[test]
    fn env_var_by_name() {
        // `set_var` is unsafe in edition 2024 (and `unsafe` is forbidden), so the variable is
        // given to a child run of this test binary that executes only `env_child`.
        let name = "KEYFILE_TEST_ENV_VAR_BY_NAME";
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new(exe)
            .args(["--exact", "tests::env_child", "--nocapture"])
            .env(name, format!("0x{KEY}\n"))
            .env("KEYFILE_TEST_CHILD", name)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}");
        assert!(stdout.contains(&format!("child-address={}", ADDRESS.to_lowercase())));
        assert!(!stdout.contains(KEY));
        assert_eq!(
            LoadedKey::load(&KeySource::Env("KEYFILE_TEST_SURELY_UNSET".into())).unwrap_err(),
            KeyError::EnvMissing("KEYFILE_TEST_SURELY_UNSET".into())
        );
        assert!(matches!(
            LoadedKey::load(&KeySource::Env("A=B".into())),
            Err(KeyError::InvalidEnvName(_))
        ));
    }

    /// Runs only as the child of `env_var_by_name`, with the variable set in its environment.
    #[test]
    fn env_child() {
        let Ok(name) = std::env::var("KEYFILE_TEST_CHILD") else {
            return;
        };
        let key = LoadedKey::load(&KeySource::Env(name)).unwrap();
        println!("child-address={}", key.address().to_string().to_lowercase());
    }

    #[test]
    fn malformed_key_errors_do_not_echo_the_key() {
        let bad_char = format!("{}z{}", &KEY[..31], &KEY[32..]);
        let short = &KEY[..62];
        for text in [bad_char.as_str(), short, "0x", ""] {
            let err = LoadedKey::from_hex_text(text).unwrap_err();
            assert_eq!(err, KeyError::Malformed);
            let shown = format!("{err} {err:?}");
            // No 4-character run of the text (key digits or the bad character with its
            // neighbours) may appear in what would be logged.
            for window in text.as_bytes().windows(4) {
                let w = std::str::from_utf8(window).unwrap();
                assert!(!shown.contains(w), "{shown} echoes {w}");
            }
        }
        assert_eq!(
            LoadedKey::from_hex_text(&"0".repeat(64)).unwrap_err(),
            KeyError::OutOfRange
        );
        assert_eq!(
            LoadedKey::from_hex_text(&"f".repeat(64)).unwrap_err(),
            KeyError::OutOfRange
        );
    }

    #[test]
    fn debug_is_redacted() {
        let key = LoadedKey::from_hex_text(KEY).unwrap();
        let shown = format!("{key:?} {key:#?}");
        assert!(!shown.to_lowercase().contains(&KEY[..16]), "{shown}");
        assert!(shown.contains("<redacted>"));
        assert!(shown.to_lowercase().contains(&ADDRESS.to_lowercase()));
    }

    #[test]
    fn signature_is_low_s_with_v_27_or_28_and_recovers() {
        let key = LoadedKey::from_hex_text(KEY).unwrap();
        for i in 0u8..16 {
            let digest = [i; 32];
            let sig = key.sign_prehash(&digest).unwrap();
            assert!(sig[64] == 27 || sig[64] == 28);
            let parsed = alloy::primitives::Signature::from_raw_array(&sig).unwrap();
            assert!(parsed.normalize_s().is_none(), "high s");
            assert_eq!(
                parsed
                    .recover_address_from_prehash(&B256::from(digest))
                    .unwrap(),
                key.address()
            );
        }
    }
}
