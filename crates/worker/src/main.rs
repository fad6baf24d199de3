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
use std::sync::atomic::{AtomicBool, Ordering};

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
    let json = cli_support::json_requested(std::env::args_os().skip(1));
    JSON_ERRORS.store(json, Ordering::Relaxed);
    // clap prints its own message and exits with 2 (usage) or 0 (help, version).
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            if json && error.use_stderr() {
                let text = error.to_string();
                let first = text.lines().next().unwrap_or_default();
                let message = first.strip_prefix("error: ").unwrap_or(first);
                cli_support::print_error_json(
                    ExitCode::Usage.as_str(),
                    ExitCode::Usage.code(),
                    message,
                );
            }
            error.exit()
        }
    };
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
            in_toto,
        } => {
            let root = match run::staging_root_from_env() {
                Ok(root) => root,
                Err(error) => return fail(ExitCode::Config, &error),
            };
            let result = match block_on_interruptible(
                run::run_regression_command(&request, root, pull, evidence.as_deref()),
                "the run",
            ) {
                Ok(result) => result,
                Err(code) => return code,
            };
            match result {
                Ok(Ok(done)) => {
                    if let Some(path) = &in_toto
                        && let Err(error) = worker::intoto::write_for_run(path, &done)
                    {
                        return fail(ExitCode::Internal, &error);
                    }
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
                let refusal = serde_json::json!({
                    "schema_version": run::CANDIDATE_CHECK_SCHEMA_VERSION,
                    "valid": false,
                    "error": error.to_string(),
                });
                let _ = print_json(&refusal);
                fail(ExitCode::InvalidInput, &error)
            }
        },
        Action::Feed(args) => feed(args, quiet),
        Action::Rehearse(args) => rehearse(args),
        Action::Explain { evidence, json } => explain(&evidence, json),
        Action::Gc(args) => gc(&args),
        Action::Request(args) => request(&args),
        Action::Completions(args) => {
            worker::completions::write_completions(args.shell, &mut std::io::stdout().lock());
            ExitCode::Success
        }
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
    let result = block_on_interruptible(
        async move {
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
        },
        "the feed run (no further job was started)",
    );
    let result = match result {
        Ok(result) => result,
        Err(code) => return code,
    };
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
fn rehearse(args: worker::cli::RehearseArgs) -> ExitCode {
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
    };
    let prepared = match worker::rehearse::prepare(&options) {
        Ok(prepared) => prepared,
        Err(error) => return fail(rehearse_error_exit_code(&error), &error),
    };
    let result = block_on_interruptible(
        async {
            let executor = DockerExecutor::connect().await?;
            if let Err(error) = executor.cleanup_stale().await {
                tracing::warn!(%error, "could not clean up stale sandbox containers");
            }
            worker::rehearse_adversarial::rehearse(&executor, prepared, &options, args.adversarial)
                .await
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

/// [`block_on`] for the modes that run containers: on SIGINT/SIGTERM the work is dropped, this
/// process's containers removed, what was interrupted printed, and `Err(130 or 143)` returned.
fn block_on_interruptible<F: std::future::Future>(
    future: F,
    what: &str,
) -> Result<Result<F::Output, std::io::Error>, ExitCode> {
    match block_on(worker::interrupt::run_interruptible(future)) {
        Ok(Ok(Ok(output))) => Ok(Ok(output)),
        Ok(Ok(Err(stopped))) => Err(fail(stopped.signal.exit_code(), &stopped.message(what))),
        Ok(Err(error)) | Err(error) => Ok(Err(error)),
    }
}

fn rehearse_error_exit_code(error: &worker::rehearse::RehearseError) -> ExitCode {
    use worker::rehearse::RehearseError;
    match error {
        e if e.is_input_error() => ExitCode::InvalidInput,
        RehearseError::Sandbox(worker::sandbox::SandboxError::RuntimeUnavailable(_)) => {
            ExitCode::RuntimeUnavailable
        }
        RehearseError::StagingRoot { .. } => ExitCode::Config,
        RehearseError::Stage { source, .. } => stage_exit_code(source),
        _ => ExitCode::Internal,
    }
}

/// `worker request`: 0 with the request written, 4 when it would not be a valid job.
fn request(args: &worker::request::RequestArgs) -> ExitCode {
    let request = match worker::request::request_command(args, run::now_unix()) {
        Ok(request) => request,
        Err(error) => return fail(ExitCode::InvalidInput, &error),
    };
    match &args.out {
        None => print_json(&request),
        Some(path) => {
            let written = serde_json::to_vec_pretty(&request)
                .map_err(std::io::Error::other)
                .and_then(|bytes| artifact_fs::write_atomic(path, &bytes));
            match written {
                Ok(()) => ExitCode::Success,
                Err(error) => fail(
                    ExitCode::Internal,
                    &format_args!("writing {path:?}: {error}"),
                ),
            }
        }
    }
}

/// `worker gc`: 0 when everything old and unused was removed, 1 when some entry could not
/// be, 5 without an engine to ask which trees are in use, 78 for an unusable root.
fn gc(args: &worker::gc::GcArgs) -> ExitCode {
    use worker::gc::GcCommandError;
    let report = match block_on(worker::gc::gc_command(args)) {
        Ok(Ok(report)) => report,
        Ok(Err(error @ GcCommandError::Engine(_))) => {
            return fail(ExitCode::RuntimeUnavailable, &error);
        }
        Ok(Err(error)) => return fail(ExitCode::Config, &error),
        Err(error) => return fail(ExitCode::Internal, &error),
    };
    let written = if args.json {
        print_json(&report)
    } else {
        match write!(std::io::stdout().lock(), "{}", report.human()) {
            Ok(()) => ExitCode::Success,
            Err(error) => fail(ExitCode::Internal, &error),
        }
    };
    match written {
        ExitCode::Success if !report.failed.is_empty() => ExitCode::Internal,
        other => other,
    }
}

/// `worker explain`: exit 0 with the explanation, 4 for an unreadable or unknown record.
fn explain(path: &std::path::Path, json: bool) -> ExitCode {
    let evidence = match worker::explain::read_evidence(path) {
        Ok(evidence) => evidence,
        Err(error) => return fail(ExitCode::InvalidInput, &error),
    };
    let explanation = worker::explain::explain(&evidence);
    if json {
        return print_json(&worker::explain::summary_json(&evidence, &explanation));
    }
    match write!(std::io::stdout().lock(), "{}", explanation.render("")) {
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

/// Set when the command line has `--json`: failures then also print the error object on
/// stdout, so a caller parsing stdout always gets JSON.
static JSON_ERRORS: AtomicBool = AtomicBool::new(false);

fn fail(code: ExitCode, error: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("worker: error: {error}");
    if JSON_ERRORS.load(Ordering::Relaxed) {
        cli_support::print_error_json(code.as_str(), code.code(), &error.to_string());
    }
    code
}

fn init_logging() {
    cli_support::init_logging("WORKER_LOG", "warn");
}
