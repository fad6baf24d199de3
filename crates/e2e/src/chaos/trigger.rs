//! When a kill fires: the trigger of one step, resolved, and the future that completes when it
//! fires. Below the driver and the serve supervisor, which both arm kills with it.

use std::collections::HashSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::inject::running_container_of;

/// How a kill is triggered, resolved for one step.
pub(super) enum Trigger {
    /// This long after the process started.
    After(Duration),
    /// When a sandbox container of the process runs.
    ContainerRunning,
    /// When a candidate file not among `existing` appears in `dir`.
    CandidateWritten {
        /// The candidates directory.
        dir: PathBuf,
        /// Names already there when the step started (a service's `--out` keeps its files).
        existing: HashSet<String>,
    },
    /// When the proxy saw the broadcast.
    Broadcast(Arc<Notify>),
}

/// The candidate file names in `dir` (not the in-toto statements).
pub(super) fn candidate_names(dir: &Path) -> HashSet<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    n.starts_with("candidate-")
                        && n.ends_with(".json")
                        && !n.ends_with(".intoto.json")
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The future that completes when `trigger` fires for the process `pid`.
pub(super) fn trigger_future(
    pid: u32,
    trigger: Option<Trigger>,
) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    match trigger {
        None => Box::pin(std::future::pending()),
        Some(Trigger::After(d)) => Box::pin(tokio::time::sleep(d)),
        Some(Trigger::ContainerRunning) => Box::pin(async move {
            running_container_of(pid).await;
        }),
        Some(Trigger::CandidateWritten { dir, existing }) => Box::pin(async move {
            while candidate_names(&dir).is_subset(&existing) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }),
        Some(Trigger::Broadcast(n)) => Box::pin(async move { n.notified().await }),
    }
}
