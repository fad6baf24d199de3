//! Relaying one candidate at a time: decide with the pure modules, act through the RPC
//! client, record every step before and after the send.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use alloy::primitives::U256;
use alloy::signers::local::PrivateKeySigner;
use bounty_chain::{
    BountyStatus, ChainReader, HttpJobSource, Mismatch, Refusal, refetch_and_revalidate,
};
use platform_client::PlatformClient;
use verifier_sdk::settle::settle_calldata;
use verifier_sdk::{
    Address, Candidate, JobError, ParsedCandidate, RevalidationError, ValidatedJob,
    candidate_file_name,
};

use crate::chain::{CallFailure, SettlementRpc, SignedTx, raw_from_hex, sign_settlement};
use crate::confirm::{ConfirmError, ReceiptFacts, Settled, check_receipt, check_status};
use crate::fees::{FeeCaps, FeeQuote, plan_fees};
use crate::inputs::{AttestationPool, MAX_CANDIDATE_BYTES, read_json};
use crate::record::{
    Confirmation, RECORD_SCHEMA, RecordKey, RecordState, SettlementRecord, StateDir, TxRecord,
};
use crate::report::{JobReport, JobStatus, SkippedAttestation};
use crate::select::select;

/// Waiting for receipts and confirmations.
#[derive(Debug, Clone, Copy)]
pub struct WaitPolicy {
    /// Blocks on top of and including the inclusion block.
    pub confirmations: u64,
    /// Give up waiting (status `pending`) after this long.
    pub timeout: Duration,
    /// Pause between polls.
    pub poll: Duration,
}

/// Everything one relay run needs.
pub struct Relayer<'a, R> {
    /// Platform API client (current jobs are re-fetched through it).
    pub client: &'a PlatformClient,
    /// Platform API base URL.
    pub api: &'a str,
    /// Bounty state reader.
    pub reader: &'a R,
    /// RPC for simulation, fees and broadcast.
    pub rpc: &'a SettlementRpc,
    /// The keeper's key.
    pub signer: &'a PrivateKeySigner,
    /// Settlement records.
    pub state: &'a StateDir,
    /// The node's chain id.
    pub chain_id: u64,
    /// Gas and fee caps.
    pub caps: FeeCaps,
    /// Receipt wait policy.
    pub wait: WaitPolicy,
    /// Attestations from every directory.
    pub pool: &'a AttestationPool,
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn finish(mut r: JobReport, status: JobStatus, code: &str, detail: impl Into<String>) -> JobReport {
    r.status = status;
    r.code = Some(code.into());
    let detail = detail.into();
    r.detail = (!detail.is_empty()).then_some(detail);
    r
}

/// The record key a candidate's job is filed under. The job is parsed without the liveness
/// rule: it may be expired by now, and its record must still be found.
fn record_key(job: &ValidatedJob) -> RecordKey {
    RecordKey {
        chain_id: job.chain_id(),
        bounty_contract: job.bounty_contract(),
        round: job.round(),
    }
}

/// The job source for a candidate: its network's feed as seen by its first eligible verifier.
fn job_source(client: &PlatformClient, api: &str, job: &ValidatedJob) -> Option<HttpJobSource> {
    let verifier = *job.eligible_verifiers().first()?;
    Some(HttpJobSource::new(
        client.clone(),
        api,
        job.network(),
        verifier,
    ))
}

/// What the chain says about a `confirmed` record.
enum Backing {
    /// Receipt, event, confirmations and the bounty's status all agree with the record.
    Backed(Settled, ReceiptFacts),
    /// Mined with the expected event but not yet as deep as the wait policy asks.
    Shallow,
    /// The chain contradicts the record (why, for the log).
    Stale(String),
    /// The chain could not be asked.
    Unavailable(String),
}

/// How a shared-revalidation refusal ends this job.
fn refusal_status(r: &Refusal) -> JobStatus {
    match r {
        _ if r.is_unavailable() => JobStatus::Unavailable,
        Refusal::OnChain(m) if m.iter().any(|m| matches!(m, Mismatch::NotSubmitted { .. })) => {
            JobStatus::Done
        }
        Refusal::Revalidation(RevalidationError::CandidateJob(JobError::Expired { .. })) => {
            JobStatus::Refused
        }
        Refusal::Revalidation(RevalidationError::CandidateJob(_)) => JobStatus::Invalid,
        _ => JobStatus::Refused,
    }
}

impl<R: ChainReader + Sync> Relayer<'_, R> {
    fn keeper(&self) -> Address {
        Address::from(self.signer.address())
    }

    /// Relays one candidate file. Never returns an error: every failure is a status.
    pub async fn relay_file(&self, name: &str, path: &Path) -> JobReport {
        let report = JobReport::new(name, JobStatus::Invalid);
        let candidate = match read_json(path, MAX_CANDIDATE_BYTES)
            .map_err(|e| e.to_string())
            .and_then(|v| Candidate::from_value(&v).map_err(|e| e.to_string()))
        {
            Ok(c) => c,
            Err(e) => return finish(report, JobStatus::Invalid, "invalid_candidate", e),
        };
        let candidate = match ParsedCandidate::parse(candidate) {
            Ok(c) => c,
            Err(e) => {
                return finish(
                    report,
                    JobStatus::Invalid,
                    "candidate_job_invalid",
                    format!("candidate job is invalid: {e}"),
                );
            }
        };
        let key = record_key(candidate.job());
        let job_id = candidate.job().job_id().to_owned();
        let mut report = report;
        report.job_id = Some(job_id.clone());
        report.bounty_contract = Some(key.bounty_contract);
        report.round = Some(key.round);
        if candidate_file_name(&job_id) != name {
            return finish(
                report,
                JobStatus::Invalid,
                "invalid_candidate",
                "candidate file name does not derive from its job id",
            );
        }
        if key.chain_id != self.chain_id {
            return finish(
                report,
                JobStatus::Refused,
                "wrong_chain",
                format!(
                    "job is for chain {}, rpc serves {}",
                    key.chain_id, self.chain_id
                ),
            );
        }
        let previous = match self.state.load(&key) {
            Err(e) => return finish(report, JobStatus::Internal, "state_dir", e.to_string()),
            Ok(None) => Vec::new(),
            Ok(Some(record)) => match record.state {
                // The record is only a pointer to the chain: a planted file, or one written
                // after a lying RPC's fabricated receipt, must not report a payment.
                RecordState::Confirmed => match self.chain_backs(&record).await {
                    Backing::Backed(settled, receipt) => {
                        let mut r = report;
                        r.tx_hash = Some(record.tx.hash);
                        r.block_number = Some(receipt.block_number);
                        r.verification_hash = Some(record.verification_hash);
                        r.verifiers = record.verifiers.clone();
                        return finish(
                            r,
                            JobStatus::Done,
                            "already_confirmed",
                            format!(
                                "{} confirmed by an earlier run; receipt, event and status \
                                 re-read from the chain",
                                settled.event_name()
                            ),
                        );
                    }
                    Backing::Shallow => {
                        let mut r = report;
                        r.tx_hash = Some(record.tx.hash);
                        r.verification_hash = Some(record.verification_hash);
                        r.verifiers = record.verifiers.clone();
                        return self.confirm(r, record).await;
                    }
                    Backing::Unavailable(e) => {
                        return finish(report, JobStatus::Unavailable, "rpc", e);
                    }
                    Backing::Stale(why) => {
                        tracing::warn!(
                            tx = %record.tx.hash,
                            job = %record.job_id,
                            "settlement record is contradicted by the chain ({why}); ignoring it"
                        );
                        let mut p = record.previous_attempts.clone();
                        p.push(record.tx.hash);
                        p
                    }
                },
                RecordState::Planned | RecordState::Sent => {
                    return self.resume(report, record, &candidate).await;
                }
                RecordState::Reverted => {
                    let mut p = record.previous_attempts.clone();
                    p.push(record.tx.hash);
                    p
                }
            },
        };
        self.attempt(report, &candidate, key, &job_id, previous)
            .await
    }

    /// A fresh settlement attempt: status pre-check, full revalidation, selection, simulation,
    /// caps, balance, sign, record, send, confirm.
    async fn attempt(
        &self,
        report: JobReport,
        candidate: &ParsedCandidate,
        key: RecordKey,
        job_id: &str,
        previous_attempts: Vec<crate::record::TxHash>,
    ) -> JobReport {
        // Cheap first: a bounty that left Submitted needs nothing, whatever the API says now.
        match self.reader.read_bounty(key.bounty_contract).await {
            Err(e) => return finish(report, JobStatus::Unavailable, "rpc", e.to_string()),
            Ok(s) if s.status != BountyStatus::Submitted => {
                return finish(
                    report,
                    JobStatus::Done,
                    "not_submitted",
                    format!("bounty status is {:?}", s.status),
                );
            }
            Ok(_) => {}
        }
        let head = match self.rpc.head().await {
            Ok(h) => h,
            Err(e) => return finish(report, JobStatus::Unavailable, "rpc", e.to_string()),
        };
        let now = unix_now().max(head.timestamp);
        let Some(source) = job_source(self.client, self.api, candidate.job()) else {
            return finish(
                report,
                JobStatus::Invalid,
                "invalid_candidate",
                "job lacks a usable network or first eligible verifier",
            );
        };
        let checked = match refetch_and_revalidate(candidate, &source, self.reader, now).await {
            Ok(c) => c,
            Err(r) => {
                let status = refusal_status(&r);
                let code = if status == JobStatus::Done {
                    "not_submitted"
                } else {
                    r.code()
                };
                return finish(report, status, code, r.to_string());
            }
        };
        let job = &checked.job;
        let committed: Vec<Address> = job
            .eligible_verifiers()
            .iter()
            .filter(|v| checked.state.has_verifier(v))
            .copied()
            .collect();
        let files = self
            .pool
            .by_job
            .get(job_id)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let picked = select(
            job,
            &checked.outcome,
            &committed,
            checked.state.threshold,
            files,
            now,
        );
        let mut report = report;
        report.skipped_attestations = self
            .pool
            .unreadable
            .iter()
            .cloned()
            .chain(
                picked
                    .skipped
                    .iter()
                    .map(|(source, skip)| SkippedAttestation {
                        source: source.clone(),
                        code: skip.code().into(),
                    }),
            )
            .collect();
        let selection = match picked.result {
            Ok(s) => s,
            Err(e) => return finish(report, JobStatus::Refused, e.code(), e.to_string()),
        };
        report.verification_hash = Some(selection.verification_hash);
        report.verifiers = selection.verifiers.clone();
        let calldata = settle_calldata(&selection.attestations);
        let keeper = self.keeper();
        let bounty = job.bounty_contract();

        if let Err(e) = self.rpc.simulate(keeper, bounty, &calldata, None).await {
            return call_failed(report, e);
        }
        let gas = match self.rpc.estimate_gas(keeper, bounty, &calldata).await {
            Ok(g) => g,
            Err(e) => return call_failed(report, e),
        };
        let tip = match self.rpc.suggested_priority_fee().await {
            Ok(t) => t,
            Err(e) => return finish(report, JobStatus::Unavailable, "rpc", e.to_string()),
        };
        let quote = FeeQuote {
            base_fee_per_gas: head.base_fee_per_gas,
            suggested_priority_fee_per_gas: tip,
        };
        let plan = match plan_fees(self.caps, quote, gas) {
            Ok(p) => p,
            Err(e) => return finish(report, JobStatus::Refused, e.code(), e.to_string()),
        };
        let balance = match self.rpc.balance(keeper).await {
            Ok(b) => b,
            Err(e) => return finish(report, JobStatus::Unavailable, "rpc", e.to_string()),
        };
        if U256::from(plan.max_cost_wei()) > balance {
            return finish(
                report,
                JobStatus::Refused,
                "insufficient_balance",
                format!(
                    "need up to {} wei (gas {} × {} wei), balance {balance} wei",
                    plan.max_cost_wei(),
                    plan.gas_limit,
                    plan.max_fee_per_gas
                ),
            );
        }
        let nonce = match self.rpc.pending_nonce(keeper).await {
            Ok(n) => n,
            Err(e) => return finish(report, JobStatus::Unavailable, "rpc", e.to_string()),
        };
        let signed =
            match sign_settlement(self.signer, self.chain_id, nonce, bounty, &calldata, &plan) {
                Ok(s) => s,
                Err(_) => {
                    return finish(
                        report,
                        JobStatus::Internal,
                        "sign",
                        "signing the transaction failed",
                    );
                }
            };
        let record = SettlementRecord {
            schema_version: RECORD_SCHEMA.into(),
            chain_id: key.chain_id,
            bounty_contract: key.bounty_contract,
            round: key.round,
            job_id: job_id.into(),
            state: RecordState::Planned,
            keeper,
            passed: selection.passed,
            bounty_id: job.bounty_id(),
            solver: job.solver(),
            submission_hash: job.submission_hash(),
            evidence_hash: job.evidence_hash(),
            policy_hash: job.policy_hash(),
            verification_hash: selection.verification_hash,
            verifiers: selection.verifiers.clone(),
            tx: TxRecord {
                hash: signed.hash,
                raw: format!("0x{}", hex::encode(&signed.raw)),
                nonce,
                gas_limit: plan.gas_limit,
                max_fee_per_gas: plan.max_fee_per_gas.to_string(),
                max_priority_fee_per_gas: plan.max_priority_fee_per_gas.to_string(),
            },
            confirmation: None,
            previous_attempts,
            updated_at: unix_now(),
        };
        // The record is on disk before the transaction exists anywhere else: a crash from
        // here on resumes this exact transaction instead of signing a second one.
        if let Err(e) = self.state.save(&record) {
            return finish(report, JobStatus::Internal, "state_dir", e.to_string());
        }
        report.tx_hash = Some(signed.hash);
        self.send_and_confirm(report, record, &signed).await
    }

    async fn send_and_confirm(
        &self,
        report: JobReport,
        mut record: SettlementRecord,
        signed: &SignedTx,
    ) -> JobReport {
        if let Err(e) = self.rpc.send_raw(signed).await {
            return finish(
                report,
                JobStatus::Unavailable,
                "rpc",
                format!("{e} (recorded as planned; a rerun rebroadcasts it)"),
            );
        }
        tracing::info!(tx = %signed.hash, job = %record.job_id, "settlement sent");
        record.state = RecordState::Sent;
        record.updated_at = unix_now();
        if let Err(e) = self.state.save(&record) {
            return finish(report, JobStatus::Internal, "state_dir", e.to_string());
        }
        self.confirm(report, record).await
    }

    /// Resumes a `planned` or `sent` record: never signs a new transaction unless the old
    /// one is provably dropped (its nonce is used by another mined transaction) and the
    /// bounty is still Submitted.
    async fn resume(
        &self,
        report: JobReport,
        record: SettlementRecord,
        candidate: &ParsedCandidate,
    ) -> JobReport {
        let mut report = report;
        report.tx_hash = Some(record.tx.hash);
        report.verification_hash = Some(record.verification_hash);
        report.verifiers = record.verifiers.clone();
        match self.rpc.receipt(record.tx.hash).await {
            Err(e) => return finish(report, JobStatus::Unavailable, "rpc", e.to_string()),
            Ok(Some(_)) => return self.confirm(report, record).await,
            Ok(None) => {}
        }
        match self.rpc.transaction_known(record.tx.hash).await {
            Err(e) => return finish(report, JobStatus::Unavailable, "rpc", e.to_string()),
            Ok(true) => return self.confirm(report, record).await,
            Ok(false) => {}
        }
        let mined_nonce = match self.rpc.mined_nonce(record.keeper).await {
            Ok(n) => n,
            Err(e) => return finish(report, JobStatus::Unavailable, "rpc", e.to_string()),
        };
        if mined_nonce <= record.tx.nonce {
            // Unknown to the node but its nonce is still free: the same signed bytes are valid.
            let Some(raw) = raw_from_hex(&record.tx.raw) else {
                return finish(
                    report,
                    JobStatus::Internal,
                    "state_dir",
                    "recorded raw transaction is not hex",
                );
            };
            let signed = SignedTx {
                hash: record.tx.hash,
                raw,
            };
            tracing::info!(tx = %signed.hash, "rebroadcasting the recorded transaction");
            return self.send_and_confirm(report, record, &signed).await;
        }
        // Provably dropped: another transaction took its nonce and it has no receipt.
        let key = record.key();
        let mut previous = record.previous_attempts.clone();
        previous.push(record.tx.hash);
        report.tx_hash = None;
        report.verification_hash = None;
        report.verifiers = Vec::new();
        self.attempt(report, candidate, key, &record.job_id, previous)
            .await
    }

    /// Re-reads from the chain what a `confirmed` record claims: its transaction's receipt
    /// with the expected event from the bounty's own address, and the bounty's status now
    /// being what that event leaves behind.
    async fn chain_backs(&self, record: &SettlementRecord) -> Backing {
        let receipt = match self.rpc.receipt(record.tx.hash).await {
            Err(e) => return Backing::Unavailable(e.to_string()),
            Ok(None) => return Backing::Stale("its transaction has no receipt".into()),
            Ok(Some(r)) => r,
        };
        let settled = match check_receipt(&receipt, &record.expected()) {
            Ok(s) => s,
            Err(e) => return Backing::Stale(format!("its receipt: {e}")),
        };
        match self.status_after(record, settled).await {
            Err(e) => return Backing::Unavailable(e),
            Ok(Err(e)) => return Backing::Stale(e.to_string()),
            Ok(Ok(())) => {}
        }
        let head = match self.rpc.block_number().await {
            Ok(n) => n,
            Err(e) => return Backing::Unavailable(e.to_string()),
        };
        if head.saturating_sub(receipt.block_number).saturating_add(1) < self.wait.confirmations {
            return Backing::Shallow;
        }
        Backing::Backed(settled, receipt)
    }

    /// Reads the bounty now and checks its status against the checked event `settled` of
    /// `record`'s round; the outer error is an unavailable RPC.
    async fn status_after(
        &self,
        record: &SettlementRecord,
        settled: Settled,
    ) -> Result<Result<(), ConfirmError>, String> {
        let state = self
            .reader
            .read_bounty(record.bounty_contract)
            .await
            .map_err(|e| e.to_string())?;
        Ok(check_status(
            settled,
            record.round,
            state.status,
            state.round,
        ))
    }

    /// Waits (bounded) for the receipt and the confirmations, checks the event and the
    /// bounty's status after it, records.
    async fn confirm(&self, report: JobReport, mut record: SettlementRecord) -> JobReport {
        let started = Instant::now();
        let receipt = loop {
            let seen = match self.rpc.receipt(record.tx.hash).await {
                Ok(r) => r,
                Err(e) => return finish(report, JobStatus::Unavailable, "rpc", e.to_string()),
            };
            if let Some(r) = seen {
                let head = match self.rpc.block_number().await {
                    Ok(n) => n,
                    Err(e) => return finish(report, JobStatus::Unavailable, "rpc", e.to_string()),
                };
                if head.saturating_sub(r.block_number).saturating_add(1) >= self.wait.confirmations
                {
                    break r;
                }
            }
            if started.elapsed() >= self.wait.timeout {
                return finish(
                    report,
                    JobStatus::Pending,
                    "unconfirmed",
                    "no confirmed receipt yet; rerun to resume",
                );
            }
            tokio::time::sleep(self.wait.poll).await;
        };
        let mut report = report;
        report.block_number = Some(receipt.block_number);
        let confirmation = |event: &str| Confirmation {
            event: event.into(),
            block_number: receipt.block_number,
            block_hash: receipt.block_hash,
            tx_hash: record.tx.hash,
        };
        let checked = match check_receipt(&receipt, &record.expected()) {
            Ok(settled) => match self.status_after(&record, settled).await {
                Err(e) => return finish(report, JobStatus::Unavailable, "rpc", e),
                Ok(agrees) => agrees.map(|()| settled),
            },
            Err(e) => Err(e),
        };
        let (status, new_state, event) = match checked {
            Ok(Settled::Paid) => (
                JobStatus::Paid,
                RecordState::Confirmed,
                Settled::Paid.event_name(),
            ),
            Ok(Settled::Rejected) => (
                JobStatus::Rejected,
                RecordState::Confirmed,
                Settled::Rejected.event_name(),
            ),
            Err(ConfirmError::Reverted) => (JobStatus::Reverted, RecordState::Reverted, "reverted"),
            Err(e) => {
                // Mined without the expected event, or the bounty's status denies it: keep
                // the record's state so no rerun sends again, and report it loudly.
                return finish(report, JobStatus::Refused, e.code(), e.to_string());
            }
        };
        record.state = new_state;
        record.confirmation = Some(confirmation(event));
        record.updated_at = unix_now();
        if let Err(e) = self.state.save(&record) {
            return finish(report, JobStatus::Internal, "state_dir", e.to_string());
        }
        let code = match status {
            JobStatus::Reverted => "reverted",
            _ => event,
        };
        finish(report, status, code, "")
    }
}

fn call_failed(report: JobReport, e: CallFailure) -> JobReport {
    match e {
        CallFailure::Reverted(reason) => {
            finish(report, JobStatus::Refused, "simulation_reverted", reason)
        }
        CallFailure::Rpc(e) => finish(report, JobStatus::Unavailable, "rpc", e.to_string()),
    }
}
