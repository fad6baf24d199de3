//! What the reader's tests against the local node share: a deployed bounty and a reader of it.

use std::time::Duration;

use alloy::primitives::Address as ChainAddress;
use bounty_chain::RpcChainReader;
use chain_testkit::{BountyParams, DeployedBounty, Testkit, dev_signer};
use verifier_sdk::Address;

pub fn sdk_addr(a: ChainAddress) -> Address {
    Address::from_bytes(a.into_array())
}

/// The local node, a reader of it, and a bounty deployed there with dev verifiers 1 and 2
/// whose verification window closes in an hour, with the parameters it was deployed with.
pub async fn deployed() -> (Testkit, RpcChainReader, DeployedBounty, BountyParams) {
    let kit = Testkit::connect().await.unwrap_or_else(|e| panic!("{e}"));
    let reader = RpcChainReader::new(kit.url(), Duration::from_secs(10)).unwrap();
    let verifiers = vec![
        dev_signer(1).unwrap().address(),
        dev_signer(2).unwrap().address(),
    ];
    let now = kit.latest_timestamp().await.unwrap();
    let params = BountyParams::new(verifiers, now + 3600);
    let bounty = kit.deploy_bounty(&params).await.unwrap();
    (kit, reader, bounty, params)
}
