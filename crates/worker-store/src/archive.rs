//! Safe extraction of a GitHub exact-commit `tar.gz` (codeload format).
//!
//! The archive is hostile input. It is read as a stream: compressed bytes, decompressed bytes
//! and entries are each counted against a cap while reading, and the selected subtree is held
//! to the manifest's byte and file caps. Only regular files and directories with clean UTF-8
//! relative paths under exactly one top-level folder are accepted; links, devices, fifos,
//! absolute paths, `..`, `.`, empty components, backslashes and duplicates fail the whole
//! archive, and so does a selected entry the local filesystem cannot hold (a name over
//! [`MAX_NAME_BYTES`], a path over [`MAX_PATH_BYTES`]): the same bytes are refused the same way
//! on every attempt, so it is a rule refusal, never a local write failure to retry. Nothing is
//! ever overwritten (files are created with `O_EXCL`), no link is created
//! or followed, and on any failure the partial extraction is removed.
//!
//! Extension records (GNU long name and long link, pax local and global headers) are read
//! here rather than by the `tar` crate, which buffers them whole: each is refused before
//! reading once its size is over [`MAX_EXTENSION_HEADER_BYTES`], a pending record must be
//! followed by the member it describes, and a pax `size` that disagrees with the member's
//! header (parsers would then see different files in the same archive) fails the archive.

use std::cell::Cell;
use std::collections::HashSet;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::rc::Rc;

use tar::EntryType;
use verifier_sdk::digest::validate_relative_path;
use verifier_sdk::{CommitId, GithubRepo, RelativeDir, RunnerManifest};

/// Where exact-commit archives come from unless configured otherwise.
pub const DEFAULT_ARCHIVE_BASE: &str = "https://codeload.github.com";
/// Most entries an archive may hold (PROTOCOL §7).
pub const MAX_ENTRIES: u64 = 100_000;
/// Largest extension record (GNU long name or long link, pax header) accepted; a record over
/// it is refused before it is read. Real ones hold one path and a few attributes.
pub const MAX_EXTENSION_HEADER_BYTES: u64 = 64 << 10;
/// Longest name of one path component the filesystem holds (Linux `NAME_MAX`).
pub const MAX_NAME_BYTES: usize = 255;
/// Longest path the kernel takes (Linux `PATH_MAX`, with its terminating NUL): an entry whose
/// path under the destination is this long or longer cannot be created there.
pub const MAX_PATH_BYTES: usize = 4096;
/// Source archive caps (PROTOCOL §7).
pub const SOURCE_MAX_COMPRESSED: u64 = 256 << 20;
/// Source archive caps (PROTOCOL §7).
pub const SOURCE_MAX_UNCOMPRESSED: u64 = 512 << 20;
/// Benchmark archive caps (PROTOCOL §7).
pub const BENCHMARK_MAX_COMPRESSED: u64 = 128 << 20;
/// Benchmark archive caps (PROTOCOL §7).
pub const BENCHMARK_MAX_UNCOMPRESSED: u64 = 256 << 20;

/// `{archive_base}/{owner}/{repo}/tar.gz/{commit}`. Owner, repo and commit are validated
/// types whose characters need no escaping.
pub fn archive_url(archive_base: &str, repo: &GithubRepo, commit: &CommitId) -> String {
    format!(
        "{}/{}/{}/tar.gz/{}",
        archive_base.trim_end_matches('/'),
        repo.owner(),
        repo.name(),
        commit
    )
}

/// The caps one extraction runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveLimits {
    /// Compressed bytes read.
    pub max_compressed_bytes: u64,
    /// Decompressed tar stream bytes (headers and all entries, selected or not).
    pub max_uncompressed_bytes: u64,
    /// Tar entries, selected or not.
    pub max_entries: u64,
    /// Regular-file bytes in the selected subtree (the manifest's cap).
    pub max_tree_bytes: u64,
    /// Regular files in the selected subtree (the manifest's cap).
    pub max_tree_files: u64,
}

impl ArchiveLimits {
    /// Caps for the solver's source under `manifest`.
    pub fn source(manifest: &RunnerManifest) -> Self {
        Self {
            max_compressed_bytes: SOURCE_MAX_COMPRESSED,
            max_uncompressed_bytes: SOURCE_MAX_UNCOMPRESSED,
            max_entries: MAX_ENTRIES,
            max_tree_bytes: manifest.max_source_bytes(),
            max_tree_files: manifest.max_source_files(),
        }
    }
    /// Caps for the benchmark under `manifest`.
    pub fn benchmark(manifest: &RunnerManifest) -> Self {
        Self {
            max_compressed_bytes: BENCHMARK_MAX_COMPRESSED,
            max_uncompressed_bytes: BENCHMARK_MAX_UNCOMPRESSED,
            max_entries: MAX_ENTRIES,
            max_tree_bytes: manifest.max_benchmark_bytes(),
            max_tree_files: manifest.max_benchmark_files(),
        }
    }
}

/// Why an archive was rejected. Paths are shown escaped and truncated.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The destination already exists; nothing is extracted over existing files.
    #[error("extraction destination {0:?} already exists")]
    DestinationExists(String),
    /// The gzip or tar stream is corrupt or unreadable.
    #[error("archive is unreadable: {0}")]
    Read(String),
    /// More compressed bytes than the cap.
    #[error("archive exceeds {limit} compressed bytes")]
    CompressedTooLarge {
        /// The cap.
        limit: u64,
    },
    /// More decompressed bytes than the cap.
    #[error("archive exceeds {limit} uncompressed bytes")]
    UncompressedTooLarge {
        /// The cap.
        limit: u64,
    },
    /// More entries than the cap.
    #[error("archive has more than {limit} entries")]
    TooManyEntries {
        /// The cap.
        limit: u64,
    },
    /// The selected subtree holds more file bytes than the manifest allows.
    #[error("selected tree exceeds {limit} bytes")]
    TreeTooLarge {
        /// The cap.
        limit: u64,
    },
    /// The selected subtree holds more files than the manifest allows.
    #[error("selected tree has more than {limit} files")]
    TooManyFiles {
        /// The cap.
        limit: u64,
    },
    /// A symbolic or hard link.
    #[error("archive entry {0:?} is a link")]
    Link(String),
    /// A device, fifo, sparse file or other non-regular entry.
    #[error("archive entry {0:?} is not a regular file or directory")]
    SpecialFile(String),
    /// A GNU long-name or long-link record or a pax header is over its cap.
    #[error("archive extension header ({kind}) of {size} bytes exceeds {limit} bytes")]
    ExtensionHeaderTooLarge {
        /// `gnu_long_name`, `gnu_long_link`, `pax` or `pax_global`.
        kind: &'static str,
        /// Its announced size.
        size: u64,
        /// [`MAX_EXTENSION_HEADER_BYTES`].
        limit: u64,
    },
    /// Extension records that do not describe exactly one following member.
    #[error("archive extension header is malformed: {0}")]
    MalformedExtension(&'static str),
    /// An entry name is not UTF-8.
    #[error("archive entry name is not utf-8")]
    NonUtf8,
    /// An absolute entry path.
    #[error("archive entry {0:?} is an absolute path")]
    AbsolutePath(String),
    /// `..`, `.`, empty components, backslashes, NUL, or too many components.
    #[error("archive entry {0:?} is not a normalized relative path")]
    UnsafePath(String),
    /// A selected entry the local filesystem cannot hold: a component over
    /// [`MAX_NAME_BYTES`], or a path under the destination of [`MAX_PATH_BYTES`] or more.
    #[error("archive entry {path:?} cannot be written on this filesystem: {why}")]
    Unrepresentable {
        /// The entry path.
        path: String,
        /// Which limit.
        why: String,
    },
    /// The same path appears twice.
    #[error("archive entry {0:?} appears more than once")]
    Duplicate(String),
    /// A path needs a directory where a file is (or the reverse).
    #[error("archive entry {0:?} conflicts with an earlier entry")]
    Conflict(String),
    /// Entries under more than one top-level folder.
    #[error("archive has more than one top-level folder")]
    MultipleTopLevel,
    /// A file at the top level instead of inside the one folder.
    #[error("archive entry {0:?} is not inside the top-level folder")]
    NotInTopLevelFolder(String),
    /// No entries at all.
    #[error("archive is empty")]
    Empty,
    /// The selected subdirectory is absent.
    #[error("subdirectory {0:?} is not in the archive")]
    SubdirectoryMissing(String),
    /// The selected subdirectory is a file.
    #[error("subdirectory {0:?} is not a directory in the archive")]
    SubdirectoryNotDirectory(String),
    /// Writing the extraction failed.
    #[error("writing {path:?}: {source}")]
    Io {
        /// The relative path being written.
        path: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

impl ArchiveError {
    /// Whether the archive itself broke a rule (as opposed to a local I/O failure).
    pub fn is_rejection(&self) -> bool {
        !matches!(self, Self::Io { .. } | Self::DestinationExists(_))
    }

    /// Whether the same archive bytes are refused again on every attempt, so the refusal may
    /// be remembered. An unreadable stream is not: a truncated transfer looks the same.
    pub fn is_permanent_rejection(&self) -> bool {
        self.is_rejection() && !matches!(self, Self::Read(_))
    }
}

/// What an extraction wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extracted {
    /// Regular files written.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Tar entries read, selected or not.
    pub entries: u64,
}

/// Extracts the `subdirectory` of the archive's single top-level folder into `dest`, which
/// must not exist (its parent must). On failure `dest` is removed.
pub fn extract_tar_gz<R: Read>(
    reader: R,
    dest: &Path,
    subdirectory: &RelativeDir,
    limits: &ArchiveLimits,
) -> Result<Extracted, ArchiveError> {
    match fs::DirBuilder::new().mode(0o755).create(dest) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(ArchiveError::DestinationExists(shown(
                &dest.display().to_string(),
            )));
        }
        Err(source) => {
            return Err(ArchiveError::Io {
                path: ".".into(),
                source,
            });
        }
    }
    let result = Extraction::new(dest, subdirectory, limits).run(reader);
    if result.is_err() {
        // Only what this call created is under `dest`, and remove_dir_all does not follow
        // links (none were created anyway).
        let _ = fs::remove_dir_all(dest);
    }
    result
}

/// Counts bytes through a reader and fails the read that crosses the cap. The flag survives
/// the reader being moved into the tar and gzip decoders, so the caller can tell a cap from a
/// corrupt stream.
struct CappedReader<R> {
    inner: R,
    count: u64,
    limit: u64,
    exceeded: Rc<Cell<bool>>,
}

impl<R: Read> Read for CappedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count = self.count.saturating_add(n as u64);
        if self.count > self.limit {
            self.exceeded.set(true);
            return Err(io::Error::other("archive size cap exceeded"));
        }
        Ok(n)
    }
}

struct Extraction<'a> {
    dest: &'a Path,
    subdirectory: &'a RelativeDir,
    limits: &'a ArchiveLimits,
    compressed_exceeded: Rc<Cell<bool>>,
    uncompressed_exceeded: Rc<Cell<bool>>,
    top_level: Option<String>,
    seen: HashSet<String>,
    subdirectory_seen: bool,
    stats: Extracted,
}

enum Kind {
    File,
    Directory,
}

impl<'a> Extraction<'a> {
    fn new(dest: &'a Path, subdirectory: &'a RelativeDir, limits: &'a ArchiveLimits) -> Self {
        Self {
            dest,
            subdirectory,
            limits,
            compressed_exceeded: Rc::default(),
            uncompressed_exceeded: Rc::default(),
            top_level: None,
            seen: HashSet::new(),
            subdirectory_seen: subdirectory.is_root(),
            stats: Extracted {
                files: 0,
                bytes: 0,
                entries: 0,
            },
        }
    }

    fn stream_error(&self, e: &io::Error) -> ArchiveError {
        if self.compressed_exceeded.get() {
            ArchiveError::CompressedTooLarge {
                limit: self.limits.max_compressed_bytes,
            }
        } else if self.uncompressed_exceeded.get() {
            ArchiveError::UncompressedTooLarge {
                limit: self.limits.max_uncompressed_bytes,
            }
        } else {
            ArchiveError::Read(e.to_string().chars().take(256).collect())
        }
    }

    fn run<R: Read>(mut self, reader: R) -> Result<Extracted, ArchiveError> {
        let compressed = CappedReader {
            inner: reader,
            count: 0,
            limit: self.limits.max_compressed_bytes,
            exceeded: Rc::clone(&self.compressed_exceeded),
        };
        let uncompressed = CappedReader {
            inner: flate2::read::GzDecoder::new(compressed),
            count: 0,
            limit: self.limits.max_uncompressed_bytes,
            exceeded: Rc::clone(&self.uncompressed_exceeded),
        };
        let mut archive = tar::Archive::new(uncompressed);
        // Raw: extension records come to us as entries, so their size is checked before any
        // of them is read (see the module doc).
        let entries = archive
            .entries()
            .map_err(|e| self.stream_error(&e))?
            .raw(true);
        let mut pending = Pending::default();
        for entry in entries {
            let mut entry = entry.map_err(|e| self.stream_error(&e))?;
            let entry_type = entry.header().entry_type();
            let recognized =
                entry.header().as_ustar().is_some() || entry.header().as_gnu().is_some();
            let extension = extension_kind(entry_type).filter(|_| recognized);
            // A local record is part of its member's entry (each costs a header block of the
            // uncompressed cap); a global one is an entry of its own.
            if extension.is_none() || entry_type.is_pax_global_extensions() {
                self.stats.entries += 1;
                if self.stats.entries > self.limits.max_entries {
                    return Err(ArchiveError::TooManyEntries {
                        limit: self.limits.max_entries,
                    });
                }
            }
            if let Some(kind) = extension {
                let body = self.read_extension(kind, &mut entry)?;
                pending.add(entry_type, body)?;
                continue;
            }
            let extension = std::mem::take(&mut pending);
            let path_bytes = extension.path(&entry);
            let path = std::str::from_utf8(&path_bytes)
                .map_err(|_| ArchiveError::NonUtf8)?
                .to_owned();
            if let Some(size) = extension.pax_size()?
                && size != entry.size()
            {
                return Err(ArchiveError::MalformedExtension(
                    "a pax size disagrees with its member's header",
                ));
            }
            let kind = match entry_type {
                t if t.is_file() => Kind::File,
                t if t.is_dir() => Kind::Directory,
                t if t.is_symlink() || t.is_hard_link() => {
                    return Err(ArchiveError::Link(shown(&path)));
                }
                _ => return Err(ArchiveError::SpecialFile(shown(&path))),
            };
            let Some(rel) = self.place(&path, &kind)? else {
                continue;
            };
            match kind {
                Kind::Directory => self.make_dirs(&rel)?,
                Kind::File => {
                    let size = entry.size();
                    let mode = entry.header().mode().unwrap_or(0o644);
                    self.write_file(&rel, size, mode, &mut entry)?;
                }
            }
        }
        if !pending.is_empty() {
            return Err(ArchiveError::MalformedExtension(
                "an extension header describes no member",
            ));
        }
        if self.top_level.is_none() {
            return Err(ArchiveError::Empty);
        }
        if !self.subdirectory_seen {
            return Err(ArchiveError::SubdirectoryMissing(shown(
                self.subdirectory.as_str(),
            )));
        }
        Ok(self.stats)
    }

    /// Reads an extension record's body, refusing it by its announced size before reading.
    fn read_extension<R: Read>(
        &self,
        kind: &'static str,
        entry: &mut tar::Entry<'_, R>,
    ) -> Result<Vec<u8>, ArchiveError> {
        let size = entry.size();
        if size > MAX_EXTENSION_HEADER_BYTES {
            return Err(ArchiveError::ExtensionHeaderTooLarge {
                kind,
                size,
                limit: MAX_EXTENSION_HEADER_BYTES,
            });
        }
        let mut body = Vec::new();
        Read::by_ref(entry)
            .take(MAX_EXTENSION_HEADER_BYTES)
            .read_to_end(&mut body)
            .map_err(|e| self.stream_error(&e))?;
        Ok(body)
    }

    /// Checks an entry path and returns where it goes under `dest`: `None` for entries
    /// outside the selected subdirectory (and the subdirectory itself), which are checked and
    /// counted but not written.
    fn place(&mut self, path: &str, kind: &Kind) -> Result<Option<String>, ArchiveError> {
        let trimmed = match kind {
            Kind::Directory => path.strip_suffix('/').unwrap_or(path),
            Kind::File => path,
        };
        if trimmed.starts_with('/') {
            return Err(ArchiveError::AbsolutePath(shown(path)));
        }
        if trimmed.is_empty() || validate_relative_path(trimmed).is_err() {
            return Err(ArchiveError::UnsafePath(shown(path)));
        }
        let (top, rest) = match trimmed.split_once('/') {
            Some((top, rest)) => (top, Some(rest)),
            None => (trimmed, None),
        };
        match &self.top_level {
            Some(existing) if existing != top => return Err(ArchiveError::MultipleTopLevel),
            Some(_) => {}
            None => self.top_level = Some(top.to_owned()),
        }
        let rest = match (rest, kind) {
            (Some(rest), _) => rest,
            (None, Kind::Directory) => "",
            (None, Kind::File) => return Err(ArchiveError::NotInTopLevelFolder(shown(path))),
        };
        if !self.seen.insert(rest.to_owned()) {
            return Err(ArchiveError::Duplicate(shown(path)));
        }
        if rest.is_empty() {
            return Ok(None);
        }
        if self.subdirectory.is_root() {
            self.representable(path, rest)?;
            return Ok(Some(rest.to_owned()));
        }
        let sub = self.subdirectory.as_str();
        if rest == sub {
            if matches!(kind, Kind::File) {
                return Err(ArchiveError::SubdirectoryNotDirectory(shown(sub)));
            }
            self.subdirectory_seen = true;
            return Ok(None);
        }
        match rest.strip_prefix(sub).and_then(|r| r.strip_prefix('/')) {
            Some(inner) => {
                self.subdirectory_seen = true;
                self.representable(path, inner)?;
                Ok(Some(inner.to_owned()))
            }
            None => Ok(None),
        }
    }

    /// Refuses a selected entry the filesystem cannot hold at `dest/rel`, before anything of
    /// it is written. (`.`, `..`, empty components and NUL are refused for every entry by
    /// `validate_relative_path`.) Entries outside the selection are never written, so their
    /// names cannot fail here.
    fn representable(&self, path: &str, rel: &str) -> Result<(), ArchiveError> {
        let refuse = |why: String| ArchiveError::Unrepresentable {
            path: shown(path),
            why,
        };
        if let Some(long) = rel.split('/').find(|c| c.len() > MAX_NAME_BYTES) {
            return Err(refuse(format!(
                "a name of {} bytes is over the filesystem's {MAX_NAME_BYTES}",
                long.len()
            )));
        }
        let full = self.dest.as_os_str().len() + 1 + rel.len();
        if full >= MAX_PATH_BYTES {
            return Err(refuse(format!(
                "its path of {full} bytes is not under the kernel's {MAX_PATH_BYTES}"
            )));
        }
        Ok(())
    }

    /// Creates each component of `rel` that is missing; an existing component must be a real
    /// directory (we made it), never a file or a link.
    fn make_dirs(&self, rel: &str) -> Result<(), ArchiveError> {
        let mut path = self.dest.to_path_buf();
        for component in rel.split('/') {
            path.push(component);
            match fs::DirBuilder::new().mode(0o755).create(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let is_dir = fs::symlink_metadata(&path)
                        .map(|m| m.file_type().is_dir())
                        .unwrap_or(false);
                    if !is_dir {
                        return Err(ArchiveError::Conflict(shown(rel)));
                    }
                }
                Err(source) => {
                    return Err(ArchiveError::Io {
                        path: shown(rel),
                        source,
                    });
                }
            }
        }
        Ok(())
    }

    fn write_file(
        &mut self,
        rel: &str,
        size: u64,
        mode: u32,
        content: &mut impl Read,
    ) -> Result<(), ArchiveError> {
        self.stats.files += 1;
        if self.stats.files > self.limits.max_tree_files {
            return Err(ArchiveError::TooManyFiles {
                limit: self.limits.max_tree_files,
            });
        }
        self.stats.bytes = self.stats.bytes.saturating_add(size);
        if self.stats.bytes > self.limits.max_tree_bytes {
            return Err(ArchiveError::TreeTooLarge {
                limit: self.limits.max_tree_bytes,
            });
        }
        if let Some((parent, _)) = rel.rsplit_once('/') {
            self.make_dirs(parent)?;
        }
        // Only the executable bit is kept: it is part of the directory digest.
        let mode = if mode & 0o111 != 0 { 0o755 } else { 0o644 };
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW)
            .open(self.dest.join(rel))
            .map_err(|e| match e.kind() {
                io::ErrorKind::AlreadyExists => ArchiveError::Conflict(shown(rel)),
                _ => ArchiveError::Io {
                    path: shown(rel),
                    source: e,
                },
            })?;
        // A read failure is the archive's fault, a write failure is ours; io::copy would
        // blur the two.
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match content.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.stream_error(&e)),
            };
            let chunk = buf.get(..n).unwrap_or_default();
            file.write_all(chunk).map_err(|source| ArchiveError::Io {
                path: shown(rel),
                source,
            })?;
        }
        Ok(())
    }
}

/// The report name of an extension record type, `None` for a member.
fn extension_kind(t: EntryType) -> Option<&'static str> {
    if t.is_gnu_longname() {
        Some("gnu_long_name")
    } else if t.is_gnu_longlink() {
        Some("gnu_long_link")
    } else if t.is_pax_local_extensions() {
        Some("pax")
    } else if t.is_pax_global_extensions() {
        Some("pax_global")
    } else {
        None
    }
}

/// Extension records read since the last member; they describe the next one.
#[derive(Debug, Default)]
struct Pending {
    long_name: Option<Vec<u8>>,
    long_link: bool,
    pax: Option<Vec<u8>>,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.long_name.is_none() && !self.long_link && self.pax.is_none()
    }

    fn add(&mut self, t: EntryType, body: Vec<u8>) -> Result<(), ArchiveError> {
        let twice = ArchiveError::MalformedExtension(
            "two extension headers of one kind describe the same member",
        );
        if t.is_gnu_longname() {
            if self.long_name.replace(body).is_some() {
                return Err(twice);
            }
        } else if t.is_gnu_longlink() {
            // Links are refused anyway; the target itself is never needed.
            if std::mem::replace(&mut self.long_link, true) {
                return Err(twice);
            }
        } else if t.is_pax_local_extensions() {
            check_pax(&body)?;
            if self.pax.replace(body).is_some() {
                return Err(twice);
            }
        } else if !self.is_empty() {
            // A global header (codeload's commit comment) names no file; it may not sit
            // between a local record and its member.
            return Err(ArchiveError::MalformedExtension(
                "an extension header describes no member",
            ));
        }
        Ok(())
    }

    /// The member's path as the `tar` crate resolves it: the GNU long name (without its
    /// terminating NUL), else the pax `path`, else the header's own.
    fn path<R: Read>(&self, entry: &tar::Entry<'_, R>) -> Vec<u8> {
        if let Some(name) = &self.long_name {
            return name.strip_suffix(&[0]).unwrap_or(name.as_slice()).to_vec();
        }
        if let Some(path) = self.pax_value(b"path") {
            return path.to_vec();
        }
        entry.header().path_bytes().into_owned()
    }

    fn pax_value(&self, key: &[u8]) -> Option<&[u8]> {
        let pax = self.pax.as_deref()?;
        tar::PaxExtensions::new(pax)
            .filter_map(Result::ok)
            .find(|r| r.key_bytes() == key)
            .map(|r| r.value_bytes())
    }

    fn pax_size(&self) -> Result<Option<u64>, ArchiveError> {
        self.pax_value(b"size")
            .map(|v| {
                std::str::from_utf8(v)
                    .ok()
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or(ArchiveError::MalformedExtension(
                        "a pax size is not a number",
                    ))
            })
            .transpose()
    }
}

/// Refuses pax records that parsers are known to read differently: malformed records, a
/// `path` or `size` given twice (some take the first, some the last), and GNU sparse maps
/// (which turn a regular member into another file's content).
fn check_pax(body: &[u8]) -> Result<(), ArchiveError> {
    let mut path = false;
    let mut size = false;
    for record in tar::PaxExtensions::new(body) {
        let record =
            record.map_err(|_| ArchiveError::MalformedExtension("a pax record is malformed"))?;
        let key = record.key_bytes();
        let seen = match key {
            b"path" => &mut path,
            b"size" => &mut size,
            k if k.starts_with(b"GNU.sparse.") => {
                return Err(ArchiveError::MalformedExtension(
                    "pax sparse files are not supported",
                ));
            }
            _ => continue,
        };
        if std::mem::replace(seen, true) {
            return Err(ArchiveError::MalformedExtension(
                "a pax key is given twice for one member",
            ));
        }
    }
    Ok(())
}

fn shown(path: &str) -> String {
    path.chars().take(256).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_url_has_the_codeload_shape() {
        let repo = GithubRepo::parse("bounty-org/bench.marks").unwrap();
        let commit = CommitId::parse(&"a".repeat(40), false).unwrap();
        assert_eq!(
            archive_url("https://codeload.github.com/", &repo, &commit),
            format!(
                "https://codeload.github.com/bounty-org/bench.marks/tar.gz/{}",
                "a".repeat(40)
            )
        );
    }
}
