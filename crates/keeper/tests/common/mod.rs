//! Shared harness: a TestBounty on the real local Hardhat node, a real HTTP job feed on
//! loopback serving a hash-consistent job for it, a candidate and attestation files signed
//! with Hardhat dev keys through the sdk digest, and a funded keeper account.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use alloy::primitives::{Address as ChainAddress, B256, U256};
use alloy::providers::Provider;
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use chain_testkit::{BountyParams, DeployedBounty, Testkit, dev_signer};
use keeper::KeySource;
use keeper::chain::{SignedTx, sign_settlement};
use keeper::fees::FeeCaps;
use keeper::fees::FeePlan;
use keeper::record::{RECORD_SCHEMA, RecordState, SettlementRecord, StateDir, TxRecord};
use keeper::relay::WaitPolicy;
use keeper::report::{JobReport, Report};
use keeper::select::{NamedAttestation, select};
use keeper::{RelayConfig, run};
use serde_json::{Value, json};
use verifier_sdk::AttestationFile;
use verifier_sdk::artifacts::ATTESTATION_SCHEMA;
use verifier_sdk::fixtures::{JobParams, job_value};
use verifier_sdk::settle::settle_calldata;
use verifier_sdk::{
    Address, AttestationFields, Bytes32, Candidate, ValidatedJob, ValidatedOutcome,
    attestation_digest, candidate_file_name, validate_job, validate_outcome,
};

/// A loopback HTTP/1.1 server answering every GET with the current job list.
pub struct JobServer {
    pub url: String,
    pub jobs: Arc<Mutex<Vec<Value>>>,
}

impl JobServer {
    pub async fn start(jobs: Vec<Value>) -> Self {
        let jobs = Arc::new(Mutex::new(jobs));
        let served = jobs.clone();
        let url = test_http::serve(move |req| {
            let served = served.clone();
            async move {
                if req
                    .head
                    .starts_with("GET /v1/base/autonomous-bounties/verification-jobs?")
                {
                    let jobs = served.lock().unwrap().clone();
                    Some(test_http::Response::ok(serde_json::to_vec(&jobs).unwrap()))
                } else {
                    Some(test_http::Response::not_found(b"[]".to_vec()))
                }
            }
        })
        .await
        .unwrap();
        Self { url, jobs }
    }
}

pub fn dev(i: usize) -> PrivateKeySigner {
    dev_signer(i).unwrap()
}

pub fn sdk_addr(a: ChainAddress) -> Address {
    Address::from(a)
}

pub fn wall_clock() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

pub struct Scenario {
    pub kit: Testkit,
    pub bounty: DeployedBounty,
    pub params: BountyParams,
    pub job: Value,
    pub validated: ValidatedJob,
    pub outcome: ValidatedOutcome,
    pub verifier_keys: Vec<usize>,
    pub dir: tempfile::TempDir,
    pub server: JobServer,
    pub keeper: PrivateKeySigner,
    pub key_file: PathBuf,
    pub now: u64,
}

fn b256(b: Bytes32) -> B256 {
    B256::from(*b.as_bytes())
}

impl Scenario {
    /// A Submitted bounty with verifiers = dev accounts `verifier_keys` (threshold = count),
    /// a candidate whose run exited `exit_code`, and a keeper funded with 10 ETH.
    pub async fn new(verifier_keys: &[usize], exit_code: i64) -> Self {
        let kit = Testkit::connect().await.unwrap_or_else(|e| panic!("{e}"));
        Self::on(kit, verifier_keys, exit_code).await
    }

    /// [`Scenario::new`] on the node `kit` is connected to.
    pub async fn on(kit: Testkit, verifier_keys: &[usize], exit_code: i64) -> Self {
        let now = kit.latest_timestamp().await.unwrap().max(wall_clock());
        let verifiers: Vec<ChainAddress> =
            verifier_keys.iter().map(|i| dev(*i).address()).collect();
        let solver = PrivateKeySigner::random().address();
        let mut jp = JobParams {
            verifiers: verifiers
                .iter()
                .map(|a| a.to_string().to_lowercase())
                .collect(),
            expires_at: now + 3600,
            solver: solver.to_string(),
            bounty_id: format!("0x{}", "5b".repeat(32)),
            round: 4,
            ..JobParams::default()
        };
        // Hashes do not depend on the contract address, so deploy with a draft job's hashes.
        let draft = validate_job(&job_value(&jp), now).unwrap();
        let mut params = BountyParams::new(verifiers, jp.expires_at);
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
        let bounty = kit.deploy_bounty(&params).await.unwrap();
        jp.bounty_contract = bounty.address().to_string();
        let job = job_value(&jp);
        let dir = tempfile::tempdir().unwrap();
        for sub in ["candidates", "att0", "att1", "state"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        let (validated, validated_outcome) =
            write_candidate(&dir.path().join("candidates"), &job, now, exit_code, "runc");
        let server = JobServer::start(vec![job.clone()]).await;
        let keeper = kit
            .fund_new_account(U256::from(10u128 * 10u128.pow(18)))
            .await
            .unwrap();
        let key_file = dir.path().join("keeper.key");
        std::fs::write(
            &key_file,
            format!("0x{}", alloy::hex::encode(keeper.to_bytes())),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
        Self {
            kit,
            bounty,
            params,
            job,
            validated,
            outcome: validated_outcome,
            verifier_keys: verifier_keys.to_vec(),
            dir,
            server,
            keeper,
            key_file,
            now,
        }
    }

    /// Serves `job` instead of the deployed bounty's own and rewrites the candidate as a
    /// worker that ran `job` would have (same exit code); attestations built afterwards are
    /// honest signatures over it.
    pub fn replace_job(&mut self, job: Value) {
        let exit_code = if self.outcome.verdict().passed() {
            0
        } else {
            1
        };
        let (validated, outcome) =
            write_candidate(&self.path("candidates"), &job, self.now, exit_code, "runc");
        *self.server.jobs.lock().unwrap() = vec![job.clone()];
        self.job = job;
        self.validated = validated;
        self.outcome = outcome;
    }

    /// Rewrites the candidate as a worker running under the OCI runtime `runtime` would have
    /// written it (same job and exit code, so the same outcome and attestations).
    pub fn run_under(&mut self, runtime: &str) {
        let exit_code = if self.outcome.verdict().passed() {
            0
        } else {
            1
        };
        let (validated, outcome) = write_candidate(
            &self.path("candidates"),
            &self.job,
            self.now,
            exit_code,
            runtime,
        );
        self.validated = validated;
        self.outcome = outcome;
    }

    pub fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    /// `keeper relay`'s inputs in this scenario: its candidates, both attestation directories
    /// and its feed.
    pub fn relay_inputs(&self) -> Vec<std::ffi::OsString> {
        vec![
            "--candidates".into(),
            self.path("candidates").into(),
            "--attestations".into(),
            self.path("att0").into(),
            "--attestations".into(),
            self.path("att1").into(),
            "--api".into(),
            self.server.url.clone().into(),
        ]
    }

    /// Writes `record` into the keeper's state directory, as a keeper that stopped left it.
    pub fn save(&self, record: &SettlementRecord) {
        StateDir::open(&self.path("state"))
            .unwrap()
            .save(record)
            .unwrap();
    }

    /// What the keeper's state directory holds now for `record`'s settlement.
    pub fn load(&self, record: &SettlementRecord) -> SettlementRecord {
        StateDir::open(&self.path("state"))
            .unwrap()
            .load(&record.key())
            .unwrap()
            .unwrap()
    }

    /// An attestation by dev key `signer_index` claiming `verifier`, for `passed`/`response`.
    pub fn attestation_as(
        &self,
        signer_index: usize,
        verifier: Address,
        passed: bool,
        response: Bytes32,
        deadline: u64,
    ) -> Value {
        let mut fields =
            AttestationFields::for_outcome(&self.validated, &self.outcome, verifier, deadline);
        fields.passed = passed;
        fields.response_hash = response;
        let digest = attestation_digest(self.validated.chain_id(), &fields);
        let sig = dev(signer_index)
            .sign_hash_sync(&B256::from(*digest.as_bytes()))
            .unwrap();
        json!({
            "schema": ATTESTATION_SCHEMA,
            "job_id": self.validated.job_id(),
            "bounty_contract": self.validated.bounty_contract().to_string(),
            "verifier": verifier.to_string(),
            "passed": passed,
            "response_hash": response.to_string(),
            "deadline": deadline,
            "signature": format!("0x{}", alloy::hex::encode(sig.as_bytes())),
            "candidate_file": candidate_file_name(self.validated.job_id()),
        })
    }

    /// An honest attestation by dev key `i` agreeing with the candidate.
    pub fn attestation(&self, i: usize) -> Value {
        self.attestation_as(
            i,
            sdk_addr(dev(i).address()),
            self.outcome.verdict().passed(),
            self.outcome.response_hash(),
            self.now + 900,
        )
    }

    pub fn write_attestation(&self, dir: &str, name: &str, value: &Value) {
        std::fs::write(
            self.path(dir).join(name),
            serde_json::to_vec_pretty(value).unwrap(),
        )
        .unwrap();
    }

    /// Honest attestations from every verifier, split over the two directories.
    pub fn attest_all(&self) {
        for (n, i) in self.verifier_keys.iter().enumerate() {
            let dir = if n % 2 == 0 { "att0" } else { "att1" };
            self.write_attestation(dir, &format!("attestation-{i}.json"), &self.attestation(*i));
        }
    }

    pub fn config(&self) -> RelayConfig {
        RelayConfig {
            candidates: self.path("candidates"),
            attestations: vec![self.path("att0"), self.path("att1")],
            api: self.server.url.clone(),
            require_oci_runtime: None,
            rpc: self.kit.url().to_string().into(),
            key: KeySource::File(self.key_file.clone()).into(),
            state_dir: self.path("state"),
            caps: FeeCaps {
                max_gas: 2_000_000,
                max_fee_per_gas: 100_000_000_000,
                max_priority_fee_per_gas: None,
            },
            wait: WaitPolicy {
                confirmations: 1,
                timeout: Duration::from_secs(30),
                poll: Duration::from_millis(100),
                replace_after_blocks: 10,
            },
        }
    }

    pub async fn run_with(&self, cfg: &RelayConfig) -> Report {
        run(cfg).await.unwrap()
    }

    pub async fn run(&self) -> Report {
        self.run_with(&self.config()).await
    }

    pub async fn keeper_nonce(&self) -> u64 {
        self.kit
            .provider()
            .get_transaction_count(self.keeper.address())
            .await
            .unwrap()
    }

    pub async fn status(&self) -> u8 {
        self.bounty.status().await.unwrap()
    }
}

/// Writes the candidate a worker would write after running `job` to exit `exit_code`.
fn write_candidate(
    dir: &std::path::Path,
    job: &Value,
    now: u64,
    exit_code: i64,
    runtime: &str,
) -> (ValidatedJob, ValidatedOutcome) {
    let validated = validate_job(job, now).unwrap();
    let facts = verifier_sdk::fixtures::run_facts(exit_code);
    let (outcome, evidence) =
        verifier_sdk::fixtures::completed_run_under(&validated, facts, runtime);
    let outcome_value = serde_json::to_value(&outcome).unwrap();
    let validated_outcome = validate_outcome(&outcome_value, &validated).unwrap();
    let candidate = Candidate::new(
        job.clone(),
        outcome_value,
        "test-revision".into(),
        Some(evidence),
    );
    std::fs::write(
        dir.join(candidate_file_name(validated.job_id())),
        serde_json::to_vec_pretty(&candidate).unwrap(),
    )
    .unwrap();
    (validated, validated_outcome)
}

pub fn only_job(report: &Report) -> &JobReport {
    assert_eq!(report.jobs.len(), 1, "{report:#?}");
    &report.jobs[0]
}

/// The fees of a settlement a test records by hand ([`recorded`]): a million gas at up to
/// 50 gwei, 1 gwei of it the tip.
pub fn plan() -> FeePlan {
    FeePlan {
        gas_limit: 1_000_000,
        max_fee_per_gas: 50_000_000_000,
        max_priority_fee_per_gas: 1_000_000_000,
    }
}

/// Signs the settlement the keeper would send at `nonce` with `fees` and files it as `state`.
pub fn recorded(
    sc: &Scenario,
    nonce: u64,
    fees: FeePlan,
    state: RecordState,
) -> (SignedTx, SettlementRecord) {
    let files: Vec<_> = sc
        .verifier_keys
        .iter()
        .map(|i| NamedAttestation {
            source: format!("test/{i}"),
            file: AttestationFile::from_value(&sc.attestation(*i)).unwrap(),
            own_outcome: None,
        })
        .collect();
    let committed = sc.validated.eligible_verifiers().to_vec();
    let sel = select(
        &sc.validated,
        &sc.outcome,
        &committed,
        sc.validated.threshold(),
        &files,
        sc.now,
    )
    .result
    .unwrap();
    let calldata = settle_calldata(&sel.attestations);
    let signed = sign_settlement(
        &sc.keeper,
        8453,
        nonce,
        sc.validated.bounty_contract(),
        &calldata,
        &fees,
    )
    .unwrap();
    let record = SettlementRecord {
        schema_version: RECORD_SCHEMA.into(),
        chain_id: 8453,
        bounty_contract: sc.validated.bounty_contract(),
        round: sc.validated.round(),
        job_id: sc.validated.job_id().into(),
        state,
        keeper: Address::from(sc.keeper.address()),
        passed: true,
        bounty_id: sc.validated.bounty_id(),
        solver: sc.validated.solver(),
        submission_hash: sc.validated.submission_hash(),
        evidence_hash: sc.validated.evidence_hash(),
        policy_hash: sc.validated.policy_hash(),
        verification_hash: sel.verification_hash,
        verifiers: sel.verifiers,
        tx: tx_record(&signed, nonce, fees),
        confirmation: None,
        previous_attempts: vec![],
        replaced: vec![],
        updated_at: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    };
    StateDir::open(&sc.path("state"))
        .unwrap()
        .save(&record)
        .unwrap();
    (signed, record)
}

pub fn tx_record(signed: &SignedTx, nonce: u64, fees: FeePlan) -> TxRecord {
    TxRecord {
        hash: signed.hash,
        raw: format!("0x{}", alloy::hex::encode(&signed.raw)),
        nonce,
        gas_limit: fees.gas_limit,
        max_fee_per_gas: fees.max_fee_per_gas.to_string(),
        max_priority_fee_per_gas: fees.max_priority_fee_per_gas.to_string(),
        sent_block: None,
    }
}

/// A one-verifier scenario, attested, whose settlement at the keeper's next nonce is signed and
/// filed as `state` (and not sent): the scenario, that nonce, the transaction and its record.
pub async fn filed(state: RecordState) -> (Scenario, u64, SignedTx, SettlementRecord) {
    let sc = Scenario::new(&[1], 0).await;
    sc.attest_all();
    let nonce = sc.keeper_nonce().await;
    let (signed, record) = recorded(&sc, nonce, plan(), state);
    (sc, nonce, signed, record)
}

impl Scenario {
    /// Mines a transfer of `value` from the keeper to `to` at `nonce`: a transaction of the
    /// keeper's own taking the nonce a settlement was recorded at.
    pub async fn take_nonce(&self, nonce: u64, to: ChainAddress, value: U256) {
        use alloy::network::TransactionBuilder;
        let provider = alloy::providers::ProviderBuilder::new()
            .wallet(alloy::network::EthereumWallet::from(self.keeper.clone()))
            .connect_http(self.kit.url().parse().unwrap());
        let tx = alloy::rpc::types::TransactionRequest::default()
            .with_to(to)
            .with_value(value)
            .with_nonce(nonce);
        provider
            .send_transaction(tx)
            .await
            .unwrap()
            .get_receipt()
            .await
            .unwrap();
    }

    /// Removes every candidate file: the jobs left the feed.
    pub fn remove_candidates(&self) {
        for entry in std::fs::read_dir(self.path("candidates")).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
    }
}
