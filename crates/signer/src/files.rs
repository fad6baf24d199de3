//! Bounded, link-refusing file reads from the candidates directory and atomic writes to the
//! output directory.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Largest manifest accepted.
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// Largest candidate file accepted.
pub const MAX_CANDIDATE_BYTES: u64 = 16 << 20;

/// Why a file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The path is a symbolic link or not a regular file.
    #[error("{0} is not a regular file (symlinks are refused)")]
    NotRegular(PathBuf),
    /// Bigger than its cap.
    #[error("{path} is larger than {limit} bytes")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The cap.
        limit: u64,
    },
    /// Not JSON.
    #[error("{path} is not valid json: {detail}")]
    Json {
        /// The file.
        path: PathBuf,
        /// Parser message.
        detail: String,
    },
    /// An I/O error.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> FileError + '_ {
    move |source| FileError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Reads `path` as JSON: a regular file (the final component may not be a symlink), at most
/// `limit` bytes, never reading past the cap.
pub fn read_json(path: &Path, limit: u64) -> Result<Value, FileError> {
    let buf = artifact_fs::read_bounded(path, limit).map_err(|e| match e {
        artifact_fs::ReadError::NotRegular(path) => FileError::NotRegular(path),
        artifact_fs::ReadError::TooLarge { path, limit } => FileError::TooLarge { path, limit },
        artifact_fs::ReadError::Io { path, source } => FileError::Io { path, source },
    })?;
    serde_json::from_slice(&buf).map_err(|e| FileError::Json {
        path: path.to_owned(),
        detail: e.to_string().chars().take(256).collect(),
    })
}

/// Writes `value` as pretty JSON to `dir/name` through [`artifact_fs::write_atomic`], so a
/// reader never sees a half-written attestation and nothing planted in `dir` is written
/// through.
pub fn write_json(dir: &Path, name: &str, value: &Value) -> Result<PathBuf, FileError> {
    let path = dir.join(name);
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|e| FileError::Json {
        path: path.clone(),
        detail: e.to_string(),
    })?;
    bytes.push(b'\n');
    artifact_fs::write_atomic(&path, &bytes).map_err(io(&path))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn read_json_enforces_the_cap_and_refuses_links_and_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("ok.json");
        std::fs::write(&ok, b"{\"a\":1}").unwrap();
        assert_eq!(read_json(&ok, 7).unwrap()["a"], 1);
        assert!(matches!(
            read_json(&ok, 6),
            Err(FileError::TooLarge { limit: 6, .. })
        ));
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&ok, &link).unwrap();
        assert!(matches!(
            read_json(&link, 100),
            Err(FileError::NotRegular(_))
        ));
        assert!(matches!(
            read_json(dir.path(), 100),
            Err(FileError::NotRegular(_))
        ));
        std::fs::write(&ok, b"{not json").unwrap();
        assert!(matches!(read_json(&ok, 100), Err(FileError::Json { .. })));
    }

    #[test]
    fn write_json_replaces_atomically() {
        let dir = tempfile::tempdir().unwrap();
        write_json(dir.path(), "a.json", &serde_json::json!({"v": 1})).unwrap();
        let p = write_json(dir.path(), "a.json", &serde_json::json!({"v": 2})).unwrap();
        assert_eq!(read_json(&p, 100).unwrap()["v"], 2);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
