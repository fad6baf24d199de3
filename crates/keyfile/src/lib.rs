//! Where the signer and the keeper get their secp256k1 key from.
//!
//! A key comes either from an environment variable whose NAME is given on the command line
//! (the value is the hex key), or from a file that is a regular file (not a symlink) with mode
//! 0600 or stricter. The text is hex, optionally `0x`-prefixed, with optional surrounding
//! whitespace. Every buffer that held key text or key bytes is zeroized when dropped; the
//! loaded key's `Debug` shows only its address, and no error message carries key material
//! (not even the offending character of malformed hex).
//!
//! This crate deliberately does not generate, store or rotate keys, read keys from command-line
//! arguments, or sign anything but a 32-byte prehash; it does not unset the environment
//! variable (that would need `unsafe` in edition 2024; the workflows scope it to one step).

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

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
    /// The path is not a regular file.
    #[error("key file {0} is not a regular file")]
    NotRegularFile(PathBuf),
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
    /// Loads the key from `source`.
    pub fn load(source: &KeySource) -> Result<Self, KeyError> {
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

fn read_file(path: &Path) -> Result<Zeroizing<String>, KeyError> {
    // The lstat gives a clear message for a symlink; O_NOFOLLOW below closes the race where
    // the path is swapped for a link between the two calls.
    let link_meta = std::fs::symlink_metadata(path).map_err(|e| io_error(path, &e))?;
    if link_meta.file_type().is_symlink() {
        return Err(KeyError::Symlink(path.to_owned()));
    }
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                KeyError::Symlink(path.to_owned())
            } else {
                io_error(path, &e)
            }
        })?;
    // Checked on the open descriptor, so the file judged is the file read.
    let meta = file.metadata().map_err(|e| io_error(path, &e))?;
    if !meta.file_type().is_file() {
        return Err(KeyError::NotRegularFile(path.to_owned()));
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
