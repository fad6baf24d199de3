//! The regression verifier's signer: turns the runner's candidates into EIP-712 attestations.
//!
//! For each candidate it re-fetches the job from the platform, re-runs every sdk check on the
//! bytes it received, reads the bounty at one pinned block, computes the EIP-712 digest
//! locally and requires the contract's `attestationDigest` to agree before signing; then it
//! verifies its own signature and writes one attestation file per candidate, an attestation
//! manifest and a report. Exit codes are in [`exit`].
//!
//! Every signature goes through the signing history ([`history`], `--history DIR`): the other
//! verdict already signed for the same submission is refused (exit 10), the same verdict
//! returns the stored signature, and a new signature is on disk in the history before its
//! attestation is written. `signer history export` / `import` move it between hosts
//! ([`interchange`]).
//!
//! It deliberately never runs Docker or untrusted code, never broadcasts a transaction, never
//! takes a key on the command line (only the name of an environment variable, a 0600 file, the
//! URL of a remote signer that holds the key, or a PKCS#11 token's key label with its PIN in a
//! variable or a 0600 file; picked once, [`key`]), and never prints or logs key material.

pub mod agree;
pub mod exit;
pub mod files;
pub mod history;
pub mod interchange;
pub mod key;
pub mod metrics;
pub mod sign;

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bounty_chain::{HttpJobSource, RpcChainReader};
use clap::{Args, Parser, Subcommand};
use keyfile::{KeySource, LoadedKey};
use platform_client::{ClientLimits, PlatformClient};
use verifier_sdk::{Address, Network};

pub use exit::ExitCode;
pub use sign::{RunError, RunReport, SignConfig, sign_candidates};

/// Bound on every JSON-RPC request.
pub const RPC_TIMEOUT: Duration = Duration::from_secs(30);

/// `signer` command line.
#[derive(Debug, Parser)]
#[command(
    name = "signer",
    version = cli_support::VERSION,
    about = "Sign regression-verifier candidates"
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// Log lines on stderr as text (the default) or json: one object per line with
    /// timestamp, level, target, message and the event's fields, for a log shipper. Without
    /// the flag, $VERIFIER_LOG_FORMAT (json or text) decides.
    #[arg(long, global = true, value_name = "FORMAT", value_parser = ["text", "json"])]
    pub log_format: Option<String>,
}

/// Subcommands.
// Parsed once per process and never moved around: boxing `SignArgs` would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Sign every candidate in a candidates directory.
    Sign(SignArgs),
    /// Compare the runner's candidate with this slot's own re-run of the same job: they agree
    /// when the job, the verdict and every receipt commitment (scope, manifest and command
    /// hashes, source and benchmark digests, image, isolation) are equal; the output (stream
    /// hashes) may differ. Exits 0 when they agree, 6 when they disagree, 4 when a file is
    /// unreadable or its outcome is not a run of the job. Reads no key and asks no service.
    Agree(AgreeArgs),
    /// The signing history every signature goes through: create the first one, or move it to
    /// another host (interchange JSON modelled on EIP-3076).
    #[command(subcommand)]
    History(HistoryCommand),
    /// Generate the verifier key inside a PKCS#11 token (CKM_EC_KEY_PAIR_GEN on secp256k1; the
    /// private key sensitive and never extractable) and print its address on stdout: the
    /// address to register as a verifier and to give `signer sign --signer`. Refused when an
    /// object with the label exists already (exit 78). The token must be initialised first
    /// (e.g. `softhsm2-util --init-token`).
    Pkcs11Keygen(Pkcs11KeygenArgs),
}

/// Where a PKCS#11 token's user PIN comes from (never the command line).
#[derive(Debug, Args)]
#[group(id = "pkcs11_pin", multiple = false)]
pub struct Pkcs11PinArgs {
    /// Name of the environment variable holding the token's user PIN.
    #[arg(long, value_name = "NAME", requires = "pkcs11_module")]
    pub pkcs11_pin_env: Option<String>,
    /// File holding the token's user PIN (mode 0600 or stricter, not a symlink).
    #[arg(long, value_name = "PATH", requires = "pkcs11_module")]
    pub pkcs11_pin_file: Option<PathBuf>,
}

impl Pkcs11PinArgs {
    fn source(&self) -> KeySource {
        key::pkcs11::pin_source(
            self.pkcs11_pin_env.as_deref(),
            self.pkcs11_pin_file.as_deref(),
        )
    }
}

/// Arguments of `signer pkcs11-keygen`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("pkcs11_pin_source").required(true).args(["pkcs11_pin_env", "pkcs11_pin_file"])))]
pub struct Pkcs11KeygenArgs {
    /// The PKCS#11 module (shared library), e.g. /usr/lib/softhsm/libsofthsm2.so.
    #[arg(long, value_name = "PATH")]
    pub pkcs11_module: PathBuf,
    /// The label of the token to generate the key in.
    #[arg(long, value_name = "LABEL")]
    pub pkcs11_token: String,
    /// The label the new key pair gets (CKA_LABEL of both objects).
    #[arg(long, value_name = "LABEL")]
    pub pkcs11_key_label: String,
    #[command(flatten)]
    pub pin: Pkcs11PinArgs,
}

/// `signer history` subcommands.
#[derive(Debug, Subcommand)]
pub enum HistoryCommand {
    /// Create a new, empty signing history in DIR: the first time only, refused when DIR
    /// already holds one. `signer sign` never creates one itself.
    Init(HistoryDirArgs),
    /// Write the history's records of one chain (optionally one contract) as interchange
    /// JSON: metadata with the chain (and contract), one list of records per key.
    Export(HistoryExportArgs),
    /// Merge an interchange file into the history: records proven (digest recomputed,
    /// signature recovered), known ones skipped, new ones added; a record contradicting the
    /// history's verdict for its scope refuses the whole file (exit 10, nothing imported).
    Import(HistoryImportArgs),
}

/// The history directory.
#[derive(Debug, Args)]
pub struct HistoryDirArgs {
    /// The signing history directory (history.sqlite, its WAL and history.lock).
    #[arg(long, value_name = "DIR")]
    pub history: PathBuf,
}

/// Arguments of `signer history export`.
#[derive(Debug, Args)]
pub struct HistoryExportArgs {
    #[command(flatten)]
    pub dir: HistoryDirArgs,
    /// The chain whose records are exported.
    #[arg(long, value_name = "ID")]
    pub chain_id: u64,
    /// Export only the records of this bounty contract.
    #[arg(long, value_name = "ADDRESS")]
    pub contract: Option<String>,
    /// The interchange file to write.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// Arguments of `signer history import`.
#[derive(Debug, Args)]
pub struct HistoryImportArgs {
    #[command(flatten)]
    pub dir: HistoryDirArgs,
    /// The interchange file to merge.
    #[arg(long, value_name = "FILE")]
    pub file: PathBuf,
}

/// Arguments of `signer agree`.
#[derive(Debug, Args)]
pub struct AgreeArgs {
    /// The runner's candidate file.
    #[arg(long, value_name = "FILE")]
    pub runner: PathBuf,
    /// This slot's own candidate for the same job.
    #[arg(long, value_name = "FILE")]
    pub own: PathBuf,
    /// Print the comparison as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `signer sign`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("key").required(true).args(["key_env", "key_file", "remote_signer", "pkcs11_module"])))]
pub struct SignArgs {
    /// Directory holding manifest.json and the candidate files.
    #[arg(long, value_name = "DIR")]
    pub candidates: PathBuf,
    /// Platform API base URL (https, or http to a loopback host).
    #[arg(long, value_name = "URL")]
    pub api: String,
    /// JSON-RPC URL of the chain. Give it several times for failover, in order of
    /// preference: each endpoint's chain id is checked first (endpoints that disagree are
    /// refused, exit 78), and a request an endpoint refuses, rate-limits or fails moves to the
    /// next one; a revert is never retried elsewhere.
    #[arg(long, value_name = "URL", required = true)]
    pub rpc: Vec<String>,
    /// With several --rpc: an endpoint whose head is more than this many blocks behind the
    /// best is not used.
    #[arg(long, value_name = "BLOCKS", default_value_t = bounty_chain::failover::DEFAULT_MAX_LAG_BLOCKS)]
    pub rpc_max_lag: u64,
    /// The verifier address to sign as; must be the key's address.
    #[arg(long, value_name = "ADDRESS")]
    pub signer: String,
    /// Name of the environment variable holding the hex private key.
    #[arg(long, value_name = "NAME")]
    pub key_env: Option<String>,
    /// File holding the hex private key (mode 0600 or stricter, not a symlink).
    #[arg(long, value_name = "PATH")]
    pub key_file: Option<PathBuf>,
    /// A remote signer holding the key instead (Web3Signer, clef or a node's own accounts):
    /// its JSON-RPC URL (https, or http to a loopback host). It must list --signer in
    /// eth_accounts before any candidate is read; each attestation is signed through
    /// eth_signTypedData_v4 and recovered here before it is written.
    #[arg(long, value_name = "URL")]
    pub remote_signer: Option<String>,
    /// A PKCS#11 token holding the key instead (an HSM, or SoftHSM2): the module (shared
    /// library) to load. Needs --pkcs11-token, --pkcs11-key-label and the PIN's
    /// --pkcs11-pin-env or --pkcs11-pin-file. The token's key (secp256k1, e.g. made by `signer
    /// pkcs11-keygen`) must be --signer's before any candidate is read (else exit 78); it signs
    /// each digest in the token (CKM_ECDSA), and low s and the recovery id are computed here.
    #[arg(
        long,
        value_name = "PATH",
        requires_all = ["pkcs11_token", "pkcs11_key_label", "pkcs11_pin"]
    )]
    pub pkcs11_module: Option<PathBuf>,
    /// The label of the token holding the key (with --pkcs11-module).
    #[arg(long, value_name = "LABEL", requires = "pkcs11_module")]
    pub pkcs11_token: Option<String>,
    /// The CKA_LABEL of the key in the token: exactly one EC private key and its public key
    /// (with --pkcs11-module).
    #[arg(long, value_name = "LABEL", requires = "pkcs11_module")]
    pub pkcs11_key_label: Option<String>,
    #[command(flatten)]
    pub pkcs11_pin: Pkcs11PinArgs,
    /// Output directory for attestations, their manifest.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Network name or alias.
    #[arg(long, default_value = "base-mainnet")]
    pub network: String,
    /// Sign only candidates whose evidence shows a run under this OCI runtime (runsc:
    /// gVisor), named so by the requested and the read-back profile and the engine's facts;
    /// every other candidate is refused (code oci_runtime_refused).
    #[arg(long, value_name = "RUNTIME", value_parser = ["runc", "runsc"])]
    pub require_oci_runtime: Option<String>,
    /// Print the run report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// The signing history directory, consulted before every signature: the other verdict
    /// already signed for the same submission is refused (code contradicts_history, exit 10),
    /// the same verdict returns the stored signature. It must exist (create the first one with
    /// `signer history init`); a missing, corrupt or foreign history is refused (exit 78), one
    /// held by another signer too (exit 1).
    #[arg(long, value_name = "DIR")]
    pub history: PathBuf,
    /// At the end of every run, failed or refused ones included, replace this file with the
    /// run's Prometheus metrics for the node exporter's textfile collector (name it *.prom in
    /// the collector's directory): signer_signatures_total{result} (carried over from the
    /// file's previous values) and signer_last_run_timestamp_seconds.
    #[arg(long, value_name = "PATH")]
    pub metrics_file: Option<PathBuf>,
}

/// A setup problem that a restart will not fix (exit 78).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `--signer` is not an address.
    #[error("--signer is not a 0x-prefixed 20-byte address")]
    SignerAddress,
    /// `--network` is not supported.
    #[error("--network {0:?} is not a supported network")]
    Network(String),
    /// The key could not be loaded.
    #[error("{0}")]
    Key(#[from] keyfile::KeyError),
    /// The remote signer is unusable or does not hold the key of `--signer`.
    #[error("{0}")]
    Remote(#[from] key::RemoteError),
    /// The PKCS#11 module, token, PIN or key is unusable.
    #[error("{0}")]
    Pkcs11(#[from] key::pkcs11::Pkcs11Error),
    /// `--pkcs11-module` without the token, the key label or the PIN.
    #[error("--pkcs11-module needs --pkcs11-token, --pkcs11-key-label and a PIN flag")]
    Pkcs11Flags,
    /// The key is for another address.
    #[error("the key's address {key} is not --signer {signer}")]
    KeyMismatch {
        /// The key's address.
        key: Address,
        /// `--signer`.
        signer: Address,
    },
    /// The RPC URL is unusable.
    #[error("--rpc: {0}")]
    Rpc(#[source] bounty_chain::ChainReadError),
    /// The API URL is unusable or the client could not be built.
    #[error("--api: {0}")]
    Api(#[source] platform_client::ClientError),
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

struct Setup {
    cfg: SignConfig,
    key: key::AttestationKey,
    source: HttpJobSource,
    reader: RpcChainReader,
}

async fn setup(args: &SignArgs) -> Result<Setup, ConfigError> {
    let signer: Address = args
        .signer
        .parse()
        .map_err(|_| ConfigError::SignerAddress)?;
    let network = Network::from_alias(&args.network)
        .ok_or_else(|| ConfigError::Network(args.network.chars().take(64).collect()))?;
    let key = match (&args.key_env, &args.key_file, &args.remote_signer) {
        (None, None, None) if args.pkcs11_module.is_some() => {
            key::AttestationKey::Pkcs11(key::pkcs11::Pkcs11Signer::open(&pkcs11_config(args)?)?)
        }
        (None, None, Some(url)) => {
            key::AttestationKey::Remote(key::RemoteSigner::connect(url, signer).await?)
        }
        (Some(name), _, _) => LoadedKey::load(&KeySource::Env(name.clone()))?.into(),
        (None, Some(path), _) => LoadedKey::load(&KeySource::File(path.clone()))?.into(),
        // clap's required group makes this unreachable; treated as a missing key anyway.
        (None, None, None) => LoadedKey::load(&KeySource::Env(String::new()))?.into(),
    };
    let key_address = key.address();
    if key_address != signer {
        return Err(ConfigError::KeyMismatch {
            key: key_address,
            signer,
        });
    }
    // Checked up front so a plain-http or malformed API base is a configuration error, not a
    // per-candidate refusal.
    platform_client::jobs_url(&args.api, network, signer).map_err(ConfigError::Api)?;
    let client = PlatformClient::new(ClientLimits::default()).map_err(ConfigError::Api)?;
    let policy = bounty_chain::FailoverPolicy {
        max_lag_blocks: args.rpc_max_lag,
        ..bounty_chain::FailoverPolicy::default()
    };
    let reader =
        RpcChainReader::with_failover(&args.rpc, RPC_TIMEOUT, policy).map_err(ConfigError::Rpc)?;
    Ok(Setup {
        cfg: SignConfig {
            candidates_dir: args.candidates.clone(),
            out_dir: args.out.clone(),
            signer,
            network,
            max_candidates: verifier_sdk::MAX_MANIFEST_CANDIDATES,
            require_oci_runtime: args.require_oci_runtime.clone(),
        },
        key,
        source: HttpJobSource::new(client, &args.api, network, signer),
        reader,
    })
}

/// The PKCS#11 flags of `signer sign` as one configuration (clap requires them together).
fn pkcs11_config(args: &SignArgs) -> Result<key::pkcs11::Pkcs11Config, ConfigError> {
    match (
        &args.pkcs11_module,
        &args.pkcs11_token,
        &args.pkcs11_key_label,
    ) {
        (Some(module), Some(token), Some(label)) => Ok(key::pkcs11::Pkcs11Config {
            module: module.clone(),
            token: token.clone(),
            key_label: label.clone(),
            pin: args.pkcs11_pin.source(),
        }),
        _ => Err(ConfigError::Pkcs11Flags),
    }
}

/// Runs `signer pkcs11-keygen`: the address on stdout, the outcome on stderr.
pub fn run_pkcs11_keygen(args: &Pkcs11KeygenArgs) -> ExitCode {
    let cfg = key::pkcs11::Pkcs11Config {
        module: args.pkcs11_module.clone(),
        token: args.pkcs11_token.clone(),
        key_label: args.pkcs11_key_label.clone(),
        pin: args.pin.source(),
    };
    match key::pkcs11::generate(&cfg) {
        Ok(address) => {
            eprintln!(
                "signer pkcs11-keygen: generated secp256k1 key {:?} in token {:?}",
                cfg.key_label, cfg.token
            );
            println!("{}", Address::from_bytes(address));
            ExitCode::Success
        }
        Err(e) => {
            cli_support::eprint_error("signer", &format!("signer pkcs11-keygen: {e}"));
            ExitCode::Config
        }
    }
}

/// Runs `signer sign`: the report goes to stdout with `--json`, the summary to stderr.
pub async fn run_sign(args: &SignArgs) -> ExitCode {
    let mut tally = metrics::Tally::failed_run();
    let code = sign_counted(args, &mut tally).await;
    if let Some(path) = &args.metrics_file {
        // The run's own exit code stands; a host whose file stops changing is caught by the
        // last-run alert.
        if let Err(e) = metrics::write(path, tally, unix_now()) {
            cli_support::eprint_error("signer", &format!("signer: {e}"));
        }
    }
    code
}

/// `run_sign` up to its exit code, with the run's counts in `tally` when it got a report.
async fn sign_counted(args: &SignArgs, tally: &mut metrics::Tally) -> ExitCode {
    let s = match setup(args).await {
        Ok(s) => s,
        // A remote signer that did not answer may answer the next run: an outage, not a
        // configuration to fix.
        Err(ConfigError::Remote(e @ key::RemoteError::Request(_))) => {
            cli_support::eprint_error("signer", &format!("signer: {e}"));
            return json_error(args.json, ExitCode::Unavailable, &e.to_string());
        }
        Err(e) => {
            cli_support::eprint_error("signer", &format!("signer: configuration error: {e}"));
            return json_error(
                args.json,
                ExitCode::Config,
                &format!("configuration error: {e}"),
            );
        }
    };
    // Several --rpc: endpoints on different chains are a configuration to fix; none answering
    // is an outage (one endpoint: nothing asked here, as before).
    if let Err(e) = s.reader.check_endpoints().await {
        cli_support::eprint_error("signer", &format!("signer: {e}"));
        let code = if e.is_transient() {
            ExitCode::Unavailable
        } else {
            ExitCode::Config
        };
        return json_error(args.json, code, &e.to_string());
    }
    // Before any candidate is read: without its history this signer signs nothing.
    let mut history = match history::History::open(&args.history) {
        Ok(h) => h,
        Err(e) => {
            cli_support::eprint_error("signer", &format!("signer: {e}"));
            return json_error(args.json, history_exit(&e), &e.to_string());
        }
    };
    match sign_candidates(
        &s.cfg,
        &s.key,
        &mut history,
        &s.source,
        &s.reader,
        unix_now(),
    )
    .await
    {
        Ok(report) => {
            *tally = metrics::Tally::from_report(&report);
            cli_support::eprint_human("signer", &report.summary());
            if cli_support::print_json(args.json, &report, "signer", "report").is_err() {
                return ExitCode::Internal;
            }
            report.exit_code()
        }
        Err(e) => {
            cli_support::eprint_error("signer", &format!("signer: {e}"));
            json_error(args.json, e.exit_code(), &e.to_string())
        }
    }
}

/// Under `--json`, the error object on stdout as well as the stderr line (see
/// `cli_support::error_json`); returns `code`.
pub fn json_error(json: bool, code: ExitCode, message: &str) -> ExitCode {
    if json {
        let name = code.name(cli_support::exit::Binary::Signer);
        cli_support::print_error_json(name, code.code(), message);
    }
    code
}

/// The exit code of a history that cannot be used: one held by another signer, or a failed
/// read or write, may clear on a retry (1); a missing, foreign or corrupt one will not (78).
pub fn history_exit(e: &history::HistoryError) -> ExitCode {
    use history::HistoryError as H;
    match e {
        H::Held { .. } | H::Io { .. } | H::Sqlite { .. } => ExitCode::Internal,
        H::Missing(_) | H::Exists(_) | H::Foreign { .. } | H::Corrupt { .. } => ExitCode::Config,
        H::Contradiction { .. } => ExitCode::ContradictsHistory,
    }
}

/// Runs a parsed command line.
pub async fn run(cli: &Cli) -> ExitCode {
    match &cli.command {
        Command::Sign(args) => run_sign(args).await,
        Command::Agree(args) => run_agree(args),
        Command::History(cmd) => run_history(cmd),
        Command::Pkcs11Keygen(args) => run_pkcs11_keygen(args),
    }
}

/// Runs `signer history …`: the outcome on stderr.
pub fn run_history(cmd: &HistoryCommand) -> ExitCode {
    let result = match cmd {
        HistoryCommand::Init(args) => history::History::init(&args.history)
            .map(|_| format!("created an empty signing history in {:?}", args.history))
            .map_err(|e| (history_exit(&e), e.to_string())),
        HistoryCommand::Export(args) => history_export(args),
        HistoryCommand::Import(args) => history_import(args),
    };
    match result {
        Ok(line) => {
            cli_support::eprint_human("signer", &format!("signer history: {line}"));
            ExitCode::Success
        }
        Err((code, message)) => {
            cli_support::eprint_error("signer", &format!("signer history: {message}"));
            code
        }
    }
}

fn history_export(args: &HistoryExportArgs) -> Result<String, (ExitCode, String)> {
    let contract = match &args.contract {
        Some(c) => Some(c.parse::<Address>().map_err(|_| {
            (
                ExitCode::Usage,
                "--contract is not a 0x-prefixed 20-byte address".to_owned(),
            )
        })?),
        None => None,
    };
    let h =
        history::History::open(&args.dir.history).map_err(|e| (history_exit(&e), e.to_string()))?;
    let records = h.all().map_err(|e| (history_exit(&e), e.to_string()))?;
    let file = interchange::Interchange::export(args.chain_id, contract, &records);
    let count: usize = file.data.iter().map(|k| k.signed_attestations.len()).sum();
    let value = serde_json::to_value(&file).map_err(|e| (ExitCode::Internal, e.to_string()))?;
    let (dir, name) = match (
        args.out.parent(),
        args.out.file_name().and_then(|n| n.to_str()),
    ) {
        (Some(d), Some(n)) => (
            if d.as_os_str().is_empty() {
                std::path::Path::new(".")
            } else {
                d
            },
            n,
        ),
        _ => {
            return Err((
                ExitCode::Usage,
                format!("--out {:?} names no file", args.out),
            ));
        }
    };
    files::write_json(dir, name, &value).map_err(|e| (ExitCode::Internal, e.to_string()))?;
    Ok(format!(
        "exported {count} record(s) of chain {} to {:?}",
        args.chain_id, args.out
    ))
}

fn history_import(args: &HistoryImportArgs) -> Result<String, (ExitCode, String)> {
    let invalid = |m: String| (ExitCode::InvalidInput, m);
    let raw = files::read_json(&args.file, interchange::MAX_INTERCHANGE_BYTES)
        .map_err(|e| invalid(e.to_string()))?;
    let file: interchange::Interchange =
        serde_json::from_value(raw).map_err(|e| invalid(format!("{:?}: {e}", args.file)))?;
    let records = file
        .records()
        .map_err(|e| invalid(format!("{:?}: {e}", args.file)))?;
    let mut h =
        history::History::open(&args.dir.history).map_err(|e| (history_exit(&e), e.to_string()))?;
    let added = h
        .merge(&records)
        .map_err(|e| (history_exit(&e), format!("nothing imported: {e}")))?;
    Ok(format!(
        "imported {added} new record(s) of {} in {:?} (the others were already known)",
        records.len(),
        args.file
    ))
}

/// Runs `signer agree`: the answer on stderr (and as JSON on stdout with `--json`).
pub fn run_agree(args: &AgreeArgs) -> ExitCode {
    match agree::agree(&args.runner, &args.own) {
        Ok(report) => {
            cli_support::eprint_human("signer", &format!("signer agree: {}", report.summary));
            if cli_support::print_json(args.json, &report, "signer", "report").is_err() {
                return ExitCode::Internal;
            }
            if report.agrees {
                ExitCode::Success
            } else {
                ExitCode::Differs
            }
        }
        Err(e) => {
            cli_support::eprint_error("signer", &format!("signer agree: {e}"));
            json_error(args.json, ExitCode::InvalidInput, &e.to_string())
        }
    }
}
