//! A release binary's build provenance, checked offline (issue #49 item 3).
//!
//! The release-build workflow attests the binaries it built with a Sigstore bundle: a DSSE
//! envelope holding an in-toto statement (SLSA provenance v1) whose subjects are the binaries'
//! sha256, signed by a short-lived Fulcio certificate naming the workflow that ran, and logged
//! in Rekor. [`verify`] decides whether such a bundle vouches for one artifact: the
//! certificate chains to a certificate authority of the pinned trusted root, the signature and
//! the transparency-log entry (its inclusion proof, checkpoint and promise against the pinned
//! log keys) verify, the artifact's sha256 is a subject of the statement, the statement is SLSA
//! provenance, and the certificate names the expected workflow, issuer, commit and ref, built
//! on a GitHub-hosted runner.
//!
//! What it deliberately does not do: fetch anything. The trusted root is the file the caller
//! names (`deploy/sigstore/trusted_root.json`, refreshed by hand, see its README), never
//! Sigstore's TUF repository, and the bundle is a file the caller fetched. No exit codes: the
//! binary maps [`Refusal`] and [`RootError`] to them.

use std::path::Path;

use sha2::{Digest as _, Sha256};
use sigstore_verify::trust_root::TrustedRoot;
use sigstore_verify::types::{Bundle, SignatureContent};
use sigstore_verify::{IdentityMatcher, VerificationPolicy};

/// The OIDC issuer of GitHub Actions' workload identity tokens.
pub const GITHUB_ACTIONS_ISSUER: &str = "https://token.actions.githubusercontent.com";
/// The predicate type `actions/attest-build-provenance` writes.
pub const SLSA_PROVENANCE_V1: &str = "https://slsa.dev/provenance/v1";
/// The largest trusted root or bundle read (both are a few KiB).
pub const MAX_JSON_BYTES: u64 = 4 << 20;
/// The largest artifact read (the worker binary is tens of MiB).
pub const MAX_ARTIFACT_BYTES: u64 = 1 << 30;

/// The trusted root could not be used: nothing can be verified against it.
#[derive(Debug, thiserror::Error)]
pub enum RootError {
    /// The file is missing, a symbolic link, too large or unreadable.
    #[error("trusted root {path}: {source}")]
    Read {
        /// The file named.
        path: String,
        /// Why it could not be read.
        source: artifact_fs::ReadError,
    },
    /// The file is no Sigstore trusted root.
    #[error("trusted root {path} is not a Sigstore trusted root: {reason}")]
    Parse {
        /// The file named.
        path: String,
        /// The parser's complaint.
        reason: String,
    },
}

/// Why a bundle does not vouch for an artifact. Every variant means: do not install or run it.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The bundle or the artifact could not be read.
    #[error("{what} {path}: {source}")]
    Read {
        /// `bundle` or `artifact`.
        what: &'static str,
        /// The file named.
        path: String,
        /// Why it could not be read.
        source: artifact_fs::ReadError,
    },
    /// The bundle is not a Sigstore bundle.
    #[error("bundle {path} is not a Sigstore bundle: {reason}")]
    Bundle {
        /// The file named.
        path: String,
        /// The parser's complaint.
        reason: String,
    },
    /// Sigstore verification failed: certificate chain, signature, transparency log, subject
    /// digest, identity or issuer.
    #[error("{0}")]
    Sigstore(#[from] sigstore_verify::Error),
    /// The bundle signs no in-toto statement (a bare message signature).
    #[error("the bundle signs no in-toto statement")]
    NoStatement,
    /// The statement is another kind of attestation than build provenance.
    #[error("the statement is {found}, not build provenance ({expected})")]
    PredicateType {
        /// What the statement says.
        found: String,
        /// What was required.
        expected: &'static str,
    },
    /// A claim of the certificate differs from what was expected.
    #[error("the certificate's {claim} is {found}, expected {expected}")]
    Claim {
        /// The certificate extension.
        claim: &'static str,
        /// Its value, or `absent`.
        found: String,
        /// The expected value.
        expected: String,
    },
}

/// What the certificate must say about the build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// The certificate's SAN URI: the workflow that signed, with its ref
    /// (`https://github.com/<owner>/<repo>/.github/workflows/<file>@<ref>`).
    pub identity: String,
    /// The OIDC issuer (GitHub Actions': [`GITHUB_ACTIONS_ISSUER`]).
    pub issuer: String,
    /// The commit the binary was built from (Fulcio's source repository digest), when known.
    pub source_digest: Option<String>,
    /// The ref the binary was built from (Fulcio's source repository ref), when known.
    pub source_ref: Option<String>,
    /// Accept a build on a self-hosted runner (whose operator could alter the build).
    pub allow_self_hosted: bool,
}

/// A bundle that vouched for an artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The artifact's sha256, lowercase hex.
    pub sha256: String,
    /// The certificate's SAN.
    pub identity: String,
    /// The commit the certificate names, if any.
    pub source_digest: Option<String>,
}

/// Reads and parses the pinned trusted root.
pub fn load_trusted_root(path: &Path) -> Result<TrustedRoot, RootError> {
    let display = path.display().to_string();
    let bytes =
        artifact_fs::read_bounded(path, MAX_JSON_BYTES).map_err(|source| RootError::Read {
            path: display.clone(),
            source,
        })?;
    let text = String::from_utf8(bytes).map_err(|e| RootError::Parse {
        path: display.clone(),
        reason: e.to_string(),
    })?;
    TrustedRoot::from_json(&text).map_err(|e| RootError::Parse {
        path: display,
        reason: e.to_string(),
    })
}

/// Reads and parses a bundle file.
pub fn load_bundle(path: &Path) -> Result<Bundle, Refusal> {
    let display = path.display().to_string();
    let bytes =
        artifact_fs::read_bounded(path, MAX_JSON_BYTES).map_err(|source| Refusal::Read {
            what: "bundle",
            path: display.clone(),
            source,
        })?;
    let text = String::from_utf8(bytes).map_err(|e| Refusal::Bundle {
        path: display.clone(),
        reason: e.to_string(),
    })?;
    Bundle::from_json(&text).map_err(|e| Refusal::Bundle {
        path: display,
        reason: e.to_string(),
    })
}

/// Reads an artifact (a symbolic link is refused, as for every file we judge).
pub fn load_artifact(path: &Path) -> Result<Vec<u8>, Refusal> {
    artifact_fs::read_bounded(path, MAX_ARTIFACT_BYTES).map_err(|source| Refusal::Read {
        what: "artifact",
        path: path.display().to_string(),
        source,
    })
}

/// Whether `bundle` vouches for `artifact` as a build `expected` describes, against `root`
/// only. Pure: no clock but the bundle's own verified times, no network, no files.
pub fn verify(
    root: &TrustedRoot,
    bundle: &Bundle,
    artifact: &[u8],
    expected: &Expected,
) -> Result<Verified, Refusal> {
    let policy = VerificationPolicy::new(
        IdentityMatcher::Uri(expected.identity.clone()),
        expected.issuer.as_str(),
    );
    let result = sigstore_verify::verify(artifact, bundle, &policy, root)?;
    // The library checked the signature over the envelope and the subject digest; the kind of
    // statement is ours to require (a PyPI publish attestation or an SBOM is no provenance).
    check_predicate_type(bundle)?;
    let claims = result
        .certificate()
        .map(|c| c.ci_claims.clone())
        .unwrap_or_default();
    if let Some(digest) = &expected.source_digest {
        require(
            "source repository digest",
            claims.source_repository_digest.as_deref(),
            digest,
        )?;
    }
    if let Some(reference) = &expected.source_ref {
        require(
            "source repository ref",
            claims.source_repository_ref.as_deref(),
            reference,
        )?;
    }
    if !expected.allow_self_hosted {
        require(
            "runner environment",
            claims.runner_environment.as_deref(),
            "github-hosted",
        )?;
    }
    Ok(Verified {
        sha256: hex::encode(Sha256::digest(artifact)),
        identity: result
            .identity()
            .map_or_else(String::new, |identity| identity.as_str().to_owned()),
        source_digest: claims.source_repository_digest,
    })
}

fn require(claim: &'static str, found: Option<&str>, expected: &str) -> Result<(), Refusal> {
    if found == Some(expected) {
        return Ok(());
    }
    Err(Refusal::Claim {
        claim,
        found: found.unwrap_or("absent").to_owned(),
        expected: expected.to_owned(),
    })
}

fn check_predicate_type(bundle: &Bundle) -> Result<(), Refusal> {
    let payload = match &bundle.content {
        SignatureContent::DsseEnvelope(envelope)
            if envelope.payload_type == "application/vnd.in-toto+json" =>
        {
            envelope.payload.as_bytes()
        }
        _ => return Err(Refusal::NoStatement),
    };
    let statement: serde_json::Value =
        serde_json::from_slice(payload).map_err(|_| Refusal::NoStatement)?;
    let found = statement
        .get("predicateType")
        .and_then(serde_json::Value::as_str);
    if found == Some(SLSA_PROVENANCE_V1) {
        return Ok(());
    }
    Err(Refusal::PredicateType {
        found: found.unwrap_or("absent").to_owned(),
        expected: SLSA_PROVENANCE_V1,
    })
}

/// The SAN a workflow's certificate carries: `https://github.com/<repo>/<path>@<ref>`.
pub fn github_workflow_identity(repository: &str, workflow_path: &str, reference: &str) -> String {
    format!("https://github.com/{repository}/{workflow_path}@{reference}")
}
