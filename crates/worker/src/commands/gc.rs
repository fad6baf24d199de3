//! `worker gc`: removes old, unused staged trees and evidence records from a staging store
//! (the collection itself is [`worker_store::gc`]).
//!
//! Exit codes: 0 when everything old and unused was removed (or, with `--dry-run`, listed);
//! 1 when some entry could not be removed; 5 without an engine to ask which trees containers
//! mount (nothing is removed then); 78 for an unusable staging root; 2 for a bad `--older-than`.

use super::{block_on, fail, print_json, print_text};
use crate::exit::ExitCode;
use std::time::SystemTime;

use crate::cli::GcArgs;
use worker_store::gc::{GcError, GcOptions, GcReport, collect};

/// Why `worker gc` could not run.
#[derive(Debug, thiserror::Error)]
pub enum GcCommandError {
    /// No usable staging root.
    #[error("{0}")]
    Root(String),
    /// The engine could not be asked which trees are mounted; nothing was removed.
    #[error("cannot tell which staged trees containers are using, so nothing was removed: {0}")]
    Engine(String),
    /// Collecting failed.
    #[error(transparent)]
    Gc(#[from] GcError),
}

/// `worker gc`: the root from the flag, the environment or the rehearsal default; the trees
/// containers mount from the engine (no engine, no removal); then [`collect`].
pub async fn gc_command(args: &GcArgs) -> Result<GcReport, GcCommandError> {
    // The same root a rehearsal without --staging-root would have used, so `worker gc` alone
    // cleans the store `worker rehearse` alone fills.
    let root = worker_store::staging_root::resolve(
        args.staging_root.as_deref(),
        worker_store::staging_root::Fallback::PrivateTemp,
    )
    .map_err(|e| GcCommandError::Root(e.to_string()))?;
    let executor = worker_docker::connect()
        .await
        .map_err(|e| GcCommandError::Engine(e.to_string()))?;
    let in_use = executor.mounted_paths().await.map_err(|e| match e {
        // The engine's own words, as before the engine moved behind the executor.
        worker_sandbox::SandboxError::Engine { source, .. } => {
            GcCommandError::Engine(source.to_string())
        }
        other => GcCommandError::Engine(other.to_string()),
    })?;
    Ok(collect(&GcOptions {
        root,
        older_than: args.older_than,
        dry_run: args.dry_run,
        in_use,
        now: SystemTime::now(),
    })?)
}

/// Collects the store and prints what was freed.
pub fn gc(args: &GcArgs) -> ExitCode {
    let report = match block_on(gc_command(args)) {
        Ok(Ok(report)) => report,
        Ok(Err(error @ GcCommandError::Engine(_))) => {
            return fail(ExitCode::RuntimeUnavailable, &error);
        }
        Ok(Err(error)) => return fail(ExitCode::Config, &error),
        Err(error) => return fail(ExitCode::Internal, &error),
    };
    let written = if args.json {
        print_json(&report)
    } else {
        print_text(&report.human())
    };
    match written {
        ExitCode::Success if !report.failed.is_empty() => ExitCode::Internal,
        other => other,
    }
}
