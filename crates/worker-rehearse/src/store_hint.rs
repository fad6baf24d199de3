//! A note when the rehearsal store has grown: every rehearsal stages its trees and writes
//! evidence there, and nothing removes them by itself (about 240 MB after 40 rehearsals of one
//! real project). `worker gc` does; the note names it with this store.

use std::fs;
use std::path::Path;

/// Size from which the note is shown.
pub const NOTE_FROM_BYTES: u64 = 200 << 20;
/// Most entries looked at; a larger store is reported as at least what was counted.
const MAX_ENTRIES: usize = 200_000;

/// The apparent size of the files under `root` (links not followed), counted up to
/// [`MAX_ENTRIES`] entries; whatever cannot be read counts nothing.
pub fn store_bytes(root: &Path) -> u64 {
    let mut total: u64 = 0;
    let mut seen = 0usize;
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_ENTRIES {
                return total;
            }
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            if meta.is_dir() {
                pending.push(entry.path());
            } else if meta.is_file() {
                total = total.saturating_add(meta.len());
            }
        }
    }
    total
}

/// The note for a store holding `bytes`, when that is at least `from`.
pub fn store_note(root: &Path, bytes: u64, from: u64) -> Option<String> {
    (bytes >= from).then(|| {
        format!(
            "note: the rehearsal store {} holds {} MiB of staged trees and evidence; `worker gc \
             --staging-root {} --older-than 7d` removes what is older than a week (--dry-run \
             lists it)",
            root.display(),
            bytes >> 20,
            root.display()
        )
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_grown_store_names_worker_gc_and_a_small_one_says_nothing() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("sub")).unwrap();
        fs::write(dir.path().join("sub/a"), vec![0u8; 3000]).unwrap();
        fs::write(dir.path().join("b"), vec![0u8; 1000]).unwrap();
        let bytes = store_bytes(dir.path());
        assert_eq!(bytes, 4000);
        assert!(store_note(dir.path(), bytes, 4001).is_none());
        let note = store_note(dir.path(), 300 << 20, NOTE_FROM_BYTES).unwrap();
        assert!(note.contains("holds 300 MiB"), "{note}");
        assert!(note.contains("worker gc --staging-root"), "{note}");
    }
}
