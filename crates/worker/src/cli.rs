//! The `worker` command line, in two layers (as ripgrep's low-level and high-level
//! arguments): [`Cli`] is what clap parses, and [`Cli::into_command`] turns it into a checked
//! [`Command`] whose values are already typed (limits, stage kind, network, verifier
//! addresses), so no handler parses a string late. Every refusal here is a usage error
//! (exit 2) printed by clap. Parsing only; each command is carried out by its handler in
//! [`crate::commands`].
//!
//! The flag-style modes take their positional values right after the flag
//! (`--snapshot-directory <dir> <max-bytes> <max-files>`), as the protocol's surfaces name them.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgGroup, CommandFactory, Parser, Subcommand};
use verifier_sdk::{Address, Network, TreeLimits};

use worker_store::stage::{ParseStageKindError, StageKind};

/// How `worker serve` and `worker gc --images` treat images.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct ImageArgs {
    /// Remove images when those this worker pulled (its record: STATE/images.json) take more
    /// than SIZE (20GiB, 512MiB): least recently used first, never one a listed job needs or
    /// one used within --image-keep-recent, never one the worker did not pull (unless
    /// --gc-foreign-images), never one a container uses. With `serve --pull` it also bounds
    /// what a batch pulls: an image is pulled only when it fits beside the batch's others (the
    /// oldest waiting job's image first; its jobs wait otherwise). Default: no removal.
    #[arg(long, value_name = "SIZE", value_parser = worker_serve::images::parse_size)]
    pub image_budget: Option<u64>,
    /// Count and remove images this worker did not pull too (the operator's own images).
    #[arg(long, requires = "image_budget")]
    pub gc_foreign_images: bool,
    /// Free space the engine's data root must have before a pull; otherwise the pull is not
    /// made and its jobs wait for the next poll (not counted as attempts). When it cannot be
    /// read (a remote engine) no pull is made unless this is 0, which turns the check off.
    #[arg(long, value_name = "SIZE", default_value = "2GiB",
          value_parser = worker_serve::images::parse_size)]
    pub image_min_free: u64,
    /// An image a job used this recently is kept like a needed one: a number and a unit
    /// s, m, h, d or w.
    #[arg(long, value_name = "AGE", default_value = "15m", value_parser = worker_store::gc::parse_age)]
    pub image_keep_recent: Duration,
}

/// Arguments of `worker gc`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct GcArgs {
    /// Remove entries older than this: a number and a unit s, m, h, d or w (7d, 12h).
    /// Required unless --images.
    #[arg(long, value_parser = worker_store::gc::parse_age, required_unless_present = "images")]
    pub older_than: Option<Duration>,
    /// Collect images instead of staged trees: those over --image-budget, by the pull record
    /// of the `worker serve` whose --state is given, with serve's rules.
    #[arg(long, requires_all = ["state", "image_budget"], conflicts_with = "older_than")]
    pub images: bool,
    /// With --images: the state directory of `worker serve` (its images.json).
    #[arg(long, requires = "images")]
    pub state: Option<PathBuf>,
    /// With --images: the image budget and rules.
    #[command(flatten)]
    pub image: ImageArgs,
    /// Staging root (default: $REGRESSION_SANDBOX_STAGING_ROOT, else the rehearsal store
    /// worker-rehearse-<uid> in the system temp dir).
    #[arg(long)]
    pub staging_root: Option<PathBuf>,
    /// Print what would be removed, and remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `worker request`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct RequestArgs {
    /// The source tree's snapshot digest (sha256:<64 hex>, as --snapshot-directory or
    /// --stage-regression-input print it).
    #[arg(long)]
    pub source_digest: String,
    /// The runner manifest (JSON).
    #[arg(long)]
    pub manifest: PathBuf,
    /// The benchmark's digest, replacing the manifest's (needed when the manifest still has the
    /// sha256:000…0 placeholder).
    #[arg(long)]
    pub benchmark_digest: Option<String>,
    /// The source commit, as https://github.com/<owner>/<repo>/commit/<40 hex> (a placeholder
    /// by default).
    #[arg(long)]
    pub source_commit: Option<String>,
    /// How long the job stays valid: a number and a unit s, m, h, d or w.
    #[arg(long, default_value = "24h", value_parser = worker_store::gc::parse_age)]
    pub expires_in: Duration,
    /// Write the request here instead of stdout.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Arguments of `worker completions`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell. Install, e.g.:
    /// `worker completions bash > ~/.local/share/bash-completion/completions/worker`.
    pub shell: clap_complete::Shell,
}

/// The parsed command line, before its values are checked.
#[derive(Debug, Parser)]
#[command(
    name = "worker",
    version = cli_support::VERSION,
    about = "No-secrets regression runner: stages content-addressed trees and runs them in a \
             bounded sandbox.",
    group(ArgGroup::new("mode").multiple(false)),
)]
pub struct Cli {
    /// Print the directory digest of DIR as JSON {digest, file_count, total_bytes}.
    #[arg(long, num_args = 3, value_names = ["DIR", "MAX_BYTES", "MAX_FILES"], group = "mode")]
    pub snapshot_directory: Option<Vec<OsString>>,

    /// Copy DIR into the content-addressed store under STAGING_ROOT (KIND is `source` or
    /// `benchmark`) and print JSON {kind, path, snapshot}.
    #[arg(
        long,
        num_args = 5,
        value_names = ["KIND", "DIR", "STAGING_ROOT", "MAX_BYTES", "MAX_FILES"],
        group = "mode"
    )]
    pub stage_regression_input: Option<Vec<OsString>>,

    /// Run the job in REQUEST (`{"job": …}`) on its staged trees under
    /// $REGRESSION_SANDBOX_STAGING_ROOT and print the outcome as JSON.
    #[arg(long, value_name = "REQUEST", group = "mode")]
    pub run_regression: Option<PathBuf>,

    /// Re-check a candidate (`{"job", "current_job", "outcome"[, "evidence"]}`) the way the
    /// signer does, without any chain or key; prints `ok` (as the reference worker does) or
    /// exits 4 with the reason on stderr.
    #[arg(long, value_name = "REQUEST", group = "mode")]
    pub validate_regression_candidate: Option<PathBuf>,

    /// With --validate-regression-candidate: print the check as a JSON object
    /// (agent-bounties/worker-candidate-check-v1) instead of `ok`.
    #[arg(long)]
    pub json: bool,

    /// With --run-regression: pull the image by its pinned digest when it is not present.
    #[arg(long)]
    pub pull: bool,

    /// With --run-regression: the OCI runtime every container runs under: runc (the engine's default, asked for by
    /// name) or runsc (gVisor, registered with the engine as `runsc`; docs/operators.md "A
    /// second kernel"). An engine that does not offer it ends each run without a verdict
    /// (runtime_unavailable); there is no fallback.
    #[arg(long, value_enum, value_name = "RUNTIME")]
    pub oci_runtime: Option<OciRuntimeArg>,

    /// With --run-regression: also write the evidence record to this path.
    #[arg(long, value_name = "PATH")]
    pub evidence: Option<PathBuf>,

    /// With --run-regression: write an in-toto Statement v1 (test-result predicate) of the
    /// verdict to this path; nothing is written without a verdict.
    #[arg(long, value_name = "FILE")]
    pub in_toto: Option<PathBuf>,

    /// Subcommands.
    #[command(subcommand)]
    pub command: Option<Subcommands>,

    /// Show no progress on stderr (it is also hidden when stderr is not a terminal).
    #[arg(long, short = 'q', global = true)]
    pub quiet: bool,

    /// Log lines on stderr as text (the default) or json: one object per line with
    /// timestamp, level, target, message and the event's fields (job ids among them), for a
    /// log shipper. Without the flag, $VERIFIER_LOG_FORMAT (json or text) decides.
    #[arg(long, global = true, value_enum, value_name = "FORMAT")]
    pub log_format: Option<LogFormatArg>,
}

/// Subcommands of `worker`.
#[derive(Debug, Subcommand)]
pub enum Subcommands {
    /// Print the exact container configuration and limits a request would run with,
    /// without running anything.
    Plan {
        /// The request file, `{"job": …}`.
        request: PathBuf,
        /// Staging root (default: $REGRESSION_SANDBOX_STAGING_ROOT, else rehearse's private
        /// store in the system temp dir, so a plan after a rehearsal finds its trees).
        #[arg(long)]
        staging_root: Option<PathBuf>,
        /// Print agent-bounties/worker-plan-v2 JSON instead of text.
        #[arg(long)]
        json: bool,
        /// The OCI runtime to plan for, as a run with the same --oci-runtime gets it (under
        /// runsc the pids limit is gVisor's `--ulimit nproc` plus a host backstop).
        #[arg(long, value_enum, value_name = "RUNTIME", default_value = "runc")]
        oci_runtime: OciRuntimeArg,
    },
    /// Fetch the platform's job feed, run every job committed to our verifier(s), and write
    /// candidate files and their manifest.
    Feed(FeedArgs),
    /// Rehearse a runner manifest on local trees, with no job and no chain: the digests a
    /// bounty would commit, the exact sandbox, and the verdict explained. Exits 0 fit, 3 no
    /// verdict, 4 not what a bounty needs (or input that cannot be rehearsed), 9 the benchmark
    /// lets a non-solution pass (--adversarial: a stub passed), 2 usage.
    Rehearse(RehearseArgs),
    /// Re-run a verdict from public data and say whether it holds: a job from the platform
    /// (--job-id, --api, --verifier), a candidate file (--candidate), or a settlement
    /// transaction (--tx, --rpc, and --api or --candidate for its job). Exits 0 reproduced bit
    /// for bit, 6 verdict reproduced with other output, 7 DISAGREES, 3 no verdict, 4 refused
    /// (not a settlement, not the settled job, an archive that is not the job's), 8 the job's
    /// terms or benchmark are not the ones the bounty committed on chain (--tx; nothing run).
    Reproduce(ReproduceArgs),
    /// Before bonding: run a commit through the feed's exact path for a bounty's job (the same
    /// archive URL, size caps, safe extraction, digest and sandbox run) and say whether the
    /// feed would accept it, the source_snapshot_digest it would compute, and the verdict with
    /// its response hash. Exits 0 a verdict (passed or failed), 3 no verdict, 4 the feed would
    /// refuse the submission (or the job or reference is invalid), 5 engine unreachable.
    Preflight(PreflightArgs),
    /// Run as a service: poll the feed on an interval, run new jobs as `feed` does, write
    /// candidates to --out, and keep a durable ledger in --state.
    Serve(ServeArgs),
    /// Print the ledger of `worker serve` (every job, run and candidate, times in UTC), or one
    /// job's history; or re-queue jobs with --retry / --retry-exhausted.
    Ledger {
        /// The state directory given to `worker serve --state`.
        #[arg(long)]
        state: PathBuf,
        /// Only this job's history.
        #[arg(long = "job", value_name = "ID")]
        job: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Re-queue job ID (every round of it without a verdict: given up, to be retried,
        /// refused, interrupted): pending, no attempts, no back-off; a running service runs it
        /// at its next poll if the feed still lists it. Exits 1 when nothing was re-queued.
        #[arg(long, value_name = "ID", conflicts_with_all = ["retry_exhausted", "job", "json"])]
        retry: Option<String>,
        /// Re-queue every given-up (`exhausted`) job, as --retry does.
        #[arg(long, conflicts_with_all = ["job", "json"])]
        retry_exhausted: bool,
        /// Put back the copy of the ledger `worker serve` took before migrating it from schema
        /// N (`ledger.vN-before-vM.sqlite3` in --state), so a worker of schema N runs again;
        /// the newer ledger is kept beside it. Refused while a `worker serve` holds --state;
        /// jobs recorded after the upgrade run again.
        #[arg(
            long,
            value_name = "N",
            value_parser = clap::value_parser!(i64).range(1..),
            conflicts_with_all = ["retry", "retry_exhausted", "job", "json"]
        )]
        downgrade_to: Option<i64>,
    },
    /// Write a request file ({"job": …}) for `plan` and --run-regression from a source digest
    /// and a runner manifest; its bounty is a local placeholder that no chain knows.
    Request(RequestArgs),
    /// Remove staged trees, evidence records and remembered executable resolutions older
    /// than an age from a staging store, keeping any tree a container mounts.
    Gc(GcArgs),
    /// Print the shell completion script for bash, zsh or fish (and elvish, powershell).
    Completions(CompletionsArgs),
    /// Check this host before running the worker: the engine and its version, the cgroup
    /// layout and driver, the OCI runtimes, user-namespace remapping, seccomp, AppArmor, the
    /// staging root's file system and free space, swap, and (with --image) an image by
    /// digest. One line per check, ok/warn/fail with what to do; exit 78 when any fails.
    Doctor(DoctorArgs),
    /// Explain an evidence record (from --run-regression --evidence, rehearse, or the store).
    Explain {
        /// The evidence record file.
        evidence: PathBuf,
        /// Print a normalized JSON summary instead of text.
        #[arg(long)]
        json: bool,
        /// Show the last N lines of each stream (default 12).
        #[arg(long, value_name = "N", conflicts_with = "full")]
        lines: Option<usize>,
        /// Show all the output the record holds (its last 32 KiB of each stream; `rehearse
        /// --log-dir` keeps everything).
        #[arg(long)]
        full: bool,
    },
}

/// Arguments of `worker rehearse`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct RehearseArgs {
    /// The source tree to judge (usually the solution).
    #[arg(long, required_unless_present = "batch")]
    pub source: Option<PathBuf>,
    /// The benchmark tree, mounted read-only at /benchmark.
    #[arg(long, required_unless_present = "batch")]
    pub benchmark: Option<PathBuf>,
    /// The runner manifest (JSON). A benchmark_digest of sha256:000…0 is filled in.
    #[arg(long, required_unless_present = "batch")]
    pub manifest: Option<PathBuf>,
    /// Rehearse every task of FILE, `{"tasks": [{"name", "source", "benchmark", "manifest",
    /// "base"?, "base_rev"?, "rev"?, "repeat"?, "adversarial"?}]}` (paths relative to FILE),
    /// into one report, in FILE's order; the tasks run side by side, every container of every
    /// task under one limit (as many at once as the engine's cpus and memory hold for the
    /// largest manifest, as for --mutants); --repeat, --adversarial and the store flags are
    /// every task's defaults.
    /// Exits 0 when every task is fit, 9 when one pays a non-solution (a stub passed), else 4
    /// when one is unfit, has no solution yet or could not be rehearsed, else 3.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["source", "benchmark", "manifest", "base", "rev", "base_rev"]
    )]
    pub batch: Option<PathBuf>,
    /// With --batch: also write the batch as JUnit XML to FILE (one testcase per task). Refused
    /// (exit 2) without --batch.
    #[arg(long, value_name = "FILE", requires = "batch")]
    pub junit: Option<PathBuf>,
    /// Run the source this many times in fresh containers (1 to 20) and check they agree.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub repeat: u32,
    /// An unsolved tree, run once: the benchmark should fail on it. DIR@REV stages revision
    /// REV of the repository holding DIR (as --base-rev REV does).
    #[arg(long)]
    pub base: Option<PathBuf>,
    /// For a tree inside a git repository: the revision to stage (default HEAD), exactly as an
    /// exact-commit archive of it holds it (no .git, no untracked files, export-ignore
    /// honoured). Applies to --source and --benchmark; the base has --base-rev.
    #[arg(long, conflicts_with = "worktree")]
    pub rev: Option<String>,
    /// The revision of the --base tree (default HEAD); `--base DIR@REV` says the same.
    #[arg(long, requires = "base", conflicts_with = "worktree")]
    pub base_rev: Option<String>,
    /// Stage the directories as they are on disk, even inside a git repository.
    #[arg(long)]
    pub worktree: bool,
    /// Staging root (default: $REGRESSION_SANDBOX_STAGING_ROOT, else a private dir in the
    /// system temp dir).
    #[arg(long)]
    pub staging_root: Option<PathBuf>,
    /// Pull a missing image, by its pinned digest only.
    #[arg(long)]
    pub pull: bool,
    /// The OCI runtime every container runs under: runc (the engine's default, asked for by
    /// name) or runsc (gVisor, registered with the engine as `runsc`; docs/operators.md "A
    /// second kernel"). An engine that does not offer it ends each run without a verdict
    /// (runtime_unavailable); there is no fallback.
    #[arg(long, value_enum, value_name = "RUNTIME", default_value = "runc")]
    pub oci_runtime: OciRuntimeArg,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Write each run's full output (within the manifest's max_output_bytes) and a copy of its
    /// evidence record to DIR, as `<run>.stdout`, `<run>.stderr` and `<run>.evidence.json`
    /// (a stub's run is `rehearse-stub-N-<stub>`). With --batch, each task's under
    /// DIR/<task name>/ (a name with a `/`, or `.` or `..`, is refused).
    #[arg(long, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
    /// Also run the benchmark on stub trees that solve nothing (code that exits 0 when loaded,
    /// files shadowing the test runner, the empty tree); any that passes exits 9: the benchmark
    /// lets a non-solution pass (the output's last line says so).
    #[arg(long)]
    pub adversarial: bool,
    /// Also score the benchmark on up to N mutants (1 to 200) of the lines the solution
    /// changes against --base (a line deleted, a comparison negated, `&&`/`||`, `true`/`false`,
    /// `<`/`<=` swapped, a returned value emptied, an early return dropped), each run like the
    /// solution, as many at once as the engine's cpus and memory hold for the manifest. Prints
    /// the share killed and each survivor's diff; under 50 % it is reported WEAK (a warning:
    /// the exit code is unchanged).
    #[arg(
        long,
        value_name = "N",
        requires = "base",
        conflicts_with = "batch",
        value_parser = clap::value_parser!(u32).range(1..=200)
    )]
    pub mutants: Option<u32>,
    /// The seed of --mutants' choice among all candidate mutants (default 42): the same seed,
    /// trees and N pick the same mutants.
    #[arg(long, value_name = "SEED", requires = "mutants")]
    pub mutants_seed: Option<u64>,
}

/// Arguments of `worker feed`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct FeedArgs {
    /// The feed queried.
    #[command(flatten)]
    pub source: FeedSource,
    /// Directory for candidate files and manifest.json.
    #[arg(long)]
    pub out: PathBuf,
    /// Run at most this many jobs (earliest expiry first).
    #[arg(long)]
    pub max_jobs: Option<usize>,
    /// Reuse completed verdicts from this cache directory.
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Run only the job with this id (repeatable); every other job is reported skipped. An
    /// independent re-run of another runner's batch names its jobs this way.
    #[arg(long = "job-id", value_name = "ID")]
    pub job_ids: Vec<String>,
    /// Run only the jobs of shard I of N (the others are reported skipped): first 8 bytes of
    /// sha256(job_id), big-endian, modulo N, equal to I.
    #[arg(long, value_name = "I/N", default_value = "0/1")]
    pub shard: worker_jobs::feed::shard::Shard,
    /// How each job is fetched and run.
    #[command(flatten)]
    pub run: JobRunArgs,
    /// Print the run report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

// The arguments `worker feed` and `worker serve` share, flattened into both in the same
// places so their `--help` and man pages read as before. Plain comments on the structs: a doc
// comment would become the `about` of the subcommand they are flattened into.

#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
#[allow(missing_docs)]
pub struct FeedSource {
    /// Platform API base URL (https; plain http only to loopback).
    #[arg(long)]
    pub api: String,
    /// Network to query: base-mainnet or base-sepolia (or an alias).
    #[arg(long, default_value = "base-mainnet", value_parser = parse_network)]
    pub network: Network,
    /// A verifier address this runner serves; give it once or twice.
    #[arg(long = "verifier", required = true, value_parser = parse_address)]
    pub verifiers: Vec<Address>,
}

#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
#[allow(missing_docs)]
pub struct JobRunArgs {
    /// Scratch directory for downloads and extraction (default: the system temp dir).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Base of exact-commit archive URLs (default https://codeload.github.com).
    #[arg(long)]
    pub archive_base: Option<String>,
    /// Staging root (defaults to $REGRESSION_SANDBOX_STAGING_ROOT).
    #[arg(long)]
    pub staging_root: Option<PathBuf>,
    /// Pull missing images, by their pinned digest only.
    #[arg(long)]
    pub pull: bool,
    /// The OCI runtime every container runs under: runc (the engine's default, asked for by
    /// name) or runsc (gVisor, registered with the engine as `runsc`; docs/operators.md "A
    /// second kernel"). An engine that does not offer it ends each run without a verdict
    /// (runtime_unavailable); there is no fallback.
    #[arg(long, value_enum, value_name = "RUNTIME", default_value = "runc")]
    pub oci_runtime: OciRuntimeArg,
    /// What a settlement needs besides the run, in seconds, by part: the image pull (counted
    /// when the image is not on this host), staging, signing, the relay to its confirmation
    /// depth, and at_risk, the slack under which a job without a candidate counts as at risk
    /// (serve's /metrics). Jobs run deadline-first; a job whose window ends before its
    /// manifest's timeout_seconds plus these is not started (window_too_short). A part left
    /// out keeps its default.
    #[arg(
        long,
        value_name = "PART=S,…",
        default_value = "pull=300,staging=120,signing=120,relay=180,at_risk=900"
    )]
    pub settle_costs: worker_jobs::feed::deadline::SettleCosts,
    /// A Base RPC endpoint for each job's readiness record (readiness-<sha256(job_id)>.json
    /// beside the candidates): the bounty's on-chain terms, window and verifier set compared
    /// with the job by the signer's own check. Repeatable, in order of preference (failover as
    /// the signer's). Without it no record says ready. With it, verification windows are
    /// judged on the chain's clock whenever its latest block is ahead of this host's (read at
    /// start and every 10 s): the signer refuses by that clock.
    #[arg(long = "rpc", value_name = "URL")]
    pub rpc: Vec<String>,
}

/// Arguments of `worker reproduce`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
#[command(group(ArgGroup::new("input").required(true).multiple(true).args(["job_id", "candidate", "tx"])))]
pub struct ReproduceArgs {
    /// The job to reproduce, fetched from --api (in --verifier's feed); a settled or expired
    /// job is still run.
    #[arg(long, value_name = "ID", requires_all = ["api", "verifier"], conflicts_with_all = ["tx", "candidate"])]
    pub job_id: Option<String>,
    /// A candidate file: its job is run and its outcome is the reference (with --tx, only its
    /// job is used).
    #[arg(long, value_name = "FILE")]
    pub candidate: Option<PathBuf>,
    /// A settlement transaction: its attestations (every signer recovered and checked against
    /// the bounty's committed verifiers) are the reference.
    #[arg(long, value_name = "HASH", requires = "rpc")]
    pub tx: Option<String>,
    /// JSON-RPC URL of the chain (https, or http to a loopback host), with --tx.
    #[arg(long, value_name = "URL")]
    pub rpc: Option<String>,
    /// Platform API base URL, to fetch the job (https; plain http only to loopback).
    #[arg(long, value_name = "URL")]
    pub api: Option<String>,
    /// Whose feed lists the job, with --job-id (with --tx: the first signer's).
    #[arg(long, value_parser = parse_address)]
    pub verifier: Option<Address>,
    /// How the job is fetched and run.
    #[command(flatten)]
    pub run: LocalRunArgs,
    /// Print the report as JSON on stdout (`agent-bounties/regression-reproduction-v1`, or
    /// the error object), instead of the report for a reader.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `worker preflight`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
#[command(group(ArgGroup::new("bounty").required(true).args(["job_id", "job"])))]
#[command(group(ArgGroup::new("submission").required(true).args(["commit", "source"])))]
pub struct PreflightArgs {
    /// The bounty's job, fetched from --api (in --verifier's feed); an earlier round's job
    /// of the bounty will do: its submission is replaced by yours.
    #[arg(long, value_name = "ID", requires_all = ["api", "verifier"])]
    pub job_id: Option<String>,
    /// The bounty's job as a file (a job as the feed serves it).
    #[arg(long, value_name = "FILE")]
    pub job: Option<PathBuf>,
    /// The commit you will submit, as the platform's artifact reference:
    /// https://github.com/OWNER/REPO/commit/SHA.
    #[arg(long, value_name = "REFERENCE")]
    pub commit: Option<String>,
    /// A local repository instead: its revision --rev is archived as GitHub would (`git
    /// archive --format=tar.gz --prefix=REPO-SHA/`) and served from loopback through the
    /// same download and extraction; --repo names it.
    #[arg(long, value_name = "DIR", requires_all = ["rev", "repo"])]
    pub source: Option<PathBuf>,
    /// The revision of --source to submit (resolved to its full commit).
    #[arg(long, value_name = "REV", requires = "source")]
    pub rev: Option<String>,
    /// The GitHub repository you will push --source to, as OWNER/REPO.
    #[arg(long, value_name = "OWNER/REPO", requires = "source")]
    pub repo: Option<String>,
    /// Platform API base URL, with --job-id (https; plain http only to loopback).
    #[arg(long, value_name = "URL")]
    pub api: Option<String>,
    /// Whose feed lists the job, with --job-id.
    #[arg(long, value_parser = parse_address)]
    pub verifier: Option<Address>,
    /// How the job is fetched and run.
    #[command(flatten)]
    pub run: LocalRunArgs,
    /// Print the report as JSON on stdout (`agent-bounties/regression-preflight-v1`, or the
    /// error object), instead of the report for a reader.
    #[arg(long)]
    pub json: bool,
}

// The arguments `worker reproduce` and `worker preflight` share: one job, already resolved,
// run through the feed's own path on this host. Flattened where both had them, so their
// `--help` keeps its order; a plain comment, as on `FeedSource`.

#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
#[allow(missing_docs)]
pub struct LocalRunArgs {
    /// Network of the job.
    #[arg(long, default_value = "base-mainnet", value_parser = parse_network)]
    pub network: Network,
    /// Where the run's candidate (with its evidence record) is kept.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Base of exact-commit archive URLs (default https://codeload.github.com), as `feed`.
    #[arg(long)]
    pub archive_base: Option<String>,
    /// Scratch directory for downloads and extraction (default: the system temp dir).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Staging root (default: $REGRESSION_SANDBOX_STAGING_ROOT, else the rehearsal store
    /// worker-rehearse-<uid> in the system temp dir, as `rehearse`).
    #[arg(long)]
    pub staging_root: Option<PathBuf>,
    /// Pull a missing image, by its pinned digest only.
    #[arg(long)]
    pub pull: bool,
    /// The OCI runtime the run uses (as on `--run-regression`): runc or runsc; an engine
    /// without it gives no verdict, never a fallback.
    #[arg(long, value_enum, value_name = "RUNTIME", default_value = "runc")]
    pub oci_runtime: OciRuntimeArg,
}

/// Arguments of `worker serve`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct ServeArgs {
    /// The feed queried.
    #[command(flatten)]
    pub source: FeedSource,
    /// Directory for candidate files and manifest.json, where a signer picks them up.
    #[arg(long)]
    pub out: PathBuf,
    /// State directory: the ledger (SQLite) lives here. One `worker serve` per directory
    /// (an exclusive lock on DIR/serve.lock; a second one exits 1).
    #[arg(long)]
    pub state: PathBuf,
    /// Run only the jobs of shard I of N: first 8 bytes of sha256(job_id), big-endian,
    /// modulo N, equal to I.
    #[arg(long, value_name = "I/N", default_value = "0/1")]
    pub shard: worker_jobs::feed::shard::Shard,
    /// Where the ledger is: a postgres://USER@HOST:PORT/DB URL puts this host in a fleet
    /// sharing that database (jobs claimed with leases, any host takes any job;
    /// docs/operations.md, "Running a fleet"); a directory is the SQLite ledger's (default:
    /// --state). A fleet database is bound to the first host's feed and verifier set: another
    /// is refused (78), as is another schema version; a server that does not answer is exit 1.
    ///
    /// The URL never holds the password (refused, 78: a command line is readable by every
    /// user of the host): it comes from --ledger-password-file, else from libpq's password
    /// file (PGPASSFILE, else ~/.pgpass; mode 0600). sslmode=verify-full (or require,
    /// verify-ca: all held to verify-full) with sslrootcert=FILE|system encrypts the session
    /// and checks the server's certificate and name; prefer and allow are refused; no
    /// sslmode is plain text.
    #[arg(long, value_name = "URL|DIR")]
    pub ledger: Option<String>,
    /// A file holding the fleet database's password (and nothing else), a regular file of
    /// this user with mode 0600 or stricter, reached without a symlink; refused otherwise
    /// (78). For a postgres:// --ledger only.
    #[arg(long, value_name = "FILE", requires = "ledger")]
    pub ledger_password_file: Option<PathBuf>,
    /// This host's name in a fleet (leases, runs, candidates), unique in the fleet; a host
    /// restarted under the same name takes its own open runs back at once. Default:
    /// HOSTNAME:STATE_DIR.
    #[arg(long, value_name = "NAME", requires = "ledger")]
    pub fleet_host: Option<String>,
    /// How long a fleet claim holds a job without renewal, by the database's clock; the
    /// running host renews it every third of it. A host that stops renewing (dead, paused,
    /// cut off) loses the job to another host after at most this long.
    #[arg(long, value_name = "S", default_value_t = 120,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub lease: u64,
    /// Most jobs run at once. Default: before each batch, with L and M the largest cpu_millis
    /// and memory_bytes among the jobs due, min(cpus * 1000 / L, (MemTotal - min(1 GiB,
    /// MemTotal / 4)) / M) clamped to 1..=64, where cpus = min(the engine's NCPU, this host's
    /// cores) and MemTotal the engine's (its /info); 1 if the engine reports neither. Once
    /// the median of the last 8 executions is under 2 s (two at least), cpus counts twice:
    /// short runs leave their quota idle in the engine's create/start/remove. Sized again as
    /// each run ends.
    #[arg(long, value_name = "N")]
    pub parallel: Option<std::num::NonZeroUsize>,
    /// Seconds between polls (each pause is jittered by ±10 %). Also the base of the
    /// back-offs: a job's own failure is retried after S × 2^(n−1) seconds (at most an hour)
    /// until its window ends; host failures (engine, missing image without --pull, archive
    /// host, full or unwritable directories) are not the job's attempts and pause every job
    /// for S × 2^(n−1) seconds (at most 16 × S).
    #[arg(long, value_name = "S", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub poll_interval: u64,
    /// Serve GET /healthz and GET /metrics (Prometheus text) on this loopback address,
    /// e.g. 127.0.0.1:9464; any other address is refused (exit 78) without
    /// --metrics-allow-remote. /healthz answers 200
    /// when the last successful poll is within 3.3 poll intervals (it polls while jobs run
    /// too: runs excuse no poll) and the ledger heartbeat is fresh, both on the monotonic
    /// clock, 503 with the reason otherwise; 503 "degraded" when the last 3 runs all failed
    /// for host causes.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Let --metrics-listen be an address other than loopback (e.g. 0.0.0.0:9464, for a
    /// central Prometheus). The endpoints are unauthenticated: allow only your Prometheus
    /// through the host's firewall (docs/operators.md, Monitoring).
    #[arg(long, requires = "metrics_listen")]
    pub metrics_allow_remote: bool,
    /// Reuse completed verdicts from this cache directory.
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// How each job is fetched and run.
    #[command(flatten)]
    pub run: JobRunArgs,
    /// Image pulls and the image budget.
    #[command(flatten)]
    pub image: ImageArgs,
}

/// Arguments of `worker doctor`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct DoctorArgs {
    /// The staging root to examine (default: $REGRESSION_SANDBOX_STAGING_ROOT).
    #[arg(long, value_name = "DIR")]
    pub staging_root: Option<PathBuf>,
    /// The OCI runtime the worker is to run under; fails when the engine does not offer it.
    #[arg(long, value_enum, value_name = "RUNTIME", default_value = "runc")]
    pub oci_runtime: OciRuntimeArg,
    /// A digest-pinned image (name@sha256:…) that must be present.
    #[arg(long, value_name = "REF")]
    pub image: Option<String>,
    /// A JSON-RPC node (https, or http to loopback) whose latest block's timestamp this
    /// host's clock is compared with: fail when the block is over 120 s ahead (this clock
    /// runs late), warn when over 300 s behind (a stalled node or one that mines on demand).
    #[arg(long, value_name = "URL")]
    pub rpc: Option<String>,
    /// Print the report as JSON (agent-bounties/worker-doctor-v2) on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The OCI runtimes `--oci-runtime` accepts (the two the sandbox knows how to run under).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OciRuntimeArg {
    /// The engine's runc.
    #[default]
    Runc,
    /// gVisor's runsc.
    Runsc,
}

impl OciRuntimeArg {
    /// The engine's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Runc => verifier_sdk::oci_runtime::RUNC,
            Self::Runsc => verifier_sdk::oci_runtime::RUNSC,
        }
    }
}

/// What `worker ledger` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerAction {
    /// Print it (or one job's history), as text or JSON.
    Show {
        /// One job's history.
        job: Option<String>,
        /// JSON output.
        json: bool,
    },
    /// `--retry ID`.
    Retry(String),
    /// `--retry-exhausted`.
    RetryExhausted,
    /// `--downgrade-to N`.
    DowngradeTo(i64),
}

/// A checked request to do one thing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `--snapshot-directory`.
    SnapshotDirectory {
        /// The tree to digest.
        dir: PathBuf,
        /// Its limits.
        limits: TreeLimits,
    },
    /// `--stage-regression-input`.
    StageRegressionInput {
        /// Which store.
        kind: StageKind,
        /// The tree to stage.
        dir: PathBuf,
        /// The staging root.
        root: PathBuf,
        /// Its limits.
        limits: TreeLimits,
    },
    /// `--run-regression`.
    RunRegression {
        /// The request file.
        request: PathBuf,
        /// Pull by digest when missing.
        pull: bool,
        /// `--oci-runtime`.
        oci_runtime: OciRuntimeArg,
        /// Extra copy of the evidence record.
        evidence: Option<PathBuf>,
        /// Where to write the in-toto statement of a verdict.
        in_toto: Option<PathBuf>,
    },
    /// `--validate-regression-candidate`.
    ValidateCandidate {
        /// The request file.
        request: PathBuf,
        /// Print the JSON check rather than `ok`.
        json: bool,
    },
    /// `feed`.
    Feed(FeedArgs),
    /// `rehearse`.
    Rehearse(RehearseArgs),
    /// `reproduce`.
    Reproduce(ReproduceArgs),
    /// `preflight`.
    Preflight(PreflightArgs),
    /// `serve`.
    Serve(ServeArgs),
    /// `ledger`.
    Ledger {
        /// The state directory.
        state: PathBuf,
        /// What to do.
        action: LedgerAction,
    },
    /// `explain`.
    Explain {
        /// The evidence record.
        evidence: PathBuf,
        /// JSON output.
        json: bool,
        /// Lines of each stream to show; `None` for all the record holds (`--full`).
        lines: Option<usize>,
    },
    /// `request`.
    Request(RequestArgs),
    /// `gc`.
    Gc(GcArgs),
    /// `completions`.
    Completions(CompletionsArgs),
    /// `doctor`.
    Doctor(DoctorArgs),
    /// `plan`.
    Plan {
        /// The request file.
        request: PathBuf,
        /// Explicit staging root.
        staging_root: Option<PathBuf>,
        /// JSON instead of text.
        json: bool,
        /// The runtime planned for.
        oci_runtime: OciRuntimeArg,
    },
}

/// The command line parsed but its values are unusable (exit code 2, reported through clap).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UsageError {
    /// No mode flag was given.
    #[error("no mode given; the modes are {} (see --help)", mode_list())]
    NoMode,
    /// A mode flag and a subcommand were both given.
    #[error("give either a mode flag or a subcommand, not both")]
    ModeAndSubcommand,
    /// `--pull`, `--evidence`, `--in-toto` or `--oci-runtime` without `--run-regression`.
    #[error("--pull, --evidence, --in-toto and --oci-runtime only apply to --run-regression")]
    RunOnly,
    /// `--json` without `--validate-regression-candidate`.
    #[error("--json (before any subcommand) only applies to --validate-regression-candidate")]
    ValidateOnly,
    /// A flag got the wrong number of values.
    #[error("--{flag} takes {expected} values")]
    Arity {
        /// The flag, without dashes.
        flag: &'static str,
        /// How many values it takes.
        expected: usize,
    },
    /// A limit is not a positive decimal integer.
    #[error("{what} must be a positive integer, got {value:?}")]
    BadLimit {
        /// Which limit.
        what: &'static str,
        /// What was given (truncated).
        value: String,
    },
    /// The stage kind is not `source` or `benchmark`.
    #[error(transparent)]
    Kind(#[from] ParseStageKindError),
}

impl UsageError {
    /// The clap error kind it is reported as.
    fn kind(&self) -> clap::error::ErrorKind {
        use clap::error::ErrorKind;
        match self {
            Self::NoMode => ErrorKind::MissingRequiredArgument,
            Self::ModeAndSubcommand | Self::RunOnly | Self::ValidateOnly => {
                ErrorKind::ArgumentConflict
            }
            Self::Arity { .. } => ErrorKind::WrongNumberOfValues,
            Self::BadLimit { .. } | Self::Kind(_) => ErrorKind::ValueValidation,
        }
    }
}

/// The parsed and checked command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// What to do.
    pub command: Command,
    /// `--quiet`: no progress on stderr.
    pub quiet: bool,
    /// `--log-format`, when given.
    pub log_format: Option<cli_support::LogFormat>,
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormatArg {
    /// For people.
    Text,
    /// One JSON object per line.
    Json,
}

impl From<LogFormatArg> for cli_support::LogFormat {
    fn from(arg: LogFormatArg) -> Self {
        match arg {
            LogFormatArg::Text => Self::Text,
            LogFormatArg::Json => Self::Json,
        }
    }
}

/// Parses the process's arguments; on any usage error clap prints it with the usage line
/// and exits with 2 (0 for `--help` and `--version`).
pub fn parse() -> Parsed {
    let cli = Cli::try_parse().unwrap_or_else(|error| exit_usage(&error));
    let quiet = cli.quiet;
    let log_format = cli.log_format.map(Into::into);
    match cli.into_command() {
        Ok(command) => Parsed {
            command,
            quiet,
            log_format,
        },
        Err(error) => exit_usage(&Cli::command().error(error.kind(), error)),
    }
}

/// Exits through clap (message and usage on stderr, exit 2; 0 for help and version). Under
/// `--json` a refusal also prints the error object on stdout first, since no parsed value
/// exists yet to say JSON was asked for.
fn exit_usage(error: &clap::Error) -> ! {
    if error.use_stderr() && cli_support::json_requested(std::env::args_os().skip(1)) {
        let text = error.to_string();
        let first = text.lines().next().unwrap_or_default();
        let usage = crate::exit::ExitCode::Usage;
        cli_support::print_error_json(
            usage.name(crate::exit::Binary::Worker),
            usage.code(),
            first.strip_prefix("error: ").unwrap_or(first),
        );
    }
    error.exit()
}

/// Every mode, from the clap definition itself so the list cannot fall behind it: the mode
/// flags, then the subcommands.
pub fn mode_list() -> String {
    let mut command = Cli::command();
    // Building merges each argument's `group = "mode"` into the group's list.
    command.build();
    let mode_ids: Vec<_> = command
        .get_groups()
        .filter(|g| g.get_id() == "mode")
        .flat_map(|g| g.get_args().cloned().collect::<Vec<_>>())
        .collect();
    let flags = command
        .get_arguments()
        .filter(|a| mode_ids.contains(a.get_id()))
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")));
    let subcommands = command
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .filter(|name| name != "help");
    flags.chain(subcommands).collect::<Vec<_>>().join(", ")
}

impl Cli {
    /// Checks the values of the chosen mode.
    pub fn into_command(self) -> Result<Command, UsageError> {
        // Checked here rather than with clap's `args_conflicts_with_subcommands`, which would
        // also refuse global flags such as `worker --quiet feed`.
        let has_mode = self.snapshot_directory.is_some()
            || self.stage_regression_input.is_some()
            || self.run_regression.is_some()
            || self.validate_regression_candidate.is_some();
        if has_mode && self.command.is_some() {
            return Err(UsageError::ModeAndSubcommand);
        }
        if let Some(values) = self.snapshot_directory {
            let [dir, max_bytes, max_files] = exactly::<3>("snapshot-directory", values)?;
            return Ok(Command::SnapshotDirectory {
                dir: dir.into(),
                limits: parse_limits(&max_bytes, &max_files)?,
            });
        }
        if let Some(values) = self.stage_regression_input {
            let [kind, dir, root, max_bytes, max_files] =
                exactly::<5>("stage-regression-input", values)?;
            let kind = kind.to_string_lossy().parse::<StageKind>()?;
            return Ok(Command::StageRegressionInput {
                kind,
                dir: dir.into(),
                root: root.into(),
                limits: parse_limits(&max_bytes, &max_files)?,
            });
        }
        if self.json && self.validate_regression_candidate.is_none() {
            return Err(UsageError::ValidateOnly);
        }
        if let Some(request) = self.run_regression {
            return Ok(Command::RunRegression {
                request,
                pull: self.pull,
                oci_runtime: self.oci_runtime.unwrap_or_default(),
                evidence: self.evidence,
                in_toto: self.in_toto,
            });
        }
        if self.pull
            || self.evidence.is_some()
            || self.in_toto.is_some()
            || self.oci_runtime.is_some()
        {
            return Err(UsageError::RunOnly);
        }
        if let Some(request) = self.validate_regression_candidate {
            return Ok(Command::ValidateCandidate {
                request,
                json: self.json,
            });
        }
        match self.command {
            Some(Subcommands::Plan {
                request,
                staging_root,
                json,
                oci_runtime,
            }) => Ok(Command::Plan {
                request,
                staging_root,
                json,
                oci_runtime,
            }),
            Some(Subcommands::Feed(args)) => Ok(Command::Feed(args)),
            Some(Subcommands::Rehearse(args)) => Ok(Command::Rehearse(args)),
            Some(Subcommands::Reproduce(args)) => Ok(Command::Reproduce(args)),
            Some(Subcommands::Preflight(args)) => Ok(Command::Preflight(args)),
            Some(Subcommands::Serve(args)) => Ok(Command::Serve(args)),
            Some(Subcommands::Ledger {
                state,
                job,
                json,
                retry,
                retry_exhausted,
                downgrade_to,
            }) => Ok(Command::Ledger {
                state,
                action: match (retry, retry_exhausted, downgrade_to) {
                    (_, _, Some(to)) => LedgerAction::DowngradeTo(to),
                    (Some(job), _, None) => LedgerAction::Retry(job),
                    (None, true, None) => LedgerAction::RetryExhausted,
                    (None, false, None) => LedgerAction::Show { job, json },
                },
            }),
            Some(Subcommands::Explain {
                evidence,
                json,
                lines,
                full,
            }) => Ok(Command::Explain {
                evidence,
                json,
                lines: if full {
                    None
                } else {
                    Some(lines.unwrap_or(worker_sandbox::explain::TAIL_LINES))
                },
            }),
            Some(Subcommands::Request(args)) => Ok(Command::Request(args)),
            Some(Subcommands::Gc(args)) => Ok(Command::Gc(args)),
            Some(Subcommands::Completions(args)) => Ok(Command::Completions(args)),
            Some(Subcommands::Doctor(args)) => Ok(Command::Doctor(args)),
            None => Err(UsageError::NoMode),
        }
    }
}

/// A `--network` that names no network.
#[derive(Debug, thiserror::Error)]
#[error("unknown network {0:?}")]
pub struct UnknownNetwork(String);

fn parse_network(value: &str) -> Result<Network, UnknownNetwork> {
    Network::from_alias(value).ok_or_else(|| UnknownNetwork(value.to_owned()))
}

fn parse_address(value: &str) -> Result<Address, <Address as std::str::FromStr>::Err> {
    value.parse::<Address>()
}

fn exactly<const N: usize>(
    flag: &'static str,
    values: Vec<OsString>,
) -> Result<[OsString; N], UsageError> {
    <[OsString; N]>::try_from(values).map_err(|_| UsageError::Arity { flag, expected: N })
}

fn parse_limits(max_bytes: &OsString, max_files: &OsString) -> Result<TreeLimits, UsageError> {
    let max_bytes = parse_positive("max-bytes", max_bytes)?;
    let max_files = parse_positive("max-files", max_files)?;
    TreeLimits::new(max_bytes, max_files).map_err(|_| UsageError::BadLimit {
        what: "each limit",
        value: format!("{max_bytes} {max_files}"),
    })
}

fn parse_positive(what: &'static str, value: &OsString) -> Result<u64, UsageError> {
    let bad = || UsageError::BadLimit {
        what,
        value: value.to_string_lossy().chars().take(64).collect(),
    };
    let text = value.to_str().ok_or_else(bad)?;
    // Digits only: `+5`, ` 5` and `0x10` are refused rather than half-understood.
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    match text.parse::<u64>() {
        Ok(0) | Err(_) => Err(bad()),
        Ok(n) => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Command, String> {
        let cli = Cli::try_parse_from(std::iter::once("worker").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        cli.into_command().map_err(|e| e.to_string())
    }

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_quiet_works_before_a_subcommand_but_modes_and_subcommands_conflict() {
        assert!(matches!(
            parse(&["--quiet", "plan", "r.json"]),
            Ok(Command::Plan { .. })
        ));
        let err = parse(&["--run-regression", "r.json", "plan", "r.json"]).unwrap_err();
        assert!(err.contains("not both"), "{err}");
    }

    #[test]
    fn snapshot_takes_three_positional_values() {
        let action = parse(&["--snapshot-directory", "d", "10", "2"]).unwrap();
        assert_eq!(
            action,
            Command::SnapshotDirectory {
                dir: "d".into(),
                limits: TreeLimits::new(10, 2).unwrap()
            }
        );
        assert!(parse(&["--snapshot-directory", "d", "10"]).is_err());
    }

    #[test]
    fn stage_takes_kind_dir_root_and_limits() {
        let action = parse(&[
            "--stage-regression-input",
            "benchmark",
            "d",
            "r",
            "5",
            "1",
            "--quiet",
        ])
        .unwrap();
        assert_eq!(
            action,
            Command::StageRegressionInput {
                kind: StageKind::Benchmark,
                dir: "d".into(),
                root: "r".into(),
                limits: TreeLimits::new(5, 1).unwrap(),
            }
        );
        let err = parse(&["--stage-regression-input", "sources", "d", "r", "5", "1"]).unwrap_err();
        assert!(err.contains("source"), "{err}");
    }

    #[test]
    fn limits_must_be_positive_decimal_integers() {
        for bad in ["0", "-1", "+5", "0x10", "1.5", "", "18446744073709551616"] {
            let err = parse(&["--snapshot-directory", "d", bad, "1"]).unwrap_err();
            assert!(
                err.contains("max-bytes") || err.contains("unexpected"),
                "{bad:?}: {err}"
            );
            assert!(
                parse(&["--snapshot-directory", "d", "1", bad]).is_err(),
                "{bad:?}"
            );
        }
        assert!(parse(&["--snapshot-directory", "d", "18446744073709551615", "1"]).is_ok());
    }

    #[test]
    fn rehearse_and_explain_parse() {
        // A whole rehearsal; without its last two words (--manifest) it is not one.
        const REHEARSE: [&str; 7] = [
            "rehearse",
            "--source",
            "s",
            "--benchmark",
            "b",
            "--manifest",
            "m.json",
        ];
        let action = parse(&[&REHEARSE[..], &["--repeat", "3", "--json"]].concat()).unwrap();
        let Command::Rehearse(args) = action else {
            panic!("{action:?}")
        };
        assert_eq!((args.repeat, args.json, args.base), (3, true, None));
        assert!(parse(&REHEARSE[..5]).is_err());
        for bad in ["0", "21", "-1", "x"] {
            assert!(
                parse(&[&REHEARSE[..], &["--repeat", bad]].concat()).is_err(),
                "{bad}"
            );
        }
        assert_eq!(
            parse(&["explain", "e.json"]).unwrap(),
            Command::Explain {
                evidence: "e.json".into(),
                json: false,
                lines: Some(worker_sandbox::explain::TAIL_LINES),
            }
        );
    }

    #[test]
    fn a_bare_worker_lists_every_mode() {
        let message = parse(&[]).unwrap_err();
        for mode in [
            "--snapshot-directory",
            "--stage-regression-input",
            "--run-regression",
            "--validate-regression-candidate",
            "plan",
            "feed",
            "rehearse",
            "explain",
            "request",
            "gc",
            "completions",
        ] {
            assert!(message.contains(mode), "{mode} missing from: {message}");
        }
        for sub in Cli::command().get_subcommands() {
            assert!(message.contains(sub.get_name()), "{message}");
        }
    }

    #[test]
    fn modes_are_exclusive_and_one_is_required() {
        assert!(parse(&[]).unwrap_err().contains("no mode"));
        assert!(
            parse(&[
                "--snapshot-directory",
                "d",
                "1",
                "1",
                "--stage-regression-input",
                "source",
                "d",
                "r",
                "1",
                "1",
            ])
            .is_err()
        );
    }

    #[test]
    fn feed_values_are_typed_by_clap() {
        let feed = |network: &str, verifier: &str| {
            let args = [
                "feed",
                "--api",
                "https://a",
                "--out",
                "o",
                "--network",
                network,
                "--verifier",
                verifier,
            ];
            Cli::try_parse_from(std::iter::once("worker").chain(args))
        };
        let address = format!("0x{}", "ab".repeat(20));
        let cli = feed("sepolia", &address).unwrap();
        let Ok(Command::Feed(args)) = cli.into_command() else {
            panic!("not a feed")
        };
        assert_eq!(args.source.network, Network::BaseSepolia);
        assert_eq!(
            args.source.verifiers,
            vec![address.parse::<Address>().unwrap()]
        );
        for (network, verifier) in [("ropsten", address.as_str()), ("base", "0x12")] {
            let error = feed(network, verifier).unwrap_err();
            assert_eq!(error.exit_code(), 2, "{error}");
        }
    }
}
