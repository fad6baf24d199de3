//! `verify-provenance`: whether a release binary's Sigstore bundle vouches for it, offline,
//! against the trusted root pinned in the repository (issue #49 item 3). Used by
//! `.github/scripts/fetch-binaries.sh` and `deploy/install.sh` before a binary is installed.

mod exit;

use std::path::PathBuf;
use std::process::ExitCode as ProcessExit;

use clap::Parser;
use exit::ExitCode;
use provenance::{Expected, GITHUB_ACTIONS_ISSUER};

/// Verify a release binary's Sigstore provenance bundle offline against a pinned trusted root.
///
/// Exit status: 0 verified, 4 refused (never install or run the artifact), 2 usage, 78 the
/// trusted root is unusable.
#[derive(Debug, Parser)]
#[command(name = "verify-provenance", version)]
struct Args {
    /// The pinned Sigstore trusted root (deploy/sigstore/trusted_root.json); nothing else is
    /// trusted and nothing is fetched.
    #[arg(long, value_name = "FILE")]
    trusted_root: PathBuf,
    /// The Sigstore bundle (JSON) of the build's provenance attestation.
    #[arg(long, value_name = "FILE")]
    bundle: PathBuf,
    /// The artifact whose sha256 must be a subject of the attestation.
    #[arg(long, value_name = "FILE")]
    artifact: PathBuf,
    /// The certificate's expected SAN: the signing workflow and its ref,
    /// https://github.com/OWNER/REPO/.github/workflows/FILE@REF.
    #[arg(long, value_name = "URI")]
    identity: String,
    /// The certificate's expected OIDC issuer.
    #[arg(long, value_name = "URL", default_value = GITHUB_ACTIONS_ISSUER)]
    issuer: String,
    /// The commit the binary must have been built from (40 hex).
    #[arg(long, value_name = "COMMIT")]
    source_digest: Option<String>,
    /// The ref the binary must have been built from, e.g. refs/heads/main.
    #[arg(long, value_name = "REF")]
    source_ref: Option<String>,
    /// Accept a build on a self-hosted runner.
    #[arg(long)]
    allow_self_hosted: bool,
}

fn main() -> ProcessExit {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) => {
            let _ = e.print();
            let code = if e.use_stderr() {
                ExitCode::Usage
            } else {
                ExitCode::Success
            };
            return ProcessExit::from(code.code());
        }
    };
    ProcessExit::from(run(&args).code())
}

fn run(args: &Args) -> ExitCode {
    let root = match provenance::load_trusted_root(&args.trusted_root) {
        Ok(root) => root,
        Err(e) => {
            eprintln!("verify-provenance: {e}");
            return ExitCode::Config;
        }
    };
    let expected = Expected {
        identity: args.identity.clone(),
        issuer: args.issuer.clone(),
        source_digest: args.source_digest.clone(),
        source_ref: args.source_ref.clone(),
        allow_self_hosted: args.allow_self_hosted,
    };
    let outcome = provenance::load_bundle(&args.bundle).and_then(|bundle| {
        let artifact = provenance::load_artifact(&args.artifact)?;
        provenance::verify(&root, &bundle, &artifact, &expected)
    });
    match outcome {
        Ok(verified) => {
            println!(
                "verified: {} sha256 {} built by {}{}",
                args.artifact.display(),
                verified.sha256,
                verified.identity,
                verified
                    .source_digest
                    .map(|d| format!(" at {d}"))
                    .unwrap_or_default()
            );
            ExitCode::Success
        }
        Err(refusal) => {
            eprintln!(
                "verify-provenance: refused {}: {refusal}",
                args.artifact.display()
            );
            ExitCode::InvalidInput
        }
    }
}
