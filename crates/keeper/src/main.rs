//! `keeper`: parses the command line, runs the relay, maps the result to an exit code.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use keeper::KeySource;
use keeper::cli::{Cli, Command, Pkcs11KeygenArgs, SettleArgs};
use keeper::exit::ExitCode as Exit;
use keeper::fees::FeeCaps;
use keeper::key::{GasKeyConfig, GasKeySource, Pkcs11Config};
use keeper::relay::WaitPolicy;
use keeper::{RelayConfig, ResumeConfig};

fn exit(code: Exit) -> ExitCode {
    ExitCode::from(code.code())
}

fn main() -> ExitCode {
    cli_support::quiet_broken_stdout();
    if cli_support::version::verbose_requested(std::env::args_os().skip(1)) {
        cli_support::version::print_verbose("keeper");
        return ExitCode::SUCCESS;
    }
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
    // After parsing: the flag picks the format (clap's own errors are not log lines).
    cli_support::init_logging_as(
        "KEEPER_LOG",
        "warn",
        cli_support::LogFormat::choose(cli.log_format.as_deref().and_then(|f| f.parse().ok())),
    );
    match cli.command {
        Command::Pkcs11Keygen(args) => pkcs11_keygen(&args),
        Command::Relay(args) => {
            let json = args.settle.json;
            let metrics = args.settle.metrics_file.clone();
            let settle = match settle_parts(&args.settle) {
                Ok(p) => p,
                Err(code) => return exit(code),
            };
            let cfg = RelayConfig {
                candidates: args.candidates,
                attestations: args.attestations,
                api: args.api,
                require_oci_runtime: args.require_oci_runtime,
                rpc: settle.rpc,
                key: settle.key,
                state_dir: settle.state_dir,
                caps: settle.caps,
                wait: settle.wait,
            };
            let target = metrics.map(|path| MetricsTarget {
                path,
                rpc: cfg.rpc.clone(),
                state_dir: cfg.state_dir.clone(),
            });
            block_on(json, target, keeper::run(&cfg))
        }
        Command::Resume(args) => {
            let json = args.json;
            let settle = match settle_parts(&args) {
                Ok(p) => p,
                Err(code) => return exit(code),
            };
            let target = args.metrics_file.clone().map(|path| MetricsTarget {
                path,
                rpc: settle.rpc.clone(),
                state_dir: settle.state_dir.clone(),
            });
            block_on(json, target, keeper::run_resume(&settle))
        }
        Command::Status(args) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            match keeper::status::status(&args.state_dir, now) {
                Ok(report) => {
                    cli_support::eprint_human("keeper", &report.human());
                    if cli_support::print_json(args.json, &report, "keeper", "status").is_err() {
                        return exit(Exit::Internal);
                    }
                    ExitCode::from(report.exit_code)
                }
                Err(e) => {
                    let message = format!("--state-dir: {e}");
                    cli_support::eprint_error("keeper", &format!("keeper: {message}"));
                    exit(json_error(args.json, Exit::InvalidInput, &message))
                }
            }
        }
    }
}

/// The chain, key, state and fee options as a [`ResumeConfig`] (a relay adds its inputs);
/// the exit code of a usage error otherwise.
fn settle_parts(args: &SettleArgs) -> Result<ResumeConfig, Exit> {
    let usage = |message: &str| {
        cli_support::eprint_error("keeper", &format!("keeper: {message}"));
        json_error(args.json, Exit::Usage, message)
    };
    // The one place the gas key's backend is picked; clap's group allows exactly one.
    let source = match (
        &args.key_env,
        &args.key_file,
        &args.remote_signer,
        &args.pkcs11_module,
    ) {
        (Some(name), None, None, None) => GasKeySource::Local(KeySource::Env(name.clone())),
        (None, Some(path), None, None) => GasKeySource::Local(KeySource::File(path.clone())),
        (None, None, Some(url), None) => GasKeySource::Remote(url.clone()),
        (None, None, None, Some(module)) => {
            let (Some(token), Some(label)) = (&args.pkcs11_token, &args.pkcs11_key_label) else {
                return Err(usage(
                    "--pkcs11-module needs --pkcs11-token, --pkcs11-key-label and a PIN flag",
                ));
            };
            GasKeySource::Pkcs11(Pkcs11Config {
                module: module.clone(),
                token: token.clone(),
                key_label: label.clone(),
                pin: keeper::key::pin_source(
                    args.pkcs11_pin.pkcs11_pin_env.as_deref(),
                    args.pkcs11_pin.pkcs11_pin_file.as_deref(),
                ),
            })
        }
        _ => {
            return Err(usage(
                "give exactly one of --key-env, --key-file, --remote-signer and --pkcs11-module",
            ));
        }
    };
    let from = match args.from.as_deref().map(str::parse) {
        None => None,
        Some(Ok(address)) => Some(address),
        Some(Err(_)) => {
            let message = "configuration error: --from is not a 0x-prefixed 20-byte address";
            cli_support::eprint_error("keeper", &format!("keeper: {message}"));
            return Err(json_error(args.json, Exit::Config, message));
        }
    };
    let key = GasKeyConfig { source, from };
    Ok(ResumeConfig {
        rpc: bounty_chain::RpcEndpoints {
            urls: args.rpc.clone(),
            policy: bounty_chain::FailoverPolicy {
                max_lag_blocks: args.rpc_max_lag,
                ..bounty_chain::FailoverPolicy::default()
            },
        },
        key,
        state_dir: args.state_dir.clone(),
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
    })
}

/// Runs `keeper pkcs11-keygen`: the address on stdout, the outcome on stderr.
fn pkcs11_keygen(args: &Pkcs11KeygenArgs) -> ExitCode {
    let cfg = Pkcs11Config {
        module: args.pkcs11_module.clone(),
        token: args.pkcs11_token.clone(),
        key_label: args.pkcs11_key_label.clone(),
        pin: keeper::key::pin_source(
            args.pin.pkcs11_pin_env.as_deref(),
            args.pin.pkcs11_pin_file.as_deref(),
        ),
    };
    match keeper::key::generate(&cfg) {
        Ok(address) => {
            eprintln!(
                "keeper pkcs11-keygen: generated secp256k1 key {:?} in token {:?}",
                cfg.key_label, cfg.token
            );
            println!("{address}");
            exit(Exit::Success)
        }
        Err(e) => {
            cli_support::eprint_error("keeper", &format!("keeper pkcs11-keygen: {e}"));
            exit(Exit::Config)
        }
    }
}

/// Where `--metrics-file` goes and what its gauges are read from.
struct MetricsTarget {
    path: std::path::PathBuf,
    rpc: bounty_chain::RpcEndpoints,
    state_dir: std::path::PathBuf,
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Runs a relay or resume to its report: the summary on stderr, the JSON on stdout with
/// `--json`, the report's exit code; then the metrics file, whatever the outcome.
fn block_on(
    json: bool,
    metrics: Option<MetricsTarget>,
    run: impl std::future::Future<Output = Result<keeper::report::Report, keeper::RunError>>,
) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            cli_support::eprint_error(
                "keeper",
                &format!("keeper: cannot start the async runtime: {e}"),
            );
            return exit(Exit::Internal);
        }
    };
    let result = runtime.block_on(run);
    if let Some(target) = metrics {
        let observed = runtime.block_on(keeper::metrics::observe(
            &result,
            &target.rpc,
            &target.state_dir,
            unix_now(),
        ));
        // The run's own exit code stands; a file that stops changing is what the last-run
        // timestamp shows.
        if let Err(e) = keeper::metrics::write(&target.path, &observed, unix_now()) {
            cli_support::eprint_error("keeper", &format!("keeper: {e}"));
        }
    }
    match result {
        Ok(report) => {
            cli_support::eprint_human("keeper", &report.human());
            if cli_support::print_json(json, &report, "keeper", "report").is_err() {
                return exit(Exit::Internal);
            }
            ExitCode::from(report.exit_code)
        }
        Err(e) => {
            cli_support::eprint_error("keeper", &format!("keeper: {e}"));
            exit(json_error(json, e.exit_code(), &e.to_string()))
        }
    }
}

/// Under `--json`, the error object on stdout as well as the stderr line (see
/// `cli_support::error_json`); returns `code`.
fn json_error(json: bool, code: Exit, message: &str) -> Exit {
    if json {
        let name = code.name(cli_support::exit::Binary::Keeper);
        cli_support::print_error_json(name, code.code(), message);
    }
    code
}
