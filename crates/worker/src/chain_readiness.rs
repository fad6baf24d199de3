//! The chain half of `worker feed`'s and `worker serve`'s readiness records (issue #43 item 3)
//! over `--rpc`: `bounty_chain::read_chain_readiness`, the signer gate's own check, so a record
//! says ready on the chain only where the signer would not refuse for the chain.

use std::sync::Arc;
use std::time::Duration;

use bounty_chain::{ChainReadError, FailoverError, FailoverPolicy, RpcChainReader};
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

/// Why the `--rpc` endpoints cannot back the chain check.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// A URL the signer would refuse too (not https to a remote host, malformed).
    #[error(transparent)]
    Url(#[from] ChainReadError),
    /// The endpoints' answers at start (the signer's own check of the same list).
    #[error(transparent)]
    Endpoints(#[from] FailoverError),
}

impl ConnectError {
    /// No endpoint answered (an outage: a later start may succeed), rather than a
    /// configuration to fix.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Endpoints(e) if e.is_transient())
    }
}

/// The chain check over `rpc_urls` in order; `None` without any (the records' chain check is
/// then `not_checked`). Several endpoints are checked at once as the signer checks its
/// `--rpc` list before it signs (`RpcChainReader::check_endpoints`): a list on two chains is
/// refused with each endpoint's answer by position, an endpoint that does not answer or lags
/// is left out, none answering is an outage. Otherwise the signer, given the same list, would
/// refuse to sign at all while the records read the bounty from whichever endpoint came first.
pub async fn connect(rpc_urls: &[String]) -> Result<Option<Arc<dyn ChainReadiness>>, ConnectError> {
    if rpc_urls.is_empty() {
        return Ok(None);
    }
    let reader = RpcChainReader::with_failover(rpc_urls, RPC_TIMEOUT, FailoverPolicy::default())?;
    reader.check_endpoints().await?;
    Ok(Some(Arc::new(RpcReadiness(reader))))
}
