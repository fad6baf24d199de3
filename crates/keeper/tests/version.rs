//! `keeper --version` names the git revision it was built from.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

#[test]
fn version_names_the_git_revision() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_keeper"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("keeper 0."), "{text}");
    assert!(text.trim_end().ends_with(')'), "no revision in {text:?}");
}
