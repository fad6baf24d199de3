//! File formats passed between the runner, signer and keeper (PROTOCOL §7) and the
//! attestation deadline rule.
//!
//! The candidate carries the job and outcome as raw JSON: every reader re-validates them with
//! [`validate_job`](crate::validate_job) and [`validate_outcome`](crate::validate_outcome)
//! instead of trusting the writer.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::attest::{AttestationSignature, SignatureError};
use crate::job::{JobError, ValidatedJob};
use crate::types::{Address, Bytes32};

/// `schema` of a candidate file.
pub const CANDIDATE_SCHEMA: &str = "agent-bounties/regression-candidate-v1";
/// `schema` of the candidate manifest.
pub const CANDIDATE_MANIFEST_SCHEMA: &str = "agent-bounties/regression-candidate-manifest-v1";
/// The most candidates one candidate manifest lists, agreed by every producer (`worker feed`,
/// `worker serve`, the workflow's `collect-shards.sh`) and the signer. It bounds one signing
/// run (each candidate is revalidated against the API and the chain) within the attestation
/// deadline. Past it a producer lists the candidates of the earliest `verification_expires_at`
/// ([`CandidateManifest::keep_earliest`]) and reports how many it left out; the signer, given
/// a longer manifest all the same, signs that many in the same order and reports the rest as
/// deferred. Never nothing: the ones left out are offered again by the next run.
pub const MAX_MANIFEST_CANDIDATES: usize = 1000;
/// `schema` of an attestation file (and, in the reference pipeline's layout, of the
/// attestation directory's `manifest.json`, see [`ReferenceAttestationManifest`]).
pub const ATTESTATION_SCHEMA: &str = "agent-bounties/regression-attestation-v1";
/// `schema` of our attestation manifest.
pub const ATTESTATION_MANIFEST_SCHEMA: &str = "agent-bounties/regression-attestation-manifest-v1";
/// Name of our attestation manifest inside an attestation directory.
pub const ATTESTATION_MANIFEST_FILE: &str = "attestation-manifest.json";
/// Name of the manifest a reference relay reads in an attestation directory (PROTOCOL §7).
pub const REFERENCE_ATTESTATION_MANIFEST_FILE: &str = "manifest.json";
/// Longest signature validity we grant.
pub const MAX_DEADLINE_WINDOW_SECS: u64 = 900;
/// Shortest remaining validity worth signing for.
pub const MIN_DEADLINE_MARGIN_SECS: u64 = 120;

/// Why an artifact file is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArtifactError {
    /// The file does not parse strictly.
    #[error("artifact is malformed: {0}")]
    Malformed(String),
    /// The `schema` field is not the expected one.
    #[error("artifact schema is not {expected}")]
    Schema {
        /// The expected schema.
        expected: &'static str,
    },
    /// A candidate file name is not `candidate-<64 lowercase hex>.json`.
    #[error("candidate file name is not candidate-<64 lowercase hex>.json")]
    CandidateFileName,
    /// A candidate's file name does not belong to its job id.
    #[error("candidate file name does not match the job id")]
    CandidateFileMismatch,
    /// An attestation file's signature has the wrong shape.
    #[error("attestation signature: {0}")]
    Signature(#[from] SignatureError),
}

/// A run's candidate: the job and outcome as received, plus the worker's evidence record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Candidate {
    /// [`CANDIDATE_SCHEMA`].
    pub schema: String,
    /// The job exactly as fetched.
    pub job: Value,
    /// `{verdict, receipt, response_hash}`.
    pub outcome: Value,
    /// Revision of the runner that produced it.
    pub runner_revision: String,
    /// The worker's evidence record (DESIGN §5); the signer refuses a candidate without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Value>,
}

impl Candidate {
    /// A candidate with the current schema.
    pub fn new(
        job: Value,
        outcome: Value,
        runner_revision: String,
        evidence: Option<Value>,
    ) -> Self {
        Self {
            schema: CANDIDATE_SCHEMA.into(),
            job,
            outcome,
            runner_revision,
            evidence,
        }
    }
    /// The candidate of a run of `job` that produced `outcome`, built from the typed parts at
    /// the file boundary: the job exactly as fetched (its raw form, which every hash was
    /// computed over), the outcome as it serialises, and the evidence record's JSON.
    pub fn of_run(
        job: &ValidatedJob,
        outcome: &crate::receipt::Outcome,
        runner_revision: &str,
        evidence: Option<Value>,
    ) -> Result<Self, serde_json::Error> {
        Ok(Self::new(
            job.raw().clone(),
            serde_json::to_value(outcome)?,
            runner_revision.to_owned(),
            evidence,
        ))
    }

    /// Parses strictly and checks the schema.
    pub fn from_value(v: &Value) -> Result<Self, ArtifactError> {
        let c = Self::deserialize(v).map_err(|e| malformed(&e))?;
        if c.schema != CANDIDATE_SCHEMA {
            return Err(ArtifactError::Schema {
                expected: CANDIDATE_SCHEMA,
            });
        }
        Ok(c)
    }
}

/// A candidate whose job passed every structural rule ([`ValidatedJob::parse`]): the form the
/// signer and keeper work on, so each parses the job once. Liveness is left to the re-check
/// ([`crate::revalidate_parsed`]), so the keeper can still find an expired job's record.
#[derive(Debug, Clone)]
pub struct ParsedCandidate {
    candidate: Candidate,
    job: ValidatedJob,
}

impl ParsedCandidate {
    /// Parses the candidate's job.
    pub fn parse(candidate: Candidate) -> Result<Self, JobError> {
        let job = ValidatedJob::parse(&candidate.job)?;
        Ok(Self { candidate, job })
    }
    /// The candidate as read.
    pub fn candidate(&self) -> &Candidate {
        &self.candidate
    }
    /// Its job, structurally valid (not necessarily live).
    pub fn job(&self) -> &ValidatedJob {
        &self.job
    }
}

fn malformed(e: &serde_json::Error) -> ArtifactError {
    ArtifactError::Malformed(e.to_string().chars().take(512).collect())
}

/// `candidate-<sha256 hex of job_id>.json`.
pub fn candidate_file_name(job_id: &str) -> String {
    format!(
        "candidate-{}.json",
        hex::encode(Sha256::digest(job_id.as_bytes()))
    )
}

/// Checks a candidate file name read from another artifact before it is joined to a path:
/// it must be exactly `candidate-<64 lowercase hex>.json`, so it can name nothing else.
pub fn check_candidate_file_name(name: &str) -> Result<(), ArtifactError> {
    let hex_part = name
        .strip_prefix("candidate-")
        .and_then(|r| r.strip_suffix(".json"))
        .ok_or(ArtifactError::CandidateFileName)?;
    if hex_part.len() != 64
        || !hex_part
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(ArtifactError::CandidateFileName);
    }
    Ok(())
}

/// One entry of the candidate manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CandidateEntry {
    /// The job id.
    pub job_id: String,
    /// Its candidate file name.
    pub file: String,
}

/// The list of candidates a run wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CandidateManifest {
    /// [`CANDIDATE_MANIFEST_SCHEMA`].
    pub schema: String,
    /// Canonical network name.
    pub network: String,
    /// The candidates.
    pub candidates: Vec<CandidateEntry>,
}

impl CandidateManifest {
    /// An empty manifest for `network`.
    pub fn new(network: &str) -> Self {
        Self {
            schema: CANDIDATE_MANIFEST_SCHEMA.into(),
            network: network.into(),
            candidates: Vec::new(),
        }
    }
    /// Adds a job with its derived file name.
    pub fn push(&mut self, job_id: &str) {
        self.candidates.push(CandidateEntry {
            job_id: job_id.into(),
            file: candidate_file_name(job_id),
        });
    }
    /// Keeps at most `bound` entries. When there are more, keeps the `bound` of the earliest
    /// `expiry` (an entry whose expiry is unknown sorts last; ties keep manifest order), in
    /// that order, and returns the entries left out, in the same order. A manifest within the
    /// bound is left exactly as it is.
    pub fn keep_earliest(
        &mut self,
        bound: usize,
        mut expiry: impl FnMut(&CandidateEntry) -> Option<u64>,
    ) -> Vec<CandidateEntry> {
        if self.candidates.len() <= bound {
            return Vec::new();
        }
        let mut keyed: Vec<(u64, CandidateEntry)> = std::mem::take(&mut self.candidates)
            .into_iter()
            .map(|e| (expiry(&e).unwrap_or(u64::MAX), e))
            .collect();
        // Stable: equal expiries stay in manifest order.
        keyed.sort_by_key(|(at, _)| *at);
        let rest = keyed.split_off(bound);
        self.candidates = keyed.into_iter().map(|(_, e)| e).collect();
        rest.into_iter().map(|(_, e)| e).collect()
    }

    /// Parses strictly; checks the schema and that every file name is the one its job id
    /// derives (so no entry can point outside the candidate directory).
    pub fn from_value(v: &Value) -> Result<Self, ArtifactError> {
        let m = Self::deserialize(v).map_err(|e| malformed(&e))?;
        if m.schema != CANDIDATE_MANIFEST_SCHEMA {
            return Err(ArtifactError::Schema {
                expected: CANDIDATE_MANIFEST_SCHEMA,
            });
        }
        for entry in &m.candidates {
            check_candidate_file_name(&entry.file)?;
            if entry.file != candidate_file_name(&entry.job_id) {
                return Err(ArtifactError::CandidateFileMismatch);
            }
        }
        Ok(m)
    }
}

/// A signed attestation as written by the signer and read by the keeper.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttestationFile {
    /// [`ATTESTATION_SCHEMA`].
    pub schema: String,
    /// The job id.
    pub job_id: String,
    /// The bounty contract.
    pub bounty_contract: Address,
    /// The signer.
    pub verifier: Address,
    /// The verdict signed.
    pub passed: bool,
    /// The response hash signed.
    pub response_hash: Bytes32,
    /// The deadline signed.
    pub deadline: u64,
    /// `0x` + 65-byte signature hex; check it with
    /// [`AttestationSignature::from_hex`](crate::attest::AttestationSignature::from_hex).
    pub signature: String,
    /// The candidate it attests.
    pub candidate_file: String,
}

impl AttestationFile {
    /// Parses strictly; checks the schema, the signature's shape and the candidate file name.
    pub fn from_value(v: &Value) -> Result<Self, ArtifactError> {
        let a = Self::deserialize(v).map_err(|e| malformed(&e))?;
        if a.schema != ATTESTATION_SCHEMA {
            return Err(ArtifactError::Schema {
                expected: ATTESTATION_SCHEMA,
            });
        }
        a.parsed_signature()?;
        check_candidate_file_name(&a.candidate_file)?;
        if a.candidate_file != candidate_file_name(&a.job_id) {
            return Err(ArtifactError::CandidateFileMismatch);
        }
        Ok(a)
    }

    /// The signature with its shape checked (65 bytes, low-s, v 27/28).
    pub fn parsed_signature(&self) -> Result<AttestationSignature, SignatureError> {
        AttestationSignature::from_hex(&self.signature)
    }
}

/// `attestation-<sha256 hex of job_id>-<verifier>.json`: one name per job and signer, so the
/// attestations of several signers can share a directory.
pub fn attestation_file_name(job_id: &str, verifier: &Address) -> String {
    format!(
        "attestation-{}-{}.json",
        hex::encode(Sha256::digest(job_id.as_bytes())),
        verifier
    )
}

/// One entry of the attestation manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttestationManifestEntry {
    /// The job id.
    pub job_id: String,
    /// The attestation file name.
    pub file: String,
    /// The candidate it attests.
    pub candidate_file: String,
}

/// The list of attestations one signer run wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttestationManifest {
    /// [`ATTESTATION_MANIFEST_SCHEMA`].
    pub schema: String,
    /// Canonical network name.
    pub network: String,
    /// The signer.
    pub verifier: Address,
    /// The attestations, in candidate manifest order.
    pub attestations: Vec<AttestationManifestEntry>,
}

impl AttestationManifest {
    /// An empty manifest of `verifier` on `network`.
    pub fn new(network: &str, verifier: Address) -> Self {
        Self {
            schema: ATTESTATION_MANIFEST_SCHEMA.into(),
            network: network.into(),
            verifier,
            attestations: Vec::new(),
        }
    }

    /// The same list in the reference pipeline's layout.
    pub fn to_reference(&self) -> ReferenceAttestationManifest {
        ReferenceAttestationManifest {
            schema: ATTESTATION_SCHEMA.into(),
            signer: self.verifier,
            attestations: self
                .attestations
                .iter()
                .map(|a| ReferenceAttestationEntry {
                    job_id: a.job_id.clone(),
                    file: a.file.clone(),
                })
                .collect(),
        }
    }
}

/// One entry of a reference attestation manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReferenceAttestationEntry {
    /// The job id.
    pub job_id: String,
    /// The attestation file name, inside the same directory.
    pub file: String,
}

/// The `manifest.json` of an attestation directory in the reference pipeline's layout
/// (PROTOCOL §7): its relay reads only this file to find the attestations. Its `schema` is the
/// attestation's own, so a reader of attestation files must tell the two apart by shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReferenceAttestationManifest {
    /// [`ATTESTATION_SCHEMA`].
    pub schema: String,
    /// The signer.
    pub signer: Address,
    /// The attestations.
    pub attestations: Vec<ReferenceAttestationEntry>,
}

impl ReferenceAttestationManifest {
    /// Parses strictly and checks the schema.
    pub fn from_value(v: &Value) -> Result<Self, ArtifactError> {
        let m = Self::deserialize(v).map_err(|e| malformed(&e))?;
        if m.schema != ATTESTATION_SCHEMA {
            return Err(ArtifactError::Schema {
                expected: ATTESTATION_SCHEMA,
            });
        }
        Ok(m)
    }

    /// Whether `v` has this manifest's shape (the keys `signer` and `attestations`, no
    /// `signature`), which an attestation file never has.
    pub fn is_manifest_shaped(v: &Value) -> bool {
        v.get("signer").is_some() && v.get("attestations").is_some() && v.get("signature").is_none()
    }
}

/// Why no deadline can be granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("deadline {deadline} leaves no more than {MIN_DEADLINE_MARGIN_SECS} s after now ({now})")]
pub struct DeadlineError {
    /// The deadline that would have been signed.
    pub deadline: u64,
    /// The clock.
    pub now: u64,
}

/// The attestation deadline: min(now + 900, expiry), which must be more than now + 120.
pub fn attestation_deadline(
    now_unix: u64,
    verification_expires_at: u64,
) -> Result<u64, DeadlineError> {
    let deadline = now_unix
        .saturating_add(MAX_DEADLINE_WINDOW_SECS)
        .min(verification_expires_at);
    if deadline <= now_unix.saturating_add(MIN_DEADLINE_MARGIN_SECS) {
        return Err(DeadlineError {
            deadline,
            now: now_unix,
        });
    }
    Ok(deadline)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The workflow's shard collector is a producer too; its bound is a shell variable, held
    /// equal to the constant here.
    #[test]
    fn collect_shards_uses_the_same_manifest_bound() {
        let script = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../.github/scripts/collect-shards.sh"
        ))
        .unwrap();
        let line = format!("\nmanifest_bound={MAX_MANIFEST_CANDIDATES}\n");
        assert!(script.contains(&line), "collect-shards.sh lacks {line:?}");
    }

    #[test]
    fn a_manifest_over_the_bound_keeps_the_earliest_expiries_and_returns_the_rest() {
        let mut m = CandidateManifest::new("base-mainnet");
        for id in ["late", "unknown", "early", "tie-a", "tie-b"] {
            m.push(id);
        }
        let expiry = |e: &CandidateEntry| match e.job_id.as_str() {
            "late" => Some(900),
            "early" => Some(100),
            "tie-a" | "tie-b" => Some(500),
            _ => None,
        };
        let within = m.clone();
        let mut same = m.clone();
        assert!(same.keep_earliest(5, expiry).is_empty());
        assert_eq!(same, within, "within the bound nothing moves");
        let rest = m.keep_earliest(3, expiry);
        let ids = |v: &[CandidateEntry]| v.iter().map(|e| e.job_id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&m.candidates), ["early", "tie-a", "tie-b"]);
        assert_eq!(ids(&rest), ["late", "unknown"]);
    }

    #[test]
    fn deadline_rule_edges() {
        assert_eq!(attestation_deadline(1000, 5000), Ok(1900));
        assert_eq!(attestation_deadline(1000, 1500), Ok(1500));
        assert_eq!(attestation_deadline(1000, 1121), Ok(1121));
        assert_eq!(
            attestation_deadline(1000, 1120),
            Err(DeadlineError {
                deadline: 1120,
                now: 1000
            })
        );
        assert!(attestation_deadline(1000, 900).is_err());
        assert!(attestation_deadline(u64::MAX - 10, u64::MAX).is_err());
    }

    #[test]
    fn candidate_file_name_is_sha256_of_job_id() {
        let name = candidate_file_name("base-mainnet:0xabc:1");
        assert_eq!(
            name,
            format!(
                "candidate-{}.json",
                hex::encode(Sha256::digest(b"base-mainnet:0xabc:1"))
            )
        );
        assert_eq!(
            candidate_file_name(""),
            "candidate-e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855.json"
        );
        assert!(check_candidate_file_name(&name).is_ok());
        for bad in [
            "../candidate-x.json".to_string(),
            name.to_uppercase(),
            name.replace(".json", ".json/"),
            format!("candidate-{}.json", "a".repeat(63)),
            format!("x/candidate-{}.json", "a".repeat(64)),
        ] {
            assert_eq!(
                check_candidate_file_name(&bad),
                Err(ArtifactError::CandidateFileName),
                "{bad}"
            );
        }
    }

    /// A candidate built from a validated job and its typed outcome reads back as that job
    /// (the raw form, hashes unchanged) and an outcome that validates to the same one.
    #[test]
    fn a_candidate_of_a_run_reads_back_as_its_job_and_outcome() {
        use crate::fixtures::{NOW, valid_job};
        let job = crate::job::validate_job(&valid_job(), NOW).unwrap();
        let facts = crate::ExecutionFacts {
            exit_code: 1,
            stdout_sha256: crate::Sha256Digest::from_bytes([1; 32]),
            stderr_sha256: crate::Sha256Digest::from_bytes([2; 32]),
            stdout_bytes: 3,
            stderr_bytes: 0,
        };
        let outcome = crate::Outcome::for_job(&job, facts);
        let c = Candidate::of_run(&job, &outcome, "local", Some(json!({"k": 1}))).unwrap();
        let back = Candidate::from_value(&serde_json::to_value(&c).unwrap()).unwrap();
        assert_eq!(&back.job, job.raw());
        assert_eq!(
            crate::validate_outcome(&back.outcome, &job)
                .unwrap()
                .into_inner(),
            outcome
        );
        assert_eq!(back.evidence, Some(json!({"k": 1})));
        assert_eq!(back.runner_revision, "local");
    }

    #[test]
    fn candidate_round_trip_and_strictness() {
        let c = Candidate::new(
            json!({"job_id": "a"}),
            json!({"verdict": "passed"}),
            "abc".into(),
            Some(json!({"k": 1})),
        );
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["schema"], CANDIDATE_SCHEMA);
        assert_eq!(Candidate::from_value(&v).unwrap(), c);
        let mut extra = v.clone();
        extra["x"] = json!(1);
        assert!(matches!(
            Candidate::from_value(&extra),
            Err(ArtifactError::Malformed(_))
        ));
        let mut wrong = v.clone();
        wrong["schema"] = json!("agent-bounties/regression-candidate-v2");
        assert_eq!(
            Candidate::from_value(&wrong),
            Err(ArtifactError::Schema {
                expected: CANDIDATE_SCHEMA
            })
        );
        let mut no_evidence = v;
        no_evidence.as_object_mut().unwrap().remove("evidence");
        assert_eq!(Candidate::from_value(&no_evidence).unwrap().evidence, None);
    }

    #[test]
    fn manifest_and_attestation_file_names_must_derive_from_job_id() {
        let mut m = CandidateManifest::new("base-mainnet");
        m.push("job-1");
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(CandidateManifest::from_value(&v).unwrap(), m);
        let mut bad = v.clone();
        bad["candidates"][0]["file"] = json!(candidate_file_name("job-2"));
        assert_eq!(
            CandidateManifest::from_value(&bad),
            Err(ArtifactError::CandidateFileMismatch)
        );
        bad["candidates"][0]["file"] = json!("../../etc/passwd");
        assert_eq!(
            CandidateManifest::from_value(&bad),
            Err(ArtifactError::CandidateFileName)
        );

        let a = json!({
            "schema": ATTESTATION_SCHEMA,
            "job_id": "job-1",
            "bounty_contract": format!("0x{}", "22".repeat(20)),
            "verifier": format!("0x{}", "11".repeat(20)),
            "passed": true,
            "response_hash": format!("0x{}", "aa".repeat(32)),
            "deadline": 123,
            "signature": format!("0x{}01{}011b", "00".repeat(31), "00".repeat(31)),
            "candidate_file": candidate_file_name("job-1"),
        });
        assert!(AttestationFile::from_value(&a).is_ok());
        let mut other = a.clone();
        other["candidate_file"] = json!(candidate_file_name("job-2"));
        assert_eq!(
            AttestationFile::from_value(&other),
            Err(ArtifactError::CandidateFileMismatch)
        );
        let mut schema = a.clone();
        schema["schema"] = json!("x");
        assert_eq!(
            AttestationFile::from_value(&schema),
            Err(ArtifactError::Schema {
                expected: ATTESTATION_SCHEMA
            })
        );
        let mut bad_sig = a.clone();
        bad_sig["signature"] = json!(format!("0x{}01{}011d", "00".repeat(31), "00".repeat(31)));
        assert_eq!(
            AttestationFile::from_value(&bad_sig),
            Err(ArtifactError::Signature(SignatureError::V(0x1d)))
        );
        let mut unknown = a;
        unknown["extra"] = json!(true);
        assert!(matches!(
            AttestationFile::from_value(&unknown),
            Err(ArtifactError::Malformed(_))
        ));
    }
}
