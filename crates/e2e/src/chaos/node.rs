//! The chain a chaos run plays on: a Hardhat node of the run's own
//! ([`chain_testkit::PrivateNode`]), never the shared one at 127.0.0.1:8545.
//!
//! A run judges windows by the node's clock (the signer's `deadline_too_close`, the contract's
//! expiry, `good_settled_in_window`), and on the shared node any other test may move that
//! clock (`evm_increaseTime`, blocks mined with timestamps): during the late-image replay of
//! docs/chaos.md it ran 2-2.5 times faster than the wall clock, the lane's 420 s window lasted
//! about three minutes of wall time, and seeds 7, 11, 12 and 17 broke. An outcome that depends
//! on which other tests run beside it proves nothing about the binaries, so each run starts a
//! node, plays on it alone and drops it at the end (the node is killed with it).

use chain_testkit::{PrivateNode, Testkit};

use crate::E2eError;

/// Base's block time: the run's node mines an empty block this often besides the automined
/// ones, so the head and its time move on while nobody sends, as they do on Base (and as other
/// tests' traffic made them on the shared node; the `rpc-lag` fault's lagging reads and the
/// keeper's confirmations assume a moving head).
pub const BLOCK_INTERVAL_MS: u64 = 2_000;

/// A run's own chain: the node (killed when this is dropped) and the kit connected to it.
pub struct OwnChain {
    // Declared first so the kit's connections go before the node they talk to.
    kit: Testkit,
    _node: PrivateNode,
}

impl OwnChain {
    /// Starts a Hardhat node of the run's own, mining every [`BLOCK_INTERVAL_MS`], and connects
    /// a kit (a fresh funded deployer) to it.
    pub async fn start() -> Result<Self, E2eError> {
        let node = PrivateNode::start().await?;
        node.set_interval_mining(BLOCK_INTERVAL_MS).await?;
        let kit = Testkit::connect_to(node.url()).await?;
        Ok(Self { kit, _node: node })
    }

    /// The kit on this node.
    pub fn kit(&self) -> &Testkit {
        &self.kit
    }
}
