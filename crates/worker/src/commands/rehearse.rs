//! `worker rehearse`: the glue between the command line and [`worker_rehearse`]; the exit code
//! of a finished report maps `Rehearsed::answer`.

use super::rehearse_exit::rehearse_error_exit_code;
use super::rehearse_parallel::{host_parallel, job_size};
use super::{
    block_on_interruptible, connect_swept, fail, print_json, print_text, staging_root_failed,
};
use crate::cli::RehearseArgs;
use crate::exit::{ExitCode, ExitStatus};
use worker_rehearse::mutants::{DEFAULT_SEED, MutantOptions, run_mutants};
use worker_rehearse::{RehearseError, RehearseOptions, rehearse_at};
use worker_store::staging_root::{self, Fallback};

/// Rehearses the manifest on the trees `args` names and prints the report.
pub fn rehearse(args: RehearseArgs, quiet: bool) -> ExitCode {
    if let Some(batch) = args.batch.clone() {
        return super::rehearse_batch::rehearse_batch(&batch, &args, quiet);
    }
    // Clap's `requires = "batch"` does not hold against `required_unless_present = "batch"`
    // on the three trees, so a --junit without --batch was silently ignored (#42 item 8).
    if args.junit.is_some() {
        return fail(
            ExitCode::Usage,
            &"--junit writes a batch's JUnit XML and needs --batch FILE; one rehearsal writes none \
              (drop --junit, or put the task in a tasks file and pass --batch)",
        );
    }
    // Clap requires all three without --batch.
    let (Some(source), Some(benchmark), Some(manifest)) = (
        args.source.clone(),
        args.benchmark.clone(),
        args.manifest.clone(),
    ) else {
        return fail(
            ExitCode::Usage,
            &"--source, --benchmark and --manifest are required without --batch",
        );
    };
    let staging_root =
        match staging_root::resolve(args.staging_root.as_deref(), Fallback::PrivateTemp) {
            Ok(root) => root,
            Err(error) => return staging_root_failed(&error),
        };
    let base = match args.base.as_deref() {
        Some(base) => match worker_rehearse::revisions::base_spec(base, args.base_rev.as_deref()) {
            Ok(spec) => Some(spec),
            Err(error) => {
                let error = RehearseError::from(error);
                return fail(rehearse_error_exit_code(&error), &error);
            }
        },
        None => None,
    };
    let options = RehearseOptions {
        source,
        benchmark,
        manifest,
        repeat: args.repeat,
        base: base.as_ref().map(|b| b.dir.clone()),
        base_rev: base.and_then(|b| b.rev),
        staging_root,
        pull: args.pull,
        rev_explicit: args.rev.is_some(),
        rev: args.rev.unwrap_or_else(|| "HEAD".into()),
        worktree: args.worktree,
        quiet,
        log_dir: args.log_dir,
        oci_runtime: args.oci_runtime.name().into(),
        task: None,
    };
    let prepared = match worker_rehearse::prepare(&options) {
        Ok(prepared) => prepared,
        Err(error) => return fail(rehearse_error_exit_code(&error), &error),
    };
    let result = block_on_interruptible(
        async {
            let executor = connect_swept(args.oci_runtime.name()).await?;
            // With nothing to share out (one run, no base, no stub, no mutant) the engine is
            // not asked.
            let alone = options.repeat == 1
                && options.base.is_none()
                && !args.adversarial
                && args.mutants.is_none();
            let parallel = if alone {
                std::num::NonZeroUsize::MIN
            } else {
                host_parallel(&executor, job_size(prepared.manifest())).await
            };
            let adversarial = args.adversarial;
            let Some(count) = args.mutants else {
                return rehearse_at(&executor, prepared, &options, adversarial, parallel).await;
            };
            let mutants = MutantOptions {
                count,
                seed: args.mutants_seed.unwrap_or(DEFAULT_SEED),
                parallel,
            };
            let rehearsed =
                rehearse_at(&executor, prepared.clone(), &options, adversarial, parallel).await?;
            let verdict = rehearsed.report.verdict;
            let score = run_mutants(&executor, &prepared, &options, &mutants, verdict).await?;
            Ok(rehearsed.with_mutants(score))
        },
        "the rehearsal (no report)",
    );
    let result = match result {
        Ok(result) => result,
        Err(code) => return code,
    };
    match result {
        Ok(Ok(report)) => {
            let written = if args.json {
                print_json(&report.to_json())
            } else {
                print_text(&report.human())
            };
            if !quiet {
                use worker_rehearse::store_hint::{NOTE_FROM_BYTES, store_bytes, store_note};
                let root = &options.staging_root;
                if let Some(note) = store_note(root, store_bytes(root), NOTE_FROM_BYTES) {
                    cli_support::eprint_human("worker", &note);
                }
            }
            match written {
                ExitCode::Success => report.answer().exit_code(),
                failed => failed,
            }
        }
        Ok(Err(error)) => fail(rehearse_error_exit_code(&error), &error),
        Err(error) => fail(ExitCode::Internal, &error),
    }
}
