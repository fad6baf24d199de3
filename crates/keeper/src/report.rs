//! The per-run report: `--json` on stdout (stable, versioned), a human summary on stderr.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use verifier_sdk::{Address, Bytes32};

use crate::exit::ExitCode;
use crate::record::TxHash;

/// `schema_version` of the JSON report.
pub const REPORT_SCHEMA: &str = "agent-bounties/regression-keeper-report-v1";

/// How one candidate ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// A confirmed `BountySettled` from the bounty, every field checked.
    Paid,
    /// A confirmed `SubmissionRejected` from the bounty, every field checked.
    Rejected,
    /// The bounty is no longer Submitted, or an earlier run confirmed it; nothing sent.
    Done,
    /// The settlement transaction was mined and reverted.
    Reverted,
    /// Sent (or resumed) but not yet confirmed within the wait; rerun to finish.
    Pending,
    /// A check failed; nothing sent. `code` says which.
    Refused,
    /// The candidate file is malformed.
    Invalid,
    /// The RPC node or the job API did not answer.
    Unavailable,
    /// A local failure (e.g. the state dir could not be written).
    Internal,
}

impl JobStatus {
    /// This status's exit code.
    pub const fn exit_code(self) -> ExitCode {
        match self {
            Self::Paid | Self::Rejected | Self::Done => ExitCode::Success,
            Self::Reverted | Self::Pending | Self::Refused => ExitCode::NotDone,
            Self::Invalid => ExitCode::InvalidInput,
            Self::Unavailable => ExitCode::Unavailable,
            Self::Internal => ExitCode::Internal,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Paid => "paid",
            Self::Rejected => "rejected",
            Self::Done => "done",
            Self::Reverted => "reverted",
            Self::Pending => "pending",
            Self::Refused => "refused",
            Self::Invalid => "invalid",
            Self::Unavailable => "unavailable",
            Self::Internal => "internal",
        }
    }
}

/// An attestation file that was not used, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedAttestation {
    /// `attestations[<i>]/<file name>`.
    pub source: String,
    /// Stable reason code.
    pub code: String,
}

/// One candidate's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobReport {
    /// The candidate file name.
    pub candidate_file: String,
    /// Its job id, when readable.
    pub job_id: Option<String>,
    /// The bounty contract, when known.
    pub bounty_contract: Option<Address>,
    /// The round, when known.
    pub round: Option<u64>,
    /// How it ended.
    pub status: JobStatus,
    /// Stable reason code (refusals, errors, `done` reasons).
    pub code: Option<String>,
    /// Human detail (never contains key material or the RPC URL).
    pub detail: Option<String>,
    /// The settlement transaction, when one exists.
    pub tx_hash: Option<TxHash>,
    /// Its block, when mined.
    pub block_number: Option<u64>,
    /// `keccak256(abi.encode(attestations))` of the relayed set.
    pub verification_hash: Option<Bytes32>,
    /// Verifiers relayed, in calldata order.
    pub verifiers: Vec<Address>,
    /// Attestation files set aside.
    pub skipped_attestations: Vec<SkippedAttestation>,
}

impl JobReport {
    /// A report with only the file name and status filled.
    pub fn new(candidate_file: &str, status: JobStatus) -> Self {
        Self {
            candidate_file: candidate_file.into(),
            job_id: None,
            bounty_contract: None,
            round: None,
            status,
            code: None,
            detail: None,
            tx_hash: None,
            block_number: None,
            verification_hash: None,
            verifiers: Vec::new(),
            skipped_attestations: Vec::new(),
        }
    }
}

/// The whole run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Always [`REPORT_SCHEMA`].
    pub schema_version: &'static str,
    /// The RPC node's chain id.
    pub chain_id: u64,
    /// The keeper's account (public).
    pub keeper: Address,
    /// Per-candidate results, in candidate file name order.
    pub jobs: Vec<JobReport>,
    /// Count per status.
    pub counts: BTreeMap<JobStatus, usize>,
    /// The process exit code ([`ExitCode::code`] of the worst job's), a number on the wire.
    pub exit_code: u8,
}

impl Report {
    /// Builds the report and its exit code from the per-job results.
    pub fn new(chain_id: u64, keeper: Address, jobs: Vec<JobReport>) -> Self {
        let mut counts = BTreeMap::new();
        let mut code = ExitCode::Success;
        for j in &jobs {
            *counts.entry(j.status).or_insert(0) += 1;
            code = crate::exit::worst(code, j.status.exit_code());
        }
        Self {
            schema_version: REPORT_SCHEMA,
            chain_id,
            keeper,
            jobs,
            counts,
            exit_code: code.code(),
        }
    }

    /// The summary for stderr.
    pub fn human(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "keeper {} on chain {}: {} candidate(s)",
            self.keeper,
            self.chain_id,
            self.jobs.len()
        );
        for j in &self.jobs {
            let _ = write!(
                out,
                "  {:<11} {}",
                j.status.as_str(),
                j.job_id.as_deref().unwrap_or(&j.candidate_file)
            );
            if let Some(code) = &j.code {
                let _ = write!(out, " [{code}]");
            }
            if let Some(tx) = &j.tx_hash {
                let _ = write!(out, " tx {tx}");
            }
            if let Some(detail) = &j.detail {
                let _ = write!(out, ": {detail}");
            }
            out.push('\n');
            for s in &j.skipped_attestations {
                let _ = writeln!(out, "      skipped {} ({})", s.source, s.code);
            }
        }
        let _ = writeln!(out, "exit code {}", self.exit_code);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_code_is_the_worst_job() {
        let keeper = Address::from_bytes([1; 20]);
        let r = Report::new(8453, keeper, vec![]);
        assert_eq!(r.exit_code, 0);
        let jobs = |s: &[JobStatus]| s.iter().map(|s| JobReport::new("c", *s)).collect();
        let r = Report::new(
            8453,
            keeper,
            jobs(&[JobStatus::Paid, JobStatus::Done, JobStatus::Rejected]),
        );
        assert_eq!(r.exit_code, 0);
        let r = Report::new(8453, keeper, jobs(&[JobStatus::Paid, JobStatus::Refused]));
        assert_eq!(r.exit_code, 3);
        let r = Report::new(
            8453,
            keeper,
            jobs(&[JobStatus::Invalid, JobStatus::Refused]),
        );
        assert_eq!(r.exit_code, 4);
        let r = Report::new(
            8453,
            keeper,
            jobs(&[JobStatus::Unavailable, JobStatus::Invalid]),
        );
        assert_eq!(r.exit_code, 5);
        let r = Report::new(
            8453,
            keeper,
            jobs(&[JobStatus::Unavailable, JobStatus::Internal]),
        );
        assert_eq!(r.exit_code, 1);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["schema_version"], REPORT_SCHEMA);
        assert_eq!(v["jobs"][0]["status"], "unavailable");
        assert_eq!(v["counts"]["internal"], 1);
    }
}
