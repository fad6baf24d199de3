//! The real values the guides' commands run against (issue #47: every command in the guides
//! runs as written): docs/solvers.md needs a bounty's terms, its benchmark repository to clone
//! and a solver's repository with two commits; docs/reproduce.md a settled bounty (its
//! transaction, its job in the feed, a runner's candidate); docs/operators.md a feed with a
//! job for `worker serve`. Each is the Python bounty of `fixtures/python-bounty`, served by
//! the loopback stand-in for the platform and codeload; the settlement is on the local chain.
//! The tests in `tests/walkthrough.rs` hand these values to the guides' ```sh blocks as the
//! variables a reader sets in each guide's first block.

use std::path::{Path, PathBuf};

use alloy::primitives::{Address, B256, keccak256};
use alloy::signers::local::PrivateKeySigner;
use serde_json::{Value, json};
use verifier_sdk::fixtures::{JobParams, job_value, rehash};
use verifier_sdk::validate_job;

use crate::independent::{Served, deploy_and_serve, settle_with_test_keys};
use crate::{
    ArchiveServer, E2eConfig, E2eError, archive_commit, fresh_dir, io, job_params, manifest,
    run_binary, s, serve_job_archives, setup, step, tree_digest, tree_files, verifier_addresses,
    wall_clock, worker_feed_args,
};

/// A feed listing one job, with the archives it names; it stops when this is dropped.
#[derive(Debug)]
pub struct GuideFeed {
    server: ArchiveServer,
    /// The job's id, as the feed lists it.
    pub job_id: String,
    /// A verifier whose feed lists the job.
    pub verifier: Address,
}

impl GuideFeed {
    /// The platform API's base URL, which is also the codeload stand-in's.
    pub fn api(&self) -> &str {
        self.server.url()
    }
}

/// docs/solvers.md's world: a live bounty whose benchmark is a commit of a git repository.
#[derive(Debug)]
pub struct SolverBounty {
    /// The feed, listing the job of the solver's `HEAD` once "submitted".
    pub feed: GuideFeed,
    /// The terms document, as the platform shows it (the guide's `terms.json`).
    pub terms: Value,
    /// Stands in for `https://github.com`: `<github>/bounty-org/benchmarks` is a bare
    /// repository holding the benchmark at the commit the terms name.
    pub github: PathBuf,
    /// The solver's repository: the failing solution committed, then the passing one.
    pub solver_repo: PathBuf,
}

/// Runs git with no system or global configuration, so the host's cannot change a commit.
fn git(dir: &Path, args: &[&str]) -> Result<String, E2eError> {
    let output = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=guide",
            "-c",
            "user.email=guide@example.invalid",
        ])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .map_err(io("run git", dir))?;
    if !output.status.success() {
        return Err(E2eError::Setup {
            what: "run git",
            detail: format!(
                "git {} in {}: {}",
                args.join(" "),
                dir.display(),
                String::from_utf8_lossy(&output.stderr)
            ),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// Writes `files` (as [`tree_files`] lists them) under `dir`.
fn write_tree(dir: &Path, files: &[(String, Vec<u8>, bool)]) -> Result<(), E2eError> {
    use std::os::unix::fs::PermissionsExt;
    for (rel, data, executable) in files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io("create a directory", parent))?;
        }
        std::fs::write(&path, data).map_err(io("write a file", &path))?;
        let mode = if *executable { 0o755 } else { 0o644 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
            .map_err(io("set a file's mode", &path))?;
    }
    Ok(())
}

/// Commits exactly `files` as the whole tree of `repo`'s next commit; its hash.
fn commit_tree(
    repo: &Path,
    files: &[(String, Vec<u8>, bool)],
    message: &str,
) -> Result<String, E2eError> {
    // Remove the previous commit's files, so the commit holds `files` and nothing else.
    git(repo, &["rm", "-rq", "--ignore-unmatch", "."])?;
    write_tree(repo, files)?;
    git(repo, &["add", "-A"])?;
    git(repo, &["commit", "-qm", message])?;
    git(repo, &["rev-parse", "HEAD"])
}

/// docs/solvers.md's world under `work` (cleaned first).
pub async fn solver_bounty(cfg: &E2eConfig, work: &Path) -> Result<SolverBounty, E2eError> {
    fresh_dir(work)?;
    let fixtures = cfg.repo_root.join("fixtures/python-bounty");
    let benchmark = tree_files(&fixtures.join("benchmark"))?;
    let good = tree_files(&fixtures.join("solution-good"))?;
    let bad = tree_files(&fixtures.join("solution-bad"))?;

    step("[guide] the benchmark's repository and the solver's, with git");
    let github = work.join("github");
    let upstream = work.join("benchmarks-upstream");
    std::fs::create_dir_all(&upstream).map_err(io("create a directory", &upstream))?;
    git(&upstream, &["init", "-q"])?;
    let in_subdir: Vec<_> = benchmark
        .iter()
        .map(|(rel, data, x)| (format!("suites/parser/{rel}"), data.clone(), *x))
        .collect();
    let benchmark_commit = commit_tree(&upstream, &in_subdir, "the benchmark")?;
    let org = github.join("bounty-org");
    std::fs::create_dir_all(&org).map_err(io("create a directory", &org))?;
    git(
        &org,
        &[
            "clone",
            "-q",
            "--bare",
            &s(upstream.display()),
            "benchmarks",
        ],
    )?;

    let solver_repo = work.join("roman");
    std::fs::create_dir_all(&solver_repo).map_err(io("create a directory", &solver_repo))?;
    git(&solver_repo, &["init", "-q"])?;
    commit_tree(&solver_repo, &bad, "roman numerals, one case wrong")?;
    let head = commit_tree(&solver_repo, &good, "fix the parser")?;

    step("[guide] a live bounty's job for the solver's HEAD, served on loopback");
    let source_digest = tree_digest(&fixtures.join("solution-good"))?;
    let benchmark_digest = tree_digest(&fixtures.join("benchmark"))?;
    let verifiers = verifier_addresses()?;
    let now = wall_clock();
    let solver = PrivateKeySigner::random().address();
    let repo = "roman-guide";
    let mut jp = JobParams {
        manifest: manifest(&cfg.python_image, benchmark_digest),
        ..job_params(
            keccak256(format!("guide:{now}:{solver}")),
            solver,
            &verifiers,
            now,
            repo,
            &head,
            &source_digest,
        )
    };
    jp.bounty_contract = PrivateKeySigner::random().address().to_string();
    let mut job = job_value(&jp);
    // The terms name the benchmark repository's real commit, so the guide's `git checkout`
    // finds it; the terms hashes follow.
    let commit_slot = job
        .pointer_mut("/terms/document/benchmark/source/commit")
        .ok_or_else(|| setup("find the benchmark commit in the job")("no such field".into()))?;
    *commit_slot = json!(benchmark_commit);
    rehash(&mut job);
    let validated = validate_job(&job, now).map_err(|e| E2eError::Setup {
        what: "validate the guide's job",
        detail: e.to_string(),
    })?;
    let terms = job
        .pointer("/terms/document")
        .cloned()
        .ok_or_else(|| setup("find the terms document")("no such field".into()))?;
    let server = ArchiveServer::start(json!([job]))
        .await
        .map_err(setup("start the loopback server"))?;
    server.add_archive(
        &format!("/solver-org/{repo}/tar.gz/{head}"),
        &format!("{repo}-{head}"),
        "",
        &good,
    )?;
    server.add_archive(
        &format!("/bounty-org/benchmarks/tar.gz/{benchmark_commit}"),
        &format!("benchmarks-{benchmark_commit}"),
        "suites/parser",
        &benchmark,
    )?;
    Ok(SolverBounty {
        feed: GuideFeed {
            server,
            job_id: validated.job_id().to_owned(),
            verifier: verifiers[0],
        },
        terms,
        github,
        solver_repo,
    })
}

/// docs/operators.md's world: a feed listing one job of the Python bounty (not on chain:
/// `worker serve` reads no chain). The job's verifier set is the one verifier the guide's
/// service runs for: a worker skips a job whose quorum it cannot complete
/// (`other_verifier_set`).
pub async fn feed_with_a_job(cfg: &E2eConfig) -> Result<GuideFeed, E2eError> {
    let fixtures = cfg.repo_root.join("fixtures/python-bounty");
    let solution = fixtures.join("solution-good");
    let benchmark = fixtures.join("benchmark");
    let source_digest = tree_digest(&solution)?;
    let verifiers = &verifier_addresses()?[..1];
    let now = wall_clock();
    let solver = PrivateKeySigner::random().address();
    let commit = archive_commit(&source_digest);
    let repo = "roman-serve";
    let mut jp = JobParams {
        manifest: manifest(&cfg.python_image, tree_digest(&benchmark)?),
        ..job_params(
            keccak256(format!("guide-serve:{now}:{solver}")),
            solver,
            verifiers,
            now,
            repo,
            &commit,
            &source_digest,
        )
    };
    jp.bounty_contract = PrivateKeySigner::random().address().to_string();
    let job = job_value(&jp);
    let validated = validate_job(&job, now).map_err(|e| E2eError::Setup {
        what: "validate the guide's job",
        detail: e.to_string(),
    })?;
    let server = serve_job_archives(job, repo, &commit, &solution, &benchmark).await?;
    Ok(GuideFeed {
        server,
        job_id: validated.job_id().to_owned(),
        verifier: verifiers[0],
    })
}

/// docs/reproduce.md's world: a bounty on the local chain settled over a runner's real run.
pub struct SettledBounty {
    served: Served,
    /// The job's id, as the feed lists it.
    pub job_id: String,
    /// A verifier whose feed lists the job.
    pub verifier: Address,
    /// The chain's JSON-RPC URL.
    pub rpc: String,
    /// The settlement transaction.
    pub tx: B256,
    /// The runner's candidate file (`worker feed`'s), whose verdict was settled.
    pub candidate: PathBuf,
}

impl std::fmt::Debug for SettledBounty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SettledBounty")
            .field("api", &self.api())
            .field("job_id", &self.job_id)
            .field("tx", &self.tx)
            .field("candidate", &self.candidate)
            .finish_non_exhaustive()
    }
}

impl SettledBounty {
    /// The platform API's base URL, which is also the codeload stand-in's.
    pub fn api(&self) -> &str {
        self.served.server.url()
    }
}

/// Deploys the Python bounty, runs its job with `worker feed` as a runner does, and settles
/// the runner's verdict and response hash with the verifiers' test keys (a signer signs just
/// that; the contract checks the signatures, not the run). Work files under `work`.
pub async fn settled_bounty(cfg: &E2eConfig, work: &Path) -> Result<SettledBounty, E2eError> {
    fresh_dir(work)?;
    let served = deploy_and_serve(cfg, "guide", false, |_| {}).await?;
    step("[guide] worker feed: the runner's candidate");
    let candidates = work.join("candidates");
    let staging = work.join("staging");
    let scratch = work.join("scratch");
    for d in [&candidates, &staging, &scratch] {
        std::fs::create_dir_all(d).map_err(io("create a work directory", d))?;
    }
    let mut args = worker_feed_args("feed", served.server.url(), &served.verifiers);
    args.extend([
        s("--out"),
        s(candidates.display()),
        s("--archive-base"),
        served.server.url().to_owned(),
        s("--staging-root"),
        s(staging.display()),
        s("--work-dir"),
        s(scratch.display()),
        s("--json"),
    ]);
    run_binary(
        "worker feed",
        &cfg.bin_dir.join("worker"),
        &args,
        None,
        &[0],
    )
    .await?;
    let job_id = served.validated.job_id().to_owned();
    let candidate = candidates.join(verifier_sdk::candidate_file_name(&job_id));
    let value: Value = std::fs::read(&candidate)
        .map_err(io("read the candidate", &candidate))
        .and_then(|b| {
            serde_json::from_slice(&b).map_err(|e| setup("parse the candidate")(e.to_string()))
        })?;
    let passed = value.pointer("/outcome/verdict").and_then(Value::as_str) == Some("passed");
    let response_hash: B256 = value
        .pointer("/outcome/response_hash")
        .and_then(Value::as_str)
        .and_then(|h| h.parse().ok())
        .ok_or_else(|| setup("read the candidate's response hash")(value.to_string()))?;
    step("[guide] settle the runner's verdict");
    let tx = settle_with_test_keys(&served, passed, response_hash).await?;
    Ok(SettledBounty {
        job_id,
        verifier: served.verifiers[0],
        rpc: served.kit.url().to_owned(),
        tx,
        candidate,
        served,
    })
}
