//! The spec's own checks, made before the engine is asked anything: a spec that fails them is
//! a no-verdict (`run`) or a refused plan (`plan`), never a container.

use std::path::{Path, PathBuf};
use std::time::Duration;

use verifier_sdk::evidence::RequestFacts;

use super::SandboxSpec;
use super::profile::Limits;

/// Why a [`SandboxSpec`] cannot be run as given.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// `argv` is empty or its first word is.
    #[error("argv is empty")]
    EmptyArgv,
    /// The image is not `name@sha256:<64 lowercase hex>`.
    #[error("image {0} is not pinned by sha256 digest")]
    NotPinned(String),
    /// A limit is zero or does not fit the engine's signed 64-bit field.
    #[error("{name} {value} is out of range")]
    OutOfRange {
        /// The spec field.
        name: &'static str,
        /// Its value.
        value: u64,
    },
    /// `cpu_millis` fits but its nano-CPU form does not.
    #[error("cpu_millis is out of range")]
    CpuOverflow,
    /// A zero timeout would kill every run at once.
    #[error("timeout is zero")]
    ZeroTimeout,
    /// A staged tree cannot be resolved to a canonical path.
    #[error("{what} directory {} is unusable: {source}", path.display())]
    Unusable {
        /// `source` or `benchmark`.
        what: &'static str,
        /// The path as given.
        path: PathBuf,
        /// Why it could not be resolved.
        source: std::io::Error,
    },
    /// A staged tree resolves to something other than a directory.
    #[error("{what} path {} is not a directory", path.display())]
    NotADirectory {
        /// `source` or `benchmark`.
        what: &'static str,
        /// The canonical path.
        path: PathBuf,
    },
    /// The engine takes mount sources as strings.
    #[error("{what} path {} is not UTF-8", path.display())]
    NotUtf8 {
        /// `source` or `benchmark`.
        what: &'static str,
        /// The canonical path.
        path: PathBuf,
    },
}

/// A spec that passed [`validate`]: the engine's limits and the canonical mount sources.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Validated {
    pub limits: Limits,
    pub source: String,
    pub benchmark: String,
}

/// A pinned reference is one the sdk accepts in a manifest
/// ([`verifier_sdk::manifest::validate_image`]: `name@sha256:<64 lowercase hex>`, the name in
/// the registry's characters): one rule, so a spec built by hand is held to what a job's is.
pub fn is_pinned(reference: &str) -> bool {
    verifier_sdk::manifest::validate_image(reference).is_ok()
}

fn positive(name: &'static str, value: u64) -> Result<i64, SpecError> {
    i64::try_from(value)
        .ok()
        .filter(|v| *v > 0)
        .ok_or(SpecError::OutOfRange { name, value })
}

/// The spec's numbers in the engine's types; the one conversion both `plan` and `run` use, so
/// what `worker plan` shows is what a run asks for.
pub fn limits(spec: &SandboxSpec) -> Result<Limits, SpecError> {
    let request = &spec.request;
    Ok(Limits {
        nano_cpus: positive("cpu_millis", request.cpu_millis)?
            .checked_mul(1_000_000)
            .ok_or(SpecError::CpuOverflow)?,
        memory: positive("memory_bytes", request.memory_bytes)?,
        pids: positive("pids_limit", request.pids_limit)?,
    })
}

fn canonical(what: &'static str, dir: &Path) -> Result<String, SpecError> {
    let path = dir.canonicalize().map_err(|source| SpecError::Unusable {
        what,
        path: dir.to_path_buf(),
        source,
    })?;
    if !path.is_dir() {
        return Err(SpecError::NotADirectory { what, path });
    }
    match path.to_str() {
        Some(s) => Ok(s.to_string()),
        None => Err(SpecError::NotUtf8 { what, path }),
    }
}

/// Checks everything about the spec that needs no engine, in a fixed order.
pub fn validate(spec: &SandboxSpec) -> Result<Validated, SpecError> {
    if spec.request.argv.first().is_none_or(|a| a.is_empty()) {
        return Err(SpecError::EmptyArgv);
    }
    if !is_pinned(&spec.image) {
        return Err(SpecError::NotPinned(spec.image.clone()));
    }
    let limits = limits(spec)?;
    positive("tmpfs_bytes", spec.request.tmpfs_bytes)?;
    if spec.request.timeout_ms == 0 {
        return Err(SpecError::ZeroTimeout);
    }
    Ok(Validated {
        limits,
        source: canonical("source", &spec.source_dir)?,
        benchmark: canonical("benchmark", &spec.benchmark_dir)?,
    })
}

impl SandboxSpec {
    /// The spec of a run of `image` that asks for exactly `request`: for a job, the command,
    /// platform and limits as the sdk records them for its manifest
    /// (`RequestFacts::for_manifest`, which the signer's re-check expects in the evidence).
    pub fn for_request(
        run_id: String,
        image: String,
        request: RequestFacts,
        (source_dir, benchmark_dir): (PathBuf, PathBuf),
        pull: bool,
    ) -> Self {
        Self {
            run_id,
            image,
            request,
            source_dir,
            benchmark_dir,
            pull,
        }
    }

    /// The wall-clock limit, measured from container start.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.request.timeout_ms)
    }
}

/// A valid spec for unit tests: a pinned image on `platform`, both trees at `dir`.
#[doc(hidden)]
pub fn sample_spec(dir: &Path, platform: &str) -> SandboxSpec {
    SandboxSpec {
        run_id: "r".into(),
        image: format!("127.0.0.1:5000/x@sha256:{}", "a".repeat(64)),
        request: RequestFacts {
            argv: vec!["true".into()],
            platform: platform.into(),
            timeout_ms: 1_000,
            cpu_millis: 500,
            memory_bytes: 1 << 26,
            pids_limit: 64,
            max_output_bytes: 1024,
            tmpfs_bytes: 1 << 20,
            test_seed: 1,
        },
        source_dir: dir.to_path_buf(),
        benchmark_dir: dir.to_path_buf(),
        pull: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(dir: &Path) -> SandboxSpec {
        sample_spec(dir, "linux/amd64")
    }

    #[test]
    fn only_full_sha256_pins_are_accepted() {
        let hex = "a".repeat(64);
        assert!(is_pinned(&format!("127.0.0.1:5000/x@sha256:{hex}")));
        assert!(!is_pinned("busybox:latest"));
        assert!(!is_pinned(&format!("@sha256:{hex}")));
        assert!(!is_pinned(&format!("x@sha256:{}", "A".repeat(64))));
        assert!(!is_pinned(&format!("x@sha256:{}", "a".repeat(63))));
    }

    /// The spec's pin rule is the manifest's: a reference no manifest may carry (a name
    /// outside the registry's characters, two `@`) is not pinned for a spec built by hand
    /// either.
    #[test]
    fn a_reference_no_manifest_may_carry_is_not_pinned() {
        let hex = "a".repeat(64);
        for image in [
            format!("Registry/X@sha256:{hex}"),
            format!("x@y@sha256:{hex}"),
            format!("-x@sha256:{hex}"),
        ] {
            assert!(!is_pinned(&image), "{image}");
            assert!(verifier_sdk::manifest::validate_image(&image).is_err());
        }
    }

    #[test]
    fn limits_refuse_zero_and_values_the_engine_cannot_hold() {
        let dir = std::env::temp_dir();
        let mut s = spec(&dir);
        assert_eq!(limits(&s).unwrap().nano_cpus, 500_000_000);
        s.request.memory_bytes = 0;
        assert_eq!(
            limits(&s).unwrap_err().to_string(),
            "memory_bytes 0 is out of range"
        );
        s.request.memory_bytes = u64::MAX;
        assert!(matches!(
            limits(&s),
            Err(SpecError::OutOfRange {
                name: "memory_bytes",
                ..
            })
        ));
        s = spec(&dir);
        s.request.cpu_millis = u64::try_from(i64::MAX).unwrap();
        assert_eq!(
            limits(&s).unwrap_err().to_string(),
            "cpu_millis is out of range"
        );
    }

    #[test]
    fn validate_checks_argv_pin_tmpfs_timeout_and_trees() {
        let dir = tempfile::tempdir().unwrap();
        let ok = spec(dir.path());
        let v = validate(&ok).unwrap();
        assert_eq!(v.limits, limits(&ok).unwrap());
        assert_eq!(
            v.source,
            dir.path().canonicalize().unwrap().to_str().unwrap()
        );

        let mut s = ok.clone();
        s.request.argv = vec![String::new()];
        assert!(matches!(validate(&s), Err(SpecError::EmptyArgv)));
        let mut s = ok.clone();
        s.image = "busybox:latest".into();
        assert!(matches!(validate(&s), Err(SpecError::NotPinned(_))));
        let mut s = ok.clone();
        s.request.tmpfs_bytes = 0;
        assert!(matches!(
            validate(&s),
            Err(SpecError::OutOfRange {
                name: "tmpfs_bytes",
                ..
            })
        ));
        let mut s = ok.clone();
        s.request.timeout_ms = 0;
        assert!(matches!(validate(&s), Err(SpecError::ZeroTimeout)));
        let mut s = ok.clone();
        s.benchmark_dir = dir.path().join("missing");
        assert!(matches!(
            validate(&s),
            Err(SpecError::Unusable {
                what: "benchmark",
                ..
            })
        ));
        let file = dir.path().join("f");
        std::fs::write(&file, b"").unwrap();
        let mut s = ok;
        s.source_dir = file;
        assert!(matches!(
            validate(&s),
            Err(SpecError::NotADirectory { what: "source", .. })
        ));
    }
}
