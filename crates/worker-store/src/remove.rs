//! The one way the store removes a file or a tree. Staged trees are read-only (0555/0444),
//! which stops a plain recursive removal by a non-root user half-way; each directory is opened
//! without following links and made writable through its own descriptor (so a directory swapped
//! for a link mid-way makes the open fail instead of changing the link target's mode), then
//! emptied; a link is unlinked as a link, never followed. Used by staging (leftover and work
//! folders) and by collection (`gc`) alike.

use std::fs::{self, OpenOptions, Permissions};
use std::io::ErrorKind;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Removes the file or tree at `path`; absent (also when a concurrent cleaner got there
/// first) is success.
pub fn remove_tree(path: &Path) -> std::io::Result<()> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !meta.is_dir() {
        return gone_is_fine(fs::remove_file(path));
    }
    let dir = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_DIRECTORY)
        .open(path)
    {
        Ok(dir) => dir,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    dir.set_permissions(Permissions::from_mode(0o700))?;
    for entry in fs::read_dir(path)? {
        let entry = entry?;
        let child = entry.path();
        if entry.file_type()?.is_dir() {
            remove_tree(&child)?;
        } else {
            gone_is_fine(fs::remove_file(&child))?;
        }
    }
    gone_is_fine(fs::remove_dir(path))
}

fn gone_is_fine(result: std::io::Result<()>) -> std::io::Result<()> {
    match result {
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_read_only_tree_is_removed_and_removing_it_again_is_fine() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("t");
        fs::create_dir_all(tree.join("a/b")).unwrap();
        fs::write(tree.join("a/b/f"), b"1").unwrap();
        for p in ["a/b/f", "a/b", "a", ""] {
            fs::set_permissions(tree.join(p), Permissions::from_mode(0o555)).unwrap();
        }
        remove_tree(&tree).unwrap();
        assert!(!tree.exists());
        remove_tree(&tree).unwrap();
    }

    #[test]
    fn a_link_inside_is_unlinked_and_its_target_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        fs::create_dir(&outside).unwrap();
        fs::write(outside.join("keep"), b"1").unwrap();
        fs::set_permissions(&outside, Permissions::from_mode(0o555)).unwrap();
        let tree = dir.path().join("t");
        fs::create_dir(&tree).unwrap();
        std::os::unix::fs::symlink(&outside, tree.join("link")).unwrap();
        remove_tree(&tree).unwrap();
        assert!(!tree.exists());
        assert!(outside.join("keep").exists());
        let mode = fs::metadata(&outside).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o555, "the link's target kept its mode");
        fs::set_permissions(&outside, Permissions::from_mode(0o755)).unwrap();
    }
}
