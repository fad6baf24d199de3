//! Loading the keeper's transaction key.
//!
//! INTERIM: the shared `keyfile` crate (signer branch) replaces this module once merged. The
//! rules are the same: the key comes from an environment variable NAME or a file with mode
//! 0600 or tighter, lives only in zeroizing buffers, and never appears in an error.

use std::io::Read;
use std::path::PathBuf;

use alloy::signers::local::PrivateKeySigner;
use zeroize::Zeroizing;

/// Where the key comes from (the CLI never takes the key itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// Name of an environment variable holding 0x-hex.
    Env(String),
    /// Path of a file holding 0x-hex.
    File(PathBuf),
}

/// The key could not be loaded. Messages never contain key material.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The variable is unset or empty.
    #[error("key environment variable {0} is unset or empty")]
    EnvMissing(String),
    /// The file cannot be read.
    #[error("key file {path} cannot be read: {kind}")]
    FileUnreadable {
        /// The path.
        path: PathBuf,
        /// The error kind.
        kind: std::io::ErrorKind,
    },
    /// The file is readable by group or others, or is not a regular file.
    #[error("key file {0} must be a regular file with mode 0600 or tighter")]
    FilePermissions(PathBuf),
    /// The contents are not a secp256k1 key in hex.
    #[error("key is not 32 bytes of 0x-hex for a valid secp256k1 key")]
    Malformed,
}

/// Loads the signer.
pub fn load_signer(source: &KeySource) -> Result<PrivateKeySigner, KeyError> {
    let text: Zeroizing<String> = match source {
        KeySource::Env(name) => match std::env::var(name) {
            Ok(v) if !v.trim().is_empty() => Zeroizing::new(v),
            _ => return Err(KeyError::EnvMissing(name.clone())),
        },
        KeySource::File(path) => read_key_file(path)?,
    };
    let trimmed = text.trim();
    let digits = trimmed.strip_prefix("0x").unwrap_or(trimmed);
    if digits.len() != 64 {
        return Err(KeyError::Malformed);
    }
    let mut bytes = Zeroizing::new([0u8; 32]);
    hex::decode_to_slice(digits, bytes.as_mut_slice()).map_err(|_| KeyError::Malformed)?;
    PrivateKeySigner::from_slice(bytes.as_slice()).map_err(|_| KeyError::Malformed)
}

fn read_key_file(path: &PathBuf) -> Result<Zeroizing<String>, KeyError> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let unreadable = |e: std::io::Error| KeyError::FileUnreadable {
        path: path.clone(),
        kind: e.kind(),
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(unreadable)?;
    let meta = file.metadata().map_err(unreadable)?;
    if !meta.is_file() || meta.mode() & 0o077 != 0 {
        return Err(KeyError::FilePermissions(path.clone()));
    }
    let mut text = Zeroizing::new(String::new());
    file.take(4096)
        .read_to_string(&mut text)
        .map_err(|_| KeyError::Malformed)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const DEV0: &str = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";

    #[test]
    fn file_key_needs_0600_and_errors_never_echo_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, format!("{DEV0}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = load_signer(&KeySource::File(path.clone())).unwrap_err();
        assert!(matches!(err, KeyError::FilePermissions(_)));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let signer = load_signer(&KeySource::File(path.clone())).unwrap();
        assert_eq!(
            signer.address().to_string().to_lowercase(),
            "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"
        );
        std::fs::write(&path, &DEV0[..60]).unwrap();
        let err = load_signer(&KeySource::File(path)).unwrap_err();
        assert!(matches!(err, KeyError::Malformed));
        assert!(!format!("{err} {err:?}").contains(&DEV0[2..40]));
        let err = load_signer(&KeySource::Env("KEEPER_TEST_SURELY_UNSET_VAR".into())).unwrap_err();
        assert!(matches!(err, KeyError::EnvMissing(_)));
    }
}
