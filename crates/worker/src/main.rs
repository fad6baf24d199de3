//! The `worker` binary: parses the command line, calls the library, maps the outcome to an
//! exit code (the only place that policy lives, see `exit.rs`). JSON results go to stdout;
//! errors go to stderr as one `worker: error: ...` line; logs go to stderr, filtered by the
//! `WORKER_LOG` environment variable (`tracing` env-filter syntax, default `warn`).
//!
//! Exit codes of the staging modes (numbers from `exit.rs`):
//! - 0: the tree was snapshotted or staged; its JSON is on stdout.
//! - 2: the command line is unusable (unknown flag, missing value, bad kind, limit not a
//!   positive integer).
//! - 4: the input tree was rejected (missing, link, special file, non-UTF-8 or `\` name, too
//!   deep, over a limit, changed while read). Nothing was published.
//! - 78: the staging root cannot be created or used, or lies inside the input tree.
//! - 1: writing into the store failed, or an internal error. Nothing was published.

use std::io::Write;

use clap::Parser;
use verifier_sdk::{NoVerdictReason, RunOutput};
use worker::cli::{Action, Cli};
use worker::exit::ExitCode;
use worker::feed::{FeedConfig, SandboxJobExecutor, run_feed};
use worker::progress::stderr_progress;
use worker::run;
use worker::sandbox::DockerExecutor;
use worker::snapshot::{SnapshotError, snapshot_directory_with_progress};
use worker::stage::{StageError, stage_tree};

fn main() -> std::process::ExitCode {
    cli_support::restore_sigpipe();
    // clap prints its own message and exits with 2 (usage) or 0 (help, version).
    let cli = Cli::parse();
    init_logging();
    let quiet = cli.quiet;
    let code = match cli.action() {
        Ok(action) => dispatch(action, quiet),
        Err(error) => fail(ExitCode::Usage, &error),
    };
    std::process::ExitCode::from(code.code())
}

fn dispatch(action: Action, quiet: bool) -> ExitCode {
    match action {
        Action::SnapshotDirectory { dir, limits } => {
            let mut progress = stderr_progress("hashing", quiet);
            match snapshot_directory_with_progress(&dir, limits, progress.as_mut()) {
                Ok(snapshot) => print_json(&snapshot),
                Err(error) => fail(snapshot_exit_code(&error), &error),
            }
        }
        Action::StageRegressionInput {
            kind,
            dir,
            root,
            limits,
        } => {
            let mut progress = stderr_progress("staging", quiet);
            match stage_tree(kind, &dir, &root, limits, progress.as_mut()) {
                Ok(staged) => print_json(&staged),
                Err(error) => fail(stage_exit_code(&error), &error),
            }
        }
        Action::RunRegression {
            request,
            pull,
            evidence,
        } => {
            let root = match run::staging_root_from_env() {
                Ok(root) => root,
                Err(error) => return fail(ExitCode::Config, &error),
            };
            let result = block_on(run::run_regression_command(
                &request,
                root,
                pull,
                evidence.as_deref(),
            ));
            match result {
                Ok(Ok(done)) => {
                    let code = outcome_exit_code(&done.output);
                    match print_json(&done.output) {
                        ExitCode::Success => code,
                        failed => failed,
                    }
                }
                Ok(Err(error)) => fail(run_error_exit_code(&error), &error),
                Err(error) => fail(ExitCode::Internal, &error),
            }
        }
        Action::ValidateCandidate { request } => match run::validate_candidate_command(&request) {
            Ok(check) => print_json(&check),
            Err(error) => {
                let refusal = serde_json::json!({"valid": false, "error": error.to_string()});
                let _ = print_json(&refusal);
                fail(ExitCode::InvalidInput, &error)
            }
        },
        Action::Feed(args) => feed(args, quiet),
        Action::Rehearse(args) => rehearse(args, quiet),
        Action::Explain {
            evidence,
            json,
            lines,
        } => explain(&evidence, json, lines),
        Action::Plan {
            request,
            staging_root,
        } => {
            let root = match staging_root
                .map(Ok)
                .unwrap_or_else(run::staging_root_from_env)
            {
                Ok(root) => root,
                Err(error) => return fail(ExitCode::Config, &error),
            };
            match run::plan_command(&request, &root) {
                Ok(plan) => print_json(&plan),
                Err(error) => fail(ExitCode::InvalidInput, &error),
            }
        }
    }
}

fn feed(args: worker::cli::FeedArgs, quiet: bool) -> ExitCode {
    let config = match feed_config(&args, quiet) {
        Ok(config) => config,
        Err(error) => return fail(ExitCode::Config, &error),
    };
    let json = args.json;
    let result = block_on(async move {
        let executor = match worker::sandbox::DockerExecutor::connect().await {
            Ok(executor) => executor,
            Err(error) => return Err((ExitCode::RuntimeUnavailable, error.to_string())),
        };
        if let Err(error) = executor.cleanup_stale().await {
            tracing::warn!(%error, "could not clean up stale sandbox containers");
        }
        let job_executor = SandboxJobExecutor::new(executor, config.1, args.pull);
        run_feed(&config.0, &job_executor)
            .await
            .map_err(|e| (e.exit_code(), e.to_string()))
    });
    match result {
        Ok(Ok(report)) => {
            eprint!("{}", report.human_summary());
            // An unwritable report is an internal failure whatever the batch's outcome.
            if json && print_json(&report.to_json()) != ExitCode::Success {
                return ExitCode::Internal;
            }
            report.exit_code()
        }
        Ok(Err((code, error))) => fail(code, &error),
        Err(error) => fail(ExitCode::Internal, &error),
    }
}

/// `worker rehearse`; the exit code of a finished report is `Rehearsed::exit_code`.
fn rehearse(args: worker::cli::RehearseArgs, quiet: bool) -> ExitCode {
    use worker::rehearse::{RehearseError, RehearseOptions};
    let staging_root = match args.staging_root.clone() {
        Some(root) => std::path::absolute(&root).map_err(|e| RehearseError::StagingRoot {
            path: root,
            detail: e.to_string(),
        }),
        None => worker::rehearse::default_staging_root(),
    };
    let staging_root = match staging_root {
        Ok(root) => root,
        Err(error) => return fail(ExitCode::Config, &error),
    };
    let options = RehearseOptions {
        source: args.source,
        benchmark: args.benchmark,
        manifest: args.manifest,
        repeat: args.repeat,
        base: args.base,
        staging_root,
        pull: args.pull,
        rev: args.rev,
        worktree: args.worktree,
        quiet,
        log_dir: args.log_dir,
    };
    let prepared = match worker::rehearse::prepare(&options) {
        Ok(prepared) => prepared,
        Err(error) => return fail(rehearse_error_exit_code(&error), &error),
    };
    let result = block_on(async {
        let executor = DockerExecutor::connect().await?;
        if let Err(error) = executor.cleanup_stale().await {
            tracing::warn!(%error, "could not clean up stale sandbox containers");
        }
        worker::rehearse::rehearse(&executor, prepared, &options, args.adversarial).await
    });
    match result {
        Ok(Ok(report)) => {
            let written = if args.json {
                print_json(&report.to_json())
            } else {
                match write!(std::io::stdout().lock(), "{}", report.human()) {
                    Ok(()) => ExitCode::Success,
                    Err(error) => fail(ExitCode::Internal, &error),
                }
            };
            match written {
                ExitCode::Success => report.exit_code(),
                failed => failed,
            }
        }
        Ok(Err(error)) => fail(rehearse_error_exit_code(&error), &error),
        Err(error) => fail(ExitCode::Internal, &error),
    }
}

fn rehearse_error_exit_code(error: &worker::rehearse::RehearseError) -> ExitCode {
    use worker::rehearse::RehearseError;
    match error {
        e if e.is_input_error() => ExitCode::InvalidInput,
        RehearseError::Sandbox(worker::sandbox::SandboxError::RuntimeUnavailable(_)) => {
            ExitCode::RuntimeUnavailable
        }
        RehearseError::StagingRoot { .. } | RehearseError::LogDir { .. } => ExitCode::Config,
        RehearseError::Stage { source, .. } => stage_exit_code(source),
        _ => ExitCode::Internal,
    }
}

/// `worker explain`: exit 0 with the explanation, 4 for an unreadable or unknown record.
fn explain(path: &std::path::Path, json: bool, lines: Option<usize>) -> ExitCode {
    use worker::explain::{Shown, explain_shown, terminal_safe, what_ran};
    let evidence = match worker::explain::read_evidence(path) {
        Ok(evidence) => evidence,
        Err(error) => return fail(ExitCode::InvalidInput, &error),
    };
    let explanation = explain_shown(&evidence, &Default::default(), Shown::reading(lines));
    if json {
        return print_json(&worker::explain::summary_json(&evidence, &explanation));
    }
    let mut text = explanation.render("");
    text.push_str("what ran\n");
    for line in what_ran(&evidence) {
        text.push_str(&format!("  {}\n", terminal_safe(&line)));
    }
    match write!(std::io::stdout().lock(), "{text}") {
        Ok(()) => ExitCode::Success,
        Err(error) => fail(ExitCode::Internal, &error),
    }
}

fn feed_config(
    args: &worker::cli::FeedArgs,
    quiet: bool,
) -> Result<(FeedConfig, std::path::PathBuf), String> {
    let network = verifier_sdk::Network::from_alias(&args.network)
        .ok_or_else(|| format!("unknown network {:?}", args.network))?;
    let verifiers = args
        .verifiers
        .iter()
        .map(|v| {
            v.parse::<verifier_sdk::Address>()
                .map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    let root = match &args.staging_root {
        Some(root) => std::path::absolute(root).map_err(|e| e.to_string())?,
        None => run::staging_root_from_env().map_err(|e| e.to_string())?,
    };
    // Each job would otherwise fail on its own and the batch end in "retry later" (3), which
    // a scheduled run treats as fine: a broken store must stop the run as a configuration
    // error before anything is fetched.
    std::fs::create_dir_all(&root)
        .and_then(|()| tempfile::tempfile_in(&root))
        .map_err(|e| format!("staging root {root:?} is unusable: {e}"))?;
    let mut config = FeedConfig::new(&args.api, network, verifiers, &args.out);
    config.max_jobs = args.max_jobs;
    config.cache_dir = args.cache_dir.clone();
    if let Some(work) = &args.work_dir {
        config.work_dir = work.clone();
    }
    if let Some(base) = &args.archive_base {
        config.archive_base = base.clone();
    }
    config.progress = !quiet;
    Ok((config, root))
}

/// The exit code of a run, from its outcome alone: a verdict (either one) is success.
fn outcome_exit_code(output: &RunOutput) -> ExitCode {
    match output {
        RunOutput::Verdict(_) => ExitCode::Success,
        RunOutput::NoVerdict(no) => match no.no_verdict.reason {
            NoVerdictReason::InvalidJob | NoVerdictReason::Expired => ExitCode::InvalidInput,
            NoVerdictReason::RuntimeUnavailable => ExitCode::RuntimeUnavailable,
            _ => ExitCode::NoVerdict,
        },
    }
}

fn run_error_exit_code(error: &run::RunCommandError) -> ExitCode {
    match error {
        run::RunCommandError::Request(_) => ExitCode::InvalidInput,
        run::RunCommandError::StagingRoot => ExitCode::Config,
        run::RunCommandError::Evidence(_) => ExitCode::Internal,
    }
}

/// Runs a future on a runtime made for this one command; async stays out of the library's
/// synchronous paths (staging, snapshot).
fn block_on<F: std::future::Future>(future: F) -> Result<F::Output, std::io::Error> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    Ok(runtime.block_on(future))
}

fn snapshot_exit_code(error: &SnapshotError) -> ExitCode {
    if error.is_input_error() {
        ExitCode::InvalidInput
    } else {
        ExitCode::Internal
    }
}

fn stage_exit_code(error: &StageError) -> ExitCode {
    match error {
        StageError::Root { .. }
        | StageError::RootNotDirectory(_)
        | StageError::RootNotUtf8(_)
        | StageError::RootInsideInput { .. } => ExitCode::Config,
        StageError::Tree(error) => snapshot_exit_code(error),
        StageError::Store { .. } => ExitCode::Internal,
    }
}

fn print_json(value: &impl serde::Serialize) -> ExitCode {
    let written = serde_json::to_string(value)
        .map_err(std::io::Error::other)
        .and_then(|json| writeln!(std::io::stdout().lock(), "{json}"));
    match written {
        Ok(()) => ExitCode::Success,
        Err(error) => fail(
            ExitCode::Internal,
            &format_args!("writing the result: {error}"),
        ),
    }
}

fn fail(code: ExitCode, error: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("worker: error: {error}");
    code
}

fn init_logging() {
    cli_support::init_logging("WORKER_LOG", "warn");
}
