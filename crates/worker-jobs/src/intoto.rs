//! An in-toto Statement v1 with the test-result predicate for one verdict, so tools of the
//! supply-chain ecosystem can read what was tested, on what, and with which result, without
//! knowing this project's receipt format. It is unsigned: the signed artifact stays the
//! EIP-712 attestation; this statement only restates facts the receipt already commits to.
//!
//! Built by a pure function from the outcome and the evidence address, so the same verdict
//! always gives the same bytes (`--run-regression --in-toto FILE` and `feed` share it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use verifier_sdk::{Outcome, Sha256Digest, Verdict};

/// `_type` of an in-toto Statement v1.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// The test-result predicate this statement carries.
pub const TEST_RESULT_PREDICATE: &str = "https://in-toto.io/attestation/test-result/v0.1";

/// How subjects' digests are computed: the directory digest of docs/protocol.md §4.
pub const DIRECTORY_DIGEST_NAME: &str = "agent-bounties/directory-v1";

/// An in-toto Statement v1 whose predicate is a test result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Statement {
    /// Always [`STATEMENT_TYPE`].
    #[serde(rename = "_type")]
    pub statement_type: String,
    /// What was tested: the source snapshot and the benchmark tree.
    pub subject: Vec<ResourceDescriptor>,
    /// Always [`TEST_RESULT_PREDICATE`].
    #[serde(rename = "predicateType")]
    pub predicate_type: String,
    /// The result.
    pub predicate: TestResult,
}

/// An in-toto ResourceDescriptor (the fields this statement uses).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResourceDescriptor {
    /// A name for the resource within this statement.
    pub name: String,
    /// Where the resource can be found, when it has an address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// Algorithm → lowercase hex.
    pub digest: BTreeMap<String, String>,
    /// Media type, when the resource is a file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// Extra facts about the resource.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, Value>,
}

/// The test-result predicate v0.1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TestResult {
    /// `PASSED` or `FAILED` (the predicate's `WARNED` is never produced).
    pub result: TestResultKind,
    /// What the test ran with: the runner manifest, the image, the evidence record and, when
    /// its executable could be read, the worker binary.
    pub configuration: Vec<ResourceDescriptor>,
    /// The evidence address (where the run's evidence record is).
    pub url: String,
    /// The job, when it passed.
    #[serde(default)]
    pub passed_tests: Vec<String>,
    /// Never used; present because the predicate defines it.
    #[serde(default)]
    pub warned_tests: Vec<String>,
    /// The job, when it failed.
    #[serde(default)]
    pub failed_tests: Vec<String>,
}

/// The predicate's result values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum TestResultKind {
    /// The benchmark command exited 0.
    Passed,
    /// It exited with anything else.
    Failed,
}

/// Where the evidence record of a verdict is: its content digest and an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvidenceAddress {
    /// SHA-256 of the record's canonical JSON (the name of its content-addressed file).
    pub digest: Sha256Digest,
    /// A URI for it: the `file://` path of the content-addressed record, or the candidate
    /// file that carries it.
    pub uri: String,
}

impl EvidenceAddress {
    /// The address of the record whose store digest is `digest`, as carried inside
    /// `container` (a file holding it).
    pub fn inside(digest: Sha256Digest, container: &str) -> Self {
        Self {
            digest,
            uri: container.to_owned(),
        }
    }

    /// The address of a content-addressed record file (`…/evidence/sha256/<hex>.json`),
    /// whose name is its digest.
    pub fn of_file(path: &Path) -> Option<Self> {
        let hex = path.file_stem()?.to_str()?;
        let digest = format!("sha256:{hex}").parse().ok()?;
        let absolute = std::path::absolute(path).ok()?;
        Some(Self {
            digest,
            uri: format!("file://{}", absolute.to_str()?),
        })
    }
}

fn sha256_set(digest: &Sha256Digest) -> BTreeMap<String, String> {
    BTreeMap::from([("sha256".to_owned(), digest.hex())])
}

fn directory(name: &str, digest: &Sha256Digest) -> ResourceDescriptor {
    ResourceDescriptor {
        name: name.to_owned(),
        uri: None,
        digest: sha256_set(digest),
        media_type: None,
        // The digest is the project's directory digest, not the SHA-256 of an archive: say
        // so, so nobody compares it with `sha256sum` of a tarball.
        annotations: BTreeMap::from([(
            "digestAlgorithm".to_owned(),
            Value::from(DIRECTORY_DIGEST_NAME),
        )]),
    }
}

/// The statement for `outcome` of job `job_id`, whose evidence is at `evidence`. With the
/// evidence's per-test report (`tests`, of a known format), `passedTests` and `failedTests`
/// name the tests the run printed, and the evidence descriptor says they are solver-controlled;
/// otherwise the job itself is the one test. The `result` is always the verdict.
pub fn test_result_statement(
    job_id: &str,
    outcome: &Outcome,
    evidence: &EvidenceAddress,
    tests: Option<&test_outcomes::TestReport>,
) -> Statement {
    let receipt = &outcome.receipt;
    let (result, mut passed_tests, mut failed_tests) = match outcome.verdict {
        Verdict::Passed => (TestResultKind::Passed, vec![job_id.to_owned()], vec![]),
        Verdict::Failed => (TestResultKind::Failed, vec![], vec![job_id.to_owned()]),
    };
    let mut tests_annotations = Vec::new();
    if let Some(report) = tests
        && let Some((passed, failed)) = test_outcomes::predicate_lists(report)
    {
        (passed_tests, failed_tests) = (passed, failed);
        tests_annotations = vec![
            ("testsSource".to_owned(), Value::from(test_outcomes::SOURCE)),
            (
                "testsRunner".to_owned(),
                serde_json::to_value(report.runner).unwrap_or(Value::Null),
            ),
            ("testsTruncated".to_owned(), Value::from(report.truncated)),
        ];
    }
    let image_digest = receipt
        .image
        .split_once('@')
        .and_then(|(_, d)| d.parse::<Sha256Digest>().ok());
    let mut configuration = vec![ResourceDescriptor {
        name: "runner-manifest".into(),
        uri: None,
        digest: sha256_set(&receipt.runner_manifest_hash),
        media_type: Some("application/json".into()),
        annotations: BTreeMap::from([(
            "commandHash".to_owned(),
            Value::from(receipt.command_hash.to_string()),
        )]),
    }];
    configuration.push(ResourceDescriptor {
        name: "image".into(),
        uri: Some(receipt.image.clone()),
        digest: image_digest.as_ref().map(sha256_set).unwrap_or_default(),
        media_type: None,
        annotations: BTreeMap::new(),
    });
    configuration.push(ResourceDescriptor {
        name: "evidence".into(),
        uri: Some(evidence.uri.clone()),
        digest: sha256_set(&evidence.digest),
        media_type: Some("application/json".into()),
        annotations: BTreeMap::from([
            (
                "responseHash".to_owned(),
                Value::from(outcome.response_hash.to_string()),
            ),
            ("jobId".to_owned(), Value::from(job_id)),
            (
                "exitCode".to_owned(),
                Value::from(receipt.execution.exit_code),
            ),
        ])
        .into_iter()
        .chain(tests_annotations)
        .collect(),
    });
    // Which build of the worker ran: its commit alone names many possible builds, the
    // executable's own digest names the one a rebuild is compared with (docs/rebuild.md).
    if let Some(binary) = verifier_sdk::build::binary_sha256() {
        configuration.push(ResourceDescriptor {
            name: "worker".into(),
            uri: None,
            digest: sha256_set(&binary),
            media_type: None,
            annotations: BTreeMap::from([(
                "version".to_owned(),
                Value::from(verifier_sdk::build::identity()),
            )]),
        });
    }
    Statement {
        statement_type: STATEMENT_TYPE.into(),
        subject: vec![
            directory("source", &receipt.source_digest),
            directory("benchmark", &receipt.benchmark_digest),
        ],
        predicate_type: TEST_RESULT_PREDICATE.into(),
        predicate: TestResult {
            result,
            configuration,
            url: evidence.uri.clone(),
            passed_tests,
            warned_tests: vec![],
            failed_tests,
        },
    }
}

/// The file name of the statement beside `candidate-<hex>.json`: `candidate-<hex>.intoto.json`
/// (which the keeper's `candidate-<64 hex>.json` filter does not pick up as a candidate).
pub fn statement_file_name(candidate_file: &str) -> String {
    let stem = candidate_file
        .strip_suffix(".json")
        .unwrap_or(candidate_file);
    format!("{stem}.intoto.json")
}

/// Writes `statement` to `path` atomically (pretty JSON and a newline).
pub fn write_statement(path: &Path, statement: &Statement) -> std::io::Result<PathBuf> {
    let mut bytes = serde_json::to_vec_pretty(statement).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    artifact_fs::write_atomic(path, &bytes)?;
    Ok(path.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use verifier_sdk::fixtures::{NOW, valid_job};
    use verifier_sdk::{ExecutionFacts, validate_job};

    fn sample_outcome(exit_code: i64) -> (String, Outcome) {
        let job = validate_job(&valid_job(), NOW).unwrap();
        let d = |c: char| {
            format!("sha256:{}", c.to_string().repeat(64))
                .parse()
                .unwrap()
        };
        let facts = ExecutionFacts {
            exit_code,
            stdout_sha256: d('1'),
            stderr_sha256: d('2'),
            stdout_bytes: 0,
            stderr_bytes: 0,
        };
        let outcome = Outcome::for_job(&job, facts);
        (job.job_id().to_owned(), outcome)
    }

    #[test]
    fn statement_names_subjects_result_configuration_and_evidence() {
        let (job_id, outcome) = sample_outcome(1);
        let evidence = EvidenceAddress::inside(
            crate::run::evidence_address(&serde_json::json!({"a": 1})),
            "candidate-x.json",
        );
        let s = test_result_statement(&job_id, &outcome, &evidence, None);
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["_type"], STATEMENT_TYPE);
        assert_eq!(v["predicateType"], TEST_RESULT_PREDICATE);
        assert_eq!(v["predicate"]["result"], "FAILED");
        assert_eq!(v["predicate"]["failedTests"][0], job_id.as_str());
        assert_eq!(
            v["subject"][0]["digest"]["sha256"],
            outcome.receipt.source_digest.hex()
        );
        assert_eq!(
            v["subject"][1]["digest"]["sha256"],
            outcome.receipt.benchmark_digest.hex()
        );
        let config = &v["predicate"]["configuration"];
        assert_eq!(
            config[0]["digest"]["sha256"],
            outcome.receipt.runner_manifest_hash.hex()
        );
        assert_eq!(config[1]["uri"], outcome.receipt.image.as_str());
        assert_eq!(config[1]["digest"]["sha256"].as_str().unwrap().len(), 64);
        assert_eq!(
            config[2]["annotations"]["responseHash"],
            outcome.response_hash.to_string()
        );
        assert_eq!(config[2]["digest"]["sha256"], evidence.digest.hex());
        // Round trip through the typed struct, which refuses unknown fields.
        let back: Statement = serde_json::from_value(v).unwrap();
        assert_eq!(back, s);
        assert_eq!(
            test_result_statement(&job_id, &sample_outcome(0).1, &evidence, None)
                .predicate
                .result,
            TestResultKind::Passed
        );
    }

    /// Issue #49: the statement named the runner manifest, the image and the evidence, but not
    /// which worker executable produced them.
    #[test]
    fn statement_names_the_worker_binary_that_ran() {
        let (job_id, outcome) = sample_outcome(1);
        let evidence = EvidenceAddress::inside(
            crate::run::evidence_address(&serde_json::json!({"a": 1})),
            "candidate-x.json",
        );
        // nextest runs each test in its own process, so this process-wide record is this
        // test's alone.
        verifier_sdk::build::record_binary_digest(|| Some(Sha256Digest::from_bytes([0xab; 32])));
        let s = test_result_statement(&job_id, &outcome, &evidence, None);
        let worker = s
            .predicate
            .configuration
            .iter()
            .find(|c| c.name == "worker")
            .expect("no worker in the configuration");
        assert_eq!(worker.digest["sha256"], "ab".repeat(32));
        assert_eq!(
            worker.annotations["version"],
            verifier_sdk::build::identity()
        );
    }

    #[test]
    fn statement_lists_the_tests_the_run_printed_instead_of_the_job_id() {
        let (job_id, outcome) = sample_outcome(1);
        let evidence = EvidenceAddress::inside(
            crate::run::evidence_address(&serde_json::json!({"a": 1})),
            "candidate-x.json",
        );
        let tests = test_outcomes::parse(
            b"test_a (m.C.test_a) ... ok\ntest_b (m.C.test_b) ... FAIL\ntest_c (m.C.test_c) ... ERROR\n",
            b"",
        );
        let s = test_result_statement(&job_id, &outcome, &evidence, Some(&tests));
        assert_eq!(s.predicate.result, TestResultKind::Failed);
        assert_eq!(s.predicate.passed_tests, ["m.C.test_a"]);
        assert_eq!(s.predicate.failed_tests, ["m.C.test_c", "m.C.test_b"]);
        let notes = &s.predicate.configuration[2].annotations;
        assert_eq!(notes["testsSource"], "solver-controlled-output");
        assert_eq!(notes["testsRunner"], "unittest");
        assert_eq!(notes["jobId"], job_id.as_str());
        // Output of no known format keeps the job as the one test.
        let unknown = test_outcomes::TestReport::unknown();
        let s = test_result_statement(&job_id, &outcome, &evidence, Some(&unknown));
        assert_eq!(s.predicate.failed_tests, [job_id.as_str()]);
        assert!(
            !s.predicate.configuration[2]
                .annotations
                .contains_key("testsSource")
        );
    }

    #[test]
    fn statement_file_is_not_taken_for_a_candidate() {
        let name = statement_file_name(&format!("candidate-{}.json", "a".repeat(64)));
        assert!(name.ends_with(".intoto.json"));
        assert!(verifier_sdk::check_candidate_file_name(&name).is_err());
    }
}
