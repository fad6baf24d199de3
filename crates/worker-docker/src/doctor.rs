//! The engine's answers `worker doctor` examines ([`worker_doctor`] decides what they mean).

use std::collections::BTreeMap;

use bollard::Docker;
use bollard::models::{SystemInfo, SystemInfoCgroupVersionEnum, SystemVersion};
use worker_doctor::{EngineFacts, ImageFacts, RuntimeEntry};

use crate::client::enum_text;

/// `/version` and `/info` of the engine on `DOCKER_HOST` (or the default socket), each
/// registered runtime with the version line of its binary on this host; `Err` with the
/// engine client's error when the engine does not answer.
pub async fn engine_facts() -> Result<EngineFacts, bollard::errors::Error> {
    let docker = Docker::connect_with_defaults()?;
    let (version, info) = tokio::try_join!(docker.version(), docker.info())?;
    let mut facts = answers(&version, &info);
    for (name, entry) in &mut facts.runtimes {
        let resolved =
            crate::runtime::resolve(name, info.runtimes.as_ref(), info.runc_commit.as_ref()).await;
        entry.version = resolved.facts.map(|f| f.version).filter(|v| !v.is_empty());
    }
    Ok(facts)
}

/// The facts in the engine's `/version` and `/info` answers, without the runtimes' versions
/// (reading those runs each binary): the doctor's and, once per process, the evidence's.
pub(crate) fn answers(version: &SystemVersion, info: &SystemInfo) -> EngineFacts {
    let runtimes = info
        .runtimes
        .iter()
        .flatten()
        .map(|(name, entry)| {
            (
                name.clone(),
                RuntimeEntry {
                    path: entry.path.clone().unwrap_or_else(|| name.clone()),
                    args: entry.runtime_args.clone().unwrap_or_default(),
                    version: None,
                },
            )
        })
        .collect::<BTreeMap<_, _>>();
    let cgroup_version = match info.cgroup_version {
        Some(SystemInfoCgroupVersionEnum::EMPTY) | None => String::new(),
        other => enum_text(other),
    };
    EngineFacts {
        version: version.version.clone().unwrap_or_default(),
        api_version: version.api_version.clone().unwrap_or_default(),
        cgroup_version,
        cgroup_driver: enum_text(info.cgroup_driver),
        runtimes,
        default_runtime: info.default_runtime.clone().unwrap_or_default(),
        security_options: info.security_options.clone().unwrap_or_default(),
        swap_limit: info.swap_limit.unwrap_or(false),
    }
}

/// Whether the engine holds an image whose repo digests include `reference`
/// (`name@sha256:…`); a reference without a digest is refused.
pub async fn image_facts(reference: &str) -> ImageFacts {
    let present = async {
        if !reference.contains("@sha256:") {
            return Err("not pinned by digest (name@sha256:…)".to_string());
        }
        let docker = Docker::connect_with_defaults().map_err(|e| e.to_string())?;
        match docker.inspect_image(reference).await {
            Ok(image) => Ok(image
                .repo_digests
                .unwrap_or_default()
                .iter()
                .any(|d| d == reference)),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(false),
            Err(e) => Err(e.to_string()),
        }
    }
    .await;
    ImageFacts {
        reference: reference.to_string(),
        present,
    }
}
