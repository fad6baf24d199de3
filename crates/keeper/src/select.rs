//! Choosing the attestations to relay for one job: a pure decision over files already parsed.
//!
//! Every signature is recovered locally against the digest the keeper computes itself from
//! the revalidated job and the file's own `verifier`/`passed`/`response_hash`/`deadline`;
//! nothing an attestation file claims about the job (its `bounty_contract`, its
//! `candidate_file`) is trusted beyond routing it to this job.

use std::collections::BTreeMap;

use verifier_sdk::settle::{self, Attestation};
use verifier_sdk::{
    Address, AttestationFields, AttestationFile, Bytes32, ValidatedJob, ValidatedOutcome,
    attestation_digest, compare_with_validated, recover_signer, verification_hash,
};

/// An attestation whose deadline is at or before `now + DEADLINE_MARGIN_SECS` is dropped: it
/// could expire between simulation and inclusion.
pub const DEADLINE_MARGIN_SECS: u64 = 60;

/// Why one attestation file was not used (the job may still settle with the others).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Skip {
    /// The file names this job but another bounty contract.
    #[error("attestation names another bounty contract")]
    WrongBounty,
    /// The signer is not in the committed verifier set (job ∩ chain).
    #[error("verifier is not in the committed verifier set")]
    NotAVerifier,
    /// The signature does not recover to the file's verifier over the local digest.
    #[error("signature does not recover to the verifier over the local digest")]
    BadSignature,
    /// The deadline is past or within the safety margin.
    #[error("deadline is past or within {DEADLINE_MARGIN_SECS} s")]
    Expiring,
    /// Another valid attestation of the same verifier with a later deadline was kept.
    #[error("superseded by a later attestation of the same verifier")]
    Duplicate,
}

impl Skip {
    /// Stable code for reports.
    pub const fn code(self) -> &'static str {
        match self {
            Self::WrongBounty => "wrong_bounty",
            Self::NotAVerifier => "not_a_verifier",
            Self::BadSignature => "bad_signature",
            Self::Expiring => "expiring",
            Self::Duplicate => "duplicate",
        }
    }
}

/// Why nothing can be relayed for this job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectRefusal {
    /// Valid attestations disagree on the verdict.
    #[error("valid attestations disagree on the verdict")]
    MixedVerdicts,
    /// A valid attestation's verdict differs from the candidate's.
    #[error("attestation verdict differs from the candidate's")]
    VerdictMismatch,
    /// A valid attestation signs a response hash other than the candidate's.
    #[error("attestation response hash {found} differs from the candidate's {expected}")]
    ResponseHashMismatch {
        /// The candidate's response hash.
        expected: Bytes32,
        /// The attestation's.
        found: Bytes32,
    },
    /// A valid attestation signs another response hash than the candidate's, and the run it
    /// signed (the candidate its signer wrote next to it) is missing, is no run of this job,
    /// is not the one it signed, or disagrees with the candidate on a commitment.
    #[error("attestation of {verifier} signs another run of the job that cannot be used: {reason}")]
    OwnRun {
        /// The attestation's verifier.
        verifier: Address,
        /// Why.
        reason: String,
    },
    /// Fewer usable attestations than the threshold.
    #[error("{usable} usable attestations, threshold is {threshold}")]
    Insufficient {
        /// Usable attestations from distinct verifiers.
        usable: usize,
        /// The committed threshold.
        threshold: u8,
    },
}

impl SelectRefusal {
    /// Stable code for reports.
    pub const fn code(&self) -> &'static str {
        match self {
            Self::MixedVerdicts => "mixed_verdicts",
            Self::VerdictMismatch => "verdict_mismatch",
            Self::ResponseHashMismatch { .. } => "response_hash_mismatch",
            Self::OwnRun { .. } => "own_run_unusable",
            Self::Insufficient { .. } => "insufficient_attestations",
        }
    }
}

/// An attestation file with the name it was read from (for reports).
#[derive(Debug, Clone)]
pub struct NamedAttestation {
    /// Where it came from, e.g. `dir-0/attestation-….json`.
    pub source: String,
    /// The parsed file.
    pub file: AttestationFile,
    /// The outcome of the candidate its signer wrote next to it (`candidate_file` in the same
    /// directory), when there is one: with independent execution each slot signs its own run,
    /// whose response hash may differ from the relayed candidate's.
    pub own_outcome: Option<serde_json::Value>,
}

/// What the job's settlement will carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Exactly `threshold` attestations, ordered by verifier address.
    pub attestations: Vec<Attestation>,
    /// Their verifiers, same order.
    pub verifiers: Vec<Address>,
    /// The common verdict.
    pub passed: bool,
    /// `keccak256(abi.encode(attestations))`, what the contract will emit.
    pub verification_hash: Bytes32,
}

/// The selection (or refusal) plus every file that was set aside and why.
#[derive(Debug, Clone)]
pub struct SelectOutcome {
    /// Files not used, with the reason.
    pub skipped: Vec<(String, Skip)>,
    /// The attestations to relay, or why there are none.
    pub result: Result<Selection, SelectRefusal>,
}

/// Picks `threshold` attestations for `job` from `files` (already filtered to this job id).
///
/// `committed` is the verifier set both the job and the chain agree on; `now` should be the
/// later of the wall clock and the chain's latest block time.
pub fn select(
    job: &ValidatedJob,
    outcome: &ValidatedOutcome,
    committed: &[Address],
    threshold: u8,
    files: &[NamedAttestation],
    now: u64,
) -> SelectOutcome {
    let mut skipped = Vec::new();
    // verifier → (deadline, attestation, source); BTreeMap keeps verifier-address order.
    let mut valid: Valid<'_> = BTreeMap::new();
    for named in files {
        let f = &named.file;
        let skip = if f.bounty_contract != job.bounty_contract() {
            Some(Skip::WrongBounty)
        } else if !committed.contains(&f.verifier) {
            Some(Skip::NotAVerifier)
        } else if !signature_recovers(job, f) {
            Some(Skip::BadSignature)
        } else if f.deadline <= now.saturating_add(DEADLINE_MARGIN_SECS) {
            Some(Skip::Expiring)
        } else {
            None
        };
        if let Some(skip) = skip {
            skipped.push((named.source.clone(), skip));
            continue;
        }
        let entry = (
            f.deadline,
            f.clone(),
            named.source.clone(),
            named.own_outcome.as_ref(),
        );
        match valid.get(&f.verifier) {
            Some((deadline, kept, _, _)) if *deadline > f.deadline || kept == f => {
                skipped.push((named.source.clone(), Skip::Duplicate));
            }
            Some((_, _, kept_source, _)) => {
                skipped.push((kept_source.clone(), Skip::Duplicate));
                valid.insert(f.verifier, entry);
            }
            None => {
                valid.insert(f.verifier, entry);
            }
        }
    }
    let result = decide(job, outcome, threshold, &valid);
    SelectOutcome { skipped, result }
}

/// The soonest deadline among the attestations in `files` that [`select`] could use for `job`
/// at `now` as far as the job alone tells (the committed verifier set is the chain's, read only
/// when the job is relayed): the deadline its settlement has to beat. `None` without any.
pub fn soonest_deadline(job: &ValidatedJob, files: &[NamedAttestation], now: u64) -> Option<u64> {
    files
        .iter()
        .map(|named| &named.file)
        .filter(|f| {
            f.bounty_contract == job.bounty_contract()
                && f.deadline > now.saturating_add(DEADLINE_MARGIN_SECS)
                && signature_recovers(job, f)
        })
        .map(|f| f.deadline)
        .min()
}

fn signature_recovers(job: &ValidatedJob, f: &AttestationFile) -> bool {
    let Ok(signature) = f.parsed_signature() else {
        return false;
    };
    let fields = AttestationFields {
        bounty: job.bounty_contract(),
        bounty_id: job.bounty_id(),
        round: job.round(),
        verifier: f.verifier,
        submission_hash: job.submission_hash(),
        evidence_hash: job.evidence_hash(),
        policy_hash: job.policy_hash(),
        passed: f.passed,
        response_hash: f.response_hash,
        deadline: f.deadline,
    };
    let digest = attestation_digest(job.chain_id(), &fields);
    recover_signer(&digest, &signature).is_ok_and(|who| who == f.verifier)
}

/// An attestation over another response hash than the candidate's is usable only with the run
/// it signed next to it, and only when that run is a run of this job, is the one signed, and
/// agrees with the candidate on the verdict and every receipt commitment
/// ([`verifier_sdk::agreement`]): what the contract accepts (one verdict, PROTOCOL §6), and no
/// more than what the signer's own run can show.
fn own_run_agrees(
    job: &ValidatedJob,
    outcome: &ValidatedOutcome,
    f: &AttestationFile,
    own: Option<&serde_json::Value>,
) -> Result<(), SelectRefusal> {
    let expected = outcome.response_hash();
    let Some(own) = own else {
        return Err(SelectRefusal::ResponseHashMismatch {
            expected,
            found: f.response_hash,
        });
    };
    let refuse = |reason: String| SelectRefusal::OwnRun {
        verifier: f.verifier,
        reason,
    };
    let agreement = compare_with_validated(job, outcome, own).map_err(|e| refuse(e.to_string()))?;
    if !agreement.agrees() {
        return Err(refuse(agreement.describe()));
    }
    let own_hash = own
        .get("response_hash")
        .and_then(serde_json::Value::as_str)
        .and_then(|s| s.parse::<Bytes32>().ok());
    if own_hash != Some(f.response_hash) {
        return Err(refuse(
            "the candidate next to it is not the run it signed (response hash differs)".into(),
        ));
    }
    Ok(())
}

type Valid<'a> = BTreeMap<Address, (u64, AttestationFile, String, Option<&'a serde_json::Value>)>;

fn decide(
    job: &ValidatedJob,
    outcome: &ValidatedOutcome,
    threshold: u8,
    valid: &Valid<'_>,
) -> Result<Selection, SelectRefusal> {
    let files: Vec<&AttestationFile> = valid.values().map(|(_, f, _, _)| f).collect();
    if let Some(first) = files.first()
        && files.iter().any(|f| f.passed != first.passed)
    {
        return Err(SelectRefusal::MixedVerdicts);
    }
    let expected_passed = outcome.verdict().passed();
    if files.iter().any(|f| f.passed != expected_passed) {
        return Err(SelectRefusal::VerdictMismatch);
    }
    let expected = outcome.response_hash();
    for (_, f, _, own) in valid.values() {
        if f.response_hash != expected {
            own_run_agrees(job, outcome, f, *own)?;
        }
    }
    let wanted = usize::from(threshold);
    if files.len() < wanted || wanted == 0 {
        return Err(SelectRefusal::Insufficient {
            usable: files.len(),
            threshold,
        });
    }
    let mut attestations = Vec::with_capacity(wanted);
    let mut verifiers = Vec::with_capacity(wanted);
    for f in files.into_iter().take(wanted) {
        let signature = f
            .parsed_signature()
            .map_err(|_| SelectRefusal::Insufficient {
                usable: 0,
                threshold,
            })?;
        attestations.push(settle::attestation(
            f.verifier,
            f.passed,
            f.response_hash,
            f.deadline,
            &signature,
        ));
        verifiers.push(f.verifier);
    }
    Ok(Selection {
        verification_hash: verification_hash(&attestations),
        attestations,
        verifiers,
        passed: expected_passed,
    })
}

#[cfg(test)]
mod tests;
