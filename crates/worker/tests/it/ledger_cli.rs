//! `worker ledger` against a real ledger (SQLite on disk, written through the service's own
//! `Ledger`), the real binary; no engine needed.

use std::process::Command;

use worker_serve::ledger::{JobKey, Ledger};

const JOB: &str = "base-mainnet:0x2222222222222222222222222222222222222222:7";

/// A state directory whose ledger holds one pending job, [`JOB`].
fn state_with_one_job() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(dir.path()).unwrap();
    let seen = ledger
        .seen_until(
            JobKey {
                job_id: JOB,
                round: 7,
                content_hash: &format!("sha256:{}", "a".repeat(64)),
            },
            None,
            1_000,
        )
        .unwrap();
    assert!(seen.new);
    dir
}

fn ledger(state: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_worker"))
        .args(["ledger", "--state"])
        .arg(state)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// #41 item 8: `worker ledger --retry ID` with an id the ledger does not hold said
/// "re-queued 0 job row(s)" and exited 0, though its help and README say exit 1: a mistyped
/// id read as success. It exits 1 and says the ledger holds no such job.
#[test]
fn ledger_retry_of_an_id_the_ledger_does_not_hold_exits_1_not_0() {
    let state = state_with_one_job();
    let mistyped = "base-mainnet:0x2222222222222222222222222222222222222222:8";
    let out = ledger(state.path(), &["--retry", mistyped]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout {stdout}\nstderr {stderr}"
    );
    assert!(!stdout.contains("re-queued"), "{stdout}");
    assert!(
        stderr.contains("no job") && stderr.contains(mistyped),
        "{stderr}"
    );

    // The ledger is unchanged by the mistyped id, and the id it holds is still re-queued.
    let listed = ledger(state.path(), &["--json"]);
    assert!(listed.status.success(), "{listed:?}");
    let v: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "{v:#}");
    assert_eq!(jobs[0]["job_id"], JOB);
    let out = ledger(state.path(), &["--retry", JOB]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("re-queued 1 job row(s)"),
        "{out:?}"
    );
}

/// #46 item 7: a newer worker migrated the ledger (and kept the copy it took before), then the
/// operator brings the older worker back. It is refused (exit 78, naming the way back), and
/// `worker ledger --downgrade-to N` puts the copy in place: the older worker reads its ledger
/// again, and the newer one is kept beside it. Refused while a service holds the directory.
#[test]
fn an_older_worker_runs_again_on_its_ledger_after_downgrade_to() {
    let state = state_with_one_job();
    let known = Ledger::schema_version();
    let newer = known + 1;
    let file = state.path().join(worker_serve::ledger::LEDGER_FILE);
    // What the newer worker leaves: its copy of the older ledger, then the migrated one.
    std::fs::copy(
        &file,
        state
            .path()
            .join(worker_serve::rollback::backup_name(known, newer)),
    )
    .unwrap();
    rusqlite::Connection::open(&file)
        .unwrap()
        .pragma_update(None, "user_version", newer)
        .unwrap();

    let out = ledger(state.path(), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains(&format!("--downgrade-to {known}")),
        "{stderr}"
    );

    {
        let _serve = worker_serve::lock::lock_state(state.path()).unwrap();
        let out = ledger(state.path(), &["--downgrade-to", &known.to_string()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("in use by another worker serve"),
            "{stderr}"
        );
    }

    let out = ledger(state.path(), &["--downgrade-to", &known.to_string()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("ledger schema {newer} -> {known}")),
        "{stdout}"
    );
    let out = ledger(state.path(), &["--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(JOB));
    assert!(
        state
            .path()
            .join(worker_serve::rollback::replaced_name(newer, known))
            .is_file()
    );
    // Nothing older than the oldest copy.
    let out = ledger(state.path(), &["--downgrade-to", "1"]);
    assert_eq!(out.status.code(), Some(78));
}
