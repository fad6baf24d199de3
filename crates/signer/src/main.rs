//! `signer` binary: parses arguments, runs, maps the result to an exit code (see `exit.rs`).

use clap::Parser;
use signer::{Cli, ExitCode};

fn main() -> std::process::ExitCode {
    cli_support::quiet_broken_stdout();
    if cli_support::version::verbose_requested(std::env::args_os().skip(1)) {
        cli_support::version::print_verbose("signer");
        return std::process::ExitCode::SUCCESS;
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            if e.use_stderr() && cli_support::json_requested(std::env::args_os().skip(1)) {
                let text = e.to_string();
                let first = text.lines().next().unwrap_or_default();
                signer::json_error(
                    true,
                    ExitCode::Usage,
                    first.strip_prefix("error: ").unwrap_or(first),
                );
            }
            let _ = e.print();
            return if e.use_stderr() {
                std::process::ExitCode::from(ExitCode::Usage.code())
            } else {
                std::process::ExitCode::SUCCESS
            };
        }
    };
    cli_support::init_logging_as(
        "SIGNER_LOG",
        "warn",
        cli_support::LogFormat::choose(cli.log_format.as_deref().and_then(|f| f.parse().ok())),
    );
    let code = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(signer::run(&cli)),
        Err(e) => {
            eprintln!("signer: could not start the async runtime: {e}");
            ExitCode::Internal
        }
    };
    std::process::ExitCode::from(code.code())
}
