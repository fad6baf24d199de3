//! The OCI runtime containers are created under (issue #28): the operator's `--oci-runtime`,
//! as the engine registers it. A runtime the engine does not offer is never replaced by
//! another: every run then ends before create with no verdict (`runtime_unavailable`), so no
//! container exists.

use crate::engine::OciRuntime;

impl OciRuntime {
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
