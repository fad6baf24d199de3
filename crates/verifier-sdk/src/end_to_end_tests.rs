//! The worker → signer → keeper path through the public API only, as the shells use it.

use k256::ecdsa::SigningKey;
use serde_json::Value;

use crate::*;

fn sign(digest: &Bytes32, key: &SigningKey) -> AttestationSignature {
    let (sig, recid) = key.sign_prehash_recoverable(digest.as_bytes()).unwrap();
    let (sig, odd) = match sig.normalize_s() {
        Some(n) => (n, !recid.is_y_odd()),
        None => (sig, recid.is_y_odd()),
    };
    let mut raw = sig.to_bytes().to_vec();
    raw.push(27 + u8::from(odd));
    AttestationSignature::from_slice(&raw).unwrap()
}

fn address_of(key: &SigningKey) -> Address {
    let point = key.verifying_key().to_encoded_point(false);
    let hash = alloy_primitives::keccak256(&point.as_bytes()[1..]);
    Address::from_bytes(hash[12..].try_into().unwrap())
}

#[test]
fn job_to_settlement_calldata() {
    let key = SigningKey::from_bytes(&[5u8; 32].into()).unwrap();
    let verifier = address_of(&key);
    let params = fixtures::JobParams {
        verifiers: vec![verifier.to_string()],
        ..Default::default()
    };
    let raw_job = fixtures::job_value(&params);
    let now = fixtures::NOW;

    // Worker.
    let job = validate_job(&raw_job, now).unwrap();
    let facts = ExecutionFacts {
        exit_code: 0,
        stdout_sha256: sha256_digest(b"ok\n"),
        stderr_sha256: sha256_digest(b""),
        stdout_bytes: 3,
        stderr_bytes: 0,
    };
    let outcome = Outcome::for_job(&job, facts);
    let candidate = Candidate::new(
        raw_job.clone(),
        serde_json::to_value(&outcome).unwrap(),
        "rev".into(),
        Some(serde_json::json!({"response_hash": outcome.response_hash})),
    );
    let file = candidate_file_name(job.job_id());
    let text = serde_json::to_string_pretty(&candidate).unwrap();

    // Signer: re-parse the bytes and re-run every check.
    let candidate = Candidate::from_value(&serde_json::from_str::<Value>(&text).unwrap()).unwrap();
    let job = validate_job(&candidate.job, now).unwrap();
    let validated = validate_outcome(&candidate.outcome, &job).unwrap();
    assert_eq!(validated.verdict(), Verdict::Passed);
    let deadline = attestation_deadline(now, job.expires_at()).unwrap();
    assert_eq!(deadline, now + 900);
    let fields = AttestationFields::for_outcome(&job, &validated, verifier, deadline);
    let digest = attestation_digest(job.chain_id(), &fields);
    let signature = sign(&digest, &key);
    let attestation_file = AttestationFile {
        schema: artifacts::ATTESTATION_SCHEMA.into(),
        job_id: job.job_id().into(),
        bounty_contract: job.bounty_contract(),
        verifier,
        passed: fields.passed,
        response_hash: fields.response_hash,
        deadline,
        signature: signature.to_hex(),
        candidate_file: file,
    };

    // Keeper: re-parse, recover, encode.
    let a = AttestationFile::from_value(&serde_json::to_value(&attestation_file).unwrap()).unwrap();
    let sig = AttestationSignature::from_hex(&a.signature).unwrap();
    let recomputed = attestation_digest(
        job.chain_id(),
        &AttestationFields {
            deadline: a.deadline,
            ..fields
        },
    );
    assert_eq!(recover_signer(&recomputed, &sig).unwrap(), a.verifier);
    assert_eq!(
        verifier_set_hash(job.eligible_verifiers()),
        verifier_set_hash(&[verifier])
    );
    let att = settle::attestation(a.verifier, a.passed, a.response_hash, a.deadline, &sig);
    let calldata = settle_calldata(std::slice::from_ref(&att));
    assert_eq!(calldata[..4], [0xe3, 0x45, 0x71, 0x86]);
    assert_ne!(verification_hash(&[att]), Bytes32::from_bytes([0; 32]));

    // A signature over a failed verdict does not recover to the verifier for a passed digest.
    let failed = attestation_digest(
        job.chain_id(),
        &AttestationFields {
            passed: false,
            ..fields
        },
    );
    assert_ne!(recover_signer(&failed, &sig).unwrap(), verifier);
}
