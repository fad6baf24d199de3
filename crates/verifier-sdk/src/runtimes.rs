//! The OCI runtimes a sandbox container may run under (issue #28), their limits, the engine's
//! facts about the one a run used, and the refusals: what the container profile and the
//! evidence record are built from. It imports neither of them, so both can; the checks of a
//! record against a required runtime read the record, so they stay one floor up in the
//! `oci_runtime` module, which re-exports all of this under its own path.
//!
//! Under runsc the profile's process limit is enforced differently, because the host's pids
//! cgroup holds the whole sandbox, not just the solver's processes: the Sentry's and the
//! gofer's Go threads and, on the ptrace platform, a stub process per guest address space (on
//! this project's hosts 73 host tasks for 6 guest processes, 275 for 31). A host `pids.max` at
//! the manifest's `pids_limit` (say 32) leaves the Sentry unable to create its first thread and
//! the container never starts (`docker start` hangs, `urpc … StartRoot failed: EOF`). So:
//! - the manifest's `pids_limit` becomes `RLIMIT_NPROC` (ulimit `nproc`) of the sandbox user,
//!   which the Sentry enforces itself on every guest fork and thread (a count of tasks, the
//!   same thing the pids cgroup counts; the uid is the sandbox's alone inside its kernel);
//! - the host pids cgroup keeps a backstop ([`runsc_host_pids_limit`]) that bounds the
//!   sandbox's host footprint with room for the Sentry. A fork bomb held at 32 guest tasks
//!   peaked at 579 to 768 host tasks, at 128 at 2547 (about 20 per guest process; a guest
//!   thread costs about half a host task); a backstop below that makes the Sentry's own `exec`
//!   of a new address space fail, which the program sees as its own EAGAIN.
//!
//! Under runc `nproc` is not set: the pids cgroup already counts the container's tasks, and
//! `RLIMIT_NPROC` counts every process of the uid on the host. Each sandbox's uid is its own
//! (crate::profile::SANDBOX_UID_FIRST), so that count is no longer shared with other jobs, but
//! the cgroup remains the one limit that cannot see anything outside the container.

use serde::{Deserialize, Serialize};

/// The engine's default runtime, asked for by name so a daemon whose `default-runtime` is
/// something else cannot change what runs.
pub const RUNC: &str = "runc";
/// gVisor's runtime, as scripts/services.sh registers it with the Docker daemon.
pub const RUNSC: &str = "runsc";

/// Host tasks allowed per guest task under runsc, and the Sentry's fixed share: about 20 per
/// guest process under a fork bomb and 30 at rest were measured; this leaves room above both.
const RUNSC_HOST_TASKS_PER_GUEST: i64 = 32;
const RUNSC_HOST_TASKS_BASE: i64 = 512;

/// The host pids cgroup limit of a runsc sandbox whose guest may hold `pids` tasks.
pub fn runsc_host_pids_limit(pids: i64) -> i64 {
    pids.saturating_mul(RUNSC_HOST_TASKS_PER_GUEST)
        .saturating_add(RUNSC_HOST_TASKS_BASE)
}

/// Whether `runtime` is one the sandbox knows how to run under.
pub fn is_supported(runtime: &str) -> bool {
    runtime == RUNC || runtime == RUNSC
}

/// What the engine says about the runtime a run used, recorded in the evidence.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OciRuntimeFacts {
    /// The runtime's name (`HostConfig.Runtime` read back after create).
    pub name: String,
    /// The binary the engine has registered under that name (`/info` `Runtimes`).
    pub path: String,
    /// The arguments the engine passes it (`runtimeArgs`), e.g. `--platform=ptrace`.
    pub args: Vec<String>,
    /// The first line of `<path> --version` on the worker's host, or the engine's runc
    /// commit; empty when neither could be read.
    pub version: String,
}

/// Why evidence does not show the run under the runtime a signer or keeper requires.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OciRuntimeError {
    /// The record names no runtime at all.
    #[error(
        "evidence names no OCI runtime, and {required} is required (the run was made by a \
         worker that does not record it, or without --oci-runtime {required})"
    )]
    NotRecorded {
        /// The required runtime.
        required: String,
    },
    /// The record names another runtime.
    #[error("the run's OCI runtime is {found:?}, not the required {required:?}")]
    Other {
        /// The required runtime.
        required: String,
        /// What the record names (requested, observed or the engine's facts).
        found: String,
    },
    /// The record's parts disagree about the runtime.
    #[error("evidence disagrees with itself about the OCI runtime: {0}")]
    Inconsistent(String),
}
