//! Reading the candidate and attestation directories with hard limits: regular files only
//! (no symlinks), bounded count and size, names checked before anything is opened.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use verifier_sdk::artifacts::ATTESTATION_SCHEMA;
use verifier_sdk::{
    AttestationFile, Candidate, ReferenceAttestationManifest, check_candidate_file_name,
};

use crate::report::SkippedAttestation;
use crate::select::NamedAttestation;

/// Most entries read from one directory.
pub const MAX_DIR_ENTRIES: usize = 10_000;
/// Largest candidate file.
pub const MAX_CANDIDATE_BYTES: u64 = 16 << 20;
/// Largest attestation file.
pub const MAX_ATTESTATION_BYTES: u64 = 64 << 10;

/// An input directory cannot be used at all.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The directory cannot be listed.
    #[error("cannot read directory {path}: {source}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The directory holds more entries than [`MAX_DIR_ENTRIES`].
    #[error("directory {0} has more than {MAX_DIR_ENTRIES} entries")]
    TooManyEntries(PathBuf),
}

/// Why one file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileError {
    /// Not a regular file (symlink, directory, device).
    #[error("not a regular file")]
    NotRegular,
    /// Larger than the limit.
    #[error("larger than {0} bytes")]
    TooLarge(u64),
    /// I/O error.
    #[error("read failed: {0}")]
    Io(String),
    /// Not JSON.
    #[error("not json: {0}")]
    Json(String),
}

fn list(dir: &Path) -> Result<Vec<(String, PathBuf)>, InputError> {
    let rd = fs::read_dir(dir).map_err(|source| InputError::Dir {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|source| InputError::Dir {
            path: dir.to_path_buf(),
            source,
        })?;
        if out.len() >= MAX_DIR_ENTRIES {
            return Err(InputError::TooManyEntries(dir.to_path_buf()));
        }
        // Non-UTF-8 names cannot be ours; skip them rather than guess.
        if let Ok(name) = entry.file_name().into_string() {
            out.push((name, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// Reads one JSON file of at most `max` bytes, refusing anything but a regular file (opened
/// with `O_NOFOLLOW` and judged on the open descriptor).
pub fn read_json(path: &Path, max: u64) -> Result<Value, FileError> {
    let bytes = artifact_fs::read_bounded(path, max).map_err(|e| match e {
        artifact_fs::ReadError::NotRegular(_) => FileError::NotRegular,
        artifact_fs::ReadError::TooLarge { limit, .. } => FileError::TooLarge(limit),
        artifact_fs::ReadError::Io { source, .. } => FileError::Io(source.kind().to_string()),
    })?;
    serde_json::from_slice(&bytes)
        .map_err(|e| FileError::Json(e.to_string().chars().take(200).collect()))
}

/// Candidate files (`candidate-<64 hex>.json`) in name order; other names are ignored.
pub fn candidate_files(dir: &Path) -> Result<Vec<(String, PathBuf)>, InputError> {
    Ok(list(dir)?
        .into_iter()
        .filter(|(name, _)| check_candidate_file_name(name).is_ok())
        .collect())
}

/// Every attestation from every directory, grouped by job id, plus files that looked like
/// attestations but could not be used (reported under every job, since their job is unknown).
#[derive(Debug, Default)]
pub struct AttestationPool {
    /// job id → attestations for it.
    pub by_job: BTreeMap<String, Vec<NamedAttestation>>,
    /// Unreadable or malformed attestation files.
    pub unreadable: Vec<SkippedAttestation>,
}

/// Reads `*.json` files of the attestation schema from each directory. Other JSON (a
/// manifest, say) is ignored; a file claiming the schema but failing to parse is reported.
pub fn attestation_pool(dirs: &[PathBuf]) -> Result<AttestationPool, InputError> {
    let mut pool = AttestationPool::default();
    for (i, dir) in dirs.iter().enumerate() {
        for (name, path) in list(dir)? {
            if !name.ends_with(".json") {
                continue;
            }
            let source = format!("attestations[{i}]/{name}");
            let value = match read_json(&path, MAX_ATTESTATION_BYTES) {
                Ok(v) => v,
                Err(e) => {
                    pool.unreadable.push(SkippedAttestation {
                        source,
                        code: format!("unreadable: {e}"),
                    });
                    continue;
                }
            };
            if value.get("schema").and_then(Value::as_str) != Some(ATTESTATION_SCHEMA) {
                continue;
            }
            // A reference signer's directory lists its attestations in a `manifest.json` that
            // carries the attestation schema too (PROTOCOL §7); every attestation file is read
            // and checked on its own anyway, so the list adds nothing to trust.
            if ReferenceAttestationManifest::is_manifest_shaped(&value)
                && ReferenceAttestationManifest::from_value(&value).is_ok()
            {
                continue;
            }
            match AttestationFile::from_value(&value) {
                Ok(file) => {
                    let own_outcome = own_outcome(dir, &file);
                    pool.by_job
                        .entry(file.job_id.clone())
                        .or_default()
                        .push(NamedAttestation {
                            source,
                            file,
                            own_outcome,
                        });
                }
                Err(e) => pool.unreadable.push(SkippedAttestation {
                    source,
                    code: format!("malformed: {e}"),
                }),
            }
        }
    }
    Ok(pool)
}

/// The outcome of the candidate a signer wrote next to its attestation (its own run, with
/// independent execution), when the attestation names a well-formed candidate file of its own
/// job that is there. Anything else is `None`: the selection then needs the attestation's
/// response hash to be the relayed candidate's, as without independent execution.
fn own_outcome(dir: &Path, file: &AttestationFile) -> Option<Value> {
    if check_candidate_file_name(&file.candidate_file).is_err()
        || file.candidate_file != verifier_sdk::candidate_file_name(&file.job_id)
    {
        return None;
    }
    let value = read_json(&dir.join(&file.candidate_file), MAX_CANDIDATE_BYTES).ok()?;
    let candidate = Candidate::from_value(&value).ok()?;
    (candidate.job.get("job_id").and_then(Value::as_str) == Some(file.job_id.as_str()))
        .then_some(candidate.outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_on_files_and_directories() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.json");
        fs::write(&big, vec![b' '; (MAX_ATTESTATION_BYTES + 1) as usize]).unwrap();
        assert_eq!(
            read_json(&big, MAX_ATTESTATION_BYTES),
            Err(FileError::TooLarge(MAX_ATTESTATION_BYTES))
        );
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&big, &link).unwrap();
        assert_eq!(read_json(&link, u64::MAX), Err(FileError::NotRegular));
        let pool = attestation_pool(&[dir.path().to_path_buf()]).unwrap();
        assert!(pool.by_job.is_empty());
        assert_eq!(pool.unreadable.len(), 2, "{:?}", pool.unreadable);

        let many = tempfile::tempdir().unwrap();
        for i in 0..=MAX_DIR_ENTRIES {
            fs::File::create(many.path().join(format!("{i}.txt"))).unwrap();
        }
        assert!(matches!(
            attestation_pool(&[many.path().to_path_buf()]),
            Err(InputError::TooManyEntries(_))
        ));
        assert!(matches!(
            candidate_files(&dir.path().join("missing")),
            Err(InputError::Dir { .. })
        ));
    }

    #[test]
    fn only_candidate_names_are_listed_and_foreign_json_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let good = verifier_sdk::candidate_file_name("job-1");
        fs::write(dir.path().join(&good), b"{}").unwrap();
        fs::write(dir.path().join("manifest.json"), br#"{"schema":"other"}"#).unwrap();
        fs::write(dir.path().join("candidate-xyz.json"), b"{}").unwrap();
        let names: Vec<_> = candidate_files(dir.path())
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, vec![good]);
        let pool = attestation_pool(&[dir.path().to_path_buf()]).unwrap();
        assert!(pool.by_job.is_empty() && pool.unreadable.is_empty());
        let bad = serde_json::json!({"schema": ATTESTATION_SCHEMA, "job_id": "x"});
        fs::write(dir.path().join("a.json"), bad.to_string()).unwrap();
        let pool = attestation_pool(&[dir.path().to_path_buf()]).unwrap();
        assert_eq!(pool.unreadable.len(), 1);
        assert!(pool.unreadable[0].code.starts_with("malformed"));
    }

    /// A directory as a reference signer writes it (PROTOCOL §7): `attestation-<sha256 hex of
    /// job_id>.json` files and a `manifest.json` `{schema, signer, attestations: [{job_id,
    /// file}]}` whose schema is the attestation's own. Written here from the spec, not with our
    /// types, so the test fails if our reader and the reference layout drift apart.
    #[test]
    fn a_reference_signers_attestation_directory_is_read() {
        use sha2::{Digest, Sha256};
        let dir = tempfile::tempdir().unwrap();
        let job_id = "base-mainnet:0xabc:1";
        let hex_id = hex::encode(Sha256::digest(job_id.as_bytes()));
        let signer = format!("0x{}", "11".repeat(20));
        let file = format!("attestation-{hex_id}.json");
        let attestation = serde_json::json!({
            "schema": "agent-bounties/regression-attestation-v1",
            "job_id": job_id,
            "bounty_contract": format!("0x{}", "22".repeat(20)),
            "verifier": signer,
            "passed": true,
            "response_hash": format!("0x{}", "aa".repeat(32)),
            "deadline": 2_000_000_000u64,
            "signature": format!("0x{}01{}011b", "00".repeat(31), "00".repeat(31)),
            "candidate_file": format!("candidate-{hex_id}.json"),
        });
        fs::write(dir.path().join(&file), attestation.to_string()).unwrap();
        let manifest = serde_json::json!({
            "schema": "agent-bounties/regression-attestation-v1",
            "signer": signer,
            "attestations": [{"job_id": job_id, "file": file}],
        });
        fs::write(dir.path().join("manifest.json"), manifest.to_string()).unwrap();

        let pool = attestation_pool(&[dir.path().to_path_buf()]).unwrap();
        assert!(pool.unreadable.is_empty(), "{:?}", pool.unreadable);
        let read = &pool.by_job[job_id];
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].source, format!("attestations[0]/{file}"));
        assert_eq!(read[0].file.verifier.to_string(), signer);

        // A file that only looks like such a manifest is still reported, not skipped.
        let mut forged = manifest;
        forged["signer"] = serde_json::json!("not an address");
        fs::write(dir.path().join("manifest.json"), forged.to_string()).unwrap();
        let pool = attestation_pool(&[dir.path().to_path_buf()]).unwrap();
        assert_eq!(pool.unreadable.len(), 1, "{:?}", pool.unreadable);
    }
}
