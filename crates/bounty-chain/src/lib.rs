//! On-chain reading that the signer and the keeper share.
//!
//! A bounty's state is read at ONE pinned block ([`ChainReader::read_bounty`]) into a
//! [`BountyState`], so every field comes from the same chain state even while blocks keep
//! arriving; the contract's own `attestationDigest` is read at that same block. [`expect`]
//! compares a state against what a verification job commits to and returns typed mismatches,
//! as a pure function, so deciding code is tested without a chain.
//!
//! [`revalidate`] is the whole pre-signing (and pre-relay) check: the sdk's candidate checks
//! against the platform's current job (fetched through a [`JobSource`]), then the chain
//! state at one block against that job, giving a [`CheckedCandidate`] or a typed [`Refusal`].
//!
//! This crate deliberately does not sign, broadcast, compute the local EIP-712 digest (the sdk
//! owns protocol hashes) or hold keys; it only reads. The one exception is a connection, not a
//! key: [`remote_signer`], the JSON-RPC client both binaries ask a remote signer through (the
//! key and the checks on what comes back stay in each binary's `key` module).

pub mod error;
pub mod expect;
pub mod failover;
pub mod feed;
pub mod latest;
pub mod reader;
mod redact;
pub mod remote_signer;
pub mod revalidate;
pub mod rpc;
pub mod settlement;
pub mod state;

pub use expect::{Expected, Mismatch, check_state};
pub use failover::{Failover, FailoverError, FailoverPolicy};
pub use feed::{HttpJobSource, JobSource, JobSourceError};
pub use reader::{
    AttestationQuery, ChainReadError, ChainReader, MAX_VERIFIERS, RpcChainReader, check_rpc_url,
};
pub use revalidate::{
    CheckedCandidate, Refusal, chain_readiness, check_job_against_state, expected_for,
    read_chain_readiness, refetch_and_revalidate,
};
pub use rpc::{Redactor, RpcEndpoints, connect_rpc, connect_rpcs};
pub use settlement::SettlementReadError;
pub use state::BountyState;
// Re-exported so callers of this crate name one set of protocol types, the sdk's.
pub use verifier_sdk::{BountyStatus, VerificationMode, verifier_set_hash};
