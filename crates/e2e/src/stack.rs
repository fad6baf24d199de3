//! Which bounty a scenario plays: the Python roman-numerals bounty (`fixtures/python-bounty`,
//! the one every other driver uses) or the Rust `hexcolor` bounty (`fixtures/rust-bounty`),
//! which runs the protocol's own example command, `cargo test --locked --target-dir
//! /tmp/target`, under exactly the limits of its example manifest (PROTOCOL §5's vector:
//! 120 s, one CPU, 512 MiB, a 256 MiB tmpfs).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use verifier_sdk::fixtures::sample_manifest;
use verifier_sdk::{Sha256Digest, TreeLimits};

use crate::{E2eConfig, E2eError};

/// The protocol's example command (PROTOCOL §5). It has no `--offline`: the fixture vendors
/// its one dependency (`.cargo/config.toml` replaces crates.io with `vendor/`), so cargo never
/// asks for the network the sandbox does not have. The image cannot set `CARGO_NET_OFFLINE`:
/// the worker refuses an image whose environment would reach the command.
pub const RUST_COMMAND: [&str; 5] = ["cargo", "test", "--locked", "--target-dir", "/tmp/target"];

/// A bounty's fixture, image and runner manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stack {
    /// `fixtures/python-bounty` in the `verifier-python` image.
    Python,
    /// `fixtures/rust-bounty` in the `verifier-rust` image.
    Rust,
}

impl Stack {
    /// Lowercase name; also prefixes a non-Python scenario's work subdirectory.
    pub fn name(self) -> &'static str {
        match self {
            Self::Python => "python",
            Self::Rust => "rust",
        }
    }

    /// The fixture directory (holds `benchmark`, `solution-good`, `solution-bad`).
    pub fn fixtures(self, repo_root: &Path) -> PathBuf {
        repo_root.join(match self {
            Self::Python => "fixtures/python-bounty",
            Self::Rust => "fixtures/rust-bounty",
        })
    }

    /// The name the solver's repository gets in the archive URL.
    pub(crate) fn repo_stem(self) -> &'static str {
        match self {
            Self::Python => "roman",
            Self::Rust => "hexcolor",
        }
    }

    /// The digest-pinned image from `.work/images.json`.
    pub fn image(self, cfg: &E2eConfig) -> Result<&str, E2eError> {
        match self {
            Self::Python => Ok(&cfg.python_image),
            Self::Rust => cfg.rust_image.as_deref().ok_or(E2eError::Setup {
                what: "find the rust image in .work/images.json",
                detail: "no \"rust\" entry; run scripts/services.sh without --no-rust".into(),
            }),
        }
    }

    /// The bound on the fixture trees when digesting them: what the manifest allows.
    pub(crate) fn tree_limits(self) -> Result<TreeLimits, E2eError> {
        let (bytes, files) = match self {
            Self::Python => (1 << 20, 100),
            Self::Rust => (512 << 20, 50_000),
        };
        TreeLimits::new(bytes, files).map_err(|e| E2eError::Setup {
            what: "build tree limits",
            detail: e.to_string(),
        })
    }

    /// The runner manifest for `image` and the benchmark's digest.
    pub fn manifest(self, image: &str, benchmark_digest: Sha256Digest) -> Value {
        match self {
            Self::Python => crate::manifest(image, benchmark_digest),
            Self::Rust => rust_manifest(image, benchmark_digest),
        }
    }
}

/// PROTOCOL §5's example manifest, field for field, with this repository's Rust image.
fn rust_manifest(image: &str, benchmark_digest: Sha256Digest) -> Value {
    let mut m = sample_manifest();
    let fields = [
        ("image", json!(image)),
        ("command", json!(RUST_COMMAND)),
        ("workdir", json!("/workspace")),
        ("benchmark_digest", json!(benchmark_digest.to_string())),
        ("timeout_seconds", json!(120)),
        ("cpu_millis", json!(1000)),
        ("memory_bytes", json!(512u64 << 20)),
        ("pids_limit", json!(128)),
        ("max_output_bytes", json!(1u64 << 20)),
        ("tmpfs_bytes", json!(256u64 << 20)),
        ("max_source_bytes", json!(512u64 << 20)),
        ("max_source_files", json!(50_000)),
        ("max_benchmark_bytes", json!(64u64 << 20)),
        ("max_benchmark_files", json!(10_000)),
        ("platform", json!("linux/amd64")),
        ("test_seed", json!(1)),
    ];
    for (k, v) in fields {
        m[k] = v;
    }
    m
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The Rust manifest is the protocol's own vector but for the image and benchmark digest:
    /// with those set to the vector's values it must hash to the vector's
    /// `runner_manifest_hash`.
    #[test]
    fn rust_manifest_is_the_protocols_example_vector() {
        let digest: Sha256Digest = format!("sha256:{}", "a".repeat(64)).parse().unwrap();
        let image = format!(
            "ghcr.io/agent-bounties/rust-verifier@sha256:{}",
            "b".repeat(64)
        );
        let m = verifier_sdk::RunnerManifest::from_value(&rust_manifest(&image, digest)).unwrap();
        assert_eq!(
            verifier_sdk::runner_manifest_hash(&m).to_string(),
            "sha256:4143e42ceb590751a31719cc251bcbae73af24b4bc7dea4e962246ef047b032f"
        );
    }
}
