//! The signing history: every signature this signer made, consulted before the next one, so a
//! key never signs both verdicts for one submission (issue #44).
//!
//! A re-run of a flaky benchmark after a lost cache, a key moved to a new host, or two signing
//! jobs that overlap could otherwise sign `passed` and `failed` for the same submission: under
//! the signed-quorum contract whoever holds both picks the outcome, under the appealable
//! contract it is slashable. The store is SQLite in WAL mode with `synchronous = FULL` (a
//! commit is on disk when it returns), one directory per store (the database, its WAL and the
//! lock), so a host copy or a workflow artifact moves all of it.
//!
//! A scope is (verifier, chain id, verifying contract, bounty id, round, submission hash). The
//! first signature of a scope fixes its verdict; the store is append-only (triggers refuse
//! updates and deletes), and a record whose verdict differs from the scope's is refused inside
//! the same transaction that would insert it.
//!
//! One writer per store: [`History::open`] takes an exclusive `flock` on [`LOCK_FILE`] for the
//! life of the value, so two signer processes on one store cannot both sign; the second fails
//! closed. The kernel releases the lock when the holder ends, however it ends.
//!
//! It deliberately holds no key, asks no chain and never decides whether a candidate is
//! valid: the sign step hands it a checked, already verified signature.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};
use verifier_sdk::{
    Address, AttestationFields, AttestationSignature, Bytes32, attestation_digest, recover_signer,
};

/// The database inside a history directory.
pub const STORE_FILE: &str = "history.sqlite";
/// The lock file inside a history directory.
pub const LOCK_FILE: &str = "history.lock";
/// `PRAGMA application_id` of a signing history ("RVSH"): a SQLite file without it is some
/// other program's database and is refused.
const APPLICATION_ID: i32 = 0x5256_5348;
/// `PRAGMA user_version`: the schema version of the store.
pub const SCHEMA_VERSION: i32 = 1;

const SCHEMA: &str = "
CREATE TABLE signatures (
    id INTEGER PRIMARY KEY,
    verifier TEXT NOT NULL,
    chain_id TEXT NOT NULL,
    verifying_contract TEXT NOT NULL,
    bounty_id TEXT NOT NULL,
    round TEXT NOT NULL,
    submission_hash TEXT NOT NULL,
    passed INTEGER NOT NULL CHECK (passed IN (0, 1)),
    response_hash TEXT NOT NULL,
    evidence_hash TEXT NOT NULL,
    policy_hash TEXT NOT NULL,
    deadline TEXT NOT NULL,
    digest TEXT NOT NULL UNIQUE,
    signature TEXT NOT NULL,
    signed_at TEXT NOT NULL,
    candidate TEXT
);
CREATE INDEX signatures_scope
    ON signatures (verifier, chain_id, verifying_contract, bounty_id, round, submission_hash);
CREATE TRIGGER signatures_no_update BEFORE UPDATE ON signatures
    BEGIN SELECT RAISE(ABORT, 'the signing history is append-only'); END;
CREATE TRIGGER signatures_no_delete BEFORE DELETE ON signatures
    BEGIN SELECT RAISE(ABORT, 'the signing history is append-only'); END;
";

/// What one signature is about: the contract refuses to count two verdicts of one scope, and a
/// key must never sign both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Scope {
    /// The chain the bounty lives on (the EIP-712 domain's chain id).
    pub chain_id: u64,
    /// The bounty contract (the EIP-712 verifying contract).
    pub verifying_contract: Address,
    /// The bounty id.
    pub bounty_id: Bytes32,
    /// The round.
    pub round: u64,
    /// The submission hash.
    pub submission_hash: Bytes32,
}

/// One signature as the history keeps it. Built only by [`SignedRecord::verified`], which
/// recomputes the digest and recovers the signer, so a record read from an interchange file
/// or a store proves itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedRecord {
    verifier: Address,
    scope: Scope,
    passed: bool,
    response_hash: Bytes32,
    evidence_hash: Bytes32,
    policy_hash: Bytes32,
    deadline: u64,
    digest: Bytes32,
    signature: AttestationSignature,
    signed_at: u64,
}

/// Why a record does not prove itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordCheckError {
    /// The stored digest is not the EIP-712 digest of the stored fields.
    #[error("digest {stored} is not the EIP-712 digest of the record's fields ({computed})")]
    Digest {
        /// What the record says.
        stored: Bytes32,
        /// What its fields give.
        computed: Bytes32,
    },
    /// The signature is malformed or recovers to another address.
    #[error("the signature does not recover to {verifier}: {detail}")]
    Signature {
        /// The record's verifier.
        verifier: Address,
        /// What went wrong.
        detail: String,
    },
}

impl SignedRecord {
    /// A record of `signature` over the attestation `fields` on `chain_id`, made at unix time
    /// `signed_at`: the digest is recomputed and the signature must recover to
    /// `fields.verifier`.
    pub fn verified(
        chain_id: u64,
        fields: &AttestationFields,
        digest: Bytes32,
        signature: AttestationSignature,
        signed_at: u64,
    ) -> Result<Self, RecordCheckError> {
        let computed = attestation_digest(chain_id, fields);
        if computed != digest {
            return Err(RecordCheckError::Digest {
                stored: digest,
                computed,
            });
        }
        match recover_signer(&digest, &signature) {
            Ok(a) if a == fields.verifier => {}
            Ok(other) => {
                return Err(RecordCheckError::Signature {
                    verifier: fields.verifier,
                    detail: format!("it recovers to {other}"),
                });
            }
            Err(e) => {
                return Err(RecordCheckError::Signature {
                    verifier: fields.verifier,
                    detail: e.to_string(),
                });
            }
        }
        Ok(Self {
            verifier: fields.verifier,
            scope: Scope {
                chain_id,
                verifying_contract: fields.bounty,
                bounty_id: fields.bounty_id,
                round: fields.round,
                submission_hash: fields.submission_hash,
            },
            passed: fields.passed,
            response_hash: fields.response_hash,
            evidence_hash: fields.evidence_hash,
            policy_hash: fields.policy_hash,
            deadline: fields.deadline,
            digest,
            signature,
            signed_at,
        })
    }

    /// The attestation fields the signature is over.
    pub fn fields(&self) -> AttestationFields {
        AttestationFields {
            bounty: self.scope.verifying_contract,
            bounty_id: self.scope.bounty_id,
            round: self.scope.round,
            verifier: self.verifier,
            submission_hash: self.scope.submission_hash,
            evidence_hash: self.evidence_hash,
            policy_hash: self.policy_hash,
            passed: self.passed,
            response_hash: self.response_hash,
            deadline: self.deadline,
        }
    }

    /// The signing key's address.
    pub fn verifier(&self) -> Address {
        self.verifier
    }
    /// What the signature is about.
    pub fn scope(&self) -> Scope {
        self.scope
    }
    /// The verdict signed.
    pub fn passed(&self) -> bool {
        self.passed
    }
    /// The response hash signed.
    pub fn response_hash(&self) -> Bytes32 {
        self.response_hash
    }
    /// The deadline signed.
    pub fn deadline(&self) -> u64 {
        self.deadline
    }
    /// The EIP-712 digest signed.
    pub fn digest(&self) -> Bytes32 {
        self.digest
    }
    /// The signature.
    pub fn signature(&self) -> AttestationSignature {
        self.signature
    }
    /// Unix seconds when it was signed.
    pub fn signed_at(&self) -> u64 {
        self.signed_at
    }
}

/// What the history knows of a scope before a new signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prior {
    /// Nothing was signed for it.
    None,
    /// The same verdict was signed: the newest such record, with the candidate it signed
    /// when this store signed it itself (an imported record has none).
    Same(Box<SignedRecord>, Option<String>),
    /// The other verdict was signed: signing now would contradict it.
    Contradicts(Box<SignedRecord>),
}

/// The history store cannot be used; nothing may be signed.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// No store at the path, and none may be created implicitly.
    #[error(
        "no signing history at {0:?}: refusing to sign without the previous history (restore it, \
         or create a first one with `signer history init`)"
    )]
    Missing(PathBuf),
    /// `init` on a directory that already holds a store.
    #[error("{0:?} already holds a signing history; refusing to start a new one over it")]
    Exists(PathBuf),
    /// Another signer process holds the store's lock.
    #[error(
        "signing history {dir:?} is in use by another signer{}: refusing to sign beside it",
        pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    Held {
        /// The history directory.
        dir: PathBuf,
        /// The holder's pid, as it wrote it (informational).
        pid: Option<u32>,
    },
    /// The file is not a signing history (another program's database, or not SQLite).
    #[error("{path:?} is not a signing history: {detail}")]
    Foreign {
        /// The database file.
        path: PathBuf,
        /// What it is instead.
        detail: String,
    },
    /// The store is damaged.
    #[error("signing history {path:?} is corrupt: {detail}")]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A record would contradict one the store holds.
    #[error(
        "the history already holds a signature of the other verdict for this scope: {}",
        describe(earlier)
    )]
    Contradiction {
        /// The earlier record.
        earlier: Box<SignedRecord>,
    },
    /// A filesystem operation failed.
    #[error("signing history i/o on {path:?}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// SQLite failed.
    #[error("signing history {path:?}: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
}

/// One line naming an earlier signature, for refusals.
pub fn describe(r: &SignedRecord) -> String {
    format!(
        "{} signed passed={} at unix {} (digest {}, signature {}, response hash {}, deadline {})",
        r.verifier,
        r.passed,
        r.signed_at,
        r.digest,
        r.signature.to_hex(),
        r.response_hash,
        r.deadline
    )
}

/// An open, locked signing history.
#[derive(Debug)]
pub struct History {
    conn: Connection,
    db: PathBuf,
    _lock: File,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> HistoryError + '_ {
    move |source| HistoryError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn sql(path: &Path) -> impl Fn(rusqlite::Error) -> HistoryError + Copy + '_ {
    move |source| HistoryError::Sqlite {
        path: path.to_path_buf(),
        source,
    }
}

fn lock_dir(dir: &Path) -> Result<File, HistoryError> {
    let path = dir.join(LOCK_FILE);
    artifact_fs::lock_pid_file(&path).map_err(|e| match e {
        artifact_fs::LockError::Held { pid } => HistoryError::Held {
            dir: dir.to_path_buf(),
            pid,
        },
        artifact_fs::LockError::Io(e) => io(&path)(e),
    })
}

/// Refuses a path that is a symlink: the history must be the file the operator named.
fn regular_or_absent(path: &Path) -> Result<bool, HistoryError> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() => Ok(true),
        Ok(_) => Err(HistoryError::Foreign {
            path: path.to_path_buf(),
            detail: "not a regular file (symlinks are refused)".into(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io(path)(e)),
    }
}

impl History {
    /// Creates a new, empty history in `dir` (created if absent) and opens it: the explicit
    /// first-time step. Refused when `dir` already holds one, so it never starts over a
    /// history that exists.
    pub fn init(dir: &Path) -> Result<Self, HistoryError> {
        fs::create_dir_all(dir).map_err(io(dir))?;
        let lock = lock_dir(dir)?;
        let db = dir.join(STORE_FILE);
        if regular_or_absent(&db)? {
            return Err(HistoryError::Exists(dir.to_path_buf()));
        }
        let sql = sql(&db);
        let conn = Connection::open_with_flags(
            &db,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sql)?;
        pragmas(&conn).map_err(sql)?;
        conn.execute_batch(&format!(
            "BEGIN IMMEDIATE; {SCHEMA} PRAGMA application_id = {APPLICATION_ID}; \
             PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
        ))
        .map_err(sql)?;
        sync_dir(dir)?;
        Ok(Self {
            conn,
            db,
            _lock: lock,
        })
    }

    /// Opens the existing history in `dir` and takes its lock. A missing store is refused
    /// (never created), as are one held by another signer, a file that is not a signing
    /// history, one of a newer schema and one that fails SQLite's integrity check.
    pub fn open(dir: &Path) -> Result<Self, HistoryError> {
        let db = dir.join(STORE_FILE);
        if !dir.is_dir() || !regular_or_absent(&db)? {
            return Err(HistoryError::Missing(dir.to_path_buf()));
        }
        let lock = lock_dir(dir)?;
        let foreign = |detail: String| HistoryError::Foreign {
            path: db.clone(),
            detail,
        };
        let corrupt = |detail: String| HistoryError::Corrupt {
            path: db.clone(),
            detail,
        };
        let conn = Connection::open_with_flags(
            &db,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| foreign(e.to_string()))?;
        // Read before anything writes: a file that is not a database fails here.
        let app = pragma_i32(&conn, "application_id").map_err(|e| foreign(e.to_string()))?;
        if app != APPLICATION_ID {
            return Err(foreign(format!(
                "its application_id is {app:#x}, not the signing history's {APPLICATION_ID:#x}"
            )));
        }
        let version = pragma_i32(&conn, "user_version").map_err(|e| corrupt(e.to_string()))?;
        if version != SCHEMA_VERSION {
            return Err(foreign(format!(
                "schema version {version}; this signer reads version {SCHEMA_VERSION}"
            )));
        }
        let check: String = conn
            .query_row("PRAGMA quick_check", [], |r| r.get(0))
            .map_err(|e| corrupt(e.to_string()))?;
        if check != "ok" {
            return Err(corrupt(check.chars().take(256).collect()));
        }
        pragmas(&conn).map_err(|e| corrupt(e.to_string()))?;
        let history = Self {
            conn,
            db,
            _lock: lock,
        };
        // Every record must still prove itself: a store edited by hand is refused whole.
        history.all()?;
        Ok(history)
    }

    /// What the history holds for `scope` signed by `verifier`, against a new signature of
    /// verdict `passed`.
    pub fn prior(
        &self,
        verifier: Address,
        scope: &Scope,
        passed: bool,
    ) -> Result<Prior, HistoryError> {
        prior_in(&self.conn, &self.db, verifier, scope, passed)
    }

    /// Commits `record` (and the candidate it signed) durably; refused when the scope holds
    /// the other verdict. Returns once the commit is on disk: only then may the signature
    /// leave the process.
    pub fn record(
        &mut self,
        record: &SignedRecord,
        candidate: Option<&str>,
    ) -> Result<(), HistoryError> {
        self.write(|tx, db| {
            match prior_in(tx, db, record.verifier, &record.scope, record.passed)? {
                Prior::Contradicts(earlier) => Err(HistoryError::Contradiction { earlier }),
                Prior::Same(..) | Prior::None => insert(tx, record, candidate).map_err(sql(db)),
            }
        })
    }

    /// Runs `work` in one immediate (write-locking) transaction and commits it durably. An
    /// error from `work` drops the transaction, which rolls back whatever it wrote.
    fn write<T>(
        &mut self,
        work: impl FnOnce(&rusqlite::Transaction<'_>, &Path) -> Result<T, HistoryError>,
    ) -> Result<T, HistoryError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql(&self.db))?;
        let out = work(&tx, &self.db)?;
        tx.commit().map_err(sql(&self.db))?;
        Ok(out)
    }

    /// Every record, oldest first.
    pub fn all(&self) -> Result<Vec<SignedRecord>, HistoryError> {
        let mut stmt = self
            .conn
            .prepare(&format!("SELECT {COLUMNS} FROM signatures ORDER BY id"))
            .map_err(sql(&self.db))?;
        let rows = stmt
            .query_map([], raw_row)
            .map_err(sql(&self.db))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(sql(&self.db))?;
        rows.into_iter()
            .map(|(raw, _)| raw.check(&self.db))
            .collect()
    }

    /// Merges `records` in one transaction: a record already held (same digest) is skipped,
    /// a new one of a known scope's verdict or of a new scope is added, and any record of the
    /// other verdict than the store's (or than an earlier record of the same batch) refuses
    /// the whole batch. Nothing known is ever removed or lowered. Returns how many were added.
    pub fn merge(&mut self, records: &[SignedRecord]) -> Result<usize, HistoryError> {
        self.write(|tx, db| {
            let mut added = 0;
            for r in records {
                let known: Option<i64> = tx
                    .query_row(
                        "SELECT id FROM signatures WHERE digest = ?1",
                        params![r.digest.to_string()],
                        |row| row.get(0),
                    )
                    .optional()
                    .map_err(sql(db))?;
                if known.is_some() {
                    continue;
                }
                if let Prior::Contradicts(earlier) =
                    prior_in(tx, db, r.verifier, &r.scope, r.passed)?
                {
                    // The error drops the transaction, rolling back what this batch added.
                    return Err(HistoryError::Contradiction { earlier });
                }
                insert(tx, r, None).map_err(sql(db))?;
                added += 1;
            }
            Ok(added)
        })
    }
}

/// The integer header field `name` (`application_id`, `user_version`) of the open database.
fn pragma_i32(conn: &Connection, name: &str) -> rusqlite::Result<i32> {
    conn.pragma_query_value(None, name, |r| r.get(0))
}

fn pragmas(conn: &Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(())
}

/// fsync of the directory, so the new database's name survives a crash.
fn sync_dir(dir: &Path) -> Result<(), HistoryError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))
}

const COLUMNS: &str = "verifier, chain_id, verifying_contract, bounty_id, round, submission_hash, \
     passed, response_hash, evidence_hash, policy_hash, deadline, digest, signature, signed_at, \
     candidate";

/// A row as stored, before it proves itself.
struct RawRow {
    cols: [String; 6],
    passed: i64,
    hashes: [String; 4],
    deadline: String,
    signature: String,
    signed_at: String,
}

fn raw_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<(RawRow, Option<String>)> {
    Ok((
        RawRow {
            cols: [
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
                row.get(5)?,
            ],
            passed: row.get(6)?,
            hashes: [row.get(7)?, row.get(8)?, row.get(9)?, row.get(11)?],
            deadline: row.get(10)?,
            signature: row.get(12)?,
            signed_at: row.get(13)?,
        },
        row.get(14)?,
    ))
}

impl RawRow {
    fn check(self, db: &Path) -> Result<SignedRecord, HistoryError> {
        let corrupt = |what: &str| HistoryError::Corrupt {
            path: db.to_path_buf(),
            detail: format!("a record's {what} does not parse"),
        };
        let [verifier, chain_id, contract, bounty_id, round, submission] = &self.cols;
        let [response, evidence, policy, digest] = &self.hashes;
        let fields = AttestationFields {
            bounty: contract
                .parse()
                .map_err(|_| corrupt("verifying_contract"))?,
            bounty_id: bounty_id.parse().map_err(|_| corrupt("bounty_id"))?,
            round: round.parse().map_err(|_| corrupt("round"))?,
            verifier: verifier.parse().map_err(|_| corrupt("verifier"))?,
            submission_hash: submission.parse().map_err(|_| corrupt("submission_hash"))?,
            evidence_hash: evidence.parse().map_err(|_| corrupt("evidence_hash"))?,
            policy_hash: policy.parse().map_err(|_| corrupt("policy_hash"))?,
            passed: self.passed == 1,
            response_hash: response.parse().map_err(|_| corrupt("response_hash"))?,
            deadline: self.deadline.parse().map_err(|_| corrupt("deadline"))?,
        };
        let chain_id: u64 = chain_id.parse().map_err(|_| corrupt("chain_id"))?;
        let digest: Bytes32 = digest.parse().map_err(|_| corrupt("digest"))?;
        let signature =
            AttestationSignature::from_hex(&self.signature).map_err(|_| corrupt("signature"))?;
        let signed_at: u64 = self.signed_at.parse().map_err(|_| corrupt("signed_at"))?;
        SignedRecord::verified(chain_id, &fields, digest, signature, signed_at).map_err(|e| {
            HistoryError::Corrupt {
                path: db.to_path_buf(),
                detail: e.to_string(),
            }
        })
    }
}

fn prior_in(
    conn: &Connection,
    db: &Path,
    verifier: Address,
    scope: &Scope,
    passed: bool,
) -> Result<Prior, HistoryError> {
    let sql = sql(db);
    let mut stmt = conn
        .prepare(&format!(
            "SELECT {COLUMNS} FROM signatures WHERE verifier = ?1 AND chain_id = ?2 \
             AND verifying_contract = ?3 AND bounty_id = ?4 AND round = ?5 \
             AND submission_hash = ?6 ORDER BY id DESC"
        ))
        .map_err(sql)?;
    let rows = stmt
        .query_map(
            params![
                verifier.to_string(),
                scope.chain_id.to_string(),
                scope.verifying_contract.to_string(),
                scope.bounty_id.to_string(),
                scope.round.to_string(),
                scope.submission_hash.to_string(),
            ],
            raw_row,
        )
        .map_err(sql)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(sql)?;
    let mut same = None;
    for (raw, candidate) in rows {
        let record = raw.check(db)?;
        if record.passed != passed {
            return Ok(Prior::Contradicts(Box::new(record)));
        }
        if same.is_none() {
            same = Some((record, candidate));
        }
    }
    Ok(match same {
        Some((r, c)) => Prior::Same(Box::new(r), c),
        None => Prior::None,
    })
}

fn insert(conn: &Connection, r: &SignedRecord, candidate: Option<&str>) -> rusqlite::Result<()> {
    conn.execute(
        &format!(
            "INSERT INTO signatures ({COLUMNS}) VALUES \
             (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"
        ),
        params![
            r.verifier.to_string(),
            r.scope.chain_id.to_string(),
            r.scope.verifying_contract.to_string(),
            r.scope.bounty_id.to_string(),
            r.scope.round.to_string(),
            r.scope.submission_hash.to_string(),
            i64::from(r.passed),
            r.response_hash.to_string(),
            r.evidence_hash.to_string(),
            r.policy_hash.to_string(),
            r.deadline.to_string(),
            r.digest.to_string(),
            r.signature.to_hex(),
            r.signed_at.to_string(),
            candidate,
        ],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests;
