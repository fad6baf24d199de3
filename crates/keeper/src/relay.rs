//! Relaying one candidate at a time: decide with the pure modules, act through the RPC
//! client, record every step before and after the send.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use alloy::primitives::U256;
use bounty_chain::{
    BountyStatus, ChainReadError, ChainReader, HttpJobSource, Mismatch, Refusal,
    refetch_and_revalidate,
};
use platform_client::PlatformClient;
use verifier_sdk::settle::settle_calldata;
use verifier_sdk::{
    Address, Candidate, JobError, ParsedCandidate, RevalidationError, ValidatedJob,
    candidate_file_name, check_required_runtime,
};

use crate::chain::{
    CallFailure, SettlementRpc, SignedTx, raw_from_hex, replacement_tx, seal, settlement_tx,
};
use crate::confirm::{ConfirmError, ReceiptFacts, Settled, check_receipt, check_status};
use crate::fees::{FeeCaps, FeeQuote, plan_fees, plan_replacement};
use crate::inputs::{AttestationPool, MAX_CANDIDATE_BYTES, read_json};
use crate::key::GasKey;
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
    /// Replace a sent transaction that no block has included after this many new blocks
    /// (same nonce, fees bumped by at least the replacement minimum, within the caps).
    pub replace_after_blocks: u64,
}

/// Everything one relay run needs.
pub struct Relayer<'a, R> {
    /// Platform API client (current jobs are re-fetched through it).
    pub client: &'a PlatformClient,
    /// Platform API base URL.
    pub api: &'a str,
    /// `--require-oci-runtime`.
    pub require_oci_runtime: Option<&'a str>,
    /// Bounty state reader.
    pub reader: &'a R,
    /// RPC for simulation, fees and broadcast.
    pub rpc: &'a SettlementRpc,
    /// The keeper's key, whichever backend holds it.
    pub signer: &'a GasKey,
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
    /// No receipt, and nothing proves the transaction was never mined (why).
    Unproven(String),
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
        self.signer.address()
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
            Err(e) => return Stop::state_dir(e).end(report),
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
                    Backing::Unavailable(e) => return Stop::Rpc(e).end(report),
                    Backing::Unproven(why) => {
                        let mut r = report;
                        r.tx_hash = Some(record.tx.hash);
                        return finish(
                            r,
                            JobStatus::Pending,
                            "unconfirmed",
                            format!(
                                "confirmed earlier, but no receipt now and no proof it was \
                                 never mined ({why}); rerun to resume"
                            ),
                        );
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
                    return self.resume(report, record, Some(&candidate)).await;
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

    /// Resumes one open (`planned` or `sent`) record without its candidate, as
    /// `keeper resume` does for the records whose jobs left the feed: the recorded
    /// transaction is rebroadcast, waited on, replaced when stuck and confirmed exactly as a
    /// relay would; only a new attempt (after a proven drop) needs the candidate, and is
    /// reported instead of planned.
    pub async fn resume_record(&self, file: &str, record: SettlementRecord) -> JobReport {
        let mut report = JobReport::new(file, JobStatus::Pending);
        report.job_id = Some(record.job_id.clone());
        report.bounty_contract = Some(record.bounty_contract);
        report.round = Some(record.round);
        if record.chain_id != self.chain_id {
            return finish(
                report,
                JobStatus::Refused,
                "wrong_chain",
                format!(
                    "record is for chain {}, rpc serves {}",
                    record.chain_id, self.chain_id
                ),
            );
        }
        self.resume(report, record, None).await
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
        let mut report = report;
        match self
            .prepare(&mut report, candidate, key, job_id, previous_attempts)
            .await
        {
            Ok((record, signed)) => {
                report.tx_hash = Some(signed.hash);
                self.send_and_confirm(report, record, &signed).await
            }
            Err(stop) => stop.end(report),
        }
    }

    /// Everything before the send: the checks, the fees, the signed transaction, and its
    /// record on disk, written before the transaction exists anywhere else, so a crash from
    /// there on resumes this exact transaction instead of signing a second one.
    async fn prepare(
        &self,
        report: &mut JobReport,
        candidate: &ParsedCandidate,
        key: RecordKey,
        job_id: &str,
        previous_attempts: Vec<crate::record::TxHash>,
    ) -> Result<(SettlementRecord, SignedTx), Stop> {
        let (checked, head, now) = self.revalidate(candidate, key).await?;
        let selection = self.select_attestations(report, &checked, job_id, now)?;
        report.verification_hash = Some(selection.verification_hash);
        report.verifiers = selection.verifiers.clone();
        let job = &checked.job;
        let calldata = settle_calldata(&selection.attestations);
        let (plan, nonce) = self.price(job.bounty_contract(), &calldata, head).await?;
        let tx = settlement_tx(
            self.chain_id,
            nonce,
            job.bounty_contract(),
            &calldata,
            &plan,
        );
        let signature = self.signer.sign(&tx).await.map_err(|e| {
            Stop::job(
                JobStatus::Internal,
                "sign",
                format!("signing the transaction failed: {e}"),
            )
        })?;
        let signed = seal(tx, signature);
        let record = SettlementRecord {
            schema_version: RECORD_SCHEMA.into(),
            chain_id: key.chain_id,
            bounty_contract: key.bounty_contract,
            round: key.round,
            job_id: job_id.into(),
            state: RecordState::Planned,
            keeper: self.keeper(),
            passed: selection.passed,
            bounty_id: job.bounty_id(),
            solver: job.solver(),
            submission_hash: job.submission_hash(),
            evidence_hash: job.evidence_hash(),
            policy_hash: job.policy_hash(),
            verification_hash: selection.verification_hash,
            verifiers: selection.verifiers,
            tx: TxRecord {
                hash: signed.hash,
                raw: format!("0x{}", hex::encode(&signed.raw)),
                nonce,
                gas_limit: plan.gas_limit,
                max_fee_per_gas: plan.max_fee_per_gas.to_string(),
                max_priority_fee_per_gas: plan.max_priority_fee_per_gas.to_string(),
                sent_block: Some(head.number),
            },
            confirmation: None,
            previous_attempts,
            replaced: vec![],
            updated_at: unix_now(),
        };
        self.state.save(&record).map_err(Stop::state_dir)?;
        Ok((record, signed))
    }

    /// The bounty still Submitted (checked cheaply first: a bounty that left Submitted needs
    /// nothing, whatever the API says now), then the full revalidation against the current
    /// job and the chain. Also the head it was done at and the `now` it used.
    async fn revalidate(
        &self,
        candidate: &ParsedCandidate,
        key: RecordKey,
    ) -> Result<(bounty_chain::CheckedCandidate, crate::chain::Head, u64), Stop> {
        let state = self
            .reader
            .read_bounty(key.bounty_contract)
            .await
            .map_err(Stop::rpc)?;
        if state.status != BountyStatus::Submitted {
            return Err(Stop::job(
                JobStatus::Done,
                "not_submitted",
                format!("bounty status is {:?}", state.status),
            ));
        }
        // The operator's requirement before the feed is asked: no answer of the platform's
        // can make a run under another runtime acceptable.
        if let Some(required) = self.require_oci_runtime {
            check_required_runtime(candidate.candidate().evidence.as_ref(), required).map_err(
                |e| {
                    Stop::job(
                        JobStatus::Refused,
                        "oci_runtime_refused",
                        format!("--require-oci-runtime {required}: {e}"),
                    )
                },
            )?;
        }
        let head = self.rpc.head().await.map_err(Stop::rpc)?;
        let now = unix_now().max(head.timestamp);
        let source = job_source(self.client, self.api, candidate.job()).ok_or_else(|| {
            Stop::job(
                JobStatus::Invalid,
                "invalid_candidate",
                "job lacks a usable network or first eligible verifier",
            )
        })?;
        let checked = refetch_and_revalidate(candidate, &source, self.reader, now)
            .await
            .map_err(|r| {
                let status = refusal_status(&r);
                let code = if status == JobStatus::Done {
                    "not_submitted"
                } else {
                    r.code()
                };
                Stop::job(status, code, r.to_string())
            })?;
        Ok((checked, head, now))
    }

    /// Exactly `threshold` attestations of one verdict from distinct committed verifiers;
    /// every file set aside is listed in the report.
    fn select_attestations(
        &self,
        report: &mut JobReport,
        checked: &bounty_chain::CheckedCandidate,
        job_id: &str,
        now: u64,
    ) -> Result<crate::select::Selection, Stop> {
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
        picked
            .result
            .map_err(|e| Stop::job(JobStatus::Refused, e.code(), e.to_string()))
    }

    /// Simulation, gas estimate, fees within the caps, the balance for the worst case, and
    /// the nonce.
    async fn price(
        &self,
        bounty: Address,
        calldata: &[u8],
        head: crate::chain::Head,
    ) -> Result<(crate::fees::FeePlan, u64), Stop> {
        let keeper = self.keeper();
        self.rpc
            .simulate(keeper, bounty, calldata, None)
            .await
            .map_err(call_failed)?;
        let gas = self
            .rpc
            .estimate_gas(keeper, bounty, calldata)
            .await
            .map_err(call_failed)?;
        let tip = self.rpc.suggested_priority_fee().await.map_err(Stop::rpc)?;
        let quote = FeeQuote {
            base_fee_per_gas: head.base_fee_per_gas,
            suggested_priority_fee_per_gas: tip,
        };
        let plan = plan_fees(self.caps, quote, gas)
            .map_err(|e| Stop::job(JobStatus::Refused, e.code(), e.to_string()))?;
        let balance = self.rpc.balance(keeper).await.map_err(Stop::rpc)?;
        if U256::from(plan.max_cost_wei()) > balance {
            return Err(Stop::job(
                JobStatus::Refused,
                "insufficient_balance",
                format!(
                    "need up to {} wei (gas {} × {} wei), balance {balance} wei",
                    plan.max_cost_wei(),
                    plan.gas_limit,
                    plan.max_fee_per_gas
                ),
            ));
        }
        let nonce = self.rpc.pending_nonce(keeper).await.map_err(Stop::rpc)?;
        Ok((plan, nonce))
    }

    async fn send_and_confirm(
        &self,
        report: JobReport,
        mut record: SettlementRecord,
        signed: &SignedTx,
    ) -> JobReport {
        if let Err(e) = self.rpc.send_raw(signed).await {
            return Stop::Rpc(format!(
                "{e} (recorded as planned; a rerun rebroadcasts it)"
            ))
            .end(report);
        }
        tracing::info!(tx = %signed.hash, job = %record.job_id, "settlement sent");
        record.state = RecordState::Sent;
        record.updated_at = unix_now();
        if let Err(e) = self.state.save(&record) {
            return Stop::state_dir(e).end(report);
        }
        self.confirm(report, record).await
    }

    /// Resumes a `planned` or `sent` record: never signs a new transaction unless the old
    /// one is provably dropped (its nonce taken by another transaction in a block at least
    /// `confirmations` deep, see [`Self::nonce_taker`]) and the bounty is still Submitted.
    async fn resume(
        &self,
        report: JobReport,
        record: SettlementRecord,
        candidate: Option<&ParsedCandidate>,
    ) -> JobReport {
        let mut report = report;
        report.tx_hash = Some(record.tx.hash);
        report.verification_hash = Some(record.verification_hash);
        report.verifiers = record.verifiers.clone();
        let mut record = record;
        match self.mined(&mut record).await {
            Err(e) => return Stop::rpc(e).end(report),
            Ok(Some(_)) => return self.confirm(report, record).await,
            Ok(None) => {}
        }
        // Any transaction of the nonce still in the pool may yet be mined: wait on it (and
        // replace it if it stays stuck) rather than call it dropped.
        for hash in record.nonce_hashes() {
            match self.rpc.transaction_known(hash).await {
                Err(e) => return Stop::rpc(e).end(report),
                Ok(true) => return self.confirm(report, record).await,
                Ok(false) => {}
            }
        }
        let mined_nonce = match self.rpc.mined_nonce(record.keeper).await {
            Ok(n) => n,
            Err(e) => return Stop::rpc(e).end(report),
        };
        if mined_nonce <= record.tx.nonce {
            // Unknown to the node but its nonce is still free: the same signed bytes are valid.
            let Some(raw) = raw_from_hex(&record.tx.raw) else {
                return Stop::StateDir("recorded raw transaction is not hex".into()).end(report);
            };
            let signed = SignedTx {
                hash: record.tx.hash,
                raw,
            };
            tracing::info!(tx = %signed.hash, "rebroadcasting the recorded transaction");
            return self.send_and_confirm(report, record, &signed).await;
        }
        // The nonce looks taken, and none of ours shows a receipt. Behind a load balancer the
        // nonce and the receipts may come from nodes at different heights, so neither read
        // proves a drop: only the block that took the nonce, read by number at the depth of
        // the confirmations, does.
        match self.nonce_taker(&record).await {
            Err(e) => return Stop::rpc(e).end(report),
            Ok(Taker::Ours(block)) => {
                tracing::info!(
                    tx = %record.tx.hash,
                    block,
                    "the recorded transaction took its nonce; waiting for its receipt"
                );
                return self.confirm(report, record).await;
            }
            Ok(Taker::Unproven(why)) => {
                return finish(
                    report,
                    JobStatus::Pending,
                    "unconfirmed",
                    format!("no receipt yet and no proof of a drop ({why}); rerun to resume"),
                );
            }
            Ok(Taker::Other(hash, block)) => {
                tracing::warn!(
                    tx = %record.tx.hash,
                    taken_by = %hash,
                    block,
                    "the recorded transaction was dropped: another transaction took its nonce"
                );
            }
        }
        // Provably dropped: another transaction took its nonce, deep enough.
        let Some(candidate) = candidate else {
            return finish(
                report,
                JobStatus::Refused,
                "dropped",
                format!(
                    "another transaction took its nonce {}; without the job's candidate no new \
                     attempt is planned (a relay given the candidate plans one)",
                    record.tx.nonce
                ),
            );
        };
        let key = record.key();
        let mut previous = record.previous_attempts.clone();
        previous.extend(record.replaced.iter().map(|t| t.hash));
        previous.push(record.tx.hash);
        report.tx_hash = None;
        report.verification_hash = None;
        report.verifiers = Vec::new();
        self.attempt(report, candidate, key, &record.job_id, previous)
            .await
    }

    /// Which transaction took `record`'s nonce, proven from blocks read by number: the head,
    /// the nonce at the block `confirmations` deep under it, and the first block whose nonce
    /// passes the record's (found by bisection) with the transaction in it. Any answer that
    /// does not fit (the nonce not yet taken that deep, the block missing, no transaction of
    /// that nonce in it) is `Unproven`, never a drop.
    async fn nonce_taker(
        &self,
        record: &SettlementRecord,
    ) -> Result<Taker, crate::chain::RpcFailure> {
        let (keeper, nonce) = (record.keeper, record.tx.nonce);
        let head = self.rpc.block_number().await?;
        let Some(deep) = head.saturating_add(1).checked_sub(self.wait.confirmations) else {
            return Ok(Taker::Unproven(format!(
                "the head {head} is shallower than the confirmations"
            )));
        };
        if self.rpc.nonce_at(keeper, deep).await? <= nonce {
            return Ok(Taker::Unproven(format!(
                "nonce {nonce} is not taken at block {deep}, {} deep under the head {head}",
                self.wait.confirmations
            )));
        }
        // Bisect for the block that took it: `low` is a block where it was still free
        // (the block the transaction was planned at, else genesis), `high` one where it is taken.
        let mut low = match record.tx.sent_block.filter(|b| *b < deep) {
            Some(b) if self.rpc.nonce_at(keeper, b).await? <= nonce => b,
            _ => 0,
        };
        if self.rpc.nonce_at(keeper, low).await? > nonce {
            return Ok(Taker::Unproven(format!(
                "nonce {nonce} is already taken at block {low}"
            )));
        }
        let mut high = deep;
        while high - low > 1 {
            let mid = low + (high - low) / 2;
            if self.rpc.nonce_at(keeper, mid).await? > nonce {
                high = mid;
            } else {
                low = mid;
            }
        }
        Ok(
            match self.rpc.transaction_in_block(high, keeper, nonce).await? {
                crate::chain::InBlock::Found(hash) if record.nonce_hashes().contains(&hash) => {
                    Taker::Ours(high)
                }
                crate::chain::InBlock::Found(hash) => Taker::Other(hash, high),
                crate::chain::InBlock::NoBlock => Taker::Unproven(format!(
                    "block {high}, which took nonce {nonce}, is unknown to the node"
                )),
                crate::chain::InBlock::Absent => Taker::Unproven(format!(
                    "block {high} took nonce {nonce} but holds no transaction of it"
                )),
            },
        )
    }

    /// Re-reads from the chain what a `confirmed` record claims: its transaction's receipt
    /// with the expected event from the bounty's own address, and the bounty's status now
    /// being what that event leaves behind.
    async fn chain_backs(&self, record: &SettlementRecord) -> Backing {
        let receipt = match self.rpc.receipt(record.tx.hash).await {
            Err(e) => return Backing::Unavailable(e.to_string()),
            Ok(None) => return self.unmined_backing(record).await,
            Ok(Some(r)) => r,
        };
        let settled = match check_receipt(&receipt, &record.expected()) {
            Ok(s) => s,
            Err(e) => return Backing::Stale(format!("its receipt: {e}")),
        };
        match self.status_after(record, settled).await {
            Err(e) => return Backing::Unavailable(e.to_string()),
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

    /// What a `confirmed` record whose transaction shows no receipt is: stale only when the
    /// chain proves its transaction was never mined (its nonce still free, or taken by another
    /// transaction, proven as in [`Self::nonce_taker`]); a receipt missing from a node that
    /// lags is not that proof.
    async fn unmined_backing(&self, record: &SettlementRecord) -> Backing {
        let mined_nonce = match self.rpc.mined_nonce(record.keeper).await {
            Ok(n) => n,
            Err(e) => return Backing::Unavailable(e.to_string()),
        };
        if mined_nonce <= record.tx.nonce {
            return Backing::Stale("its transaction has no receipt and its nonce is free".into());
        }
        match self.nonce_taker(record).await {
            Err(e) => Backing::Unavailable(e.to_string()),
            Ok(Taker::Ours(_)) => Backing::Shallow,
            Ok(Taker::Other(hash, block)) => {
                Backing::Stale(format!("its nonce was taken by {hash} in block {block}"))
            }
            Ok(Taker::Unproven(why)) => Backing::Unproven(why),
        }
    }

    /// Reads the bounty now and checks its status against the checked event `settled` of
    /// `record`'s round; the outer error is an unavailable RPC.
    async fn status_after(
        &self,
        record: &SettlementRecord,
        settled: Settled,
    ) -> Result<Result<(), ConfirmError>, ChainReadError> {
        let state = self.reader.read_bounty(record.bounty_contract).await?;
        Ok(check_status(
            settled,
            record.round,
            state.status,
            state.round,
        ))
    }

    /// The receipt of whichever transaction of the record's nonce was mined: the current one,
    /// or one it replaced (which then becomes the record's transaction again).
    async fn mined(
        &self,
        record: &mut SettlementRecord,
    ) -> Result<Option<ReceiptFacts>, crate::chain::RpcFailure> {
        if let Some(r) = self.rpc.receipt(record.tx.hash).await? {
            return Ok(Some(r));
        }
        for i in 0..record.replaced.len() {
            if let Some(r) = self.rpc.receipt(record.replaced[i].hash).await? {
                tracing::info!(
                    tx = %record.replaced[i].hash,
                    job = %record.job_id,
                    "a replaced transaction was mined instead of its replacement"
                );
                std::mem::swap(&mut record.tx, &mut record.replaced[i]);
                return Ok(Some(r));
            }
        }
        Ok(None)
    }

    /// Replaces the record's transaction when no block has included it for
    /// `replace_after_blocks` blocks: same nonce and call, fees raised by at least the
    /// replacement minimum and to what the current base fee needs, within the caps. The new
    /// transaction is recorded before it is sent; the old one stays in `replaced`, since it
    /// may still be mined. A replacement the caps or the balance do not allow is noted in
    /// `stuck` and the wait goes on.
    async fn replace_if_stuck(
        &self,
        record: &mut SettlementRecord,
        head: u64,
        stuck: &mut Stuck,
    ) -> Result<(), Stop> {
        let since = *stuck.since.get_or_insert(head);
        if head < since.saturating_add(self.wait.replace_after_blocks) {
            return Ok(());
        }
        // Whatever happens next, the next replacement is considered a full window later.
        stuck.since = Some(head);
        let keeper = self.keeper();
        let mined_nonce = self.rpc.mined_nonce(keeper).await.map_err(Stop::rpc)?;
        if mined_nonce > record.tx.nonce {
            // The nonce is taken and none of ours shows a receipt yet: a replacement could
            // never be mined; the receipt is looked for again, and a rerun sees a drop.
            return Ok(());
        }
        let latest = self.rpc.head().await.map_err(Stop::rpc)?;
        let tip = self.rpc.suggested_priority_fee().await.map_err(Stop::rpc)?;
        let old = record
            .tx
            .fee_plan()
            .ok_or_else(|| Stop::StateDir("recorded transaction fees are not decimal".into()))?;
        let quote = FeeQuote {
            base_fee_per_gas: latest.base_fee_per_gas,
            suggested_priority_fee_per_gas: tip,
        };
        let plan = match plan_replacement(self.caps, quote, old) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(tx = %record.tx.hash, job = %record.job_id, "stuck transaction: {e}");
                stuck.refused = Some((e.code(), e.to_string()));
                return Ok(());
            }
        };
        let balance = self.rpc.balance(keeper).await.map_err(Stop::rpc)?;
        if U256::from(plan.max_cost_wei()) > balance {
            stuck.refused = Some((
                "insufficient_balance",
                format!(
                    "a replacement needs up to {} wei, balance {balance} wei",
                    plan.max_cost_wei()
                ),
            ));
            return Ok(());
        }
        let raw = raw_from_hex(&record.tx.raw)
            .ok_or_else(|| Stop::StateDir("recorded raw transaction is not hex".into()))?;
        let tx = match replacement_tx(
            self.keeper(),
            self.chain_id,
            record.bounty_contract,
            &raw,
            &plan,
        ) {
            Ok(tx) => tx,
            Err(e) => {
                stuck.refused = Some(("replacement_unsigned", e.to_string()));
                return Ok(());
            }
        };
        let signed = match self.signer.sign(&tx).await {
            Ok(signature) => seal(tx, signature),
            Err(e) => {
                stuck.refused = Some(("replacement_unsigned", e.to_string()));
                return Ok(());
            }
        };
        let new_tx = TxRecord {
            hash: signed.hash,
            raw: format!("0x{}", hex::encode(&signed.raw)),
            nonce: record.tx.nonce,
            gas_limit: plan.gas_limit,
            max_fee_per_gas: plan.max_fee_per_gas.to_string(),
            max_priority_fee_per_gas: plan.max_priority_fee_per_gas.to_string(),
            sent_block: Some(head),
        };
        let old_tx = std::mem::replace(&mut record.tx, new_tx);
        record.replaced.push(old_tx);
        record.state = RecordState::Planned;
        record.updated_at = unix_now();
        // On disk before it is sent, as for the first transaction.
        self.state.save(record).map_err(Stop::state_dir)?;
        stuck.refused = None;
        if let Err(e) = self.rpc.send_raw(&signed).await {
            // The replaced transaction is still pending and still watched; the next window
            // tries again from the recorded replacement's fees.
            tracing::warn!(tx = %signed.hash, "sending the replacement failed: {e}");
            return Ok(());
        }
        tracing::info!(
            tx = %signed.hash,
            replaces = %record.replaced.last().map(|t| t.hash.to_string()).unwrap_or_default(),
            max_fee_per_gas = plan.max_fee_per_gas,
            "stuck settlement replaced with higher fees"
        );
        record.state = RecordState::Sent;
        record.updated_at = unix_now();
        self.state.save(record).map_err(Stop::state_dir)
    }

    /// Waits (bounded) for the receipt and the confirmations, checks the event and the
    /// bounty's status after it, records.
    async fn confirm(&self, report: JobReport, mut record: SettlementRecord) -> JobReport {
        let started = Instant::now();
        let mut stuck = Stuck {
            since: record.tx.sent_block,
            refused: None,
        };
        let receipt = loop {
            let seen = match self.mined(&mut record).await {
                Ok(r) => r,
                Err(e) => return Stop::rpc(e).end(report),
            };
            let head = match self.rpc.block_number().await {
                Ok(n) => n,
                Err(e) => return Stop::rpc(e).end(report),
            };
            match seen {
                Some(r) => {
                    if head.saturating_sub(r.block_number).saturating_add(1)
                        >= self.wait.confirmations
                    {
                        break r;
                    }
                }
                None => {
                    if let Err(stop) = self.replace_if_stuck(&mut record, head, &mut stuck).await {
                        return stop.end(report);
                    }
                }
            }
            if started.elapsed() >= self.wait.timeout {
                let mut report = report;
                report.tx_hash = Some(record.tx.hash);
                return match stuck.refused {
                    Some((code, detail)) => finish(
                        report,
                        JobStatus::Pending,
                        code,
                        format!("not mined and not replaced: {detail}; rerun to resume"),
                    ),
                    None => finish(
                        report,
                        JobStatus::Pending,
                        "unconfirmed",
                        "no confirmed receipt yet; rerun to resume",
                    ),
                };
            }
            tokio::time::sleep(self.wait.poll).await;
        };
        let mut report = report;
        report.tx_hash = Some(record.tx.hash);
        report.block_number = Some(receipt.block_number);
        let confirmation = |event: &str| Confirmation {
            event: event.into(),
            block_number: receipt.block_number,
            block_hash: receipt.block_hash,
            tx_hash: record.tx.hash,
        };
        let checked = match check_receipt(&receipt, &record.expected()) {
            Ok(settled) => match self.status_after(&record, settled).await {
                Err(e) => return Stop::Rpc(e.to_string()).end(report),
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
            return Stop::state_dir(e).end(report);
        }
        let code = match status {
            JobStatus::Reverted => "reverted",
            _ => event,
        };
        finish(report, status, code, "")
    }
}

/// Which transaction took a record's nonce.
enum Taker {
    /// One of the record's own (block number).
    Ours(u64),
    /// Another one (its hash, block number): the record's transactions can never be mined.
    Other(crate::record::TxHash, u64),
    /// Not proven either way (why).
    Unproven(String),
}

/// How long the record's transaction has waited unmined, and why it was not replaced.
struct Stuck {
    /// The block the wait is counted from.
    since: Option<u64>,
    /// Code and detail of the last refused replacement.
    refused: Option<(&'static str, String)>,
}

/// Why a candidate's relay ended before (or instead of) a confirmed settlement. Each variant
/// ends the job with one status and one stable code; the RPC and the state directory, which
/// many steps share, are variants of their own.
#[derive(Debug)]
enum Stop {
    /// The RPC node did not answer, or answered something unusable: `unavailable`, code `rpc`.
    Rpc(String),
    /// The state directory could not be read or written, or holds an unusable record:
    /// `internal`, code `state_dir`.
    StateDir(String),
    /// A decision about the candidate (refused, invalid, already done, ...).
    Job {
        /// How the job ends.
        status: JobStatus,
        /// Its stable code.
        code: &'static str,
        /// Why, for people.
        detail: String,
    },
}

impl Stop {
    fn rpc(e: impl std::fmt::Display) -> Self {
        Self::Rpc(e.to_string())
    }

    fn state_dir(e: impl std::fmt::Display) -> Self {
        Self::StateDir(e.to_string())
    }

    fn job(status: JobStatus, code: &'static str, detail: impl Into<String>) -> Self {
        Self::Job {
            status,
            code,
            detail: detail.into(),
        }
    }

    /// Ends `report` with this stop's status, code and detail.
    fn end(self, report: JobReport) -> JobReport {
        match self {
            Self::Rpc(detail) => finish(report, JobStatus::Unavailable, "rpc", detail),
            Self::StateDir(detail) => finish(report, JobStatus::Internal, "state_dir", detail),
            Self::Job {
                status,
                code,
                detail,
            } => finish(report, status, code, detail),
        }
    }
}

fn call_failed(e: CallFailure) -> Stop {
    match e {
        CallFailure::Reverted(reason) => {
            Stop::job(JobStatus::Refused, "simulation_reverted", reason)
        }
        CallFailure::Rpc(e) => Stop::rpc(e),
    }
}
