//! The no-secrets regression runner.
//!
//! The worker stages content-addressed source and benchmark trees, validates the job and its
//! digest-pinned runner manifest with `verifier-sdk`, runs the direct-argv command in a
//! bounded Docker container through the Engine API, and emits an unsigned candidate.
//!
//! It deliberately holds no keys and writes nothing to any chain: its output is evidence for
//! the signer to re-check, never a signature or a payment.

pub mod cli;
pub mod commands;
pub mod completions;
pub mod exit;
pub mod explain;
pub mod feed;
pub mod gc;
pub mod interrupt;
pub mod intoto;
pub mod local_request;
pub mod progress;
pub mod rehearse;
pub mod run;
pub mod sandbox;
pub mod serve;
pub mod snapshot;
pub mod stage;
pub mod staging_root;

pub use snapshot::snapshot_directory;
pub use stage::{StageError, StageKind, StagedTree, VerifyError, stage_tree, verify_staged};
