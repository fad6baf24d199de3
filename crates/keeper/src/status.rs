//! `keeper status`: the settlement records a state directory still holds open (`planned` or
//! `sent`), each with its keeper account, nonce and age. It reads the directory only, never
//! the chain: it says what a resume would walk (`keeper resume`) and what a key rotation must
//! wait for, not whether a transaction was mined.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use verifier_sdk::Address;

use crate::exit::ExitCode;
use crate::record::{RecordError, RecordState, StateDir, TxHash};

/// `schema_version` of the JSON status.
pub const STATUS_SCHEMA: &str = "agent-bounties/regression-keeper-status-v1";

/// One open record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpenRecord {
    /// The record's file name in the state directory.
    pub file: String,
    /// `planned` or `sent`.
    pub state: RecordState,
    /// The job it settles.
    pub job_id: String,
    /// EIP-155 chain id.
    pub chain_id: u64,
    /// The bounty contract.
    pub bounty_contract: Address,
    /// The round.
    pub round: u64,
    /// The keeper account that signed it (after a key rotation, the old one).
    pub keeper: Address,
    /// The nonce its transaction holds.
    pub nonce: u64,
    /// The current transaction.
    pub tx_hash: TxHash,
    /// How many transactions of the same nonce it replaced.
    pub replaced: usize,
    /// Block number when it was sent, when recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent_block: Option<u64>,
    /// Unix seconds of the record's last write.
    pub updated_at: u64,
    /// Seconds since then.
    pub age_seconds: u64,
}

/// A `settlement-*.json` file that is not a usable record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnreadableRecord {
    /// Its file name.
    pub file: String,
    /// Why.
    pub error: String,
}

/// What `keeper status` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatusReport {
    /// [`STATUS_SCHEMA`].
    pub schema_version: &'static str,
    /// Records `planned` or `sent`, oldest first.
    pub open: Vec<OpenRecord>,
    /// How many records are `confirmed` or `reverted`.
    pub closed: usize,
    /// Record files that could not be read (one may hide an open record).
    pub unreadable: Vec<UnreadableRecord>,
    /// 0 nothing open, 3 some record open, 4 some record unreadable.
    pub exit_code: u8,
}

/// Lists the records of the existing state directory `dir` at unix time `now`.
pub fn status(dir: &Path, now: u64) -> Result<StatusReport, RecordError> {
    // A typo must not read as "nothing open": the directory has to exist already.
    std::fs::read_dir(dir).map_err(|source| RecordError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let state = StateDir::open_read_only(dir);
    let mut open = Vec::new();
    let mut closed = 0;
    let mut unreadable = Vec::new();
    for (file, record) in state.list()? {
        match record {
            Err(e) => unreadable.push(UnreadableRecord {
                file,
                error: e.to_string(),
            }),
            Ok(r) => match r.state {
                RecordState::Planned | RecordState::Sent => open.push(OpenRecord {
                    file,
                    state: r.state,
                    job_id: r.job_id,
                    chain_id: r.chain_id,
                    bounty_contract: r.bounty_contract,
                    round: r.round,
                    keeper: r.keeper,
                    nonce: r.tx.nonce,
                    tx_hash: r.tx.hash,
                    replaced: r.replaced.len(),
                    sent_block: r.tx.sent_block,
                    updated_at: r.updated_at,
                    age_seconds: now.saturating_sub(r.updated_at),
                }),
                RecordState::Confirmed | RecordState::Reverted => closed += 1,
            },
        }
    }
    open.sort_by_key(|r| (r.updated_at, r.nonce));
    let exit_code = if !unreadable.is_empty() {
        ExitCode::InvalidInput
    } else if !open.is_empty() {
        ExitCode::NotDone
    } else {
        ExitCode::Success
    };
    Ok(StatusReport {
        schema_version: STATUS_SCHEMA,
        open,
        closed,
        unreadable,
        exit_code: exit_code.code(),
    })
}

impl StatusReport {
    /// The table for stderr (job ids come from record files, so they are escaped).
    pub fn human(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} open settlement record(s), {} closed, {} unreadable",
            self.open.len(),
            self.closed,
            self.unreadable.len()
        );
        for r in &self.open {
            let _ = writeln!(
                out,
                "  {:<7} nonce {:<6} keeper {} age {}s  tx {}  {}",
                match r.state {
                    RecordState::Planned => "planned",
                    _ => "sent",
                },
                r.nonce,
                r.keeper,
                r.age_seconds,
                r.tx_hash,
                r.job_id.escape_debug()
            );
        }
        for u in &self.unreadable {
            let _ = writeln!(out, "  unreadable {}: {}", u.file, u.error);
        }
        out
    }
}
