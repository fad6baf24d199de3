//! The image check, a pure step on the engine's inspect answer: present by the pinned digest,
//! on the requested platform, and setting no environment but `PATH` (the engine merges every
//! image variable into the container and none can be removed).

use crate::SandboxSpec;
use crate::decision::{Decision, NoVerdictReason};
use crate::engine::ImageInspected as ImageInspect;
use crate::evidence;

/// What an accepted image contributes to the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ImageFacts {
    /// The image's own `PATH`, used to resolve a bare `argv[0]` and passed to the command.
    pub path: Option<String>,
}

/// The image's `os/arch`, plus `/variant` only when the request names a variant.
fn platform(inspect: &ImageInspect, spec: &SandboxSpec) -> String {
    let platform = format!(
        "{}/{}",
        inspect.os.as_deref().unwrap_or_default(),
        inspect.architecture.as_deref().unwrap_or_default()
    );
    let requested_has_variant = spec.request.platform.split('/').count() > 2;
    match inspect.variant.as_deref().filter(|v| !v.is_empty()) {
        Some(variant) if requested_has_variant => format!("{platform}/{variant}"),
        _ => platform,
    }
}

/// What the evidence records of the inspected image, whether it is accepted or not.
pub(super) fn describe(inspect: &ImageInspect, spec: &SandboxSpec) -> evidence::ImageFacts {
    evidence::ImageFacts {
        reference: spec.image.clone(),
        id: inspect.id.clone().unwrap_or_default(),
        repo_digest: inspect
            .repo_digests
            .iter()
            .flatten()
            .find(|d| **d == spec.image)
            .cloned()
            .unwrap_or_default(),
        platform: platform(inspect, spec),
    }
}

/// Accepts the image for `spec`, or the no-verdict that refuses it.
pub(super) fn check_image(
    inspect: &ImageInspect,
    spec: &SandboxSpec,
) -> Result<ImageFacts, Decision> {
    let repo_digests = inspect.repo_digests.clone().unwrap_or_default();
    if !repo_digests.contains(&spec.image) {
        return Err(Decision::no_verdict(
            NoVerdictReason::ImageMissing,
            format!(
                "local image's repo digests {repo_digests:?} do not include {}",
                spec.image
            ),
        ));
    }
    let platform = platform(inspect, spec);
    if platform != spec.request.platform {
        return Err(Decision::no_verdict(
            NoVerdictReason::ImagePlatformMismatch,
            format!("image platform {platform} is not {}", spec.request.platform),
        ));
    }
    let image_env = inspect.env.as_deref().unwrap_or_default();
    let extra: Vec<&str> = image_env
        .iter()
        .map(|e| e.split_once('=').map_or(e.as_str(), |(k, _)| k))
        .filter(|k| *k != "PATH")
        .collect();
    if !extra.is_empty() {
        return Err(Decision::no_verdict(
            NoVerdictReason::IsolationMismatch,
            format!("image sets environment variables {extra:?} that would reach the command"),
        ));
    }
    Ok(ImageFacts {
        path: image_env
            .iter()
            .find_map(|e| e.strip_prefix("PATH="))
            .map(str::to_string),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference() -> String {
        format!("127.0.0.1:5000/x@sha256:{}", "a".repeat(64))
    }

    fn spec(platform: &str) -> SandboxSpec {
        crate::spec::sample_spec(std::path::Path::new("/s"), platform)
    }

    fn inspect(env: &[&str]) -> ImageInspect {
        ImageInspect {
            id: Some("sha256:id".into()),
            repo_digests: Some(vec!["other@sha256:b".into(), reference()]),
            os: Some("linux".into()),
            architecture: Some("arm".into()),
            variant: Some("v7".into()),
            env: Some(env.iter().map(|e| e.to_string()).collect()),
        }
    }

    fn reason(result: Result<ImageFacts, Decision>) -> NoVerdictReason {
        match result {
            Err(Decision::NoVerdict { reason, .. }) => reason,
            other => panic!("expected a no-verdict, got {other:?}"),
        }
    }

    #[test]
    fn a_pinned_image_on_the_platform_yields_its_path() {
        let image = inspect(&["PATH=/opt/bin:/bin"]);
        let spec = spec("linux/arm/v7");
        assert_eq!(
            check_image(&image, &spec),
            Ok(ImageFacts {
                path: Some("/opt/bin:/bin".into())
            })
        );
        assert_eq!(
            describe(&image, &spec),
            evidence::ImageFacts {
                reference: reference(),
                id: "sha256:id".into(),
                repo_digest: reference(),
                platform: "linux/arm/v7".into(),
            }
        );
        assert_eq!(
            check_image(&inspect(&[]), &spec),
            Ok(ImageFacts { path: None })
        );
    }

    #[test]
    fn an_image_not_holding_the_pinned_digest_is_missing() {
        let mut image = inspect(&[]);
        image.repo_digests = Some(vec!["127.0.0.1:5000/x@sha256:b".into()]);
        assert_eq!(
            reason(check_image(&image, &spec("linux/arm"))),
            NoVerdictReason::ImageMissing
        );
        assert_eq!(describe(&image, &spec("linux/arm")).repo_digest, "");
        image.repo_digests = None;
        assert_eq!(
            reason(check_image(&image, &spec("linux/arm"))),
            NoVerdictReason::ImageMissing
        );
    }

    #[test]
    fn the_variant_counts_only_when_the_request_names_one() {
        let image = inspect(&[]);
        assert!(check_image(&image, &spec("linux/arm")).is_ok());
        assert_eq!(
            reason(check_image(&image, &spec("linux/arm/v6"))),
            NoVerdictReason::ImagePlatformMismatch
        );
        assert_eq!(
            reason(check_image(&image, &spec("linux/amd64"))),
            NoVerdictReason::ImagePlatformMismatch
        );
    }

    #[test]
    fn an_image_setting_more_than_path_cannot_get_the_exact_environment() {
        let image = inspect(&["PATH=/bin", "LD_PRELOAD=/evil.so"]);
        assert_eq!(
            reason(check_image(&image, &spec("linux/arm"))),
            NoVerdictReason::IsolationMismatch
        );
    }
}
