//! Which build of the verifier is running: the package version plus the source commit it was
//! built from, e.g. `0.1.0 (306eba9abc12)`.
//!
//! The version alone is `0.1.0` in every commit, so a cached verdict, an evidence record, a
//! ledger row or a metric could not tell two builds apart, and an upgrade never invalidated
//! what an older build had decided. The binaries know their commit (their `--version`); they
//! record it here once at start-up, before any work, and every record and cache key reads it
//! from here. Libraries and tests that never set it get [`UNRECORDED`], which no release
//! binary ever reports, so such a record cannot be mistaken for one of a named build.

use std::sync::OnceLock;

use crate::types::Sha256Digest;

static BUILD: OnceLock<&'static str> = OnceLock::new();

/// The identity reported when no binary recorded one (library tests, embedders).
pub const UNRECORDED: &str = concat!(env!("CARGO_PKG_VERSION"), " (unrecorded)");

/// Records this process's build identity. Only the first call counts: a process is one build,
/// so a later call can never rename records already written.
pub fn record(identity: &'static str) {
    let _ = BUILD.set(identity);
}

/// The build identity recorded at start-up, or [`UNRECORDED`].
pub fn identity() -> &'static str {
    BUILD.get().copied().unwrap_or(UNRECORDED)
}

static BINARY_SOURCE: OnceLock<fn() -> Option<Sha256Digest>> = OnceLock::new();
static BINARY: OnceLock<Option<Sha256Digest>> = OnceLock::new();

/// Records how to learn the running executable's own sha256 (the binary reads
/// `/proc/self/exe`; this crate does no I/O). The identity names the commit, but only the
/// digest tells which build of it ran, so that a rebuild can be compared with it
/// (docs/rebuild.md). Only the first call counts, like [`record`].
pub fn record_binary_digest(source: fn() -> Option<Sha256Digest>) {
    let _ = BINARY_SOURCE.set(source);
}

/// The running executable's sha256, read at most once per process (on first use, so a
/// command that writes no record never pays for hashing its binary); `None` when no binary
/// recorded a source (library tests) or the executable could not be read.
pub fn binary_sha256() -> Option<Sha256Digest> {
    *BINARY.get_or_init(|| BINARY_SOURCE.get().and_then(|source| source()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_recorded_identity_stays() {
        // One test owns the process-wide cell: recording twice keeps the first value, so a
        // library cannot rename the build a binary recorded.
        assert!(identity() == UNRECORDED || identity() == "9.9.9 (feedfacecafe)");
        record("9.9.9 (feedfacecafe)");
        record("0.0.0 (other)");
        assert_eq!(identity(), "9.9.9 (feedfacecafe)");
    }
}
