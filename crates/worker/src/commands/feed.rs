//! `worker feed`: fetch the platform's job feed, run every job committed to our verifier(s),
//! and write candidate files and their manifest. The batch's exit code is the report's.

use std::path::PathBuf;
use std::sync::Arc;

use worker_store::clock::ChainAligned;

use super::{block_on_interruptible, connect_swept, fail, print_json, staging_root_failed};
use crate::cli::FeedArgs;
use crate::exit::{ExitCode, ExitStatus};
use worker_jobs::feed::{FeedConfig, SandboxJobExecutor, run_feed};
use worker_store::staging_root::{self, Fallback, StagingRootError};

/// Runs one batch and prints its summary (and, with `--json`, its report).
pub fn feed(args: &FeedArgs, quiet: bool) -> ExitCode {
    let (mut config, staging_root) = match feed_config(args, quiet) {
        Ok(config) => config,
        Err(error) => return staging_root_failed(&error),
    };
    // Windows are chain time: with --rpc, judged on the chain's clock when it runs ahead.
    let window_clock = Arc::new(ChainAligned::new(config.clock.clone()));
    if !args.run.rpc.is_empty() {
        config.clock = window_clock.clone();
    }
    let rpc = args.run.rpc.clone();
    let pull = args.run.pull;
    let oci_runtime = args.run.oci_runtime.name();
    let result = block_on_interruptible(
        async move {
            // Before any work, as the signer checks the same list before it signs.
            config.chain_readiness = crate::chain_readiness::connect(&rpc)
                .await
                .map_err(|error| (rpc_exit(&error), format!("--rpc: {error}")))?;
            let _following = crate::chain_clock::follow(&rpc, window_clock).await;
            let executor = connect_swept(oci_runtime)
                .await
                .map_err(|error| (ExitCode::Unavailable, error.to_string()))?;
            let job_executor = SandboxJobExecutor::new(executor, staging_root, pull);
            run_feed(&config, &job_executor)
                .await
                .map_err(|e| (e.exit_code(), e.to_string()))
        },
        "the feed run (no further job was started)",
    );
    let result = match result {
        Ok(result) => result,
        Err(code) => return code,
    };
    match result {
        Ok(Ok(report)) => {
            cli_support::eprint_human("worker", &report.human_summary());
            // An unwritable report is an internal failure whatever the batch's outcome.
            if args.json && print_json(&report.to_json()) != ExitCode::Success {
                return ExitCode::Internal;
            }
            report.exit_code()
        }
        Ok(Err((code, error))) => fail(code, &error),
        Err(error) => fail(ExitCode::Internal, &error),
    }
}

/// The signer's exit for the same `--rpc` list: none answering is an outage (5), anything else
/// a configuration to fix (78).
fn rpc_exit(error: &crate::chain_readiness::ConnectError) -> ExitCode {
    if error.is_transient() {
        ExitCode::Unavailable
    } else {
        ExitCode::Config
    }
}

/// The batch's configuration and its staging root, proven writable before anything is
/// fetched.
fn feed_config(args: &FeedArgs, quiet: bool) -> Result<(FeedConfig, PathBuf), StagingRootError> {
    let root = staging_root::resolve(args.run.staging_root.as_deref(), Fallback::Required)?;
    staging_root::ensure_writable(&root)?;
    let mut config = FeedConfig::new(
        &args.source.api,
        args.source.network,
        args.source.verifiers.clone(),
        &args.out,
    );
    config.max_jobs = args.max_jobs;
    config.cache_dir = args.cache_dir.clone();
    if !args.job_ids.is_empty() {
        config.only_jobs = Some(args.job_ids.iter().cloned().collect());
    }
    config.settle = args.run.settle_costs;
    if let Some(work) = &args.run.work_dir {
        config.work_dir = work.clone();
    }
    if let Some(base) = &args.run.archive_base {
        config.archive_base = base.clone();
    }
    // The summary at the end still comes under JSON logs (as log objects).
    config.progress = super::progress_lines(quiet);
    config.shard = args.shard;
    Ok((config, root))
}
