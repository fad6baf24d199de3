//! Plays a whole bounty on the local services (DESIGN.md §7): a `TestBounty` on the Hardhat
//! node, a loopback HTTP server standing in for the platform's job feed and for codeload, and
//! the three shipped binaries run as subprocesses — `worker feed` runs the Python benchmark in
//! the digest-pinned image, `signer sign` signs as each of two verifiers, `keeper relay`
//! settles — then the result is read back from the chain and checked.
//!
//! Test-only (`publish = false`): it uses Hardhat's public dev keys and never a real one. The
//! keys reach the binaries through environment variables named on their command lines, so no
//! key is ever an argument or printed.

pub mod chaos;
pub mod dedicated;
pub mod guides;
pub mod independent;
pub mod logscan;
mod server;
pub mod stack;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use alloy::primitives::{Address, B256, U256, keccak256};
use alloy::providers::Provider;
use alloy::signers::local::PrivateKeySigner;
use chain_testkit::{BountyParams, DEV_KEYS, Testkit, TestkitError, dev_signer, status};
use serde_json::{Value, json};
use verifier_sdk::fixtures::{BENCHMARK_COMMIT, JobParams, job_value, sample_manifest};
use verifier_sdk::settle::{SettlementEvent, decode_settlement_event};
use verifier_sdk::{Sha256Digest, TreeLimits, digest_directory, validate_job};

pub use server::ArchiveServer;
pub use stack::Stack;

/// Dev accounts that sign as the bounty's two verifiers (threshold 2).
pub const VERIFIER_KEYS: [usize; 2] = [1, 2];
/// Dev account that sends the settlement transaction.
pub const KEEPER_KEY: usize = 3;
/// Name of the variable that carries a verifier's key to `signer` (never its value on argv).
pub const VERIFIER_KEY_ENV: &str = "E2E_VERIFIER_KEY";
/// Name of the variable that carries the keeper's key to `keeper`.
pub const KEEPER_KEY_ENV: &str = "E2E_KEEPER_KEY";
/// Where the job's terms say the benchmark lives inside the benchmark repository archive
/// (the sdk fixture's `bounty-org/benchmarks` source).
const BENCHMARK_SUBDIR: &str = "suites/parser";
/// The manifest's command: python3 from the image's PATH, isolated (`-I`: neither the working
/// directory nor PYTHON* variables reach `sys.path`), `-B` because the rootfs and the mounts are
/// read-only. The benchmark's harness runs the six tests in a child process and passes only if
/// exactly those six ran and passed (fixtures/python-bounty/README.md says why).
const COMMAND: [&str; 5] = ["python3", "-I", "-B", "/benchmark/run_tests.py", "6"];
/// Per-subprocess wall-clock bound, so a hung binary fails the run instead of stalling it.
const STEP_TIMEOUT: Duration = Duration::from_secs(300);

/// Which solution the solver submits, and so which settlement the run must end in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// `solution-good`: every test passes, the bounty pays (`BountySettled`).
    Settled,
    /// `solution-bad`: one test fails, the submission is rejected (`SubmissionRejected`).
    Rejected,
}

impl Scenario {
    /// Lowercase name, also the work subdirectory.
    pub fn name(self) -> &'static str {
        match self {
            Self::Settled => "settled",
            Self::Rejected => "rejected",
        }
    }

    fn solution_dir(self) -> &'static str {
        match self {
            Self::Settled => "solution-good",
            Self::Rejected => "solution-bad",
        }
    }
}

/// Where everything the run needs is.
#[derive(Debug, Clone)]
pub struct E2eConfig {
    /// The repository root (holds `fixtures/python-bounty`).
    pub repo_root: PathBuf,
    /// Directory holding the built `worker`, `signer` and `keeper` binaries.
    pub bin_dir: PathBuf,
    /// Scratch directory; each scenario cleans its own subdirectory at start.
    pub work_dir: PathBuf,
    /// The digest-pinned Python image (`.work/images.json` → `python`).
    pub python_image: String,
    /// The digest-pinned Rust image (`.work/images.json` → `rust`), when it was built; a Rust
    /// scenario fails without it ([`Stack::image`]).
    pub rust_image: Option<String>,
}

/// The checkout this crate is built in: the tests' repository.
pub fn checkout_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The checkout's debug binaries: `$CARGO_TARGET_DIR/debug`, else `target/debug`, where
/// nextest has built them before the tests run.
pub fn checkout_bin_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| checkout_root().join("target"))
        .join("debug")
}

/// `worker rehearse` of `fixtures`' `solution` against its benchmark under `manifest`, staging
/// in `dir/staging`, with a JSON report and JSON logs (the stack tests read both); the caller
/// adds its own arguments and runs it.
pub fn rehearse_command(
    worker: &Path,
    fixtures: &Path,
    solution: &str,
    manifest: &Path,
    dir: &Path,
) -> std::process::Command {
    let mut cmd = std::process::Command::new(worker);
    cmd.arg("rehearse")
        .arg("--source")
        .arg(fixtures.join(solution))
        .arg("--benchmark")
        .arg(fixtures.join("benchmark"))
        .arg("--manifest")
        .arg(manifest)
        .arg("--staging-root")
        .arg(dir.join("staging"))
        .arg("--json")
        .env_remove("REGRESSION_SANDBOX_STAGING_ROOT")
        .envs(logscan::JSON_LOG_ENV);
    cmd
}

impl E2eConfig {
    /// Config for the checkout's own build, working under `.work/<work_name>`.
    pub fn for_checkout(work_name: &str) -> Result<Self, E2eError> {
        let root = checkout_root();
        Self::from_repo(
            &root,
            &checkout_bin_dir(),
            &root.join(".work").join(work_name),
        )
    }

    /// Config for the repository at `repo_root` with the image from `.work/images.json`.
    pub fn from_repo(repo_root: &Path, bin_dir: &Path, work_dir: &Path) -> Result<Self, E2eError> {
        let images_path = repo_root.join(".work/images.json");
        let text = std::fs::read_to_string(&images_path).map_err(|source| E2eError::Io {
            what: "read .work/images.json (run scripts/services.sh first)",
            path: images_path.clone(),
            source,
        })?;
        let images: Value = serde_json::from_str(&text).map_err(|e| E2eError::Setup {
            what: "parse .work/images.json",
            detail: e.to_string(),
        })?;
        let python_image = images
            .get("python")
            .and_then(Value::as_str)
            .ok_or(E2eError::Setup {
                what: "find the python image in .work/images.json",
                detail: "no \"python\" entry; run scripts/services.sh without --no-python".into(),
            })?
            .to_owned();
        let rust_image = images
            .get("rust")
            .and_then(Value::as_str)
            .map(str::to_owned);
        for bin in ["worker", "signer", "keeper"] {
            let path = bin_dir.join(bin);
            if !path.is_file() {
                return Err(E2eError::Setup {
                    what: "find the built binaries",
                    detail: format!(
                        "{} is missing; build them with `cargo build -p worker -p signer -p keeper`",
                        path.display()
                    ),
                });
            }
        }
        // Absolute paths: the binaries and Docker's bind mounts must not depend on a cwd.
        let absolute = |p: &Path| {
            std::path::absolute(p).map_err(|source| E2eError::Io {
                what: "make a path absolute",
                path: p.to_path_buf(),
                source,
            })
        };
        Ok(Self {
            repo_root: absolute(repo_root)?,
            bin_dir: absolute(bin_dir)?,
            work_dir: absolute(work_dir)?,
            python_image,
            rust_image,
        })
    }
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum E2eError {
    /// A file or directory operation failed.
    #[error("could not {what} ({path}): {source}", path = path.display())]
    Io {
        /// The operation.
        what: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The environment or the fixtures are not usable.
    #[error("could not {what}: {detail}")]
    Setup {
        /// The operation.
        what: &'static str,
        /// What went wrong.
        detail: String,
    },
    /// The local chain refused or failed.
    #[error("chain: {0}")]
    Chain(#[from] TestkitError),
    /// A binary exited with an unexpected code or printed an unusable report.
    #[error("{step} failed (exit {code:?}): {detail}")]
    Step {
        /// The step, e.g. `worker feed`.
        step: String,
        /// Its exit code, if it exited.
        code: Option<i32>,
        /// Its stderr tail or the report problem.
        detail: String,
    },
    /// The chain does not show what the scenario must end in.
    #[error("wrong on-chain result: {0}")]
    Mismatch(String),
}

/// What a scenario left on the chain, read back independently of the keeper's report.
#[derive(Debug, Clone)]
pub struct ScenarioResult {
    /// The scenario played.
    pub scenario: Scenario,
    /// The bounty contract deployed for it.
    pub bounty: Address,
    /// The settlement transaction the keeper reported.
    pub tx_hash: B256,
    /// `status()` after settlement.
    pub status: u8,
    /// The settlement event in the transaction's receipt, emitted by the bounty.
    pub event: SettlementEvent,
    /// Wall time of each step.
    pub timings: Vec<(String, Duration)>,
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> E2eError {
    let path = path.to_path_buf();
    move |source| E2eError::Io { what, path, source }
}

fn setup(what: &'static str) -> impl FnOnce(String) -> E2eError {
    move |detail| E2eError::Setup { what, detail }
}

fn step(msg: &str) {
    println!("\n==> {msg}");
}

fn info(msg: &str) {
    println!("    {msg}");
}

fn wall_clock() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Every regular file under `dir`, as (relative path, bytes, executable), sorted.
fn tree_files(dir: &Path) -> Result<Vec<(String, Vec<u8>, bool)>, E2eError> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).map_err(io("list a fixture directory", &d))? {
            let entry = entry.map_err(io("list a fixture directory", &d))?;
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).map_err(io("stat a fixture", &path))?;
            if meta.is_dir() {
                pending.push(path);
            } else if meta.is_file() {
                let rel = path
                    .strip_prefix(dir)
                    .map_err(|e| E2eError::Setup {
                        what: "name a fixture file",
                        detail: e.to_string(),
                    })?
                    .to_string_lossy()
                    .into_owned();
                let data = std::fs::read(&path).map_err(io("read a fixture", &path))?;
                out.push((rel, data, meta.permissions().mode() & 0o111 != 0));
            } else {
                return Err(E2eError::Setup {
                    what: "archive the fixtures",
                    detail: format!("{} is neither a file nor a directory", path.display()),
                });
            }
        }
    }
    out.sort();
    Ok(out)
}

fn tree_digest(dir: &Path) -> Result<Sha256Digest, E2eError> {
    tree_digest_within(dir, Stack::Python.tree_limits()?)
}

fn tree_digest_within(dir: &Path, limits: TreeLimits) -> Result<Sha256Digest, E2eError> {
    digest_directory(dir, limits)
        .map(|s| s.digest)
        .map_err(|e| E2eError::Setup {
            what: "digest a fixture tree",
            detail: format!("{}: {e}", dir.display()),
        })
}

/// The runner manifest: the python image, the benchmark's digest and limits that fit a
/// six-test unittest run with room to spare but stop anything runaway.
fn manifest(image: &str, benchmark_digest: Sha256Digest) -> Value {
    let mut m = sample_manifest();
    let fields = [
        ("image", json!(image)),
        ("command", json!(COMMAND)),
        ("workdir", json!("/workspace")),
        ("benchmark_digest", json!(benchmark_digest.to_string())),
        ("timeout_seconds", json!(60)),
        ("cpu_millis", json!(1000)),
        ("memory_bytes", json!(256u64 << 20)),
        ("pids_limit", json!(32)),
        ("max_output_bytes", json!(256u64 << 10)),
        ("tmpfs_bytes", json!(64u64 << 20)),
        ("max_source_bytes", json!(1u64 << 20)),
        ("max_source_files", json!(100)),
        ("max_benchmark_bytes", json!(1u64 << 20)),
        ("max_benchmark_files", json!(100)),
        ("platform", json!("linux/amd64")),
        ("test_seed", json!(1)),
    ];
    for (k, v) in fields {
        m[k] = v;
    }
    m
}

/// Deploys a `TestBounty` committing to the job `jp` describes (its five terms hashes,
/// submission and evidence hashes, round, solver, verifier set and `threshold`), binds `jp` to
/// the new address and returns the bounty's parameters, the bounty, the job and its validated
/// form. The committed hashes do not depend on the contract address, so a draft job (address
/// still the fixture's) gives the values to deploy with. One definition for every driver
/// (`run_scenario`, `dedicated`, `chaos`), so they cannot drift from the contract's checks.
pub(crate) async fn deploy_for_job(
    kit: &Testkit,
    jp: &mut JobParams,
    solver: Address,
    verifiers: &[Address],
    threshold: u8,
    now: u64,
) -> Result<
    (
        BountyParams,
        chain_testkit::DeployedBounty,
        Value,
        verifier_sdk::ValidatedJob,
    ),
    E2eError,
> {
    let draft = validate_job(&job_value(jp), now).map_err(|e| E2eError::Setup {
        what: "validate the draft job",
        detail: e.to_string(),
    })?;
    let mut params = BountyParams::new(verifiers.to_vec(), jp.expires_at);
    params.bounty_id = b256(draft.bounty_id());
    params.round = jp.round;
    params.solver = solver;
    params.submission_hash = b256(draft.submission_hash());
    params.evidence_hash = b256(draft.evidence_hash());
    params.policy_hash = b256(draft.policy_hash());
    params.terms_hash = b256(draft.terms_hash());
    params.acceptance_criteria_hash = b256(draft.acceptance_criteria_hash());
    params.benchmark_hash = b256(draft.benchmark_hash());
    params.evidence_schema_hash = b256(draft.evidence_schema_hash());
    params.threshold = threshold;
    let bounty = kit.deploy_bounty(&params).await?;
    jp.bounty_contract = bounty.address().to_string();
    let job = job_value(jp);
    let validated = validate_job(&job, now).map_err(|e| E2eError::Setup {
        what: "validate the job",
        detail: e.to_string(),
    })?;
    Ok((params, bounty, job, validated))
}

/// The settlement events the bounty at `bounty` emitted in the mined transaction `tx_hash`,
/// read from its receipt; a missing receipt, a reverted transaction or an undecodable
/// settlement log is a mismatch. Only logs of the bounty itself count: an event from another
/// contract is no evidence of payment.
pub(crate) async fn settlement_events(
    kit: &Testkit,
    tx_hash: B256,
    bounty: Address,
) -> Result<Vec<SettlementEvent>, E2eError> {
    let receipt = kit
        .provider()
        .get_transaction_receipt(tx_hash)
        .await
        .map_err(|e| E2eError::Mismatch(format!("no receipt for {tx_hash}: {e}")))?
        .ok_or_else(|| E2eError::Mismatch(format!("no receipt for {tx_hash}")))?;
    if !receipt.status() {
        return Err(E2eError::Mismatch(format!("{tx_hash} reverted")));
    }
    receipt
        .inner
        .logs()
        .iter()
        .filter(|l| l.address() == bounty)
        .filter_map(|l| decode_settlement_event(l.topics(), &l.data().data))
        .collect::<Result<_, _>>()
        .map_err(|e| E2eError::Mismatch(format!("undecodable settlement log: {e}")))
}

fn b256(b: verifier_sdk::Bytes32) -> B256 {
    B256::from(*b.as_bytes())
}

/// Where [`run_binary`] keeps each run's output, once [`capture_logs`] asked for it, and the
/// secrets the run handed the binaries, for the scan to look for.
struct LogCapture {
    dir: PathBuf,
    runs: AtomicUsize,
    secrets: std::sync::Mutex<Vec<logscan::Secret>>,
}

static LOG_CAPTURE: OnceLock<LogCapture> = OnceLock::new();

/// From now on in this process, each binary run through a route's steps (`worker feed`,
/// `serve` and `reproduce`, `signer history init` and `sign`, `keeper relay`) leaves its stdout
/// and stderr in `dir` as `NN-<step>.stdout` / `.stderr`, and every key handed to one is
/// remembered: what [`scan_captured`] reads (issue #46 item 5: JSON lines, no key in them).
/// False when an earlier call already chose a directory. One directory per process: the
/// suite runs under nextest, one process per test.
pub fn capture_logs(dir: &Path) -> bool {
    LOG_CAPTURE
        .set(LogCapture {
            dir: dir.to_owned(),
            runs: AtomicUsize::new(0),
            secrets: std::sync::Mutex::new(Vec::new()),
        })
        .is_ok()
}

/// Under [`capture_logs`], remembers `value`, a key handed to a binary through `var`.
fn capture_secret(var: &str, value: &str) {
    let Some(capture) = LOG_CAPTURE.get() else {
        return;
    };
    if let (Some(secret), Ok(mut secrets)) = (
        logscan::Secret::key(format!("key handed through ${var}"), value),
        capture.secrets.lock(),
    ) && !secrets.contains(&secret)
    {
        secrets.push(secret);
    }
}

/// The scan of everything kept under [`capture_logs`] against every key handed out (`None`
/// without a capture). A test then requires its minimum of log lines per process.
pub fn scan_captured() -> Option<Result<logscan::LogScan, logscan::ScanError>> {
    let capture = LOG_CAPTURE.get()?;
    Some(logscan::LogScan::dir(&capture.dir, &captured_secrets()))
}

/// The keys handed to binaries so far under [`capture_logs`].
pub fn captured_secrets() -> Vec<logscan::Secret> {
    LOG_CAPTURE
        .get()
        .and_then(|c| c.secrets.lock().ok().map(|s| s.clone()))
        .unwrap_or_default()
}

/// Under [`capture_logs`], where this step's files go: `<dir>/NN-<step>` (the extension is
/// added per file).
fn capture_prefix(label: &str) -> Option<PathBuf> {
    let capture = LOG_CAPTURE.get()?;
    let n = capture.runs.fetch_add(1, Ordering::Relaxed);
    let step: String = label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    Some(capture.dir.join(format!("{n:02}-{step}")))
}

/// Where a long-running binary's stderr goes: its capture file under [`capture_logs`], else
/// `otherwise`.
pub(crate) fn stderr_path(label: &str, otherwise: PathBuf) -> PathBuf {
    capture_prefix(label).map_or(otherwise, |p| p.with_extension("stderr"))
}

/// Under [`capture_logs`], a signer's or keeper's step also writes its `--metrics-file` beside
/// its output (`NN-<step>.prom`), for the test to check what a successful run counts.
fn capture_metrics_args(label: &str, prefix: Option<&Path>) -> Vec<String> {
    match prefix {
        Some(prefix) if label == "signer sign" || label == "keeper relay" => {
            vec![
                s("--metrics-file"),
                s(prefix.with_extension("prom").display()),
            ]
        }
        _ => Vec::new(),
    }
}

fn keep_output(prefix: Option<&Path>, output: &std::process::Output) -> Result<(), E2eError> {
    let Some(prefix) = prefix else {
        return Ok(());
    };
    for (stream, bytes) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
        let path = prefix.with_extension(stream);
        std::fs::write(&path, bytes).map_err(io("keep a step's output", &path))?;
    }
    Ok(())
}

/// Runs `cmd` (a binary of a route's step outside [`run_binary`]) to its end with JSON logs,
/// and keeps its output under [`capture_logs`] as step `label`.
pub(crate) async fn output_kept(
    label: &str,
    cmd: &mut tokio::process::Command,
) -> Result<std::process::Output, E2eError> {
    let prefix = capture_prefix(label);
    let output = cmd
        .envs(logscan::JSON_LOG_ENV)
        .output()
        .await
        .map_err(|e| E2eError::Step {
            step: label.to_owned(),
            code: None,
            detail: format!("could not start: {e}"),
        })?;
    keep_output(prefix.as_deref(), &output)?;
    Ok(output)
}

/// `program args` with `env` set, announced on stderr: stdin closed, stdout and stderr piped,
/// killed when its handle drops (a step that times out leaves no process behind).
fn piped_command<K: AsRef<OsStr>, V: AsRef<OsStr>>(
    program: &Path,
    args: &[String],
    env: impl IntoIterator<Item = (K, V)>,
) -> tokio::process::Command {
    info(&format!(
        "$ {} {}",
        program.file_name().unwrap_or_default().to_string_lossy(),
        args.join(" ")
    ));
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd.envs(logscan::JSON_LOG_ENV).envs(env);
    cmd
}

/// Runs one binary, prints its stderr tail on failure, returns its stdout parsed as JSON.
async fn run_binary(
    label: &str,
    program: &Path,
    args: &[String],
    env: Option<(&str, &str)>,
    ok_codes: &[i32],
) -> Result<Value, E2eError> {
    let prefix = capture_prefix(label);
    if let Some((var, value)) = env {
        capture_secret(var, value);
    }
    let mut cmd = piped_command(program, args, env);
    cmd.args(capture_metrics_args(label, prefix.as_deref()));
    let fail = |code, detail| E2eError::Step {
        step: label.to_owned(),
        code,
        detail,
    };
    let output = tokio::time::timeout(STEP_TIMEOUT, cmd.output())
        .await
        .map_err(|_| fail(None, format!("no exit within {STEP_TIMEOUT:?}")))?
        .map_err(|e| fail(None, format!("could not start {}: {e}", program.display())))?;
    keep_output(prefix.as_deref(), &output)?;
    let code = output.status.code();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail: String = {
        let lines: Vec<&str> = stderr.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    };
    if !code.is_some_and(|c| ok_codes.contains(&c)) {
        let stdout = String::from_utf8_lossy(&output.stdout);
        return Err(fail(code, format!("{tail}\n{stdout}")));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| {
        fail(
            code,
            format!("stdout is not a JSON report ({e}); stderr: {tail}"),
        )
    })
}

fn s(v: impl std::fmt::Display) -> String {
    v.to_string()
}

/// The addresses of the dev keys [`VERIFIER_KEYS`], the bounty's verifiers on every route.
fn verifier_addresses() -> Result<Vec<Address>, E2eError> {
    Ok(VERIFIER_KEYS
        .iter()
        .map(|i| dev_signer(*i).map(|s| s.address()))
        .collect::<Result<Vec<_>, _>>()?)
}

/// The commit a solution's archive is served at: derived from its tree's digest, so two
/// solutions never share an archive URL.
fn archive_commit(source_digest: &Sha256Digest) -> String {
    source_digest
        .to_string()
        .trim_start_matches("sha256:")
        .chars()
        .take(40)
        .collect()
}

/// The job of a fresh bounty: `solver`'s tree at `source_digest`, served as
/// `solver-org/{repo}` at `commit`, for `verifiers`, open for an hour from `now`; the caller
/// sets the manifest.
fn job_params(
    bounty_id: B256,
    solver: Address,
    verifiers: &[Address],
    now: u64,
    repo: &str,
    commit: &str,
    source_digest: &Sha256Digest,
) -> JobParams {
    JobParams {
        bounty_id: bounty_id.to_string(),
        round: 1,
        solver: solver.to_string(),
        verifiers: verifiers
            .iter()
            .map(|a| a.to_string().to_lowercase())
            .collect(),
        expires_at: now + 3600,
        artifact_reference: format!("https://github.com/solver-org/{repo}/commit/{commit}"),
        source_snapshot_digest: source_digest.to_string(),
        ..JobParams::default()
    }
}

/// `signer sign` as verifier dev key `key` on `candidates`, with the feed and chain at
/// `(api, rpc)`, writing attestations under `att`; its history is initialised first, as an
/// operator's install does. The signer's JSON report.
pub(crate) async fn sign_as_dev_key(
    signer_bin: &Path,
    key: usize,
    candidates: &Path,
    (api, rpc): (&str, &str),
    att: &Path,
) -> Result<Value, E2eError> {
    let signer = dev_signer(key)?;
    init_signer_history(signer_bin, att, signer.address())?;
    let args = signer_sign_args(candidates, api, rpc, signer.address(), att);
    let key_hex = DEV_KEYS.get(key).copied().unwrap_or_default();
    run_binary(
        "signer sign",
        signer_bin,
        &args,
        Some((VERIFIER_KEY_ENV, key_hex)),
        &[0],
    )
    .await
}

/// `keeper relay` with `args` and the gas key `key_hex`; the report of the first job it took
/// and that job's settlement transaction (an error when either is missing).
pub(crate) async fn relay_first_job(
    keeper_bin: &Path,
    args: &[String],
    key_hex: &str,
) -> Result<(Value, B256), E2eError> {
    let report = run_binary(
        "keeper relay",
        keeper_bin,
        args,
        Some((KEEPER_KEY_ENV, key_hex)),
        &[0],
    )
    .await?;
    let missing = |what: &str| E2eError::Step {
        step: "keeper relay".into(),
        code: Some(0),
        detail: format!("report has no {what}: {report}"),
    };
    let job = report
        .pointer("/jobs/0")
        .cloned()
        .ok_or_else(|| missing("job"))?;
    let tx_hash = job
        .get("tx_hash")
        .and_then(Value::as_str)
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| missing("tx hash"))?;
    Ok((job, tx_hash))
}

/// `signer sign` of the candidates in `candidates` as `signer` (its key in
/// [`VERIFIER_KEY_ENV`]), attestations into `out`, with a JSON report: every route signs so.
fn signer_sign_args(
    candidates: &Path,
    api: &str,
    rpc: &str,
    signer: Address,
    out: &Path,
) -> Vec<String> {
    vec![
        s("sign"),
        s("--candidates"),
        s(candidates.display()),
        s("--api"),
        api.to_owned(),
        s("--rpc"),
        rpc.to_owned(),
        s("--signer"),
        signer.to_string(),
        s("--key-env"),
        s(VERIFIER_KEY_ENV),
        s("--out"),
        s(out.display()),
        s("--history"),
        s(signer_history_dir(out, signer).display()),
        s("--json"),
    ]
}

/// The signing history of `signer` for the attestations in `out`: one per key beside `out`,
/// kept across the scenario's signing runs as an operator keeps it across cycles.
fn signer_history_dir(out: &Path, signer: Address) -> PathBuf {
    out.parent().unwrap_or(out).join(format!(
        "signer-history-{}",
        signer.to_string().to_lowercase()
    ))
}

/// Creates `signer`'s signing history for `out` the first time (`signer history init`, the
/// operator's one explicit step; `signer sign` never creates one).
fn init_signer_history(signer_bin: &Path, out: &Path, signer: Address) -> Result<(), E2eError> {
    let dir = signer_history_dir(out, signer);
    if dir.join("history.sqlite").is_file() {
        return Ok(());
    }
    let prefix = capture_prefix("signer history init");
    let mut cmd = std::process::Command::new(signer_bin);
    cmd.args([
        OsStr::new("history"),
        OsStr::new("init"),
        OsStr::new("--history"),
    ])
    .arg(&dir);
    cmd.envs(logscan::JSON_LOG_ENV);
    let output = cmd
        .output()
        .map_err(io("run signer history init", signer_bin))?;
    keep_output(prefix.as_deref(), &output)?;
    if !output.status.success() {
        return Err(E2eError::Step {
            step: "signer history init".into(),
            code: output.status.code(),
            detail: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    Ok(())
}

/// `worker <command>` (`feed` or `serve`) of the feed at `api` on base-mainnet for every
/// verifier: the arguments every route's worker starts with; a caller adds the rest.
fn worker_feed_args(command: &str, api: &str, verifiers: &[Address]) -> Vec<String> {
    let mut args = vec![
        s(command),
        s("--api"),
        api.to_owned(),
        s("--network"),
        s("base-mainnet"),
    ];
    for v in verifiers {
        args.extend([s("--verifier"), v.to_string()]);
    }
    args
}

/// `keeper relay` of `candidates` with every attestation directory (its key in
/// [`KEEPER_KEY_ENV`]), the gas bounds and one confirmation every route relays with, and a JSON
/// report; a caller adds what only it needs.
fn keeper_relay_args<'a>(
    candidates: &Path,
    attestations: impl IntoIterator<Item = &'a PathBuf>,
    api: &str,
    rpc: &str,
    state_dir: &Path,
) -> Vec<String> {
    let mut args = vec![s("relay"), s("--candidates"), s(candidates.display())];
    for att in attestations {
        args.extend([s("--attestations"), s(att.display())]);
    }
    args.extend([
        s("--api"),
        api.to_owned(),
        s("--rpc"),
        rpc.to_owned(),
        s("--key-env"),
        s(KEEPER_KEY_ENV),
        s("--state-dir"),
        s(state_dir.display()),
        s("--max-gas"),
        s(2_000_000),
        s("--max-fee-per-gas"),
        s(100_000_000_000u64),
        s("--confirmations"),
        s(1),
        s("--json"),
    ]);
    args
}

/// The loopback feed serving `job`, with the solution's codeload-style archive at the
/// commit the job names and the benchmark's at [`BENCHMARK_COMMIT`].
async fn serve_job_archives(
    job: Value,
    repo: &str,
    commit: &str,
    solution: &Path,
    benchmark: &Path,
) -> Result<ArchiveServer, E2eError> {
    let server = ArchiveServer::start(json!([job]))
        .await
        .map_err(setup("start the loopback server"))?;
    server.add_archive(
        &format!("/solver-org/{repo}/tar.gz/{commit}"),
        &format!("{repo}-{commit}"),
        "",
        &tree_files(solution)?,
    )?;
    server.add_archive(
        &format!("/bounty-org/benchmarks/tar.gz/{BENCHMARK_COMMIT}"),
        &format!("benchmarks-{BENCHMARK_COMMIT}"),
        BENCHMARK_SUBDIR,
        &tree_files(benchmark)?,
    )?;
    Ok(server)
}

fn fresh_dir(path: &Path) -> Result<(), E2eError> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("clean the work directory", path)(e)),
    }
    std::fs::create_dir_all(path).map_err(io("create the work directory", path))
}

/// Plays `scenario` of the Python bounty end to end; errors unless the chain ends in the
/// scenario's settlement.
pub async fn run_scenario(cfg: &E2eConfig, scenario: Scenario) -> Result<ScenarioResult, E2eError> {
    run_bounty(cfg, Stack::Python, scenario).await
}

/// Plays `scenario` of `stack`'s bounty end to end; errors unless the chain ends in the
/// scenario's settlement.
// One function on purpose: it reads top to bottom as the pipeline it plays (feed, worker,
// two signers, keeper, chain), each step timed; split, the order would be spread over files.
#[allow(clippy::too_many_lines)]
pub async fn run_bounty(
    cfg: &E2eConfig,
    stack: Stack,
    scenario: Scenario,
) -> Result<ScenarioResult, E2eError> {
    let started = Instant::now();
    let mut timings = Vec::new();
    let mut lap = Instant::now();
    let mut mark = |name: &str| {
        timings.push((name.to_owned(), lap.elapsed()));
        lap = Instant::now();
    };
    let label = match stack {
        Stack::Python => scenario.name().to_owned(),
        other => format!("{} {}", other.name(), scenario.name()),
    };
    let work = match stack {
        Stack::Python => cfg.work_dir.join(scenario.name()),
        other => cfg
            .work_dir
            .join(format!("{}-{}", other.name(), scenario.name())),
    };
    fresh_dir(&work)?;
    let fixtures = stack.fixtures(&cfg.repo_root);
    let solution = fixtures.join(scenario.solution_dir());
    let benchmark = fixtures.join("benchmark");
    let image = stack.image(cfg)?;

    step(&format!(
        "[{}] fixtures: {} against the benchmark",
        label,
        scenario.solution_dir()
    ));
    let source_digest = tree_digest_within(&solution, stack.tree_limits()?)?;
    let benchmark_digest = tree_digest_within(&benchmark, stack.tree_limits()?)?;
    info(&format!("source digest    {source_digest}"));
    info(&format!("benchmark digest {benchmark_digest}"));
    info(&format!("image            {image}"));

    step(&format!(
        "[{}] deploy TestBounty (verifiers = dev keys {VERIFIER_KEYS:?}, threshold 2)",
        label
    ));
    let kit = Testkit::connect().await?;
    let now = kit.latest_timestamp().await?.max(wall_clock());
    let verifiers = verifier_addresses()?;
    let solver = PrivateKeySigner::random().address();
    // A fresh id per run so reruns never meet an earlier run's bounty.
    let bounty_id = keccak256(format!("e2e:{label}:{now}:{solver}"));
    // The source commit only names the archive URL; deriving it from the digest keeps the
    // good and bad solutions apart.
    let commit = archive_commit(&source_digest);
    let repo = format!("{}-{}", stack.repo_stem(), scenario.solution_dir());
    let mut jp = JobParams {
        manifest: stack.manifest(image, benchmark_digest),
        ..job_params(
            bounty_id,
            solver,
            &verifiers,
            now,
            &repo,
            &commit,
            &source_digest,
        )
    };
    let (params, bounty, job, validated) =
        deploy_for_job(&kit, &mut jp, solver, &verifiers, 2, now).await?;
    let solver_balance_before = kit.balance(solver).await?;
    info(&format!("bounty   {}", bounty.address()));
    info(&format!("job id   {}", validated.job_id()));
    info(&format!("solver   {solver}"));
    info(&format!("reward   {} wei escrowed", params.reward));
    info(&format!("status   {} (Submitted)", bounty.status().await?));
    mark("deploy");

    step(&format!(
        "[{}] serve the job feed and codeload-style archives on loopback",
        label
    ));
    let server = serve_job_archives(job, &repo, &commit, &solution, &benchmark).await?;
    info(&format!("api + archives at {}", server.url()));

    let dirs = |name: &str| work.join(name);
    for d in [
        "candidates",
        "staging",
        "scratch",
        "att-1",
        "att-2",
        "keeper-state",
    ] {
        std::fs::create_dir_all(dirs(d)).map_err(io("create a work directory", &dirs(d)))?;
    }
    let bin = |name: &str| cfg.bin_dir.join(name);

    step(&format!(
        "[{}] worker feed: fetch, stage, run the benchmark in the sandbox",
        label
    ));
    let mut args = worker_feed_args("feed", server.url(), &verifiers);
    args.extend([
        s("--out"),
        s(dirs("candidates").display()),
        s("--archive-base"),
        server.url().to_owned(),
        s("--staging-root"),
        s(dirs("staging").display()),
        s("--work-dir"),
        s(dirs("scratch").display()),
        s("--json"),
    ]);
    let report = run_binary("worker feed", &bin("worker"), &args, None, &[0]).await?;
    info(&format!(
        "report: {}",
        compact(&report, &["counts", "jobs"])
    ));
    let candidate = dirs("candidates").join(verifier_sdk::candidate_file_name(validated.job_id()));
    let candidate: Value = std::fs::read(&candidate)
        .map_err(io("read the candidate", &candidate))
        .and_then(|b| {
            serde_json::from_slice(&b).map_err(|e| E2eError::Step {
                step: "worker feed".into(),
                code: Some(0),
                detail: format!("candidate is not JSON: {e}"),
            })
        })?;
    info(&format!(
        "sandbox run: {} (stdout {} bytes, stderr {} bytes)",
        candidate
            .pointer("/evidence/outcome")
            .unwrap_or(&Value::Null),
        candidate
            .pointer("/evidence/stdout/bytes")
            .unwrap_or(&Value::Null),
        candidate
            .pointer("/evidence/stderr/bytes")
            .unwrap_or(&Value::Null),
    ));
    mark("worker feed");

    for key in VERIFIER_KEYS {
        step(&format!(
            "[{}] signer sign as verifier dev key {key} (key via ${VERIFIER_KEY_ENV})",
            label
        ));
        let report = sign_as_dev_key(
            &bin("signer"),
            key,
            &dirs("candidates"),
            (server.url(), kit.url()),
            &dirs(&format!("att-{key}")),
        )
        .await?;
        info(&format!(
            "report: {}",
            compact(&report, &["counts", "candidates"])
        ));
        mark(&format!("signer sign (key {key})"));
    }

    step(&format!(
        "[{}] keeper relay with dev key {KEEPER_KEY} (key via ${KEEPER_KEY_ENV})",
        label
    ));
    let keeper = dev_signer(KEEPER_KEY)?;
    // Other suites spend from the shared dev accounts; topping up keeps this run independent.
    kit.set_balance(keeper.address(), U256::from(10u128.pow(21)))
        .await?;
    let args = keeper_relay_args(
        &dirs("candidates"),
        &[dirs("att-1"), dirs("att-2")],
        server.url(),
        kit.url(),
        &dirs("keeper-state"),
    );
    let keeper_key = DEV_KEYS.get(KEEPER_KEY).copied().unwrap_or_default();
    let (job_report, tx_hash) = relay_first_job(&bin("keeper"), &args, keeper_key).await?;
    let keeper_status = job_report
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("?");
    info(&format!(
        "keeper: {keeper_status}, tx {tx_hash}, block {}",
        job_report.get("block_number").unwrap_or(&Value::Null)
    ));
    mark("keeper relay");

    step(&format!("[{}] read the result back from the chain", label));
    let events = settlement_events(&kit, tx_hash, bounty.address()).await?;
    let [event] = events.as_slice() else {
        return Err(E2eError::Mismatch(format!(
            "expected one settlement event from the bounty in {tx_hash}, found {}",
            events.len()
        )));
    };
    let chain_status = bounty.status().await?;
    let solver_balance_after = kit.balance(solver).await?;
    match (scenario, event) {
        (Scenario::Settled, SettlementEvent::Settled(ev)) => {
            info(&format!(
                "BountySettled: bountyId {} round {} solver {} verificationHash {}",
                ev.bountyId, ev.round, ev.solver, ev.verificationHash
            ));
            if ev.bountyId != params.bounty_id
                || ev.round != params.round
                || ev.solver != solver
                || ev.submissionHash != params.submission_hash
            {
                return Err(E2eError::Mismatch(format!(
                    "BountySettled does not match the bounty: {ev:?}"
                )));
            }
            if chain_status != status::SETTLED {
                return Err(E2eError::Mismatch(format!(
                    "status is {chain_status}, expected {} (Settled)",
                    status::SETTLED
                )));
            }
            if solver_balance_after != solver_balance_before + params.reward {
                return Err(E2eError::Mismatch(format!(
                    "solver balance {solver_balance_after}, expected {} + {}",
                    solver_balance_before, params.reward
                )));
            }
            info(&format!(
                "status {chain_status} (Settled); solver received {} wei",
                params.reward
            ));
        }
        (Scenario::Rejected, SettlementEvent::Rejected(ev)) => {
            info(&format!(
                "SubmissionRejected: verificationHash {}",
                ev.verificationHash
            ));
            if chain_status == status::SETTLED || chain_status == status::SUBMITTED {
                return Err(E2eError::Mismatch(format!(
                    "status is {chain_status} after a rejection"
                )));
            }
            if solver_balance_after != solver_balance_before {
                return Err(E2eError::Mismatch("a rejected solver was paid".into()));
            }
            info(&format!(
                "status {chain_status} (no longer Submitted); solver not paid"
            ));
        }
        (_, other) => {
            return Err(E2eError::Mismatch(format!(
                "scenario {} ended in {other:?}",
                scenario.name()
            )));
        }
    }
    mark("read back");
    timings.push(("total".into(), started.elapsed()));
    Ok(ScenarioResult {
        scenario,
        bounty: bounty.address(),
        tx_hash,
        status: chain_status,
        event: event.clone(),
        timings,
    })
}

/// The named fields of a JSON report, on one line, for progress output.
fn compact(report: &Value, keys: &[&str]) -> String {
    let mut out = serde_json::Map::new();
    for k in keys {
        if let Some(v) = report.get(*k) {
            out.insert((*k).to_owned(), summarize(v));
        }
    }
    Value::Object(out).to_string()
}

/// Keeps the scalar fields a reader wants (status, verdict, codes) and drops long blobs.
fn summarize(v: &Value) -> Value {
    const KEEP: [&str; 9] = [
        "status",
        "verdict",
        "passed",
        "code",
        "detail",
        "exit_code",
        "tx_hash",
        "job_id",
        "reason",
    ];
    match v {
        Value::Array(items) => Value::Array(items.iter().map(summarize).collect()),
        Value::Object(map) if map.keys().any(|k| KEEP.contains(&k.as_str())) => Value::Object(
            map.iter()
                .filter(|(k, _)| KEEP.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}
