//! The container profile (DESIGN §4): what we ask the engine for, and the same fields read back
//! from `inspect` so a difference fails closed. The profile's fields and values are
//! [`verifier_sdk::profile`]'s (see there for why `/tmp/home` is its own tmpfs); this module
//! turns them into the Engine API's create request and back.

// The profile itself is defined once, in the sdk, so the signer and keeper check evidence
// against the very definition the worker asked the engine for.
pub use verifier_sdk::profile::{
    BENCHMARK_DIR, BindMount, ContainerProfile as Isolation, HOME_DIR, Limits, NOFILE_LIMIT,
    SANDBOX_HOSTNAME, SANDBOX_UID_COUNT, SANDBOX_UID_FIRST, SHM_BYTES, Ulimit, WORKDIR,
    environment, sandbox_user,
};
use verifier_sdk::profile::{ProfileInputs, expected_profile};

use super::SandboxSpec;

/// The requested profile for `spec`, with `source`/`benchmark` the canonical host paths, under
/// the OCI runtime `oci_runtime` (the operator's, never the manifest's), as the host uid
/// `sandbox_uid` leased to this sandbox alone ([`crate::identity`]).
pub fn requested(
    spec: &SandboxSpec,
    limits: Limits,
    image_path: Option<&str>,
    source: &str,
    benchmark: &str,
    oci_runtime: &str,
    sandbox_uid: u32,
) -> Isolation {
    expected_profile(&ProfileInputs {
        argv: &spec.request.argv,
        test_seed: spec.request.test_seed,
        tmpfs_bytes: spec.request.tmpfs_bytes,
        limits,
        image_path,
        source,
        benchmark,
        oci_runtime,
        sandbox_uid,
    })
}
