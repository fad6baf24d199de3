//! Remembers how `argv[0]` resolved in an image, so the next run on the same image skips the
//! archive probes of `lifecycle::executable` (every archive call makes the engine mount the
//! container's root filesystem; reading a `#!` line streams a tar of the whole file).
//!
//! An entry is one small JSON file per (image id, `argv[0]`, image `PATH`) under the directory
//! the caller names (the staging root's `executables/`), named by the SHA-256 of that key and
//! holding the key itself beside the answer. The image is immutable by its id, so the answer
//! holds for as long as the id matches, provided nothing it depends on can change between
//! runs: only resolutions that probed no path inside the mounts (`/workspace`, `/benchmark`),
//! the tmpfs (`/tmp`), or the runtime's own filesystems are stored, and a lookup re-checks
//! that of what it reads.
//!
//! The entry only lets the executor skip a pre-check; it never changes the argv run. A stale
//! or planted entry could at worst let a missing executable reach the init, which then exits
//! 127 or 126 (1 before tini 0.19) with its `exec … failed` line on stderr, so the executor
//! re-resolves after any run on a cached answer that ended so (or with no verdict) and
//! decides exactly as without the cache (`lifecycle::executable::init_may_have_failed_exec`). Reads are bounded and never
//! follow a symlink ([`artifact_fs::read_bounded`]); writes are atomic
//! ([`artifact_fs::write_atomic`]); any problem means "no entry" and a fresh resolution.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Schema id of an entry; a different one is ignored.
const ENTRY_SCHEMA: &str = "agent-bounties/executable-resolution-v1";
/// An entry is a few hundred bytes; anything larger is not one of ours.
const ENTRY_LIMIT: u64 = 8 * 1024;
/// Paths the runtime provides or rewrites at start, whatever the image holds there.
const RUNTIME_PATHS: [&str; 6] = [
    "/dev",
    "/proc",
    "/sys",
    "/etc/hosts",
    "/etc/hostname",
    "/etc/resolv.conf",
];

/// What an entry is looked up by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key<'a> {
    /// The engine's image id (`sha256:<64 hex>`), the image's content address.
    pub image_id: &'a str,
    /// The command's first word, as the request gives it.
    pub argv0: &'a str,
    /// The image's `PATH`, which a bare `argv[0]` is looked up in.
    pub path_env: Option<&'a str>,
}

impl Key<'_> {
    /// The entry's file name: SHA-256 of the key as a JSON array, so no two keys share one.
    pub fn file_name(&self) -> String {
        let key = serde_json::json!([self.image_id, self.argv0, self.path_env]);
        format!("{}.json", hex::encode(Sha256::digest(key.to_string())))
    }

    /// Whether the id is an engine content address; anything else is never cached.
    fn has_content_id(&self) -> bool {
        self.image_id
            .strip_prefix("sha256:")
            .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
    }
}

/// One stored resolution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    schema: String,
    image_id: String,
    argv0: String,
    path_env: Option<String>,
    /// Where `argv[0]` resolved to (after symlinks), an executable regular file.
    pub executable: String,
    /// The resolved `#!` interpreter, when the executable is a script.
    pub interpreter: Option<String>,
}

impl Entry {
    pub fn new(key: &Key<'_>, executable: String, interpreter: Option<String>) -> Self {
        Self {
            schema: ENTRY_SCHEMA.to_string(),
            image_id: key.image_id.to_string(),
            argv0: key.argv0.to_string(),
            path_env: key.path_env.map(str::to_string),
            executable,
            interpreter,
        }
    }
}

/// Why a lookup found nothing usable (logged, never an error of the run).
#[derive(Debug, PartialEq, Eq)]
pub enum Miss {
    /// The image id is not a content address.
    Uncacheable,
    /// No entry under this key.
    Absent,
    /// Something is there but it is not a readable entry for this key.
    Rejected(String),
}

/// The paths whose content depends on the run rather than the image: the mounts and tmpfs of
/// the profile, and the runtime's own.
#[derive(Clone, Debug)]
pub struct Volatile(Vec<String>);

impl Volatile {
    pub fn new<'a>(mount_targets: impl IntoIterator<Item = &'a str>) -> Self {
        let mut paths: Vec<String> = mount_targets.into_iter().map(str::to_string).collect();
        paths.extend(RUNTIME_PATHS.iter().map(|p| p.to_string()));
        Self(paths)
    }

    /// Whether `path` names a place whose content only the image decides: absolute, plain
    /// (no `.`, `..` or empty components, which would make the prefix test lexical guesswork)
    /// and not at or under any volatile path.
    pub fn is_image_only(&self, path: &str) -> bool {
        let Some(rest) = path.strip_prefix('/') else {
            return false;
        };
        let parts: Vec<&str> = rest.split('/').collect();
        if parts
            .iter()
            .any(|p| p.is_empty() || *p == "." || *p == "..")
        {
            return false;
        }
        !self.0.iter().any(|volatile| {
            let prefix: Vec<&str> = volatile.trim_start_matches('/').split('/').collect();
            parts.len() >= prefix.len() && parts[..prefix.len()] == prefix[..]
        })
    }
}

/// Parses and checks an entry read for `key`: it must be for exactly this key and name only
/// image-only paths.
pub fn accept(bytes: &[u8], key: &Key<'_>, volatile: &Volatile) -> Result<Entry, Miss> {
    let reject = |why: &str| Miss::Rejected(why.to_string());
    let entry: Entry = serde_json::from_slice(bytes).map_err(|e| Miss::Rejected(e.to_string()))?;
    if entry.schema != ENTRY_SCHEMA {
        return Err(reject("another schema"));
    }
    if entry.image_id != key.image_id {
        return Err(reject("resolved against another image"));
    }
    if entry.argv0 != key.argv0 || entry.path_env.as_deref() != key.path_env {
        return Err(reject("for another argv[0] or PATH"));
    }
    let paths = std::iter::once(&entry.executable).chain(entry.interpreter.as_ref());
    for path in paths {
        if !volatile.is_image_only(path) {
            return Err(Miss::Rejected(format!(
                "{path} depends on the run, not the image"
            )));
        }
    }
    Ok(entry)
}

/// The cache directory `dir`, if it is a real directory (never through a symlink).
fn real_dir(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir())
}

/// Looks `key` up under `dir`.
pub fn lookup(dir: &Path, key: &Key<'_>, volatile: &Volatile) -> Result<Entry, Miss> {
    if !key.has_content_id() {
        return Err(Miss::Uncacheable);
    }
    if !real_dir(dir) {
        return Err(Miss::Absent);
    }
    let bytes = match artifact_fs::read_bounded(&dir.join(key.file_name()), ENTRY_LIMIT) {
        Ok(bytes) => bytes,
        Err(error) if error.is_not_found() => return Err(Miss::Absent),
        Err(error) => return Err(Miss::Rejected(error.to_string())),
    };
    accept(&bytes, key, volatile)
}

/// Stores `entry` under `dir` (created if absent, refused if it is not a real directory).
pub fn store(dir: &Path, key: &Key<'_>, entry: &Entry) -> std::io::Result<PathBuf> {
    if !key.has_content_id() {
        return Err(std::io::Error::other(
            "the image id is not a content address",
        ));
    }
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    if !real_dir(dir) {
        return Err(std::io::Error::other(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    let path = dir.join(key.file_name());
    let bytes = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
    artifact_fs::write_atomic(&path, &bytes)?;
    Ok(path)
}

/// Removes the entry for `key`, if any (a link is removed as a link).
pub fn forget(dir: &Path, key: &Key<'_>) {
    if real_dir(dir) {
        let _ = std::fs::remove_file(dir.join(key.file_name()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IMAGE: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const OTHER_IMAGE: &str =
        "sha256:2222222222222222222222222222222222222222222222222222222222222222";

    fn key(argv0: &str) -> Key<'_> {
        Key {
            image_id: IMAGE,
            argv0,
            path_env: Some("/usr/bin:/bin"),
        }
    }

    fn volatile() -> Volatile {
        Volatile::new(["/workspace", "/benchmark", "/tmp", "/tmp/home"])
    }

    fn dir() -> (tempfile::TempDir, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("executables");
        (root, dir)
    }

    #[test]
    fn a_stored_entry_is_found_for_its_own_key_only() {
        let (_root, dir) = dir();
        let entry = Entry::new(&key("cmp"), "/bin/busybox".into(), None);
        store(&dir, &key("cmp"), &entry).unwrap();
        assert_eq!(lookup(&dir, &key("cmp"), &volatile()), Ok(entry));
        assert_eq!(lookup(&dir, &key("sh"), &volatile()), Err(Miss::Absent));
        let other_path = Key {
            path_env: Some("/bin"),
            ..key("cmp")
        };
        assert_eq!(lookup(&dir, &other_path, &volatile()), Err(Miss::Absent));
    }

    #[test]
    fn an_entry_resolved_against_another_image_is_ignored() {
        let (_root, dir) = dir();
        let stale = Key {
            image_id: OTHER_IMAGE,
            ..key("cmp")
        };
        let entry = Entry::new(&stale, "/bin/busybox".into(), None);
        // Planted under this image's name.
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(
            dir.join(key("cmp").file_name()),
            serde_json::to_vec(&entry).unwrap(),
        )
        .unwrap();
        assert!(matches!(
            lookup(&dir, &key("cmp"), &volatile()),
            Err(Miss::Rejected(_))
        ));
    }

    #[test]
    fn an_entry_for_another_argv0_renamed_to_this_key_is_ignored() {
        let (_root, dir) = dir();
        let other = Entry::new(&key("sh"), "/bin/busybox".into(), None);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(
            dir.join(key("missing").file_name()),
            serde_json::to_vec(&other).unwrap(),
        )
        .unwrap();
        assert!(matches!(
            lookup(&dir, &key("missing"), &volatile()),
            Err(Miss::Rejected(_))
        ));
    }

    #[test]
    fn an_entry_naming_a_path_inside_a_mount_or_tmpfs_is_ignored() {
        let (_root, dir) = dir();
        std::fs::create_dir(&dir).unwrap();
        for (executable, interpreter) in [
            ("/workspace/run.sh", None),
            ("/benchmark/run.sh", None),
            ("/tmp/x", None),
            ("/tmp/home/x", None),
            ("/proc/self/exe", None),
            ("/bin/../workspace/run.sh", None),
            ("//workspace/run.sh", None),
            ("relative/run.sh", None),
            ("/bin/run.sh", Some("/workspace/sh")),
        ] {
            let entry = Entry::new(
                &key("run.sh"),
                executable.into(),
                interpreter.map(str::to_string),
            );
            std::fs::write(
                dir.join(key("run.sh").file_name()),
                serde_json::to_vec(&entry).unwrap(),
            )
            .unwrap();
            assert!(
                matches!(
                    lookup(&dir, &key("run.sh"), &volatile()),
                    Err(Miss::Rejected(_))
                ),
                "{executable} {interpreter:?}"
            );
        }
    }

    #[test]
    fn garbage_oversized_or_extended_entries_are_ignored() {
        let (_root, dir) = dir();
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join(key("cmp").file_name());
        let good =
            serde_json::to_value(Entry::new(&key("cmp"), "/bin/busybox".into(), None)).unwrap();
        let mut extended = good.clone();
        extended["argv"] = serde_json::json!(["/bin/sh", "-c", "exit 0"]);
        let mut schema = good.clone();
        schema["schema"] = "agent-bounties/executable-resolution-v0".into();
        let huge = format!(
            "{{\"pad\":\"{}\"}}",
            "x".repeat(usize::try_from(ENTRY_LIMIT).unwrap())
        );
        for bytes in [
            b"\x00\xff garbage".to_vec(),
            Vec::new(),
            b"{}".to_vec(),
            huge.into_bytes(),
            extended.to_string().into_bytes(),
            schema.to_string().into_bytes(),
        ] {
            std::fs::write(&path, &bytes).unwrap();
            assert!(matches!(
                lookup(&dir, &key("cmp"), &volatile()),
                Err(Miss::Rejected(_))
            ));
        }
    }

    #[test]
    fn a_symlink_in_place_of_the_entry_or_the_directory_is_not_followed() {
        let (root, dir) = dir();
        let elsewhere = root.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let entry = Entry::new(&key("cmp"), "/bin/busybox".into(), None);
        let real = store(&elsewhere, &key("cmp"), &entry).unwrap();
        std::fs::create_dir(&dir).unwrap();
        std::os::unix::fs::symlink(&real, dir.join(key("cmp").file_name())).unwrap();
        assert!(matches!(
            lookup(&dir, &key("cmp"), &volatile()),
            Err(Miss::Rejected(_))
        ));
        // A store replaces the link, leaving its target alone.
        store(&dir, &key("cmp"), &entry).unwrap();
        assert!(
            std::fs::symlink_metadata(dir.join(key("cmp").file_name()))
                .unwrap()
                .is_file()
        );
        // The directory itself as a link: neither read nor written through.
        let linked = root.path().join("linked");
        std::os::unix::fs::symlink(&elsewhere, &linked).unwrap();
        assert_eq!(lookup(&linked, &key("cmp"), &volatile()), Err(Miss::Absent));
        assert!(store(&linked, &key("sh"), &entry).is_err());
        assert!(!elsewhere.join(key("sh").file_name()).exists());
    }

    #[test]
    fn an_image_without_a_content_id_is_never_cached() {
        let (_root, dir) = dir();
        let loose = Key {
            image_id: "busybox:latest",
            ..key("cmp")
        };
        let entry = Entry::new(&loose, "/bin/busybox".into(), None);
        assert!(store(&dir, &loose, &entry).is_err());
        assert_eq!(lookup(&dir, &loose, &volatile()), Err(Miss::Uncacheable));
    }

    #[test]
    fn image_only_paths_are_plain_and_outside_every_volatile_path() {
        let v = volatile();
        for ok in [
            "/bin/busybox",
            "/usr/bin/python3",
            "/tmpfoo/x",
            "/etc/hostsx",
            "/work",
        ] {
            assert!(v.is_image_only(ok), "{ok}");
        }
        for bad in [
            "/workspace",
            "/workspace/x",
            "/tmp",
            "/dev/shm/x",
            "/etc/hosts",
            "/bin/./x",
            "/bin//x",
            "bin/x",
            "",
        ] {
            assert!(!v.is_image_only(bad), "{bad}");
        }
    }
}
