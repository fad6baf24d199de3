//! Under `--json`, a failure still prints one JSON value on stdout (the error object), besides
//! the stderr line; without `--json` stdout stays empty.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use std::process::{Command, Output};

use cli_support::testing::error_object;

fn relay(extra: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_keeper"))
        .arg("relay")
        .arg("--candidates")
        .arg(dir.path())
        .arg("--attestations")
        .arg(dir.path())
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .args(["--api", "http://127.0.0.1:9", "--rpc", "ftp://127.0.0.1:9"])
        .args(["--key-env", "H_CLI_NO_SUCH_KEY_VARIABLE"])
        .args(["--max-gas", "1000000", "--max-fee-per-gas", "1000000000"])
        .args(extra)
        .env_remove("H_CLI_NO_SUCH_KEY_VARIABLE")
        .output()
        .unwrap()
}

#[test]
fn json_configuration_error_is_an_error_object_on_stdout() {
    let out = relay(&["--json"]);
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    let v = error_object(&out);
    assert_eq!(v["error"]["code"], "config");
    assert_eq!(v["error"]["exit_code"], 78);

    let plain = relay(&[]);
    assert_eq!(plain.status.code(), Some(78));
    assert!(plain.stdout.is_empty(), "{plain:?}");
}

#[test]
fn json_usage_error_from_clap_is_an_error_object_on_stdout() {
    let out = Command::new(env!("CARGO_BIN_EXE_keeper"))
        .args(["relay", "--json", "--max-gas", "lots"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let v = error_object(&out);
    assert_eq!(v["error"]["code"], "usage");
}
