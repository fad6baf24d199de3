use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::canonical::{keccak_json, sha256_json, sha256_utf8};
use crate::fixtures::{self, EXPIRES_AT, JobParams, NOW, rehash, valid_job};

fn ok(job: &Value) -> ValidatedJob {
    validate_job(job, NOW).unwrap()
}

/// Applies `f` to a valid job, recomputes every hash, and validates: the result isolates
/// the rule under test from the hash checks.
fn rejects_after(f: impl FnOnce(&mut Value)) -> JobError {
    let mut job = valid_job();
    f(&mut job);
    rehash(&mut job);
    validate_job(&job, NOW).unwrap_err()
}

/// Same without recomputing hashes.
fn rejects_raw(f: impl FnOnce(&mut Value)) -> JobError {
    let mut job = valid_job();
    f(&mut job);
    validate_job(&job, NOW).unwrap_err()
}

fn set(job: &mut Value, pointer: &str, v: Value) {
    *job.pointer_mut(pointer)
        .unwrap_or_else(|| panic!("no {pointer}")) = v;
}

fn remove(job: &mut Value, pointer: &str) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    job.pointer_mut(parent)
        .unwrap()
        .as_object_mut()
        .unwrap()
        .remove(key)
        .unwrap();
}

#[test]
fn valid_fixture_exposes_everything() {
    let raw = valid_job();
    let job = ok(&raw);
    let p = JobParams::default();
    assert_eq!(job.chain_id(), 8453);
    assert_eq!(job.network(), Network::BaseMainnet);
    assert_eq!(
        job.job_id(),
        format!("base-mainnet:{}:3", p.bounty_contract)
    );
    assert_eq!(job.raw(), &raw);
    assert_eq!(job.round(), 3);
    assert_eq!(job.threshold(), 1);
    assert_eq!(job.expires_at(), EXPIRES_AT);
    assert_eq!(
        job.eligible_verifiers(),
        &[p.verifiers[0].parse::<Address>().unwrap()]
    );
    assert_eq!(job.submission_hash(), sha256_utf8(&p.artifact_reference));
    assert_eq!(
        job.evidence_hash(),
        sha256_json(&raw["submission_evidence"]["evidence"])
    );
    assert_eq!(job.terms_hash(), keccak_json(&raw["terms"]["document"]));
    assert_eq!(
        job.policy_hash(),
        keccak_json(&raw["terms"]["document"]["verification_policy"])
    );
    assert_eq!(
        job.acceptance_criteria_hash(),
        keccak_json(&raw["terms"]["document"]["acceptance_criteria"])
    );
    assert_eq!(
        job.benchmark_hash(),
        keccak_json(&raw["terms"]["document"]["benchmark"])
    );
    assert_eq!(
        job.evidence_schema_hash(),
        keccak_json(&raw["terms"]["document"]["evidence_schema"])
    );
    assert_eq!(job.source().repository.to_string(), "solver-org/solution");
    assert_eq!(job.source().commit.as_str(), fixtures::SOURCE_COMMIT);
    assert!(job.source_subdirectory().is_root());
    assert_eq!(
        job.benchmark_source().repository.to_string(),
        "bounty-org/benchmarks"
    );
    assert_eq!(
        job.benchmark_source().subdirectory.as_str(),
        "suites/parser"
    );
    assert_eq!(
        job.source_snapshot_digest().to_string(),
        p.source_snapshot_digest
    );
    assert_eq!(
        job.manifest(),
        &RunnerManifest::from_value(&fixtures::sample_manifest()).unwrap()
    );
    assert!(job.is_live(EXPIRES_AT - 1));
    assert!(!job.is_live(EXPIRES_AT));
    let scope = serde_json::to_value(job.scope()).unwrap();
    let keys: Vec<&str> = scope
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "network",
            "bounty_id",
            "bounty_contract",
            "round",
            "solver_wallet",
            "submission_hash",
            "evidence_hash",
            "terms_hash",
            "committed_policy_hash",
            "verification_expires_at"
        ]
    );
    assert_eq!(scope["network"], "base-mainnet");
}

#[test]
fn scope_lowercases_hex_but_keeps_bounty_id_as_given() {
    let p = JobParams {
        bounty_contract: format!("0x{}", "AB".repeat(20)),
        solver: format!("0x{}", "CD".repeat(20)),
        bounty_id: format!("0x{}", "EF".repeat(32)),
        ..JobParams::default()
    };
    let job = ok(&fixtures::job_value(&p));
    assert_eq!(
        job.scope().bounty_contract.to_string(),
        format!("0x{}", "ab".repeat(20))
    );
    assert_eq!(
        job.scope().solver_wallet.to_string(),
        format!("0x{}", "cd".repeat(20))
    );
    assert_eq!(job.scope().bounty_id, p.bounty_id);
    assert_eq!(
        job.bounty_id().to_string(),
        format!("0x{}", "ef".repeat(32))
    );
}

#[test]
fn network_aliases_resolve_and_sepolia_works() {
    for alias in ["base-mainnet", "base", "mainnet", "8453", "BASE-MAINNET"] {
        let job = ok(&fixtures::job_value(&JobParams {
            network: alias.into(),
            ..JobParams::default()
        }));
        assert_eq!(job.chain_id(), 8453, "{alias}");
        assert_eq!(job.scope().network, "base-mainnet");
    }
    for alias in ["base-sepolia", "sepolia", "84532"] {
        let job = ok(&fixtures::job_value(&JobParams {
            network: alias.into(),
            ..JobParams::default()
        }));
        assert_eq!(job.chain_id(), 84532, "{alias}");
        assert_eq!(job.scope().network, "base-sepolia");
    }
    // Different aliases of one chain agree.
    let mut job = valid_job();
    set(&mut job, "/submission_evidence/network", json!("8453"));
    set(
        &mut job,
        "/terms/document/contract_terms/network",
        json!("base"),
    );
    rehash(&mut job);
    assert_eq!(ok(&job).chain_id(), 8453);
}

#[test]
fn rule1_networks() {
    assert_eq!(
        rejects_after(|j| set(j, "/network", json!("ethereum"))),
        JobError::UnknownNetwork {
            field: "network",
            value: "ethereum".into()
        }
    );
    assert_eq!(
        rejects_after(|j| set(j, "/network", json!("1"))),
        JobError::UnknownNetwork {
            field: "network",
            value: "1".into()
        }
    );
    assert_eq!(
        rejects_after(|j| set(j, "/network", json!(8453))),
        JobError::WrongType {
            field: "network",
            expected: "a string"
        }
    );
    assert_eq!(
        rejects_after(|j| set(j, "/submission_evidence/network", json!("base-sepolia"))),
        JobError::NetworkMismatch {
            field: "submission_evidence.network",
            expected: 8453,
            found: 84532
        }
    );
    assert_eq!(
        rejects_after(|j| set(
            j,
            "/terms/document/contract_terms/network",
            json!("sepolia")
        )),
        JobError::NetworkMismatch {
            field: "terms.document.contract_terms.network",
            expected: 8453,
            found: 84532
        }
    );
    assert_eq!(
        rejects_after(|j| remove(j, "/terms/document/contract_terms/network")),
        JobError::Missing {
            field: "terms.document.contract_terms.network"
        }
    );
    assert_eq!(
        rejects_after(|j| remove(j, "/submission_evidence/network")),
        JobError::Missing {
            field: "submission_evidence.network"
        }
    );
}

#[test]
fn job_id_charset_and_length() {
    assert!(
        validate_job(
            &{
                let mut j = valid_job();
                set(&mut j, "/job_id", json!("a".repeat(200)));
                j
            },
            NOW
        )
        .is_ok()
    );
    for bad in [
        json!(""),
        json!("a".repeat(201)),
        json!("a/b"),
        json!("a b"),
        json!("ü"),
        json!(7),
    ] {
        let err = rejects_after(|j| set(j, "/job_id", bad.clone()));
        assert!(
            matches!(
                err,
                JobError::JobId
                    | JobError::WrongType {
                        field: "job_id",
                        ..
                    }
            ),
            "{bad}: {err}"
        );
    }
    assert_eq!(
        rejects_after(|j| remove(j, "/job_id")),
        JobError::Missing { field: "job_id" }
    );
    assert_eq!(
        validate_job(&json!([1]), NOW).unwrap_err(),
        JobError::NotAnObject { field: "job" }
    );
}

#[test]
fn rule2_mode_module_threshold_verifiers_expiry() {
    assert_eq!(
        rejects_after(|j| set(j, "/verification_mode", json!("module"))),
        JobError::VerificationMode
    );
    assert_eq!(
        rejects_after(|j| set(j, "/verification_mode", json!("ai_quorum"))),
        JobError::VerificationMode
    );
    assert_eq!(
        rejects_after(|j| remove(j, "/verification_mode")),
        JobError::Missing {
            field: "verification_mode"
        }
    );
    assert_eq!(
        rejects_after(|j| set(
            j,
            "/verifier_module",
            json!(format!("0x{}", "55".repeat(20)))
        )),
        JobError::VerifierModule
    );
    assert_eq!(
        rejects_after(|j| set(j, "/verifier_module", json!(""))),
        JobError::VerifierModule
    );
    // Absent is as good as null.
    let mut j = valid_job();
    remove(&mut j, "/verifier_module");
    assert!(validate_job(&j, NOW).is_ok());

    assert_eq!(
        rejects_after(|j| set(j, "/threshold", json!(0))),
        JobError::ThresholdZero
    );
    assert_eq!(
        rejects_after(|j| set(j, "/threshold", json!(2))),
        JobError::ThresholdMismatch {
            threshold: 2,
            verifiers: 1
        }
    );
    assert!(matches!(
        rejects_after(|j| set(j, "/threshold", json!(256))),
        JobError::WrongType {
            field: "threshold",
            ..
        }
    ));
    assert!(matches!(
        rejects_after(|j| set(j, "/threshold", json!(-1))),
        JobError::WrongType {
            field: "threshold",
            ..
        }
    ));
    assert_eq!(
        rejects_after(|j| set(j, "/eligible_verifiers", json!([]))),
        JobError::ThresholdMismatch {
            threshold: 1,
            verifiers: 0
        }
    );
    assert_eq!(
        rejects_after(|j| set(j, "/eligible_verifiers", json!(["0x1234"]))),
        JobError::InvalidAddress {
            field: "eligible_verifiers"
        }
    );
    assert_eq!(
        rejects_after(|j| set(j, "/eligible_verifiers", json!([7]))),
        JobError::InvalidAddress {
            field: "eligible_verifiers"
        }
    );
    let v = "0xbe6292b9e465f549e2363b918d6dd9187038431e";
    let dup = JobParams {
        verifiers: vec![v.into(), v.to_uppercase().replacen("0X", "0x", 1)],
        ..JobParams::default()
    };
    assert_eq!(
        validate_job(&fixtures::job_value(&dup), NOW).unwrap_err(),
        JobError::DuplicateVerifier(v.parse().unwrap())
    );

    let mut j = valid_job();
    assert_eq!(
        validate_job(&j, EXPIRES_AT - 1).unwrap().expires_at(),
        EXPIRES_AT
    );
    assert_eq!(
        validate_job(&j, EXPIRES_AT).unwrap_err(),
        JobError::Expired {
            expires_at: EXPIRES_AT,
            now: EXPIRES_AT
        }
    );
    assert!(validate_job(&j, u64::MAX).is_err());
    set(&mut j, "/verification_expires_at", json!("2000000000"));
    assert!(matches!(
        validate_job(&j, NOW),
        Err(JobError::WrongType {
            field: "verification_expires_at",
            ..
        })
    ));
}

#[test]
fn two_verifier_quorum_is_accepted_in_policy_order() {
    let p = JobParams {
        verifiers: vec![
            "0xbe6292b9e465f549e2363b918d6dd9187038431e".into(),
            "0xb7c2ce6430b66fb986e27b6140b29309550d487a".into(),
        ],
        ..JobParams::default()
    };
    let job = ok(&fixtures::job_value(&p));
    assert_eq!(job.threshold(), 2);
    assert_eq!(job.eligible_verifiers()[1].to_string(), p.verifiers[1]);
    // Same set, other order in the policy: refused.
    let mut raw = fixtures::job_value(&p);
    set(
        &mut raw,
        "/terms/document/verification_policy/verifiers",
        json!([p.verifiers[1], p.verifiers[0]]),
    );
    rehash(&mut raw);
    assert_eq!(
        validate_job(&raw, NOW).unwrap_err(),
        JobError::PolicyMismatch { field: "verifiers" }
    );
}

#[test]
fn scope_fields_are_well_formed() {
    assert_eq!(
        rejects_after(|j| set(j, "/bounty_contract", json!("0x12"))),
        JobError::InvalidAddress {
            field: "bounty_contract"
        }
    );
    assert_eq!(
        rejects_after(|j| set(j, "/bounty_id", json!("0x12"))),
        JobError::InvalidBytes32 { field: "bounty_id" }
    );
    assert_eq!(
        rejects_after(|j| set(j, "/solver_wallet", json!(format!("{}", "33".repeat(20))))),
        JobError::InvalidAddress {
            field: "solver_wallet"
        }
    );
    let zero_round = |j: &mut Value| {
        set(j, "/round", json!(0));
        set(j, "/submission_evidence/round", json!(0));
    };
    assert_eq!(rejects_after(zero_round), JobError::RoundZero);
    assert!(matches!(
        rejects_after(|j| set(j, "/round", json!(1.5))),
        JobError::WrongType { field: "round", .. }
    ));
}

#[test]
fn rule3_every_terms_hash_recomputes() {
    for (key, field) in [
        ("terms_hash", "terms.terms_hash"),
        ("policy_hash", "terms.policy_hash"),
        ("acceptance_criteria_hash", "terms.acceptance_criteria_hash"),
        ("benchmark_hash", "terms.benchmark_hash"),
        ("evidence_schema_hash", "terms.evidence_schema_hash"),
    ] {
        let err = rejects_raw(|j| {
            set(
                j,
                &format!("/terms/{key}"),
                json!(format!("0x{}", "99".repeat(32))),
            )
        });
        assert!(
            matches!(err, JobError::HashMismatch { field: f, .. } if f == field),
            "{key}: {err}"
        );
        let err = rejects_raw(|j| set(j, &format!("/terms/{key}"), json!("0x99")));
        assert_eq!(err, JobError::InvalidBytes32 { field }, "{key}");
        let err = rejects_raw(|j| remove(j, &format!("/terms/{key}")));
        assert_eq!(err, JobError::Missing { field }, "{key}");
    }
    // Changing any committed part of the document without rehashing breaks the terms hash.
    let err = rejects_raw(|j| set(j, "/terms/document/title", json!("Other")));
    assert!(matches!(
        err,
        JobError::HashMismatch {
            field: "terms.terms_hash",
            ..
        }
    ));
    // Uppercase hex of a correct hash is accepted.
    let mut j = valid_job();
    let upper = j["terms"]["terms_hash"]
        .as_str()
        .unwrap()
        .to_uppercase()
        .replacen("0X", "0x", 1);
    set(&mut j, "/terms/terms_hash", json!(upper));
    assert_eq!(ok(&j).terms_hash(), keccak_json(&j["terms"]["document"]));
    assert_eq!(
        rejects_after(|j| set(
            j,
            "/terms/document/schema_version",
            json!("agent-bounties/terms-v2")
        )),
        JobError::TermsSchemaVersion
    );
    for part in [
        "verification_policy",
        "acceptance_criteria",
        "benchmark",
        "evidence_schema",
    ] {
        let err = rejects_after(|j| remove(j, &format!("/terms/document/{part}")));
        assert!(matches!(err, JobError::Missing { .. }), "{part}: {err}");
    }
}

#[test]
fn rule4_evidence_scope_and_hashes() {
    for (key, v) in [
        ("bounty_contract", json!(format!("0x{}", "23".repeat(20)))),
        ("bounty_id", json!(format!("0x{}", "ac".repeat(32)))),
        ("round", json!(4)),
        ("solver_wallet", json!(format!("0x{}", "34".repeat(20)))),
    ] {
        let err = rejects_after(|j| set(j, &format!("/submission_evidence/{key}"), v.clone()));
        assert_eq!(err, JobError::ScopeMismatch { field: key }, "{key}");
    }
    // Case differences are not scope differences.
    let mut j = valid_job();
    for key in ["bounty_contract", "bounty_id", "solver_wallet"] {
        let upper = j["submission_evidence"][key]
            .as_str()
            .unwrap()
            .to_uppercase()
            .replacen("0X", "0x", 1);
        set(&mut j, &format!("/submission_evidence/{key}"), json!(upper));
    }
    rehash(&mut j);
    ok(&j);

    let err = rejects_raw(|j| {
        set(
            j,
            "/submission_evidence/artifact_hash",
            json!(format!("0x{}", "00".repeat(32))),
        )
    });
    assert!(matches!(
        err,
        JobError::HashMismatch {
            field: "submission_evidence.artifact_hash",
            ..
        }
    ));
    let err = rejects_raw(|j| {
        set(
            j,
            "/submission_evidence/evidence_hash",
            json!(format!("0x{}", "00".repeat(32))),
        )
    });
    assert!(matches!(
        err,
        JobError::HashMismatch {
            field: "submission_evidence.evidence_hash",
            ..
        }
    ));
    let err = rejects_raw(|j| set(j, "/submission_evidence/evidence/notes", json!("edited")));
    assert!(matches!(
        err,
        JobError::HashMismatch {
            field: "submission_evidence.evidence_hash",
            ..
        }
    ));
    // The evidence hash is over the value as received: an extra unknown field is hashed too.
    let err = rejects_raw(|j| {
        j["submission_evidence"]["evidence"]
            .as_object_mut()
            .unwrap()
            .insert("extra".into(), json!(1));
    });
    assert!(matches!(
        err,
        JobError::HashMismatch {
            field: "submission_evidence.evidence_hash",
            ..
        }
    ));
    assert_eq!(
        rejects_after(|j| set(j, "/submission_evidence/evidence", json!("x"))),
        JobError::NotAnObject {
            field: "submission_evidence.evidence"
        }
    );
}

#[test]
fn artifact_reference_must_be_an_exact_github_commit_url() {
    let sha = fixtures::SOURCE_COMMIT;
    for bad in [
        format!("http://github.com/o/r/commit/{sha}"),
        format!("https://gitlab.com/o/r/commit/{sha}"),
        format!("https://user@github.com/o/r/commit/{sha}"),
        format!("https://github.com/o/r/commit/{sha}?x=1"),
        format!("https://github.com/o/r/commit/{sha}#frag"),
        format!("https://github.com/o/r/commit/{sha}/"),
        format!("https://github.com/o/r/tree/{sha}"),
        format!("https://github.com/o/r/commit/{}", sha.to_uppercase()),
        format!("https://github.com/o/r/commit/{}", &sha[..39]),
        format!("https://github.com/o/r/commit/{sha}0"),
        format!("https://github.com/o/../commit/{sha}"),
        format!("https://github.com/-o/r/commit/{sha}"),
        format!("https://github.com/o/r%2F/commit/{sha}"),
        format!("https://github.com//r/commit/{sha}"),
        format!("https://github.com/o/r/x/commit/{sha}"),
        format!("HTTPS://github.com/o/r/commit/{sha}"),
    ] {
        let err = rejects_after(|j| set(j, "/submission_evidence/artifact_reference", json!(bad)));
        assert!(
            matches!(err, JobError::ArtifactReference(_)),
            "{bad}: {err}"
        );
    }
    let good = format!("https://github.com/Some-Org/repo.name_2/commit/{sha}");
    let mut j = valid_job();
    set(
        &mut j,
        "/submission_evidence/artifact_reference",
        json!(good),
    );
    rehash(&mut j);
    let job = ok(&j);
    assert_eq!(job.source().repository.owner(), "Some-Org");
    assert_eq!(job.source().repository.name(), "repo.name_2");
}

#[test]
fn rule5_policy() {
    assert_eq!(
        rejects_after(|j| set(
            j,
            "/terms/document/verification_policy/mechanism",
            json!("module")
        )),
        JobError::PolicyMismatch { field: "mechanism" }
    );
    assert_eq!(
        rejects_after(|j| set(
            j,
            "/terms/document/verification_policy/engine",
            json!("other_v1")
        )),
        JobError::PolicyMismatch { field: "engine" }
    );
    assert_eq!(
        rejects_after(|j| set(j, "/terms/document/verification_policy/threshold", json!(2))),
        JobError::PolicyMismatch { field: "threshold" }
    );
    assert_eq!(
        rejects_after(|j| set(
            j,
            "/terms/document/verification_policy/verifiers",
            json!([format!("0x{}", "66".repeat(20))])
        )),
        JobError::PolicyMismatch { field: "verifiers" }
    );
    assert_eq!(
        rejects_after(|j| set(
            j,
            "/terms/document/verification_policy/verifiers",
            json!([])
        )),
        JobError::PolicyMismatch { field: "verifiers" }
    );
    assert_eq!(
        rejects_after(|j| set(j, "/terms/document/verification_policy", json!([]))),
        JobError::NotAnObject {
            field: "terms.document.verification_policy"
        }
    );
}

#[test]
fn rule6_benchmark_engine_source_and_manifest() {
    assert_eq!(
        rejects_after(|j| set(
            j,
            "/terms/document/benchmark/engine",
            json!("sandboxed_regression_v2")
        )),
        JobError::Engine {
            field: "terms.document.benchmark.engine"
        }
    );
    let src = "/terms/document/benchmark/source";
    assert!(matches!(
        rejects_after(|j| set(j, &format!("{src}/kind"), json!("archive"))),
        JobError::BenchmarkSource(_)
    ));
    for bad in [
        "owner",
        "owner/repo/x",
        "/repo",
        "owner/",
        "ow ner/repo",
        "owner/..",
    ] {
        let err = rejects_after(|j| set(j, &format!("{src}/repository"), json!(bad)));
        assert!(matches!(err, JobError::BenchmarkSource(_)), "{bad}: {err}");
    }
    for bad in ["abc", &"g".repeat(40), &"a".repeat(41)] {
        let err = rejects_after(|j| set(j, &format!("{src}/commit"), json!(bad)));
        assert!(matches!(err, JobError::BenchmarkSource(_)), "{bad}: {err}");
    }
    for bad in ["", "/abs", "a/../b", "./a", "a/", "a//b", "a\\b", ".."] {
        let err = rejects_after(|j| set(j, &format!("{src}/subdirectory"), json!(bad)));
        assert_eq!(
            err,
            JobError::Subdirectory {
                field: "terms.document.benchmark.source.subdirectory"
            },
            "{bad:?}"
        );
    }
    assert_eq!(
        rejects_after(|j| remove(j, &format!("{src}/subdirectory"))),
        JobError::Missing {
            field: "terms.document.benchmark.source.subdirectory"
        }
    );
    // Uppercase benchmark commit is accepted and normalized.
    let mut j = valid_job();
    set(
        &mut j,
        &format!("{src}/commit"),
        json!(fixtures::BENCHMARK_COMMIT.to_uppercase()),
    );
    set(&mut j, &format!("{src}/subdirectory"), json!("."));
    rehash(&mut j);
    let job = ok(&j);
    assert_eq!(
        job.benchmark_source().commit.as_str(),
        fixtures::BENCHMARK_COMMIT
    );
    assert!(job.benchmark_source().subdirectory.is_root());

    let m = "/terms/document/benchmark/runner_manifest";
    assert_eq!(
        rejects_after(|j| set(
            j,
            &format!("{m}/command"),
            json!(["/bin/sh", "-c", "cargo test"])
        )),
        JobError::Manifest(ManifestError::ShellCommand("sh".into()))
    );
    assert_eq!(
        rejects_after(|j| {
            j.pointer_mut(m)
                .unwrap()
                .as_object_mut()
                .unwrap()
                .insert("network".into(), json!("host"));
        }),
        JobError::Manifest(ManifestError::UnknownField("network".into()))
    );
    assert_eq!(
        rejects_after(|j| set(j, &format!("{m}/timeout_seconds"), json!(901))),
        JobError::Manifest(ManifestError::OutOfRange {
            field: "timeout_seconds",
            value: 901,
            min: 1,
            max: 900
        })
    );
}

#[test]
fn rule7_source_snapshot_digest_and_subdirectory() {
    let ev = "/submission_evidence/evidence";
    assert_eq!(
        rejects_after(|j| remove(j, &format!("{ev}/source_snapshot_digest"))),
        JobError::Missing {
            field: "submission_evidence.evidence.source_snapshot_digest"
        }
    );
    for bad in [
        format!("sha256:{}", "C".repeat(64)),
        format!("0x{}", "c".repeat(64)),
        "sha256:".into(),
    ] {
        let err = rejects_after(|j| set(j, &format!("{ev}/source_snapshot_digest"), json!(bad)));
        assert_eq!(err, JobError::SourceSnapshotDigest, "{bad}");
    }
    let with_sub = |sub: &str| {
        fixtures::job_value(&JobParams {
            source_subdirectory: Some(sub.into()),
            ..JobParams::default()
        })
    };
    assert_eq!(
        ok(&with_sub("crates/core")).source_subdirectory().as_str(),
        "crates/core"
    );
    assert!(ok(&with_sub(".")).source_subdirectory().is_root());
    for bad in ["", "../x", "/x", "x/", "x/./y", "x\\y", &"a/".repeat(2049)] {
        assert_eq!(
            validate_job(&with_sub(bad), NOW).unwrap_err(),
            JobError::Subdirectory {
                field: "submission_evidence.evidence.source_subdirectory"
            },
            "{bad:?}"
        );
    }
    let mut j = valid_job();
    j["submission_evidence"]["evidence"]["source_subdirectory"] = json!(3);
    rehash(&mut j);
    assert!(matches!(
        validate_job(&j, NOW),
        Err(JobError::Subdirectory { .. })
    ));
}

#[test]
fn subdirectory_length_limit() {
    // 4096 bytes is allowed; one more is not.
    let at = format!("{}/{}", "a".repeat(2047), "b".repeat(2048));
    assert_eq!(at.len(), 4096);
    assert!(RelativeDir::parse(&at).is_some());
    assert!(RelativeDir::parse(&format!("{at}c")).is_none());
}

/// Leaves whose value no rule commits to (informational fields, the opaque job id, and
/// fields outside every hash) are not expected to be rejected when changed.
fn is_committed(pointer: &str) -> bool {
    ![
        "/job_id",
        "/verification_expires_at",
        "/verifier_reward",
        "/current_solver_payout",
        "/required_action",
        "/payout_boundary",
        "/terms/creator_wallet",
        "/terms/created_at",
        "/submission_evidence/created_at",
    ]
    .contains(&pointer)
}

fn leaves(v: &Value, prefix: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => m
            .iter()
            .for_each(|(k, c)| leaves(c, format!("{prefix}/{k}"), out)),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, c)| leaves(c, format!("{prefix}/{i}"), out)),
        _ => out.push(prefix),
    }
}

/// A change that is never a mere case or alias variation of the original.
fn mutate(v: &Value, kind: u8, delta: u64) -> Value {
    match v {
        Value::String(s) if kind.is_multiple_of(3) => Value::String(format!("{s}z")),
        Value::String(s) if kind % 3 == 1 && !s.is_empty() => {
            Value::String(s[..s.len() - 1].to_string())
        }
        Value::String(_) => json!(delta),
        Value::Number(n) => match n.as_u64() {
            Some(u) if kind.is_multiple_of(2) => json!(u.wrapping_add(delta.max(1))),
            _ => json!(n.to_string()),
        },
        Value::Bool(b) => json!(!b),
        Value::Null => json!("0x1111111111111111111111111111111111111111"),
        other => json!([other]),
    }
}

proptest! {
    #[test]
    fn any_single_committed_field_mutation_is_rejected(index in any::<prop::sample::Index>(), kind in any::<u8>(), delta in 1u64..1_000_000) {
        let job = valid_job();
        let mut paths = Vec::new();
        leaves(&job, String::new(), &mut paths);
        paths.retain(|p| is_committed(p));
        let path = index.get(&paths);
        let mut mutated = job.clone();
        let slot = mutated.pointer_mut(path).unwrap();
        *slot = mutate(slot, kind, delta);
        prop_assert!(validate_job(&mutated, NOW).is_err(), "mutation at {} accepted", path);
    }

    #[test]
    fn removing_any_required_field_is_rejected(index in any::<prop::sample::Index>()) {
        let job = valid_job();
        let mut paths = Vec::new();
        leaves(&job, String::new(), &mut paths);
        // Optional or informational fields (and array items, which shift) are excluded.
        paths.retain(|p| is_committed(p) && !p.ends_with("/verifier_module") && !p.ends_with("/notes")
            && !p.contains("/contract_terms/reward") && !p.contains("/title") && !p.contains("/goal")
            && !p.chars().last().is_some_and(|c| c.is_ascii_digit()) && !p.contains("/evidence_schema/"));
        let path = index.get(&paths).clone();
        let mut mutated = job.clone();
        remove(&mut mutated, &path);
        rehash(&mut mutated);
        prop_assert!(validate_job(&mutated, NOW).is_err(), "removal of {} accepted", path);
    }
}

/// #41 item 4: a `deterministic_module` job is the platform's other mode, classified from the
/// raw value before any rule runs (its verifier fields may name nobody, or anybody); every
/// other mode, known or not, is still left to validation, which rejects it.
#[test]
fn a_deterministic_module_job_is_another_mode_before_validation_and_other_modes_are_not() {
    let mut module = valid_job();
    set(
        &mut module,
        "/verification_mode",
        json!("deterministic_module"),
    );
    set(
        &mut module,
        "/verifier_module",
        json!(format!("0x{}", "33".repeat(20))),
    );
    set(&mut module, "/eligible_verifiers", json!([]));
    set(&mut module, "/threshold", json!(0));
    let other = other_verification_mode(&module).unwrap();
    assert_eq!(other.mode, DETERMINISTIC_MODULE);
    assert_eq!(OtherVerificationMode::CODE, "other_verification_mode");
    assert!(other.to_string().contains("deterministic_module"));
    assert_eq!(
        validate_job(&module, NOW).unwrap_err(),
        JobError::VerificationMode
    );

    assert_eq!(other_verification_mode(&valid_job()), None);
    for mode in [
        json!("module"),
        json!("ai_quorum"),
        json!("Deterministic_Module"),
        json!(1),
    ] {
        let mut job = valid_job();
        set(&mut job, "/verification_mode", mode.clone());
        assert_eq!(other_verification_mode(&job), None, "{mode}");
    }
    assert_eq!(other_verification_mode(&json!([])), None);
}
