//! A tree over the manifest's file or byte limit, said in the author's terms: which field, its
//! value, what the tree really holds, where the bulk is, and who can do what about it.

use std::collections::BTreeMap;
use std::path::Path;

use verifier_sdk::{DigestError, RunnerManifest};

use super::git::GitTreeError;
use worker_sandbox::explain::AUTHOR_SETS_IT;
use worker_store::archive::ArchiveError;
use worker_store::snapshot::SnapshotError;
use worker_store::stage::StageError;

/// Entries counted at most when measuring an oversized tree: enough to name where the bulk is,
/// bounded so a huge tree cannot make the error itself slow.
pub const MAX_COUNTED_ENTRIES: u64 = 2_000_000;
/// Directories named in the message.
pub const LISTED_DIRECTORIES: usize = 3;

/// The manifest's tree limits, copied out so staging can name them.
#[derive(Debug, Clone, Copy)]
pub struct TreeFields {
    source_files: u64,
    source_bytes: u64,
    benchmark_files: u64,
    benchmark_bytes: u64,
}

impl TreeFields {
    /// The limits of `manifest`.
    pub fn of(manifest: &RunnerManifest) -> Self {
        Self {
            source_files: manifest.max_source_files(),
            source_bytes: manifest.max_source_bytes(),
            benchmark_files: manifest.max_benchmark_files(),
            benchmark_bytes: manifest.max_benchmark_bytes(),
        }
    }
}

/// Which of a tree's two limits was passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// The file count.
    Files,
    /// The total file bytes.
    Bytes,
}

/// The limit a staging error is about, if it is one.
pub fn stage_limit(error: &StageError) -> Option<Limit> {
    match error {
        StageError::Tree(SnapshotError::Tree(DigestError::TooManyFiles { .. })) => {
            Some(Limit::Files)
        }
        StageError::Tree(SnapshotError::Tree(DigestError::TooManyBytes { .. })) => {
            Some(Limit::Bytes)
        }
        _ => None,
    }
}

/// The limit an archive extraction error is about, if it is one (a tree in a git repository
/// is extracted under the same limits before it is staged).
pub fn archive_limit(error: &GitTreeError) -> Option<Limit> {
    match error {
        GitTreeError::Archive {
            source: ArchiveError::TooManyFiles { .. },
            ..
        } => Some(Limit::Files),
        GitTreeError::Archive {
            source: ArchiveError::TreeTooLarge { .. },
            ..
        } => Some(Limit::Bytes),
        _ => None,
    }
}

/// The message for tree `what` (`source`, `base` or `benchmark`), read from `dir`, over
/// `limit`.
pub fn over_limit(what: &str, dir: &Path, limit: Limit, fields: &TreeFields) -> String {
    let benchmark = what == "benchmark";
    let (field, value) = match (limit, benchmark) {
        (Limit::Files, false) => ("max_source_files", fields.source_files),
        (Limit::Bytes, false) => ("max_source_bytes", fields.source_bytes),
        (Limit::Files, true) => ("max_benchmark_files", fields.benchmark_files),
        (Limit::Bytes, true) => ("max_benchmark_bytes", fields.benchmark_bytes),
    };
    let by_files = field.ends_with("_files");
    let measured = measure(dir);
    let holds = format!(
        "{}{} files, {} bytes",
        if measured.complete { "" } else { "at least " },
        measured.files,
        measured.bytes
    );
    let mut top: Vec<(&String, &(u64, u64))> = measured.directories.iter().collect();
    top.sort_by_key(|(_, (files, bytes))| {
        std::cmp::Reverse(if by_files { *files } else { *bytes })
    });
    let largest: Vec<String> = top
        .iter()
        .take(LISTED_DIRECTORIES)
        .map(|(name, (files, bytes))| format!("{name} ({files} files, {bytes} bytes)"))
        .collect();
    let largest = if largest.is_empty() {
        String::new()
    } else {
        format!("; largest directories: {}", largest.join(", "))
    };
    let solver = if benchmark {
        "the benchmark is the author's own tree: make it smaller, or raise the limit".to_owned()
    } else {
        "a solver can only submit a smaller tree (leave out build output, caches, vendored \
         copies and data the tests do not need)"
            .to_owned()
    };
    format!(
        "the {what} tree is over {field} = {value} in the runner manifest: it holds {holds}\
         {largest}; {AUTHOR_SETS_IT}; {solver}"
    )
}

struct Measured {
    files: u64,
    bytes: u64,
    /// Files and bytes under each top-level directory (`name/`).
    directories: BTreeMap<String, (u64, u64)>,
    complete: bool,
}

/// Counts regular files and their bytes under `dir`, per top-level directory, without
/// following links.
fn measure(dir: &Path) -> Measured {
    let mut measured = Measured {
        files: 0,
        bytes: 0,
        directories: BTreeMap::new(),
        complete: true,
    };
    // Depth first, without following links; a repository's own `.git` is never part of the
    // tree a bounty commits.
    let mut pending = vec![(dir.to_path_buf(), None::<String>)];
    let mut seen = 0u64;
    while let Some((path, top)) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&path) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_COUNTED_ENTRIES {
                measured.complete = false;
                return measured;
            }
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            let name = entry.file_name().to_string_lossy().into_owned();
            if meta.is_dir() {
                if top.is_none() && name == ".git" {
                    continue;
                }
                let top = top.clone().unwrap_or_else(|| format!("{name}/"));
                pending.push((entry.path(), Some(top)));
            } else if meta.is_file() {
                measured.files += 1;
                measured.bytes = measured.bytes.saturating_add(meta.len());
                if let Some(top) = &top {
                    let slot = measured.directories.entry(top.clone()).or_insert((0, 0));
                    slot.0 += 1;
                    slot.1 = slot.1.saturating_add(meta.len());
                }
            }
        }
    }
    measured
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_field_the_real_size_the_bulk_and_who_can_act() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("node_modules/a")).unwrap();
        for i in 0..5 {
            std::fs::write(d.join(format!("node_modules/a/{i}.js")), "x".repeat(10)).unwrap();
        }
        std::fs::create_dir(d.join("src")).unwrap();
        std::fs::write(d.join("src/main.py"), "print(1)\n").unwrap();
        std::fs::write(d.join("README"), "r").unwrap();
        let fields = TreeFields {
            source_files: 4,
            source_bytes: 1000,
            benchmark_files: 9,
            benchmark_bytes: 9,
        };
        let error = StageError::Tree(SnapshotError::Tree(DigestError::TooManyFiles { limit: 4 }));
        let text = over_limit("source", d, stage_limit(&error).unwrap(), &fields);
        assert_eq!(
            text,
            "the source tree is over max_source_files = 4 in the runner manifest: it holds 7 \
             files, 60 bytes; largest directories: node_modules/ (5 files, 50 bytes), src/ (1 \
             files, 9 bytes); only the bounty author can change it (it is committed in \
             runner_manifest_hash); a solver can only submit a smaller tree (leave out build \
             output, caches, vendored copies and data the tests do not need)"
        );
        let bytes = StageError::Tree(SnapshotError::Tree(DigestError::TooManyBytes { limit: 9 }));
        assert_eq!(stage_limit(&bytes), Some(Limit::Bytes));
        assert!(
            over_limit("benchmark", d, Limit::Bytes, &fields)
                .contains("over max_benchmark_bytes = 9")
        );
        let other = StageError::Tree(SnapshotError::Tree(DigestError::TooManyDirectories));
        assert!(stage_limit(&other).is_none());
        let archive = GitTreeError::Archive {
            revision: "r".into(),
            source: ArchiveError::TooManyFiles { limit: 4 },
        };
        assert_eq!(archive_limit(&archive), Some(Limit::Files));
    }
}
