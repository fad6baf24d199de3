//! The keeper's command line, in the library so `cargo xtask man` can render its man page
//! from the same definition the binary parses.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "keeper",
    version = cli_support::VERSION,
    about = "Relay verifier attestations to bounty contracts"
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

#[derive(Subcommand)]
pub enum Command {
    /// Relay every candidate's attestations and confirm the settlement.
    Relay(RelayArgs),
    /// Resume every open (planned or sent) settlement record of the state directory without
    /// candidates: rebroadcast, wait, replace when stuck, confirm. For records whose job left
    /// the feed, whose stuck transaction would otherwise block every later nonce.
    Resume(SettleArgs),
    /// List the open (planned or sent) settlement records: keeper account, nonce, age. Reads
    /// the state directory only. Exits 0 when none is open, 3 when some is, 4 when a record
    /// file is unreadable.
    Status(StatusArgs),
    /// Generate the keeper's gas key inside a PKCS#11 token (secp256k1, the private key
    /// sensitive and never extractable) and print its address on stdout: the account to fund
    /// and to give `relay --from`. Refused when an object with the label exists already (exit
    /// 78). The token must be initialised first (e.g. `softhsm2-util --init-token`).
    Pkcs11Keygen(Pkcs11KeygenArgs),
}

/// Where a PKCS#11 token's user PIN comes from (never the command line).
#[derive(Args)]
#[group(id = "pkcs11_pin", multiple = false)]
pub struct Pkcs11PinArgs {
    /// Name of the environment variable holding the token's user PIN.
    #[arg(long, value_name = "NAME", requires = "pkcs11_module")]
    pub pkcs11_pin_env: Option<String>,
    /// File holding the token's user PIN (mode 0600 or stricter, not a symlink).
    #[arg(long, value_name = "PATH", requires = "pkcs11_module")]
    pub pkcs11_pin_file: Option<PathBuf>,
}

/// Arguments of `keeper pkcs11-keygen`.
#[derive(Args)]
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

#[derive(Args)]
pub struct RelayArgs {
    /// Directory of candidate-<sha256(job id)>.json files.
    #[arg(long)]
    pub candidates: PathBuf,
    /// Directory of attestation files; repeat for several verifiers' artifacts.
    #[arg(long, required = true)]
    pub attestations: Vec<PathBuf>,
    /// Platform API base URL (jobs are re-fetched from it).
    #[arg(long)]
    pub api: String,
    /// Relay only candidates whose evidence shows a run under this OCI runtime (runsc:
    /// gVisor), named so by the requested and the read-back profile and the engine's facts;
    /// every other candidate is refused (code oci_runtime_refused).
    #[arg(long, value_name = "RUNTIME", value_parser = ["runc", "runsc"])]
    pub require_oci_runtime: Option<String>,
    #[command(flatten)]
    pub settle: SettleArgs,
}

#[derive(Args)]
pub struct StatusArgs {
    /// Directory of settlement records.
    #[arg(long)]
    pub state_dir: PathBuf,
    /// Print the JSON status on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The chain, key, state and fee options `relay` and `resume` share.
#[derive(Args)]
#[command(group(clap::ArgGroup::new("key").required(true).args(["key_env", "key_file", "remote_signer", "pkcs11_module"])))]
pub struct SettleArgs {
    /// JSON-RPC URL of the chain. Give it several times for failover, in order of
    /// preference: each endpoint's chain id is checked first (endpoints that disagree are
    /// refused, exit 78), a request an endpoint refuses, rate-limits or fails moves to the
    /// next one (a revert is never retried elsewhere), and the signed transaction is sent to
    /// every usable endpoint.
    #[arg(long, value_name = "URL", required = true)]
    pub rpc: Vec<String>,
    /// With several --rpc: an endpoint whose head is more than this many blocks behind the
    /// best is not used.
    #[arg(long, value_name = "BLOCKS", default_value_t = bounty_chain::failover::DEFAULT_MAX_LAG_BLOCKS)]
    pub rpc_max_lag: u64,
    /// Name of the environment variable holding the keeper's transaction key.
    #[arg(long, value_name = "NAME")]
    pub key_env: Option<String>,
    /// File (mode 0600) holding the keeper's transaction key.
    #[arg(long, value_name = "PATH")]
    pub key_file: Option<PathBuf>,
    /// A remote signer holding the transaction key instead (clef, Web3Signer, or a node's own
    /// accounts): its JSON-RPC URL (https, or http to a loopback host). It must list --from in
    /// eth_accounts before anything is read (else exit 78; exit 5 when it does not answer).
    /// Each transaction is built here and signed through eth_signTransaction; the returned
    /// transaction must be the same one, signed by --from, or nothing is sent.
    #[arg(long, value_name = "URL", requires = "from")]
    pub remote_signer: Option<String>,
    /// A PKCS#11 token holding the transaction key instead (an HSM, or SoftHSM2): the module
    /// (shared library) to load. Needs --pkcs11-token, --pkcs11-key-label, the PIN's
    /// --pkcs11-pin-env or --pkcs11-pin-file, and --from. The token's key (secp256k1, e.g.
    /// made by `keeper pkcs11-keygen`) must be --from's before anything is read (else exit
    /// 78); it signs each transaction's signing hash in the token (CKM_ECDSA), and low s and
    /// the recovery id are computed here.
    #[arg(
        long,
        value_name = "PATH",
        requires_all = ["pkcs11_token", "pkcs11_key_label", "pkcs11_pin", "from"]
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
    /// The keeper account every transaction is sent from: required with --remote-signer and
    /// --pkcs11-module; with --key-env or --key-file the key must be this address (exit 78
    /// otherwise).
    #[arg(long, value_name = "ADDRESS")]
    pub from: Option<String>,
    /// Directory of settlement records (idempotency across runs).
    #[arg(long)]
    pub state_dir: PathBuf,
    /// Refuse when eth_estimateGas is above this.
    #[arg(long)]
    pub max_gas: u64,
    /// Never pay more than this per gas (wei).
    #[arg(long)]
    pub max_fee_per_gas: u128,
    /// Never tip more than this per gas (wei).
    #[arg(long)]
    pub max_priority_fee_per_gas: Option<u128>,
    /// Blocks to wait for, counting the inclusion block.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub confirmations: u64,
    /// Seconds to wait for the receipt and confirmations before reporting `pending`.
    #[arg(long, default_value_t = 180, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub receipt_timeout: u64,
    /// Blocks a sent transaction may stay unmined before the keeper replaces it (same nonce,
    /// fees bumped by at least the replacement minimum, never above the caps).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub replace_after_blocks: u64,
    /// Print the JSON report on stdout.
    #[arg(long)]
    pub json: bool,
    /// At the end of every run, failed ones included, replace this file with the run's
    /// Prometheus metrics for the node exporter's textfile collector (name it *.prom in the
    /// collector's directory): keeper_settlements_total{result} (carried over from the file's
    /// previous values), keeper_balance_wei, keeper_pending_settlement_age_seconds and
    /// keeper_last_run_timestamp_seconds.
    #[arg(long, value_name = "PATH")]
    pub metrics_file: Option<PathBuf>,
}
