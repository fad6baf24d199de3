//! The worker's local disk: content-addressed snapshots of directory trees ([`snapshot`]), the
//! staging store of verified trees ([`stage`], rooted by [`staging_root`]), safe extraction of
//! downloaded archives ([`archive`]), per-job scratch space ([`scratch`]), collection of old store entries ([`gc`]) and the progress
//! reporting of long tree operations ([`progress`]).
//!
//! It is synchronous and deliberately knows nothing of containers, the network, jobs or the
//! command line: no tokio, no engine, no exit codes. Callers above it decide what to stage and
//! when; this crate only makes the file operations safe (no symlink followed, atomic publish).

pub mod archive;
pub mod gc;
pub mod progress;
pub mod scratch;
pub mod snapshot;
pub mod stage;
pub mod staging_root;

pub use snapshot::snapshot_directory;
pub use stage::{StageError, StageKind, StagedTree, VerifyError, stage_tree, verify_staged};
