//! The OCI runtime containers are created under (issue #28): the operator's `--oci-runtime`,
//! looked up in the engine's registered runtimes when the executor connects. A runtime the
//! engine does not offer is never replaced by another: every run then ends before create with
//! no verdict (`runtime_unavailable`), so no container exists.

use std::collections::HashMap;
use std::time::Duration;

use bollard::models::{Commit, Runtime};
use verifier_sdk::oci_runtime::{OciRuntimeFacts, RUNC};

/// How long `<runtime> --version` may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

/// The runtime an executor creates its containers under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OciRuntime {
    /// The name asked for (`HostConfig.Runtime`).
    pub name: String,
    /// The engine's registration of it; `None` when the engine does not offer it.
    pub facts: Option<OciRuntimeFacts>,
    /// The names the engine does offer, sorted, for the refusal's message.
    pub offered: Vec<String>,
}

impl OciRuntime {
    /// `name` as the engine's `/info` registers it (`runtimes`, and runc's commit), with the
    /// version line of the registered binary on this host.
    pub async fn resolve(
        name: &str,
        runtimes: Option<&HashMap<String, Runtime>>,
        runc_commit: Option<&Commit>,
    ) -> Self {
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
        Self {
            name: name.to_string(),
            facts,
            offered,
        }
    }

    /// Why a run cannot start under this runtime, or `None` when the engine offers it.
    pub fn unavailable(&self) -> Option<String> {
        self.facts.is_none().then(|| {
            format!(
                "the engine offers no OCI runtime {:?} (it offers {}); register it (for runsc: \
                 scripts/services.sh --runsc, or runtimes.runsc in /etc/docker/daemon.json) or \
                 run without --oci-runtime; runs never fall back to another runtime",
                self.name,
                if self.offered.is_empty() {
                    "none".to_string()
                } else {
                    self.offered.join(", ")
                }
            )
        })
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
