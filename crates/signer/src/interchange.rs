//! Moving a signing history between hosts: `signer history export` / `import` in an
//! interchange JSON modelled on EIP-3076 (validator slashing protection): metadata naming the
//! chain (and, when the export was narrowed to one, the contract), then one list of records
//! per key.
//!
//! Numbers are decimal strings as in EIP-3076, so no reader loses precision on a `u64`. Every
//! record proves itself on import (the EIP-712 digest is recomputed from its fields and the
//! signature must recover to its key), and an import merges: it adds what the store lacks,
//! skips what it holds, and refuses the whole file when any record's verdict contradicts the
//! store's for the same scope. Nothing known is ever removed or lowered.

use serde::{Deserialize, Serialize};
use verifier_sdk::{Address, AttestationFields, AttestationSignature, Bytes32};

use crate::history::{RecordCheckError, SignedRecord};

/// `schema_version` of the interchange file.
pub const INTERCHANGE_SCHEMA: &str = "agent-bounties/regression-signer-history-interchange-v1";
/// The largest interchange file read.
pub const MAX_INTERCHANGE_BYTES: u64 = 64 * 1024 * 1024;

/// The interchange file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Interchange {
    /// [`INTERCHANGE_SCHEMA`].
    pub schema_version: String,
    /// What every record is about.
    pub metadata: Metadata,
    /// One entry per key.
    pub data: Vec<KeyRecords>,
}

/// The file's metadata (EIP-3076's `metadata`, with the chain in place of the genesis root).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    /// The chain id every record is on, decimal.
    pub chain_id: String,
    /// When the export was narrowed to one contract: every record is of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verifying_contract: Option<Address>,
}

/// The records of one key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyRecords {
    /// The key's address.
    pub verifier: Address,
    /// Its signatures, oldest first.
    pub signed_attestations: Vec<RecordJson>,
}

/// One signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordJson {
    /// The bounty contract (EIP-712 verifying contract).
    pub verifying_contract: Address,
    /// The bounty id.
    pub bounty_id: Bytes32,
    /// The round, decimal.
    pub round: String,
    /// The submission hash.
    pub submission_hash: Bytes32,
    /// The verdict.
    pub passed: bool,
    /// The response hash.
    pub response_hash: Bytes32,
    /// The evidence hash.
    pub evidence_hash: Bytes32,
    /// The policy hash.
    pub policy_hash: Bytes32,
    /// The deadline, decimal unix seconds.
    pub deadline: String,
    /// The EIP-712 digest signed (EIP-3076's `signing_root`).
    pub signing_root: Bytes32,
    /// The 65-byte signature, 0x hex.
    pub signature: String,
    /// When it was signed, decimal unix seconds.
    pub signed_at: String,
}

/// Why an interchange file is refused.
#[derive(Debug, thiserror::Error)]
pub enum InterchangeError {
    /// `schema_version` is not [`INTERCHANGE_SCHEMA`].
    #[error("schema_version {0:?} is not {INTERCHANGE_SCHEMA}")]
    Schema(String),
    /// A decimal field does not parse.
    #[error("{field} {value:?} is not a decimal u64")]
    Number {
        /// Which field.
        field: &'static str,
        /// What it held (truncated).
        value: String,
    },
    /// A record is of another contract than the metadata names.
    #[error("a record of {record} in a file whose metadata names only {metadata}")]
    ForeignContract {
        /// The record's contract.
        record: Address,
        /// The metadata's.
        metadata: Address,
    },
    /// A record does not prove itself.
    #[error("record {index} of {verifier}: {source}")]
    Record {
        /// The key.
        verifier: Address,
        /// Its index in the key's list.
        index: usize,
        /// Why.
        #[source]
        source: RecordCheckError,
    },
}

fn number(field: &'static str, value: &str) -> Result<u64, InterchangeError> {
    // Decimal only: no sign, no leading `+`, nothing `u64::from_str` would also take.
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(InterchangeError::Number {
            field,
            value: value.chars().take(32).collect(),
        });
    }
    value.parse().map_err(|_| InterchangeError::Number {
        field,
        value: value.chars().take(32).collect(),
    })
}

impl Interchange {
    /// The file for `records` of chain `chain_id` (narrowed to `contract` when given): the
    /// records of other chains and contracts are left out.
    pub fn export(
        chain_id: u64,
        contract: Option<Address>,
        records: &[SignedRecord],
    ) -> Interchange {
        let mut data: Vec<KeyRecords> = Vec::new();
        for r in records {
            let scope = r.scope();
            if scope.chain_id != chain_id || contract.is_some_and(|c| c != scope.verifying_contract)
            {
                continue;
            }
            let f = r.fields();
            let json = RecordJson {
                verifying_contract: f.bounty,
                bounty_id: f.bounty_id,
                round: f.round.to_string(),
                submission_hash: f.submission_hash,
                passed: f.passed,
                response_hash: f.response_hash,
                evidence_hash: f.evidence_hash,
                policy_hash: f.policy_hash,
                deadline: f.deadline.to_string(),
                signing_root: r.digest(),
                signature: r.signature().to_hex(),
                signed_at: r.signed_at().to_string(),
            };
            match data.iter_mut().find(|k| k.verifier == r.verifier()) {
                Some(k) => k.signed_attestations.push(json),
                None => data.push(KeyRecords {
                    verifier: r.verifier(),
                    signed_attestations: vec![json],
                }),
            }
        }
        Interchange {
            schema_version: INTERCHANGE_SCHEMA.into(),
            metadata: Metadata {
                chain_id: chain_id.to_string(),
                verifying_contract: contract,
            },
            data,
        }
    }

    /// Every record, each proven (digest recomputed, signature recovered to its key).
    pub fn records(&self) -> Result<Vec<SignedRecord>, InterchangeError> {
        if self.schema_version != INTERCHANGE_SCHEMA {
            return Err(InterchangeError::Schema(
                self.schema_version.chars().take(64).collect(),
            ));
        }
        let chain_id = number("metadata.chain_id", &self.metadata.chain_id)?;
        let mut out = Vec::new();
        for key in &self.data {
            for (index, r) in key.signed_attestations.iter().enumerate() {
                if let Some(metadata) = self.metadata.verifying_contract
                    && metadata != r.verifying_contract
                {
                    return Err(InterchangeError::ForeignContract {
                        record: r.verifying_contract,
                        metadata,
                    });
                }
                let fields = AttestationFields {
                    bounty: r.verifying_contract,
                    bounty_id: r.bounty_id,
                    round: number("round", &r.round)?,
                    verifier: key.verifier,
                    submission_hash: r.submission_hash,
                    evidence_hash: r.evidence_hash,
                    policy_hash: r.policy_hash,
                    passed: r.passed,
                    response_hash: r.response_hash,
                    deadline: number("deadline", &r.deadline)?,
                };
                let record_err = |source| InterchangeError::Record {
                    verifier: key.verifier,
                    index,
                    source,
                };
                let signature = AttestationSignature::from_hex(&r.signature).map_err(|e| {
                    record_err(RecordCheckError::Signature {
                        verifier: key.verifier,
                        detail: e.to_string(),
                    })
                })?;
                let signed_at = number("signed_at", &r.signed_at)?;
                out.push(
                    SignedRecord::verified(chain_id, &fields, r.signing_root, signature, signed_at)
                        .map_err(record_err)?,
                );
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use keyfile::LoadedKey;
    use verifier_sdk::attestation_digest;

    const DEV_KEY: &str = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";

    fn b32(c: char) -> Bytes32 {
        format!("0x{}", c.to_string().repeat(64)).parse().unwrap()
    }

    fn record(chain_id: u64, contract: &str, passed: bool) -> SignedRecord {
        let key = LoadedKey::from_hex_text(DEV_KEY).unwrap();
        let f = AttestationFields {
            bounty: contract.parse().unwrap(),
            bounty_id: b32('b'),
            round: u64::MAX,
            verifier: Address::from(key.address()),
            submission_hash: b32('c'),
            evidence_hash: b32('d'),
            policy_hash: b32('e'),
            passed,
            response_hash: b32('f'),
            deadline: 1_000_900,
        };
        let digest = attestation_digest(chain_id, &f);
        let sig = AttestationSignature::from_slice(&key.sign_prehash(digest.as_bytes()).unwrap())
            .unwrap();
        SignedRecord::verified(chain_id, &f, digest, sig, 1_000_000).unwrap()
    }

    fn contract(c: char) -> String {
        format!("0x{}", c.to_string().repeat(40))
    }

    #[test]
    fn export_keeps_only_the_chain_and_contract_asked_and_reads_back_the_same_records() {
        let a = record(8453, &contract('a'), true);
        let b = record(8453, &contract('b'), false);
        let other_chain = record(1, &contract('a'), true);
        let all = [a.clone(), b.clone(), other_chain];
        let file = Interchange::export(8453, None, &all);
        assert_eq!(file.data.len(), 1, "one list per key");
        let text = serde_json::to_string(&file).unwrap();
        // u64 values travel as decimal strings, as in EIP-3076.
        assert!(
            text.contains(&format!("\"round\":\"{}\"", u64::MAX)),
            "{text}"
        );
        let back: Interchange = serde_json::from_str(&text).unwrap();
        assert_eq!(back.records().unwrap(), vec![a.clone(), b]);
        let narrowed = Interchange::export(8453, Some(contract('a').parse().unwrap()), &all);
        assert_eq!(narrowed.records().unwrap(), vec![a]);
    }

    #[test]
    fn a_record_of_another_contract_than_the_metadata_names_is_refused() {
        let a = record(8453, &contract('a'), true);
        let mut file = Interchange::export(8453, Some(contract('a').parse().unwrap()), &[a]);
        file.metadata.verifying_contract = Some(contract('b').parse().unwrap());
        assert!(matches!(
            file.records(),
            Err(InterchangeError::ForeignContract { .. })
        ));
    }

    #[test]
    fn a_record_moved_to_another_chain_or_flipped_does_not_prove_itself() {
        let a = record(8453, &contract('a'), true);
        let mut file = Interchange::export(8453, None, std::slice::from_ref(&a));
        file.metadata.chain_id = "84532".into();
        assert!(matches!(
            file.records(),
            Err(InterchangeError::Record { .. })
        ));
        let mut file = Interchange::export(8453, None, &[a]);
        file.data[0].signed_attestations[0].passed = false;
        assert!(matches!(
            file.records(),
            Err(InterchangeError::Record { .. })
        ));
    }

    #[test]
    fn numbers_are_plain_decimal_and_unknown_fields_are_refused() {
        for bad in ["", "+1", "-1", "0x10", "1e3", " 1", "18446744073709551616"] {
            assert!(number("round", bad).is_err(), "{bad:?}");
        }
        assert_eq!(number("round", "007").unwrap(), 7);
        let a = record(8453, &contract('a'), true);
        let mut v = serde_json::to_value(Interchange::export(8453, None, &[a])).unwrap();
        v["metadata"]["genesis_validators_root"] = "0x00".into();
        assert!(serde_json::from_value::<Interchange>(v).is_err());
    }

    #[test]
    fn another_schema_version_is_refused() {
        let mut file = Interchange::export(8453, None, &[]);
        file.schema_version = "agent-bounties/regression-signer-history-interchange-v2".into();
        assert!(matches!(file.records(), Err(InterchangeError::Schema(_))));
    }
}
