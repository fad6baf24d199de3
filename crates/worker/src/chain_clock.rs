//! The clock `worker feed` and `worker serve` judge verification windows by when they have
//! `--rpc` (issue #43): the host's, moved ahead by as much as the chain's latest block is
//! ahead of it (`worker_store::clock::ChainAligned`), read before the first decision and again
//! every [`REFRESH`] while the batch or the service runs. Without `--rpc` the worker has no
//! view of the chain (the scheduled runner may hold no RPC URL, which can carry an API key)
//! and judges on the host clock, as `worker doctor --rpc` checks it can.

use std::sync::Arc;
use std::time::Duration;

use worker_store::clock::ChainAligned;

/// How often the chain's clock is read again.
pub const REFRESH: Duration = Duration::from_secs(10);

/// One read of an endpoint's latest block.
const RPC_TIMEOUT: Duration = Duration::from_secs(10);

/// A drift of the chain's lead smaller than this is not logged again.
const LOG_STEP_MS: i64 = 5_000;

/// Reads the chain's clock into `clock` now, then every [`REFRESH`] on a task of the current
/// runtime (aborted when the returned handle is dropped). Without endpoints: nothing.
pub async fn follow(rpc_urls: &[String], clock: Arc<ChainAligned>) -> Option<Following> {
    if rpc_urls.is_empty() {
        return None;
    }
    let urls = rpc_urls.to_vec();
    let mut logged = read(&urls, &clock, None).await;
    let task = tokio::spawn(async move {
        loop {
            tokio::time::sleep(REFRESH).await;
            logged = read(&urls, &clock, logged).await;
        }
    });
    Some(Following(task))
}

/// The refreshing task; ends with this value.
#[derive(Debug)]
pub struct Following(tokio::task::JoinHandle<()>);

impl Drop for Following {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The first endpoint that answers, in order; a failed read keeps the last lead (a worker
/// whose RPC is down judges as it last saw the chain, never worse than the host clock).
async fn read(urls: &[String], clock: &ChainAligned, logged: Option<i64>) -> Option<i64> {
    for (i, url) in urls.iter().enumerate() {
        match bounty_chain::latest::latest_block_timestamp(url, RPC_TIMEOUT).await {
            Ok(block_secs) => {
                let ahead = clock.observe_chain(block_secs);
                let moved = logged.is_none_or(|l| (ahead - l).abs() >= LOG_STEP_MS);
                if moved && ahead > 0 {
                    tracing::warn!(
                        ahead_secs = ahead / 1000,
                        "the chain's latest block is ahead of this host's clock: windows are \
                         judged on the chain's clock"
                    );
                }
                return if moved { Some(ahead) } else { logged };
            }
            Err(error) => tracing::debug!(rpc = i + 1, %error, "could not read the chain's clock"),
        }
    }
    tracing::warn!(
        "no --rpc endpoint gave its latest block: windows are judged on the clock as last read"
    );
    logged
}
