//! The pipelined directory digest: one thread walks the tree and reads (and, when staging,
//! writes) while the calling thread hashes.
//!
//! The digest is defined once, in `verifier_sdk::digest`; this module only feeds the sdk's
//! [`DirectoryHasher`] faster than its sequential reference walk. The digest is a single
//! SHA-256 stream, so hashing cannot be split; what overlaps is everything else: listing,
//! opening, reading and writing.
//!
//! The walk is streamed: the digest orders files by their whole relative path as bytes, and
//! since no name holds a `/`, that order is a depth-first walk visiting each folder's entries
//! sorted by name, a folder's name taken with a trailing `/` (`a.txt` < `a/…` < `a0`). So only
//! one folder needs listing before its files can be read, and hashing starts with the first
//! file. The reader packs file starts and contents into pooled batch buffers; a fixed pool
//! bounds memory whatever the tree size and makes the reader wait when it is too far ahead.
//!
//! Every byte is read exactly once: when a copy destination is given, each file's copy is
//! written from the very buffer that is hashed, so the staged copy is exactly what was hashed.
//! Copying large files in the kernel instead (`copy_file_range`, as `cp` does) and hashing
//! the copy read back was measured and is dearer: more system time than a `read` and a
//! `pwrite` of the same bytes on ext4, and about 2.4 times as much on tmpfs (issue #29,
//! BENCHMARKS.md); hashing a mapping would save the read-back, but the workspace forbids
//! `unsafe`, which `mmap` needs.
//!
//! Which thread writes is decided as the reader goes: the hasher when it keeps up with the
//! reader (creating and writing files is most of a stage's system time, and would otherwise
//! leave the hasher idle behind a busy reader), the reader when batches queue up for the
//! hasher. Small files are created and written wholly by one side; a file spanning batches is
//! created by the reader and each chunk written, at its offset, by whichever side is free.
//!
//! Each folder is listed once, when the walk enters it, with one `stat` per file and folder
//! (its size counts against the limits right away). Folders are opened relative to their
//! parent's descriptor with `O_NOFOLLOW` and must be the inode listed; files are opened the
//! same way, and the `fstat` of the open file after its last byte was read must equal the
//! listed one (inode, size, modification and change times). So a folder swapped for a link,
//! or a file swapped, resized or rewritten between its listing and the end of its read, is a
//! [`SnapshotError::Changed`], never a read of something outside the tree or of bytes other
//! than those listed.
//!
//! Who opens, reads and checks a file is balanced as the walk goes, like the writes: on a
//! tree of small files the reader's five system calls a file (the listing's stat, `openat`,
//! `read`, `fstat`, `close`) cost more CPU than hashing the file, so while the hasher keeps
//! up (fewer than `Pass::check_backlog` batches queued) the reader hands it work with the
//! file. It leaves the closing check of a file it read (the open file and its listed stat: the
//! hasher makes the `fstat` and the `close`; at most `MAX_OPEN_CHECKS` files left open so),
//! and, when not copying, up to `Pass::hasher_reads_per_batch` small files a batch whole:
//! the reader only lists them, the hasher opens them relative to a duplicate of the folder's
//! descriptor and makes the same read and checks. A hasher falling behind sees its backlog
//! grow and the reader takes the work back. The hasher checks no earlier than the reader
//! would, so it refuses at least as much, and the digest only comes out once every file has
//! passed.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::time::{Duration, Instant};

use rustix::fs::{
    AtFlags, CWD, Dir, FileType, Mode, OFlags, Stat, fchmod, fstat, mkdirat, openat, statat,
};
use rustix::io::{Errno, fcntl_dupfd_cloexec};
use verifier_sdk::digest::{
    DigestError, DirectoryHasher, MAX_DIRECTORIES, Snapshot, TreeLimits, validate_relative_path,
};

use crate::progress::{NoProgress, ProgressSink};

/// Size of one pooled batch buffer.
///
/// Small on purpose: the reader fills a buffer on one core and the hasher reads it on the
/// other, so the whole pool (eight of these, 512 KiB) should stay within a core's L2 cache.
/// With 1 MiB buffers the 8 MiB pool did not, and on a VM whose cores share a slow last-level
/// cache the hasher pulled every byte from there: one 1 GiB file took 0.87 s against
/// `openssl dgst`'s 0.73 s, and 0.73 s with 64 KiB buffers (issue #29, BENCHMARKS.md).
pub const CHUNK_BYTES: usize = 64 << 10;
/// Number of pooled batch buffers; with [`CHUNK_BYTES`] this is the whole read-ahead memory.
pub const POOL_BUFFERS: usize = 8;
/// Most files the reader leaves open for the hasher to check (see `Pass::check_backlog`),
/// well under the usual 1,024 open-file limit; past it the reader checks files itself.
const MAX_OPEN_CHECKS: usize = 128;
/// Largest file the hasher may be handed to open and read itself (see
/// `Pass::hasher_reads_per_batch`); its one read buffer is this long.
const HASHER_READ_MAX: usize = 64 << 10;
/// A batch is handed over once it announces this many files, even if its buffer has room, so
/// the hasher is not kept waiting on a run of tiny or empty files.
const BATCH_FILES: usize = 2048;
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
    /// A directory of a staged tree is not sealed read-only.
    #[error("directory {path:?} has mode {mode:o}, expected 555")]
    DirectoryMode {
        /// The directory.
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
            Self::Tree(_) | Self::Changed(_) | Self::FileMode { .. } | Self::DirectoryMode { .. }
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
    hash_tree(&Pass::read_only(dir, limits), progress)
}

/// What one pass over a tree does besides hashing.
#[derive(Debug, Clone)]
pub(crate) struct Pass<'a> {
    /// The tree being read.
    pub source: &'a Path,
    pub limits: TreeLimits,
    /// When set, the tree is also copied into this existing, empty directory: every folder
    /// below it is created and then sealed with [`DIR_MODE`] once its entries are written,
    /// every file gets a normalized mode. The directory itself keeps its mode.
    pub copy_to: Option<&'a Path>,
    /// When set, files and folders (the root included) must already carry a normalized mode
    /// (verifying a staged tree).
    pub require_normalized_modes: bool,
    /// Test hook: after the first file, create this marker and wait until it is removed.
    pub pause_marker: Option<PathBuf>,
    /// With this many batches queued for the hasher, the reader copies files itself.
    pub copy_backlog: usize,
    /// With fewer than this many batches queued for the hasher, the reader leaves each file's
    /// closing check (the `fstat` after the read and the `close`) to the hasher: on trees of
    /// small files the reader's five system calls a file cost more than hashing the file, so
    /// the hasher would otherwise wait (issue #29). 0: the reader checks every file.
    pub check_backlog: usize,
    /// Under the same condition, and when not copying, the reader hands up to this many small
    /// files (at most [`HASHER_READ_MAX`] bytes) per batch to the hasher whole: it only lists
    /// them, the hasher opens, reads, checks and closes them. A bound per batch, so the
    /// hasher's extra work arrives in small steps and the balance can follow the backlog.
    pub hasher_reads_per_batch: usize,
}

impl<'a> Pass<'a> {
    pub(crate) fn read_only(source: &'a Path, limits: TreeLimits) -> Self {
        Self {
            source,
            limits,
            copy_to: None,
            require_normalized_modes: false,
            pause_marker: None,
            copy_backlog: POOL_BUFFERS / 2,
            check_backlog: 2,
            hasher_reads_per_batch: 96,
        }
    }
}

/// Files started and contents read, in walk order, packed into one pooled buffer.
struct Batch {
    /// Always [`CHUNK_BYTES`] long; `filled` bytes of it are in use.
    data: Vec<u8>,
    filled: usize,
    items: Vec<Item>,
    /// Files and bytes listed so far, when the batch was handed over (for progress).
    listed: (u64, u64),
    /// Files of this batch the hasher opens and reads itself.
    hasher_reads: usize,
}

enum Item {
    /// The next file (its relative path and listed size), and where to copy it.
    Begin(String, u64, Option<CopyTarget>),
    /// The next `len` bytes of `data` belong to the current file; `write`: the hasher writes
    /// them to the copy (otherwise the reader already has).
    Data { len: usize, write: bool },
    /// Every entry of this copied folder (relative path) has been announced: seal it.
    Seal(Arc<OwnedFd>, String),
    /// The current file has been read to its listed size: the hasher must find the open file
    /// still the listed one (`fstat` against the listing's stat) before it goes on, then close
    /// it. Checked later than the reader would, so it refuses at least what the reader would.
    Check(OwnedFd, Listed),
    /// The current file, of this name (its path from this byte on) in this folder and listed
    /// with this stat, is for the hasher to open, read, check and close, exactly as the reader
    /// would have.
    Read(Arc<OwnedFd>, usize, Listed),
}

enum CopyTarget {
    /// The hasher creates the copy and writes all of it.
    Create(CopyFile),
    /// The reader created the copy (and sets its final mode); the hasher writes the chunks
    /// marked for it.
    Shared(Arc<File>),
}

/// Where the hashing thread creates a file's copy: its folder in the copy, the mode to create
/// it with, and the mode to set once written when the umask would not keep the final one.
struct CopyFile {
    dir: Arc<OwnedFd>,
    mode: u32,
    chmod_to: Option<u32>,
}

impl Batch {
    fn new() -> Self {
        Self {
            data: vec![0u8; CHUNK_BYTES],
            filled: 0,
            items: Vec::new(),
            listed: (0, 0),
            hasher_reads: 0,
        }
    }
}

enum Message {
    Batch(Batch),
    Failed(SnapshotError),
}

/// Why the reader stopped early.
enum Stop {
    Failed(SnapshotError),
    /// The hashing side hung up (it failed and already has its error).
    HungUp,
}

impl Stop {
    /// The error, for the hashing side, which can only meet failures of its own checks.
    fn into_error(self) -> SnapshotError {
        match self {
            Self::Failed(error) => error,
            Self::HungUp => SnapshotError::ReaderLost,
        }
    }
}

impl From<SnapshotError> for Stop {
    fn from(error: SnapshotError) -> Self {
        Self::Failed(error)
    }
}

impl From<DigestError> for Stop {
    fn from(error: DigestError) -> Self {
        Self::Failed(error.into())
    }
}

/// State the two threads share.
#[derive(Default)]
struct Counters {
    /// Batches the hasher has finished: with the reader's count of batches sent, the hasher's
    /// real backlog (the pool's buffers cannot say it: a finished one waits there until the
    /// reader needs it again).
    hashed: AtomicUsize,
    /// Files the reader left open for the hasher to check, not yet closed.
    open_checks: AtomicUsize,
}

/// Walks, checks and hashes (and maybe copies) the tree of `pass`.
pub(crate) fn hash_tree(
    pass: &Pass<'_>,
    progress: &mut dyn ProgressSink,
) -> Result<Snapshot, SnapshotError> {
    // The walk learns the tree's size as it goes; totals grow through `ProgressSink::listed`.
    progress.start(0, 0);
    let (data_tx, data_rx) = sync_channel::<Message>(POOL_BUFFERS);
    let (pool_tx, pool_rx) = sync_channel::<Batch>(POOL_BUFFERS);
    let counters = Counters::default();
    let result = std::thread::scope(|scope| {
        let counters = &counters;
        let reader = scope.spawn(move || read_tree(pass, &data_tx, &pool_rx, counters));
        // Consumes the receiving ends, so when hashing fails early the reader's next send or
        // buffer request fails and it stops instead of blocking forever.
        let hashed = hash_batches(pass, data_rx, pool_tx, counters, progress);
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
fn hash_batches(
    pass: &Pass<'_>,
    data_rx: Receiver<Message>,
    pool_tx: SyncSender<Batch>,
    counters: &Counters,
    progress: &mut dyn ProgressSink,
) -> Result<Snapshot, SnapshotError> {
    let mut hasher = DirectoryHasher::new(pass.limits);
    let mut out = Output::default();
    // The file being hashed, for a check the reader left to us.
    let mut current = String::new();
    // Zeroed once: resizing it to each file's size zero-filled the growth again and again,
    // the largest user-space cost after the hash on small-file trees (callgrind, issue #29).
    let mut scratch = vec![0u8; HASHER_READ_MAX];
    for message in data_rx {
        let mut batch = match message {
            Message::Batch(batch) => batch,
            Message::Failed(error) => return Err(error),
        };
        progress.listed(batch.listed.0, batch.listed.1);
        let (mut at, mut files, mut read_here) = (0usize, 0u64, 0u64);
        for item in batch.items.drain(..) {
            match item {
                Item::Begin(path, size, copy) => {
                    hasher.begin_file(&path, size)?;
                    out.begin(pass.copy_to, &path, copy)?;
                    current = path;
                    files += 1;
                }
                Item::Check(file, listed) => {
                    let checked =
                        check_unchanged(&file, &listed, &|| abs_path(pass.source, &current));
                    drop(file);
                    counters.open_checks.fetch_sub(1, Ordering::Relaxed);
                    if let Err(stop) = checked {
                        return Err(stop.into_error());
                    }
                }
                Item::Read(dir, name_start, listed) => {
                    let name = current.get(name_start..).unwrap_or_default();
                    let path = || abs_path(pass.source, &current);
                    let bytes = read_small_checked(&dir, name, &listed, &path, &mut scratch)
                        .map_err(Stop::into_error)?;
                    hasher.update(bytes)?;
                    read_here += bytes.len() as u64;
                }
                Item::Data { len, write } => {
                    let chunk = at
                        .checked_add(len)
                        .and_then(|end| batch.data.get(at..end))
                        .ok_or(SnapshotError::ReaderLost)?;
                    hasher.update(chunk)?;
                    out.write(pass.copy_to, chunk, write)?;
                    at += len;
                }
                Item::Seal(dir, rel) => {
                    out.finish(pass.copy_to)?;
                    fchmod(&*dir, Mode::from_raw_mode(DIR_MODE)).map_err(|e| {
                        SnapshotError::Write {
                            path: copy_path(pass.copy_to, &rel),
                            source: e.into(),
                        }
                    })?;
                }
            }
        }
        progress.advance(files, at as u64 + read_here);
        hashed_batch_back(&pool_tx, batch, &counters.hashed);
    }
    out.finish(pass.copy_to)?;
    Ok(hasher.finish()?)
}

/// Counts a batch the hasher has finished with and puts it back in the pool, empty.
fn hashed_batch_back(pool_tx: &SyncSender<Batch>, mut batch: Batch, hashed_count: &AtomicUsize) {
    hashed_count.fetch_add(1, Ordering::Release);
    batch.filled = 0;
    batch.hasher_reads = 0;
    // The reader may already be gone after a failure; the buffer is then dropped.
    let _ = pool_tx.send(batch);
}

/// A copy being written: by the hashing thread, or by the reader for a file it copies alone.
#[derive(Default)]
struct Output {
    current: Option<Current>,
}

struct Current {
    file: Arc<File>,
    rel: String,
    /// Where the next chunk goes.
    offset: u64,
    /// The mode to set when done, if the file could not be born with it.
    chmod_to: Option<u32>,
}

impl Output {
    fn begin(
        &mut self,
        copy_to: Option<&Path>,
        rel: &str,
        copy: Option<CopyTarget>,
    ) -> Result<(), SnapshotError> {
        self.finish(copy_to)?;
        let (file, chmod_to) = match copy {
            None => return Ok(()),
            Some(CopyTarget::Shared(file)) => (file, None),
            Some(CopyTarget::Create(copy)) => {
                (Arc::new(create_copy(copy_to, &copy, rel)?), copy.chmod_to)
            }
        };
        self.current = Some(Current {
            file,
            rel: rel.to_owned(),
            offset: 0,
            chmod_to,
        });
        Ok(())
    }

    /// Accounts for the next chunk of the current copy, writing it if `write`.
    fn write(
        &mut self,
        copy_to: Option<&Path>,
        chunk: &[u8],
        write: bool,
    ) -> Result<(), SnapshotError> {
        if let Some(current) = self.current.as_mut() {
            if write {
                current
                    .file
                    .write_all_at(chunk, current.offset)
                    .map_err(|source| SnapshotError::Write {
                        path: copy_path(copy_to, &current.rel),
                        source,
                    })?;
            }
            current.offset += chunk.len() as u64;
        }
        Ok(())
    }

    /// Closes the current copy, setting its final mode if it could not be born with it.
    fn finish(&mut self, copy_to: Option<&Path>) -> Result<(), SnapshotError> {
        if let Some(Current {
            file,
            rel,
            chmod_to: Some(mode),
            ..
        }) = self.current.take()
        {
            fchmod(&*file, Mode::from_raw_mode(mode)).map_err(|e| SnapshotError::Write {
                path: copy_path(copy_to, &rel),
                source: e.into(),
            })?;
        }
        Ok(())
    }
}

fn create_copy(copy_to: Option<&Path>, copy: &CopyFile, rel: &str) -> Result<File, SnapshotError> {
    let name = rel.rsplit('/').next().unwrap_or_default();
    openat(&*copy.dir, name, COPY_FLAGS, Mode::from_raw_mode(copy.mode))
        .map(File::from)
        .map_err(|e| SnapshotError::Write {
            path: copy_path(copy_to, rel),
            source: e.into(),
        })
}

/// Returns whether the whole tree was read.
fn read_tree(
    pass: &Pass<'_>,
    data_tx: &SyncSender<Message>,
    pool_rx: &Receiver<Batch>,
    counters: &Counters,
) -> bool {
    let mut reader = Reader::new(pass, data_tx, pool_rx, counters);
    let outcome = reader.run().and_then(|()| reader.hand_over());
    match outcome {
        Ok(()) => true,
        Err(Stop::Failed(error)) => {
            let _ = data_tx.send(Message::Failed(error));
            false
        }
        Err(Stop::HungUp) => false,
    }
}

/// The reading side: the walk, the limits it enforces while listing, and the batch being
/// filled.
struct Reader<'p, 'c> {
    pass: &'p Pass<'p>,
    data_tx: &'c SyncSender<Message>,
    pool_rx: &'c Receiver<Batch>,
    batch: Option<Batch>,
    /// Batches taken back from the pool while draining (test hook only).
    spare: Vec<Batch>,
    /// Batch buffers allocated so far (at most [`POOL_BUFFERS`]); small trees need one.
    allocated: usize,
    /// Batches handed over, and those the hasher has finished (shared with it): the
    /// difference is the hasher's backlog.
    sent: usize,
    counters: &'c Counters,
    /// Files, bytes and folders listed so far, checked against the limits as they grow.
    files: u64,
    bytes: u64,
    dirs: u64,
    paused: bool,
    /// Copies can be created with their final mode (the umask keeps it); otherwise they are
    /// created private and `fchmod`ed once written.
    create_final_mode: bool,
}

/// One listed entry of a folder. The stat is the listing's: files and folders read later must
/// still match it.
struct Child {
    /// The path relative to the root, built once (it is checked when listed and is the
    /// digest's name for the file); the entry's own name is its tail from `name_start`.
    rel: String,
    name_start: usize,
    is_dir: bool,
    stat: Stat,
}

impl Child {
    fn name(&self) -> &str {
        self.rel.get(self.name_start..).unwrap_or_default()
    }

    /// The digest order among siblings: a folder sorts as its name followed by `/`, which is
    /// where all its files fall in a flat sort of whole paths.
    fn sort_key(&self) -> impl Iterator<Item = u8> + '_ {
        self.name().bytes().chain(self.is_dir.then_some(b'/'))
    }
}

/// Folders are never followed through a link, and a non-folder in their place fails.
const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);
/// `O_NOFOLLOW`: a file swapped for a link after listing is refused, not followed.
/// `O_NONBLOCK`: a file swapped for a fifo cannot make the open (or a read) hang.
const FILE_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::CLOEXEC);
/// A copy is always a new file in our private work folder, never through a link.
const COPY_FLAGS: OFlags = OFlags::WRONLY
    .union(OFlags::CREATE)
    .union(OFlags::EXCL)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

impl<'p, 'c> Reader<'p, 'c> {
    fn new(
        pass: &'p Pass<'p>,
        data_tx: &'c SyncSender<Message>,
        pool_rx: &'c Receiver<Batch>,
        counters: &'c Counters,
    ) -> Self {
        Self {
            pass,
            data_tx,
            pool_rx,
            batch: None,
            spare: Vec::new(),
            allocated: 0,
            sent: 0,
            counters,
            files: 0,
            bytes: 0,
            dirs: 0,
            paused: pass.pause_marker.is_none(),
            create_final_mode: pass.copy_to.is_some()
                && process_umask().is_some_and(|umask| umask & 0o555 == 0),
        }
    }

    fn run(&mut self) -> Result<(), Stop> {
        let source = self.pass.source;
        let root = openat(CWD, source, DIR_FLAGS, Mode::empty()).map_err(|errno| match errno {
            Errno::LOOP | Errno::NOTDIR => DigestError::NotADirectory(source.into()).into(),
            other => io_error(source, other),
        })?;
        if self.pass.require_normalized_modes {
            let st = fstat(&root).map_err(|e| io_error(source, e))?;
            check_dir_mode(source, &st)?;
        }
        let dest = match self.pass.copy_to {
            Some(dest) => Some(Arc::new(
                openat(CWD, dest, DIR_FLAGS, Mode::empty())
                    .map_err(|e| write_error(dest.to_path_buf(), e))?,
            )),
            None => None,
        };
        self.walk(root, dest.as_ref(), "")
    }

    /// Lists the folder open at `fd`, then reads its files and walks its folders in digest
    /// order. Only the chain of folders being walked (bounded by the depth limit) is held open,
    /// each with its sorted listing.
    fn walk(&mut self, fd: OwnedFd, dest: Option<&Arc<OwnedFd>>, rel: &str) -> Result<(), Stop> {
        let mut dir = Dir::new(fd).map_err(|e| io_error(&self.abs(rel), e))?;
        let children = self.list(&mut dir, rel)?;
        let dir_fd = dir.fd().map_err(|e| io_error(&self.abs(rel), e))?;
        // This folder's descriptor for the hasher, duplicated when it is first handed a file.
        let mut for_hasher: Option<Arc<OwnedFd>> = None;
        for child in children {
            if !child.is_dir {
                if self.hasher_may_read(&child) {
                    let shared = match &for_hasher {
                        Some(fd) => Arc::clone(fd),
                        None => {
                            let fd = fcntl_dupfd_cloexec(dir_fd, 0)
                                .map_err(|e| io_error(&self.abs(rel), e))?;
                            Arc::clone(for_hasher.insert(Arc::new(fd)))
                        }
                    };
                    self.hand_file_to_hasher(shared, child)?;
                } else {
                    self.read_file(dir_fd, dest, &child)?;
                }
                continue;
            }
            let child_rel = child.rel.as_str();
            let abs = || self.abs(child_rel);
            let sub = openat(dir_fd, child.name(), DIR_FLAGS, Mode::empty())
                .map_err(|errno| open_failure(&abs(), errno))?;
            let st = fstat(&sub).map_err(|e| io_error(&abs(), e))?;
            // Opened through the listed name, so it must be the listed folder: one swapped
            // for another folder after the listing is a change, as for files.
            if st.st_dev != child.stat.st_dev || st.st_ino != child.stat.st_ino {
                return Err(changed(&abs()));
            }
            if self.pass.require_normalized_modes {
                check_dir_mode(&abs(), &st)?;
            }
            let sub_dest = match dest {
                Some(parent) => Some(Arc::new(self.make_copy_dir(
                    parent.as_fd(),
                    child.name(),
                    child_rel,
                )?)),
                None => None,
            };
            self.walk(sub, sub_dest.as_ref(), child_rel)?;
            if let Some(sub_dest) = sub_dest {
                // Everything below is announced; the hasher seals the folder once it has
                // written it.
                self.batch_with_room()?
                    .items
                    .push(Item::Seal(sub_dest, child.rel));
            }
        }
        Ok(())
    }

    /// Reads the whole listing of `dir`, checking names, kinds and the limits entry by entry
    /// (so a huge folder fails as soon as it crosses a limit, before the rest is read), and
    /// sorts it into digest order.
    fn list(&mut self, dir: &mut Dir, rel: &str) -> Result<Vec<Child>, Stop> {
        let mut children = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(|e| io_error(&self.abs(rel), e))?;
            let name_bytes = entry.file_name().to_bytes();
            if name_bytes == b"." || name_bytes == b".." {
                continue;
            }
            let Ok(name) = std::str::from_utf8(name_bytes) else {
                let abs = self.abs(rel).join(std::ffi::OsStr::from_bytes(name_bytes));
                return Err(DigestError::NonUtf8Name(abs).into());
            };
            let child_rel = join_rel(rel, name);
            validate_relative_path(&child_rel)?;
            let dir_fd = dir.fd().map_err(|e| io_error(&self.abs(rel), e))?;
            // `d_type` refuses links and special files without a stat; files need one for
            // their size, identity and times, folders for their identity, and a filesystem
            // without `d_type` for everything.
            let kind = entry.file_type();
            if !matches!(
                kind,
                FileType::Unknown | FileType::RegularFile | FileType::Directory
            ) {
                return Err(refused_kind(kind, self.abs(&child_rel)));
            }
            let stat = statat(dir_fd, name, AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|e| io_error(&self.abs(&child_rel), e))?;
            let is_dir = match FileType::from_raw_mode(stat.st_mode) {
                FileType::Directory => {
                    if self.dirs >= MAX_DIRECTORIES {
                        return Err(DigestError::TooManyDirectories.into());
                    }
                    self.dirs += 1;
                    true
                }
                FileType::RegularFile => {
                    let limits = self.pass.limits;
                    if self.files >= limits.max_files {
                        return Err(DigestError::TooManyFiles {
                            limit: limits.max_files,
                        }
                        .into());
                    }
                    self.files += 1;
                    let size = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
                    self.bytes = self.bytes.saturating_add(size);
                    if self.bytes > limits.max_bytes {
                        return Err(DigestError::TooManyBytes {
                            limit: limits.max_bytes,
                        }
                        .into());
                    }
                    false
                }
                other => return Err(refused_kind(other, self.abs(&child_rel))),
            };
            let name_start = child_rel.len() - name.len();
            children.push(Child {
                rel: child_rel,
                name_start,
                is_dir,
                stat,
            });
        }
        children.sort_unstable_by(|a, b| a.sort_key().cmp(b.sort_key()));
        Ok(children)
    }

    /// Whether the hasher keeps up well enough to open and read `child` itself.
    fn hasher_may_read(&self, child: &Child) -> bool {
        let batch_reads = self.batch.as_ref().map_or(0, |b| b.hasher_reads);
        self.pass.copy_to.is_none()
            && u64::try_from(child.stat.st_size).is_ok_and(|size| size <= HASHER_READ_MAX as u64)
            && batch_reads < self.pass.hasher_reads_per_batch
            && self.backlog() < self.pass.check_backlog
    }

    /// Announces `child`, listed in the folder open at `dir`, for the hasher to read.
    fn hand_file_to_hasher(&mut self, dir: Arc<OwnedFd>, child: Child) -> Result<(), Stop> {
        self.check_file_mode(&child.rel, &child.stat)?;
        let size = u64::try_from(child.stat.st_size).unwrap_or(u64::MAX);
        let batch = self.batch_with_room()?;
        batch.items.push(Item::Begin(child.rel, size, None));
        batch
            .items
            .push(Item::Read(dir, child.name_start, Listed::from(&child.stat)));
        batch.hasher_reads += 1;
        self.after_file()
    }

    fn check_file_mode(&self, rel: &str, listed: &Stat) -> Result<(), Stop> {
        let mode = listed.st_mode & 0o7777;
        if self.pass.require_normalized_modes && mode != FILE_MODE && mode != EXEC_FILE_MODE {
            return Err(SnapshotError::FileMode {
                path: self.abs(rel),
                mode,
            }
            .into());
        }
        Ok(())
    }

    /// The test hook's pause, after the first file.
    fn after_file(&mut self) -> Result<(), Stop> {
        if !self.paused {
            self.paused = true;
            if let Some(marker) = &self.pass.pause_marker {
                self.drain()?;
                pause_at_marker(marker);
            }
        }
        Ok(())
    }

    fn read_file(
        &mut self,
        dir_fd: BorrowedFd<'_>,
        dest: Option<&Arc<OwnedFd>>,
        child: &Child,
    ) -> Result<(), Stop> {
        let (rel, listed) = (child.rel.as_str(), &child.stat);
        let mode = listed.st_mode & 0o7777;
        self.check_file_mode(rel, listed)?;
        let file = openat(dir_fd, child.name(), FILE_FLAGS, Mode::empty())
            .map_err(|errno| open_failure(&self.abs(rel), errno))?;
        let normalized = if mode & 0o111 != 0 {
            EXEC_FILE_MODE
        } else {
            FILE_MODE
        };
        // A new file is writable through the descriptor that created it whatever its mode, so
        // it can be born read-only and skip a `fchmod`.
        let copy = dest.map(|dir| CopyFile {
            dir: Arc::clone(dir),
            mode: if self.create_final_mode {
                normalized
            } else {
                0o600
            },
            chmod_to: (!self.create_final_mode).then_some(normalized),
        });
        let size = u64::try_from(listed.st_size).unwrap_or(u64::MAX);
        let (source, copy_to) = (self.pass.source, self.pass.copy_to);
        // With half the pool queued the hasher is the slower side, so the reader creates the
        // copy; it also creates every file spanning batches, so that each chunk can go to
        // whichever side is free.
        let mut own_copy = Output::default();
        let copy = match copy {
            Some(copy) if self.hasher_behind() || size > (CHUNK_BYTES / 2) as u64 => {
                let file = Arc::new(create_copy(copy_to, &copy, rel)?);
                own_copy.begin(copy_to, rel, Some(CopyTarget::Shared(Arc::clone(&file))))?;
                if let Some(current) = own_copy.current.as_mut() {
                    current.chmod_to = copy.chmod_to;
                }
                Some(CopyTarget::Shared(file))
            }
            Some(copy) => Some(CopyTarget::Create(copy)),
            None => None,
        };
        let shared = matches!(copy, Some(CopyTarget::Shared(_)));
        self.batch_with_room()?
            .items
            .push(Item::Begin(rel.to_owned(), size, copy));

        // Exactly the listed size is read; growth or any rewrite until the last byte shows in
        // the `fstat` below, which saves an end-of-file probe per file on small-file trees.
        let mut remaining = size;
        while remaining > 0 {
            let reader_writes = self.hasher_behind();
            let batch = self.batch_with_room()?;
            let free = batch.data.get_mut(batch.filled..).unwrap_or_default();
            let want = usize::try_from(remaining)
                .unwrap_or(usize::MAX)
                .min(free.len());
            let slot = free.get_mut(..want).unwrap_or_default();
            let n = match read_retrying(&file, slot) {
                Ok(n) => n,
                // A file swapped for a folder or a fifo fails to read; say it changed.
                Err(errno) => {
                    let listed = Listed::from(listed);
                    return Err(read_failure(
                        &file,
                        &|| abs_path(source, rel),
                        &listed,
                        errno,
                    ));
                }
            };
            if n == 0 {
                break;
            }
            // Decided before taking the batch, which borrows `self`.
            let write_here = shared && reader_writes;
            own_copy.write(copy_to, slot.get(..n).unwrap_or_default(), write_here)?;
            batch.items.push(Item::Data {
                len: n,
                write: !write_here,
            });
            batch.filled += n;
            remaining -= n as u64;
        }

        if self.hasher_has_time() {
            self.counters.open_checks.fetch_add(1, Ordering::Relaxed);
            self.batch_with_room()?
                .items
                .push(Item::Check(file, Listed::from(listed)));
        } else {
            check_unchanged(&file, &Listed::from(listed), &|| self.abs(rel))?;
        }
        own_copy.finish(copy_to)?;
        self.after_file()
    }

    /// The batch being filled, handing it over first when it has no room or enough files.
    fn batch_with_room(&mut self) -> Result<&mut Batch, Stop> {
        if self
            .batch
            .as_ref()
            .is_some_and(|b| b.filled == b.data.len() || b.items.len() >= BATCH_FILES)
        {
            self.hand_over()?;
        }
        if self.batch.is_none() {
            self.batch = Some(self.fresh_batch()?);
        }
        self.batch
            .as_mut()
            .ok_or(Stop::Failed(SnapshotError::ReaderLost))
    }

    /// Sends the batch being filled, if any, to the hasher.
    fn hand_over(&mut self) -> Result<(), Stop> {
        if let Some(mut batch) = self.batch.take() {
            batch.listed = (self.files, self.bytes);
            self.data_tx
                .send(Message::Batch(batch))
                .map_err(|_| Stop::HungUp)?;
            self.sent += 1;
        }
        Ok(())
    }

    /// Whether the hasher has `copy_backlog` (half the pool) batches it has not finished.
    /// Not "buffers not yet back in the reader's hands": a finished buffer waits in the pool
    /// until the reader needs a fresh one, so that count stays at the number allocated less
    /// one and, once the reader had allocated more than the threshold, said "behind" for the
    /// rest of the run (the reader then made 95-99 % of the copies, issue #29).
    fn hasher_behind(&self) -> bool {
        self.backlog() >= self.pass.copy_backlog
    }

    /// Batches handed over that the hasher has not finished.
    fn backlog(&self) -> usize {
        self.sent
            .saturating_sub(self.counters.hashed.load(Ordering::Acquire))
    }

    /// Whether the hasher is keeping up well enough to take a file's closing check, and few
    /// enough files are already left open for it. Balances the two cores as the walk goes:
    /// checks left to the hasher slow it, its backlog grows, and the reader takes them back.
    fn hasher_has_time(&self) -> bool {
        self.backlog() < self.pass.check_backlog
            && self.counters.open_checks.load(Ordering::Relaxed) < MAX_OPEN_CHECKS
    }

    /// Hands over the batch being filled and waits until the hasher has processed (and
    /// copied) everything, so the test hook pauses with the first file written.
    fn drain(&mut self) -> Result<(), Stop> {
        self.hand_over()?;
        while self.spare.len() < self.allocated {
            let batch = self.pool_rx.recv().map_err(|_| Stop::HungUp)?;
            self.spare.push(batch);
        }
        Ok(())
    }

    fn fresh_batch(&mut self) -> Result<Batch, Stop> {
        if let Some(batch) = self.spare.pop() {
            return Ok(batch);
        }
        match self.pool_rx.try_recv() {
            Ok(batch) => {
                return Ok(batch);
            }
            Err(TryRecvError::Disconnected) => return Err(Stop::HungUp),
            Err(TryRecvError::Empty) => {}
        }
        if self.allocated < POOL_BUFFERS {
            self.allocated += 1;
            return Ok(Batch::new());
        }
        let batch = self.pool_rx.recv().map_err(|_| Stop::HungUp)?;
        Ok(batch)
    }

    fn make_copy_dir(
        &self,
        parent: BorrowedFd<'_>,
        name: &str,
        rel: &str,
    ) -> Result<OwnedFd, Stop> {
        mkdirat(parent, name, Mode::from_raw_mode(0o700))
            .and_then(|()| openat(parent, name, DIR_FLAGS, Mode::empty()))
            .map_err(|e| write_error(self.copy_path(rel), e))
    }

    fn abs(&self, rel: &str) -> PathBuf {
        abs_path(self.pass.source, rel)
    }

    fn copy_path(&self, rel: &str) -> PathBuf {
        copy_path(self.pass.copy_to, rel)
    }
}

fn abs_path(source: &Path, rel: &str) -> PathBuf {
    if rel.is_empty() {
        source.to_path_buf()
    } else {
        source.join(rel)
    }
}

fn copy_path(copy_to: Option<&Path>, rel: &str) -> PathBuf {
    copy_to.unwrap_or(Path::new("")).join(rel)
}

/// The `fstat` of `file` after its last byte was read: refused unless it is still the listed
/// file, unchanged.
/// `path` is only built for an error: the check passes for nearly every file of a tree, and a
/// path allocated per file was a measurable share of the walk's user time (issue #29).
fn check_unchanged(
    file: &OwnedFd,
    listed: &Listed,
    path: &dyn Fn() -> PathBuf,
) -> Result<(), Stop> {
    let after = fstat(file).map_err(|e| io_error(&path(), e))?;
    if listed.same_file_unchanged(&after) {
        Ok(())
    } else {
        Err(changed(&path()))
    }
}

/// The hasher's read of a file handed to it whole: the reader's sequence for a small file
/// (`openat` relative to the folder with `O_NOFOLLOW`, one read of the listed size, the
/// `fstat` that must equal the listing's, the `close`), into `buf`.
fn read_small_checked<'b>(
    dir: &OwnedFd,
    name: &str,
    listed: &Listed,
    path: &dyn Fn() -> PathBuf,
    buf: &'b mut [u8],
) -> Result<&'b [u8], Stop> {
    let file =
        openat(dir, name, FILE_FLAGS, Mode::empty()).map_err(|e| open_failure(&path(), e))?;
    let size = usize::try_from(listed.size).unwrap_or(usize::MAX);
    let Some(buf) = buf.get_mut(..size) else {
        return Err(Stop::Failed(SnapshotError::ReaderLost));
    };
    let n = read_retrying(&file, buf).map_err(|errno| read_failure(&file, path, listed, errno))?;
    check_unchanged(&file, listed, path)?;
    Ok(buf.get(..n).unwrap_or_default())
}

fn read_failure(file: &OwnedFd, path: &dyn Fn() -> PathBuf, listed: &Listed, errno: Errno) -> Stop {
    match fstat(file) {
        Ok(now) if listed.same_file_unchanged(&now) => io_error(&path(), errno),
        _ => changed(&path()),
    }
}

fn join_rel(rel: &str, name: &str) -> String {
    if rel.is_empty() {
        name.to_owned()
    } else {
        format!("{rel}/{name}")
    }
}

/// What a file's closing check compares of its listed stat: carried inline with the file's
/// items instead of a boxed `Stat` (an allocation a file, issue #29).
#[derive(Clone, Copy)]
struct Listed {
    dev: u64,
    ino: u64,
    size: i64,
    mtime: i64,
    mtime_nsec: u64,
    ctime: i64,
    ctime_nsec: u64,
}

impl From<&Stat> for Listed {
    fn from(st: &Stat) -> Self {
        Self {
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size,
            mtime: st.st_mtime,
            mtime_nsec: st.st_mtime_nsec,
            ctime: st.st_ctime,
            ctime_nsec: st.st_ctime_nsec,
        }
    }
}

impl Listed {
    /// Whether `now` (an `fstat` of the opened file) is the listed file, still of the listed
    /// size and not written or otherwise changed since (any write moves the modification time,
    /// any metadata change the change time).
    fn same_file_unchanged(&self, now: &Stat) -> bool {
        let now_listed = Self::from(now);
        FileType::from_raw_mode(now.st_mode) == FileType::RegularFile
            && now_listed.dev == self.dev
            && now_listed.ino == self.ino
            && now_listed.size == self.size
            && now_listed.mtime == self.mtime
            && now_listed.mtime_nsec == self.mtime_nsec
            && now_listed.ctime == self.ctime
            && now_listed.ctime_nsec == self.ctime_nsec
    }
}

fn check_dir_mode(path: &Path, st: &Stat) -> Result<(), Stop> {
    let mode = st.st_mode & 0o7777;
    if mode == DIR_MODE {
        Ok(())
    } else {
        Err(SnapshotError::DirectoryMode {
            path: path.to_path_buf(),
            mode,
        }
        .into())
    }
}

fn refused_kind(kind: FileType, path: PathBuf) -> Stop {
    match kind {
        FileType::Symlink => DigestError::Symlink(path).into(),
        _ => DigestError::SpecialFile(path).into(),
    }
}

/// A missing entry, a link, or a non-folder where a folder was listed means the tree changed.
fn open_failure(path: &Path, errno: Errno) -> Stop {
    match errno {
        Errno::NOENT | Errno::LOOP | Errno::NOTDIR => changed(path),
        other => io_error(path, other),
    }
}

fn changed(path: &Path) -> Stop {
    Stop::Failed(SnapshotError::Changed(path.to_path_buf()))
}

fn io_error(path: &Path, errno: Errno) -> Stop {
    DigestError::Io {
        path: path.to_path_buf(),
        source: errno.into(),
    }
    .into()
}

fn write_error(path: PathBuf, errno: Errno) -> Stop {
    Stop::Failed(SnapshotError::Write {
        path,
        source: errno.into(),
    })
}

/// The process umask, from `/proc` (asking the kernel for it means setting it, which would
/// race with other threads creating files).
fn process_umask() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let value = status
        .lines()
        .find_map(|line| line.strip_prefix("Umask:"))?;
    u32::from_str_radix(value.trim(), 8).ok()
}

/// Fills `buf` as far as the file allows, so chunks stay large even if a read returns short.
fn read_retrying(file: &OwnedFd, buf: &mut [u8]) -> Result<usize, Errno> {
    let mut filled = 0;
    while filled < buf.len() {
        let Some(rest) = buf.get_mut(filled..) else {
            break;
        };
        match rustix::io::read(file, rest) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(Errno::INTR) => {}
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
    use std::fs::{self, OpenOptions, Permissions};
    use std::io::Write;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn limits() -> TreeLimits {
        TreeLimits::new(1 << 30, 1000).unwrap()
    }

    /// Issue #29 item 0: the reader must copy files itself only while the hasher really has
    /// `copy_backlog` batches it has not hashed yet. Buffers the hasher has finished with and
    /// put back in the pool, which the reader simply has not taken again, are no backlog:
    /// counting them latched "behind" for the rest of the run once the reader had allocated
    /// more than `copy_backlog` buffers, and the reader then made nearly every copy.
    #[test]
    fn buffers_the_hasher_has_finished_are_not_its_backlog() {
        let dir = tempfile::tempdir().unwrap();
        let pass = Pass::read_only(dir.path(), limits());
        let (data_tx, data_rx) = sync_channel::<Message>(POOL_BUFFERS);
        let (pool_tx, pool_rx) = sync_channel::<Batch>(POOL_BUFFERS);
        let counters = Counters::default();
        let mut reader = Reader::new(&pass, &data_tx, &pool_rx, &counters);
        // The reader fills and hands over more batches than the backlog threshold while the
        // pool is empty, so it allocates a buffer for each.
        for _ in 0..=pass.copy_backlog {
            reader.batch = Some(reader.fresh_batch().ok().unwrap());
            reader.hand_over().ok().unwrap();
        }
        assert!(reader.hasher_behind(), "all of them are queued, unhashed");
        // The hasher hashes every one and puts it back in the pool, as hash_batches does.
        for message in data_rx.try_iter() {
            let Message::Batch(batch) = message else {
                panic!("only batches were sent")
            };
            hashed_batch_back(&pool_tx, batch, &counters.hashed);
        }
        assert!(
            !reader.hasher_behind(),
            "the hasher has nothing left to hash, so the reader must not take its copies"
        );
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
        // The streamed walk enumerates what it copies: the copy's listing (files in digest
        // order, sizes, exec bits, every folder) must be the sdk's listing of the input.
        let copy = tempfile::tempdir().unwrap();
        let pass = Pass {
            copy_to: Some(copy.path()),
            ..Pass::read_only(dir.path(), limits())
        };
        let snap = hash_tree(&pass, &mut NoProgress).unwrap();
        assert_eq!(
            snap,
            verifier_sdk::digest_directory(dir.path(), limits()).unwrap()
        );
        let shape = |root: &Path| {
            let (files, dirs) = verifier_sdk::digest::list_tree(root, limits()).unwrap();
            let files: Vec<_> = files
                .into_iter()
                .map(|e| (e.rel_path, e.size, e.executable))
                .collect();
            (files, dirs)
        };
        let ours = shape(copy.path());
        assert_eq!(ours, shape(dir.path()));
        assert_eq!(ours.0.len(), 5);

        std::os::unix::fs::symlink("a", dir.path().join("a/link")).unwrap();
        let err = snapshot_directory(dir.path(), limits()).unwrap_err();
        assert!(
            matches!(err, SnapshotError::Tree(DigestError::Symlink(ref p)) if *p == dir.path().join("a/link")),
            "{err}"
        );
        let root_link = dir.path().join("root-link");
        std::os::unix::fs::symlink(dir.path().join("empty"), &root_link).unwrap();
        let err = snapshot_directory(&root_link, limits()).unwrap_err();
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
    fn more_files_than_a_batch_holds_match_the_reference() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..(BATCH_FILES * 3 + 7) {
            let sub = dir.path().join(format!("d{}", i % 3));
            fs::create_dir_all(&sub).unwrap();
            fs::write(sub.join(format!("f{i:05}")), vec![i as u8; i % 5]).unwrap();
        }
        let limits = TreeLimits::new(1 << 30, 10_000).unwrap();
        let reference = verifier_sdk::digest_directory(dir.path(), limits).unwrap();
        assert_eq!(snapshot_directory(dir.path(), limits).unwrap(), reference);
        // More files than may be left open for the hasher, whoever checks them.
        for (staged, check_backlog, hasher_reads, kind) in PASS_KINDS {
            let copy = tempfile::tempdir().unwrap();
            let pass = Pass {
                copy_to: staged.then_some(copy.path()),
                check_backlog,
                hasher_reads_per_batch: hasher_reads,
                ..Pass::read_only(dir.path(), limits)
            };
            assert_eq!(
                hash_tree(&pass, &mut NoProgress).unwrap(),
                reference,
                "{kind}"
            );
            if staged {
                let copied = verifier_sdk::digest_directory(copy.path(), limits).unwrap();
                assert_eq!(copied, reference, "{kind}");
                seal_back_writable(copy.path());
            }
        }
    }

    /// Makes a staged copy removable again.
    fn seal_back_writable(root: &Path) {
        for entry in fs::read_dir(root).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                fs::set_permissions(&path, Permissions::from_mode(0o700)).unwrap();
                seal_back_writable(&path);
            }
        }
    }

    /// Runs the reader alone over `dir` with `pass` (nothing hashes: the hasher's backlog is
    /// `backlog` batches throughout) and returns how many files it left open for the hasher
    /// to check and how many it handed to the hasher to read, per batch.
    fn left_to_the_hasher(pass: &Pass<'_>, backlog: usize) -> Vec<(usize, usize)> {
        let (data_tx, data_rx) = sync_channel(POOL_BUFFERS);
        let (_pool_tx, pool_rx) = sync_channel(POOL_BUFFERS);
        let counters = Counters::default();
        let mut reader = Reader::new(pass, &data_tx, &pool_rx, &counters);
        reader.sent = backlog;
        assert!(reader.run().and_then(|()| reader.hand_over()).is_ok());
        let batches: Vec<(usize, usize)> = data_rx
            .try_iter()
            .map(|message| match message {
                Message::Batch(batch) => {
                    let count = |f: fn(&Item) -> bool| batch.items.iter().filter(|i| f(i)).count();
                    (
                        count(|i| matches!(i, Item::Check(..))),
                        count(|i| matches!(i, Item::Read(..))),
                    )
                }
                Message::Failed(error) => panic!("{error}"),
            })
            .collect();
        let checks: usize = batches.iter().map(|b| b.0).sum();
        assert_eq!(counters.open_checks.load(Ordering::Relaxed), checks);
        batches
    }

    /// [`left_to_the_hasher`] in total.
    fn total_left(pass: &Pass<'_>, backlog: usize) -> (usize, usize) {
        left_to_the_hasher(pass, backlog)
            .into_iter()
            .fold((0, 0), |(c, r), (bc, br)| (c + bc, r + br))
    }

    /// Issue #29 item 1: on small files the reader's system calls outweigh the hash, so while
    /// the hasher keeps up it takes each file's closing `fstat` and `close`; once batches
    /// queue for it, the reader checks files itself again.
    #[test]
    fn the_hasher_takes_the_closing_checks_only_while_it_keeps_up() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a", "b", "c"] {
            fs::write(dir.path().join(name), name).unwrap();
        }
        let checks_only = |check_backlog| Pass {
            check_backlog,
            hasher_reads_per_batch: 0,
            ..Pass::read_only(dir.path(), limits())
        };
        let default = Pass::read_only(dir.path(), limits()).check_backlog;
        assert_eq!(total_left(&checks_only(default), 0), (3, 0));
        assert_eq!(total_left(&checks_only(default), default), (0, 0));
        assert_eq!(total_left(&checks_only(0), 0), (0, 0));
    }

    /// Issue #29 item 1: while the hasher keeps up it also opens and reads small files itself
    /// (the reader only lists them), a bounded number per batch, never while staging and
    /// never a file over [`HASHER_READ_MAX`].
    #[test]
    fn the_hasher_reads_small_files_only_while_it_keeps_up() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..100 {
            fs::write(dir.path().join(format!("f{i:03}")), b"small").unwrap();
        }
        fs::write(dir.path().join("large"), vec![1u8; HASHER_READ_MAX + 1]).unwrap();
        let pass = Pass::read_only(dir.path(), limits());
        let per_batch = pass.hasher_reads_per_batch;
        let batches = left_to_the_hasher(&pass, 0);
        assert!(
            batches.iter().all(|&(_, reads)| reads <= per_batch),
            "{batches:?}"
        );
        assert_eq!(
            batches.iter().map(|b| b.0 + b.1).sum::<usize>(),
            101,
            "{batches:?}"
        );
        assert_eq!(batches.first().map(|b| b.1), Some(per_batch), "{batches:?}");
        // The large file is always read by the reader, which leaves the hasher its check.
        let everything = Pass {
            hasher_reads_per_batch: usize::MAX,
            ..Pass::read_only(dir.path(), limits())
        };
        assert_eq!(total_left(&everything, 0), (1, 100));
        assert_eq!(total_left(&everything, pass.check_backlog), (0, 0));
        let copy = tempfile::tempdir().unwrap();
        let staging = Pass {
            copy_to: Some(copy.path()),
            hasher_reads_per_batch: usize::MAX,
            ..Pass::read_only(dir.path(), limits())
        };
        assert_eq!(total_left(&staging, 0).1, 0);
    }

    /// Files left open for the hasher hold descriptors until it checks them: however far the
    /// reader runs ahead, no more than [`MAX_OPEN_CHECKS`] are open at once.
    #[test]
    fn files_left_open_for_the_hasher_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..MAX_OPEN_CHECKS + 40 {
            fs::write(dir.path().join(format!("f{i:04}")), b"x").unwrap();
        }
        let pass = Pass {
            check_backlog: usize::MAX,
            hasher_reads_per_batch: 0,
            ..Pass::read_only(dir.path(), limits())
        };
        assert_eq!(total_left(&pass, 0), (MAX_OPEN_CHECKS, 0));
    }

    /// Lists `dir` on this thread as the reader would and returns the error and how many files
    /// and bytes were counted when it stopped.
    fn list_until_refused(dir: &Path, limits: TreeLimits) -> (SnapshotError, u64, u64) {
        let pass = Pass::read_only(dir, limits);
        let (data_tx, _data_rx) = sync_channel(POOL_BUFFERS);
        let (_pool_tx, pool_rx) = sync_channel(POOL_BUFFERS);
        let counters = Counters::default();
        let mut reader = Reader::new(&pass, &data_tx, &pool_rx, &counters);
        match reader.run() {
            Err(Stop::Failed(error)) => (error, reader.files, reader.bytes),
            Ok(()) => panic!("accepted"),
            Err(Stop::HungUp) => panic!("hung up"),
        }
    }

    #[test]
    fn a_huge_folder_is_refused_at_the_limit_while_it_is_listed() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("huge")).unwrap();
        for i in 0..3000 {
            fs::write(dir.path().join(format!("huge/f{i:04}")), b"x").unwrap();
        }
        // The listing stops at the first file over the limit, not after reading the folder.
        let files = TreeLimits::new(1 << 20, 10).unwrap();
        let (err, counted, _) = list_until_refused(dir.path(), files);
        assert!(
            matches!(
                err,
                SnapshotError::Tree(DigestError::TooManyFiles { limit: 10 })
            ),
            "{err}"
        );
        assert_eq!(counted, 10);
        let bytes = TreeLimits::new(10, 100_000).unwrap();
        let (err, counted, total) = list_until_refused(dir.path(), bytes);
        assert!(
            matches!(
                err,
                SnapshotError::Tree(DigestError::TooManyBytes { limit: 10 })
            ),
            "{err}"
        );
        assert_eq!((counted, total), (11, 11));
        // Exactly at the limits is fine.
        let exact = TreeLimits::new(3000, 3000).unwrap();
        assert_eq!(
            snapshot_directory(dir.path(), exact).unwrap(),
            verifier_sdk::digest_directory(dir.path(), exact).unwrap()
        );
    }

    #[test]
    fn copy_writes_exact_bytes_with_normalized_modes() {
        // Copies written by the hasher (it keeps up), then all by the reader.
        copy_writes_exact_bytes_with_normalized_modes_at(usize::MAX);
        copy_writes_exact_bytes_with_normalized_modes_at(0);
    }

    fn copy_writes_exact_bytes_with_normalized_modes_at(copy_backlog: usize) {
        let src = tempfile::tempdir().unwrap();
        let dst = tempfile::tempdir().unwrap();
        fs::write(src.path().join("run.sh"), b"#!/bin/sh\n").unwrap();
        fs::set_permissions(src.path().join("run.sh"), Permissions::from_mode(0o710)).unwrap();
        fs::write(src.path().join("data"), vec![9u8; CHUNK_BYTES + 1]).unwrap();
        fs::set_permissions(src.path().join("data"), Permissions::from_mode(0o666)).unwrap();
        fs::create_dir_all(src.path().join("sub/deeper")).unwrap();
        fs::write(src.path().join("sub/deeper/f"), b"deep").unwrap();
        fs::create_dir(src.path().join("sub/empty")).unwrap();
        let pass = Pass {
            copy_to: Some(dst.path()),
            copy_backlog,
            ..Pass::read_only(src.path(), limits())
        };
        let snap = hash_tree(&pass, &mut NoProgress).unwrap();
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
        assert_eq!(mode("sub/deeper/f"), 0o444);
        for folder in ["sub", "sub/deeper", "sub/empty"] {
            assert_eq!(mode(folder), DIR_MODE, "{folder}");
        }
        for folder in ["sub/deeper", "sub/empty", "sub"] {
            fs::set_permissions(dst.path().join(folder), Permissions::from_mode(0o700)).unwrap();
        }
    }

    /// Issue #29 item 0: files spanning batches are staged byte for byte from the buffers
    /// that were hashed, whichever thread writes their chunks.
    #[test]
    fn large_files_are_staged_byte_for_byte_from_the_hashed_buffers() {
        for copy_backlog in [usize::MAX, 0] {
            let src = tempfile::tempdir().unwrap();
            let dst = tempfile::tempdir().unwrap();
            let pattern = |len: usize, seed: u8| -> Vec<u8> {
                (0..len)
                    .map(|i| (i as u8).wrapping_mul(31) ^ seed)
                    .collect()
            };
            let big = pattern(CHUNK_BYTES * 3 + 5, 1);
            let mid = pattern(CHUNK_BYTES / 2 + 1, 2);
            fs::write(src.path().join("big"), &big).unwrap();
            fs::write(src.path().join("mid"), &mid).unwrap();
            fs::write(src.path().join("small"), b"small").unwrap();
            let pass = Pass {
                copy_to: Some(dst.path()),
                copy_backlog,
                ..Pass::read_only(src.path(), limits())
            };
            let snap = hash_tree(&pass, &mut NoProgress).unwrap();
            let reference = verifier_sdk::digest_directory(src.path(), limits()).unwrap();
            assert_eq!(snap, reference);
            for (name, bytes) in [("big", &big), ("mid", &mid)] {
                assert!(fs::read(dst.path().join(name)).unwrap() == *bytes, "{name}");
            }
            assert_eq!(
                verifier_sdk::digest_directory(dst.path(), limits()).unwrap(),
                reference
            );
        }
    }

    /// Issue #50 item 4: several files spanning batches, in different folders and between
    /// small ones, follow one another in the one SHA-256 stream of the digest. Whichever
    /// way a pass takes them (hashing or staging, the reader or the hasher checking, reading
    /// and writing), the digest is the sdk's reference walk's and every staged file is its
    /// source byte for byte.
    #[test]
    fn several_large_files_between_small_ones_digest_and_stage_as_the_reference() {
        let src = tempfile::tempdir().unwrap();
        let pattern = |len: usize, seed: u8| -> Vec<u8> {
            (0..len)
                .map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed) ^ (i >> 16) as u8)
                .collect()
        };
        let files: [(&str, usize); 10] = [
            ("0small", 17),
            ("a/big-1", CHUNK_BYTES * 3 + CHUNK_BYTES / 3),
            ("a/s", 1),
            ("a.txt", CHUNK_BYTES / 2 + 1),
            ("b/big-2", CHUNK_BYTES * 5 + 7),
            ("b/c/big-3", CHUNK_BYTES * 2),
            ("b/c/t", 0),
            ("b/empty-after-big", 0),
            ("big-4", CHUNK_BYTES * 4 + 1),
            ("z", 3),
        ];
        for (seed, (path, len)) in files.iter().enumerate() {
            let path = src.path().join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, pattern(*len, seed as u8)).unwrap();
        }
        let reference = verifier_sdk::digest_directory(src.path(), limits()).unwrap();
        assert_eq!(reference.file_count, files.len() as u64);
        // Protocol section 4 spelled out and hashed by another SHA-256 implementation, so
        // the reference does not rest on the sdk's hasher the pass feeds.
        let mut sorted = files;
        sorted.sort_unstable_by_key(|(path, _)| path.as_bytes());
        let mut preimage = verifier_sdk::digest::DIRECTORY_DIGEST_DOMAIN.to_vec();
        for (path, _) in sorted {
            let content = fs::read(src.path().join(path)).unwrap();
            preimage.extend_from_slice(&(path.len() as u64).to_be_bytes());
            preimage.extend_from_slice(path.as_bytes());
            preimage.extend_from_slice(&(content.len() as u64).to_be_bytes());
            preimage.extend_from_slice(&content);
        }
        let mut sha256sum = std::process::Command::new("sha256sum")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        sha256sum
            .stdin
            .take()
            .unwrap()
            .write_all(&preimage)
            .unwrap();
        let sum = sha256sum.wait_with_output().unwrap();
        assert!(sum.status.success());
        let hex = String::from_utf8(sum.stdout).unwrap();
        assert_eq!(reference.digest.hex(), hex.split(' ').next().unwrap());
        for (staged, check_backlog, hasher_reads, kind) in PASS_KINDS {
            for copy_backlog in [usize::MAX, 0] {
                let dst = tempfile::tempdir().unwrap();
                let pass = Pass {
                    copy_to: staged.then_some(dst.path()),
                    copy_backlog,
                    check_backlog,
                    hasher_reads_per_batch: hasher_reads,
                    ..Pass::read_only(src.path(), limits())
                };
                let what = format!("{kind}, copy backlog {copy_backlog}");
                assert_eq!(
                    hash_tree(&pass, &mut NoProgress).unwrap(),
                    reference,
                    "{what}"
                );
                if !staged {
                    continue;
                }
                for (path, _) in files {
                    assert!(
                        fs::read(dst.path().join(path)).unwrap()
                            == fs::read(src.path().join(path)).unwrap(),
                        "{what}: {path}"
                    );
                }
                assert_eq!(
                    verifier_sdk::digest_directory(dst.path(), limits()).unwrap(),
                    reference,
                    "{what}"
                );
                for folder in ["b/c", "b", "a"] {
                    fs::set_permissions(dst.path().join(folder), Permissions::from_mode(0o700))
                        .unwrap();
                }
            }
        }
    }

    #[test]
    fn verification_refuses_a_writable_file() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("f"), b"1").unwrap();
        fs::set_permissions(dir.path().join("f"), Permissions::from_mode(0o644)).unwrap();
        // The folders are checked too (the root included): seal it so the file is what fails.
        fs::set_permissions(dir.path(), Permissions::from_mode(DIR_MODE)).unwrap();
        let pass = Pass {
            require_normalized_modes: true,
            ..Pass::read_only(dir.path(), limits())
        };
        let err = hash_tree(&pass, &mut NoProgress).unwrap_err();
        fs::set_permissions(dir.path(), Permissions::from_mode(0o700)).unwrap();
        assert!(
            matches!(err, SnapshotError::FileMode { mode: 0o644, .. }),
            "{err}"
        );
    }

    #[test]
    fn verification_refuses_a_writable_folder() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("sub")).unwrap();
        fs::write(dir.path().join("sub/f"), b"1").unwrap();
        fs::set_permissions(dir.path().join("sub/f"), Permissions::from_mode(FILE_MODE)).unwrap();
        fs::set_permissions(dir.path(), Permissions::from_mode(DIR_MODE)).unwrap();
        let pass = Pass {
            require_normalized_modes: true,
            ..Pass::read_only(dir.path(), limits())
        };
        let err = hash_tree(&pass, &mut NoProgress).unwrap_err();
        assert!(
            matches!(err, SnapshotError::DirectoryMode { ref path, mode: 0o755 } if *path == dir.path().join("sub")),
            "{err}"
        );
        fs::set_permissions(dir.path().join("sub"), Permissions::from_mode(DIR_MODE)).unwrap();
        let snap = hash_tree(&pass, &mut NoProgress).unwrap();
        fs::set_permissions(dir.path(), Permissions::from_mode(0o700)).unwrap();
        fs::set_permissions(dir.path().join("sub"), Permissions::from_mode(0o700)).unwrap();
        assert_eq!(
            snap,
            verifier_sdk::digest_directory(dir.path(), limits()).unwrap()
        );
    }

    /// Reads `dir` with the pause hook set, running `swap` at the pause (after the first file,
    /// before any other is opened; the first file's folder is listed by then, the folders
    /// after it are not).
    fn read_swapping_after_first_file(
        dir: &Path,
        swap: impl FnOnce() + Send,
    ) -> Result<Snapshot, SnapshotError> {
        read_swapping_after_first_file_with(&Pass::read_only(dir, limits()), swap)
    }

    /// [`read_swapping_after_first_file`] for `pass`, with the pause hook set.
    fn read_swapping_after_first_file_with(
        pass: &Pass<'_>,
        swap: impl FnOnce() + Send,
    ) -> Result<Snapshot, SnapshotError> {
        let marker_dir = tempfile::tempdir().unwrap();
        let marker = marker_dir.path().join("paused");
        let pass = Pass {
            pause_marker: Some(marker.clone()),
            ..pass.clone()
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
            hash_tree(&pass, &mut NoProgress)
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
        // The walk meets the link where it enters `a`, before any file below it is named.
        match result {
            Err(SnapshotError::Changed(path)) => assert_eq!(path, dir.path().join("a")),
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

    /// The ways a pass can take a file: hashing only or staging a copy; the reader reading
    /// and checking each file (`check_backlog` 0), leaving every check to the hasher (as many
    /// as [`MAX_OPEN_CHECKS`] allows), or leaving small files to the hasher whole.
    const PASS_KINDS: [(bool, usize, usize, &str); 5] = [
        (false, 0, 0, "hashing, reader checks"),
        (false, usize::MAX, 0, "hashing, hasher checks"),
        (
            false,
            usize::MAX,
            usize::MAX,
            "hashing, hasher reads small files",
        ),
        (true, 0, usize::MAX, "staging, reader checks"),
        (true, usize::MAX, usize::MAX, "staging, hasher checks"),
    ];

    /// Sizes of the attacked file: spanning batches, and small enough for the hasher to read.
    const VICTIM_SIZES: [usize; 2] = [CHUNK_BYTES + 10, 1000];

    /// A tree whose first file is `0first` and whose second, `victim`, sits in the same
    /// folder, so it is listed (with its size, identity and times) before the first byte is
    /// read, and attacked (given its path and size) while the reader is paused after
    /// `0first`. Run in each of [`PASS_KINDS`] for each of [`VICTIM_SIZES`] (staging, the
    /// large `victim` spans batches, so the reader creates its copy and the chunks are shared
    /// between the threads); the results are returned with what each run was.
    /// The tree [`attack_second_file`] attacks (`0first`, `victim` of `size` bytes, `z-after`),
    /// an empty folder to stage it into, and the victim's path.
    fn victim_tree(size: usize) -> (tempfile::TempDir, tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let copy = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("0first"), b"first").unwrap();
        fs::write(dir.path().join("victim"), vec![5u8; size]).unwrap();
        fs::write(dir.path().join("z-after"), b"after").unwrap();
        let victim = dir.path().join("victim");
        (dir, copy, victim)
    }

    fn attack_second_file(
        attack: impl Fn(&Path, usize) + Sync,
    ) -> Vec<(Result<Snapshot, SnapshotError>, String)> {
        let mut results = Vec::new();
        for size in VICTIM_SIZES {
            for (staged, check_backlog, hasher_reads, kind) in PASS_KINDS {
                let (dir, copy, victim) = victim_tree(size);
                let pass = Pass {
                    copy_to: staged.then_some(copy.path()),
                    check_backlog,
                    hasher_reads_per_batch: hasher_reads,
                    ..Pass::read_only(dir.path(), limits())
                };
                let result = read_swapping_after_first_file_with(&pass, || attack(&victim, size));
                results.push((result, format!("{kind}, {size} bytes")));
            }
        }
        results
    }

    fn assert_changed(results: &[(Result<Snapshot, SnapshotError>, String)]) {
        for (result, pass) in results {
            assert!(
                matches!(result, Err(SnapshotError::Changed(p)) if p.ends_with("victim")),
                "{pass}: {result:?}"
            );
        }
    }

    #[test]
    fn a_file_growing_while_the_reader_is_ahead_is_refused() {
        assert_changed(&attack_second_file(|victim, _| {
            let mut f = OpenOptions::new().append(true).open(victim).unwrap();
            f.write_all(b"appended").unwrap();
        }));
    }

    #[test]
    fn a_file_shrinking_while_the_reader_is_ahead_is_refused() {
        assert_changed(&attack_second_file(|victim, _| {
            OpenOptions::new()
                .write(true)
                .open(victim)
                .unwrap()
                .set_len(3)
                .unwrap();
        }));
    }

    #[test]
    fn a_file_rewritten_in_place_with_the_same_size_is_refused() {
        assert_changed(&attack_second_file(|victim, size| {
            // Past the coarse clock tick, so the rewrite's times differ from the listed ones.
            std::thread::sleep(Duration::from_millis(30));
            fs::write(victim, vec![6u8; size]).unwrap();
        }));
    }

    #[test]
    fn a_file_replaced_by_a_symlink_while_the_reader_is_ahead_is_refused() {
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret");
        fs::write(&secret, vec![5u8; CHUNK_BYTES + 10]).unwrap();
        assert_changed(&attack_second_file(|victim, _| {
            fs::remove_file(victim).unwrap();
            std::os::unix::fs::symlink(&secret, victim).unwrap();
        }));
    }

    #[test]
    fn a_file_replaced_by_a_fifo_is_refused_without_hanging() {
        assert_changed(&attack_second_file(|victim, _| {
            fs::remove_file(victim).unwrap();
            rustix::fs::mknodat(CWD, victim, FileType::Fifo, Mode::from_raw_mode(0o644), 0)
                .unwrap();
        }));
    }

    #[test]
    fn a_file_resized_after_listing_is_a_change() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("0first"), b"first").unwrap();
        fs::write(dir.path().join("f"), b"1234").unwrap();
        let err = read_swapping_after_first_file(dir.path(), || {
            fs::write(dir.path().join("f"), b"123456").unwrap();
        })
        .unwrap_err();
        assert!(matches!(err, SnapshotError::Changed(_)), "{err}");
    }

    /// Issue #50 item 3: wherever a file's size is learnt (its listing or the open file), a
    /// file grown past the byte limit after the listing fails, and no byte of it beyond its
    /// listed size is staged (nor hashed: a digest would need all of them).
    #[test]
    fn a_file_grown_past_the_byte_limit_after_listing_is_refused_before_it_is_staged() {
        for size in VICTIM_SIZES {
            for (staged, check_backlog, hasher_reads, kind) in PASS_KINDS {
                let (dir, copy, victim) = victim_tree(size);
                let max_bytes = (size + 100) as u64;
                let pass = Pass {
                    copy_to: staged.then_some(copy.path()),
                    check_backlog,
                    hasher_reads_per_batch: hasher_reads,
                    ..Pass::read_only(dir.path(), TreeLimits::new(max_bytes, 1000).unwrap())
                };
                let result = read_swapping_after_first_file_with(&pass, || {
                    let mut f = OpenOptions::new().append(true).open(&victim).unwrap();
                    f.write_all(&vec![6u8; size + 200]).unwrap();
                });
                let what = format!("{kind}, {size} bytes");
                assert!(
                    matches!(
                        &result,
                        Err(SnapshotError::Changed(p)) if p.ends_with("victim")
                    ) || matches!(
                        &result,
                        Err(SnapshotError::Tree(DigestError::TooManyBytes { limit }))
                            if *limit == max_bytes
                    ),
                    "{what}: {result:?}"
                );
                let staged_victim = fs::read(copy.path().join("victim")).unwrap_or_default();
                assert!(
                    staged_victim.len() <= size && !staged_victim.contains(&6u8),
                    "{what}: {} bytes of the grown file staged",
                    staged_victim.len()
                );
                assert!(!copy.path().join("z-after").exists(), "{what}");
            }
        }
    }

    /// Issue #50 item 3: a tree over the byte limit fails before the file that crosses it is
    /// staged, in every way a pass can take its files.
    #[test]
    fn a_tree_over_the_byte_limit_is_refused_before_the_crossing_file_is_staged() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("0first"), b"first").unwrap();
        fs::create_dir(dir.path().join("d")).unwrap();
        fs::write(dir.path().join("d/big"), vec![7u8; CHUNK_BYTES * 2 + 1]).unwrap();
        fs::write(dir.path().join("d/small"), vec![7u8; 1000]).unwrap();
        fs::write(dir.path().join("z"), b"z").unwrap();
        for limit in [100, CHUNK_BYTES as u64 * 2 + 10] {
            let limits = TreeLimits::new(limit, 1000).unwrap();
            for (staged, check_backlog, hasher_reads, kind) in PASS_KINDS {
                let copy = tempfile::tempdir().unwrap();
                let pass = Pass {
                    copy_to: staged.then_some(copy.path()),
                    check_backlog,
                    hasher_reads_per_batch: hasher_reads,
                    ..Pass::read_only(dir.path(), limits)
                };
                let result = hash_tree(&pass, &mut NoProgress);
                assert!(
                    matches!(
                        &result,
                        Err(SnapshotError::Tree(DigestError::TooManyBytes { limit: l }))
                            if *l == limit
                    ),
                    "{kind}, limit {limit}: {result:?}"
                );
                let crossing = if limit == 100 { "d/big" } else { "d/small" };
                assert!(
                    !copy.path().join(crossing).exists() && !copy.path().join("z").exists(),
                    "{kind}, limit {limit}: {crossing} staged"
                );
            }
        }
    }
}
