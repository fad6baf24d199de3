//! Request files of `--run-regression`, `--validate-regression-candidate` and `plan`: a
//! bounded JSON object with exactly the keys a mode expects.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Largest request file we read; a job is a few KiB, so this only stops abuse.
pub const MAX_REQUEST_BYTES: u64 = 4 << 20;

/// Why a request file could not be turned into a job value.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The file could not be read.
    #[error("reading request {path:?}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than [`MAX_REQUEST_BYTES`].
    #[error("request is larger than {MAX_REQUEST_BYTES} bytes")]
    TooLarge,
    /// The file is not JSON.
    #[error("request is not valid JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// The JSON is not an object with exactly the expected keys.
    #[error("request must be an object with exactly the keys {expected:?}; got {got:?}")]
    Shape {
        /// The keys we require.
        expected: &'static [&'static str],
        /// The keys present (truncated).
        got: Vec<String>,
    },
}

/// Reads a request file: bounded size, JSON, an object with exactly the keys `expected`.
/// Unknown keys are refused so a request can never smuggle in a host path or a policy override.
pub fn read_request(
    path: &Path,
    expected: &'static [&'static str],
) -> Result<serde_json::Map<String, Value>, RequestError> {
    let io = |source| RequestError::Io {
        path: path.to_owned(),
        source,
    };
    let bytes = artifact_fs::read_named(path, MAX_REQUEST_BYTES).map_err(|e| match e {
        artifact_fs::ReadError::TooLarge { .. } => RequestError::TooLarge,
        e => io(e.into_io()),
    })?;
    let value: Value = serde_json::from_slice(&bytes).map_err(RequestError::Json)?;
    let Value::Object(map) = value else {
        return Err(RequestError::Shape {
            expected,
            got: vec![],
        });
    };
    let mut got: Vec<String> = map
        .keys()
        .take(16)
        .map(|k| k.chars().take(64).collect())
        .collect();
    got.sort();
    let mut want: Vec<String> = expected.iter().map(|k| (*k).to_owned()).collect();
    want.sort();
    if got != want || map.len() != expected.len() {
        return Err(RequestError::Shape { expected, got });
    }
    Ok(map)
}
