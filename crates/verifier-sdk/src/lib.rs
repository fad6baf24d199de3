//! Protocol core of `sandboxed_regression_v1`.
//!
//! This crate defines what the other crates agree on: typed jobs and manifests, canonical
//! JSON, every hash and its preimage, the directory digest, receipts and the response hash,
//! EIP-712 attestation digests, and settlement calldata and events.
//!
//! It deliberately does no network I/O, talks to no container runtime, holds no keys and
//! has no async runtime: everything here is a pure function of its inputs (the reference
//! directory walk reads files, nothing else), so the worker, signer and keeper can each
//! re-run the same checks on the bytes they received.

pub mod digest;
pub mod types;

pub use digest::{DirectoryHasher, Snapshot, TreeLimits, digest_directory};
pub use types::{Address, Bytes32, ParseValueError, Sha256Digest};
