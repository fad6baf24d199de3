//! The PKCS#11 backend against Debian's SoftHSM2 (issue #44 item 3): a fresh token in a temp
//! directory per test (SOFTHSM2_CONF names its own tokendir), a secp256k1 key generated in it
//! by `signer pkcs11-keygen`, and `signer sign` signing through it. SoftHSM2 reads its
//! configuration from the environment only, which this crate cannot set on itself (edition
//! 2024's `set_var` is unsafe), so every PKCS#11 call runs in a `signer` child process.
//! Without the module the tests skip, except under CI=true, where they fail.

use chain_testkit::SoftHsmToken;

use super::*;

const TOKEN: &str = "verifier-token";
const LABEL: &str = "verifier-key";
const PIN: &str = "4711-test-pin";

/// A freshly initialised SoftHSM2 token of its own; `None` (skip) without SoftHSM2, unless
/// CI=true.
fn fresh_token() -> Option<SoftHsmToken> {
    SoftHsmToken::init(TOKEN, PIN).unwrap()
}

/// `signer pkcs11-keygen`: its exit code, stdout and stderr.
fn keygen(token: &SoftHsmToken, label: &str) -> (i32, String, String) {
    exit_and_text(&token.keygen(env!("CARGO_BIN_EXE_signer"), label).unwrap())
}

/// A key generated in the token: its address.
fn generate(token: &SoftHsmToken, label: &str) -> Address {
    let (code, stdout, stderr) = keygen(token, label);
    assert_eq!(code, 0, "{stderr}");
    stdout.trim().parse().unwrap()
}

/// `signer sign` through the token with a candidates directory that does not exist and
/// URLs nothing answers: what it says about the key comes before any of them is used.
fn sign_without_candidates(token: &SoftHsmToken, signer: &str, flags: &[String]) -> (i32, String) {
    let out = sign_nothing(
        signer,
        flags,
        &[("SOFTHSM2_CONF", token.conf().as_os_str())],
    );
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!stderr.contains(PIN), "{stderr}");
    (out.status.code().unwrap(), stderr)
}

/// `signer sign` for `signer` with the key options `flags` and the variables `envs`, with
/// candidates and output that do not exist and URLs nothing answers.
fn sign_nothing(
    signer: &str,
    flags: &[impl AsRef<std::ffi::OsStr>],
    envs: &[(&str, &std::ffi::OsStr)],
) -> std::process::Output {
    let history = new_history();
    std::process::Command::new(env!("CARGO_BIN_EXE_signer"))
        .args(["sign", "--candidates", "/nonexistent/candidates"])
        .args(["--api", "http://127.0.0.1:9", "--rpc", "http://127.0.0.1:9"])
        .args(["--signer", signer, "--out", "/nonexistent/out", "--history"])
        .arg(history.path())
        .args(flags)
        .envs(envs.iter().copied())
        .output()
        .unwrap()
}

#[tokio::test]
async fn an_attestation_through_softhsm2_settles_and_recovers_to_the_verifier() {
    let Some(token) = fresh_token() else { return };
    let verifier = generate(&token, LABEL);
    let mut w = world_with(&[verifier], 3600, 0).await;
    w.signer = verifier;
    let conf = token.conf();
    let flags = token.flags(LABEL);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let (code, stdout, stderr) =
        run_binary(&w, &flags, &[("SOFTHSM2_CONF", conf.to_str().unwrap())]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(!stdout.contains(PIN) && !stderr.contains(PIN));
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["signed"], 1, "{report}");
    recovers_and_settles(&w, verifier).await;
    assert_eq!(w.bounty.status().await.unwrap(), status::SETTLED);
}

#[test]
fn a_pkcs11_token_without_the_named_key_fails_closed_before_any_candidate_is_read() {
    let Some(token) = fresh_token() else { return };
    generate(&token, "another-key");
    let (code, stderr) =
        sign_without_candidates(&token, &signer_address().to_string(), &token.flags(LABEL));
    // 78, not 4: the candidates directory (missing here) was never looked at.
    assert_eq!(code, 78, "{stderr}");
    assert!(
        stderr.contains("holds no EC private key labelled \"verifier-key\""),
        "{stderr}"
    );
}

#[test]
fn a_pkcs11_key_for_another_address_than_signer_fails_closed_before_any_candidate_is_read() {
    let Some(token) = fresh_token() else { return };
    let verifier = generate(&token, LABEL);
    let (code, stderr) =
        sign_without_candidates(&token, &signer_address().to_string(), &token.flags(LABEL));
    assert_eq!(code, 78, "{stderr}");
    assert!(
        stderr.contains(&format!("{verifier} is not --signer")),
        "{stderr}"
    );
}

#[test]
fn a_pkcs11_pin_file_readable_by_others_is_refused() {
    let Some(token) = fresh_token() else { return };
    let verifier = generate(&token, LABEL);
    std::fs::set_permissions(token.pin_file(), std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, stderr) =
        sign_without_candidates(&token, &verifier.to_string(), &token.flags(LABEL));
    assert_eq!(code, 78, "{stderr}");
    assert!(stderr.contains("0600 or stricter"), "{stderr}");
}

#[test]
fn a_wrong_pkcs11_pin_fails_closed_and_is_not_echoed() {
    let Some(token) = fresh_token() else { return };
    let verifier = generate(&token, LABEL);
    let mut flags = token.flags(LABEL);
    flags.truncate(flags.len() - 2);
    flags.extend(["--pkcs11-pin-env".to_owned(), "SIGNER_TEST_PIN".to_owned()]);
    let conf = token.conf();
    let out = sign_nothing(
        &verifier.to_string(),
        &flags,
        &[
            ("SOFTHSM2_CONF", conf.as_os_str()),
            ("SIGNER_TEST_PIN", "wrong-pin-0815".as_ref()),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("C_Login"), "{stderr}");
    assert!(!stderr.contains("wrong-pin-0815"), "{stderr}");
}

#[test]
fn pkcs11_keygen_refuses_a_label_already_in_the_token() {
    let Some(token) = fresh_token() else { return };
    let first = generate(&token, LABEL);
    let (code, stdout, stderr) = keygen(&token, LABEL);
    assert_eq!(code, 78, "{stderr}");
    assert!(stderr.contains("already holds"), "{stderr}");
    assert!(stdout.is_empty());
    // The first key is still the one signing as its address.
    let (code, stderr) = sign_without_candidates(&token, &first.to_string(), &token.flags(LABEL));
    assert_eq!(code, 4, "{stderr}");
}

/// A PIN flag beside a file key would be ignored: a usage error instead, so an operator who
/// meant the token does not sign with another key unawares.
#[test]
fn a_pkcs11_pin_flag_without_the_module_is_a_usage_error() {
    let out = sign_nothing(
        &signer_address().to_string(),
        &[
            "--key-env",
            "SIGNER_TEST_KEY",
            "--pkcs11-pin-env",
            "SIGNER_TEST_PIN",
        ],
        &[("SIGNER_TEST_KEY", DEV_KEYS[SIGNER_KEY_INDEX].as_ref())],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--pkcs11-module"), "{stderr}");
}
