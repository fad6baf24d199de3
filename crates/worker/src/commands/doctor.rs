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
        let engine = worker_docker::doctor::engine_facts().await;
        let image = match &args.image {
            Some(reference) => Some(worker_docker::doctor::image_facts(reference).await),
            None => None,
        };
        (engine, image)
    });
    let (engine, image) = match gathered {
        Ok(gathered) => gathered,
        Err(error) => return fail(ExitCode::Internal, &error),
    };
    let facts = worker_doctor::Facts {
        engine,
        host: worker_doctor::host::gather(staging.as_deref()),
        oci_runtime: Some(args.oci_runtime.name().to_string()),
        image,
        clock: None,
    };
    let report = worker_doctor::examine(&facts);
    let printed = if args.json {
        eprint!("{}", report.human());
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
