//! The directory digest `agent-bounties/directory-v1` (PROTOCOL §4), with our stricter rules.
//!
//! The hash itself is a single SHA-256 stream, so it is defined here as an incremental
//! [`DirectoryHasher`] that knows nothing about filesystems: the worker's fast staging path
//! feeds it while copying, and [`digest_directory`] is the simple sequential reference walk
//! that tests and tools use to cross-check it.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::types::Sha256Digest;

/// Domain prefix hashed before any file: the 27 ASCII bytes of the name and a NUL.
pub const DIRECTORY_DIGEST_DOMAIN: &[u8; 28] = b"agent-bounties/directory-v1\0";
/// Deepest path (in components) we accept; real repositories stay far below it.
pub const MAX_PATH_COMPONENTS: usize = 128;
/// Most directories a tree may hold.
pub const MAX_DIRECTORIES: u64 = 100_000;

/// Byte and file caps for one tree; both must be positive and exactly the maximum is allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeLimits {
    /// Largest allowed sum of file sizes.
    pub max_bytes: u64,
    /// Largest allowed number of regular files.
    pub max_files: u64,
}

impl TreeLimits {
    /// Checked constructor: both limits must be positive.
    pub fn new(max_bytes: u64, max_files: u64) -> Result<Self, DigestError> {
        if max_bytes == 0 || max_files == 0 {
            return Err(DigestError::ZeroLimit);
        }
        Ok(Self {
            max_bytes,
            max_files,
        })
    }
}

/// The result of hashing a tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Snapshot {
    /// `sha256:<hex>` of the tree.
    pub digest: Sha256Digest,
    /// Number of regular files hashed.
    pub file_count: u64,
    /// Sum of their sizes.
    pub total_bytes: u64,
}

/// Why a tree cannot be digested. Every variant names the offending path where there is one.
#[derive(Debug, thiserror::Error)]
pub enum DigestError {
    /// A limit of zero was given.
    #[error("byte and file limits must both be greater than zero")]
    ZeroLimit,
    /// The tree holds more bytes than allowed.
    #[error("tree exceeds its byte limit of {limit} bytes")]
    TooManyBytes {
        /// The limit that was exceeded.
        limit: u64,
    },
    /// The tree holds more files than allowed.
    #[error("tree exceeds its file limit of {limit} files")]
    TooManyFiles {
        /// The limit that was exceeded.
        limit: u64,
    },
    /// The tree holds more directories than allowed.
    #[error("tree exceeds {MAX_DIRECTORIES} directories")]
    TooManyDirectories,
    /// A path is deeper than [`MAX_PATH_COMPONENTS`].
    #[error("path {0:?} is deeper than {MAX_PATH_COMPONENTS} components")]
    TooDeep(String),
    /// A symbolic link was found.
    #[error("symbolic link not allowed: {0:?}")]
    Symlink(PathBuf),
    /// A socket, fifo, device or other non-regular file was found.
    #[error("special file not allowed: {0:?}")]
    SpecialFile(PathBuf),
    /// A name is not valid UTF-8.
    #[error("file name is not valid UTF-8: {0:?}")]
    NonUtf8Name(PathBuf),
    /// A path component is empty, `.`, `..`, or contains `\` or NUL.
    #[error("invalid path component in {0:?}")]
    InvalidComponent(String),
    /// A file's content did not match the size announced for it (it changed while read).
    #[error("file {path:?} changed while being read (expected {expected} bytes, read {actual})")]
    SizeChanged {
        /// Relative path of the file.
        path: String,
        /// Size announced before reading.
        expected: u64,
        /// Bytes actually read.
        actual: u64,
    },
    /// Paths were not fed in strictly increasing byte order (a caller bug, or a duplicate).
    #[error("path {0:?} is out of order or duplicated")]
    OutOfOrder(String),
    /// The root is not a directory.
    #[error("{0:?} is not a directory")]
    NotADirectory(PathBuf),
    /// An I/O error while reading the tree.
    #[error("reading {path:?}: {source}")]
    Io {
        /// The path being read.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Checks one relative `/`-separated path against the component rules and depth limit.
pub fn validate_relative_path(path: &str) -> Result<(), DigestError> {
    let mut depth = 0usize;
    for component in path.split('/') {
        depth += 1;
        if component.is_empty()
            || component == "."
            || component == ".."
            || component.contains('\\')
            || component.contains('\0')
        {
            return Err(DigestError::InvalidComponent(
                path.chars().take(256).collect(),
            ));
        }
    }
    if depth > MAX_PATH_COMPONENTS {
        return Err(DigestError::TooDeep(path.chars().take(256).collect()));
    }
    Ok(())
}

/// Incremental directory digest. Feed files in strictly increasing byte order of their
/// relative paths with [`DirectoryHasher::begin_file`], then their content, then finish.
pub struct DirectoryHasher {
    sha: Sha256,
    limits: TreeLimits,
    file_count: u64,
    total_bytes: u64,
    last_path: Option<Vec<u8>>,
    current: Option<OpenFile>,
}

struct OpenFile {
    path: String,
    expected: u64,
    read: u64,
}

impl DirectoryHasher {
    /// Starts a digest with the domain prefix already hashed.
    pub fn new(limits: TreeLimits) -> Self {
        let mut sha = Sha256::new();
        sha.update(DIRECTORY_DIGEST_DOMAIN);
        Self {
            sha,
            limits,
            file_count: 0,
            total_bytes: 0,
            last_path: None,
            current: None,
        }
    }

    /// Announces the next file: validates its path, order and the limits, and hashes the
    /// length-prefixed path and size. Any previous file must have been completed.
    pub fn begin_file(&mut self, path: &str, size: u64) -> Result<(), DigestError> {
        self.end_file()?;
        validate_relative_path(path)?;
        if let Some(last) = &self.last_path
            && path.as_bytes() <= last.as_slice()
        {
            return Err(DigestError::OutOfOrder(path.chars().take(256).collect()));
        }
        self.file_count += 1;
        if self.file_count > self.limits.max_files {
            return Err(DigestError::TooManyFiles {
                limit: self.limits.max_files,
            });
        }
        self.total_bytes = self.total_bytes.saturating_add(size);
        if self.total_bytes > self.limits.max_bytes {
            return Err(DigestError::TooManyBytes {
                limit: self.limits.max_bytes,
            });
        }
        self.sha.update((path.len() as u64).to_be_bytes());
        self.sha.update(path.as_bytes());
        self.sha.update(size.to_be_bytes());
        self.last_path = Some(path.as_bytes().to_vec());
        self.current = Some(OpenFile {
            path: path.to_owned(),
            expected: size,
            read: 0,
        });
        Ok(())
    }

    /// Hashes the next chunk of the current file's content.
    pub fn update(&mut self, chunk: &[u8]) -> Result<(), DigestError> {
        let Some(open) = self.current.as_mut() else {
            return Err(DigestError::OutOfOrder(String::from(
                "<content before any file>",
            )));
        };
        open.read += chunk.len() as u64;
        if open.read > open.expected {
            return Err(DigestError::SizeChanged {
                path: open.path.clone(),
                expected: open.expected,
                actual: open.read,
            });
        }
        self.sha.update(chunk);
        Ok(())
    }

    fn end_file(&mut self) -> Result<(), DigestError> {
        if let Some(open) = self.current.take()
            && open.read != open.expected
        {
            return Err(DigestError::SizeChanged {
                path: open.path,
                expected: open.expected,
                actual: open.read,
            });
        }
        Ok(())
    }

    /// Completes the digest; fails if the last file was short.
    pub fn finish(mut self) -> Result<Snapshot, DigestError> {
        self.end_file()?;
        Ok(Snapshot {
            digest: Sha256Digest::from_bytes(self.sha.finalize().into()),
            file_count: self.file_count,
            total_bytes: self.total_bytes,
        })
    }
}

/// One regular file found by [`list_tree`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    /// Relative `/`-separated UTF-8 path.
    pub rel_path: String,
    /// Size reported by `lstat` when listed.
    pub size: u64,
    /// Whether any execute bit was set.
    pub executable: bool,
    /// Device and inode reported by the same `lstat`, so a reader can check that the file it
    /// opened later is the one that was listed (0 where the platform has none).
    pub dev: u64,
    /// See [`TreeEntry::dev`].
    pub ino: u64,
}

/// Lists a tree's regular files sorted by path bytes, enforcing every structural rule
/// (no links or special files, UTF-8 names, depth, directory count) and the limits, without
/// reading any content. Directories are returned too, sorted, so a stager can recreate them.
pub fn list_tree(
    root: &Path,
    limits: TreeLimits,
) -> Result<(Vec<TreeEntry>, Vec<String>), DigestError> {
    let meta = fs::symlink_metadata(root).map_err(|source| DigestError::Io {
        path: root.into(),
        source,
    })?;
    if !meta.is_dir() {
        return Err(DigestError::NotADirectory(root.into()));
    }
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    let mut total: u64 = 0;
    let mut stack: Vec<(PathBuf, String, usize)> = vec![(root.to_path_buf(), String::new(), 0)];
    while let Some((abs, rel, depth)) = stack.pop() {
        let read = fs::read_dir(&abs).map_err(|source| DigestError::Io {
            path: abs.clone(),
            source,
        })?;
        for entry in read {
            let entry = entry.map_err(|source| DigestError::Io {
                path: abs.clone(),
                source,
            })?;
            let name = entry.file_name();
            let child_abs = entry.path();
            let Some(name) = name.to_str() else {
                return Err(DigestError::NonUtf8Name(child_abs));
            };
            let child_rel = if rel.is_empty() {
                name.to_owned()
            } else {
                format!("{rel}/{name}")
            };
            validate_relative_path(&child_rel)?;
            let ft = entry.file_type().map_err(|source| DigestError::Io {
                path: child_abs.clone(),
                source,
            })?;
            if ft.is_symlink() {
                return Err(DigestError::Symlink(child_abs));
            } else if ft.is_dir() {
                if dirs.len() as u64 >= MAX_DIRECTORIES {
                    return Err(DigestError::TooManyDirectories);
                }
                dirs.push(child_rel.clone());
                stack.push((child_abs, child_rel, depth + 1));
            } else if ft.is_file() {
                let m = entry.metadata().map_err(|source| DigestError::Io {
                    path: child_abs.clone(),
                    source,
                })?;
                if files.len() as u64 >= limits.max_files {
                    return Err(DigestError::TooManyFiles {
                        limit: limits.max_files,
                    });
                }
                total = total.saturating_add(m.len());
                if total > limits.max_bytes {
                    return Err(DigestError::TooManyBytes {
                        limit: limits.max_bytes,
                    });
                }
                let (dev, ino) = file_id(&m);
                files.push(TreeEntry {
                    rel_path: child_rel,
                    size: m.len(),
                    executable: is_executable(&m),
                    dev,
                    ino,
                });
            } else {
                return Err(DigestError::SpecialFile(child_abs));
            }
        }
    }
    files.sort_unstable_by(|a, b| a.rel_path.as_bytes().cmp(b.rel_path.as_bytes()));
    dirs.sort_unstable();
    Ok((files, dirs))
}

#[cfg(unix)]
fn is_executable(m: &fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    m.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_m: &fs::Metadata) -> bool {
    false
}

#[cfg(unix)]
fn file_id(m: &fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino())
}

#[cfg(not(unix))]
fn file_id(_m: &fs::Metadata) -> (u64, u64) {
    (0, 0)
}

/// Reference implementation: digests a directory sequentially. The worker has a faster,
/// pipelined path that must agree with this one byte for byte.
pub fn digest_directory(root: &Path, limits: TreeLimits) -> Result<Snapshot, DigestError> {
    let (files, _dirs) = list_tree(root, limits)?;
    let mut hasher = DirectoryHasher::new(limits);
    let mut buf = vec![0u8; 256 * 1024];
    for entry in &files {
        let abs = root.join(&entry.rel_path);
        hasher.begin_file(&entry.rel_path, entry.size)?;
        let mut file = fs::File::open(&abs).map_err(|source| DigestError::Io {
            path: abs.clone(),
            source,
        })?;
        let mut read_total: u64 = 0;
        loop {
            let n = file.read(&mut buf).map_err(|source| DigestError::Io {
                path: abs.clone(),
                source,
            })?;
            if n == 0 {
                break;
            }
            read_total += n as u64;
            let chunk = buf.get(..n).unwrap_or_default();
            hasher.update(chunk)?;
            if read_total > entry.size {
                break;
            }
        }
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> TreeLimits {
        TreeLimits::new(1 << 30, 100_000).unwrap()
    }

    /// Writes `(relative path, content)` pairs under a fresh temporary directory.
    fn tree(files: &[(&str, &[u8])]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, content) in files {
            let p = dir.path().join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, content).unwrap();
        }
        dir
    }

    #[test]
    fn golden_vectors() {
        type Case<'a> = (&'a [(&'a str, &'a [u8])], &'a str);
        let cases: [Case<'_>; 4] = [
            (
                &[("expected.txt", b"expected-output\n")],
                "sha256:f6630a1c99d3a6f27f0505b6e04890a9bbe973a78b2e9c0ff89580dae2967849",
            ),
            (
                &[("result.txt", b"expected-output\n")],
                "sha256:a1a2e7e0e6a698d862c0820310b86655104e5866a45ef62b383ead4c5a3c5249",
            ),
            (
                &[("result.txt", b"unexpected-output\n")],
                "sha256:eaab4b0fc8ff768c2bb16621eddb93c15398a93b203743e1cbc18e9e3eac8ebe",
            ),
            (
                &[],
                "sha256:c6aa1c589e8b19b6ce405068e268ac2a954ef81be68893c39df475a5f4c82b76",
            ),
        ];
        for (files, expected) in cases {
            let dir = tree(files);
            let snap = digest_directory(dir.path(), limits()).unwrap();
            assert_eq!(snap.digest.to_string(), expected);
        }
    }

    #[test]
    fn flat_sort_puts_file_before_sibling_directory_contents() {
        // `a.txt` (0x2e) sorts before `a/b` (0x2f): a per-directory walk would get this wrong.
        let dir = tree(&[("a/b", b"1"), ("a.txt", b"2")]);
        let mut h = DirectoryHasher::new(limits());
        h.begin_file("a.txt", 1).unwrap();
        h.update(b"2").unwrap();
        h.begin_file("a/b", 1).unwrap();
        h.update(b"1").unwrap();
        assert_eq!(
            digest_directory(dir.path(), limits()).unwrap().digest,
            h.finish().unwrap().digest
        );
    }

    #[test]
    fn limits_are_inclusive() {
        let dir = tree(&[("a", b"12"), ("b", b"345")]);
        assert!(digest_directory(dir.path(), TreeLimits::new(5, 2).unwrap()).is_ok());
        assert!(matches!(
            digest_directory(dir.path(), TreeLimits::new(4, 2).unwrap()),
            Err(DigestError::TooManyBytes { limit: 4 })
        ));
        assert!(matches!(
            digest_directory(dir.path(), TreeLimits::new(5, 1).unwrap()),
            Err(DigestError::TooManyFiles { limit: 1 })
        ));
        assert!(TreeLimits::new(0, 1).is_err());
    }

    #[test]
    fn rejects_backslash_and_dot_components() {
        for bad in ["x\\y", "a//b", "./a", "a/..", ""] {
            assert!(validate_relative_path(bad).is_err(), "{bad:?}");
        }
        let dir = tree(&[("x\\y", b"1")]);
        assert!(matches!(
            digest_directory(dir.path(), limits()),
            Err(DigestError::InvalidComponent(_))
        ));
    }

    #[test]
    fn rejects_symlinks() {
        let dir = tree(&[("a", b"1")]);
        std::os::unix::fs::symlink("a", dir.path().join("link")).unwrap();
        assert!(matches!(
            digest_directory(dir.path(), limits()),
            Err(DigestError::Symlink(_))
        ));
    }

    #[test]
    fn depth_limit_allows_forty_levels_and_rejects_129() {
        let deep40 = (0..39)
            .map(|i| format!("d{i}"))
            .collect::<Vec<_>>()
            .join("/")
            + "/f";
        let dir = tree(&[(deep40.as_str(), b"x")]);
        assert!(digest_directory(dir.path(), limits()).is_ok());
        let deep129 = (0..128).map(|_| "d").collect::<Vec<_>>().join("/") + "/f";
        assert!(matches!(
            validate_relative_path(&deep129),
            Err(DigestError::TooDeep(_))
        ));
    }

    #[test]
    fn short_or_long_content_is_a_size_change() {
        let mut h = DirectoryHasher::new(limits());
        h.begin_file("a", 3).unwrap();
        h.update(b"ab").unwrap();
        assert!(matches!(h.finish(), Err(DigestError::SizeChanged { .. })));
        let mut h = DirectoryHasher::new(limits());
        h.begin_file("a", 1).unwrap();
        assert!(matches!(
            h.update(b"ab"),
            Err(DigestError::SizeChanged { .. })
        ));
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;
        use std::collections::BTreeMap;

        /// Relative paths of 1–3 components from a small alphabet, so that prefixes, `.`
        /// versus `/` ordering and file/directory name clashes all occur.
        fn arb_tree() -> impl Strategy<Value = BTreeMap<String, Vec<u8>>> {
            let component = "[a-c.]{1,3}".prop_filter("not . or ..", |c| c != "." && c != "..");
            let path = prop::collection::vec(component, 1..4).prop_map(|c| c.join("/"));
            prop::collection::btree_map(path, prop::collection::vec(any::<u8>(), 0..64), 0..12)
                // A path cannot be both a file and a directory.
                .prop_filter("file/dir clash", |m| {
                    !m.keys()
                        .any(|a| m.keys().any(|b| b.starts_with(&format!("{a}/"))))
                })
        }

        fn hash_in_memory(files: &BTreeMap<String, Vec<u8>>) -> Snapshot {
            let mut sorted: Vec<_> = files.iter().collect();
            sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            let mut h = DirectoryHasher::new(limits());
            for (path, content) in sorted {
                h.begin_file(path, content.len() as u64).unwrap();
                // Feed in uneven chunks: chunking must not matter.
                for chunk in content.chunks(7) {
                    h.update(chunk).unwrap();
                }
            }
            h.finish().unwrap()
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            #[test]
            fn incremental_hasher_agrees_with_the_reference_walk(files in arb_tree()) {
                let borrowed: Vec<(&str, &[u8])> =
                    files.iter().map(|(p, c)| (p.as_str(), c.as_slice())).collect();
                let dir = tree(&borrowed);
                let walked = digest_directory(dir.path(), limits()).unwrap();
                let incremental = hash_in_memory(&files);
                prop_assert_eq!(walked, incremental);
                prop_assert_eq!(walked.file_count, files.len() as u64);
                prop_assert_eq!(walked.total_bytes, files.values().map(|c| c.len() as u64).sum::<u64>());
                // Stable: a second walk gives the same digest.
                prop_assert_eq!(digest_directory(dir.path(), limits()).unwrap(), walked);
            }

            #[test]
            fn digest_is_content_and_name_sensitive(files in arb_tree(), pick in any::<prop::sample::Index>(), byte in any::<u8>()) {
                prop_assume!(!files.is_empty());
                let base = hash_in_memory(&files).digest;
                let key = pick.get(&files.keys().collect::<Vec<_>>()).to_string();

                let mut changed = files.clone();
                let content = changed.get_mut(&key).unwrap();
                if content.is_empty() { content.push(byte) } else { content[0] = content[0].wrapping_add(byte.max(1)) }
                prop_assert_ne!(hash_in_memory(&changed).digest, base);

                let mut renamed = files.clone();
                let content = renamed.remove(&key).unwrap();
                let new_name = format!("{key}x");
                prop_assume!(!renamed.keys().any(|k| *k == new_name || k.starts_with(&format!("{new_name}/"))));
                renamed.insert(new_name, content);
                prop_assert_ne!(hash_in_memory(&renamed).digest, base);

                let mut removed = files.clone();
                removed.remove(&key);
                prop_assert_ne!(hash_in_memory(&removed).digest, base);
            }
        }
    }
}
