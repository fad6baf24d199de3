//! `worker preflight`: a solver's commit run through the feed's own path for a bounty's job,
//! before the solver bonds. The path is the library's ([`worker_jobs::preflight`]); this resolves
//! the job and the submission, maps the answer to an exit code and prints it.
//!
//! A local repository (`--source DIR --rev REV --repo OWNER/REPO`) is archived as GitHub
//! archives a commit (`git archive --format=tar.gz --prefix=REPO-SHA/ SHA`) and served from a
//! loopback stand-in at the URL the feed would ask codeload for, every other archive (the
//! benchmark's) passed through from `--archive-base`; the feed's downloader, caps and
//! extraction then read it exactly as they read GitHub's.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;

use platform_client::PlatformClient;
use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use verifier_sdk::{CommitId, GithubRepo};

use super::local_run::{self, Failure};
use super::{print_json, print_text};
use crate::cli::PreflightArgs;
use crate::exit::ExitCode;
use worker_jobs::feed::archive::{BENCHMARK_MAX_COMPRESSED, DEFAULT_ARCHIVE_BASE, archive_url};
use worker_jobs::preflight::{Answer, PreflightError, PreflightReport, preflight as run_preflight};
use worker_jobs::reproduce::MAX_CANDIDATE_BYTES;

/// The exit code of an answer (docs/reference.md "Exit codes"; never renumbered): a verdict,
/// passed or failed, is a verification that worked.
pub fn answer_exit_code(answer: &Answer) -> ExitCode {
    match answer {
        Answer::Verdict { .. } => ExitCode::Success,
        Answer::NoVerdict { .. } => ExitCode::NotDone,
        Answer::Refused { .. } => ExitCode::InvalidInput,
    }
}

fn error_exit_code(e: &PreflightError) -> ExitCode {
    match e {
        PreflightError::Unavailable { .. } => ExitCode::Unavailable,
        PreflightError::Output(_) | PreflightError::Digest(_) => ExitCode::Internal,
        PreflightError::Job(_) | PreflightError::NoEvidence => ExitCode::InvalidInput,
    }
}

fn invalid(e: &dyn std::fmt::Display) -> Failure {
    (ExitCode::InvalidInput, e.to_string())
}

/// The bounty's job, raw (its submission is replaced before it is parsed).
async fn resolve_job(args: &PreflightArgs, client: &PlatformClient) -> Result<Value, Failure> {
    let raw = if let Some(path) = &args.job {
        let bytes = artifact_fs::read_bounded(path, MAX_CANDIDATE_BYTES)
            .map_err(|e| invalid(&format!("--job {}: {e}", path.display())))?;
        serde_json::from_slice(&bytes)
            .map_err(|e| invalid(&format!("--job {}: not json: {e}", path.display())))?
    } else {
        let (Some(job_id), Some(api), Some(verifier)) = (&args.job_id, &args.api, args.verifier)
        else {
            return Err(invalid(
                &"give --job-id ID --api URL --verifier ADDRESS, or --job FILE",
            ));
        };
        local_run::fetch_job(client, &args.run, api, verifier, job_id)
            .await?
            .ok_or_else(|| {
                invalid(&format!(
                    "the platform's feed for {verifier} has no job {job_id}"
                ))
            })?
    };
    if let Some(mode) = verifier_sdk::other_verification_mode(&raw) {
        return Err(invalid(&format!(
            "the job is of another verification mode ({mode}): no run of ours decides it"
        )));
    }
    Ok(raw)
}

/// A local repository's revision, archived as GitHub archives it.
struct LocalCommit {
    repo: GithubRepo,
    commit: CommitId,
    archive: Vec<u8>,
}

impl LocalCommit {
    fn reference(&self) -> String {
        format!(
            "https://github.com/{}/{}/commit/{}",
            self.repo.owner(),
            self.repo.name(),
            self.commit
        )
    }
}

async fn git(dir: &Path, args: &[&str]) -> Result<Vec<u8>, Failure> {
    let output = tokio::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| (ExitCode::Config, format!("running git: {e}")))?;
    if !output.status.success() {
        return Err(invalid(&format!(
            "git {}: {}",
            args.first().copied().unwrap_or_default(),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(output.stdout)
}

async fn archive_local(dir: &Path, rev: &str, repo: &str) -> Result<LocalCommit, Failure> {
    let repo = GithubRepo::parse(repo)
        .ok_or_else(|| invalid(&format!("--repo {repo:?} is not OWNER/REPO")))?;
    let resolved = git(
        dir,
        &[
            "rev-parse",
            "--verify",
            "--end-of-options",
            &format!("{rev}^{{commit}}"),
        ],
    )
    .await?;
    let commit = CommitId::parse(String::from_utf8_lossy(&resolved).trim(), false)
        .ok_or_else(|| invalid(&format!("--rev {rev} is not a commit of {}", dir.display())))?;
    let prefix = format!("--prefix={}-{commit}/", repo.name());
    let archive = git(
        dir,
        &["archive", "--format=tar.gz", &prefix, &commit.to_string()],
    )
    .await?;
    Ok(LocalCommit {
        repo,
        commit,
        archive,
    })
}

/// The loopback stand-in: the local archive at its codeload path, anything else fetched from
/// `upstream` under the benchmark's cap and passed on. Returns its base URL.
async fn serve_local(
    local: LocalCommit,
    upstream: String,
    client: PlatformClient,
) -> Result<String, Failure> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| (ExitCode::Internal, format!("loopback stand-in: {e}")))?;
    let port = listener
        .local_addr()
        .map_err(|e| (ExitCode::Internal, format!("loopback stand-in: {e}")))?
        .port();
    let own = archive_url("", &local.repo, &local.commit);
    let shared = Arc::new((local.archive, own, upstream, client));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let shared = Arc::clone(&shared);
            tokio::spawn(async move {
                let (archive, own, upstream, client) = &*shared;
                if let Err(e) = answer(stream, archive, own, upstream, client).await {
                    tracing::warn!(error = %e, "preflight's loopback stand-in");
                }
            });
        }
    });
    Ok(format!("http://127.0.0.1:{port}"))
}

/// Most bytes of a request head read.
const MAX_REQUEST_HEAD: usize = 16 << 10;

async fn answer(
    mut stream: tokio::net::TcpStream,
    archive: &[u8],
    own: &str,
    upstream: &str,
    client: &PlatformClient,
) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST_HEAD {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(buf.get(..n).unwrap_or_default());
    }
    let line = String::from_utf8_lossy(&head);
    let target = line
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    let (status, body): (&str, std::borrow::Cow<'_, [u8]>) = if target == own {
        ("200 OK", archive.into())
    } else {
        let mut fetched = Vec::new();
        let url = format!("{}{target}", upstream.trim_end_matches('/'));
        match client
            .download_to(&url, &mut fetched, BENCHMARK_MAX_COMPRESSED, &mut |_, _| {})
            .await
        {
            Ok(_) => ("200 OK", fetched.into()),
            Err(e) => {
                tracing::warn!(error = %e, %url, "preflight's loopback stand-in could not fetch");
                ("502 Bad Gateway", Vec::new().into())
            }
        }
    };
    let header = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/x-gzip\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(header.as_bytes()).await?;
    stream.write_all(&body).await?;
    stream.shutdown().await
}

/// Runs `worker preflight`.
pub fn preflight(args: &PreflightArgs, quiet: bool) -> ExitCode {
    let work = async |client: &PlatformClient, root| {
        let raw = resolve_job(args, client).await?;
        let job = verifier_sdk::ValidatedJob::parse(&raw)
            .map_err(|e| invalid(&format!("the job is invalid: {e}")))?;
        // The solver's own job will have its own window; an earlier round's job stands in.
        let mut config = local_run::feed_config(&args.run, args.api.as_deref(), &job, quiet);
        let reference = match (&args.commit, &args.source, &args.rev, &args.repo) {
            (Some(reference), _, _, _) => reference.clone(),
            (None, Some(dir), Some(rev), Some(repo)) => {
                let local = archive_local(dir, rev, repo).await?;
                let reference = local.reference();
                let upstream =
                    std::mem::replace(&mut config.archive_base, DEFAULT_ARCHIVE_BASE.to_owned());
                config.archive_base = serve_local(local, upstream, client.clone()).await?;
                reference
            }
            _ => {
                return Err(invalid(
                    &"give --commit REFERENCE, or --source DIR --rev REV --repo OWNER/REPO",
                ));
            }
        };
        let job_executor = local_run::job_executor(&args.run, root).await?;
        run_preflight(&config, client, &job_executor, &raw, &reference)
            .await
            .map_err(|e| (error_exit_code(&e), e.to_string()))
    };
    local_run::run(&args.run, "the preflight", work, |report| {
        print_report(&report, args.json)
    })
}

fn print_report(report: &PreflightReport, json: bool) -> ExitCode {
    let printed = if json {
        print_json(report)
    } else {
        print_text(&worker_sandbox::explain::terminal_safe(&report.human()))
    };
    if printed != ExitCode::Success {
        return ExitCode::Internal;
    }
    answer_exit_code(&report.answer)
}
