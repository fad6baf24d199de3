//! The host facts `worker doctor` gathers, as the evidence record's engine section carries them
//! (issue #28): the cgroup layout, the OCI runtimes the daemon offers, user-namespace remapping,
//! seccomp and AppArmor, swap, and the doctor's verdict on each. Read once when the worker's
//! executor connects, so every run of one process carries the same facts.
//!
//! Informational only, like the per-test section: never part of the receipt or the response
//! hash, and no check of the signer or keeper reads it (a worker could write anything here;
//! the OCI runtime a run used is checked from `oci_runtime` and the profiles, not from this
//! list). Records written before it existed have no `host`, and parse and re-serialize byte
//! for byte. A fact the worker could not read is left out, never guessed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A `worker doctor` line's verdict, as recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DoctorStatus {
    /// Nothing to do.
    Ok,
    /// Works, with a caveat.
    Warn,
    /// The doctor says the worker cannot be trusted to run here.
    Fail,
}

/// A runtime as the engine has it registered (`/info` `Runtimes`). Its version is recorded
/// only for the runtime the run used, in the record's `oci_runtime`: reading the others' would
/// cost a process per runtime on every run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRuntime {
    /// The binary.
    pub path: String,
    /// `runtimeArgs`.
    pub args: Vec<String>,
}

/// What `worker doctor` found about the engine's host when the worker connected.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineHostFacts {
    /// The worst status of [`Self::checks`].
    pub doctor: DoctorStatus,
    /// The doctor's checks of the engine and host by name (`engine`, `cgroups`, `oci_runtime`
    /// for the run's runtime, `userns`, `seccomp`, `apparmor`, `swap`); the staging root, image
    /// and clock checks are not made per process, so they are absent.
    pub checks: BTreeMap<String, DoctorStatus>,
    /// This host's cgroup layout from `/proc/mounts`: `v1`, `v2` or `hybrid`; absent when no
    /// cgroup mount was found. (The engine's own cgroup version and driver are the engine
    /// section's `cgroup_version` and `cgroup_driver`.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_layout: Option<String>,
    /// The OCI runtimes the daemon offers, by name.
    pub runtimes: BTreeMap<String, HostRuntime>,
    /// The daemon's `default-runtime`; absent when it did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_runtime: Option<String>,
    /// The engine's `SecurityOptions`, verbatim (`name=seccomp,profile=default`, …).
    pub security_options: Vec<String>,
    /// The engine remaps user namespaces (`name=userns`).
    pub userns_remap: bool,
    /// The engine applies a seccomp filter (`name=seccomp`).
    pub seccomp: bool,
    /// The engine confines containers with AppArmor (`name=apparmor`).
    pub apparmor: bool,
    /// The host's AppArmor module is enabled; absent when the module is not loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_apparmor: Option<bool>,
    /// The host's `SwapTotal` in bytes; absent when unreadable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_total_bytes: Option<u64>,
    /// The engine can limit memory+swap (`SwapLimit`).
    pub swap_limit: bool,
}
