//! The pipelined directory digest: one thread reads (and, when staging, writes) while the
//! calling thread hashes.
//!
//! The digest is defined once, in `verifier_sdk::digest`; this module only feeds the sdk's
//! [`DirectoryHasher`] faster than its sequential reference walk. The digest is a single
//! SHA-256 stream, so hashing cannot be split; what overlaps is the I/O. A fixed pool of
//! buffers circulates between the two threads, which bounds memory whatever the tree size and
//! makes the reader wait when it is too far ahead.
//!
//! Every byte is read exactly once: when a copy destination is given, the buffer that was
//! read is written out and then hashed, so the staged copy is exactly what was hashed.
//!
//! Files are opened relative to directory descriptors walked down from the tree's root, every
//! step with `O_NOFOLLOW`, and each opened file must be the very inode the listing saw. So a
//! folder swapped for a link, or a file swapped for another, between listing and reading is a
//! [`SnapshotError::Changed`], never a read of something outside the tree.

use std::fs::{File, OpenOptions, Permissions};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::{Duration, Instant};

use rustix::fs::{AtFlags, CWD, Dir, FileType, Mode, OFlags, openat, statat};
use rustix::io::Errno;
use verifier_sdk::digest::{
    DigestError, DirectoryHasher, MAX_DIRECTORIES, Snapshot, TreeEntry, TreeLimits,
    validate_relative_path,
};

use crate::progress::{NoProgress, ProgressSink};

/// Size of one pooled buffer.
pub const CHUNK_BYTES: usize = 1 << 20;
/// Number of pooled buffers; with [`CHUNK_BYTES`] this is the whole read-ahead memory.
pub const POOL_BUFFERS: usize = 8;
/// Mode of a staged non-executable file.
pub const FILE_MODE: u32 = 0o444;
/// Mode of a staged file that had any execute bit.
pub const EXEC_FILE_MODE: u32 = 0o555;
/// Mode of every staged directory.
pub const DIR_MODE: u32 = 0o555;

/// Why a tree could not be snapshotted (or copied while snapshotting).
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The tree broke a rule (link, special file, name, depth, limit) or could not be read.
    #[error(transparent)]
    Tree(#[from] DigestError),
    /// A file or one of its folders was replaced, removed, resized or modified between listing
    /// and reading it.
    #[error("file {0:?} changed while being read")]
    Changed(PathBuf),
    /// A file of a staged tree does not carry a normalized mode.
    #[error("file {path:?} has mode {mode:o}, expected 444 or 555")]
    FileMode {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Writing the copy failed.
    #[error("writing {path:?}: {source}")]
    Write {
        /// The file being written.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The reading thread ended without finishing (a bug).
    #[error("the tree reader thread stopped unexpectedly")]
    ReaderLost,
}

impl SnapshotError {
    /// Whether the error is about the input tree (as opposed to our own writes or a bug).
    pub fn is_input_error(&self) -> bool {
        matches!(
            self,
            Self::Tree(_) | Self::Changed(_) | Self::FileMode { .. }
        )
    }
}

/// Digests `dir` with the pipelined reader. Equal to `verifier_sdk::digest_directory`.
pub fn snapshot_directory(dir: &Path, limits: TreeLimits) -> Result<Snapshot, SnapshotError> {
    snapshot_directory_with_progress(dir, limits, &mut NoProgress)
}

/// [`snapshot_directory`] reporting to `progress`.
pub fn snapshot_directory_with_progress(
    dir: &Path,
    limits: TreeLimits,
    progress: &mut dyn ProgressSink,
) -> Result<Snapshot, SnapshotError> {
    let (entries, _dirs) = list_tree_at(dir, limits)?;
    hash_listed_tree(&Pass::read_only(dir, limits), &entries, progress)
}

/// Lists `root` under the rules, limits and errors of `verifier_sdk::digest::list_tree`, but
/// reaches every folder through a descriptor opened from its parent's with `O_NOFOLLOW`, so a
/// folder swapped for a link while the tree is listed cannot lead the walk out of the tree.
pub(crate) fn list_tree_at(
    root: &Path,
    limits: TreeLimits,
) -> Result<(Vec<TreeEntry>, Vec<String>), SnapshotError> {
    let fd = openat(CWD, root, DIR_FLAGS, Mode::empty()).map_err(|errno| match errno {
        Errno::LOOP | Errno::NOTDIR => DigestError::NotADirectory(root.into()),
        other => DigestError::Io {
            path: root.into(),
            source: other.into(),
        },
    })?;
    let mut listing = Listing {
        limits,
        files: Vec::new(),
        dirs: Vec::new(),
        total: 0,
    };
    listing.walk(fd, root, "")?;
    let Listing {
        mut files,
        mut dirs,
        ..
    } = listing;
    files.sort_unstable_by(|a, b| a.rel_path.as_bytes().cmp(b.rel_path.as_bytes()));
    dirs.sort_unstable();
    Ok((files, dirs))
}

struct Listing {
    limits: TreeLimits,
    files: Vec<TreeEntry>,
    dirs: Vec<String>,
    total: u64,
}

impl Listing {
    /// Lists the folder open at `fd`, then each of its subfolders; only the chain of folders
    /// being walked (bounded by the depth limit) is held open.
    fn walk(&mut self, fd: OwnedFd, abs: &Path, rel: &str) -> Result<(), SnapshotError> {
        let io = |path: &Path, errno: Errno| DigestError::Io {
            path: path.to_path_buf(),
            source: errno.into(),
        };
        let mut dir = Dir::new(fd).map_err(|e| io(abs, e))?;
        let mut subdirs = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(|e| io(abs, e))?;
            let name_bytes = entry.file_name().to_bytes();
            if name_bytes == b"." || name_bytes == b".." {
                continue;
            }
            let child_abs = abs.join(std::ffi::OsStr::from_bytes(name_bytes));
            let Ok(name) = std::str::from_utf8(name_bytes) else {
                return Err(DigestError::NonUtf8Name(child_abs).into());
            };
            let child_rel = if rel.is_empty() {
                name.to_owned()
            } else {
                format!("{rel}/{name}")
            };
            validate_relative_path(&child_rel)?;
            let dir_fd = dir.fd().map_err(|e| io(abs, e))?;
            // `d_type` spares a stat for folders, links and special files; a file needs one
            // for its size and identity, and a filesystem without `d_type` needs one for all.
            let mut stat = None;
            let mut kind = entry.file_type();
            if kind == FileType::Unknown || kind == FileType::RegularFile {
                let st = statat(dir_fd, name, AtFlags::SYMLINK_NOFOLLOW)
                    .map_err(|e| io(&child_abs, e))?;
                kind = FileType::from_raw_mode(st.st_mode);
                stat = Some(st);
            }
            match (kind, stat) {
                (FileType::Symlink, _) => return Err(DigestError::Symlink(child_abs).into()),
                (FileType::Directory, _) => {
                    if self.dirs.len() as u64 >= MAX_DIRECTORIES {
                        return Err(DigestError::TooManyDirectories.into());
                    }
                    self.dirs.push(child_rel.clone());
                    subdirs.push((name.to_owned(), child_abs, child_rel));
                }
                (FileType::RegularFile, Some(st)) => {
                    if self.files.len() as u64 >= self.limits.max_files {
                        return Err(DigestError::TooManyFiles {
                            limit: self.limits.max_files,
                        }
                        .into());
                    }
                    let size = u64::try_from(st.st_size).unwrap_or(u64::MAX);
                    self.total = self.total.saturating_add(size);
                    if self.total > self.limits.max_bytes {
                        return Err(DigestError::TooManyBytes {
                            limit: self.limits.max_bytes,
                        }
                        .into());
                    }
                    self.files.push(TreeEntry {
                        rel_path: child_rel,
                        size,
                        executable: st.st_mode & 0o111 != 0,
                        dev: st.st_dev,
                        ino: st.st_ino,
                    });
                }
                _ => return Err(DigestError::SpecialFile(child_abs).into()),
            }
        }
        for (name, child_abs, child_rel) in subdirs {
            let parent = dir.fd().map_err(|e| io(abs, e))?;
            let child = openat(parent, name.as_str(), DIR_FLAGS, Mode::empty())
                .map_err(|errno| open_failure(&child_abs, errno))?;
            self.walk(child, &child_abs, &child_rel)?;
        }
        Ok(())
    }
}

/// What one pass over a listed tree does besides hashing.
#[derive(Debug, Clone)]
pub(crate) struct Pass<'a> {
    /// The tree being read.
    pub source: &'a Path,
    pub limits: TreeLimits,
    /// When set, every file is also written below this directory (whose subdirectories must
    /// already exist), with a normalized mode.
    pub copy_to: Option<&'a Path>,
    /// When set, files must already carry a normalized mode (verifying a staged tree).
    pub require_normalized_modes: bool,
    /// Test hook: after the first file, create this marker and wait until it is removed.
    pub pause_marker: Option<PathBuf>,
}

impl<'a> Pass<'a> {
    pub(crate) fn read_only(source: &'a Path, limits: TreeLimits) -> Self {
        Self {
            source,
            limits,
            copy_to: None,
            require_normalized_modes: false,
            pause_marker: None,
        }
    }
}

enum Message {
    /// Begin the file at this index of the listing.
    Begin(usize),
    /// The next `len` bytes of the current file, in a pooled buffer.
    Data(Vec<u8>, usize),
    Failed(SnapshotError),
}

/// Why the reader stopped early.
enum Stop {
    Failed(SnapshotError),
    /// The hashing side hung up (it failed and already has its error).
    HungUp,
}

/// Hashes (and maybe copies) `entries`, which must come from `list_tree_at(pass.source, ..)`.
pub(crate) fn hash_listed_tree(
    pass: &Pass<'_>,
    entries: &[TreeEntry],
    progress: &mut dyn ProgressSink,
) -> Result<Snapshot, SnapshotError> {
    let total_bytes = entries
        .iter()
        .fold(0u64, |sum, e| sum.saturating_add(e.size));
    progress.start(entries.len() as u64, total_bytes);
    let (data_tx, data_rx) = sync_channel::<Message>(POOL_BUFFERS * 2);
    let (pool_tx, pool_rx) = sync_channel::<Vec<u8>>(POOL_BUFFERS);
    for _ in 0..POOL_BUFFERS {
        // The channel has room for exactly the pool, so this cannot block or fail.
        let _ = pool_tx.send(vec![0u8; CHUNK_BYTES]);
    }
    let result = std::thread::scope(|scope| {
        let reader = scope.spawn(move || read_all(pass, entries, &data_tx, &pool_rx));
        // Consumes the receiving ends, so when hashing fails early the reader's next send or
        // buffer request fails and it stops instead of blocking forever.
        let hashed = hash_messages(pass.limits, entries, data_rx, pool_tx, progress);
        let completed = reader.join().unwrap_or(false);
        match hashed {
            Ok(snapshot) if completed => Ok(snapshot),
            Ok(_) => Err(SnapshotError::ReaderLost),
            Err(e) => Err(e),
        }
    });
    progress.finish();
    result
}

// Taking the senders by value is the point: dropping them when hashing ends is what makes the
// reader's next send or buffer request fail, so it stops instead of blocking forever.
#[allow(clippy::needless_pass_by_value)]
fn hash_messages(
    limits: TreeLimits,
    entries: &[TreeEntry],
    data_rx: Receiver<Message>,
    pool_tx: SyncSender<Vec<u8>>,
    progress: &mut dyn ProgressSink,
) -> Result<Snapshot, SnapshotError> {
    let mut hasher = DirectoryHasher::new(limits);
    for message in data_rx {
        match message {
            Message::Begin(index) => {
                let entry = entries.get(index).ok_or(SnapshotError::ReaderLost)?;
                hasher.begin_file(&entry.rel_path, entry.size)?;
                progress.advance(1, 0);
            }
            Message::Data(buffer, len) => {
                let chunk = buffer.get(..len).ok_or(SnapshotError::ReaderLost)?;
                hasher.update(chunk)?;
                progress.advance(0, len as u64);
                // The reader may already be gone after a failure; the buffer is then dropped.
                let _ = pool_tx.send(buffer);
            }
            Message::Failed(error) => return Err(error),
        }
    }
    Ok(hasher.finish()?)
}

/// Returns whether every file was read.
fn read_all(
    pass: &Pass<'_>,
    entries: &[TreeEntry],
    data_tx: &SyncSender<Message>,
    pool_rx: &Receiver<Vec<u8>>,
) -> bool {
    let mut spare: Option<Vec<u8>> = None;
    let mut dirs = match DirChain::open(pass.source) {
        Ok(dirs) => dirs,
        Err(errno) => {
            let _ = data_tx.send(Message::Failed(open_failure(pass.source, errno)));
            return false;
        }
    };
    for (index, entry) in entries.iter().enumerate() {
        match read_one(pass, &mut dirs, index, entry, data_tx, pool_rx, &mut spare) {
            Ok(()) => {}
            Err(Stop::Failed(error)) => {
                let _ = data_tx.send(Message::Failed(error));
                return false;
            }
            Err(Stop::HungUp) => return false,
        }
        if index == 0
            && let Some(marker) = &pass.pause_marker
        {
            pause_at_marker(marker);
        }
    }
    true
}

/// Directory descriptors from the tree's root down to the folder of the file being read. The
/// listing is sorted by path bytes, so all files below a folder are contiguous in it and each
/// folder is opened once, while at most one chain of folders (bounded by the depth limit) is
/// held open.
struct DirChain {
    root: OwnedFd,
    /// Relative path and descriptor of each folder below the root, outermost first.
    open: Vec<(String, OwnedFd)>,
}

/// Folders are never followed through a link, and a non-folder in their place fails.
const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);
/// `O_NOFOLLOW`: a file swapped for a link after listing is refused, not followed.
/// `O_NONBLOCK`: a file swapped for a fifo cannot make the open hang.
const FILE_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::CLOEXEC);

impl DirChain {
    fn open(root: &Path) -> Result<Self, Errno> {
        Ok(Self {
            root: openat(CWD, root, DIR_FLAGS, Mode::empty())?,
            open: Vec::new(),
        })
    }

    /// The descriptor of folder `rel` (`""` for the root), opening the folders not yet open.
    fn dir(&mut self, rel: &str) -> Result<BorrowedFd<'_>, Errno> {
        while let Some((top, _)) = self.open.last() {
            if rel
                .strip_prefix(top.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
            {
                break;
            }
            self.open.pop();
        }
        let opened = self.open.last().map_or(0, |(top, _)| top.len() + 1);
        for component in rel.get(opened..).unwrap_or_default().split('/') {
            if component.is_empty() {
                continue;
            }
            let fd = openat(self.current(), component, DIR_FLAGS, Mode::empty())?;
            let path = match self.open.last() {
                Some((top, _)) => format!("{top}/{component}"),
                None => component.to_owned(),
            };
            self.open.push((path, fd));
        }
        Ok(self.current())
    }

    fn current(&self) -> BorrowedFd<'_> {
        self.open
            .last()
            .map_or(self.root.as_fd(), |(_, fd)| fd.as_fd())
    }
}

/// A missing entry, a link, or a non-folder where a folder was listed means the tree changed.
fn open_failure(path: &Path, errno: Errno) -> SnapshotError {
    match errno {
        Errno::NOENT | Errno::LOOP | Errno::NOTDIR => SnapshotError::Changed(path.to_path_buf()),
        other => DigestError::Io {
            path: path.to_path_buf(),
            source: other.into(),
        }
        .into(),
    }
}

fn read_one(
    pass: &Pass<'_>,
    dirs: &mut DirChain,
    index: usize,
    entry: &TreeEntry,
    data_tx: &SyncSender<Message>,
    pool_rx: &Receiver<Vec<u8>>,
    spare: &mut Option<Vec<u8>>,
) -> Result<(), Stop> {
    let path = pass.source.join(&entry.rel_path);
    let (folder, name) = entry
        .rel_path
        .rsplit_once('/')
        .unwrap_or(("", entry.rel_path.as_str()));
    let mut file = dirs
        .dir(folder)
        .and_then(|dir| openat(dir, name, FILE_FLAGS, Mode::empty()))
        .map(File::from)
        .map_err(|errno| Stop::Failed(open_failure(&path, errno)))?;
    let before = file
        .metadata()
        .map_err(|source| io_failure(&path, source))?;
    // The inode check is what ties the bytes read to the listing: without it, a folder swapped
    // back and forth, or a file renamed over the listed one, could be read in its place.
    if !before.file_type().is_file()
        || before.len() != entry.size
        || before.dev() != entry.dev
        || before.ino() != entry.ino
    {
        return Err(changed(&path));
    }
    let mode = before.mode() & 0o7777;
    if pass.require_normalized_modes && mode != FILE_MODE && mode != EXEC_FILE_MODE {
        return Err(Stop::Failed(SnapshotError::FileMode { path, mode }));
    }
    let mut out = match pass.copy_to {
        Some(dest_root) => Some(create_copy(&dest_root.join(&entry.rel_path))?),
        None => None,
    };
    data_tx
        .send(Message::Begin(index))
        .map_err(|_| Stop::HungUp)?;

    // Exactly the listed size is read; growth or any rewrite during the read shows in the
    // second `fstat` below, which saves an end-of-file probe per file on small-file trees.
    let mut remaining = entry.size;
    while remaining > 0 {
        let mut buffer = match spare.take() {
            Some(buffer) => buffer,
            None => pool_rx.recv().map_err(|_| Stop::HungUp)?,
        };
        let want = usize::try_from(remaining)
            .unwrap_or(usize::MAX)
            .min(buffer.len());
        let slot = buffer
            .get_mut(..want)
            .ok_or(Stop::Failed(SnapshotError::ReaderLost))?;
        let n = match read_retrying(&mut file, slot) {
            Ok(n) => n,
            Err(source) => {
                *spare = Some(buffer);
                return Err(io_failure(&path, source));
            }
        };
        if n == 0 {
            *spare = Some(buffer);
            break;
        }
        if let Some((out_file, out_path)) = out.as_mut() {
            let written = buffer
                .get(..n)
                .ok_or(Stop::Failed(SnapshotError::ReaderLost))?;
            out_file.write_all(written).map_err(|source| {
                Stop::Failed(SnapshotError::Write {
                    path: out_path.clone(),
                    source,
                })
            })?;
        }
        remaining -= n as u64;
        data_tx
            .send(Message::Data(buffer, n))
            .map_err(|_| Stop::HungUp)?;
    }

    let after = file
        .metadata()
        .map_err(|source| io_failure(&path, source))?;
    if after.len() != before.len()
        || after.mtime() != before.mtime()
        || after.mtime_nsec() != before.mtime_nsec()
        || after.ctime() != before.ctime()
        || after.ctime_nsec() != before.ctime_nsec()
    {
        return Err(changed(&path));
    }
    if let Some((out_file, out_path)) = out {
        let normalized = if mode & 0o111 != 0 {
            EXEC_FILE_MODE
        } else {
            FILE_MODE
        };
        out_file
            .set_permissions(Permissions::from_mode(normalized))
            .map_err(|source| {
                Stop::Failed(SnapshotError::Write {
                    path: out_path,
                    source,
                })
            })?;
    }
    Ok(())
}

fn changed(path: &Path) -> Stop {
    Stop::Failed(SnapshotError::Changed(path.to_path_buf()))
}

fn io_failure(path: &Path, source: std::io::Error) -> Stop {
    Stop::Failed(
        DigestError::Io {
            path: path.to_path_buf(),
            source,
        }
        .into(),
    )
}

fn create_copy(path: &Path) -> Result<(File, PathBuf), Stop> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map(|file| (file, path.to_path_buf()))
        .map_err(|source| {
            Stop::Failed(SnapshotError::Write {
                path: path.to_path_buf(),
                source,
            })
        })
}

/// Fills `buf` as far as the file allows, so chunks stay large even if a read returns short.
fn read_retrying(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        let Some(rest) = buf.get_mut(filled..) else {
            break;
        };
        match file.read(rest) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Longest a test may keep a stage paused.
const PAUSE_LIMIT: Duration = Duration::from_secs(60);

fn pause_at_marker(marker: &Path) {
    if std::fs::write(marker, b"paused\n").is_err() {
        return;
    }
    let started = Instant::now();
    while marker.exists() && started.elapsed() < PAUSE_LIMIT {
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn limits() -> TreeLimits {
        TreeLimits::new(1 << 30, 1000).unwrap()
    }

    #[test]
    fn matches_reference_across_chunk_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("a")).unwrap();
        fs::write(dir.path().join("a/b"), vec![7u8; CHUNK_BYTES * 2 + 3]).unwrap();
        fs::write(dir.path().join("a.txt"), b"x").unwrap();
        fs::write(dir.path().join("empty"), b"").unwrap();
        fs::write(dir.path().join("exact"), vec![1u8; CHUNK_BYTES]).unwrap();
        let reference = verifier_sdk::digest_directory(dir.path(), limits()).unwrap();
        assert_eq!(snapshot_directory(dir.path(), limits()).unwrap(), reference);
    }

    #[test]
    fn listing_through_descriptors_equals_the_sdk_listing() {
        let dir = tempfile::tempdir().unwrap();
        for (path, content) in [
            ("a/b-c", &b"1"[..]),
            ("a/b/x", b"22"),
            ("a/b0", b"333"),
            ("a.txt", b""),
            ("z/y/x/w", b"4444"),
        ] {
            let path = dir.path().join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, content).unwrap();
        }
        fs::create_dir_all(dir.path().join("empty/dir")).unwrap();
        fs::set_permissions(dir.path().join("a/b0"), Permissions::from_mode(0o750)).unwrap();
        let ours = list_tree_at(dir.path(), limits()).unwrap();
        assert_eq!(
            ours,
            verifier_sdk::digest::list_tree(dir.path(), limits()).unwrap()
        );
        assert_eq!(ours.0.len(), 5);

        std::os::unix::fs::symlink("a", dir.path().join("a/link")).unwrap();
        let err = list_tree_at(dir.path(), limits()).unwrap_err();
        assert!(
            matches!(err, SnapshotError::Tree(DigestError::Symlink(ref p)) if *p == dir.path().join("a/link")),
            "{err}"
        );
        let root_link = dir.path().join("root-link");
        std::os::unix::fs::symlink(dir.path().join("empty"), &root_link).unwrap();
        let err = list_tree_at(&root_link, limits()).unwrap_err();
        assert!(
            matches!(err, SnapshotError::Tree(DigestError::NotADirectory(_))),
            "{err}"
        );
    }

    #[test]
    fn more_files_than_buffers_do_not_deadlock() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..(POOL_BUFFERS * 5) {
            fs::write(dir.path().join(format!("f{i:03}")), vec![i as u8; 10]).unwrap();
        }
        let reference = verifier_sdk::digest_directory(dir.path(), limits()).unwrap();
        assert_eq!(snapshot_directory(dir.path(), limits()).unwrap(), reference);
    }

    #[test]
    fn copy_writes_exact_bytes_with_normalized_modes() {
        let src = tempfile::tempdir().unwrap();
        let dst = tempfile::tempdir().unwrap();
        fs::write(src.path().join("run.sh"), b"#!/bin/sh\n").unwrap();
        fs::set_permissions(src.path().join("run.sh"), Permissions::from_mode(0o710)).unwrap();
        fs::write(src.path().join("data"), vec![9u8; CHUNK_BYTES + 1]).unwrap();
        fs::set_permissions(src.path().join("data"), Permissions::from_mode(0o666)).unwrap();
        let (entries, _) = list_tree_at(src.path(), limits()).unwrap();
        let pass = Pass {
            copy_to: Some(dst.path()),
            ..Pass::read_only(src.path(), limits())
        };
        let snap = hash_listed_tree(&pass, &entries, &mut NoProgress).unwrap();
        assert_eq!(
            snap,
            verifier_sdk::digest_directory(src.path(), limits()).unwrap()
        );
        assert_eq!(
            snap,
            verifier_sdk::digest_directory(dst.path(), limits()).unwrap()
        );
        let mode = |p: &str| fs::metadata(dst.path().join(p)).unwrap().mode() & 0o7777;
        assert_eq!(mode("run.sh"), 0o555);
        assert_eq!(mode("data"), 0o444);
    }

    #[test]
    fn verification_refuses_a_writable_file() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("f"), b"1").unwrap();
        fs::set_permissions(dir.path().join("f"), Permissions::from_mode(0o644)).unwrap();
        let (entries, _) = list_tree_at(dir.path(), limits()).unwrap();
        let pass = Pass {
            require_normalized_modes: true,
            ..Pass::read_only(dir.path(), limits())
        };
        let err = hash_listed_tree(&pass, &entries, &mut NoProgress).unwrap_err();
        assert!(
            matches!(err, SnapshotError::FileMode { mode: 0o644, .. }),
            "{err}"
        );
    }

    /// Lists `dir`, then reads it with the pause hook set, running `swap` at the pause (after
    /// the first file, before any other is opened).
    fn read_swapping_after_first_file(
        dir: &Path,
        swap: impl FnOnce() + Send,
    ) -> Result<Snapshot, SnapshotError> {
        let (entries, _) = list_tree_at(dir, limits()).unwrap();
        let marker_dir = tempfile::tempdir().unwrap();
        let marker = marker_dir.path().join("paused");
        let pass = Pass {
            pause_marker: Some(marker.clone()),
            ..Pass::read_only(dir, limits())
        };
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let started = Instant::now();
                while !marker.exists() {
                    assert!(started.elapsed() < PAUSE_LIMIT, "never paused");
                    std::thread::sleep(Duration::from_millis(5));
                }
                swap();
                fs::remove_file(&marker).unwrap();
            });
            hash_listed_tree(&pass, &entries, &mut NoProgress)
        })
    }

    #[test]
    fn parent_directory_swapped_for_symlink_mid_snapshot_is_refused() {
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), b"outside!").unwrap();
        fs::set_permissions(outside.path().join("secret"), Permissions::from_mode(0o600)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let moved = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("0first"), b"first").unwrap();
        fs::create_dir(dir.path().join("a")).unwrap();
        fs::write(dir.path().join("a/secret"), b"in-tree!").unwrap();
        let result = read_swapping_after_first_file(dir.path(), || {
            fs::rename(dir.path().join("a"), moved.path().join("a")).unwrap();
            std::os::unix::fs::symlink(outside.path(), dir.path().join("a")).unwrap();
        });
        match result {
            Err(SnapshotError::Changed(path)) => assert_eq!(path, dir.path().join("a/secret")),
            other => panic!("read through the swapped folder: {other:?}"),
        }
    }

    #[test]
    fn a_file_replaced_by_another_of_the_same_size_mid_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let moved = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("0first"), b"first").unwrap();
        fs::create_dir(dir.path().join("a")).unwrap();
        fs::write(dir.path().join("a/f"), b"listed").unwrap();
        let result = read_swapping_after_first_file(dir.path(), || {
            fs::rename(dir.path().join("a"), moved.path().join("a")).unwrap();
            fs::create_dir(dir.path().join("a")).unwrap();
            fs::write(dir.path().join("a/f"), b"other!").unwrap();
        });
        assert!(
            matches!(result, Err(SnapshotError::Changed(_))),
            "{result:?}"
        );
    }

    #[test]
    fn a_file_resized_after_listing_is_a_change() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("f"), b"1234").unwrap();
        let (entries, _) = list_tree_at(dir.path(), limits()).unwrap();
        fs::write(dir.path().join("f"), b"123456").unwrap();
        let err = hash_listed_tree(
            &Pass::read_only(dir.path(), limits()),
            &entries,
            &mut NoProgress,
        )
        .unwrap_err();
        assert!(matches!(err, SnapshotError::Changed(_)), "{err}");
    }
}
