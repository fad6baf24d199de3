//! Real Sigstore bundles verified with no network against the pinned trusted root
//! (`deploy/sigstore/trusted_root.json`). The fixtures and where they came from:
//! `tests/fixtures/README.md`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use std::path::{Path, PathBuf};
use std::process::Command;

use provenance::{Expected, GITHUB_ACTIONS_ISSUER, Refusal};
use sigstore_verify::trust_root::TrustedRoot;

const WORKFLOW: &str = "https://github.com/trailofbits/pypi-attestations/.github/workflows/release.yml@refs/tags/v0.0.19";
const COMMIT: &str = "08802efe1f8e5fec4ad842d6b8ce97656092ee72";
const ARTIFACT: &str = "pypi_attestations-0.0.19.tar.gz";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn pinned_root_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/sigstore/trusted_root.json")
}

fn pinned_root() -> TrustedRoot {
    provenance::load_trusted_root(&pinned_root_path()).unwrap()
}

fn expected() -> Expected {
    Expected {
        identity: WORKFLOW.to_owned(),
        issuer: GITHUB_ACTIONS_ISSUER.to_owned(),
        source_digest: Some(COMMIT.to_owned()),
        source_ref: Some("refs/tags/v0.0.19".to_owned()),
        allow_self_hosted: false,
    }
}

fn slsa_bundle() -> sigstore_verify::types::Bundle {
    provenance::load_bundle(&fixture(&format!("{ARTIFACT}.slsa.sigstore.json"))).unwrap()
}

fn artifact() -> Vec<u8> {
    provenance::load_artifact(&fixture(ARTIFACT)).unwrap()
}

#[test]
fn a_real_github_actions_provenance_bundle_verifies_offline_against_the_pinned_root() {
    let verified =
        provenance::verify(&pinned_root(), &slsa_bundle(), &artifact(), &expected()).unwrap();
    assert_eq!(
        verified.sha256,
        "9bb1add04b1b4e182be6b0b80931593f7a291eb49d69b4fd728a5d4cbcdc4bd3"
    );
    assert_eq!(verified.identity, WORKFLOW);
    assert_eq!(verified.source_digest.as_deref(), Some(COMMIT));
}

#[test]
fn an_artifact_with_one_byte_changed_is_refused() {
    let mut bytes = artifact();
    let middle = bytes.len() / 2;
    bytes[middle] = bytes[middle].wrapping_add(1);
    let refusal =
        provenance::verify(&pinned_root(), &slsa_bundle(), &bytes, &expected()).unwrap_err();
    assert!(
        matches!(
            refusal,
            Refusal::Sigstore(sigstore_verify::Error::ArtifactMismatch(_))
        ),
        "{refusal:?}"
    );
}

#[test]
fn a_bundle_signed_by_another_workflow_than_the_expected_one_is_refused() {
    // The same repository's release workflow at another tag, and our release-build workflow:
    // a real signature by someone else's workflow is no provenance of ours.
    for identity in [
        WORKFLOW.replace("v0.0.19", "v0.0.20"),
        "https://github.com/trailofbits/pypi-attestations/.github/workflows/regression-verifier-release-build.yml@refs/heads/main".to_owned(),
    ] {
        let wrong = Expected { identity, ..expected() };
        let refusal = provenance::verify(&pinned_root(), &slsa_bundle(), &artifact(), &wrong).unwrap_err();
        assert!(
            matches!(refusal, Refusal::Sigstore(sigstore_verify::Error::IdentityMismatch { .. })),
            "{refusal:?}"
        );
    }
}

#[test]
fn a_bundle_from_another_oidc_issuer_than_github_actions_is_refused() {
    let wrong = Expected {
        issuer: "https://accounts.google.com".to_owned(),
        ..expected()
    };
    let refusal =
        provenance::verify(&pinned_root(), &slsa_bundle(), &artifact(), &wrong).unwrap_err();
    assert!(
        matches!(
            refusal,
            Refusal::Sigstore(sigstore_verify::Error::IssuerMismatch { .. })
        ),
        "{refusal:?}"
    );
}

#[test]
fn a_bundle_built_from_another_commit_or_ref_is_refused() {
    let other_commit = Expected {
        source_digest: Some("0".repeat(40)),
        ..expected()
    };
    let refusal =
        provenance::verify(&pinned_root(), &slsa_bundle(), &artifact(), &other_commit).unwrap_err();
    assert!(
        matches!(
            refusal,
            Refusal::Claim {
                claim: "source repository digest",
                ..
            }
        ),
        "{refusal:?}"
    );
    let other_ref = Expected {
        source_ref: Some("refs/heads/main".to_owned()),
        ..expected()
    };
    let refusal =
        provenance::verify(&pinned_root(), &slsa_bundle(), &artifact(), &other_ref).unwrap_err();
    assert!(
        matches!(
            refusal,
            Refusal::Claim {
                claim: "source repository ref",
                ..
            }
        ),
        "{refusal:?}"
    );
}

#[test]
fn a_bundle_whose_certificate_chains_to_a_root_not_in_the_pinned_file_is_refused() {
    // The pinned root with its certificate authorities replaced by Sigstore staging's: the
    // transparency logs stay trusted, so only the certificate chain can fail.
    let mut root: serde_json::Value =
        serde_json::from_slice(&std::fs::read(pinned_root_path()).unwrap()).unwrap();
    let staging: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("staging_trusted_root.json")).unwrap())
            .unwrap();
    root["certificateAuthorities"] = staging["certificateAuthorities"].clone();
    let foreign = TrustedRoot::from_json(&root.to_string()).unwrap();
    let refusal =
        provenance::verify(&foreign, &slsa_bundle(), &artifact(), &expected()).unwrap_err();
    assert!(
        matches!(
            refusal,
            Refusal::Sigstore(sigstore_verify::Error::Certificate(_))
        ),
        "{refusal:?}"
    );
}

#[test]
fn a_real_attestation_that_is_not_build_provenance_is_refused() {
    // Signed by the same workflow run for the same file, but a PyPI publish attestation.
    let publish =
        provenance::load_bundle(&fixture(&format!("{ARTIFACT}.publish.sigstore.json"))).unwrap();
    let refusal =
        provenance::verify(&pinned_root(), &publish, &artifact(), &expected()).unwrap_err();
    assert!(
        matches!(refusal, Refusal::PredicateType { .. }),
        "{refusal:?}"
    );
}

#[test]
fn the_runner_environment_the_self_hosted_check_reads_is_in_the_real_certificate() {
    // The fixture's runner is GitHub-hosted: refusing it would mean the claim is not read.
    let verified = provenance::verify(&pinned_root(), &slsa_bundle(), &artifact(), &expected());
    assert!(verified.is_ok());
    let claims = sigstore_verify::verify(
        artifact().as_slice(),
        &slsa_bundle(),
        &sigstore_verify::VerificationPolicy::new(WORKFLOW, GITHUB_ACTIONS_ISSUER),
        &pinned_root(),
    )
    .unwrap()
    .certificate()
    .map(|c| c.ci_claims.runner_environment.clone());
    assert_eq!(claims, Some(Some("github-hosted".to_owned())));
}

fn binary(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_verify-provenance"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Issue #48: a refusal exited 1, which every other binary's numbering (`cli_support::exit`)
/// means "internal error, a restart may fix it"; a refused artifact is a verdict on the input
/// and is refused again, so it is 4 (`InvalidInput`).
#[test]
fn the_binary_exits_0_verified_4_refused_78_without_a_usable_root_by_the_shared_numbering() {
    let root = pinned_root_path();
    let bundle = fixture(&format!("{ARTIFACT}.slsa.sigstore.json"));
    let art = fixture(ARTIFACT);
    let dir = tempfile::tempdir().unwrap();
    let flipped = dir.path().join(ARTIFACT);
    let mut bytes = artifact();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&flipped, &bytes).unwrap();
    let base = |root: &Path, art: &Path| {
        vec![
            "--trusted-root".to_owned(),
            root.display().to_string(),
            "--bundle".to_owned(),
            bundle.display().to_string(),
            "--artifact".to_owned(),
            art.display().to_string(),
            "--identity".to_owned(),
            WORKFLOW.to_owned(),
            "--source-digest".to_owned(),
            COMMIT.to_owned(),
        ]
    };
    let run = |args: Vec<String>| binary(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let (code, out) = run(base(&root, &art));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("verified:") && out.contains(COMMIT), "{out}");
    let (code, out) = run(base(&root, &flipped));
    assert_eq!(code, 4, "{out}");
    assert!(out.contains("refused"), "{out}");
    let (code, out) = run(base(&dir.path().join("missing.json"), &art));
    assert_eq!(code, 78, "{out}");
    let (code, out) = binary(&["--bundle", "x"]);
    assert_eq!(code, 2, "{out}");
}
