//! `keeper`: parses the command line, runs the relay, maps the result to an exit code.

#![warn(clippy::too_many_lines, clippy::needless_pass_by_value)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use keeper::KeySource;
use keeper::RelayConfig;
use keeper::exit::ExitCode as Exit;
use keeper::fees::FeeCaps;
use keeper::relay::WaitPolicy;

#[derive(Parser)]
#[command(
    name = "keeper",
    version = cli_support::VERSION,
    about = "Relay verifier attestations to bounty contracts"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Relay every candidate's attestations and confirm the settlement.
    Relay(RelayArgs),
}

#[derive(Args)]
#[command(group(clap::ArgGroup::new("key").required(true).args(["key_env", "key_file"])))]
struct RelayArgs {
    /// Directory of candidate-<sha256(job id)>.json files.
    #[arg(long)]
    candidates: PathBuf,
    /// Directory of attestation files; repeat for several verifiers' artifacts.
    #[arg(long, required = true)]
    attestations: Vec<PathBuf>,
    /// Platform API base URL (jobs are re-fetched from it).
    #[arg(long)]
    api: String,
    /// JSON-RPC URL of the chain.
    #[arg(long)]
    rpc: String,
    /// Name of the environment variable holding the keeper's transaction key.
    #[arg(long, value_name = "NAME")]
    key_env: Option<String>,
    /// File (mode 0600) holding the keeper's transaction key.
    #[arg(long, value_name = "PATH")]
    key_file: Option<PathBuf>,
    /// Directory of settlement records (idempotency across runs).
    #[arg(long)]
    state_dir: PathBuf,
    /// Refuse when eth_estimateGas is above this.
    #[arg(long)]
    max_gas: u64,
    /// Never pay more than this per gas (wei).
    #[arg(long)]
    max_fee_per_gas: u128,
    /// Never tip more than this per gas (wei).
    #[arg(long)]
    max_priority_fee_per_gas: Option<u128>,
    /// Blocks to wait for, counting the inclusion block.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=64))]
    confirmations: u64,
    /// Seconds to wait for the receipt and confirmations before reporting `pending`.
    #[arg(long, default_value_t = 180, value_parser = clap::value_parser!(u64).range(1..=3600))]
    receipt_timeout: u64,
    /// Blocks a sent transaction may stay unmined before the keeper replaces it (same nonce,
    /// fees bumped by at least the replacement minimum, never above the caps).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    replace_after_blocks: u64,
    /// Print the JSON report on stdout.
    #[arg(long)]
    json: bool,
}

fn exit(code: Exit) -> ExitCode {
    ExitCode::from(code.code())
}

fn main() -> ExitCode {
    cli_support::restore_sigpipe();
    cli_support::init_logging("KEEPER_LOG", "warn");
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return exit(if e.use_stderr() {
                Exit::Usage
            } else {
                Exit::Success
            });
        }
    };
    let Command::Relay(args) = cli.command;
    let key = match (args.key_env, args.key_file) {
        (Some(name), None) => KeySource::Env(name),
        (None, Some(path)) => KeySource::File(path),
        _ => return exit(Exit::Usage),
    };
    let cfg = RelayConfig {
        candidates: args.candidates,
        attestations: args.attestations,
        api: args.api,
        rpc: args.rpc,
        key,
        state_dir: args.state_dir,
        caps: FeeCaps {
            max_gas: args.max_gas,
            max_fee_per_gas: args.max_fee_per_gas,
            max_priority_fee_per_gas: args.max_priority_fee_per_gas,
        },
        wait: WaitPolicy {
            confirmations: args.confirmations,
            timeout: Duration::from_secs(args.receipt_timeout),
            poll: Duration::from_millis(500),
            replace_after_blocks: args.replace_after_blocks,
        },
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("keeper: cannot start the async runtime: {e}");
            return exit(Exit::Internal);
        }
    };
    match runtime.block_on(keeper::run(&cfg)) {
        Ok(report) => {
            eprint!("{}", report.human());
            if args.json {
                match serde_json::to_string_pretty(&report) {
                    Ok(text) => println!("{text}"),
                    Err(e) => {
                        eprintln!("keeper: cannot encode the report: {e}");
                        return exit(Exit::Internal);
                    }
                }
            }
            ExitCode::from(report.exit_code)
        }
        Err(e) => {
            eprintln!("keeper: {e}");
            exit(e.exit_code())
        }
    }
}
