//! Reading a service's ledger back through the worker binary, as an operator would: the
//! lowest step of the chaos modules that watch a service (the clock probe, the serve
//! supervisor, the driver), so none of them imports another for it.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

/// `worker ledger --state STATE --json`, parsed (`None` while it cannot be read: not yet
/// created, or the state disk is full).
pub(super) async fn read_ledger(worker: &Path, state: &Path) -> Option<Value> {
    let out = tokio::process::Command::new(worker)
        .args(["ledger", "--state"])
        .arg(state)
        .args(["--json", "--quiet"])
        .envs(crate::logscan::JSON_LOG_ENV)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(30), out)
        .await
        .ok()?
        .ok()?;
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}
