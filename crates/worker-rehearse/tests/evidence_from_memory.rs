//! A rehearsal's findings and its `--log-dir` copies come from the evidence records it holds
//! in memory, not from what is at the store path afterwards (issue #48 item 1): a record
//! collected from the store while the rehearsal still runs (as `worker gc` may do) changes
//! neither.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use worker_rehearse::determinism::OutputDeterminism;
use worker_rehearse::{prepare, rehearse};
use worker_sandbox::Executor;
use worker_sandbox::lifecycle::fake::Script;

mod common;
use common::{FreshRuns, Plan, options};

/// Every record file in the store under `staging`.
fn stored_records(staging: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(staging.join("evidence").join("sha256"))
        .map(|entries| entries.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_record_collected_from_the_store_mid_rehearsal_still_counts_and_its_log_copy_is_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = options(dir.path());
    options.repeat = 2;
    options.log_dir = Some(dir.path().join("logs"));
    let prepared = prepare(&options).unwrap();
    // The runs go one at a time: when the second is planned, the first has written its
    // record, and the store is emptied under the rehearsal.
    let store = options.staging_root.clone();
    let engine = FreshRuns::new(1, move |_| {
        for record in stored_records(&store) {
            std::fs::remove_file(record).unwrap();
        }
        Plan {
            script: Script {
                stdout: b"running 1 test\ntest t ... ok\n".to_vec(),
                ..Script::default()
            },
            hold: 0,
            name: String::new(),
        }
    })
    .await;
    let rehearsed = rehearse(&Executor::new(engine), prepared, &options, false)
        .await
        .unwrap();
    let report = &rehearsed.report;

    let runs: Vec<_> = report.runs.iter().collect();
    assert_eq!(runs.len(), 2);
    let first = runs[0].evidence_path.as_ref().unwrap();
    assert!(!first.exists(), "the first record was not collected");
    // Read back, the collected record would leave the output unjudged (not checked).
    assert!(
        matches!(report.output, OutputDeterminism::Deterministic { .. }),
        "{:?}",
        report.output
    );
    for run in runs {
        let path = run.evidence_path.as_ref().unwrap();
        let copy = std::fs::read(format!(
            "{}.evidence.json",
            run.logs.as_ref().unwrap().display()
        ))
        .unwrap();
        // The copy is the record the store file is named after, byte for byte.
        let named = path.file_stem().unwrap().to_str().unwrap();
        assert_eq!(verifier_sdk::sha256_digest(&copy).hex(), named);
        if path.exists() {
            assert_eq!(std::fs::read(path).unwrap(), copy);
        }
    }
}
