//! Collection for `worker gc`: frees a staging store of trees and evidence records nobody needs any more.
//!
//! The store is content-addressed, so removing an old entry loses nothing a later stage cannot
//! recreate; what must never go is a tree a container is using right now (its bind mounts
//! would turn into empty directories mid-run, and the post-run digest check would void the
//! run). So a published tree goes only when it is older than the limit (by the mtime of its
//! top directory, set when it was published) and no container (running or not, ours or not)
//! mounts it. Evidence records and cached executable resolutions go by age alone. Work
//! folders under `tmp/` are the stager's own business (it removes crashed ones itself) and
//! are never touched here.
//!
//! Staged trees are read-only (0555/0444), which stops a plain `rm -rf` of a non-root user;
//! each directory is opened without following links and made writable through its own
//! descriptor before its entries are unlinked, and a link is removed as a link, never followed.

use std::collections::BTreeSet;
use std::fs::{self, OpenOptions, Permissions};
use std::io::ErrorKind;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::stage::StageKind;

/// Schema id of `worker gc --json`.
pub const GC_SCHEMA: &str = "agent-bounties/worker-gc-v1";

/// What to collect.
#[derive(Debug, Clone)]
pub struct GcOptions {
    /// The staging root.
    pub root: PathBuf,
    /// Entries younger than this stay.
    pub older_than: Duration,
    /// Report what would go without removing anything.
    pub dry_run: bool,
    /// Host paths some container mounts; a tree at or above any of them stays.
    pub in_use: BTreeSet<PathBuf>,
    /// The clock (a parameter so tests need not wait days).
    pub now: SystemTime,
}

/// One entry removed (or, in a dry run, that would be).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Freed {
    /// `source`, `benchmark`, `evidence` or `executable`.
    pub kind: &'static str,
    /// Its path.
    pub path: PathBuf,
    /// Bytes of its files (not counting directories).
    pub bytes: u64,
    /// Its age in seconds.
    pub age_seconds: u64,
}

/// What `worker gc` did.
#[derive(Debug, Clone, Serialize)]
pub struct GcReport {
    /// [`GC_SCHEMA`].
    pub schema_version: &'static str,
    /// The staging root collected.
    pub root: PathBuf,
    /// Whether nothing was actually removed.
    pub dry_run: bool,
    /// The age limit, in seconds.
    pub older_than_seconds: u64,
    /// Entries removed (or that would be).
    pub freed: Vec<Freed>,
    /// Total bytes of `freed`.
    pub freed_bytes: u64,
    /// Old trees kept because a container mounts them.
    pub kept_in_use: Vec<PathBuf>,
    /// Entries that could not be removed, with the reason.
    pub failed: Vec<String>,
}

impl GcReport {
    /// The human summary printed on stdout without `--json`.
    pub fn human(&self) -> String {
        let verb = if self.dry_run { "would free" } else { "freed" };
        let mut out = String::new();
        for f in &self.freed {
            out.push_str(&format!(
                "{verb} {} {} ({} bytes, {} old)\n",
                f.kind,
                f.path.display(),
                f.bytes,
                human_age(f.age_seconds)
            ));
        }
        for path in &self.kept_in_use {
            out.push_str(&format!(
                "kept {} (mounted by a container)\n",
                path.display()
            ));
        }
        for failure in &self.failed {
            out.push_str(&format!("could not remove {failure}\n"));
        }
        out.push_str(&format!(
            "{verb} {} in {} entries under {} (older than {})\n",
            human_bytes(self.freed_bytes),
            self.freed.len(),
            self.root.display(),
            human_age(self.older_than_seconds)
        ));
        out
    }
}

fn human_age(seconds: u64) -> String {
    match seconds {
        s if s >= 86_400 && s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s >= 3_600 && s % 3_600 == 0 => format!("{}h", s / 3_600),
        s if s >= 60 && s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// `--older-than` values: a positive integer and a unit, `s`, `m`, `h`, `d` or `w`
/// (`7d`, `12h`, `30m`).
pub fn parse_age(text: &str) -> Result<Duration, String> {
    let bad = || format!("expected an age such as 7d, 12h or 30m, got {text:?}");
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (number, unit) = text.split_at(split);
    if number.is_empty() {
        return Err(bad());
    }
    let n: u64 = number.parse().map_err(|_| bad())?;
    let unit_seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        "w" => 604_800,
        _ => return Err(bad()),
    };
    n.checked_mul(unit_seconds)
        .map(Duration::from_secs)
        .ok_or_else(bad)
}

/// Why collecting could not start.
#[derive(Debug, thiserror::Error)]
pub enum GcError {
    /// The root is not a directory we can read.
    #[error("staging root {path:?} is unusable: {detail}")]
    Root {
        /// The root.
        path: PathBuf,
        /// Why.
        detail: String,
    },
}

/// Collects `options.root`.
pub fn collect(options: &GcOptions) -> Result<GcReport, GcError> {
    let root_error = |detail: String| GcError::Root {
        path: options.root.clone(),
        detail,
    };
    let meta = fs::symlink_metadata(&options.root).map_err(|e| root_error(e.to_string()))?;
    if !meta.is_dir() {
        return Err(root_error(
            "not a directory (a link is not followed)".into(),
        ));
    }
    let mut report = GcReport {
        schema_version: GC_SCHEMA,
        root: options.root.clone(),
        dry_run: options.dry_run,
        older_than_seconds: options.older_than.as_secs(),
        freed: vec![],
        freed_bytes: 0,
        kept_in_use: vec![],
        failed: vec![],
    };
    for kind in [StageKind::Source, StageKind::Benchmark] {
        let store = options.root.join(kind.store_dir()).join("sha256");
        for (path, age) in old_entries(&store, options, true, &mut report) {
            if options.in_use.iter().any(|used| mounts_within(used, &path)) {
                report.kept_in_use.push(path);
                continue;
            }
            remove(kind.as_str(), path, age, options, &mut report);
        }
    }
    let evidence = options.root.join("evidence").join("sha256");
    for (path, age) in old_entries(&evidence, options, false, &mut report) {
        remove("evidence", path, age, options, &mut report);
    }
    // Executable resolutions only save a probe of an immutable image: a removed entry is
    // resolved again on the next run, so age alone decides, as for evidence.
    let executables = options.root.join(crate::stage::EXECUTABLE_CACHE_DIR);
    for (path, age) in old_entries(&executables, options, false, &mut report) {
        remove("executable", path, age, options, &mut report);
    }
    report.freed_bytes = report.freed.iter().map(|f| f.bytes).sum();
    Ok(report)
}

/// Whether a container mounting `used` keeps `tree`: the mount is the tree or lies inside it.
fn mounts_within(used: &Path, tree: &Path) -> bool {
    used.starts_with(tree)
}

/// Entries of `dir` (trees when `dirs`, else `*.json` files) older than the limit, by name.
/// Anything else found there (a link, a stray file) is left alone: gc only removes what the
/// store itself could have put there.
fn old_entries(
    dir: &Path,
    options: &GcOptions,
    dirs: bool,
    report: &mut GcReport,
) -> Vec<(PathBuf, u64)> {
    // The store's own directories must be real ones: a link planted there would have gc
    // list (and remove) entries of some other directory.
    for level in [dir.parent(), Some(dir)].into_iter().flatten() {
        match fs::symlink_metadata(level) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                report
                    .failed
                    .push(format!("{}: not a directory, skipped", level.display()));
                return vec![];
            }
            Err(e) if e.kind() == ErrorKind::NotFound => return vec![],
            Err(e) => {
                report.failed.push(format!("{}: {e}", level.display()));
                return vec![];
            }
        }
    }
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            report.failed.push(format!("{}: {e}", dir.display()));
            return vec![];
        }
    };
    let mut old = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        let name = entry.file_name();
        let name = name.to_str().unwrap_or_default();
        let shaped = if dirs {
            meta.is_dir() && is_hex64(name)
        } else {
            meta.is_file() && name.strip_suffix(".json").is_some_and(is_hex64)
        };
        if !shaped {
            continue;
        }
        let modified = meta.modified().unwrap_or(options.now);
        let age = options.now.duration_since(modified).unwrap_or_default();
        if age >= options.older_than {
            old.push((path, age.as_secs()));
        }
    }
    old.sort();
    old
}

fn is_hex64(name: &str) -> bool {
    name.len() == 64 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn remove(kind: &'static str, path: PathBuf, age: u64, options: &GcOptions, report: &mut GcReport) {
    let bytes = tree_bytes(&path);
    if !options.dry_run
        && let Err(e) = remove_tree(&path)
    {
        report.failed.push(format!("{}: {e}", path.display()));
        return;
    }
    report.freed.push(Freed {
        kind,
        path,
        bytes,
        age_seconds: age,
    });
}

/// Bytes of the regular files under `path`, links not followed (entry types come from the
/// directory listing, which does not follow them).
fn tree_bytes(path: &Path) -> u64 {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return 0;
    };
    if meta.is_file() {
        return meta.size();
    }
    let mut total = 0;
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(entry.path()),
                Ok(t) if t.is_file() => total += entry.metadata().map_or(0, |m| m.size()),
                _ => {}
            }
        }
    }
    total
}

/// Removes a file, or a read-only tree: each directory is opened with `O_NOFOLLOW` and made
/// writable through that descriptor (so a directory swapped for a link mid-way makes the open
/// fail instead of changing the link's target), then emptied; links are unlinked, never
/// followed.
pub fn remove_tree(path: &Path) -> std::io::Result<()> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !meta.is_dir() {
        return fs::remove_file(path);
    }
    let dir = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_DIRECTORY)
        .open(path)?;
    dir.set_permissions(Permissions::from_mode(0o700))?;
    for entry in fs::read_dir(path)? {
        let entry = entry?;
        let child = entry.path();
        if entry.file_type()?.is_dir() {
            remove_tree(&child)?;
        } else {
            fs::remove_file(&child)?;
        }
    }
    fs::remove_dir(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_need_a_number_and_a_unit() {
        assert_eq!(parse_age("7d").unwrap(), Duration::from_secs(7 * 86_400));
        assert_eq!(parse_age("12h").unwrap(), Duration::from_secs(12 * 3_600));
        assert_eq!(parse_age("0s").unwrap(), Duration::ZERO);
        assert_eq!(parse_age("2w").unwrap(), Duration::from_secs(14 * 86_400));
        for bad in [
            "",
            "7",
            "d",
            "7x",
            "-1d",
            "1.5d",
            "7 d",
            "99999999999999999999d",
        ] {
            assert!(parse_age(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_mount_inside_a_tree_keeps_it() {
        let tree = Path::new("/s/sources/sha256/ab");
        assert!(mounts_within(tree, tree));
        assert!(mounts_within(&tree.join("x"), tree));
        assert!(!mounts_within(Path::new("/s/sources/sha256/abc"), tree));
        assert!(!mounts_within(Path::new("/s/sources"), tree));
    }
}
