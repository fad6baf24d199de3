//! The keeper: relays verifier attestations to a bounty contract.
//!
//! For each candidate it re-fetches the job and re-runs the full revalidation at one pinned
//! block, gathers attestation files from every directory, recovers each signature locally
//! against the locally computed EIP-712 digest, keeps exactly `threshold` attestations of one
//! verdict from distinct committed verifiers, simulates `settleWithAttestations`, caps gas and
//! fees, checks the balance, sends, waits for confirmations and checks the `BountySettled` /
//! `SubmissionRejected` event of the bounty itself. A settlement record per (chain id, bounty
//! contract, round) makes reruns idempotent and resumes a crash between send and confirmation.
//!
//! It deliberately never touches Docker or runs untrusted code, never holds a verifier key
//! (only its own transaction key, which never reaches a log, report, error or command line),
//! and trusts no earlier stage: every check is re-run on the bytes it received. The
//! revalidation itself is `bounty_chain::refetch_and_revalidate`, shared with the signer; the
//! transaction key is picked in [`key`]: the shared `keyfile` crate's file or variable, a
//! remote signer's `eth_signTransaction`, or a PKCS#11 token through the shared `pkcs11-key`.

pub mod chain;
pub mod cli;
pub mod confirm;
pub mod exit;
pub mod fees;
pub mod inputs;
pub mod key;
pub mod metrics;
pub mod record;
pub mod relay;
pub mod report;
pub mod select;
pub mod status;

use std::path::PathBuf;
use std::time::Duration;

pub use keyfile::KeySource;
use platform_client::{ClientLimits, PlatformClient};

use crate::chain::SettlementRpc;
use crate::exit::ExitCode;
use crate::fees::FeeCaps;
use crate::key::{GasKey, GasKeyConfig};
use crate::record::{RecordState, StateDir};
use crate::relay::{Relayer, WaitPolicy};
use crate::report::{JobReport, JobStatus, Report};

/// Timeout of each RPC or API request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A relay run's configuration (what `keeper relay` parses into).
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// Candidate directory.
    pub candidates: PathBuf,
    /// Attestation directories.
    pub attestations: Vec<PathBuf>,
    /// Job API base URL.
    pub api: String,
    /// `--require-oci-runtime`: the OCI runtime every relayed run must have used.
    pub require_oci_runtime: Option<String>,
    /// RPC endpoints in order (may embed keys; never printed).
    pub rpc: bounty_chain::RpcEndpoints,
    /// Where the transaction key is, and the address it must be.
    pub key: GasKeyConfig,
    /// Settlement records.
    pub state_dir: PathBuf,
    /// Gas and fee caps.
    pub caps: FeeCaps,
    /// Receipt wait.
    pub wait: WaitPolicy,
}

/// A `keeper resume` run's configuration: a relay's without candidates, attestations or API.
#[derive(Debug, Clone)]
pub struct ResumeConfig {
    /// RPC endpoints in order (may embed keys; never printed).
    pub rpc: bounty_chain::RpcEndpoints,
    /// Where the transaction key is, and the address it must be.
    pub key: GasKeyConfig,
    /// Settlement records.
    pub state_dir: PathBuf,
    /// Gas and fee caps (replacements stay within them).
    pub caps: FeeCaps,
    /// Receipt wait.
    pub wait: WaitPolicy,
}

/// A run could not start or could not list its inputs.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Key problem: unloadable, not `--from`'s, or a backend that does not answer.
    #[error(transparent)]
    Key(#[from] key::GasKeyError),
    /// Bad URL or client setup.
    #[error("configuration: {0}")]
    Config(String),
    /// The RPC node did not answer the chain id.
    #[error(transparent)]
    Rpc(chain::RpcFailure),
    /// An input directory is unusable.
    #[error(transparent)]
    Input(#[from] inputs::InputError),
    /// The state directory cannot be opened.
    #[error(transparent)]
    State(#[from] record::RecordError),
}

impl RunError {
    /// The exit code for this failure.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            // A remote signer that did not answer may answer the next run: an outage.
            Self::Key(e) if e.is_unavailable() => ExitCode::Unavailable,
            Self::Key(_) | Self::Config(_) => ExitCode::Config,
            Self::Rpc(e) if !e.is_transient() => ExitCode::Config,
            Self::Rpc(_) => ExitCode::Unavailable,
            Self::Input(_) => ExitCode::InvalidInput,
            Self::State(_) => ExitCode::Internal,
        }
    }
}

/// What `keeper relay` and `keeper resume` both open, after their URL checks and in this
/// order, so a bad key is reported before anything is built and the two fail alike.
struct Connections {
    key: GasKey,
    rpc: SettlementRpc,
    reader: bounty_chain::RpcChainReader,
    client: PlatformClient,
}

impl Connections {
    /// The relayer over these connections, for the chain the node answers: settling into
    /// `state` with `pool`'s attestations, within `caps`, waiting for receipts as `wait` says.
    async fn relayer<'a>(
        &'a self,
        state: &'a StateDir,
        pool: &'a inputs::AttestationPool,
        caps: FeeCaps,
        wait: WaitPolicy,
        api: &'a str,
        require_oci_runtime: Option<&'a str>,
    ) -> Result<Relayer<'a, bounty_chain::RpcChainReader>, RunError> {
        let chain_id = self.rpc.chain_id().await.map_err(RunError::Rpc)?;
        Ok(Relayer {
            client: &self.client,
            api,
            require_oci_runtime,
            reader: &self.reader,
            rpc: &self.rpc,
            signer: &self.key,
            state,
            chain_id,
            caps,
            wait,
            pool,
        })
    }

    /// With several endpoints: each one's chain id and head, before anything is read or sent
    /// (endpoints on different chains are a configuration to fix, none answering an outage).
    async fn check_endpoints(&self) -> Result<(), RunError> {
        let refused = |e: bounty_chain::FailoverError| {
            if e.is_transient() {
                RunError::Rpc(chain::RpcFailure::Unavailable {
                    what: "eth_chainId",
                    detail: e.to_string(),
                })
            } else {
                RunError::Config(e.to_string())
            }
        };
        self.rpc.check_endpoints().await.map_err(refused)?;
        self.reader.check_endpoints().await.map_err(refused)?;
        Ok(())
    }

    async fn open(
        key: &GasKeyConfig,
        endpoints: &bounty_chain::RpcEndpoints,
    ) -> Result<Self, RunError> {
        let key = GasKey::open(key).await?;
        let rpc =
            SettlementRpc::with_failover(endpoints, REQUEST_TIMEOUT).map_err(RunError::Rpc)?;
        let reader = bounty_chain::RpcChainReader::with_failover(
            &endpoints.urls,
            REQUEST_TIMEOUT,
            endpoints.policy,
        )
        .map_err(|e| RunError::Config(e.to_string()))?;
        let client = PlatformClient::new(ClientLimits::default())
            .map_err(|e| RunError::Config(e.to_string()))?;
        Ok(Self {
            key,
            rpc,
            reader,
            client,
        })
    }
}

/// Runs `keeper relay`.
pub async fn run(cfg: &RelayConfig) -> Result<Report, RunError> {
    // Both URLs are checked before anything else happens, so a plain-http remote endpoint is
    // a configuration error and never receives a request.
    for url in &cfg.rpc.urls {
        bounty_chain::check_rpc_url(url).map_err(|e| RunError::Config(format!("--rpc: {e}")))?;
    }
    platform_client::check_url(&cfg.api).map_err(|e| RunError::Config(format!("--api: {e}")))?;
    let conn = Connections::open(&cfg.key, &cfg.rpc).await?;
    conn.check_endpoints().await?;
    let signer = &conn.key;
    let state = StateDir::open(&cfg.state_dir)?;
    let candidates = inputs::candidate_files(&cfg.candidates)?;
    let pool = inputs::attestation_pool(&cfg.attestations)?;
    let relayer = conn
        .relayer(
            &state,
            &pool,
            cfg.caps,
            cfg.wait,
            &cfg.api,
            cfg.require_oci_runtime.as_deref(),
        )
        .await?;
    let mut jobs = Vec::with_capacity(candidates.len());
    for i in relay_order(&candidates, &pool, wall_clock()) {
        let (name, path) = &candidates[i];
        // Each candidate is isolated: its failure is a status, never an early return.
        jobs.push((i, relayer.relay_file(name, path).await));
    }
    // The report stays in file order whatever order the candidates were relayed in.
    jobs.sort_by_key(|(i, _)| *i);
    let jobs = jobs.into_iter().map(|(_, j)| j).collect();
    Ok(Report::new(relayer.chain_id, signer.address(), jobs))
}

/// Indices into `candidates` (in file-name order), soonest settlement deadline first.
///
/// Each relay waits for its confirmation, so a candidate listed last could otherwise wait out
/// every other's confirmation and find its attestations inside the deadline margin (chaos soak
/// seed 12). A candidate's deadline is the soonest among the attestations that could settle it
/// ([`select::soonest_deadline`]); candidates without one (unreadable, or no usable
/// attestation: they will be refused without sending) go last, and ties keep file order.
pub fn relay_order(
    candidates: &[(String, PathBuf)],
    pool: &inputs::AttestationPool,
    now: u64,
) -> Vec<usize> {
    let deadline = |name: &str, path: &std::path::Path| -> Option<u64> {
        let value = inputs::read_json(path, inputs::MAX_CANDIDATE_BYTES).ok()?;
        let candidate = verifier_sdk::Candidate::from_value(&value).ok()?;
        let parsed = verifier_sdk::ParsedCandidate::parse(candidate).ok()?;
        let job = parsed.job();
        if verifier_sdk::candidate_file_name(job.job_id()) != name {
            return None;
        }
        select::soonest_deadline(job, pool.by_job.get(job.job_id())?, now)
    };
    let mut keyed: Vec<(Option<u64>, usize)> = candidates
        .iter()
        .enumerate()
        .map(|(i, (name, path))| (deadline(name, path), i))
        .collect();
    // `None` sorts before `Some`; a missing deadline must sort last.
    keyed.sort_by_key(|(d, i)| (d.is_none(), *d, *i));
    keyed.into_iter().map(|(_, i)| i).collect()
}

fn wall_clock() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Runs `keeper resume`: every open (`planned` or `sent`) record of the state directory is
/// resumed without its candidate ([`Relayer::resume_record`]), oldest first; records of every
/// other state are left alone, and an unreadable record file is reported `internal`.
pub async fn run_resume(cfg: &ResumeConfig) -> Result<Report, RunError> {
    for url in &cfg.rpc.urls {
        bounty_chain::check_rpc_url(url).map_err(|e| RunError::Config(format!("--rpc: {e}")))?;
    }
    // The client is never asked: a resume re-plans nothing, so it needs no job and no
    // attestation.
    let conn = Connections::open(&cfg.key, &cfg.rpc).await?;
    conn.check_endpoints().await?;
    let signer = &conn.key;
    let pool = inputs::AttestationPool::default();
    let state = StateDir::open(&cfg.state_dir)?;
    let mut open = Vec::new();
    let mut jobs = Vec::new();
    for (file, record) in state.list()? {
        match record {
            Ok(r) if matches!(r.state, RecordState::Planned | RecordState::Sent) => {
                open.push((file, r));
            }
            Ok(_) => {}
            Err(e) => {
                let mut j = JobReport::new(&file, JobStatus::Internal);
                j.code = Some("state_dir".into());
                j.detail = Some(e.to_string());
                jobs.push(j);
            }
        }
    }
    // Oldest first: the lowest nonce is the one blocking the others.
    open.sort_by_key(|(_, r)| (r.tx.nonce, r.updated_at));
    // No API, no runtime requirement: resuming only watches and replaces transactions
    // already sent after the checks.
    let relayer = conn
        .relayer(&state, &pool, cfg.caps, cfg.wait, "", None)
        .await?;
    for (file, record) in open {
        jobs.push(relayer.resume_record(&file, record).await);
    }
    Ok(Report::new(relayer.chain_id, signer.address(), jobs))
}
