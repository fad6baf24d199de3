//! Confirms `argv[0]` names an executable regular file in the created container (image plus
//! mounts) and, for a `#!` script, that its interpreter exists too, by probing through the
//! engine's archive API. With `init: true` the engine starts the init, not the command, so a
//! missing executable would otherwise surface only as the init's exit 127 — which the program
//! itself could also produce.
//!
//! Where to look and what each answer means are pure steps ([`candidates`], [`probe_step`],
//! [`shebang_interpreter`]); the functions taking the engine only fetch.

use std::path::{Path, PathBuf};

use futures_util::StreamExt;

use crate::engine::ContainerEngine;
use crate::exec_cache::{self, Key, Miss, Volatile};
use crate::profile;

/// Bytes of a file's archive read to find its `#!` line (tar headers plus the line).
const ARCHIVE_HEAD_BYTES: usize = 8 * 1024;
/// Symlink hops followed when resolving `argv[0]`.
const MAX_LINK_HOPS: usize = 8;

// Go's os.FileMode type bits, as the engine reports them in archive stat.
const GO_MODE_DIR: u32 = 1 << 31;
const GO_MODE_SYMLINK: u32 = 1 << 27;
const GO_MODE_TYPE: u32 =
    GO_MODE_DIR | GO_MODE_SYMLINK | (1 << 26) | (1 << 25) | (1 << 24) | (1 << 21) | (1 << 19);

/// Where `argv[0]` could live inside the container, in lookup order.
pub(super) fn candidates(argv0: &str, image_path: Option<&str>) -> Vec<String> {
    if argv0.starts_with('/') {
        vec![argv0.to_string()]
    } else if argv0.contains('/') {
        vec![format!("{}/{argv0}", profile::WORKDIR)]
    } else {
        image_path
            .unwrap_or("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
            .split(':')
            .filter(|dir| dir.starts_with('/'))
            .map(|dir| format!("{}/{argv0}", dir.trim_end_matches('/')))
            .collect()
    }
}

/// What one archive stat of `path` says.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Probe {
    /// A symlink: look at this path next.
    Follow(String),
    /// An executable regular file.
    Executable,
    /// Anything else: a directory, a device, a file without an execute bit.
    NotExecutable,
}

/// Reads one archive stat (`file_mode` in Go's `os.FileMode` bits, `link_target` as given).
pub(super) fn probe_step(path: &str, file_mode: u32, link_target: String) -> Probe {
    if file_mode & GO_MODE_SYMLINK != 0 {
        return Probe::Follow(if link_target.starts_with('/') {
            link_target
        } else {
            let parent = Path::new(path)
                .parent()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            format!("{parent}/{link_target}")
        });
    }
    if file_mode & GO_MODE_TYPE == 0 && file_mode & 0o111 != 0 {
        Probe::Executable
    } else {
        Probe::NotExecutable
    }
}

/// The interpreter named by a `#!` line at the start of `head`, as the kernel reads it: the
/// first word after `#!`, leading blanks skipped.
pub(super) fn shebang_interpreter(head: &[u8]) -> Option<String> {
    let rest = head.strip_prefix(b"#!")?;
    let line = rest.split(|b| *b == b'\n').next()?;
    let word = line
        .split(|b| *b == b' ' || *b == b'\t')
        .find(|w| !w.is_empty())?;
    std::str::from_utf8(word).ok().map(str::to_string)
}

/// The init's (docker-init, tini 0.19 and later) exit statuses when it cannot execute the
/// command: 127 when it is not found, 126 for any other exec error.
const INIT_EXEC_FAILED: [i64; 2] = [126, 127];
/// The start of the line every tini writes to stderr when the exec fails
/// (`[FATAL tini (7)] exec /x failed: No such file or directory`); tini before 0.19 exits 1
/// with it, the status a failing test also has.
const INIT_EXEC_FAILED_LINE: &[u8] = b"[FATAL tini (";

/// Whether a run that ended in `decision`, having written `stderr`, may be the init failing to
/// execute the command, so a cached resolution must be checked again. Only a test's own end
/// is not: exit 0, or any other status without the init's exec statuses or its line on
/// stderr (the command did run: the init writes that line whenever the exec fails). Any
/// no-verdict is checked, so its reason is the pre-check's when the command was missing.
/// A program that prints the line or exits 126/127 itself only costs the re-check.
pub(super) fn init_may_have_failed_exec(
    decision: &crate::decision::Decision,
    stderr: &[u8],
) -> bool {
    match decision {
        crate::decision::Decision::Completed { exit_code: 0 } => false,
        crate::decision::Decision::Completed { exit_code } => {
            INIT_EXEC_FAILED.contains(exit_code)
                || stderr
                    .windows(INIT_EXEC_FAILED_LINE.len())
                    .any(|w| w == INIT_EXEC_FAILED_LINE)
        }
        crate::decision::Decision::NoVerdict { .. } => true,
    }
}

/// Where a run's resolution is remembered, and what it is remembered by.
pub(super) struct Cache<'a> {
    /// The cache directory (the staging root's `executables/`).
    pub dir: PathBuf,
    /// The run's key.
    pub key: Key<'a>,
    /// The run's mounts, tmpfs and runtime paths: answers touching them are not kept.
    pub volatile: Volatile,
}

/// How a run's `argv[0]` was settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Settled {
    /// Probed in this container.
    Probed,
    /// Taken from the cache without probing: only trusted as far as the run's end shows the
    /// init could execute it ([`init_may_have_failed_exec`]).
    Cached,
}

/// Why `argv0` cannot be started in the container: the detail of a start-failed no-verdict
/// (the text is the author's to act on, unchanged from when it was a plain string).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// `argv0` is nowhere on its candidates; the text names a well-known counterpart the
    /// image does have, when there is one.
    #[error("{hint}")]
    Missing {
        /// The hint ([`super::alternatives`]).
        hint: String,
    },
    /// The script's `#!` interpreter is not in the image.
    #[error("interpreter {interpreter} of {argv0} not found in the image")]
    InterpreterMissing {
        /// The interpreter as the `#!` line names it.
        interpreter: String,
        /// The script.
        argv0: String,
    },
    /// A path leads to something the kernel cannot execute.
    #[error("{name} resolves to {path}, which is not an executable file")]
    NotExecutable {
        /// The name resolved (`argv0` or its interpreter).
        name: String,
        /// Where it led.
        path: String,
    },
    /// The engine failed a stat for another reason than "not found".
    #[error("resolving executable {name} failed: {message}")]
    Engine {
        /// The name resolved.
        name: String,
        /// The engine's own words.
        message: String,
    },
}

/// [`resolve`], answered from `cache` when it holds an entry for this key, and remembered in
/// it when the answer depends on the image alone.
pub(super) async fn resolve_cached(
    engine: &impl ContainerEngine,
    id: &str,
    argv0: &str,
    image_path: Option<&str>,
    cache: Option<&Cache<'_>>,
) -> Result<Settled, ResolveError> {
    if let Some(cache) = cache {
        match exec_cache::lookup(&cache.dir, &cache.key, &cache.volatile) {
            Ok(entry) => {
                tracing::debug!(
                    argv0,
                    executable = %entry.executable,
                    "executable resolution taken from the cache"
                );
                return Ok(Settled::Cached);
            }
            Err(Miss::Rejected(why)) => {
                tracing::warn!(argv0, %why, "ignoring an unusable executable cache entry");
            }
            Err(Miss::Absent | Miss::Uncacheable) => {}
        }
    }
    let resolved = resolve(engine, id, argv0, image_path).await?;
    if let Some(cache) = cache {
        let image_only = resolved
            .probed
            .iter()
            .all(|path| cache.volatile.is_image_only(path));
        if image_only && ancestors_are_plain(engine, id, &resolved.probed).await {
            let entry = exec_cache::Entry::new(
                &cache.key,
                resolved.executable.clone(),
                resolved.interpreter.clone(),
            );
            if let Err(error) = exec_cache::store(&cache.dir, &cache.key, &entry) {
                tracing::warn!(argv0, %error, "could not remember the executable resolution");
            }
        } else {
            tracing::debug!(
                argv0,
                "executable resolution depends on the run; not cached"
            );
        }
    }
    Ok(Settled::Probed)
}

/// Where `argv0` resolved in a container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Resolved {
    /// The executable regular file `argv0` leads to.
    pub executable: String,
    /// The resolved `#!` interpreter, when the executable is a script.
    pub interpreter: Option<String>,
    /// Every path stat'd on the way, found or not, in order: what the answer depends on.
    pub probed: Vec<String>,
}

/// Resolves `argv0` (and its `#!` interpreter) in container `id`; the error is the detail of
/// a start-failed no-verdict.
pub(super) async fn resolve(
    engine: &impl ContainerEngine,
    id: &str,
    argv0: &str,
    image_path: Option<&str>,
) -> Result<Resolved, ResolveError> {
    let mut probed = Vec::new();
    let Some(executable) = find(
        engine,
        id,
        argv0,
        candidates(argv0, image_path),
        &mut probed,
    )
    .await?
    else {
        return Err(ResolveError::Missing {
            hint: missing(engine, id, argv0, image_path).await,
        });
    };
    let mut resolved_interpreter = None;
    if let Some(interpreter) = read_interpreter(engine, id, &executable).await {
        // The kernel does not search PATH for an interpreter; relative means the workdir.
        let candidates = if interpreter.starts_with('/') {
            vec![interpreter.clone()]
        } else {
            vec![format!("{}/{interpreter}", profile::WORKDIR)]
        };
        match find(engine, id, &interpreter, candidates, &mut probed).await? {
            Some(path) => resolved_interpreter = Some(path),
            None => {
                return Err(ResolveError::InterpreterMissing {
                    interpreter,
                    argv0: argv0.to_string(),
                });
            }
        }
    }
    Ok(Resolved {
        executable,
        interpreter: resolved_interpreter,
        probed,
    })
}

/// The start-failed detail for a missing bare `argv0`, naming a well-known counterpart the
/// image has on its PATH (`python` → `python3`). Its probes are not part of the resolution.
async fn missing(
    engine: &impl ContainerEngine,
    id: &str,
    argv0: &str,
    image_path: Option<&str>,
) -> String {
    if !argv0.contains('/') {
        for name in super::alternatives::alternatives(argv0) {
            // One candidate at a time, to name the PATH entry rather than a link's target.
            for candidate in candidates(name, image_path) {
                let mut scratch = Vec::new();
                let one = vec![candidate.clone()];
                if let Ok(Some(_)) = find(engine, id, name, one, &mut scratch).await {
                    return super::alternatives::hint(argv0, Some((name, &candidate)));
                }
            }
        }
    }
    super::alternatives::hint(argv0, None)
}

/// Whether no directory on the way to any of `paths` is a symlink in the container (or could
/// not be told): a lexically plain path under a linked directory may land in a mount.
pub(super) async fn ancestors_are_plain(
    engine: &impl ContainerEngine,
    id: &str,
    paths: &[String],
) -> bool {
    let mut ancestors: Vec<&str> = paths
        .iter()
        .flat_map(|path| {
            path.match_indices('/')
                .map(|(at, _)| &path[..at])
                .filter(|dir| !dir.is_empty())
        })
        .collect();
    ancestors.sort_unstable();
    ancestors.dedup();
    for dir in ancestors {
        tracing::debug!(path = dir, "archive stat of an ancestor");
        match engine.archive_stat(id, dir).await {
            Ok(stat) if stat.file_mode & GO_MODE_SYMLINK == 0 => {}
            // Absent: nothing under it exists either, and no mount can create it.
            Err(error) if error.is_not_found() => {}
            _ => return false,
        }
    }
    true
}

/// The first candidate that is (after following symlinks) an executable regular file; every
/// path stat'd is appended to `probed`.
async fn find(
    engine: &impl ContainerEngine,
    id: &str,
    name: &str,
    candidates: Vec<String>,
    probed: &mut Vec<String>,
) -> Result<Option<String>, ResolveError> {
    for candidate in candidates {
        let mut path = candidate;
        for _ in 0..MAX_LINK_HOPS {
            tracing::debug!(path = %path, "archive stat");
            probed.push(path.clone());
            let stat = match engine.archive_stat(id, &path).await {
                Ok(stat) => stat,
                Err(error) if error.is_not_found() => break,
                Err(error) => {
                    return Err(ResolveError::Engine {
                        name: name.to_string(),
                        message: error.message(),
                    });
                }
            };
            match probe_step(&path, stat.file_mode, stat.link_target) {
                Probe::Follow(next) => path = next,
                Probe::Executable => return Ok(Some(path)),
                Probe::NotExecutable => {
                    return Err(ResolveError::NotExecutable {
                        name: name.to_string(),
                        path,
                    });
                }
            }
        }
    }
    Ok(None)
}

/// The `#!` interpreter of the file at `path`, read through the engine's archive API.
/// Unreadable or non-script files yield `None`: the executable itself is already known to
/// exist, so this only narrows what a 127 can mean.
async fn read_interpreter(engine: &impl ContainerEngine, id: &str, path: &str) -> Option<String> {
    tracing::debug!(path, "archive read of the file's head");
    let mut archive = engine.archive_read(id, path);
    let mut head = Vec::new();
    while head.len() < ARCHIVE_HEAD_BYTES {
        match archive.next().await {
            Some(Ok(chunk)) => head.extend_from_slice(&chunk),
            _ => break,
        }
    }
    drop(archive);
    let mut entries = tar::Archive::new(std::io::Cursor::new(head));
    let mut entry = entries.entries().ok()?.next()?.ok()?;
    let mut start = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(&mut entry, 256), &mut start).ok()?;
    shebang_interpreter(&start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebang_interpreter_is_the_first_word() {
        assert_eq!(
            shebang_interpreter(b"#!/bin/sh\necho"),
            Some("/bin/sh".into())
        );
        assert_eq!(
            shebang_interpreter(b"#! \t/usr/bin/env python3 -u\n"),
            Some("/usr/bin/env".into())
        );
        assert_eq!(shebang_interpreter(b"\x7fELF..."), None);
        assert_eq!(shebang_interpreter(b"#!\n"), None);
        assert_eq!(shebang_interpreter(b""), None);
    }

    #[test]
    fn executable_candidates_follow_path_rules() {
        assert_eq!(candidates("/bin/sh", Some("/x")), ["/bin/sh"]);
        assert_eq!(candidates("./run.sh", None), ["/workspace/./run.sh"]);
        assert_eq!(
            candidates("cat", Some("/usr/bin:/bin/:relative")),
            ["/usr/bin/cat", "/bin/cat"]
        );
    }

    #[test]
    fn a_probe_follows_links_and_accepts_only_executable_regular_files() {
        assert_eq!(
            probe_step("/bin/sh", GO_MODE_SYMLINK | 0o777, "busybox".into()),
            Probe::Follow("/bin/busybox".into())
        );
        assert_eq!(
            probe_step("/bin/sh", GO_MODE_SYMLINK, "/usr/bin/dash".into()),
            Probe::Follow("/usr/bin/dash".into())
        );
        assert_eq!(
            probe_step("/bin/sh", 0o755, String::new()),
            Probe::Executable
        );
        assert_eq!(
            probe_step("/bin/sh", 0o644, String::new()),
            Probe::NotExecutable
        );
        assert_eq!(
            probe_step("/bin", GO_MODE_DIR | 0o755, String::new()),
            Probe::NotExecutable
        );
    }
}
