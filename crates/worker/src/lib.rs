//! The no-secrets regression runner.
//!
//! The worker stages content-addressed source and benchmark trees, validates the job and its
//! digest-pinned runner manifest with `verifier-sdk`, runs the direct-argv command in a
//! bounded Docker container through the Engine API, and emits an unsigned candidate.
//!
//! It deliberately holds no keys and writes nothing to any chain: its output is evidence for
//! the signer to re-check, never a signature or a payment.

pub mod chain_clock;
pub mod chain_readiness;
pub mod cli;
pub mod commands;
pub mod engine;
pub mod exit;
pub mod interrupt;
