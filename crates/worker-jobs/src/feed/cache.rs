//! Local cache of completed verdicts, keyed by the full identity of a run.
//!
//! The key is SHA-256 over the canonical JSON of everything that determines the result:
//! cache schema version, receipt scope, runner manifest hash, source and benchmark digests,
//! image digest and worker version. Change any of them and the key changes, so a stale entry
//! is simply never looked up. Only verdicts are stored: a no-verdict or infrastructure
//! failure must be retried, never replayed. Every loaded entry is re-validated against the
//! job with `validate_outcome`; an entry that fails is deleted and ignored.
//!
//! Beside verdicts, the cache remembers inputs refused by rule (an archive with a link, a
//! traversal, over a cap, …) under the same key, in a separate `<key>.rejected.json` record, so
//! a job whose archive can never be extracted is not downloaded again every run. A rejection
//! record carries only a reason: it is never read as a verdict, and a verdict entry never as a
//! rejection. It is re-checked on load like a verdict (schema, key, job id, reason code).

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use verifier_sdk::{
    Outcome, Sha256Digest, ValidatedJob, ValidatedOutcome, canonical_json, runner_manifest_hash,
    sha256_digest, validate_outcome,
};

/// Version of the cache entry format and key preimage; bumping it orphans every old entry.
pub const CACHE_SCHEMA_VERSION: &str = "agent-bounties/regression-feed-cache-v1";

/// Largest cache entry read back; a larger file is not ours.
const MAX_ENTRY_BYTES: u64 = 8 << 20;

/// The reason codes a rejection record may carry: refusals that the same inputs meet again on
/// every attempt. Anything else read back is discarded.
pub const CACHEABLE_REJECTIONS: &[&str] = &["archive_rejected", "download_too_large"];

/// Longest reason kept in a rejection record.
const MAX_REASON_CHARS: usize = 1024;

/// Why the cache could not be written.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// Creating the directory or writing the entry failed.
    #[error("writing cache entry {path:?}: {source}")]
    Io {
        /// The entry path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Everything a run's result depends on.
#[derive(Debug, Clone, Copy)]
pub struct RunIdentity<'a> {
    /// The job (its receipt scope and manifest).
    pub job: &'a ValidatedJob,
    /// The staged source digest.
    pub source_digest: Sha256Digest,
    /// The staged benchmark digest.
    pub benchmark_digest: Sha256Digest,
    /// The image's pinned digest.
    pub image_digest: Sha256Digest,
    /// This worker's version.
    pub worker_version: &'a str,
}

impl RunIdentity<'_> {
    /// The cache key: SHA-256 of the canonical JSON of the identity.
    pub fn key(&self) -> Sha256Digest {
        self.key_for_schema(CACHE_SCHEMA_VERSION)
    }

    fn key_for_schema(&self, schema: &str) -> Sha256Digest {
        let preimage = json!({
            "cache_schema_version": schema,
            "scope": self.job.scope(),
            "runner_manifest_hash": runner_manifest_hash(self.job.manifest()).to_string(),
            "source_digest": self.source_digest.to_string(),
            "benchmark_digest": self.benchmark_digest.to_string(),
            "image_digest": self.image_digest.to_string(),
            "worker_version": self.worker_version,
        });
        sha256_digest(canonical_json(&preimage).as_bytes())
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    schema_version: String,
    key: String,
    job_id: String,
    outcome: Value,
    evidence: Option<Value>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RejectionEntry {
    schema_version: String,
    key: String,
    job_id: String,
    rejected: Rejection,
}

/// A refusal of a job's inputs by rule, as remembered in the cache.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rejection {
    /// One of [`CACHEABLE_REJECTIONS`].
    pub reason_code: String,
    /// The original detail.
    pub reason: String,
}

/// A verdict read back from the cache, re-validated against its job.
#[derive(Debug, Clone)]
pub struct CachedResult {
    /// The outcome, checked against the job.
    pub outcome: ValidatedOutcome,
    /// The evidence record stored with it.
    pub evidence: Option<Value>,
}

/// The cache directory.
#[derive(Debug, Clone)]
pub struct ResultCache {
    dir: PathBuf,
}

impl ResultCache {
    /// A cache rooted at `dir` (created on first store).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The entry file for `key`.
    pub fn entry_path(&self, key: &Sha256Digest) -> PathBuf {
        self.dir.join(format!("{}.json", key.hex()))
    }

    /// The cached verdict for `identity`, if a valid one exists. Anything unusable at that
    /// key (unreadable, another schema, another job, an outcome that no longer validates) is
    /// removed so it cannot be read again.
    pub fn load(&self, identity: &RunIdentity<'_>) -> Option<CachedResult> {
        let key = identity.key();
        let path = self.entry_path(&key);
        let bytes = read_bounded(&path)?;
        match parse_entry(&bytes, &key, identity.job) {
            Some(result) => Some(result),
            None => {
                tracing::warn!(path = %path.display(), "discarding unusable cache entry");
                let _ = fs::remove_file(&path);
                None
            }
        }
    }

    /// The rejection record file for `key`.
    pub fn rejection_path(&self, key: &Sha256Digest) -> PathBuf {
        self.dir.join(format!("{}.rejected.json", key.hex()))
    }

    /// The remembered rejection of `identity`'s inputs, if a valid record exists; an unusable
    /// record at that key is removed.
    pub fn load_rejection(&self, identity: &RunIdentity<'_>) -> Option<Rejection> {
        let key = identity.key();
        let path = self.rejection_path(&key);
        let bytes = read_bounded(&path)?;
        let parsed = serde_json::from_slice::<RejectionEntry>(&bytes)
            .ok()
            .filter(|e| {
                e.schema_version == CACHE_SCHEMA_VERSION
                    && e.key == key.to_string()
                    && e.job_id == identity.job.job_id()
                    && CACHEABLE_REJECTIONS.contains(&e.rejected.reason_code.as_str())
                    && e.rejected.reason.chars().count() <= MAX_REASON_CHARS
            });
        match parsed {
            Some(entry) => Some(entry.rejected),
            None => {
                tracing::warn!(path = %path.display(), "discarding unusable rejection record");
                let _ = fs::remove_file(&path);
                None
            }
        }
    }

    /// Remembers that `identity`'s inputs were refused with `reason_code`, one of
    /// [`CACHEABLE_REJECTIONS`] (any other code is not stored).
    pub fn store_rejection(
        &self,
        identity: &RunIdentity<'_>,
        reason_code: &str,
        reason: &str,
    ) -> Result<Option<PathBuf>, CacheError> {
        if !CACHEABLE_REJECTIONS.contains(&reason_code) {
            return Ok(None);
        }
        let key = identity.key();
        let path = self.rejection_path(&key);
        let io = |source| CacheError::Io {
            path: path.clone(),
            source,
        };
        let entry = RejectionEntry {
            schema_version: CACHE_SCHEMA_VERSION.into(),
            key: key.to_string(),
            job_id: identity.job.job_id().to_owned(),
            rejected: Rejection {
                reason_code: reason_code.to_owned(),
                reason: reason.chars().take(MAX_REASON_CHARS).collect(),
            },
        };
        let bytes = serde_json::to_vec(&entry).map_err(|e| io(e.into()))?;
        write_atomically(&self.dir, &path, &bytes).map_err(io)?;
        Ok(Some(path))
    }

    /// Stores a verdict atomically (temporary file in the same directory, then rename).
    pub fn store(
        &self,
        identity: &RunIdentity<'_>,
        outcome: &Outcome,
        evidence: Option<&Value>,
    ) -> Result<PathBuf, CacheError> {
        let key = identity.key();
        let path = self.entry_path(&key);
        let io = |source| CacheError::Io {
            path: path.clone(),
            source,
        };
        let entry = Entry {
            schema_version: CACHE_SCHEMA_VERSION.into(),
            key: key.to_string(),
            job_id: identity.job.job_id().to_owned(),
            outcome: serde_json::to_value(outcome).map_err(|e| io(e.into()))?,
            evidence: evidence.cloned(),
        };
        let bytes = serde_json::to_vec(&entry).map_err(|e| io(e.into()))?;
        write_atomically(&self.dir, &path, &bytes).map_err(io)?;
        Ok(path)
    }
}

fn read_bounded(path: &Path) -> Option<Vec<u8>> {
    match artifact_fs::read_bounded(path, MAX_ENTRY_BYTES) {
        Ok(bytes) => Some(bytes),
        Err(artifact_fs::ReadError::NotRegular(_) | artifact_fs::ReadError::TooLarge { .. }) => {
            let _ = fs::remove_file(path);
            None
        }
        Err(_) => None,
    }
}

fn parse_entry(bytes: &[u8], key: &Sha256Digest, job: &ValidatedJob) -> Option<CachedResult> {
    let entry: Entry = serde_json::from_slice(bytes).ok()?;
    if entry.schema_version != CACHE_SCHEMA_VERSION
        || entry.key != key.to_string()
        || entry.job_id != job.job_id()
    {
        return None;
    }
    let validated = validate_outcome(&entry.outcome, job).ok()?;
    Some(CachedResult {
        outcome: validated,
        evidence: entry.evidence,
    })
}

/// Creates `dir` if needed and writes `bytes` to `path` in it through
/// [`artifact_fs::write_atomic`], so a reader sees either the old file or the complete new one.
pub(crate) fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    artifact_fs::write_atomic(path, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use verifier_sdk::fixtures::{NOW, valid_job};
    use verifier_sdk::{ExecutionFacts, NoVerdictOutcome, NoVerdictReason, validate_job};

    fn digest(c: char) -> Sha256Digest {
        format!("sha256:{}", c.to_string().repeat(64))
            .parse()
            .unwrap()
    }

    fn outcome(job: &ValidatedJob, exit_code: i64) -> Outcome {
        let facts = ExecutionFacts {
            exit_code,
            stdout_sha256: digest('1'),
            stderr_sha256: digest('2'),
            stdout_bytes: 1,
            stderr_bytes: 2,
        };
        Outcome::for_job(job, facts)
    }

    fn identity<'a>(job: &'a ValidatedJob, version: &'a str) -> RunIdentity<'a> {
        RunIdentity {
            job,
            source_digest: job.source_snapshot_digest(),
            benchmark_digest: job.manifest().benchmark_digest(),
            image_digest: job.manifest().image_digest(),
            worker_version: version,
        }
    }

    /// Every commit is version `0.1.0`: keyed by the version alone, a verdict cached by one
    /// build was reused by the next one, so an upgrade that fixed the sandbox never re-ran
    /// what the broken build had decided.
    #[test]
    fn an_upgrade_that_keeps_the_version_does_not_reuse_the_old_builds_verdicts() {
        verifier_sdk::build::record("0.1.0 (0123456789ab)");
        let config = super::super::FeedConfig::new(
            "http://127.0.0.1:9",
            verifier_sdk::Network::BaseMainnet,
            vec![],
            std::path::Path::new("/nonexistent"),
        );
        assert_eq!(config.worker_version, "0.1.0 (0123456789ab)");
        let job = validate_job(&valid_job(), NOW).unwrap();
        assert_ne!(
            identity(&job, &config.worker_version).key(),
            identity(&job, "0.1.0 (fedcba987654)").key(),
            "two builds of one version share a cache key"
        );
    }

    #[test]
    fn every_identity_field_changes_the_key() {
        let job = validate_job(&valid_job(), NOW).unwrap();
        let base = identity(&job, "1.0.0");
        let k = base.key();
        assert_eq!(k, identity(&job, "1.0.0").key());
        let mut variants = vec![
            RunIdentity {
                source_digest: digest('e'),
                ..base
            },
            RunIdentity {
                benchmark_digest: digest('e'),
                ..base
            },
            RunIdentity {
                image_digest: digest('e'),
                ..base
            },
            RunIdentity {
                worker_version: "1.0.1",
                ..base
            },
        ];
        let other = verifier_sdk::fixtures::JobParams {
            round: 4,
            ..Default::default()
        };
        let other_job = validate_job(&verifier_sdk::fixtures::job_value(&other), NOW).unwrap();
        variants.push(identity(&other_job, "1.0.0"));
        let mut manifest = verifier_sdk::fixtures::JobParams::default();
        manifest.manifest["timeout_seconds"] = serde_json::json!(121);
        let manifest_job =
            validate_job(&verifier_sdk::fixtures::job_value(&manifest), NOW).unwrap();
        variants.push(identity(&manifest_job, "1.0.0"));
        for v in variants {
            assert_ne!(v.key(), k);
        }
        assert_ne!(
            base.key_for_schema("agent-bounties/regression-feed-cache-v0"),
            k
        );
    }

    #[test]
    fn stores_and_reloads_a_verdict() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ResultCache::new(dir.path().join("cache"));
        let job = validate_job(&valid_job(), NOW).unwrap();
        let id = identity(&job, "1");
        assert!(cache.load(&id).is_none());
        let o = outcome(&job, 1);
        let ev = json!({"evidence": true});
        cache.store(&id, &o, Some(&ev)).unwrap();
        let back = cache.load(&id).unwrap();
        assert_eq!(back.outcome.outcome(), &o);
        assert_eq!(back.evidence, Some(ev));
        // No temporary files are left beside the entry.
        assert_eq!(fs::read_dir(dir.path().join("cache")).unwrap().count(), 1);
    }

    #[test]
    fn corrupt_mismatching_or_stale_entries_are_ignored_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ResultCache::new(dir.path());
        let job = validate_job(&valid_job(), NOW).unwrap();
        let id = identity(&job, "1");
        let path = cache.entry_path(&id.key());
        let good = outcome(&job, 0);

        let mut tampered = serde_json::to_value(&good).unwrap();
        tampered["verdict"] = json!("failed");
        let stale_schema = json!({
            "schema_version": "agent-bounties/regression-feed-cache-v0",
            "key": id.key().to_string(), "job_id": job.job_id(),
            "outcome": good, "evidence": null,
        });
        let other_job_id = json!({
            "schema_version": CACHE_SCHEMA_VERSION,
            "key": id.key().to_string(), "job_id": "someone-else",
            "outcome": good, "evidence": null,
        });
        let bad_outcome = json!({
            "schema_version": CACHE_SCHEMA_VERSION,
            "key": id.key().to_string(), "job_id": job.job_id(),
            "outcome": tampered, "evidence": null,
        });
        let no_verdict = json!({
            "schema_version": CACHE_SCHEMA_VERSION,
            "key": id.key().to_string(), "job_id": job.job_id(),
            "outcome": NoVerdictOutcome::new(NoVerdictReason::Timeout, "t"), "evidence": null,
        });
        for bytes in [
            b"{not json".to_vec(),
            serde_json::to_vec(&stale_schema).unwrap(),
            serde_json::to_vec(&other_job_id).unwrap(),
            serde_json::to_vec(&bad_outcome).unwrap(),
            serde_json::to_vec(&no_verdict).unwrap(),
        ] {
            fs::write(&path, &bytes).unwrap();
            assert!(
                cache.load(&id).is_none(),
                "{}",
                String::from_utf8_lossy(&bytes)
            );
            assert!(!path.exists(), "unusable entry was not removed");
        }
        // An entry over the size bound is not even parsed.
        fs::write(&path, vec![b' '; MAX_ENTRY_BYTES as usize + 1]).unwrap();
        assert!(cache.load(&id).is_none());
        assert!(!path.exists());
    }

    #[test]
    fn a_rejection_is_remembered_and_never_read_as_a_verdict() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ResultCache::new(dir.path());
        let job = validate_job(&valid_job(), NOW).unwrap();
        let id = identity(&job, "1");
        assert!(cache.load_rejection(&id).is_none());
        cache
            .store_rejection(&id, "archive_rejected", "source archive: a link")
            .unwrap()
            .unwrap();
        assert_eq!(
            cache.load_rejection(&id),
            Some(Rejection {
                reason_code: "archive_rejected".into(),
                reason: "source archive: a link".into(),
            })
        );
        // The rejection is not a verdict, and another identity does not see it.
        assert!(cache.load(&id).is_none());
        assert!(cache.load_rejection(&identity(&job, "2")).is_none());
        // A rejection record put where a verdict is looked up is discarded, not replayed.
        let verdict_path = cache.entry_path(&id.key());
        fs::copy(cache.rejection_path(&id.key()), &verdict_path).unwrap();
        assert!(cache.load(&id).is_none());
        assert!(!verdict_path.exists());
        // Retryable outcomes are never remembered as rejections.
        for code in [
            "extract_failed",
            "download_timeout",
            "timeout",
            "input_mismatch",
        ] {
            assert_eq!(cache.store_rejection(&id, code, "x").unwrap(), None);
        }
    }

    #[test]
    fn unusable_rejection_records_are_ignored_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ResultCache::new(dir.path());
        let job = validate_job(&valid_job(), NOW).unwrap();
        let id = identity(&job, "1");
        let path = cache.rejection_path(&id.key());
        let record = |schema: &str, key: String, job_id: &str, code: &str| {
            json!({
                "schema_version": schema, "key": key, "job_id": job_id,
                "rejected": {"reason_code": code, "reason": "r"},
            })
        };
        let key = id.key().to_string();
        let good = good_outcome_entry(&job, &id);
        for bad in [
            record(
                "agent-bounties/regression-feed-cache-v0",
                key.clone(),
                job.job_id(),
                "archive_rejected",
            ),
            record(
                CACHE_SCHEMA_VERSION,
                digest('e').to_string(),
                job.job_id(),
                "archive_rejected",
            ),
            record(
                CACHE_SCHEMA_VERSION,
                key.clone(),
                "someone-else",
                "archive_rejected",
            ),
            record(CACHE_SCHEMA_VERSION, key.clone(), job.job_id(), "timeout"),
            good,
        ] {
            fs::write(&path, serde_json::to_vec(&bad).unwrap()).unwrap();
            assert!(cache.load_rejection(&id).is_none(), "{bad}");
            assert!(!path.exists(), "unusable record was not removed");
        }
    }

    fn good_outcome_entry(job: &ValidatedJob, id: &RunIdentity<'_>) -> Value {
        json!({
            "schema_version": CACHE_SCHEMA_VERSION,
            "key": id.key().to_string(), "job_id": job.job_id(),
            "outcome": outcome(job, 0), "evidence": null,
        })
    }
}
