//! The signer against the real local Hardhat node (tools/chain/up.sh or scripts/services.sh;
//! fails loudly without it) and a real local HTTP server serving the job feed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use alloy::primitives::{Address as ChainAddress, B256, Bytes, U256};
use bounty_chain::{
    AttestationQuery, BountyState, ChainReadError, ChainReader, HttpJobSource, RpcChainReader,
};
use chain_testkit::{
    BountyParams, DEV_KEYS, DeployedBounty, TestBounty, Testkit, dev_signer, status,
};
use keyfile::LoadedKey;
use platform_client::{ClientLimits, PlatformClient};
use serde_json::{Value, json};
use signer::history::History;
use signer::key::{AttestationKey, RemoteSigner};
use signer::sign::{ATTESTATION_MANIFEST_FILE, CandidateStatus};
use signer::{ExitCode, RunError, RunReport, SignConfig, sign_candidates};
use verifier_sdk::fixtures::{JobParams, job_value};
use verifier_sdk::{
    Address, AttestationFile, Candidate, CandidateManifest, Network, candidate_file_name,
    validate_job,
};

#[path = "sign_chain/failover.rs"]
mod failover;
#[path = "sign_chain/pkcs11.rs"]
mod pkcs11;
#[path = "sign_chain/readiness.rs"]
mod readiness;

// ---------- stand-ins served by the shared test server ----------

/// Serves `GET …/verification-jobs` with whatever `jobs` holds at request time.
async fn feed_server(jobs: Arc<Mutex<Value>>) -> String {
    test_http::serve(move |req| {
        let jobs = jobs.clone();
        async move {
            assert!(
                req.head.starts_with(
                    "GET /v1/base/autonomous-bounties/verification-jobs?network=base-mainnet&verifier=0x"
                ),
                "{}",
                req.head
            );
            let body = serde_json::to_vec(&*jobs.lock().unwrap()).unwrap();
            Some(test_http::Response::ok(body))
        }
    })
    .await
    .unwrap()
}

/// A JSON-RPC proxy to `upstream` that answers every `attestationDigest` call with a digest
/// of its own: what a malicious or broken RPC provider could do.
async fn lying_rpc(upstream: String) -> String {
    chain_testkit::proxy::intercept(&upstream, |request, node| async move {
        let mut answer = node.call(&request).await?;
        let call = &request["params"][0];
        let data = call["input"]
            .as_str()
            .or(call["data"].as_str())
            .unwrap_or("");
        if request["method"] == "eth_call" && data.starts_with("0xfbb69591") {
            answer["result"] = json!(format!("0x{}", "ab".repeat(32)));
        }
        Some(answer)
    })
    .await
    .unwrap()
}

// ---------- the world a test signs in ----------

const SIGNER_KEY_INDEX: usize = 1;

struct World {
    kit: Testkit,
    bounty: DeployedBounty,
    params: BountyParams,
    job: Value,
    now: u64,
    candidates: tempfile::TempDir,
    out: tempfile::TempDir,
    feed: Arc<Mutex<Value>>,
    api: String,
    signer: Address,
    require_oci_runtime: Option<String>,
    /// The signing history every run of this world signs through (opened anew per run, as
    /// each signer process does).
    history: tempfile::TempDir,
}

fn signer_address() -> Address {
    Address::from(dev_signer(SIGNER_KEY_INDEX).unwrap().address())
}

fn key() -> LoadedKey {
    LoadedKey::from_hex_text(DEV_KEYS[SIGNER_KEY_INDEX]).unwrap()
}

fn job_params(
    bounty: &str,
    verifiers: &[Address],
    solver: ChainAddress,
    expires_at: u64,
) -> JobParams {
    JobParams {
        bounty_contract: bounty.to_owned(),
        bounty_id: format!("0x{}", "bb".repeat(32)),
        round: 7,
        solver: solver.to_string().to_lowercase(),
        verifiers: verifiers.iter().map(ToString::to_string).collect(),
        expires_at,
        ..JobParams::default()
    }
}

/// Deploys a bounty whose stored values are exactly what the job built for it commits to.
async fn deploy_for(
    kit: &Testkit,
    verifiers: &[Address],
    expires_in: u64,
    now: u64,
) -> (DeployedBounty, BountyParams, Value) {
    let chain_verifiers: Vec<ChainAddress> = verifiers.iter().map(|a| (*a).into()).collect();
    let mut params = BountyParams::new(chain_verifiers, now + expires_in);
    // The hashes do not depend on the contract address, so a placeholder job gives them.
    let draft = job_value(&job_params(
        &format!("0x{}", "22".repeat(20)),
        verifiers,
        params.solver,
        params.verification_expires_at,
    ));
    let draft = validate_job(&draft, now).unwrap();
    params.submission_hash = draft.submission_hash().into();
    params.evidence_hash = draft.evidence_hash().into();
    params.policy_hash = draft.policy_hash().into();
    params.terms_hash = draft.terms_hash().into();
    params.acceptance_criteria_hash = draft.acceptance_criteria_hash().into();
    params.benchmark_hash = draft.benchmark_hash().into();
    params.evidence_schema_hash = draft.evidence_schema_hash().into();
    let bounty = kit.deploy_bounty(&params).await.unwrap();
    let job = job_value(&job_params(
        &bounty.address().to_string().to_lowercase(),
        verifiers,
        params.solver,
        params.verification_expires_at,
    ));
    let v = validate_job(&job, now).unwrap();
    assert_eq!(B256::from(v.submission_hash()), params.submission_hash);
    (bounty, params, job)
}

/// A candidate for `job` as the worker would write it after running with `exit_code`.
fn candidate_for(job: &Value, now: u64, exit_code: i64) -> Candidate {
    candidate_run(job, now, exit_code, verifier_sdk::oci_runtime::RUNC)
}

/// A candidate for `job` as a worker with `--oci-runtime runtime` would write it after running
/// with `exit_code` (the profile and engine facts it records).
fn candidate_run(job: &Value, now: u64, exit_code: i64, runtime: &str) -> Candidate {
    let validated = validate_job(job, now).unwrap();
    let (outcome, evidence) = verifier_sdk::fixtures::completed_run_under(
        &validated,
        verifier_sdk::fixtures::run_facts(exit_code),
        runtime,
    );
    Candidate::new(
        job.clone(),
        serde_json::to_value(&outcome).unwrap(),
        "test-runner-revision".into(),
        Some(evidence),
    )
}

fn write_candidates(dir: &Path, candidates: &[Candidate]) {
    let mut manifest = CandidateManifest::new("base-mainnet");
    for c in candidates {
        let job_id = c.job["job_id"].as_str().unwrap();
        manifest.push(job_id);
        std::fs::write(
            dir.join(candidate_file_name(job_id)),
            serde_json::to_vec(c).unwrap(),
        )
        .unwrap();
    }
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_vec(&manifest).unwrap(),
    )
    .unwrap();
}

async fn world_with(verifiers: &[Address], expires_in: u64, exit_code: i64) -> World {
    let kit = Testkit::connect().await.unwrap_or_else(|e| panic!("{e}"));
    world_on(kit, verifiers, expires_in, exit_code).await
}

/// [`world_with`] on the node `kit` is connected to (a test's own [`chain_testkit::PrivateNode`]).
async fn world_on(kit: Testkit, verifiers: &[Address], expires_in: u64, exit_code: i64) -> World {
    let now = kit.latest_timestamp().await.unwrap();
    let (bounty, params, job) = deploy_for(&kit, verifiers, expires_in, now).await;
    let candidates = tempfile::tempdir().unwrap();
    write_candidates(candidates.path(), &[candidate_for(&job, now, exit_code)]);
    let feed = Arc::new(Mutex::new(json!([job.clone()])));
    let api = feed_server(feed.clone()).await;
    World {
        kit,
        bounty,
        params,
        job,
        now,
        candidates,
        out: tempfile::tempdir().unwrap(),
        feed,
        api,
        signer: signer_address(),
        require_oci_runtime: None,
        history: new_history(),
    }
}

fn new_history() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    History::init(dir.path()).unwrap();
    dir
}

async fn world() -> World {
    world_with(&[signer_address()], 3600, 0).await
}

impl World {
    fn cfg(&self) -> SignConfig {
        SignConfig {
            candidates_dir: self.candidates.path().to_owned(),
            out_dir: self.out.path().to_owned(),
            signer: self.signer,
            network: Network::BaseMainnet,
            max_candidates: verifier_sdk::MAX_MANIFEST_CANDIDATES,
            require_oci_runtime: self.require_oci_runtime.clone(),
        }
    }

    fn open_history(&self) -> History {
        History::open(self.history.path()).unwrap()
    }

    fn source(&self) -> HttpJobSource {
        HttpJobSource::new(
            PlatformClient::new(ClientLimits::default()).unwrap(),
            &self.api,
            Network::BaseMainnet,
            self.signer,
        )
    }

    async fn sign_with(&self, reader: &impl ChainReader, now: u64) -> RunReport {
        sign_candidates(
            &self.cfg(),
            &key().into(),
            &mut self.open_history(),
            &self.source(),
            reader,
            now,
        )
        .await
        .unwrap()
    }

    async fn sign(&self) -> RunReport {
        self.sign_with(&self.reader(), self.now).await
    }

    /// `sign_candidates` over this world with `cfg` (its own or one a test changed), the dev
    /// key, the local chain and the world's clock: the run's result, refusal or not.
    async fn try_sign(&self, cfg: &SignConfig) -> Result<RunReport, RunError> {
        sign_candidates(
            cfg,
            &key().into(),
            &mut self.open_history(),
            &self.source(),
            &self.reader(),
            self.now,
        )
        .await
    }

    /// The local chain, read as the signer reads it.
    fn reader(&self) -> RpcChainReader {
        RpcChainReader::new(self.kit.url(), Duration::from_secs(10)).unwrap()
    }

    fn rewrite_candidate(&self, edit: impl FnOnce(&mut Candidate)) {
        let mut c = candidate_for(&self.job, self.now, 0);
        edit(&mut c);
        write_candidates(self.candidates.path(), &[c]);
    }

    /// The four terms hashes the bounty was funded with: terms, acceptance criteria, benchmark,
    /// evidence schema.
    fn funded_terms(&self) -> [B256; 4] {
        let p = &self.params;
        [
            p.terms_hash,
            p.acceptance_criteria_hash,
            p.benchmark_hash,
            p.evidence_schema_hash,
        ]
    }

    /// [`World::funded_terms`] with the `i`-th replaced by `x`.
    fn terms_but(&self, i: usize, x: B256) -> [B256; 4] {
        let mut terms = self.funded_terms();
        terms[i] = x;
        terms
    }

    /// Puts `terms` (in [`World::funded_terms`]' order) on chain.
    async fn set_terms(&self, [t, a, b, e]: [B256; 4]) {
        self.bounty.set_terms_hashes(t, a, b, e).await.unwrap();
    }

    /// Signs, and asserts that the single candidate was refused as a mismatch with the chain
    /// of exactly `fields`.
    async fn sign_mismatched(&self, fields: &[&str]) {
        let report = self.sign().await;
        assert_refused(&report, "onchain_mismatch");
        assert_eq!(report.candidates[0].mismatches, fields);
    }

    /// Signs, and asserts that the single candidate was refused with `code` and that no
    /// attestation file was written.
    async fn sign_refused(&self, code: &str) {
        assert_refused(&self.sign().await, code);
        assert!(self.attestation_files().is_empty());
    }

    fn attestation_files(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.out.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let name = p.file_name().unwrap().to_str().unwrap();
                name.starts_with("attestation-") && name != ATTESTATION_MANIFEST_FILE
            })
            .collect()
    }
}

/// The single candidate was refused with `code`, nothing was signed, exit 3.
fn assert_refused(report: &RunReport, code: &str) {
    assert_eq!(report.candidates.len(), 1, "{report:?}");
    let c = &report.candidates[0];
    assert_eq!(c.status, CandidateStatus::Refused, "{report:?}");
    assert_eq!(c.code, Some(code), "{}", report.summary());
    assert_eq!(report.signed, 0);
    assert_eq!(report.exit_code(), ExitCode::NotDone);
}

// ---------- cases ----------

#[tokio::test]
async fn valid_candidate_yields_an_attestation_the_contract_settles_with() {
    let w = world().await;
    let report = w.sign().await;
    assert_eq!(
        report.exit_code(),
        ExitCode::Success,
        "{}",
        report.summary()
    );
    assert_eq!(report.signed, 1);

    let files = w.attestation_files();
    assert_eq!(files.len(), 1, "{files:?}");
    let raw: Value = serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
    let att = AttestationFile::from_value(&raw).unwrap();
    assert_eq!(att.verifier, w.signer);
    assert!(att.passed);
    // now + 900 s, where now is the later of the caller's clock and the pinned block's
    // timestamp (deploying the bounty mined blocks after `w.now` was read).
    let head = w.kit.latest_timestamp().await.unwrap();
    assert!(
        (w.now + 900..=head + 900).contains(&att.deadline),
        "deadline {} not within [{}, {}]",
        att.deadline,
        w.now + 900,
        head + 900
    );
    let manifest: Value = serde_json::from_slice(
        &std::fs::read(w.out.path().join(ATTESTATION_MANIFEST_FILE)).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["attestations"][0]["job_id"], w.job["job_id"]);

    settle_with(&w, &att).await;
    assert_eq!(w.bounty.status().await.unwrap(), status::SETTLED);
}

/// What a reference relay reads from one signer's directory (PROTOCOL §7), written from the
/// spec rather than with our types: only `manifest.json` =
/// `{schema: "agent-bounties/regression-attestation-v1", signer, attestations: [{job_id, file}]}`,
/// then each listed file. Returns (signer, [(job_id, attestation)]).
fn reference_relay_read(dir: &std::path::Path) -> (String, Vec<(String, Value)>) {
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let keys: Vec<&str> = manifest
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys.len(), 3, "{manifest}");
    assert_eq!(
        manifest["schema"],
        "agent-bounties/regression-attestation-v1"
    );
    let signer = manifest["signer"].as_str().unwrap().to_owned();
    let mut out = Vec::new();
    for entry in manifest["attestations"].as_array().unwrap() {
        assert_eq!(entry.as_object().unwrap().len(), 2, "{entry}");
        let job_id = entry["job_id"].as_str().unwrap().to_owned();
        let file = entry["file"].as_str().unwrap();
        assert!(!file.contains('/') && file.ends_with(".json"), "{file}");
        let attestation: Value =
            serde_json::from_slice(&std::fs::read(dir.join(file)).unwrap()).unwrap();
        assert_eq!(
            attestation["schema"],
            "agent-bounties/regression-attestation-v1"
        );
        assert_eq!(attestation["job_id"], job_id.as_str());
        assert_eq!(attestation["verifier"], signer.as_str());
        out.push((job_id, attestation));
    }
    (signer, out)
}

#[tokio::test]
async fn a_reference_relay_reads_our_attestation_directory() {
    let w = world().await;
    let report = w.sign().await;
    assert_eq!(report.signed, 1, "{}", report.summary());
    let (signer, read) = reference_relay_read(w.out.path());
    assert_eq!(signer, w.signer.to_string());
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].0, w.job["job_id"].as_str().unwrap());
    assert_eq!(read[0].1["passed"], true);
    // Our own manifest is still written beside it.
    assert!(w.out.path().join(ATTESTATION_MANIFEST_FILE).is_file());
}

#[tokio::test]
async fn failing_verdict_is_signed_and_rejects_on_chain() {
    let w = world_with(&[signer_address()], 3600, 1).await;
    let report = w.sign().await;
    assert_eq!(
        report.exit_code(),
        ExitCode::Success,
        "{}",
        report.summary()
    );
    assert_eq!(report.candidates[0].passed, Some(false));
    let raw: Value =
        serde_json::from_slice(&std::fs::read(&w.attestation_files()[0]).unwrap()).unwrap();
    let att = AttestationFile::from_value(&raw).unwrap();
    w.bounty
        .settle(vec![TestBounty::Attestation {
            verifier: att.verifier.into(),
            passed: false,
            responseHash: att.response_hash.into(),
            deadline: U256::from(att.deadline),
            signature: Bytes::copy_from_slice(att.parsed_signature().unwrap().as_bytes()),
        }])
        .await
        .unwrap();
    assert_ne!(w.bounty.status().await.unwrap(), status::SUBMITTED);
}

#[tokio::test]
async fn job_changed_since_the_run_is_refused() {
    let w = world().await;
    let mut changed = w.job.clone();
    changed["verification_expires_at"] = json!(w.params.verification_expires_at + 1);
    *w.feed.lock().unwrap() = json!([changed]);
    w.sign_refused("job_changed").await;
}

#[tokio::test]
async fn job_gone_from_the_feed_is_refused() {
    let w = world().await;
    *w.feed.lock().unwrap() = json!([]);
    assert_refused(&w.sign().await, "job_gone");
}

#[tokio::test]
async fn deadline_too_close_to_now_is_refused() {
    let w = world_with(&[signer_address()], 100, 0).await;
    assert_refused(&w.sign().await, "deadline_too_close");
}

#[tokio::test]
async fn expired_job_is_refused() {
    let w = world().await;
    let reader = w.reader();
    let report = w.sign_with(&reader, w.params.verification_expires_at).await;
    assert_refused(&report, "candidate_job_invalid");
}

/// Answers like the node but reports another chain id.
struct OtherChain(RpcChainReader);

impl ChainReader for OtherChain {
    async fn read_bounty(&self, bounty: Address) -> Result<BountyState, ChainReadError> {
        let mut s = self.0.read_bounty(bounty).await?;
        s.chain_id = 84532;
        Ok(s)
    }
    async fn attestation_digest(
        &self,
        bounty: Address,
        block: u64,
        q: AttestationQuery,
    ) -> Result<verifier_sdk::Bytes32, ChainReadError> {
        self.0.attestation_digest(bounty, block, q).await
    }
    async fn is_verifier(
        &self,
        bounty: Address,
        block: u64,
        a: Address,
    ) -> Result<bool, ChainReadError> {
        self.0.is_verifier(bounty, block, a).await
    }
}

#[tokio::test]
async fn wrong_chain_id_is_refused() {
    let w = world().await;
    let reader = OtherChain(w.reader());
    assert_refused(&w.sign_with(&reader, w.now).await, "chain_id_mismatch");
}

#[tokio::test]
async fn on_chain_evidence_hash_mismatch_is_refused() {
    let w = world().await;
    let p = &w.params;
    w.bounty
        .set_hashes(
            p.submission_hash,
            B256::repeat_byte(0x01),
            p.policy_hash,
            p.terms_hash,
        )
        .await
        .unwrap();
    w.sign_mismatched(&["evidence_hash"]).await;
}

/// The real bounty's job with a more lenient benchmark: the same policy, submission and
/// evidence, so everything the attestation digest binds is unchanged; only the terms document
/// (its benchmark, hence `terms_hash` and `benchmark_hash`) differs from what the bounty funded.
fn lenient_benchmark(job: &Value) -> Value {
    let mut lenient = job.clone();
    lenient["terms"]["document"]["benchmark"]["runner_manifest"]["command"] =
        json!(["python3", "-c", "pass"]);
    verifier_sdk::fixtures::rehash(&mut lenient);
    assert_eq!(lenient["terms"]["policy_hash"], job["terms"]["policy_hash"]);
    assert_ne!(
        lenient["terms"]["benchmark_hash"],
        job["terms"]["benchmark_hash"]
    );
    lenient
}

#[tokio::test]
async fn lenient_benchmark_terms_not_on_chain_is_refused() {
    let w = world().await;
    let lenient = lenient_benchmark(&w.job);
    write_candidates(w.candidates.path(), &[candidate_for(&lenient, w.now, 0)]);
    *w.feed.lock().unwrap() = json!([lenient]);
    w.sign_mismatched(&["terms_hash", "benchmark_hash"]).await;
    assert!(w.attestation_files().is_empty());
}

#[tokio::test]
async fn each_terms_hash_the_bounty_did_not_fund_is_refused() {
    let w = world().await;
    let codes = [
        "terms_hash",
        "acceptance_criteria_hash",
        "benchmark_hash",
        "evidence_schema_hash",
    ];
    for (i, code) in codes.into_iter().enumerate() {
        w.set_terms(w.terms_but(i, B256::repeat_byte(0x5a))).await;
        w.sign_mismatched(&[code]).await;
        assert!(w.attestation_files().is_empty());
    }
    w.set_terms(w.funded_terms()).await;
    assert_eq!(w.sign().await.signed, 1);
}

/// PR #1288's bug (issue #43 item 3): a feed item was marked ready that the signer later
/// refused. The readiness record's chain check is the signer's own check on the bounty read
/// now: a bounty whose terms hash differs from the job's is not ready, and the signer refuses
/// it for the same code and the same mismatched field; once the chain agrees, both say yes.
#[tokio::test]
async fn a_feed_item_whose_terms_hash_differs_from_the_chain_is_not_ready_and_refused_for_the_same_code()
 {
    use verifier_sdk::readiness::{ALL_CHECKS, CheckKind, CheckResult, ReadinessRecord};
    let w = world().await;
    let job = validate_job(&w.job, w.now).unwrap();
    let reader = w.reader();
    // Every host check passes here: only the chain decides.
    let record = |chain: CheckResult| {
        let mut checks: Vec<CheckResult> = ALL_CHECKS
            .iter()
            .filter(|k| **k != CheckKind::Chain)
            .map(|k| CheckResult::pass(*k))
            .collect();
        checks.push(chain);
        ReadinessRecord::new(job.job_id(), w.now, checks)
    };
    w.set_terms(w.terms_but(0, B256::repeat_byte(0x5a))).await;
    let ready = record(bounty_chain::read_chain_readiness(&job, &reader).await);
    assert!(!ready.ready, "{ready:?}");
    let failed = ready.check(CheckKind::Chain).unwrap();
    let report = w.sign().await;
    assert_refused(&report, failed.code.as_deref().unwrap());
    assert_eq!(report.candidates[0].code, Some("onchain_mismatch"));
    assert_eq!(report.candidates[0].mismatches, failed.details);
    assert_eq!(failed.details, vec!["terms_hash"]);

    w.set_terms(w.funded_terms()).await;
    let ready = record(bounty_chain::read_chain_readiness(&job, &reader).await);
    assert!(ready.ready, "{ready:?}");
    assert_eq!(w.sign().await.signed, 1);
}

#[tokio::test]
async fn on_chain_round_mismatch_is_refused() {
    let w = world().await;
    w.bounty.set_round(8).await.unwrap();
    w.sign_mismatched(&["round"]).await;
}

#[tokio::test]
async fn changed_verifier_set_is_refused() {
    let w = world().await;
    let other = dev_signer(2).unwrap().address();
    w.bounty
        .set_verifiers(vec![w.signer.into(), other], 2)
        .await
        .unwrap();
    w.sign_mismatched(&["verifier_set_hash", "verifier_list", "threshold"])
        .await;
}

#[tokio::test]
async fn changed_threshold_is_refused() {
    let w = world_with(
        &[
            signer_address(),
            Address::from(dev_signer(2).unwrap().address()),
        ],
        3600,
        0,
    )
    .await;
    w.bounty.set_threshold(1).await.unwrap();
    w.sign_mismatched(&["threshold"]).await;
}

#[tokio::test]
async fn job_without_this_signer_is_not_ours_and_not_signed() {
    let w = world_with(&[Address::from(dev_signer(2).unwrap().address())], 3600, 0).await;
    let report = w.sign().await;
    assert_eq!(report.candidates[0].status, CandidateStatus::NotOurs);
    assert_eq!(report.exit_code(), ExitCode::Success);
    assert!(w.attestation_files().is_empty());
}

/// #41 item 4: a candidate whose job is of the platform's other verification mode
/// (`deterministic_module`, served to every verifier) was refused as an invalid job
/// ("verification_mode must be signed_quorum"), a red signer run (exit 3). It is not ours:
/// reported so, with its own code, before the feed or the chain is asked; nothing is signed.
#[tokio::test]
async fn signer_skips_a_deterministic_module_candidate_instead_of_refusing_it() {
    let w = world().await;
    let mut module = w.job.clone();
    module["verification_mode"] = json!("deterministic_module");
    module["verifier_module"] = json!(format!("0x{}", "33".repeat(20)));
    module["eligible_verifiers"] = json!([]);
    module["threshold"] = json!(0);
    *w.feed.lock().unwrap() = json!([module.clone()]);
    w.rewrite_candidate(|c| c.job = module.clone());
    let report = w.sign().await;
    assert_eq!(report.candidates.len(), 1, "{report:?}");
    let c = &report.candidates[0];
    assert_eq!(c.status, CandidateStatus::NotOurs, "{}", report.summary());
    assert_eq!(
        c.code,
        Some("other_verification_mode"),
        "{}",
        report.summary()
    );
    assert!(
        c.detail
            .as_deref()
            .unwrap_or_default()
            .contains("deterministic_module"),
        "{}",
        report.summary()
    );
    assert_eq!((report.not_ours, report.refused), (1, 0));
    assert_eq!(report.exit_code(), ExitCode::Success);
    assert!(w.attestation_files().is_empty());
}

#[tokio::test]
async fn tampered_response_hash_is_refused() {
    let w = world().await;
    w.rewrite_candidate(|c| c.outcome["response_hash"] = json!(format!("0x{}", "12".repeat(32))));
    assert_refused(&w.sign().await, "outcome_invalid");
}

#[tokio::test]
async fn flipped_verdict_is_refused() {
    let w = world().await;
    w.rewrite_candidate(|c| c.outcome["verdict"] = json!("failed"));
    assert_refused(&w.sign().await, "outcome_invalid");
}

/// A candidate as the reference runner writes it (no `evidence`): refused before the feed or
/// the chain is asked, with a message that says why, so an operator mixing the two pipelines
/// sees the cause rather than a bare "no evidence record".
#[tokio::test]
async fn reference_runner_candidate_without_evidence_is_refused_with_a_clear_message() {
    let w = world().await;
    w.rewrite_candidate(|c| c.evidence = None);
    let report = w.sign().await;
    assert_refused(&report, "evidence_rejected");
    let detail = report.candidates[0].detail.as_deref().unwrap();
    assert!(
        detail.contains("reference-runner candidate without evidence")
            && detail.contains("requires the worker's evidence record"),
        "{detail}"
    );
    assert!(w.attestation_files().is_empty());
}

/// A candidate for `job` run under the OCI runtime `runtime` (the profile and engine facts a
/// worker with `--oci-runtime runtime` records).
fn candidate_under(job: &Value, now: u64, runtime: &str) -> Candidate {
    candidate_run(job, now, 0, runtime)
}

#[tokio::test]
async fn a_signer_requiring_runsc_signs_a_runsc_run() {
    let mut w = world().await;
    w.require_oci_runtime = Some("runsc".into());
    write_candidates(
        w.candidates.path(),
        &[candidate_under(&w.job, w.now, "runsc")],
    );
    let report = w.sign().await;
    assert_eq!(report.signed, 1, "{}", report.summary());
    assert_eq!(w.attestation_files().len(), 1);
}

#[tokio::test]
async fn a_signer_requiring_runsc_refuses_a_runc_run_with_the_reason() {
    let mut w = world().await;
    w.require_oci_runtime = Some("runsc".into());
    let report = w.sign().await;
    assert_refused(&report, "oci_runtime_refused");
    let detail = report.candidates[0].detail.as_deref().unwrap();
    assert_eq!(
        detail,
        "--require-oci-runtime runsc: the run's OCI runtime is \"runc\", not the required \"runsc\""
    );
    assert!(w.attestation_files().is_empty());
}

/// A runc run's evidence rewritten to claim runsc everywhere the runtime is named (profile and
/// engine facts, version line included): the runtime check passes, but the limits are still
/// how a runc run is sandboxed (pids in the host cgroup, no nproc), so revalidation refuses it.
#[tokio::test]
async fn a_planted_evidence_record_claiming_runsc_for_a_runc_run_is_refused() {
    let mut w = world().await;
    w.require_oci_runtime = Some("runsc".into());
    let facts = serde_json::to_value(verifier_sdk::fixtures::runtime_facts("runsc")).unwrap();
    w.rewrite_candidate(|c| {
        let ev = c.evidence.as_mut().unwrap();
        ev["isolation"]["requested"]["runtime"] = json!("runsc");
        ev["isolation"]["observed"]["runtime"] = json!("runsc");
        ev["oci_runtime"] = facts.clone();
    });
    let report = w.sign().await;
    assert_refused(&report, "evidence_rejected");
    let detail = report.candidates[0].detail.as_deref().unwrap();
    assert!(detail.contains("pids_limit, ulimits"), "{detail}");
    // Only the read-back rewritten: the record disagrees with itself.
    w.rewrite_candidate(|c| {
        c.evidence.as_mut().unwrap()["isolation"]["observed"]["runtime"] = json!("runsc");
    });
    w.sign_refused("oci_runtime_refused").await;
}

#[tokio::test]
async fn test_double_evidence_is_refused() {
    let w = world().await;
    w.rewrite_candidate(|c| c.evidence.as_mut().unwrap()["executor"] = json!("test-double"));
    assert_refused(&w.sign().await, "evidence_rejected");
}

#[tokio::test]
async fn rpc_returning_another_attestation_digest_is_refused() {
    let w = world().await;
    let proxy = lying_rpc(w.kit.url().to_owned()).await;
    let reader = RpcChainReader::new(&proxy, Duration::from_secs(10)).unwrap();
    let report = w.sign_with(&reader, w.now).await;
    assert_refused(&report, "digest_mismatch");
    assert!(w.attestation_files().is_empty());
}

#[tokio::test]
async fn one_bad_candidate_does_not_block_the_others() {
    let w = world().await;
    let (_b2, _p2, job2) = deploy_for(&w.kit, &[w.signer], 3600, w.now).await;
    let mut bad = candidate_for(&job2, w.now, 0);
    bad.outcome["verdict"] = json!("failed");
    let good = candidate_for(&w.job, w.now, 0);
    write_candidates(w.candidates.path(), &[bad, good]);
    *w.feed.lock().unwrap() = json!([job2, w.job.clone()]);
    let report = w.sign().await;
    assert_eq!(report.signed, 1, "{}", report.summary());
    assert_eq!(report.refused, 1);
    assert_eq!(report.candidates[0].code, Some("outcome_invalid"));
    assert_eq!(report.candidates[1].status, CandidateStatus::Signed);
    assert_eq!(report.exit_code(), ExitCode::NotDone);
}

#[tokio::test]
async fn manifest_entry_pointing_outside_the_directory_is_invalid_input() {
    let w = world().await;
    let job_id = w.job["job_id"].as_str().unwrap();
    std::fs::write(
        w.candidates.path().join("manifest.json"),
        serde_json::to_vec(&json!({
            "schema": "agent-bounties/regression-candidate-manifest-v1",
            "network": "base-mainnet",
            "candidates": [{"job_id": job_id, "file": "../candidate.json"}],
        }))
        .unwrap(),
    )
    .unwrap();
    let err = w.try_sign(&w.cfg()).await.unwrap_err();
    assert_eq!(err.exit_code(), ExitCode::InvalidInput);
}

#[tokio::test]
async fn symlinked_candidate_file_is_refused() {
    let w = world().await;
    let name = candidate_file_name(w.job["job_id"].as_str().unwrap());
    let real = w.candidates.path().join("elsewhere.json");
    std::fs::rename(w.candidates.path().join(&name), &real).unwrap();
    std::os::unix::fs::symlink(&real, w.candidates.path().join(&name)).unwrap();
    assert_refused(&w.sign().await, "candidate_unreadable");
}

// ---------- the binary ----------

async fn run_binary(w: &World, key_args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_signer"));
    cmd.args(["sign", "--candidates"])
        .arg(w.candidates.path())
        .args([
            "--api",
            &w.api,
            "--rpc",
            w.kit.url(),
            "--signer",
            &w.signer.to_string(),
            "--out",
        ])
        .arg(w.out.path())
        .arg("--history")
        .arg(w.history.path())
        .args(["--json"])
        .args(key_args)
        .env_remove("RUST_LOG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().await.unwrap();
    exit_and_text(&out)
}

fn key_digits() -> &'static str {
    DEV_KEYS[SIGNER_KEY_INDEX].trim_start_matches("0x")
}

#[tokio::test]
async fn binary_signs_with_a_key_from_an_env_var_and_prints_a_json_report() {
    let w = world().await;
    let (code, stdout, stderr) = run_binary(
        &w,
        &["--key-env", "SIGNER_TEST_KEY"],
        &[("SIGNER_TEST_KEY", DEV_KEYS[SIGNER_KEY_INDEX])],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["signed"], 1);
    assert_eq!(report["candidates"][0]["status"], "signed");
    assert!(!stdout.contains(key_digits()) && !stderr.contains(key_digits()));
}

/// Writes the signer's key at `path` with permissions `mode`.
fn write_key(path: &Path, mode: u32) {
    std::fs::write(path, DEV_KEYS[SIGNER_KEY_INDEX]).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[tokio::test]
async fn binary_refuses_a_key_file_with_mode_0644() {
    let w = world().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("key");
    write_key(&path, 0o644);
    let (code, stdout, stderr) = run_binary(&w, &["--key-file", path.to_str().unwrap()], &[]).await;
    assert_eq!(code, 78, "{stderr}");
    assert!(stderr.contains("0600 or stricter"), "{stderr}");
    assert!(!stdout.contains(key_digits()) && !stderr.contains(key_digits()));
    assert!(w.attestation_files().is_empty());

    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (code, _, stderr) = run_binary(&w, &["--key-file", path.to_str().unwrap()], &[]).await;
    assert_eq!(code, 0, "{stderr}");
}

#[tokio::test]
async fn binary_refuses_a_key_for_another_address_with_exit_78() {
    let w = world().await;
    let (code, stdout, stderr) = run_binary(
        &w,
        &["--key-env", "SIGNER_TEST_OTHER_KEY"],
        &[("SIGNER_TEST_OTHER_KEY", DEV_KEYS[3])],
    )
    .await;
    assert_eq!(code, 78, "{stderr}");
    assert!(stderr.contains("is not --signer"), "{stderr}");
    let other = DEV_KEYS[3].trim_start_matches("0x");
    assert!(!stdout.contains(other) && !stderr.contains(other));
    assert!(w.attestation_files().is_empty());
}

/// Runs `signer sign` with the given `--api` and `--rpc` against `w`'s candidates.
async fn run_binary_with_urls(w: &World, api: &str, rpc: &str) -> (i32, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_signer"))
        .args(["sign", "--candidates"])
        .arg(w.candidates.path())
        .args([
            "--api",
            api,
            "--rpc",
            rpc,
            "--signer",
            &w.signer.to_string(),
        ])
        .arg("--out")
        .arg(w.out.path())
        .arg("--history")
        .arg(w.history.path())
        .args(["--key-env", "SIGNER_TEST_KEY"])
        .env("SIGNER_TEST_KEY", DEV_KEYS[SIGNER_KEY_INDEX])
        .output()
        .await
        .unwrap();
    exit_and_text(&out)
}

#[tokio::test]
async fn binary_refuses_plain_http_rpc_or_api_to_a_remote_host_with_exit_78() {
    // `.invalid` never resolves (RFC 6761): nothing could answer, yet the refusal must come
    // from the URL policy, before any request, and must not echo the URL's secret path.
    let w = world().await;
    for rpc in [
        "http://rpc.example.invalid:8545/v2/SECRETRPCKEY",
        "ws://127.0.0.1:8545/v2/SECRETRPCKEY",
    ] {
        let (code, stdout, stderr) = run_binary_with_urls(&w, &w.api, rpc).await;
        assert_eq!(code, 78, "{rpc}: {stderr}");
        assert!(
            stderr.contains("--rpc") && stderr.contains("https"),
            "{stderr}"
        );
        assert!(!stdout.contains("SECRETRPCKEY") && !stderr.contains("SECRETRPCKEY"));
    }
    let (code, _, stderr) =
        run_binary_with_urls(&w, "http://api.example.invalid", w.kit.url()).await;
    assert_eq!(code, 78, "{stderr}");
    assert!(
        stderr.contains("--api") && stderr.contains("https"),
        "{stderr}"
    );
    assert!(w.attestation_files().is_empty());
    // Loopback spellings stay accepted (the local node answers on 127.0.0.1).
    let port = w.kit.url().rsplit(':').next().unwrap().to_owned();
    let (code, _, stderr) =
        run_binary_with_urls(&w, &w.api, &format!("http://localhost:{port}")).await;
    assert_eq!(code, 0, "{stderr}");
}

#[tokio::test]
async fn binary_usage_error_is_exit_2() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_signer"))
        .args(["sign", "--candidates", "/nonexistent"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

// ---------- evidence isolation (DESIGN §4) ----------

#[tokio::test]
async fn evidence_saying_the_container_had_a_bridge_network_is_refused() {
    let w = world().await;
    w.rewrite_candidate(|c| {
        c.evidence.as_mut().unwrap()["isolation"]["observed"]["network_mode"] = json!("bridge");
    });
    let report = w.sign().await;
    assert_refused(&report, "evidence_rejected");
    let detail = report.candidates[0].detail.clone().unwrap_or_default();
    assert!(detail.contains("network_mode"), "{detail}");
    println!("refusal: {detail}");
    assert!(w.attestation_files().is_empty());
}

// ---------- output files ----------

/// Plants `kind` (hard link or symlink) at every temporary name the signer's writes used to
/// use, pointing at a victim file outside the output directory; signing must succeed and the
/// victim must keep its bytes.
async fn planted_link_at_the_old_temp_name_leaves_the_victim_untouched(hard: bool) {
    let w = world().await;
    let elsewhere = tempfile::tempdir().unwrap();
    let victim = elsewhere.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let attestation =
        signer::sign::attestation_file_name(w.job["job_id"].as_str().unwrap(), &w.signer);
    for name in [ATTESTATION_MANIFEST_FILE, attestation.as_str()] {
        let planted = w.out.path().join(format!(".{name}.tmp"));
        if hard {
            std::fs::hard_link(&victim, &planted).unwrap();
        } else {
            std::os::unix::fs::symlink(&victim, &planted).unwrap();
        }
    }
    let result = w.try_sign(&w.cfg()).await;
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    let report = result.unwrap();
    assert_eq!(report.signed, 1, "{}", report.summary());
}

#[tokio::test]
async fn hard_link_planted_at_the_old_temp_name_does_not_overwrite_its_target() {
    planted_link_at_the_old_temp_name_leaves_the_victim_untouched(true).await;
}

#[tokio::test]
async fn symlink_planted_at_the_old_temp_name_does_not_overwrite_its_target() {
    planted_link_at_the_old_temp_name_leaves_the_victim_untouched(false).await;
}

// ---------- key file ownership and path ----------

#[tokio::test]
async fn binary_refuses_a_key_file_owned_by_another_user_with_exit_78() {
    let w = world().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("key");
    write_key(&path, 0o600);
    // chown as root, or `sudo -n` for GitHub's runner user.
    assert!(
        test_root::give_to_another_user(&path).unwrap(),
        "chown needs root or password-less sudo"
    );
    let (code, stdout, stderr) = run_binary(&w, &["--key-file", path.to_str().unwrap()], &[]).await;
    println!("exit {code}: {stderr}");
    assert_eq!(code, 78, "{stderr}");
    assert!(stderr.contains("owned by uid 12345"), "{stderr}");
    assert!(!stdout.contains(key_digits()) && !stderr.contains(key_digits()));
    assert!(w.attestation_files().is_empty());
}

#[tokio::test]
async fn binary_refuses_a_key_file_reached_through_a_symlinked_directory_with_exit_78() {
    let w = world().await;
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    write_key(&real.join("key"), 0o600);
    std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
    let through = dir.path().join("link/key");
    let (code, _, stderr) = run_binary(&w, &["--key-file", through.to_str().unwrap()], &[]).await;
    println!("exit {code}: {stderr}");
    assert_eq!(code, 78, "{stderr}");
    assert!(
        stderr.contains("symbolic link in a parent directory"),
        "{stderr}"
    );
    assert!(w.attestation_files().is_empty());
}

/// The chain's clock runs ahead of the signer's (a node that mines faster than wall time, or a
/// local clock running late): the deadline must count from the chain's time, or the keeper and
/// the contract see it as about to expire and the honest verdict is never settled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadline_counts_from_the_chain_clock_when_it_runs_ahead_of_ours() {
    let w = world().await;
    let head = w.kit.latest_timestamp().await.unwrap();
    let reader = w.reader();
    // Our clock is 800 s behind the chain's; counted from it, the deadline would leave only
    // 100 s of chain time, inside the keeper's and most relays' safety margins.
    let report = w.sign_with(&reader, head - 800).await;
    assert_eq!(report.signed, 1, "{}", report.summary());
    let raw: Value =
        serde_json::from_slice(&std::fs::read(&w.attestation_files()[0]).unwrap()).unwrap();
    let att = AttestationFile::from_value(&raw).unwrap();
    assert!(
        att.deadline >= head + 900,
        "deadline {} < chain time {head} + 900",
        att.deadline
    );
}

// ---------- the manifest bound ----------

/// A manifest of 1,001 entries, one past the bound every producer and the signer agree on:
/// the 1,000 of the earliest expiry are handled (here 999 jobs of other verifiers, checked
/// locally, and one of ours, signed) and the last is reported as deferred. The run is never
/// refused as a whole.
#[tokio::test]
async fn a_manifest_one_past_the_bound_is_handled_up_to_the_bound_and_reports_the_rest() {
    assert_eq!(verifier_sdk::artifacts::MAX_MANIFEST_CANDIDATES, 1000);
    let w = world().await;
    let (_late, _p, late_job) = deploy_for(&w.kit, &[w.signer], 7200, w.now).await;
    let other = Address::from_bytes([0x77; 20]);
    let mut candidates = vec![candidate_for(&late_job, w.now, 0)];
    for i in 0..999u64 {
        let mut contract = [0x10u8; 20];
        contract[12..].copy_from_slice(&i.to_be_bytes());
        let job = job_value(&JobParams {
            bounty_contract: Address::from_bytes(contract).to_string(),
            verifiers: vec![other.to_string()],
            expires_at: w.now + 3601 + i,
            ..JobParams::default()
        });
        candidates.push(candidate_for(&job, w.now, 0));
    }
    candidates.push(candidate_for(&w.job, w.now, 0));
    write_candidates(w.candidates.path(), &candidates);
    *w.feed.lock().unwrap() = json!([w.job.clone(), late_job.clone()]);
    let report = w
        .try_sign(&w.cfg())
        .await
        .unwrap_or_else(|e| panic!("the whole run was refused: {e}"));
    let value = serde_json::to_value(&report).unwrap();
    assert_eq!(report.candidates.len(), 1001);
    assert_eq!(report.signed, 1, "{}", report.summary());
    assert_eq!(report.not_ours, 999);
    assert_eq!(value["deferred"], 1, "{value:#}");
    let deferred: Vec<&Value> = value["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "deferred")
        .collect();
    assert_eq!(deferred.len(), 1);
    assert_eq!(deferred[0]["job_id"], late_job["job_id"]);
    assert_eq!(deferred[0]["code"], "manifest_bound");
    assert_eq!(w.attestation_files().len(), 1);
    assert_eq!(report.exit_code(), ExitCode::Success);
}

/// With a bound of 2 (as a test injects it), three candidates of ours: the two of the
/// earliest expiry are signed, whatever their manifest order; the third is deferred.
#[tokio::test]
async fn past_the_bound_the_earliest_expiries_are_signed() {
    let w = world_with(&[signer_address()], 3600, 0).await;
    let (_b2, _p2, latest) = deploy_for(&w.kit, &[w.signer], 9000, w.now).await;
    let (_b3, _p3, middle) = deploy_for(&w.kit, &[w.signer], 5400, w.now).await;
    write_candidates(
        w.candidates.path(),
        &[
            candidate_for(&latest, w.now, 0),
            candidate_for(&w.job, w.now, 0),
            candidate_for(&middle, w.now, 0),
        ],
    );
    *w.feed.lock().unwrap() = json!([w.job.clone(), latest.clone(), middle.clone()]);
    let mut cfg = w.cfg();
    cfg.max_candidates = 2;
    let report = w.try_sign(&cfg).await.unwrap();
    assert_eq!(report.signed, 2, "{}", report.summary());
    assert_eq!(report.deferred, 1);
    let ids: Vec<(&str, CandidateStatus)> = report
        .candidates
        .iter()
        .map(|c| (c.job_id.as_str(), c.status))
        .collect();
    assert_eq!(
        ids,
        [
            (w.job["job_id"].as_str().unwrap(), CandidateStatus::Signed),
            (middle["job_id"].as_str().unwrap(), CandidateStatus::Signed),
            (
                latest["job_id"].as_str().unwrap(),
                CandidateStatus::Deferred
            ),
        ]
    );
    assert!(
        report.summary().contains("1 deferred"),
        "{}",
        report.summary()
    );
    assert_eq!(w.attestation_files().len(), 2);
}

// ---------- the signing history (issue #44) ----------

/// The same job with the other verdict: what a flaky benchmark's re-run after a lost cache, a
/// key moved to a new host or an overlapping signing job hands the signer.
fn flip_verdict(w: &World, exit_code: i64) {
    write_candidates(
        w.candidates.path(),
        &[candidate_for(&w.job, w.now, exit_code)],
    );
}

/// A finished `signer`'s exit code, stdout and stderr.
fn exit_and_text(out: &std::process::Output) -> (i32, String, String) {
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// `signer <args…>` with the world's key in the environment: (exit code, stdout, stderr).
async fn signer_cli(
    args: impl IntoIterator<Item = impl AsRef<std::ffi::OsStr>>,
) -> (i32, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_signer"))
        .args(args)
        .env("SIGNER_TEST_KEY", DEV_KEYS[SIGNER_KEY_INDEX])
        .env_remove("RUST_LOG")
        .output()
        .await
        .unwrap();
    exit_and_text(&out)
}

async fn sign_binary(w: &World) -> (i32, String, String) {
    run_binary(
        w,
        &["--key-env", "SIGNER_TEST_KEY"],
        &[("SIGNER_TEST_KEY", DEV_KEYS[SIGNER_KEY_INDEX])],
    )
    .await
}

/// Submits `att` to `w`'s bounty as the file says it (the contract checks the signature).
async fn settle_with(w: &World, att: &AttestationFile) {
    let sig = att.parsed_signature().unwrap();
    w.bounty
        .settle(vec![TestBounty::Attestation {
            verifier: att.verifier.into(),
            passed: att.passed,
            responseHash: att.response_hash.into(),
            deadline: U256::from(att.deadline),
            signature: Bytes::copy_from_slice(sig.as_bytes()),
        }])
        .await
        .unwrap();
}

fn only_attestation(w: &World) -> AttestationFile {
    let files = w.attestation_files();
    assert_eq!(files.len(), 1, "{files:?}");
    let raw: Value = serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
    AttestationFile::from_value(&raw).unwrap()
}

#[tokio::test]
async fn a_contradicting_verdict_is_refused_across_restarts() {
    let w = world().await;
    let first = w.sign().await;
    assert_eq!(first.signed, 1, "{}", first.summary());
    assert_eq!(first.candidates[0].passed, Some(true));
    let earlier = only_attestation(&w).signature;
    // A new run of the signer (the history reopened from disk) is handed the other verdict.
    flip_verdict(&w, 1);
    let second = w.sign().await;
    assert_eq!(second.signed, 0, "{}", second.summary());
    assert_eq!(
        second.candidates[0].code,
        Some("contradicts_history"),
        "{}",
        second.summary()
    );
    assert_eq!(second.exit_code(), ExitCode::ContradictsHistory);
    assert_eq!(ExitCode::ContradictsHistory.code(), 10);
    let detail = second.candidates[0].detail.clone().unwrap();
    assert!(
        detail.contains(&earlier),
        "names the earlier signature: {detail}"
    );
    assert_eq!(w.open_history().all().unwrap().len(), 1);
}

#[tokio::test]
async fn the_same_verdict_again_returns_the_stored_signature_and_signs_nothing_new() {
    let w = world().await;
    assert_eq!(w.sign().await.signed, 1);
    let first = only_attestation(&w);
    std::fs::remove_file(&w.attestation_files()[0]).unwrap();
    // The re-run's own output differs (another run, other stream hashes), its verdict not.
    w.rewrite_candidate(|c| c.runner_revision = "another-runner-revision".into());
    let again = w.sign().await;
    assert_eq!(again.signed, 1, "{}", again.summary());
    assert!(again.candidates[0].from_history, "{again:?}");
    assert_eq!(only_attestation(&w), first);
    assert_eq!(w.open_history().all().unwrap().len(), 1);
}

#[tokio::test]
async fn after_a_crash_between_the_history_commit_and_the_release_the_record_holds() {
    let w = world().await;
    // The signature is recorded, then the process dies before any attestation leaves it:
    // here its first output write fails (a directory stands where the candidate copy goes).
    let blocker = w
        .out
        .path()
        .join(candidate_file_name(w.job["job_id"].as_str().unwrap()));
    std::fs::create_dir_all(blocker.join("x")).unwrap();
    let (code, _, stderr) = sign_binary(&w).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(w.attestation_files().is_empty());
    let recorded = w.open_history().all().unwrap();
    assert_eq!(recorded.len(), 1, "committed before the release");
    std::fs::remove_dir_all(&blocker).unwrap();

    // The next run with the other verdict is refused …
    flip_verdict(&w, 1);
    let (code, stdout, stderr) = sign_binary(&w).await;
    assert_eq!(code, 10, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["candidates"][0]["code"], "contradicts_history");
    assert!(w.attestation_files().is_empty());

    // … and with the same verdict it returns the signature the crashed run made.
    flip_verdict(&w, 0);
    let (code, stdout, stderr) = sign_binary(&w).await;
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["candidates"][0]["from_history"], true, "{report}");
    assert_eq!(
        only_attestation(&w).signature,
        recorded[0].signature().to_hex()
    );
    assert_eq!(w.open_history().all().unwrap(), recorded);
}

#[tokio::test]
async fn two_signers_racing_on_one_store_the_second_fails_closed() {
    let w = world().await;
    // The first signer holds the store for its whole run; holding it here makes the outcome
    // independent of which process would have won.
    let first = w.open_history();
    let (code, stdout, stderr) = sign_binary(&w).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("in use by another signer"), "{stderr}");
    let err: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(err["error"]["exit_code"], 1);
    assert!(w.attestation_files().is_empty(), "nothing signed");
    drop(first);
    let (code, _, stderr) = sign_binary(&w).await;
    assert_eq!(code, 0, "{stderr}");
}

#[tokio::test]
async fn a_corrupt_or_missing_history_is_refused_and_nothing_is_signed() {
    let w = world().await;
    std::fs::write(
        w.history.path().join(signer::history::STORE_FILE),
        b"SQLite format 3\0 but then nothing a database holds",
    )
    .unwrap();
    let (code, _, stderr) = sign_binary(&w).await;
    assert_eq!(code, 78, "{stderr}");
    assert!(stderr.contains("is not a signing history"), "{stderr}");
    assert!(w.attestation_files().is_empty());

    std::fs::remove_file(w.history.path().join(signer::history::STORE_FILE)).unwrap();
    let (code, _, stderr) = sign_binary(&w).await;
    assert_eq!(code, 78, "{stderr}");
    assert!(stderr.contains("signer history init"), "{stderr}");
    assert!(w.attestation_files().is_empty());
    assert!(
        !w.history.path().join(signer::history::STORE_FILE).exists(),
        "never created implicitly"
    );
}

#[tokio::test]
async fn export_then_import_on_a_fresh_store_keeps_the_refusal() {
    let mut w = world().await;
    assert_eq!(w.sign().await.signed, 1);
    let moved = tempfile::tempdir().unwrap();
    let file = moved.path().join("history.json");
    // The local node answers as Base mainnet (chain-testkit).
    let chain_id = "8453".to_owned();
    let (code, _, stderr) = signer_cli(&[
        "history".as_ref(),
        "export".as_ref(),
        "--history".as_ref(),
        w.history.path().as_os_str(),
        "--chain-id".as_ref(),
        chain_id.as_ref(),
        "--out".as_ref(),
        file.as_os_str(),
    ])
    .await;
    assert_eq!(code, 0, "{stderr}");
    let exported: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(exported["metadata"]["chain_id"], chain_id.as_str());
    assert_eq!(exported["data"][0]["verifier"], w.signer.to_string());
    assert_eq!(
        exported["data"][0]["signed_attestations"][0]["passed"],
        true
    );

    // The new host: a fresh store, the file imported.
    let fresh = tempfile::tempdir().unwrap();
    let init = signer_cli(&[
        "history".as_ref(),
        "init".as_ref(),
        "--history".as_ref(),
        fresh.path().as_os_str(),
    ])
    .await;
    assert_eq!(init.0, 0, "{}", init.2);
    let import = |store: std::path::PathBuf| {
        let file = file.clone();
        async move {
            signer_cli(&[
                "history".as_ref(),
                "import".as_ref(),
                "--history".as_ref(),
                store.as_os_str(),
                "--file".as_ref(),
                file.as_os_str(),
            ])
            .await
        }
    };
    let (code, _, stderr) = import(fresh.path().to_owned()).await;
    assert_eq!(code, 0, "{stderr}");
    w.history = fresh;
    flip_verdict(&w, 1);
    let report = w.sign().await;
    assert_eq!(report.candidates[0].code, Some("contradicts_history"));
    assert_eq!(report.exit_code(), ExitCode::ContradictsHistory);

    // A store that already signed the other verdict refuses the file whole.
    let other = new_history();
    w.history = other;
    assert_eq!(
        w.sign().await.signed,
        1,
        "the failed verdict, on a store without the first"
    );
    let before = w.open_history().all().unwrap();
    let (code, _, stderr) = import(w.history.path().to_owned()).await;
    assert_eq!(code, 10, "{stderr}");
    assert!(stderr.contains("nothing imported"), "{stderr}");
    assert_eq!(w.open_history().all().unwrap(), before);
}

#[tokio::test]
async fn the_same_verdict_after_its_stored_deadline_is_signed_anew_and_recorded() {
    let w = world().await;
    assert_eq!(w.sign().await.signed, 1);
    let first = only_attestation(&w);
    // Past the stored attestation's deadline it can no longer settle anything: a new one of
    // the same verdict contradicts nothing.
    let later = first.deadline + 1;
    let reader = w.reader();
    let again = w.sign_with(&reader, later).await;
    assert_eq!(again.signed, 1, "{}", again.summary());
    assert!(!again.candidates[0].from_history);
    let second = only_attestation(&w);
    assert!(second.deadline > first.deadline);
    assert_ne!(second.signature, first.signature);
    let records = w.open_history().all().unwrap();
    assert_eq!(records.len(), 2);
    assert!(records.iter().all(|r| r.passed()));
}

// ---------- key backends (issue #44 item 3) ----------

#[tokio::test]
async fn an_attestation_through_the_remote_signer_settles_and_recovers_to_the_verifier() {
    let w = world().await;
    // The local Hardhat node signs with its own account for the verifier's address: the
    // signer process never holds the key.
    let remote = RemoteSigner::connect(w.kit.url(), w.signer).await.unwrap();
    let report = sign_candidates(
        &w.cfg(),
        &AttestationKey::Remote(remote),
        &mut w.open_history(),
        &w.source(),
        &w.reader(),
        w.now,
    )
    .await
    .unwrap();
    assert_eq!(report.signed, 1, "{}", report.summary());
    recovers_and_settles(&w, w.signer).await;
    assert_eq!(w.bounty.status().await.unwrap(), status::SETTLED);
}

/// Asserts that the one attestation written recovers to `signer` over the digest of the
/// history's record, then settles the bounty with it.
async fn recovers_and_settles(w: &World, signer: Address) {
    let att = only_attestation(w);
    let sig = att.parsed_signature().unwrap();
    let fields = w.open_history().all().unwrap()[0].fields();
    let digest = verifier_sdk::attestation_digest(8453, &fields);
    assert_eq!(verifier_sdk::recover_signer(&digest, &sig).unwrap(), signer);
    settle_with(w, &att).await;
}

#[tokio::test]
async fn binary_signs_through_a_remote_signer() {
    let w = world().await;
    let (code, stdout, stderr) = run_binary(&w, &["--remote-signer", w.kit.url()], &[]).await;
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["signed"], 1, "{report}");
}

/// Runs `signer sign` for `signer` through the remote signer at `remote`, with a candidates
/// directory that does not exist: whatever it answers came before any candidate was read.
async fn sign_without_candidates(
    w: &World,
    signer: &str,
    remote: &str,
) -> (std::process::Output, String) {
    let history = new_history();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_signer"))
        .args(["sign", "--candidates", "/nonexistent/candidates"])
        .args(["--api", &w.api, "--rpc", w.kit.url(), "--signer", signer])
        .args(["--remote-signer", remote, "--out"])
        .arg(w.out.path())
        .arg("--history")
        .arg(history.path())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stderr)
}

#[tokio::test]
async fn a_remote_signer_answering_for_another_address_fails_closed_before_any_candidate_is_read() {
    let w = world().await;
    // An address the node holds no key of: the node answers eth_accounts without it.
    let stranger = format!("0x{}", "5e".repeat(20));
    let (out, stderr) = sign_without_candidates(&w, &stranger, w.kit.url()).await;
    // 78, not 4: the candidates directory (missing here) was never looked at.
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("does not list"), "{stderr}");
    assert!(w.attestation_files().is_empty());
}

#[tokio::test]
async fn a_remote_signer_that_does_not_answer_is_an_outage_and_nothing_is_read() {
    let w = world().await;
    let signer = w.signer.to_string();
    let (out, stderr) = sign_without_candidates(&w, &signer, "http://127.0.0.1:9").await;
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(w.attestation_files().is_empty());
}
