//! The contract over the scripted engine: the fake the lifecycle's tests (and other crates')
//! trust must answer as the real engines do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use verifier_sdk::oci_runtime::RUNC;

use super::{Setup, exercise};
use crate::lifecycle::fake::{Fake, Script};

fn setup(dir: &std::path::Path) -> Setup {
    let mut spec = crate::spec::sample_spec(dir, "linux/amd64");
    spec.request.argv = vec![
        "/bin/busybox".into(),
        "sh".into(),
        "-c".into(),
        "echo conformance; exit 3".into(),
    ];
    Setup {
        spec,
        oci_runtime: RUNC.into(),
        stdout: b"conformance\n".to_vec(),
        exit_code: 3,
        executable: "/bin/busybox".into(),
        absent_image: format!(
            "127.0.0.1:5000/conformance-absent@sha256:{}",
            "0".repeat(64)
        ),
        label: "conformance.fake=1".into(),
    }
}

#[tokio::test]
async fn the_scripted_engine_keeps_the_container_engine_contract() {
    let dir = tempfile::tempdir().unwrap();
    let setup = setup(dir.path());
    let fake = Fake::new(Script {
        stdout: setup.stdout.clone(),
        exit_code: setup.exit_code,
        held_images: Some(vec![setup.spec.image.clone()]),
        files: Some(vec![setup.executable.clone()]),
        ..Script::default()
    });
    let checked = exercise(&fake, &setup).await;
    assert!(checked.is_ok(), "{checked:?}");
}

/// Each way the scripted engine can misbehave breaks the clause that names it: the suite can
/// fail, and fails where the engine broke its word.
#[tokio::test]
async fn each_scripted_misbehaviour_breaks_the_clause_it_violates() {
    let dir = tempfile::tempdir().unwrap();
    let setup = setup(dir.path());
    let honest = Script {
        stdout: setup.stdout.clone(),
        exit_code: setup.exit_code,
        held_images: Some(vec![setup.spec.image.clone()]),
        files: Some(vec![setup.executable.clone()]),
        ..Script::default()
    };
    let cases: Vec<(Script, &str)> = vec![
        (
            Script {
                held_images: None,
                ..honest.clone()
            },
            "inspect_image of an image the engine does not hold is NotFound",
        ),
        (
            Script {
                runtime_missing: true,
                ..honest.clone()
            },
            "oci_runtime describes a runtime the engine offers, with its facts",
        ),
        (
            Script {
                read_back: Some(|p| p.network_mode = "bridge".into()),
                ..honest.clone()
            },
            "inspect_container of a created container reads back the requested profile, not \
             running, never started",
        ),
        (
            Script {
                files: None,
                ..honest.clone()
            },
            "archive_stat of a path the container does not hold is NotFound",
        ),
        (
            Script {
                create_refused: true,
                ..honest.clone()
            },
            "create_container returns the id of a container the engine knows",
        ),
        (
            Script {
                start_refused: true,
                ..honest.clone()
            },
            "start starts the created container",
        ),
        (
            Script {
                engine_restarts: true,
                ..honest.clone()
            },
            "wait_stopped resolves once it stopped, and again when already stopped",
        ),
        (
            Script {
                oom_killed: true,
                ..honest.clone()
            },
            "inspect_container after the exit gives the program's own exit status",
        ),
        (
            Script {
                removal_answers_not_found: true,
                ..honest.clone()
            },
            "remove is Ok once the engine no longer knows the container",
        ),
        (
            Script {
                removal_unconfirmed: true,
                ..honest.clone()
            },
            "remove is Ok once the engine no longer knows the container",
        ),
    ];
    for (script, clause) in cases {
        let breach = exercise(&Fake::new(script), &setup).await.unwrap_err();
        assert_eq!(breach.clause, clause, "{breach}");
    }
    assert!(exercise(&Fake::new(honest), &setup).await.is_ok());
}
