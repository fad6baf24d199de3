use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::fixtures::{self, NOW, valid_job};
use crate::job::validate_job;
use crate::manifest::tests::vector_manifest;
use crate::types::Address;

fn d(c: char) -> Sha256Digest {
    format!("sha256:{}", c.to_string().repeat(64))
        .parse()
        .unwrap()
}
fn b(c: char) -> Bytes32 {
    format!("0x{}", c.to_string().repeat(64)).parse().unwrap()
}

fn vector_scope() -> Scope {
    Scope {
        network: "base-mainnet".into(),
        bounty_id: format!("0x{}", "a".repeat(64)),
        bounty_contract: format!("0x{}", "2".repeat(40)).parse().unwrap(),
        round: 3,
        solver_wallet: format!("0x{}", "3".repeat(40)).parse().unwrap(),
        submission_hash: b('4'),
        evidence_hash: b('5'),
        terms_hash: b('6'),
        committed_policy_hash: b('7'),
        verification_expires_at: 2_000_000_000,
    }
}

fn facts(exit_code: i64) -> ExecutionFacts {
    ExecutionFacts {
        exit_code,
        stdout_sha256: d('d'),
        stderr_sha256: d('e'),
        stdout_bytes: 12,
        stderr_bytes: 0,
    }
}

/// The keys of the JSON object `v`, in the order they were written.
fn keys_of(v: &Value) -> Vec<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

#[test]
fn golden_response_hash() {
    let receipt = Receipt::new(vector_scope(), &vector_manifest(), d('c'), facts(0));
    let outcome = Outcome::new(receipt);
    assert_eq!(outcome.verdict, Verdict::Passed);
    assert_eq!(
        outcome.response_hash.to_string(),
        "0x940969e379fc8f3cf8d6ea2ee88e0da355187001b4b077301f6c22c42753e781"
    );
}

#[test]
fn serialization_matches_the_hash_preimage_order() {
    let outcome = Outcome::new(Receipt::new(
        vector_scope(),
        &vector_manifest(),
        d('c'),
        facts(0),
    ));
    let written = serde_json::to_string(&outcome.receipt).unwrap();
    assert_eq!(
        written,
        crate::canonical::compact_json_in_order(&outcome.receipt.to_ordered_value())
    );
    let v = serde_json::to_value(&outcome).unwrap();
    let keys = keys_of(&v);
    assert_eq!(keys, ["verdict", "receipt", "response_hash"]);
    let r = keys_of(&v["receipt"]);
    assert_eq!(
        r,
        [
            "schema_version",
            "scope",
            "runner_manifest_hash",
            "command_hash",
            "source_digest",
            "benchmark_digest",
            "image",
            "execution"
        ]
    );
    let e = keys_of(&v["receipt"]["execution"]);
    assert_eq!(
        e,
        [
            "exit_code",
            "stdout_sha256",
            "stderr_sha256",
            "stdout_bytes",
            "stderr_bytes",
            "isolation"
        ]
    );
    let i = keys_of(&v["receipt"]["execution"]["isolation"]);
    assert_eq!(
        i,
        [
            "runtime",
            "network",
            "rootfs_read_only",
            "source_read_only",
            "benchmark_read_only",
            "capabilities",
            "no_new_privileges",
            "user"
        ]
    );
}

#[test]
fn verdict_comes_from_the_exit_code_only() {
    for (code, verdict) in [
        (0, Verdict::Passed),
        (1, Verdict::Failed),
        (126, Verdict::Failed),
        (127, Verdict::Failed),
        (137, Verdict::Failed),
        (139, Verdict::Failed),
        (-1, Verdict::Failed),
        (256, Verdict::Failed),
    ] {
        assert_eq!(
            Outcome::new(Receipt::new(
                vector_scope(),
                &vector_manifest(),
                d('c'),
                facts(code)
            ))
            .verdict,
            verdict,
            "{code}"
        );
    }
    // The hash commits to the verdict: the same receipt under the other verdict differs.
    let r = Receipt::new(vector_scope(), &vector_manifest(), d('c'), facts(0));
    assert_ne!(
        response_hash(Verdict::Passed, &r),
        response_hash(Verdict::Failed, &r)
    );
}

fn job() -> ValidatedJob {
    validate_job(&valid_job(), NOW).unwrap()
}

fn outcome_value(exit_code: i64) -> Value {
    let job = job();
    serde_json::to_value(Outcome::for_job(&job, facts(exit_code))).unwrap()
}

#[test]
fn outcome_for_job_round_trips_through_validation() {
    let job = job();
    for code in [0, 1] {
        let v = outcome_value(code);
        let validated = validate_outcome(&v, &job).unwrap();
        assert_eq!(validated.verdict(), Verdict::from_exit_code(code));
        assert_eq!(validated.receipt().scope, *job.scope());
        assert_eq!(serde_json::to_value(validated.outcome()).unwrap(), v);
    }
    // The receipt's source digest is always the job's: `for_job` takes no other.
    assert_eq!(
        Outcome::for_job(&job, facts(0)).receipt.source_digest,
        job.source_snapshot_digest()
    );
}

#[test]
fn response_hash_is_compared_case_insensitively() {
    let mut v = outcome_value(0);
    let upper = v["response_hash"]
        .as_str()
        .unwrap()
        .to_uppercase()
        .replacen("0X", "0x", 1);
    v["response_hash"] = json!(upper);
    assert!(validate_outcome(&v, &job()).is_ok());
}

/// Changes one receipt field and recomputes the response hash, so only the re-derivation
/// from the job can catch it.
fn rehashed(f: impl FnOnce(&mut Receipt)) -> Value {
    let job = job();
    let mut o = Outcome::for_job(&job, facts(0));
    f(&mut o.receipt);
    serde_json::to_value(Outcome::new(o.receipt)).unwrap()
}

#[test]
fn every_job_derived_field_is_rederived() {
    let job = job();
    let check =
        |v: Value, expected: OutcomeError| assert_eq!(validate_outcome(&v, &job), Err(expected));
    // Each edit keeps the receipt self-consistent (rehashed), so only re-derivation sees it.
    type Edit = fn(&mut Receipt);
    let edits: [(Edit, OutcomeError); 13] = [
        (
            |r| r.schema_version = "agent-bounties/regression-sandbox-receipt-v2".into(),
            OutcomeError::SchemaVersion,
        ),
        (|r| r.scope.round = 4, OutcomeError::Scope),
        (
            |r| r.scope.network = "base-sepolia".into(),
            OutcomeError::Scope,
        ),
        (
            |r| r.scope.bounty_id = r.scope.bounty_id.to_uppercase().replacen("0X", "0x", 1),
            OutcomeError::Scope,
        ),
        (
            |r| r.scope.verification_expires_at += 1,
            OutcomeError::Scope,
        ),
        (
            |r| r.runner_manifest_hash = d('1'),
            OutcomeError::ManifestHash,
        ),
        (|r| r.command_hash = d('1'), OutcomeError::CommandHash),
        (|r| r.source_digest = d('1'), OutcomeError::SourceDigest),
        (
            |r| r.benchmark_digest = d('1'),
            OutcomeError::BenchmarkDigest,
        ),
        (
            |r| r.image = format!("ghcr.io/other@sha256:{}", "b".repeat(64)),
            OutcomeError::Image,
        ),
        (
            |r| r.execution.isolation.network = "bridge".into(),
            OutcomeError::Isolation,
        ),
        (
            |r| r.execution.isolation.user = "0:0".into(),
            OutcomeError::Isolation,
        ),
        (
            |r| r.execution.isolation.rootfs_read_only = false,
            OutcomeError::Isolation,
        ),
    ];
    for (edit, expected) in edits {
        check(rehashed(edit), expected);
    }

    let mut contradicted = outcome_value(1);
    contradicted["verdict"] = json!("passed");
    check(
        contradicted,
        OutcomeError::VerdictMismatch {
            verdict: "passed",
            exit_code: 1,
        },
    );
    let mut contradicted = outcome_value(0);
    contradicted["verdict"] = json!("failed");
    check(
        contradicted,
        OutcomeError::VerdictMismatch {
            verdict: "failed",
            exit_code: 0,
        },
    );

    let mut wrong_hash = outcome_value(0);
    wrong_hash["response_hash"] = json!(format!("0x{}", "0".repeat(64)));
    assert!(matches!(
        validate_outcome(&wrong_hash, &job),
        Err(OutcomeError::ResponseHash { .. })
    ));
}

#[test]
fn strict_parsing() {
    let job = job();
    let edits: [fn(&mut Value); 4] = [
        |v| v["receipt"]["execution"]["isolation"]["privileged"] = json!(false),
        |v| v["evidence"] = json!({}),
        |v| v["receipt"]["source_digest"] = json!(format!("sha256:{}", "C".repeat(64))),
        |v| v["verdict"] = Value::Null,
    ];
    for edit in edits {
        let mut v = outcome_value(0);
        edit(&mut v);
        assert!(matches!(
            validate_outcome(&v, &job),
            Err(OutcomeError::Malformed(_))
        ));
    }
    // A no-verdict output is not an outcome.
    let nv = serde_json::to_value(NoVerdictOutcome::new(NoVerdictReason::Timeout, "t")).unwrap();
    assert!(matches!(
        validate_outcome(&nv, &job),
        Err(OutcomeError::Malformed(_))
    ));
}

#[test]
fn an_outcome_for_another_job_is_rejected() {
    let other_params = fixtures::JobParams {
        round: 4,
        ..fixtures::JobParams::default()
    };
    let other = validate_job(&fixtures::job_value(&other_params), NOW).unwrap();
    assert_eq!(
        validate_outcome(&outcome_value(0), &other),
        Err(OutcomeError::Scope)
    );
}

/// The typed check refuses what the JSON one does, each for the same reason: an outcome of
/// another job, one whose receipt was altered and rehashed, one whose response hash is wrong.
#[test]
fn a_typed_outcome_is_checked_against_the_job_as_its_json_is() {
    let job = job();
    let typed = |v: &Value| Outcome::deserialize(v).unwrap();
    let other = validate_job(
        &fixtures::job_value(&fixtures::JobParams {
            round: 4,
            ..fixtures::JobParams::default()
        }),
        NOW,
    )
    .unwrap();
    assert_eq!(
        typed(&outcome_value(0)).check_for(&other),
        Err(OutcomeError::Scope)
    );
    let altered = rehashed(|r| r.image = "other@sha256:0".into());
    assert_eq!(typed(&altered).check_for(&job), Err(OutcomeError::Image));
    assert_eq!(
        typed(&altered).check_for(&job),
        validate_outcome(&altered, &job)
    );
    let mut wrong = typed(&outcome_value(1));
    wrong.response_hash = b('9');
    assert!(matches!(
        wrong.check_for(&job),
        Err(OutcomeError::ResponseHash { .. })
    ));
    let good = Outcome::for_job(&job, facts(0));
    assert_eq!(good.clone().check_for(&job).unwrap().outcome(), &good);
}

#[test]
fn no_verdict_wire_format() {
    let nv = NoVerdictOutcome::new(
        NoVerdictReason::ImagePlatformMismatch,
        "image is linux/arm64",
    );
    assert_eq!(
        serde_json::to_string(&nv).unwrap(),
        r#"{"verdict":null,"no_verdict":{"reason":"image_platform_mismatch","detail":"image is linux/arm64"}}"#
    );
    let all = [
        NoVerdictReason::Timeout,
        NoVerdictReason::OutputLimit,
        NoVerdictReason::Oom,
        NoVerdictReason::InputMismatch,
        NoVerdictReason::ImageMissing,
        NoVerdictReason::ImagePlatformMismatch,
        NoVerdictReason::ImageDigestMismatch,
        NoVerdictReason::CreateFailed,
        NoVerdictReason::StartFailed,
        NoVerdictReason::IsolationMismatch,
        NoVerdictReason::ExternallyStopped,
        NoVerdictReason::InvalidJob,
        NoVerdictReason::Expired,
        NoVerdictReason::InternalError,
        NoVerdictReason::RuntimeUnavailable,
    ];
    for r in all {
        assert_eq!(serde_json::to_value(r).unwrap(), json!(r.as_str()));
    }
    // Detail is bounded, cut on a character boundary.
    let long = "é".repeat(MAX_NO_VERDICT_DETAIL);
    let nv = NoVerdictOutcome::new(NoVerdictReason::InternalError, &long);
    assert_eq!(nv.no_verdict.detail.len(), MAX_NO_VERDICT_DETAIL);
    let nv = NoVerdictOutcome::new(NoVerdictReason::InternalError, &format!("x{long}"));
    assert_eq!(nv.no_verdict.detail.len(), MAX_NO_VERDICT_DETAIL - 1);

    let parsed: RunOutput =
        serde_json::from_str(r#"{"verdict":null,"no_verdict":{"reason":"oom","detail":""}}"#)
            .unwrap();
    assert_eq!(
        parsed,
        RunOutput::NoVerdict(NoVerdictOutcome::new(NoVerdictReason::Oom, ""))
    );
    assert!(
        serde_json::from_str::<NoVerdictOutcome>(
            r#"{"verdict":null,"no_verdict":{"reason":"crashed","detail":""}}"#
        )
        .is_err()
    );
    let v = outcome_value(1);
    assert!(matches!(
        serde_json::from_value::<RunOutput>(v).unwrap(),
        RunOutput::Verdict(_)
    ));
}

fn leaves(v: &Value, prefix: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => m
            .iter()
            .for_each(|(k, c)| leaves(c, format!("{prefix}/{k}"), out)),
        _ => out.push(prefix),
    }
}

proptest! {
    #[test]
    fn any_single_outcome_field_mutation_is_rejected(index in any::<prop::sample::Index>(), exit in 0i64..3, append in "[g-z]", delta in 1i64..1000, flip in any::<bool>()) {
        let job = job();
        let original = outcome_value(exit);
        let mut paths = Vec::new();
        leaves(&original, String::new(), &mut paths);
        let path = index.get(&paths);
        let mut v = original.clone();
        let slot = v.pointer_mut(path).unwrap();
        *slot = match slot.clone() {
            // Appending a non-hex letter breaks every string, hex or not.
            Value::String(s) if flip => json!(format!("{s}{append}")),
            Value::String(s) => json!(s.chars().rev().collect::<String>() + "!"),
            Value::Number(n) => json!(n.as_i64().unwrap() + delta),
            Value::Bool(b) => json!(!b),
            other => other,
        };
        prop_assert_ne!(&v, &original);
        prop_assert!(validate_outcome(&v, &job).is_err(), "mutation at {} accepted", path);
    }

    #[test]
    fn removing_or_adding_any_outcome_field_is_rejected(index in any::<prop::sample::Index>(), name in "[a-z_]{1,12}") {
        let job = job();
        let original = outcome_value(0);
        let mut paths = Vec::new();
        leaves(&original, String::new(), &mut paths);
        let path = index.get(&paths);
        let (parent, key) = path.rsplit_once('/').unwrap();
        let mut removed = original.clone();
        removed.pointer_mut(parent).unwrap().as_object_mut().unwrap().remove(key);
        prop_assert!(validate_outcome(&removed, &job).is_err());
        let mut added = original.clone();
        let obj = added.pointer_mut(parent).unwrap().as_object_mut().unwrap();
        prop_assume!(!obj.contains_key(&name));
        obj.insert(name, json!(0));
        prop_assert!(matches!(validate_outcome(&added, &job), Err(OutcomeError::Malformed(_))));
    }

    #[test]
    fn any_job_derived_receipt_field_change_is_rejected_even_when_rehashed(which in 0usize..9, c in "[0-9a-f]") {
        let job = job();
        let ch = c.chars().next().unwrap();
        let v = rehashed(|r| match which {
            0 => r.runner_manifest_hash = d(ch),
            1 => r.command_hash = d(ch),
            2 => r.source_digest = d(ch),
            3 => r.benchmark_digest = d(if ch == 'a' { 'b' } else { ch }),
            4 => r.scope.submission_hash = b(ch),
            5 => r.scope.evidence_hash = b(ch),
            6 => r.scope.terms_hash = b(ch),
            7 => r.scope.committed_policy_hash = b(ch),
            _ => r.scope.bounty_contract = Address::from_bytes([ch as u8; 20]),
        });
        // Skip the draws that happen to reproduce the job's own value.
        prop_assume!(v != outcome_value(0));
        prop_assert!(validate_outcome(&v, &job).is_err());
    }
}
