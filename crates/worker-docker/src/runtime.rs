//! The OCI runtime containers are created under (issue #28): the operator's `--oci-runtime`,
//! looked up in the engine's registered runtimes when the executor connects
//! ([`OciRuntime`] is the engine seam's type and its refusal the lifecycle's, in
//! `worker-sandbox`).

use std::collections::HashMap;
use std::time::Duration;

use bollard::models::{Commit, Runtime};
use verifier_sdk::oci_runtime::{OciRuntimeFacts, RUNC};
pub use worker_sandbox::engine::OciRuntime;

/// How long `<runtime> --version` may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

/// `name` as the engine's `/info` registers it (`runtimes`, and runc's commit), with the
/// version line of the registered binary on this host.
pub async fn resolve(
    name: &str,
    runtimes: Option<&HashMap<String, Runtime>>,
    runc_commit: Option<&Commit>,
) -> OciRuntime {
    let mut offered: Vec<String> = runtimes
        .map(|r| r.keys().cloned().collect())
        .unwrap_or_default();
    offered.sort();
    let facts = match runtimes.and_then(|r| r.get(name)) {
        None => None,
        Some(entry) => {
            let path = entry.path.clone().unwrap_or_else(|| name.to_string());
            let mut version = version_line(&path).await.unwrap_or_default();
            // The engine's own report of runc's version, when this host cannot run the
            // binary (an engine reached over DOCKER_HOST).
            if let Some(id) = runc_commit
                .and_then(|c| c.id.as_deref())
                .filter(|_| version.is_empty() && name == RUNC)
            {
                version = format!("runc version {id}");
            }
            Some(OciRuntimeFacts {
                name: name.to_string(),
                path,
                args: entry.runtime_args.clone().unwrap_or_default(),
                version,
            })
        }
    };
    OciRuntime {
        name: name.to_string(),
        facts,
        offered,
    }
}

/// The first line of `<path> --version`, when it runs within [`VERSION_TIMEOUT`].
async fn version_line(path: &str) -> Option<String> {
    let mut command = tokio::process::Command::new(path);
    command
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(VERSION_TIMEOUT, command.output())
        .await
        .ok()?
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().next()?.trim();
    (!line.is_empty()).then(|| line.chars().take(200).collect())
}
