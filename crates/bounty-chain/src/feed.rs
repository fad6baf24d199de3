//! Re-fetching the platform's current job: the [`JobSource`] trait and its HTTP
//! implementation over `platform-client`.

use std::future::Future;

use platform_client::{ClientError, PlatformClient};
use serde_json::Value;
use verifier_sdk::{Address, Network};

/// Why the current job could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum JobSourceError {
    /// The platform request failed or broke a rule (duplicate job id, not https, too large…).
    #[error("fetching the current job failed: {0}")]
    Client(#[from] ClientError),
}

impl JobSourceError {
    /// Whether a later retry may succeed (network trouble, server errors).
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Client(e) => e.is_transient(),
        }
    }

    /// A stable snake_case name for reports.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Client(e) => e.kind(),
        }
    }
}

/// Where the platform's current version of a job comes from.
pub trait JobSource {
    /// The one job with exactly `job_id`, or `None` when the feed no longer lists it.
    /// More than one job with that id is an error.
    fn current_job(
        &self,
        job_id: &str,
    ) -> impl Future<Output = Result<Option<Value>, JobSourceError>> + Send;
}

/// [`JobSource`] over the platform's HTTP feed for one verifier.
#[derive(Debug, Clone)]
pub struct HttpJobSource {
    client: PlatformClient,
    api_base: String,
    network: Network,
    verifier: Address,
}

impl HttpJobSource {
    /// Reads `verifier`'s feed on `network` under `api_base` with `client`'s bounds.
    pub fn new(
        client: PlatformClient,
        api_base: &str,
        network: Network,
        verifier: Address,
    ) -> Self {
        Self {
            client,
            api_base: api_base.to_owned(),
            network,
            verifier,
        }
    }
}

impl JobSource for HttpJobSource {
    async fn current_job(&self, job_id: &str) -> Result<Option<Value>, JobSourceError> {
        Ok(self
            .client
            .fetch_job(&self.api_base, self.network, self.verifier, job_id)
            .await?)
    }
}
