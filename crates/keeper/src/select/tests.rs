use alloy::primitives::B256;
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use verifier_sdk::fixtures::{self, JobParams, job_value};
use verifier_sdk::receipt::ExecutionFacts;
use verifier_sdk::{Sha256Digest, candidate_file_name, validate_job};

use super::*;

const DEV: [&str; 3] = [
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
    "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
];

fn key(i: usize) -> PrivateKeySigner {
    DEV[i].parse().unwrap()
}

fn addr(i: usize) -> Address {
    Address::from(key(i).address())
}

struct Fx {
    job: ValidatedJob,
    outcome: ValidatedOutcome,
}

/// A passing run whose stdout digest is the byte `stdout` repeated (the candidate's is 1).
fn passing_run(stdout: u8) -> ExecutionFacts {
    ExecutionFacts {
        stdout_sha256: Sha256Digest::from_bytes([stdout; 32]),
        ..fixtures::run_facts(0)
    }
}

fn fx(verifiers: &[usize]) -> Fx {
    let p = JobParams {
        verifiers: verifiers.iter().map(|i| addr(*i).to_string()).collect(),
        ..JobParams::default()
    };
    let raw = job_value(&p);
    let job = validate_job(&raw, fixtures::NOW).unwrap();
    let outcome = verifier_sdk::Outcome::for_job(&job, passing_run(1));
    let outcome =
        verifier_sdk::validate_outcome(&serde_json::to_value(&outcome).unwrap(), &job).unwrap();
    Fx { job, outcome }
}

impl Fx {
    fn file(
        &self,
        signer: usize,
        verifier: Address,
        passed: bool,
        response: Bytes32,
        deadline: u64,
    ) -> NamedAttestation {
        let mut fields =
            AttestationFields::for_outcome(&self.job, &self.outcome, verifier, deadline);
        fields.passed = passed;
        fields.response_hash = response;
        let digest = attestation_digest(self.job.chain_id(), &fields);
        let sig = key(signer)
            .sign_hash_sync(&B256::from(*digest.as_bytes()))
            .unwrap();
        NamedAttestation {
            source: format!("f{signer}-{deadline}"),
            file: AttestationFile {
                schema: verifier_sdk::artifacts::ATTESTATION_SCHEMA.into(),
                job_id: self.job.job_id().into(),
                bounty_contract: self.job.bounty_contract(),
                verifier,
                passed,
                response_hash: response,
                deadline,
                signature: format!("0x{}", hex::encode(sig.as_bytes())),
                candidate_file: candidate_file_name(self.job.job_id()),
            },
            own_outcome: None,
        }
    }

    fn honest(&self, i: usize, deadline: u64) -> NamedAttestation {
        self.file(i, addr(i), true, self.outcome.response_hash(), deadline)
    }

    fn run(&self, files: &[NamedAttestation]) -> SelectOutcome {
        let committed = self.job.eligible_verifiers().to_vec();
        select(
            &self.job,
            &self.outcome,
            &committed,
            self.job.threshold(),
            files,
            fixtures::NOW,
        )
    }
}

const LATER: u64 = fixtures::NOW + 900;

#[test]
fn picks_threshold_ordered_by_verifier_address() {
    let f = fx(&[0, 1, 2]);
    let out = f.run(&[f.honest(2, LATER), f.honest(0, LATER), f.honest(1, LATER)]);
    let sel = out.result.unwrap();
    let mut want = vec![addr(0), addr(1), addr(2)];
    want.sort();
    assert_eq!(sel.verifiers, want);
    assert!(sel.passed);
    assert_eq!(sel.verification_hash, verification_hash(&sel.attestations));
    assert!(out.skipped.is_empty());
}

#[test]
fn duplicate_verifier_keeps_the_later_deadline_once() {
    let f = fx(&[0]);
    let out = f.run(&[
        f.honest(0, LATER),
        f.honest(0, LATER + 10),
        f.honest(0, LATER),
    ]);
    let sel = out.result.unwrap();
    assert_eq!(sel.attestations.len(), 1);
    assert_eq!(
        sel.attestations[0].deadline,
        alloy::primitives::U256::from(LATER + 10)
    );
    assert_eq!(
        out.skipped
            .iter()
            .filter(|(_, s)| *s == Skip::Duplicate)
            .count(),
        2
    );
}

#[test]
fn deadline_margin_edge() {
    let f = fx(&[0]);
    let at_margin = fixtures::NOW + DEADLINE_MARGIN_SECS;
    let out = f.run(&[f.honest(0, at_margin)]);
    assert_eq!(
        out.skipped,
        vec![(format!("f0-{at_margin}"), Skip::Expiring)]
    );
    assert!(matches!(
        out.result,
        Err(SelectRefusal::Insufficient {
            usable: 0,
            threshold: 1
        })
    ));
    assert!(f.run(&[f.honest(0, at_margin + 1)]).result.is_ok());
}

#[test]
fn each_bad_attestation_is_skipped_for_its_reason() {
    let f = fx(&[0, 1]);
    let mut wrong_bounty = f.honest(0, LATER);
    wrong_bounty.file.bounty_contract = Address::from_bytes([9; 20]);
    let forged = f.file(2, addr(1), true, f.outcome.response_hash(), LATER);
    let outsider = f.honest(2, LATER);
    let mut tampered = f.honest(1, LATER);
    tampered.file.deadline += 1;
    let out = f.run(&[wrong_bounty, forged, outsider, tampered]);
    let codes: Vec<_> = out.skipped.iter().map(|(_, s)| s.code()).collect();
    assert_eq!(
        codes,
        vec![
            "wrong_bounty",
            "bad_signature",
            "not_a_verifier",
            "bad_signature"
        ]
    );
    assert_eq!(
        out.result,
        Err(SelectRefusal::Insufficient {
            usable: 0,
            threshold: 2
        })
    );
}

#[test]
fn verdict_and_response_hash_must_agree_with_the_candidate() {
    let f = fx(&[0, 1]);
    let other = Bytes32::from_bytes([7; 32]);
    let dissent = f.file(1, addr(1), false, other, LATER);
    assert_eq!(
        f.run(&[f.honest(0, LATER), dissent.clone()]).result,
        Err(SelectRefusal::MixedVerdicts)
    );
    let both_failed = [f.file(0, addr(0), false, other, LATER), dissent];
    assert_eq!(
        f.run(&both_failed).result,
        Err(SelectRefusal::VerdictMismatch)
    );
    let hash = f.file(1, addr(1), true, other, LATER);
    assert!(matches!(
        f.run(&[f.honest(0, LATER), hash]).result,
        Err(SelectRefusal::ResponseHashMismatch { .. })
    ));
}

impl Fx {
    /// Another run of the job as a verifier's own candidate holds it: same verdict and
    /// commitments as the candidate, other output (`stdout` byte), or `edit`ed.
    fn own_run(
        &self,
        stdout: u8,
        edit: impl FnOnce(&mut verifier_sdk::Outcome),
    ) -> serde_json::Value {
        let mut o = verifier_sdk::Outcome::for_job(&self.job, passing_run(stdout));
        edit(&mut o);
        o.response_hash = verifier_sdk::response_hash(o.verdict, &o.receipt);
        serde_json::to_value(&o).unwrap()
    }

    fn signing_own_run(&self, i: usize, own: serde_json::Value) -> NamedAttestation {
        let hash: Bytes32 = own["response_hash"].as_str().unwrap().parse().unwrap();
        let mut a = self.file(i, addr(i), true, hash, LATER);
        a.own_outcome = Some(own);
        a
    }
}

/// Independent execution: each slot signs its own run of a benchmark that prints timings, so
/// the two attestations carry different response hashes with one verdict; the contract
/// accepts that (PROTOCOL §6), and so must the keeper.
#[test]
fn independent_runs_with_different_response_hashes_are_relayed() {
    let f = fx(&[0, 1]);
    let a = f.signing_own_run(0, f.own_run(0x31, |_| {}));
    let b = f.signing_own_run(1, f.own_run(0x32, |_| {}));
    assert_ne!(a.file.response_hash, b.file.response_hash);
    assert_ne!(a.file.response_hash, f.outcome.response_hash());
    let sel = f.run(&[a.clone(), b.clone()]).result.unwrap();
    assert!(sel.passed);
    let mut hashes: Vec<_> = sel
        .attestations
        .iter()
        .map(|x| Bytes32::from_bytes(x.responseHash.0))
        .collect();
    hashes.sort();
    let mut want = vec![a.file.response_hash, b.file.response_hash];
    want.sort();
    assert_eq!(hashes, want);
}

#[test]
fn an_own_run_that_disagrees_on_a_commitment_or_is_not_the_signed_one_is_refused() {
    let f = fx(&[0, 1]);
    let other_image = f.signing_own_run(1, f.own_run(0x31, |o| o.receipt.image.push('x')));
    let out = f.run(&[f.honest(0, LATER), other_image]).result;
    assert!(
        matches!(&out, Err(SelectRefusal::OwnRun { reason, .. }) if reason.contains("image")),
        "{out:?}"
    );
    // The candidate next to it is an agreeing run, but not the one the attestation signs.
    let mut swapped = f.signing_own_run(1, f.own_run(0x31, |_| {}));
    swapped.own_outcome = Some(f.own_run(0x32, |_| {}));
    let out = f.run(&[f.honest(0, LATER), swapped]).result;
    assert!(
        matches!(&out, Err(SelectRefusal::OwnRun { reason, .. }) if reason.contains("not the run it signed")),
        "{out:?}"
    );
    // Not a run of this job at all.
    let mut junk = f.signing_own_run(1, f.own_run(0x31, |_| {}));
    junk.own_outcome = Some(serde_json::json!({"verdict": "passed"}));
    let out = f.run(&[f.honest(0, LATER), junk]).result;
    assert!(matches!(&out, Err(SelectRefusal::OwnRun { .. })), "{out:?}");
}
