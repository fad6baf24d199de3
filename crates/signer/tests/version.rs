//! `signer --version` names the git revision it was built from.

#[test]
fn version_names_the_git_revision() {
    cli_support::testing::assert_version_names_git_revision(env!("CARGO_BIN_EXE_signer"), "signer");
}
