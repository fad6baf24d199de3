//! `worker doctor`: gathers the engine's answers (through `worker_docker`) and this host's
//! facts, and prints [`worker_doctor::examine`]'s report. Exit 0 when no line fails (warnings
//! included), 78 when one does: a host problem a restart will not fix.

use super::{block_on, fail, print_json, print_text};
use crate::cli::DoctorArgs;
use crate::exit::ExitCode;

/// Runs the checks and prints the report (text, or JSON with `--json`).
pub fn doctor(args: &DoctorArgs) -> ExitCode {
    let staging = args.staging_root.clone().or_else(|| {
        std::env::var_os("REGRESSION_SANDBOX_STAGING_ROOT").map(std::path::PathBuf::from)
    });
    let gathered = block_on(async {
        // The report carries the reason as text (it is shown, and serialized by `--json`), in
        // the operator's terms: the endpoint, or the socket that refused this user.
        let engine = worker_docker::doctor::engine_facts()
            .await
            .map_err(|error| worker_docker::endpoint::unreachable_message(&error));
        let image = match &args.image {
            Some(reference) => Some(worker_docker::doctor::image_facts(reference).await),
            None => None,
        };
        let clock = match &args.rpc {
            Some(rpc) => Some(clock_facts(rpc).await),
            None => None,
        };
        (engine, image, clock)
    });
    let (engine, image, clock) = match gathered {
        Ok(gathered) => gathered,
        Err(error) => return fail(ExitCode::Internal, &error),
    };
    let mut host = worker_doctor::host::gather(staging.as_deref());
    host.sandbox_uids = Some(sandbox_uid_facts());
    let facts = worker_doctor::Facts {
        engine,
        host,
        oci_runtime: Some(args.oci_runtime.name().to_string()),
        image,
        clock,
    };
    let report = worker_doctor::examine(&facts);
    let printed = if args.json {
        cli_support::eprint_human("worker", &report.human());
        print_json(&report)
    } else {
        print_text(&report.human())
    };
    if printed != ExitCode::Success {
        return printed;
    }
    if report.failed() {
        ExitCode::Config
    } else {
        ExitCode::Success
    }
}

/// The sandbox uid range as this host sees it: a trial lease, taken and given back at once,
/// shows that runs will get theirs (worker_sandbox::identity).
fn sandbox_uid_facts() -> worker_doctor::host::SandboxUidFacts {
    use verifier_sdk::profile::{SANDBOX_UID_COUNT, SANDBOX_UID_FIRST};
    use worker_sandbox::identity;
    worker_doctor::host::SandboxUidFacts {
        first: SANDBOX_UID_FIRST,
        count: SANDBOX_UID_COUNT,
        claimed: identity::host_claimed_ids(std::path::Path::new("/etc")).len(),
        lock_dir: std::path::PathBuf::from(identity::LOCK_DIR),
        lease: identity::lease()
            .map(|lease| lease.uid())
            .map_err(|error| error.to_string()),
    }
}

/// How long the RPC may take to answer the one request of the clock check.
const RPC_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The latest block's timestamp and this host's clock, read right after it. The report names
/// the RPC by its origin only: a path or query may hold an API key.
async fn clock_facts(rpc: &str) -> worker_doctor::ClockFacts {
    let shown =
        bounty_chain::latest::rpc_origin(rpc).unwrap_or_else(|e| format!("<rpc-url> ({e})"));
    let block_timestamp = bounty_chain::latest::latest_block_timestamp(rpc, RPC_TIMEOUT)
        .await
        .map_err(|e| e.to_string());
    // The wall clock is what is checked here, so it is read directly, not through a clock
    // a test could inject.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    worker_doctor::ClockFacts {
        rpc: shown,
        block_timestamp,
        now,
    }
}
