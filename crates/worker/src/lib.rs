//! The no-secrets regression runner.
//!
//! The worker stages content-addressed source and benchmark trees, validates the job and its
//! digest-pinned runner manifest with `verifier-sdk`, runs the direct-argv command in a
//! bounded Docker container through the Engine API, and emits an unsigned candidate.
//!
//! It deliberately holds no keys and writes nothing to any chain: its output is evidence for
//! the signer to re-check, never a signature or a payment.

pub mod chain_readiness;
pub mod cli;
pub mod commands;
pub mod engine;
pub mod exit;
pub mod interrupt;

pub use commands::local_request;

pub use worker_jobs::{feed, intoto, preflight, reproduce, run};
pub use worker_rehearse as rehearse;
pub use worker_sandbox::explain;
pub use worker_serve as serve;
pub use worker_store::{
    StageError, StageKind, StagedTree, VerifyError, snapshot_directory, stage_tree, verify_staged,
};
pub use worker_store::{gc, progress, snapshot, stage, staging_root};

/// The sandbox at its old path: the deciding half and the engine seam from `worker-sandbox`,
/// the Docker engine from `worker-docker`.
pub mod sandbox {
    pub use worker_docker::{DockerExecutor, endpoint, executable};
    pub use worker_sandbox::*;
}
