//! Re-fetching the current job and re-running the full candidate revalidation at one pinned
//! block.
//!
//! INTERIM: this mirrors the shared `bounty_chain::revalidate` that the signer branch is
//! writing (sdk `revalidate_candidate` + chain id + `check_state`); the keeper switches to it
//! once merged, so the two binaries refuse for the same reasons.

use std::future::Future;
use std::time::Duration;

use bounty_chain::{BountyState, ChainReadError, ChainReader, Expected, Mismatch, check_state};
use serde_json::Value;
use verifier_sdk::{Candidate, Network, Revalidated, RevalidationError, revalidate_candidate};

/// Largest job-list response accepted from the API.
pub const MAX_JOBS_RESPONSE_BYTES: usize = 16 << 20;

/// Where the current version of a job comes from.
pub trait JobSource {
    /// The job with `job_id` as the platform serves it now; `None` when it is no longer listed.
    fn current_job(
        &self,
        network: Network,
        verifier: &str,
        job_id: &str,
    ) -> impl Future<Output = Result<Option<Value>, SourceError>> + Send;
}

/// The job API did not answer usefully.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// The base URL does not parse.
    #[error("api url is not a valid url")]
    InvalidUrl,
    /// Transport error or non-success status.
    #[error("job api unavailable: {0}")]
    Unavailable(String),
    /// The body is not a JSON array of jobs, or too large.
    #[error("job api answered malformed data: {0}")]
    Malformed(String),
}

/// `GET {api}/v1/base/autonomous-bounties/verification-jobs?network=…&verifier=…`.
#[derive(Debug, Clone)]
pub struct HttpJobSource {
    base: reqwest::Url,
    client: reqwest::Client,
}

impl HttpJobSource {
    /// A source for the API at `base`.
    pub fn new(base: &str, timeout: Duration) -> Result<Self, SourceError> {
        let base: reqwest::Url = base.parse().map_err(|_| SourceError::InvalidUrl)?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(SourceError::InvalidUrl);
        }
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| SourceError::Unavailable(e.without_url().to_string()))?;
        Ok(Self { base, client })
    }
}

impl JobSource for HttpJobSource {
    async fn current_job(
        &self,
        network: Network,
        verifier: &str,
        job_id: &str,
    ) -> Result<Option<Value>, SourceError> {
        let mut url = self.base.clone();
        let path = format!(
            "{}/v1/base/autonomous-bounties/verification-jobs",
            url.path().trim_end_matches('/')
        );
        url.set_path(&path);
        url.query_pairs_mut()
            .clear()
            .append_pair("network", network.name())
            .append_pair("verifier", verifier);
        let mut resp = self
            .client
            .get(url)
            .send()
            .await
            .map_err(|e| SourceError::Unavailable(e.without_url().to_string()))?;
        if !resp.status().is_success() {
            return Err(SourceError::Unavailable(format!(
                "status {}",
                resp.status()
            )));
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| SourceError::Unavailable(e.without_url().to_string()))?
        {
            if body.len() + chunk.len() > MAX_JOBS_RESPONSE_BYTES {
                return Err(SourceError::Malformed(format!(
                    "response larger than {MAX_JOBS_RESPONSE_BYTES} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        let jobs: Vec<Value> = serde_json::from_slice(&body)
            .map_err(|e| SourceError::Malformed(e.to_string().chars().take(200).collect()))?;
        Ok(jobs
            .into_iter()
            .find(|j| j.get("job_id").and_then(Value::as_str) == Some(job_id)))
    }
}

/// A candidate that passed every check, with the chain state it was checked against.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The current job and the re-derived outcome.
    pub revalidated: Revalidated,
    /// The bounty as read at one pinned block.
    pub state: BountyState,
}

/// Why the candidate cannot be relayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The candidate's job has no usable network or verifier to look it up with.
    #[error("candidate job cannot be looked up: {0}")]
    Unroutable(&'static str),
    /// The platform no longer lists the job.
    #[error("the job is no longer listed by the platform")]
    JobGone,
    /// sdk revalidation failed.
    #[error("{0}")]
    Revalidation(RevalidationError),
    /// The chain disagrees with the job.
    #[error("on-chain state differs from the job: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    State(Vec<Mismatch>),
}

impl Refusal {
    /// Stable code for reports.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unroutable(_) => "invalid_candidate",
            Self::JobGone => "job_gone",
            Self::Revalidation(RevalidationError::CandidateJob(_)) => "invalid_candidate",
            Self::Revalidation(RevalidationError::CurrentJob(_)) => "current_job_invalid",
            Self::Revalidation(RevalidationError::JobChanged(_)) => "job_changed",
            Self::Revalidation(RevalidationError::Outcome(_)) => "outcome_invalid",
            Self::Revalidation(RevalidationError::Evidence(_)) => "evidence_invalid",
            Self::State(m) if m.iter().any(|m| matches!(m, Mismatch::NotSubmitted { .. })) => {
                "not_submitted"
            }
            Self::State(_) => "state_mismatch",
        }
    }

    /// Whether this refusal means the bounty has moved past Submitted (nothing left to do).
    pub fn is_not_submitted(&self) -> bool {
        matches!(self, Self::State(m) if m.iter().any(|m| matches!(m, Mismatch::NotSubmitted { .. })))
    }
}

/// The revalidation could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RevalidateError {
    /// The candidate is refused.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The job API failed.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The chain read failed.
    #[error(transparent)]
    Chain(#[from] ChainReadError),
}

/// Re-fetches the job, re-runs the sdk revalidation on the candidate's raw values, reads the
/// bounty at one pinned block and checks it against the current job.
pub async fn revalidate<S: JobSource, R: ChainReader>(
    source: &S,
    reader: &R,
    candidate: &Candidate,
    now_unix: u64,
) -> Result<Checked, RevalidateError> {
    let network = candidate
        .job
        .get("network")
        .and_then(Value::as_str)
        .and_then(Network::from_alias)
        .ok_or(Refusal::Unroutable("network"))?;
    let verifier = candidate
        .job
        .get("eligible_verifiers")
        .and_then(|v| v.get(0))
        .and_then(Value::as_str)
        .ok_or(Refusal::Unroutable("eligible_verifiers"))?;
    let job_id = candidate
        .job
        .get("job_id")
        .and_then(Value::as_str)
        .ok_or(Refusal::Unroutable("job_id"))?;
    let current = source
        .current_job(network, verifier, job_id)
        .await?
        .ok_or(Refusal::JobGone)?;
    let revalidated = revalidate_candidate(
        &candidate.job,
        &current,
        &candidate.outcome,
        candidate.evidence.as_ref(),
        now_unix,
    )
    .map_err(Refusal::Revalidation)?;
    let job = &revalidated.job;
    let state = reader.read_bounty(job.bounty_contract()).await?;
    let expected = Expected {
        chain_id: job.chain_id(),
        bounty_id: job.bounty_id(),
        round: job.round(),
        solver: job.solver(),
        submission_hash: job.submission_hash(),
        evidence_hash: job.evidence_hash(),
        policy_hash: job.policy_hash(),
        verification_expires_at: job.expires_at(),
        verifiers: job.eligible_verifiers().to_vec(),
        threshold: job.threshold(),
    };
    let mismatches = check_state(&state, &expected);
    if !mismatches.is_empty() {
        return Err(Refusal::State(mismatches).into());
    }
    Ok(Checked { revalidated, state })
}
