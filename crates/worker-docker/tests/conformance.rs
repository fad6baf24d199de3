//! The Docker Engine held to the `ContainerEngine` contract (`worker_sandbox::conformance`), the
//! same suite the scripted engine passes, under the OCI runtime `WORKER_TEST_OCI_RUNTIME`
//! (`runc` when unset; `.ci/run` runs it again under `runsc`). Needs the daemon and the test
//! images of `scripts/services.sh`; starts one container, serialised with the other Docker
//! tests by `.config/nextest.toml`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use worker_docker::DockerEngine;
use worker_sandbox::conformance::{Setup, exercise};

fn busybox() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.work/images.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "test images are not built ({}: {e}); run scripts/services.sh",
            path.display()
        )
    });
    let images: serde_json::Value = serde_json::from_str(&text).unwrap();
    images["busybox"]
        .as_str()
        .expect("a busybox image in .work/images.json; run scripts/services.sh")
        .to_owned()
}

fn oci_runtime() -> String {
    std::env::var("WORKER_TEST_OCI_RUNTIME")
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "runc".into())
}

#[tokio::test]
async fn the_docker_engine_keeps_the_container_engine_contract() {
    let docker = bollard::Docker::connect_with_defaults()
        .expect("the Docker daemon on DOCKER_HOST or /var/run/docker.sock");
    let engine = DockerEngine(docker);
    let dir = tempfile::tempdir().unwrap();
    // The container runs as a leased sandbox uid, which must reach its working directory.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let run_id = format!("{}-{}", std::process::id(), oci_runtime());
    let mut spec = worker_sandbox::spec::sample_spec(dir.path(), "linux/amd64");
    spec.run_id = run_id.clone();
    spec.image = busybox();
    spec.request.argv = ["/bin/busybox", "sh", "-c", "echo conformance; exit 3"]
        .map(String::from)
        .to_vec();
    let setup = Setup {
        spec,
        oci_runtime: oci_runtime(),
        stdout: b"conformance\n".to_vec(),
        exit_code: 3,
        // busybox's /bin/sh is a symlink to it; the binary itself is the regular file.
        executable: "/bin/busybox".into(),
        absent_image: format!(
            "127.0.0.1:5000/conformance-absent@sha256:{}",
            "0".repeat(64)
        ),
        label: format!("agent-bounties.conformance={run_id}"),
    };
    let checked = exercise(&engine, &setup).await;
    match checked {
        Ok(clauses) => assert_eq!(clauses.len(), 19, "{clauses:#?}"),
        Err(breach) => panic!("under {}: {breach}", setup.oci_runtime),
    }
}
