//! A path-carrying cursor over the job's JSON objects: every getter takes the field's full path
//! (`terms.document.schema_version`), reads the key its last segment names, and names exactly
//! that path in any error, so the rules never spell a key and its path separately.

use serde_json::{Map, Value};

use super::{JobError, Network};
use crate::types::{Address, Bytes32};

/// One JSON object of the job, reached by `path` (empty for the job itself).
#[derive(Clone, Copy)]
pub(super) struct Fields<'a> {
    map: &'a Map<String, Value>,
    path: &'static str,
}

/// The key a field path names: its last `.`-separated segment.
fn key(path: &'static str) -> &'static str {
    path.rsplit('.').next().unwrap_or(path)
}

impl<'a> Fields<'a> {
    /// The job itself; anything but an object is refused as `job`.
    pub(super) fn root(v: &'a Value) -> Result<Self, JobError> {
        let map = v
            .as_object()
            .ok_or(JobError::NotAnObject { field: "job" })?;
        Ok(Self { map, path: "" })
    }

    /// `v`, which must be an object, reached by `path`.
    pub(super) fn object(v: &'a Value, path: &'static str) -> Result<Self, JobError> {
        let map = v.as_object().ok_or(JobError::NotAnObject { field: path })?;
        Ok(Self { map, path })
    }

    fn check_path(&self, path: &'static str) {
        debug_assert!(
            self.path.is_empty()
                || path
                    .strip_prefix(self.path)
                    .is_some_and(|r| r.starts_with('.')),
            "{path} is not a field of {}",
            self.path
        );
    }

    /// Whether the key `path` names is present and not null.
    pub(super) fn has(&self, path: &'static str) -> bool {
        self.check_path(path);
        self.map.get(key(path)).is_some_and(|v| !v.is_null())
    }

    /// The value at `path`; absent or null is [`JobError::Missing`].
    pub(super) fn value(&self, path: &'static str) -> Result<&'a Value, JobError> {
        self.check_path(path);
        match self.map.get(key(path)) {
            None | Some(Value::Null) => Err(JobError::Missing { field: path }),
            Some(v) => Ok(v),
        }
    }

    /// The value at `path`, when present and not null.
    pub(super) fn optional(&self, path: &'static str) -> Option<&'a Value> {
        self.check_path(path);
        self.map.get(key(path)).filter(|v| !v.is_null())
    }

    /// The object at `path`.
    pub(super) fn obj(&self, path: &'static str) -> Result<Self, JobError> {
        Self::object(self.value(path)?, path)
    }

    /// The string at `path`.
    pub(super) fn str(&self, path: &'static str) -> Result<&'a str, JobError> {
        self.value(path)?.as_str().ok_or(JobError::WrongType {
            field: path,
            expected: "a string",
        })
    }

    /// The unsigned integer at `path`.
    pub(super) fn u64(&self, path: &'static str) -> Result<u64, JobError> {
        self.value(path)?.as_u64().ok_or(JobError::WrongType {
            field: path,
            expected: "an unsigned 64-bit integer",
        })
    }

    /// The address at `path`.
    pub(super) fn address(&self, path: &'static str) -> Result<Address, JobError> {
        self.str(path)?
            .parse()
            .map_err(|_| JobError::InvalidAddress { field: path })
    }

    /// The bytes32 value at `path`.
    pub(super) fn bytes32(&self, path: &'static str) -> Result<Bytes32, JobError> {
        self.str(path)?
            .parse()
            .map_err(|_| JobError::InvalidBytes32 { field: path })
    }

    /// The network alias at `path`.
    pub(super) fn network(&self, path: &'static str) -> Result<Network, JobError> {
        let s = self.str(path)?;
        Network::from_alias(s).ok_or_else(|| JobError::UnknownNetwork {
            field: path,
            value: s.chars().take(64).collect(),
        })
    }

    /// The committed hash at `path`, which must equal `computed`.
    pub(super) fn hash(&self, path: &'static str, computed: Bytes32) -> Result<Bytes32, JobError> {
        let given = self.bytes32(path)?;
        if given != computed {
            return Err(JobError::HashMismatch {
                field: path,
                computed,
            });
        }
        Ok(given)
    }
}
