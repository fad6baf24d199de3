//! Under `--json`, a failure still prints one JSON value on stdout (the error object), besides
//! the stderr line; without `--json` stdout stays empty.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use std::process::{Command, Output};

use cli_support::testing::error_object;

fn sign(extra: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_signer"))
        .arg("sign")
        .arg("--candidates")
        .arg(dir.path())
        .arg("--out")
        .arg(dir.path().join("out"))
        .arg("--history")
        .arg(dir.path().join("history"))
        .args(["--api", "http://127.0.0.1:9", "--rpc", "http://127.0.0.1:9"])
        .args(["--key-env", "H_CLI_NO_SUCH_KEY_VARIABLE"])
        .args(extra)
        .env_remove("H_CLI_NO_SUCH_KEY_VARIABLE")
        .output()
        .unwrap()
}

#[test]
fn json_configuration_error_is_an_error_object_on_stdout() {
    let out = sign(&["--signer", "not-an-address", "--json"]);
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    let v = error_object(&out);
    assert_eq!(v["error"]["code"], "config");
    assert_eq!(v["error"]["exit_code"], 78);
    assert!(
        v["error"]["message"].as_str().unwrap().contains("--signer"),
        "{v}"
    );

    let plain = sign(&["--signer", "not-an-address"]);
    assert_eq!(plain.status.code(), Some(78));
    assert!(plain.stdout.is_empty(), "{plain:?}");
}

#[test]
fn json_usage_error_from_clap_is_an_error_object_on_stdout() {
    let out = Command::new(env!("CARGO_BIN_EXE_signer"))
        .args(["sign", "--json", "--no-such-flag"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let v = error_object(&out);
    assert_eq!(v["error"]["code"], "usage");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--no-such-flag"),
        "{v}"
    );
}
