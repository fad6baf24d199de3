#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use super::*;
use keyfile::LoadedKey;

/// Hardhat's public development key 1 (no value anywhere).
const DEV_KEY: &str = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";

fn b32(c: char) -> Bytes32 {
    format!("0x{}", c.to_string().repeat(64)).parse().unwrap()
}

fn fields(key: &LoadedKey, passed: bool) -> AttestationFields {
    AttestationFields {
        bounty: format!("0x{}", "ab".repeat(20)).parse().unwrap(),
        bounty_id: b32('b'),
        round: 7,
        verifier: Address::from(key.address()),
        submission_hash: b32('c'),
        evidence_hash: b32('d'),
        policy_hash: b32('e'),
        passed,
        response_hash: b32(if passed { '1' } else { '2' }),
        deadline: 1_000_900,
    }
}

fn signed(chain_id: u64, f: &AttestationFields) -> SignedRecord {
    let key = LoadedKey::from_hex_text(DEV_KEY).unwrap();
    let digest = attestation_digest(chain_id, f);
    let sig =
        AttestationSignature::from_slice(&key.sign_prehash(digest.as_bytes()).unwrap()).unwrap();
    SignedRecord::verified(chain_id, f, digest, sig, 1_000_000).unwrap()
}

fn key() -> LoadedKey {
    LoadedKey::from_hex_text(DEV_KEY).unwrap()
}

#[test]
fn two_signers_on_one_store_cannot_both_hold_it() {
    let dir = tempfile::tempdir().unwrap();
    let first = History::init(dir.path()).unwrap();
    let second = History::open(dir.path());
    assert!(
        matches!(&second, Err(HistoryError::Held { pid: Some(p), .. }) if *p == std::process::id()),
        "{second:?}"
    );
    drop(first);
    History::open(dir.path()).unwrap();
}

#[test]
fn a_missing_store_is_refused_and_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let err = History::open(&dir.path().join("history")).unwrap_err();
    assert!(matches!(err, HistoryError::Missing(_)), "{err}");
    assert!(err.to_string().contains("signer history init"), "{err}");
    assert!(!dir.path().join("history").exists());
    // An existing directory without a store is missing too.
    let err = History::open(dir.path()).unwrap_err();
    assert!(matches!(err, HistoryError::Missing(_)), "{err}");
    assert!(!dir.path().join(STORE_FILE).exists());
}

#[test]
fn init_never_starts_over_an_existing_history() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = History::init(dir.path()).unwrap();
    h.record(&signed(8453, &fields(&key(), true)), None)
        .unwrap();
    drop(h);
    let err = History::init(dir.path()).unwrap_err();
    assert!(matches!(err, HistoryError::Exists(_)), "{err}");
    assert_eq!(History::open(dir.path()).unwrap().all().unwrap().len(), 1);
}

#[test]
fn a_corrupt_store_is_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join(STORE_FILE),
        b"this is not a database, just bytes",
    )
    .unwrap();
    let err = History::open(dir.path()).unwrap_err();
    assert!(matches!(err, HistoryError::Foreign { .. }), "{err}");
    assert!(
        err.to_string().contains("is not a signing history"),
        "{err}"
    );
}

#[test]
fn another_programs_sqlite_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path().join(STORE_FILE)).unwrap();
    conn.execute_batch("CREATE TABLE jobs (id INTEGER PRIMARY KEY);")
        .unwrap();
    drop(conn);
    let err = History::open(dir.path()).unwrap_err();
    assert!(
        matches!(&err, HistoryError::Foreign { detail, .. } if detail.contains("application_id")),
        "{err}"
    );
}

#[test]
fn a_hand_edited_record_is_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = History::init(dir.path()).unwrap();
    h.record(&signed(8453, &fields(&key(), true)), None)
        .unwrap();
    drop(h);
    // Flipping the stored verdict (around the append-only trigger) breaks the record's proof.
    let conn = Connection::open(dir.path().join(STORE_FILE)).unwrap();
    conn.execute_batch("DROP TRIGGER signatures_no_update; UPDATE signatures SET passed = 0;")
        .unwrap();
    drop(conn);
    let err = History::open(dir.path()).unwrap_err();
    assert!(matches!(err, HistoryError::Corrupt { .. }), "{err}");
}

#[test]
fn the_history_is_append_only() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = History::init(dir.path()).unwrap();
    h.record(&signed(8453, &fields(&key(), true)), None)
        .unwrap();
    assert!(h.conn.execute("DELETE FROM signatures", []).is_err());
    assert!(
        h.conn
            .execute("UPDATE signatures SET passed = 0", [])
            .is_err()
    );
    assert_eq!(h.all().unwrap().len(), 1);
}

#[test]
fn the_other_verdict_of_a_scope_is_refused_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let passed = signed(8453, &fields(&key(), true));
    let mut h = History::init(dir.path()).unwrap();
    h.record(&passed, Some("{}")).unwrap();
    drop(h);

    let mut h = History::open(dir.path()).unwrap();
    let failed = signed(8453, &fields(&key(), false));
    match h.prior(failed.verifier(), &failed.scope(), false).unwrap() {
        Prior::Contradicts(earlier) => assert_eq!(*earlier, passed),
        other => panic!("{other:?}"),
    }
    match h.prior(passed.verifier(), &passed.scope(), true).unwrap() {
        Prior::Same(r, c) => {
            assert_eq!(*r, passed);
            assert_eq!(c.as_deref(), Some("{}"));
        }
        other => panic!("{other:?}"),
    }
    // Even a caller that skipped `prior` cannot record it.
    let err = h.record(&failed, None).unwrap_err();
    assert!(matches!(err, HistoryError::Contradiction { .. }), "{err}");
    assert!(
        err.to_string().contains(&passed.signature().to_hex()),
        "the refusal names the earlier signature: {err}"
    );
    assert_eq!(h.all().unwrap(), vec![passed]);
}

#[test]
fn another_chain_or_contract_is_another_scope() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = History::init(dir.path()).unwrap();
    h.record(&signed(8453, &fields(&key(), true)), None)
        .unwrap();
    // The same bounty id, round and submission on another chain, or another contract: its
    // own scope, never merged with the first.
    let other_chain = signed(84532, &fields(&key(), false));
    assert_eq!(
        h.prior(other_chain.verifier(), &other_chain.scope(), false)
            .unwrap(),
        Prior::None
    );
    h.record(&other_chain, None).unwrap();
    let mut f = fields(&key(), false);
    f.bounty = format!("0x{}", "cd".repeat(20)).parse().unwrap();
    let other_contract = signed(8453, &f);
    assert_eq!(
        h.prior(other_contract.verifier(), &other_contract.scope(), false)
            .unwrap(),
        Prior::None
    );
}

#[test]
fn a_record_that_does_not_recover_to_its_verifier_is_refused() {
    let f = fields(&key(), true);
    let digest = attestation_digest(8453, &f);
    let other = LoadedKey::from_hex_text(
        "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    )
    .unwrap();
    let sig =
        AttestationSignature::from_slice(&other.sign_prehash(digest.as_bytes()).unwrap()).unwrap();
    let err = SignedRecord::verified(8453, &f, digest, sig, 1).unwrap_err();
    assert!(matches!(err, RecordCheckError::Signature { .. }), "{err}");
    let err = SignedRecord::verified(1, &f, digest, sig, 1).unwrap_err();
    assert!(matches!(err, RecordCheckError::Digest { .. }), "{err}");
}

#[test]
fn merge_adds_new_records_skips_known_ones_and_refuses_a_contradiction_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = History::init(dir.path()).unwrap();
    let a = signed(8453, &fields(&key(), true));
    h.record(&a, None).unwrap();
    let b = signed(84532, &fields(&key(), true));
    assert_eq!(h.merge(&[a.clone(), b.clone()]).unwrap(), 1);
    assert_eq!(h.merge(&[a.clone(), b.clone()]).unwrap(), 0);
    let mut f = fields(&key(), true);
    f.round = 8;
    let c = signed(8453, &f);
    let contradicting = signed(8453, &fields(&key(), false));
    let err = h.merge(&[c, contradicting]).unwrap_err();
    assert!(matches!(err, HistoryError::Contradiction { .. }), "{err}");
    // Rolled back: the batch's new record did not stay either.
    assert_eq!(h.all().unwrap(), vec![a, b]);
}
