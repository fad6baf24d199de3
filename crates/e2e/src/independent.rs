//! Independent execution end to end, with a benchmark that prints timings: the runner's
//! `worker feed`, then each signing slot's own `worker feed` re-run of the same job, compared
//! by `.github/scripts/compare-candidates.sh` (through `signer agree`), each slot's
//! `signer sign` over its OWN agreeing candidate, and `keeper relay` of the runner's candidate
//! with both slots' attestations. The three runs print different start times, so the runner's
//! and the two slots' response hashes all differ; the contract needs one verdict, not one
//! response hash (PROTOCOL §6), and the bounty must settle with two different response hashes
//! in the transaction.

use std::path::{Path, PathBuf};

use alloy::primitives::{Address, B256, U256, keccak256};
use alloy::providers::Provider;
use alloy::signers::local::PrivateKeySigner;
use chain_testkit::{Testkit, dev_signer, status};
use serde_json::{Value, json};
use verifier_sdk::Bytes32;
use verifier_sdk::fixtures::JobParams;
use verifier_sdk::settle::{SettlementEvent, decode_settle_calldata};

use crate::{
    ArchiveServer, E2eConfig, E2eError, VERIFIER_KEYS, archive_commit, deploy_for_job, fresh_dir,
    info, io, job_params, keeper_relay_args, manifest, output_kept, relay_first_job, run_binary, s,
    serve_job_archives, settlement_events, sign_as_dev_key, step, tree_digest, verifier_addresses,
    wall_clock, worker_feed_args,
};

/// The harness, started through a wrapper that first prints the wall clock in nanoseconds:
/// the shape of every test runner that prints durations (pytest, cargo test, go test, node).
pub const TIMED_COMMAND: [&str; 5] = [
    "python3",
    "-I",
    "-B",
    "-c",
    "import runpy, sys, time; print('started at', time.time_ns(), flush=True); \
     sys.argv = ['run_tests.py', '6']; runpy.run_path('/benchmark/run_tests.py', run_name='__main__')",
];

/// What the settlement carried, read back from the chain.
#[derive(Debug, Clone)]
pub struct IndependentResult {
    /// The bounty.
    pub bounty: Address,
    /// The settlement transaction.
    pub tx_hash: B256,
    /// `status()` after it.
    pub status: u8,
    /// The event in its receipt.
    pub event: SettlementEvent,
    /// The runner candidate's response hash.
    pub runner_response_hash: Bytes32,
    /// Each relayed attestation's (verifier, passed, response hash), decoded from the
    /// transaction's input.
    pub relayed: Vec<(Address, bool, Bytes32)>,
    /// Where the run left its files (candidates, agreed directories, attestations).
    pub work: PathBuf,
    /// `worker reproduce --tx` of the settlement afterwards: its exit code and JSON report.
    pub reproduced: (Option<i32>, Value),
    /// `worker reproduce --candidate` of the runner's candidate.
    pub reproduced_candidate: (Option<i32>, Value),
}

/// `worker reproduce`'s input naming a settlement: the transaction and the chain it is on.
fn tx_args(tx: B256, rpc: &str) -> Vec<String> {
    vec![s("--tx"), tx.to_string(), s("--rpc"), rpc.to_owned()]
}

/// `worker reproduce`'s input naming `served`'s job, as its first verifier would run it.
fn job_id_args(served: &Served) -> Vec<String> {
    vec![
        s("--job-id"),
        served.validated.job_id().to_owned(),
        s("--verifier"),
        served.verifiers[0].to_string(),
    ]
}

/// `worker reproduce` as a third party runs it, from the settlement transaction and the
/// platform's API; its exit code and `--json` report (an error object on a refusal).
pub(crate) async fn reproduce_tx(
    cfg: &E2eConfig,
    work: &Path,
    api: &str,
    rpc: &str,
    tx: B256,
) -> Result<(Option<i32>, Value), E2eError> {
    reproduce(cfg, work, api, &tx_args(tx, rpc), None).await
}

/// `worker reproduce` as README shows it, for a reader of its output: no `--staging-root`, no
/// `--work-dir` (their defaults) and no `--json`; only `--archive-base` added, to reach the
/// loopback archive host. Its exit code, stdout and stderr.
pub(crate) async fn reproduce_as_readme(
    cfg: &E2eConfig,
    work: &Path,
    api: &str,
    input: &[String],
) -> Result<(Option<i32>, String, String), E2eError> {
    let out = work.join("reproduction");
    std::fs::create_dir_all(&out).map_err(io("create a work directory", &out))?;
    let args = reproduce_args(api, input, &out);
    info(&format!("$ worker {}", args.join(" ")));
    let output = output_kept(
        "worker reproduce",
        tokio::process::Command::new(cfg.bin_dir.join("worker"))
            .args(&args)
            .env_remove("REGRESSION_SANDBOX_STAGING_ROOT"),
    )
    .await?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    info(&format!("stdout:\n{stdout}stderr:\n{stderr}"));
    Ok((output.status.code(), stdout, stderr))
}

/// `worker reproduce`'s arguments both routes pass: `input`, the API as both the job feed and
/// the archive base, and the output directory.
fn reproduce_args(api: &str, input: &[String], out: &Path) -> Vec<String> {
    let mut args = vec![s("reproduce")];
    args.extend(input.iter().cloned());
    args.extend([
        s("--api"),
        api.to_owned(),
        s("--archive-base"),
        api.to_owned(),
        s("--out"),
        s(out.display()),
    ]);
    args
}

/// `worker reproduce` with `input` (its `--tx`/`--candidate` arguments) and, when given, one
/// extra environment variable (a `DOCKER_HOST` that answers nothing).
pub(crate) async fn reproduce(
    cfg: &E2eConfig,
    work: &Path,
    api: &str,
    input: &[String],
    env: Option<(&str, &str)>,
) -> Result<(Option<i32>, Value), E2eError> {
    let out = work.join("reproduction");
    let staging = work.join("reproduce-staging");
    let scratch = work.join("reproduce-scratch");
    for d in [&out, &staging, &scratch] {
        std::fs::create_dir_all(d).map_err(io("create a work directory", d))?;
    }
    let mut args = reproduce_args(api, input, &out);
    args.extend([
        s("--staging-root"),
        s(staging.display()),
        s("--work-dir"),
        s(scratch.display()),
        s("--json"),
    ]);
    info(&format!("$ worker {}", args.join(" ")));
    let mut cmd = tokio::process::Command::new(cfg.bin_dir.join("worker"));
    cmd.args(&args)
        .env_remove("REGRESSION_SANDBOX_STAGING_ROOT");
    if let Some((k, v)) = env {
        cmd.env(k, v);
    }
    let output = output_kept("worker reproduce", &mut cmd).await?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    info(stderr.trim_end());
    let report = serde_json::from_slice(&output.stdout).map_err(|e| E2eError::Step {
        step: "worker reproduce".into(),
        code: output.status.code(),
        detail: format!("stdout is not JSON ({e}); stderr: {stderr}"),
    })?;
    Ok((output.status.code(), report))
}

fn response_hash_of(path: &Path) -> Result<Bytes32, E2eError> {
    let v: Value = std::fs::read(path)
        .map_err(io("read a candidate", path))
        .and_then(|b| {
            serde_json::from_slice(&b).map_err(|e| E2eError::Setup {
                what: "parse a candidate",
                detail: e.to_string(),
            })
        })?;
    v.pointer("/outcome/response_hash")
        .and_then(Value::as_str)
        .and_then(|h| h.parse().ok())
        .ok_or_else(|| E2eError::Mismatch(format!("{} has no response hash", path.display())))
}

/// A bounty for `fixtures/python-bounty`'s good solution on the local chain, its job served
/// with the archives by a loopback stand-in for the platform and codeload.
pub(crate) struct Served {
    pub(crate) kit: Testkit,
    pub(crate) bounty: chain_testkit::DeployedBounty,
    pub(crate) validated: verifier_sdk::ValidatedJob,
    pub(crate) server: ArchiveServer,
    pub(crate) verifiers: Vec<Address>,
    /// The job as the platform serves it.
    pub(crate) job: Value,
    /// The solution's repository and commit on the archive host, and its tree.
    pub(crate) repo: &'static str,
    pub(crate) commit: String,
    pub(crate) solution: PathBuf,
    pub(crate) benchmark: PathBuf,
}

pub(crate) async fn deploy_and_serve(
    cfg: &E2eConfig,
    label: &str,
    timed: bool,
    edit: impl FnOnce(&mut Value),
) -> Result<Served, E2eError> {
    let fixtures = cfg.repo_root.join("fixtures/python-bounty");
    let solution = fixtures.join("solution-good");
    let benchmark = fixtures.join("benchmark");
    let source_digest = tree_digest(&solution)?;
    let benchmark_digest = tree_digest(&benchmark)?;

    step(&format!(
        "[{label}] deploy TestBounty (two verifiers, threshold 2){}",
        if timed {
            ", timing-printing command"
        } else {
            ""
        }
    ));
    let kit = Testkit::connect().await?;
    let now = kit.latest_timestamp().await?.max(wall_clock());
    let verifiers = verifier_addresses()?;
    let solver = PrivateKeySigner::random().address();
    let bounty_id = keccak256(format!("e2e:{label}:{timed}:{now}:{solver}"));
    let commit = archive_commit(&source_digest);
    let repo = "roman-independent";
    let mut m = manifest(&cfg.python_image, benchmark_digest);
    if timed {
        m["command"] = json!(TIMED_COMMAND);
    }
    edit(&mut m);
    let mut jp = JobParams {
        manifest: m,
        ..job_params(
            bounty_id,
            solver,
            &verifiers,
            now,
            repo,
            &commit,
            &source_digest,
        )
    };
    let (_params, bounty, job, validated) =
        deploy_for_job(&kit, &mut jp, solver, &verifiers, 2, now).await?;
    info(&format!("bounty   {}", bounty.address()));
    info(&format!("job id   {}", validated.job_id()));

    let server = serve_job_archives(job.clone(), repo, &commit, &solution, &benchmark).await?;
    Ok(Served {
        kit,
        bounty,
        validated,
        server,
        verifiers,
        job,
        repo,
        commit,
        solution,
        benchmark,
    })
}

/// Settles `served`'s bounty with the verifiers' test keys, every attestation saying `passed`
/// with `response_hash` (whatever a real run printed: the contract checks neither); the
/// transaction's hash.
pub(crate) async fn settle_with_test_keys(
    served: &Served,
    passed: bool,
    response_hash: B256,
) -> Result<B256, E2eError> {
    let deadline = U256::from(served.kit.latest_timestamp().await?.max(wall_clock()) + 900);
    let mut atts = Vec::new();
    for key in VERIFIER_KEYS {
        let signer = dev_signer(key)?;
        atts.push(
            served
                .bounty
                .sign_attestation(&signer, signer.address(), passed, response_hash, deadline)
                .await?,
        );
    }
    Ok(served.bounty.settle(atts).await?.transaction_hash)
}

/// Plays the independent-execution path once; errors unless the bounty settles with
/// `threshold` = 2 attestations of one verdict carrying different response hashes.
// One function on purpose, like `run_scenario`: it reads top to bottom as the pipeline.
#[allow(clippy::too_many_lines)]
pub async fn run_independent(cfg: &E2eConfig, timed: bool) -> Result<IndependentResult, E2eError> {
    let work = cfg.work_dir.join(if timed {
        "independent-timed"
    } else {
        "independent"
    });
    fresh_dir(&work)?;
    let Served {
        kit,
        bounty,
        validated,
        server,
        verifiers,
        ..
    } = deploy_and_serve(cfg, "independent", timed, |_| {}).await?;
    let dir = |name: &str| work.join(name);
    let bin = |name: &str| cfg.bin_dir.join(name);
    let file = verifier_sdk::candidate_file_name(validated.job_id());

    // The runner, then each slot's own re-run of the same job (`--job-id`, as the signer
    // workflow's `rerun` job runs it), each with its own scratch so nothing is shared.
    for run in ["runner", "own-1", "own-2"] {
        step(&format!("[independent] worker feed ({run})"));
        for d in [
            run.to_owned(),
            format!("{run}-scratch"),
            format!("{run}-staging"),
        ] {
            std::fs::create_dir_all(dir(&d)).map_err(io("create a work directory", &dir(&d)))?;
        }
        let mut args = worker_feed_args("feed", server.url(), &verifiers);
        if run != "runner" {
            args.extend([s("--job-id"), validated.job_id().to_owned()]);
        }
        args.extend([
            s("--out"),
            s(dir(run).display()),
            s("--archive-base"),
            server.url().to_owned(),
            s("--staging-root"),
            s(dir(&format!("{run}-staging")).display()),
            s("--work-dir"),
            s(dir(&format!("{run}-scratch")).display()),
            s("--json"),
        ]);
        run_binary(
            &format!("worker feed ({run})"),
            &bin("worker"),
            &args,
            None,
            &[0],
        )
        .await?;
        info(&format!(
            "response hash {}",
            response_hash_of(&dir(run).join(&file))?
        ));
    }
    let runner_response_hash = response_hash_of(&dir("runner").join(&file))?;

    let mut attestation_dirs = Vec::new();
    for (slot, key) in [(1, VERIFIER_KEYS[0]), (2, VERIFIER_KEYS[1])] {
        step(&format!(
            "[independent] slot {slot}: compare-candidates.sh, then sign its own run"
        ));
        let agreed = dir(&format!("agreed-{slot}"));
        let script = cfg.repo_root.join(".github/scripts/compare-candidates.sh");
        let summary = dir(&format!("summary-{slot}.md"));
        let output = tokio::process::Command::new("bash")
            .arg(&script)
            .arg(dir("runner"))
            .arg(dir(&format!("own-{slot}")))
            .arg(&agreed)
            .env("SIGNER_BIN", bin("signer"))
            .env("GITHUB_STEP_SUMMARY", &summary)
            .output()
            .await
            .map_err(io("run compare-candidates.sh", &script))?;
        let said = String::from_utf8_lossy(&output.stdout).into_owned();
        info(said.trim_end());
        if !output.status.success() || !said.contains("1 agree, 0 disagree") {
            return Err(E2eError::Step {
                step: format!("compare-candidates.sh (slot {slot})"),
                code: output.status.code(),
                detail: format!("{said}{}", String::from_utf8_lossy(&output.stderr)),
            });
        }
        let att = dir(&format!("att-{slot}"));
        std::fs::create_dir_all(&att).map_err(io("create a work directory", &att))?;
        let report = sign_as_dev_key(
            &bin("signer"),
            key,
            &agreed,
            (server.url(), kit.url()),
            &att,
        )
        .await?;
        if report.get("signed").and_then(Value::as_u64) != Some(1) {
            return Err(E2eError::Mismatch(format!(
                "slot {slot} signed nothing: {report}"
            )));
        }
        attestation_dirs.push(att);
    }

    step("[independent] keeper relay of the runner's candidate with both slots' attestations");
    let keeper = PrivateKeySigner::random();
    kit.set_balance(keeper.address(), U256::from(10u128.pow(21)))
        .await?;
    let keeper_key = keeper.to_bytes().to_string();
    let state = dir("keeper-state");
    let args = keeper_relay_args(
        &dir("runner"),
        &attestation_dirs,
        server.url(),
        kit.url(),
        &state,
    );
    let (_, tx_hash) = relay_first_job(&bin("keeper"), &args, &keeper_key).await?;

    step("[independent] read the settlement back from the chain");
    let events = settlement_events(&kit, tx_hash, bounty.address()).await?;
    let [event] = events.as_slice() else {
        return Err(E2eError::Mismatch(format!(
            "expected one settlement event in {tx_hash}, found {}",
            events.len()
        )));
    };
    let tx = kit
        .provider()
        .get_transaction_by_hash(tx_hash)
        .await
        .map_err(|e| E2eError::Mismatch(format!("eth_getTransactionByHash: {e}")))?
        .ok_or_else(|| E2eError::Mismatch(format!("no transaction {tx_hash}")))?;
    let input = alloy::consensus::Transaction::input(&tx).clone();
    let relayed: Vec<(Address, bool, Bytes32)> = decode_settle_calldata(&input)
        .map_err(|e| E2eError::Mismatch(e.to_string()))?
        .into_iter()
        .map(|a| (a.verifier, a.passed, Bytes32::from_bytes(a.responseHash.0)))
        .collect();
    info(&format!("settled by {tx_hash}: {event:?}"));
    for (verifier, passed, hash) in &relayed {
        info(&format!(
            "relayed: {verifier} passed={passed} response {hash}"
        ));
    }
    let status = bounty.status().await?;
    if status != status::SETTLED {
        return Err(E2eError::Mismatch(format!(
            "status {status} after settlement"
        )));
    }
    step("[independent] worker reproduce --tx: a third party re-runs the settled verdict");
    let reproduced = reproduce_tx(cfg, &work, server.url(), kit.url(), tx_hash).await?;
    step("[independent] worker reproduce --candidate: the runner's candidate re-run");
    let reproduced_candidate = reproduce(
        cfg,
        &work.join("from-candidate"),
        server.url(),
        &[s("--candidate"), s(dir("runner").join(&file).display())],
        None,
    )
    .await?;
    Ok(IndependentResult {
        bounty: bounty.address(),
        tx_hash,
        status,
        event: event.clone(),
        runner_response_hash,
        relayed,
        work,
        reproduced,
        reproduced_candidate,
    })
}

/// What a settlement made with test keys over a flipped verdict reproduced to.
#[derive(Debug, Clone)]
pub struct ForgedResult {
    /// `worker reproduce --tx` of the forged settlement: exit code and report.
    pub reproduced: (Option<i32>, Value),
    /// `worker reproduce --tx` of a transaction that is not a settlement.
    pub not_a_settlement: (Option<i32>, Value),
    /// The forged settlement reproduced with the engine unreachable.
    pub engine_down: (Option<i32>, Value),
    /// A flipped settlement of a job whose run times out, reproduced.
    pub no_verdict: (Option<i32>, Value),
}

/// Settles a bounty whose solution passes with the verifiers' test keys signing `failed`
/// (a flipped verdict the contract cannot tell), then reproduces it from the transaction; and
/// reproduces a transaction to the same bounty that is not a settlement.
pub async fn run_forged_settlement(cfg: &E2eConfig) -> Result<ForgedResult, E2eError> {
    let work = cfg.work_dir.join("forged");
    fresh_dir(&work)?;
    let Served {
        kit,
        bounty,
        server,
        ..
    } = deploy_and_serve(cfg, "forged", false, |_| {}).await?;
    step("[forged] the verifiers' test keys sign `failed` for a passing solution; settle");
    let deadline = U256::from(kit.latest_timestamp().await?.max(wall_clock()) + 900);
    let mut atts = Vec::new();
    for key in VERIFIER_KEYS {
        let signer = dev_signer(key)?;
        atts.push(
            bounty
                .sign_attestation(
                    &signer,
                    signer.address(),
                    false,
                    B256::repeat_byte(0x66),
                    deadline,
                )
                .await?,
        );
    }
    let receipt = bounty.settle(atts).await?;
    let tx = receipt.transaction_hash;
    info(&format!("settled (rejected) by {tx}"));
    let reproduced = reproduce_tx(cfg, &work.join("settled"), server.url(), kit.url(), tx).await?;
    step("[forged] a transaction to the bounty that is not a settlement");
    let other = bounty.set_solver(Address::repeat_byte(0x33)).await?;
    let not_a_settlement = reproduce_tx(
        cfg,
        &work.join("other"),
        server.url(),
        kit.url(),
        other.transaction_hash,
    )
    .await?;
    step("[forged] the same settlement reproduced with the engine unreachable");
    let engine_down = reproduce(
        cfg,
        &work.join("engine-down"),
        server.url(),
        &tx_args(tx, kit.url()),
        Some(("DOCKER_HOST", "unix:///nonexistent/docker.sock")),
    )
    .await?;
    step("[forged] a flipped settlement of a job whose run times out");
    let Served {
        bounty: slow,
        server: slow_server,
        ..
    } = deploy_and_serve(cfg, "forged-slow", false, |m| {
        m["command"] = json!(["python3", "-I", "-B", "-c", "import time; time.sleep(30)"]);
        m["timeout_seconds"] = json!(2);
    })
    .await?;
    let mut atts = Vec::new();
    for key in VERIFIER_KEYS {
        let signer = dev_signer(key)?;
        atts.push(
            slow.sign_attestation(
                &signer,
                signer.address(),
                false,
                B256::repeat_byte(0x67),
                deadline,
            )
            .await?,
        );
    }
    let slow_tx = slow.settle(atts).await?.transaction_hash;
    let no_verdict = reproduce_tx(
        cfg,
        &work.join("slow"),
        slow_server.url(),
        kit.url(),
        slow_tx,
    )
    .await?;
    Ok(ForgedResult {
        reproduced,
        not_a_settlement,
        engine_down,
        no_verdict,
    })
}

/// A runner manifest whose benchmark fails whatever the solution: `exit 1`.
const FAILING_COMMAND: [&str; 5] = ["python3", "-I", "-B", "-c", "import sys; sys.exit(1)"];

/// What `worker reproduce --tx` said of settlements whose job the platform serves with another
/// runner manifest than the bounty committed (`termsHash()`, `benchmarkHash()`).
#[derive(Debug, Clone)]
pub struct SwappedResult {
    /// An honest settlement (`passed`, the solution passes), its job served with a benchmark
    /// that fails: without the terms check, a `DISAGREES` (exit 7).
    pub honest: (Option<i32>, Value),
    /// A fraudulent one (`failed` for the same passing solution), its job served with the same
    /// failing benchmark: without the check, `verdict reproduced` (exit 6).
    pub fraudulent: (Option<i32>, Value),
    /// The honest settlement again, its job taken from a `--candidate` file of the swapped job
    /// (written by `worker reproduce --job-id` of it, the first element) instead of the API.
    pub from_candidate: ((Option<i32>, Value), (Option<i32>, Value)),
}

/// Settles two bounties for `fixtures/python-bounty`'s good solution with the verifiers' test
/// keys, one `passed` (honest) and one `failed` (a fraud), then serves each job with a failing
/// runner manifest in its terms (every other field, the policy among them, unchanged; the
/// terms hashes recomputed, so the job is well formed) and reproduces each settlement from it.
pub async fn run_swapped_benchmark(cfg: &E2eConfig) -> Result<SwappedResult, E2eError> {
    let work = cfg.work_dir.join("swapped");
    fresh_dir(&work)?;
    let mut said = Vec::new();
    let mut from_candidate = None;
    for (label, passed) in [("swapped-honest", true), ("swapped-fraud", false)] {
        let served = deploy_and_serve(cfg, label, false, |_| {}).await?;
        step(&format!(
            "[{label}] settle `{}` with the test keys; serve the job with a failing benchmark",
            if passed { "passed" } else { "failed" }
        ));
        let tx = settle_with_test_keys(&served, passed, B256::repeat_byte(0x68)).await?;
        let mut job = served.job.clone();
        job["terms"]["document"]["benchmark"]["runner_manifest"]["command"] =
            json!(FAILING_COMMAND);
        verifier_sdk::fixtures::rehash(&mut job);
        let swapped = serve_job_archives(
            job,
            served.repo,
            &served.commit,
            &served.solution,
            &served.benchmark,
        )
        .await?;
        said.push(reproduce_tx(cfg, &work.join(label), swapped.url(), served.kit.url(), tx).await?);
        if passed {
            step("[swapped-honest] a candidate file of the swapped job, passed with --tx");
            let job_only = reproduce(
                cfg,
                &work.join("swapped-job"),
                swapped.url(),
                &job_id_args(&served),
                None,
            )
            .await?;
            let file = job_only
                .1
                .get("candidate_file")
                .and_then(Value::as_str)
                .ok_or_else(|| E2eError::Mismatch(format!("no candidate: {}", job_only.1)))?
                .to_owned();
            let with_candidate = reproduce(
                cfg,
                &work.join("swapped-candidate"),
                served.server.url(),
                &[tx_args(tx, served.kit.url()), vec![s("--candidate"), file]].concat(),
                None,
            )
            .await?;
            from_candidate = Some((job_only, with_candidate));
        }
    }
    let [honest, fraudulent]: [_; 2] = said
        .try_into()
        .map_err(|_| E2eError::Mismatch("expected two reproductions".into()))?;
    let from_candidate =
        from_candidate.ok_or_else(|| E2eError::Mismatch("no --candidate reproduction".into()))?;
    Ok(SwappedResult {
        honest,
        fraudulent,
        from_candidate,
    })
}

/// What a newcomer running README's `worker reproduce --tx` command saw.
#[derive(Debug, Clone)]
pub struct NewcomerResult {
    /// The settlement transaction.
    pub tx: B256,
    /// The response hash the settlement carries (both attestations), the reproduction's own.
    pub response_hash: Bytes32,
    /// `worker reproduce --job-id … --json` of the job first (to learn its response hash).
    pub job_only: (Option<i32>, Value),
    /// README's command: exit code, stdout, stderr.
    pub readme: (Option<i32>, String, String),
}

/// A bounty whose benchmark fails (so the honest verdict is `failed`), settled `failed` with the
/// verifiers' test keys over the response hash a first reproduction of the job printed; then
/// README's `worker reproduce --tx … --rpc … --api … --out …` of it, without a staging root
/// in the environment and without `--json`.
pub async fn run_newcomer(cfg: &E2eConfig) -> Result<NewcomerResult, E2eError> {
    let work = cfg.work_dir.join("newcomer");
    fresh_dir(&work)?;
    let served = deploy_and_serve(cfg, "newcomer", false, |m| {
        m["command"] = json!(FAILING_COMMAND);
    })
    .await?;
    step("[newcomer] worker reproduce --job-id: the job's own verdict and response hash");
    let job_only = reproduce(
        cfg,
        &work.join("job"),
        served.server.url(),
        &job_id_args(&served),
        None,
    )
    .await?;
    let response_hash: Bytes32 = job_only
        .1
        .get("reproduced_response_hash")
        .and_then(Value::as_str)
        .and_then(|h| h.parse().ok())
        .ok_or_else(|| E2eError::Mismatch(format!("no response hash: {}", job_only.1)))?;
    step("[newcomer] settle `failed` over that response hash; README's worker reproduce --tx");
    let tx = settle_with_test_keys(&served, false, B256::from(*response_hash.as_bytes())).await?;
    let readme = reproduce_as_readme(
        cfg,
        &work.join("readme"),
        served.server.url(),
        &tx_args(tx, served.kit.url()),
    )
    .await?;
    Ok(NewcomerResult {
        tx,
        response_hash,
        job_only,
        readme,
    })
}

/// A bounty for the good solution settled `passed` with the test keys, then its solution's
/// archive replaced on the archive host by one with a file added (the tree's digest is no longer
/// the job's), and the settlement reproduced: the code and report.
pub async fn run_tampered_archive(cfg: &E2eConfig) -> Result<(Option<i32>, Value), E2eError> {
    let work = cfg.work_dir.join("tampered");
    fresh_dir(&work)?;
    let served = deploy_and_serve(cfg, "tampered", false, |_| {}).await?;
    step("[tampered] settle `passed`; the archive host serves a tampered solution archive");
    let tx = settle_with_test_keys(&served, true, B256::repeat_byte(0x69)).await?;
    let mut files = crate::tree_files(&served.solution)?;
    files.push((
        s("tampered.py"),
        b"print('not the committed tree')\n".to_vec(),
        false,
    ));
    served.server.add_archive(
        &format!("/solver-org/{}/tar.gz/{}", served.repo, served.commit),
        &format!("{}-{}", served.repo, served.commit),
        "",
        &files,
    )?;
    reproduce_tx(cfg, &work, served.server.url(), served.kit.url(), tx).await
}
