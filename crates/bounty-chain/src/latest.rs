//! The latest block's timestamp, for `worker doctor --rpc`'s clock check: one
//! `eth_getBlockByNumber("latest")` through [`crate::rpc::connect_rpc`] (URL policy, timeout,
//! redaction).

use std::time::Duration;

use alloy::eips::BlockNumberOrTag;
use alloy::providers::Provider;

use crate::error::ChainReadError;
use crate::rpc::{check_rpc_url, connect_rpc};

/// `scheme://host[:port]` of `rpc_url`: what a report may show of it (a path, query or user
/// part may carry an API key).
pub fn rpc_origin(rpc_url: &str) -> Result<String, ChainReadError> {
    Ok(check_rpc_url(rpc_url)?.origin().ascii_serialization())
}

/// The timestamp (unix seconds) of `rpc_url`'s latest block, every request bounded by
/// `timeout`; errors have the URL redacted.
pub async fn latest_block_timestamp(
    rpc_url: &str,
    timeout: Duration,
) -> Result<u64, ChainReadError> {
    let (provider, redactor) = connect_rpc(rpc_url, timeout)?;
    let block = provider
        .get_block_by_number(BlockNumberOrTag::Latest)
        .await
        .map_err(|e| ChainReadError::Rpc {
            what: "eth_getBlockByNumber",
            detail: redactor.scrub(&e.to_string()),
        })?
        .ok_or_else(|| ChainReadError::Rpc {
            what: "eth_getBlockByNumber",
            detail: "the node has no latest block".to_owned(),
        })?;
    Ok(block.header.timestamp)
}
