//! The chain half of `worker feed`'s and `worker serve`'s readiness records (issue #43 item 3)
//! over `--rpc`: `bounty_chain::read_chain_readiness`, the signer gate's own check, so a record
//! says ready on the chain only where the signer would not refuse for the chain.

use std::sync::Arc;
use std::time::Duration;

use bounty_chain::{ChainReadError, FailoverPolicy, RpcChainReader};
use verifier_sdk::ValidatedJob;
use verifier_sdk::readiness::CheckResult;
use worker_jobs::feed::readiness::ChainReadiness;

/// One read of a bounty; the signer's timeout too.
const RPC_TIMEOUT: Duration = Duration::from_secs(20);

/// The bounty read through the `--rpc` endpoints (failing over as the signer does).
struct RpcReadiness(RpcChainReader);

// The URLs may embed API keys: never printed.
impl std::fmt::Debug for RpcReadiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RpcReadiness(..)")
    }
}

#[async_trait::async_trait]
impl ChainReadiness for RpcReadiness {
    async fn check(&self, job: &ValidatedJob) -> CheckResult {
        bounty_chain::read_chain_readiness(job, &self.0).await
    }
}

/// The chain check over `rpc_urls` in order; `None` without any (the records' chain check is
/// then `not_checked`).
pub fn connect(rpc_urls: &[String]) -> Result<Option<Arc<dyn ChainReadiness>>, ChainReadError> {
    if rpc_urls.is_empty() {
        return Ok(None);
    }
    let reader = RpcChainReader::with_failover(rpc_urls, RPC_TIMEOUT, FailoverPolicy::default())?;
    Ok(Some(Arc::new(RpcReadiness(reader))))
}
