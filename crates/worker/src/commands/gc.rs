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
    let executor = crate::engine::connect()
        .await
        .map_err(|e| GcCommandError::Engine(e.to_string()))?;
    let in_use = executor.mounted_paths().await.map_err(|e| match e {
        // The engine's own words, as before the engine moved behind the executor.
        worker_sandbox::SandboxError::Engine { source, .. } => {
            GcCommandError::Engine(source.to_string())
        }
        other => GcCommandError::Engine(other.to_string()),
    })?;
    let Some(older_than) = args.older_than else {
        return Err(GcCommandError::Root("--older-than is required".into()));
    };
    Ok(collect(&GcOptions {
        root,
        older_than,
        dry_run: args.dry_run,
        in_use,
        now: SystemTime::now(),
    })?)
}

/// The schema of `worker gc --images --json`.
pub const IMAGE_GC_SCHEMA: &str = "agent-bounties/worker-gc-images-v1";

/// What `worker gc --images` did (`--json` prints it).
#[derive(Debug, serde::Serialize)]
pub struct ImageGcReport {
    /// [`IMAGE_GC_SCHEMA`].
    pub schema_version: &'static str,
    /// Nothing was removed.
    pub dry_run: bool,
    /// The budget.
    pub budget_bytes: u64,
    /// Bytes the counted images took before.
    pub total_bytes: u64,
    /// Bytes they take after (or would, dry).
    pub total_after_bytes: u64,
    /// Images removed (or that would be).
    pub removed: Vec<worker_sandbox::images::Eviction>,
    /// Images the engine refused to remove: `[id, its words]`.
    pub failed: Vec<(String, String)>,
    /// Counted images kept over budget because a listed or recent job needs them.
    pub kept_protected: Vec<String>,
    /// Bytes freed (or that would be).
    pub freed_bytes: u64,
}

impl ImageGcReport {
    fn human(&self) -> String {
        let verb = if self.dry_run {
            "would remove"
        } else {
            "removed"
        };
        let mut out = format!(
            "images: {verb} {} ({} bytes); counted {} -> {} bytes, budget {}\n",
            self.removed.len(),
            self.freed_bytes,
            self.total_bytes,
            self.total_after_bytes,
            self.budget_bytes
        );
        for e in &self.removed {
            out.push_str(&format!(
                "  {verb} {} {:?} ({} bytes)\n",
                e.id, e.references, e.size_bytes
            ));
        }
        for (id, why) in &self.failed {
            out.push_str(&format!("  could not remove {id}: {why}\n"));
        }
        if !self.kept_protected.is_empty() {
            out.push_str(&format!(
                "  over budget: kept {:?}, needed by listed or recent jobs\n",
                self.kept_protected
            ));
        }
        out
    }
}

/// `worker gc --images`: serve's pull record from `--state`, the engine's images, serve's
/// rules ([`worker_serve::images::collect`]).
pub async fn gc_images(args: &GcArgs) -> Result<ImageGcReport, GcCommandError> {
    let (Some(state), Some(budget)) = (&args.state, args.image.image_budget) else {
        return Err(GcCommandError::Root(
            "--images needs --state and --image-budget".into(),
        ));
    };
    if !state.is_dir() {
        return Err(GcCommandError::Root(format!(
            "no state directory {}",
            state.display()
        )));
    }
    let mut ledger = worker_serve::images::PullLedger::load(state)
        .map_err(|e| GcCommandError::Root(e.to_string()))?;
    let executor = crate::engine::connect()
        .await
        .map_err(|e| GcCommandError::Engine(e.to_string()))?;
    let policy = super::serve::image_policy(&args.image, false);
    let now_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let (plan, report) = worker_serve::images::collect(
        executor.images(),
        &mut ledger,
        &policy,
        budget,
        now_ms,
        args.dry_run,
    )
    .await
    .map_err(|e| GcCommandError::Engine(e.to_string()))?;
    if !args.dry_run {
        // A running serve rewrites the file at its next batch from its own copy: a removal
        // it does not know of only makes it forget the pull when it next lists the images.
        ledger
            .save(state)
            .map_err(|e| GcCommandError::Root(e.to_string()))?;
    }
    Ok(ImageGcReport {
        schema_version: IMAGE_GC_SCHEMA,
        dry_run: args.dry_run,
        budget_bytes: budget,
        total_bytes: plan.total_bytes,
        total_after_bytes: plan.total_after_bytes,
        removed: report.removed,
        failed: report.failed,
        kept_protected: plan.kept_protected,
        freed_bytes: report.freed_bytes,
    })
}

/// What a collection hands to [`print_report`]: `--json` prints it whole.
trait Collected: serde::Serialize {
    /// The summary printed without `--json`.
    fn summary(&self) -> String;
    /// Some entry could not be removed (exit 1).
    fn any_failed(&self) -> bool;
}

impl Collected for GcReport {
    fn summary(&self) -> String {
        self.human()
    }
    fn any_failed(&self) -> bool {
        !self.failed.is_empty()
    }
}

impl Collected for ImageGcReport {
    fn summary(&self) -> String {
        self.human()
    }
    fn any_failed(&self) -> bool {
        !self.failed.is_empty()
    }
}

/// Maps a collection's outcome to the exit code (see the module's docs) and prints its report.
fn print_report<R: Collected>(
    args: &GcArgs,
    outcome: Result<Result<R, GcCommandError>, std::io::Error>,
) -> ExitCode {
    let report = match outcome {
        Ok(Ok(report)) => report,
        Ok(Err(error @ GcCommandError::Engine(_))) => {
            return fail(ExitCode::Unavailable, &error);
        }
        Ok(Err(error)) => return fail(ExitCode::Config, &error),
        Err(error) => return fail(ExitCode::Internal, &error),
    };
    let written = if args.json {
        print_json(&report)
    } else {
        print_text(&report.summary())
    };
    match written {
        ExitCode::Success if report.any_failed() => ExitCode::Internal,
        other => other,
    }
}

/// Collects the store (or, with `--images`, the images) and prints what was freed.
pub fn gc(args: &GcArgs) -> ExitCode {
    if args.images {
        return print_report(args, block_on(gc_images(args)));
    }
    print_report(args, block_on(gc_command(args)))
}
