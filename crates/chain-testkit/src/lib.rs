//! Test-only kit for the local chain: deploys `contracts/TestBounty.sol` (from the committed
//! artifact `contracts/out/TestBounty.json`) to the Hardhat node started by
//! `tools/chain/up.sh`, puts bounties in the Submitted state with chosen parameters, drives
//! the contract's test setters, and signs attestations with Hardhat's public dev keys.
//!
//! It deliberately holds no real key and is never a dependency of a shipped binary
//! (`publish = false`, dev-dependency only). It does not start the node: tests call
//! [`Testkit::connect`], which fails loudly with "run scripts/services.sh" when no node with
//! chain id 8453 answers. The node is found at `$CHAIN_RPC_URL`, default
//! `http://127.0.0.1:8545`. A test that must change how blocks are mined starts its own node
//! ([`PrivateNode`]) and connects with [`Testkit::connect_to`].

pub mod attest;
pub mod bounty;
pub mod node;
pub mod private;
pub mod proxy;
pub mod softhsm;

pub use attest::{AttestationFields, local_attestation_digest, revert_reason, sign_digest};
pub use bounty::{BountyParams, DeployedBounty, TestBounty, TestVerifierWallet, Testkit, status};
pub use node::{
    CHAIN_ID, DEFAULT_RPC_URL, DEV_KEYS, RPC_URL_ENV, TestkitError, dev_signer, require_node,
    rpc_url,
};
pub use private::PrivateNode;
pub use proxy::{Misbehaviour, RpcProxy};
pub use softhsm::SoftHsmToken;
