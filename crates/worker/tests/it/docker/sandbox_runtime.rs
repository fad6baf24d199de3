//! The OCI runtime (issue #28) against the real engine with runsc registered
//! (`scripts/services.sh --runsc`; these tests fail, never skip, without it): a run under runsc
//! passes and fails as under runc and its evidence names runsc, and a runtime the engine does
//! not offer ends without a verdict before any container exists.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use crate::support::{self, DigestHooks, Trees, containers_for, executor_under, spec};
use verifier_sdk::oci_runtime::{check_required, runsc_host_pids_limit};
use worker_sandbox::{Decision, NoVerdictReason};

#[tokio::test]
async fn a_run_under_runsc_passes_and_fails_as_under_runc_and_its_evidence_says_runsc() {
    let executor = executor_under("runsc").await;
    if let Some(why) = executor.oci_runtime().unavailable() {
        panic!("{why}");
    }
    let trees = Trees::new();
    for (code, script) in [(0, "exit 0"), (1, "echo failing >&2; exit 1")] {
        let argv = trees.script(&format!("exit{code}.sh"), script);
        let spec = spec(&format!("runsc-{code}"), &[&argv], &trees);
        let hooks = DigestHooks::new(&trees);
        let report = executor.run(&spec, &hooks).await.unwrap();
        assert_eq!(report.decision, Decision::Completed { exit_code: code });
        assert!(containers_for(&executor, &spec.run_id).await.is_empty());
        let ev = &report.evidence;
        let facts = ev
            .oci_runtime
            .as_ref()
            .expect("engine facts of the runtime");
        assert_eq!(facts.name, "runsc");
        assert!(facts.version.starts_with("runsc version "), "{facts:?}");
        assert!(
            facts.args.iter().any(|a| a == "--network=none"),
            "{facts:?}"
        );
        let isolation = ev.isolation.as_ref().unwrap();
        assert_eq!(isolation.requested.runtime, "runsc");
        assert_eq!(isolation.observed.runtime, "runsc");
        assert!(
            isolation.mismatches.is_empty(),
            "{:?}",
            isolation.mismatches
        );
        // pids_limit as the Sentry's nproc, the host cgroup a backstop, read back as asked.
        let pids = i64::try_from(spec.request.pids_limit).unwrap();
        assert_eq!(isolation.observed.pids_limit, runsc_host_pids_limit(pids));
        assert!(
            isolation
                .observed
                .ulimits
                .iter()
                .any(|u| u.name == "nproc" && u.soft == pids && u.hard == pids),
            "{:?}",
            isolation.observed.ulimits
        );
        check_required(ev, "runsc").unwrap();
        assert!(check_required(ev, "runc").is_err());
    }
}

#[tokio::test]
async fn a_runtime_the_engine_lacks_is_runtime_unavailable_and_no_container_is_left() {
    let executor = executor_under("kata-not-registered").await;
    let trees = Trees::new();
    let spec = spec("no-runtime", &["/bin/true"], &trees);
    let hooks = DigestHooks::new(&trees);
    let report = executor.run(&spec, &hooks).await.unwrap();
    let Decision::NoVerdict { reason, detail } = &report.decision else {
        panic!("a run under an absent runtime got {:?}", report.decision);
    };
    assert_eq!(*reason, NoVerdictReason::RuntimeUnavailable);
    assert!(
        detail.contains("offers no OCI runtime \"kata-not-registered\"")
            && detail.contains("runc")
            && detail.contains("never fall back"),
        "{detail}"
    );
    assert!(report.evidence.container.is_none());
    assert!(report.evidence.oci_runtime.is_none());
    assert!(containers_for(&executor, &spec.run_id).await.is_empty());
    // The runtime asked for is what the tests' own default says too.
    assert!(["runc", "runsc"].contains(&support::oci_runtime().as_str()));
}
