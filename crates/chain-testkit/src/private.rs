//! A Hardhat node of the test's own, for tests that change how the chain mines.
//!
//! Mining is a node-wide setting: switching automine off on the shared node at 127.0.0.1:8545
//! would stall every other test's transactions. A test that needs blocks on demand (a stuck
//! transaction, a base-fee spike) starts one of these instead; it is the same Hardhat, with
//! the same config (chain id 8453, the public dev accounts), from `tools/chain/node_modules`,
//! on a free loopback port, and it is killed when dropped.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use alloy::primitives::U256;
use alloy::providers::{Provider, ProviderBuilder, RootProvider};

use crate::node::{CHAIN_ID, TestkitError};

/// A Hardhat node started for one test.
pub struct PrivateNode {
    child: Child,
    url: String,
    provider: RootProvider,
}

fn chain_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tools/chain")
}

impl PrivateNode {
    /// Starts the node and waits (up to 60 s) until it answers with chain id 8453.
    pub async fn start() -> Result<Self, TestkitError> {
        let dir = chain_dir();
        let hardhat = dir.join("node_modules/.bin/hardhat");
        if !hardhat.exists() {
            return Err(TestkitError::NodeDown {
                url: "(private node)".into(),
                detail: format!(
                    "{} is missing; run scripts/services.sh (or tools/chain/up.sh) first",
                    hardhat.display()
                ),
            });
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| TestkitError::rpc("free port", e))?
            .port();
        let child = Command::new(&hardhat)
            .args([
                "node",
                "--hostname",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| TestkitError::rpc("starting hardhat node", e))?;
        let url = format!("http://127.0.0.1:{port}");
        let parsed = url.parse().map_err(|e| TestkitError::rpc("node url", e))?;
        let provider = ProviderBuilder::new()
            .disable_recommended_fillers()
            .connect_http(parsed);
        let mut node = Self {
            child,
            url,
            provider,
        };
        for _ in 0..600 {
            if let Ok(id) = node.provider.get_chain_id().await {
                if id != CHAIN_ID {
                    return Err(TestkitError::WrongChain {
                        url: node.url.clone(),
                        actual: id,
                    });
                }
                return Ok(node);
            }
            if let Ok(Some(status)) = node.child.try_wait() {
                return Err(TestkitError::NodeDown {
                    url: node.url.clone(),
                    detail: format!("hardhat node exited with {status}"),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(TestkitError::NodeDown {
            url: node.url.clone(),
            detail: "did not answer within 60 s".into(),
        })
    }

    /// Its URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `evm_setAutomine`: off, a transaction waits in the pool until [`PrivateNode::mine`].
    pub async fn set_automine(&self, on: bool) -> Result<(), TestkitError> {
        self.provider
            .raw_request::<_, bool>("evm_setAutomine".into(), (on,))
            .await
            .map_err(|e| TestkitError::rpc("evm_setAutomine", e))?;
        Ok(())
    }

    /// `hardhat_setNextBlockBaseFeePerGas`.
    pub async fn set_next_base_fee(&self, wei: u128) -> Result<(), TestkitError> {
        self.provider
            .raw_request::<_, bool>(
                "hardhat_setNextBlockBaseFeePerGas".into(),
                (U256::from(wei),),
            )
            .await
            .map_err(|e| TestkitError::rpc("hardhat_setNextBlockBaseFeePerGas", e))?;
        Ok(())
    }

    /// `evm_setIntervalMining`: a block every `ms` milliseconds besides the automined ones, so
    /// the head and its timestamp move on while nobody sends (as Base's 2 s blocks do, and as
    /// other tests' traffic did on the shared node); 0 turns it off.
    pub async fn set_interval_mining(&self, ms: u64) -> Result<(), TestkitError> {
        self.provider
            .raw_request::<_, bool>("evm_setIntervalMining".into(), (ms,))
            .await
            .map_err(|e| TestkitError::rpc("evm_setIntervalMining", e))?;
        Ok(())
    }

    /// `evm_setNextBlockTimestamp`: the next mined block's timestamp, `secs` (seconds since the
    /// epoch); the chain's clock can so run ahead of this host's.
    pub async fn set_next_block_timestamp(&self, secs: u64) -> Result<(), TestkitError> {
        self.provider
            .raw_request::<_, serde_json::Value>("evm_setNextBlockTimestamp".into(), (secs,))
            .await
            .map_err(|e| TestkitError::rpc("evm_setNextBlockTimestamp", e))?;
        Ok(())
    }

    /// `evm_mine`: one block with whatever pending transactions pay its base fee.
    pub async fn mine(&self) -> Result<(), TestkitError> {
        self.provider
            // Hardhat wants `[]`, not the `null` a unit serializes to.
            .raw_request::<_, String>("evm_mine".into(), Vec::<bool>::new())
            .await
            .map_err(|e| TestkitError::rpc("evm_mine", e))?;
        Ok(())
    }
}

impl Drop for PrivateNode {
    fn drop(&mut self) {
        // Only the process this node started.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
