//! The readiness record (issue #43 item 3): whether a job the verifier is committed to could be
//! run *and signed* on this host now, written by `worker feed` / `worker serve` beside the
//! candidates and read by anyone who acts on it (a dashboard, the solver's preflight).
//!
//! One home for the format: the writer serializes [`ReadinessRecord`], readers deserialize it
//! through [`ReadinessRecord::parse`]. A record is `ready` only when every check passed; a check
//! the writer could not perform is a failed check (`not_checked`), never a pass, so a record
//! never says ready where the signer, at `checked_at`, would refuse for what the record checks.
//! The chain check's code is the signer's own refusal code (the writer runs the signer's check
//! function, `bounty_chain`'s `check_job_against_state`), so the two name the same reason. The
//! record is a snapshot: what the signer decides by the clock (a deadline too close, an expired
//! job) and the contract's `isVerifier`/`attestationDigest` answers are not in it
//! (docs/operations.md "Readiness").

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The record's format version; changing the format bumps it.
pub const READINESS_SCHEMA_VERSION: u32 = 1;

/// The file name of a job's readiness record: `readiness-<sha256(job_id)>.json`, beside the
/// job's `candidate-<sha256(job_id)>.json`.
pub fn readiness_file_name(job_id: &str) -> String {
    format!(
        "readiness-{}.json",
        hex::encode(Sha256::digest(job_id.as_bytes()))
    )
}

/// What readiness checks, in the order they are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckKind {
    /// The manifest's image resolves by digest on this host.
    Image,
    /// The manifest's limits fit this host.
    Limits,
    /// The OCI runtime the run needs is registered and usable.
    Runtime,
    /// The exact-commit archive was fetched and its digest equals the committed one.
    Archive,
    /// The bounty's on-chain commitments (terms, acceptance criteria, benchmark and evidence
    /// schema hashes, window, verifier set …) equal the job's: the signer's own check.
    Chain,
}

/// The code of a check the writer could not perform (no RPC given, the engine down): it
/// counts as failed.
pub const NOT_CHECKED: &str = "not_checked";

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckResult {
    /// Which check.
    pub check: CheckKind,
    /// Whether it passed.
    pub ok: bool,
    /// When failed: a stable snake_case code (for [`CheckKind::Chain`], the signer's refusal
    /// code, e.g. `onchain_mismatch`; [`NOT_CHECKED`] when it could not be performed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// When failed: the finer codes (for `onchain_mismatch`, the mismatched fields' codes,
    /// e.g. `terms_hash`), as the signer reports them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<String>,
    /// When failed: a human-readable reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl CheckResult {
    /// A passed check.
    pub fn pass(check: CheckKind) -> Self {
        Self {
            check,
            ok: true,
            code: None,
            details: Vec::new(),
            message: None,
        }
    }

    /// A failed check with its code, finer codes and message.
    pub fn fail(
        check: CheckKind,
        code: impl Into<String>,
        details: Vec<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            check,
            ok: false,
            code: Some(code.into()),
            details,
            message: Some(message.into()),
        }
    }

    /// A check the writer could not perform; never a pass.
    pub fn not_checked(check: CheckKind, why: impl Into<String>) -> Self {
        Self::fail(check, NOT_CHECKED, Vec::new(), why)
    }
}

/// Why a readiness file is not a readiness record.
#[derive(Debug, thiserror::Error)]
pub enum ReadinessError {
    /// Not JSON of the record's shape.
    #[error("readiness record: {0}")]
    Malformed(#[source] serde_json::Error),
    /// Another format version.
    #[error("readiness record schema_version {0}, this build reads {READINESS_SCHEMA_VERSION}")]
    SchemaVersion(u32),
    /// `ready` disagrees with the checks (a record that says ready with a failed check).
    #[error("readiness record says ready={claimed} but its checks say {actual}")]
    Inconsistent {
        /// The record's `ready`.
        claimed: bool,
        /// Whether every check passed.
        actual: bool,
    },
    /// A check is missing: a record that omits one cannot say ready.
    #[error("readiness record lacks the {0:?} check")]
    MissingCheck(CheckKind),
}

/// Every check a complete record holds.
pub const ALL_CHECKS: [CheckKind; 5] = [
    CheckKind::Image,
    CheckKind::Limits,
    CheckKind::Runtime,
    CheckKind::Archive,
    CheckKind::Chain,
];

/// Whether one job could be run and signed here now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadinessRecord {
    /// [`READINESS_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The job.
    pub job_id: String,
    /// Unix seconds the checks were made at (from the writer's injected clock).
    pub checked_at: u64,
    /// True only when every check of [`ALL_CHECKS`] is present and passed.
    pub ready: bool,
    /// Each check's result.
    pub checks: Vec<CheckResult>,
}

impl ReadinessRecord {
    /// A record over `checks`; `ready` is derived, never passed in, and a missing check makes
    /// it not ready.
    pub fn new(job_id: impl Into<String>, checked_at: u64, checks: Vec<CheckResult>) -> Self {
        let ready = ready_from(&checks);
        Self {
            schema_version: READINESS_SCHEMA_VERSION,
            job_id: job_id.into(),
            checked_at,
            ready,
            checks,
        }
    }

    /// The first failed check, in [`ALL_CHECKS`] order (a missing one counts as failed).
    pub fn first_failure(&self) -> Option<&CheckResult> {
        self.checks.iter().find(|c| !c.ok)
    }

    /// The result of one check, when present.
    pub fn check(&self, kind: CheckKind) -> Option<&CheckResult> {
        self.checks.iter().find(|c| c.check == kind)
    }

    /// Parses a record read from disk; refuses another version and a `ready` its checks do not
    /// back.
    pub fn parse(bytes: &[u8]) -> Result<Self, ReadinessError> {
        let record: Self = serde_json::from_slice(bytes).map_err(ReadinessError::Malformed)?;
        if record.schema_version != READINESS_SCHEMA_VERSION {
            return Err(ReadinessError::SchemaVersion(record.schema_version));
        }
        if record.ready
            && let Some(missing) = ALL_CHECKS.iter().find(|k| record.check(**k).is_none())
        {
            return Err(ReadinessError::MissingCheck(*missing));
        }
        let actual = ready_from(&record.checks);
        if record.ready != actual {
            return Err(ReadinessError::Inconsistent {
                claimed: record.ready,
                actual,
            });
        }
        Ok(record)
    }
}

fn ready_from(checks: &[CheckResult]) -> bool {
    ALL_CHECKS
        .iter()
        .all(|kind| checks.iter().any(|c| c.check == *kind))
        && checks.iter().all(|c| c.ok)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn all_pass() -> Vec<CheckResult> {
        ALL_CHECKS.iter().map(|k| CheckResult::pass(*k)).collect()
    }

    #[test]
    fn every_check_passing_is_ready_and_round_trips() {
        let r = ReadinessRecord::new("base-mainnet:0xabc:1", 7, all_pass());
        assert!(r.ready);
        let bytes = serde_json::to_vec(&r).unwrap();
        assert_eq!(ReadinessRecord::parse(&bytes).unwrap(), r);
    }

    #[test]
    fn a_check_not_performed_is_not_ready() {
        let mut checks = all_pass();
        checks[4] = CheckResult::not_checked(CheckKind::Chain, "no --rpc given");
        let r = ReadinessRecord::new("j", 7, checks);
        assert!(!r.ready);
        assert_eq!(
            r.first_failure().unwrap().code.as_deref(),
            Some(NOT_CHECKED)
        );
    }

    #[test]
    fn a_record_without_the_chain_check_is_not_ready() {
        let checks = all_pass().into_iter().take(4).collect();
        assert!(!ReadinessRecord::new("j", 7, checks).ready);
    }

    /// PR #1288's shape: a record that says ready over a failed check is refused on reading.
    #[test]
    fn a_record_claiming_ready_over_a_failed_check_is_refused() {
        let mut checks = all_pass();
        checks[4] = CheckResult::fail(CheckKind::Chain, "onchain_mismatch", vec![], "terms");
        let mut r = ReadinessRecord::new("j", 7, checks);
        r.ready = true;
        let err = ReadinessRecord::parse(&serde_json::to_vec(&r).unwrap()).unwrap_err();
        assert!(matches!(
            err,
            ReadinessError::Inconsistent {
                claimed: true,
                actual: false
            }
        ));
    }

    #[test]
    fn another_schema_version_is_refused() {
        let mut r = ReadinessRecord::new("j", 7, all_pass());
        r.schema_version = 2;
        let err = ReadinessRecord::parse(&serde_json::to_vec(&r).unwrap()).unwrap_err();
        assert!(matches!(err, ReadinessError::SchemaVersion(2)));
    }

    #[test]
    fn the_file_name_sits_beside_the_candidate() {
        let name = readiness_file_name("base-mainnet:0xabc:1");
        let candidate = crate::candidate_file_name("base-mainnet:0xabc:1");
        assert_eq!(
            name.strip_prefix("readiness-"),
            candidate.strip_prefix("candidate-")
        );
    }
}
