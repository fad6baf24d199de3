//! The settlement record: one JSON file per (chain id, bounty contract, round) in the state
//! directory, written atomically, so a rerun never sends twice and a crash between send and
//! confirmation resumes from the recorded transaction.
//!
//! States: `planned` (signed raw tx and its hash, written before sending), `sent`,
//! `confirmed` (event, block, tx hash) and `reverted` (mined but reverted; the bounty is still
//! Submitted, so a later run may plan a new transaction).

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use verifier_sdk::{Address, Bytes32};

/// `schema_version` of the record; bump it when the shape changes.
pub const RECORD_SCHEMA: &str = "agent-bounties/regression-keeper-settlement-v1";
/// Largest record file accepted on read; anything bigger is not ours.
pub const MAX_RECORD_BYTES: u64 = 1 << 20;

/// A transaction hash: its own type so a response or verification hash cannot stand in.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TxHash([u8; 32]);

impl TxHash {
    /// From raw bytes.
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }
    /// Raw bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Display for TxHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{}", hex::encode(self.0))
    }
}

impl fmt::Debug for TxHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for TxHash {
    type Err = RecordError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse::<Bytes32>()
            .map(|b| Self(*b.as_bytes()))
            .map_err(|_| RecordError::Malformed("tx hash is not 0x + 64 hex".into()))
    }
}

impl Serialize for TxHash {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TxHash {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Where a settlement stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordState {
    /// Signed, about to be sent.
    Planned,
    /// Accepted by the node, not yet confirmed.
    Sent,
    /// Mined with a checked settlement event and the requested confirmations.
    Confirmed,
    /// Mined and reverted.
    Reverted,
}

/// The signed transaction as sent (the raw bytes are public once broadcast; no key material).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TxRecord {
    /// keccak256 of the raw transaction.
    pub hash: TxHash,
    /// EIP-2718 encoded signed transaction, 0x-hex.
    pub raw: String,
    /// Sender account nonce used.
    pub nonce: u64,
    /// Gas limit.
    pub gas_limit: u64,
    /// `maxFeePerGas` in wei, decimal string (may exceed JSON's safe integers).
    pub max_fee_per_gas: String,
    /// `maxPriorityFeePerGas` in wei, decimal string.
    pub max_priority_fee_per_gas: String,
    /// The latest block number when it was sent: the count of blocks it has waited starts
    /// here (absent in records of older keepers: counted from when a run first sees it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_block: Option<u64>,
}

/// The checked outcome of a mined transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Confirmation {
    /// `BountySettled`, `SubmissionRejected`, or `reverted`.
    pub event: String,
    /// Block of inclusion.
    pub block_number: u64,
    /// Hash of that block.
    pub block_hash: Bytes32,
    /// The transaction.
    pub tx_hash: TxHash,
}

/// One settlement attempt for (chain id, bounty contract, round).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettlementRecord {
    /// Always [`RECORD_SCHEMA`].
    pub schema_version: String,
    /// EIP-155 chain id.
    pub chain_id: u64,
    /// The bounty contract.
    pub bounty_contract: Address,
    /// The bounty round.
    pub round: u64,
    /// The job this settles.
    pub job_id: String,
    /// Current state.
    pub state: RecordState,
    /// The keeper account that signed `tx`.
    pub keeper: Address,
    /// The verdict relayed.
    pub passed: bool,
    /// Bounty id the event must carry.
    pub bounty_id: Bytes32,
    /// Solver the event must carry.
    pub solver: Address,
    /// Submission hash the event must carry (BountySettled).
    pub submission_hash: Bytes32,
    /// Evidence hash the event must carry (BountySettled).
    pub evidence_hash: Bytes32,
    /// Policy hash the event must carry (BountySettled).
    pub policy_hash: Bytes32,
    /// `keccak256(abi.encode(attestations))` expected in the event.
    pub verification_hash: Bytes32,
    /// Verifiers whose attestations were relayed, in calldata order.
    pub verifiers: Vec<Address>,
    /// The transaction of this attempt.
    pub tx: TxRecord,
    /// Set once mined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<Confirmation>,
    /// Hashes of earlier attempts that reverted or were provably dropped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub previous_attempts: Vec<TxHash>,
    /// Transactions of this attempt at the same nonce that `tx` replaced with higher fees
    /// because no block included them; until one of the nonce's transactions is mined, any of
    /// them may be.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaced: Vec<TxRecord>,
    /// Unix seconds of the last write.
    pub updated_at: u64,
}

/// The identity a record is filed under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecordKey {
    /// EIP-155 chain id.
    pub chain_id: u64,
    /// The bounty contract.
    pub bounty_contract: Address,
    /// The round.
    pub round: u64,
}

impl RecordKey {
    /// `settlement-<chain id>-<bounty lowercase hex>-<round>.json`: only digits, hex and
    /// dashes, so no input can steer the path.
    pub fn file_name(&self) -> String {
        format!(
            "settlement-{}-{}-{}.json",
            self.chain_id,
            hex::encode(self.bounty_contract.as_bytes()),
            self.round
        )
    }
}

/// The key a record file name stands for: the inverse of [`RecordKey::file_name`].
fn key_of_file_name(name: &str) -> Option<RecordKey> {
    let rest = name.strip_prefix("settlement-")?.strip_suffix(".json")?;
    let mut parts = rest.split('-');
    let (chain, bounty, round) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let key = RecordKey {
        chain_id: chain.parse().ok()?,
        bounty_contract: format!("0x{bounty}").parse().ok()?,
        round: round.parse().ok()?,
    };
    // Only the canonical spelling (no leading zeros, lowercase hex) names a record.
    (key.file_name() == name).then_some(key)
}

impl TxRecord {
    /// Its gas limit and fees, `None` when a recorded fee is not a decimal number.
    pub fn fee_plan(&self) -> Option<crate::fees::FeePlan> {
        Some(crate::fees::FeePlan {
            gas_limit: self.gas_limit,
            max_fee_per_gas: self.max_fee_per_gas.parse().ok()?,
            max_priority_fee_per_gas: self.max_priority_fee_per_gas.parse().ok()?,
        })
    }
}

impl SettlementRecord {
    /// Hashes of every transaction of this attempt's nonce: the current one first, then
    /// those it replaced.
    pub fn nonce_hashes(&self) -> Vec<TxHash> {
        std::iter::once(self.tx.hash)
            .chain(self.replaced.iter().map(|t| t.hash))
            .collect()
    }

    /// What the settlement event of this record's transaction must show.
    pub fn expected(&self) -> crate::confirm::ExpectedSettlement {
        crate::confirm::ExpectedSettlement {
            bounty: self.bounty_contract,
            bounty_id: self.bounty_id,
            round: self.round,
            solver: self.solver,
            submission_hash: self.submission_hash,
            evidence_hash: self.evidence_hash,
            policy_hash: self.policy_hash,
            verification_hash: self.verification_hash,
            passed: self.passed,
        }
    }

    /// This record's key.
    pub fn key(&self) -> RecordKey {
        RecordKey {
            chain_id: self.chain_id,
            bounty_contract: self.bounty_contract,
            round: self.round,
        }
    }
}

/// Reading or writing the state directory failed.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Filesystem error on the named path.
    #[error("state dir i/o on {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The record file is not a record of this schema.
    #[error("settlement record is malformed: {0}")]
    Malformed(String),
    /// The record file is larger than [`MAX_RECORD_BYTES`].
    #[error("settlement record is larger than {MAX_RECORD_BYTES} bytes")]
    TooLarge,
    /// The file's identity differs from the name it is filed under.
    #[error("settlement record identity does not match its file name")]
    KeyMismatch,
    /// The record path is a symlink or not a regular file: nothing outside the state
    /// directory may stand in for a record.
    #[error("settlement record {0} is not a regular file (symlinks are refused)")]
    NotRegular(PathBuf),
    /// Another keeper holds the state directory's lock.
    #[error(
        "state directory {dir:?} is in use by another keeper{}: refusing to plan or send beside it",
        pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    Held {
        /// The state directory.
        dir: PathBuf,
        /// The holder's pid, as it wrote it (informational).
        pid: Option<u32>,
    },
}

/// A record file's name and what reading it gave.
pub type ListedRecord = (String, Result<SettlementRecord, RecordError>);

/// The lock file inside the state directory: one keeper writes a state directory at a time.
pub const LOCK_FILE: &str = "keeper.lock";

/// The state directory.
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
    /// The exclusive `flock` on [`LOCK_FILE`], held while any clone lives; `None` for a
    /// read-only view. The kernel drops it when the process ends, however it ends, so a
    /// SIGKILLed keeper never blocks the next one.
    _lock: Option<std::sync::Arc<fs::File>>,
}

fn lock_dir(root: &Path) -> Result<fs::File, RecordError> {
    let path = root.join(LOCK_FILE);
    artifact_fs::lock_pid_file(&path).map_err(|e| match e {
        artifact_fs::LockError::Held { pid } => RecordError::Held {
            dir: root.to_path_buf(),
            pid,
        },
        artifact_fs::LockError::Io(e) => io(&path)(e),
    })
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RecordError + '_ {
    move |source| RecordError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl StateDir {
    /// Opens (creating if needed) the state directory for a keeper that plans and sends:
    /// takes its lock without waiting, so two keepers on one directory (the same gas key in
    /// two deployments) cannot both plan and send a settlement; the second gets
    /// [`RecordError::Held`].
    pub fn open(root: &Path) -> Result<Self, RecordError> {
        fs::create_dir_all(root).map_err(io(root))?;
        let lock = lock_dir(root)?;
        Ok(Self {
            root: root.to_path_buf(),
            _lock: Some(std::sync::Arc::new(lock)),
        })
    }

    /// A view of an existing state directory that only reads records (`keeper status`): it
    /// takes no lock, so it works beside a running keeper.
    pub fn open_read_only(root: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
            _lock: None,
        }
    }

    /// Path of the record for `key`.
    pub fn path(&self, key: &RecordKey) -> PathBuf {
        self.root.join(key.file_name())
    }

    /// The record for `key`, if one was written.
    pub fn load(&self, key: &RecordKey) -> Result<Option<SettlementRecord>, RecordError> {
        let path = self.path(key);
        // O_NOFOLLOW, then fstat on the descriptor: no window between the check and the open.
        let bytes = match artifact_fs::read_bounded(&path, MAX_RECORD_BYTES) {
            Ok(bytes) => bytes,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(artifact_fs::ReadError::NotRegular(path)) => {
                return Err(RecordError::NotRegular(path));
            }
            Err(artifact_fs::ReadError::TooLarge { .. }) => return Err(RecordError::TooLarge),
            Err(artifact_fs::ReadError::Io { path, source }) => {
                return Err(RecordError::Io { path, source });
            }
        };
        let record: SettlementRecord = serde_json::from_slice(&bytes)
            .map_err(|e| RecordError::Malformed(e.to_string().chars().take(256).collect()))?;
        if record.schema_version != RECORD_SCHEMA {
            return Err(RecordError::Malformed(format!(
                "schema_version is not {RECORD_SCHEMA}"
            )));
        }
        if record.key() != *key {
            return Err(RecordError::KeyMismatch);
        }
        Ok(Some(record))
    }

    /// Every record in the directory, by file name (sorted): each `settlement-*.json` read
    /// as [`Self::load`] reads it, so a file that is not a record of the name it is filed
    /// under comes back as its error. Other names are not records and are skipped.
    pub fn list(&self) -> Result<Vec<ListedRecord>, RecordError> {
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.root).map_err(io(&self.root))? {
            let entry = entry.map_err(io(&self.root))?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if name.starts_with("settlement-") && name.ends_with(".json") {
                names.push(name);
            }
        }
        names.sort();
        Ok(names
            .into_iter()
            .map(|name| {
                let record = match key_of_file_name(&name) {
                    Some(key) => self
                        .load(&key)
                        .and_then(|r| r.ok_or(RecordError::KeyMismatch)),
                    None => Err(RecordError::KeyMismatch),
                };
                (name, record)
            })
            .collect())
    }

    /// Writes `record` through [`artifact_fs::write_atomic`]: a fresh exclusive temp file,
    /// fsync, rename, fsync the directory — a crash leaves either the old or the new record,
    /// never a torn one, and nothing planted in the directory is written through.
    pub fn save(&self, record: &SettlementRecord) -> Result<(), RecordError> {
        let path = self.path(&record.key());
        let mut bytes =
            serde_json::to_vec_pretty(record).map_err(|e| RecordError::Malformed(e.to_string()))?;
        bytes.push(b'\n');
        artifact_fs::write_atomic(&path, &bytes).map_err(io(&path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> SettlementRecord {
        SettlementRecord {
            schema_version: RECORD_SCHEMA.into(),
            chain_id: 8453,
            bounty_contract: format!("0x{}", "AB".repeat(20)).parse().unwrap(),
            round: 7,
            job_id: "base-mainnet:0xab:7".into(),
            state: RecordState::Planned,
            keeper: format!("0x{}", "11".repeat(20)).parse().unwrap(),
            passed: true,
            bounty_id: format!("0x{}", "bb".repeat(32)).parse().unwrap(),
            solver: format!("0x{}", "33".repeat(20)).parse().unwrap(),
            submission_hash: format!("0x{}", "c1".repeat(32)).parse().unwrap(),
            evidence_hash: format!("0x{}", "d1".repeat(32)).parse().unwrap(),
            policy_hash: format!("0x{}", "e1".repeat(32)).parse().unwrap(),
            verification_hash: format!("0x{}", "cc".repeat(32)).parse().unwrap(),
            verifiers: vec![format!("0x{}", "22".repeat(20)).parse().unwrap()],
            tx: TxRecord {
                hash: TxHash::from_bytes([0xdd; 32]),
                raw: "0x02f8".into(),
                nonce: 3,
                gas_limit: 100_000,
                max_fee_per_gas: u128::MAX.to_string(),
                max_priority_fee_per_gas: "1".into(),
                sent_block: None,
            },
            confirmation: None,
            previous_attempts: vec![],
            replaced: vec![],
            updated_at: 1,
        }
    }

    #[test]
    fn list_reads_every_record_file_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        let r = record();
        state.save(&r).unwrap();
        fs::write(dir.path().join("README"), b"not a record").unwrap();
        // A name that is not the canonical spelling of a key (uppercase hex).
        let odd = r.key().file_name().replace("abab", "ABAB");
        fs::write(dir.path().join(&odd), b"{}").unwrap();
        let listed = state.list().unwrap();
        assert_eq!(listed.len(), 2, "{listed:?}");
        let (name, got) = &listed[1];
        assert_eq!(name, &r.key().file_name());
        assert_eq!(got.as_ref().unwrap(), &r);
        assert_eq!(listed[0].0, odd);
        assert!(matches!(listed[0].1, Err(RecordError::KeyMismatch)));
    }

    #[test]
    fn file_name_is_lowercase_and_path_safe() {
        let r = record();
        assert_eq!(
            r.key().file_name(),
            format!("settlement-8453-{}-7.json", "ab".repeat(20))
        );
    }

    #[test]
    fn save_load_round_trip_and_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(&dir.path().join("nested/state")).unwrap();
        let mut r = record();
        assert_eq!(state.load(&r.key()).unwrap(), None);
        state.save(&r).unwrap();
        assert_eq!(state.load(&r.key()).unwrap(), Some(r.clone()));
        r.state = RecordState::Confirmed;
        r.confirmation = Some(Confirmation {
            event: "BountySettled".into(),
            block_number: 9,
            block_hash: format!("0x{}", "ee".repeat(32)).parse().unwrap(),
            tx_hash: r.tx.hash,
        });
        state.save(&r).unwrap();
        assert_eq!(state.load(&r.key()).unwrap(), Some(r.clone()));
        let names: Vec<_> = fs::read_dir(dir.path().join("nested/state"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n != LOCK_FILE)
            .collect();
        assert_eq!(names, vec![r.key().file_name()], "no temp file left behind");
        let text = fs::read_to_string(state.path(&r.key())).unwrap();
        assert!(
            text.contains("\"schema_version\": \"agent-bounties/regression-keeper-settlement-v1\"")
        );
        assert!(text.contains("\"state\": \"confirmed\""));
    }

    #[test]
    fn hostile_record_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        let r = record();
        let path = state.path(&r.key());
        fs::write(&path, vec![b' '; (MAX_RECORD_BYTES + 1) as usize]).unwrap();
        assert!(matches!(state.load(&r.key()), Err(RecordError::TooLarge)));
        fs::write(&path, b"{").unwrap();
        assert!(matches!(
            state.load(&r.key()),
            Err(RecordError::Malformed(_))
        ));
        let mut other = r.clone();
        other.round = 8;
        fs::write(&path, serde_json::to_vec(&other).unwrap()).unwrap();
        assert!(matches!(
            state.load(&r.key()),
            Err(RecordError::KeyMismatch)
        ));
        let mut v = serde_json::to_value(&r).unwrap();
        v["schema_version"] = "agent-bounties/regression-keeper-settlement-v0".into();
        fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
        assert!(matches!(
            state.load(&r.key()),
            Err(RecordError::Malformed(_))
        ));
        let mut v = serde_json::to_value(&r).unwrap();
        v["tx"]["hash"] = "0x1234".into();
        fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
        assert!(matches!(
            state.load(&r.key()),
            Err(RecordError::Malformed(_))
        ));
    }

    #[test]
    fn settlement_record_reached_through_a_symlink_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        let other = StateDir::open(elsewhere.path()).unwrap();
        let r = record();
        other.save(&r).unwrap();
        std::os::unix::fs::symlink(other.path(&r.key()), state.path(&r.key())).unwrap();
        let loaded = state.load(&r.key());
        assert!(
            matches!(loaded, Err(RecordError::NotRegular(_))),
            "{loaded:?}"
        );
    }

    #[test]
    fn hard_link_planted_at_the_old_state_temp_name_does_not_overwrite_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let victim = elsewhere.path().join("victim");
        fs::write(&victim, b"precious").unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        let r = record();
        let old_tmp = dir.path().join(format!(
            ".{}.tmp-{}",
            r.key().file_name(),
            std::process::id()
        ));
        fs::hard_link(&victim, &old_tmp).unwrap();
        state.save(&r).unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        assert_eq!(state.load(&r.key()).unwrap(), Some(r));
    }
}
