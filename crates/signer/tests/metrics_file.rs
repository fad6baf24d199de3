//! `signer sign --metrics-file`: the real binary writes a Prometheus textfile on a failed run
//! too (what `VerifierSignerFailing` reads), the counters carry over to the next run, and the
//! file passes the Prometheus project's own `promtool check metrics` (Debian's `prometheus`
//! package, which scripts/services.sh installs; a missing promtool fails this test).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use std::path::Path;
use std::process::{Command, Output};

fn sign_with_a_bad_signer(dir: &Path, metrics: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_signer"))
        .arg("sign")
        .arg("--candidates")
        .arg(dir)
        .arg("--out")
        .arg(dir.join("out"))
        .arg("--history")
        .arg(dir.join("history"))
        .args(["--api", "http://127.0.0.1:9", "--rpc", "http://127.0.0.1:9"])
        .args([
            "--key-env",
            "H46_NO_SUCH_KEY_VARIABLE",
            "--signer",
            "not-an-address",
        ])
        .arg("--metrics-file")
        .arg(metrics)
        .env_remove("H46_NO_SUCH_KEY_VARIABLE")
        .output()
        .unwrap()
}

#[test]
fn a_failed_sign_run_still_writes_its_metrics_file_and_counts_on() {
    let dir = tempfile::tempdir().unwrap();
    let metrics = dir.path().join("signer.prom");
    let out = sign_with_a_bad_signer(dir.path(), &metrics);
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    let first = std::fs::read_to_string(&metrics).unwrap();
    assert!(
        first.contains("signer_signatures_total{result=\"failed\"} 1\n"),
        "{first}"
    );
    assert!(
        first.contains("signer_signatures_total{result=\"signed\"} 0\n"),
        "{first}"
    );
    assert!(
        first.contains("signer_last_run_timestamp_seconds "),
        "{first}"
    );
    test_promtool::check_metrics("the first run's metrics file", &first);

    let out = sign_with_a_bad_signer(dir.path(), &metrics);
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    let second = std::fs::read_to_string(&metrics).unwrap();
    assert!(
        second.contains("signer_signatures_total{result=\"failed\"} 2\n"),
        "{second}"
    );
    // Nothing but the file itself is left in its directory (no temporary for the collector
    // to trip on).
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains("prom"))
        .collect();
    assert_eq!(names, ["signer.prom"]);
}
