//! `worker rehearse --batch tasks.json [--junit FILE]`: the glue between the command line and
//! [`worker_rehearse::batch`]. Exit codes: 0 when every task is fit, 9 when any pays a
//! non-solution, else 4 when any is unfit, has no solution yet or could not be rehearsed (or the
//! tasks file is unusable: nothing runs), 3 when none is unfit and one has no answer; 5, 78 and 1 as for one rehearsal (the machine's faults end the batch).

use std::path::Path;

use super::rehearse_exit::rehearse_error_exit_code;
use super::rehearse_parallel::{host_parallel, job_size};
use super::{
    block_on_interruptible, connect_swept, fail, print_json, print_text, staging_root_failed,
};
use crate::cli::RehearseArgs;
use crate::exit::{ExitCode, ExitStatus};
use worker_rehearse::batch::{
    BatchDefaults, PreparedTask, prepare_tasks, read_tasks, rehearse_batch as run_batch,
};
use worker_store::staging_root::{self, Fallback};

/// Rehearses every task of `tasks` and prints one report (and writes `--junit`).
pub fn rehearse_batch(tasks: &Path, args: &RehearseArgs, quiet: bool) -> ExitCode {
    let staging_root =
        match staging_root::resolve(args.staging_root.as_deref(), Fallback::PrivateTemp) {
            Ok(root) => root,
            Err(error) => return staging_root_failed(&error),
        };
    let defaults = BatchDefaults {
        staging_root,
        repeat: args.repeat,
        adversarial: args.adversarial,
        pull: args.pull,
        worktree: args.worktree,
        quiet,
        oci_runtime: args.oci_runtime.name().into(),
        log_dir: args.log_dir.clone(),
    };
    let tasks = match read_tasks(tasks, &defaults) {
        Ok(tasks) => tasks,
        Err(error) => return fail(ExitCode::InvalidInput, &error),
    };
    // Every task's trees are staged before any container runs (so a fault of the store ends
    // the batch before it has run anything, and the capacity is sized by every manifest).
    let tasks = match prepare_tasks(tasks) {
        Ok(tasks) => tasks,
        Err(error) => return fail(rehearse_error_exit_code(&error), &error),
    };
    let result = block_on_interruptible(
        async {
            let executor = connect_swept(args.oci_runtime.name()).await?;
            // As `worker serve` sizes a batch of jobs: by the largest cpu quota and the largest
            // memory limit among them, each taken separately, so any of them fit together.
            let largest = tasks
                .iter()
                .filter_map(PreparedTask::manifest)
                .map(job_size)
                .reduce(worker_serve::capacity::JobSize::max);
            let capacity = match largest {
                Some(size) => host_parallel(&executor, size).await,
                None => std::num::NonZeroUsize::MIN,
            };
            run_batch(&executor, tasks, capacity).await
        },
        "the batch (no report)",
    );
    let report = match result {
        Ok(Ok(Ok(report))) => report,
        Ok(Ok(Err(error))) => return fail(rehearse_error_exit_code(&error), &error),
        Ok(Err(error)) => return fail(ExitCode::Internal, &error),
        Err(code) => return code,
    };
    if let Some(path) = &args.junit
        && let Err(error) = artifact_fs::write_atomic(path, report.junit().as_bytes())
    {
        return fail(
            ExitCode::Internal,
            &format_args!("writing the JUnit XML {}: {error}", path.display()),
        );
    }
    let written = if args.json {
        print_json(&report.to_json())
    } else {
        print_text(&report.human())
    };
    match written {
        ExitCode::Success => report.answer().exit_code(),
        failed => failed,
    }
}
