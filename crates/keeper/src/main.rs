//! `keeper`: parses the command line, runs the relay, maps the result to an exit code.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use keeper::KeySource;
use keeper::RelayConfig;
use keeper::cli::{Cli, Command};
use keeper::exit::ExitCode as Exit;
use keeper::fees::FeeCaps;
use keeper::relay::WaitPolicy;

fn exit(code: Exit) -> ExitCode {
    ExitCode::from(code.code())
}

fn main() -> ExitCode {
    cli_support::restore_sigpipe();
    cli_support::init_logging("KEEPER_LOG", "warn");
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            if e.use_stderr() && cli_support::json_requested(std::env::args_os().skip(1)) {
                let text = e.to_string();
                let first = text.lines().next().unwrap_or_default();
                json_error(
                    true,
                    Exit::Usage,
                    first.strip_prefix("error: ").unwrap_or(first),
                );
            }
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
        _ => {
            let message = "give exactly one of --key-env and --key-file";
            eprintln!("keeper: {message}");
            return exit(json_error(args.json, Exit::Usage, message));
        }
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
            exit(json_error(args.json, e.exit_code(), &e.to_string()))
        }
    }
}

/// Under `--json`, the error object on stdout as well as the stderr line (see
/// `cli_support::error_json`); returns `code`.
fn json_error(json: bool, code: Exit, message: &str) -> Exit {
    if json {
        let name = match code {
            Exit::Success => "success",
            Exit::Internal => "internal",
            Exit::Usage => "usage",
            Exit::NotSettled => "not_settled",
            Exit::InvalidInput => "invalid_input",
            Exit::Unavailable => "unavailable",
            Exit::Config => "config",
        };
        cli_support::print_error_json(name, code.code(), message);
    }
    code
}
